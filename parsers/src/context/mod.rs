//! Who wrote a record: the thread's name (`comm`) and its cgroup v2 path (`cgroup`, with
//! the `container` or systemd `unit` the path names, [`container`]), kept up to date
//! from a stream of [`ContextUpdate`]s: perf's `PERF_RECORD_COMM`/`FORK`/`EXIT`/`CGROUP`
//! records, the ftrace backend's tracking events, the start-up scan of `/proc` and
//! `/sys/fs/cgroup`, or a file's own records (`perf.data` COMM records, `trace.dat`'s
//! saved cmdlines). [`ContextTracker::write`] appends the keys to an event line.
//!
//! Memory is bounded: threads are keyed by thread id (never more entries than the
//! kernel's `pid_max`), and an exited thread's entry is dropped once
//! [`MAX_EXITED`] more threads have exited after it (kept that long because a record
//! written just before the exit may be staged after the exit from another CPU's ring);
//! cgroups are kept up to [`MAX_CGROUPS`] ids (then one is forgotten per new one: the
//! kernel reports cgroup creation but never removal).
//!
//! Names are right at the time of each record even when a record is handled after a
//! rename staged from another CPU's ring: each thread keeps its previous name and the
//! time the current one began, and a record older than that shows the previous name.

pub mod container;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

pub use container::{CgroupOwner, classify};

use crate::json_line::context::{cgroup_text, comm_text};

/// Exited threads whose entries are kept for records staged after their exit.
pub const MAX_EXITED: usize = 1024;
/// Cgroup ids whose paths are kept.
pub const MAX_CGROUPS: usize = 65_536;

/// One change of who is who.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextUpdate<'a> {
    /// Thread `tid` is (now) called `comm` (exec, `prctl(PR_SET_NAME)`, or the scan);
    /// `comm` ends at its first NUL, if any.
    Comm {
        /// The thread.
        tid: u32,
        /// Its name (at most 15 bytes in the kernel; any length is taken).
        comm: &'a [u8],
    },
    /// Thread `tid` was created by `parent_tid`: it starts with its name and cgroup.
    Fork {
        /// The new thread.
        tid: u32,
        /// The thread that created it.
        parent_tid: u32,
    },
    /// Thread `tid` exited.
    Exit {
        /// The thread.
        tid: u32,
    },
    /// Cgroup `id` (its kernfs inode number) has the path `path` (from the cgroup v2
    /// root, `/` for the root itself).
    Cgroup {
        /// The cgroup id.
        id: u64,
        /// Its path.
        path: &'a [u8],
    },
    /// Thread `tid` is in cgroup `id` (the scan, or a backend that tracks moves; used
    /// for records that carry no cgroup id of their own).
    ThreadCgroup {
        /// The thread.
        tid: u32,
        /// The cgroup id.
        id: u64,
    },
}

/// What is known of one thread.
#[derive(Debug, Clone)]
struct Thread {
    /// `,"comm":"…"`, rendered once per name.
    comm: Box<[u8]>,
    /// The name before `comm` and the time `comm` began (records older than that show
    /// the previous name).
    before: Option<(Box<[u8]>, u64)>,
    /// The thread's cgroup id, when known (records without one of their own use it).
    cgroup: Option<u64>,
    /// When the thread last got its name from a `Comm` update, if that had a time.
    named_at: Option<u64>,
    /// Exited, waiting in the exited queue to be dropped.
    exited: bool,
}

type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Hands out [`ContextTracker::version`]s: one counter for every tracker of the process,
/// so two trackers share a version only when they hold the same (a clone, or both
/// empty).
static VERSIONS: AtomicU64 = AtomicU64::new(1);

/// The names and cgroups of the threads seen so far (see the module docs).
#[derive(Debug, Default, Clone)]
pub struct ContextTracker {
    threads: Map<u32, Thread>,
    exited: VecDeque<u32>,
    /// Cgroup id → `,"cgroup":"…"` and `,"container":"…"` or `,"unit":"…"`.
    cgroups: Map<u64, Box<[u8]>>,
    /// Changes with every [`ContextTracker::apply`] (0: nothing applied yet).
    version: u64,
}

