//! The writer allocates nothing per record once the caller's buffer has room: counted
//! with a global allocator that tallies this thread's allocations.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use uevrec_parsers::field_type::resolve_field;
use uevrec_parsers::json_line::{LineOptions, LineWriter, PreparedFormat, RecordMeta, RecordStamp};
use uevrec_parsers::schema::EventFormat;

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
