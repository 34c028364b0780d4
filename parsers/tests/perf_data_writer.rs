//! The perf.data writer against the reader: a file built with
//! `uevrec_parsers::perf_data::writer` decodes to exactly the JSON lines live recording
//! writes for the same records (`LineWriter::write_prepared` / `write_lost`), whatever
//! order the records were written in (sorted by time within `FINISHED_ROUND` windows),
//! including an event whose attr first appears after samples of another, and a loss; with
//! context (a tracking attr, COMM/FORK/EXIT/CGROUP records, samples with a cgroup id),
//! the `comm`/`cgroup` keys the live formatter's tracker gives.

use proptest::prelude::*;
use uevrec_parsers::perf_data::PerfData;
use uevrec_parsers::perf_data::header::FILE_HEADER_SIZE;
use uevrec_parsers::perf_data::writer::{
    self, ClockRef, EventSpec, FileMeta, MAX_RAW, Stamp, Task, TooLarge, TracingSpec, TrackingSpec,
};
use uevrec_parsers::to_lines::DecodeOptions;

/// One decoder against ranges (shared with perf_data_corpus.rs).
#[path = "common/ranges.rs"]
mod ranges;
use ranges::{decode_in_index_ranges, decode_in_ranges, decode_whole};
use uevrec_parsers::perf_data::index::{IndexBuilder, RangeIndex, TAIL_SIZE};
use uevrec_parsers::{
    ContextTracker, ContextUpdate, LineOptions, LineWriter, PreparedFormat, RecordStamp,
    parse_format,
};

const EXEC: &str = "name: sched_process_exec
ID: 365
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;
\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;
\tfield:pid_t old_pid;\toffset:16;\tsize:4;\tsigned:1;

print fmt: \"filename=%s pid=%d old_pid=%d\", __get_str(filename), REC->pid, REC->old_pid
";

const LATE: &str = "name: late
ID: 2001
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:s8 small;\toffset:8;\tsize:1;\tsigned:1;
\tfield:u64 big;\toffset:9;\tsize:8;\tsigned:0;

print fmt: \"\"
";

const HEADER_PAGE: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;
";

/// An exec trace entry (common header, filename via `__data_loc`, pids).
fn exec_raw(pid: i32, file: &str) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&365u16.to_ne_bytes());
    r.extend_from_slice(&[0, 0]);
    r.extend_from_slice(&pid.to_ne_bytes());
    let len = file.len() as u32 + 1;
    r.extend_from_slice(&(20u32 | len << 16).to_ne_bytes());
    r.extend_from_slice(&pid.to_ne_bytes());
    r.extend_from_slice(&(pid - 1).to_ne_bytes());
    r.extend_from_slice(file.as_bytes());
    r.push(0);
    r
}

/// A `late` trace entry (odd size: the writer pads it).
fn late_raw(small: i8, big: u64) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&2001u16.to_ne_bytes());
    r.extend_from_slice(&[0, 0]);
    r.extend_from_slice(&7i32.to_ne_bytes());
    r.push(small as u8);
    r.extend_from_slice(&big.to_ne_bytes());
    r
}

/// What gets written, in writing order.
enum Entry {
    Sample {
        event: usize,
        stamp: RecordStamp,
        raw: Vec<u8>,
    },
    Lost {
        time: u64,
        cpu: u32,
        lost: u64,
    },
    Round,
    /// Thread `tid` is called `comm` from `time` on.
    Comm {
        time: u64,
        tid: u32,
        comm: &'static str,
    },
    /// Thread `tid` made by `parent` at `time`.
    Fork {
        time: u64,
        tid: u32,
        parent: u32,
    },
    /// Thread `tid` exited at `time`.
    Exit {
        time: u64,
        tid: u32,
    },
    /// Cgroup `id` is `path`.
    Cgroup {
        time: u64,
        id: u64,
        path: &'static str,
    },
}

/// The tracking attr of files written with context.
const TRACKING: TrackingSpec = TrackingSpec {
    id: 7,
    clockid: 0,
    mmap: false,
};

