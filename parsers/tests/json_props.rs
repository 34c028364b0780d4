//! Property tests: arbitrary formats (any field kind, offset and size, sane or not) and
//! arbitrary record bytes (truncated, oversized, locations in and out of bounds) never
//! panic and always give exactly one valid JSON line whose values round-trip to what
//! `decode_field` decoded. Same for notice and lost lines.

use std::collections::HashSet;

use proptest::prelude::*;
use serde_json::Value as Json;
use uevrec_parsers::{Element, EventFormat, Field, FieldKind, LocKind};
use uevrec_parsers::{Endian, Value, decode_field};
use uevrec_parsers::{LineOptions, LineWriter, PreparedFormat, RecordMeta, RecordStamp};

fn width() -> impl Strategy<Value = u8> {
    prop_oneof![8 => prop::sample::select(vec![1u8, 2, 4, 8]), 1 => any::<u8>()]
}

fn element() -> impl Strategy<Value = Element> {
    prop_oneof![
        Just(Element::Char),
        Just(Element::Byte),
        (width(), any::<bool>()).prop_map(|(size, signed)| Element::Integer { size, signed }),
    ]
}

fn kind() -> impl Strategy<Value = FieldKind> {
    prop_oneof![
        (width(), any::<bool>()).prop_map(|(size, signed)| FieldKind::Integer { size, signed }),
        (element(), 0u32..64).prop_map(|(elem, count)| FieldKind::FixedArray { elem, count }),
        (
            prop_oneof![Just(LocKind::DataLoc), Just(LocKind::RelLoc)],
            element()
        )
            .prop_map(|(loc, elem)| FieldKind::Dynamic { loc, elem }),
        element().prop_map(|elem| FieldKind::RestOfRecord { elem }),
        "[a-z]{0,8}".prop_map(|type_name| FieldKind::Struct { type_name }),
        Just(FieldKind::Unknown),
    ]
}

fn field() -> impl Strategy<Value = Field> {
    let offset = prop_oneof![8 => 0u32..96, 1 => any::<u32>()];
    let size = prop_oneof![4 => prop::sample::select(vec![0u32, 1, 2, 4, 8]), 4 => 0u32..80, 1 => any::<u32>()];
    (any::<String>(), kind(), offset, size, any::<Option<bool>>()).prop_map(
        |(name, kind, offset, size, signed)| {
            // Sizes that match the kind most of the time, so the decoders run, not only the
            // error paths.
            let size = match kind {
                FieldKind::Integer { size: w, .. } if size % 3 != 0 => u32::from(w),
                FieldKind::Dynamic { .. } if size % 5 != 0 => 4,
                FieldKind::RestOfRecord { .. } if size % 2 == 0 => 0,
                _ => size,
            };
            Field {
                name,
                type_text: String::new(),
                offset,
                size,
                signed,
                kind,
            }
        },
    )
}

fn event_format() -> impl Strategy<Value = EventFormat> {
    (
        prop::collection::vec(field(), 0..4),
        prop::collection::vec(field(), 0..10),
    )
        .prop_map(|(common_fields, fields)| EventFormat {
            name: "p".into(),
            id: 1,
            common_fields,
            fields,
            print_fmt: String::new(),
        })
}

/// Record bytes; then each 4-byte dynamic location in range gets a value from `locs`
/// reduced modulo the record length, so in-bounds and out-of-bounds locations both occur.
fn record_for(format: &EventFormat, mut raw: Vec<u8>, locs: &[(u16, u16)]) -> Vec<u8> {
    let len = raw.len();
    for (field, &(off, n)) in format.fields.iter().zip(locs.iter().cycle()) {
        if let FieldKind::Dynamic { .. } = field.kind {
            let start = field.offset as usize;
            if field.size == 4 && start + 4 <= len {
                let value = (u32::from(n % 80) << 16) | (u32::from(off) % (len as u32 + 8));
                raw[start..start + 4].copy_from_slice(&value.to_le_bytes());
            }
        }
    }
    raw
}

/// Parse one output line, checking the line invariants.
fn parse_line(out: &[u8]) -> Json {
    assert_eq!(out.last(), Some(&b'\n'), "line must end with a newline");
    assert_eq!(
        out.iter().filter(|&&b| b == b'\n').count(),
        1,
        "exactly one newline"
    );
    serde_json::from_slice(out)
        .unwrap_or_else(|e| panic!("invalid JSON ({e}): {}", String::from_utf8_lossy(out)))
}

