//! What `record --fsync` asks of the files it writes ([`FsyncPolicy`], one [`Syncer`]
//! per output), and files that appear whole ([`Publish`]: written under a hidden name,
//! renamed when complete). The policy is chosen once per process ([`set_policy`], by
//! `record`) and read by every output ([`policy`]): one flag for every output, and no
//! plumbing through each writer's options. What each output syncs when:
//! docs/json-lines.md ("When uevrec dies"), docs/record-trace-dat.md ("`--fsync`").

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// When a file output asks the kernel to put what it wrote on the disk: how much a power
/// cut (or a kernel crash) may take from it. A SIGKILL of uevrec alone loses nothing the
/// kernel was given by write(2) whatever the policy: the page cache keeps it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// Never (the kernel writes back when it likes, typically within 30 s; the cheapest);
    /// published files are still renamed whole.
    #[default]
    Never,
    /// After every batch written: every batch of lines (JSON lines), every round of ring
    /// pages moved (trace.dat spools), every perf.data write, every flight dump. What was
    /// written is on disk before the next batch is written.
    Batch,
    /// At a write this long after the last sync (e.g. `1s`, `200ms`), when the output is
    /// idle with an unsynced write past it (JSON lines: checked every 200 ms), and at the
    /// end.
    Interval(Duration),
}

impl FromStr for FsyncPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "never" => Ok(FsyncPolicy::Never),
            "batch" => Ok(FsyncPolicy::Batch),
            other => match humantime::parse_duration(other) {
                Ok(d) if !d.is_zero() => Ok(FsyncPolicy::Interval(d)),
                Ok(_) => Err("an --fsync interval must be more than 0 (or use batch)".into()),
                Err(e) => Err(format!(
                    "--fsync takes never, batch or an interval such as 1s or 200ms ({other:?}: {e})"
                )),
            },
        }
    }
}

impl FsyncPolicy {
    /// Whether files are ever synced (published files: before their rename).
    pub fn syncs(self) -> bool {
        self != FsyncPolicy::Never
    }
}

static POLICY: OnceLock<FsyncPolicy> = OnceLock::new();

/// Choose the process's policy (the first call wins; `record` calls it once).
pub fn set_policy(p: FsyncPolicy) {
    let _ = POLICY.set(p);
}

/// The process's policy ([`FsyncPolicy::Never`] unless [`set_policy`] said otherwise).
pub fn policy() -> FsyncPolicy {
    POLICY.get().copied().unwrap_or_default()
}

/// Per output: when it last synced, and whether a write since then is unsynced.
#[derive(Debug)]
pub struct Syncer {
    policy: FsyncPolicy,
    last: Instant,
    dirty: bool,
}

impl Syncer {
    /// A syncer under `policy`.
    pub fn new(policy: FsyncPolicy) -> Self {
        Syncer {
            policy,
            last: Instant::now(),
            dirty: false,
        }
    }

    /// A syncer under the process's [`policy`].
    pub fn current() -> Self {
        Self::new(policy())
    }

    /// The policy.
    pub fn policy(&self) -> FsyncPolicy {
        self.policy
    }

    /// `file` was written to: sync its data if the policy says so now.
    pub fn wrote(&mut self, file: &File) -> io::Result<()> {
        self.dirty = true;
        let due = match self.policy {
            FsyncPolicy::Never => false,
            FsyncPolicy::Batch => true,
            FsyncPolicy::Interval(d) => self.last.elapsed() >= d,
        };
        if due { self.sync(file) } else { Ok(()) }
    }

    /// Nothing written for a while: sync an unsynced write once its interval is over
    /// (an output with an idle hook calls this, so a quiet period does not leave the
    /// last batch unsynced until the next write).
    pub fn tick(&mut self, file: &File) -> io::Result<()> {
        match self.policy {
            FsyncPolicy::Interval(d) if self.dirty && self.last.elapsed() >= d => self.sync(file),
            _ => Ok(()),
        }
    }

    /// The end of `file` (closing, rotating): sync what is unsynced, unless `never`.
    pub fn finish(&mut self, file: &File) -> io::Result<()> {
        if self.dirty && self.policy.syncs() {
            self.sync(file)
        } else {
            Ok(())
        }
    }

    fn sync(&mut self, file: &File) -> io::Result<()> {
        file.sync_data()?;
        self.last = Instant::now();
        self.dirty = false;
        Ok(())
    }
}

/// Sync the directory holding `path` (so a rename or creation in it survives a power
/// cut).
pub fn sync_dir_of(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

/// `.NAME.SUFFIX` beside `path` (a hidden file in the same directory).
pub fn hidden_beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(suffix);
    path.with_file_name(name)
}

