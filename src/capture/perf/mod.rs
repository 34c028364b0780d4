//! Attaching to tracepoints with perf: one ring per CPU, any number of events per ring.
//!
//! Each online CPU gets a software *dummy* event that owns the CPU's mmap ring
//! ([`sys::open_ring_owner`], [`ring::Ring`]); every tracepoint fd of that CPU is
//! redirected into it with `PERF_EVENT_IOC_SET_OUTPUT`. Because the ring belongs to no
//! tracepoint, events can be attached and detached at any time without touching the ring.
//! Samples name their event by `PERF_SAMPLE_IDENTIFIER` ([`EventFds::ids`]);
//! [`Rings::wait`] sleeps in `epoll_wait` on the owner fds. CPUs going on- or offline
//! after the start are not followed. Closing a tracepoint's descriptors waits for RCU
//! grace periods in the kernel; [`reaper`] takes that off the session's path.
//!
//! Layers, lowest first: `sys`, `ring`, `reaper`, `backend`.

pub mod backend;
pub mod reaper;
#[deny(clippy::arithmetic_side_effects)]
pub mod ring;
pub mod sys;

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use crate::system::epoll::Epoll;

pub use backend::PerfBackend;
pub use ring::{Ring, RingPages, page_size};
pub use sys::{PerfFd, Tracking};

/// Parse a kernel CPU list (`0-3,5,7-8`); None when malformed.
pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?),
            None => {
                let a = part.parse::<u32>().ok()?;
                (a, a)
            }
        };
        if b < a || b - a > 65536 {
            return None;
        }
        out.extend(a..=b);
    }
    Some(out)
}

/// The online CPUs from `/sys/devices/system/cpu/online`.
pub fn online_cpus() -> io::Result<Vec<u32>> {
    let path = "/sys/devices/system/cpu/online";
    let text = std::fs::read_to_string(path)?;
    parse_cpu_list(&text)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("cannot parse {path}: {text:?}"),
            )
        })
}

/// One CPU's ring and the dummy event that owns it.
#[derive(Debug)]
pub struct CpuRing {
    /// The CPU number.
    pub cpu: u32,
    owner: PerfFd,
    /// The mmap'ed ring.
    pub ring: Ring,
    /// A disabled `cpu-clock` event redirected into this ring and its sample id
    /// (see [`Rings::set_markers`]); None when it could not be opened.
    marker: Option<(PerfFd, u64)>,
    /// The CPU's tracker (COMM/FORK/EXIT/CGROUP records, [`Tracking`]) and its own
    /// ring; None without tracking.
    pub tracker: Option<(PerfFd, Ring)>,
}

impl CpuRing {
    /// The sample id of this ring's marker event, if it has one.
    pub fn marker_id(&self) -> Option<u64> {
        self.marker.as_ref().map(|(_, id)| *id)
    }
}

/// (Defined beside the backend contract, crate::capture::backend, so it imports nothing of perf.)
pub use crate::capture::backend::PerfError;

fn step(step: &'static str, cpu: u32) -> impl FnOnce(io::Error) -> PerfError {
    move |source| PerfError { step, cpu, source }
}

/// Data pages of each CPU's tracker ring (128 KiB with 4 KiB pages: ~2,500 side-band
/// records, a fork+exec+exit takes about three, between two drains).
pub const TRACKER_PAGES: usize = 32;

/// The per-CPU rings and the epoll set watching them.
#[derive(Debug)]
pub struct Rings {
    cpus: Vec<CpuRing>,
    epoll: Epoll,
    tracking: Tracking,
}

impl Rings {
    /// Open a ring of `data_pages` (power of two) pages on each CPU in `cpus`, whose
    /// owners report `tracking` once [`Rings::start_tracking`] enables them. A kernel
    /// that refuses cgroup tracking (before 5.7, or without `CONFIG_CGROUP_PERF`) gets
    /// rings without it: [`Rings::tracking`] says what was granted.
    pub fn open(cpus: &[u32], data_pages: usize, tracking: Tracking) -> Result<Rings, PerfError> {
        match Self::open_as(cpus, data_pages, tracking) {
            Err(e) if tracking.cgroups && e.source.raw_os_error() == Some(libc::EINVAL) => {
                let without = Tracking {
                    cgroups: false,
                    ..tracking
                };
                Self::open_as(cpus, data_pages, without)
            }
            r => r,
        }
    }

    /// What the ring owners track (and the `sample_type` of every event in the rings).
    pub fn tracking(&self) -> Tracking {
        self.tracking
    }

    /// Enable the trackers, so they report what they track (a no-op without tracking).
    pub fn start_tracking(&self) -> Result<(), PerfError> {
        for c in &self.cpus {
            if let Some((fd, _)) = &c.tracker {
                fd.enable().map_err(step("PERF_EVENT_IOC_ENABLE", c.cpu))?;
            }
        }
        Ok(())
    }

