//! perf.data records → the JSON lines live recording writes ([`crate::LineWriter`]), in
//! time order ([`crate::perf_data::order`]); the whole of `uevrec decode` but the I/O.
//!
//! Per event (attr): its format is the tracing data's format with the attr's `config` as
//! `ID:`, prepared once ([`PreparedFormat`], multi-format names split as the recorder
//! splits them); a caller's selector decides whether its samples are written. Samples go
//! through the [`Orderer`] when they have a time and out at once when they do not; so do
//! `PERF_RECORD_LOST` / `LOST_SAMPLES` records, which become `lost` lines.
//!
//! Time: with `HEADER_CLOCK_DATA` (`perf record -k CLOCK_MONOTONIC`, perf ≥ 5.10) a
//! sample's `time` is `wall + (sample time − clockid time)` of that reference pair, for
//! events whose attr uses that clock; otherwise `time` is `null` (counted in
//! [`DecodeStats::time_unknown`]).
//!
//! Problems inside a record (a sample that does not fit its layout, an attr or feature
//! record that does not parse) are counted and kept in [`DecodeStats::errors`] and
//! decoding goes on; the caller reports them. Framing errors are the caller's (they end
//! the input).

use super::SchemaOnce;
use super::{DecodeOptions, DecodeStats, FLUSH_BYTES, MAX_KEPT_ERRORS, hex};
use crate::bytes::u64_at;
use crate::callchain::Callchain;
use crate::context::{ContextTracker, ContextUpdate};
use crate::event_name::split_multi_format;
use crate::json_line::RecordWriter;
use crate::json_line::{LineOptions, PreparedFormat, RecordStamp};
use crate::output::{Judged, OutputWriter, RecordJudge, RecordSink, StackNamer, add_stack};
use crate::perf_data::attr::flag;
use crate::perf_data::order::{Drain, Orderer};
use crate::perf_data::records::{RawRecord, StreamReader};
use crate::perf_data::tracing_data::ParsedFormat;
use crate::perf_data::{ClockData, Item, PerfData, PerfDataError};
use crate::perf_sample::{
    PERF_RECORD_CGROUP, PERF_RECORD_COMM, PERF_RECORD_EXIT, PERF_RECORD_FORK, PERF_RECORD_MMAP2,
    PERF_RECORD_SAMPLE, Record, Sample, SampleFormat,
};
use crate::user_stack::UserStack;

mod ranges;
pub use ranges::{
    DecodeRange, MAX_CONTEXT_RECORDS, RangeEnd, RangePlanner, RangeStart, RangeStop,
    ranges_from_index,
};

/// What the decoder tells whoever feeds it records: go on, or stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedControl {
    /// Feed more records.
    Continue,
    /// Stop: `--count` reached, or the sink said stop.
    Stop,
}

/// Per event: its prepared format, if it is written at all.
#[derive(Debug, Clone, Default)]
struct Slot {
    /// Set once the slot was looked at with the tracing data known.
    resolved: bool,
    prepared: Option<PreparedFormat>,
    /// Why samples are skipped, if they are (an event name for the stats).
    skip: Option<String>,
    selected: bool,
    clock: Option<ClockData>,
    /// `selected`, with a format and not skipped: its samples are written (one check per
    /// sample instead of three).
    written: bool,
    /// [`crate::perf_data::Event::time_at`], copied like `layout`.
    time_at: Option<usize>,
    /// The event's layout, if it has one (a copy of [`crate::perf_data::Event::layout`], so that a
    /// record going out looks up one slot, not its event and then its slot).
    layout: Option<SampleFormat>,
    /// Its attr asks for build ids in `PERF_RECORD_MMAP2` (`build_id`): only then is a
    /// record's build id taken. The kernel (seen on 6.18) sets the build-id bit of an
    /// MMAP2 record for every event after one that asked for them, over the inode
    /// numbers of those that did not (perf's, while `uevrec record -g` runs).
    build_ids: bool,
}

/// Takes a buffer of lines, leaving an empty one (range decoding).
type HandOver<'s> = dyn FnMut(&mut Vec<u8>) + 's;

/// Which events to write: `select(system, event)`.
type Selector<'s> = Box<dyn Fn(&str, &str) -> bool + 's>;

