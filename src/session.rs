//! A live recording session: attach to the selected tracepoints, read the per-CPU rings,
//! decode, and hand batches of JSON lines to the writer.
//!
//! # Pipeline
//!
//! ```text
//!  kernel ──samples──▶ one perf ring per CPU (owned by a dummy event; every tracepoint fd
//!                      of that CPU is redirected into it with PERF_EVENT_IOC_SET_OUTPUT)
//!  session thread (the caller of [`run`]), one loop:
//!     epoll_wait on the ring owners (wakes at a ¼-ring watermark or after ≤ 100 ms)
//!     → for each ring: load-acquire data_head, parse each record's perf header
//!       (uevrec_parsers::perf_sample), map its PERF_SAMPLE_IDENTIFIER to the event,
//!       copy the trace entry with its stamp into the current StagedChunk,
//!       store-release data_tail
//!     → send the chunk when it holds pipeline::STAGE_BYTES, and at each wakeup
//!       (a blocking send: a slow formatter or writer stalls this loop, the rings fill
//!       and the kernel counts LOST records, which become `{"uevrec":"lost"}` lines;
//!       nothing is dropped silently)
//!     → every `rescan_interval`: list tracefs, attach new matching events (late
//!       registration, new multi-format versions), detach vanished ones or re-attach
//!       ones whose ID changed; each step stages a notice
//!  formatter thread (started by crate::recorder, crate::formatter): decodes the staged records
//!  and renders them, the lost counts and the notices as JSON lines
//!  (uevrec_parsers::json_line) into Batches
//!  writer thread (crate::recorder): receives Batches, writes them to the sink, returns the
//!  empty buffers on the `recycle` channel.
//! ```
//!
//! The session thread only copies, so the rings drain at memcpy speed whatever the
//! formatting costs; decoding and JSON happen on the formatter thread, and the writer
//! does nothing but I/O.
//!
//! # Filters
//!
//! The kernel applies filters (`PERF_EVENT_IOC_SET_FILTER`) before a record reaches the
//! ring. The expression set on every fd is the `&&` of: the user's `--filter`, then
//! `common_pid == PID` for `--pid` (the thread id, as the kernel's `common_pid` is), else
//! (unless `include_self`) `common_pid != TID` for each of uevrec's threads at attach time.
//! Threads started later are caught by a second check in the reader: samples whose
//! process id is uevrec's are not written. When the kernel refuses an expression the
//! ioctl says only EINVAL, so the session repeats the expression into the event's `filter`
//! file of a private, throw-away tracefs instance (`instances/uevrec-<pid>-<n>`, which
//! leaves the global tracing state alone) and reports the kernel's parse error from there.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use uevrec_parsers::event_name::split_multi_format;
use uevrec_parsers::json_line::{PreparedFormat, RecordStamp};
use uevrec_parsers::perf_sample::{Record, SampleFormat, sample_type};

use crate::clock::{WallClock, monotonic_ns};
use crate::fd_limit::{self, Nofile};

use crate::perf::{self, EventFds, PerfError, RingPages, Rings};
use crate::pipeline::{Closed, STAGE_BYTES, StageSender, StagedChunk};
use crate::selector::{Selector, default_selectors};
use crate::tracefs::{Tracefs, TracefsError};

/// The longest the loop sleeps: bounds the latency of quiet streams and of `stop`.
const POLL_TIMEOUT: Duration = Duration::from_millis(100);

/// What to record and how.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Explicit tracefs mount point (else discovered).
    pub tracefs: Option<PathBuf>,
    /// Events to record; empty = [`default_selectors`].
    pub selectors: Vec<Selector>,
    /// Data pages per CPU ring.
    pub buffer_pages: RingPages,
    /// A kernel (ftrace) filter expression applied to every event.
    pub filter: Option<String>,
    /// Record only this thread id (`common_pid == PID`).
    pub pid: Option<i32>,
    /// Also record uevrec's own threads (default: never).
    pub include_self: bool,
    /// How often tracefs is rescanned for new or vanished events.
    pub rescan_interval: Duration,
    /// Write the common fields too.
    pub include_common: bool,
    /// Stop after this many records.
    pub max_records: Option<u64>,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            tracefs: None,
            selectors: Vec::new(),
            buffer_pages: RingPages::DEFAULT,
            filter: None,
            pid: None,
            include_self: false,
            rescan_interval: Duration::from_secs(1),
            include_common: false,
            max_records: None,
        }
    }
}

/// Counters another thread may read while the session runs (for a status line).
#[derive(Debug, Default)]
pub struct LiveStats {
    /// Event records written so far.
    pub records: AtomicU64,
    /// Records the kernel reported lost so far.
    pub lost: AtomicU64,
}

