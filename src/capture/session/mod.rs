//! A live recording session: attach to the selected tracepoints, drain the per-CPU
//! buffers into staged entries, and hand them to the formatter thread. The session
//! writes no JSON: it only copies, so the rings drain at memcpy speed whatever the
//! formatting costs (its loop is drawn in docs/architecture.md, "The session's part").
//!
//! [`crate::capture::backend`] is what it needs from perf or ftrace; `attach` the
//! attach/detach/rescan state machine over it; `stager` stages what the buffers hold;
//! `filter` the kernel filters and the kernel's complaints; `procfs` the thread scan;
//! `key_slots` the sample key → event lookup; `error` the setup errors; `waiting` the selectors that match nothing yet (said once,
//! and again when they match); this file the configuration, the loop, the stop.
//!
//! Layers, lowest first: `procfs`, `key_slots`, `error`, `filter`, `stager`, `waiting`, `attach`.

mod attach;
mod error;
pub(crate) mod filter;
mod key_slots;
mod procfs;
mod stager;
#[cfg(test)]
mod tests;
mod waiting;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use uevrec_parsers::ContextUpdate;

use crate::capture::backend::{Backend, BackendKind};
use crate::capture::perf::{self, RingPages};
use crate::capture::selector::{Selector, default_selectors};
use crate::capture::staging::{STAGE_BYTES, StageSender};
use crate::capture::tracefs::{Tracefs, TracefsError};
use crate::system::fd_limit::Nofile;
use attach::{Attacher, Halt};
pub use error::SessionError;
pub(crate) use error::perf_error;
pub use key_slots::KeySlots;
use stager::Stager;
pub use stager::stage_sample;
use waiting::Waiting;

/// The longest the loop sleeps: bounds the latency of quiet streams and of `stop`. A
/// ring wakes the loop only past its watermark (a quarter of it), so a quiet stream's
/// records are read when this ends.
pub const POLL_TIMEOUT: Duration = Duration::from_millis(100);

/// The loop's longest sleep for output a person watches (`tail`, `record` to standard
/// output): a record of a quiet stream shows within this (plus formatting). Busy rings
/// still wake the loop at their watermark first, so at high rates the loop wakes as
/// often as with [`POLL_TIMEOUT`]; idle, it wakes 200 times a second (BENCHMARKS.md,
/// "issue 42").
pub const LIVE_POLL_TIMEOUT: Duration = Duration::from_millis(5);

/// What to record and how.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// The tracefs mount, found and checked by the caller (the CLI does it once, while
    /// building its config); `None`: discovered at start ([`Tracefs::discover`]).
    pub tracefs: Option<Tracefs>,
    /// Events to record; empty = [`default_selectors`].
    pub selectors: Vec<Selector>,
    /// Which backend records.
    pub backend: BackendKind,
    /// Data pages per CPU ring.
    pub buffer_pages: RingPages,
    /// A kernel (ftrace) filter expression applied to every event.
    pub filter: Option<String>,
    /// `--where` terms the kernel can judge, added to the filter of each event whose
    /// format has their field ([`crate::capture::pushdown`]).
    pub pushed: Vec<crate::capture::pushdown::PushedTerm>,
    /// Record only this thread id (`common_pid == PID`).
    pub pid: Option<i32>,
    /// Also record uevrec's own threads (default: never).
    pub include_self: bool,
    /// How often tracefs is rescanned for new or vanished events.
    pub rescan_interval: Duration,
    /// The longest the loop sleeps when no ring wakes it ([`POLL_TIMEOUT`], or
    /// [`LIVE_POLL_TIMEOUT`] for output a person watches).
    pub poll_timeout: Duration,
    /// Write the common fields too.
    pub include_common: bool,
    /// Write the self-describing lines: a `session` line first, a `schema` line per
    /// event format and EventHeader metadata block (`crate::pipeline::describe`; `--no-schema`
    /// turns them off).
    pub schema: bool,
    /// Nothing on standard error but errors (the `waiting`/`matching` messages stay
    /// in-band).
    pub quiet: bool,
    /// Stop after this many records.
    pub max_records: Option<u64>,
    /// Trigger events of a flight recording (crate::outputs::flight): they get `trigger_filter`
    /// as their kernel filter instead of `filter`. (They must be among `selectors` to be
    /// recorded at all.)
    pub triggers: Vec<Selector>,
    /// The kernel filter of the trigger events (`--trigger-filter`).
    pub trigger_filter: Option<String>,
    /// Track who wrote each record (`comm`, `cgroup`, `container`/`unit` keys; off with
    /// `--no-context`).
    pub context: bool,
    /// With `--backend ftrace`: move the rings' pages into spool files for a trace.dat
    /// (`record --raw-format trace-dat`) instead of reading records.
    pub spool: Option<crate::capture::ftrace::SpoolPlan>,
    /// Threads that drain the rings of either backend (groups of CPUs next to each other)
    /// while they are busy (`--drain-threads`); 0 or 1: the session thread alone.
    pub drain_threads: usize,
    /// With `context`: the kubelet's log directories that name pods and containers
    /// (`--k8s-pod-logs`, `--k8s-container-logs`; [`crate::capture::kubernetes`]).
    pub pod_logs: crate::capture::kubernetes::PodLogDirs,
    /// With `--backend ftrace`: record through a named instance that outlives a killed
    /// run and is adopted by the next (`--instance`, crate::capture::ftrace::named).
    pub instance: Option<crate::capture::ftrace::named::NamedInstance>,
    /// Call stacks with every record (`-g`; perf backend), or none.
    pub stacks: Option<crate::capture::stacks::StackRequest>,
    /// Name the stacks' frames (off: `--no-symbolize`, addresses with module and offset).
    pub symbolize: bool,
    /// Each distinct stack on a JSON line of its own that records name by id
    /// (`--stack-ids`, docs/stacks.md).
    pub stack_ids: bool,
}

