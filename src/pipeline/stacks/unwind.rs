//! `--call-graph dwarf`: a record's user registers and stack copy → the user frames'
//! addresses, innermost first, with framehop (samply's unwinder) and the `.eh_frame` /
//! `.eh_frame_hdr` (or `.debug_frame`) of each file the process had mapped.
//!
//! The `[vdso]` is unwound from uevrec's own image (`super::vdso`). Through code that has
//! no unwind information (JIT code in anonymous memory, a file without `.eh_frame`)
//! framehop follows the frame pointer (its fallback rule), so a stub
//! that keeps one does not end the stack as it ends perf's. The walk stops where the
//! frames run past the stack copy (`stack_copy`: raise SIZE), at `--max-stack`, or where
//! the unwinder cannot go on; docs/stacks.md says how each end is marked.
//!
//! Bounded: the unwind sections of at most [`MAX_FILES`] files (and [`MAX_FILE_BYTES`] in
//! all) per worker, an unwinder (and its rule cache) for at most [`MAX_RUNS`] program
//! runs; each is started again when full.

use std::cell::Cell;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{Error, ExplicitModuleSectionInfo, Module, Unwinder};
use object::{Object, ObjectSection};
use uevrec_parsers::user_stack::{UserStack, x86_64};

use super::maps::{Mapping, ProcessMaps};

/// Files whose unwind sections are kept per worker.
pub const MAX_FILES: usize = 256;
/// Bytes of unwind sections kept per worker, all files together.
pub const MAX_FILE_BYTES: usize = 256 << 20;
/// Program runs whose unwinder is kept per worker (each with framehop's rule cache of
/// 509 entries, about 12 KiB).
pub const MAX_RUNS: usize = 256;

/// Why a walk ended before the outermost frame (the last frame's `truncated` key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truncated {
    /// The next frame lies past the copied stack (`--call-graph dwarf,SIZE` with a
    /// larger SIZE reaches further).
    StackCopy,
    /// `--max-stack` frames were written.
    MaxStack,
    /// The unwinder could not go on (a frame pointer going backwards, no progress, a
    /// read outside the stack).
    Unwind,
}

impl Truncated {
    /// The value of the `truncated` key.
    pub fn name(self) -> &'static str {
        match self {
            Truncated::StackCopy => "stack_copy",
            Truncated::MaxStack => "max_stack",
            Truncated::Unwind => "unwind_failed",
        }
    }
}

/// The unwind sections of one ELF file, with where its loadable segments lie (to place
/// a mapping's file offset at its stated address).
#[derive(Debug)]
struct FileSections {
    /// `(file offset, file size, stated address)` of each loadable segment.
    segments: Vec<(u64, u64, u64)>,
    text: Option<Range<u64>>,
    got: Option<Range<u64>>,
    eh_frame: Option<(Range<u64>, Arc<[u8]>)>,
    eh_frame_hdr: Option<(Range<u64>, Arc<[u8]>)>,
    debug_frame: Option<Arc<[u8]>>,
}

impl FileSections {
    /// Read `path`'s sections (`None`: unreadable, not an ELF file, or no unwind
    /// information at all: its frames are walked by the frame pointer).
    fn read(path: &str) -> Option<FileSections> {
        // Read through object's cache: the headers and the few sections used, not the
        // whole file (a binary with its debug information can be large).
        let file = object::ReadCache::new(std::fs::File::open(path).ok()?);
        let obj = object::File::parse(&file).ok()?;
        let section = |name: &str| {
            let s = obj.section_by_name(name)?;
            let range = s.address()..s.address().checked_add(s.size())?;
            Some((range, Arc::<[u8]>::from(s.data().ok()?)))
        };
        let range = |name: &str| {
            let s = obj.section_by_name(name)?;
            Some(s.address()..s.address().checked_add(s.size())?)
        };
        let sections = FileSections {
            segments: super::symbols::loadable_segments(&obj),
            text: range(".text"),
            got: range(".got"),
            eh_frame: section(".eh_frame"),
            eh_frame_hdr: section(".eh_frame_hdr"),
            debug_frame: section(".debug_frame").map(|(_, d)| d),
        };
        (sections.eh_frame.is_some() || sections.debug_frame.is_some()).then_some(sections)
    }

    /// Bytes held.
    fn bytes(&self) -> usize {
        let len = |s: &Option<(Range<u64>, Arc<[u8]>)>| s.as_ref().map_or(0, |(_, d)| d.len());
        len(&self.eh_frame)
            + len(&self.eh_frame_hdr)
            + self.debug_frame.as_ref().map_or(0, |d| d.len())
    }

