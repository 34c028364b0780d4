//! Unit tests of the chunk byte format.

use super::*;

fn stamp(time: Option<u64>, cpu: u32) -> RecordStamp {
    RecordStamp {
        time_unix_ns: time,
        cpu,
        pid: 7,
        tid: 8,
    }
}

#[test]
fn entries_come_back_in_order() {
    let mut chunk = StagedChunk::with_buffer(vec![1, 2, 3]);
    assert!(chunk.is_empty());
    chunk.push_record(0, &stamp(Some(5), 1), b"abc");
    chunk.push_notice(Some(6), "attached", Some("s:e"), "id 1, 2 CPUs");
    chunk.push_record(3, &stamp(None, 0), b"");
    chunk.push_lost(None, 4, 1 << 40);
    chunk.push_notice(None, "waiting", None, "");
    chunk.push_record(9, &stamp(Some(u64::MAX), 2), &[0xff; 70]);
    chunk.push_context(
        Some(7),
        &ContextUpdate::Comm {
            tid: 8,
            comm: b"sh",
        },
    );
    chunk.push_record_in(1, &stamp(Some(8), 1), Some(1 << 33), b"xy");
    chunk.push_context(
        None,
        &ContextUpdate::Cgroup {
            id: 1 << 40,
            path: b"/a/b",
        },
    );
    chunk.push_context(
        None,
        &ContextUpdate::Fork {
            tid: 9,
            parent_tid: 8,
        },
    );
    chunk.push_context(None, &ContextUpdate::Exit { tid: 9 });
    chunk.push_context(None, &ContextUpdate::ThreadCgroup { tid: 8, id: 3 });
    chunk.push_schema(3, Some(9));
    assert_eq!(chunk.records(), 4);
    let got: Vec<StagedEntry<'_>> = chunk.entries().collect();
    assert_eq!(
        got,
        vec![
            StagedEntry::Record {
                slot: 0,
                stamp: stamp(Some(5), 1),
                cgroup: None,
                raw: b"abc",
                stack: None,
                user_stack: None,
            },
            StagedEntry::Notice {
                time_unix_ns: Some(6),
                what: "attached",
                event: Some("s:e"),
                message: "id 1, 2 CPUs"
            },
            StagedEntry::Record {
                slot: 3,
                stamp: stamp(None, 0),
                cgroup: None,
                raw: b"",
                stack: None,
                user_stack: None,
            },
            StagedEntry::Lost {
                time_unix_ns: None,
                cpu: 4,
                lost: 1 << 40
            },
            StagedEntry::Notice {
                time_unix_ns: None,
                what: "waiting",
                event: None,
                message: ""
            },
            StagedEntry::Record {
                slot: 9,
                stamp: stamp(Some(u64::MAX), 2),
                cgroup: None,
                raw: &[0xff; 70],
                stack: None,
                user_stack: None,
            },
            StagedEntry::Context {
                time_unix_ns: Some(7),
                update: ContextUpdate::Comm {
                    tid: 8,
                    comm: b"sh"
                }
            },
            StagedEntry::Record {
                slot: 1,
                stamp: stamp(Some(8), 1),
                cgroup: Some(1 << 33),
                raw: b"xy",
                stack: None,
                user_stack: None,
            },
            StagedEntry::Context {
                time_unix_ns: None,
                update: ContextUpdate::Cgroup {
                    id: 1 << 40,
                    path: b"/a/b"
                }
            },
            StagedEntry::Context {
                time_unix_ns: None,
                update: ContextUpdate::Fork {
                    tid: 9,
                    parent_tid: 8
                }
            },
            StagedEntry::Context {
                time_unix_ns: None,
                update: ContextUpdate::Exit { tid: 9 }
            },
            StagedEntry::Context {
                time_unix_ns: None,
                update: ContextUpdate::ThreadCgroup { tid: 8, id: 3 }
            },
            StagedEntry::Schema {
                slot: 3,
                time_unix_ns: Some(9)
            },
        ]
    );
    let buf = chunk.into_buffer();
    let notice = 8 + "attached".len() + "s:e".len() + "id 1, 2 CPUs".len();
    let context = 5 * 20 + 2 + 4;
    assert_eq!(
        buf.len(),
        13 * HEADER + 3 + notice + 70 + 8 + 8 + "waiting".len() + context + 8 + 2 + 4
    );
}

