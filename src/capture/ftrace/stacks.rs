//! Call stacks on the ftrace backend (`-g`): the instance's `options/stacktrace` (kernel
//! frames) and `options/userstacktrace` (user frames: the kernel walks at most 8 frame
//! pointers), whose `kernel_stack` and `user_stack` records the readers tie to the record
//! they follow (`uevrec_parsers::ftrace_page::stacks`), and each process's mappings read
//! from `/proc/PID/maps` at its first stack ([`Sight`]): tracefs has no
//! `PERF_RECORD_MMAP2`. docs/stacks.md, "On the ftrace backend".

use std::collections::HashMap;
use std::path::Path;

use uevrec_parsers::ContextUpdate;
use uevrec_parsers::ftrace_page::stacks::{StackEvents, StackFields, StackKind};
use uevrec_parsers::parse_format;

use super::instance::{FtraceError, Instance, SetupError, read_file};
use crate::capture::stacks::StackRequest;
use crate::system::proc_maps::{ProcMapping, read_proc_maps};

/// The user frames the kernel writes at most (`FTRACE_STACK_ENTRIES`, `user_stack`'s
/// `caller[8]`).
pub const USER_FRAMES: usize = 8;

/// Processes whose first sight is remembered at most (past it the memory starts again:
/// a process is then read again at its next stack, which costs only the read).
const MAX_SEEN: usize = 1 << 16;

/// The stack records `request` asks of the instance at tracefs `root`, as this kernel
/// lays them out (`events/ftrace/{kernel_stack,user_stack}/format`).
pub fn stack_events(root: &Path, request: &StackRequest) -> Result<StackEvents, SetupError> {
    let read = |kind: StackKind, name: &str| -> Result<StackFields, SetupError> {
        let path = root.join(format!("events/ftrace/{name}/format"));
        let text = read_file(&path).map_err(SetupError::from_step)?;
        parse_format(&text)
            .ok()
            .and_then(|f| StackFields::from_format(&f, kind))
            .ok_or_else(|| {
                SetupError::Layout(format!(
                    "{}: the ftrace {name} record is laid out in a way uevrec does not read; \
                     record call stacks with --backend perf",
                    path.display()
                ))
            })
    };
    Ok(StackEvents {
        kernel: if request.kernel {
            Some(read(StackKind::Kernel, "kernel_stack")?)
        } else {
            None
        },
        user: Some(read(StackKind::User, "user_stack")?),
    })
}

/// Turn the stack options of `instance` on or off as `events` says (uevrec's own event
/// instance only: never the tracking instance, never tracefs's top level).
pub fn enable(instance: &Instance, events: &StackEvents) -> Result<(), SetupError> {
    let set = |option: &str, on: bool| {
        instance
            .write(&format!("options/{option}"), if on { "1" } else { "0" })
            .map_err(|e: FtraceError| SetupError::from_step(e))
    };
    set("stacktrace", events.kernel.is_some())?;
    set("userstacktrace", events.user.is_some())
}

/// What a process mapped, read at its first stack: staged as context ahead of its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sighted {
    /// The program run it belongs to began at this time (the rename of its exec, seen by
    /// the tracking instance); None: before the recording.
    pub since: Option<u64>,
    /// Of a run begun while recording: the name it took (an exec starts the run).
    pub exec_comm: Option<Vec<u8>>,
    /// Its executable mappings (empty when the process was gone: its frames then say
    /// `no_mapping`, never the names of the program it was forked from).
    pub mappings: Vec<ProcMapping>,
}

impl Sighted {
    /// The context updates that tell the formatter's maps (an exec, then one mapping
    /// each), for `pid`, in order.
    pub fn updates(&self, pid: u32) -> impl Iterator<Item = ContextUpdate<'_>> {
        let exec = self
            .exec_comm
            .as_deref()
            .map(|comm| ContextUpdate::Exec { pid, comm });
        exec.into_iter()
            .chain(self.mappings.iter().map(move |m| ContextUpdate::Mmap {
                pid,
                addr: m.start,
                len: m.end.saturating_sub(m.start),
                pgoff: m.pgoff,
                build_id: &[],
                path: m.path.as_bytes(),
            }))
    }
}

/// What is known of one process id.
#[derive(Debug, Clone, Default)]
struct Seen {
    /// Its last rename (time, name): an exec, or `prctl(PR_SET_NAME)`.
    renamed: Option<(Option<u64>, Vec<u8>)>,
    /// Its mappings were read since.
    read: bool,
}

/// Which processes had their mappings read, and when they last started a program.
#[derive(Debug, Default)]
pub struct Sight {
    seen: HashMap<u32, Seen>,
}

impl Sight {
    /// Take one update of the tracking instance: a rename (an exec) makes the process be
    /// read again at its next stack, from that time on; a new task starts afresh.
    pub fn track(&mut self, time: Option<u64>, update: &ContextUpdate<'_>) {
        match *update {
            ContextUpdate::Comm { tid, comm } => {
                let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
                let s = self.entry(tid);
                s.renamed = Some((time, comm[..end].to_vec()));
                s.read = false;
            }
            ContextUpdate::Fork { tid, .. } => *self.entry(tid) = Seen::default(),
            _ => {}
        }
    }

    fn entry(&mut self, pid: u32) -> &mut Seen {
        if self.seen.len() >= MAX_SEEN && !self.seen.contains_key(&pid) {
            self.seen.clear();
        }
        self.seen.entry(pid).or_default()
    }

    /// At a stack with user frames of process `pid`: its mappings, read now, if they were
    /// not read since it started its program (None: nothing to stage).
    pub fn first_sight(&mut self, pid: u32) -> Option<Sighted> {
        let s = self.entry(pid);
        if s.read {
            return None;
        }
        s.read = true;
        let (since, exec_comm) = match &s.renamed {
            Some((time, comm)) => (*time, Some(comm.clone())),
            None => (None, None),
        };
        match (read_proc_maps(pid), exec_comm) {
            (Some(mappings), exec_comm) => Some(Sighted {
                since,
                exec_comm,
                mappings,
            }),
            (None, Some(comm)) => Some(Sighted {
                since,
                exec_comm: Some(comm),
                mappings: Vec::new(),
            }),
            // Gone, and from before the recording: the formatter finds nothing either.
            (None, None) => None,
        }
    }
}
