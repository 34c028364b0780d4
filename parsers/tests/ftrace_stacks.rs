//! Pure tier: the ftrace backend's stack records (`kernel_stack`, `user_stack`) tied to the
//! records they follow ([`StackTie`]), read from ring pages as the recorder reads them:
//! one tie per CPU, the CPUs' pages read in turns. A record's stack records may be on its
//! CPU's next page; a user stack of another process, a stack record first on a ring, or
//! one after another thread's record is counted, never attached; every record goes out
//! once, in its CPU's order. The property: random entries of two CPUs, random pages and
//! turns.

use proptest::prelude::*;
use uevrec_parsers::Endian;
use uevrec_parsers::callchain::{Callchain, FrameContext};
use uevrec_parsers::ftrace_page::stacks::{
    CHAIN_ENDIAN, Offered, StackEvents, StackFields, StackTie, Untied,
};
use uevrec_parsers::ftrace_page::{Item, PageLayout};

/// This machine's kernel_stack and user_stack (ids 4 and 13 on 6.18).
const EVENTS: StackEvents = StackEvents {
    kernel: Some(StackFields {
        id: 4,
        head: 8,
        caller: 16,
        word: 8,
    }),
    user: Some(StackFields {
        id: 13,
        head: 8,
        caller: 16,
        word: 8,
    }),
};
/// The id of the traced event.
const EVENT: u16 = 500;

/// One trace entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    /// An event record of thread `tid`, numbered `seq`.
    Record { tid: u32, seq: u64 },
    /// A kernel stack of thread `tid`.
    Kernel { tid: u32, frames: Vec<u64> },
    /// A user stack of thread `tid` in process `tgid`.
    User {
        tid: u32,
        tgid: u32,
        frames: Vec<u64>,
    },
}

fn bytes(e: &Entry) -> Vec<u8> {
    let mut v = Vec::new();
    let (id, tid, head, frames, pad) = match e {
        Entry::Record { tid, seq } => {
            v.extend_from_slice(&EVENT.to_le_bytes());
            v.extend_from_slice(&[0, 0]);
            v.extend_from_slice(&tid.to_le_bytes());
            v.extend_from_slice(&seq.to_le_bytes());
            return v;
        }
        Entry::Kernel { tid, frames } => (4u16, *tid, frames.len() as u32, frames, 0),
        Entry::User { tid, tgid, frames } => (13, *tid, *tgid, frames, 8),
    };
    v.extend_from_slice(&id.to_le_bytes());
    v.extend_from_slice(&[0, 0]);
    v.extend_from_slice(&tid.to_le_bytes());
    v.extend_from_slice(&head.to_le_bytes());
    v.extend_from_slice(&[0; 4]);
    for f in frames {
        v.extend_from_slice(&f.to_le_bytes());
    }
    for _ in frames.len()..pad {
        v.extend_from_slice(&0u64.to_le_bytes());
    }
    v
}

/// A 4 KiB ring page of `entries` (each record `type_len` = its length / 4, 1 ns apart).
fn page(entries: &[Entry]) -> Vec<u8> {
    let mut p = vec![0u8; 16];
    p[..8].copy_from_slice(&1000u64.to_le_bytes());
    for e in entries {
        let b = bytes(e);
        assert!(b.len() % 4 == 0 && b.len() <= 112);
        p.extend_from_slice(&((b.len() as u32 / 4) | (1 << 5)).to_le_bytes());
        p.extend_from_slice(&b);
    }
    let commit = (p.len() - 16) as u64;
    p[8..16].copy_from_slice(&commit.to_le_bytes());
    p.resize(4096, 0);
    p
}

/// A record handed on: its CPU, seq, thread, process and frames.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Out {
    cpu: u32,
    seq: u64,
    pid: Option<u32>,
    frames: Vec<(FrameContext, u64)>,
}

/// The process of each thread: thread 7 → 70, 8 → 80, others their own id.
fn pid_of(tid: u32) -> Option<u32> {
    Some(match tid {
        7 => 70,
        8 => 80,
        t => t,
    })
}

