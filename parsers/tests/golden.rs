//! Golden tests: exact JSON lines for every field kind, error, and in-band line.
//!
//! Formats are built with `field_type::resolve_decl` (the one C-type rule), records by
//! hand, byte by byte, the way the kernel lays them out (common header, fixed fields,
//! dynamic data). Run with `--nocapture` to see every line (docs/json-lines.md quotes
//! them).

use uevrec_parsers::parse_format;
use uevrec_parsers::resolve_field;
use uevrec_parsers::{EventFormat, Field};
use uevrec_parsers::{LineOptions, LineWriter, PreparedFormat, RecordMeta, RecordStamp};

const TIME: u64 = 1_795_345_200_123_456_789; // 2026-11-22T11:00:00.123456789Z
const ID: u16 = 1117;

fn field(decl: &str, offset: u32, size: u32, signed: bool) -> Field {
    resolve_field(decl, offset, size, Some(signed)).expect("test declaration resolves")
}

/// A format with the four usual common fields and `fields` as (decl, offset, size, signed).
fn format(fields: &[(&str, u32, u32, bool)]) -> EventFormat {
    EventFormat {
        name: "test".into(),
        id: u32::from(ID),
        common_fields: vec![
            field("unsigned short common_type", 0, 2, false),
            field("unsigned char common_flags", 2, 1, false),
            field("unsigned char common_preempt_count", 3, 1, false),
            field("int common_pid", 4, 4, true),
        ],
        fields: fields
            .iter()
            .map(|&(d, o, s, sg)| field(d, o, s, sg))
            .collect(),
        print_fmt: String::new(),
    }
}

/// A record: the 8-byte common header (type, flags 0, preempt 0, pid 42) then `body`.
fn record(body: &[u8]) -> Vec<u8> {
    let mut raw = ID.to_le_bytes().to_vec();
    raw.extend_from_slice(&[0, 0]);
    raw.extend_from_slice(&42i32.to_le_bytes());
    raw.extend_from_slice(body);
    raw
}

/// A dynamic location value.
fn loc(len: u32, offset: u32) -> [u8; 4] {
    ((len << 16) | offset).to_le_bytes()
}

fn meta() -> RecordMeta<'static> {
    RecordMeta {
        time_unix_ns: Some(TIME),
        cpu: 1,
        pid: 42,
        tid: 43,
        system: "user_events",
        event: "test",
        format_id: None,
    }
}

/// Check the invariants of one line and return it without its `\n`.
fn checked(out: Vec<u8>) -> String {
    let line = String::from_utf8(out).expect("output is UTF-8");
    println!("{}", line.trim_end());
    assert!(line.ends_with('\n'), "no trailing newline: {line}");
    assert_eq!(line.matches('\n').count(), 1, "extra newline in: {line}");
    serde_json::from_str::<serde_json::Value>(&line).expect("valid JSON");
    line.trim_end_matches('\n').to_string()
}

fn line_with(opts: LineOptions, meta: &RecordMeta<'_>, fmt: &EventFormat, raw: &[u8]) -> String {
    let mut out = Vec::new();
    LineWriter::new(opts).write_record(&mut out, meta, fmt, raw);
    // Every golden line also checks the prepared path: byte for byte the same.
    assert_eq!(
        String::from_utf8_lossy(&prepared_line(opts, meta, fmt, raw)),
        String::from_utf8_lossy(&out),
        "write_prepared differs from write_record"
    );
    checked(out)
}

/// The line from [`LineWriter::write_prepared`].
fn prepared_line(
    opts: LineOptions,
    meta: &RecordMeta<'_>,
    fmt: &EventFormat,
    raw: &[u8],
) -> Vec<u8> {
    let prepared = PreparedFormat::new(fmt, meta.system, meta.event, meta.format_id);
    assert_eq!(prepared.format(), fmt);
    let stamp = RecordStamp {
        time_unix_ns: meta.time_unix_ns,
        cpu: meta.cpu,
        pid: meta.pid,
        tid: meta.tid,
    };
    let mut out = Vec::new();
    LineWriter::new(opts).write_prepared(&mut out, &stamp, &prepared, raw);
    out
}

