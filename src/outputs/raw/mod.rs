//! `record --raw FILE`: the staged entries ([`crate::capture::staging::StagedChunk`])
//! written as a file-mode perf.data that `perf script`, `perf report` and `uevrec decode`
//! read, instead of (or, with `-o`, as well as) JSON lines; with `--raw-format trace-dat`
//! a trace.dat of the ftrace rings' pages instead ([`dat`]; [`Raw`] says which). The raw
//! thread ([`run`]) turns each record into a `PERF_RECORD_SAMPLE`, each loss into a
//! `PERF_RECORD_LOST` and each end of a pass over the buffers into a
//! `PERF_RECORD_FINISHED_ROUND`; the file is readable at every moment ([`mod@file`]).
//! Its threads, what it holds, its times and why it starts in pipe mode:
//! docs/record-raw.md.
//!
//! Layers, lowest first: `host`, `file`, `segments`, `build_ids`, `stacks`, `dat`.

pub mod build_ids;
pub mod dat;
pub mod file;
pub mod host;
pub mod segments;
pub mod stacks;

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use uevrec_parsers::callchain::Callchain;
use uevrec_parsers::perf_data::writer::{
    self, ClockRef, EventSpec, FileMeta, Stamp, Task, TracingSpec, TrackingSpec, UserCopy,
    UserStackSpec,
};
use uevrec_parsers::{ContextTracker, ContextUpdate, Endian, LineOptions, LineWriter, RecordStamp};

use crate::capture::clock::now_unix_ns;
use crate::capture::stacks::{StackRequest, USER_REGS_MASK};
use crate::capture::staging::{FormatSource, Staged, StagedEntries, StagedEntry};
use crate::outputs::sink::SinkError;
use crate::system::{kallsyms, kernel_modules};
use file::PerfDataFile;
use host::HostInfo;
use uevrec_parsers::perf_data::header::FILE_HEADER_SIZE;
use uevrec_parsers::perf_data::index::IndexBuilder;

/// Bytes of records collected before they are written.
pub const WRITE_BYTES: usize = 1 << 20;

/// Where the raw thread sends what it has written.
#[derive(Debug)]
pub enum Next {
    /// Return the chunk buffers to the session's pool.
    Recycle(Sender<Vec<u8>>),
    /// Hand everything on to the formatter (for JSON lines as well).
    Forward(Sender<Staged>),
}

impl Next {
    /// Pass `msg` on (a chunk's buffer back to the pool, or everything to the
    /// formatter); false when the formatter has gone.
    fn pass(&self, msg: Staged) -> bool {
        match self {
            Next::Forward(tx) => tx.send(msg).is_ok(),
            Next::Recycle(pool) => {
                if let Staged::Chunk(chunk) = msg {
                    // The pool channel holds every chunk, so this never waits.
                    let _ = pool.send(chunk.into_buffer());
                }
                true
            }
        }
    }
}

/// A perf.data output, opened and ready.
#[derive(Debug)]
pub struct RawOutput {
    file: PerfDataFile,
    host: HostInfo,
    /// The command line, for `HEADER_CMDLINE`.
    cmdline: Vec<String>,
    /// Print the session's notices on standard error (when no JSON lines carry them).
    notices: bool,
    /// Write the session's context (a tracking attr, COMM/FORK/EXIT/CGROUP records,
    /// samples with a cgroup id).
    context: bool,
    /// The samples carry call stacks (`-g`; with context): the file holds them and the
    /// mappings that name them ([`stacks`]), and the kernel map when they have kernel frames.
    stacks: Option<StackRequest>,
}

impl RawOutput {
    /// An output into `file` (created), describing `host`, recorded by `cmdline`.
    /// `notices`: print the session's notices on standard error when no JSON lines
    /// carry them; `context`: write who is who (the session stages it: `--no-context`
    /// off).
    pub fn new(
        file: PerfDataFile,
        host: HostInfo,
        cmdline: Vec<String>,
        notices: bool,
        context: bool,
    ) -> Self {
        RawOutput {
            file,
            host,
            cmdline,
            notices,
            context,
            stacks: None,
        }
    }