/// Read `turns` (CPU, page entries) in order, each CPU with its own tie, as the recorder's
/// reader does; the records still held at the end go out.
fn read(turns: &[(u32, Vec<Entry>)]) -> (Vec<Out>, Untied) {
    let layout = PageLayout::standard(8, Endian::Little);
    let mut ties: Vec<StackTie> = (0..2).map(|_| StackTie::new(true, true, 0)).collect();
    let mut out = Vec::new();
    let hand = |tie: &mut StackTie, cpu: u32, out: &mut Vec<Out>| {
        if let Some(h) = tie.take() {
            out.push(Out {
                cpu,
                seq: u64::from_le_bytes(h.raw[8..16].try_into().unwrap()),
                pid: h.pid,
                frames: Callchain::new(h.chain, CHAIN_ENDIAN)
                    .frames()
                    .map(|f| f.map(|f| (f.context, f.address)).unwrap())
                    .collect(),
            });
        }
    };
    for (cpu, entries) in turns {
        let p = page(entries);
        let tie = &mut ties[*cpu as usize];
        for item in layout.parse_page(&p) {
            let Ok(Item::Record { raw, time, .. }) = item else {
                panic!("{item:?}");
            };
            match tie.offer(&EVENTS, raw, Endian::Little) {
                Offered::Stack(_) => {
                    if tie.complete() {
                        hand(tie, *cpu, &mut out);
                    }
                }
                Offered::Record => {
                    hand(tie, *cpu, &mut out);
                    let tid = u32::from_le_bytes(raw[4..8].try_into().unwrap());
                    tie.hold(raw, time, tid, pid_of(tid));
                }
            }
        }
    }
    let mut untied = Untied::default();
    for (cpu, tie) in ties.iter_mut().enumerate() {
        hand(tie, cpu as u32, &mut out);
        untied.add(&tie.untied);
    }
    (out, untied)
}

fn kernel(tid: u32, frames: &[u64]) -> Entry {
    Entry::Kernel {
        tid,
        frames: frames.to_vec(),
    }
}

fn user(tid: u32, tgid: u32, frames: &[u64]) -> Entry {
    Entry::User {
        tid,
        tgid,
        frames: frames.to_vec(),
    }
}

fn record(tid: u32, seq: u64) -> Entry {
    Entry::Record { tid, seq }
}

#[test]
fn interleaved_cpus_pages_and_wrong_process() {
    use FrameContext::{Kernel, User};
    let turns = vec![
        // A stack record first on a ring: no record waits for it.
        (
            0,
            vec![user(7, 70, &[0x1]), record(7, 1), kernel(7, &[0xf1, 0xf2])],
        ),
        (
            1,
            vec![record(8, 2), kernel(8, &[0xe1]), user(8, 80, &[0x20, 0x21])],
        ),
        // Record 1's user stack starts CPU 0's next page.
        (0, vec![user(7, 70, &[0x10, 0x11]), record(7, 3)]),
        // Record 3's user stack names another process: counted, not attached.
        (
            0,
            vec![kernel(7, &[0xf3]), user(7, 71, &[0x30]), record(9, 4)],
        ),
        // A kernel stack after another thread's record.
        (1, vec![record(8, 5), kernel(9, &[0xe5])]),
    ];
    let (out, untied) = read(&turns);
    let seqs: Vec<(u32, u64)> = out.iter().map(|o| (o.cpu, o.seq)).collect();
    assert_eq!(seqs, [(1, 2), (0, 1), (0, 3), (0, 4), (1, 5)]);
    assert_eq!(
        out[1].frames,
        [(Kernel, 0xf1), (Kernel, 0xf2), (User, 0x10), (User, 0x11)]
    );
    assert_eq!(out[0].frames, [(Kernel, 0xe1), (User, 0x20), (User, 0x21)]);
    assert_eq!(
        out[2].frames,
        [(Kernel, 0xf3)],
        "no user part of process 71"
    );
    assert!(out[3].frames.is_empty() && out[4].frames.is_empty());
    assert_eq!(
        untied,
        Untied {
            no_record: 1,
            other_thread: 1,
            other_process: 1,
            repeated: 0,
            malformed: 0,
            incomplete: 3,
        }
    );
    assert!(
        untied
            .describe()
            .unwrap()
            .contains("1 a user stack of another process")
    );
}

