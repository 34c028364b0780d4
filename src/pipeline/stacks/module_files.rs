//! Which file names a process's frames: the file at the mapped path in uevrec's mount
//! namespace, or, for a process in another one (a container), the file it mapped,
//! opened through `/proc/PID/root/PATH` (or `/proc/PID/map_files/`) while it lives and
//! held open, so its frames keep their names after it exits.
//!
//! A file is only taken when it is the one mapped: its GNU build id (from the kernel's
//! MMAP2) must match, or, without one, its device and inode (from `/proc/PID/maps`);
//! otherwise the frame says why it has no names ([`ModuleFile::Refused`]): a file of the
//! same path in our namespace never lends its names to a container's program.
//! docs/stacks.md ("Programs in containers") tells each case.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Mutex};

/// Files held open for processes of other mount namespaces, uevrec-wide (each a
/// descriptor; distinct files only: every process of one image shares them). Past it,
/// frames in new such files say `too_many_files`.
pub const MAX_HELD_FILES: usize = 128;
/// Paths whose build id in our namespace is kept (with the file's identity, checked
/// again at every look-up).
pub const MAX_CHECKED_PATHS: usize = 4096;

/// Where the frames of one mapping are named from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModuleFile {
    /// The file at the mapped path (our mount namespace).
    AtPath,
    /// A file uevrec holds open: the path to open it by (`/proc/self/fd/N`).
    Held(Arc<str>),
    /// No file may name these frames: why (the frame's `unsymbolized` value).
    Refused(&'static str),
}

impl ModuleFile {
    /// The path to read for a mapping of `path`, or why there is none.
    pub fn open_path<'a>(&'a self, path: &'a Arc<str>) -> Result<&'a Arc<str>, &'static str> {
        match self {
            ModuleFile::AtPath => Ok(path),
            ModuleFile::Held(fd) => Ok(fd),
            ModuleFile::Refused(why) => Err(why),
        }
    }
}

/// What a mapping tells of its file.
#[derive(Debug, Clone, Copy)]
pub struct Mapped<'a> {
    /// The process.
    pub pid: u32,
    /// The mapped path, as the process sees it.
    pub path: &'a str,
    /// The mapping's first address and one past its last.
    pub range: (u64, u64),
    /// The GNU build id (empty: the kernel gave none).
    pub build_id: &'a [u8],
    /// Device and inode (from `/proc/PID/maps`; `None` from the kernel's records).
    pub inode: Option<(u64, u64)>,
}

/// A process's mount namespace compared with ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Namespace {
    /// The same as uevrec's: paths mean the same files.
    Ours,
    /// Another one: its files are reached through `/proc/PID/root`.
    Other,
    /// Unknown: the process exited (or its namespace cannot be read).
    Gone,
}

/// The mount namespace of `pid` against ours.
pub fn namespace(pid: u32) -> Namespace {
    let ours = OUR_NAMESPACE.get_or_init(|| namespace_inode("self"));
    match (namespace_inode(&pid.to_string()), ours) {
        (Some(theirs), Some(ours)) if theirs == *ours => Namespace::Ours,
        (Some(_), Some(_)) => Namespace::Other,
        _ => Namespace::Gone,
    }
}

/// Our mount namespace's inode (read once).
static OUR_NAMESPACE: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();

/// The inode of `/proc/WHO/ns/mnt` (a mount namespace's identity).
fn namespace_inode(who: &str) -> Option<u64> {
    std::fs::metadata(format!("/proc/{who}/ns/mnt"))
        .ok()
        .map(|m| m.ino())
}

/// Where the frames of `mapped` are named from, its process's namespace being `ns`.
pub fn locate(mapped: &Mapped<'_>, ns: Namespace) -> ModuleFile {
    match ns {
        Namespace::Ours => checked_here(mapped, true),
        Namespace::Gone => checked_here(mapped, false),
        Namespace::Other => held(mapped),
    }
}