/// Turns records into JSON lines.
pub struct LineDecoder<'s> {
    data: PerfData,
    orderer: Orderer,
    writer: OutputWriter,
    described: SchemaOnce,
    slots: Vec<Slot>,
    select: Selector<'s>,
    opts: DecodeOptions,
    out: Vec<u8>,
    stats: DecodeStats,
    /// Who is who (with [`DecodeOptions::context`]).
    context: Option<ContextTracker>,
    /// Where the records go instead of the writer ([`LineDecoder::with_sink`]).
    sink: Option<Box<dyn RecordSink + 's>>,
    /// Names the call stacks the lines carry ([`LineDecoder::with_stacks`]).
    stacks: Option<Box<dyn StackNamer + 's>>,
    /// Which records are written ([`LineDecoder::with_judge`]).
    judge: Option<Box<dyn RecordJudge + 's>>,
    /// Instead of the caller's flush: takes the lines' buffer, leaving an empty one to
    /// fill next (range decoding hands its buffers on whole: [`ranges`]).
    hand_over: Option<Box<HandOver<'s>>>,
}

/// The writing side, apart from the orderer (so both can be borrowed at once).
struct Out<'a, 'b> {
    slots: &'a [Slot],
    writer: &'a mut OutputWriter,
    described: &'a mut SchemaOnce,
    out: &'a mut Vec<u8>,
    stats: &'a mut DecodeStats,
    /// [`DecodeOptions::max_records`], `u64::MAX` for none (one comparison per line).
    max_records: u64,
    /// The decoder's `hand_over`.
    hand_over: Option<&'a mut HandOver<'b>>,
    flush: &'a mut dyn FnMut(&[u8]) -> bool,
    context: Option<&'a mut ContextTracker>,
    sink: Option<&'a mut (dyn RecordSink + 'b)>,
    stacks: Option<&'a mut (dyn StackNamer + 'b)>,
    judge: Option<&'a mut (dyn RecordJudge + 'b)>,
    /// The byte order of the trace entries (what the judge reads them in).
    endian: crate::Endian,
    /// [`DecodeOptions::stacks`]: samples hand on their callchains.
    with_stacks: bool,
    /// The file's `HEADER_BUILD_ID` (name → build id): the build id of a mapping whose
    /// record carries none.
    header_build_ids: &'a std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
}

/// The cpu, pid and tid of `s` for its line (the time is the caller's).
#[inline]
fn stamp_of(s: &Sample<'_>) -> RecordStamp {
    RecordStamp {
        time_unix_ns: None,
        cpu: s.cpu.unwrap_or(0),
        pid: s.pid.unwrap_or(0),
        tid: s.tid.unwrap_or(0),
    }
}

/// Count `e`, keep it if there is room.
fn note_error(stats: &mut DecodeStats, e: PerfDataError) {
    stats.error_count = stats.error_count.saturating_add(1);
    if stats.errors.len() < MAX_KEPT_ERRORS {
        stats.errors.push(e);
    }
}

