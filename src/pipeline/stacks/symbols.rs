//! Addresses → function, file and line, with blazesym (the libbpf project's symbolizer:
//! ELF symbol tables, DWARF lines and inlined functions, debug links, the kernel's
//! kallsyms), behind caches bounded by count, and a time budget: the symbolizer (one
//! for a run's writers, [`super::shared_symbols`]) spends on cold look-ups at most
//! [`BUDGET_SHARE`] of its time once its first [`BUDGET_BURST`] (the files' first
//! loading) is spent; past it, frames go out with their addresses and the reason
//! `behind`.
//!
//! Stripped files are named from their separate debug file: by build id
//! (`DIR/.build-id/xx/rest.debug`, found here: blazesym looks there only for files with
//! a debug link) or by `.gnu_debuglink` (blazesym), in the debug directories
//! ([`set_debug_dirs`]: `--debug-dir`, default `/usr/lib/debug`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use blazesym::symbolize::source::{Elf, Kernel, Source};

use super::debuginfod::{Artifact, Debuginfod};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};

/// Look-ups kept per cache (user frames; kernel frames) before it starts again: about
/// 200 bytes each, so ≤ 13 MiB per cache and symbolizer.
pub const MAX_CACHED: usize = 1 << 16;
/// Cold look-up time the symbolizer may spend at once (the budget's start and its most).
pub const BUDGET_BURST: Duration = Duration::from_secs(3);
/// The share of its time the symbolizer may spend on cold look-ups once the burst is spent.
pub const BUDGET_SHARE: f64 = 0.25;

/// What an address is, as far as the files tell.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Resolved {
    /// The frames at the address, innermost first: inlined functions, then the function
    /// that holds the code (empty: nothing found, see `reason`).
    pub frames: Vec<SourceFrame>,
    /// Why nothing was found (blazesym's reason in words), when `frames` is empty.
    pub reason: Option<&'static str>,
}

/// One function at an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFrame {
    /// The function (demangled).
    pub symbol: Arc<str>,
    /// Bytes from the function's start (the outer function only; 0 for inlined ones).
    pub offset: u64,
    /// The source file, when the debug information tells.
    pub file: Option<Arc<str>>,
    /// Its line.
    pub line: Option<u32>,
    /// Inlined into the frame after it.
    pub inlined: bool,
}

/// Debug files known per symbolizer (by the file read; started again when full).
pub const MAX_DEBUG_FILES: usize = 4096;

/// The debug directories of `--debug-dir` (empty: the system's).
static DEBUG_DIRS: OnceLock<Vec<PathBuf>> = OnceLock::new();

/// Where separate debug files are looked for, for the whole process: `dirs` in order
/// (`--debug-dir`, for tests and private symbol stores), or, when empty, the system's
/// (`/usr/lib/debug`, and blazesym's `/lib/debug` for debug links). Set before the
/// first stack is named (a symbolizer reads it when it is made); a second
/// call changes nothing.
pub fn set_debug_dirs(dirs: Vec<PathBuf>) {
    let _ = DEBUG_DIRS.set(dirs);
}

/// The debug directories searched: those given, else `/usr/lib/debug`.
pub fn debug_dirs() -> Vec<PathBuf> {
    given_debug_dirs().map_or_else(
        || vec![PathBuf::from("/usr/lib/debug")],
        <[PathBuf]>::to_vec,
    )
}

/// The directories given (`None`: the system's).
fn given_debug_dirs() -> Option<&'static [PathBuf]> {
    DEBUG_DIRS
        .get()
        .filter(|d| !d.is_empty())
        .map(Vec::as_slice)
}

/// A file's separate debug file, found by its build id, and how the file's offsets map
/// to the addresses both files state (its loadable segments).
#[derive(Debug)]
struct DebugFile {
    path: PathBuf,
    /// `(file offset, file size, stated address)` of each loadable segment.
    segments: Vec<(u64, u64, u64)>,
}