/// The file at the path here, if it is the one mapped. `alive`: the process was in our
/// namespace when looked at, so the path is its path (without an identity to compare,
/// it is taken as it is, as before any container); a process gone before it was looked
/// at may have lived in another namespace: without a build id nothing tells whether
/// our file is its file (`unverified`).
fn checked_here(mapped: &Mapped<'_>, alive: bool) -> ModuleFile {
    if mapped.build_id.is_empty() {
        return if alive {
            ModuleFile::AtPath
        } else {
            ModuleFile::Refused("unverified")
        };
    }
    match build_id_here(mapped.path) {
        Ok(id) if *id == *mapped.build_id => ModuleFile::AtPath,
        Ok(_) => ModuleFile::Refused("build_id_mismatch"),
        Err(why) => ModuleFile::Refused(why),
    }
}

/// The build id of the file at `path` in our namespace now (`gone`: no file there;
/// `build_id_mismatch`: a file without one, so not the build mapped), cached by path and
/// checked against the file's identity (device, inode, size, change time).
fn build_id_here(path: &str) -> Result<Arc<[u8]>, &'static str> {
    type Checked = HashMap<Arc<str>, (Identity, Arc<[u8]>)>;
    static CHECKED: Mutex<Option<Checked>> = Mutex::new(None);
    let key = identity(&std::fs::metadata(path).map_err(|_| "gone")?);
    let mut checked = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
    let checked = checked.get_or_insert_with(HashMap::new);
    if let Some((k, id)) = checked.get(path)
        && *k == key
    {
        return Ok(id.clone());
    }
    let id: Arc<[u8]> = match blazesym::helper::read_elf_build_id(path) {
        Ok(Some(id)) => Arc::from(&id[..]),
        Ok(None) => return Err("build_id_mismatch"),
        Err(_) => return Err("unreadable"),
    };
    if checked.len() >= MAX_CHECKED_PATHS {
        checked.clear();
    }
    checked.insert(path.into(), (key, id.clone()));
    Ok(id)
}

/// A file's device, inode, size and change time (s, ns): another file, or the same
/// changed, has another.
pub type Identity = (u64, u64, u64, i64, i64);

/// The [`Identity`] of the file `meta` describes.
pub fn identity(meta: &std::fs::Metadata) -> Identity {
    (
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.ctime(),
        meta.ctime_nsec(),
    )
}

/// The files held open for other namespaces, by identity.
#[derive(Default)]
struct HeldFiles {
    /// By build id.
    by_build_id: HashMap<Arc<[u8]>, Arc<str>>,
    /// By device and inode (of the file opened).
    by_inode: HashMap<(u64, u64), Arc<str>>,
    /// The descriptors (never closed: a `/proc/self/fd/N` path names one file for good,
    /// so the caches keyed by it stay right).
    files: Vec<File>,
}

static HELD: Mutex<Option<HeldFiles>> = Mutex::new(None);

/// The file a process of another namespace mapped, held open (or why not).
fn held(mapped: &Mapped<'_>) -> ModuleFile {
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    let held = held.get_or_insert_with(HeldFiles::default);
    if let Some(fd) = held.by_build_id.get(mapped.build_id) {
        return ModuleFile::Held(fd.clone());
    }
    let (file, how) = match open_mapped(mapped) {
        Ok(found) => found,
        Err(why) => return ModuleFile::Refused(why),
    };
    let Ok(meta) = file.metadata() else {
        return ModuleFile::Refused("unreadable");
    };
    let inode = (meta.dev(), meta.ino());
    let fd_path: Arc<str> = format!("/proc/self/fd/{}", file.as_raw_fd()).into();
    if !mapped.build_id.is_empty() {
        // Through the path: the file there now must be the build mapped.
        match blazesym::helper::read_elf_build_id(&*fd_path) {
            Ok(Some(id)) if *id == *mapped.build_id => {}
            Ok(_) => return ModuleFile::Refused("build_id_mismatch"),
            Err(_) => return ModuleFile::Refused("unreadable"),
        }
    } else if how == Opened::ThroughRoot && mapped.inode != Some(inode) {
        // No build id, and the path may lead elsewhere now: only the inode can tell.
        return ModuleFile::Refused("unverified");
    }
    if let Some(fd) = held.by_inode.get(&inode) {
        return ModuleFile::Held(fd.clone());
    }
    if held.files.len() >= MAX_HELD_FILES {
        return ModuleFile::Refused("too_many_files");
    }
    if !mapped.build_id.is_empty() {
        held.by_build_id
            .insert(Arc::from(mapped.build_id), fd_path.clone());
    }
    held.by_inode.insert(inode, fd_path.clone());
    held.files.push(file);
    ModuleFile::Held(fd_path)
}

