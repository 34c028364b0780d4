//! A perf.data: a whole one (mapped or read) record by record, or a pipe-mode stream
//! read in pieces ([`pump`]); what its end says (a cut file, an unfinished recording).

use uevrec_parsers::ContextTracker;
use uevrec_parsers::perf_data::index::RangeIndex;
use uevrec_parsers::perf_data::records::{RawRecord, Records};
use uevrec_parsers::perf_data::{PerfData, PerfDataError, writer};
use uevrec_parsers::perf_sample::sample_type::CALLCHAIN;
use uevrec_parsers::to_lines::perf_data::{
    FeedControl, LineDecoder, RangePlanner, StreamDecoder, ranges_from_index,
};
use uevrec_parsers::to_lines::{DecodeOptions, DecodeStats};

use super::mapped::MapWindow;
use super::parallel::{Par, par_lines, past, stack_options, staged};
use super::pick::Pick;
use super::ranges::{Pages, Plan, decode_ranges};
use super::trace_dat::{TRACE_DAT_MAGIC, decode_trace_dat};
use super::{Flush, Outcome, READ_CHUNK};
use crate::pipeline::stacks::StackWriter;

/// The message of the `truncated` notice for a perf.data: `unfinished` (a `record --raw`
/// file killed before its end), the sections lying past the end (`cut`), the record
/// decoding stopped at (`stopped`), `len` bytes in all.
pub(crate) fn truncation(
    unfinished: bool,
    cut: &[PerfDataError],
    stopped: Option<&PerfDataError>,
    len: u64,
) -> Option<String> {
    let stopped = stopped.filter(|e| matches!(e, PerfDataError::Truncated { .. }));
    if !unfinished && cut.is_empty() && stopped.is_none() {
        return None;
    }
    let mut parts = Vec::new();
    if unfinished {
        parts.push(
            "the recording was never finished (uevrec record --raw was killed or crashed): \
             its trailer (event names, sample times) is missing, and whatever the recorder \
             had not yet written"
                .to_string(),
        );
    }
    for e in cut {
        parts.push(e.to_string());
    }
    let end = match stopped {
        Some(PerfDataError::Truncated { at, need, have, .. }) => {
            parts.push(format!(
                "the input ends inside the record at byte {at} ({have} of its {need} bytes present)"
            ));
            *at
        }
        _ => {
            parts.push(format!(
                "the input ends at byte {len}, after a whole record"
            ));
            len
        }
    };
    Some(format!(
        "{}; every whole record before byte {end} was decoded",
        parts.join("; ")
    ))
}

