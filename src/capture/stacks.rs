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
    /// `--call-graph dwarf,SIZE`: the user registers and SIZE bytes of user stack with
    /// every sample, unwound in user space (the kernel's callchain keeps its kernel part
    /// only); `None`: the kernel walks the frame pointers.
    pub dwarf: Option<u32>,
}

impl StackRequest {
    /// How the stacks are taken, in perf's spelling (`fp`, `dwarf,SIZE`).
    pub fn call_graph(&self) -> String {
        match self.dwarf {
            Some(size) => format!("dwarf,{size}"),
            None => "fp".into(),
        }
    }
}

/// The user registers `--call-graph dwarf` asks for (`sample_regs_user`): those the
/// unwinder starts from (x86_64: bp, sp, ip).
#[cfg(target_arch = "x86_64")]
pub const USER_REGS_MASK: u64 = {
    use uevrec_parsers::user_stack::x86_64::{BP, IP, SP};
    1 << BP | 1 << SP | 1 << IP
};

/// Whether `--call-graph dwarf` can unwind on this machine (the unwinder is built for
/// x86_64 only so far: docs/stacks.md).
pub const DWARF_SUPPORTED: bool = cfg!(target_arch = "x86_64");

/// The user registers `--call-graph dwarf` asks for: none where it is not supported.
#[cfg(not(target_arch = "x86_64"))]
pub const USER_REGS_MASK: u64 = 0;

/// The sysctl's value, if readable.
pub fn max_stack_sysctl() -> Option<u16> {
    std::fs::read_to_string(MAX_STACK_SYSCTL)
        .ok()?
        .trim()
        .parse()
        .ok()
}
