//! Named instances (`--instance NAME`): `instances/NAME`, which outlives a killed uevrec
//! and is adopted by the next one made with the same recipe (events, filter, threads,
//! ring size). What makes an instance ours, the lock and the state file:
//! docs/restarts.md.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::capture::backend::FtraceError;
use crate::capture::staging::written::{Settled, Written};

/// Why a named instance cannot be used (crate::capture::ftrace's setup error wraps it).
#[derive(Debug, thiserror::Error)]
pub enum NamedError {
    /// Refused; the message says why and the fix.
    #[error("{0}")]
    Refused(String),
    /// A step on the instance or the state files failed.
    #[error("{0}")]
    Step(FtraceError),
}

/// Where the lock and state files of named instances live: tmpfs, gone at reboot like
/// the instances themselves.
pub const STATE_DIR: &str = "/run/uevrec/instances";

/// What `--instance` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedInstance {
    /// The instance's name under tracefs `instances/`.
    pub name: String,
    /// Leave it (events enabled) at a clean stop too (`--keep-instance`).
    pub keep: bool,
    /// Remove and make again an instance made with another recipe (`--instance-reset`).
    pub reset: bool,
}

/// What an instance was made with; an adopting run must ask for the same.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Recipe {
    /// The event selectors, as given.
    pub events: Vec<String>,
    /// The kernel filter expression.
    pub filter: Option<String>,
    /// `--pid`.
    pub pid: Option<i32>,
    /// Ring KiB per CPU.
    pub ring_kb: u64,
    /// Whether who-is-who is tracked (a `NAME-t` companion instance).
    pub context: bool,
}

impl Recipe {
    /// Each difference to `asked`, in words.
    fn differences(&self, asked: &Recipe) -> Vec<String> {
        let mut d = Vec::new();
        if self.events != asked.events {
            d.push(format!(
                "events: made with `{}`, asked for `{}`",
                self.events.join(" "),
                asked.events.join(" ")
            ));
        }
        if self.filter != asked.filter {
            d.push(format!(
                "filter: made with {}, asked for {}",
                shown(&self.filter),
                shown(&asked.filter)
            ));
        }
        if self.pid != asked.pid {
            d.push(format!(
                "--pid: made with {}, asked for {}",
                shown(&self.pid),
                shown(&asked.pid)
            ));
        }
        if self.ring_kb != asked.ring_kb {
            d.push(format!(
                "ring size: made with {} KiB per CPU, asked for {} KiB",
                self.ring_kb, asked.ring_kb
            ));
        }
        if self.context != asked.context {
            d.push(format!(
                "context: made {}, asked {}",
                tracked(self.context),
                tracked(asked.context)
            ));
        }
        d
    }
}

fn shown<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref()
        .map_or_else(|| "none".into(), |v| format!("`{v}`"))
}

fn tracked(on: bool) -> &'static str {
    if on {
        "with who-is-who tracking"
    } else {
        "with --no-context"
    }
}

/// The state file `STATE_DIR/NAME.json`: the evidence that uevrec made `instances/NAME`
/// (its directory's inode, which a new `mkdir` of the name does not keep) and how.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct State {
    /// None between the state's first write and the `mkdir`.
    inode: Option<u64>,
    /// Set once the instance's settings are written ([`mark_configured`]): an instance
    /// whose maker was killed before is made again, never adopted.
    configured: bool,
    made_by: u32,
    made_at_unix_ns: u64,
    recipe: Recipe,
}

/// The run that made an adopted instance, and what it found waiting.
#[derive(Debug, Clone)]
pub struct Adoption {
    /// The process that made the instance.
    pub made_by: u32,
    /// When (Unix ns).
    pub made_at_unix_ns: u64,
}

/// The notice of the adopted instance at `dir`: who made it and when, how many records
/// its rings held waiting (every CPU's `entries`) and since when at most (`oldest event ts`
/// against `now ts`, the instance's monotonic clock: the stamp of the oldest page's first
/// record, which may be one the dead run had read already).
pub fn adoption_notice(dir: &Path, a: &Adoption) -> String {
    let mut waiting = 0u64;
    let mut oldest_age: Option<f64> = None;
    let per_cpu = dir.join("per_cpu");
    for entry in fs::read_dir(&per_cpu).into_iter().flatten().flatten() {
        let Ok(text) = crate::capture::tracefs::read_once(&entry.path().join("stats")) else {
            continue;
        };
        let value = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().parse::<f64>().ok())
        };
        let entries = value("entries:").unwrap_or(0.0) as u64;
        waiting = waiting.saturating_add(entries);
        if let (true, Some(oldest), Some(now)) =
            (entries > 0, value("oldest event ts:"), value("now ts:"))
        {
            let age = (now - oldest).max(0.0);
            oldest_age = Some(oldest_age.map_or(age, |a: f64| a.max(age)));
        }
    }
    let made_ago =
        crate::capture::clock::now_unix_ns().saturating_sub(a.made_at_unix_ns) as f64 / 1e9;
    let oldest = oldest_age.map_or_else(String::new, |s| {
        format!(", written over the last {s:.1} s at most")
    });
    format!(
        "adopted instance {} (made by process {} {made_ago:.1} s ago, at Unix time {}.{:09}): \
         {waiting} records were waiting in its rings{oldest}; records overwritten \
         meanwhile are counted as lost",
        dir.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        a.made_by,
        a.made_at_unix_ns / 1_000_000_000,
        a.made_at_unix_ns % 1_000_000_000,
    )
}