    /// The records carry the call stacks of `stacks` (`-g`), written with the samples,
    /// the mappings that name them as `PERF_RECORD_MMAP2` records and, with kernel frames,
    /// the kernel map (only with context: they go with the tracking attr).
    pub fn with_stacks(mut self, stacks: Option<StackRequest>) -> Self {
        self.stacks = stacks.filter(|_| self.context);
        self
    }
}

/// The file of `record --raw`, in the format `--raw-format` names.
#[derive(Debug)]
pub enum Raw {
    /// A perf.data re-encoded from the records (the default).
    PerfData(RawOutput),
    /// A trace.dat of the ftrace rings' pages ([`dat`]).
    TraceDat(dat::DatOutput),
}

/// Write `raw` from what arrives on `staged` ([`run`] or [`dat::run`]).
pub fn run_raw(raw: Raw, staged: Receiver<Staged>, next: Next) -> Result<RawSummary, RawError> {
    match raw {
        Raw::PerfData(raw) => run(raw, staged, next),
        Raw::TraceDat(dat) => dat::run(dat, staged, next),
    }
}

/// What the raw output wrote, and what it could not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawSummary {
    /// The file.
    pub path: std::path::PathBuf,
    /// Samples written.
    pub samples: u64,
    /// `PERF_RECORD_LOST` records written.
    pub lost_records: u64,
    /// Events (attrs) described.
    pub events: usize,
    /// Records not written, with why, per event (never silently: the CLI reports them
    /// and exits 1).
    pub unwritten: BTreeMap<String, u64>,
    /// For a trace.dat (`--raw-format trace-dat`): what it holds (its records are not
    /// counted while recording; `samples` stays 0).
    pub trace_dat: Option<dat::DatStats>,
    /// With kernel frames in the stacks, why the file has no kernel map (`/proc/kallsyms`
    /// hid or could not give the kernel's text): a notice for the user.
    pub kernel_map_missing: Option<String>,
    /// With stacks: modules touched whose build ids the file's `HEADER_BUILD_ID` does not
    /// list (past [`build_ids::MAX_MODULES`]).
    pub build_ids_left_out: u64,
    /// With the kernel map, why the file has no maps of the loaded kernel modules
    /// (`/proc/modules` hid their addresses or could not be read): a notice for the user.
    pub module_maps_missing: Option<String>,
}

/// How a slot's records are written.
#[derive(Debug, Clone, Copy)]
enum SlotOut {
    /// As samples of this event (index into `events`).
    Event(usize),
    /// Not at all: its tracepoint id was taken by another format earlier in the file.
    IdTaken,
}

/// The state of the perf.data being written.
struct Encoder {
    out: Vec<u8>,
    /// Samples and LOST records in `out`, counted into the summary once written.
    buffered: (u64, u64),
    slots: Vec<Option<SlotOut>>,
    events: Vec<EventSpec>,
    /// The format of each event, in `events` order.
    sources: Vec<Arc<FormatSource>>,
    /// Events whose format and attr are not in the record stream yet.
    undescribed: Vec<usize>,
    /// Where the in-band records lie in the file `(offset, length, type)`: passed over
    /// once the file is finished ([`writer::passed_over`]). A few per event.
    inband: Vec<(u64, usize, u32)>,
    /// Bytes of records in the file (its data size after the last write).
    base: u64,
    /// Times of the first and the last sample.
    first_last: Option<(u64, u64)>,
    /// Samples and LOST records of the last write to the file.
    last_write: (u64, u64),
    summary: RawSummary,
    notices: Option<Notices>,
    /// With context: who is who as the staged entries tell (the same tracker the
    /// formatter keeps, for the cgroup of records that carry none), and the tracking attr.
    context: Option<(ContextTracker, TrackingSpec)>,
    /// Where `decode --threads N` may cut the file (written at its finish).
    index: IndexBuilder,
    /// With call stacks: the processes whose mappings the file holds.
    stacks: Option<stacks::Mapped>,
    /// With `--call-graph dwarf`: what the samples carry besides the chain (the user
    /// registers and stack copy the perf backend asked the kernel for).
    user_stack: Option<UserStackSpec>,
}