/// The default of `--drain-threads`: a quarter of the online CPUs, at least 1 (each
/// drain thread copies about 8 M records/s: 4 CPUs' worth of a busy load).
pub fn default_drain_threads() -> usize {
    perf::online_cpus().map_or(1, |c| (c.len() / 4).max(1))
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            tracefs: None,
            selectors: Vec::new(),
            backend: BackendKind::Perf,
            buffer_pages: RingPages::DEFAULT,
            filter: None,
            pushed: Vec::new(),
            pid: None,
            include_self: false,
            rescan_interval: Duration::from_secs(1),
            poll_timeout: POLL_TIMEOUT,
            include_common: false,
            schema: true,
            quiet: false,
            max_records: None,
            triggers: Vec::new(),
            trigger_filter: None,
            context: true,
            spool: None,
            drain_threads: 1,
            pod_logs: crate::capture::kubernetes::PodLogDirs::default(),
            instance: None,
            stacks: None,
            symbolize: true,
            stack_ids: false,
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
    /// Of those, per CPU (updated when a drain pass saw losses).
    pub lost_per_cpu: std::sync::Mutex<BTreeMap<u32, u64>>,
    /// Events attached now (after each scan).
    pub attached: AtomicU64,
    /// Staged chunks waiting for the formatter after the last drain pass (of
    /// [`crate::capture::staging::STAGE_CHUNKS`]).
    pub stage_queued: AtomicU64,
    /// Set once the first scan has attached (or found nothing to attach yet).
    pub scanned: std::sync::atomic::AtomicBool,
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
    /// The backend adopted a run's buffers ([`Backend::adoption`]): its notice.
    pub adopted: Option<String>,
}