/// A named instance opened for this run: its directory, whether it was adopted, and the
/// lock held while the run lasts.
#[derive(Debug)]
pub struct Opened {
    /// `instances/NAME`.
    pub dir: PathBuf,
    /// Set when the instance was there, made by uevrec with the same recipe.
    pub adopted: Option<Adoption>,
    /// The flock on `STATE_DIR/NAME.lock` (released by the kernel when this process dies).
    pub lock: File,
    /// `STATE_DIR/NAME.json`.
    pub state: PathBuf,
    /// For standard error: an instance of another recipe removed (`--instance-reset`).
    pub notes: Vec<String>,
}

/// Check `name` for `--instance`: a plain directory name, not one of the per-process
/// names (`uevrec-…`, which a later start may remove as stale).
pub fn check_name(name: &str) -> Result<(), String> {
    let plain = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && !name.starts_with('.');
    if !plain {
        return Err(format!(
            "--instance `{name}`: a name is 1 to 64 letters, digits, `-`, `_` or `.`, not \
             starting with `.`"
        ));
    }
    if name.starts_with("uevrec-") {
        return Err(format!(
            "--instance `{name}`: names starting with `uevrec-` are uevrec's per-process \
             instances (removed as stale by later runs); choose another name"
        ));
    }
    Ok(())
}

fn step(what: String, source: io::Error) -> NamedError {
    NamedError::Step(FtraceError { step: what, source })
}

/// Take the lock of `name` in `state_dir`, then adopt `parent/name` when uevrec made it with
/// `recipe`, or make it (also after removing one of another recipe when `reset`).
/// Refused: another uevrec holds the lock; the directory exists without our state file
/// naming it; another recipe without `reset`.
pub fn open(
    parent: &Path,
    state_dir: &Path,
    spec: &NamedInstance,
    recipe: &Recipe,
) -> Result<Opened, NamedError> {
    check_name(&spec.name).map_err(NamedError::Refused)?;
    fs::create_dir_all(state_dir)
        .map_err(|e| step(format!("mkdir -p {}", state_dir.display()), e))?;
    let lock = lock(state_dir, &spec.name)?;
    let dir = parent.join(&spec.name);
    let state_path = state_dir.join(format!("{}.json", spec.name));
    let mut notes = Vec::new();
    if let Ok(meta) = fs::metadata(&dir) {
        let state: Option<State> = fs::read(&state_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let ours = |s: &State| s.inode.is_none_or(|i| i == meta.ino());
        let state = match state {
            Some(s) if s.inode == Some(meta.ino()) && s.configured => Some(s),
            // Made by a run killed before it set the instance up (the lock says none
            // runs now): made again.
            Some(s) if ours(&s) && !s.configured => None,
            _ => {
                return Err(NamedError::Refused(format!(
                    "{} exists but uevrec did not make it ({} does not name it): another \
                     tool's instance is never adopted or removed; choose another --instance \
                     name, or remove it with `rmdir {}` if it is no one's",
                    dir.display(),
                    state_path.display(),
                    dir.display()
                )));
            }
        };
        let diff = state.as_ref().map(|s| s.recipe.differences(recipe));
        if let (Some(state), Some([])) = (&state, diff.as_deref()) {
            return Ok(Opened {
                dir,
                adopted: Some(Adoption {
                    made_by: state.made_by,
                    made_at_unix_ns: state.made_at_unix_ns,
                }),
                lock,
                state: state_path,
                notes,
            });
        }
        match diff {
            Some(diff) if !spec.reset => {
                return Err(NamedError::Refused(format!(
                    "instance {} was made with another recipe ({}); ask for the same, or add \
                     --instance-reset to remove it (and the records it holds) and start anew",
                    spec.name,
                    diff.join("; ")
                )));
            }
            Some(diff) => notes.push(format!(
                "--instance-reset: removed instance {} ({}) and the records it held",
                spec.name,
                diff.join("; ")
            )),
            None => notes.push(format!(
                "instance {} was left by a run killed while it set it up: made again",
                spec.name
            )),
        }
        remove_dir(&companion(&dir))?;
        remove_dir(&dir)?;
    }
    // The state first: a kill before the mkdir's inode is written leaves an instance
    // that the next run knows as its own (and makes again).
    let mut state = State {
        inode: None,
        configured: false,
        made_by: std::process::id(),
        made_at_unix_ns: crate::capture::clock::now_unix_ns(),
        recipe: recipe.clone(),
    };
    write_state(&state_path, &state)?;
    fs::create_dir(&dir).map_err(|e| step(format!("mkdir {}", dir.display()), e))?;
    state.inode = Some(
        fs::metadata(&dir)
            .map_err(|e| step(format!("stat {}", dir.display()), e))?
            .ino(),
    );
    write_state(&state_path, &state)?;
    Ok(Opened {
        dir,
        adopted: None,
        lock,
        state: state_path,
        notes,
    })
}

/// Record in state file `state` that its instance is set up (adoptable from now on).
pub fn mark_configured(state: &Path) -> Result<(), NamedError> {
    let text = fs::read(state).map_err(|e| step(format!("read {}", state.display()), e))?;
    let mut s: State = serde_json::from_slice(&text).map_err(|e| {
        step(
            format!("read {}", state.display()),
            io::Error::new(io::ErrorKind::InvalidData, e),
        )
    })?;
    s.configured = true;
    write_state(state, &s)
}

/// The companion (tracking) instance of `dir`: `NAME-t`.
pub fn companion(dir: &Path) -> PathBuf {
    let mut name = dir.as_os_str().to_owned();
    name.push("-t");
    PathBuf::from(name)
}

/// Remove instance `dir` if there (not found is fine).
fn remove_dir(dir: &Path) -> Result<(), NamedError> {
    match fs::remove_dir(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(step(format!("rmdir {}", dir.display()), e))
        }
        _ => Ok(()),
    }
}

