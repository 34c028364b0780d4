//! The tracefs instance of one ftrace session: created at start, removed on every way out
//! (its [`Drop`], which runs on a normal stop, on SIGINT/SIGTERM, on errors and on panics),
//! and found and removed by the next start when a killed run (SIGKILL, a second SIGINT)
//! left it behind ([`remove_stale`]: an instance whose `<pid>` no longer runs is stale).
//! Its names are at [`Instance::create`] and [`name_prefix`].

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// (Defined beside the backend contract, crate::capture::backend, so it imports nothing of ftrace.)
pub use crate::capture::backend::FtraceError;

/// Why the ftrace backend could not start; the message says the fix.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// tracefs has no `instances` directory.
    #[error(
        "{0} does not exist: this kernel's tracefs has no instances (they need Linux 3.15 or \
         later); use --backend perf"
    )]
    NoInstances(PathBuf),
    /// Creating or configuring the instance was not permitted.
    #[error(
        "{0}: the ftrace backend creates a tracefs instance and writes its files, which \
         needs root; run uevrec as root, or use --backend perf (root or CAP_PERFMON)"
    )]
    Permission(FtraceError),
    /// The ring could not be allocated.
    #[error("{source}: cannot allocate {kb} KiB per CPU for the instance's ring; use a smaller -m")]
    BufferSize {
        /// KiB per CPU asked for.
        kb: u64,
        /// The failing write.
        source: FtraceError,
    },
    /// The ring-buffer page layout is not one uevrec reads.
    #[error("{0}; use --backend perf")]
    Layout(String),
    /// Another step failed.
    #[error("{0}")]
    Step(FtraceError),
    /// A named instance (`--instance`) cannot be used; the message says why and the fix.
    #[error("{0}")]
    Named(String),
}

impl From<super::named::NamedError> for SetupError {
    fn from(e: super::named::NamedError) -> SetupError {
        match e {
            super::named::NamedError::Refused(msg) => SetupError::Named(msg),
            super::named::NamedError::Step(e) => SetupError::from_step(e),
        }
    }
}

impl SetupError {
    /// The setup error for a failed step: [`SetupError::Permission`] for EACCES/EPERM.
    pub fn from_step(e: FtraceError) -> SetupError {
        match e.source.raw_os_error() {
            Some(libc::EACCES | libc::EPERM) => SetupError::Permission(e),
            _ => SetupError::Step(e),
        }
    }
}

/// Write `value` to tracefs file `path`.
pub fn write_file(path: &Path, value: &str) -> Result<(), FtraceError> {
    fs::write(path, value).map_err(|source| FtraceError {
        step: format!("write `{}` to {}", value.trim_end(), path.display()),
        source,
    })
}

/// Read tracefs file `path`.
pub fn read_file(path: &Path) -> Result<String, FtraceError> {
    crate::capture::tracefs::read_once(path).map_err(|source| FtraceError {
        step: format!("read {}", path.display()),
        source,
    })
}

/// Sessions started in this process (names the instances).
static SESSIONS: AtomicUsize = AtomicUsize::new(0);

/// How long removal retries while the instance is busy (a reader still closing).
const REMOVE_PATIENCE: Duration = Duration::from_secs(2);

/// A tracefs instance owned by this session; dropping it removes it (a named one: unless
/// kept, [`Instance::kept`]).
#[derive(Debug)]
pub struct Instance {
    dir: PathBuf,
    named: Option<Named>,
}

/// What a named instance (`--instance`, named.rs) adds.
#[derive(Debug)]
struct Named {
    /// Left in place when dropped.
    keep: bool,
    /// It was there when this run started (made by a run before).
    adopted: bool,
    /// The state file, forgotten when the instance is removed (the main instance only).
    state: Option<PathBuf>,
    /// The main instance's state file, beside which the journals lie (both instances).
    journals: PathBuf,
    /// The name's lock, held as long as the instance.
    _lock: Option<std::fs::File>,
}