/// Attach, then loop until `stop` is set (or `max_records` reached): drain `backend`'s
/// buffers, stage what they hold, send full chunks on `out` (a blocking send =
/// back-pressure). On stop: stop attaching, drain every buffer, send the rest, return
/// the summary. Setup errors (before the first attach) return `Err`; a closed `out`
/// (the formatter or writer went away) ends the session promptly with the summary so
/// far. The backend is opened by the caller (crate::recorder, `recorder::open`), with
/// `nofile` the open-file limit to raise as events come; the formatter thread must be
/// running already ([`crate::recorder`] starts it), so the self-exclusion filter names it.
pub fn run_with<B: Backend>(
    backend: &mut B,
    tracefs: Tracefs,
    nofile: Option<Nofile>,
    config: &SessionConfig,
    out: &StageSender<'_>,
    stop: &AtomicBool,
    stats: &LiveStats,
) -> Result<Summary, SessionError> {
    let selectors = if config.selectors.is_empty() {
        default_selectors()
    } else {
        config.selectors.clone()
    };
    let chunk = out.fresh_chunk().unwrap_or_default();
    let mut st = Stager::new(chunk, config.include_self, config.max_records);
    st.ring_marks = backend.keeps_pages();
    st.pool = start_drain_threads(backend, config.drain_threads)?;
    let mut att = Attacher::new(tracefs, selectors, config);
    att.nofile = nofile;
    let mut pod_logs = config
        .context
        .then(|| crate::capture::kubernetes::PodLogs::new(&config.pod_logs));
    if config.context {
        start_context(backend, &mut st);
    } else {
        backend.track_new_tasks();
    }
    stage_pod_names(pod_logs.as_mut(), &mut st);
    if config.stacks.is_some() {
        stage_running_mappings(&mut st, out);
    }
    if let Some(msg) = backend.adoption() {
        st.notice("adopted", None, &msg);
        st.summary.adopted = Some(msg);
    }

    // First scan: problems that will not go away are errors.
    let scan = match att.rescan(backend, &mut st, out, stats) {
        Ok(scan) => scan,
        Err(Halt::Closed) => return Ok(finish(backend, st, att)),
        Err(Halt::Fatal(e)) => {
            finish(backend, st, att);
            return Err(e);
        }
    };
    if let Some(e) = scan.refused.filter(|_| att.attached.is_empty()) {
        return Err(e);
    }
    stats
        .attached
        .store(att.attached.len() as u64, Ordering::Relaxed);
    stats.scanned.store(true, Ordering::Release);
    let no_user_events = !att.tracefs.has_user_events();
    let user_events_dir = att.tracefs.root().join("user_events_data");
    let mut waiting = Waiting::start(
        &att.selectors,
        &scan.events,
        config.rescan_interval,
        |sel| {
            (sel.to_string().starts_with("user_events") && no_user_events)
                .then(|| TracefsError::NoUserEvents(user_events_dir.clone()).to_string())
        },
        !config.quiet,
        &mut st,
    );
    if out.flush(&mut st.chunk).is_err() {
        return Ok(finish(backend, st, att));
    }

    let mut next_rescan = Instant::now() + config.rescan_interval;
    let result: Result<(), Halt> = (|| {
        loop {
            st.clock.maybe_resample();
            st.drain(backend, out, stats)?;
            out.flush(&mut st.chunk)?;
            out.check()?;
            if stop.load(Ordering::Relaxed) || st.limit_reached() {
                return Ok(());
            }
            let now = Instant::now();
            if now >= next_rescan {
                match att.rescan(backend, &mut st, out, stats) {
                    // A fatal problem after startup (privileges dropped?) is reported
                    // in-band.
                    Err(Halt::Fatal(e)) => st.notice("rescan_failed", None, &e.to_string()),
                    Err(Halt::Closed) => return Err(Halt::Closed),
                    Ok(scan) => waiting.rescan(&att.selectors, &scan.events, &mut st),
                }
                stats
                    .attached
                    .store(att.attached.len() as u64, Ordering::Relaxed);
                stage_pod_names(pod_logs.as_mut(), &mut st);
                next_rescan = Instant::now() + config.rescan_interval;
                continue;
            }
            let timeout = config.poll_timeout.min(next_rescan - now);
            if let Err(e) = backend.wait(timeout) {
                st.notice("epoll_failed", None, &e.to_string());
                std::thread::sleep(timeout);
            }
        }
    })();
    if result.is_err() {
        return Ok(finish(backend, st, att));
    }

    // Stop: no more attaching; disable everything, then drain every ring completely
    // (on this thread: the markers of `flush_losses` are seen here).
    st.pool = None;
    backend.disable_all(st.events.iter().flatten().map(|ev| &ev.handle));
    if st.drain(backend, out, stats).is_ok() && flush_losses(backend, &mut st, out, stats).is_ok() {
        if st.malformed + st.unknown > 0 {
            let msg = format!(
                "{} ring records could not be parsed and {} samples named no attached event; \
                 they were skipped",
                st.malformed, st.unknown
            );
            st.notice("malformed", None, &msg);
        }
        if let Some(msg) = backend.stack_notice() {
            st.notice("stacks_untied", None, &msg);
        }
        if let Some(msg) = backend.maps_notice() {
            st.notice("stacks_maps", None, &msg);
        }
        let stopped: Vec<(String, String)> = st
            .events
            .iter()
            .flatten()
            .map(|ev| {
                (
                    ev.key.clone(),
                    format!("session stopped; {} records", ev.records),
                )
            })
            .collect();
        for (key, msg) in stopped {
            st.notice("detached", Some(&key), &msg);
        }
        let _ = out.flush(&mut st.chunk);
    }
    Ok(finish(backend, st, att))
}