    fn open_as(cpus: &[u32], data_pages: usize, tracking: Tracking) -> Result<Rings, PerfError> {
        let epoll = Epoll::new().map_err(step("epoll_create1", 0))?;
        let data_bytes = data_pages.saturating_mul(ring::page_size());
        // Wake the reader when a quarter of the ring is used (the loop also wakes on its
        // timeout, so a quiet stream is flushed promptly anyway).
        let wakeup = u32::try_from(data_bytes / 4).unwrap_or(u32::MAX);
        let mut out = Vec::with_capacity(cpus.len());
        for (i, &cpu) in cpus.iter().enumerate() {
            let owner = sys::open_ring_owner(cpu, wakeup, tracking, false)
                .map_err(step("perf_event_open", cpu))?;
            let ring = Ring::map(&owner, data_pages).map_err(step("mmap", cpu))?;
            epoll
                .add(owner.as_fd(), i as u64)
                .map_err(step("epoll_ctl", cpu))?;
            let tracker = if !tracking.side_band() {
                None
            } else {
                let bytes = TRACKER_PAGES * ring::page_size();
                let fd = sys::open_ring_owner(cpu, (bytes / 4) as u32, tracking, true)
                    .map_err(step("perf_event_open", cpu))?;
                let ring = Ring::map(&fd, TRACKER_PAGES).map_err(step("mmap", cpu))?;
                epoll
                    .add(fd.as_fd(), i as u64)
                    .map_err(step("epoll_ctl", cpu))?;
                Some((fd, ring))
            };
            let marker = sys::open_marker(cpu, 1_000_000, tracking)
                .ok()
                .and_then(|m| {
                    m.set_output(&owner).ok()?;
                    let id = m.id().ok()?;
                    Some((m, id))
                });
            out.push(CpuRing {
                cpu,
                owner,
                ring,
                marker,
                tracker,
            });
        }
        Ok(Rings {
            cpus: out,
            epoll,
            tracking,
        })
    }

    /// Enable or disable the marker events (one `cpu-clock` sample per ms and CPU). The
    /// kernel reports a ring's losses only at the next successful write into that ring;
    /// a marker sample is such a write, so enabling the markers briefly at the end of a
    /// session brings out every loss still owed. Marker samples carry the ids for which
    /// [`CpuRing::marker_id`] is and are not records.
    pub fn set_markers(&self, on: bool) {
        for (fd, _) in self.cpus.iter().filter_map(|c| c.marker.as_ref()) {
            let _ = if on { fd.enable() } else { fd.disable() };
        }
    }

    /// The CPUs' rings.
    pub fn cpus_mut(&mut self) -> &mut [CpuRing] {
        &mut self.cpus
    }

    /// The number of rings (one per CPU).
    pub fn len(&self) -> usize {
        self.cpus.len()
    }

    /// Whether there are no rings.
    pub fn is_empty(&self) -> bool {
        self.cpus.is_empty()
    }

    /// The CPUs whose ring has a marker event (see [`Rings::set_markers`]).
    pub fn marker_cpus(&self) -> Vec<u32> {
        self.cpus
            .iter()
            .filter(|c| c.marker.is_some())
            .map(|c| c.cpu)
            .collect()
    }

    /// Sleep until some ring passes its watermark (or has hung up) or `timeout` ends;
    /// returns how many rings reported. Interrupted waits return 0.
    pub fn wait(&self, timeout: Duration) -> io::Result<usize> {
        self.epoll.wait(timeout)
    }
}

/// EOVERFLOW from perf_event_open: the callchain asked for more frames than
/// `kernel.perf_event_max_stack` allows; said in words with the fix.
fn explain_stack_refusal(e: io::Error) -> io::Error {
    if e.raw_os_error() != Some(libc::EOVERFLOW) {
        return e;
    }
    let limit = crate::capture::stacks::max_stack_sysctl()
        .map_or_else(|| "unreadable".to_string(), |n| n.to_string());
    io::Error::other(format!(
        "{e}: the call stacks' --max-stack is above kernel.perf_event_max_stack ({limit}, \
         {}); ask for fewer frames or raise the sysctl",
        crate::capture::stacks::MAX_STACK_SYSCTL
    ))
}

/// One tracepoint open on every CPU, redirected into the CPUs' rings.
#[derive(Debug)]
pub struct EventFds {
    fds: Vec<PerfFd>,
    ids: Vec<u64>,
}

impl EventFds {
    /// Open tracepoint `tp_id` on every CPU of `rings`, redirect each fd into its CPU's
    /// ring, apply `filter` (if any) and read the sample ids. The event stays disabled
    /// until [`EventFds::enable`].
    pub fn open(tp_id: u32, rings: &Rings, filter: Option<&str>) -> Result<EventFds, PerfError> {
        let mut fds = Vec::with_capacity(rings.cpus.len());
        let mut ids = Vec::with_capacity(rings.cpus.len());
        for c in &rings.cpus {
            let fd = sys::open_tracepoint(tp_id, c.cpu, rings.tracking)
                .map_err(explain_stack_refusal)
                .map_err(step("perf_event_open", c.cpu))?;
            fd.set_output(&c.owner)
                .map_err(step("PERF_EVENT_IOC_SET_OUTPUT", c.cpu))?;
            if let Some(f) = filter {
                fd.set_filter(f)
                    .map_err(step("PERF_EVENT_IOC_SET_FILTER", c.cpu))?;
            }
            ids.push(fd.id().map_err(step("PERF_EVENT_IOC_ID", c.cpu))?);
            fds.push(fd);
        }
        Ok(EventFds { fds, ids })
    }

    /// The sample identifiers of this event's fds (one per CPU).
    pub fn ids(&self) -> &[u64] {
        &self.ids
    }

    /// Start recording on every CPU.
    pub fn enable(&self) -> Result<(), PerfError> {
        for fd in &self.fds {
            fd.enable().map_err(step("PERF_EVENT_IOC_ENABLE", 0))?;
        }
        Ok(())
    }

    /// The descriptors, to close (see [`reaper::close_in_background`]).
    pub fn into_fds(self) -> impl Iterator<Item = OwnedFd> {
        self.fds.into_iter().map(OwnedFd::from)
    }

    /// Stop recording on every CPU (records already in the rings stay there).
    pub fn disable(&self) {
        for fd in &self.fds {
            // A failure leaves the fd to be closed, which stops it as well.
            let _ = fd.disable();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,5\n"), Some(vec![0, 1, 2, 3, 5]));
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
        assert_eq!(parse_cpu_list(""), Some(vec![]));
    }
}