/// Write `entries` as a perf.data (events appear in the trailer in the order given) and
/// return the file with the lines live recording writes for the same entries.
fn build(entries: &[Entry]) -> (Vec<u8>, Vec<String>) {
    build_with(entries, false)
}

/// [`build`], with context when `context`: the live lines get the keys a tracker fed
/// the same changes in the same order gives, and samples carry the cgroup id the
/// tracker knows for their thread (`record --raw`'s rule).
fn build_with(entries: &[Entry], context: bool) -> (Vec<u8>, Vec<String>) {
    build_indexed(entries, context, None)
}

/// [`build_with`], with a range index ([`IndexBuilder`], a cut noted after every
/// `every` bytes of records) when `index` says so, as `record --raw` writes it.
fn build_indexed(entries: &[Entry], context: bool, index: Option<u64>) -> (Vec<u8>, Vec<String>) {
    let mut ix = IndexBuilder::new(FILE_HEADER_SIZE).every(index.unwrap_or(u64::MAX));
    let mut tracker = ContextTracker::new();
    let formats = [("sched", EXEC), ("test", LATE)];
    let events: Vec<EventSpec> = [(365, "sched:sched_process_exec"), (2001, "test:late")]
        .iter()
        .enumerate()
        .map(|(i, &(tracepoint, name))| EventSpec {
            tracepoint,
            name: name.into(),
            id: 100 + i as u64,
            clockid: 0,
            callchain: false,
            user_stack: None,
        })
        .collect();
    let prepared: Vec<PreparedFormat> = formats
        .iter()
        .map(|(system, text)| {
            let f = parse_format(text).unwrap();
            PreparedFormat::new(&f, system, &f.name.clone(), None)
        })
        .collect();
    let mut live = LineWriter::new(LineOptions::default());
    let mut expected = Vec::new();
    let mut file = writer::placeholder_header().to_vec();
    let mut times = Vec::new();
    for e in entries {
        match e {
            Entry::Sample { event, stamp, raw } => {
                let s = Stamp {
                    id: events[*event].id,
                    pid: stamp.pid,
                    tid: stamp.tid,
                    time: stamp.time_unix_ns.unwrap(),
                    cpu: stamp.cpu,
                };
                let cgroup = context.then(|| tracker.cgroup_of(stamp.pid, stamp.tid).unwrap_or(0));
                ix.sample(*event, s.id, file.len() as u64, s.time);
                writer::push_sample(&mut file, &s, raw, cgroup).unwrap();
                if context {
                    live.set_context(&tracker, stamp, cgroup);
                }
                live.write_prepared(&mut expected, stamp, &prepared[*event], raw);
                times.push(s.time);
            }
            Entry::Lost { time, cpu, lost } => {
                let s = Stamp {
                    id: events[0].id,
                    pid: 0,
                    tid: 0,
                    time: *time,
                    cpu: *cpu,
                };
                ix.lost(*time);
                writer::push_lost(&mut file, &s, *lost);
                live.write_lost(&mut expected, Some(*time), *cpu, *lost);
            }
            Entry::Round => {
                writer::push_finished_round(&mut file);
                ix.round(file.len() as u64);
            }
            Entry::Comm { time, tid, comm } => {
                let s = tracking_stamp(*time, *tid);
                ix.context(file.len() as u64, *time);
                writer::push_comm(&mut file, &s, *tid, *tid, comm.as_bytes(), false);
                let comm = comm.as_bytes();
                tracker.apply(Some(*time), ContextUpdate::Comm { tid: *tid, comm });
            }
            Entry::Fork { time, tid, parent } => {
                let task = Task {
                    fork: true,
                    pid: *tid,
                    ppid: *parent,
                    tid: *tid,
                    ptid: *parent,
                };
                ix.context(file.len() as u64, *time);
                writer::push_task(&mut file, &tracking_stamp(*time, *tid), &task);
                let update = ContextUpdate::Fork {
                    tid: *tid,
                    parent_tid: *parent,
                };
                tracker.apply(Some(*time), update);
            }
            Entry::Exit { time, tid } => {
                let task = Task {
                    fork: false,
                    pid: *tid,
                    ppid: 0,
                    tid: *tid,
                    ptid: 0,
                };
                ix.context(file.len() as u64, *time);
                writer::push_task(&mut file, &tracking_stamp(*time, *tid), &task);
                tracker.apply(Some(*time), ContextUpdate::Exit { tid: *tid });
            }
            Entry::Cgroup { time, id, path } => {
                let path = path.as_bytes();
                ix.context(file.len() as u64, *time);
                writer::push_cgroup(&mut file, &tracking_stamp(*time, 0), *id, path);
                tracker.apply(Some(*time), ContextUpdate::Cgroup { id: *id, path });
            }
        }
    }
    if index.is_some() {
        let at = file.len() as u64;
        ix.push(&mut file, at);
    }
    let data_size = file.len() as u64 - FILE_HEADER_SIZE;
    let cmdline = vec!["uevrec".to_string(), "record".to_string()];
    let meta = FileMeta {
        events: &events,
        tracing: TracingSpec {
            long_size: 8,
            page_size: 4096,
            header_page: HEADER_PAGE,
            header_event: "# compressed entry header\n",
        },
        formats: &formats,
        hostname: "host",
        osrelease: "6.18.0",
        version: "uevrec test",
        arch: "x86_64",
        nr_cpus: (4, 4),
        cmdline: &cmdline,
        sample_time: times
            .iter()
            .min()
            .zip(times.iter().max())
            .map(|(a, b)| (*a, *b)),
        clock: ClockRef {
            clockid: 0,
            wall_ns: 5,
            clockid_ns: 5,
            res_ns: 1,
        },
        tracking: context.then_some(TRACKING),
        build_ids: &[],
    };
    let trailer = writer::trailer(&meta, data_size);
    file.extend_from_slice(&trailer.bytes);
    file[..FILE_HEADER_SIZE as usize].copy_from_slice(&trailer.header);
    let lines = String::from_utf8(expected).unwrap();
    (file, lines.lines().map(String::from).collect())
}