#[test]
fn a_bad_kernel_stack_is_counted() {
    let mut bad = bytes(&kernel(7, &[1, 2]));
    bad[8..12].copy_from_slice(&9u32.to_le_bytes());
    let mut t = StackTie::new(true, false, 0);
    t.hold(&bytes(&record(7, 1)), 1, 7, Some(70));
    assert!(matches!(
        t.offer(&EVENTS, &bad, Endian::Little),
        Offered::Stack(_)
    ));
    assert_eq!(t.untied.malformed, 1);
    assert!(t.take().unwrap().chain.is_empty());
}

/// An entry of the property: a record, or a stack record of one of two threads (7 in
/// process 70, 8 in 80), sometimes of the wrong process.
fn entry() -> impl Strategy<Value = (u8, bool, bool, Vec<u64>)> {
    (
        0u8..3,
        any::<bool>(),
        prop::bool::weighted(0.2),
        prop::collection::vec(1u64..1 << 40, 0..8),
    )
}

proptest! {
    /// Random entries on two CPUs, cut into pages, read in random turns: every record
    /// once, in its CPU's order; each stack record attached (to the record before it on
    /// its CPU, of its thread and process, with its frames) or counted.
    #[test]
    fn every_stack_record_tied_or_counted(
        cpus in prop::collection::vec(prop::collection::vec(entry(), 0..40), 2),
        cuts in prop::collection::vec(1usize..6, 1..20),
        order in prop::collection::vec(any::<bool>(), 0..40),
    ) {
        let mut seq = 0;
        let mut want: Vec<Vec<u64>> = vec![Vec::new(), Vec::new()];
        let mut stacks = 0u64;
        let mut entries: Vec<Vec<Entry>> = Vec::new();
        for (cpu, list) in cpus.iter().enumerate() {
            let mut v = Vec::new();
            for (kind, other_thread, wrong, frames) in list {
                let tid = if *other_thread { 8 } else { 7 };
                v.push(match kind {
                    0 => {
                        seq += 1;
                        want[cpu].push(seq);
                        record(tid, seq)
                    }
                    1 => {
                        stacks += 1;
                        kernel(tid, frames)
                    }
                    _ => {
                        stacks += 1;
                        let tgid = pid_of(tid).unwrap() + u32::from(*wrong);
                        user(tid, tgid, &frames[..frames.len().min(8)])
                    }
                });
            }
            entries.push(v);
        }
        // Pages of a few entries, each CPU's in order, taken in random turns.
        let mut pages: Vec<Vec<Vec<Entry>>> = entries
            .iter()
            .map(|v| {
                let mut out = Vec::new();
                let mut rest = v.as_slice();
                let mut i = 0;
                while !rest.is_empty() {
                    let n = cuts[i % cuts.len()].min(rest.len());
                    out.push(rest[..n].to_vec());
                    rest = &rest[n..];
                    i += 1;
                }
                out.reverse();
                out
            })
            .collect();
        let mut turns = Vec::new();
        let mut o = order.iter().cycle();
        while pages.iter().any(|p| !p.is_empty()) {
            let cpu = usize::from(*o.next().unwrap_or(&false));
            let cpu = if pages[cpu].is_empty() { 1 - cpu } else { cpu };
            turns.push((cpu as u32, pages[cpu].pop().unwrap()));
        }
        let (out, untied) = read(&turns);
        for (cpu, want) in want.iter().enumerate() {
            let got: Vec<u64> = out.iter().filter(|o| o.cpu == cpu as u32).map(|o| o.seq).collect();
            prop_assert_eq!(&got, want);
        }
        let attached: u64 = out
            .iter()
            .map(|o| {
                let kernel = o.frames.iter().any(|f| f.0 == FrameContext::Kernel);
                let user = o.frames.iter().any(|f| f.0 == FrameContext::User);
                u64::from(kernel) + u64::from(user)
            })
            .sum();
        // Stack records without frames attach nothing visible: count them apart.
        let empty: u64 = entries
            .iter()
            .flatten()
            .filter(|e| match e {
                Entry::Kernel { frames, .. } | Entry::User { frames, .. } => frames.is_empty(),
                Entry::Record { .. } => false,
            })
            .count() as u64;
        prop_assert!(attached + untied.total() <= stacks);
        prop_assert!(attached + untied.total() + empty >= stacks);
        // A user part only from a user stack of the record's own process.
        for o in &out {
            prop_assert!(o.pid == Some(70) || o.pid == Some(80));
        }
    }
}