impl ContextTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// Threads known (live and recently exited).
    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Cgroup ids known.
    pub fn cgroups(&self) -> usize {
        self.cgroups.len()
    }

    /// Identifies what the tracker holds: two calls of [`ContextTracker::write`] with the
    /// same arguments write the same keys while the version stays the same (a writer
    /// keeps the keys of the last record for the next one of the same thread,
    /// [`crate::LineWriter::set_context`]).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Take one update, which happened at `time` (the records' clock; None: unknown,
    /// treated as before every record).
    pub fn apply(&mut self, time: Option<u64>, update: ContextUpdate<'_>) {
        self.version = VERSIONS.fetch_add(1, Ordering::Relaxed);
        match update {
            ContextUpdate::Comm { tid, comm } => {
                let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
                let text = comm_text(&comm[..end]);
                match self.threads.get_mut(&tid) {
                    Some(t) if *t.comm == *text => {
                        t.exited = false;
                        t.named_at = time.or(t.named_at);
                    }
                    Some(t) => {
                        let old = std::mem::replace(&mut t.comm, text);
                        t.before = time.map(|at| (old, at));
                        t.exited = false;
                        t.named_at = time;
                    }
                    None => {
                        self.threads.insert(
                            tid,
                            Thread {
                                comm: text,
                                before: None,
                                cgroup: None,
                                exited: false,
                                named_at: time,
                            },
                        );
                    }
                }
            }
            ContextUpdate::Fork { tid, parent_tid } => {
                // The child's own renames (exec) taken already, from another CPU's ring
                // read first, are newer than its fork: keep them.
                let renamed_since = self.threads.get(&tid).is_some_and(|c| {
                    !c.exited && c.named_at.zip(time).is_some_and(|(n, f)| n >= f)
                });
                if renamed_since {
                    let cgroup = self.threads.get(&parent_tid).and_then(|p| p.cgroup);
                    if let Some(c) = self.threads.get_mut(&tid) {
                        c.cgroup = c.cgroup.or(cgroup);
                    }
                } else if let Some(parent) = self.threads.get(&parent_tid) {
                    let child = Thread {
                        comm: parent.comm.clone(),
                        before: None,
                        cgroup: parent.cgroup,
                        exited: false,
                        named_at: time,
                    };
                    self.threads.insert(tid, child);
                } else {
                    // A thread id reused by a thread whose parent is unknown: what the
                    // old one was called is wrong now.
                    self.threads.remove(&tid);
                }
            }
            ContextUpdate::Exit { tid } => {
                if let Some(t) = self.threads.get_mut(&tid) {
                    if !t.exited {
                        t.exited = true;
                        self.exited.push_back(tid);
                    }
                }
                while self.exited.len() > MAX_EXITED {
                    let Some(old) = self.exited.pop_front() else {
                        break;
                    };
                    // Only if it is still the exited thread (not a new one with its id).
                    if self.threads.get(&old).is_some_and(|t| t.exited) {
                        self.threads.remove(&old);
                    }
                }
            }
            ContextUpdate::Cgroup { id, path } => {
                if self.cgroups.len() >= MAX_CGROUPS && !self.cgroups.contains_key(&id) {
                    if let Some(&any) = self.cgroups.keys().next() {
                        self.cgroups.remove(&any);
                    }
                }
                let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
                self.cgroups.insert(id, cgroup_text(&path[..end]));
            }
            ContextUpdate::ThreadCgroup { tid, id } => {
                if let Some(t) = self.threads.get_mut(&tid) {
                    t.cgroup = Some(id);
                }
            }
        }
    }

    /// Append the context keys of a record of thread `tid` of process `pid` at `time`
    /// whose sample named cgroup `cgroup`: `,"comm":"…"` when the thread's name is known,
    /// then `,"cgroup":"…"` with `,"container":"…"` or `,"unit":"…"` when the cgroup's
    /// path is known. Without a cgroup of its own, the record gets its process's (the
    /// main thread's: moves are seen for the whole process even when a new thread's
    /// fork is staged before the move), else its thread's. Nothing is written for what
    /// is not known (never a guess).
    ///
    /// Returns from which time on the same keys hold for this thread, process and cgroup
    /// (until the next [`ContextTracker::apply`]; records without a time included): 0
    /// when they do not depend on the time, the time of the thread's last rename when
    /// they do; `None` when they hold for this record's time only (it showed the name
    /// before a rename).
    #[inline]
    pub fn write(
        &self,
        out: &mut Vec<u8>,
        pid: u32,
        tid: u32,
        time: Option<u64>,
        cgroup: Option<u64>,
    ) -> Option<u64> {
        let thread = self.threads.get(&tid);
        let mut valid_from = Some(0);
        if let Some(t) = thread {
            let comm = match (&t.before, time) {
                (Some((old, since)), Some(at)) if at < *since => {
                    valid_from = None;
                    old
                }
                (Some((_, since)), _) => {
                    valid_from = Some(*since);
                    &t.comm
                }
                (None, _) => &t.comm,
            };
            out.extend_from_slice(comm);
        }
        let cgroup = cgroup.or_else(|| self.cgroup_in(pid, tid, thread));
        if let Some(text) = cgroup.and_then(|id| self.cgroups.get(&id)) {
            out.extend_from_slice(text);
        }
        valid_from
    }

    /// The cgroup id a record of thread `tid` of process `pid` that carries none of its
    /// own gets (the one [`ContextTracker::write`] names): its process's, else its
    /// thread's; `None` when neither is known.
    #[inline]
    pub fn cgroup_of(&self, pid: u32, tid: u32) -> Option<u64> {
        self.cgroup_in(pid, tid, self.threads.get(&tid))
    }

    /// [`ContextTracker::cgroup_of`] with the thread looked up already.
    #[inline]
    fn cgroup_in(&self, pid: u32, tid: u32, thread: Option<&Thread>) -> Option<u64> {
        let process = if pid == tid {
            thread
        } else {
            self.threads.get(&pid)
        };
        process.and_then(|p| p.cgroup).or(thread?.cgroup)
    }
}

#[cfg(test)]
mod tests;