#[test]
fn encoded_entries_copy_verbatim() {
    let mut chunk = StagedChunk::default();
    chunk.push_record(4, &stamp(Some(5), 1), b"abc");
    chunk.push_lost(None, 2, 9);
    chunk.push_notice(Some(6), "attached", Some("s:e"), "m");
    chunk.push_context(Some(7), &ContextUpdate::Exit { tid: 3 });
    chunk.push_record_in(5, &stamp(Some(8), 1), Some(42), b"de");
    let slots: Vec<Option<u32>> = chunk.encoded().map(|e| e.slot).collect();
    // A context entry is no record (the flight recorder keeps records by slot).
    assert_eq!(slots, vec![Some(4), None, None, None, Some(5)]);
    let mut copy = StagedChunk::default();
    for e in chunk.encoded() {
        assert_eq!(EncodedEntry::first(e.bytes), Some(e));
        copy.push_encoded(e);
    }
    assert_eq!(copy.records(), 2);
    assert!(copy.entries().eq(chunk.entries()));
    let lost = chunk.encoded().nth(1).unwrap().decode();
    assert_eq!(
        lost,
        Some(StagedEntry::Lost {
            time_unix_ns: None,
            cpu: 2,
            lost: 9
        })
    );
    let bytes = chunk.into_buffer();
    assert_eq!(EncodedEntry::first(&bytes[..HEADER + 2]), None);
}

#[test]
fn context_only_keeps_the_context_entries() {
    let mut chunk = StagedChunk::default();
    chunk.push_record(4, &stamp(Some(5), 1), b"abc");
    chunk.push_context(Some(7), &ContextUpdate::Exit { tid: 3 });
    chunk.push_lost(None, 2, 9);
    chunk.push_context(None, &ContextUpdate::Comm { tid: 4, comm: b"x" });
    assert_eq!(chunk.contexts(), 2);
    let only = chunk.context_only();
    assert_eq!(only.contexts(), 2);
    assert_eq!(only.records(), 0);
    let kept: Vec<StagedEntry<'_>> = only.entries().collect();
    let all: Vec<StagedEntry<'_>> = chunk
        .entries()
        .filter(|e| matches!(e, StagedEntry::Context { .. }))
        .collect();
    assert_eq!(kept, all);
}

#[test]
fn a_record_staged_by_where_it_lies_is_read_from_the_input() {
    let input = b"..header..TRACE-ENTRY..rest";
    let st = stamp(Some(7), 3);
    let mut chunk = StagedChunk::default();
    chunk.push_record_at(2, &st, None, 10, 11);
    chunk.push_record_at(4, &st, Some(99), 0, 2);
    chunk.push_lost(Some(8), 1, 5);
    assert_eq!(chunk.records(), 2);
    let got: Vec<_> = chunk.entries_in(input).collect();
    let record = |slot, cgroup, raw| StagedEntry::Record {
        slot,
        stamp: stamp(Some(7), 3),
        cgroup,
        raw,
        stack: None,
        user_stack: None,
    };
    assert_eq!(got[0], record(2, None, &b"TRACE-ENTRY"[..]));
    assert_eq!(got[1], record(4, Some(99), &b".."[..]));
    assert_eq!(got.len(), 3, "{got:?}");
    // Without the input, or past its end, the iteration ends there.
    assert_eq!(chunk.entries().count(), 0);
    assert_eq!(chunk.entries_in(&input[..20]).count(), 0);
}

#[test]
fn an_empty_chunk_has_no_entries() {
    assert_eq!(StagedChunk::with_buffer(vec![1, 2]).entries().count(), 0);
}

