//! Range decoding (`uevrec decode --threads N`): a whole perf.data cut at its
//! `FINISHED_ROUND` records into ranges that decoders of their own write, each exactly the
//! lines one decoder fed from the start writes for it, so that their lines put end to
//! end are the same bytes.
//!
//! Why a cut can be exact. Records go out at the end of round r when their time is at
//! most `M(r−1)`, the largest time pushed before the round began ([`Orderer`]). When no
//! record arrives with a time below what already went out (none is late) and the order
//! buffer's bound is never reached, the state just after round r's `FINISHED_ROUND` is
//! known from the file alone: everything up to `M(r−1)` went out (in time order, ties
//! in arrival order), and what is held is round r's records newer than `M(r−1)`. A
//! decoder for the range after that cut starts there ([`Orderer::resume_after`]): it reads
//! round r again only to hold those records (carries them), and goes on. The decoder of
//! the range before stops after that `FINISHED_ROUND`'s drain, holding them unwritten.
//! Two more things flow across a cut, and the plan gives both: which events already had
//! their schema line, and who is who (`COMM`/`FORK`/`EXIT`/`CGROUP` records, applied in
//! time order as they go out: with nothing late, the context records out before the cut
//! are those with a time up to the cut's limit, in time order).
//!
//! A [`RangePlanner`] reads the record headers (and the times) once, ahead of the
//! decoders, and hands out each range as soon as the cut after it is found. A cut holds
//! while, from the file's start: every record pushed for time order has a time and none
//! is late, two rounds together fit the order buffer's bound, no attr or tracing-data
//! record lies in a round a later range carries, and there are at most
//! [`MAX_CONTEXT_RECORDS`] context records (each range replays those before it). The
//! first record breaking one of these ends the planning: the rest of the file, from the
//! last cut, is the last range, decoded by one decoder that handles everything as one
//! decoder fed from the start does (it starts in the exact state of its cut). Whole files
//! are refused ([`RangePlanner::new`]) for OTLP, `--count`, and schema lines with
//! EventHeader events (their metadata lines depend on what the writer saw before).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use super::{FeedControl, LineDecoder};
use crate::bytes::u64_at;
use crate::json_line::RecordWriter;
use crate::output::RecordJudge;
use crate::perf_data::index::RangeIndex;
use crate::perf_data::order::Drain;
use crate::perf_data::records::{RawRecord, Records};
use crate::perf_data::{Item, PerfData, PerfDataError};
use crate::perf_sample::PERF_RECORD_SAMPLE;
use crate::to_lines::{DecodeOptions, DecodeStats, MAX_KEPT_ERRORS};

/// At most this many context records before a cut: each range applies those before it
/// again (cost: ranges × context records).
pub const MAX_CONTEXT_RECORDS: usize = crate::perf_data::index::MAX_INDEX_CONTEXT;

/// One range: where it lies in the file and the state a decoder of it starts from.
#[derive(Debug, Clone)]
pub struct DecodeRange {
    /// Its place in the file's order of ranges (0: the first).
    pub index: usize,
    /// Where the round before the range starts: its records newer than `limit` are held
    /// (carried), none is written. Equal to `start` for the first range.
    pub carry: usize,
    /// Where the range's own records start.
    pub start: usize,
    /// Where they end: after a `FINISHED_ROUND`, or the end of the data (the last range).
    pub end: usize,
    /// The last range (it lets out everything held at its end).
    pub last: bool,
    /// The time limit of the drain at the `FINISHED_ROUND` before `start` (`None`: the
    /// file's first, which lets out nothing).
    limit: Option<u64>,
    /// Event index → its schema line was written before this range.
    described: Vec<bool>,
    /// The file's state at `start` (events, formats).
    data: PerfData,
    /// What the caller's selector said of each (system, event) it was asked.
    selected: Arc<Vec<(String, String, bool)>>,
    /// The context records before the cut: (time, event, offset, length), file order.
    context: Arc<Vec<(u64, usize, usize, usize)>>,
    /// Where the context records of the range's own records start, as the plan knows
    /// them (checked against those the range meets: the next range's `context` holds
    /// them).
    own_context: Vec<usize>,
    opts: DecodeOptions,
}

