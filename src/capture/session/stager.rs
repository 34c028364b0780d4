//! The stager: what arrives from the backend's buffers → staged entries (records, lost
//! counts, notices) in the current [`StagedChunk`]. It only copies: decoding and JSON
//! happen on the formatter thread, so the buffers drain at memcpy speed.

use std::collections::BTreeSet;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use uevrec_parsers::{PreparedFormat, RecordStamp};

use super::{KeySlots, LiveStats, Summary};
use crate::capture::backend::{Arrival, Backend, DrainPool};
use crate::capture::clock::{WallClock, monotonic_ns};
#[cfg(doc)]
use crate::capture::staging::Staged;
use crate::capture::staging::{Closed, FormatSource, STAGE_BYTES, StageSender, StagedChunk};

/// One attached tracepoint; `E` is the backend's handle ([`Backend::Event`]).
#[derive(Debug)]
pub(super) struct Event<E> {
    pub(super) system: String,
    pub(super) name: String,
    /// `system:name`.
    pub(super) key: String,
    /// The format, with its names and keys rendered for the JSON lines (shared with
    /// the formatter thread).
    pub(super) prepared: Arc<PreparedFormat>,
    /// What tracefs said about it (for raw outputs).
    pub(super) source: Arc<FormatSource>,
    pub(super) handle: E,
    pub(super) records: u64,
}

/// The attached events and the chunk being filled.
pub(super) struct Stager<E> {
    pub(super) events: Vec<Option<Event<E>>>,
    /// Handles of detached events, to be released ([`Backend::release`]) together.
    pub(super) retired: Vec<E>,
    /// Sample key → slot in `events`.
    pub(super) by_key: KeySlots,
    pub(super) clock: WallClock,
    pub(super) chunk: StagedChunk,
    self_pid: u32,
    include_self: bool,
    max_records: Option<u64>,
    pub(super) summary: Summary,
    /// Samples whose key belongs to no attached event.
    pub(super) unknown: u64,
    /// Records that did not parse.
    pub(super) malformed: u64,
    /// CPUs whose marker was seen (see [`Backend::set_markers`]).
    pub(super) marker_seen: BTreeSet<u32>,
    /// The drain threads a busy pass drains the buffers with ([`Stager::drain`]), started
    /// once for the session (`--drain-threads` ≥ 2); None: this thread alone.
    pub(super) pool: Option<DrainPool>,
    /// The last pass staged a chunk's worth or more: the next one drains in parallel.
    busy: bool,
    /// Whether the last drain staged anything. A drain that stages nothing after one that
    /// staged nothing sends no [`Staged::Drained`](crate::capture::staging::Staged) mark:
    /// the last mark already released every record before it, so an idle loop (every
    /// 5 ms for `tail`) wakes no other thread — but for one mark every
    /// [`IDLE_MARK_NS`], so that what waits for the time to pass (a flight dump cut at
    /// its signal) does not wait for the next record.
    staged_last: bool,
    /// When the last [`Staged::Drained`](crate::capture::staging::Staged) mark was sent
    /// (the monotonic clock, ns).
    last_mark: u64,
    /// The drain threads' chunks, kept between parallel passes (pool buffers).
    group_chunks: Vec<StagedChunk>,
    /// Note where each ring's records end in every chunk ([`Backend::keeps_pages`]).
    pub(super) ring_marks: bool,
}

/// How often an idle session still sends a Drained mark (ns): a flight dump cut at its
/// signal, with its events silent since, is written at most this long after.
const IDLE_MARK_NS: u64 = 100_000_000;

/// What a drain thread of a parallel pass reads with ([`Stager::drain`]): the session's
/// state, read only.
struct Shared<'a> {
    by_key: &'a KeySlots,
    /// Slot → attached.
    attached: Vec<bool>,
    clock: &'a WallClock,
    self_pid: u32,
    include_self: bool,
    out: &'a StageSender<'a>,
    /// [`Stager::ring_marks`].
    ring_marks: bool,
}