impl DebugFile {
    /// The debug file of the file at `path` with build id `build_id` (read from the
    /// file when empty), in `dirs`: `DIR/.build-id/xx/rest.debug`, as gdb looks; else,
    /// when the file has no DWARF of its own, from `debuginfod` (a recorded file's).
    fn find(
        path: &str,
        build_id: &[u8],
        dirs: &[PathBuf],
        debuginfod: Option<&Debuginfod>,
    ) -> Option<DebugFile> {
        let read;
        let id = if build_id.is_empty() {
            read = blazesym::helper::read_elf_build_id(path).ok()??;
            &read[..]
        } else {
            build_id
        };
        if id.len() < 2 {
            return None;
        }
        let in_dirs = dirs
            .iter()
            .filter_map(|d| Some(build_id_path(d, id)?.with_extension("debug")))
            .find(|p| p.is_file());
        let data = std::fs::File::open(path).ok()?;
        let data = object::ReadCache::new(data);
        let obj = object::File::parse(&data).ok()?;
        let found = match (in_dirs, debuginfod) {
            (Some(found), _) => found,
            (None, Some(d))
                if object::Object::section_by_name(&obj, ".debug_info").is_none()
                    && !debug_link_found(&obj, path, dirs) =>
            {
                match d.find(id, Artifact::Debuginfo) {
                    Ok(found) => found,
                    Err(why) => {
                        crate::messages::print(format_args!(
                            "uevrec: no debug file of {path} from debuginfod: {why}\n"
                        ));
                        return None;
                    }
                }
            }
            (None, _) => return None,
        };
        Some(DebugFile {
            path: found,
            segments: loadable_segments(&obj),
        })
    }

    /// The stated address of `file_offset` (`None`: in no loadable segment).
    fn virt_offset(&self, file_offset: u64) -> Option<u64> {
        stated_address(&self.segments, file_offset)
    }
}

/// `DIR/.build-id/xx/REST` of the build `id` (`xx` its first byte in hex, `REST` the
/// others), where gdb, perf and distributions keep files by build id (`None`: no id).
pub fn build_id_path(dir: &Path, id: &[u8]) -> Option<PathBuf> {
    let (first, rest) = id.split_first()?;
    Some(
        dir.join(".build-id")
            .join(format!("{first:02x}"))
            .join(hex(rest)),
    )
}

/// `bytes` in lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether the file `.gnu_debuglink` of `obj` (the file at `path`) names lies where
/// blazesym looks for it: beside the file, in its `.debug/`, in each of `dirs` under the
/// file's directory and in each of `dirs` itself.
fn debug_link_found<'data, R: object::ReadRef<'data>>(
    obj: &object::File<'data, R>,
    path: &str,
    dirs: &[PathBuf],
) -> bool {
    use object::{Object, ObjectSection};
    let Some(data) = obj
        .section_by_name(".gnu_debuglink")
        .and_then(|s| s.data().ok())
    else {
        return false;
    };
    let name = data.split(|&b| b == 0).next().unwrap_or_default();
    let Ok(name) = std::str::from_utf8(name) else {
        return false;
    };
    let parent = Path::new(path).parent().unwrap_or(Path::new("/"));
    let under = parent.strip_prefix("/").unwrap_or(parent);
    [parent.join(name), parent.join(".debug").join(name)]
        .into_iter()
        .chain(
            dirs.iter()
                .flat_map(|d| [d.join(under).join(name), d.join(name)]),
        )
        .any(|p| p.is_file())
}

/// `(file offset, file size, stated address)` of each loadable segment of an ELF file:
/// how its file offsets map to the addresses its symbols, DWARF and unwind information
/// state.
pub fn loadable_segments<'data, R: object::ReadRef<'data>>(
    obj: &object::File<'data, R>,
) -> Vec<(u64, u64, u64)> {
    use object::{Object, ObjectSegment};
    obj.segments()
        .map(|s| {
            let (offset, size) = s.file_range();
            (offset, size, s.address())
        })
        .collect()
}

/// The stated address of `file_offset` in a file of `segments` (`None`: in no loadable
/// segment).
pub fn stated_address(segments: &[(u64, u64, u64)], file_offset: u64) -> Option<u64> {
    let &(offset, _, address) = segments.iter().find(|&&(offset, size, _)| {
        offset <= file_offset && file_offset < offset.saturating_add(size)
    })?;
    address.checked_add(file_offset - offset)
}

thread_local! {
    /// The symbolizer of this thread (blazesym's is not `Send`): the run's symbolizer
    /// thread's ([`super::shared_symbols`]), or a writer's own thread's (a writer alone,
    /// or when the run's thread could not be started).
    static SYMBOLS: std::cell::RefCell<Option<Symbols>> = const { std::cell::RefCell::new(None) };
}

/// `f` with this thread's symbolizer (made at the first call).
pub fn with<R>(f: impl FnOnce(&mut Symbols) -> R) -> R {
    SYMBOLS.with(|cell| f(cell.borrow_mut().get_or_insert_with(Symbols::new)))
}