    /// The framehop module of `mapping` of this file, or `None` when no loadable segment
    /// holds the mapping's file offset.
    fn module(&self, mapping: &Mapping) -> Option<Module<Arc<[u8]>>> {
        let base_avma = load_bias(&self.segments, mapping)?;
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: self.text.clone(),
            got_svma: self.got.clone(),
            eh_frame_svma: self.eh_frame.as_ref().map(|(r, _)| r.clone()),
            eh_frame: self.eh_frame.as_ref().map(|(_, d)| d.clone()),
            eh_frame_hdr_svma: self.eh_frame_hdr.as_ref().map(|(r, _)| r.clone()),
            eh_frame_hdr: self.eh_frame_hdr.as_ref().map(|(_, d)| d.clone()),
            debug_frame: self.debug_frame.clone(),
            ..Default::default()
        };
        Some(Module::new(
            mapping.path.to_string(),
            mapping.start..mapping.end,
            base_avma,
            info,
        ))
    }
}

/// The load bias of `mapping` (its address minus the file's stated address), from the
/// loadable segment (`(file offset, file size, stated address)`) that overlaps the
/// mapping's file range the most. Not simply the one holding the mapping's first file
/// offset: the mapping starts at a page boundary, and where a linker packs segments
/// without page-aligning their file offsets (lld, rustc's default linker), that page
/// also holds the end of the segment before, at another bias (off by a page: every
/// unwind rule of the file looked up at the wrong address).
fn load_bias(segments: &[(u64, u64, u64)], mapping: &Mapping) -> Option<u64> {
    let file_end = mapping
        .pgoff
        .checked_add(mapping.end.checked_sub(mapping.start)?)?;
    let overlap = |&&(offset, size, _): &&(u64, u64, u64)| {
        offset
            .saturating_add(size)
            .min(file_end)
            .saturating_sub(offset.max(mapping.pgoff))
    };
    let &(offset, _, address) = segments
        .iter()
        .filter(|s| overlap(s) > 0)
        .max_by_key(overlap)?;
    // The file offset `offset` is at `address + bias` and at `start + offset - pgoff`.
    mapping
        .start
        .checked_add(offset)?
        .checked_sub(mapping.pgoff)?
        .checked_sub(address)
}

/// The unwinder of one program run: its modules and framehop's rule cache (one cache per
/// unwinder, so that framehop's global module generations, 16 bits, never meet a rule of
/// another unwinder).
struct RunUnwinder {
    /// The run's mappings count when built ([`super::maps::ProgramRun::key`]).
    key: (u32, Option<u64>, u32),
    unwinder: UnwinderX86_64<Arc<[u8]>>,
    cache: CacheX86_64,
}

/// One formatter worker's unwinder: the files' sections and each program run's modules.
#[derive(Default)]
pub struct UserUnwinder {
    files: HashMap<Arc<str>, Option<Arc<FileSections>>>,
    file_bytes: usize,
    runs: HashMap<(u32, Option<u64>), RunUnwinder>,
    /// The unwinder of processes whose mappings are unknown: no modules.
    bare: RunUnwinder,
}

impl Default for RunUnwinder {
    fn default() -> Self {
        RunUnwinder {
            key: (0, None, 0),
            unwinder: UnwinderX86_64::new(),
            cache: CacheX86_64::new(),
        }
    }
}

impl std::fmt::Debug for UserUnwinder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserUnwinder")
            .field("files", &self.files.len())
            .field("file_bytes", &self.file_bytes)
            .field("runs", &self.runs.len())
            .finish()
    }
}

impl UserUnwinder {
    /// The user frames of the record of process `pid` at `time` (at most `max`
    /// addresses into `frames`, innermost first: the sampled instruction, then return
    /// addresses), and why the walk ended early, if it did.
    pub fn walk(
        &mut self,
        maps: &mut ProcessMaps,
        pid: u32,
        time: Option<u64>,
        user: &UserStack<'_>,
        max: usize,
        frames: &mut Vec<u64>,
    ) -> Option<Truncated> {
        let regs = user.regs;
        let (Some(ip), Some(sp), Some(bp)) = (
            regs.get(x86_64::IP),
            regs.get(x86_64::SP),
            regs.get(x86_64::BP),
        ) else {
            // No user registers (a kernel thread): no user frames.
            return None;
        };
        if max == 0 {
            return Some(Truncated::MaxStack);
        }
        let copy = user.stack.bytes;
        let full = copy.len() as u64 >= user.stack.size;
        let past_copy = Cell::new(false);
        let mut read_stack = |address: u64| -> Result<u64, ()> {
            let at = address.checked_sub(sp).ok_or(())?;
            let at = usize::try_from(at).map_err(|_| ())?;
            match copy.get(at..).and_then(|b| b.first_chunk::<8>()) {
                Some(word) => Ok(u64::from_ne_bytes(*word)),
                None => {
                    past_copy.set(at >= copy.len().saturating_sub(7));
                    Err(())
                }
            }
        };
        let run = self.run(maps, pid, time);
        let regs = UnwindRegsX86_64::new(ip, sp, bp);
        let mut iter = run
            .unwinder
            .iter_frames(ip, regs, &mut run.cache, &mut read_stack);
        loop {
            match iter.next() {
                Ok(Some(frame)) => {
                    if frames.len() >= max {
                        return Some(Truncated::MaxStack);
                    }
                    frames.push(frame.address());
                }
                // The outermost frame (its unwind information says so, or a null frame
                // pointer), or a null return address: where perf ends too.
                Ok(None) | Err(Error::ReturnAddressIsNull) => return None,
                // Past the copy's end: the copy was too short when it was full; a copy
                // that ended early ended at the top of the stack: the walk went astray.
                Err(Error::CouldNotReadStack(_)) if past_copy.get() && full => {
                    return Some(Truncated::StackCopy);
                }
                Err(_) => return Some(Truncated::Unwind),
            }
        }
    }