impl Out<'_, '_> {
    /// Write the record `bytes` (at `offset`) of event `event`, a sample or a lost record;
    /// false to stop. A record that does not fit its layout is counted as an error.
    fn write(&mut self, event: usize, offset: u64, bytes: &[u8]) -> bool {
        let slots = self.slots;
        let Some(slot) = slots.get(event) else {
            return true;
        };
        let Some(layout) = &slot.layout else {
            return true;
        };
        if let Some(f) = layout.line_fields(bytes) {
            let stamp = RecordStamp {
                time_unix_ns: None,
                cpu: f.cpu.unwrap_or(0),
                pid: f.pid.unwrap_or(0),
                tid: f.tid.unwrap_or(0),
            };
            let stack = f.callchain.filter(|_| self.with_stacks);
            let stacks = (stack, f.user_stack);
            return self.sample(event, slot, f.time, stamp, f.cgroup, f.raw, stacks);
        }
        // Other records, and samples that do not fit their layout (the error says why).
        match layout.parse(bytes) {
            Err(source) => {
                note_error(self.stats, PerfDataError::Sample { at: offset, source });
                true
            }
            Ok(Record::Sample(s)) => {
                let raw = s.raw.unwrap_or_default();
                let stack = s.callchain.filter(|_| self.with_stacks);
                let user =
                    (s.user_regs.zip(s.user_stack)).map(|(regs, stack)| UserStack { regs, stack });
                let stacks = (stack, user);
                self.sample(event, slot, s.time, stamp_of(&s), s.cgroup, raw, stacks)
            }
            Ok(Record::Lost {
                lost, sample_id, ..
            })
            | Ok(Record::LostSamples { lost, sample_id }) => {
                self.lost(event, sample_id.time, sample_id.cpu, lost)
            }
            Ok(rec) => {
                if let Some((time, mut update)) = rec.context_update() {
                    let time = self.unix_time(event, time);
                    if let ContextUpdate::Mmap { build_id, path, .. } = &mut update {
                        if !slot.build_ids {
                            *build_id = &[];
                        }
                        // perf's own files: the ids it listed at the end of the recording.
                        if build_id.is_empty()
                            && let Some(id) = self.header_build_ids.get(*path)
                        {
                            *build_id = id;
                        }
                    }
                    let names = matches!(
                        update,
                        ContextUpdate::Comm { .. } | ContextUpdate::Cgroup { .. }
                    );
                    // Mappings and programs are for stacks only; names for context only.
                    let for_context =
                        self.context.is_some() && !matches!(update, ContextUpdate::Mmap { .. });
                    let for_stacks = self.with_stacks && !names;
                    if let Some(c) = self.context.as_deref_mut().filter(|_| for_context) {
                        c.apply(time, update);
                    }
                    if let Some(s) = self.stacks.as_deref_mut().filter(|_| for_stacks) {
                        s.context(time, &update);
                    }
                    if let Some(sink) = &mut self.sink
                        && (for_context || for_stacks)
                    {
                        sink.context(time, update);
                    }
                }
                true
            }
        }
    }

    /// `time` (event `event`'s clock) as Unix ns, when the file says how.
    fn unix_time(&self, event: usize, time: Option<u64>) -> Option<u64> {
        let clock = self.slots.get(event).and_then(|s| s.clock);
        clock.zip(time).and_then(|(c, t)| c.to_unix_ns(t))
    }

    /// Write the sample of `event` (its `slot`) taken at `time` (the event's clock) with
    /// `stamp`'s cpu, pid and tid (its time is set here) and the trace entry `raw`;
    /// `stacks`: its callchain (when stacks are written) and user registers and stack copy.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn sample(
        &mut self,
        event: usize,
        slot: &Slot,
        time: Option<u64>,
        mut stamp: RecordStamp,
        cgroup: Option<u64>,
        raw: &[u8],
        (stack, user): (Option<Callchain<'_>>, Option<UserStack<'_>>),
    ) -> bool {
        if self.stats.records >= self.max_records {
            return false;
        }
        let Some(prepared) = &slot.prepared else {
            return true;
        };
        stamp.time_unix_ns = match (slot.clock, time) {
            (Some(c), Some(t)) => c.to_unix_ns(t),
            _ => None,
        };
        if let Some(judge) = self.judge.as_deref_mut() {
            let record = Judged {
                event,
                prepared,
                stamp: &stamp,
                clock_ns: time,
                raw,
                endian: self.endian,
                context: self.context.as_deref(),
                cgroup,
            };
            if !judge.keep(&record) {
                return true;
            }
        }
        if stamp.time_unix_ns.is_none() {
            self.stats.time_unknown = self.stats.time_unknown.saturating_add(1);
        }
        if let Some(sink) = &mut self.sink {
            let first = self.described.first(event);
            self.stats.records = self.stats.records.saturating_add(1);
            let user = user.filter(|_| stack.is_some());
            return sink.record(event, prepared, first, &stamp, cgroup, raw, stack, user)
                && self.stats.records < self.max_records;
        }
        if let Some(c) = self.context.as_deref() {
            self.writer.set_context(c, &stamp, cgroup);
        }
        let w = &mut *self.writer;
        let namer = self.stacks.as_deref_mut();
        let then = |out: &mut Vec<u8>| {
            if let (Some(stack), Some(namer)) = (stack, namer) {
                add_stack(out, namer, &stamp, stack, user);
            }
        };
        (self.described).write_record(w, self.out, event, &stamp, prepared, raw, then);
        self.stats.records = self.stats.records.saturating_add(1);
        self.maybe_flush() && self.stats.records < self.max_records
    }

    fn lost(&mut self, event: usize, time: Option<u64>, cpu: Option<u32>, lost: u64) -> bool {
        let t = self.unix_time(event, time);
        self.stats.add_lost(lost);
        if let Some(sink) = &mut self.sink {
            return sink.lost(t, cpu.unwrap_or(0), lost);
        }
        self.writer.write_lost(self.out, t, cpu.unwrap_or(0), lost);
        self.maybe_flush()
    }

    fn maybe_flush(&mut self) -> bool {
        if self.out.len() < FLUSH_BYTES {
            return true;
        }
        if let Some(take) = &mut self.hand_over {
            take(self.out);
            return true;
        }
        let go_on = (self.flush)(self.out);
        self.out.clear();
        go_on
    }
}