/// Start the session's `threads` drain threads (`--drain-threads`, `uevrec-drain`; no more
/// than the buffers) once, when there are 2 or more and the backend drains in parallel
/// ([`Backend::drains_in_parallel`]); they live until the session ends.
fn start_drain_threads<B: Backend>(
    backend: &B,
    threads: usize,
) -> Result<Option<crate::capture::backend::DrainPool>, SessionError> {
    // No more threads than buffers: group i is buffer i at most.
    let threads = threads.min(backend.buffers());
    if threads < 2 || !backend.drains_in_parallel() {
        return Ok(None);
    }
    crate::capture::backend::DrainPool::start(threads)
        .map(Some)
        .map_err(|e| SessionError::DrainThreads(threads, e))
}

/// Start tracking who is who, stage what a run before this one had learnt of it (an
/// adopted instance's, [`Backend::recall_context`]), then stage what every thread and cgroup is now
/// ([`crate::capture::context`]); what cannot be tracked is said in a `context` notice.
fn start_context<B: Backend>(backend: &mut B, st: &mut Stager<B::Event>) {
    match backend.start_tracking() {
        Ok(missing) => {
            for msg in missing {
                st.notice("context", None, &msg);
            }
            st.recall_context(backend);
        }
        Err(e) => st.notice(
            "context",
            None,
            &format!("thread names and cgroups are not tracked: {e}"),
        ),
    }
    let root = crate::capture::context::cgroup_root();
    let chunk = &mut st.chunk;
    if let Some(root) = &root {
        crate::capture::context::scan_cgroups(root, &mut |u| chunk.push_context(None, &u));
    }
    let mut names = Vec::new();
    crate::capture::context::scan_threads(root.as_deref(), &mut |u| {
        if let ContextUpdate::Comm { tid, comm } = u {
            names.push((tid, comm.to_vec()));
        }
        chunk.push_context(None, &u);
    });
    backend.keep_names(&names);
}

/// With stacks: the executable mappings of every process running now, staged ahead of
/// every record, as `perf record` synthesizes them at its start. A process that began
/// before the recording and exits before its records are named (a flight dump, a
/// formatter behind) keeps its names; the kernel's MMAP2 records tell the rest.
fn stage_running_mappings<E>(st: &mut Stager<E>, out: &StageSender<'_>) {
    let chunk = &mut st.chunk;
    crate::system::proc_maps::each_running(&mut |pid, m| {
        let update = ContextUpdate::Mmap {
            pid,
            addr: m.start,
            len: m.end.saturating_sub(m.start),
            pgoff: m.pgoff,
            build_id: &m.build_id,
            path: m.path.as_bytes(),
        };
        chunk.push_context(None, &update);
        if chunk.len() >= STAGE_BYTES {
            // Closed: the session's next flush says so.
            let _ = out.flush(chunk);
        }
    });
}

/// Stage the names of the pods and containers the kubelet made since the last look
/// ([`crate::capture::kubernetes::PodLogs::poll`]), stamped now: records from now on carry them.
fn stage_pod_names<E>(
    pod_logs: Option<&mut crate::capture::kubernetes::PodLogs>,
    st: &mut Stager<E>,
) {
    let Some(pod_logs) = pod_logs else {
        return;
    };
    let now = st.clock.to_unix_ns(crate::capture::clock::monotonic_ns());
    let chunk = &mut st.chunk;
    pod_logs.poll(&mut |u| chunk.push_context(now, &u));
}

/// Bring out the losses the kernel still owes the buffers (perf reports a loss only at
/// the next write into the same ring): turn the markers on until each buffer has shown
/// one (at most ~200 ms), then drain once more.
fn flush_losses<B: Backend>(
    backend: &mut B,
    st: &mut Stager<B::Event>,
    out: &StageSender<'_>,
    stats: &LiveStats,
) -> Result<(), crate::capture::staging::Closed> {
    let want: BTreeSet<u32> = backend.marker_cpus().into_iter().collect();
    if want.is_empty() {
        return Ok(());
    }
    st.marker_seen.clear();
    backend.set_markers(true);
    let t0 = Instant::now();
    let result = (|| {
        while !want.is_subset(&st.marker_seen) && t0.elapsed() < Duration::from_millis(200) {
            let _ = backend.wait(Duration::from_millis(5));
            st.drain(backend, out, stats)?;
        }
        Ok(())
    })();
    backend.set_markers(false);
    result?;
    st.drain(backend, out, stats)
}

/// Build the summary and release every event (for perf: closed in the background, so
/// the exit does not wait for the kernel's grace periods; see [`crate::capture::perf::reaper`]).
fn finish<B: Backend>(backend: &mut B, st: Stager<B::Event>, att: Attacher<'_>) -> Summary {
    drop(att);
    let (summary, handles) = st.into_summary();
    backend.release(handles);
    summary
}