/// What a finished session recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Records per tracefs event `system:event` (multi-format versions with their
    /// `.<id>` suffix); every event that was attached appears, even with 0.
    pub records_per_event: BTreeMap<String, u64>,
    /// Records lost per CPU (only CPUs that lost any).
    pub lost_per_cpu: BTreeMap<u32, u64>,
    /// All event records written.
    pub records: u64,
    /// All records lost.
    pub lost: u64,
}

/// Why a session could not start; the message says the fix.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// tracefs is missing or unreadable.
    #[error(transparent)]
    Tracefs(#[from] TracefsError),
    /// The kernel refused perf_event_open or its ring for lack of privileges.
    #[error(
        "{source}: recording tracepoints needs root or CAP_PERFMON (CPU-wide events and raw \
         samples; /proc/sys/kernel/perf_event_paranoid is {paranoid}, and without CAP_PERFMON \
         it must be -1); run uevrec as root or grant it CAP_PERFMON"
    )]
    Permission {
        /// The failing step.
        source: PerfError,
        /// The value of /proc/sys/kernel/perf_event_paranoid (or why it is unknown).
        paranoid: String,
    },
    /// The ring could not be mapped for lack of lockable memory.
    #[error(
        "{source}: the perf ring ({pages} pages per CPU) exceeds the locked-memory limit \
         (/proc/sys/kernel/perf_event_mlock_kb is {mlock_kb}); use a smaller buffer, raise \
         that limit, or run as root / with CAP_IPC_LOCK"
    )]
    RingMemory {
        /// The failing step.
        source: PerfError,
        /// Pages asked for.
        pages: usize,
        /// The limit seen.
        mlock_kb: String,
    },
    /// Another perf failure while setting up.
    #[error("{0}")]
    Perf(PerfError),
    /// The online CPU list could not be read.
    #[error("cannot read the online CPUs: {0}")]
    Cpus(io::Error),
    /// The formatter thread could not be started.
    #[error("cannot start the formatter thread: {0}")]
    Thread(io::Error),
    /// The filter expression was refused by the kernel for every matching event.
    #[error("the kernel refused the filter `{expr}` on {event}: {complaint}")]
    Filter {
        /// The expression as set (the user's, combined with pid terms).
        expr: String,
        /// The first event it was tried on.
        event: String,
        /// The kernel's parse error.
        complaint: String,
    },
}

fn read_proc(path: &str) -> String {
    fs::read_to_string(path).map_or_else(|e| format!("unreadable ({e})"), |s| s.trim().to_string())
}

/// Turn a perf setup failure into the error that names the fix.
fn perf_error(e: PerfError, pages: usize) -> SessionError {
    match (e.source.raw_os_error(), e.step) {
        (Some(libc::EPERM), "mmap") => SessionError::RingMemory {
            source: e,
            pages,
            mlock_kb: read_proc("/proc/sys/kernel/perf_event_mlock_kb"),
        },
        (Some(libc::EACCES | libc::EPERM), _) => SessionError::Permission {
            source: e,
            paranoid: read_proc("/proc/sys/kernel/perf_event_paranoid"),
        },
        _ => SessionError::Perf(e),
    }
}

/// One attached tracepoint.
#[derive(Debug)]
struct Event {
    system: String,
    name: String,
    key: String,
    /// The format, with its names and keys rendered for the JSON lines (shared with
    /// the formatter thread).
    prepared: Arc<PreparedFormat>,
    fds: EventFds,
    records: u64,
}

/// Everything the ring reader needs besides the rings themselves.
struct Decoder {
    layout: SampleFormat,
    events: Vec<Option<Event>>,
    /// Sample id → slot in `events` (foldhash: ids are kernel-assigned, not hostile,
    /// and SipHash showed in the profile).
    by_id: foldhash::HashMap<u64, usize>,
    clock: WallClock,
    chunk: StagedChunk,
    self_pid: u32,
    include_self: bool,
    max_records: Option<u64>,
    summary: Summary,
    /// Samples whose identifier belongs to no attached event.
    unknown: u64,
    /// Records that did not parse.
    malformed: u64,
    /// CPUs whose marker sample was seen (see [`Rings::set_markers`]).
    marker_seen: BTreeSet<u32>,
}

impl Decoder {
    fn now(&self) -> Option<u64> {
        self.clock.to_unix_ns(monotonic_ns())
    }

    fn notice(&mut self, what: &str, event: Option<&str>, message: &str) {
        let t = self.now();
        self.chunk.push_notice(t, what, event, message);
    }