fn line(fmt: &EventFormat, raw: &[u8]) -> String {
    line_with(LineOptions::default(), &meta(), fmt, raw)
}

/// The line for `fields` (the JSON text of the `fields` object and what follows it).
fn expect(fields: &str) -> String {
    format!(
        r#"{{"time":"2026-11-22T11:00:00.123456789Z","system":"user_events","event":"test","cpu":1,"pid":42,"tid":43,"fields":{fields}}}"#
    )
}

#[test]
fn integers_of_every_width_and_sign() {
    let fmt = format(&[
        ("u8 a", 8, 1, false),
        ("s8 b", 9, 1, true),
        ("u16 c", 10, 2, false),
        ("s16 d", 12, 2, true),
        ("u32 e", 14, 4, false),
        ("s32 f", 18, 4, true),
        ("u64 g", 22, 8, false),
        ("s64 h", 30, 8, true),
        ("int i", 38, 4, true),
    ]);
    let mut body = vec![0xff, 0x80];
    body.extend_from_slice(&u16::MAX.to_le_bytes());
    body.extend_from_slice(&i16::MIN.to_le_bytes());
    body.extend_from_slice(&u32::MAX.to_le_bytes());
    body.extend_from_slice(&i32::MIN.to_le_bytes());
    body.extend_from_slice(&u64::MAX.to_le_bytes());
    body.extend_from_slice(&i64::MIN.to_le_bytes());
    body.extend_from_slice(&(-1i32).to_le_bytes());
    assert_eq!(
        line(&fmt, &record(&body)),
        expect(
            r#"{"a":255,"b":-128,"c":65535,"d":-32768,"e":4294967295,"f":-2147483648,"g":18446744073709551615,"h":-9223372036854775808,"i":-1}"#
        )
    );
    let mut body = vec![0, 1];
    body.extend_from_slice(&1u16.to_le_bytes());
    body.extend_from_slice(&i16::MAX.to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes());
    body.extend_from_slice(&i32::MAX.to_le_bytes());
    body.extend_from_slice(&(1u64 << 53 | 1).to_le_bytes());
    body.extend_from_slice(&i64::MAX.to_le_bytes());
    body.extend_from_slice(&7i32.to_le_bytes());
    assert_eq!(
        line(&fmt, &record(&body)),
        expect(
            r#"{"a":0,"b":1,"c":1,"d":32767,"e":0,"f":2147483647,"g":9007199254740993,"h":9223372036854775807,"i":7}"#
        )
    );
}

#[test]
fn big_endian_records() {
    let fmt = format(&[("u32 a", 8, 4, false), ("__data_loc char[] s", 12, 4, true)]);
    let mut raw = ID.to_be_bytes().to_vec();
    raw.extend_from_slice(&[0, 0]);
    raw.extend_from_slice(&42i32.to_be_bytes());
    raw.extend_from_slice(&0x0102_0304u32.to_be_bytes());
    raw.extend_from_slice(&((3u32 << 16) | 16).to_be_bytes());
    raw.extend_from_slice(b"be\0");
    let opts = LineOptions {
        include_common: true,
        endian: uevrec_parsers::Endian::Big,
    };
    assert_eq!(
        line_with(opts, &meta(), &fmt, &raw),
        r#"{"time":"2026-11-22T11:00:00.123456789Z","system":"user_events","event":"test","cpu":1,"pid":42,"tid":43,"common":{"common_type":1117,"common_flags":0,"common_preempt_count":0,"common_pid":42},"fields":{"a":16909060,"s":"be"}}"#
    );
}

#[test]
fn common_fields_on_request() {
    let fmt = format(&[("u32 a", 8, 4, false)]);
    let opts = LineOptions {
        include_common: true,
        endian: uevrec_parsers::Endian::Little,
    };
    assert_eq!(
        line_with(opts, &meta(), &fmt, &record(&5u32.to_le_bytes())),
        r#"{"time":"2026-11-22T11:00:00.123456789Z","system":"user_events","event":"test","cpu":1,"pid":42,"tid":43,"common":{"common_type":1117,"common_flags":0,"common_preempt_count":0,"common_pid":42},"fields":{"a":5}}"#
    );
}