impl<'s> LineDecoder<'s> {
    /// A decoder for `data` (as returned by [`PerfData::open`] or [`PerfData::pipe`]);
    /// `select(system, event)` says which events to write (event names as in the format,
    /// multi-format ones with their `.<id>`).
    pub fn new(
        data: PerfData,
        opts: DecodeOptions,
        select: impl Fn(&str, &str) -> bool + 's,
    ) -> Self {
        let endian = data.tracing_data().map_or(data.endian, |t| t.endian);
        let mut d = LineDecoder {
            data,
            orderer: Orderer::new(opts.order_bytes),
            writer: OutputWriter::new(
                opts.format,
                LineOptions {
                    include_common: opts.include_common,
                    endian,
                },
            ),
            described: SchemaOnce::new(opts.schema),
            slots: Vec::new(),
            select: Box::new(select),
            opts,
            out: Vec::with_capacity(FLUSH_BYTES + 64 * 1024),
            stats: DecodeStats::default(),
            context: (opts.context && opts.format.carries_context()).then(ContextTracker::new),
            sink: None,
            stacks: None,
            judge: None,
            hand_over: None,
        };
        for e in std::mem::take(&mut d.data.problems) {
            d.error(e);
        }
        d.refresh();
        d
    }

    /// Hand the records to `sink` instead of writing them (the lines `flush` is then
    /// given hold nothing; [`RecordSink`]). The decoder still orders them, counts them,
    /// tracks who is who and notes each event's first record.
    pub fn with_sink(mut self, sink: Box<dyn RecordSink + 's>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// Name the call stacks of the lines with `namer` ([`DecodeOptions::stacks`]; with a
    /// sink, the sink's records carry the callchains and `namer` is not needed).
    pub fn with_stacks(mut self, namer: Box<dyn StackNamer + 's>) -> Self {
        self.stacks = Some(namer);
        self
    }

    /// Write (or hand to the sink) only the records `judge` keeps ([`RecordJudge`]).
    pub fn with_judge(mut self, judge: Option<Box<dyn RecordJudge + 's>>) -> Self {
        self.judge = judge;
        self
    }

    /// The perf.data state.
    pub fn data(&self) -> &PerfData {
        &self.data
    }

    /// What was seen so far.
    pub fn stats(&self) -> &DecodeStats {
        &self.stats
    }

    fn error(&mut self, e: PerfDataError) {
        note_error(&mut self.stats, e);
    }

    /// Give every event a slot; resolve formats once the tracing data is known.
    fn refresh(&mut self) {
        let n = self.data.events().len();
        self.slots.resize_with(n, Slot::default);
        let have_tracing = self.data.tracing_data().is_some();
        let clock = self.data.clock_data();
        let endian = self
            .data
            .tracing_data()
            .map_or(self.data.endian, |t| t.endian);
        // Records an OTLP writer holds go out before it is replaced.
        self.writer.end_lines(&mut self.out);
        self.writer = OutputWriter::new(
            self.opts.format,
            LineOptions {
                include_common: self.opts.include_common,
                endian,
            },
        );
        if let Some(host) = &self.data.features.hostname {
            self.writer.set_host_name(host);
        }
        for event in 0..n {
            let attr = self.data.events()[event].attr;
            let clock_matches = |c: &ClockData| attr.use_clockid() == Some(c.clockid as i32);
            self.slots[event].clock = clock.filter(clock_matches);
            self.slots[event].layout = self.data.events()[event].layout.as_ref().ok().copied();
            self.slots[event].time_at = self.data.events()[event].time_at;
            self.slots[event].build_ids = attr.flags & 1 << flag::BUILD_ID != 0;
            if self.slots[event].resolved {
                continue;
            }
            let slot = match self.data.format(event) {
                Some(ParsedFormat {
                    system,
                    format: Ok(format),
                    ..
                }) => {
                    let selected = (self.select)(system, &format.name);
                    let (base, format_id) = match split_multi_format(&format.name) {
                        Some((b, id)) if system != "user_events" => (b, Some(id)),
                        _ => (format.name.as_str(), None),
                    };
                    Slot {
                        resolved: true,
                        prepared: selected
                            .then(|| PreparedFormat::new(format, system, base, format_id)),
                        skip: match &self.data.events()[event].layout {
                            Err(e) => Some(format!("{system}:{} ({e})", format.name)),
                            Ok(_) => None,
                        },
                        selected,
                        clock: self.slots[event].clock,
                        layout: self.slots[event].layout,
                        time_at: self.slots[event].time_at,
                        build_ids: self.slots[event].build_ids,
                        written: false,
                    }
                }
                Some(ParsedFormat {
                    format: Err(e), at, ..
                }) => {
                    let (at, why) = (*at, e.to_string());
                    self.error(PerfDataError::BadTracingData {
                        at,
                        why: format!("format text does not parse: {why}"),
                    });
                    self.no_format_slot(event, have_tracing)
                }
                None => self.no_format_slot(event, have_tracing),
            };
            self.slots[event] = slot;
            let slot = &mut self.slots[event];
            slot.written = slot.selected && slot.prepared.is_some() && slot.skip.is_none();
        }
    }

    fn no_format_slot(&self, event: usize, have_tracing: bool) -> Slot {
        Slot {
            resolved: have_tracing,
            prepared: None,
            skip: Some(format!(
                "{} (no format in the file)",
                self.data.event_name(event)
            )),
            selected: true,
            clock: self.slots[event].clock,
            layout: self.slots[event].layout,
            time_at: self.slots[event].time_at,
            build_ids: self.slots[event].build_ids,
            written: false,
        }
    }

    fn skipped(&mut self, event: usize) {
        let Some(slot) = self.slots.get(event) else {
            self.stats.unknown_event = self.stats.unknown_event.saturating_add(1);
            return;
        };
        if !slot.selected {
            return;
        }
        let name = slot
            .skip
            .clone()
            .unwrap_or_else(|| self.data.event_name(event));
        let skipped = self.stats.skipped.entry(name).or_default();
        *skipped = skipped.saturating_add(1);
    }

    /// Take one record; lines that became ready go to `flush` in runs of about
    /// [`FLUSH_BYTES`] (it returns false to stop). The record is copied if it must wait
    /// for its time order.
    pub fn record(
        &mut self,
        rec: &RawRecord<'_>,
        flush: &mut dyn FnMut(&[u8]) -> bool,
    ) -> FeedControl {
        self.take(rec, None, flush)
    }

    /// [`LineDecoder::record`] for a record of the whole file `file` given to
    /// [`PerfData::open`] (`rec.offset` indexes it): a record that must wait is held as
    /// its offset, not copied. Pass the same `file` to every call and to
    /// [`LineDecoder::finish_in`].
    pub fn record_in(
        &mut self,
        rec: &RawRecord<'_>,
        file: &[u8],
        flush: &mut dyn FnMut(&[u8]) -> bool,
    ) -> FeedControl {
        self.take(rec, Some(file), flush)
    }

    fn take(
        &mut self,
        rec: &RawRecord<'_>,
        file: Option<&[u8]>,
        flush: &mut dyn FnMut(&[u8]) -> bool,
    ) -> FeedControl {
        if rec.header.kind == PERF_RECORD_SAMPLE {
            return self.sample(rec, file, flush);
        }
        let item = match self.data.record(rec) {
            Ok(item) => item,
            Err(e) => {
                self.error(e);
                return FeedControl::Continue;
            }
        };
        let (event, time) = match item {
            Item::Lost {
                event, sample_id, ..
            } => (event, sample_id.time),
            Item::Sample { .. } | Item::UnknownSample | Item::Unparsable { .. } => {
                return FeedControl::Continue;
            }
            Item::FinishedRound => {
                return self.drain(Drain::Round, file.unwrap_or_default(), flush);
            }
            Item::NewEvent | Item::TracingData | Item::Feature(_) => {
                for e in std::mem::take(&mut self.data.problems) {
                    self.error(e);
                }
                self.refresh();
                return FeedControl::Continue;
            }
            Item::Other(header) => match self.context_record(header.kind, rec) {
                Some(event_time) => event_time,
                None => return FeedControl::Continue,
            },
        };
        self.hold_or_write(event, time, rec, file, flush)
    }

    /// The event whose layout parses `rec` and its time, when `rec` is a COMM, FORK,
    /// EXIT or CGROUP record and context is on (it then goes through the time order
    /// like a sample, so that each sample sees the names of its moment).
    fn context_record(&self, kind: u32, rec: &RawRecord<'_>) -> Option<(usize, Option<u64>)> {
        let for_context = self.context.is_some()
            && matches!(
                kind,
                PERF_RECORD_COMM | PERF_RECORD_FORK | PERF_RECORD_EXIT | PERF_RECORD_CGROUP
            );
        let for_stacks = self.opts.stacks
            && matches!(
                kind,
                PERF_RECORD_MMAP2 | PERF_RECORD_COMM | PERF_RECORD_FORK | PERF_RECORD_EXIT
            );
        if !for_context && !for_stacks {
            return None;
        }
        let event = self.data.non_sample_event(rec.bytes);
        let layout = self.data.events().get(event)?.layout.as_ref().ok()?;
        let (time, _) = layout.parse(rec.bytes).ok()?.context_update()?;
        Some((event, time))
    }

    /// A sample: its event and time are read at their fixed places; the record is parsed
    /// in full when written (in time order), where a malformed one is counted.
    fn sample(
        &mut self,
        rec: &RawRecord<'_>,
        file: Option<&[u8]>,
        flush: &mut dyn FnMut(&[u8]) -> bool,
    ) -> FeedControl {
        let Some(event) = self.data.sample_event(rec.bytes) else {
            self.stats.unknown_event = self.stats.unknown_event.saturating_add(1);
            return FeedControl::Continue;
        };
        let Some(slot) = self.slots.get(event) else {
            self.stats.unknown_event = self.stats.unknown_event.saturating_add(1);
            return FeedControl::Continue;
        };
        if !slot.written {
            if slot.selected {
                self.skipped(event);
                return self.undecoded(event, rec, flush);
            }
            return FeedControl::Continue;
        }
        // `PerfData::sample_time` with the slot's copy of the place (no second lookup).
        let time = slot
            .time_at
            .and_then(|at| u64_at(rec.bytes, at, self.data.endian));
        self.hold_or_write(event, time, rec, file, flush)
    }

    /// A selected sample that cannot be decoded (its event has no format in the file,
    /// or a layout this reader does not know): written at once as a notice
    /// `{"uevrec":"notice","what":"undecoded","event":…,"message":…}` whose message
    /// says why and holds the whole record in hex, never dropped without a word.
    #[inline(never)]
    fn undecoded(
        &mut self,
        event: usize,
        rec: &RawRecord<'_>,
        flush: &mut dyn FnMut(&[u8]) -> bool,
    ) -> FeedControl {
        let name = self.data.event_name(event);
        let why = self.slots.get(event).and_then(|s| s.skip.clone());
        let why = why.unwrap_or_else(|| format!("{name} (no format in the file)"));
        let message = format!(
            "not decoded: {why}; the PERF_RECORD_SAMPLE at byte {} ({} bytes, hex): {}",
            rec.offset,
            rec.bytes.len(),
            hex(rec.bytes)
        );
        self.notice("undecoded", Some(&name), &message, flush)
    }

    /// Write a notice line now (after the lines already written; records held for their
    /// time order come later): `{"uevrec":"notice","what":what,…}`.
    pub fn notice(
        &mut self,
        what: &str,
        event: Option<&str>,
        message: &str,
        flush: &mut dyn FnMut(&[u8]) -> bool,
    ) -> FeedControl {
        let (_, mut out) = self.split(flush);
        let go_on = match &mut out.sink {
            Some(sink) => sink.notice(None, what, event, message),
            None => {
                out.writer.write_notice(out.out, None, what, event, message);
                out.maybe_flush()
            }
        };
        if go_on {
            FeedControl::Continue
        } else {
            FeedControl::Stop
        }
    }

    /// Hold the record for time order, or write it now when it has no time. In line (the
    /// usual case is a push): out of line, the call and its eight arguments cost as much
    /// as the push.
    #[inline(always)]
    fn hold_or_write(
        &mut self,
        event: usize,
        time: Option<u64>,
        rec: &RawRecord<'_>,
        file: Option<&[u8]>,
        flush: &mut dyn FnMut(&[u8]) -> bool,
    ) -> FeedControl {
        let tag = u32::try_from(event).unwrap_or(u32::MAX);
        match time {
            Some(t) => {
                match (file, usize::try_from(rec.offset)) {
                    (Some(_), Ok(start)) => {
                        let len = u32::try_from(rec.bytes.len()).unwrap_or(u32::MAX);
                        self.orderer.push_external(t, tag, start, len);
                    }
                    _ => self.orderer.push(t, tag, rec.offset, rec.bytes),
                }
                if self.orderer.over_bound() {
                    return self.drain(Drain::Half, file.unwrap_or_default(), flush);
                }
                FeedControl::Continue
            }
            None => self.write_now(event, rec, flush),
        }
    }

    /// Write a record that has no time at once.
    #[inline(never)]
    fn write_now(
        &mut self,
        event: usize,
        rec: &RawRecord<'_>,
        flush: &mut dyn FnMut(&[u8]) -> bool,
    ) -> FeedControl {
        let (_, mut out) = self.split(flush);
        if out.write(event, rec.offset, rec.bytes) {
            FeedControl::Continue
        } else {
            FeedControl::Stop
        }
    }

    /// The order buffer and the writing side, borrowed apart.
    fn split<'a>(
        &'a mut self,
        flush: &'a mut dyn FnMut(&[u8]) -> bool,
    ) -> (&'a mut Orderer, Out<'a, 's>) {
        let out = Out {
            slots: &self.slots,
            writer: &mut self.writer,
            described: &mut self.described,
            out: &mut self.out,
            stats: &mut self.stats,
            max_records: self.opts.max_records.unwrap_or(u64::MAX),
            hand_over: self.hand_over.as_deref_mut(),
            flush,
            context: self.context.as_mut(),
            sink: self.sink.as_deref_mut(),
            stacks: self.stacks.as_deref_mut(),
            judge: self.judge.as_deref_mut(),
            endian: self
                .data
                .tracing_data()
                .map_or(self.data.endian, |t| t.endian),
            with_stacks: self.opts.stacks,
            header_build_ids: &self.data.features.build_ids,
        };
        (&mut self.orderer, out)
    }

