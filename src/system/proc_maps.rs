//! The executable mappings of a live process, from `/proc/PID/maps`: what names its
//! stack frames (the formatter's `pipeline::stacks::maps`), and what the ftrace backend
//! stages for a process at its first stack (it has no `PERF_RECORD_MMAP2`).

use std::sync::Arc;

/// Mappings kept per process at most (later ones are not kept: their frames are named
/// by address only, with the reason `no_mapping`).
pub const MAX_MAPPINGS: usize = 1024;

/// One executable mapping of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcMapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Offset in the file of `start`.
    pub pgoff: u64,
    /// The file (`[vdso]`, `//anon` … for no file).
    pub path: Arc<str>,
    /// The GNU build id, if the kernel gave it.
    pub build_id: Arc<[u8]>,
    /// Device and inode of the file (from `/proc/PID/maps`; the kernel's records give a
    /// build id instead).
    pub inode: Option<(u64, u64)>,
}

impl ProcMapping {
    /// Whether `address` lies in it.
    pub fn contains(&self, address: u64) -> bool {
        self.start <= address && address < self.end
    }

    /// The offset in the file of `address` (inside the mapping).
    pub fn file_offset(&self, address: u64) -> u64 {
        // start <= address < end: no overflow below; pgoff + a mapping's length fits.
        address
            .saturating_sub(self.start)
            .saturating_add(self.pgoff)
    }
}

/// The executable file mappings of a running process (`None` when it is gone).
pub fn read_proc_maps(pid: u32) -> Option<Vec<ProcMapping>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    Some(
        text.lines()
            .filter_map(parse_maps_line)
            .take(MAX_MAPPINGS)
            .collect(),
    )
}

/// The executable mappings of every process running now, `f(pid, mapping)` for each
/// (what `perf record` synthesizes at its start; kernel threads have none).
pub fn each_running(f: &mut dyn FnMut(u32, &ProcMapping)) {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        for m in read_proc_maps(pid).into_iter().flatten() {
            f(pid, &m);
        }
    }
}

/// One line of `/proc/PID/maps` (`start-end perms offset dev inode path`), if it maps
/// executable memory.
pub fn parse_maps_line(line: &str) -> Option<ProcMapping> {
    let mut parts = line.splitn(6, ' ');
    let (start, end) = parts.next()?.split_once('-')?;
    let perms = parts.next()?;
    if !perms.contains('x') {
        return None;
    }
    let pgoff = u64::from_str_radix(parts.next()?, 16).ok()?;
    let (major, minor) = parts.next()?.split_once(':')?;
    let inode: u64 = parts.next()?.parse().ok()?;
    let path = parts.next().unwrap_or("").trim_start();
    let dev = libc::makedev(
        u32::from_str_radix(major, 16).ok()?,
        u32::from_str_radix(minor, 16).ok()?,
    );
    Some(ProcMapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        pgoff,
        path: if path.is_empty() { "//anon" } else { path }.into(),
        build_id: Arc::from(&[][..]),
        inode: (inode != 0).then_some((dev, inode)),
    })
}

/// A page of executable anonymous memory in this process, unmapped when dropped: where
/// tests put the "JIT code" that stack tests name (perf maps, reads of new mappings).
#[cfg(test)]
pub struct ExecutablePage(std::ptr::NonNull<libc::c_void>);

#[cfg(test)]
impl ExecutablePage {
    /// Map a fresh page (panics when the kernel refuses it).
    pub fn map() -> Self {
        // SAFETY: a fresh anonymous mapping; nothing else refers to it.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(page, libc::MAP_FAILED);
        ExecutablePage(std::ptr::NonNull::new(page).expect("mmap gives no null page"))
    }

    /// Its first address.
    pub fn address(&self) -> u64 {
        self.0.as_ptr() as u64
    }
}

#[cfg(test)]
impl Drop for ExecutablePage {
    fn drop(&mut self) {
        // SAFETY: the page mapped in `map`, which only this value refers to.
        unsafe { libc::munmap(self.0.as_ptr(), 4096) };
    }
}
