//! `decode --threads N` on a whole perf.data in ranges: N workers each decode a range of
//! records from start to lines, on their own, and the lines go to the writer in range
//! order: the same bytes as one thread. The cuts come from one of two places ([`Plan`]):
//! the range index a finished `uevrec record --raw` file ends with
//! ([`uevrec_parsers::perf_data::index`]; the default), or, with `--range-size` on a file
//! without one, a pass over the record headers ahead of the workers. Each range after the
//! first is checked against how the one before ended ([`RangeEnd::joins`]); the index,
//! its checks and what the ranges hold in memory: docs/record-raw.md ("The range index").

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_channel::{Receiver, Sender};
use uevrec_parsers::RecordJudge;
use uevrec_parsers::perf_data::PerfDataError;
use uevrec_parsers::perf_data::records::Records;
use uevrec_parsers::to_lines::DecodeStats;
use uevrec_parsers::to_lines::perf_data::{DecodeRange, RangeEnd, RangePlanner, RangeStart};

use super::parallel::{Handed, Par, take_lines};

/// What a worker sends about a range.
enum Msg {
    /// The state it starts its own records in (a range after the first, before any line).
    Start(usize, RangeStart),
    /// A piece of its lines.
    Piece(usize, Vec<u8>),
    /// How it ended (after its last piece).
    End(usize, RangeEnd),
}

/// Where the ranges come from.
pub(crate) enum Plan<'p> {
    /// Cut as the records are read, by this thread ahead of the workers
    /// ([`RangePlanner`], `--range-size` on a file without an index: perf's, a killed
    /// recording). On 2 CPUs slower than the staged path (BENCHMARKS.md §30, §31): for
    /// many CPUs.
    Planner(Box<RangePlanner<'p>>),
    /// Cut where the file's range index says (`record --raw`): nothing read ahead. Each
    /// range after the first tells the state it starts in (time order, records held,
    /// events described) before its first line.
    Index(Vec<DecodeRange>),
}

/// What the ranges tell the mapping of the file they read.
pub(crate) struct Pages<'a> {
    /// The bytes `from..to` are not needed any more.
    pub forget: &'a dyn Fn(usize, usize),
    /// A worker reads the bytes `from..to` next: map them in (one call, not a page fault
    /// a page; BENCHMARKS.md §31).
    pub populate: &'a (dyn Fn(usize, usize) + Sync),
}

/// For an input that is not mapped.
pub(crate) const NO_PAGES: Pages<'static> = Pages {
    forget: &|_, _| (),
    populate: &|_, _| (),
};

/// How a decoding in ranges ended.
pub(crate) struct RangesDone {
    /// What the ranges saw, summed.
    pub stats: DecodeStats,
    /// The framing error that ended the file, if one did.
    pub stopped: Option<PerfDataError>,
    /// How many ranges were written.
    pub ranges: usize,
    /// Why the cutting ended before the file's end (the rest was one range).
    pub cut_short: Option<String>,
    /// The file has `HEADER_CLOCK_DATA` (a pipe-mode file says so among its records).
    pub clock_data: bool,
    /// A range did not start where the one before it ended: why (the lines of the ranges
    /// before it were written, `bytes` of them; the rest is to be decoded again).
    pub failed: Option<String>,
    /// Bytes of lines handed to the writer.
    pub bytes: u64,
}

/// A range's messages that came before it was due, and how it ended once it did.
#[derive(Default)]
struct Waiting {
    start: Option<RangeStart>,
    pieces: Vec<Vec<u8>>,
    end: Option<RangeEnd>,
}

/// The lines of the ranges, in order, to the writer.
struct Forward<'p> {
    out: Handed<'p>,
    done: Receiver<Msg>,
    waiting: BTreeMap<usize, Waiting>,
    written: usize,
    /// The range due starts where the one before ended (checked): its pieces go out as
    /// they come.
    due_ok: bool,
    /// How the range before the one due ended.
    before: Option<RangeEnd>,
    /// Where each range planned and not yet written carries from.
    carries: BTreeMap<usize, usize>,
    let_go: usize,
    stats: DecodeStats,
    stopped: Option<PerfDataError>,
    failed: Option<String>,
}

