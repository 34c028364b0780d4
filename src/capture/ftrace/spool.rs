//! `record --raw-format trace-dat`: the instance's ring pages moved whole into per-CPU
//! spool files, with no copy through user space and no parsing, for
//! crate::outputs::raw::dat to assemble into a trace.dat at the end. One thread per CPU
//! (`uevrec-spoolN`) splices every full page; the session sees no records
//! ([`Backend::read`] yields nothing): it attaches, rescans and stops as with the other
//! backends. A page keeps the kernel's missed-events flag and count (overwrite mode: the
//! oldest page goes when the ring is full), so the loss counts travel in the file and
//! `uevrec decode` turns them into `lost` lines. Drawn, with the stop and `uevrec
//! recover`: docs/record-trace-dat.md.

use crate::messages;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, Read as _, Write as _};
use std::ops::ControlFlow;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::instance::read_file;
use super::{
    EventInstance, FtraceEvent, FtraceOptions, Instance, SetupError, attach_in, disable_all_in,
    pid_list,
};
use crate::capture::backend::{Arrival, AttachError, Backend, BackendError, EventRef};

/// The pipe between a ring and its spool: this many bytes when the kernel allows it.
const PIPE_BYTES: libc::c_int = 1 << 20;

/// How long a spool thread sleeps in poll at most (bounds the reaction to the stop).
const POLL_MS: libc::c_int = 100;

/// Where a session's spools go, and what its spooling reports to the trace.dat writer.
#[derive(Debug, Clone)]
pub struct SpoolPlan {
    /// The trace.dat to be written (the spools are hidden files beside it: [`spool_path`]).
    pub target: PathBuf,
    /// Filled by the backend while it runs and when it stops.
    pub report: Arc<Mutex<SpoolReport>>,
}

impl SpoolPlan {
    /// A plan for the trace.dat `target`.
    pub fn new(target: &Path) -> Self {
        SpoolPlan {
            target: target.to_owned(),
            report: Arc::default(),
        }
    }
}

/// What the spooling gives the trace.dat writer.
#[derive(Debug, Clone, Default)]
pub struct SpoolReport {
    /// Bytes of a ring page.
    pub page_size: u32,
    /// The instance's trace clock.
    pub trace_clock: String,
    /// `REALTIME - MONOTONIC` when the rings started (adds to the `mono` times to give
    /// Unix time, as live recording does).
    pub offset_ns: Option<i64>,
    /// The `ftrace` system's format texts (tracefs `events/ftrace/*/format`).
    pub ftrace_formats: Vec<String>,
    /// The kernel's `saved_cmdlines` when the spooling stopped.
    pub cmdlines: String,
    /// The kernel's `saved_tgids` when the spooling stopped (None: the instance does not
    /// record them, or unreadable).
    pub tgids: Option<String>,
    /// Each CPU's spool.
    pub cpus: Vec<CpuSpool>,
    /// Whether the spooling ended (every thread joined, every page moved).
    pub ended: bool,
}

/// One CPU's spool.
#[derive(Debug, Clone)]
pub struct CpuSpool {
    /// The CPU.
    pub cpu: u32,
    /// Its spool file.
    pub path: PathBuf,
    /// Bytes moved into it.
    pub bytes: u64,
    /// Why its spooling stopped early, if it did (pages after that were not kept).
    pub error: Option<String>,
    /// The ring's `per_cpu/cpuN/stats` after the last page was taken (what it lost in
    /// all), when readable.
    pub stats: Option<String>,
}

/// What `.FILE.uevrec-meta` holds: one of these per line (JSON), in the order written.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetaLine {
    /// The recording machine (written first, by the trace.dat writer).
    Host {
        /// `sizeof(long)`.
        long_size: u8,
        /// tracefs `events/header_page`.
        header_page: String,
        /// tracefs `events/header_event`.
        header_event: String,
        /// `Linux NODE RELEASE VERSION MACHINE`.
        uname: String,
        /// The kernel's boot id (`/proc/sys/kernel/random/boot_id`), to tell whether the
        /// recovering machine still has the recording's tracefs tables.
        boot_id: Option<String>,
        /// Permission bits of the trace.dat.
        mode: u32,
        /// The recording uevrec's process id (its tracefs instance is `uevrec-PID`).
        #[serde(default)]
        pid: Option<u32>,
    },
    /// The spooling (written when the spools are created, before any page is moved).
    Spool {
        /// Bytes of a ring page.
        page_size: u32,
        /// The instance's trace clock.
        trace_clock: String,
        /// `REALTIME - MONOTONIC` when the rings started.
        offset_ns: Option<i64>,
        /// The `ftrace` system's format texts.
        ftrace_formats: Vec<String>,
        /// The CPUs spooled (one spool each, [`spool_path`]).
        cpus: Vec<u32>,
    },
    /// An event's format (written when it attaches, before it is enabled).
    Format {
        /// Its tracepoint id.
        id: u32,
        /// Its system.
        system: String,
        /// The format file's text.
        text: String,
    },
}

