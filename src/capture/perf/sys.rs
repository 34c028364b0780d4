//! Thin safe wrappers over `perf_event_open(2)` and the perf ioctls uevrec uses.
//!
//! Every event uevrec opens shares one attr shape (so one [`SampleFormat`] parses all of
//! a ring): `sample_type` = IDENTIFIER|TID|TIME|CPU|RAW (and CGROUP when context is
//! on and the kernel has it, CALLCHAIN with stacks, REGS_USER|STACK_USER with dwarf
//! stacks: [`Tracking`]), `sample_id_all`, `use_clockid`
//! with `CLOCK_MONOTONIC` (the only clocks tracepoints accept besides MONOTONIC_RAW),
//! opened disabled, CPU-wide (`pid = -1`), close-on-exec.
//!
//! [`SampleFormat`]: uevrec_parsers::perf_sample::SampleFormat

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use perf_event_open_sys as sys;
use sys::bindings::perf_event_attr;
use uevrec_parsers::perf_sample::sample_type;

use crate::capture::stacks::{StackRequest, USER_REGS_MASK};

/// An open perf event.
#[derive(Debug)]
pub struct PerfFd(OwnedFd);

impl From<PerfFd> for OwnedFd {
    fn from(fd: PerfFd) -> OwnedFd {
        fd.0
    }
}

impl AsRawFd for PerfFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

impl AsFd for PerfFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// What the ring owners report besides the samples redirected into them (context:
/// `docs/json-lines.md`), and the `sample_type` every event of the rings uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tracking {
    /// `PERF_RECORD_COMM` (with `comm_exec`), `PERF_RECORD_FORK` and `PERF_RECORD_EXIT`.
    pub tasks: bool,
    /// `PERF_RECORD_CGROUP` and `PERF_SAMPLE_CGROUP` (Linux 5.7).
    pub cgroups: bool,
    /// `PERF_SAMPLE_CALLCHAIN` on every event, and the trackers report tasks and
    /// executable mappings (`PERF_RECORD_MMAP2`), which name the frames.
    pub stacks: Option<StackRequest>,
}

impl Tracking {
    /// Nothing tracked (`--no-context`).
    pub const NONE: Tracking = Tracking {
        tasks: false,
        cgroups: false,
        stacks: None,
    };

    /// Whether the rings need trackers (side-band records of every task).
    pub fn side_band(self) -> bool {
        self.tasks || self.cgroups || self.stacks.is_some()
    }

    /// The `sample_type` of every event of rings tracking this.
    pub fn sample_type(self) -> u64 {
        let mut st = sample_type::UEVREC;
        if self.cgroups {
            st |= sample_type::CGROUP;
        }
        if let Some(stacks) = self.stacks {
            st |= sample_type::CALLCHAIN;
            if stacks.dwarf.is_some() {
                st |= sample_type::REGS_USER | sample_type::STACK_USER;
            }
        }
        st
    }
}

/// The attr every uevrec event starts from.
fn base_attr(tracking: Tracking) -> perf_event_attr {
    let mut attr = perf_event_attr {
        size: std::mem::size_of::<perf_event_attr>() as u32,
        sample_type: tracking.sample_type(),
        clockid: libc::CLOCK_MONOTONIC,
        ..Default::default()
    };
    attr.set_sample_id_all(1);
    attr.set_use_clockid(1);
    attr.set_disabled(1);
    // Wakeups by bytes (the ring owner's watermark), never per event.
    attr.set_watermark(1);
    if let Some(stacks) = tracking.stacks {
        attr.sample_max_stack = stacks.max_stack;
        attr.set_exclude_callchain_kernel(u64::from(!stacks.kernel));
        if let Some(size) = stacks.dwarf {
            // The user part is unwound from these; the kernel's chain keeps its kernel part.
            attr.sample_regs_user = USER_REGS_MASK;
            attr.sample_stack_user = size;
            attr.set_exclude_callchain_user(1);
        }
    }
    attr
}

fn open(attr: &mut perf_event_attr, cpu: u32) -> io::Result<PerfFd> {
    open_for(attr, -1, cpu, 0)
}

