//! The open-file limit (`RLIMIT_NOFILE`): perf needs one descriptor per event per CPU.
//!
//! 500 events on 64 CPUs are 32,000 descriptors, far above the usual soft limit of 1024.
//! So, as `perf` does, the session raises the soft limit to the hard limit when it starts,
//! and whenever a scan finds more events than the limit allows it also tries to raise the
//! hard limit to what they need ([`needed`]), bounded by `/proc/sys/fs/nr_open` (the
//! kernel's ceiling). Raising the hard limit needs root (CAP_SYS_RESOURCE); without it the
//! attempt fails and the soft limit stays at the hard one. [`Nofile::shortage`] then says
//! what to do about the events that could not be attached.

use std::io;

/// Descriptors kept free besides the events' and rings': stdio, the output file, tracefs
/// files read during a scan, the producer-facing pipes of a caller, and so on.
pub const MARGIN: u64 = 64;

/// Hard limits are raised in steps of this many descriptors, so events registered one at
/// a time do not cost a `setrlimit` each.
pub const STEP: u64 = 1024;

/// Where `nr_open` is read from.
const NR_OPEN: &str = "/proc/sys/fs/nr_open";

/// The kernel's default `nr_open` (1024 × 1024), used when the file is unreadable.
const DEFAULT_NR_OPEN: u64 = 1 << 20;

/// A soft and a hard `RLIMIT_NOFILE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The limit in force (`ulimit -Sn`).
    pub soft: u64,
    /// The ceiling an unprivileged process may raise the soft limit to (`ulimit -Hn`).
    pub hard: u64,
}

/// Descriptors a session with `events` events on `cpus` CPUs needs: one per event and
/// CPU, three per CPU for the rings (the sample ring's owner, the loss marker, the
/// context tracker), the epoll descriptor, and [`MARGIN`].
pub fn needed(events: usize, cpus: usize) -> u64 {
    let (events, cpus) = (events as u64, cpus as u64);
    events
        .saturating_mul(cpus)
        .saturating_add(cpus.saturating_mul(3))
        .saturating_add(1)
        .saturating_add(MARGIN)
}

/// The limits to try, in order, so that `need` descriptors fit: first (when `need` is
/// above the hard limit) both limits raised to `need` rounded up to [`STEP`] and capped
/// at `nr_open`, then (when the soft limit is below the hard one) the soft limit raised
/// to the hard one, the fallback without privileges. Limits are never lowered; an empty
/// list means nothing to do.
pub fn plan(current: Limits, need: u64, nr_open: u64) -> Vec<Limits> {
    let mut out = Vec::new();
    if need > current.hard {
        let hard = need
            .div_ceil(STEP)
            .saturating_mul(STEP)
            .min(nr_open)
            .max(current.hard);
        if hard > current.hard {
            out.push(Limits { soft: hard, hard });
        }
    }
    if current.soft < current.hard {
        out.push(Limits {
            soft: current.hard,
            hard: current.hard,
        });
    }
    out
}

/// The current limits.
pub fn get() -> io::Result<Limits> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `struct rlimit` through the pointer, which points to
    // `rl`, alive and writable for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Limits {
        soft: rl.rlim_cur,
        hard: rl.rlim_max,
    })
}

/// Set both limits (`EPERM` when raising the hard limit without CAP_SYS_RESOURCE, or
/// above `nr_open`).
pub fn set(limits: Limits) -> io::Result<()> {
    let rl = libc::rlimit {
        rlim_cur: limits.soft,
        rlim_max: limits.hard,
    };
    // SAFETY: setrlimit only reads the `struct rlimit` the pointer points to (`rl`).
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rl) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `/proc/sys/fs/nr_open`, the most any process may have open (default when unreadable).
pub fn nr_open() -> u64 {
    std::fs::read_to_string(NR_OPEN)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(DEFAULT_NR_OPEN)
}

/// The process's open-file limit as the session manages it.
#[derive(Debug, Clone)]
pub struct Nofile {
    /// The limits as last read or set.
    pub limits: Limits,
    /// `/proc/sys/fs/nr_open` at the start.
    pub nr_open: u64,
    /// Set once raising the hard limit was refused (no CAP_SYS_RESOURCE): not retried.
    pub hard_refused: bool,
}

/// What [`Nofile::ensure`] changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raised {
    /// The limits before.
    pub from: Limits,
    /// The limits now.
    pub to: Limits,
}