    /// The unwinder of `pid`'s program run at `time`, built (again) when new; one
    /// without modules (the frame pointer alone) for a process whose mappings are
    /// unknown.
    fn run(&mut self, maps: &mut ProcessMaps, pid: u32, time: Option<u64>) -> &mut RunUnwinder {
        let Some(run) = maps.run(pid, time) else {
            return &mut self.bare;
        };
        let (key, mappings) = (run.key, run.mappings);
        let at = (key.0, key.1);
        if self.runs.get(&at).is_none_or(|r| r.key != key) {
            let mut unwinder = UnwinderX86_64::new();
            for m in mappings {
                if !super::is_file(m) {
                    // Anonymous memory …: no file; walked by the frame pointer.
                    continue;
                }
                // The file as the process sees it; none that may be taken for it: walked
                // by the frame pointer.
                let Ok(open) = m.file.open_path(&m.path) else {
                    continue;
                };
                if let Some(module) = self.sections(open).and_then(|s| s.module(m)) {
                    unwinder.add_module(module);
                }
            }
            if self.runs.len() >= MAX_RUNS {
                self.runs.clear();
            }
            self.runs.insert(
                at,
                RunUnwinder {
                    key,
                    unwinder,
                    cache: CacheX86_64::new(),
                },
            );
        }
        self.runs.entry(at).or_default()
    }