#[test]
fn a_cut_chunk_ends_the_iteration() {
    let mut chunk = StagedChunk::default();
    chunk.push_record(1, &stamp(Some(1), 0), b"abcdef");
    let mut bytes = chunk.into_buffer();
    // The body cut short, then the header itself.
    for cut_at in [HEADER + 3, HEADER - 1] {
        bytes.truncate(cut_at);
        assert_eq!(
            StagedEntries {
                rest: &bytes,
                input: &[]
            }
            .count(),
            0,
            "cut at {cut_at}"
        );
    }
}

#[test]
fn stacked_records_and_mapping_contexts_round_trip() {
    use uevrec_parsers::callchain::{Callchain, PERF_CONTEXT_USER};
    let words: Vec<u8> = [PERF_CONTEXT_USER, 0x401000, 0x402000]
        .iter()
        .flat_map(|w| w.to_ne_bytes())
        .collect();
    let chain = Callchain::new(&words, uevrec_parsers::Endian::NATIVE);
    let mut chunk = StagedChunk::default();
    chunk.push_record_stacked(2, &stamp(Some(5), 1), Some(7), Some(chain), None, b"entry");
    chunk.push_record_stacked(3, &stamp(Some(6), 1), None, None, None, b"plain");
    let mmap = ContextUpdate::Mmap {
        pid: 9,
        addr: 1 << 40,
        len: 0x3000,
        pgoff: 0x1000,
        build_id: &[0xab; 20],
        path: b"/usr/bin/x",
    };
    chunk.push_context(Some(8), &mmap);
    chunk.push_context(Some(9), &ContextUpdate::Exec { pid: 9, comm: b"x" });
    let got: Vec<_> = chunk.entries().collect();
    assert_eq!(chunk.records(), 2);
    assert_eq!(
        got,
        vec![
            StagedEntry::Record {
                slot: 2,
                stamp: stamp(Some(5), 1),
                cgroup: Some(7),
                raw: b"entry",
                stack: Some(chain),
                user_stack: None,
            },
            StagedEntry::Record {
                slot: 3,
                stamp: stamp(Some(6), 1),
                cgroup: None,
                raw: b"plain",
                stack: None,
                user_stack: None,
            },
            StagedEntry::Context {
                time_unix_ns: Some(8),
                update: mmap,
            },
            StagedEntry::Context {
                time_unix_ns: Some(9),
                update: ContextUpdate::Exec { pid: 9, comm: b"x" },
            },
        ]
    );
}

#[test]
fn user_stack_copies_round_trip() {
    use uevrec_parsers::callchain::{Callchain, PERF_CONTEXT_KERNEL};
    use uevrec_parsers::user_stack::{StackCopy, UserRegs, UserStack};
    let words: Vec<u8> = [PERF_CONTEXT_KERNEL, 0xffff_ffff_8100_0000]
        .iter()
        .flat_map(|w| w.to_ne_bytes())
        .collect();
    let chain = Callchain::new(&words, uevrec_parsers::Endian::NATIVE);
    let regs: Vec<u8> = [1u64, 2, 3].iter().flat_map(|w| w.to_ne_bytes()).collect();
    let copy: Vec<u8> = (0..100).collect();
    let user = UserStack {
        regs: UserRegs::new(2, 0b111 << 6, &regs, uevrec_parsers::Endian::NATIVE),
        stack: StackCopy {
            bytes: &copy,
            size: 8192,
        },
    };
    let mut chunk = StagedChunk::default();
    chunk.push_record_stacked(
        4,
        &stamp(Some(5), 1),
        Some(7),
        Some(chain),
        Some(user),
        b"entry",
    );
    // The copy's bytes, not its room, are staged.
    assert!(chunk.len() < 32 + 8 + 4 + 16 + 32 + 24 + 100 + 5 + 1);
    let got: Vec<_> = chunk.entries().collect();
    assert_eq!(
        got,
        vec![StagedEntry::Record {
            slot: 4,
            stamp: stamp(Some(5), 1),
            cgroup: Some(7),
            raw: b"entry",
            stack: Some(chain),
            user_stack: Some(user),
        }]
    );
}