impl Forward<'_> {
    /// After the ranges ended early (a range that does not join, a writer that stopped):
    /// wait for the workers to finish the ranges they are at (no more are given) and put
    /// every buffer of lines not written back into the pool.
    fn give_back_all(&mut self) {
        if self.going() {
            return;
        }
        for msg in self.done.iter() {
            if let Msg::Piece(_, lines) = msg {
                self.out.give_back(lines);
            }
        }
        for (_, waiting) in std::mem::take(&mut self.waiting) {
            for lines in waiting.pieces {
                self.out.give_back(lines);
            }
        }
    }

    /// Whether more may be planned and sent: the writer takes lines and no range failed.
    fn going(&self) -> bool {
        self.out.whole && self.failed.is_none()
    }

    /// Take one message (waiting for it when `wait`): false when none came.
    fn take(&mut self, wait: bool, forget: &dyn Fn(usize, usize), file_len: usize) -> bool {
        let got = if wait {
            self.done.recv().ok()
        } else {
            self.done.try_recv().ok()
        };
        let Some(msg) = got else {
            return false;
        };
        match msg {
            Msg::Start(i, start) => self.waiting.entry(i).or_default().start = Some(start),
            Msg::Piece(i, lines) if i == self.written && self.due_ok => self.out.send(lines),
            Msg::Piece(i, lines) => self.waiting.entry(i).or_default().pieces.push(lines),
            Msg::End(i, end) => self.waiting.entry(i).or_default().end = Some(end),
        }
        self.advance(forget, file_len);
        true
    }

    /// Check the range due once its start came, write what it sent, and move on past
    /// every range that ended.
    fn advance(&mut self, forget: &dyn Fn(usize, usize), file_len: usize) {
        while self.failed.is_none() {
            if !self.due_ok {
                let i = self.written;
                if let Some(before) = &self.before {
                    let Some(start) = self.waiting.get(&i).and_then(|w| w.start.as_ref()) else {
                        return;
                    };
                    if let Err(why) = before.joins(start) {
                        self.failed = Some(format!(
                            "range {i} does not start where range {} ended: {why}",
                            i - 1
                        ));
                        return;
                    }
                }
                self.due_ok = true;
                let pieces = self
                    .waiting
                    .get_mut(&i)
                    .map(|w| std::mem::take(&mut w.pieces));
                for lines in pieces.into_iter().flatten() {
                    self.out.send(lines);
                }
            }
            let Some(Waiting { end: Some(_), .. }) = self.waiting.get(&self.written) else {
                return;
            };
            let Some(Waiting {
                end: Some(mut end), ..
            }) = self.waiting.remove(&self.written)
            else {
                return;
            };
            self.stats.absorb(std::mem::take(&mut end.stats));
            self.stopped = self.stopped.take().or(end.stop.take());
            self.before = Some(end);
            self.carries.remove(&self.written);
            self.written += 1;
            self.due_ok = false;
            // The ranges still out read from their carry on.
            let keep = self.carries.values().next().copied().unwrap_or(file_len);
            forget(self.let_go, keep);
            self.let_go = self.let_go.max(keep);
        }
    }
}

