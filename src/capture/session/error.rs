//! Why a session could not start ([`SessionError`]), each with the fix in its message.

use std::fs;
use std::io;

use crate::capture::backend::BackendError;
use crate::capture::ftrace::SetupError;
use crate::capture::perf::PerfError;
use crate::capture::tracefs::TracefsError;

/// Why a session could not start; the message says the fix.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// tracefs is missing or unreadable.
    #[error(transparent)]
    Tracefs(#[from] TracefsError),
    /// The kernel refused perf_event_open or its ring for lack of privileges.
    #[error(
        "{source}: recording tracepoints needs root or CAP_PERFMON (CPU-wide events and raw \
         samples; /proc/sys/kernel/perf_event_paranoid is {paranoid}, and without CAP_PERFMON \
         it must be -1); run uevrec as root or grant it CAP_PERFMON"
    )]
    Permission {
        /// The failing step.
        source: PerfError,
        /// The value of /proc/sys/kernel/perf_event_paranoid (or why it is unknown).
        paranoid: String,
    },
    /// The ring could not be mapped for lack of lockable memory.
    #[error(
        "{source}: the perf ring ({pages} pages per CPU) exceeds the locked-memory limit \
         (/proc/sys/kernel/perf_event_mlock_kb is {mlock_kb}); use a smaller buffer, raise \
         that limit, or run as root / with CAP_IPC_LOCK"
    )]
    RingMemory {
        /// The failing step.
        source: PerfError,
        /// Pages asked for.
        pages: usize,
        /// The limit seen.
        mlock_kb: String,
    },
    /// Another perf failure while setting up.
    #[error("{0}")]
    Perf(PerfError),
    /// The ftrace backend's tracefs instance could not be set up.
    #[error(transparent)]
    Ftrace(#[from] SetupError),
    /// Call stacks asked for where they cannot be recorded yet.
    #[error("{0}")]
    Stacks(&'static str),
    /// The online CPU list could not be read.
    #[error("cannot read the online CPUs: {0}")]
    Cpus(io::Error),
    /// The formatter thread could not be started.
    #[error("cannot start the formatter thread: {0}")]
    Thread(io::Error),
    /// The drain threads (`--drain-threads`) could not be started.
    #[error(
        "cannot start {0} drain threads (`--drain-threads {0}`): {1}; use fewer \
         (`--drain-threads 1`: the session thread alone)"
    )]
    DrainThreads(usize, io::Error),
    /// The filter expression was refused by the kernel for every matching event.
    #[error("the kernel refused the filter `{expr}` on {event}: {complaint}")]
    Filter {
        /// The expression the kernel refused: the user's alone when it refuses that.
        expr: String,
        /// The first event it was tried on.
        event: String,
        /// The kernel's parse error.
        complaint: String,
    },
}

fn read_proc(path: &str) -> String {
    fs::read_to_string(path).map_or_else(|e| format!("unreadable ({e})"), |s| s.trim().to_string())
}

/// Turn a perf setup failure into the error that names the fix.
pub(crate) fn perf_error(e: PerfError, pages: usize) -> SessionError {
    match (e.source.raw_os_error(), e.step) {
        (Some(libc::EPERM), "mmap") => SessionError::RingMemory {
            source: e,
            pages,
            mlock_kb: read_proc("/proc/sys/kernel/perf_event_mlock_kb"),
        },
        (Some(libc::EACCES | libc::EPERM), _) => SessionError::Permission {
            source: e,
            paranoid: read_proc("/proc/sys/kernel/perf_event_paranoid"),
        },
        _ => SessionError::Perf(e),
    }
}

/// Turn a backend's failure that will not go away (see
/// [`crate::capture::backend::AttachError::Denied`]) into the error that names the fix.
pub(super) fn backend_error(e: BackendError, pages: usize) -> SessionError {
    match e {
        BackendError::Perf(e) => perf_error(e, pages),
        BackendError::Ftrace(e) => SessionError::Ftrace(SetupError::from_step(e)),
    }
}