/// `perf_event_open(attr, pid, cpu, -1, FD_CLOEXEC | flags)`.
fn open_for(attr: &mut perf_event_attr, pid: i32, cpu: u32, flags: u32) -> io::Result<PerfFd> {
    let cpu = i32::try_from(cpu).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let flags = sys::bindings::PERF_FLAG_FD_CLOEXEC | flags;
    // SAFETY: `attr` is a fully initialised perf_event_attr whose `size` matches the
    // struct; the call only reads it (and may write back `size` on E2BIG); `pid` is -1
    // or, with PERF_FLAG_PID_CGROUP, an open descriptor the kernel only reads.
    let fd = unsafe { sys::perf_event_open(attr, pid, cpu, -1, flags as _) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this new descriptor; nothing else owns it.
    Ok(PerfFd(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Open tracepoint `id` (the format file's `ID:`) on `cpu`, one sample per hit, with
/// the `sample_type` of `tracking`.
pub fn open_tracepoint(id: u32, cpu: u32, tracking: Tracking) -> io::Result<PerfFd> {
    let mut attr = base_attr(tracking);
    attr.type_ = sys::bindings::PERF_TYPE_TRACEPOINT;
    attr.config = u64::from(id);
    attr.__bindgen_anon_1.sample_period = 1;
    open(&mut attr, cpu)
}

/// Open a software dummy event that owns a ring on `cpu`: it samples nothing itself and
/// wakes the reader once `wakeup_bytes` are in the ring. As the owner of the CPU's
/// sample ring (`side_band` false) every tracepoint fd of that CPU is redirected to it;
/// as the CPU's tracker (`side_band` true) it reports what `tracking` asks for on that
/// CPU once enabled (side-band records of every task, into a ring of their own so that
/// their losses never count as lost samples). Either way its `sample_type` is
/// `tracking`'s.
pub fn open_ring_owner(
    cpu: u32,
    wakeup_bytes: u32,
    tracking: Tracking,
    side_band: bool,
) -> io::Result<PerfFd> {
    let mut attr = base_attr(tracking);
    attr.type_ = sys::bindings::PERF_TYPE_SOFTWARE;
    attr.config = u64::from(sys::bindings::PERF_COUNT_SW_DUMMY);
    attr.__bindgen_anon_2.wakeup_watermark = wakeup_bytes.max(1);
    if !side_band {
        return open(&mut attr, cpu);
    }
    if tracking.stacks.is_some() {
        // Executable mappings only (no mmap_data), with build ids where the kernel has them.
        attr.set_mmap(1);
        attr.set_mmap2(1);
        attr.set_build_id(1);
    }
    if tracking.tasks || tracking.stacks.is_some() {
        attr.set_comm(1);
        attr.set_comm_exec(1);
        attr.set_task(1);
    }
    if tracking.cgroups {
        attr.set_cgroup(1);
    }
    open(&mut attr, cpu)
}

/// Whether the perf_event cgroup controller is active in the cgroup v2 cgroup at `dir`
/// (a cgroup below the root): a dummy event bound to it opens (`PERF_FLAG_PID_CGROUP`),
/// or the kernel says the cgroup has no perf_event state (ENOENT). Where it is not
/// active, `PERF_SAMPLE_CGROUP` names the nearest ancestor where it is: the root.
pub fn perf_event_active_in(dir: &std::path::Path) -> io::Result<bool> {
    let cgroup = std::fs::File::open(dir)?;
    let mut attr = base_attr(Tracking::NONE);
    attr.type_ = sys::bindings::PERF_TYPE_SOFTWARE;
    attr.config = u64::from(sys::bindings::PERF_COUNT_SW_DUMMY);
    match open_for(
        &mut attr,
        cgroup.as_raw_fd(),
        0,
        sys::bindings::PERF_FLAG_PID_CGROUP,
    ) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Open a `cpu-clock` sampling event on `cpu` (one sample per `period_ns`), used as a
/// marker: any successful write into a ring makes the kernel first emit the
/// `PERF_RECORD_LOST` it still owes that ring, so a marker sample flushes pending losses.
pub fn open_marker(cpu: u32, period_ns: u64, tracking: Tracking) -> io::Result<PerfFd> {
    let mut attr = base_attr(tracking);
    attr.type_ = sys::bindings::PERF_TYPE_SOFTWARE;
    attr.config = u64::from(sys::bindings::PERF_COUNT_SW_CPU_CLOCK);
    attr.__bindgen_anon_1.sample_period = period_ns;
    open(&mut attr, cpu)
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

impl PerfFd {
    /// `PERF_EVENT_IOC_ENABLE`.
    pub fn enable(&self) -> io::Result<()> {
        // SAFETY: ENABLE takes an integer argument; the fd is a live perf event.
        check(unsafe { sys::ioctls::ENABLE(self.as_raw_fd(), 0) })
    }

    /// `PERF_EVENT_IOC_DISABLE`.
    pub fn disable(&self) -> io::Result<()> {
        // SAFETY: DISABLE takes an integer argument; the fd is a live perf event.
        check(unsafe { sys::ioctls::DISABLE(self.as_raw_fd(), 0) })
    }

    /// `PERF_EVENT_IOC_ID`: the id samples of this event carry.
    pub fn id(&self) -> io::Result<u64> {
        let mut id = 0u64;
        // SAFETY: ID writes one u64 through the pointer, which points to `id`.
        check(unsafe { sys::ioctls::ID(self.as_raw_fd(), &mut id) })?;
        Ok(id)
    }

    /// `PERF_EVENT_IOC_SET_OUTPUT`: write this event's records into `target`'s ring.
    pub fn set_output(&self, target: &PerfFd) -> io::Result<()> {
        // SAFETY: SET_OUTPUT takes another perf fd as its integer argument.
        check(unsafe { sys::ioctls::SET_OUTPUT(self.as_raw_fd(), target.as_raw_fd()) })
    }

    /// `PERF_EVENT_IOC_SET_FILTER` with an ftrace filter expression.
    pub fn set_filter(&self, expr: &str) -> io::Result<()> {
        let c = CString::new(expr).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: SET_FILTER reads a NUL-terminated string; `c` lives across the call
        // and the kernel copies it (strndup_user), never writing through the pointer.
        check(unsafe { sys::ioctls::SET_FILTER(self.as_raw_fd(), c.as_ptr() as *mut _) })
    }
}