/// The metadata file of the trace.dat `target`: `.NAME.uevrec-meta` beside it. A killed
/// run (SIGKILL, OOM, power cut) must leave what the rings handed over readable, so
/// everything the trace.dat header needs is in it, beside the spools, as [`MetaLine`]s
/// appended as they become known; `uevrec recover FILE` (crate::cli::recover) assembles
/// the trace.dat from them.
pub fn meta_path(target: &Path) -> PathBuf {
    crate::system::durable::hidden_beside(target, ".uevrec-meta")
}

/// Append `line` to `target`'s metadata file (one write of one JSON line: a kill leaves
/// at most a torn last line, which a reader skips), synced unless `--fsync never`.
pub fn append_meta(target: &Path, line: &MetaLine) -> io::Result<()> {
    let mut text = serde_json::to_vec(line).map_err(io::Error::other)?;
    text.push(b'\n');
    let mut f = OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(meta_path(target))?;
    f.write_all(&text)?;
    if crate::system::durable::policy().syncs() {
        f.sync_data()?;
    }
    Ok(())
}

/// The lines of a metadata file's `text` (a torn last line — the writer was killed in
/// it — is left out, and said in the second value).
pub fn parse_meta(text: &str) -> (Vec<MetaLine>, Option<String>) {
    let mut lines = Vec::new();
    let mut torn = None;
    for (n, l) in (1u64..).zip(text.lines()) {
        if l.is_empty() {
            continue;
        }
        match serde_json::from_str(l) {
            Ok(line) => lines.push(line),
            Err(e) => torn = Some(format!("line {n}: {e}")),
        }
    }
    (lines, torn)
}

/// The spool of CPU `cpu` for the trace.dat `target`: `.NAME.cpuN.uevrec-spool` beside it.
pub fn spool_path(target: &Path, cpu: u32) -> PathBuf {
    let mut name = OsString::from(".");
    name.push(target.file_name().unwrap_or_default());
    name.push(format!(".cpu{cpu}.uevrec-spool"));
    target.with_file_name(name)
}

/// A session's [`Backend`] writing the rings' pages to spools.
#[derive(Debug)]
pub struct SpoolBackend {
    spoolers: Vec<Spooler>,
    stop: Arc<AtomicBool>,
    report: Arc<Mutex<SpoolReport>>,
    root: PathBuf,
    /// The instance records thread → process ids.
    record_tgid: bool,
    /// The trace.dat planned (its metadata file gets each event's format).
    target: PathBuf,
    // Dropped last: the threads have closed trace_pipe_raw by then.
    instance: Instance,
}

/// One CPU's spool thread.
#[derive(Debug)]
struct Spooler {
    cpu: u32,
    path: PathBuf,
    thread: Option<JoinHandle<Spooled>>,
}

/// What a spool thread did.
#[derive(Debug, Default)]
struct Spooled {
    bytes: u64,
    error: Option<String>,
}

/// Create `path` (new, mode 0600) for a spool.
fn create_spool(path: &Path) -> Result<File, SetupError> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC)
        .open(path);
    file.and_then(|f| {
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        Ok(f)
    })
    .map_err(|source| {
        let why = if source.kind() == io::ErrorKind::AlreadyExists {
            " (a uevrec run killed before it assembled its trace.dat left it: run `uevrec \
             recover` on the trace.dat's name to assemble what it recorded, or give another \
             --raw name)"
        } else {
            ""
        };
        SetupError::from_step(super::FtraceError {
            step: format!("create the spool {}{why}", path.display()),
            source,
        })
    })
}