impl Instance {
    /// Create this session's instance under `root/instances`, after removing stale ones
    /// (returned: one message per stale instance, removed or not).
    ///
    /// Names: `instances/uevrec-<pid>` for the first session of a process, and
    /// `uevrec-<pid>-s<n>` for later ones (tests run several sessions in one process);
    /// `uevrec-<pid>-<n>` are the throw-away instances of the filter complaints
    /// (crate::capture::session), and a session's tracking instance (its thread names and
    /// cgroups, tracking.rs) is its instance's name with `-t` ([`Instance::sibling`]).
    pub fn create(root: &Path) -> Result<(Instance, Vec<String>), SetupError> {
        let parent = root.join("instances");
        if !parent.is_dir() {
            return Err(SetupError::NoInstances(parent));
        }
        let seq = SESSIONS.fetch_add(1, Ordering::Relaxed);
        // In a pid namespace other uevrec processes are invisible (their instances would
        // look stale) and this one's id is not the kernel's: name the instance so that
        // it cannot collide, and leave the others alone.
        let (prefix, nested) = name_prefix();
        let stale = if nested {
            Vec::new()
        } else {
            remove_stale(&parent, seq == 0)
        };
        let name = if seq == 0 {
            prefix
        } else {
            format!("{prefix}-s{seq}")
        };
        let dir = parent.join(name);
        fs::create_dir(&dir).map_err(|source| {
            SetupError::from_step(FtraceError {
                step: format!("mkdir {}", dir.display()),
                source,
            })
        })?;
        Ok((Instance { dir, named: None }, stale))
    }

    /// The named instance `spec` asks for under `root/instances` (named.rs): adopted when
    /// uevrec made it with `recipe`, else made. Also returns the adoption, if any, and
    /// notes for standard error.
    pub fn named(
        root: &Path,
        spec: &super::named::NamedInstance,
        recipe: &super::named::Recipe,
    ) -> Result<(Instance, Option<super::named::Adoption>, Vec<String>), SetupError> {
        let parent = root.join("instances");
        if !parent.is_dir() {
            return Err(SetupError::NoInstances(parent));
        }
        let opened = super::named::open(&parent, Path::new(super::named::STATE_DIR), spec, recipe)?;
        let instance = Instance {
            dir: opened.dir,
            named: Some(Named {
                keep: spec.keep,
                adopted: opened.adopted.is_some(),
                journals: opened.state.clone(),
                state: Some(opened.state),
                _lock: Some(opened.lock),
            }),
        };
        Ok((instance, opened.adopted, opened.notes))
    }

    /// A second instance of the same session, named like this one with `-<suffix>` (the
    /// stale ones were removed when this one was created), removed when dropped. Of an
    /// adopted named instance: the one there is adopted too (a leftover beside a new one
    /// is removed first).
    pub fn sibling(&self, suffix: &str) -> Result<Instance, SetupError> {
        let mut name = self.dir.as_os_str().to_owned();
        name.push("-");
        name.push(suffix);
        let dir = PathBuf::from(name);
        // A companion its maker was killed before setting up (no `mono` clock yet) is
        // made again.
        let set_up = || {
            crate::capture::tracefs::read_once(&dir.join("trace_clock"))
                .is_ok_and(|c| c.contains("[mono]"))
        };
        let named = self.named.as_ref().map(|n| Named {
            keep: n.keep,
            adopted: n.adopted && dir.is_dir() && set_up(),
            state: None,
            journals: n.journals.clone(),
            _lock: None,
        });
        if named.as_ref().is_some_and(|n| n.adopted) {
            return Ok(Instance { dir, named });
        }
        if named.is_some() {
            let _ = fs::remove_dir(&dir);
        }
        fs::create_dir(&dir).map_err(|source| {
            SetupError::from_step(FtraceError {
                step: format!("mkdir {}", dir.display()),
                source,
            })
        })?;
        Ok(Instance { dir, named })
    }

    /// Whether this instance was there, made by an earlier run (named instances only):
    /// its settings stand, its rings hold what was written meanwhile.
    pub fn adopted(&self) -> bool {
        self.named.as_ref().is_some_and(|n| n.adopted)
    }

