//! Who wrote a record: the thread's name (`comm`) and its cgroup v2 path (`cgroup`, with
//! the `container` or systemd `unit` the path names, [`container`]), kept up to date
//! from a stream of [`ContextUpdate`]s: perf's `PERF_RECORD_COMM`/`FORK`/`EXIT`/`CGROUP`
//! records, the ftrace backend's tracking events, the start-up scan of `/proc` and
//! `/sys/fs/cgroup`, or a file's own records (`perf.data` COMM records, `trace.dat`'s
//! saved cmdlines). [`ContextTracker::write`] appends the keys to an event line. A
//! cgroup in a Kubernetes pod also gets the pod's keys ([`kubernetes`]), with the names
//! [`ContextUpdate::Pod`] and [`ContextUpdate::ContainerName`] bring.
//!
//! Memory is bounded: threads are keyed by thread id (never more entries than the
//! kernel's `pid_max`), and an exited thread's entry is dropped once
//! [`MAX_EXITED`] more threads have exited after it (kept that long because a record
//! written just before the exit may be staged after the exit from another CPU's ring);
//! cgroups are kept up to [`MAX_CGROUPS`] ids (then one is forgotten per new one: the
//! kernel reports cgroup creation but never removal).
//!
//! Names are right at the time of each record even when a record is handled after
//! renames staged from another CPU's ring: each thread keeps the time its name began and
//! up to [`MAX_NAMES`] earlier names with the times they began, and a record shows the
//! name its thread had at the record's time (nothing when that is older than the names
//! kept, after more renames than that in one read).

pub mod container;
mod keys;
pub mod kubernetes;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

pub use container::{CgroupOwner, classify};
pub use kubernetes::{K8sNames, PodCgroup, PodIdentity, Qos, classify_pod};

use keys::{cgroup_text, comm_text};

/// Exited threads whose entries are kept for records staged after their exit.
pub const MAX_EXITED: usize = 1024;
/// Cgroup ids whose paths are kept.
pub const MAX_CGROUPS: usize = 65_536;
/// Earlier names kept per thread (for records handled after later renames).
pub const MAX_NAMES: usize = 8;

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
    /// Pod `uid` is `name` in `namespace` (from the kubelet's `/var/log/pods`;
    /// [`kubernetes`]): the records of its cgroups carry the names from now on.
    Pod {
        /// The pod UID (as the API server spells it).
        uid: &'a [u8],
        /// Its namespace.
        namespace: &'a [u8],
        /// Its name.
        name: &'a [u8],
    },
    /// The container with id `id` is named `name` in its pod (from the kubelet's
    /// `/var/log/containers`).
    ContainerName {
        /// The container id.
        id: &'a [u8],
        /// Its name.
        name: &'a [u8],
    },
    /// Process `pid` ran a new program (exec) called `comm`: for names, a rename of the
    /// thread `pid`; for stacks, every mapping the process had is gone.
    Exec {
        /// The process (its main thread).
        pid: u32,
        /// The new name.
        comm: &'a [u8],
    },
    /// Process `pid` mapped `len` bytes of the file `path` (from its byte `pgoff`) at
    /// `addr`, executable (perf's `PERF_RECORD_MMAP2`): what names its stack frames.
    Mmap {
        /// The process.
        pid: u32,
        /// Start of the mapping.
        addr: u64,
        /// Its length.
        len: u64,
        /// Its offset in the file.
        pgoff: u64,
        /// The file's GNU build id, when the kernel gave it (up to 20 bytes).
        build_id: &'a [u8],
        /// The file (`[vdso]`, `//anon` … for mappings of no file), up to its NUL.
        path: &'a [u8],
    },
}

/// What is known of one thread.
#[derive(Debug, Clone)]
struct Thread {
    /// `,"comm":"…"`, rendered once per name.
    comm: Box<[u8]>,
    /// When `comm` began (None: before every record).
    since: Option<u64>,
    /// Earlier names, each with the time it began, oldest first (at most [`MAX_NAMES`];
    /// empty for a thread never renamed during the recording).
    older: Vec<(u64, Box<[u8]>)>,
    /// Names older than `older` were forgotten: records before its first name show none.
    forgot: bool,
    /// The thread's cgroup id, when known (records without one of their own use it).
    cgroup: Option<u64>,
    /// When the thread last got its name from a `Comm` update, if that had a time.
    named_at: Option<u64>,
    /// Exited, waiting in the exited queue to be dropped.
    exited: bool,
}

