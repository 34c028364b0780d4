//! The errors of one backend step, defined here (not in crate::capture::perf and crate::capture::ftrace,
//! which re-export them) so the backend contract imports nothing of its implementations.

use std::io;

/// Which step of opening failed, on which CPU.
#[derive(Debug, thiserror::Error)]
#[error("{step} on CPU {cpu}: {source}")]
pub struct PerfError {
    /// `perf_event_open`, `mmap`, `SET_OUTPUT`, `SET_FILTER`, `ID`, `ENABLE`, `epoll`.
    pub step: &'static str,
    /// The CPU (0 for steps that concern no CPU).
    pub cpu: u32,
    /// The OS error.
    #[source]
    pub source: io::Error,
}

/// One failed step on a tracefs file.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {source}")]
pub struct FtraceError {
    /// What was done, with the path (`write 1 to …/enable`).
    pub step: String,
    /// The OS error.
    #[source]
    pub source: io::Error,
}
