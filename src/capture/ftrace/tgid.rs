//! Thread id → process id for ftrace records: an ftrace record carries only
//! `common_pid`, the thread id, where the perf backend gives the process id (tgid) too.
//! [`Tgids`] finds it the way a reader can without the kernel's help, bounded: what the
//! tracking events told ([`Tgids::learn_fork`]), then a cache, `/proc/<tid>/status`, and
//! the kernel's `saved_tgids` ([`Tgids::tgid`] says why each and in which order). A thread
//! found nowhere gets no process id (the JSON line says `"pid":0`).

use std::fs;
use std::io::Read as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use uevrec_parsers::trace_dat::parse_saved_tgids;

/// The most threads cached.
pub const MAX_CACHED: usize = 65_536;
/// How long a cached thread is trusted.
pub const CACHE_TTL: Duration = Duration::from_secs(1);
/// The least time between two reads of `saved_tgids`.
pub const SAVED_INTERVAL: Duration = Duration::from_millis(5);
/// The most of the time spent reading `saved_tgids`: after a read that took `d`, the
/// next waits at least `d / SAVED_SHARE` (and [`SAVED_INTERVAL`]). The table lists every
/// thread that ever ran, so one read is expensive on a busy machine, and a build's exited
/// threads asked for one every 5 ms (BENCHMARKS.md §8, "Threads found nowhere").
pub const SAVED_SHARE: u32 = 20;

/// The thread → process cache: the tracking events' forks, then the last thread, then a
/// map of at most [`MAX_CACHED`] threads emptied every [`CACHE_TTL`] (so a recycled thread
/// id does not keep a dead process's id), over `/proc` and `saved_tgids`.
#[derive(Debug)]
pub struct Tgids {
    last: Option<(u32, u32)>,
    /// Thread → process as the tracking events told it (at most [`MAX_CACHED`]).
    forked: foldhash::HashMap<u32, u32>,
    cache: foldhash::HashMap<u32, u32>,
    cached_since: Instant,
    /// Threads found nowhere, and when.
    missing: foldhash::HashMap<u32, Instant>,
    /// The kernel's table as last read.
    saved: foldhash::HashMap<u32, u32>,
    saved_path: Option<PathBuf>,
    saved_read: Option<Instant>,
    /// The least time from one read of the table to the next.
    saved_gap: Duration,
    /// Reused for `/proc/<tid>/status`.
    buf: Vec<u8>,
}

impl Tgids {
    /// A cache that falls back to the kernel's table at `saved_tgids` (None: none).
    pub fn new(saved_tgids: Option<PathBuf>) -> Self {
        Tgids {
            last: None,
            forked: foldhash::HashMap::default(),
            cache: foldhash::HashMap::default(),
            cached_since: Instant::now(),
            missing: foldhash::HashMap::default(),
            saved: foldhash::HashMap::default(),
            saved_path: saved_tgids,
            saved_read: None,
            saved_gap: SAVED_INTERVAL,
            buf: Vec::with_capacity(2048),
        }
    }

