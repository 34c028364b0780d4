//! The writer allocates nothing per record once the caller's buffer has room: counted
//! with a global allocator that tallies this thread's allocations.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use uevrec_parsers::EventFormat;
use uevrec_parsers::eventheader::tracepoint_format;
use uevrec_parsers::resolve_field;
use uevrec_parsers::{LineOptions, LineWriter, PreparedFormat, RecordMeta, RecordStamp};

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
        big_endian: false,
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
    let mut raw = vec![0u8; 8];
    raw.extend_from_slice(&[7, 0, 0, 0, 0, 0, 0, 4]);
    raw.extend_from_slice(&(meta.len() as u16).to_le_bytes());
    raw.extend_from_slice(&1u16.to_le_bytes());
    raw.extend_from_slice(&meta);
    raw.extend_from_slice(&payload);
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
