//! For a recorded file (`uevrec decode`): whether the module at a path is still the one
//! the recording mapped. The kernel's `PERF_RECORD_MMAP2` carries the GNU build id of the
//! file it mapped; the file at that path now is read once for its own (blazesym's
//! `read_elf_build_id`: the note section only), and a frame whose ids differ is not named
//! from the wrong file. Without a recorded build id (mappings read from `/proc`, or a
//! kernel that gave none) nothing can be checked: the file on disk is taken as it is
//! (docs/stacks.md says so).

use std::collections::HashMap;
use std::sync::Arc;

/// Paths whose build id is kept at most (started again when full).
pub const MAX_PATHS: usize = 4096;

/// The build id of each module read so far.
#[derive(Debug, Default)]
pub struct BuildIds {
    /// Path → its build id now (`Err`: the file cannot be read, or has no build id).
    on_disk: HashMap<Arc<str>, Result<Arc<[u8]>, &'static str>>,
}

impl BuildIds {
    /// Why `path` must not name frames recorded with `recorded` (its build id then), or
    /// `None` when it may: `build_id_mismatch` (another build lies there now), `gone`
    /// (no file there now); a file without a build id now, or none recorded: `None`
    /// (nothing to compare).
    pub fn differs(&mut self, path: &Arc<str>, recorded: &[u8]) -> Option<&'static str> {
        if recorded.is_empty() {
            return None;
        }
        if self.on_disk.len() >= MAX_PATHS {
            self.on_disk.clear();
        }
        let now = self
            .on_disk
            .entry(Arc::clone(path))
            .or_insert_with(|| read(path));
        match now {
            Ok(id) if id[..] == *recorded => None,
            Ok(_) => Some("build_id_mismatch"),
            Err(why) => (*why == "gone").then_some("gone"),
        }
    }
}

/// The build id of the file at `path` now.
fn read(path: &str) -> Result<Arc<[u8]>, &'static str> {
    if !std::path::Path::new(path).exists() {
        return Err("gone");
    }
    match blazesym::helper::read_elf_build_id(path) {
        Ok(Some(id)) => Ok(Arc::from(&id[..])),
        Ok(None) => Err("no_build_id"),
        Err(_) => Err("unreadable"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_with_the_file_on_disk() {
        let exe: Arc<str> = std::env::current_exe()
            .unwrap()
            .to_string_lossy()
            .into_owned()
            .into();
        let mut ids = BuildIds::default();
        let own = read(&exe).expect("the test binary has a build id");
        assert_eq!(ids.differs(&exe, &own), None);
        assert_eq!(ids.differs(&exe, &[1, 2, 3]), Some("build_id_mismatch"));
        assert_eq!(ids.differs(&exe, &[]), None);
        let gone: Arc<str> = "/nonexistent/uevrec-gone".into();
        assert_eq!(ids.differs(&gone, &[1]), Some("gone"));
    }
}