/// A symbolizer and its caches.
pub struct Symbols {
    symbolizer: Symbolizer,
    user: HashMap<(Arc<str>, u64), Arc<Resolved>>,
    kernel: HashMap<u64, Arc<Resolved>>,
    /// The separate debug file of each file read (found by build id), or none.
    debug_files: HashMap<Arc<str>, Option<Arc<DebugFile>>>,
    /// Where debug files are looked for by build id.
    debug_dirs: Vec<PathBuf>,
    /// Whether `/proc/kallsyms` shows addresses (`kptr_restrict` may hide them: zeros).
    kallsyms_readable: bool,
    /// The kallsyms file kernel frames are named from when not `/proc/kallsyms` (a
    /// recorded file's own); `kernel` caches its names.
    kallsyms_file: Option<PathBuf>,
    /// Cold look-up time left (a token bucket: [`BUDGET_SHARE`] of the time that
    /// passes comes back, up to [`BUDGET_BURST`]).
    budget: Duration,
    refilled_at: Instant,
    /// Frames left unnamed because the budget was spent.
    pub behind: u64,
    /// Cold look-ups made.
    pub cold: u64,
    /// No time budget: every look-up is made (a recorded file, `uevrec decode`: no ring
    /// waits for it, and its lines must not depend on the time the look-ups take).
    pub unbudgeted: bool,
}

impl std::fmt::Debug for Symbols {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbols")
            .field("user", &self.user.len())
            .field("kernel", &self.kernel.len())
            .field("behind", &self.behind)
            .finish()
    }
}

/// The answer when the budget is spent.
fn behind() -> Arc<Resolved> {
    Arc::new(Resolved {
        frames: Vec::new(),
        reason: Some("behind"),
    })
}

impl Default for Symbols {
    fn default() -> Self {
        Symbols::new()
    }
}

impl Symbols {
    /// A symbolizer with empty caches.
    pub fn new() -> Self {
        Symbols {
            symbolizer: Symbolizer::builder()
                .enable_code_info(true)
                .enable_inlined_fns(true)
                .set_debug_dirs(given_debug_dirs())
                .build(),
            user: HashMap::new(),
            kernel: HashMap::new(),
            debug_files: HashMap::new(),
            debug_dirs: debug_dirs(),
            kallsyms_readable: crate::system::kallsyms::readable(),
            kallsyms_file: None,
            budget: BUDGET_BURST,
            refilled_at: Instant::now(),
            behind: 0,
            cold: 0,
            unbudgeted: false,
        }
    }

    /// Whether `/proc/kallsyms` shows addresses.
    pub fn kallsyms_readable(&self) -> bool {
        self.kallsyms_readable
    }

    /// Name kernel frames from the kallsyms file at `path` (`None`: `/proc/kallsyms`);
    /// the names cached from another are forgotten.
    pub fn use_kallsyms(&mut self, path: Option<&Path>) {
        if self.kallsyms_file.as_deref() != path {
            self.kallsyms_file = path.map(Path::to_path_buf);
            self.kernel.clear();
        }
    }

    /// Whether a cold look-up may be made now (the budget is not spent).
    fn may_look_up(&mut self) -> bool {
        if self.unbudgeted {
            return true;
        }
        let now = Instant::now();
        let back = now.duration_since(self.refilled_at).mul_f64(BUDGET_SHARE);
        self.refilled_at = now;
        self.budget = (self.budget + back).min(BUDGET_BURST);
        !self.budget.is_zero()
    }

    /// What is at `lookup_offset` (a file offset) of the file `path`, whose build id is
    /// `build_id` (empty: unknown): from its separate debug file when one is found by
    /// the build id, else from the file (and what its debug link leads to).
    pub fn user(&mut self, path: &Arc<str>, build_id: &[u8], lookup_offset: u64) -> Arc<Resolved> {
        let key = (path.clone(), lookup_offset);
        if let Some(r) = self.user.get(&key) {
            return r.clone();
        }
        let debug = self.debug_file(path, build_id);
        let found = match debug
            .as_deref()
            .and_then(|d| Some((d, d.virt_offset(lookup_offset)?)))
        {
            Some((d, at)) => {
                let src = Source::Elf(Elf::new(d.path.clone()));
                self.look_up(&src, Input::VirtOffset(at))
            }
            None => {
                let src = Source::Elf(Elf::new(PathBuf::from(&**path)));
                self.look_up(&src, Input::FileOffset(lookup_offset))
            }
        };
        let Some(resolved) = found else {
            return behind();
        };
        if self.user.len() >= MAX_CACHED {
            self.user.clear();
        }
        self.user.insert(key, resolved.clone());
        resolved
    }

