//! Pure tier: a trace.dat decoded in windows of time ([`plan_windows`], [`decode_window`],
//! the schema lines of events a window before described cut out, [`Windows::finish`])
//! gives the bytes one decoding gives, whenever every window vouches for its lines; and
//! every window does when each CPU's items come in time order. Random files: 1–4 CPUs of
//! pages of two events with formats and one without, deltas of 0 (ties) and up, pages that
//! lost events (with and without a stored count), CPUs with and without their final
//! `stats`, and (in the second property) pages that start before the page ahead ended.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use uevrec_parsers::to_lines::trace_dat::{
    FileDecoder, SchemaSpan, decode_lines, decode_window, decode_with, plan_windows,
};
use uevrec_parsers::to_lines::{DecodeOptions, DecodeStats, LOST_OVERFLOW};
use uevrec_parsers::trace_dat::TraceDat;
use uevrec_parsers::trace_dat::writer::header;
use uevrec_parsers::{Judged, RecordJudge};

#[path = "common/trace_dat.rs"]
mod fixture;
use fixture::{Entry, PAGE, seq_format};

/// Event ids: two with formats, one without.
const TYPES: [u16; 3] = [2001, 2002, 999];
/// In a [`PageSpec`]: not an event but an absolute time stamp (its "delta" the time).
const STAMP: u16 = u16::MAX;

/// One page to build: its time, what it lost before it, its events (type, delta).
#[derive(Debug, Clone)]
struct PageSpec {
    time: u64,
    missed: Option<Option<u64>>,
    events: Vec<(u16, u32)>,
}

fn page(spec: &PageSpec, seq: &mut u64) -> Vec<u8> {
    let entries: Vec<Entry> = (spec.events.iter())
        .map(|&(ty, delta)| {
            if ty == STAMP {
                return Entry::Stamp(delta);
            }
            *seq += 1;
            Entry::Record {
                ty,
                delta,
                pid: 40 + (*seq % 3) as i32,
                seq: *seq,
            }
        })
        .collect();
    fixture::page(spec.time, spec.missed, &entries)
}

/// A v6 file of these CPUs' pages; `stats[cpu]`: the CPU's final `overrun`, if stored.
fn build(cpus: &[Vec<PageSpec>], stats: &[Option<u64>]) -> Vec<u8> {
    let systems = [(
        "test".to_string(),
        vec![seq_format("one", 2001), seq_format("two", 2002)],
    )];
    let cpu_stats: Vec<(u32, String)> = stats
        .iter()
        .enumerate()
        .filter_map(|(cpu, s)| {
            s.map(|n| {
                (
                    cpu as u32,
                    format!("entries: 0\noverrun: {n}\ncommit overrun: 0\ndropped events: 0\n"),
                )
            })
        })
        .collect();
    let meta = fixture::meta(
        &systems,
        "40 forty\n41 forty-one\n",
        &cpu_stats,
        Some("40 40\n41 40\n"),
        Some("Linux host 6.18 #1 x86_64"),
    );
    let sizes: Vec<u64> = cpus.iter().map(|p| (p.len() * PAGE) as u64).collect();
    let (mut bytes, offsets) = header(&meta, &sizes);
    let mut seq = 0;
    for (pages, &at) in cpus.iter().zip(&offsets) {
        bytes.resize(at as usize, 0);
        for spec in pages {
            bytes.extend_from_slice(&page(spec, &mut seq));
        }
    }
    bytes
}

fn opts() -> DecodeOptions {
    DecodeOptions {
        schema: true,
        context: true,
        ..DecodeOptions::default()
    }
}

/// One decoding's lines.
fn whole(file: &TraceDat<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    decode_lines(file, &opts(), &|_, _| true, &mut |b| {
        out.extend_from_slice(b);
        true
    })
    .unwrap();
    out
}

/// A judge that leaves out the records of thread 41 and counts them (its forks into the
/// same count).
struct NotThread41(Arc<AtomicU64>);

