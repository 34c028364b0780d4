//! Scheduling priorities of the recording threads, so that uevrec keeps up where
//! `perf record` does on a busy machine (issue 16; the measurements are in BENCHMARKS.md
//! §7, "Loss under contention"). A ring overflows when the thread that drains it does not
//! run for as long as the ring takes to fill; on a contended machine a plain thread waits
//! its turn behind every runnable thread, and so do the formatter and the writer at each
//! wake-up, until the chunk pool runs dry and the drain thread waits for it. So, when
//! allowed (root or `CAP_SYS_NICE`), the drain thread runs real-time
//! ([`raise_drain_thread`]) and the workers at a raised nice value
//! ([`raise_worker_thread`]). Without the privilege the threads keep their priorities and
//! a busy machine can make uevrec lose records (each loss a `lost` line, never silent).

use std::io;

/// The drain thread's `SCHED_FIFO` priority: the lowest, above every ordinary thread and
/// below every other real-time one (as `perf record -r 1`).
pub const DRAIN_FIFO_PRIORITY: i32 = 1;

/// The formatter's and writer's nice value: still ordinary threads (they cannot starve
/// anything), with about nine times the weight of a nice-0 thread, so they get their turn
/// soon after waking and a larger share when CPUs are contended.
pub const WORKER_NICE: i32 = -10;

/// The calling thread's id.
fn tid() -> libc::id_t {
    // SAFETY: gettid has no memory effects and cannot fail.
    let tid = unsafe { libc::gettid() };
    // Thread ids are positive.
    tid as libc::id_t
}

/// The calling thread's policy and parameters, as `sched_getscheduler`/`sched_getparam`
/// report them.
fn current() -> io::Result<(i32, libc::sched_param)> {
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid, writable sched_param.
    let policy = unsafe { libc::sched_getscheduler(0) };
    // SAFETY: as above.
    if policy < 0 || unsafe { libc::sched_getparam(0, &mut param) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((policy, param))
}

/// Set the calling thread's policy and parameters.
fn set(policy: i32, param: &libc::sched_param) -> io::Result<()> {
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param the call reads.
    if unsafe { libc::sched_setscheduler(0, policy, param) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The drain thread's raised priority; dropping it restores the previous one.
#[derive(Debug)]
pub struct DrainPriority {
    /// The policy and parameters to restore; None when nothing was changed.
    previous: Option<(i32, libc::sched_param)>,
}

impl DrainPriority {
    /// Whether the thread runs `SCHED_FIFO` now (false: not permitted, it kept its policy).
    pub fn is_realtime(&self) -> bool {
        self.previous.is_some()
    }
}

impl Drop for DrainPriority {
    fn drop(&mut self) {
        if let Some((policy, param)) = self.previous.take() {
            // The thread keeps the real-time policy if this fails, which only matters
            // until it ends.
            let _ = set(policy, &param);
        }
    }
}

/// Make the calling thread the drain thread: `SCHED_FIFO` at [`DRAIN_FIFO_PRIORITY`] with
/// `SCHED_RESET_ON_FORK` (a child process starts as an ordinary one), when permitted. It
/// then preempts ordinary threads the moment a ring passes its watermark. Its work is
/// bounded by the formatter's: it only copies records (a third of what formatting one
/// costs, BENCHMARKS.md §7) into a fixed pool of chunks and sleeps when the pool is empty
/// or the rings are; the kernel's real-time throttling (`sched_rt_runtime_us`) is a second
/// bound. [`DrainPriority`] restores the thread's previous policy when the session ends.
pub fn raise_drain_thread() -> DrainPriority {
    let previous = current().ok().filter(|&(policy, _)| {
        let param = libc::sched_param {
            sched_priority: DRAIN_FIFO_PRIORITY,
        };
        // Already real-time (a caller chose it, e.g. `chrt`): leave it alone.
        policy & !libc::SCHED_RESET_ON_FORK == libc::SCHED_OTHER
            && set(libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &param).is_ok()
    });
    DrainPriority { previous }
}

/// Give the calling thread (the formatter or the writer) nice [`WORKER_NICE`] when that
/// raises it and is permitted; returns whether it did.
pub fn raise_worker_thread() -> bool {
    let which = libc::PRIO_PROCESS as _;
    // getpriority returns -1 both as a value and as an error: clear errno to tell.
    // SAFETY: errno is thread-local; writing it has no other effect.
    unsafe { *libc::__errno_location() = 0 };
    // SAFETY: getpriority reads no memory; `which`/`tid` name the calling thread (Linux
    // gives each thread its own nice value).
    let now = unsafe { libc::getpriority(which, tid()) };
    if now == -1 && io::Error::last_os_error().raw_os_error() != Some(0) {
        return false;
    }
    if now <= WORKER_NICE {
        return false;
    }
    // SAFETY: as above; setpriority only changes the thread's nice value.
    unsafe { libc::setpriority(which, tid(), WORKER_NICE) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether this process may raise priorities: CAP_SYS_NICE (bit 23) in its effective
    /// capabilities.
    fn privileged() -> bool {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let eff = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap();
        eff & (1 << 23) != 0
    }

    #[test]
    fn drain_priority_is_real_time_and_restored() {
        std::thread::spawn(|| {
            let before = current().unwrap();
            let p = raise_drain_thread();
            let during = current().unwrap();
            if p.is_realtime() {
                assert_eq!(during.0 & !libc::SCHED_RESET_ON_FORK, libc::SCHED_FIFO);
                assert_ne!(during.0 & libc::SCHED_RESET_ON_FORK, 0);
                assert_eq!(during.1.sched_priority, DRAIN_FIFO_PRIORITY);
            } else {
                assert!(!privileged(), "CAP_SYS_NICE allows SCHED_FIFO");
                assert_eq!(during.0, before.0);
            }
            drop(p);
            let after = current().unwrap();
            assert_eq!(after.0, before.0);
            assert_eq!(after.1.sched_priority, before.1.sched_priority);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn worker_nice_applies_to_the_calling_thread_only() {
        let which = libc::PRIO_PROCESS as _;
        // SAFETY: getpriority reads no memory.
        let main_before = unsafe { libc::getpriority(which, tid()) };
        let (raised, nice) = std::thread::spawn(move || {
            let raised = raise_worker_thread();
            // SAFETY: as above.
            (raised, unsafe { libc::getpriority(which, tid()) })
        })
        .join()
        .unwrap();
        if privileged() && main_before > WORKER_NICE {
            assert!(raised);
            assert_eq!(nice, WORKER_NICE);
        }
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getpriority(which, tid()) }, main_before);
    }
}