    fn limit_reached(&self) -> bool {
        self.max_records.is_some_and(|m| self.summary.records >= m)
    }

    /// Decode one ring record from `cpu`'s ring.
    fn record(&mut self, cpu: u32, marker: Option<u64>, bytes: &[u8]) -> ControlFlow<()> {
        match self.layout.parse(bytes) {
            Ok(Record::Sample(s)) => {
                let Some(&slot) = s.id.and_then(|id| self.by_id.get(&id)) else {
                    if s.id.is_some() && s.id == marker {
                        self.marker_seen.insert(cpu);
                    } else {
                        self.unknown += 1;
                    }
                    return ControlFlow::Continue(());
                };
                if (!self.include_self && s.pid == Some(self.self_pid)) || self.limit_reached() {
                    return ControlFlow::Continue(());
                }
                let Some(ev) = self.events.get_mut(slot).and_then(Option::as_mut) else {
                    self.unknown += 1;
                    return ControlFlow::Continue(());
                };
                let stamp = RecordStamp {
                    time_unix_ns: s.time.and_then(|t| self.clock.to_unix_ns(t)),
                    cpu: s.cpu.unwrap_or(cpu),
                    pid: s.pid.unwrap_or(0),
                    tid: s.tid.unwrap_or(0),
                };
                // Slots fit in u32: [`StageSender::format`] refuses any other.
                self.chunk
                    .push_record(slot as u32, &stamp, s.raw.unwrap_or(&[]));
                ev.records += 1;
                self.summary.records += 1;
            }
            Ok(
                Record::Lost {
                    lost, sample_id, ..
                }
                | Record::LostSamples { lost, sample_id },
            ) => {
                let t = sample_id.time.and_then(|t| self.clock.to_unix_ns(t));
                self.chunk.push_lost(t, cpu, lost);
                *self.summary.lost_per_cpu.entry(cpu).or_default() += lost;
                self.summary.lost += lost;
            }
            Ok(Record::Other(_)) => {}
            Err(_) => self.malformed += 1,
        }
        if self.chunk.len() >= STAGE_BYTES {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }

    /// Read every ring until it is empty (as of the reads), sending full batches.
    fn drain(
        &mut self,
        rings: &mut Rings,
        out: &StageSender<'_>,
        stats: &LiveStats,
    ) -> Result<(), Closed> {
        let (records0, lost0) = (self.summary.records, self.summary.lost);
        let result = (|| {
            for c in rings.cpus_mut() {
                let (cpu, marker) = (c.cpu, c.marker_id());
                // Bounded so one busy CPU cannot starve the others or the rescan.
                for _ in 0..64 {
                    let mut full = false;
                    c.ring.read(|rec| {
                        let flow = self.record(cpu, marker, rec);
                        full = flow.is_break();
                        flow
                    });
                    if !full {
                        break;
                    }
                    out.flush(&mut self.chunk)?;
                }
            }
            Ok(())
        })();
        stats
            .records
            .fetch_add(self.summary.records - records0, Ordering::Relaxed);
        stats
            .lost
            .fetch_add(self.summary.lost - lost0, Ordering::Relaxed);
        result
    }
}

/// The session's attach/detach bookkeeping.
struct Attacher<'a> {
    tracefs: Tracefs,
    selectors: Vec<Selector>,
    config: &'a SessionConfig,
    /// `(system, event)` → slot in `Decoder::events`.
    attached: HashMap<(String, String), usize>,
    /// Events skipped (retried when the ID changes, or see [`Skip::fds`]).
    skipped: HashMap<(String, String), Skip>,
    /// Filter refusals explained so far (see [`MAX_COMPLAINTS`]).
    complaints: std::cell::Cell<usize>,
    /// The open-file limit, raised as events come (None when getrlimit failed).
    nofile: Option<Nofile>,
    /// Events skipped during the current scan, by cause (reported on stderr after it).
    unattached: BTreeMap<String, usize>,
}

/// Why an event was skipped, for deciding when to try it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Skip {
    /// Its ID then.
    id: Option<u32>,
    /// For a lack of descriptors (EMFILE): the soft limit and the number of attached
    /// events then; retried once the limit is higher or fewer events are attached.
    fds: Option<(u64, usize)>,
}

/// How many filter refusals are explained with the kernel's parse error.
const MAX_COMPLAINTS: usize = 4;