    fn drain(
        &mut self,
        how: Drain,
        file: &[u8],
        flush: &mut dyn FnMut(&[u8]) -> bool,
    ) -> FeedControl {
        let (orderer, mut out) = self.split(flush);
        let stopped = orderer.drain(how, file, &mut |tag, offset, bytes| {
            out.write(tag as usize, offset, bytes)
        });
        out.stats.late = orderer.late();
        out.stats.order_buffer_full = orderer.bound_reached();
        if stopped {
            FeedControl::Stop
        } else {
            FeedControl::Continue
        }
    }

    /// At the end of the input: let out everything held and hand the last lines to `flush`.
    pub fn finish(&mut self, flush: &mut dyn FnMut(&[u8]) -> bool) -> FeedControl {
        self.finish_in(&[], flush)
    }

    /// After [`LineDecoder::record_in`] calls on `file` up to offset `at`: the offset
    /// before which `file` is no longer needed (the caller may unmap it); records held
    /// from more than the order buffer's bound before `at` are copied first
    /// ([`Orderer::release_point`]).
    pub fn release_point(&mut self, at: usize, file: &[u8]) -> usize {
        self.orderer.release_point(at, self.opts.order_bytes, file)
    }

    /// [`LineDecoder::finish`] after [`LineDecoder::record_in`] calls on `file`.
    pub fn finish_in(&mut self, file: &[u8], flush: &mut dyn FnMut(&[u8]) -> bool) -> FeedControl {
        let mut step = self.drain(Drain::All, file, flush);
        // The `lost` lines added up to more than a counter holds: said after them.
        if let Some(msg) = self.stats.lost_notice() {
            match &mut self.sink {
                Some(sink) => {
                    if !sink.notice(None, "lost", None, msg) {
                        step = FeedControl::Stop;
                    }
                }
                None => self
                    .writer
                    .write_notice(&mut self.out, None, "lost", None, msg),
            }
        }
        self.writer.end_lines(&mut self.out);
        if !self.out.is_empty() {
            let go_on = flush(&self.out);
            self.out.clear();
            if !go_on {
                return FeedControl::Stop;
            }
        }
        step
    }
}

