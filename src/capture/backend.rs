//! What the session needs from a way of recording tracepoints: attach event X, detach
//! event X, drain what arrived ([`Backend`]). Two implementations:
//! [`crate::capture::perf::PerfBackend`] (perf rings, one descriptor per event and CPU)
//! and [`crate::capture::ftrace::FtraceBackend`] (a tracefs instance and its
//! `trace_pipe_raw` pages: its events are enable files, its keys the events' tracefs
//! IDs); the attach/rescan state machine is tested against a fake one (no root needed).
//! Data flows one way: the backends implement this contract and import nothing of the
//! session, this module imports nothing of them (their step errors are defined here), and
//! crate::recorder's `open` hands the backend a session asks for to
//! [`crate::capture::session::run_with`], which drives any backend through this trait.
//!
//! Layers, lowest first: `error`, `time_merge`.

mod error;
pub mod time_merge;

pub use error::{FtraceError, PerfError};

use std::io;
use std::ops::ControlFlow;
use std::panic::AssertUnwindSafe;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Which backend records: perf rings (the default) or a tracefs instance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// One perf ring per CPU, one perf descriptor per event and CPU.
    #[default]
    Perf,
    /// A private tracefs instance (`instances/uevrec-<pid>`), read from its per-CPU
    /// `trace_pipe_raw` files.
    Ftrace,
}

/// The tracepoint to attach: its tracefs system, name and ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventRef<'a> {
    /// The tracefs system (`user_events`, `sched`, ...).
    pub system: &'a str,
    /// The event's name in that system.
    pub name: &'a str,
    /// Its tracefs ID (the `common_type` of its records).
    pub id: u32,
}