/// What a decoder holds between two rounds that the next round's lines depend on: its
/// orderer's state ([`crate::perf_data::order::Orderer::state`]) and the events whose
/// schema line was written.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CutState {
    next_flush: Option<u64>,
    out_time: u64,
    held: Vec<u64>,
    described: Vec<bool>,
}

impl CutState {
    fn of(dec: &LineDecoder<'_>) -> Self {
        let (next_flush, out_time, held) = dec.orderer.state();
        CutState {
            next_flush,
            out_time,
            held,
            described: dec.described.described(),
        }
    }
}

/// The state a range (not the first) starts its own records in, once it read the round
/// before them again ([`DecodeRange::decode`] gives it before any line).
#[derive(Debug, Clone)]
pub struct RangeStart {
    carry: usize,
    start: usize,
    state: CutState,
}

/// How a range's decoding ended ([`DecodeRange::decode`]).
#[derive(Debug)]
pub struct RangeEnd {
    /// What it saw.
    pub stats: DecodeStats,
    /// The framing error that ended the file in it, if one did.
    pub stop: RangeStop,
    /// Its state after its last record (a range before the last).
    state: Option<CutState>,
    /// Where its last two `FINISHED_ROUND`s end (its start stands for one before it).
    rounds: (usize, usize),
    /// The context records it met are those the plan knows.
    context_ok: bool,
    /// No record came late and the order buffer's bound was never reached (either breaks
    /// what a later range takes from the file alone: the order in which context records
    /// before it were applied, which records are held).
    in_order: bool,
}

impl RangeEnd {
    /// Whether the range that starts as `next` says goes on exactly where this one ended
    /// (its lines are then those one decoder fed from the start writes for it, given that
    /// this one's were): `Err` says where they part.
    pub fn joins(&self, next: &RangeStart) -> Result<(), String> {
        if let Some(e) = &self.stop {
            return Err(format!(
                "the records stop being readable before its end ({e})"
            ));
        }
        if !self.in_order {
            return Err("a record in it came late, or its order buffer filled".into());
        }
        if !self.context_ok {
            return Err("its context records are not those the plan lists".into());
        }
        if self.rounds != (next.carry, next.start) {
            return Err(format!(
                "its last rounds end at bytes {} and {}, not at {} and {} where the next range \
                 carries from and starts",
                self.rounds.0, self.rounds.1, next.carry, next.start
            ));
        }
        let Some(end) = &self.state else {
            return Err("it was the last".into());
        };
        if end.next_flush != next.state.next_flush || end.out_time != next.state.out_time {
            let order = |flush: Option<u64>, out: u64| match flush {
                Some(f) => format!("next flush at {f}, written up to time {out}"),
                None => format!("no flush pending, written up to time {out}"),
            };
            return Err(format!(
                "its time order stands at ({}), the next range's at ({})",
                order(end.next_flush, end.out_time),
                order(next.state.next_flush, next.state.out_time)
            ));
        }
        if end.held != next.state.held {
            return Err(format!(
                "it holds {} records for time order, the next range {}",
                end.held.len(),
                next.state.held.len()
            ));
        }
        if end.described != next.state.described {
            let described = |d: &[bool]| {
                let ids: Vec<String> = (0..d.len())
                    .filter(|&i| d[i])
                    .map(|i| i.to_string())
                    .collect();
                format!("events {}", ids.join(", "))
            };
            return Err(format!(
                "the events it described ({}) are not those the next range takes as described ({})",
                described(&end.described),
                described(&next.state.described)
            ));
        }
        Ok(())
    }
}