/// A pipe-mode stream → JSON lines: [`StreamReader`] framing and a [`LineDecoder`]
/// created once the pipe header is read. Memory: the reader holds one record (and what
/// was fed past it), the decoder its order buffer.
pub struct StreamDecoder<'s> {
    reader: StreamReader,
    decoder: Option<LineDecoder<'s>>,
    opts: DecodeOptions,
    select: Option<Selector<'s>>,
    /// For the line decoder, once made ([`StreamDecoder::with_sink`]).
    sink: Option<Box<dyn RecordSink + 's>>,
    /// For the line decoder, once made ([`StreamDecoder::with_stacks`]).
    stacks: Option<Box<dyn StackNamer + 's>>,
    /// For the line decoder, once made ([`StreamDecoder::with_judge`]).
    judge: Option<Box<dyn RecordJudge + 's>>,
}

impl<'s> StreamDecoder<'s> {
    /// A decoder with the options and selector of [`LineDecoder::new`].
    pub fn new(opts: DecodeOptions, select: impl Fn(&str, &str) -> bool + 's) -> Self {
        StreamDecoder {
            reader: StreamReader::new(),
            decoder: None,
            opts,
            select: Some(Box::new(select)),
            sink: None,
            stacks: None,
            judge: None,
        }
    }

    /// Write only the records `judge` keeps ([`LineDecoder::with_judge`]).
    pub fn with_judge(mut self, judge: Option<Box<dyn RecordJudge + 's>>) -> Self {
        self.judge = judge;
        self
    }

