//! Process names for `uevrec top`: `/proc/<pid>/comm`, read once per pid and cached.
//!
//! Only the pids a display shows are looked up (a few per event and interval, on the
//! display thread, never per record). The cache holds at most [`MAX_CACHED`] names and
//! is emptied when full, so it stays bounded on a machine that starts processes all day.
//! A pid the kernel reuses for another program keeps the old name until then; a process
//! gone before it was looked up shows as [`GONE`].

use std::collections::HashMap;
use std::path::PathBuf;

/// Names cached before the cache is emptied.
pub const MAX_CACHED: usize = 4096;

/// The name shown for a process whose `/proc/<pid>/comm` could not be read (it exited).
pub const GONE: &str = "?";

/// pid → process name, from a proc directory.
#[derive(Debug)]
pub struct CommCache {
    proc_root: PathBuf,
    names: HashMap<u32, String>,
}

impl Default for CommCache {
    fn default() -> Self {
        CommCache::new("/proc")
    }
}

impl CommCache {
    /// A cache reading `<proc_root>/<pid>/comm`.
    pub fn new(proc_root: impl Into<PathBuf>) -> Self {
        CommCache {
            proc_root: proc_root.into(),
            names: HashMap::new(),
        }
    }

    /// The name of `pid` (pid 0: `swapper`, the idle task, which has no /proc entry).
    pub fn name(&mut self, pid: u32) -> &str {
        if pid == 0 {
            return "swapper";
        }
        if !self.names.contains_key(&pid) && self.names.len() >= MAX_CACHED {
            self.names.clear();
        }
        let root = &self.proc_root;
        self.names.entry(pid).or_insert_with(|| {
            std::fs::read_to_string(root.join(pid.to_string()).join("comm"))
                .map(|s| s.trim_end_matches('\n').to_owned())
                .unwrap_or_else(|_| GONE.to_owned())
        })
    }

    /// Names cached now.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no name is cached.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_once_caches_and_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let comm = |pid: u32, name: &str| {
            let d = dir.path().join(pid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("comm"), format!("{name}\n")).unwrap();
        };
        comm(42, "myapp");
        let mut cache = CommCache::new(dir.path());
        assert_eq!(cache.name(42), "myapp");
        // Read once: a rename on disk is not seen while cached.
        comm(42, "renamed");
        assert_eq!(cache.name(42), "myapp");
        assert_eq!(cache.name(43), GONE);
        assert_eq!(cache.name(0), "swapper");
        assert_eq!(cache.len(), 2);
        for pid in 1000..1000 + MAX_CACHED as u32 {
            cache.name(pid);
        }
        assert!(cache.len() <= MAX_CACHED);
        // Emptied when full: looked up afresh.
        assert_eq!(cache.name(42), "renamed");
    }

    #[test]
    fn reads_this_process() {
        let mut cache = CommCache::default();
        let me = std::fs::read_to_string("/proc/self/comm").unwrap();
        assert_eq!(cache.name(std::process::id()), me.trim_end());
    }
}