/// What a record is to the time order ([`LineDecoder::classify`]).
enum Seen {
    /// Held for time order with this time (a written sample, a lost record, a context
    /// record): its event, and whether it is a context record.
    Pushed {
        time: u64,
        event: usize,
        context: bool,
    },
    /// Written at once or not at all.
    Other,
    /// An attr or tracing-data record (the state the decoders start from changes).
    Header,
    /// A `FINISHED_ROUND`.
    Round,
}

impl LineDecoder<'_> {
    /// What `rec` is to the time order: as [`LineDecoder::record_in`] takes it, without
    /// writing or counting anything (attr and tracing-data records are taken into the
    /// state). `Err`: a record range decoding cannot carry (one without a time).
    fn classify(&mut self, rec: &RawRecord<'_>) -> Result<Seen, &'static str> {
        if rec.header.kind == PERF_RECORD_SAMPLE {
            return match self.written_sample(rec) {
                None => Ok(Seen::Other),
                Some((event, Some(time))) => Ok(Seen::Pushed {
                    time,
                    event,
                    context: false,
                }),
                Some((_, None)) => Err("a sample without a time"),
            };
        }
        let (event, time, context) = match self.data.record(rec) {
            Ok(Item::Lost {
                event, sample_id, ..
            }) => (event, sample_id.time, false),
            Ok(Item::FinishedRound) => return Ok(Seen::Round),
            Ok(Item::NewEvent | Item::TracingData | Item::Feature(_)) => {
                self.data.problems.clear();
                self.refresh();
                return Ok(Seen::Header);
            }
            Ok(Item::Other(header)) => match self.context_record(header.kind, rec) {
                Some((event, time)) => (event, time, true),
                None => return Ok(Seen::Other),
            },
            Ok(_) | Err(_) => return Ok(Seen::Other),
        };
        match time {
            Some(time) => Ok(Seen::Pushed {
                time,
                event,
                context,
            }),
            None => Err("a lost or context record without a time"),
        }
    }

    /// The event and time of the sample `rec` when its event is written (`None`: a
    /// sample of no known event, or one not written), read at their fixed places as
    /// [`LineDecoder::record_in`] reads them.
    #[inline]
    fn written_sample(&self, rec: &RawRecord<'_>) -> Option<(usize, Option<u64>)> {
        let event = self.data.sample_event(rec.bytes)?;
        let slot = self.slots.get(event).filter(|s| s.written)?;
        let time = slot
            .time_at
            .and_then(|at| u64_at(rec.bytes, at, self.data.endian));
        Some((event, time))
    }

    /// Whether schema lines would come with EventHeader metadata lines (which depend on
    /// what the writer saw before: not for range decoding).
    fn eventheader_schema(&self) -> bool {
        self.opts.schema
            && self.slots.iter().any(|s| {
                s.written
                    && s.prepared
                        .as_ref()
                        .is_some_and(|p| p.eventheader().is_some())
            })
    }
}

/// Bytes a held record counts towards the order buffer's bound (as the orderer counts).
fn held_cost(rec: &RawRecord<'_>) -> usize {
    // A slice's length (at most isize::MAX) plus 32 fits.
    rec.bytes.len().saturating_add(32)
}

/// Mark event `e` in `v`.
#[inline]
fn mark(v: &mut Vec<bool>, e: usize) {
    if v.get(e) == Some(&true) {
        return;
    }
    if v.len() <= e {
        // An event index (of the file's attrs) plus one fits.
        v.resize(e.saturating_add(1), false);
    }
    v[e] = true;
}

/// What the caller's selector said of each (system, event) it was asked, in order.
type Asked = Rc<RefCell<Vec<(String, String, bool)>>>;

