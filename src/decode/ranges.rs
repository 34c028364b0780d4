//! `decode --threads N --range-size SIZE` on a whole perf.data in ranges: N workers each
//! decode a range of about SIZE bytes of records from start to lines, on their own
//! ([`uevrec_parsers::to_lines::perf_data::RangePlanner`]: what makes a cut exact, and
//! what ends the cutting), and the lines go to the writer in range order: the same bytes
//! as one thread. Unlike the staged path ([`super::parallel::staged`]), no thread reads
//! every record for the others: this thread plans (a pass over the record headers and
//! times, ahead of the workers) and hands the lines on.
//!
//! The lines travel in the writer's recycled buffers (pieces of about 256 KiB, handed on
//! whole), so that the memory they are written into is memory already touched (a
//! range's lines written into one growing buffer took twice the CPU, most of it the
//! kernel clearing fresh pages). Memory: at most `N + 2`
//! ranges are out at a time (planned, not yet written), the lines of those not yet due
//! waiting in pieces: about `(N + 1) ×` `--range-size` `×` the lines-to-records ratio (≈ 1.7
//! for `raw_syscalls:sys_enter`), and of the mapping what those ranges span. Its pages
//! are let go behind the ranges written.
//!
//! Cost (BENCHMARKS.md §30): the plan's pass and each range's second reading of the round
//! before it (about 2 MiB of a busy recording's) are work one decoder does not do; on 2
//! CPUs this came out slower than the staged path, hence not the default. It is for
//! many CPUs, where the staged path's one reading thread is the bound.

use std::collections::BTreeMap;

use crossbeam_channel::{Receiver, Sender};
use uevrec_parsers::perf_data::PerfDataError;
use uevrec_parsers::perf_data::records::Records;
use uevrec_parsers::to_lines::DecodeStats;
use uevrec_parsers::to_lines::perf_data::{DecodeRange, RangePlanner, RangeStop};

use super::parallel::Par;
use crate::pipeline::{BATCH_CAPACITY, Batch};

/// What a range saw, and the framing error that ended the file in it.
type RangeOutcome = (DecodeStats, RangeStop);

/// What a worker sends: range, a piece of its lines, and with its last piece its outcome.
type Piece = (usize, Vec<u8>, Option<RangeOutcome>);

/// How a decoding in ranges ended.
pub(crate) struct RangesDone {
    /// What the ranges saw, summed.
    pub stats: DecodeStats,
    /// The framing error that ended the file, if one did.
    pub stopped: Option<PerfDataError>,
    /// How many ranges.
    pub ranges: usize,
    /// Why the cutting ended before the file's end (the rest was one range).
    pub cut_short: Option<String>,
    /// The file has `HEADER_CLOCK_DATA` (a pipe-mode file says so among its records).
    pub clock_data: bool,
}

/// The lines of the ranges, in order, to the writer.
struct Forward<'p> {
    par: &'p Par<'p>,
    done: Receiver<Piece>,
    /// Pieces of ranges not yet due, and the outcome of ranges whose last piece came.
    waiting: BTreeMap<usize, (Vec<Vec<u8>>, Option<RangeOutcome>)>,
    written: usize,
    /// Where each range planned and not yet written carries from.
    carries: BTreeMap<usize, usize>,
    let_go: usize,
    stats: DecodeStats,
    stopped: Option<PerfDataError>,
    /// The writer took everything so far.
    whole: bool,
}