/// The session's notices as JSON lines on standard error (a raw output without JSON
/// lines: nothing else carries them).
pub(crate) struct Notices {
    writer: LineWriter,
    buf: Vec<u8>,
}

impl Notices {
    /// Nothing written yet.
    pub(crate) fn new() -> Self {
        Notices {
            writer: LineWriter::new(LineOptions::default()),
            buf: Vec::new(),
        }
    }

    /// One notice, kept until [`Notices::flush`].
    pub(crate) fn notice(
        &mut self,
        time_unix_ns: Option<u64>,
        what: &str,
        event: Option<&str>,
        message: &str,
    ) {
        self.writer
            .write_notice(&mut self.buf, time_unix_ns, what, event, message);
    }

    /// Write the notices kept to standard error.
    pub(crate) fn flush(&mut self) {
        if !self.buf.is_empty() {
            let _ = std::io::stderr().write_all(&self.buf);
            self.buf.clear();
        }
    }
}

/// `CLOCK_REALTIME` as perf's `clockid`: sample times are the staged Unix nanoseconds
/// (what the JSON lines print), and `HEADER_CLOCK_DATA` says so, so `perf script` shows
/// seconds since 1970 and `uevrec decode` the same times as live recording.
const CLOCK_REALTIME: i32 = libc::CLOCK_REALTIME;

/// The id of the tracking attr's records (the events' ids count up from 1).
const TRACKING_ID: u64 = u64::MAX;

impl Encoder {
    /// Write the format and attr of the events that have none in the record stream yet
    /// (before the next sample or loss, which may be theirs): one tracing data record
    /// for all of them, so that the events attached before the first sample share one (perf reads only the
    /// first tracing data record of a pipe-mode stream; `uevrec decode` reads them all).
    fn describe(&mut self, host: &HostInfo) {
        if self.undescribed.is_empty() {
            return;
        }
        let spec = tracing_spec(host);
        let events: Vec<_> = (self.undescribed.iter())
            .map(|&ev| {
                let src = &self.sources[ev];
                (&self.events[ev], src.system.as_str(), src.text.as_str())
            })
            .collect();
        let mut out = Vec::new();
        writer::push_event_headers(&mut out, &events, self.context.is_some(), &spec);
        drop(events);
        self.undescribed.clear();
        self.inband(&out);
    }

    /// Append `records` (in-band description: features, attrs, tracing data) and note
    /// where they lie in the file, to be passed over once it is finished.
    fn inband(&mut self, records: &[u8]) {
        let at = self.here();
        for (start, len, kind) in writer::record_spans(records) {
            self.inband.push((at + start as u64, len, kind));
        }
        self.out.extend_from_slice(records);
    }

    /// `slot`'s records are now of `source` (tracepoint `tracepoint`); a new event (late
    /// ones included) gets a `PERF_TYPE_TRACEPOINT` attr and a sample id of its own, and is
    /// described in the record stream before the next sample or loss
    /// ([`Encoder::describe`]: its format into the tracing data).
    fn format(&mut self, slot: u32, tracepoint: u32, source: Arc<FormatSource>) {
        let slot = slot as usize;
        if self.slots.len() <= slot {
            self.slots.resize(slot + 1, None);
        }
        let known = self.events.iter().position(|e| e.tracepoint == tracepoint);
        self.slots[slot] = Some(match known {
            // The same event again (detached and attached): the same attr.
            Some(i) if self.sources[i].text == source.text => SlotOut::Event(i),
            // perf.data holds one format per tracepoint id.
            Some(_) => SlotOut::IdTaken,
            None => {
                self.events.push(EventSpec {
                    tracepoint,
                    name: format!("{}:{}", source.system, source.name),
                    id: self.events.len() as u64 + 1,
                    clockid: CLOCK_REALTIME,
                    callchain: self.stacks.is_some(),
                    user_stack: self.user_stack,
                });
                self.sources.push(source);
                self.undescribed.push(self.events.len() - 1);
                SlotOut::Event(self.events.len() - 1)
            }
        });
    }

