//! Arbitrary EventHeader event data and tracepoint names → the EventHeader JSON line:
//! never panics, both write paths give the same bytes, exactly one line that parses as
//! one JSON object.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use uevrec_parsers::field_type::resolve_field;
use uevrec_parsers::json_line::{LineOptions, LineWriter, PreparedFormat, RecordMeta, RecordStamp};
use uevrec_parsers::schema::EventFormat;

#[derive(Debug, Arbitrary)]
struct Input {
    /// Use a fixed valid name instead of `name`.
    fixed_name: bool,
    name: String,
    /// Force the usual header (flags 7, level 4) in front of `data`.
    header: bool,
    data: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let name = if input.fixed_name { "P_L4K1" } else { input.name.as_str() };
    let line =
        |decl: &str, offset, size, signed| resolve_field(decl, offset, size, Some(signed)).unwrap();
    let format = EventFormat {
        name: name.into(),
        id: 1,
        common_fields: vec![line("unsigned short common_type", 0, 2, false)],
        fields: vec![line("u8 eventheader_flags", 8, 1, false)],
        print_fmt: String::new(),
    };
    let mut raw = vec![0u8; 8];
    if input.header {
        raw.extend_from_slice(&[7, 0, 0, 0, 0, 0, 0, 4]);
    }
    raw.extend_from_slice(&input.data);
    let mut writer = LineWriter::new(LineOptions::default());
    let prepared = PreparedFormat::new(&format, "user_events", name, None);
    let stamp = RecordStamp { time_unix_ns: Some(1), cpu: 0, pid: 1, tid: 1 };
    let mut a = Vec::new();
    writer.write_prepared(&mut a, &stamp, &prepared, &raw);
    let meta = RecordMeta {
        time_unix_ns: Some(1),
        cpu: 0,
        pid: 1,
        tid: 1,
        system: "user_events",
        event: name,
        format_id: None,
    };
    let mut b = Vec::new();
    writer.write_record(&mut b, &meta, &format, &raw);
    assert_eq!(a, b);
    assert_eq!(a.iter().filter(|&&c| c == b'\n').count(), 1);
    assert_eq!(a.last(), Some(&b'\n'));
    let value: Value = serde_json::from_slice(&a).expect("valid JSON");
    assert!(value.is_object());
});