    /// Of a new named instance, once set up: say so in its state file, so that a later
    /// run adopts it (one killed before is made again, named.rs).
    pub fn mark_configured(&self) -> Result<(), SetupError> {
        match self.named.as_ref().and_then(|n| n.state.as_ref()) {
            Some(state) => Ok(super::named::mark_configured(state)?),
            None => Ok(()),
        }
    }

    /// Of the main named instance: CPU `cpu`'s loss ledger (named.rs).
    pub fn ledger(&self, cpu: u32) -> Option<PathBuf> {
        let state = self.named.as_ref()?.state.as_ref()?;
        Some(super::named::ledger(state, cpu))
    }

    /// Of the main named instance: CPU `cpu`'s page journal (named.rs).
    pub fn journal(&self, cpu: u32) -> Option<PathBuf> {
        let state = self.named.as_ref()?.state.as_ref()?;
        Some(super::named::journal(state, cpu))
    }

    /// Of a named instance's tracking companion: CPU `cpu`'s journal (named.rs).
    pub fn tracking_journal(&self, cpu: u32) -> Option<PathBuf> {
        let named = self.named.as_ref().filter(|n| n.state.is_none())?;
        Some(super::named::tracking_journal(&named.journals, cpu))
    }

    /// Of a named instance's tracking companion: where the start-up scan's names are kept
    /// (named.rs).
    pub fn names(&self) -> Option<PathBuf> {
        let named = self.named.as_ref().filter(|n| n.state.is_none())?;
        Some(super::named::names(&named.journals))
    }

    /// Whether it stays when this run ends (`--keep-instance`): its events stay enabled.
    pub fn kept(&self) -> bool {
        self.named.as_ref().is_some_and(|n| n.keep)
    }

    /// The instance's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Write `value` to the instance's file `rel`.
    pub fn write(&self, rel: &str, value: &str) -> Result<(), FtraceError> {
        write_file(&self.dir.join(rel), value)
    }

    /// Add `value` to the instance's list file `rel` (opened without truncation, which
    /// would empty the list first).
    pub fn append(&self, rel: &str, value: &str) -> Result<(), FtraceError> {
        use std::io::Write as _;
        let path = self.dir.join(rel);
        fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(value.as_bytes()))
            .map_err(|source| FtraceError {
                step: format!("add `{value}` to {}", path.display()),
                source,
            })
    }

    /// Remove the instance (retrying while it is busy).
    fn remove(&self) -> io::Result<()> {
        let t0 = Instant::now();
        loop {
            match fs::remove_dir(&self.dir) {
                Err(e)
                    if e.raw_os_error() == Some(libc::EBUSY) && t0.elapsed() < REMOVE_PATIENCE =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                other => return other,
            }
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if self.kept() {
            return;
        }
        let removed = self.remove();
        if let (Ok(()), Some(state)) =
            (&removed, self.named.as_ref().and_then(|n| n.state.as_ref()))
        {
            super::named::forget(state);
        }
        if let Err(e) = removed {
            crate::messages::print(format_args!(
                "uevrec: cannot remove the tracefs instance {}: {e}; remove it with `rmdir {}`\n",
                self.dir.display(),
                self.dir.display()
            ));
        }
    }
}

/// The inode number of the initial pid namespace (`PROC_PID_INIT_INO`,
/// include/linux/proc_ns.h): what `stat /proc/self/ns/pid` shows outside any nested one.
const PROC_PID_INIT_INO: u64 = 0xEFFF_FFFC;

/// Where this process stands among pid namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PidView {
    /// In the initial pid namespace: this is the kernel's id of the process.
    Initial(u32),
    /// In a nested namespace whose `/proc` shows the initial namespace's id (the first
    /// `NSpid:`, here), e.g. `unshare --pid --fork` without `--mount-proc`.
    NestedKnown(u32),
    /// In a nested namespace whose `/proc` is its own (a container's), so that the
    /// initial namespace's id cannot be seen: the namespace's inode and the id in it.
    NestedUnknown {
        /// Inode number of the pid namespace (`/proc/self/ns/pid`).
        ns: u64,
        /// This process's id in that namespace.
        pid: u32,
    },
}