impl SpoolBackend {
    /// Set up the instance under tracefs `root` (`EventInstance`, as
    /// [`super::FtraceBackend::open`] does) and start one spool thread per CPU of `cpus`,
    /// spooling for `plan`. Also returns notes for standard error (stale instances found).
    pub fn open(
        root: &Path,
        cpus: &[u32],
        opts: &FtraceOptions,
        plan: &SpoolPlan,
    ) -> Result<(SpoolBackend, Vec<String>), SetupError> {
        // The kernel keeps thread → process ids (saved_tgids) for the records' `pid`
        // where it can: without (old kernels) the decoded pid is the thread id.
        let EventInstance {
            layout,
            instance,
            mut notes,
            record_tgid,
            ..
        } = EventInstance::create(root, opts)?;
        // A kill leaves the pages not yet spooled in the rings: the next uevrec must not
        // remove them as stale before `recover` drains them.
        if let Err(e) =
            super::instance::hold_for_recover(&instance, &plan.target, &meta_path(&plan.target))
        {
            notes.push(format!(
                "cannot note the instance for `uevrec recover` ({e}): if this run is killed, \
                 run recover before any other uevrec, which would remove the instance as stale"
            ));
        }
        let step = SetupError::from_step;
        let stop = Arc::new(AtomicBool::new(false));
        let mut backend = SpoolBackend {
            record_tgid,
            spoolers: Vec::new(),
            stop: Arc::clone(&stop),
            report: Arc::clone(&plan.report),
            root: root.to_owned(),
            target: PathBuf::new(),
            instance,
        };
        *backend.report.lock().unwrap_or_else(|p| p.into_inner()) = SpoolReport {
            page_size: layout.page_size() as u32,
            trace_clock: "mono".into(),
            offset_ns: i64::try_from(crate::capture::clock::sample_offset_ns()).ok(),
            ftrace_formats: ftrace_formats(root),
            ..SpoolReport::default()
        };
        {
            let r = backend.report.lock().unwrap_or_else(|p| p.into_inner());
            let line = MetaLine::Spool {
                page_size: r.page_size,
                trace_clock: r.trace_clock.clone(),
                offset_ns: r.offset_ns,
                ftrace_formats: r.ftrace_formats.clone(),
                cpus: cpus.to_vec(),
            };
            append_meta(&plan.target, &line).map_err(|source| {
                step(super::FtraceError {
                    step: format!("write {}", meta_path(&plan.target).display()),
                    source,
                })
            })?;
        }
        backend.target = plan.target.clone();
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        for &cpu in cpus {
            let ring = backend
                .instance
                .dir()
                .join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
            let ring = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
                .open(&ring)
                .map_err(|source| {
                    step(super::FtraceError {
                        step: format!("open {}", ring.display()),
                        source,
                    })
                })?;
            let path = spool_path(&plan.target, cpu);
            let out = create_spool(&path)?;
            // From here the backend owns the spool (kept for the writer, or removed).
            backend.spoolers.push(Spooler {
                cpu,
                path: path.clone(),
                thread: None,
            });
            let (stop, tids) = (Arc::clone(&stop), tid_tx.clone());
            let page = layout.page_size();
            let thread = std::thread::Builder::new()
                .name(format!("uevrec-spool{cpu}"))
                .spawn(move || {
                    // SAFETY: gettid has no preconditions.
                    let _ = tids.send(unsafe { libc::gettid() } as u32);
                    drop(tids);
                    let _priority = crate::system::sched::raise_drain_thread();
                    spool(&ring, out, page, &stop)
                })
                .map_err(|source| {
                    step(super::FtraceError {
                        step: "start a spool thread".into(),
                        source,
                    })
                })?;
            backend.spoolers.last_mut().expect("pushed").thread = Some(thread);
        }
        drop(tid_tx);
        // The spool threads' system calls are not recorded either.
        if opts.only_threads.is_none() && !opts.exclude_threads.is_empty() {
            let mut own = opts.exclude_threads.clone();
            own.extend(tid_rx.iter());
            backend
                .instance
                .write("set_event_notrace_pid", &pid_list(&own))
                .map_err(step)?;
        }
        Ok((backend, notes))
    }