/// The JSON a decoded value must become.
fn expected_json(value: &Value<'_>) -> Json {
    match *value {
        Value::Signed(v) => Json::from(v),
        Value::Unsigned(v) => Json::from(v),
        Value::Str(bytes) => Json::from(String::from_utf8_lossy(bytes).into_owned()),
        Value::Bytes(bytes) => {
            Json::from(bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
        }
        Value::IntArray(a) => Json::Array(a.iter().map(|v| expected_json(&v)).collect()),
        Value::Error(_) => Json::Null,
    }
}

fn unique_names(format: &EventFormat) -> bool {
    let mut seen = HashSet::new();
    format
        .common_fields
        .iter()
        .chain(&format.fields)
        .all(|f| seen.insert(f.name.as_str()))
}

/// Check a record line against the decoder, field by field.
fn check_record(format: &EventFormat, raw: &[u8], opts: LineOptions, meta: &RecordMeta<'_>) {
    let mut out = Vec::new();
    LineWriter::new(opts).write_record(&mut out, meta, format, raw);
    let json = parse_line(&out);
    let endian = opts.endian;
    assert_eq!(json["system"], Json::from(meta.system));
    assert_eq!(json["event"], Json::from(meta.event));
    if !unique_names(format) {
        return; // duplicate keys collapse in a parsed object; validity was checked above
    }
    let mut groups = vec![("fields", &format.fields)];
    if opts.include_common {
        groups.push(("common", &format.common_fields));
    }
    let mut failed = 0;
    for (key, fields) in groups {
        let object = json[key].as_object().expect("an object of fields");
        assert_eq!(object.len(), fields.len());
        for field in fields {
            let value = decode_field(field, raw, endian);
            assert_eq!(
                object[&field.name],
                expected_json(&value),
                "field {:?} = {value:?}",
                field.name
            );
            if let Value::Error(e) = value {
                failed += 1;
                assert_eq!(json["errors"][&field.name], Json::from(e.to_string()));
            }
        }
    }
    match json.get("errors") {
        Some(errors) => assert_eq!(errors.as_object().map(|o| o.len()), Some(failed)),
        None => assert_eq!(failed, 0),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_records_give_one_valid_line(
        format in event_format(),
        raw in prop::collection::vec(any::<u8>(), 0..300),
        locs in prop::collection::vec((any::<u16>(), any::<u16>()), 1..4),
        include_common in any::<bool>(),
        endian in any::<bool>(),
        time in any::<Option<u64>>(),
        format_id in any::<Option<String>>(),
        system in any::<String>(),
        event in any::<String>(),
    ) {
        let raw = record_for(&format, raw, &locs);
        let meta = RecordMeta {
            time_unix_ns: time,
            cpu: 3,
            pid: 1,
            tid: 2,
            system: &system,
            event: &event,
            format_id: format_id.as_deref(),
        };
        check_record(&format, &raw, LineOptions { include_common, endian: Endian::from_big(endian) }, &meta);
    }

    /// The prepared path has its own per-field code: it must write the same bytes as
    /// `write_record` for any format and record, with one writer reused across records
    /// (the time cache) and across options.
    #[test]
    fn prepared_lines_equal_record_lines(
        format in event_format(),
        raws in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 1..4),
        locs in prop::collection::vec((any::<u16>(), any::<u16>()), 1..4),
        include_common in any::<bool>(),
        endian in any::<bool>(),
        times in prop::collection::vec(any::<Option<u64>>(), 1..4),
        format_id in any::<Option<String>>(),
        system in any::<String>(),
        event in any::<String>(),
        cpu in any::<u32>(),
        pid in any::<u32>(),
        tid in any::<u32>(),
    ) {
        let opts = LineOptions { include_common, endian: Endian::from_big(endian) };
        let prepared = PreparedFormat::new(&format, &system, &event, format_id.as_deref());
        let (mut by_record, mut by_prepared) = (LineWriter::new(opts), LineWriter::new(opts));
        for (raw, time) in raws.into_iter().zip(times.iter().cycle()) {
            let raw = record_for(&format, raw, &locs);
            let meta = RecordMeta {
                time_unix_ns: *time,
                cpu,
                pid,
                tid,
                system: &system,
                event: &event,
                format_id: format_id.as_deref(),
            };
            let stamp = RecordStamp { time_unix_ns: *time, cpu, pid, tid };
            let (mut a, mut b) = (Vec::new(), Vec::new());
            by_record.write_record(&mut a, &meta, &format, &raw);
            by_prepared.write_prepared(&mut b, &stamp, &prepared, &raw);
            prop_assert_eq!(String::from_utf8_lossy(&a), String::from_utf8_lossy(&b));
        }
    }

    #[test]
    fn notice_lines_round_trip(
        what in any::<String>(),
        event in any::<Option<String>>(),
        message in any::<String>(),
        time in any::<Option<u64>>(),
    ) {
        let mut out = Vec::new();
        LineWriter::default().write_notice(&mut out, time, &what, event.as_deref(), &message);
        let json = parse_line(&out);
        prop_assert_eq!(&json["uevrec"], "notice");
        prop_assert_eq!(&json["what"], &Json::from(what));
        let event = event.map(Json::from);
        prop_assert_eq!(json.get("event"), event.as_ref());
        prop_assert_eq!(&json["message"], &Json::from(message));
    }

    #[test]
    fn lost_lines_and_times_round_trip(time in any::<Option<u64>>(), cpu in any::<u32>(), lost in any::<u64>()) {
        let mut out = Vec::new();
        LineWriter::default().write_lost(&mut out, time, cpu, lost);
        let json = parse_line(&out);
        prop_assert_eq!(&json["cpu"], &Json::from(cpu));
        prop_assert_eq!(&json["lost"], &Json::from(lost));
        match time {
            None => prop_assert!(json["time"].is_null()),
            Some(ns) => {
                let text = json["time"].as_str().expect("time is a string");
                prop_assert_eq!(text.len(), 30, "{}", text);
                let parsed = humantime::parse_rfc3339(text).expect("RFC 3339");
                let back = parsed.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
                prop_assert_eq!(back, u128::from(ns));
            }
        }
    }
}

proptest! {
    // Big records are slow to generate; fewer cases.
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn oversized_records_give_one_valid_line(
        format in event_format(),
        raw in prop::collection::vec(any::<u8>(), 4000..70000),
    ) {
        let meta = RecordMeta {
            time_unix_ns: Some(0), cpu: 0, pid: 0, tid: 0, system: "s", event: "e", format_id: None,
        };
        check_record(&format, &raw, LineOptions::default(), &meta);
    }
}