/// This process's [`PidView`]. Nested-ness comes from the pid namespace's inode, not from
/// the number of `NSpid:` ids: a `/proc` mounted inside the namespace (a container's,
/// `unshare --mount-proc`) shows one id, the namespace's own. Without `/proc/self/ns`
/// (very old kernels, no `/proc`) the process counts as in the initial namespace.
fn pid_view() -> PidView {
    use std::os::unix::fs::MetadataExt;
    let own = std::process::id();
    let ns = fs::metadata("/proc/self/ns/pid").map(|m| m.ino()).ok();
    let ids: Vec<u32> = fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status.lines().find_map(|l| {
                l.strip_prefix("NSpid:").map(|l| {
                    l.split_whitespace()
                        .filter_map(|n| n.parse().ok())
                        .collect()
                })
            })
        })
        .unwrap_or_default();
    match (ns, ids.as_slice()) {
        (_, [first, _, ..]) => PidView::NestedKnown(*first),
        (Some(ns), _) if ns != PROC_PID_INIT_INO => PidView::NestedUnknown {
            ns,
            pid: ids.first().copied().unwrap_or(own),
        },
        (_, [first]) => PidView::Initial(*first),
        _ => PidView::Initial(own),
    }
}

/// The start of this process's instance names, and whether it runs in a nested pid
/// namespace (and so must remove no stale instances: the processes of other uevrec runs
/// are invisible there). `uevrec-<pid>` with the initial namespace's id when it is known,
/// else `uevrec-ns<inode>-<pid>`, which [`instance_pid`] does not read as a pid: in a
/// nested pid namespace whose `/proc` does not show this process's initial-namespace id
/// (a container's own `/proc`), such names are unique across containers, and never taken
/// for stale by anyone (the stale rule needs an initial-namespace id).
pub fn name_prefix() -> (String, bool) {
    match pid_view() {
        PidView::Initial(pid) => (format!("uevrec-{pid}"), false),
        PidView::NestedKnown(pid) => (format!("uevrec-{pid}"), true),
        PidView::NestedUnknown { ns, pid } => (format!("uevrec-ns{ns}-{pid}"), true),
    }
}

/// The process id in the name of a uevrec instance (`uevrec-<pid>[-…][-t]`).
pub fn instance_pid(name: &str) -> Option<u32> {
    let name = name.strip_suffix("-t").unwrap_or(name);
    let rest = name.strip_prefix("uevrec-")?;
    let digits = rest.split('-').next()?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let pid = digits.parse().ok()?;
    let suffix = &rest[digits.len()..];
    // Nothing, `-s<n>` (a later session) or `-<n>` (a filter complaint).
    let ok = suffix.is_empty()
        || suffix
            .strip_prefix('-')
            .map(|s| s.strip_prefix('s').unwrap_or(s))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    ok.then_some(pid)
}

/// The file that keeps a trace-dat recording's instance `name` from being removed as
/// stale once its process is gone (`STATE_DIR/NAME.recover`: the trace.dat's path, then
/// its metadata file's, a line each), until `uevrec recover` drains it.
fn recover_marker(name: &str) -> PathBuf {
    Path::new(super::named::STATE_DIR).join(format!("{name}.recover"))
}

/// Keep `instance` for `uevrec recover TARGET` if this process is killed (its rings then
/// hold what was not spooled yet): [`remove_stale`] leaves it while `meta`, the
/// trace.dat's metadata file, exists. Undone by [`release_for_recover`].
pub fn hold_for_recover(instance: &Instance, target: &Path, meta: &Path) -> io::Result<()> {
    let name = instance
        .dir()
        .file_name()
        .unwrap_or_default()
        .to_string_lossy();
    fs::create_dir_all(super::named::STATE_DIR)?;
    let target = std::path::absolute(target)?;
    let meta = std::path::absolute(meta)?;
    fs::write(
        recover_marker(&name),
        format!("{}\n{}\n", target.display(), meta.display()),
    )
}