/// Why one event could not be attached.
enum AttachFailure {
    /// The event vanished between listing and opening (not worth a notice).
    Vanished,
    /// Skipped with this message (a notice is written) and cause (for standard error).
    Skipped { msg: String, cause: Cause },
    /// The kernel refused the filter.
    Filter { expr: String, complaint: String },
    /// Privileges or setup problems that will not go away.
    Fatal(SessionError),
}

/// What made an attachment fail, as reported on standard error.
enum Cause {
    /// Not enough descriptors (EMFILE): the message names the limit.
    NoFds,
    /// Anything else, in words without the event's name.
    Other(String),
}

static INSTANCE_SEQ: AtomicUsize = AtomicUsize::new(0);

/// The kernel's complaint about filter `expr` on `system:event`, read from the event's
/// `filter` file in a throw-away tracefs instance.
fn filter_complaint(tracefs: &Tracefs, system: &str, event: &str, expr: &str) -> String {
    let fallback = || complaint_fallback(tracefs, system, event);
    let seq = INSTANCE_SEQ.fetch_add(1, Ordering::Relaxed);
    let inst = tracefs
        .root()
        .join("instances")
        .join(format!("uevrec-{}-{seq}", std::process::id()));
    if fs::create_dir(&inst).is_err() {
        return fallback();
    }
    let file = inst.join("events").join(system).join(event).join("filter");
    let complaint = match fs::write(&file, expr) {
        Ok(()) => None, // accepted by ftrace: the refusal was perf-specific
        Err(_) => read_once(&file)
            .map(|t| t.trim_end().to_string())
            .filter(|t| !t.is_empty()),
    };
    let _ = fs::remove_dir(&inst);
    complaint.map_or_else(fallback, |c| format!("\n{c}"))
}

/// The cause of an OS error while attaching, for standard error.
fn os_cause(what: &str, e: &io::Error) -> Cause {
    match e.raw_os_error() {
        Some(libc::EMFILE) => Cause::NoFds,
        Some(libc::ENFILE) => Cause::Other(
            "the system's open-file table is full (ENFILE; see /proc/sys/fs/file-max)".into(),
        ),
        _ => Cause::Other(format!("{what}: {e}")),
    }
}

/// What to say when the kernel's parse error is not available.
fn complaint_fallback(tracefs: &Tracefs, system: &str, event: &str) -> String {
    let format = tracefs.event_dir(system, event).join("format");
    format!("EINVAL (see the field names in {})", format.display())
}

