//! A schema (format text through `parse_format`, or a directly built `EventFormat`) and
//! arbitrary record bytes → `LineWriter::write_record`:
//! - exactly one valid JSON object line with exactly one trailing `\n`, appended to the
//!   buffer, keys in schema order, metadata echoed exactly, `time` as chrono formats it;
//! - a field in `errors` is `null` in `fields`;
//! - integer fields inside the record read back as the bytes say (LE or BE), integer
//!   fields past its end are `null` with an error;
//! - the same call on the same writer gives the same bytes (caches are transparent);
//! - the recorder's own path, `write_prepared` with a `PreparedFormat`, writes exactly the
//!   bytes of `write_record`.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};
use uevrec_parsers::{Field, FieldKind};
use uevrec_parsers::{LineOptions, LineWriter, PreparedFormat, RecordMeta, RecordStamp};
use uevrec_parsers_fuzz::json::{check_time, one_object_line};
use uevrec_parsers_fuzz::schema_input::SchemaInput;

#[derive(Debug, Arbitrary)]
struct Input {
    schema: SchemaInput,
    time: Option<u64>,
    cpu: u32,
    pid: u32,
    tid: u32,
    system: String,
    event: String,
    format_id: Option<String>,
    include_common: bool,
    big_endian: bool,
    prefix: Vec<u8>,
    raw: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let Some(format) = input.schema.format() else {
        return;
    };
    let meta = RecordMeta {
        time_unix_ns: input.time,
        cpu: input.cpu,
        pid: input.pid,
        tid: input.tid,
        system: &input.system,
        event: &input.event,
        format_id: input.format_id.as_deref(),
    };
    let mut writer = LineWriter::new(LineOptions {
        include_common: input.include_common,
        endian: uevrec_parsers::Endian::from_big(input.big_endian),
    });
    let mut out = input.prefix.clone();
    writer.write_record(&mut out, &meta, &format, &input.raw);
    assert!(out.starts_with(&input.prefix), "the buffer's bytes changed");
    let line = out[input.prefix.len()..].to_vec();
    let map = one_object_line(&line);

    let mut again = Vec::new();
    writer.write_record(&mut again, &meta, &format, &input.raw);
    assert_eq!(again, line, "same record, same writer, different line");

    let prepared = PreparedFormat::new(
        &format,
        &input.system,
        &input.event,
        input.format_id.as_deref(),
    );
    let stamp = RecordStamp {
        time_unix_ns: input.time,
        cpu: input.cpu,
        pid: input.pid,
        tid: input.tid,
    };
    let mut fast = Vec::new();
    writer.write_prepared(&mut fast, &stamp, &prepared, &input.raw);
    assert_eq!(fast, line, "write_prepared and write_record differ");
    if prepared.eventheader().is_some() {
        // An EventHeader event (the eventheader fuzz target checks those lines).
        return;
    }

    let mut expected_keys = vec!["time", "system", "event"];
    if input.format_id.is_some() {
        expected_keys.push("format_id");
    }
    expected_keys.extend(["cpu", "pid", "tid"]);
    if input.include_common {
        expected_keys.push("common");
    }
    expected_keys.push("fields");
    if map.contains_key("errors") {
        expected_keys.push("errors");
    }
    let keys: Vec<&str> = map.keys().map(String::as_str).collect();
    assert_eq!(keys, expected_keys);

    check_time(map.get("time"), input.time);
    assert_eq!(map["system"], input.system.as_str());
    assert_eq!(map["event"], input.event.as_str());
    if let Some(id) = &input.format_id {
        assert_eq!(map["format_id"], id.as_str());
    }
    assert_eq!(map["cpu"], Value::from(input.cpu));
    assert_eq!(map["pid"], Value::from(input.pid));
    assert_eq!(map["tid"], Value::from(input.tid));

    let errors = match map.get("errors") {
        None => Map::new(),
        Some(Value::Object(errors)) => {
            assert!(!errors.is_empty(), "an empty errors object");
            for (name, message) in errors {
                assert!(
                    message.as_str().is_some_and(|m| !m.is_empty()),
                    "error for {name} is not a message: {message}"
                );
            }
            errors.clone()
        }
        Some(other) => panic!("errors is not an object: {other}"),
    };
    let Value::Object(fields) = &map["fields"] else {
        panic!("fields is not an object");
    };
    // Values can be matched to fields only when the decoded names are unique.
    let decoded = format
        .fields
        .iter()
        .chain(format.common_fields.iter().filter(|_| input.include_common));
    let mut names: Vec<&str> = decoded.map(|f| f.name.as_str()).collect();
    let count = names.len();
    names.sort_unstable();
    names.dedup();
    if names.len() != count {
        return;
    }
    check_values(
        fields,
        &format.fields,
        &errors,
        &input.raw,
        input.big_endian,
    );
    if input.include_common {
        let Value::Object(common) = &map["common"] else {
            panic!("common is not an object");
        };
        check_values(
            common,
            &format.common_fields,
            &errors,
            &input.raw,
            input.big_endian,
        );
    }
});

/// Check `values` against the schema `fields` (names known to be unique).
fn check_values(
    values: &Map<String, Value>,
    fields: &[Field],
    errors: &Map<String, Value>,
    raw: &[u8],
    big_endian: bool,
) {
    assert_eq!(values.len(), fields.len(), "one value per field");
    for field in fields {
        let value = values
            .get(&field.name)
            .unwrap_or_else(|| panic!("no value for field {:?}", field.name));
        if errors.contains_key(&field.name) {
            assert!(value.is_null(), "{:?} has an error and a value", field.name);
        }
        let FieldKind::Integer { size, signed } = field.kind else {
            continue;
        };
        let start = field.offset as usize;
        let Some(bytes) = raw.get(start..start.saturating_add(usize::from(size))) else {
            assert!(
                value.is_null() && errors.contains_key(&field.name),
                "integer {:?} past the record end: {value}",
                field.name
            );
            continue;
        };
        assert_eq!(
            value,
            &integer(bytes, signed, big_endian),
            "field {:?}",
            field.name
        );
    }
}

/// The integer in `bytes` (1, 2, 4 or 8 of them).
fn integer(bytes: &[u8], signed: bool, big_endian: bool) -> Value {
    let mut buf = [0u8; 8];
    let n = bytes.len();
    let unsigned = if big_endian {
        buf[8 - n..].copy_from_slice(bytes);
        u64::from_be_bytes(buf)
    } else {
        buf[..n].copy_from_slice(bytes);
        u64::from_le_bytes(buf)
    };
    if signed {
        let shift = 64 - 8 * n as u32;
        Value::from(((unsigned << shift) as i64) >> shift)
    } else {
        Value::from(unsigned)
    }
}