impl RecordJudge for NotThread41 {
    fn keep(&mut self, record: &Judged<'_>) -> bool {
        let keep = record.stamp.tid != 41;
        if !keep {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        keep
    }

    fn fork(&self) -> Box<dyn RecordJudge> {
        Box::new(NotThread41(Arc::clone(&self.0)))
    }
}

/// The decoder of `file`, with the judge of `left_out` when there is one.
fn decoder<'f>(file: &'f TraceDat<'f>, left_out: Option<&Arc<AtomicU64>>) -> FileDecoder<'f> {
    let judge = left_out.map(|n| Box::new(NotThread41(Arc::clone(n))) as Box<dyn RecordJudge>);
    FileDecoder::new(file, &opts(), &|_, _| true).with_judge(judge)
}

/// One decoding's lines with the judge of `left_out`.
fn whole_judged(file: &TraceDat<'_>, left_out: &Arc<AtomicU64>) -> Vec<u8> {
    let mut out = Vec::new();
    let d = decoder(file, Some(left_out));
    decode_with(
        &d,
        &mut |b| {
            out.extend_from_slice(b);
            true
        },
        None,
    )
    .unwrap();
    out
}

/// The lines of the windows as `uevrec decode --threads` writes them, when every window
/// vouches for its lines (`None` when one does not, or the file is not cut).
fn in_windows(file: &TraceDat<'_>, count: usize) -> Option<Vec<u8>> {
    in_windows_judged(file, count, None)
}

/// [`in_windows`], with the judge of `left_out` when there is one.
fn in_windows_judged(
    file: &TraceDat<'_>,
    count: usize,
    left_out: Option<&Arc<AtomicU64>>,
) -> Option<Vec<u8>> {
    let d = decoder(file, left_out);
    let mut windows = plan_windows(&d, count).ok()?;
    let mut out = Vec::new();
    let mut described = Vec::new();
    let mut last_time = None;
    let mut stats = DecodeStats::default();
    for i in 0..windows.windows.len() {
        let mut pieces: Vec<(Vec<u8>, Vec<SchemaSpan>)> = Vec::new();
        let done = decode_window(&d, &windows.windows[i], &mut |lines, spans| {
            pieces.push((std::mem::take(lines), spans.to_vec()));
            true
        });
        if !done.sure || !windows.joins(&done, i + 1) {
            return None;
        }
        for (mut lines, spans) in pieces {
            let mut cut = Vec::new();
            for s in spans {
                if described.len() <= s.event {
                    described.resize(s.event + 1, false);
                }
                if std::mem::replace(&mut described[s.event], true) {
                    cut.push(s.start..s.end);
                }
            }
            for r in cut.into_iter().rev() {
                lines.drain(r);
            }
            out.extend_from_slice(&lines);
        }
        last_time = done.last_time.or(last_time);
        stats.absorb(done.stats);
    }
    out.extend_from_slice(&windows.finish(&d, last_time, &mut stats));
    Some(out)
}

/// A CPU's pages: each starts `gap` after the page before ended, or (`overlap`) up to
/// `back` before that.
fn cpu_pages(overlap: bool) -> impl Strategy<Value = Vec<PageSpec>> {
    let event =
        (0..TYPES.len(), prop_oneof![Just(0u32), 0u32..40]).prop_map(|(t, d)| (TYPES[t], d));
    let missed = prop_oneof![
        6 => Just(None),
        1 => (1u64..5).prop_map(|n| Some(Some(n))),
        1 => Just(Some(None)),
    ];
    let spec = (
        prop::collection::vec(event, 0..8),
        missed,
        0u64..50,
        0u64..30,
    );
    prop::collection::vec(spec, 1..7).prop_map(move |pages| {
        let mut end = 1000u64;
        let mut page_time = 0u64;
        pages
            .into_iter()
            .map(|(events, missed, gap, back)| {
                let mut time = end + gap;
                if overlap {
                    time = time.saturating_sub(back).max(page_time);
                }
                page_time = time;
                end = time + events.iter().map(|&(_, d)| u64::from(d)).sum::<u64>();
                PageSpec {
                    time,
                    missed,
                    events,
                }
            })
            .collect()
    })
}

fn files(overlap: bool) -> impl Strategy<Value = (Vec<Vec<PageSpec>>, Vec<Option<u64>>)> {
    prop::collection::vec((cpu_pages(overlap), prop::option::of(0u64..20)), 1..5).prop_map(|cpus| {
        // A ring's final stats count at least what its pages said it lost.
        cpus.into_iter()
            .map(|(pages, extra)| {
                let said: u64 = pages
                    .iter()
                    .map(|p| match p.missed {
                        Some(Some(n)) => n,
                        Some(None) => 1,
                        None => 0,
                    })
                    .sum();
                let total = extra.map(|e| said + e);
                (pages, total)
            })
            .unzip()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn windows_in_time_order_write_the_bytes_of_one_decoding(
        (cpus, stats) in files(false),
        count in 2usize..7,
    ) {
        let bytes = build(&cpus, &stats);
        let file = TraceDat::parse(&bytes).unwrap();
        let want = whole(&file);
        let d = FileDecoder::new(&file, &opts(), &|_, _| true);
        if let Err(why) = plan_windows(&d, count) {
            // Too few pages (or page times) to cut: nothing to check.
            prop_assert!(why.contains("too few"), "{}", why);
            return Ok(());
        }
        let got = in_windows(&file, count);
        prop_assert!(got.is_some(), "a window in time order did not vouch for its lines");
        let got = got.unwrap();
        prop_assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want)
        );
    }

    #[test]
    fn a_judge_keeps_the_same_records_in_windows_as_in_one_decoding(
        (cpus, stats) in files(false),
        count in 2usize..7,
    ) {
        let bytes = build(&cpus, &stats);
        let file = TraceDat::parse(&bytes).unwrap();
        let (one, many) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let want = whole_judged(&file, &one);
        prop_assert!(!String::from_utf8_lossy(&want).contains("\"tid\":41,"));
        let all = String::from_utf8_lossy(&whole(&file)).matches("\"tid\":41,").count();
        prop_assert_eq!(one.load(Ordering::Relaxed), all as u64);
        if let Some(got) = in_windows_judged(&file, count, Some(&many)) {
            prop_assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want)
            );
            prop_assert_eq!(many.load(Ordering::Relaxed), all as u64);
        }
    }

    #[test]
    fn windows_that_vouch_for_their_lines_are_right_even_when_items_go_back(
        (cpus, stats) in files(true),
        count in 2usize..7,
    ) {
        let bytes = build(&cpus, &stats);
        let file = TraceDat::parse(&bytes).unwrap();
        if let Some(got) = in_windows(&file, count) {
            let want = whole(&file);
            prop_assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want)
            );
        }
    }
}