/// Read a tracefs file that answers only the first `read(2)` (the `filter` files return
/// nothing at a non-zero offset), with one large read.
fn read_once(path: &std::path::Path) -> Option<String> {
    use std::io::Read as _;
    let mut buf = vec![0u8; 64 * 1024];
    let n = fs::File::open(path).ok()?.read(&mut buf).ok()?;
    buf.truncate(n);
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// The thread ids of process `proc` (`self` or a pid) from `/proc/<proc>/task`, sorted.
fn threads(proc: &str) -> Option<Vec<u32>> {
    let rd = fs::read_dir(format!("/proc/{proc}/task")).ok()?;
    let mut v: Vec<u32> = rd
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    v.sort_unstable();
    Some(v)
}

impl<'a> Attacher<'a> {
    fn new(tracefs: Tracefs, selectors: Vec<Selector>, config: &'a SessionConfig) -> Self {
        Attacher {
            tracefs,
            selectors,
            config,
            attached: HashMap::new(),
            skipped: HashMap::new(),
            complaints: Default::default(),
            nofile: None,
            unattached: BTreeMap::new(),
        }
    }

    /// The filter expression for a new attachment (see the module docs).
    fn filter(&self) -> Option<String> {
        let mut terms = Vec::new();
        if let Some(f) = self
            .config
            .filter
            .as_deref()
            .map(str::trim)
            .filter(|f| !f.is_empty())
        {
            terms.push(format!("({f})"));
        }
        if let Some(pid) = self.config.pid {
            let tids = threads(&pid.to_string()).unwrap_or_default();
            let alts: Vec<String> = if tids.is_empty() {
                vec![pid.to_string()]
            } else {
                tids.iter().map(u32::to_string).collect()
            };
            let alts: Vec<String> = alts.iter().map(|t| format!("common_pid == {t}")).collect();
            terms.push(if alts.len() == 1 {
                alts[0].clone()
            } else {
                format!("({})", alts.join(" || "))
            });
        } else if !self.config.include_self {
            let own = threads("self").unwrap_or_else(|| vec![std::process::id()]);
            terms.extend(own.iter().map(|tid| format!("common_pid != {tid}")));
        }
        (!terms.is_empty()).then(|| terms.join(" && "))
    }

    fn try_attach(&self, rings: &Rings, system: &str, name: &str) -> Result<Event, AttachFailure> {
        let format = match self.tracefs.read_format(system, name) {
            Ok(f) => f,
            Err(TracefsError::NoSuchEvent { .. }) => return Err(AttachFailure::Vanished),
            Err(e @ TracefsError::Permission(_)) => return Err(AttachFailure::Fatal(e.into())),
            Err(e) => {
                let cause = match &e {
                    TracefsError::Io { source, .. } => os_cause("reading the format file", source),
                    _ => Cause::Other("the format file does not parse".into()),
                };
                let msg = e.to_string();
                return Err(AttachFailure::Skipped { msg, cause });
            }
        };
        let filter = self.filter();
        let fds = EventFds::open(format.id, rings, filter.as_deref()).map_err(|e| {
            let errno = e.source.raw_os_error();
            match (e.step, errno) {
                ("perf_event_open", Some(libc::ENOENT | libc::ENODEV)) => AttachFailure::Vanished,
                (_, Some(libc::EACCES | libc::EPERM)) => {
                    AttachFailure::Fatal(perf_error(e, self.config.buffer_pages.get()))
                }
                ("PERF_EVENT_IOC_SET_FILTER", _) => {
                    let expr = filter.clone().unwrap_or_default();
                    // Each complaint costs a tracefs instance; a few tell the story.
                    let n = self.complaints.get();
                    self.complaints.set(n + 1);
                    let complaint = if n < MAX_COMPLAINTS {
                        filter_complaint(&self.tracefs, system, name, &expr)
                    } else {
                        complaint_fallback(&self.tracefs, system, name)
                    };
                    AttachFailure::Filter { expr, complaint }
                }
                _ => AttachFailure::Skipped {
                    cause: os_cause(e.step, &e.source),
                    msg: e.to_string(),
                },
            }
        })?;
        let (base, format_id) = match split_multi_format(name) {
            // Multi-format versions live outside the single-format `user_events` system
            // (today in `user_events_multi`; the kernel may rename it, so any other system
            // counts). Kernel tracepoint names have no dots.
            Some((b, id)) if system != "user_events" => (b.to_string(), Some(id.to_string())),
            _ => (name.to_string(), None),
        };
        Ok(Event {
            system: system.into(),
            name: name.into(),
            prepared: Arc::new(PreparedFormat::new(
                &format,
                system,
                &base,
                format_id.as_deref(),
            )),
            key: format!("{system}:{name}"),
            fds,
            records: 0,
        })
    }

    /// Attach `system:name`; writes the notice. Returns Err only for fatal problems;
    /// `filter_refused` receives the first filter refusal.
    fn attach(
        &mut self,
        rings: &Rings,
        dec: &mut Decoder,
        out: &StageSender<'_>,
        system: &str,
        name: &str,
        filter_refused: &mut Option<SessionError>,
    ) -> Result<bool, SessionError> {
        let key = format!("{system}:{name}");
        match self.try_attach(rings, system, name) {
            Ok(ev) => {
                if let Err(e) = ev.fds.enable() {
                    let cause = os_cause("cannot enable", &e.source);
                    self.skip(dec, system, name, &format!("cannot enable: {e}"), cause);
                    return Ok(false);
                }
                let msg = format!(
                    "id {}, {} CPUs",
                    ev.prepared.format().id,
                    ev.fds.ids().len()
                );
                let slot = dec
                    .events
                    .iter()
                    .position(Option::is_none)
                    .unwrap_or(dec.events.len());
                for &id in ev.fds.ids() {
                    dec.by_id.insert(id, slot);
                }
                // A closed channel shows at the next flush, which ends the session.
                let _ = out.format(&mut dec.chunk, slot, Arc::clone(&ev.prepared));
                dec.summary
                    .records_per_event
                    .entry(ev.key.clone())
                    .or_default();
                if slot == dec.events.len() {
                    dec.events.push(Some(ev));
                } else {
                    dec.events[slot] = Some(ev);
                }
                self.attached.insert((system.into(), name.into()), slot);
                self.skipped.remove(&(system.to_string(), name.to_string()));
                dec.notice("attached", Some(&key), &msg);
                Ok(true)
            }
            Err(AttachFailure::Vanished) => Ok(false),
            Err(AttachFailure::Skipped { msg, cause }) => {
                self.skip(dec, system, name, &msg, cause);
                Ok(false)
            }
            Err(AttachFailure::Filter { expr, complaint }) => {
                let msg = format!("the kernel refused the filter `{expr}`: {complaint}");
                let cause = Cause::Other(format!("the kernel refused the filter `{expr}`"));
                self.skip(dec, system, name, &msg, cause);
                if filter_refused.is_none() {
                    *filter_refused = Some(SessionError::Filter {
                        expr,
                        event: key,
                        complaint,
                    });
                }
                Ok(false)
            }
            Err(AttachFailure::Fatal(e)) => Err(e),
        }
    }

    fn skip(&mut self, dec: &mut Decoder, system: &str, name: &str, msg: &str, cause: Cause) {
        let id = self.tracefs.read_id(system, name);
        let (fds, cause) = match cause {
            Cause::NoFds => {
                let soft = self.nofile.as_ref().map_or(0, |n| n.limits.soft);
                let cause = self.nofile.as_ref().map_or_else(
                    || "too many open files (raise the limit with ulimit -n)".to_string(),
                    Nofile::shortage,
                );
                (Some((soft, self.attached.len())), cause)
            }
            Cause::Other(c) => (None, c),
        };
        self.skipped
            .insert((system.into(), name.into()), Skip { id, fds });
        *self.unattached.entry(cause).or_default() += 1;
        dec.notice("skipped", Some(&format!("{system}:{name}")), msg);
    }

    /// Whether an event skipped for lack of descriptors may fit now.
    fn fds_freed(&self, skip: &Skip) -> bool {
        let soft = self.nofile.as_ref().map_or(0, |n| n.limits.soft);
        skip.fds
            .is_some_and(|(was, attached)| soft > was || self.attached.len() < attached)
    }

    /// Make room for the descriptors of `events` events (see crate::fd_limit); a notice
    /// says when the limit went up.
    fn make_room(&mut self, dec: &mut Decoder, events: usize, cpus: usize) {
        let Some(nofile) = self.nofile.as_mut() else {
            return;
        };
        if let Some(r) = nofile.ensure(fd_limit::needed(events, cpus)) {
            let msg = format!(
                "open-file limit raised from {}/{} to {}/{} (soft/hard) for {events} events on \
                 {cpus} CPUs",
                r.from.soft, r.from.hard, r.to.soft, r.to.hard
            );
            dec.notice("fd_limit", None, &msg);
        }
    }

    /// Say on standard error how many events this scan could not attach, once per cause
    /// (the `skipped` notices in the output name them).
    fn report_unattached(&mut self) {
        for (cause, n) in std::mem::take(&mut self.unattached) {
            let s = if n == 1 { "" } else { "s" };
            crate::cli::print_stderr(format_args!("uevrec: {n} event{s} not attached: {cause}\n"));
        }
    }

    /// Disable, drain, and forget the event in `slot`.
    fn detach(
        &mut self,
        rings: &mut Rings,
        dec: &mut Decoder,
        out: &StageSender<'_>,
        stats: &LiveStats,
        slot: usize,
        reason: &str,
    ) -> Result<(), Closed> {
        let Some(ev) = dec.events.get(slot).and_then(Option::as_ref) else {
            return Ok(());
        };
        ev.fds.disable();
        // Its records still in the rings are decoded with its format before it goes.
        dec.drain(rings, out, stats)?;
        let Some(ev) = dec.events.get_mut(slot).and_then(Option::take) else {
            return Ok(());
        };
        for id in ev.fds.ids() {
            dec.by_id.remove(id);
        }
        self.attached.remove(&(ev.system.clone(), ev.name.clone()));
        *dec.summary
            .records_per_event
            .entry(ev.key.clone())
            .or_default() += ev.records;
        let msg = format!("{reason}; {} records", ev.records);
        dec.notice("detached", Some(&ev.key), &msg);
        Ok(())
    }

    /// The `(system, event)` pairs in tracefs that some selector matches.
    fn matching(&self) -> Result<Vec<(String, String)>, TracefsError> {
        let mut out = Vec::new();
        for system in self.tracefs.list_systems()? {
            if !self.selectors.iter().any(|s| s.matches_system(&system)) {
                continue;
            }
            for event in self.tracefs.list_system_events(&system)? {
                if self.selectors.iter().any(|s| s.matches(&system, &event)) {
                    out.push((system.clone(), event));
                }
            }
        }
        Ok(out)
    }

    /// Bring the attachments in line with tracefs. Returns the number of events matched
    /// and the first filter refusal (both for the startup checks).
    fn rescan(
        &mut self,
        rings: &mut Rings,
        dec: &mut Decoder,
        out: &StageSender<'_>,
        stats: &LiveStats,
    ) -> Result<Result<(usize, Option<SessionError>), SessionError>, Closed> {
        let matching = match self.matching() {
            Ok(m) => m,
            Err(e @ TracefsError::Permission(_)) => return Ok(Err(e.into())),
            Err(e) => {
                dec.notice("rescan_failed", None, &e.to_string());
                return Ok(Ok((0, None)));
            }
        };
        let mut refused = None;
        self.make_room(dec, matching.len(), rings.cpu_list().len());
        let present: std::collections::HashSet<&(String, String)> = matching.iter().collect();
        // Vanished events.
        let gone: Vec<usize> = self
            .attached
            .iter()
            .filter(|(k, _)| !present.contains(k))
            .map(|(_, &slot)| slot)
            .collect();
        for slot in gone {
            self.detach(rings, dec, out, stats, slot, "event disappeared")?;
        }
        for key @ (system, name) in &matching {
            if let Some(&slot) = self.attached.get(key) {
                let now = self.tracefs.read_id(system, name);
                let was = dec.events[slot].as_ref().map(|e| e.prepared.format().id);
                if now.is_some() && now != was {
                    self.detach(
                        rings,
                        dec,
                        out,
                        stats,
                        slot,
                        "ID changed; re-attaching with the new format",
                    )?;
                } else {
                    continue;
                }
            } else if let Some(skip) = self.skipped.get(key) {
                if skip.id == self.tracefs.read_id(system, name) && !self.fds_freed(skip) {
                    continue;
                }
            }
            if let Err(e) = self.attach(rings, dec, out, system, name, &mut refused) {
                self.report_unattached();
                return Ok(Err(e));
            }
        }
        self.report_unattached();
        self.skipped.retain(|k, _| present.contains(k));
        Ok(Ok((matching.len(), refused)))
    }
}

/// Attach, then loop until `stop` is set (or `max_records` reached): read rings, stage
/// their records, send full chunks on `out` (a blocking send = back-pressure). On stop:
/// stop attaching, drain every ring, send the rest, return the summary. Setup errors
/// (before the first attach) return `Err`; a closed `out` (the formatter or writer went
/// away) ends the session promptly with the summary so far. The formatter thread must be
/// running already ([`crate::recorder`] starts it), so the self-exclusion filter names it.
pub fn run(
    config: &SessionConfig,
    out: &StageSender<'_>,
    stop: &AtomicBool,
    stats: &LiveStats,
) -> Result<Summary, SessionError> {
    let tracefs = Tracefs::discover(config.tracefs.as_deref())?;
    let selectors = if config.selectors.is_empty() {
        default_selectors()
    } else {
        config.selectors.clone()
    };
    let cpus = perf::online_cpus().map_err(SessionError::Cpus)?;
    // The soft limit goes up to the hard one now; the hard one as events come (rescan).
    let nofile = Nofile::new().ok().map(|mut n| {
        n.ensure(fd_limit::needed(0, cpus.len()));
        n
    });
    let mut rings = Rings::open(&cpus, config.buffer_pages.get())
        .map_err(|e| perf_error(e, config.buffer_pages.get()))?;
    let mut dec = Decoder {
        layout: SampleFormat::new(sample_type::UEVREC, true)
            .expect("uevrec's own sample_type is supported"),
        events: Vec::new(),
        by_id: foldhash::HashMap::default(),
        clock: WallClock::new(Duration::from_secs(1)),
        chunk: out.fresh_chunk().unwrap_or_default(),
        self_pid: std::process::id(),
        include_self: config.include_self,
        max_records: config.max_records,
        summary: Summary::default(),
        unknown: 0,
        malformed: 0,
        marker_seen: BTreeSet::new(),
    };
    let mut att = Attacher::new(tracefs, selectors, config);
    att.nofile = nofile;

    // First scan: problems that will not go away are errors.
    let Ok(first) = att.rescan(&mut rings, &mut dec, out, stats) else {
        return Ok(finish(dec, att));
    };
    let (matched, refused) = first?;
    if let Some(e) = refused.filter(|_| att.attached.is_empty()) {
        return Err(e);
    }
    if matched == 0 {
        let sel: Vec<String> = att.selectors.iter().map(ToString::to_string).collect();
        let mut msg = format!("no event matches {} yet; rescanning every ", sel.join(" "));
        let _ = write!(msg, "{:?}", config.rescan_interval);
        if sel.iter().any(|s| s.starts_with("user_events")) && !att.tracefs.has_user_events() {
            msg.push_str(&format!(
                "; note: {}",
                TracefsError::NoUserEvents(att.tracefs.root().join("user_events_data"))
            ));
        }
        dec.notice("waiting", None, &msg);
    }
    if out.flush(&mut dec.chunk).is_err() {
        return Ok(finish(dec, att));
    }

    let mut next_rescan = Instant::now() + config.rescan_interval;
    let result: Result<(), Closed> = (|| {
        loop {
            dec.clock.maybe_resample();
            dec.drain(&mut rings, out, stats)?;
            out.flush(&mut dec.chunk)?;
            out.check()?;
            if stop.load(Ordering::Relaxed) || dec.limit_reached() {
                return Ok(());
            }
            let now = Instant::now();
            if now >= next_rescan {
                // A fatal problem after startup (privileges dropped?) is reported in-band.
                if let Err(e) = att.rescan(&mut rings, &mut dec, out, stats)? {
                    dec.notice("rescan_failed", None, &e.to_string());
                }
                next_rescan = Instant::now() + config.rescan_interval;
                continue;
            }
            let timeout = POLL_TIMEOUT.min(next_rescan - now);
            if let Err(e) = rings.wait(timeout) {
                dec.notice("epoll_failed", None, &e.to_string());
                std::thread::sleep(timeout);
            }
        }
    })();
    if result.is_err() {
        return Ok(finish(dec, att));
    }

    // Stop: no more attaching; disable everything, then drain every ring completely.
    for ev in dec.events.iter().flatten() {
        ev.fds.disable();
    }
    if dec.drain(&mut rings, out, stats).is_ok()
        && flush_losses(&mut rings, &mut dec, out, stats).is_ok()
    {
        if dec.malformed + dec.unknown > 0 {
            let msg = format!(
                "{} ring records could not be parsed and {} samples named no attached event; \
                 they were skipped",
                dec.malformed, dec.unknown
            );
            dec.notice("malformed", None, &msg);
        }
        for ev in dec.events.iter().flatten() {
            let t = dec.clock.to_unix_ns(monotonic_ns());
            let msg = format!("session stopped; {} records", ev.records);
            dec.chunk.push_notice(t, "detached", Some(&ev.key), &msg);
        }
        let _ = out.flush(&mut dec.chunk);
    }
    Ok(finish(dec, att))
}

/// Bring out the losses the kernel still owes the rings (it reports a loss only at the
/// next write into the same ring): enable the per-CPU marker events until each ring has
/// a marker sample (at most ~200 ms), then drain once more.
fn flush_losses(
    rings: &mut Rings,
    dec: &mut Decoder,
    out: &StageSender<'_>,
    stats: &LiveStats,
) -> Result<(), Closed> {
    let want: BTreeSet<u32> = rings
        .cpus_mut()
        .iter()
        .filter(|c| c.marker_id().is_some())
        .map(|c| c.cpu)
        .collect();
    if want.is_empty() {
        return Ok(());
    }
    dec.marker_seen.clear();
    rings.set_markers(true);
    let t0 = Instant::now();
    let result = (|| {
        while !want.is_subset(&dec.marker_seen) && t0.elapsed() < Duration::from_millis(200) {
            let _ = rings.wait(Duration::from_millis(5));
            dec.drain(rings, out, stats)?;
        }
        Ok(())
    })();
    rings.set_markers(false);
    result?;
    dec.drain(rings, out, stats)
}

/// Close every event and build the summary.
fn finish(mut dec: Decoder, att: Attacher<'_>) -> Summary {
    drop(att);
    for ev in dec.events.drain(..).flatten() {
        *dec.summary
            .records_per_event
            .entry(ev.key.clone())
            .or_default() += ev.records;
    }
    dec.summary
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_terms() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("events")).unwrap();
        let mut config = SessionConfig {
            filter: Some(" id == 110 ".into()),
            pid: Some(99_999_999),
            ..Default::default()
        };
        let att = |c: &SessionConfig| {
            Attacher::new(Tracefs::discover(Some(dir.path())).unwrap(), vec![], c).filter()
        };
        assert_eq!(
            att(&config).as_deref(),
            Some("(id == 110) && common_pid == 99999999")
        );
        // A process id covers every thread of that process (this test runs in a thread).
        config.pid = Some(std::process::id() as i32);
        let f = att(&config).unwrap();
        assert!(f.starts_with("(id == 110) && (common_pid == "), "{f}");
        assert!(f.contains(" || "), "{f}");
        config.pid = None;
        let f = att(&config).unwrap();
        assert!(f.starts_with("(id == 110) && common_pid != "), "{f}");
        assert!(
            f.contains(&format!("common_pid != {}", std::process::id())),
            "{f}"
        );
        config.include_self = true;
        assert_eq!(att(&config).as_deref(), Some("(id == 110)"));
        config.filter = None;
        assert_eq!(att(&config), None);
    }
}
