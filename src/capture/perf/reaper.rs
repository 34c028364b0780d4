//! Closing tracepoint descriptors off the critical path. Closing the last perf descriptor
//! of a tracepoint makes the kernel wait for RCU grace periods (`perf_trace_destroy` →
//! `perf_trace_event_unreg` → `tracepoint_synchronize_unregister`, under the global
//! `event_mutex`), one tracepoint after another: closing hundreds takes many seconds, and
//! from several threads just as long, since the mutex serialises them (BENCHMARKS.md §7,
//! "Stop time"). A process's exit closes its descriptors before the parent hears of it,
//! so `perf record` takes as long to exit. [`close_in_background`] hands that wait to a
//! *reaper* process (`uevrec-close`) that inherits the descriptors and makes the last
//! close in the background.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// The reaper's name (`/proc/PID/comm`, at most 15 bytes).
pub const REAPER_NAME: &std::ffi::CStr = c"uevrec-close";

/// The pipe a reaper waits on: it may go once the write end is closed.
///
/// The pipe needs two descriptors. A session that has used every descriptor it may open
/// (events attached up to `RLIMIT_NOFILE`) cannot make one at its end, so the caller keeps
/// a spare one made at the start for that case.
#[derive(Debug)]
pub struct ReaperPipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl ReaperPipe {
    /// A new pipe (close-on-exec).
    pub fn new() -> io::Result<ReaperPipe> {
        use std::os::fd::FromRawFd;
        let mut pipe = [-1; 2];
        // SAFETY: `pipe` is a writable array of two ints.
        if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe2 just returned these two new descriptors, owned by nothing else.
        let (read, write) =
            unsafe { (OwnedFd::from_raw_fd(pipe[0]), OwnedFd::from_raw_fd(pipe[1])) };
        Ok(ReaperPipe { read, write })
    }
}

/// Close `fds`, handing the cost of the last close to a reaper process that waits on
/// `pipe`. Returns once the caller's copies are closed; the reaper closes the rest later.
/// Without a pipe, or when the fork fails, closes them here (slowly, one grace period per
/// tracepoint).
///
/// It forks a reaper that inherits the descriptors, the caller closes its own copies
/// (cheap: the reaper's still reference the same open files), and the reaper, once the
/// caller is done, exits, and so makes the last close and pays the grace periods:
///
/// - the reaper is a grandchild (double fork, own session via `setsid`): nobody waits
///   for it, no terminal signal reaches it, and `init` (or the nearest subreaper) reaps
///   it; it is named `uevrec-close` (`ps`, `pgrep`), starts as an ordinary thread
///   (`SCHED_RESET_ON_FORK`, see [`crate::system::sched`]) with every signal blocked;
/// - before anything else it closes every descriptor but the ones handed to it, so an
///   output pipe sees end-of-file and an output file is complete as soon as the caller
///   closes them; it touches no output and runs no Rust code that could allocate or lock
///   (only system calls: it is the child of a multi-threaded process);
/// - it waits (a pipe) until the caller has closed its copies, so that the last close is
///   its own, then exits. It lives for as long as the grace periods take and no longer.
///
/// What this means for user_events producers: their enable bit clears, and an event
/// without other users is deleted (or can be deleted), only when the reaper's close
/// reaches it, i.e. up to (number of events × one grace period) after uevrec exited.
pub fn close_in_background(fds: Vec<OwnedFd>, pipe: Option<ReaperPipe>) {
    if fds.is_empty() {
        return;
    }
    match pipe.map(|p| fork_reaper(&fds, p)) {
        Some(Ok(go)) => {
            drop(fds);
            // The reaper's read sees end-of-file: it may close its copies now.
            drop(go);
        }
        // No reaper: close here (one grace period per tracepoint, as without one).
        _ => drop(fds),
    }
}

/// The descriptor ranges `[first, last]` a reaper closes: everything but `keep` (sorted,
/// no duplicates, non-negative).
fn gaps(keep: &[RawFd]) -> Vec<(u32, u32)> {
    let mut out = Vec::with_capacity(keep.len() + 1);
    let mut next: u32 = 0;
    for &fd in keep {
        let fd = fd as u32;
        if fd > next {
            out.push((next, fd - 1));
        }
        next = fd + 1;
    }
    out.push((next, u32::MAX));
    out
}