/// One failed step of a backend.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// A perf step.
    #[error(transparent)]
    Perf(#[from] PerfError),
    /// A tracefs-instance step.
    #[error(transparent)]
    Ftrace(#[from] FtraceError),
}

impl BackendError {
    /// The name of the failing step.
    pub fn step(&self) -> &str {
        match self {
            BackendError::Perf(e) => e.step,
            BackendError::Ftrace(e) => &e.step,
        }
    }

    /// The OS error.
    pub fn os_error(&self) -> &io::Error {
        match self {
            BackendError::Perf(e) => &e.source,
            BackendError::Ftrace(e) => &e.source,
        }
    }
}

/// One way of recording tracepoints into per-CPU buffers.
pub trait Backend {
    /// One attached event (for perf: its descriptor on every CPU). Dropping it detaches.
    type Event;

    /// The number of CPUs recorded (for the open-file limit and the `attached` notice).
    fn cpus(&self) -> usize;

    /// Whether the backend keeps uevrec's own threads out (and, for `--pid`, the other
    /// processes' threads) by itself, so the filter expressions need no `common_pid` terms.
    fn filters_threads(&self) -> bool {
        false
    }

    /// Attach tracepoint `event`, with the kernel filter `filter`, disabled until
    /// [`Backend::enable`].
    fn attach(
        &mut self,
        event: EventRef<'_>,
        filter: Option<&str>,
    ) -> Result<Self::Event, AttachError>;

    /// Start reporting who is who ([`Arrival::Context`]: thread names, new and exited
    /// threads, cgroups) for the records' context. Returns what could not be tracked
    /// (for a notice), empty when all of it is; the default tracks nothing.
    fn start_tracking(&mut self) -> Result<Vec<String>, BackendError> {
        Ok(vec![
            "this backend reports no thread names or cgroups as they change".into(),
        ])
    }

    /// After [`Backend::start_tracking`], before the start-up scan of `/proc`: hand `f`
    /// who-is-who a run before this one had learnt (ftrace `--instance`, an adopted
    /// instance's: the names its own scan found, then its tracking journal, oldest
    /// first), so that its records still to be written get the names of threads gone
    /// since. The default: nothing.
    fn recall_context(&mut self, f: impl FnMut(u32, Arrival<'_>) -> ControlFlow<()>) {
        let _ = f;
    }

    /// What the start-up scan of `/proc` found every thread called (thread id, name),
    /// for a later run that adopts this one's buffers after a kill and recalls them
    /// ([`Backend::recall_context`]). The default keeps nothing.
    fn keep_names(&mut self, names: &[(u32, Vec<u8>)]) {
        let _ = names;
    }

    /// Without the records' context (`--no-context`): follow new tasks all the same where
    /// the backend needs them to tell a record's process (ftrace: a thread id's process,
    /// src/capture/ftrace/tgid.rs); reports nothing. The default does nothing.
    fn track_new_tasks(&mut self) {}

    /// When the backend took over the buffers of a run before (ftrace `--instance`): the
    /// notice that says so, from when, and what was waiting. The default: never.
    fn adoption(&self) -> Option<String> {
        None
    }

    /// Whether the backend keeps each page until the writer's marks pass its records
    /// (ftrace `--instance`'s journal): the session then notes, per chunk, where each
    /// ring's records end ([`crate::capture::staging::StagedChunk::note_ring`]). The
    /// default: no.
    fn keeps_pages(&self) -> bool {
        false
    }

    /// Start recording `event`.
    fn enable(&mut self, event: &Self::Event) -> Result<(), BackendError>;

    /// Stop recording `event`; what it recorded stays in the buffers to be drained.
    fn disable(&mut self, event: &Self::Event);

    /// Stop recording every one of `events` (the stop of a session). The default disables
    /// them one by one; a backend that can stop them all at once does.
    fn disable_all<'e>(&mut self, events: impl Iterator<Item = &'e Self::Event>)
    where
        Self::Event: 'e,
    {
        for ev in events {
            self.disable(ev);
        }
    }

    /// The keys by which [`Arrival::Sample`]s name `event` (perf: one sample id per CPU).
    fn keys(event: &Self::Event) -> &[u64];

    /// The number of buffers [`Backend::read`] drains (perf: one ring per CPU).
    fn buffers(&self) -> usize;

    /// Hand what arrived in buffer `buffer` to `f` (with the buffer's CPU), oldest first,
    /// until the buffer is empty or `f` breaks; what was handed over is consumed.
    fn read(&mut self, buffer: usize, f: impl FnMut(u32, Arrival<'_>) -> ControlFlow<()>);

    /// Sleep until a buffer has much to read or `timeout` ends.
    fn wait(&self, timeout: Duration) -> io::Result<()>;

    /// Whether the buffers can be drained by several threads at once
    /// ([`Backend::read_trackers`], then [`Backend::read_groups`]); the default cannot.
    fn drains_in_parallel(&self) -> bool {
        false
    }

    /// The first half of a parallel pass: hand what the trackers (who is who) hold to `f`,
    /// in time order across CPUs, as [`Backend::read`] does before a buffer. Returns the
    /// time after which records stay for the next pass (their thread's news may not be
    /// read yet); the default reads nothing.
    fn read_trackers(&mut self, f: impl FnMut(u32, Arrival<'_>) -> ControlFlow<()>) -> u64 {
        let _ = f;
        u64::MAX
    }

    /// The second half of a parallel pass: every buffer read once (to its end, or until
    /// its group's consumer breaks), the buffers split into `groups.len()` groups of
    /// CPUs next to each other, each group read by a thread of its own with its own
    /// consumer; records after `limit` (see [`Backend::read_trackers`]) stay. The default
    /// reads nothing (see [`Backend::drains_in_parallel`]).
    /// (Group `i` is read by thread `i` of `pool`, started once for the session.) A
    /// drain thread that failed is an error that says which; what its group read until
    /// then was handed to its consumer.
    fn read_groups<G>(
        &mut self,
        limit: u64,
        pool: &DrainPool,
        groups: &mut [G],
    ) -> Result<(), DrainFailed>
    where
        G: FnMut(u32, Arrival<'_>) -> ControlFlow<()> + Send,
    {
        let _ = (limit, pool, groups);
        Ok(())
    }

    /// The CPUs whose buffers can be made to report the losses the kernel still owes
    /// (see [`Backend::set_markers`]); empty when the backend has no such thing.
    fn marker_cpus(&self) -> Vec<u32>;

    /// Make each of [`Backend::marker_cpus`] produce an [`Arrival::Marker`] soon (on),
    /// or stop that (off).
    fn set_markers(&mut self, on: bool);

    /// At the stop: what the backend has to say of the call stacks it could not give
    /// whole (ftrace: stack records not tied to a record, and why). The default: nothing.
    fn stack_notice(&self) -> Option<String> {
        None
    }

    /// At the stop: what the backend has to say of the mappings it read for the call
    /// stacks (ftrace: processes read again from `/proc` for user frames in no mapping
    /// known). The default: nothing.
    fn maps_notice(&self) -> Option<String> {
        None
    }

    /// Detach `events` (disabled and drained already). The default drops them; a backend
    /// whose detaching blocks for long (perf: RCU grace periods per tracepoint) does it
    /// off the caller's path, so that neither the drain loop nor the exit waits for it.
    fn release(&mut self, events: Vec<Self::Event>) {
        drop(events);
    }
}

/// One thing read from a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival<'a> {
    /// A record of some event.
    Sample {
        /// Names the event (see [`Backend::keys`]); None when the record has no key.
        key: Option<u64>,
        /// The kernel's time stamp (perf's sample clock), if any.
        time: Option<u64>,
        /// The CPU it was recorded on, when the record says.
        cpu: Option<u32>,
        /// Process id.
        pid: Option<u32>,
        /// Thread id.
        tid: Option<u32>,
        /// The cgroup id of the writing task (perf's `PERF_SAMPLE_CGROUP`), if any.
        cgroup: Option<u64>,
        /// The trace entry (common fields first).
        raw: &'a [u8],
        /// The call stack (`PERF_SAMPLE_CALLCHAIN`), if asked for.
        callchain: Option<uevrec_parsers::callchain::Callchain<'a>>,
        /// The user registers and stack copy (`--call-graph dwarf`), if asked for.
        user_stack: Option<uevrec_parsers::user_stack::UserStack<'a>>,
    },
    /// Who is who changed (a thread's name, a new or exited thread, a new cgroup).
    Context {
        /// The kernel's time stamp, if any.
        time: Option<u64>,
        /// The change.
        update: uevrec_parsers::ContextUpdate<'a>,
    },
    /// The kernel dropped `lost` records of this buffer (it was full).
    Lost {
        /// How many.
        lost: u64,
        /// The kernel's time stamp, if any.
        time: Option<u64>,
    },
    /// The kernel dropped `lost` context records (thread names, cgroups: not event
    /// records, so not counted as lost records).
    ContextLost {
        /// How many.
        lost: u64,
    },
    /// The buffer's marker (see [`Backend::set_markers`]): not a record.
    Marker,
    /// Something else the buffer holds (not a record, nothing lost).
    Other,
    /// A record that did not parse.
    Malformed,
}

/// Why [`Backend::attach`] failed.
#[derive(Debug)]
pub enum AttachError {
    /// The event vanished between listing and attaching.
    Vanished,
    /// The kernel refused the filter expression (perf says no more than EINVAL).
    FilterRefused(BackendError),
    /// Not permitted (EACCES, EPERM): will not go away.
    Denied(BackendError),
    /// Another failure of one step (e.g. EMFILE).
    Failed(BackendError),
}

/// The persistent drain threads of `--drain-threads N` (named `uevrec-drain`): started
/// once, when the session starts ([`DrainPool::start`]), and kept until it ends, so a
/// parallel pass ([`Backend::read_groups`]) spawns nothing. Thread `i` always drains
/// group `i` of the buffers (CPUs next to each other), so each CPU's records are read by
/// one thread and keep their order.
///
/// Between passes the threads sleep on a condition variable: no spinning (the rayon pool
/// used before yielded for a while after every pass, which on a busy machine made each
/// idle drain thread runnable most of the time: BENCHMARKS.md §32).
#[derive(Debug)]
pub struct DrainPool {
    threads: Vec<DrainThread>,
}

/// What a pass gives one drain thread to run (it borrows the pass's data: see
/// [`DrainPool::each`]).
type Job = Box<dyn FnOnce() + Send + 'static>;

/// One drain thread and its mailbox.
#[derive(Debug)]
struct DrainThread {
    mailbox: std::sync::Arc<Mailbox>,
    handle: Option<std::thread::JoinHandle<()>>,
}

/// A drain thread's next job, or that the pool is closing.
struct Mailbox {
    next: Mutex<(Option<Job>, bool)>,
    ready: std::sync::Condvar,
}

impl std::fmt::Debug for Mailbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Mailbox")
    }
}

impl Mailbox {
    /// Wait for the next job; `None` once the pool closes.
    fn take(&self) -> Option<Job> {
        let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(job) = next.0.take() {
                return Some(job);
            }
            if next.1 {
                return None;
            }
            next = self
                .ready
                .wait(next)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Give the thread `job` (it has none: a pass waits for its jobs to end).
    fn give(&self, job: Job) {
        self.next.lock().unwrap_or_else(PoisonError::into_inner).0 = Some(job);
        self.ready.notify_one();
    }

    fn close(&self) {
        self.next.lock().unwrap_or_else(PoisonError::into_inner).1 = true;
        self.ready.notify_one();
    }
}

/// A pass's work for the drain threads, its lifetime erased: a raw pointer, so that
/// nothing asserts it is alive once the pass is over ([`DrainPool::each`]).
#[derive(Clone, Copy)]
struct PartOf(*const (dyn Fn(usize) -> Option<DrainFailed> + Sync));

// SAFETY: the pointee is `Sync` (the drain threads only call it through a shared
// reference), and `DrainPool::each` keeps it alive while any job may call it.
unsafe impl Send for PartOf {}

/// The jobs of a pass not yet over (run or dropped), and the first failure.
struct PassDone {
    left: Mutex<(usize, Option<DrainFailed>)>,
    over: std::sync::Condvar,
}

/// Held by a job: dropped when the job has run (or was dropped unrun), which is what
/// [`DrainPool::each`] waits for.
struct JobDone(std::sync::Arc<PassDone>);

impl Drop for JobDone {
    fn drop(&mut self) {
        let mut left = self.0.left.lock().unwrap_or_else(PoisonError::into_inner);
        left.0 -= 1;
        if left.0 == 0 {
            self.0.over.notify_all();
        }
    }
}

/// A drain thread failed (it panicked) during a pass.
#[derive(Debug, thiserror::Error)]
#[error(
    "drain thread {group} (`uevrec-drain`) failed: {message}; what it had read was kept and \
     the session thread drains every buffer from now on"
)]
pub struct DrainFailed {
    /// The failed thread's group.
    pub group: usize,
    /// Its panic message.
    pub message: String,
}

/// What a group's work that panicked said.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "it panicked".into())
}