    /// The process id of thread `tid`, if known. Tried in order:
    ///
    /// 1. what the tracking events told ([`Tgids::learn_fork`]);
    /// 2. the cache (the last thread, then the map);
    /// 3. `/proc/<tid>/status` (`Tgid:`), for a thread that is still alive;
    /// 4. the kernel's `saved_tgids` table, for a thread that exited before it was looked
    ///    up: the instance sets `options/record-tgid`, so the kernel saves the tgid of
    ///    every task at each context switch on a CPU that recorded an event (a thread that
    ///    wrote a record is saved at the latest when it is switched out, also at exit).
    ///    The table is read at most every [`SAVED_INTERVAL`], and at most a
    ///    [`SAVED_SHARE`] of the time.
    ///
    /// A thread found nowhere is remembered as such for [`SAVED_INTERVAL`] (a map of at
    /// most [`MAX_CACHED`]), so its further records cost a lookup, not an `open` of
    /// `/proc/<tid>/status` each. It gets `None` when its id was recycled before it was
    /// looked up, or when it exited less than [`SAVED_INTERVAL`] after the last read of
    /// the table.
    pub fn tgid(&mut self, tid: u32) -> Option<u32> {
        if let Some((t, p)) = self.last {
            if t == tid {
                return Some(p);
            }
        }
        if let Some(&p) = self.forked.get(&tid) {
            self.last = Some((tid, p));
            return Some(p);
        }
        if self.cached_since.elapsed() >= CACHE_TTL || self.cache.len() >= MAX_CACHED {
            self.cache.clear();
            self.last = None;
            self.cached_since = Instant::now();
        }
        let pid = match self.cache.get(&tid) {
            Some(&p) => p,
            None => {
                if let Some(since) = self.missing.get(&tid) {
                    if since.elapsed() < SAVED_INTERVAL {
                        return None;
                    }
                }
                let Some(p) = self.proc_status(tid).or_else(|| self.saved(tid)) else {
                    if self.missing.len() >= MAX_CACHED {
                        self.missing.clear();
                    }
                    self.missing.insert(tid, Instant::now());
                    return None;
                };
                self.missing.remove(&tid);
                self.cache.insert(tid, p);
                p
            }
        };
        self.last = Some((tid, pid));
        Some(pid)
    }

    /// Task `child` was created by thread `parent` (`task:task_newtask`), in the
    /// parent's thread group when `thread` (`CLONE_THREAD`), else as a process of its
    /// own. This replaces whatever was known of the id `child` before (a recycled id).
    ///
    /// This is the only source that cannot be stale: `/proc` fails once a short-lived
    /// process has exited, and the kernel's table keeps an entry for a thread id until the
    /// id's next user is switched out, so on a busy machine whose thread ids wrap
    /// (`pid_max` 32768) a recycled id got the process id of its previous user (CI,
    /// 2026-11-28: a record of a new process named a process that had exited, and with it
    /// that process's cgroup and pod). With `--no-context` the tracking instance is made
    /// all the same, with `task_newtask` alone
    /// ([`crate::capture::backend::Backend::track_new_tasks`]): without it, an id reused
    /// within [`CACHE_TTL`] of its previous user's last record got that user's process id
    /// from the cache (tests/host/tid_reuse.rs, both ways).
    pub fn learn_fork(&mut self, child: u32, parent: u32, thread: bool) {
        let pid = if thread {
            match self.tgid(parent) {
                Some(p) => p,
                None => {
                    self.forget(child);
                    return;
                }
            }
        } else {
            child
        };
        if self.forked.len() >= MAX_CACHED && !self.forked.contains_key(&child) {
            self.forked.clear();
        }
        self.forget(child);
        self.forked.insert(child, pid);
    }

    /// Nothing known of `tid` any more (its id is being reused).
    fn forget(&mut self, tid: u32) {
        self.forked.remove(&tid);
        self.cache.remove(&tid);
        self.missing.remove(&tid);
        self.saved.remove(&tid);
        if self.last.is_some_and(|(t, _)| t == tid) {
            self.last = None;
        }
    }

    /// `Tgid:` of `/proc/<tid>/status`.
    fn proc_status(&mut self, tid: u32) -> Option<u32> {
        if tid == 0 {
            return Some(0); // the idle task
        }
        self.buf.clear();
        let mut f = fs::File::open(format!("/proc/{tid}/status")).ok()?;
        f.read_to_end(&mut self.buf).ok()?;
        parse_status_tgid(&self.buf)
    }

    /// `tid` in the kernel's table, re-read when it is old enough.
    fn saved(&mut self, tid: u32) -> Option<u32> {
        // A copy older than CACHE_TTL is not trusted: the id may have a new user since.
        let fresh = self.saved_read.is_some_and(|t| t.elapsed() < CACHE_TTL);
        if fresh {
            if let Some(&p) = self.saved.get(&tid) {
                return Some(p);
            }
        }
        let path = self.saved_path.as_ref()?;
        if self
            .saved_read
            .is_some_and(|t| t.elapsed() < self.saved_gap)
        {
            return None;
        }
        let start = Instant::now();
        self.saved_read = Some(start);
        let text = fs::read_to_string(path).ok()?;
        self.saved.clear();
        self.saved.extend(parse_saved_tgids(&text));
        self.saved_gap = SAVED_INTERVAL.max(start.elapsed() * SAVED_SHARE);
        self.saved.get(&tid).copied()
    }
}