    fn unwritten(&mut self, what: String, n: u64) {
        *self.summary.unwritten.entry(what).or_default() += n;
    }

    fn entries(&mut self, host: &HostInfo, entries: StagedEntries<'_>) {
        for entry in entries {
            if !self.undescribed.is_empty()
                && matches!(entry, StagedEntry::Record { .. } | StagedEntry::Lost { .. })
            {
                self.describe(host);
            }
            match entry {
                StagedEntry::Record {
                    slot,
                    stamp,
                    cgroup,
                    raw,
                    stack,
                    user_stack,
                } => {
                    let ev = match self.slots.get(slot as usize).copied().flatten() {
                        Some(SlotOut::Event(ev)) => ev,
                        Some(SlotOut::IdTaken) => {
                            let why = format!(
                                "slot {slot}: its tracepoint id was used by another format \
                                 earlier in this recording (perf.data holds one format per id)"
                            );
                            self.unwritten(why, 1);
                            continue;
                        }
                        None => {
                            self.unwritten(format!("slot {slot}: no format arrived"), 1);
                            continue;
                        }
                    };
                    // Untimed records (before 1970) get time 0, as perf does for them.
                    let time = stamp.time_unix_ns.unwrap_or(0);
                    let s = Stamp {
                        id: self.events[ev].id,
                        pid: stamp.pid,
                        tid: stamp.tid,
                        time,
                        cpu: stamp.cpu,
                    };
                    let tracker = self.context.as_ref().map(|(c, _)| c);
                    let cgroup = sample_cgroup(tracker, &stamp, cgroup);
                    let pushed = match &mut self.stacks {
                        Some(mapped) => {
                            // A process from before the recording: its mappings first.
                            if let Some(tracking) = self.context.as_ref().map(|(_, t)| t.id) {
                                let before = self.out.len();
                                mapped.synthesize(&mut self.out, tracking, stamp.pid, time);
                                if self.out.len() > before {
                                    let at = FILE_HEADER_SIZE + self.base + before as u64;
                                    self.index.context(at, time.saturating_sub(1));
                                }
                            }
                            let chain = stack.unwrap_or(Callchain::new(&[], Endian::Little));
                            let unwound = user_stack.is_some();
                            mapped.sample(stamp.pid, stamp.time_unix_ns, &chain, unwound);
                            let user = match self.user_stack {
                                Some(_) => UserCopy::Taken(user_stack),
                                None => UserCopy::NotAsked,
                            };
                            let at = self.here();
                            let out = &mut self.out;
                            writer::push_stacked_sample(out, &s, chain, user, raw, cgroup)
                                .map(|()| at)
                        }
                        None => {
                            let at = self.here();
                            writer::push_sample(&mut self.out, &s, raw, cgroup).map(|()| at)
                        }
                    };
                    match pushed {
                        Ok(at) => {
                            self.index.sample(ev, s.id, at, time);
                            self.buffered.0 += 1;
                            self.first_last = Some(match self.first_last {
                                Some((a, b)) => (a.min(time), b.max(time)),
                                None => (time, time),
                            });
                        }
                        Err(e) => {
                            let why = format!("{}: {e}", self.events[ev].name);
                            self.unwritten(why, 1);
                        }
                    }
                }
                StagedEntry::Lost {
                    time_unix_ns,
                    cpu,
                    lost,
                } => {
                    // The trailer names an event for readers that look it up; a loss comes
                    // only from a buffer that had an event attached.
                    let Some(ev) = self.events.first() else {
                        self.unwritten("lost records before any event".into(), lost);
                        continue;
                    };
                    let s = Stamp {
                        id: ev.id,
                        pid: 0,
                        tid: 0,
                        time: time_unix_ns.unwrap_or(0),
                        cpu,
                    };
                    writer::push_lost(&mut self.out, &s, lost);
                    self.index.lost(s.time);
                    self.buffered.1 += 1;
                }
                StagedEntry::Notice {
                    time_unix_ns,
                    what,
                    event,
                    message,
                } => {
                    if let Some(n) = &mut self.notices {
                        n.notice(time_unix_ns, what, event, message);
                    }
                }
                StagedEntry::Context {
                    time_unix_ns,
                    update,
                } => self.context(time_unix_ns, &update),
                // A line's place: nothing a perf.data holds (the session stages none).
                StagedEntry::Schema { .. } => {}
            }
        }
        if let Some(n) = &mut self.notices {
            n.flush();
        }
    }