    /// The separate debug file of the file at `path`, looked for once.
    fn debug_file(&mut self, path: &Arc<str>, build_id: &[u8]) -> Option<Arc<DebugFile>> {
        if let Some(d) = self.debug_files.get(path) {
            return d.clone();
        }
        // A recorded file's modules (no time budget) may also come from debuginfod.
        let debuginfod = self
            .unbudgeted
            .then(super::debuginfod::configured)
            .flatten();
        let found = DebugFile::find(path, build_id, &self.debug_dirs, debuginfod).map(Arc::new);
        if self.debug_files.len() >= MAX_DEBUG_FILES {
            self.debug_files.clear();
        }
        self.debug_files.insert(path.clone(), found.clone());
        found
    }

    /// What is at the kernel address `address`.
    pub fn kernel(&mut self, address: u64) -> Arc<Resolved> {
        if !self.kallsyms_readable && self.kallsyms_file.is_none() {
            return Arc::new(Resolved {
                frames: Vec::new(),
                reason: Some("kallsyms_hidden"),
            });
        }
        if let Some(r) = self.kernel.get(&address) {
            return r.clone();
        }
        let kallsyms = match &self.kallsyms_file {
            Some(path) => blazesym::MaybeDefault::Some(path.clone()),
            None => blazesym::MaybeDefault::Default,
        };
        let kernel = Kernel {
            kallsyms,
            vmlinux: blazesym::MaybeDefault::None,
            debug_syms: false,
            ..Kernel::default()
        };
        let src = Source::Kernel(kernel);
        let Some(resolved) = self.look_up(&src, Input::AbsAddr(address)) else {
            return behind();
        };
        if self.kernel.len() >= MAX_CACHED {
            self.kernel.clear();
        }
        self.kernel.insert(address, resolved.clone());
        resolved
    }

    /// A cold look-up in `src`, its time taken from the budget (`None`, counted in
    /// `behind`, when the budget is spent).
    fn look_up(&mut self, src: &Source<'_>, input: Input<u64>) -> Option<Arc<Resolved>> {
        if !self.may_look_up() {
            self.behind += 1;
            return None;
        }
        let began = Instant::now();
        let found = self.symbolizer.symbolize_single(src, input);
        let resolved = Arc::new(resolved(found));
        self.budget = self.budget.saturating_sub(began.elapsed());
        self.cold += 1;
        Some(resolved)
    }
}

/// blazesym's answer as frames (innermost first) or a reason.
fn resolved(found: blazesym::Result<Symbolized<'_>>) -> Resolved {
    let sym = match found {
        Ok(Symbolized::Sym(sym)) => sym,
        Ok(Symbolized::Unknown(reason)) => {
            return Resolved {
                frames: Vec::new(),
                reason: Some(reason_word(reason)),
            };
        }
        Err(_) => {
            return Resolved {
                frames: Vec::new(),
                reason: Some("unreadable"),
            };
        }
    };
    let place = |info: Option<&blazesym::symbolize::CodeInfo<'_>>| {
        info.map_or((None, None), |c| {
            (
                Some(Arc::<str>::from(c.to_path().to_string_lossy().as_ref())),
                c.line,
            )
        })
    };
    let mut frames = Vec::with_capacity(sym.inlined.len() + 1);
    // blazesym lists inlined calls outermost first, each with where its code is.
    for inl in sym.inlined.iter().rev() {
        let (file, line) = place(inl.code_info.as_ref());
        frames.push(SourceFrame {
            symbol: inl.name.as_ref().into(),
            offset: 0,
            file,
            line,
            inlined: true,
        });
    }
    let (file, line) = place(sym.code_info.as_deref());
    frames.push(SourceFrame {
        symbol: sym.name.as_ref().into(),
        offset: sym.offset as u64,
        file,
        line,
        inlined: false,
    });
    Resolved {
        frames,
        reason: None,
    }
}

/// blazesym's reason as one word for the JSON lines.
fn reason_word(reason: blazesym::symbolize::Reason) -> &'static str {
    use blazesym::symbolize::Reason;
    match reason {
        Reason::InvalidFileOffset => "invalid_offset",
        Reason::MissingSyms => "no_symbols",
        Reason::Unsupported => "unsupported",
        Reason::UnknownAddr => "unknown_address",
        _ => "not_found",
    }
}