impl Thread {
    /// A thread called `comm` (rendered) since `since`.
    fn new(comm: Box<[u8]>, since: Option<u64>, cgroup: Option<u64>) -> Thread {
        Thread {
            comm,
            since,
            older: Vec::new(),
            forgot: false,
            cgroup,
            named_at: since,
            exited: false,
        }
    }

    /// The (rendered) name the thread had at `time` (None: unknown, treated as now);
    /// None when that is older than the names kept.
    #[inline]
    fn name_at(&self, time: Option<u64>) -> Option<&[u8]> {
        let Some(at) = time.filter(|&at| self.since.is_some_and(|s| at < s)) else {
            return Some(&self.comm);
        };
        match self.older.iter().rposition(|&(began, _)| began <= at) {
            Some(i) => Some(&self.older[i].1),
            None if self.forgot => None,
            // Before the first name known: the thread had it from its start.
            None => Some(self.older.first().map_or(&self.comm, |(_, c)| c)),
        }
    }

    /// The thread is called `text` from `time` on (None: from the start, forgetting
    /// earlier names).
    fn rename(&mut self, time: Option<u64>, text: Box<[u8]>) {
        match time {
            None => {
                self.comm = text;
                self.since = None;
                self.older.clear();
                self.forgot = false;
            }
            Some(at) => self.began(at, text),
        }
    }

    /// Name `text` began at `at`: the current one, or (read late from another CPU's
    /// ring) an earlier one.
    fn began(&mut self, at: u64, text: Box<[u8]>) {
        if self.since.is_none_or(|s| at >= s) {
            if *self.comm != *text {
                let old = std::mem::replace(&mut self.comm, text);
                self.older.push((self.since.unwrap_or(0), old));
                self.since = Some(at);
            }
        } else {
            let i = self.older.partition_point(|&(began, _)| began <= at);
            self.older.insert(i, (at, text));
        }
        if self.older.len() > MAX_NAMES {
            self.older.remove(0);
            self.forgot = true;
        }
    }
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
    /// The [`ContextTracker::version`] of the last update that changed what
    /// [`ContextTracker::pod_identity`] gives ([`ContextTracker::pod_version`]).
    pod_version: u64,
    /// Kubernetes names by pod UID and container id, and the paths of pod cgroups.
    k8s: K8sNames,
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

    /// Identifies what the tracker knows of cgroups and pods: [`ContextTracker::pod_identity`]
    /// of a cgroup id gives the same while it stays the same (it changes when a cgroup
    /// is named or forgotten and when a pod's or container's names are learnt; not
    /// with threads' names and moves, unlike [`ContextTracker::version`]).
    pub fn pod_version(&self) -> u64 {
        self.pod_version
    }