/// A trailer of the tracking attr for thread `tid` at `time`.
fn tracking_stamp(time: u64, tid: u32) -> Stamp {
    Stamp {
        id: TRACKING.id,
        pid: tid,
        tid,
        time,
        cpu: 0,
    }
}

/// Decode `file` as `uevrec decode` does; the lines and the decoder's error count.
fn decode(file: &[u8]) -> (Vec<String>, usize) {
    decode_with(file, false)
}

/// [`decode`] with context on or off (`--no-context`).
fn decode_with(file: &[u8], context: bool) -> (Vec<String>, usize) {
    let opts = DecodeOptions {
        context,
        ..DecodeOptions::default()
    };
    let (out, stats) = decode_whole(file, opts);
    let text = String::from_utf8(out).unwrap();
    (text.lines().map(String::from).collect(), stats.errors.len())
}

fn stamp(time: u64, cpu: u32, pid: u32) -> RecordStamp {
    RecordStamp {
        time_unix_ns: Some(time),
        cpu,
        pid,
        tid: pid + 1,
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn decodes_to_the_live_lines_in_time_order() {
    let t = 1_795_345_200_000_000_000;
    let entries = vec![
        Entry::Sample {
            event: 0,
            stamp: stamp(t + 30, 1, 10),
            raw: exec_raw(10, "/bin/true"),
        },
        Entry::Sample {
            event: 0,
            stamp: stamp(t + 10, 0, 11),
            raw: exec_raw(11, "/usr/bin/a-much-longer-name"),
        },
        Entry::Round,
        Entry::Lost {
            time: t + 40,
            cpu: 1,
            lost: 3,
        },
        Entry::Sample {
            event: 1,
            stamp: stamp(t + 50, 0, 12),
            raw: late_raw(-5, u64::MAX),
        },
        Entry::Round,
        Entry::Sample {
            event: 1,
            stamp: stamp(t + 45, 1, 13),
            raw: late_raw(127, 1),
        },
    ];
    let (file, live) = build(&entries);
    let (decoded, errors) = decode(&file);
    assert_eq!(errors, 0);
    assert_eq!(decoded.len(), live.len(), "{decoded:#?}");
    assert_eq!(sorted(decoded.clone()), sorted(live));
    // Time order: the two windows are merged by time.
    let times: Vec<&str> = decoded.iter().map(|l| &l[..40]).collect();
    let mut in_order = times.clone();
    in_order.sort();
    assert_eq!(times, in_order, "{decoded:#?}");
    assert!(decoded[0].contains("a-much-longer-name"), "{decoded:#?}");
    assert!(decoded[2].contains("\"lost\":3"), "{decoded:#?}");
    assert!(decoded[3].contains("\"small\":127"), "{decoded:#?}");
}

/// Names and cgroups from the written records, each sample with those of its moment: a
/// name from the scan (time 0), a fork inheriting it, a rename staged after a sample
/// that is older than it (sorted by time: the sample keeps the old name), an exit, and a
/// cgroup made during the run; `--no-context` decodes none of it, and a file without
/// context has no tracking attr.
#[test]
fn context_records_decode_to_the_live_keys() {
    let t = 1_795_345_200_000_000_000;
    let entries = vec![
        Entry::Comm {
            time: 0,
            tid: 11,
            comm: "shell",
        },
        Entry::Cgroup {
            time: 0,
            id: 40,
            path: "/system.slice/docker-0123456789abcdef.scope",
        },
        Entry::Round,
        Entry::Fork {
            time: t + 5,
            tid: 12,
            parent: 11,
        },
        Entry::Sample {
            event: 0,
            stamp: stamp(t + 10, 0, 11),
            raw: exec_raw(12, "/bin/true"),
        },
        Entry::Comm {
            time: t + 20,
            tid: 12,
            comm: "true",
        },
        Entry::Sample {
            event: 1,
            stamp: stamp(t + 30, 1, 11),
            raw: late_raw(1, 2),
        },
        Entry::Exit {
            time: t + 40,
            tid: 12,
        },
        Entry::Cgroup {
            time: t + 41,
            id: 41,
            path: "/made/later",
        },
    ];
    let (file, live) = build_with(&entries, true);
    let (decoded, errors) = decode_with(&file, true);
    assert_eq!(errors, 0);
    assert_eq!(decoded, live);
    assert!(
        decoded[0].contains(r#""tid":12,"comm":"shell","fields""#),
        "{decoded:#?}"
    );
    assert!(
        decoded[1].contains(r#""tid":12,"comm":"true","fields""#),
        "{decoded:#?}"
    );
    // No key is in the file itself: off decodes none.
    let (plain, _) = decode_with(&file, false);
    assert!(plain.iter().all(|l| !l.contains("comm")), "{plain:#?}");
    // The tracking attr is the third, named as perf names it.
    let (data, _) = PerfData::open(&file).unwrap();
    assert_eq!(data.events().len(), 3);
    assert_eq!(data.event_name(2), writer::TRACKING_NAME);
    let (data, _) = PerfData::open(&build(&entries[4..5]).0).unwrap();
    assert_eq!(data.events().len(), 2);
}

/// Each record reads back as the change it was written for; names and paths end at a NUL
/// and are cut at [`writer::MAX_NAME`] bytes.
#[test]
fn context_records_read_back() {
    use uevrec_parsers::perf_sample::{Record, SampleFormat, sample_type};
    let f = SampleFormat::new(
        sample_type::IDENTIFIER | sample_type::TID | sample_type::TIME | sample_type::CPU,
        true,
    )
    .unwrap();
    let long = "x".repeat(writer::MAX_NAME + 10);
    let mut out = Vec::new();
    let s = tracking_stamp(77, 5);
    writer::push_comm(&mut out, &s, 5, 5, b"name\0junk", true);
    writer::push_task(
        &mut out,
        &s,
        &Task {
            fork: true,
            pid: 5,
            ppid: 4,
            tid: 5,
            ptid: 4,
        },
    );
    writer::push_cgroup(&mut out, &s, 99, long.as_bytes());
    let mut at = 0;
    let mut got = Vec::new();
    while at < out.len() {
        let size = usize::from(u16::from_ne_bytes([out[at + 6], out[at + 7]]));
        assert_eq!(size % 8, 0);
        let rec = f.parse(&out[at..at + size]).unwrap();
        if let Record::Comm { exec, .. } = rec {
            assert!(exec);
        }
        let (time, update) = rec.context_update().unwrap();
        assert_eq!(time, Some(77));
        got.push(format!("{update:?}"));
        at += size;
    }
    let want = [
        // An exec's COMM (pid == tid) is the process's exec (issue 38: stacks start over).
        format!(
            "{:?}",
            ContextUpdate::Exec {
                pid: 5,
                comm: b"name"
            }
        ),
        format!(
            "{:?}",
            ContextUpdate::Fork {
                tid: 5,
                parent_tid: 4
            }
        ),
        format!(
            "{:?}",
            ContextUpdate::Cgroup {
                id: 99,
                path: &long.as_bytes()[..writer::MAX_NAME]
            }
        ),
    ];
    assert_eq!(got, want);
}

#[test]
fn records_are_padded_to_eight_bytes() {
    for len in [0, 1, 3, 4, 5, 12, 13] {
        let mut out = Vec::new();
        let s = Stamp {
            id: 1,
            pid: 2,
            tid: 3,
            time: 4,
            cpu: 5,
        };
        for cgroup in [None, Some(9)] {
            out.clear();
            writer::push_sample(&mut out, &s, &vec![0xab; len], cgroup).unwrap();
            assert_eq!(out.len() % 8, 0, "raw of {len} bytes");
            assert_eq!(u16::from_ne_bytes([out[6], out[7]]) as usize, out.len());
        }
    }
}

#[test]
fn an_entry_beyond_a_perf_record_is_refused() {
    let s = Stamp {
        id: 1,
        pid: 2,
        tid: 3,
        time: 4,
        cpu: 5,
    };
    let mut out = Vec::new();
    writer::push_sample(&mut out, &s, &vec![0; MAX_RAW], Some(1)).unwrap();
    assert_eq!(out.len() % 8, 0);
    assert!(out.len() <= usize::from(u16::MAX));
    out.clear();
    assert_eq!(
        writer::push_sample(&mut out, &s, &vec![0; MAX_RAW + 1], None),
        Err(TooLarge { len: MAX_RAW + 1 })
    );
    assert!(out.is_empty(), "nothing written for a refused entry");
}

#[test]
fn the_placeholder_header_has_no_events() {
    let mut file = writer::placeholder_header().to_vec();
    writer::push_finished_round(&mut file);
    // A killed run's file: the reader says it is unfinished.
    let Err(e) = PerfData::open(&file) else {
        panic!("an unfinished file is refused");
    };
    assert!(e.to_string().contains("unfinished"), "{e}");
}

/// Records of rounds that overlap in time as the rings of a live recording do (each
/// round holds records from half a round back to half a round ahead), some context
/// records and losses, and now and then (`late`) a record older than what went out.
fn overlapping_rounds(
    rounds: &[Vec<(u64, u32, u32, u8)>],
    late: Option<(usize, usize)>,
) -> Vec<Entry> {
    let t0 = 1_700_000_000_000_000_000u64;
    let comms = ["sh", "cat", "a-longer-name"];
    let mut entries = Vec::new();
    for (r, items) in rounds.iter().enumerate() {
        let base = t0 + r as u64 * 1_000;
        for (j, &(dt, cpu, tid, what)) in items.iter().enumerate() {
            let mut time = base + dt - 500;
            if late == Some((r, j)) {
                time = t0 + dt % 10;
            }
            let tid = 100 + tid;
            entries.push(match what {
                0 => Entry::Comm {
                    time,
                    tid,
                    comm: comms[(dt % 3) as usize],
                },
                1 => Entry::Fork {
                    time,
                    tid,
                    parent: 100,
                },
                2 => Entry::Exit { time, tid },
                3 => Entry::Lost {
                    time,
                    cpu,
                    lost: dt + 1,
                },
                4 => Entry::Cgroup {
                    time,
                    id: u64::from(tid),
                    path: "/system.slice/x.service",
                },
                5..=7 => Entry::Sample {
                    event: 1,
                    stamp: RecordStamp {
                        time_unix_ns: Some(time),
                        cpu,
                        pid: tid,
                        tid,
                    },
                    raw: late_raw(what as i8, dt),
                },
                _ => Entry::Sample {
                    event: 0,
                    stamp: RecordStamp {
                        time_unix_ns: Some(time),
                        cpu,
                        pid: tid,
                        tid,
                    },
                    raw: exec_raw(tid as i32, &format!("/bin/p{dt}")),
                },
            });
        }
        entries.push(Entry::Round);
    }
    entries
}

/// Rounds (`rounds` of them) of `items` records each for [`overlapping_rounds`]: (time
/// in the round, cpu, thread, what).
fn rounds_of(
    items: std::ops::Range<usize>,
    rounds: std::ops::Range<usize>,
) -> impl Strategy<Value = Vec<Vec<(u64, u32, u32, u8)>>> {
    let round = prop::collection::vec((0u64..2_000, 0u32..4, 0u32..6, 0u8..12), items);
    prop::collection::vec(round, rounds)
}

/// Three rounds, overlapping (times 500 before the round's base to 1,500 after); the
/// second round holds records both out at its end (older than the first round's newest)
/// and held past it.
fn three_rounds() -> Vec<Vec<(u64, u32, u32, u8)>> {
    vec![
        vec![(600, 0, 1, 9), (700, 1, 2, 0), (900, 0, 1, 9)],
        vec![
            (0, 1, 2, 9),
            (300, 0, 1, 9),
            (1_200, 1, 2, 9),
            (1_300, 0, 3, 1),
        ],
        vec![(100, 0, 3, 9), (800, 1, 2, 3), (1_400, 0, 1, 9)],
    ]
}

#[test]
fn ranges_cut_a_recording_and_write_its_bytes() {
    // A hand-made case ([`three_rounds`]); a cut after the last round leaves an empty
    // last range that only lets out what is held.
    let rounds = three_rounds();
    let (file, _) = build_with(&overlapping_rounds(&rounds, None), true);
    for (context, schema) in [(true, true), (false, false)] {
        let opts = DecodeOptions {
            context,
            schema,
            ..DecodeOptions::default()
        };
        let (one, seen) = decode_whole(&file, opts);
        let (cut, summed, ranges, stopped) = decode_in_ranges(&file, opts);
        assert_eq!(stopped, None);
        assert_eq!(
            ranges, 4,
            "the first, and a range after each of the three rounds"
        );
        assert_eq!(String::from_utf8_lossy(&cut), String::from_utf8_lossy(&one));
        assert_eq!(
            (summed.records, summed.lost, summed.late),
            (seen.records, seen.lost, 0)
        );
        assert_eq!(summed.records, 7);
    }
}

/// Two `PERF_RECORD_LOST` records claiming 2^63 + 1 lost records each: their sum is more
/// than a counter holds. Each is a `lost` line as the file says it; the decoding ends with
/// the notice that the total cannot be represented (`lost` stops at `u64::MAX`, never
/// wraps), whole or in ranges (the ranges' stats absorbed, the notice after the last).
#[test]
fn losses_past_a_counter_end_with_one_notice() {
    use uevrec_parsers::to_lines::LOST_OVERFLOW;
    let t = 1_795_345_200_000_000_000;
    let claim = (1 << 63) + 1;
    let entries = vec![
        Entry::Lost {
            time: t + 10,
            cpu: 0,
            lost: claim,
        },
        Entry::Round,
        Entry::Lost {
            time: t + 20,
            cpu: 1,
            lost: claim,
        },
        Entry::Round,
    ];
    let (file, _) = build(&entries);
    let (one, seen) = decode_whole(&file, DecodeOptions::default());
    let text = String::from_utf8(one.clone()).unwrap();
    assert_eq!(
        text.matches(&format!("\"lost\":{claim}")).count(),
        2,
        "{text}"
    );
    assert!(
        text.lines().last().unwrap().contains(LOST_OVERFLOW),
        "{text}"
    );
    assert_eq!((seen.lost, seen.lost_overflow), (u64::MAX, true));
    let (cut, summed, ranges, _) = decode_in_ranges(&file, DecodeOptions::default());
    assert!(ranges >= 2, "{ranges}");
    assert_eq!(String::from_utf8_lossy(&cut), text);
    assert_eq!((summed.lost, summed.lost_overflow), (u64::MAX, true));
}

proptest! {
    /// Overlapping rounds with context and losses, context and schema lines on or off,
    /// sometimes a late record (cutting stops there; the rest is one range): the ranges'
    /// lines put end to end are the bytes one decoder writes, and their counts add up to
    /// its counts.
    #[test]
    fn ranges_write_the_bytes_of_one_decoder(
        rounds in rounds_of(0..12, 1..10),
        late in prop::option::of((0usize..10, 0usize..12)),
        context in any::<bool>(),
        schema in any::<bool>(),
    ) {
        let (file, _) = build_with(&overlapping_rounds(&rounds, late), context);
        let opts = DecodeOptions { context, schema, ..DecodeOptions::default() };
        let (one, seen) = decode_whole(&file, opts);
        let (cut, summed, ranges, stopped) = decode_in_ranges(&file, opts);
        // A range after every round, unless the late record ended the cutting.
        prop_assert!(stopped.is_none() || late.is_some(), "{:?}", stopped);
        if stopped.is_none() {
            prop_assert_eq!(ranges, rounds.len() + 1);
        }
        prop_assert_eq!(String::from_utf8_lossy(&cut), String::from_utf8_lossy(&one));
        prop_assert_eq!(
            (summed.records, summed.lost, summed.late, summed.time_unknown, summed.error_count),
            (seen.records, seen.lost, seen.late, seen.time_unknown, seen.error_count)
        );
    }
}

proptest! {
    /// The same recordings written with a range index (a cut noted after every round),
    /// decoded in the ranges it gives for ranges of at least `target` bytes: with no late
    /// record every range starts where the one before ended and their lines put end to
    /// end are one decoder's bytes; with one, the ranges up to the first that does not
    /// join are a prefix of them (the binary decodes the rest again).
    #[test]
    fn index_ranges_write_the_bytes_of_one_decoder(
        rounds in rounds_of(0..12, 1..10),
        late in prop::option::of((0usize..10, 0usize..12)),
        context in any::<bool>(),
        schema in any::<bool>(),
        target in 1usize..600,
    ) {
        let (file, _) = build_indexed(&overlapping_rounds(&rounds, late), context, Some(1));
        let opts = DecodeOptions { context, schema, ..DecodeOptions::default() };
        let (one, seen) = decode_whole(&file, opts);
        let (cut, summed, _, failed) = match decode_in_index_ranges(&file, opts, target) {
            Ok(done) => done,
            Err(why) => {
                // Too few rounds, or too small for `target`.
                prop_assert!(why.contains("no cut"), "{}", why);
                return Ok(());
            }
        };
        let late_here = late.is_some_and(|(r, j)| rounds.get(r).is_some_and(|items| j < items.len()));
        prop_assert!(failed.is_none() || late_here, "{:?}", failed);
        if failed.is_none() {
            prop_assert_eq!(String::from_utf8_lossy(&cut), String::from_utf8_lossy(&one));
            prop_assert_eq!(
                (summed.records, summed.lost, summed.late, summed.time_unknown, summed.error_count),
                (seen.records, seen.lost, seen.late, seen.time_unknown, seen.error_count)
            );
        } else {
            prop_assert!(one.starts_with(&cut));
        }
    }

    /// A range index with one word of it changed (a cut's offset or limit, a context
    /// record's offset, a first sample's): refused, or its ranges joined and wrote one
    /// decoder's bytes, or the first range that does not join is found and the lines
    /// before it are a prefix of them. Never other bytes.
    #[test]
    fn a_wrong_index_never_gives_other_bytes(
        rounds in rounds_of(1..12, 2..10),
        context in any::<bool>(),
        schema in any::<bool>(),
        word in any::<prop::sample::Index>(),
        delta in prop_oneof![-600i64..600, Just(-8), Just(8), Just(1), Just(-1)],
    ) {
        let (mut file, _) = build_indexed(&overlapping_rounds(&rounds, None), context, Some(1));
        let opts = DecodeOptions { context, schema, ..DecodeOptions::default() };
        let (one, _) = decode_whole(&file, opts);
        let (data, records) = PerfData::open(&file).unwrap();
        let (start, end) = (records.offset() as usize, records.end() as usize);
        let index = RangeIndex::find(&file[start..end], start as u64, data.endian)
            .unwrap()
            .unwrap();
        // The index's words: each record's body, up to the tail.
        let mut words = Vec::new();
        let mut at = index.at as usize;
        while at < end - TAIL_SIZE {
            let size = usize::from(u16::from_ne_bytes([file[at + 6], file[at + 7]]));
            words.extend((at + 8..at + size).step_by(8));
            at += size;
        }
        prop_assume!(!words.is_empty());
        let w = words[word.index(words.len())];
        let v = u64::from_ne_bytes(file[w..w + 8].try_into().unwrap());
        file[w..w + 8].copy_from_slice(&v.wrapping_add_signed(delta).to_ne_bytes());
        match decode_in_index_ranges(&file, opts, 1) {
            Err(_) => {}
            Ok((cut, _, _, None)) => {
                prop_assert_eq!(String::from_utf8_lossy(&cut), String::from_utf8_lossy(&one));
            }
            Ok((cut, _, _, Some(_))) => prop_assert!(one.starts_with(&cut)),
        }
    }
}

#[test]
fn an_index_cuts_a_recording_where_it_says_and_writes_its_bytes() {
    // The hand-made case ([`three_rounds`]), indexed: a cut noted after each round but
    // the first (the round before a cut is read again).
    let rounds = three_rounds();
    let (file, _) = build_indexed(&overlapping_rounds(&rounds, None), true, Some(1));
    for (context, schema) in [(true, true), (false, false), (true, false)] {
        let opts = DecodeOptions {
            context,
            schema,
            ..DecodeOptions::default()
        };
        let (one, _) = decode_whole(&file, opts);
        let (cut, summed, ranges, failed) = decode_in_index_ranges(&file, opts, 1).unwrap();
        assert_eq!(failed, None);
        assert_eq!(
            ranges, 3,
            "the first, and a range after the second and third rounds"
        );
        assert_eq!(String::from_utf8_lossy(&cut), String::from_utf8_lossy(&one));
        assert_eq!(summed.records, 7);
    }
    // Without an index, and a file too small for the ranges asked.
    let (plain, _) = build_with(&overlapping_rounds(&rounds, None), true);
    let e = decode_in_index_ranges(&plain, DecodeOptions::default(), 1).unwrap_err();
    assert_eq!(e, "no range index");
    let e = decode_in_index_ranges(&file, DecodeOptions::default(), 1 << 20).unwrap_err();
    assert!(e.contains("no cut 1048576 bytes or more"), "{e}");
}

proptest! {
    /// Any samples of both events in any order, with rounds anywhere: the decoded lines
    /// are the live lines (as a multiset; the reader orders them by time).
    #[test]
    fn any_samples_round_trip(
        items in prop::collection::vec(
            (0usize..2, 0u64..1_000, 0u32..4, 0u32..100_000, any::<i8>(), any::<u64>(), any::<bool>()),
            1..60,
        )
    ) {
        let t0 = 1_700_000_000_000_000_000u64;
        let mut entries = Vec::new();
        for (event, dt, cpu, pid, small, big, round) in items {
            let raw = if event == 0 {
                exec_raw(pid as i32, &format!("/bin/p{big}"))
            } else {
                late_raw(small, big)
            };
            entries.push(Entry::Sample { event, stamp: stamp(t0 + dt, cpu, pid), raw });
            if round {
                entries.push(Entry::Round);
            }
        }
        let (file, live) = build(&entries);
        let (decoded, errors) = decode(&file);
        prop_assert_eq!(errors, 0);
        prop_assert_eq!(sorted(decoded), sorted(live));
    }
}