    /// Stop the spool threads (they move what the rings still hold first) and report
    /// what they did; once.
    fn finish(&mut self) {
        if self.report.lock().unwrap_or_else(|p| p.into_inner()).ended {
            return;
        }
        // Nothing is written any more: the last, partly filled pages can be taken.
        let _ = self.instance.write("tracing_on", "0");
        self.stop.store(true, Ordering::Release);
        let mut cpus = Vec::new();
        let dir = self.instance.dir();
        for s in &mut self.spoolers {
            let done = match s.thread.take().map(JoinHandle::join) {
                Some(Ok(done)) => done,
                Some(Err(_)) => Spooled {
                    bytes: 0,
                    error: Some("its spool thread panicked".into()),
                },
                None => Spooled::default(),
            };
            let bytes = std::fs::metadata(&s.path).map_or(done.bytes, |m| m.len());
            let stats = dir.join(format!("per_cpu/cpu{}/stats", s.cpu));
            cpus.push(CpuSpool {
                cpu: s.cpu,
                path: s.path.clone(),
                bytes,
                error: done.error,
                stats: read_file(&stats).ok(),
            });
        }
        // The whole tables (they can be larger than one read of read_file).
        let whole = |name: &str| std::fs::read_to_string(self.root.join(name));
        let cmdlines = whole("saved_cmdlines").unwrap_or_default();
        let tgids = self
            .record_tgid
            .then(|| whole("saved_tgids").ok())
            .flatten();
        let mut report = self.report.lock().unwrap_or_else(|p| p.into_inner());
        report.cpus = cpus;
        report.cmdlines = cmdlines;
        report.tgids = tgids;
        report.ended = true;
    }
}

impl Drop for SpoolBackend {
    fn drop(&mut self) {
        self.finish();
        let name = self.instance.dir().file_name().unwrap_or_default();
        super::instance::release_for_recover(&name.to_string_lossy());
    }
}

/// The format texts of tracefs `root`'s `ftrace` system, by event name.
fn ftrace_formats(root: &Path) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(root.join("events/ftrace")) else {
        return Vec::new();
    };
    let mut names: Vec<PathBuf> = dir.flatten().map(|e| e.path().join("format")).collect();
    names.sort();
    names
        .iter()
        .filter_map(|p| crate::capture::tracefs::read_once(p).ok())
        .collect()
}