/// Write the state file whole (a temporary file renamed over it).
fn write_state(path: &Path, state: &State) -> Result<(), NamedError> {
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_vec(state).unwrap_or_default();
    fs::write(&tmp, text)
        .and_then(|()| fs::rename(&tmp, path))
        .map_err(|e| step(format!("write {}", path.display()), e))
}

/// The exclusive lock of `name`: a flock, which the kernel releases when the process dies
/// however it dies (a SIGKILL frees the name at once). The holder's pid is written into
/// the file for the refusal's message.
fn lock(state_dir: &Path, name: &str) -> Result<File, NamedError> {
    let path = state_dir.join(format!("{name}.lock"));
    crate::system::pid_lock::take(&path).map_err(|e| match e {
        crate::system::pid_lock::LockError::Held(pid) => NamedError::Refused(format!(
            "instance {name} is being read by another uevrec (process {}); two readers would \
             each get part of the records: stop that one first, or choose another --instance \
             name",
            pid.map_or_else(|| "unknown".into(), |p| p.to_string())
        )),
        crate::system::pid_lock::LockError::Io(op, e) => {
            step(format!("{op} {}", path.display()), e)
        }
    })
}

/// The loss ledger of CPU `cpu` beside state file `state` (`NAME.cpuN.lost`): the
/// records that CPU's ring was reported to have lost, by every run of the instance.
pub fn ledger(state: &Path, cpu: u32) -> PathBuf {
    state.with_extension(format!("cpu{cpu}.lost"))
}

/// The page journal of CPU `cpu` beside state file `state` (`NAME.cpuN.journal`,
/// journal.rs).
pub fn journal(state: &Path, cpu: u32) -> PathBuf {
    state.with_extension(format!("cpu{cpu}.journal"))
}

/// The tracking companion's journal of CPU `cpu` beside state file `state`
/// (`NAME.cpuN.tracking.journal`, context_instance.rs).
pub fn tracking_journal(state: &Path, cpu: u32) -> PathBuf {
    state.with_extension(format!("cpu{cpu}.tracking.journal"))
}

/// The names the start-up scan of `/proc` gave the run of the instance at state file
/// `state` (`NAME.names`, context_instance.rs).
pub fn names(state: &Path) -> PathBuf {
    state.with_extension("names")
}

/// The writer's marks of instance `name` (`STATE_DIR/NAME.written`,
/// crate::capture::staging::written).
pub fn written(name: &str) -> PathBuf {
    Path::new(STATE_DIR).join(format!("{name}.written"))
}