/// Fork the reaper holding `fds` and waiting on `pipe`; returns the pipe's write end
/// (closing it lets the reaper go). Errors: a fork failed (no reaper holds `fds`).
fn fork_reaper(fds: &[OwnedFd], pipe: ReaperPipe) -> io::Result<OwnedFd> {
    let ReaperPipe {
        read: rd,
        write: wr,
    } = pipe;
    // Everything the child needs is computed here: after fork it may not allocate.
    let mut keep: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    keep.push(rd.as_raw_fd());
    keep.sort_unstable();
    keep.dedup();
    let gaps = gaps(&keep);
    // For kernels without close_range (before 5.9): descriptors are below the soft limit.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a writable rlimit.
    let max_fd = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        u32::try_from(lim.rlim_cur).unwrap_or(u32::MAX)
    } else {
        65536
    };
    let rd_fd = rd.as_raw_fd();

    // Block every signal across the fork: the children keep the mask (no handler of this
    // process ever runs in them); this thread gets its mask back at once.
    // SAFETY: sigset_t is plain data; sigfillset initialises it.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: both sets are valid; pthread_sigmask changes only this thread's mask.
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    // SAFETY: fork in a multi-threaded process: the child only makes system calls
    // (async-signal-safe) on data prepared above, and leaves by _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: see `reaper_child`.
        unsafe { reaper_child(&gaps, max_fd, rd_fd, REAPER_NAME) }
    }
    // SAFETY: restores this thread's mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut status = 0;
    // The first child only forks the reaper and exits: this wait is short.
    // SAFETY: `status` is writable; `pid` is our child.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        return Err(io::Error::other("the reaper could not be started"));
    }
    drop(rd);
    Ok(wr)
}

/// The first child: fork the reaper and exit (0: the reaper runs, 1: it could not be
/// forked). The reaper: own session and name, every descriptor but the handed ones and
/// `rd` closed, wait for end-of-file on `rd`, exit (which closes the handed descriptors).
///
/// # Safety
/// Only in a child of `fork`: it makes system calls only (no allocation, no locks) and
/// never returns.
unsafe fn reaper_child(gaps: &[(u32, u32)], max_fd: u32, rd: RawFd, name: &std::ffi::CStr) -> ! {
    // SAFETY: plain system calls on values prepared before the fork (the slices and the
    // name are in memory the child inherited); `b` is a writable byte.
    unsafe {
        // Named before the fork, which copies the name: the reaper bears it from its first
        // instant, so `pgrep -x uevrec-close` finds it as soon as the caller's wait for
        // this child returns (named after the fork, it could go unseen for a moment, and a
        // script deleting an event once no closer runs would get EBUSY).
        libc::prctl(libc::PR_SET_NAME, name.as_ptr(), 0, 0, 0);
        let pid = libc::fork();
        if pid != 0 {
            libc::_exit(if pid > 0 { 0 } else { 1 });
        }
        libc::setsid();
        for &(first, last) in gaps {
            let rc = libc::syscall(libc::SYS_close_range, first, last, 0);
            if rc < 0 {
                // No close_range: one close per possible descriptor.
                let mut fd = first;
                while fd <= last && fd < max_fd {
                    libc::close(fd as RawFd);
                    fd += 1;
                }
            }
        }
        let mut b = 0u8;
        loop {
            let n = libc::read(rd, (&mut b as *mut u8).cast(), 1);
            if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
                break;
            }
        }
        libc::_exit(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inode of the pipe behind `fd` as `/proc/PID/fd` links show it (`pipe:[N]`).
    fn pipe_link(fd: &OwnedFd) -> String {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
        format!("pipe:[{}]", meta.ino())
    }

    /// The processes named `uevrec-close` holding a descriptor linked to `link`.
    fn reapers_holding(link: &str) -> Vec<u32> {
        let pids = std::fs::read_dir("/proc").unwrap().filter_map(|e| {
            let pid = e.ok()?.file_name().to_str()?.parse::<u32>().ok()?;
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            (comm.trim_end() == "uevrec-close").then_some(pid)
        });
        pids.filter(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                fds.filter_map(Result::ok)
                    .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.to_str() == Some(link)))
            })
        })
        .collect()
    }

    #[test]
    fn the_reaper_bears_its_name_from_the_start_and_goes_when_released() {
        let handed = ReaperPipe::new().unwrap();
        let link = pipe_link(&handed.read);
        let release = fork_reaper(&[handed.read], ReaperPipe::new().unwrap()).unwrap();
        // No wait: the reaper is named before fork_reaper returns.
        assert_eq!(
            reapers_holding(&link).len(),
            1,
            "no uevrec-close holds {link}"
        );
        drop(release);
        let start = std::time::Instant::now();
        while !reapers_holding(&link).is_empty() {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(10),
                "the reaper holding {link} did not exit once released"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        drop(handed.write);
    }

    #[test]
    fn gaps_cover_everything_but_the_kept() {
        assert_eq!(gaps(&[]), vec![(0, u32::MAX)]);
        assert_eq!(gaps(&[0, 1, 2]), vec![(3, u32::MAX)]);
        assert_eq!(
            gaps(&[3, 4, 7, 9]),
            vec![(0, 2), (5, 6), (8, 8), (10, u32::MAX)]
        );
    }
}