/// A drain thread's part of a parallel pass: its chunk and what it counted (added to the
/// session's counts after the pass).
struct GroupTaker<'a> {
    shared: &'a Shared<'a>,
    chunk: StagedChunk,
    /// Records per slot.
    records: Vec<u64>,
    lost_per_cpu: Vec<(u32, u64)>,
    unknown: u64,
    malformed: u64,
    markers: Vec<u32>,
    /// The formatter went away: the pass stops.
    closed: bool,
}

impl GroupTaker<'_> {
    /// [`Stager::take`] for one drain thread: the same entries, staged into its own
    /// chunk, which it sends itself when full (its CPUs' records stay in their order).
    fn take(&mut self, cpu: u32, arrival: Arrival<'_>) -> ControlFlow<()> {
        let sh = self.shared;
        match arrival {
            Arrival::Sample { key, time, pid, .. } => {
                if let (true, Some(t)) = (sh.ring_marks, time) {
                    self.chunk.note_ring(cpu, t);
                }
                let Some(slot) = key.and_then(|k| sh.by_key.lookup(k)) else {
                    self.unknown += 1;
                    return ControlFlow::Continue(());
                };
                if !sh.include_self && pid == Some(sh.self_pid) {
                    return ControlFlow::Continue(());
                }
                if !sh.attached.get(slot).copied().unwrap_or(false) {
                    self.unknown += 1;
                    return ControlFlow::Continue(());
                }
                stage_sample(&mut self.chunk, sh.clock, slot as u32, cpu, &arrival);
                self.records[slot] += 1;
            }
            Arrival::Lost { lost, time } => {
                let t = time.and_then(|t| sh.clock.to_unix_ns(t));
                self.chunk.push_lost(t, cpu, lost);
                if sh.ring_marks {
                    self.chunk.note_lost(cpu, lost);
                }
                match self.lost_per_cpu.iter_mut().find(|(c, _)| *c == cpu) {
                    Some((_, n)) => *n += lost,
                    None => self.lost_per_cpu.push((cpu, lost)),
                }
            }
            // Only the trackers hold these (read on the session thread); staged as
            // they come should a buffer ever hold one.
            Arrival::Context { time, update } => {
                let t = time.and_then(|t| sh.clock.to_unix_ns(t));
                self.chunk.push_context(t, &update);
            }
            Arrival::ContextLost { .. } | Arrival::Other => {}
            Arrival::Marker => self.markers.push(cpu),
            Arrival::Malformed => self.malformed += 1,
        }
        if self.chunk.len() >= STAGE_BYTES && sh.out.flush(&mut self.chunk).is_err() {
            self.closed = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

impl<E> Stager<E> {
    /// A stager filling `chunk`; samples of uevrec's own process are dropped unless
    /// `include_self`; staging ends after `max_records`.
    pub(super) fn new(chunk: StagedChunk, include_self: bool, max_records: Option<u64>) -> Self {
        Stager {
            events: Vec::new(),
            retired: Vec::new(),
            by_key: KeySlots::default(),
            clock: WallClock::new(crate::capture::clock::RESAMPLE_INTERVAL),
            chunk,
            self_pid: std::process::id(),
            include_self,
            max_records,
            summary: Summary::default(),
            unknown: 0,
            malformed: 0,
            marker_seen: BTreeSet::new(),
            ring_marks: false,
            pool: None,
            busy: false,
            staged_last: true,
            last_mark: 0,
            group_chunks: Vec::new(),
        }
    }

    fn now(&self) -> Option<u64> {
        self.clock.to_unix_ns(monotonic_ns())
    }

    /// Stage a notice, stamped now.
    pub(super) fn notice(&mut self, what: &str, event: Option<&str>, message: &str) {
        let t = self.now();
        self.chunk.push_notice(t, what, event, message);
    }

    /// Stage what the backend recalls of who is who ([`Backend::recall_context`]).
    pub(super) fn recall_context<B: Backend<Event = E>>(&mut self, backend: &mut B) {
        backend.recall_context(|cpu, arrival| self.take(cpu, arrival));
    }

    /// Whether `max_records` records have been staged.
    pub(super) fn limit_reached(&self) -> bool {
        self.max_records.is_some_and(|m| self.summary.records >= m)
    }

    /// Stage one arrival from `cpu`'s buffer; breaks when the chunk is full. A sample in
    /// line, in the backend's read loop (its fields not stored and loaded again: the
    /// session's cost per record, BENCHMARKS.md issue 41); anything else out of line.
    #[inline(always)]
    fn take(&mut self, cpu: u32, arrival: Arrival<'_>) -> ControlFlow<()> {
        let Arrival::Sample { key, time, pid, .. } = arrival else {
            return self.take_other(cpu, arrival);
        };
        if let (true, Some(t)) = (self.ring_marks, time) {
            self.chunk.note_ring(cpu, t);
        }
        let Some(slot) = key.and_then(|k| self.by_key.get(k)) else {
            self.unknown += 1;
            return ControlFlow::Continue(());
        };
        if (!self.include_self && pid == Some(self.self_pid)) || self.limit_reached() {
            return ControlFlow::Continue(());
        }
        let Some(ev) = self.events.get_mut(slot).and_then(Option::as_mut) else {
            self.unknown += 1;
            return ControlFlow::Continue(());
        };
        // Slots fit in u32: [`StageSender::format`] refuses any other.
        stage_sample(&mut self.chunk, &self.clock, slot as u32, cpu, &arrival);
        ev.records += 1;
        self.summary.records += 1;
        self.full()
    }

    /// Break when the chunk is full.
    fn full(&self) -> ControlFlow<()> {
        if self.chunk.len() >= STAGE_BYTES {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }

    /// [`Stager::take`] of anything but a sample.
    #[inline(never)]
    fn take_other(&mut self, cpu: u32, arrival: Arrival<'_>) -> ControlFlow<()> {
        match arrival {
            // Staged by `take`.
            Arrival::Sample { .. } => {}
            Arrival::Lost { lost, time } => {
                let t = time.and_then(|t| self.clock.to_unix_ns(t));
                self.chunk.push_lost(t, cpu, lost);
                if self.ring_marks {
                    self.chunk.note_lost(cpu, lost);
                }
                *self.summary.lost_per_cpu.entry(cpu).or_default() += lost;
                self.summary.lost += lost;
            }
            Arrival::Context { time, update } => {
                let t = time.and_then(|t| self.clock.to_unix_ns(t));
                self.chunk.push_context(t, &update);
            }
            Arrival::ContextLost { lost } => {
                let t = self.now();
                let msg = format!(
                    "{lost} thread-name/cgroup records lost on CPU {cpu}: `comm` or `cgroup` \
                     may be missing or stale for the threads concerned"
                );
                self.chunk.push_notice(t, "context_lost", None, &msg);
            }
            Arrival::Marker => {
                self.marker_seen.insert(cpu);
                return ControlFlow::Continue(());
            }
            Arrival::Other => {}
            Arrival::Malformed => self.malformed += 1,
        }
        self.full()
    }

    /// Read every buffer until it is empty (as of the reads), sending full chunks. When
    /// every buffer was read to its end, the chunk is sent and then [`Staged::Drained`]
    /// with the time the pass began (crate::pipeline).
    ///
    /// After a pass that staged a chunk's worth or more, with drain threads (`pool`), a
    /// backend that can ([`Backend::drains_in_parallel`]) and no `max_records`, the next
    /// pass is parallel ([`Stager::drain_parallel`]).
    pub(super) fn drain<B: Backend<Event = E>>(
        &mut self,
        backend: &mut B,
        out: &StageSender<'_>,
        stats: &LiveStats,
    ) -> Result<(), Closed> {
        let (records0, lost0) = (self.summary.records, self.summary.lost);
        let began = monotonic_ns();
        let parallel = self.busy
            && self.pool.is_some()
            && self.max_records.is_none()
            && backend.drains_in_parallel();
        if parallel {
            let result = self.drain_parallel(backend, out, began);
            stats
                .records
                .fetch_add(self.summary.records - records0, Ordering::Relaxed);
            stats
                .lost
                .fetch_add(self.summary.lost - lost0, Ordering::Relaxed);
            return result;
        }
        let mut staged = 0usize;
        let result = (|| {
            let mut complete = true;
            for buffer in 0..backend.buffers() {
                // Bounded so one busy CPU cannot starve the others or the rescan.
                let mut full = false;
                for _ in 0..64 {
                    full = false;
                    backend.read(buffer, |cpu, arrival| {
                        let flow = self.take(cpu, arrival);
                        full = flow.is_break();
                        flow
                    });
                    if !full {
                        break;
                    }
                    staged += self.chunk.len();
                    out.flush(&mut self.chunk)?;
                }
                complete &= !full;
            }
            staged += self.chunk.len();
            self.chunk.mark_round_end();
            let mark = self.marks(began, staged > 0);
            if let Some(before) = self.clock.to_unix_ns(began).filter(|_| complete && mark) {
                out.flush(&mut self.chunk)?;
                out.drained(before)?;
                self.last_mark = began;
            }
            Ok(())
        })();
        self.busy = staged >= STAGE_BYTES;
        stats
            .records
            .fetch_add(self.summary.records - records0, Ordering::Relaxed);
        stats
            .stage_queued
            .store(out.queued() as u64, Ordering::Relaxed);
        if self.summary.lost != lost0 {
            stats
                .lost
                .fetch_add(self.summary.lost - lost0, Ordering::Relaxed);
            let mut per_cpu = stats.lost_per_cpu.lock().unwrap_or_else(|e| e.into_inner());
            per_cpu.clone_from(&self.summary.lost_per_cpu);
        }
        result
    }

    /// A pass over every buffer on the drain threads (`pool`: the session's CPUs split in
    /// groups next to each other, group i always on thread i): the trackers first, on this thread, into the session's
    /// chunk, which is sent before the groups' (a record's thread is known before the
    /// record); then each thread stages its CPUs' records into a chunk of its own and
    /// sends it when full, and at the end. Each CPU's records keep their order; records of
    /// different groups interleave by chunks. Counts are added up after the pass, so
    /// they are exact. No round ends are marked (leaving them out is safe: see
    /// [`StagedChunk::mark_round_end`]).
    fn drain_parallel<B: Backend<Event = E>>(
        &mut self,
        backend: &mut B,
        out: &StageSender<'_>,
        began: u64,
    ) -> Result<(), Closed> {
        let limit = backend.read_trackers(|cpu, arrival| self.take(cpu, arrival));
        out.flush(&mut self.chunk)?;
        let Some(pool) = self.pool.take() else {
            return Ok(());
        };
        let groups = pool.threads().min(backend.buffers().max(1));
        while self.group_chunks.len() < groups {
            self.group_chunks.push(out.fresh_chunk()?);
        }
        let shared = Shared {
            by_key: &self.by_key,
            attached: self.events.iter().map(Option::is_some).collect(),
            clock: &self.clock,
            self_pid: self.self_pid,
            include_self: self.include_self,
            out,
            ring_marks: self.ring_marks,
        };
        let slots = self.events.len();
        let mut takers: Vec<GroupTaker<'_>> = self
            .group_chunks
            .drain(..groups)
            .map(|chunk| GroupTaker {
                shared: &shared,
                chunk,
                records: vec![0; slots],
                lost_per_cpu: Vec::new(),
                unknown: 0,
                malformed: 0,
                markers: Vec::new(),
                closed: false,
            })
            .collect();
        let failed = {
            let mut consumers: Vec<_> = takers
                .iter_mut()
                .map(|t| move |cpu: u32, a: Arrival<'_>| t.take(cpu, a))
                .collect();
            backend.read_groups(limit, &pool, &mut consumers).err()
        };
        let mut closed = false;
        let mut staged = 0;
        let mut sent = !self.chunk.is_empty();
        let mut chunks = Vec::with_capacity(takers.len());
        for mut t in takers {
            staged += t.records.iter().sum::<u64>();
            for (slot, n) in t.records.iter().enumerate().filter(|(_, n)| **n > 0) {
                if let Some(ev) = self.events.get_mut(slot).and_then(Option::as_mut) {
                    ev.records += n;
                }
                self.summary.records += n;
            }
            for (cpu, n) in t.lost_per_cpu.drain(..) {
                *self.summary.lost_per_cpu.entry(cpu).or_default() += n;
                self.summary.lost += n;
            }
            self.unknown += t.unknown;
            self.malformed += t.malformed;
            self.marker_seen.extend(t.markers.iter().copied());
            closed |= t.closed;
            if !closed && !t.chunk.is_empty() {
                sent = true;
                closed = out.flush(&mut t.chunk).is_err();
            }
            chunks.push(t.chunk);
        }
        self.group_chunks = chunks;
        match failed {
            // Its counts and chunk were kept above; from now on this thread drains.
            Some(e) => self.notice("drain_thread_failed", None, &e.to_string()),
            None => self.pool = Some(pool),
        }
        if closed {
            return Err(Closed);
        }
        // About a chunk's worth of sys_enter records (96 bytes staged each) or more.
        self.busy = staged as usize * 96 >= STAGE_BYTES;
        let mark = self.marks(began, sent);
        if let Some(before) = self.clock.to_unix_ns(began).filter(|_| mark) {
            out.flush(&mut self.chunk)?;
            out.drained(before)?;
            self.last_mark = began;
        }
        Ok(())
    }

    /// Whether a drain that began at `began` (and `staged` something, or not) sends a
    /// Drained mark: after it or the one before staged, or once the last mark is
    /// [`IDLE_MARK_NS`] old.
    fn marks(&mut self, began: u64, staged: bool) -> bool {
        let before = std::mem::replace(&mut self.staged_last, staged);
        before || staged || began.saturating_sub(self.last_mark) >= IDLE_MARK_NS
    }

    /// Release the handles of the events detached since the last call, in one batch
    /// (perf: one background close for all of them).
    pub(super) fn release_retired<B: Backend<Event = E>>(&mut self, backend: &mut B) {
        if !self.retired.is_empty() {
            backend.release(std::mem::take(&mut self.retired));
        }
    }

    /// Every event's records into the summary's per-event counts; the handles of every
    /// event, attached or retired, to be released ([`Backend::release`]).
    pub(super) fn into_summary(mut self) -> (Summary, Vec<E>) {
        let mut handles = std::mem::take(&mut self.retired);
        for ev in self.events.drain(..).flatten() {
            *self.summary.records_per_event.entry(ev.key).or_default() += ev.records;
            handles.push(ev.handle);
        }
        (self.summary, handles)
    }
}

/// Stage the sample `arrival` of event `slot`, read from `cpu`'s buffer, in `chunk`: its
/// stamp (the wall-clock time of its kernel time by `clock`; the CPU it names, else the
/// buffer's), then its record with its call stacks. Anything but a sample stages nothing.
#[inline]
pub fn stage_sample(
    chunk: &mut StagedChunk,
    clock: &WallClock,
    slot: u32,
    cpu: u32,
    arrival: &Arrival<'_>,
) {
    let Arrival::Sample {
        time,
        cpu: sample_cpu,
        pid,
        tid,
        cgroup,
        raw,
        callchain,
        user_stack,
        ..
    } = *arrival
    else {
        return;
    };
    let stamp = RecordStamp {
        time_unix_ns: time.and_then(|t| clock.to_unix_ns(t)),
        cpu: sample_cpu.unwrap_or(cpu),
        pid: pid.unwrap_or(0),
        tid: tid.unwrap_or(0),
    };
    chunk.push_record_stacked(slot, &stamp, cgroup, callchain, user_stack, raw);
}
