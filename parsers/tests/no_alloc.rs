//! The writer allocates nothing per record once the caller's buffer has room: counted
//! with a global allocator that tallies this thread's allocations.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use uevrec_parsers::EventFormat;
use uevrec_parsers::eventheader::{trace_entry, tracepoint_format};
use uevrec_parsers::otlp::{OtlpEncoding, OtlpWriter, read_frames};
use uevrec_parsers::resolve_field;
use uevrec_parsers::{
    LineOptions, LineWriter, PreparedFormat, RecordMeta, RecordStamp, RecordWriter, parse_format,
};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counter is a
// const-initialised thread-local `Cell`, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

#[test]
fn no_allocation_per_record() {
    let line =
        |decl: &str, offset, size, signed| resolve_field(decl, offset, size, Some(signed)).unwrap();
    let format = EventFormat {
        name: "t".into(),
        id: 1,
        common_fields: vec![
            line("unsigned short common_type", 0, 2, false),
            line("int common_pid", 4, 4, true),
        ],
        fields: vec![
            line("u32 a", 8, 4, false),
            line("char b[8]", 12, 8, true),
            line("__data_loc char[] s", 20, 4, true),
            line("__rel_loc u32 v[]", 24, 4, false),
            line("__data_loc char[] bad", 28, 4, true),
            line("struct foo f", 32, 4, false),
        ],
        print_fmt: String::new(),
    };
    let mut raw = vec![0u8; 36];
    raw[8..12].copy_from_slice(&7u32.to_le_bytes());
    raw[12..20].copy_from_slice(b"a\"b\\\n\xff\xfe\0");
    let text = b"esc \"q\" \t tab, bad \xe2\x82 utf8 \xff\0";
    raw[20..24].copy_from_slice(&(((text.len() as u32) << 16) | 36).to_le_bytes());
    raw[24..28].copy_from_slice(&((8u32 << 16) | (36 + text.len() as u32 - 28)).to_le_bytes());
    raw[28..32].copy_from_slice(&((10u32 << 16) | 300).to_le_bytes()); // out of bounds
    raw.extend_from_slice(text);
    raw.extend_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0]);
    let meta = RecordMeta {
        time_unix_ns: Some(1_795_345_200_123_456_789),
        cpu: 0,
        pid: 1,
        tid: 1,
        system: "user_events",
        event: "t",
        format_id: Some("1a"),
    };
    let mut writer = LineWriter::new(LineOptions {
        include_common: true,
        endian: uevrec_parsers::Endian::Little,
    });
    let mut out = Vec::with_capacity(1 << 20);
    // Warm up once (nothing should allocate there either, but the count starts after).
    writer.write_record(&mut out, &meta, &format, &raw);
    let first = String::from_utf8(out.clone()).unwrap();
    assert!(
        first.contains(r#""errors":{"bad":"__data_loc out of bounds"#),
        "{first}"
    );
    assert!(first.contains("\u{FFFD}"), "{first}");
    out.clear();
    // The counter counts: one Vec is one allocation.
    let probe = allocations();
    drop(std::hint::black_box(vec![1u8]));
    assert_eq!(allocations(), probe + 1);
    let prepared = PreparedFormat::new(&format, meta.system, meta.event, meta.format_id);
    let before = allocations();
    for i in 0..1000u64 {
        let meta = RecordMeta {
            time_unix_ns: Some(meta.time_unix_ns.unwrap() + i * 7_000_000),
            ..meta
        };
        writer.write_record(&mut out, &meta, &format, &raw);
        let stamp = RecordStamp {
            time_unix_ns: meta.time_unix_ns,
            cpu: meta.cpu,
            pid: meta.pid,
            tid: meta.tid,
        };
        writer.write_prepared(&mut out, &stamp, &prepared, &raw);
        writer.write_lost(&mut out, meta.time_unix_ns, 1, i);
        writer.write_notice(
            &mut out,
            None,
            "attached",
            Some("user_events:t"),
            "id \"1\"\n",
        );
    }
    let counted = allocations() - before;
    assert!(
        out.len() < out.capacity(),
        "the buffer had to grow; make it bigger"
    );
    assert_eq!(counted, 0, "allocations while writing 4000 lines");
}