    /// Name the call stacks with `namer` ([`LineDecoder::with_stacks`]).
    pub fn with_stacks(mut self, namer: Box<dyn StackNamer + 's>) -> Self {
        self.stacks = Some(namer);
        self
    }

    /// Hand the records to `sink` instead of writing them ([`LineDecoder::with_sink`]).
    pub fn with_sink(mut self, sink: Box<dyn RecordSink + 's>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// Room for at least `min` bytes of input (see [`StreamReader::buffer`]).
    pub fn buffer(&mut self, min: usize) -> &mut [u8] {
        self.reader.buffer(min)
    }

    /// `n` bytes of [`StreamDecoder::buffer`] were written.
    pub fn filled(&mut self, n: usize) {
        self.reader.filled(n);
    }

    /// Append input bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.reader.feed(bytes);
    }

    /// The line decoder, once the header was read.
    pub fn decoder(&self) -> Option<&LineDecoder<'s>> {
        self.decoder.as_ref()
    }

    /// Absolute offset of the first byte not framed yet.
    pub fn offset(&self) -> u64 {
        self.reader.offset()
    }

    /// Decode every whole record fed so far. An error is a framing error: the input
    /// cannot be followed past it.
    pub fn process(
        &mut self,
        flush: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<FeedControl, PerfDataError> {
        if self.decoder.is_none() {
            let Some(header) = self.reader.read_header()? else {
                return Ok(FeedControl::Continue);
            };
            let data = PerfData::pipe(header.endian);
            let select = self
                .select
                .take()
                .unwrap_or_else(|| Box::new(|_: &str, _: &str| true));
            let mut decoder = LineDecoder::new(data, self.opts, select);
            if let Some(sink) = self.sink.take() {
                decoder = decoder.with_sink(sink);
            }
            if let Some(namer) = self.stacks.take() {
                decoder = decoder.with_stacks(namer);
            }
            decoder = decoder.with_judge(self.judge.take());
            self.decoder = Some(decoder);
        }
        let Some(decoder) = self.decoder.as_mut() else {
            return Ok(FeedControl::Continue);
        };
        while let Some(rec) = self.reader.next_record()? {
            if decoder.record(&rec, flush) == FeedControl::Stop {
                return Ok(FeedControl::Stop);
            }
        }
        Ok(FeedControl::Continue)
    }

    /// At the end of the input: let everything held out; an error if the input ended
    /// inside the header or a record (the lines before it are written all the same).
    pub fn finish(
        &mut self,
        flush: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<FeedControl, PerfDataError> {
        let step = match self.decoder.as_mut() {
            Some(d) => d.finish(flush),
            None => FeedControl::Continue,
        };
        self.reader.finish()?;
        Ok(step)
    }
}