/// Decode `file` in the ranges of `plan` (a planner reads `records`, the file's whole
/// data section) with `par.workers` workers, handing the lines
/// to `par`'s writer in order, telling `pages` what the workers read next and what they
/// are done with. Each range after the first is checked to start where
/// the one before ended; the first that does not ends the ranges
/// ([`RangesDone::failed`]). Each range's decoder writes the records a fork of `judge`
/// keeps (all without one).
pub(crate) fn decode_ranges(
    plan: Plan<'_>,
    records: Records<'_>,
    file: &[u8],
    par: &Par<'_>,
    pages: &Pages<'_>,
    judge: Option<&dyn RecordJudge>,
) -> RangesDone {
    let forget = pages.forget;
    let populate = pages.populate;
    let data_end = usize::try_from(records.end()).unwrap_or(file.len());
    let workers = par.workers.max(1);
    // Memory: at most this many ranges planned and not yet written, the lines of those
    // not yet due waiting in pieces (docs/record-raw.md, "The range index").
    let out_at_once = workers + 2;
    let abandon = AtomicBool::new(false);
    std::thread::scope(|s| {
        // Made in here: dropped before the workers are joined, so that none waits on a
        // channel whose other end is gone when the writer stopped early.
        let (job_tx, job_rx) = crossbeam_channel::bounded::<DecodeRange>(workers);
        let (done_tx, done_rx) = crossbeam_channel::unbounded::<Msg>();
        let abandon = &abandon;
        for w in 0..workers {
            let (jobs, done) = (job_rx.clone(), done_tx.clone());
            let recycle = par.recycle.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("uevrec-range{w}"))
                .spawn_scoped(s, move || {
                    work(&jobs, &done, &recycle, file, abandon, populate, judge)
                });
            if spawned.is_err() && w == 0 {
                // As the staged path's threads: without one there is no pipeline.
                panic!("the OS refused to start the range decoding threads");
            }
        }
        drop((job_rx, done_tx));
        let mut fwd = Forward {
            out: Handed::new(par),
            done: done_rx,
            waiting: BTreeMap::new(),
            written: 0,
            due_ok: false,
            before: None,
            carries: BTreeMap::new(),
            let_go: 0,
            stats: DecodeStats::default(),
            stopped: None,
            failed: None,
        };
        let mut planned = 0;
        let mut dispatch = |range: DecodeRange, fwd: &mut Forward<'_>| {
            // Its bytes are needed from its carry on (noted first: while it waits, the
            // ranges before it may all be written, and their pages are let go only up to
            // there, not to the file's end).
            fwd.carries.insert(range.index, range.carry);
            // At most `out_at_once` ranges out: wait for the oldest to be written.
            while planned - fwd.written >= out_at_once
                && fwd.going()
                && fwd.take(true, forget, file.len())
            {}
            while fwd.take(false, forget, file.len()) {}
            if !fwd.going() || job_tx.send(range).is_err() {
                return false;
            }
            planned += 1;
            true
        };
        let (cut_short, clock_data) = match plan {
            Plan::Planner(mut planner) => {
                let mut going = true;
                for rec in records {
                    if let Some(range) = planner.take(rec.as_ref()) {
                        going = dispatch(range, &mut fwd);
                    }
                    if !going {
                        break;
                    }
                }
                let cut_short = planner.stopped().map(str::to_string);
                let clock_data = planner.data().clock_data().is_some();
                if going {
                    dispatch(planner.finish(data_end), &mut fwd);
                }
                (cut_short, clock_data)
            }
            Plan::Index(ranges) => {
                for range in ranges {
                    if !dispatch(range, &mut fwd) {
                        break;
                    }
                }
                (None, false)
            }
        };
        drop(job_tx);
        while fwd.written < planned && fwd.going() && fwd.take(true, forget, file.len()) {}
        abandon.store(!fwd.going(), Ordering::Relaxed);
        fwd.give_back_all();
        let Forward {
            stats,
            stopped,
            written,
            failed,
            out,
            ..
        } = fwd;
        RangesDone {
            stats,
            stopped,
            ranges: written,
            cut_short,
            clock_data,
            failed,
            bytes: out.bytes,
        }
    })
}

/// A worker: decode the ranges it is given (none once `abandon` says so), their lines in
/// the writer's recycled buffers (pieces of about 256 KiB, handed on whole: the decoder
/// fills one, gets an empty one back), so that the memory they are written into is memory
/// already touched (a range's lines written into one growing buffer took twice the CPU,
/// most of it the kernel clearing fresh pages: BENCHMARKS.md §30).
fn work(
    jobs: &Receiver<DecodeRange>,
    done: &Sender<Msg>,
    recycle: &Receiver<Vec<u8>>,
    file: &[u8],
    abandon: &AtomicBool,
    populate: &(dyn Fn(usize, usize) + Sync),
    judge: Option<&dyn RecordJudge>,
) {
    for range in jobs {
        // The ranges ended early: those still given are not decoded.
        if abandon.load(Ordering::Relaxed) {
            continue;
        }
        let i = range.index;
        populate(range.carry, range.end);
        let mut gone = false;
        let mut piece = |buf: &mut Vec<u8>| {
            if gone || buf.is_empty() {
                return;
            }
            gone = done.send(Msg::Piece(i, take_lines(buf, recycle))).is_err();
        };
        let mut begun = |start: RangeStart| {
            let _ = done.send(Msg::Start(i, start));
        };
        let end = range.decode(file, judge.map(|j| j.fork()), &mut piece, &mut begun);
        if gone || done.send(Msg::End(i, end)).is_err() {
            return;
        }
    }
}