    /// A change of who is who: kept, and written as perf writes it (nothing without
    /// context). The records name a thread's process as the thread itself (the staged
    /// change does not say; perf keys names by thread id).
    fn context(&mut self, time_unix_ns: Option<u64>, update: &ContextUpdate<'_>) {
        let Some((tracker, tracking)) = &mut self.context else {
            return;
        };
        tracker.apply(time_unix_ns, *update);
        let thread = match *update {
            ContextUpdate::Comm { tid, .. }
            | ContextUpdate::Exec { pid: tid, .. }
            | ContextUpdate::Fork { tid, .. }
            | ContextUpdate::Exit { tid } => tid,
            _ => 0,
        };
        let s = Stamp {
            id: tracking.id,
            pid: thread,
            tid: thread,
            time: time_unix_ns.unwrap_or(0),
            cpu: 0,
        };
        let at = self.here();
        let out = &mut self.out;
        let before = out.len();
        match *update {
            ContextUpdate::Comm { tid, comm } => writer::push_comm(out, &s, tid, tid, comm, false),
            ContextUpdate::Exec { pid, comm } => {
                if let Some(mapped) = &mut self.stacks {
                    if mapped.unwound_by_perf() {
                        // The program starts without the mappings of the one before
                        // (writer::push_exec_fork says why perf needs it).
                        let before = Stamp {
                            pid,
                            tid: pid,
                            time: s.time.saturating_sub(1),
                            ..s
                        };
                        writer::push_exec_fork(out, &before, pid);
                    }
                    mapped.seen(pid);
                    mapped.track(time_unix_ns, update);
                }
                writer::push_comm(out, &s, pid, pid, comm, true)
            }
            ContextUpdate::Mmap {
                pid,
                addr,
                len,
                pgoff,
                build_id,
                path,
            } => {
                if let Some(mapped) = &mut self.stacks {
                    let m = writer::Mmap2 {
                        pid,
                        tid: pid,
                        addr,
                        len,
                        pgoff,
                        build_id,
                        path,
                    };
                    mapped.push(out, &Stamp { pid, tid: pid, ..s }, &m);
                    mapped.seen(pid);
                }
            }
            ContextUpdate::Fork { tid, parent_tid } => {
                if let Some(mapped) = &mut self.stacks {
                    // The child starts with its parent's mappings: a parent from before
                    // the recording has its own in the file first.
                    mapped.synthesize(out, s.id, parent_tid, s.time);
                    mapped.seen(tid);
                    mapped.track(time_unix_ns, update);
                }
                let task = Task {
                    fork: true,
                    pid: tid,
                    ppid: parent_tid,
                    tid,
                    ptid: parent_tid,
                };
                writer::push_task(out, &s, &task);
            }
            ContextUpdate::Exit { tid } => {
                if let Some(mapped) = &mut self.stacks {
                    mapped.track(time_unix_ns, update);
                }
                let task = Task {
                    fork: false,
                    pid: tid,
                    ppid: 0,
                    tid,
                    ptid: 0,
                };
                writer::push_task(out, &s, &task);
            }
            ContextUpdate::Cgroup { id, path } => writer::push_cgroup(out, &s, id, path),
            // No record for it: samples carry the id it gives (`Encoder::entries`).
            ContextUpdate::ThreadCgroup { .. } => {}
            // perf.data has no record for them: decoding the file gives the pod UIDs
            // (from the cgroup paths), not the names.
            ContextUpdate::Pod { .. } | ContextUpdate::ContainerName { .. } => {}
        }
        if self.out.len() > before {
            self.index.context(at, s.time);
        }
    }

