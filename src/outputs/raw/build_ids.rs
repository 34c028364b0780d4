//! `record -g --raw`: the build id of every module the file's stacks touch, for its
//! `HEADER_BUILD_ID` feature (what `perf record` writes at its end: `perf buildid-list`
//! lists it, perf script and perf report take each module's symbols only from the build
//! it names), and the build id of each mapping the kernel gave none for (those read from
//! `/proc/PID/maps`), read from the mapping's own file.
//!
//! The modules touched: the file of each user frame of a callchain (looked up in the
//! mappings the file holds, as a reader of it will), every file of the program run of a
//! `--call-graph dwarf` sample (its user frames are unwound by the reader), the kernel
//! when a chain has kernel frames, and each loaded module a kernel frame lies in. Bounded: [`MAX_MODULES`] modules, past it
//! counted ([`Modules::left_out`]).

use std::collections::{BTreeSet, HashMap};
use std::hash::BuildHasher as _;
use std::sync::Arc;

use uevrec_parsers::ContextUpdate;
use uevrec_parsers::callchain::{Callchain, FrameContext};
use uevrec_parsers::perf_data::writer::{self, BuildIdEntry, KERNEL_MAP_NAME};

use crate::pipeline::stacks::maps::ProcessMaps;
use crate::pipeline::stacks::module_files::{Identity, identity};
use crate::system::build_id;

/// Modules listed at most (a `HEADER_BUILD_ID` entry is 100 to 4,200 bytes).
pub const MAX_MODULES: usize = 16_384;
/// `(program run, address)` pairs, and chains, remembered as looked up (each forgotten all
/// at once past it).
const MAX_SEEN: usize = 65_536;
/// Files whose build id is remembered by identity (forgotten all at once past it).
const MAX_FILES: usize = 4096;

/// The modules a file's stacks touch so far.
#[derive(Debug, Default)]
pub struct Modules {
    /// What each process mapped, as the file tells it (no `/proc`: the file's records).
    maps: ProcessMaps,
    /// `(program run, user address)` already looked up.
    seen: foldhash::HashSet<(u64, u64)>,
    /// Hashes of `(program run, chain)` already walked: a program's samples come from a
    /// few call paths, so most samples cost one hash and one look-up.
    chains: foldhash::HashSet<u64>,
    /// Hashes [`Modules::chains`] with.
    hasher: foldhash::fast::FixedState,
    /// Program runs taken whole (`dwarf` samples).
    whole: foldhash::HashSet<u64>,
    /// `(path, build id)` of each user module touched, in name order.
    user: BTreeSet<(Arc<str>, Arc<[u8]>)>,
    /// A chain had kernel frames.
    kernel: bool,
    /// The loaded kernel modules the file maps: `(start, end, name)` by start.
    kernel_modules: Vec<(u64, u64, Arc<str>)>,
    /// The names of those a kernel frame lies in.
    modules_touched: BTreeSet<Arc<str>>,
    /// Modules past [`MAX_MODULES`], not listed.
    left_out: u64,
    /// Build ids read from files, by the file's identity (`None`: it has none).
    files: HashMap<Identity, Option<Arc<[u8]>>>,
}

impl Modules {
    /// Nothing touched yet.
    pub fn new() -> Self {
        Modules::default()
    }

    /// The file maps the loaded kernel modules `modules` (`(start, end, name)`).
    pub fn kernel_modules(&mut self, mut modules: Vec<(u64, u64, Arc<str>)>) {
        modules.sort_unstable_by_key(|m| m.0);
        self.kernel_modules = modules;
    }

    /// A change of what a process maps (an executable mapping, with the build id the
    /// file will carry for it; an exec; a fork; an exit), at `time`.
    pub fn apply(&mut self, time: Option<u64>, update: &ContextUpdate<'_>) {
        self.maps.apply(time, update);
    }

    /// The build id of a mapping the kernel gave none for (process `pid`, addresses
    /// `start..end` of `path`), read from the file the process mapped: the mapping's own
    /// (`/proc/PID/map_files/START-END`, which the kernel opens for CAP_SYS_ADMIN), else
    /// the file at the path in the process's mount namespace (`/proc/PID/root/PATH`). `None`
    /// when the process is gone, the file cannot be read or has no build id, or `path` is
    /// no file (`[vdso]`, `//anon`).
    pub fn read_build_id(
        &mut self,
        pid: u32,
        start: u64,
        end: u64,
        path: &[u8],
    ) -> Option<Arc<[u8]>> {
        if !path.starts_with(b"/") || path.starts_with(b"//") {
            return None;
        }
        let path = std::str::from_utf8(path).ok()?;
        let candidates = [
            format!("/proc/{pid}/map_files/{start:x}-{end:x}"),
            format!("/proc/{pid}/root{path}"),
        ];
        let (at, meta) = candidates
            .iter()
            .find_map(|p| std::fs::metadata(p).ok().map(|m| (p, m)))?;
        let key = identity(&meta);
        if let Some(id) = self.files.get(&key) {
            return id.clone();
        }
        let id = match blazesym::helper::read_elf_build_id(at) {
            Ok(Some(id)) if !id.is_empty() => Some(Arc::from(&id[..])),
            _ => None,
        };
        if self.files.len() >= MAX_FILES {
            self.files.clear();
        }
        self.files.insert(key, id.clone());
        id
    }