impl Forward<'_> {
    fn send(&mut self, lines: Vec<u8>) {
        if self.whole && !lines.is_empty() {
            self.whole = self.par.out.send(Batch { lines, records: 0 }).is_ok();
        }
    }

    /// Take one piece (waiting for it when `wait`): false when none came.
    fn take(&mut self, wait: bool, forget: &dyn Fn(usize, usize), file_len: usize) -> bool {
        let got = if wait {
            self.done.recv().ok()
        } else {
            self.done.try_recv().ok()
        };
        let Some((i, lines, outcome)) = got else {
            return false;
        };
        if i == self.written {
            self.send(lines);
        } else {
            self.waiting.entry(i).or_default().0.push(lines);
        }
        if let Some(outcome) = outcome {
            self.waiting.entry(i).or_default().1 = Some(outcome);
        }
        // Every range whose last piece came, in order (its pieces went out already: as
        // they came while it was due, or below when it became due); then the next one's
        // waiting pieces.
        while let Some((_, Some(_))) = self.waiting.get(&self.written) {
            let (pieces, outcome) = self.waiting.remove(&self.written).unwrap_or_default();
            debug_assert!(pieces.is_empty(), "a due range's pieces were held back");
            if let Some((stats, stopped)) = outcome {
                self.stats.absorb(stats);
                self.stopped = self.stopped.take().or(stopped);
            }
            self.carries.remove(&self.written);
            self.written += 1;
            // The ranges still out read from their carry on.
            let keep = self.carries.values().next().copied().unwrap_or(file_len);
            forget(self.let_go, keep);
            self.let_go = self.let_go.max(keep);
            if let Some((pieces, _)) = self.waiting.get_mut(&self.written) {
                for lines in std::mem::take(pieces) {
                    self.send(lines);
                }
            }
        }
        true
    }
}

/// Decode `file` in the ranges `planner` finds among `records` with `par.workers`
/// workers, handing the lines to `par`'s writer in order; `forget(from, to)` is told when
/// the bytes `from..to` of `file` are not needed any more.
pub(crate) fn decode_ranges(
    mut planner: RangePlanner<'_>,
    records: Records<'_>,
    file: &[u8],
    par: &Par<'_>,
    forget: &dyn Fn(usize, usize),
) -> RangesDone {
    let workers = par.workers.max(1);
    let out_at_once = workers + 2;
    let data_end = usize::try_from(records.end()).unwrap_or(file.len());
    std::thread::scope(|s| {
        // Made in here: dropped before the workers are joined, so that none waits on a
        // channel whose other end is gone when the writer stopped early.
        let (job_tx, job_rx) = crossbeam_channel::bounded::<DecodeRange>(workers);
        let (done_tx, done_rx) = crossbeam_channel::unbounded::<Piece>();
        for w in 0..workers {
            let (jobs, done) = (job_rx.clone(), done_tx.clone());
            let recycle = par.recycle.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("uevrec-range{w}"))
                .spawn_scoped(s, move || work(&jobs, &done, &recycle, file));
            if spawned.is_err() && w == 0 {
                // As the staged path's threads: without one there is no pipeline.
                panic!("the OS refused to start the range decoding threads");
            }
        }
        drop((job_rx, done_tx));
        let mut fwd = Forward {
            par,
            done: done_rx,
            waiting: BTreeMap::new(),
            written: 0,
            carries: BTreeMap::new(),
            let_go: 0,
            stats: DecodeStats::default(),
            stopped: None,
            whole: true,
        };
        let mut planned = 0;
        let mut dispatch = |range: DecodeRange, fwd: &mut Forward<'_>| {
            // At most `out_at_once` ranges out: wait for the oldest to be written.
            while planned - fwd.written >= out_at_once && fwd.take(true, forget, file.len()) {}
            while fwd.take(false, forget, file.len()) {}
            fwd.carries.insert(range.index, range.carry);
            planned += 1;
            fwd.whole && job_tx.send(range).is_ok()
        };
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
        drop(job_tx);
        while fwd.written < planned && fwd.take(true, forget, file.len()) {}
        RangesDone {
            stats: fwd.stats,
            stopped: fwd.stopped,
            ranges: planned,
            cut_short,
            clock_data,
        }
    })
}

/// A worker: decode the ranges it is given, their lines in the writer's recycled
/// buffers (handed on whole: the decoder fills one, gets an empty one back).
fn work(
    jobs: &Receiver<DecodeRange>,
    done: &Sender<Piece>,
    recycle: &Receiver<Vec<u8>>,
    file: &[u8],
) {
    for range in jobs {
        let i = range.index;
        let mut gone = false;
        let mut piece = |buf: &mut Vec<u8>| {
            if gone || buf.is_empty() {
                return;
            }
            let mut next = recycle
                .try_recv()
                .unwrap_or_else(|_| Vec::with_capacity(BATCH_CAPACITY));
            next.clear();
            std::mem::swap(buf, &mut next);
            gone = done.send((i, next, None)).is_err();
        };
        let outcome = range.decode(file, &mut piece);
        if gone || done.send((i, Vec::new(), Some(outcome))).is_err() {
            return;
        }
    }
}