/// A whole perf.data (or trace.dat) in memory or mapped: every record, then the rest of
/// the held lines. Records waiting for their time order are held as offsets into `bytes`
/// (not copied); `release(end)` is told when `bytes[..end]` is not needed any more
/// ([`MapWindow`]), and with workers in ranges ([`decode_ranges`]) `pages` what they
/// read next and what they are done with.
pub(crate) fn decode_bytes(
    bytes: &[u8],
    opts: DecodeOptions,
    pick: &Pick<'_>,
    flush: &mut Flush<'_>,
    release: &dyn Fn(usize),
    pages: &Pages<'_>,
    par: Option<&Par<'_>>,
) -> Result<Outcome, String> {
    if bytes.starts_with(TRACE_DAT_MAGIC) {
        return decode_trace_dat(bytes, opts, pick, flush, pages.populate, par);
    }
    // A recording killed while being finished: its records end where the finish noted
    // (the trailer after them is of no use without the file-mode header).
    let whole_len = bytes.len() as u64;
    let finishing = writer::finishing_end(bytes);
    let bytes = match finishing {
        Some(end) => &bytes[..end as usize],
        None => bytes,
    };
    let (mut data, records) = PerfData::open(bytes).map_err(|e| e.to_string())?;
    // Sections lying past the end: a cut file (the data section's part that is there is
    // decoded; the features or formats past the cut are missing).
    let (cut, rest): (Vec<PerfDataError>, Vec<PerfDataError>) = std::mem::take(&mut data.problems)
        .into_iter()
        .partition(|e| matches!(e, PerfDataError::BadSection { .. }));
    data.problems = rest;
    let unfinished = writer::is_unfinished(bytes);
    let clock_data = data.clock_data().is_some();
    let endian = data.tracing_data().map_or(data.endian, |t| t.endian);
    // With workers: in ranges where the file's range index says, or (--range-size) where
    // a pass ahead of the workers finds; otherwise staged (the summary says why).
    let start = usize::try_from(records.offset()).unwrap_or(usize::MAX);
    let data_end = usize::try_from(records.end()).unwrap_or(bytes.len());
    let plan = par.map(|par| match pick.in_order() {
        Some(why) => Err(Some(why.to_string())),
        None => plan(&data, bytes, start, data_end, opts, pick.select, par),
    });
    let (mut outcome, stopped) = match (par, plan) {
        (Some(par), Some(Ok(plan))) => {
            let from_index = matches!(plan, Plan::Index(_));
            let judge = pick.judge();
            let done = decode_ranges(plan, records, bytes, par, pages, judge.as_deref());
            let mut how = format!("in {} ranges by {} threads", done.ranges, par.workers);
            if from_index {
                how.push_str(", cut where the file's range index says");
            }
            if let Some(why) = done.cut_short {
                how.push_str(&format!(", the last from where cutting stopped: {why}"));
            }
            let (stats, stopped) = match done.failed {
                None => (done.stats, done.stopped),
                Some(why) => {
                    how.push_str(&format!(
                        ", then decoded again whole by one thread from where the ranges \
                         stopped ({why})"
                    ));
                    // Judged again from the first record: counted afresh.
                    if let Some(f) = pick.filter {
                        f.restart();
                    }
                    let mut rest = past(done.bytes, flush);
                    let own = bytes.get(start..data_end).unwrap_or_default();
                    let records = Records::new(own, start as u64, data.endian);
                    let dec = line_decoder(data, opts, pick);
                    let (outcome, stopped) =
                        perf_data_records(dec, records, bytes, &mut rest, release, clock_data);
                    (outcome.stats, stopped)
                }
            };
            let outcome = Outcome {
                unlisted: unlisted(&stats),
                stats,
                stopped: None,
                problems: Vec::new(),
                time_note: None,
                clock_data: clock_data || done.clock_data,
                truncated: None,
                truncated_summary: None,
                shared: Some(how),
            };
            (outcome, stopped)
        }
        (Some(par), planner) => {
            let dec = LineDecoder::new(data, opts, pick.select).with_judge(pick.judge());
            let context = opts.context.then(ContextTracker::new);
            let lines = par_lines(opts, endian, context);
            let (mut outcome, stopped) = staged(par, lines, bytes, |sink| {
                perf_data_records(
                    dec.with_sink(sink),
                    records,
                    bytes,
                    flush,
                    release,
                    clock_data,
                )
            });
            let mut how = format!("{} formatting threads after one reading", par.workers);
            if let Some(Err(Some(why))) = planner {
                how.push_str(&format!(", not in ranges: {why}"));
            }
            outcome.shared = Some(how);
            (outcome, stopped)
        }
        _ => {
            let dec = line_decoder(data, opts, pick);
            perf_data_records(dec, records, bytes, flush, release, clock_data)
        }
    };
    outcome.truncated = truncation(unfinished, &cut, stopped.as_ref(), bytes.len() as u64);
    if let (Some(end), Some(msg)) = (finishing, &mut outcome.truncated) {
        *msg = format!(
            "its finish was cut short (killed or a failed write): the records end at byte \
             {end}; the {} bytes after them (the trailer) are of no use without the file-mode \
             header, which was not written; {msg}",
            whole_len - end
        );
    }
    if outcome.truncated.is_none() {
        outcome.stopped = stopped.map(|e| e.to_string());
    }
    Ok(outcome)
}

/// A decoder of `data` writing its lines on this thread, naming their stacks when
/// `opts` asks for them ([`stack_options`]).
fn line_decoder<'s>(data: PerfData, opts: DecodeOptions, pick: &Pick<'s>) -> LineDecoder<'s> {
    let dec = LineDecoder::new(data, opts, pick.select).with_judge(pick.judge());
    match stack_options(opts) {
        Some(o) => dec.with_stacks(Box::new(StackWriter::new(o))),
        None => dec,
    }
}

/// Bytes of records a range holds when the file's range index cuts it and `--range-size`
/// does not say: an eighth of a worker's share of the file, from 4 MiB (each range reads
/// the round before it again: rounds of a busy recording are a few MiB) to 16 MiB (the
/// ranges out at a time are mapped in, and the lines of those not yet due wait: 8, 16 and
/// 32 MiB took the same time on a 3 M-sample file, and 197 MB of memory at 30 MiB
/// against 115 MB at 16; BENCHMARKS.md §34).
fn index_range_bytes(records: usize, workers: usize) -> usize {
    (records / workers.max(1) / 8).clamp(4 << 20, 16 << 20)
}