#[test]
fn char_arrays_with_and_without_nul() {
    // The kernel prints garbage inside the brackets for user_events; `size:` rules.
    let fmt = format(&[
        ("char b[1055984226]", 8, 8, true),
        ("char full[4]", 16, 4, true),
    ]);
    assert_eq!(
        line(&fmt, &record(b"hi\0junk\0full")),
        expect(r#"{"b":"hi","full":"full"}"#)
    );
    assert_eq!(
        line(&fmt, &record(b"\0\0\0\0\0\0\0\0\0abc")),
        expect(r#"{"b":"","full":""}"#)
    );
}

#[test]
fn unsigned_char_arrays_are_hex() {
    let fmt = format(&[("unsigned char u[4]", 8, 4, false)]);
    assert_eq!(
        line(&fmt, &record(&[0x00, 0x0a, 0xff, 0x10])),
        expect(r#"{"u":"000aff10"}"#)
    );
}

#[test]
fn data_loc_and_rel_loc_strings() {
    let fmt = format(&[
        ("__data_loc char[] d", 8, 4, true),
        ("__rel_loc char msg[]", 12, 4, true),
    ]);
    let mut body = Vec::new();
    body.extend_from_slice(&loc(6, 16)); // "hello\0" at 16
    body.extend_from_slice(&loc(6, 6)); // "world\0" at 22 = 16 (end of field) + 6
    body.extend_from_slice(b"hello\0world\0");
    assert_eq!(
        line(&fmt, &record(&body)),
        expect(r#"{"d":"hello","msg":"world"}"#)
    );
    // Empty strings: length 0, and a lone NUL.
    let mut body = Vec::new();
    body.extend_from_slice(&loc(0, 16));
    body.extend_from_slice(&loc(1, 0));
    body.push(0);
    assert_eq!(line(&fmt, &record(&body)), expect(r#"{"d":"","msg":""}"#));
    // No NUL: the whole area is the string, nothing reported.
    let mut body = Vec::new();
    body.extend_from_slice(&loc(3, 16));
    body.extend_from_slice(&loc(2, 3));
    body.extend_from_slice(b"abcde");
    assert_eq!(
        line(&fmt, &record(&body)),
        expect(r#"{"d":"abc","msg":"de"}"#)
    );
}

#[test]
fn dynamic_byte_and_integer_arrays() {
    let fmt = format(&[
        ("__data_loc u8[] blob", 8, 4, false),
        ("__rel_loc u32 nums[]", 12, 4, false),
        ("__data_loc int[] v", 16, 4, true),
        ("__data_loc u32[] none", 20, 4, false),
    ]);
    let mut body = Vec::new();
    body.extend_from_slice(&loc(3, 24)); // blob 24..27
    body.extend_from_slice(&loc(12, 11)); // nums 27..39 = 16 + 11
    body.extend_from_slice(&loc(8, 39)); // v 39..47
    body.extend_from_slice(&loc(0, 47)); // none: empty
    body.extend_from_slice(&[1, 2, 0xfe]);
    for n in [1u32, u32::MAX, 7] {
        body.extend_from_slice(&n.to_le_bytes());
    }
    for n in [-1i32, 5] {
        body.extend_from_slice(&n.to_le_bytes());
    }
    assert_eq!(
        line(&fmt, &record(&body)),
        expect(r#"{"blob":"0102fe","nums":[1,4294967295,7],"v":[-1,5],"none":[]}"#)
    );
}

#[test]
fn fixed_integer_arrays() {
    let fmt = format(&[
        ("unsigned long args[2]", 8, 16, false),
        ("short s[2]", 24, 4, true),
    ]);
    let mut body = Vec::new();
    body.extend_from_slice(&3u64.to_le_bytes());
    body.extend_from_slice(&u64::MAX.to_le_bytes());
    body.extend_from_slice(&(-2i16).to_le_bytes());
    body.extend_from_slice(&9i16.to_le_bytes());
    assert_eq!(
        line(&fmt, &record(&body)),
        expect(r#"{"args":[3,18446744073709551615],"s":[-2,9]}"#)
    );
}

#[test]
fn struct_fields_are_hex() {
    let fmt = format(&[("struct foo f", 8, 6, false)]);
    assert_eq!(
        line(&fmt, &record(&[0xde, 0xad, 0xbe, 0xef, 0, 1])),
        expect(r#"{"f":"deadbeef0001"}"#)
    );
}

#[test]
fn rest_of_record() {
    let fmt = format(&[("u32 n", 8, 4, false), ("char tail[]", 12, 0, true)]);
    let mut body = 2u32.to_le_bytes().to_vec();
    body.extend_from_slice(b"rest text");
    assert_eq!(
        line(&fmt, &record(&body)),
        expect(r#"{"n":2,"tail":"rest text"}"#)
    );
    // PERF_SAMPLE_RAW padding after a NUL does not show in strings …
    body.extend_from_slice(b"\0\0\0");
    assert_eq!(
        line(&fmt, &record(&body)),
        expect(r#"{"n":2,"tail":"rest text"}"#)
    );
    // … but is part of byte rests; an empty rest is "".
    let fmt = format(&[("u32 n", 8, 4, false), ("u8 raw[]", 12, 0, false)]);
    let mut body = 2u32.to_le_bytes().to_vec();
    body.extend_from_slice(&[0xab, 0, 0]);
    assert_eq!(
        line(&fmt, &record(&body)),
        expect(r#"{"n":2,"raw":"ab0000"}"#)
    );
    assert_eq!(
        line(&fmt, &record(&2u32.to_le_bytes())),
        expect(r#"{"n":2,"raw":""}"#)
    );
}

#[test]
fn unknown_kinds_are_hex() {
    let fmt = format(&[("__int128 x", 8, 16, true), ("union u y", 24, 2, false)]);
    let body: Vec<u8> = (0u8..18).collect();
    assert_eq!(
        line(&fmt, &record(&body)),
        expect(r#"{"x":"000102030405060708090a0b0c0d0e0f","y":"1011"}"#)
    );
}

#[test]
fn errors_leave_other_fields_alone() {
    // The schema's own example: a __rel_loc pointing past a 64-byte record.
    let fmt = format(&[
        ("u32 a", 8, 4, false),
        ("__rel_loc char msg[]", 12, 4, true),
    ]);
    let mut body = 1u32.to_le_bytes().to_vec();
    body.extend_from_slice(&loc(10, 284)); // 16 + 284 = 300
    body.resize(64 - 8, 0);
    assert_eq!(
        line(&fmt, &record(&body)),
        expect(
            r#"{"a":1,"msg":null},"errors":{"msg":"__rel_loc out of bounds: offset 300 + length 10 > record length 64"}"#
        )
    );
    // Truncated record, odd-length integer array, and a fine field in between.
    let fmt = format(&[
        ("__data_loc u32[] odd", 8, 4, false),
        ("u16 ok", 12, 2, false),
        ("u64 late", 14, 8, false),
    ]);
    let mut body = loc(3, 14).to_vec();
    body.extend_from_slice(&9u16.to_le_bytes());
    body.extend_from_slice(&[1, 2, 3]);
    assert_eq!(
        line(&fmt, &record(&body)),
        expect(
            r#"{"odd":null,"ok":9,"late":null},"errors":{"odd":"array data of 3 bytes is not a multiple of the element size 4 (truncated or corrupt record, or the format does not match the producer: re-read the format file)","late":"record too short: field at offset 14 size 8 > record length 17 (truncated or corrupt record, or the format does not match the producer: re-read the format file)"}"#
        )
    );
    // A record shorter than the common header: common fields fail too.
    let opts = LineOptions {
        include_common: true,
        endian: uevrec_parsers::Endian::Little,
    };
    let out = line_with(opts, &meta(), &format(&[]), &[1, 2, 3]);
    assert!(
        out.contains(r#""common":{"common_type":513,"common_flags":3,"common_preempt_count":null,"common_pid":null},"fields":{},"errors":{"common_preempt_count":"record too short"#),
        "{out}"
    );
}

#[test]
fn multi_format_events_carry_format_id() {
    let fmt = format(&[("u32 a", 8, 4, false)]);
    let meta = RecordMeta {
        system: "user_events_multi",
        event: "uevc_multi",
        format_id: Some("1"),
        ..meta()
    };
    assert_eq!(
        line_with(
            LineOptions::default(),
            &meta,
            &fmt,
            &record(&3u32.to_le_bytes())
        ),
        r#"{"time":"2026-11-22T11:00:00.123456789Z","system":"user_events_multi","event":"uevc_multi","format_id":"1","cpu":1,"pid":42,"tid":43,"fields":{"a":3}}"#
    );
}

#[test]
fn unknown_time_is_null() {
    let fmt = format(&[]);
    let meta = RecordMeta {
        time_unix_ns: None,
        ..meta()
    };
    assert_eq!(
        line_with(LineOptions::default(), &meta, &fmt, &record(&[])),
        r#"{"time":null,"system":"user_events","event":"test","cpu":1,"pid":42,"tid":43,"fields":{}}"#
    );
}

#[test]
fn lost_and_notice_lines() {
    let mut w = LineWriter::new(LineOptions::default());
    let mut out = Vec::new();
    w.write_lost(&mut out, Some(TIME), 1, 17);
    assert_eq!(
        checked(out),
        r#"{"time":"2026-11-22T11:00:00.123456789Z","uevrec":"lost","cpu":1,"lost":17}"#
    );
    let mut out = Vec::new();
    w.write_lost(&mut out, None, 0, u64::MAX);
    assert_eq!(
        checked(out),
        r#"{"time":null,"uevrec":"lost","cpu":0,"lost":18446744073709551615}"#
    );
    let mut out = Vec::new();
    w.write_notice(
        &mut out,
        Some(TIME),
        "attached",
        Some("user_events:test"),
        "id 1117",
    );
    assert_eq!(
        checked(out),
        r#"{"time":"2026-11-22T11:00:00.123456789Z","uevrec":"notice","what":"attached","event":"user_events:test","message":"id 1117"}"#
    );
    let mut out = Vec::new();
    w.write_notice(
        &mut out,
        None,
        "skipped",
        None,
        "line 3:\n\tbad \"x\" \\ \u{1}",
    );
    assert_eq!(
        checked(out),
        r#"{"time":null,"uevrec":"notice","what":"skipped","message":"line 3:\n\tbad \"x\" \\ \u0001"}"#
    );
}

#[test]
fn strings_needing_escapes() {
    let fmt = format(&[("__data_loc char[] s", 8, 4, true)]);
    let text = b"a\"b\\c\nd\te\r\x08\x0c\x01\x1f/\x7f\0";
    let mut body = loc(text.len() as u32, 12).to_vec();
    body.extend_from_slice(text);
    assert_eq!(
        line(&fmt, &record(&body)),
        expect("{\"s\":\"a\\\"b\\\\c\\nd\\te\\r\\b\\f\\u0001\\u001f/\x7f\"}")
    );
    // Names of events, systems and fields are escaped too (user_events does not check
    // the characters of names).
    let mut fmt = format(&[("u8 a", 8, 1, false)]);
    fmt.fields[0].name = "q\"x".into();
    let meta = RecordMeta {
        event: "we\"ird\n",
        system: "s\\y",
        ..meta()
    };
    assert_eq!(
        line_with(LineOptions::default(), &meta, &fmt, &record(&[1])),
        r#"{"time":"2026-11-22T11:00:00.123456789Z","system":"s\\y","event":"we\"ird\n","cpu":1,"pid":42,"tid":43,"fields":{"q\"x":1}}"#
    );
}

#[test]
fn invalid_utf8_becomes_replacement_characters() {
    let fmt = format(&[("char s[10]", 8, 10, true)]);
    // `\xff` alone, then a truncated 3-byte sequence `\xe2\x82` (one U+FFFD, maximal
    // invalid sequence), then valid `é`.
    let body = b"ok\xff\xc3\xa9\xe2\x82!\0\0";
    assert_eq!(
        line(&fmt, &record(body)),
        expect("{\"s\":\"ok\u{FFFD}é\u{FFFD}!\"}")
    );
}

#[test]
fn every_byte_value() {
    let all: Vec<u8> = (0..=255).collect();
    let fmt = format(&[("u8 raw[]", 8, 0, false)]);
    let hex: String = all.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        line(&fmt, &record(&all)),
        expect(&format!(r#"{{"raw":"{hex}"}}"#))
    );
    // As a string: 1..=255 (a 0 would end it). ASCII escapes per RFC 8259; each byte from
    // 0x80 on is its own invalid sequence here, so 128 × U+FFFD.
    let fmt = format(&[("char s[]", 8, 0, true)]);
    let mut expected = String::from(
        r##"\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r\u000e\u000f\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001f !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~"##,
    );
    expected.push('\x7f');
    expected.push_str(&"\u{FFFD}".repeat(128));
    assert_eq!(
        line(&fmt, &record(&all[1..])),
        expect(&format!(r#"{{"s":"{expected}"}}"#))
    );
}

#[test]
fn lines_append_to_the_callers_buffer() {
    let fmt = format(&[("u8 a", 8, 1, false)]);
    let mut w = LineWriter::new(LineOptions::default());
    let mut out = b"previous\n".to_vec();
    w.write_record(&mut out, &meta(), &fmt, &record(&[1]));
    w.write_record(&mut out, &meta(), &fmt, &record(&[2]));
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0], "previous");
    assert_eq!(lines[1], expect(r#"{"a":1}"#));
    assert_eq!(lines[2], expect(r#"{"a":2}"#));
}

/// `events/sched/sched_switch/format` of the 6.18 host, verbatim.
const SCHED_SWITCH: &str = include_str!("data/sched_switch-6.18.format");

#[test]
fn sched_switch_through_the_format_parser() {
    let fmt = parse_format(SCHED_SWITCH).expect("the kernel's format parses");
    let mut body = b"kworker/u8:3\0\0\0\0".to_vec();
    body.extend_from_slice(&1234i32.to_le_bytes());
    body.extend_from_slice(&120i32.to_le_bytes());
    body.extend_from_slice(&1i64.to_le_bytes());
    body.extend_from_slice(b"swapper/1\0\0\0\0\0\0\0");
    body.extend_from_slice(&0i32.to_le_bytes());
    body.extend_from_slice(&120i32.to_le_bytes());
    let meta = RecordMeta {
        system: "sched",
        event: "sched_switch",
        ..meta()
    };
    assert_eq!(
        line_with(LineOptions::default(), &meta, &fmt, &record(&body)),
        r#"{"time":"2026-11-22T11:00:00.123456789Z","system":"sched","event":"sched_switch","cpu":1,"pid":42,"tid":43,"fields":{"prev_comm":"kworker/u8:3","prev_pid":1234,"prev_prio":120,"prev_state":1,"next_comm":"swapper/1","next_pid":0,"next_prio":120}}"#
    );
}

#[test]
fn prepared_lines_equal_record_lines() {
    // Names that need escaping, a multi-format id, common fields and a failing field,
    // in both byte orders.
    let fmt = format(&[
        ("u32 a", 8, 4, false),
        ("__data_loc char[] bad", 12, 4, true),
        ("char s[4]", 16, 4, true),
    ]);
    let mut body = 7u32.to_le_bytes().to_vec();
    body.extend_from_slice(&loc(10, 300));
    body.extend_from_slice(b"x\"\n\0");
    let raw = record(&body);
    let meta = RecordMeta {
        system: "sys\"tem",
        event: "ev\\ent\u{1}",
        format_id: Some("1f"),
        ..meta()
    };
    for include_common in [false, true] {
        for endian in [uevrec_parsers::Endian::Little, uevrec_parsers::Endian::Big] {
            let opts = LineOptions {
                include_common,
                endian,
            };
            let mut out = Vec::new();
            LineWriter::new(opts).write_record(&mut out, &meta, &fmt, &raw);
            let prepared = prepared_line(opts, &meta, &fmt, &raw);
            assert_eq!(String::from_utf8(prepared).unwrap(), checked(out) + "\n");
        }
    }
}