/// A decoder of `data` (its problems left to the first range) that notes what `select`
/// says of each event it asks about (the ranges' decoders are given those answers), or
/// why a whole file is not decoded in ranges: `--count`, OTLP, schema lines with
/// EventHeader events (their metadata lines depend on what the writer saw before).
fn recording_decoder<'s>(
    data: &PerfData,
    opts: DecodeOptions,
    select: &'s dyn Fn(&str, &str) -> bool,
) -> Result<(LineDecoder<'s>, Asked), String> {
    if opts.max_records.is_some() {
        return Err("--count".into());
    }
    if opts.format != crate::output::OutputFormat::JsonLines {
        return Err("not JSON lines".into());
    }
    let asked: Asked = Rc::new(RefCell::new(Vec::new()));
    let log = Rc::clone(&asked);
    let recording = move |system: &str, event: &str| {
        let yes = select(system, event);
        log.borrow_mut()
            .push((system.to_string(), event.to_string(), yes));
        yes
    };
    let mut quiet = data.clone();
    quiet.problems.clear();
    let dec = LineDecoder::new(quiet, opts, recording);
    if dec.eventheader_schema() {
        return Err("EventHeader events with schema lines".into());
    }
    Ok((dec, asked))
}

/// Finds the cuts of a whole perf.data, record by record ([`RangePlanner::take`]), and
/// makes each range ([`DecodeRange`]) as soon as its end is known.
pub struct RangePlanner<'s> {
    dec: LineDecoder<'s>,
    asked: Asked,
    target: usize,
    /// Why planning ended early (the rest is one range), once it did.
    stopped: Option<String>,
    /// The range being found: its index, carry and start, limit, state at its start.
    next: DecodeRange,
    context: Vec<(u64, usize, usize, usize)>,
    /// Where the round began, the bytes it pushed and the round before's.
    round_start: usize,
    round_bytes: usize,
    prev_bytes: usize,
    /// The orderer's max time, the limit the next drain uses and the last drain's
    /// (nothing may arrive older than it).
    max_time: u64,
    next_limit: Option<u64>,
    let_out: Option<u64>,
    /// Events described before the round, and this round's out at its end and after.
    described: Vec<bool>,
    low: Vec<bool>,
    high: Vec<bool>,
    /// An attr or tracing-data record in this round (no cut may carry it).
    header_in_round: bool,
    /// Where the last record seen ends.
    end: usize,
    /// The first of `context` in the range being found.
    own_context_from: usize,
}

impl<'s> RangePlanner<'s> {
    /// A planner for the file whose state [`PerfData::open`] returned as `data`, its
    /// records starting at `data_start`, decoded with `opts` and `select`, in ranges of
    /// about `target` bytes; `Err`: why the file is not decoded in ranges at all.
    pub fn new(
        data: &PerfData,
        data_start: usize,
        opts: DecodeOptions,
        select: &'s dyn Fn(&str, &str) -> bool,
        target: usize,
    ) -> Result<Self, String> {
        let (dec, asked) = recording_decoder(data, opts, select)?;
        let first = DecodeRange {
            index: 0,
            carry: data_start,
            start: data_start,
            end: data_start,
            last: false,
            limit: None,
            described: Vec::new(),
            // The first range reports the file's problems (as one decoder does).
            data: data.clone(),
            selected: Arc::new(asked.borrow().clone()),
            context: Arc::new(Vec::new()),
            own_context: Vec::new(),
            opts,
        };
        Ok(RangePlanner {
            dec,
            asked,
            target,
            stopped: None,
            next: first,
            context: Vec::new(),
            round_start: data_start,
            round_bytes: 0,
            prev_bytes: 0,
            max_time: 0,
            next_limit: None,
            let_out: None,
            described: Vec::new(),
            low: Vec::new(),
            high: Vec::new(),
            header_in_round: false,
            end: data_start,
            own_context_from: 0,
        })
    }

    /// The file's state after the records taken so far (events, formats, features).
    pub fn data(&self) -> &PerfData {
        &self.dec.data
    }

    /// Why planning ended before the file's end (the rest was one range), if it did.
    pub fn stopped(&self) -> Option<&str> {
        self.stopped.as_deref()
    }