/// Rename `from` to `to` unless `to` exists (`renameat2(RENAME_NOREPLACE)`; where the
/// file system cannot, a link and an unlink, which also never replace).
pub fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt as _;
    let cstr = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a path"))
    };
    let (f, t) = (cstr(from)?, cstr(to)?);
    // SAFETY: two NUL-terminated paths that live across the call; AT_FDCWD is valid.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::EINVAL) {
        return Err(e);
    }
    std::fs::hard_link(from, to)?;
    std::fs::remove_file(from)
}

/// A file being written under a hidden temporary name in its final directory
/// (`.NAME.uevrec-tmp`), to appear whole under its final name at [`Publish::commit`]
/// (synced as the policy asks, renamed never over an existing file, the directory synced):
/// a crash at any point leaves either no file under the final name, or the whole file.
/// Dropped without a commit, the temporary file is removed.
#[derive(Debug)]
pub struct Publish {
    tmp: PathBuf,
    target: PathBuf,
    file: Option<File>,
}

/// The suffix of temporary files (`.NAME.uevrec-tmp`).
pub const TMP_SUFFIX: &str = ".uevrec-tmp";

impl Publish {
    /// Start writing what will be `target` (mode `mode` exactly): `.NAME.uevrec-tmp`
    /// beside it, new (a leftover of a killed run with that name is replaced: it never
    /// held a published file).
    pub fn create(target: &Path, mode: u32) -> io::Result<Self> {
        let tmp = hidden_beside(target, TMP_SUFFIX);
        match std::fs::remove_file(&tmp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let file = OpenOptions::new()
            .write(true)
            .read(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(&tmp)?;
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        Ok(Publish {
            tmp,
            target: target.to_owned(),
            file: Some(file),
        })
    }

    /// The file being written.
    pub fn file(&mut self) -> &mut File {
        self.file.as_mut().expect("open until committed")
    }

    /// The final name.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// The temporary name.
    pub fn tmp(&self) -> &Path {
        &self.tmp
    }

    /// Sync the file (unless `policy` is `never`), rename it to its final name (never
    /// over an existing file), sync the directory (unless `never`).
    pub fn commit(mut self, policy: FsyncPolicy) -> io::Result<PathBuf> {
        let file = self.file.take().expect("committed once");
        if policy.syncs() {
            file.sync_all()?;
        }
        drop(file);
        rename_noreplace(&self.tmp, &self.target)?;
        if policy.syncs() {
            sync_dir_of(&self.target)?;
        }
        Ok(std::mem::take(&mut self.target))
    }
}

impl Drop for Publish {
    fn drop(&mut self) {
        if self.file.is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn policies_parse_and_bad_ones_say_the_choices() {
        assert_eq!("never".parse(), Ok(FsyncPolicy::Never));
        assert_eq!("batch".parse(), Ok(FsyncPolicy::Batch));
        assert_eq!(
            "250ms".parse(),
            Ok(FsyncPolicy::Interval(Duration::from_millis(250)))
        );
        let e = "sometimes".parse::<FsyncPolicy>().unwrap_err();
        assert!(e.contains("never, batch or an interval"), "{e}");
        assert!("0s".parse::<FsyncPolicy>().is_err());
    }

    #[test]
    fn a_published_file_appears_only_whole_and_never_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("f.json");
        let mut p = Publish::create(&target, 0o600).unwrap();
        p.file().write_all(b"part").unwrap();
        assert!(
            !target.exists(),
            "nothing under the final name before commit"
        );
        assert!(dir.path().join(".f.json.uevrec-tmp").exists());
        p.file().write_all(b" whole\n").unwrap();
        p.commit(FsyncPolicy::Batch).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "part whole\n");
        assert!(!dir.path().join(".f.json.uevrec-tmp").exists());
        // Never over an existing file.
        let mut q = Publish::create(&target, 0o600).unwrap();
        q.file().write_all(b"other").unwrap();
        let e = q.commit(FsyncPolicy::Never).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "part whole\n");
        // Dropped uncommitted: the temporary file goes.
        drop(Publish::create(&target, 0o600).unwrap());
        assert!(!dir.path().join(".f.json.uevrec-tmp").exists());
    }

    #[test]
    fn a_syncer_syncs_as_its_policy_says() {
        let dir = tempfile::tempdir().unwrap();
        let f = File::create(dir.path().join("x")).unwrap();
        let mut s = Syncer::new(FsyncPolicy::Interval(Duration::from_secs(3600)));
        s.wrote(&f).unwrap();
        assert!(
            s.dirty,
            "an interval not yet over leaves the write unsynced"
        );
        s.finish(&f).unwrap();
        assert!(!s.dirty, "the end syncs");
        let mut b = Syncer::new(FsyncPolicy::Batch);
        b.wrote(&f).unwrap();
        assert!(!b.dirty);
        let mut n = Syncer::new(FsyncPolicy::Never);
        n.wrote(&f).unwrap();
        n.finish(&f).unwrap();
        assert!(n.dirty, "never syncs nothing");
    }
}