/// How the records `start..data_end` of `bytes` (a whole perf.data whose state is
/// `data`) are cut for `par`'s workers: `Err(None)` not at all (no index, no
/// `--range-size`), `Err(Some(why))` not at all for a reason the summary gives.
fn plan<'s>(
    data: &PerfData,
    bytes: &[u8],
    start: usize,
    data_end: usize,
    opts: DecodeOptions,
    select: &'s dyn Fn(&str, &str) -> bool,
    par: &Par<'_>,
) -> Result<Plan<'s>, Option<String>> {
    if stack_options(opts).is_some()
        && data
            .events()
            .iter()
            .any(|e| e.attr.sample_type & CALLCHAIN != 0)
    {
        // A range would start without the mappings before it (the range index notes
        // where the COMM/FORK/EXIT records are, not the MMAP2 ones).
        return Err(Some(
            "its samples carry call stacks, named from the mappings before them".into(),
        ));
    }
    let records = bytes.get(start..data_end).unwrap_or_default();
    let index = RangeIndex::find(records, start as u64, data.endian);
    let has_index = !matches!(index, Ok(None));
    let by_index = match index {
        Ok(Some(index)) => {
            let target = (par.range_bytes)
                .unwrap_or_else(|| index_range_bytes(data_end - start, par.workers));
            ranges_from_index(data, bytes, start, data_end, &index, opts, select, target)
                .map_err(|why| format!("its range index does not serve: {why}"))
        }
        Ok(None) => Err("no range index (not a finished `uevrec record --raw` file)".into()),
        Err(why) => Err(why),
    };
    match (by_index, par.range_bytes) {
        (Ok(ranges), _) => Ok(Plan::Index(ranges)),
        (Err(_), Some(size)) => RangePlanner::new(data, start, opts, select, size)
            .map(|p| Plan::Planner(Box::new(p)))
            .map_err(Some),
        // A perf file without --range-size: staged, as always (nothing to say).
        (Err(_), None) if !has_index => Err(None),
        (Err(why), None) => Err(Some(why)),
    }
}

/// Every record of a mapped perf.data through `dec`, then the rest of the held lines.
pub(crate) fn perf_data_records<'f>(
    mut dec: LineDecoder<'_>,
    records: impl Iterator<Item = Result<RawRecord<'f>, uevrec_parsers::perf_data::PerfDataError>>,
    bytes: &'f [u8],
    flush: &mut Flush<'_>,
    release: &dyn Fn(usize),
    clock_data: bool,
) -> (Outcome, Option<PerfDataError>) {
    let mut stopped = None;
    let mut behind = MapWindow::default();
    for rec in records {
        match rec {
            Ok(rec) => {
                if dec.record_in(&rec, bytes, flush) == FeedControl::Stop {
                    break;
                }
                if let Some(at) = behind.due(rec.offset) {
                    release(dec.release_point(at, bytes));
                }
            }
            Err(e) => stopped = Some(e),
        }
    }
    dec.finish_in(bytes, flush);
    let outcome = Outcome {
        stats: dec.stats().clone(),
        stopped: None,
        problems: Vec::new(),
        unlisted: unlisted(dec.stats()),
        time_note: None,
        clock_data: clock_data || dec.data().clock_data().is_some(),
        truncated: None,
        truncated_summary: None,
        shared: None,
    };
    (outcome, stopped)
}

/// A perf.data's problems past the first ones `stats.errors` lists.
fn unlisted(stats: &DecodeStats) -> u64 {
    stats
        .error_count
        .saturating_sub(u64::try_from(stats.errors.len()).unwrap_or(u64::MAX))
}

/// Feed `dec` what `read` returns, [`READ_CHUNK`] bytes at a time, until the input ends
/// or decoding stops, then let out what it holds. Returns why decoding stopped early, if
/// it did (a framing error, or the input ending inside a record), or the read error.
pub(crate) fn pump(
    dec: &mut StreamDecoder<'_>,
    read: &mut dyn FnMut(&mut [u8]) -> std::io::Result<usize>,
    flush: &mut Flush<'_>,
) -> Result<Option<PerfDataError>, String> {
    let mut stopped = None;
    let mut done = false;
    loop {
        let buf = dec.buffer(READ_CHUNK);
        let n = match read(&mut buf[..READ_CHUNK]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("reading: {e}")),
        };
        if n == 0 {
            break;
        }
        dec.filled(n);
        match dec.process(flush) {
            Ok(FeedControl::Continue) => {}
            Ok(FeedControl::Stop) => {
                done = true;
                break;
            }
            Err(e) => {
                stopped = Some(e);
                break;
            }
        }
    }
    // After a stop (--count, closed output) the unread rest is not a truncation.
    match dec.finish(flush) {
        Err(e) if stopped.is_none() && !done => stopped = Some(e),
        _ => {}
    }
    Ok(stopped)
}

/// What a [`StreamDecoder`] saw, with `stopped` from [`pump`] (an input ending inside a
/// record is a truncation: everything before it was decoded).
pub(crate) fn stream_outcome(
    dec: &StreamDecoder<'_>,
    stopped: Option<PerfDataError>,
    clock_data: bool,
) -> Outcome {
    let (stats, clock) = dec.decoder().map_or_else(Default::default, |d| {
        (d.stats().clone(), d.data().clock_data().is_some())
    });
    let truncated = match &stopped {
        Some(e @ PerfDataError::Truncated { .. }) => truncation(false, &[], Some(e), dec.offset()),
        _ => None,
    };
    Outcome {
        unlisted: unlisted(&stats),
        stats,
        stopped: stopped
            .filter(|_| truncated.is_none())
            .map(|e| e.to_string()),
        problems: Vec::new(),
        time_note: None,
        clock_data: clock_data || clock,
        truncated,
        truncated_summary: None,
        shared: None,
    }
}
