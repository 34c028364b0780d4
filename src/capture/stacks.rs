//! What call stacks a session asks the kernel for (`-g`, `--call-graph`, `--max-stack`,
//! `--user-callchains`): the request the CLI builds and the perf backend turns into
//! `PERF_SAMPLE_CALLCHAIN` (docs/stacks.md).

/// `kernel.perf_event_max_stack`: the most frames the kernel gives a callchain, and the
/// most `--max-stack` may ask for (a larger `sample_max_stack` fails with EOVERFLOW).
pub const MAX_STACK_SYSCTL: &str = "/proc/sys/kernel/perf_event_max_stack";

/// The call stacks to record with every sample (frame pointers: the kernel walks them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackRequest {
    /// Frames per stack at most (kernel and user parts together, markers included);
    /// 0: the sysctl's value ([`MAX_STACK_SYSCTL`]).
    pub max_stack: u16,
    /// Kernel frames too (off: `exclude_callchain_kernel`, user frames only).
    pub kernel: bool,
}

/// The sysctl's value, if readable.
pub fn max_stack_sysctl() -> Option<u16> {
    std::fs::read_to_string(MAX_STACK_SYSCTL)
        .ok()?
        .trim()
        .parse()
        .ok()
}
