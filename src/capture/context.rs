//! The start of the records' context (`comm`, `cgroup`; the tracking itself is the
//! backends' and the formatter's, `uevrec_parsers::context`): what every thread is
//! called and which cgroup it is in when the session starts, from `/proc`, and the path
//! of every cgroup, from the cgroup v2 hierarchy. The session stages it as
//! [`ContextUpdate`]s right after the backend starts tracking, so nothing that happens
//! in between is missed.
//!
//! A cgroup's id (what `PERF_SAMPLE_CGROUP` and `PERF_RECORD_CGROUP` carry) is its
//! kernfs node id, which is also the inode number of its directory on 64-bit kernels
//! (`kernfs_ino()`); the walk reads it with `stat`.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use uevrec_parsers::ContextUpdate;
use uevrec_parsers::context::MAX_CGROUPS;

use crate::capture::tracefs::mount_of;

/// Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup` on most systems), if it is.
pub fn cgroup_root() -> Option<PathBuf> {
    let mounts = fs::read_to_string("/proc/self/mounts").ok()?;
    mount_of(&mounts, "cgroup2")
}

/// Hand `f` a [`ContextUpdate::Cgroup`] for every cgroup under `root` (the root itself
/// is `/`), at most [`MAX_CGROUPS`] of them (what the formatter keeps). Directories that
/// vanish during the walk are skipped.
pub fn scan_cgroups(root: &Path, f: &mut dyn FnMut(ContextUpdate<'_>)) {
    let mut stack = vec![(root.to_path_buf(), String::from("/"))];
    let mut n = 0;
    while let Some((dir, path)) = stack.pop() {
        let Ok(meta) = fs::metadata(&dir) else {
            continue;
        };
        f(ContextUpdate::Cgroup {
            id: meta.ino(),
            path: path.as_bytes(),
        });
        n += 1;
        if n >= MAX_CGROUPS {
            return;
        }
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                let name = e.file_name().to_string_lossy().into_owned();
                let child = if path == "/" {
                    format!("/{name}")
                } else {
                    format!("{path}/{name}")
                };
                stack.push((e.path(), child));
            }
        }
    }
}

/// The cgroup v2 path in a `/proc/<pid>/cgroup` text (the `0::<path>` line).
pub fn v2_path(text: &str) -> Option<&str> {
    text.lines().find_map(|l| l.strip_prefix("0::"))
}

/// Hand `f` the name ([`ContextUpdate::Comm`]) and, with a cgroup v2 `root`, the cgroup
/// ([`ContextUpdate::ThreadCgroup`]) of every thread in `/proc`. Threads that exit
/// during the scan are skipped. The thread ids are those of the pid namespace `/proc`
/// was mounted for (docs/json-lines.md, "pid namespaces").
pub fn scan_threads(cgroup_root: Option<&Path>, f: &mut dyn FnMut(ContextUpdate<'_>)) {
    let Ok(procs) = fs::read_dir("/proc") else {
        return;
    };
    for p in procs.flatten() {
        let name = p.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        // Threads of one process share its cgroup (threaded cgroups aside: each thread
        // then gets its own from the kernel's records).
        let cgroup = cgroup_root.and_then(|root| {
            let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
            let rel = v2_path(&text)?.trim_start_matches('/');
            Some(fs::metadata(root.join(rel)).ok()?.ino())
        });
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(comm) = fs::read(t.path().join("comm")) else {
                continue;
            };
            let comm = comm.strip_suffix(b"\n").unwrap_or(&comm);
            f(ContextUpdate::Comm { tid, comm });
            if let Some(id) = cgroup {
                f(ContextUpdate::ThreadCgroup { tid, id });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_lines() {
        assert_eq!(
            v2_path("0::/user.slice/a.scope\n"),
            Some("/user.slice/a.scope")
        );
        assert_eq!(v2_path("1:name=systemd:/x\n0::/\n"), Some("/"));
        assert_eq!(v2_path("1:cpu:/x\n"), None);
    }

    #[test]
    fn this_thread_is_found_with_its_name_and_cgroup() {
        let root = cgroup_root();
        let own = std::process::id();
        let (mut comm, mut cgroup) = (None, None);
        scan_threads(root.as_deref(), &mut |u| match u {
            ContextUpdate::Comm { tid, comm: c } if tid == own => comm = Some(c.to_vec()),
            ContextUpdate::ThreadCgroup { tid, id } if tid == own => cgroup = Some(id),
            _ => {}
        });
        let want = fs::read("/proc/self/comm").unwrap();
        assert_eq!(comm.as_deref(), Some(want.strip_suffix(b"\n").unwrap()));
        if let Some(root) = root {
            // The id is the one the walk gives this process's cgroup directory.
            let text = fs::read_to_string("/proc/self/cgroup").unwrap();
            let path = v2_path(&text).unwrap().to_string();
            let mut found = None;
            scan_cgroups(&root, &mut |u| {
                if let ContextUpdate::Cgroup { id, path: p } = u {
                    if p == path.as_bytes() {
                        found = Some(id);
                    }
                }
            });
            assert_eq!(cgroup, found, "{path}");
            assert!(found.is_some(), "{path} not found under {}", root.display());
        }
    }
}
