//! For a recorded file (`uevrec decode`): which file names the frames of a module the
//! recording mapped. The kernel's `PERF_RECORD_MMAP2` carries the GNU build id of the
//! file it mapped; the file at that path now is read once for its own (blazesym's
//! `read_elf_build_id`: the note section only). When it is another build, or gone, the
//! build is looked for by its id where perf and distributions keep binaries
//! ([`by_build_id`]: perf's build-id cache, the debug directories' `.build-id` trees;
//! then the debuginfod servers of `DEBUGINFOD_URLS`, [`super::debuginfod`]);
//! a module found nowhere is not named from the wrong file, and is listed in a notice
//! at the end of the decoding ([`take_notice`]). Without a recorded build id (a kernel
//! that gave none, `perf record` without `--buildid-mmap`) nothing can be checked: the
//! file on disk is taken as it is (docs/stacks.md says so).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::debuginfod::Artifact;

/// Paths whose build id is kept at most (started again when full).
pub const MAX_PATHS: usize = 4096;
/// Modules not found listed in the notice at most (the rest counted).
const MAX_LISTED: usize = 64;

/// The file a build was found in, or why none.
type Located = Result<Arc<str>, &'static str>;

/// The modules found nowhere: path → (build id in hex, why), and how many more were not
/// listed.
type Missing = (BTreeMap<String, (String, &'static str)>, u64);

/// The build id of each module read so far, and where each build was found.
#[derive(Debug, Default)]
pub struct BuildIds {
    /// Path → its build id now (`Err`: the file cannot be read, or has no build id).
    on_disk: HashMap<Arc<str>, Result<Arc<[u8]>, &'static str>>,
    /// `(path, recorded build id)` of a module whose path holds another build or
    /// nothing → the file of that build found elsewhere, or why none.
    elsewhere: HashMap<(Arc<str>, Arc<[u8]>), Located>,
}

impl BuildIds {
    /// The file to name frames recorded in `path` with the build id `recorded` from: the
    /// file at the path when it is that build (or nothing can be compared: no build id
    /// recorded, or none in the file), else the build found by its id ([`by_build_id`]);
    /// otherwise why not: `build_id_mismatch` (another build lies at the path), `gone`
    /// (nothing there), and the module is noted for [`take_notice`].
    pub fn locate(&mut self, path: &Arc<str>, recorded: &[u8]) -> Located {
        let Some(why) = self.differs(path, recorded) else {
            return Ok(Arc::clone(path));
        };
        if self.elsewhere.len() >= MAX_PATHS {
            self.elsewhere.clear();
        }
        let key = (Arc::clone(path), Arc::from(recorded));
        self.elsewhere
            .entry(key)
            .or_insert_with(|| {
                match by_build_id(recorded, &places()).or_else(|| {
                    let d = super::debuginfod::configured()?;
                    let found = d.find(recorded, Artifact::Executable).ok()?;
                    // A server's answer is taken only when it is that build.
                    let found = found.to_str()?;
                    let id = blazesym::helper::read_elf_build_id(found).ok()??;
                    (*id == *recorded).then(|| Arc::from(found))
                }) {
                    Some(found) => Ok(found),
                    None => {
                        note_missing(path, recorded, why);
                        Err(why)
                    }
                }
            })
            .clone()
    }

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

/// Where a build is looked for by its id, in order: `(directory, file under the id's
/// directory)`. perf's build-id cache (`$PERF_BUILDID_DIR`, else `~/.debug`) keeps each
/// binary as `.build-id/xx/REST/elf`; a debug directory (`--debug-dir`, else
/// `/usr/lib/debug`) keeps the binary as `.build-id/xx/REST` beside its `REST.debug`.
pub fn places() -> Vec<(PathBuf, &'static str)> {
    let perf_cache = std::env::var_os("PERF_BUILDID_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".debug")));
    let mut places: Vec<(PathBuf, &'static str)> =
        perf_cache.into_iter().map(|d| (d, "elf")).collect();
    places.extend(super::symbols::debug_dirs().into_iter().map(|d| (d, "")));
    places
}

/// The file of the build `id` in `places` ([`places`]): the first whose own build id is
/// `id` (a file there of another build, or a `.debug` file, is passed over).
pub fn by_build_id(id: &[u8], places: &[(PathBuf, &'static str)]) -> Option<Arc<str>> {
    places.iter().find_map(|(dir, file)| {
        let mut path = super::symbols::build_id_path(dir, id)?;
        if !file.is_empty() {
            path.push(file);
        }
        let path = path.to_str()?;
        match blazesym::helper::read_elf_build_id(path) {
            Ok(Some(found)) if *found == *id => Some(Arc::from(path)),
            _ => None,
        }
    })
}

/// The modules found nowhere so far (uevrec-wide: every formatter worker's).
static MISSING: Mutex<Missing> = Mutex::new((BTreeMap::new(), 0));

/// Note a module found neither at its path nor by its build id.
fn note_missing(path: &str, id: &[u8], why: &'static str) {
    let mut missing = MISSING.lock().unwrap_or_else(|e| e.into_inner());
    if missing.0.contains_key(path) {
        return;
    }
    if missing.0.len() >= MAX_LISTED {
        missing.1 += 1;
        return;
    }
    missing
        .0
        .insert(path.to_string(), (super::symbols::hex(id), why));
}

/// The notice of the modules found nowhere since the last call (`None`: none), in
/// words: each with its build id and why, and where they were looked for.
pub fn take_notice() -> Option<String> {
    let (listed, more) = {
        let mut missing = MISSING.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *missing)
    };
    if listed.is_empty() {
        return None;
    }
    let modules: Vec<String> = (listed.iter())
        .map(|(path, (id, why))| format!("{path} (build id {id}: {why})"))
        .collect();
    let looked: Vec<String> = (places().iter())
        .map(|(dir, file)| {
            let tail = if file.is_empty() {
                String::new()
            } else {
                format!("/{file}")
            };
            format!("{}/.build-id/xx/REST{tail}", dir.display())
        })
        .collect();
    let looked = match super::debuginfod::configured() {
        Some(d) => [looked, vec![format!("debuginfod ({})", d.urls().join(" "))]].concat(),
        None => looked,
    };
    let more = match more {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    Some(format!(
        "frames of {}{more} have no names: the file at the path is another build or gone, \
         and the recorded build was not found by its id in {}; put the binary there \
         (perf buildid-cache -a FILE, or --debug-dir DIR holding DIR/.build-id/xx/REST)",
        modules.join(", "),
        looked.join(", ")
    ))
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

    #[test]
    fn a_build_is_found_by_its_id_in_either_layout() {
        let exe = std::env::current_exe().unwrap();
        let id = read(exe.to_str().unwrap()).unwrap();
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let dir = tempfile::tempdir().unwrap();
        let (cache, debug) = (dir.path().join("cache"), dir.path().join("debug"));
        let places = [(cache.clone(), "elf"), (debug.clone(), "")];
        assert_eq!(by_build_id(&id, &places), None, "nothing there yet");
        // A debug directory's `.build-id/xx/REST`: the binary itself.
        let in_debug = debug.join(".build-id").join(&hex[..2]).join(&hex[2..]);
        std::fs::create_dir_all(in_debug.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&exe, &in_debug).unwrap();
        assert_eq!(by_build_id(&id, &places).as_deref(), in_debug.to_str());
        // perf's cache first: `.build-id/xx/REST/elf`.
        let in_cache = cache.join(".build-id").join(&hex[..2]).join(&hex[2..]);
        std::fs::create_dir_all(&in_cache).unwrap();
        std::os::unix::fs::symlink(&exe, in_cache.join("elf")).unwrap();
        let found = by_build_id(&id, &places);
        assert_eq!(found.as_deref(), in_cache.join("elf").to_str());
        // Another build under the id's name is passed over.
        let mut other = id.to_vec();
        other[0] ^= 1;
        let other_hex: String = other.iter().map(|b| format!("{b:02x}")).collect();
        let wrong = debug.join(".build-id").join(&other_hex[..2]);
        std::fs::create_dir_all(&wrong).unwrap();
        std::os::unix::fs::symlink(&exe, wrong.join(&other_hex[2..])).unwrap();
        assert_eq!(by_build_id(&other, &places), None);
        assert_eq!(by_build_id(&[], &places), None);
    }
}