impl Nofile {
    /// Read the current limits and `nr_open`.
    pub fn new() -> io::Result<Nofile> {
        Ok(Nofile {
            limits: get()?,
            nr_open: nr_open(),
            hard_refused: false,
        })
    }

    /// Make room for `need` descriptors as far as allowed (see [`plan`]); returns what
    /// changed, if anything.
    pub fn ensure(&mut self, need: u64) -> Option<Raised> {
        // Someone (prlimit) may have changed them from outside.
        if let Ok(now) = get() {
            self.limits = now;
        }
        let from = self.limits;
        for want in plan(from, need, self.nr_open) {
            let raises_hard = want.hard > from.hard;
            if raises_hard && self.hard_refused {
                continue;
            }
            match set(want) {
                Ok(()) => {
                    self.limits = want;
                    return Some(Raised { from, to: want });
                }
                Err(_) if raises_hard => self.hard_refused = true,
                Err(_) => {}
            }
        }
        None
    }

    /// The cause written when events could not be attached for lack of descriptors
    /// (`EMFILE`): the limit and how to raise it.
    pub fn shortage(&self) -> String {
        let limit = self.limits.soft;
        let fix = if self.limits.hard >= self.nr_open {
            format!(
                "the kernel's ceiling {NR_OPEN} is {}; raise it",
                self.nr_open
            )
        } else if is_root() {
            "raise it with ulimit -n, or give uevrec CAP_SYS_RESOURCE".to_string()
        } else {
            "raise it with ulimit -n or run as root".to_string()
        };
        format!("too many open files (limit {limit}; {fix})")
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn l(soft: u64, hard: u64) -> Limits {
        Limits { soft, hard }
    }

    #[test]
    fn needed_counts_events_rings_and_margin() {
        assert_eq!(needed(0, 2), 2 * 3 + 1 + MARGIN);
        assert_eq!(needed(2000, 2), 4000 + 6 + 1 + MARGIN);
        assert_eq!(needed(500, 64), 32_000 + 192 + 1 + MARGIN);
        assert_eq!(needed(usize::MAX, usize::MAX), u64::MAX);
    }

    #[test]
    fn soft_goes_to_hard_when_enough() {
        assert_eq!(plan(l(1024, 4096), 100, 1 << 20), vec![l(4096, 4096)]);
        assert_eq!(plan(l(4096, 4096), 4096, 1 << 20), vec![]);
    }

    #[test]
    fn hard_goes_to_need_in_steps_then_falls_back() {
        // 2,000 events on 2 CPUs: 4,071 fit under 4,096.
        assert_eq!(
            plan(l(1024, 4096), needed(2000, 2), 1 << 20),
            vec![l(4096, 4096)]
        );
        // 500 events on 64 CPUs.
        assert_eq!(
            plan(l(1024, 4096), needed(500, 64), 1 << 20),
            vec![l(32_768, 32_768), l(4096, 4096)]
        );
        assert_eq!(plan(l(4096, 4096), 4097, 1 << 20), vec![l(5120, 5120)]);
    }

    #[test]
    fn nr_open_caps_and_nothing_is_lowered() {
        assert_eq!(
            plan(l(1024, 4096), 2_000_000, 1 << 20),
            vec![l(1 << 20, 1 << 20), l(4096, 4096)]
        );
        // Already at the ceiling: only the soft limit can move.
        assert_eq!(
            plan(l(100, 1 << 20), 2_000_000, 1 << 20),
            vec![l(1 << 20, 1 << 20)]
        );
        // A hard limit above nr_open (set before nr_open was lowered) stays.
        assert_eq!(plan(l(5000, 5000), 9000, 4096), vec![]);
    }

    #[test]
    fn shortage_names_the_limit_and_the_fix() {
        let mut n = Nofile {
            limits: l(100, 100),
            nr_open: 1 << 20,
            hard_refused: true,
        };
        let msg = n.shortage();
        assert!(msg.starts_with("too many open files (limit 100; raise it with ulimit -n"));
        n.limits = l(1 << 20, 1 << 20);
        assert_eq!(
            n.shortage(),
            "too many open files (limit 1048576; the kernel's ceiling /proc/sys/fs/nr_open \
             is 1048576; raise it)"
        );
    }

    #[test]
    fn ensure_never_lowers() {
        let before = get().unwrap();
        let mut n = Nofile::new().unwrap();
        let _ = n.ensure(needed(0, 1));
        let after = get().unwrap();
        assert!(after.soft >= before.soft && after.hard >= before.hard);
        assert_eq!(
            after.soft, after.hard,
            "the soft limit goes up to the hard one"
        );
    }
}
