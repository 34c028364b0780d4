//! EventHeader event data and tracepoint names → the EventHeader JSON line: never
//! panics, both write paths (`write_prepared`, with its compiled-plan cache, and
//! `write_record`) give the same bytes, exactly one line that parses as one JSON object,
//! and writing the same event again (now from a warm plan cache) gives the same line.
//!
//! Input: `tracepoint name NUL event data` (the layout of the records in the shared
//! corpus's `EventHeaderInterceptorLE64.dat` after their size word, so those records are
//! the seeds: `seed-corpus.sh`); without a NUL the name is `P_L4K1` and every byte is
//! event data.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use uevrec_parsers::eventheader::tracepoint_format;
use uevrec_parsers::{LineOptions, LineWriter, PreparedFormat, RecordMeta, RecordStamp};

fuzz_target!(|input: &[u8]| {
    let (name, data) = match input.iter().position(|&b| b == 0) {
        Some(nul) => (
            String::from_utf8_lossy(&input[..nul]).into_owned(),
            &input[nul + 1..],
        ),
        None => ("P_L4K1".to_string(), input),
    };
    let name = name.as_str();
    let format = tracepoint_format(name, 1);
    let mut raw = vec![0u8; 8];
    raw.extend_from_slice(data);
    let mut writer = LineWriter::new(LineOptions::default());
    let prepared = PreparedFormat::new(&format, "user_events", name, None);
    let stamp = RecordStamp {
        time_unix_ns: Some(1),
        cpu: 0,
        pid: 1,
        tid: 1,
    };
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
    let mut again = Vec::new();
    writer.write_prepared(&mut again, &stamp, &prepared, &raw);
    assert_eq!(again, a, "a warm plan cache changed the line");
    assert_eq!(a.iter().filter(|&&c| c == b'\n').count(), 1);
    assert_eq!(a.last(), Some(&b'\n'));
    let value: Value = serde_json::from_slice(&a).expect("valid JSON");
    assert!(value.is_object());
});