    /// Take the next record (`Err`: the file stops being readable there; planning ends):
    /// the range that ends with it, when it ends one. Give it every record to the end,
    /// also once planning stopped ([`RangePlanner::stopped`]): the last range's
    /// selection of events is made from all of them.
    #[inline]
    pub fn take(&mut self, rec: Result<&RawRecord<'_>, &PerfDataError>) -> Option<DecodeRange> {
        if self.stopped.is_some() {
            // The last range reads on: its events' selection is asked of the selector
            // here (a pipe-mode file's attrs come with its records).
            if let Ok(rec) = rec
                && rec.header.kind != PERF_RECORD_SAMPLE
                && let Ok(Item::NewEvent | Item::TracingData | Item::Feature(_)) =
                    self.dec.data.record(rec)
            {
                self.dec.data.problems.clear();
                self.dec.refresh();
            }
            return None;
        }
        // Nearly every record: a sample in time (what `see` does with it, in line).
        if let Ok(rec) = rec
            && rec.header.kind == PERF_RECORD_SAMPLE
        {
            // Not written (or of no known event): nothing to the time order.
            let (event, time) = self.dec.written_sample(rec)?;
            if let Some(time) = time
                && self.let_out.is_none_or(|l| time >= l)
            {
                self.max_time = self.max_time.max(time);
                // Costs of records of the file: the sum stays near its length.
                self.round_bytes = self.round_bytes.saturating_add(held_cost(rec));
                if self.dec.opts.schema {
                    if self.next_limit.is_some_and(|l| time <= l) {
                        mark(&mut self.low, event);
                    } else {
                        mark(&mut self.high, event);
                    }
                }
                return None;
            }
        }
        let rec = match rec {
            Ok(rec) => rec,
            Err(e) => {
                self.stopped = Some(format!("the file stops being readable ({e})"));
                return None;
            }
        };
        match self.see(rec) {
            Ok(cut) => cut,
            Err(why) => {
                self.stopped = Some(why);
                None
            }
        }
    }

    fn see(&mut self, rec: &RawRecord<'_>) -> Result<Option<DecodeRange>, String> {
        let offset = usize::try_from(rec.offset).map_err(|_| "offsets past usize")?;
        // The end of a record inside the file: the sum fits.
        self.end = (offset.saturating_add(rec.bytes.len())).saturating_add(rec.payload.len());
        match self.dec.classify(rec)? {
            Seen::Pushed {
                time,
                event,
                context,
            } => {
                if self.let_out.is_some_and(|l| time < l) {
                    return Err(format!("a record at byte {offset} arrives late"));
                }
                self.max_time = self.max_time.max(time);
                self.round_bytes = self.round_bytes.saturating_add(held_cost(rec));
                // Samples in time were taken by `take` (their events marked for the
                // schema lines there); here a lost or context record (late samples
                // ended the planning above).
                if context {
                    if self.context.len() == MAX_CONTEXT_RECORDS {
                        return Err("too many context records".into());
                    }
                    self.context.push((time, event, offset, rec.bytes.len()));
                }
                Ok(None)
            }
            Seen::Other => Ok(None),
            Seen::Header => {
                if self.dec.eventheader_schema() {
                    return Err("EventHeader events with schema lines".into());
                }
                self.header_in_round = true;
                Ok(None)
            }
            Seen::Round => {
                if self.prev_bytes.saturating_add(self.round_bytes) > self.dec.opts.order_bytes {
                    return Err("two rounds hold more than the order buffer".into());
                }
                // A cut after this round: the next range carries it (no attr or
                // tracing-data record in it) and starts after this drain.
                // The range started before this record ended: end >= start.
                let size = self.end.saturating_sub(self.next.start);
                let cut = (!self.header_in_round && size >= self.target).then(|| self.cut());
                self.let_out = self.next_limit;
                self.next_limit = Some(self.max_time);
                for v in [&self.low, &self.high] {
                    for (e, _) in v.iter().enumerate().filter(|(_, w)| **w) {
                        mark(&mut self.described, e);
                    }
                }
                self.low.clear();
                self.high.clear();
                self.prev_bytes = self.round_bytes;
                self.round_bytes = 0;
                self.round_start = self.end;
                self.header_in_round = false;
                Ok(cut)
            }
        }
    }