    /// The file offset where the next record appended goes.
    fn here(&self) -> u64 {
        FILE_HEADER_SIZE + self.base + self.out.len() as u64
    }

    /// Append the range index (the last records of the data section).
    fn push_index(&mut self) {
        let at = self.here();
        self.index.push(&mut self.out, at);
    }

    /// Append what is encoded to `file`.
    fn write(&mut self, file: &mut PerfDataFile) -> Result<(), SinkError> {
        file.append(&self.out)?;
        self.out.clear();
        self.base = file.data_size();
        self.summary.samples += self.buffered.0;
        self.summary.lost_records += self.buffered.1;
        self.last_write = self.buffered;
        self.buffered = (0, 0);
        Ok(())
    }

    /// After a failed write: finish `raw`'s file, and when the disk has no room left for
    /// the trailer, drop the last records written (one append) to make it and try once
    /// more (the sample-time feature is left out then: the first and last times of the
    /// samples kept are not known).
    fn finish_after_error(&mut self, raw: &mut RawOutput) -> Result<(), SinkError> {
        let first = raw.file.finish(&self.trailer(raw), &self.inband);
        if first.is_ok() || !raw.file.drop_last_append() {
            return first;
        }
        self.summary.samples -= self.last_write.0;
        self.summary.lost_records -= self.last_write.1;
        self.first_last = None;
        raw.file.finish(&self.trailer(raw), &self.inband)
    }

    /// The start of the record stream: the features that do not change, and with
    /// context the tracking attr (before any COMM/FORK/EXIT/CGROUP record).
    fn start(&mut self, raw: &RawOutput) {
        let mut out = Vec::new();
        self.with_meta(raw, &[], |meta| {
            writer::push_header_features(&mut out, meta)
        });
        if let Some((_, t)) = &self.context {
            writer::push_tracking_header(&mut out, t);
        }
        self.inband(&out);
        if let (Some(stacks), Some((_, t))) = (&raw.stacks, &self.context)
            && stacks.kernel
        {
            self.kernel_map(t.id);
        }
    }

    /// The kernel map, as `perf record` writes it before the processes' records (perf
    /// names the chains' kernel frames from it), then the loaded modules' maps
    /// ([`Encoder::module_maps`]), or why not into the summary: never a map of zero
    /// addresses.
    fn kernel_map(&mut self, tracking: u64) {
        match kallsyms::kernel_text() {
            Ok(text) => {
                let at = self.here();
                let stamp = Stamp {
                    id: tracking,
                    pid: u32::MAX,
                    tid: 0,
                    time: 0,
                    cpu: 0,
                };
                let map = writer::KernelMap {
                    start: text.start,
                    end: text.end,
                    symbol: text.symbol,
                };
                writer::push_kernel_mmap(&mut self.out, &stamp, &map);
                self.module_maps(&stamp);
                self.index.context(at, 0);
            }
            Err(why) => self.summary.kernel_map_missing = Some(why),
        }
    }

    /// One map per loaded kernel module (`/proc/modules`), as `perf record` writes them
    /// after the kernel's (`stamp`: the kernel map's trailer), or why not into the
    /// summary (hidden addresses: none written).
    fn module_maps(&mut self, stamp: &Stamp) {
        let modules = match kernel_modules::loaded() {
            Ok(modules) => modules,
            Err(why) => {
                self.summary.module_maps_missing = Some(why);
                return;
            }
        };
        let mut ranges = Vec::with_capacity(modules.len());
        for m in modules {
            writer::push_module_mmap(&mut self.out, stamp, m.start, m.size, &m.name);
            ranges.push((m.start, m.start.saturating_add(m.size), m.name.into()));
        }
        if let Some(mapped) = &mut self.stacks {
            mapped.kernel_modules(ranges);
        }
    }

    /// The trailer of the file as it is now.
    fn trailer(&self, raw: &RawOutput) -> writer::Trailer {
        let data_size = raw.file.data_size();
        // The kernel is listed where the file maps it (perf names kernel frames then).
        let kernel_mapped =
            raw.stacks.is_some_and(|s| s.kernel) && self.summary.kernel_map_missing.is_none();
        let build_ids = (self.stacks.as_ref())
            .map(|m| m.build_id_section(kernel_mapped))
            .unwrap_or_default();
        self.with_meta(raw, &build_ids, |meta| writer::trailer(meta, data_size))
    }

