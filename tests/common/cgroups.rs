//! A cgroup v2 tree made by a test, removed (children first) when dropped, also when the
//! test fails (host tier: tests/host/context.rs, tests/host/k8s.rs).

use std::fs;
use std::path::{Path, PathBuf};

/// The cgroup at the path (made by the test) and everything under it, removed when
/// dropped. A cgroup with live processes cannot go: the producers have exited by then.
pub struct Cgroups(pub PathBuf);

impl Drop for Cgroups {
    fn drop(&mut self) {
        let mut dirs = walk(&self.0);
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for d in dirs {
            let _ = fs::remove_dir(&d);
        }
    }
}

/// `dir` and every directory under it.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(walk(&e.path()));
        }
    }
    out
}