    /// A sample of process `pid` at `time` with `chain`; `unwound`: it carries a user
    /// stack copy (`--call-graph dwarf`), whose frames may lie in any file of its program.
    pub fn sample(&mut self, pid: u32, time: Option<u64>, chain: &Callchain<'_>, unwound: bool) {
        let run = self.maps.run_id(pid, time);
        if self.chains.len() >= MAX_SEEN {
            self.chains.clear();
        }
        if self
            .chains
            .insert(self.hasher.hash_one((run, chain.bytes())))
        {
            self.walk(pid, time, run, chain);
        }
        if unwound && run != 0 && self.whole.insert(run) {
            let mappings = self.maps.run(pid, time).map(|r| r.mappings.to_vec());
            for m in mappings.into_iter().flatten() {
                self.touch((m.path, m.build_id));
            }
        }
    }

    /// The modules of the frames of `chain`, a chain of program run `run` of `pid` at
    /// `time` not walked before.
    fn walk(&mut self, pid: u32, time: Option<u64>, run: u64, chain: &Callchain<'_>) {
        for frame in chain.frames() {
            let Ok(frame) = frame else { break };
            match frame.context {
                FrameContext::Kernel => {
                    self.kernel = true;
                    self.kernel_frame(frame.address);
                }
                FrameContext::User if run != 0 => {
                    if self.seen.len() >= MAX_SEEN {
                        self.seen.clear();
                    }
                    if !self.seen.insert((run, frame.address)) {
                        continue;
                    }
                    if let Some(m) = self.maps.find(pid, time, frame.address) {
                        let module = (Arc::clone(&m.path), Arc::clone(&m.build_id));
                        self.touch(module);
                    }
                }
                _ => {}
            }
        }
    }

    /// A kernel frame at `address`: the loaded module it lies in, if any, is touched.
    fn kernel_frame(&mut self, address: u64) {
        let after = self.kernel_modules.partition_point(|m| m.0 <= address);
        let Some((_, end, name)) = after.checked_sub(1).map(|i| &self.kernel_modules[i]) else {
            return;
        };
        if address < *end && !self.modules_touched.contains(name) {
            let name = Arc::clone(name);
            self.modules_touched.insert(name);
        }
    }

    /// `module` is touched: listed when it has a build id.
    fn touch(&mut self, module: (Arc<str>, Arc<[u8]>)) {
        if module.1.is_empty() || self.user.contains(&module) {
            return;
        }
        if self.user.len() >= MAX_MODULES {
            self.left_out += 1;
            return;
        }
        self.user.insert(module);
    }

    /// Modules touched but not listed ([`MAX_MODULES`]).
    pub fn left_out(&self) -> u64 {
        self.left_out
    }