    /// `f` of the file's description as it is now, with the `HEADER_BUILD_ID` section
    /// `build_ids` (empty: none).
    fn with_meta<T>(
        &self,
        raw: &RawOutput,
        build_ids: &[u8],
        f: impl FnOnce(&FileMeta<'_>) -> T,
    ) -> T {
        let formats: Vec<(&str, &str)> = self
            .sources
            .iter()
            .map(|s| (s.system.as_str(), s.text.as_str()))
            .collect();
        let now = now_unix_ns();
        let h = &raw.host;
        let meta = FileMeta {
            events: &self.events,
            tracing: tracing_spec(h),
            formats: &formats,
            hostname: &h.hostname,
            osrelease: &h.osrelease,
            version: concat!("uevrec ", env!("CARGO_PKG_VERSION")),
            arch: &h.arch,
            nr_cpus: h.nr_cpus,
            cmdline: &raw.cmdline,
            sample_time: self.first_last,
            clock: ClockRef {
                clockid: CLOCK_REALTIME as u32,
                wall_ns: now,
                clockid_ns: now,
                res_ns: h.clock_res_ns,
            },
            tracking: self.context.as_ref().map(|(_, t)| *t),
            build_ids,
        };
        f(&meta)
    }
}

/// The tracing data's description of `h`.
fn tracing_spec(h: &HostInfo) -> TracingSpec<'_> {
    TracingSpec {
        long_size: h.long_size,
        page_size: h.page_size,
        header_page: &h.header_page,
        header_event: &h.header_event,
    }
}

/// The cgroup id a sample of a file with context (`tracker`: who is who so far) carries:
/// the staged record's own (`PERF_SAMPLE_CGROUP`), else the one the formatter would name
/// for it ([`ContextTracker::cgroup_of`]), else 0 (none known: no `cgroup` decoded, as
/// none is written live). `None` without context (the samples carry no id).
#[inline]
pub fn sample_cgroup(
    tracker: Option<&ContextTracker>,
    stamp: &RecordStamp,
    cgroup: Option<u64>,
) -> Option<u64> {
    tracker.map(|c| {
        cgroup
            .or_else(|| c.cgroup_of(stamp.pid, stamp.tid))
            .unwrap_or(0)
    })
}

/// Write what arrives on `staged` into `raw`'s file until the session closes the
/// channel, passing the chunks on to `next`; then finish the file. Returns at the first
/// write error (after trying to finish the file with what was written), which closes
/// `staged` and so ends the session.
pub fn run(
    mut raw: RawOutput,
    staged: Receiver<Staged>,
    next: Next,
) -> Result<RawSummary, RawError> {
    let mut enc = Encoder {
        out: Vec::with_capacity(WRITE_BYTES + 128 * 1024),
        buffered: (0, 0),
        slots: Vec::new(),
        events: Vec::new(),
        sources: Vec::new(),
        undescribed: Vec::new(),
        inband: Vec::new(),
        base: 0,
        first_last: None,
        last_write: (0, 0),
        summary: RawSummary {
            path: raw.file.path().to_owned(),
            ..RawSummary::default()
        },
        notices: (raw.notices && matches!(next, Next::Recycle(_))).then(Notices::new),
        context: raw.context.then(|| {
            let tracking = TrackingSpec {
                id: TRACKING_ID,
                clockid: CLOCK_REALTIME,
                mmap: raw.stacks.is_some(),
            };
            (ContextTracker::new(), tracking)
        }),
        index: IndexBuilder::new(FILE_HEADER_SIZE),
        stacks: (raw.stacks).map(|r| stacks::Mapped::new(r.dwarf.is_some())),
        user_stack: raw.stacks.and_then(|r| r.dwarf).map(|size| UserStackSpec {
            regs: USER_REGS_MASK,
            size,
        }),
    };
    enc.start(&raw);
    let result = pump(&mut raw, &mut enc, &staged, &next);
    // Closing the input now ends the session (if still running) before the finish.
    drop(staged);
    drop(next);
    let finished = match result {
        Ok(()) => {
            enc.push_index();
            enc.write(&mut raw.file)
        }
        Err(e) => Err(e),
    };
    enc.summary.events = enc.events.len();
    enc.summary.build_ids_left_out = (enc.stacks.as_ref()).map_or(0, |m| m.build_ids_left_out());
    let finish = match finished {
        Ok(()) => raw.file.finish(&enc.trailer(&raw), &enc.inband),
        Err(_) => enc.finish_after_error(&mut raw),
    };
    let summary = enc.summary;
    match (finished, finish) {
        (Ok(()), Ok(())) => Ok(summary),
        (Err(error), finish) => Err(RawError {
            error,
            finished: finish.err().map(Box::new),
            summary: Box::new(summary),
            note: None,
        }),
        (Ok(()), Err(e)) => Err(RawError {
            error: e,
            finished: None,
            summary: Box::new(summary),
            note: None,
        }),
    }
}