/// The `Tgid:` line of a `/proc/<tid>/status` text.
fn parse_status_tgid(status: &[u8]) -> Option<u32> {
    let text = std::str::from_utf8(status).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_thread_is_found_in_proc() {
        let me = std::process::id();
        let mut t = Tgids::new(None);
        assert_eq!(t.tgid(me), Some(me));
        // Another thread of this process.
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            // SAFETY: gettid has no memory effects.
            tx.send(unsafe { libc::gettid() as u32 }).unwrap();
            let _ = stop_rx.recv();
        });
        let tid = rx.recv().unwrap();
        assert_ne!(tid, me);
        assert_eq!(t.tgid(tid), Some(me));
        drop(stop_tx);
        h.join().unwrap();
        // Cached now, though gone.
        assert_eq!(t.tgid(tid), Some(me));
    }

    #[test]
    fn a_fork_replaces_what_the_kernels_table_says_of_a_recycled_id() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("saved_tgids");
        // Ids that no process has here (above pid_max's default): only the table and
        // the forks tell of them. 4000010 was a thread of 4000009 once.
        fs::write(&path, "4000010 4000009\n4000009 4000009\n").unwrap();
        let mut t = Tgids::new(Some(path));
        assert_eq!(t.tgid(4_000_010), Some(4_000_009));
        // Its id is reused by a new process (a fork without CLONE_THREAD) ...
        t.learn_fork(4_000_010, 4_000_002, false);
        assert_eq!(t.tgid(4_000_010), Some(4_000_010));
        // ... which starts a thread: the thread is the new process's.
        t.learn_fork(4_000_011, 4_000_010, true);
        assert_eq!(t.tgid(4_000_011), Some(4_000_010));
        // A thread of a parent known nowhere: nothing is guessed.
        t.learn_fork(4_000_012, 4_000_999, true);
        assert_eq!(t.tgid(4_000_012), None);
    }

    #[test]
    fn an_exited_thread_is_found_in_the_kernels_table() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("saved_tgids");
        fs::write(&path, "4000000 77\n4000001 0\n").unwrap();
        let mut t = Tgids::new(Some(path));
        assert_eq!(t.tgid(4_000_000), Some(77));
        assert_eq!(t.tgid(4_000_001), None);
    }

    #[test]
    fn a_thread_found_nowhere_is_not_looked_up_again_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("saved_tgids");
        fs::write(&path, "").unwrap();
        let mut t = Tgids::new(Some(path.clone()));
        let start = Instant::now();
        assert_eq!(t.tgid(4_000_002), None);
        // The table learns of it now; within SAVED_INTERVAL the thread stays unknown
        // (unless this machine stalled the test for that long).
        fs::write(&path, "4000002 78\n").unwrap();
        let again = t.tgid(4_000_002);
        if start.elapsed() < SAVED_INTERVAL {
            assert_eq!(again, None);
        }
        std::thread::sleep(SAVED_INTERVAL.max(t.saved_gap) * 2);
        assert_eq!(t.tgid(4_000_002), Some(78));
    }

    #[test]
    fn status_and_table_texts() {
        assert_eq!(
            parse_status_tgid(b"Name:\tx\nUmask:\t0022\nState:\tR\nTgid:\t42\nNgid:\t0\n"),
            Some(42)
        );
        assert_eq!(parse_status_tgid(b"Name:\tx\n"), None);
        let v: Vec<_> = parse_saved_tgids("1 1\n2 1\nbad\n3 0\n").collect();
        assert_eq!(v, [(1, 1), (2, 1)]);
    }
}