/// A CPU whose second page starts before its first ended: the windows do not vouch for
/// their lines (the file is decoded again whole).
#[test]
fn items_that_go_back_across_pages_are_noticed() {
    let first = PageSpec {
        time: 1000,
        missed: None,
        events: vec![(2001, 0), (2001, 30), (2001, 30), (2001, 30)],
    };
    let second = PageSpec {
        time: 1010,
        missed: None,
        events: vec![(2001, 0), (2001, 30), (2001, 30), (2001, 30)],
    };
    let other = |time| PageSpec {
        time,
        missed: None,
        events: vec![(2002, 0), (2002, 5)],
    };
    let cpus = vec![
        vec![first, second],
        vec![other(1000), other(1020), other(1040), other(1200)],
    ];
    let bytes = build(&cpus, &[None, None]);
    let file = TraceDat::parse(&bytes).unwrap();
    for count in 2..4 {
        assert_eq!(in_windows(&file, count), None, "{count} windows");
    }
}

/// Two CPUs of four pages, losses with and without a stored count, both events in every
/// window: cut into 2 to 6 windows, each vouches for its lines, and they are the bytes of
/// one decoding (schema lines once, the losses the stats add at the end).
#[test]
fn a_file_in_windows_is_one_decoding() {
    let spec = |time, missed, ty| PageSpec {
        time,
        missed,
        events: vec![(ty, 0), (2001, 3), (2002, 3), (999, 3)],
    };
    let cpus = vec![
        vec![
            spec(1000, None, 2001),
            spec(1100, Some(Some(3)), 2002),
            spec(1200, None, 2001),
            spec(1300, Some(None), 2002),
        ],
        vec![
            spec(1005, Some(Some(2)), 2002),
            spec(1105, None, 2001),
            spec(1205, Some(Some(1)), 2002),
            spec(1305, None, 2001),
        ],
    ];
    let bytes = build(&cpus, &[Some(20), None]);
    let file = TraceDat::parse(&bytes).unwrap();
    let want = whole(&file);
    let text = String::from_utf8_lossy(&want);
    assert_eq!(text.matches("\"uevrec\":\"schema\"").count(), 2, "{text}");
    assert!(text.contains("\"uevrec\":\"lost\""), "{text}");
    let d = FileDecoder::new(&file, &opts(), &|_, _| true);
    for count in 2..7 {
        let windows = plan_windows(&d, count).unwrap();
        assert!(
            windows.windows.len() >= 2,
            "{count}: {}",
            windows.windows.len()
        );
        let got = in_windows(&file, count).expect("every window vouches");
        assert_eq!(String::from_utf8_lossy(&got), text, "{count} windows");
    }
}