impl DrainPool {
    /// Start `threads` drain threads (at least 1). `Err` when the OS refuses one.
    pub fn start(threads: usize) -> io::Result<DrainPool> {
        let mut pool = DrainPool {
            threads: Vec::new(),
        };
        for _ in 0..threads.max(1) {
            let mailbox = std::sync::Arc::new(Mailbox {
                next: Mutex::new((None, false)),
                ready: std::sync::Condvar::new(),
            });
            let theirs = std::sync::Arc::clone(&mailbox);
            let handle = std::thread::Builder::new()
                .name("uevrec-drain".into())
                .spawn(move || {
                    while let Some(job) = theirs.take() {
                        job();
                    }
                })?;
            pool.threads.push(DrainThread {
                mailbox,
                handle: Some(handle),
            });
        }
        Ok(pool)
    }

    /// The number of drain threads.
    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Run `work` on every one of `groups` at once, group `i` on thread `i` (modulo the
    /// thread count); returns when every group is done. A `work` that panics is caught:
    /// the other groups finish, and the first failure is returned.
    pub fn each<T: Send>(
        &self,
        groups: &mut [T],
        work: impl Fn(usize, &mut T) + Sync,
    ) -> Result<(), DrainFailed> {
        let n = self.threads.len();
        let cells: Vec<Mutex<&mut T>> = groups.iter_mut().map(Mutex::new).collect();
        // Thread t's part of the pass: groups t, t + n, ...
        let part = |t: usize| {
            let mut failed = None;
            for i in (t..cells.len()).step_by(n.max(1)) {
                let mut group = cells[i].lock().unwrap_or_else(PoisonError::into_inner);
                let ran = std::panic::catch_unwind(AssertUnwindSafe(|| work(i, &mut group)));
                if let Err(panic) = ran {
                    let message = panic_message(&*panic);
                    failed.get_or_insert(DrainFailed { group: i, message });
                }
            }
            failed
        };
        let part: &(dyn Fn(usize) -> Option<DrainFailed> + Sync) = &part;
        // SAFETY: only the trait object's lifetime bound is erased (the pointer's layout
        // is the same); the pointer is dereferenced only by the jobs below, while this
        // function waits for them.
        let part = PartOf(unsafe {
            std::mem::transmute::<
                *const (dyn Fn(usize) -> Option<DrainFailed> + Sync + '_),
                *const (dyn Fn(usize) -> Option<DrainFailed> + Sync + 'static),
            >(part)
        });
        let busy = n.min(cells.len());
        let done = std::sync::Arc::new(PassDone {
            left: Mutex::new((busy, None)),
            over: std::sync::Condvar::new(),
        });
        for (t, thread) in self.threads.iter().take(busy).enumerate() {
            let guard = JobDone(std::sync::Arc::clone(&done));
            let job: Job = Box::new(move || {
                let part = part; // the whole `PartOf` (Send), not its pointer field
                // SAFETY: `each` returns only once this job's `JobDone` is dropped (below,
                // after this call; or with the job, unrun), so `part`'s pointee (and the
                // groups and `work` it borrows) is alive for this call. `part` catches the
                // panics of `work`. The raw pointer left after the drop is never used.
                if let Some(failed) = unsafe { (*part.0)(t) } {
                    let mut left = guard.0.left.lock().unwrap_or_else(PoisonError::into_inner);
                    left.1.get_or_insert(failed);
                }
                drop(guard);
            });
            // A thread that is gone (it cannot end but by the pool's drop) would never
            // take its job: this thread does that part.
            match &thread.handle {
                Some(h) if !h.is_finished() => thread.mailbox.give(job),
                _ => job(),
            }
        }
        let mut left = done.left.lock().unwrap_or_else(PoisonError::into_inner);
        while left.0 > 0 {
            left = done.over.wait(left).unwrap_or_else(PoisonError::into_inner);
        }
        match left.1.take() {
            Some(failed) => Err(failed),
            None => Ok(()),
        }
    }

    /// One pass of [`Backend::read_groups`]: `buffers` split into `groups.len()` groups of
    /// buffers next to each other (CPUs next to each other), group i read by `work` with
    /// its consumer `groups[i]` on drain thread i ([`DrainPool::each`]).
    pub fn read_groups<B: Send, G: Send>(
        &self,
        buffers: &mut [B],
        groups: &mut [G],
        work: impl Fn(&mut [B], &mut G) + Sync,
    ) -> Result<(), DrainFailed> {
        if groups.is_empty() || buffers.is_empty() {
            return Ok(());
        }
        let per = buffers.len().div_ceil(groups.len());
        let mut parts: Vec<(&mut [B], &mut G)> =
            buffers.chunks_mut(per).zip(groups.iter_mut()).collect();
        self.each(&mut parts, |_, (buffers, group)| work(buffers, group))
    }
}

impl Drop for DrainPool {
    fn drop(&mut self) {
        for t in &self.threads {
            t.mailbox.close();
        }
        for t in &mut self.threads {
            if let Some(handle) = t.handle.take() {
                let _ = handle.join();
            }
        }
    }
}

#[cfg(test)]
mod drain_pool_tests {
    use super::DrainPool;

    #[test]
    fn each_group_runs_once_on_its_own_thread_and_a_panic_is_an_error() {
        let pool = DrainPool::start(2).unwrap();
        assert_eq!(pool.threads(), 2);
        // Five groups on two threads: each once, group i on thread i mod 2.
        let mut groups: Vec<(usize, Vec<String>)> = (0..5).map(|i| (i, Vec::new())).collect();
        pool.each(&mut groups, |i, (id, seen)| {
            assert_eq!(i, *id);
            let me = std::thread::current();
            seen.push(format!("{} {:?}", me.name().unwrap_or(""), me.id()));
        })
        .unwrap();
        for (i, seen) in groups.iter().map(|(i, s)| (*i, s)) {
            assert_eq!(seen.len(), 1, "group {i} ran {} times", seen.len());
            assert!(seen[0].starts_with("uevrec-drain "), "{seen:?}");
            assert_eq!(
                seen[0],
                groups[i % 2].1[0],
                "group {i} not on thread {}",
                i % 2
            );
        }
        assert_ne!(groups[0].1, groups[1].1, "both groups on one thread");
        // A group that panics: the others finish, the error names it, the pool lives on.
        let mut done = vec![false; 4];
        let err = pool
            .each(&mut done, |i, d| {
                assert_ne!(i, 2, "group two breaks");
                *d = true;
            })
            .unwrap_err();
        assert_eq!(err.group, 2);
        assert!(err.message.contains("group two breaks"), "{err}");
        assert_eq!(done, [true, true, false, true]);
        let mut again = vec![0u8; 2];
        pool.each(&mut again, |_, n| *n += 1).unwrap();
        assert_eq!(again, [1, 1]);
    }
}