/// Why the raw output stopped early, and whether the file was finished anyway.
#[derive(Debug)]
pub struct RawError {
    /// The first error.
    pub error: SinkError,
    /// Why the file could not be finished after `error`, when it could not (`None`: the
    /// file was finished with the records written before the error).
    pub finished: Option<Box<SinkError>>,
    /// What was written.
    pub summary: Box<RawSummary>,
    /// What became of the file, when the output says it itself (a trace.dat); None: the
    /// perf.data wording from `finished`.
    pub note: Option<String>,
}

impl std::fmt::Display for RawError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.error)?;
        if let Some(note) = &self.note {
            return write!(f, "; {note}");
        }
        match &self.finished {
            _ if matches!(
                self.error,
                SinkError::Io {
                    what: "finishing",
                    ..
                }
            ) =>
            {
                write!(
                    f,
                    "; the file is unfinished (never given its file-mode header): `uevrec \
                     decode` reads every whole record it holds (exit status 3, a truncated \
                     notice), `perf script -i - < FILE` reads it as a pipe-mode stream"
                )
            }
            None => write!(
                f,
                "; {} was finished with the {} samples written before: perf and uevrec \
                 decode read them",
                self.summary.path.display(),
                self.summary.samples
            ),
            Some(e) => write!(
                f,
                "; finishing the file failed too ({e}): it is unfinished; `uevrec decode` \
                 reads every whole record it holds (exit status 3, a truncated notice), \
                 `perf script -i - < FILE` reads it as a pipe-mode stream"
            ),
        }
    }
}

/// Encode and write until `staged` closes or a write fails.
fn pump(
    raw: &mut RawOutput,
    enc: &mut Encoder,
    staged: &Receiver<Staged>,
    next: &Next,
) -> Result<(), SinkError> {
    loop {
        let msg = match staged.try_recv() {
            Ok(msg) => msg,
            Err(TryRecvError::Empty) => {
                // Caught up: what is encoded goes to the file now.
                if !enc.out.is_empty() {
                    enc.write(&mut raw.file)?;
                }
                match staged.recv() {
                    Ok(msg) => msg,
                    Err(_) => return Ok(()),
                }
            }
            Err(TryRecvError::Disconnected) => return Ok(()),
        };
        match msg {
            Staged::Format {
                slot,
                ref prepared,
                ref source,
            } => enc.format(slot, prepared.format().id, Arc::clone(source)),
            Staged::Drained(_) => {}
            Staged::Chunk(ref chunk) => {
                let (before, after) = chunk.split_at_round();
                enc.entries(&raw.host, before);
                if let Some(after) = after {
                    writer::push_finished_round(&mut enc.out);
                    enc.index.round(enc.here());
                    enc.entries(&raw.host, after);
                }
            }
        }
        if enc.out.len() >= WRITE_BYTES {
            enc.write(&mut raw.file)?;
        }
        if !next.pass(msg) {
            return Err(SinkError::Closed);
        }
    }
}