    /// The range ending at this `FINISHED_ROUND` (before its bookkeeping moves on); the
    /// next one starts after it.
    fn cut(&mut self) -> DecodeRange {
        let mut described = self.described.clone();
        for (e, _) in self.low.iter().enumerate().filter(|(_, w)| **w) {
            mark(&mut described, e);
        }
        let mut data = self.dec.data.clone();
        data.problems.clear();
        let after = DecodeRange {
            index: self.next.index.saturating_add(1),
            carry: self.round_start,
            start: self.end,
            end: self.end,
            last: false,
            limit: self.next_limit,
            described,
            data,
            selected: Arc::new(self.asked.borrow().clone()),
            context: Arc::new(self.context.clone()),
            own_context: Vec::new(),
            opts: self.dec.opts,
        };
        let mut done = std::mem::replace(&mut self.next, after);
        done.end = self.end;
        done.own_context = self.context[self.own_context_from..]
            .iter()
            .map(|c| c.2)
            .collect();
        self.own_context_from = self.context.len();
        // What the selector was asked up to its end (attrs may come with the records).
        done.selected = Arc::new(self.asked.borrow().clone());
        done
    }

    /// The last range: from the last cut to `data_end`, the end of the records' bytes
    /// (past where planning stopped, if it did).
    pub fn finish(mut self, data_end: usize) -> DecodeRange {
        self.next.end = data_end.max(self.next.start);
        self.next.last = true;
        self.next.selected = Arc::new(self.asked.borrow().clone());
        self.next
    }
}

/// The ranges of about `target` bytes that the range index of a finished `record --raw`
/// file gives ([`RangeIndex`]): no pass over the records, the state at each cut taken
/// from the index and checked when the range before is decoded ([`RangeEnd::joins`]).
/// `data` is the file's state from [`PerfData::open`], its records `data_start..data_end`
/// of `file`. `Err`: why the index does not serve this decoding (the caller decodes
/// otherwise).
#[allow(clippy::too_many_arguments)]
pub fn ranges_from_index(
    data: &PerfData,
    file: &[u8],
    data_start: usize,
    data_end: usize,
    index: &RangeIndex,
    opts: DecodeOptions,
    select: &dyn Fn(&str, &str) -> bool,
    target: usize,
) -> Result<Vec<DecodeRange>, String> {
    let (dec, asked) = recording_decoder(data, opts, select)?;
    // The limits count every event's samples: every event with samples must be written.
    let event_of = |id: u64| data.events().iter().position(|e| e.ids.contains(&id));
    let mut first = Vec::new();
    for &(id, offset) in &index.first_samples {
        let event = event_of(id)
            .ok_or_else(|| format!("its range index names sample id {id}, which no attr has"))?;
        if !dec.slots.get(event).is_some_and(|s| s.written) {
            return Err("not every event with samples is decoded (the range index's time limits count them all)".into());
        }
        first.push((event, offset as usize));
    }
    let context_on = dec.context.is_some();
    let mut context = Vec::new();
    if context_on {
        for &offset in &index.context {
            let at = offset as usize;
            let bytes = file.get(at..data_end).unwrap_or_default();
            let rec = Records::new(bytes, offset, data.endian).next();
            let found = match &rec {
                Some(Ok(rec)) => dec
                    .context_record(rec.header.kind, rec)
                    .map(|(e, t)| (e, t, rec.bytes.len())),
                _ => None,
            };
            let Some((event, Some(time), len)) = found else {
                return Err(format!(
                    "its range index lists a context record at byte {offset} that is none"
                ));
            };
            context.push((time, event, at, len));
        }
    }
    // Each range's carry, start and limit: the first from the records' start.
    let mut starts = vec![(data_start, data_start, None)];
    let mut last = data_start;
    for cut in &index.cuts {
        let (carry, start) = (cut.carry as usize, cut.start as usize);
        if carry < last || start >= data_end || start as u64 > index.at {
            break;
        }
        // RangeIndex::find checked carry < start, and carry >= last is checked above.
        if start.saturating_sub(last) >= target.max(1) {
            let limit = if context_on {
                cut.limit
            } else {
                cut.limit_plain
            };
            starts.push((carry, start, Some(limit)));
            last = start;
        }
    }
    if starts.len() == 1 {
        return Err(format!(
            "its range index has no cut {target} bytes or more into the records"
        ));
    }
    let selected = Arc::new(asked.borrow().clone());
    let mut ranges = Vec::with_capacity(starts.len());
    for (i, &(carry, start, limit)) in starts.iter().enumerate() {
        let next = starts.get(i.saturating_add(1));
        let end = next.map_or(data_end, |n| n.1);
        let mut described = Vec::new();
        for &(event, offset) in &first {
            if offset < carry {
                mark(&mut described, event);
            }
        }
        let before = context.partition_point(|c| c.2 < start);
        let own_end = context.partition_point(|c| c.2 < end);
        let mut state = data.clone();
        if i > 0 {
            state.problems.clear();
        }
        ranges.push(DecodeRange {
            index: i,
            carry,
            start,
            end,
            last: next.is_none(),
            limit,
            described,
            data: state,
            selected: Arc::clone(&selected),
            context: Arc::new(context[..before].to_vec()),
            own_context: context[before..own_end].iter().map(|c| c.2).collect(),
            opts,
        });
    }
    Ok(ranges)
}