    /// The unwind sections of the file at `path` (read once; `None` when it has none).
    fn sections(&mut self, path: &Arc<str>) -> Option<Arc<FileSections>> {
        if let Some(s) = self.files.get(path) {
            return s.clone();
        }
        let read = FileSections::read(path).map(Arc::new);
        let bytes = read.as_ref().map_or(0, |s| s.bytes());
        if self.files.len() >= MAX_FILES || self.file_bytes.saturating_add(bytes) > MAX_FILE_BYTES {
            self.files.clear();
            self.file_bytes = 0;
        }
        self.file_bytes = self.file_bytes.saturating_add(bytes);
        self.files.insert(path.clone(), read.clone());
        read
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uevrec_parsers::Endian;
    use uevrec_parsers::user_stack::{StackCopy, UserRegs};

    /// A process id above any pid_max (no /proc entry: no mappings, no modules).
    const NO_PROCESS: u32 = 4_000_000_000;
    const SP: u64 = 0x7fff_0000;

    /// A stack copy from `SP` holding a frame-pointer chain: at SP + 16 the caller's
    /// frame pointer (SP + 48) and a return address 0x2000; at SP + 48 a null frame
    /// pointer and 0x3000.
    fn chain() -> Vec<u8> {
        let mut words = [0u64; 8];
        words[2] = SP + 48;
        words[3] = 0x2000;
        words[6] = 0;
        words[7] = 0x3000;
        words.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    fn walk(copy: &[u8], size: u64, max: usize) -> (Vec<u64>, Option<Truncated>) {
        walk_in(
            &mut ProcessMaps::default(),
            NO_PROCESS,
            [SP + 16, SP, 0x1000],
            copy,
            size,
            max,
        )
    }

    /// The walk of process `pid` (its mappings in `maps`) from registers `[bp, sp, ip]`
    /// and the stack copy `copy` of `size` bytes asked for.
    fn walk_in(
        maps: &mut ProcessMaps,
        pid: u32,
        regs: [u64; 3],
        copy: &[u8],
        size: u64,
        max: usize,
    ) -> (Vec<u64>, Option<Truncated>) {
        let regs: Vec<u8> = regs.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let mask = 1 << x86_64::BP | 1 << x86_64::SP | 1 << x86_64::IP;
        let user = UserStack {
            regs: UserRegs::new(2, mask, &regs, Endian::NATIVE),
            stack: StackCopy { bytes: copy, size },
        };
        let mut frames = Vec::new();
        let end = UserUnwinder::default().walk(maps, pid, None, &user, max, &mut frames);
        (frames, end)
    }

    /// rustc's lld packs segments: the text segment starts mid-page (file offset
    /// 0x146c0, address 0x156c0), in the page that ends the read-only segment before it;
    /// the text mapping starts at that page (file offset 0x14000). GNU ld aligns them.
    #[test]
    fn the_load_bias_comes_from_the_segment_the_mapping_holds() {
        let lld = [
            (0, 0x146b4, 0),
            (0x146c0, 0x3f1f0, 0x156c0),
            (0x538b0, 0x2908, 0x558b0),
        ];
        let bias = 0x5555_0000_0000;
        let text = Mapping {
            start: bias + 0x15000,
            end: bias + 0x55000,
            pgoff: 0x14000,
            path: "/bin/x".into(),
            build_id: Arc::from(&[][..]),
            inode: None,
            file: super::super::module_files::ModuleFile::AtPath,
        };
        assert_eq!(load_bias(&lld, &text), Some(bias));
        let gnu = [
            (0, 0x500, 0),
            (0x1000, 0x2000, 0x1000),
            (0x3000, 0x100, 0x3000),
        ];
        let text = Mapping {
            start: bias + 0x1000,
            end: bias + 0x3000,
            pgoff: 0x1000,
            ..text
        };
        assert_eq!(load_bias(&gnu, &text), Some(bias));
        // A mapping no segment holds: no module.
        let beyond = Mapping {
            pgoff: 0x10_0000,
            ..text
        };
        assert_eq!(load_bias(&gnu, &beyond), None);
    }

    /// A frame in this process's `[vdso]` is unwound from the image's own `.eh_frame`:
    /// at the first instruction of `clock_gettime` (no frame pushed yet) the return
    /// address is the word at the stack pointer, where the frame pointer would give
    /// another (the caller's caller's).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_vdso_is_unwound_from_its_own_unwind_information() {
        use object::{Object as _, ObjectSymbol as _};
        let image = super::super::vdso::image().expect("a vDSO");
        let bytes = std::fs::read(&**image.path()).unwrap();
        let elf = object::File::parse(&bytes[..]).unwrap();
        let entry = elf
            .dynamic_symbols()
            .find(|s| s.name() == Ok("__vdso_clock_gettime"))
            .expect("__vdso_clock_gettime")
            .address();
        // SAFETY: getauxval reads the auxiliary vector.
        let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
        let (returns_to, fp_would_say): (u64, u64) = (0x1234_5678, 0x3000);
        // At SP the return address; at SP + 16 a frame record (null frame pointer, and
        // the return address a frame-pointer walk would take).
        let words = [returns_to, 0, 0, fp_would_say];
        let copy: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let regs = [SP + 16, SP, base + entry];
        let mut maps = ProcessMaps::new(true);
        let (frames, _) = walk_in(&mut maps, std::process::id(), regs, &copy, 32, 100);
        assert_eq!(
            frames.get(..2),
            Some(&[base + entry, returns_to][..]),
            "{frames:x?}"
        );
    }

    #[test]
    fn code_without_unwind_information_is_walked_by_the_frame_pointer() {
        let copy = chain();
        assert_eq!(walk(&copy, 64, 100), (vec![0x1000, 0x2000, 0x3000], None));
    }

    #[test]
    fn early_ends_say_why() {
        let copy = chain();
        // The copy ends before the second frame record, and it was full: SIZE was short.
        assert_eq!(
            walk(&copy[..40], 40, 100),
            (vec![0x1000, 0x2000], Some(Truncated::StackCopy))
        );
        // A copy that ended before its size ended at the top of the stack: astray.
        assert_eq!(
            walk(&copy[..40], 64, 100),
            (vec![0x1000, 0x2000], Some(Truncated::Unwind))
        );
        assert_eq!(
            walk(&copy, 64, 2),
            (vec![0x1000, 0x2000], Some(Truncated::MaxStack))
        );
        // No user registers (a kernel thread): no frames, nothing to say.
        let none = UserStack {
            regs: UserRegs::new(0, 0, &[], Endian::NATIVE),
            stack: StackCopy {
                bytes: &[],
                size: 0,
            },
        };
        let mut frames = Vec::new();
        let end = UserUnwinder::default().walk(
            &mut ProcessMaps::default(),
            NO_PROCESS,
            None,
            &none,
            100,
            &mut frames,
        );
        assert_eq!((frames.len(), end), (0, None));
    }
}
