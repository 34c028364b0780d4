//! Who is who on the ftrace backend (the records' `comm` and `cgroup`): tracefs has no
//! `PERF_RECORD_COMM`, so the instance enables kernel tracepoints of its own as tracking
//! events ([`EVENTS`]), whose records the backend turns into [`Arrival::Context`] instead
//! of records. They are enabled in the session's tracking instance
//! (context_instance.rs), whose rings are read ahead of the records' and merged by time;
//! their thread ids are the initial pid namespace's (docs/json-lines.md, "Context").

use std::path::Path;

use uevrec_parsers::{ContextUpdate, Endian, Field, Value, decode_field, parse_format};

use super::instance::{read_file, write_file};
use crate::capture::backend::Arrival;

/// What one tracking event becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    NewTask,
    Rename,
    Exit,
    CgroupMkdir,
    CgroupAttach,
}

/// The tracking events: system, name, kind, and the fields read (in the order
/// [`Tracked::update`] takes them). What each becomes:
///
/// | tracepoint | becomes |
/// |---|---|
/// | `task:task_newtask` (in the parent) | `Fork { tid: pid, parent_tid: common_pid }` |
/// | `task:task_rename` (exec and `prctl(PR_SET_NAME)`) | `Comm { tid: pid, comm: newcomm }` |
/// | `sched:sched_process_exit` | `Exit { tid: pid }` |
/// | `cgroup:cgroup_mkdir` (cgroup v2 only) | `Cgroup { id, path }` |
/// | `cgroup:cgroup_attach_task` (cgroup v2 only) | `Cgroup { id: dst_id, path: dst_path }`, then `ThreadCgroup { tid: pid, id: dst_id }` |
const EVENTS: [(&str, &str, Kind, &[&str]); 5] = [
    (
        "task",
        "task_newtask",
        Kind::NewTask,
        &["pid", "common_pid", "clone_flags"],
    ),
    ("task", "task_rename", Kind::Rename, &["pid", "newcomm"]),
    ("sched", "sched_process_exit", Kind::Exit, &["pid"]),
    (
        "cgroup",
        "cgroup_mkdir",
        Kind::CgroupMkdir,
        &["root", "id", "path"],
    ),
    (
        "cgroup",
        "cgroup_attach_task",
        Kind::CgroupAttach,
        &["dst_root", "pid", "dst_id", "dst_path"],
    ),
];

/// One enabled tracking event.
#[derive(Debug)]
struct Tracked {
    id: u64,
    kind: Kind,
    fields: Vec<Field>,
}

/// The enabled tracking events of an instance.
#[derive(Debug, Default)]
pub(super) struct Tracking {
    events: Vec<Tracked>,
    /// Only `task_newtask`, for process ids (tgid.rs), and no context arrivals
    /// (`--no-context`).
    tasks_only: bool,
}

fn int(v: Value<'_>) -> Option<u64> {
    match v {
        Value::Unsigned(u) => Some(u),
        Value::Signed(i) => u64::try_from(i).ok(),
        _ => None,
    }
}