/// Where one range's decoding stopped early: the framing error that ended the file.
pub type RangeStop = Option<PerfDataError>;

impl DecodeRange {
    /// Decode this range of `file` (the whole file its plan was made from): its lines go
    /// to `lines` in pieces of about [`crate::to_lines::FLUSH_BYTES`] (it takes the
    /// buffer's bytes, leaving an empty buffer to fill next: handed on, not copied). A
    /// range after the first tells `begun` the state it starts its own records in before
    /// any line ([`RangeEnd::joins`] compares it with how the range before ended).
    pub fn decode(
        self,
        file: &[u8],
        judge: Option<Box<dyn RecordJudge>>,
        lines: &mut dyn FnMut(&mut Vec<u8>),
        begun: &mut dyn FnMut(RangeStart),
    ) -> RangeEnd {
        let r = self;
        let table = Arc::clone(&r.selected);
        let select = move |system: &str, event: &str| {
            table
                .iter()
                .find(|(s, e, _)| s == system && e == event)
                .is_some_and(|(_, _, yes)| *yes)
        };
        let endian = r.data.endian;
        let mut dec = LineDecoder::new(r.data, r.opts, select).with_judge(judge);
        let mut none = |_: &[u8]| true;
        if r.index > 0 {
            // Who is who at the cut: the context records out before it, in time order.
            let mut before: Vec<&(u64, usize, usize, usize)> = r
                .context
                .iter()
                .filter(|c| r.limit.is_some_and(|l| c.0 <= l))
                .collect();
            before.sort_by_key(|c| c.0);
            let (_, mut w) = dec.split(&mut none);
            for &&(_, event, offset, len) in &before {
                // A record's place in the file: the sum fits (else nothing is got).
                if let Some(bytes) = file.get(offset..offset.saturating_add(len)) {
                    w.write(event, offset as u64, bytes);
                }
            }
            // Context records write nothing and count nothing; should one be taken for
            // a line, it belongs to the range before.
            dec.out.clear();
            dec.stats = DecodeStats::default();
            dec.orderer.resume_after(r.limit);
            dec.described.seed(&r.described);
            // The round before: hold what the range before left held; the events whose
            // samples in it went out at the cut were described there.
            let mut described = Vec::new();
            let carried = file.get(r.carry..r.start).unwrap_or_default();
            for rec in Records::new(carried, r.carry as u64, endian).flatten() {
                match dec.classify(&rec) {
                    Ok(Seen::Pushed {
                        time,
                        event,
                        context,
                    }) => {
                        if r.limit.is_none_or(|l| time > l) {
                            let tag = u32::try_from(event).unwrap_or(u32::MAX);
                            let len = u32::try_from(rec.bytes.len()).unwrap_or(u32::MAX);
                            dec.orderer
                                .push_external(time, tag, rec.offset as usize, len);
                        } else if !context && rec.header.kind == PERF_RECORD_SAMPLE {
                            // (A lost record has no schema line.)
                            mark(&mut described, event);
                        }
                    }
                    Ok(Seen::Round) => {
                        dec.drain(Drain::Round, file, &mut none);
                    }
                    _ => {}
                }
            }
            if dec.opts.schema {
                dec.described.seed(&described);
            }
            begun(RangeStart {
                carry: r.carry,
                start: r.start,
                state: CutState::of(&dec),
            });
        }
        dec.hand_over = Some(Box::new(|buf: &mut Vec<u8>| lines(buf)));
        let own = file.get(r.start..r.end).unwrap_or_default();
        let mut stopped = None;
        let mut rounds = (r.start, r.start);
        let mut context = Vec::new();
        for rec in Records::new(own, r.start as u64, endian) {
            let rec = match rec {
                Ok(rec) => rec,
                Err(e) => {
                    stopped = Some(e);
                    break;
                }
            };
            let kind = rec.header.kind;
            if kind != PERF_RECORD_SAMPLE {
                if kind == crate::perf_data::records::kind::FINISHED_ROUND {
                    // A record inside the file: the sum fits.
                    let end = (rec.offset as usize).saturating_add(rec.bytes.len());
                    rounds = (rounds.1, end);
                } else if dec.context_record(kind, &rec).is_some() {
                    context.push(rec.offset as usize);
                }
            }
            if dec.record_in(&rec, file, &mut none) == FeedControl::Stop {
                break;
            }
        }
        let state = (!r.last).then(|| CutState::of(&dec));
        let in_order = dec.orderer.late() == 0 && dec.orderer.bound_reached() == 0;
        if r.last {
            // `finish_in`, its last lines handed on below.
            dec.drain(Drain::All, file, &mut none);
            dec.writer.end_lines(&mut dec.out);
        }
        // What is left (for a range before the last, what the next drain would have
        // flushed with its own lines).
        let stats = std::mem::take(&mut dec.stats);
        let mut out = std::mem::take(&mut dec.out);
        drop(dec);
        if !out.is_empty() {
            lines(&mut out);
        }
        RangeEnd {
            stats,
            stop: stopped,
            state,
            rounds,
            context_ok: context == r.own_context,
            in_order,
        }
    }
}

impl DecodeStats {
    /// Add what the next range's decoder saw (range decoding): counts summed, problems
    /// kept in order up to [`MAX_KEPT_ERRORS`].
    pub fn absorb(&mut self, next: DecodeStats) {
        // Counts of items of one file, each at least a byte of it, cannot add up past a
        // u64: saturating all the same. `lost` is summed from the file's claims: checked.
        self.records = self.records.saturating_add(next.records);
        self.add_lost(next.lost);
        self.lost_overflow |= next.lost_overflow;
        self.time_unknown = self.time_unknown.saturating_add(next.time_unknown);
        self.unknown_event = self.unknown_event.saturating_add(next.unknown_event);
        for (name, n) in next.skipped {
            let count = self.skipped.entry(name).or_default();
            *count = count.saturating_add(n);
        }
        self.late = self.late.saturating_add(next.late);
        self.order_buffer_full = self
            .order_buffer_full
            .saturating_add(next.order_buffer_full);
        let room = MAX_KEPT_ERRORS.saturating_sub(self.errors.len());
        self.errors.extend(next.errors.into_iter().take(room));
        self.error_count = self.error_count.saturating_add(next.error_count);
    }
}