/// How a file of another namespace was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opened {
    /// `/proc/PID/map_files/START-END`: the mapping's own file.
    MapFiles,
    /// `/proc/PID/root/PATH`: whatever lies at the path in its namespace now.
    ThroughRoot,
}

/// Open the file of `mapped` in its process's namespace: with a build id to check it
/// by, through `/proc/PID/root`; without one, the mapping's own file
/// (`/proc/PID/map_files`, which the kernel opens for CAP_SYS_ADMIN only), else through
/// the root (checked by inode by the caller).
fn open_mapped(mapped: &Mapped<'_>) -> Result<(File, Opened), &'static str> {
    let pid = mapped.pid;
    let through_root = || {
        File::open(format!("/proc/{pid}/root{}", mapped.path))
            .map(|f| (f, Opened::ThroughRoot))
            .map_err(|_| "gone")
    };
    if !mapped.build_id.is_empty() {
        return through_root();
    }
    let (start, end) = mapped.range;
    File::open(format!("/proc/{pid}/map_files/{start:x}-{end:x}"))
        .map(|f| (f, Opened::MapFiles))
        .or_else(|_| through_root())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn this_binary() -> (String, Vec<u8>) {
        let exe = std::env::current_exe().unwrap();
        let id = blazesym::helper::read_elf_build_id(&exe).unwrap().unwrap();
        (exe.to_string_lossy().into_owned(), id.to_vec())
    }

    #[test]
    fn our_namespace_checks_the_build_id() {
        let (path, id) = this_binary();
        let mapped = |build_id| Mapped {
            pid: std::process::id(),
            path: &path,
            range: (0, 0),
            build_id,
            inode: None,
        };
        assert_eq!(namespace(std::process::id()), Namespace::Ours);
        assert_eq!(locate(&mapped(&id), Namespace::Ours), ModuleFile::AtPath);
        assert_eq!(
            locate(&mapped(&[1, 2, 3]), Namespace::Ours),
            ModuleFile::Refused("build_id_mismatch")
        );
        assert_eq!(locate(&mapped(&[]), Namespace::Ours), ModuleFile::AtPath);
        // Gone before it was looked at: only a build id can tell.
        assert_eq!(locate(&mapped(&id), Namespace::Gone), ModuleFile::AtPath);
        assert_eq!(
            locate(&mapped(&[]), Namespace::Gone),
            ModuleFile::Refused("unverified")
        );
        let gone = Mapped {
            path: "/nonexistent/uevrec-module",
            ..mapped(&id)
        };
        assert_eq!(locate(&gone, Namespace::Gone), ModuleFile::Refused("gone"));
    }

    #[test]
    fn another_namespace_holds_the_file_through_the_process() {
        // Our own process through /proc/self/root stands for a container's: the same
        // opening, the same checks.
        let (path, id) = this_binary();
        let mapped = Mapped {
            pid: std::process::id(),
            path: &path,
            range: (0, 0),
            build_id: &id,
            inode: None,
        };
        let ModuleFile::Held(fd) = locate(&mapped, Namespace::Other) else {
            panic!("not held");
        };
        assert!(fd.starts_with("/proc/self/fd/"), "{fd}");
        // The same build again: the same descriptor.
        assert_eq!(
            locate(&mapped, Namespace::Other),
            ModuleFile::Held(fd.clone())
        );
        let wrong = Mapped {
            build_id: &[9; 20],
            ..mapped
        };
        assert_eq!(
            locate(&wrong, Namespace::Other),
            ModuleFile::Refused("build_id_mismatch")
        );
        let no_id_wrong_inode = Mapped {
            build_id: &[],
            range: (1, 2),
            inode: Some((0, 0)),
            ..mapped
        };
        // No mapping at 1-2: through the root, whose inode is not the one mapped.
        assert_eq!(
            locate(&no_id_wrong_inode, Namespace::Other),
            ModuleFile::Refused("unverified")
        );
    }
}