/// `splice(2)` of up to `len` bytes from `from` to `to` at their file positions, retried
/// when interrupted.
fn splice(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize, flags: u32) -> io::Result<usize> {
    loop {
        // SAFETY: both descriptors are open (borrowed for the call); no offset pointers,
        // so the kernel reads and writes no memory of ours.
        let n = unsafe {
            libc::splice(
                from.as_raw_fd(),
                std::ptr::null_mut(),
                to.as_raw_fd(),
                std::ptr::null_mut(),
                len,
                flags,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// A pipe (read end, write end) of about [`PIPE_BYTES`], and its size.
fn pipe() -> io::Result<(OwnedFd, OwnedFd, usize)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`, which has room for them.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded: both are open descriptors owned by nothing else.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: F_SETPIPE_SZ on our own pipe reads no memory; a refusal keeps the default.
    let size = unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_BYTES) };
    let size = if size > 0 {
        size
    } else {
        // SAFETY: F_GETPIPE_SZ on our own pipe reads no memory.
        unsafe { libc::fcntl(w.as_raw_fd(), libc::F_GETPIPE_SZ) }
    };
    Ok((r, w, usize::try_from(size).unwrap_or(0).max(4096)))
}

/// Sleep until `ring` has pages past the instance's `buffer_percent`, or [`POLL_MS`].
fn wait(ring: &File) {
    let mut pfd = libc::pollfd {
        fd: ring.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid, writable pollfd for the duration of the call.
    unsafe { libc::poll(&mut pfd, 1, POLL_MS) };
}

/// One CPU's spooling: full pages from `ring` into `out` by splice until `stop` (after
/// the events are disabled), then the rest (the partly filled page by read(2)), so every
/// record written before the stop reaches the spool. The spool is synced as `--fsync`
/// asks (crate::system::durable) after each round of pages moved. Stops at the first
/// error (said in the result; what was moved before stays).
fn spool(ring: &File, mut out: File, page: usize, stop: &AtomicBool) -> Spooled {
    let mut done = Spooled::default();
    let mut syncer = crate::system::durable::Syncer::current();
    let result = (|| {
        let (r, w, size) = pipe()?;
        // Whole pages, at least one (`page` is the system's, never 0).
        let chunk = size
            .checked_div(page)
            .unwrap_or(0)
            .max(1)
            .saturating_mul(page);
        loop {
            let stopping = stop.load(Ordering::Acquire);
            if !stopping {
                wait(ring);
            }
            let moved = move_full_pages(ring, &r, &w, &out, chunk)?;
            if moved > 0 {
                done.bytes = done.bytes.saturating_add(moved);
                syncer.wrote(&out)?;
            }
            if stopping {
                break;
            }
        }
        // splice takes only pages the kernel has left; read(2) copies the page it was
        // still writing too (whole: a page's length is in its header).
        let mut buf = vec![0u8; page];
        loop {
            match (&*ring).read(&mut buf) {
                Ok(0) => return syncer.finish(&out),
                Ok(n) => {
                    // A page comes whole (the rest of the buffer is zeros when short).
                    buf[n..].fill(0);
                    out.write_all(&buf)?;
                    done.bytes = done.bytes.saturating_add(page as u64);
                    syncer.wrote(&out)?;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => return syncer.finish(&out),
                Err(e) => return Err(e),
            }
        }
    })();
    if let Err(e) = result {
        done.error = Some(e.to_string());
    }
    done
}

/// Move every full page `ring` holds into `out` through the pipe (`r`, `w`), `chunk`
/// bytes at most at a time; the bytes moved.
fn move_full_pages(
    ring: &File,
    r: &OwnedFd,
    w: &OwnedFd,
    out: &File,
    chunk: usize,
) -> io::Result<u64> {
    let mut total = 0;
    loop {
        let flags = libc::SPLICE_F_NONBLOCK | libc::SPLICE_F_MOVE;
        let n = match splice(ring.as_fd(), w.as_fd(), chunk, flags) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => return Ok(total),
            Err(e) => return Err(e),
        };
        let mut left = n;
        while left > 0 {
            match splice(r.as_fd(), out.as_fd(), left, libc::SPLICE_F_MOVE)? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                // splice moves at most what it is asked for.
                m => left = left.saturating_sub(m),
            }
        }
        total = total.saturating_add(n as u64);
    }
}

impl Backend for SpoolBackend {
    type Event = FtraceEvent;

    fn cpus(&self) -> usize {
        self.spoolers.len()
    }

    fn filters_threads(&self) -> bool {
        true
    }

    fn attach(
        &mut self,
        event: EventRef<'_>,
        filter: Option<&str>,
    ) -> Result<FtraceEvent, AttachError> {
        let attached = attach_in(&self.instance, event, filter)?;
        // Its format on disk before it is enabled: a killed run's records can be decoded.
        let format = self
            .root
            .join("events")
            .join(event.system)
            .join(event.name)
            .join("format");
        let text =
            crate::capture::tracefs::read_once(&format).map_err(|_| AttachError::Vanished)?;
        let line = MetaLine::Format {
            id: event.id,
            system: event.system.to_owned(),
            text,
        };
        if let Err(e) = append_meta(&self.target, &line) {
            // Recording goes on (the trace.dat written at the end has the format); only
            // a killed run could not decode this event's records: say so.
            messages::error(&format_args!(
                "writing {}: {e} (if this run is killed, the records of {}:{} cannot be \
                 decoded from its spools)",
                meta_path(&self.target).display(),
                event.system,
                event.name
            ));
        }
        Ok(attached)
    }

    fn enable(&mut self, event: &FtraceEvent) -> Result<(), BackendError> {
        Ok(event.enable()?)
    }

    fn disable(&mut self, event: &FtraceEvent) {
        event.disable();
    }

    /// Disable every event, then let the spool threads move what the rings hold.
    fn disable_all<'e>(&mut self, events: impl Iterator<Item = &'e FtraceEvent>) {
        disable_all_in(&self.instance, events);
        self.finish();
    }

    fn keys(event: &FtraceEvent) -> &[u64] {
        &event.keys
    }

    /// None: the session reads no records (the spool threads move the pages).
    fn buffers(&self) -> usize {
        0
    }

    fn read(&mut self, _buffer: usize, _f: impl FnMut(u32, Arrival<'_>) -> ControlFlow<()>) {}

    fn wait(&self, timeout: Duration) -> io::Result<()> {
        std::thread::sleep(timeout);
        Ok(())
    }

    fn marker_cpus(&self) -> Vec<u32> {
        Vec::new()
    }

    fn set_markers(&mut self, _on: bool) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spools_are_hidden_beside_the_file() {
        assert_eq!(
            spool_path(Path::new("/x/y/t.dat"), 3),
            Path::new("/x/y/.t.dat.cpu3.uevrec-spool")
        );
        assert_eq!(
            spool_path(Path::new("t.dat"), 0),
            Path::new(".t.dat.cpu0.uevrec-spool")
        );
    }
}