/// Settle the batch a killed run of instance `spec` was writing (`written`, its marks:
/// [`Written::settle`]) before this run's writer starts, so that no line of this run lands
/// on the killed run's file first. Under the instance's lock (a running uevrec's batch is
/// never touched: this run is refused later), and only when the instance under tracefs
/// `root` is there to be adopted and not to be reset (otherwise no run writes the records
/// of a part cut off).
pub fn settle_written(root: &Path, spec: &NamedInstance, written: &Written) -> Settled {
    let there = root.join("instances").join(&spec.name).is_dir();
    if spec.reset || !there {
        return Settled::Nothing;
    }
    match lock(Path::new(STATE_DIR), &spec.name) {
        Ok(_held) => written.settle(),
        Err(_) => Settled::Nothing,
    }
}

/// Forget instance `NAME`'s state, ledgers, journals and marks (after removing the
/// instance at a clean stop).
pub fn forget(state: &Path) {
    let _ = fs::remove_file(state);
    let _ = fs::remove_file(state.with_extension("written"));
    let _ = fs::remove_file(names(state));
    let (Some(dir), Some(stem)) = (state.parent(), state.file_stem()) else {
        return;
    };
    let prefix = format!("{}.cpu", stem.to_string_lossy());
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(&prefix) && (name.ends_with(".lost") || name.ends_with(".journal")) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recipe() -> Recipe {
        Recipe {
            events: vec!["raw_syscalls:sys_enter".into()],
            filter: Some("id == 110".into()),
            pid: None,
            ring_kb: 512,
            context: true,
        }
    }

    #[test]
    fn the_state_and_the_ledgers_are_forgotten_together() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("a.b.json");
        let ledgers = [
            ledger(&state, 0),
            ledger(&state, 13),
            journal(&state, 2),
            tracking_journal(&state, 2),
        ];
        assert_eq!(ledgers[1], dir.path().join("a.b.cpu13.lost"));
        let other = dir.path().join("a.json");
        for f in ledgers.iter().chain([&state, &other]) {
            fs::write(f, "1").unwrap();
        }
        fs::write(super::names(&state), "1").unwrap();
        forget(&state);
        assert!(!state.exists() && ledgers.iter().all(|l| !l.exists()));
        assert!(!super::names(&state).exists());
        assert!(other.exists(), "another name's state is left");
    }

    #[test]
    fn names() {
        assert!(check_name("agent-1.prod_x").is_ok());
        for bad in ["", ".x", "a/b", "uevrec-12", "a b", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn made_adopted_refused_and_reset() {
        let tmp = tempfile::tempdir().unwrap();
        let (parent, state) = (tmp.path().join("instances"), tmp.path().join("state"));
        fs::create_dir(&parent).unwrap();
        let spec = NamedInstance {
            name: "n".into(),
            keep: false,
            reset: false,
        };
        let made = open(&parent, &state, &spec, &recipe()).unwrap();
        assert!(made.adopted.is_none() && made.dir.is_dir());
        // Killed before it was set up: made again, not adopted.
        drop(made);
        let made = open(&parent, &state, &spec, &recipe()).unwrap();
        assert!(
            made.adopted.is_none(),
            "an instance not set up is made again"
        );
        assert!(
            made.notes[0].contains("killed while it set it up"),
            "{:?}",
            made.notes
        );
        mark_configured(&made.state).unwrap();
        // The lock: a second opener is refused while the first holds it.
        let e = open(&parent, &state, &spec, &recipe())
            .unwrap_err()
            .to_string();
        assert!(e.contains("another uevrec"), "{e}");
        drop(made);
        let again = open(&parent, &state, &spec, &recipe()).unwrap();
        assert_eq!(again.adopted.as_ref().unwrap().made_by, std::process::id());
        drop(again);
        let mut other = recipe();
        other.ring_kb = 1024;
        let e = open(&parent, &state, &spec, &other)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("ring size: made with 512 KiB per CPU, asked for 1024"),
            "{e}"
        );
        let reset = NamedInstance {
            reset: true,
            ..spec.clone()
        };
        let fresh = open(&parent, &state, &reset, &other).unwrap();
        assert!(fresh.adopted.is_none() && fresh.notes.len() == 1);
        mark_configured(&fresh.state).unwrap();
        drop(fresh);
        // A directory our state file does not name: not ours.
        fs::create_dir(parent.join("m")).unwrap();
        let m = NamedInstance {
            name: "m".into(),
            ..spec
        };
        let e = open(&parent, &state, &m, &other).unwrap_err().to_string();
        assert!(e.contains("uevrec did not make it"), "{e}");
    }
}