/// EventHeader events (an OTel-style log record with nested structs, a duplicate key,
/// a tag and a struct array, and a truncated one with errors) allocate nothing per record.
#[test]
fn no_allocation_per_eventheader_record() {
    let format = tracepoint_format("P_L4K1", 2);
    // Metadata: "Log;a=b", PartA{time z8}, PartB{_typeName l8 (tag 3), body l8, body l8,
    // n v16 f16-port}, arr[] of struct{x v8}, f v64 float.
    let mut meta = b"Log;a=b\0".to_vec();
    meta.extend_from_slice(b"PartA\0\x81\x01time\0\x07");
    meta.extend_from_slice(
        b"PartB\0\x81\x04_typeName\0\x8a\x80\x03\x00body\0\x0abody\0\x0an\0\x83\x10",
    );
    meta.extend_from_slice(b"arr\0\xc1\x01x\0\x02f\0\x85\x08");
    let mut payload = b"2024-01-01T00:00:00Z\0".to_vec();
    for s in [&b"Log"[..], b"hello \"world\"", b"again"] {
        payload.extend_from_slice(&(s.len() as u16).to_le_bytes());
        payload.extend_from_slice(s);
    }
    payload.extend_from_slice(&[0x1f, 0x90, 2, 0, 7, 8]);
    payload.extend_from_slice(&1.5f64.to_bits().to_le_bytes());
    let raw = trace_entry(4, &meta, &payload);
    let truncated = &raw[..raw.len() - 3];
    let mut writer = LineWriter::new(LineOptions::default());
    let prepared = PreparedFormat::new(&format, "user_events", "P_L4K1", None);
    let stamp = RecordStamp {
        time_unix_ns: Some(1_795_345_200_123_456_789),
        cpu: 0,
        pid: 1,
        tid: 1,
    };
    let mut out = Vec::with_capacity(1 << 20);
    writer.write_prepared(&mut out, &stamp, &prepared, &raw);
    writer.write_prepared(&mut out, &stamp, &prepared, truncated);
    let first = String::from_utf8(out.clone()).unwrap();
    assert!(first.contains(r#""body#2":"again""#), "{first}");
    assert!(
        first.contains(r#""field_tags":{"PartB._typeName":3}"#),
        "{first}"
    );
    assert!(first.contains(r#""errors":{"#), "{first}");
    out.clear();
    let before = allocations();
    for _ in 0..1000 {
        writer.write_prepared(&mut out, &stamp, &prepared, &raw);
        writer.write_prepared(&mut out, &stamp, &prepared, truncated);
    }
    let counted = allocations() - before;
    assert!(out.len() < out.capacity(), "the buffer had to grow");
    assert_eq!(
        counted, 0,
        "allocations while writing 2000 EventHeader lines"
    );
}

/// `--format otlp` allocates nothing per record either, lines included, once its buffers
/// have grown: an OpenTelemetry Common Schema log (the plan path), a truncated
/// EventHeader event (the walk, with an error), a plain event with a field that fails,
/// lost counts and notices.
#[test]
fn no_allocation_per_otlp_record() {
    let str_field = |p: &mut Vec<u8>, t: &str| {
        p.extend_from_slice(&(t.len() as u16).to_le_bytes());
        p.extend_from_slice(t.as_bytes());
    };
    let meta = b"Log\0__csver__\0\x04PartA\0\x81\x02time\0\x0aext_dt_traceId\0\x0a\
                 PartC\0\x81\x01user\0\x0aPartB\0\x81\x03_typeName\0\x0abody\0\x0a\
                 severityNumber\0\x83\x02";
    let mut payload = 1024u32.to_le_bytes().to_vec();
    str_field(&mut payload, "2026-11-22T11:00:00.123456789Z");
    str_field(&mut payload, "0af7651916cd43dd8448eb211c80319c");
    str_field(&mut payload, "zoë \"q\"");
    str_field(&mut payload, "Log");
    str_field(&mut payload, "served\n");
    payload.extend_from_slice(&9i16.to_le_bytes());
    let log = trace_entry(4, meta, &payload);
    let truncated = &log[..log.len() - 5];
    let eh = PreparedFormat::new(
        &tracepoint_format("P_L4K1", 2),
        "user_events",
        "P_L4K1",
        None,
    );
    let plain_format = parse_format(
        "name: t\nID: 9\nformat:\n\
         \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
         \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
         \tfield:u32 a;\toffset:8;\tsize:4;\tsigned:0;\n\
         \tfield:__data_loc char[] s;\toffset:12;\tsize:4;\tsigned:0;\n\
         \tfield:__data_loc char[] bad;\toffset:16;\tsize:4;\tsigned:0;\n\n\
         print fmt: \"\"\n",
    )
    .unwrap();
    let plain = PreparedFormat::new(&plain_format, "user_events", "t", None);
    let mut plain_raw = vec![0u8; 20];
    plain_raw[12..16].copy_from_slice(&((3u32 << 16) | 20).to_le_bytes());
    plain_raw[16..20].copy_from_slice(&((3u32 << 16) | 300).to_le_bytes());
    plain_raw.extend_from_slice(b"ab\0");
    let mut writer = OtlpWriter::new(LineOptions {
        include_common: true,
        endian: uevrec_parsers::Endian::Little,
    });
    writer.set_host_name("h");
    let mut out = Vec::with_capacity(8 << 20);
    let write = |writer: &mut OtlpWriter, out: &mut Vec<u8>, i: u64| {
        let stamp = RecordStamp {
            time_unix_ns: Some(1_795_345_200_123_456_789 + i * 3_000_000),
            cpu: 0,
            pid: 1,
            tid: 1,
        };
        writer.write_prepared(out, &stamp, &eh, &log);
        writer.write_prepared(out, &stamp, &eh, truncated);
        writer.write_prepared(out, &stamp, &plain, &plain_raw);
        writer.write_lost(out, stamp.time_unix_ns, 1, i);
        writer.write_notice(out, None, "attached", Some("user_events:t"), "id \"1\"\n");
    };
    // Warm up: every buffer grows, every kind of line is written once.
    for i in 0..600 {
        write(&mut writer, &mut out, i);
    }
    writer.end_lines(&mut out);
    let first = String::from_utf8(out.clone()).unwrap();
    assert!(first.contains(r#""eventName":"uevrec.lost""#), "{first}");
    assert!(
        first.contains(r#""body":{"stringValue":"served\n"}"#),
        "{first}"
    );
    assert!(first.contains(r#""key":"uevrec.error""#), "{first}");
    assert!(first.contains(r#""key":"uevrec.errors""#), "{first}");
    assert!(
        first.contains(r#""key":"linux.tracepoint.common""#),
        "{first}"
    );
    out.clear();
    let before = allocations();
    for i in 600..1600 {
        write(&mut writer, &mut out, i);
        if i % 100 == 0 {
            writer.end_lines(&mut out);
        }
    }
    writer.end_lines(&mut out);
    let counted = allocations() - before;
    assert!(out.len() < out.capacity(), "the buffer had to grow");
    assert!(out.len() > 1 << 20, "{} bytes", out.len());
    assert_eq!(counted, 0, "allocations while writing 5000 OTLP records");

    // Export frames with protobuf bodies, per-tracepoint counts included: the same.
    let mut writer = OtlpWriter::export(
        LineOptions {
            include_common: true,
            endian: uevrec_parsers::Endian::Little,
        },
        OtlpEncoding::Protobuf,
    );
    writer.set_host_name("h");
    out.clear();
    for i in 0..600 {
        write(&mut writer, &mut out, i);
    }
    writer.end_lines(&mut out);
    assert!(read_frames(&out).all(|f| f.is_ok_and(|f| f.encoding == OtlpEncoding::Protobuf)));
    out.clear();
    let before = allocations();
    for i in 600..1600 {
        write(&mut writer, &mut out, i);
        if i % 100 == 0 {
            writer.end_lines(&mut out);
        }
    }
    writer.end_lines(&mut out);
    let counted = allocations() - before;
    assert!(out.len() < out.capacity(), "the buffer had to grow");
    assert!(read_frames(&out).filter(Result::is_ok).count() > 10);
    assert_eq!(
        counted, 0,
        "allocations while writing 5000 OTLP records as protobuf"
    );

    // Without `--common`: the compiled protobuf plans (Common Schema logs, plain events).
    let mut writer = OtlpWriter::export(LineOptions::default(), OtlpEncoding::Protobuf);
    writer.set_host_name("h");
    out.clear();
    for i in 0..600 {
        write(&mut writer, &mut out, i);
    }
    writer.end_lines(&mut out);
    out.clear();
    let before = allocations();
    for i in 600..1600 {
        write(&mut writer, &mut out, i);
        if i % 100 == 0 {
            writer.end_lines(&mut out);
        }
    }
    writer.end_lines(&mut out);
    let counted = allocations() - before;
    assert!(read_frames(&out).filter(Result::is_ok).count() > 10);
    assert_eq!(
        counted, 0,
        "allocations while writing 5000 OTLP records as protobuf through the plans"
    );
}