/// Instance `name` (`uevrec-PID`) no longer needs keeping for `recover`: its recording
/// ended, or was recovered.
pub fn release_for_recover(name: &str) {
    let _ = fs::remove_file(recover_marker(name));
}

/// Remove the uevrec instances in `instances` whose process is gone (and, when `own` — no
/// session of this process has started yet — those named with this process's id, left by
/// an earlier process that had it), but for those kept for `uevrec recover`
/// (`hold_for_recover`). One message per instance found.
pub fn remove_stale(instances: &Path, own: bool) -> Vec<String> {
    let me = std::process::id();
    let Ok(rd) = fs::read_dir(instances) else {
        return Vec::new();
    };
    let mut msgs = Vec::new();
    for entry in rd.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(instance_pid) else {
            continue;
        };
        let gone = if pid == me {
            own
        } else {
            !Path::new(&format!("/proc/{pid}")).exists()
        };
        if !gone {
            continue;
        }
        let path = entry.path();
        let marker = recover_marker(&name.to_string_lossy());
        if let Ok(held) = fs::read_to_string(&marker) {
            let mut lines = held.lines();
            let (target, meta) = (lines.next().unwrap_or(""), lines.next().unwrap_or(""));
            if !meta.is_empty() && Path::new(meta).exists() {
                msgs.push(format!(
                    "kept the tracefs instance {} left by process {pid}, which is gone: its \
                     rings hold what that trace.dat recording had not spooled; `uevrec \
                     recover {target}` drains them into the file and removes it",
                    path.display()
                ));
                continue;
            }
            let _ = fs::remove_file(&marker);
        }
        msgs.push(match fs::remove_dir(&path) {
            Ok(()) => format!(
                "removed the tracefs instance {} left by process {pid}, which is gone",
                path.display()
            ),
            Err(e) => format!(
                "the tracefs instance {} was left by process {pid}, which is gone, and cannot be \
                 removed: {e}; remove it with `rmdir {}`",
                path.display(),
                path.display()
            ),
        });
    }
    msgs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_initial_pid_is_this_process_outside_a_namespace() {
        // The tests run in the initial pid namespace (tests/host/context.rs covers a
        // nested one end to end, with the namespace's own /proc).
        let me = std::process::id();
        assert_eq!(pid_view(), PidView::Initial(me));
        assert_eq!(name_prefix(), (format!("uevrec-{me}"), false));
    }

    #[test]
    fn instance_names() {
        assert_eq!(instance_pid("uevrec-42"), Some(42));
        assert_eq!(instance_pid("uevrec-42-s3"), Some(42));
        assert_eq!(instance_pid("uevrec-42-7"), Some(42));
        assert_eq!(instance_pid("uevrec-42-t"), Some(42));
        assert_eq!(instance_pid("uevrec-42-s3-t"), Some(42));
        for other in [
            "uevrec-",
            "uevrec-x",
            "uevrec-42x",
            "uevrec-42-",
            "uevrec-42-sx",
            "uevrec-42-t-t",
            "uevrec--t",
            "uevrec-ns4026532000-1",
            "uevrec-ns4026532000-1-t",
            "foo-42",
        ] {
            assert_eq!(instance_pid(other), None, "{other}");
        }
    }

    #[test]
    fn stale_instances_of_dead_processes_are_removed_and_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        // pid_max is at most 2^22: this pid cannot run.
        let dead = dir.path().join("uevrec-4194399");
        let live = dir.path().join(format!("uevrec-{}-7", std::process::id()));
        let other = dir.path().join("someone-else");
        for d in [&dead, &live, &other] {
            fs::create_dir(d).unwrap();
        }
        let msgs = remove_stale(dir.path(), false);
        assert_eq!(msgs.len(), 1, "{msgs:?}");
        assert!(
            msgs[0].contains("process 4194399, which is gone"),
            "{msgs:?}"
        );
        assert!(!dead.exists() && live.exists() && other.exists());
        // Named with this process's id before any session of it started: stale.
        let msgs = remove_stale(dir.path(), true);
        assert_eq!(msgs.len(), 1, "{msgs:?}");
        assert!(!live.exists() && other.exists());
    }
}