/// A page whose absolute time stamp takes its time back, past where the next window
/// starts: that window does not vouch for its lines (it would pass the older record over
/// as the window before's, which ended the CPU before it).
#[test]
fn an_absolute_time_stamp_going_back_is_noticed() {
    let back = PageSpec {
        time: 1000,
        missed: None,
        events: vec![(2001, 0), (2001, 100), (STAMP, 1050), (2001, 0)],
    };
    let other = |time| PageSpec {
        time,
        missed: None,
        events: vec![(2002, 0)],
    };
    let cpus = vec![
        vec![back],
        vec![
            other(1000),
            other(1010),
            other(1070),
            other(1080),
            other(1090),
        ],
    ];
    let bytes = build(&cpus, &[None, None]);
    let file = TraceDat::parse(&bytes).unwrap();
    let text = String::from_utf8(whole(&file)).unwrap();
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("\"fields\":{\"seq\""))
            .count(),
        8,
        "{text}"
    );
    // Two windows, the second from 1070: the record at 1050 comes after the one at 1100.
    assert_eq!(in_windows(&file, 2), None);
}

/// Two CPUs of three pages (from 1000 and 1005, 100 apart) of both events, each page
/// losing what `missed` says before it.
fn three_pages_each(missed: [[Option<Option<u64>>; 3]; 2]) -> Vec<Vec<PageSpec>> {
    (missed.iter().zip([1000, 1005]))
        .map(|(pages, first)| {
            (pages.iter().zip(0..))
                .map(|(&missed, i)| PageSpec {
                    time: first + 100 * i,
                    missed,
                    events: vec![(2001, 0), (2002, 5)],
                })
                .collect()
        })
        .collect()
}

/// A page that lost records on a CPU whose final stats say it lost none (its pages were
/// not all read for the loss accounting): the window that meets it does not vouch for its
/// lines.
#[test]
fn a_loss_the_stats_do_not_know_is_noticed() {
    let cpus = three_pages_each([[None, None, Some(Some(2))], [None; 3]]);
    let bytes = build(&cpus, &[Some(0), Some(0)]);
    let file = TraceDat::parse(&bytes).unwrap();
    assert!(
        String::from_utf8(whole(&file))
            .unwrap()
            .contains("\"lost\":2")
    );
    assert_eq!(in_windows(&file, 2), None);
}

/// Pages on two CPUs claiming 2^63 + 1 lost records each (stored counts, no final
/// stats): their sum is more than a counter holds. One decoding writes each claim as a
/// `lost` line and ends with the notice that the total cannot be represented; windows,
/// each below the limit on its own, end with the same notice ([`Windows::finish`] sees
/// their absorbed stats): the same bytes.
#[test]
fn losses_past_a_counter_end_with_one_notice_whole_or_in_windows() {
    let claim = (1 << 63) + 1;
    let cpus = three_pages_each([
        [None, None, Some(Some(claim))],
        [Some(Some(claim)), None, None],
    ]);
    let bytes = build(&cpus, &[None, None]);
    let file = TraceDat::parse(&bytes).unwrap();
    let text = String::from_utf8(whole(&file)).unwrap();
    assert_eq!(
        text.matches(&format!("\"lost\":{claim}")).count(),
        2,
        "{text}"
    );
    let last = text.lines().last().unwrap();
    assert!(last.contains(LOST_OVERFLOW), "{text}");
    assert_eq!(text.matches(LOST_OVERFLOW).count(), 1, "{text}");
    for count in 2..4 {
        let got = in_windows(&file, count).expect("every window vouches");
        assert_eq!(String::from_utf8_lossy(&got), text, "{count} windows");
    }
}