impl Tracked {
    /// The updates `raw` (a trace entry of this event) tells: none, one, or two (a move
    /// between cgroups says the destination's path too: with `--pid` the instance does
    /// not see the `cgroup_mkdir` of a cgroup another process made).
    fn updates<'a>(&self, raw: &'a [u8]) -> [Option<ContextUpdate<'a>>; 2] {
        match self.kind {
            Kind::CgroupAttach => {
                let path = self.update(raw, true);
                [path, path.and_then(|_| self.update(raw, false))]
            }
            _ => [self.update(raw, false), None],
        }
    }

    /// The update `raw` tells (for a cgroup move: its path when `path`, else the move).
    fn update<'a>(&self, raw: &'a [u8], path: bool) -> Option<ContextUpdate<'a>> {
        let v = |i: usize| decode_field(&self.fields[i], raw, Endian::NATIVE);
        let tid = |i: usize| int(v(i)).and_then(|n| u32::try_from(n).ok());
        let text = |i: usize| match v(i) {
            Value::Str(s) => Some(s),
            _ => None,
        };
        // The cgroup v2 hierarchy is hierarchy 0 (cgrp_dfl_root); v1 ones are ignored.
        let v2 = |i: usize| int(v(i)) == Some(0);
        Some(match self.kind {
            Kind::NewTask => ContextUpdate::Fork {
                tid: tid(0)?,
                parent_tid: tid(1)?,
            },
            Kind::Rename => ContextUpdate::Comm {
                tid: tid(0)?,
                comm: text(1)?,
            },
            Kind::Exit => ContextUpdate::Exit { tid: tid(0)? },
            Kind::CgroupMkdir if v2(0) => ContextUpdate::Cgroup {
                id: int(v(1))?,
                path: text(2)?,
            },
            Kind::CgroupAttach if v2(0) && path => ContextUpdate::Cgroup {
                id: int(v(2))?,
                path: text(3)?,
            },
            Kind::CgroupAttach if v2(0) => ContextUpdate::ThreadCgroup {
                tid: tid(1)?,
                id: int(v(2))?,
            },
            Kind::CgroupMkdir | Kind::CgroupAttach => return None,
        })
    }
}

impl Tracking {
    /// Enable the tracking events in the instance at `dir`; also returns what could not
    /// be tracked (events this kernel lacks).
    /// With `tasks_only`, only `task_newtask` (for process ids), and no arrivals.
    pub(super) fn enable(dir: &Path, tasks_only: bool) -> (Tracking, Vec<String>) {
        let mut t = Tracking {
            tasks_only,
            ..Tracking::default()
        };
        let mut missing = Vec::new();
        for (system, name, kind, names) in EVENTS {
            if tasks_only && kind != Kind::NewTask {
                continue;
            }
            let ev = dir.join("events").join(system).join(name);
            let enabled = read_file(&ev.join("format"))
                .ok()
                .and_then(|text| parse_format(&text).ok())
                .and_then(|format| {
                    let all = || format.common_fields.iter().chain(&format.fields);
                    let fields = names
                        .iter()
                        .map(|n| all().find(|f| f.name == *n).cloned())
                        .collect::<Option<Vec<Field>>>()?;
                    write_file(&ev.join("enable"), "1").ok()?;
                    Some(Tracked {
                        id: u64::from(format.id),
                        kind,
                        fields,
                    })
                });
            match enabled {
                Some(tracked) => t.events.push(tracked),
                None => missing.push(format!(
                    "tracking event {system}:{name} not available: {}",
                    match kind {
                        Kind::NewTask => "new threads get no `comm` until they exec or rename",
                        Kind::Rename => "renames and execs are not seen",
                        Kind::Exit => "exited threads are kept until their id is reused",
                        Kind::CgroupMkdir => "cgroups created during the recording have no path",
                        Kind::CgroupAttach => "moves between cgroups are not seen",
                    }
                )),
            }
        }
        (t, missing)
    }

    /// A `task:task_newtask` record's (child, parent, shares the parent's thread group);
    /// None for other records.
    pub(super) fn new_task(&self, key: u64, raw: &[u8]) -> Option<(u32, u32, bool)> {
        let e = self
            .events
            .iter()
            .find(|e| e.id == key && e.kind == Kind::NewTask)?;
        let v = |i: usize| decode_field(&e.fields[i], raw, Endian::NATIVE);
        let tid = |i: usize| int(v(i)).and_then(|n| u32::try_from(n).ok());
        let flags = int(v(2))?;
        Some((tid(0)?, tid(1)?, flags & libc::CLONE_THREAD as u64 != 0))
    }

    /// The context arrivals of a tracking event's record (none when it tells nothing,
    /// e.g. a cgroup v1 move).
    pub(super) fn arrivals<'a>(
        &self,
        key: u64,
        time: Option<u64>,
        raw: &'a [u8],
    ) -> impl Iterator<Item = Arrival<'a>> {
        self.events
            .iter()
            .find(|e| e.id == key && !self.tasks_only)
            .map(|e| e.updates(raw))
            .into_iter()
            .flatten()
            .flatten()
            .map(move |update| Arrival::Context { time, update })
    }
}