    /// Take one update, which happened at `time` (the records' clock; None: unknown,
    /// treated as before every record).
    pub fn apply(&mut self, time: Option<u64>, update: ContextUpdate<'_>) {
        self.version = VERSIONS.fetch_add(1, Ordering::Relaxed);
        match update {
            ContextUpdate::Exec { pid, comm } => {
                self.apply(time, ContextUpdate::Comm { tid: pid, comm })
            }
            // Mappings name stack frames (the formatter's stack symbolizer), not records.
            ContextUpdate::Mmap { .. } => {}
            ContextUpdate::Comm { tid, comm } => {
                let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
                let text = comm_text(&comm[..end]);
                match self.threads.get_mut(&tid) {
                    Some(t) => {
                        t.rename(time, text);
                        t.exited = false;
                        t.named_at = time.or(t.named_at);
                    }
                    None => {
                        self.threads.insert(tid, Thread::new(text, time, None));
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
                    // The name it had from the fork to them: the parent's then.
                    let parent = self.threads.get(&parent_tid);
                    let cgroup = parent.and_then(|p| p.cgroup);
                    let comm: Option<Box<[u8]>> =
                        parent.and_then(|p| p.name_at(time)).map(Into::into);
                    if let Some(c) = self.threads.get_mut(&tid) {
                        c.cgroup = c.cgroup.or(cgroup);
                        if let (Some(comm), Some(at)) = (comm, time) {
                            c.began(at, comm);
                        }
                    }
                } else if let Some(parent) = self.threads.get(&parent_tid) {
                    let comm = parent.name_at(time).unwrap_or(&parent.comm).into();
                    let child = Thread::new(comm, time, parent.cgroup);
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
                self.pod_version = self.version;
                if self.cgroups.len() >= MAX_CGROUPS && !self.cgroups.contains_key(&id) {
                    if let Some(&any) = self.cgroups.keys().next() {
                        self.cgroups.remove(&any);
                        self.k8s.forget_cgroup(any);
                    }
                }
                let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
                let text = self.cgroup_keys(id, &String::from_utf8_lossy(&path[..end]));
                self.cgroups.insert(id, text);
            }
            ContextUpdate::Pod {
                uid,
                namespace,
                name,
            } => {
                if self.k8s.learn_pod(uid, namespace, name) {
                    self.pod_version = self.version;
                    self.rewrite_pod_cgroups();
                }
            }
            ContextUpdate::ContainerName { id, name } => {
                if self.k8s.learn_container(id, name) {
                    self.pod_version = self.version;
                    self.rewrite_pod_cgroups();
                }
            }
            ContextUpdate::ThreadCgroup { tid, id } => {
                if let Some(t) = self.threads.get_mut(&tid) {
                    t.cgroup = Some(id);
                }
            }
        }
    }

    /// The keys of cgroup `id` at `path`: `cgroup`, `container` or `unit`, and the
    /// Kubernetes ones ([`K8sNames::write_keys`]).
    fn cgroup_keys(&mut self, id: u64, path: &str) -> Box<[u8]> {
        let mut text = cgroup_text(path.as_bytes()).into_vec();
        let has_container = classify(path).container.is_some();
        self.k8s.write_keys(id, path, has_container, &mut text);
        text.into_boxed_slice()
    }

    /// Write the keys of every pod cgroup again (names of pods or containers came).
    fn rewrite_pod_cgroups(&mut self) {
        let pods: Vec<(u64, Box<str>)> = self
            .k8s
            .pod_cgroups()
            .map(|(id, p)| (id, p.into()))
            .collect();
        for (id, path) in pods {
            let text = self.cgroup_keys(id, &path);
            self.cgroups.insert(id, text);
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
            // A record from before the current name's start shows an older one: its keys
            // hold for its own time only.
            valid_from = match (t.since, time) {
                (Some(since), Some(at)) if at < since => None,
                (since, _) => Some(since.unwrap_or(0)),
            };
        }
        if let Some(comm) = thread.and_then(|t| t.name_at(time)) {
            out.extend_from_slice(comm);
        }
        let cgroup = cgroup.or_else(|| self.cgroup_in(pid, tid, thread));
        if let Some(text) = cgroup.and_then(|id| self.cgroups.get(&id)) {
            out.extend_from_slice(text);
        }
        valid_from
    }

    /// The name thread `tid` had at `time` as [`ContextTracker::write`] writes it
    /// (`,"comm":"…"`); None when not known.
    #[inline]
    pub fn comm_text(&self, tid: u32, time: Option<u64>) -> Option<&[u8]> {
        self.threads.get(&tid).and_then(|t| t.name_at(time))
    }

    /// The cgroup id a record of thread `tid` of process `pid` that carries none of its
    /// own gets (the one [`ContextTracker::write`] names): its process's, else its
    /// thread's; `None` when neither is known.
    #[inline]
    pub fn cgroup_of(&self, pid: u32, tid: u32) -> Option<u64> {
        self.cgroup_in(pid, tid, self.threads.get(&tid))
    }

    /// The Kubernetes identity of cgroup `id` when it is in a pod (its path was
    /// seen): pod UID, container id and the names known so far (OTLP's resource
    /// attributes; JSON lines get the same as keys from [`ContextTracker::write`]).
    pub fn pod_identity(&self, id: u64) -> Option<PodIdentity<'_>> {
        self.k8s.identity(id)
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
