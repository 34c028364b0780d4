//! Checks on the writer's output: one valid JSON object per line, and an independent
//! oracle (chrono) for the `time` value.

use serde_json::{Map, Value};

/// Panics unless `line` is exactly one JSON object followed by exactly one `\n` (no other
/// line break anywhere); returns the object.
pub fn one_object_line(line: &[u8]) -> Map<String, Value> {
    assert!(
        line.ends_with(b"\n"),
        "line does not end with \\n: {:?}",
        String::from_utf8_lossy(line)
    );
    let newlines = line.iter().filter(|&&b| b == b'\n' || b == b'\r').count();
    assert_eq!(
        newlines,
        1,
        "more than one line break: {:?}",
        String::from_utf8_lossy(line)
    );
    match serde_json::from_slice::<Value>(&line[..line.len() - 1]) {
        Ok(Value::Object(map)) => map,
        Ok(other) => panic!("a JSON value that is not an object: {other}"),
        Err(e) => panic!("invalid JSON ({e}): {:?}", String::from_utf8_lossy(line)),
    }
}

/// Panics unless `value` is the `time` for `time_unix_ns`: `null` when unknown, else RFC
/// 3339 UTC with 9 fractional digits and `Z` (as chrono formats it).
pub fn check_time(value: Option<&Value>, time_unix_ns: Option<u64>) {
    let expected = match time_unix_ns {
        None => Value::Null,
        Some(ns) => {
            let secs = i64::try_from(ns / 1_000_000_000).expect("u64 seconds fit i64");
            let nanos = (ns % 1_000_000_000) as u32;
            let t = chrono::DateTime::from_timestamp(secs, nanos).expect("u64 ns is in range");
            Value::String(t.format("%Y-%m-%dT%H:%M:%S%.9fZ").to_string())
        }
    };
    assert_eq!(value, Some(&expected), "time for {time_unix_ns:?} ns");
}