    /// The `HEADER_BUILD_ID` section: the kernel (as `[kernel.kallsyms]`, with the running
    /// kernel's build id, when a chain had kernel frames and the file maps the kernel:
    /// `kernel_mapped`), each loaded module touched (as `[NAME]`, with its build id from
    /// sysfs), then each user module touched.
    pub fn section(&self, kernel_mapped: bool) -> Vec<u8> {
        let mut out = Vec::new();
        if self.kernel
            && kernel_mapped
            && let Some(id) = build_id::kernel()
        {
            let entry = BuildIdEntry {
                kernel: true,
                build_id: &id,
                name: KERNEL_MAP_NAME.as_bytes(),
            };
            writer::push_build_id(&mut out, &entry);
        }
        for name in &self.modules_touched {
            let Some(id) = build_id::module(name) else {
                continue;
            };
            let perf_name = format!("[{name}]");
            let entry = BuildIdEntry {
                kernel: true,
                build_id: &id,
                name: perf_name.as_bytes(),
            };
            writer::push_build_id(&mut out, &entry);
        }
        for (path, id) in &self.user {
            let entry = BuildIdEntry {
                kernel: false,
                build_id: id,
                name: path.as_bytes(),
            };
            writer::push_build_id(&mut out, &entry);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uevrec_parsers::Endian;
    use uevrec_parsers::callchain::{PERF_CONTEXT_KERNEL, PERF_CONTEXT_USER};

    fn chain_bytes(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    fn mmap<'a>(pid: u32, addr: u64, path: &'a [u8], id: &'a [u8]) -> ContextUpdate<'a> {
        ContextUpdate::Mmap {
            pid,
            addr,
            len: 0x1000,
            pgoff: 0,
            build_id: id,
            path,
        }
    }

    /// The entries of a section: (misc, pid, build id, name).
    fn entries(mut s: &[u8]) -> Vec<(u16, i32, Vec<u8>, String)> {
        let mut out = Vec::new();
        while !s.is_empty() {
            let size = u16::from_ne_bytes([s[6], s[7]]) as usize;
            let misc = u16::from_ne_bytes([s[4], s[5]]);
            let pid = i32::from_ne_bytes(s[8..12].try_into().unwrap());
            let id = s[12..12 + s[32] as usize].to_vec();
            let name = &s[36..size];
            let name =
                String::from_utf8(name[..name.iter().position(|&b| b == 0).unwrap()].to_vec());
            out.push((misc, pid, id, name.unwrap()));
            s = &s[size..];
        }
        out
    }

    #[test]
    fn the_user_frames_files_and_the_kernel() {
        let mut m = Modules::new();
        m.apply(None, &mmap(7, 0x1000, b"/bin/prog", &[1; 20]));
        m.apply(None, &mmap(7, 0x5000, b"/lib/libc.so", &[2; 20]));
        m.apply(None, &mmap(7, 0x9000, b"/lib/unused.so", &[3; 20]));
        m.apply(None, &mmap(7, 0xd000, b"/lib/no-id.so", &[]));
        let words = chain_bytes(&[
            PERF_CONTEXT_KERNEL,
            0xffff_ffff_8100_0000,
            PERF_CONTEXT_USER,
            0x5010,
            0x1020,
            0x1030,
            0xd000,
            0x7777_0000,
        ]);
        let chain = Callchain::new(&words, Endian::Little);
        m.sample(7, Some(5), &chain, false);
        m.sample(7, Some(6), &chain, false);
        let got = entries(&m.section(false));
        let user = (2u16 | 1 << 15, -1);
        assert_eq!(
            got,
            [
                (user.0, user.1, vec![1; 20], "/bin/prog".to_string()),
                (user.0, user.1, vec![2; 20], "/lib/libc.so".to_string()),
            ],
            "the touched files with a build id, once each"
        );
        let with_kernel = entries(&m.section(true));
        if let Some(id) = build_id::kernel() {
            assert_eq!(
                with_kernel[0],
                (1 | 1 << 15, -1, id, "[kernel.kallsyms]".to_string())
            );
            assert_eq!(with_kernel[1..], got[..]);
        }
        // A dwarf sample: every file of its program.
        m.sample(7, Some(7), &Callchain::new(&[], Endian::Little), true);
        let names: Vec<String> = entries(&m.section(false))
            .into_iter()
            .map(|e| e.3)
            .collect();
        assert_eq!(names, ["/bin/prog", "/lib/libc.so", "/lib/unused.so"]);
        // An unknown process: nothing.
        let before = m.section(false);
        m.sample(8, Some(8), &chain, true);
        assert_eq!(m.section(false), before);
    }

    #[test]
    fn a_kernel_frame_in_a_loaded_module_touches_it() {
        let mut m = Modules::new();
        m.kernel_modules(vec![
            (0xc000_2000, 0xc000_3000, "b".into()),
            (0xc000_0000, 0xc000_1000, "a".into()),
        ]);
        for address in [0xc000_0010, 0xc000_1800, 0xbfff_ffff, 0xc000_0fff] {
            m.kernel_frame(address);
        }
        let touched: Vec<&str> = m.modules_touched.iter().map(|n| &**n).collect();
        assert_eq!(
            touched,
            ["a"],
            "in a; between a and b; before a; a's last byte"
        );
        m.kernel_frame(0xc000_2fff);
        assert_eq!(m.modules_touched.len(), 2);
        m.kernel_frame(0xc000_3000);
        assert_eq!(m.modules_touched.len(), 2, "past b");
    }

    #[test]
    fn a_live_mapping_gets_its_files_build_id() {
        let exe = std::env::current_exe().unwrap();
        let text = std::fs::read_to_string("/proc/self/maps").unwrap();
        let exe_text = exe.to_str().unwrap();
        let line = text
            .lines()
            .find(|l| l.ends_with(exe_text) && l.split(' ').nth(1).unwrap().contains('x'))
            .expect("our text mapping");
        let (start, end) = line.split(' ').next().unwrap().split_once('-').unwrap();
        let (start, end) = (
            u64::from_str_radix(start, 16).unwrap(),
            u64::from_str_radix(end, 16).unwrap(),
        );
        let own = blazesym::helper::read_elf_build_id(&exe).unwrap().unwrap();
        let mut m = Modules::new();
        let pid = std::process::id();
        let got = m.read_build_id(pid, start, end, exe_text.as_bytes());
        assert_eq!(got.as_deref(), Some(&own[..]));
        // Through the root when the range is no mapping.
        assert_eq!(
            m.read_build_id(pid, 1, 2, exe_text.as_bytes()).as_deref(),
            Some(&own[..])
        );
        assert_eq!(m.read_build_id(pid, start, end, b"[vdso]"), None);
        assert_eq!(m.read_build_id(u32::MAX, 1, 2, b"/nonexistent"), None);
    }
}
