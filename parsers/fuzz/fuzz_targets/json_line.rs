//! Arbitrary notice / lost inputs → `LineWriter::write_notice` / `write_lost`: each call
//! appends exactly one valid JSON object line (keys in schema order) after whatever the
//! buffer held, and every value reads back exactly.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use uevrec_parsers::{LineOptions, LineWriter};
use uevrec_parsers_fuzz::json::{check_time, one_object_line};

#[derive(Debug, Arbitrary)]
enum Call {
    Lost {
        time: Option<u64>,
        cpu: u32,
        lost: u64,
    },
    Notice {
        time: Option<u64>,
        what: String,
        event: Option<String>,
        message: String,
    },
}

#[derive(Debug, Arbitrary)]
struct Input {
    prefix: Vec<u8>,
    include_common: bool,
    big_endian: bool,
    calls: Vec<Call>,
}

fuzz_target!(|input: Input| {
    let mut writer = LineWriter::new(LineOptions {
        include_common: input.include_common,
        endian: uevrec_parsers::Endian::from_big(input.big_endian),
    });
    for call in &input.calls {
        let mut out = input.prefix.clone();
        match call {
            Call::Lost { time, cpu, lost } => {
                writer.write_lost(&mut out, *time, *cpu, *lost);
                assert!(out.starts_with(&input.prefix), "the buffer's bytes changed");
                let map = one_object_line(&out[input.prefix.len()..]);
                let keys: Vec<&str> = map.keys().map(String::as_str).collect();
                assert_eq!(keys, ["time", "uevrec", "cpu", "lost"]);
                check_time(map.get("time"), *time);
                assert_eq!(map["uevrec"], "lost");
                assert_eq!(map["cpu"], Value::from(*cpu));
                assert_eq!(map["lost"], Value::from(*lost));
            }
            Call::Notice {
                time,
                what,
                event,
                message,
            } => {
                writer.write_notice(&mut out, *time, what, event.as_deref(), message);
                assert!(out.starts_with(&input.prefix), "the buffer's bytes changed");
                let map = one_object_line(&out[input.prefix.len()..]);
                let keys: Vec<&str> = map.keys().map(String::as_str).collect();
                let expected_keys: &[&str] = match (event, map.contains_key("event")) {
                    (Some(_), _) | (None, true) => &["time", "uevrec", "what", "event", "message"],
                    (None, false) => &["time", "uevrec", "what", "message"],
                };
                assert_eq!(keys, expected_keys);
                check_time(map.get("time"), *time);
                assert_eq!(map["uevrec"], "notice");
                assert_eq!(map["what"], what.as_str());
                match event {
                    Some(event) => assert_eq!(map["event"], event.as_str()),
                    None => assert!(map.get("event").is_none_or(Value::is_null)),
                }
                assert_eq!(map["message"], message.as_str());
            }
        }
    }
});
