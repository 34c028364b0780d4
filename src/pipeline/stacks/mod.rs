//! Call stacks on JSON lines (`-g`): each record's callchain → a `"stack"` array,
//! innermost frame first, symbolized on the formatter worker that writes the line
//! (docs/stacks.md says why there and not in a stage of its own).
//!
//! [`maps`] keeps what each process mapped (so processes that exited still get names);
//! [`symbols`] turns a file offset or a kernel address into functions, files and lines,
//! with bounded caches and a time budget; [`shared_symbols`] makes one symbolizer serve
//! all the formatter workers of a run.
//!
//! [`perf_map`] names JIT code from `/tmp/perf-PID.map`; [`unwind`] turns the user
//! registers and stack copy of `--call-graph dwarf` into the user frames.
//!
//! [`build_ids`] tells, for a recorded file, whether a module on disk is still the one
//! recorded; [`stacktrace`] writes a stack as OTLP's `code.stacktrace` text; [`cache`]
//! keeps each distinct stack as written, so a stack seen again is one copy; [`ids`]
//! writes each distinct stack once, on a line of its own that records name
//! (`--stack-ids`); [`call_path`] names a stack's functions for `top -g`.
//!
//! [`module_files`] finds the file a process mapped as the process sees it (its mount
//! namespace: containers), or says why none may name its frames; [`vdso`] stands for
//! the `[vdso]` every process maps (uevrec's own image, read once).
//!
//! Layers, lowest first: `debuginfod`, `module_files`, `vdso`, `maps`, `perf_map`, `symbols`,
//! `shared_symbols`, `build_ids`, `unwind`, `ids`, `cache`, `stacktrace`, `call_path`.

pub mod build_ids;
pub mod cache;
pub mod call_path;
pub mod debuginfod;
pub mod ids;
pub mod maps;
pub mod module_files;
pub mod perf_map;
pub mod shared_symbols;
pub mod stacktrace;
pub mod symbols;
pub mod unwind;
pub mod vdso;

use std::io::Write;
use std::sync::Arc;

use uevrec_parsers::callchain::{Callchain, FrameContext, PERF_CONTEXT_USER};
use uevrec_parsers::stack_frames::{stacktrace_module, write_frame_text};
use uevrec_parsers::user_stack::UserStack;
use uevrec_parsers::{ContextUpdate, RecordStamp};

use cache::{StackCache, StackKey};
use maps::ProcessMaps;
use perf_map::PerfMaps;
use shared_symbols::{Naming, SharedSymbols};
use symbols::Resolved;
use unwind::{Truncated, UserUnwinder};

/// What the session line says the `stack` key holds.
pub const FRAMES_IN_WORDS: &str = "stack: the frames, innermost first; each with addr (hex), \
     context (kernel, user …), and when known symbol, offset (bytes into it), module (the \
     file), file and line (of the call; of the instruction for the innermost frame), \
     inlined (the calls inlined at the address, innermost first), perf_map (true: named \
     from /tmp/perf-PID.map); a frame without names \
     says why in unsymbolized (no_mapping, no_file, behind, kallsyms_hidden, no_symbols \
     …); with --no-symbolize, user frames carry module, file_offset and build_id instead; \
     with --call-graph dwarf the last user frame says why the walk ended early in \
     truncated (stack_copy: past the copied stack, max_stack, unwind_failed); with \
     --stack-ids a record carries stack_id instead, the id of a {\"uevrec\":\"stack\",\"id\":N,\
     \"stack\":[…]} line before it in the same file (the latest with that id)";

/// How stacks are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StackOptions {
    /// Names for the addresses (off: `--no-symbolize`, each user frame with its module,
    /// file offset and build id, for symbolizing elsewhere).
    pub symbolize: bool,
    /// The stacks of a recorded file (`uevrec decode`): the processes are not this
    /// machine's now, so mappings come from the file's records only (never
    /// `/proc/PID/maps`), and a frame in a file whose build id is not the one recorded
    /// is not named from it ([`build_ids`]).
    pub offline: bool,
    /// Frames per stack at most, kernel and user together (the user frames unwound from
    /// a stack copy stop there: the kernel bounds only its own part).
    pub max_frames: usize,
    /// Each distinct stack on a line of its own, the records naming it by id
    /// (`--stack-ids`, [`ids`]; [`StackWriter::write_id`]).
    pub ids: bool,
    /// The names nearly every stack needs (the kernel's, the C library's) loaded when
    /// a formatter's writer is made, before records wait on them ([`StackWriter::warm`]:
    /// a live recording).
    pub warm: bool,
    /// Kernel frames are recorded (not `--user-callchains`): with [`StackOptions::warm`],
    /// the kernel's names are loaded too.
    pub kernel_frames: bool,
}

/// Named frames kept per worker (a frame's JSON keys after `addr` and `context` and its
/// `code.stacktrace` text), by module, file offset and look-up distance, or by kernel
/// address: about 300 bytes each.
pub const MAX_RENDERED: usize = 1 << 16;

/// A frame's names as each output writes them, made once per distinct frame.
#[derive(Debug, Default)]
struct Named {
    /// JSON lines: the frame's keys after `addr` and `context` (`,"module":…`).
    json: Vec<u8>,
    /// `code.stacktrace`: the frame's line after its address (`symbol+0xOFFSET (module)`).
    text: String,
    /// `code.stacktrace`: the calls inlined at its address, innermost first (a line each).
    inlined: Vec<Arc<str>>,
    /// The function, when named (`top`'s call paths, [`call_path`]).
    symbol: Option<Arc<str>>,
}

impl Named {
    /// Names with `json` keys and no symbol in the text (`[unknown] (module)`).
    fn unnamed(json: &[u8], module: &str) -> Self {
        let mut n = Named {
            json: json.to_vec(),
            ..Named::default()
        };
        write_frame_text(&mut n.text, None, None, module);
        n
    }

    /// The names of `r` (looked up `back` bytes before the address) in `module`.
    fn resolved(&mut self, r: &Resolved, back: u64, module: &str) {
        write_resolved(&mut self.json, r, back);
        match r.frames.split_last() {
            Some((outer, inner)) => {
                let offset = (!outer.inlined).then(|| outer.offset.saturating_add(back));
                write_frame_text(&mut self.text, Some(&outer.symbol), offset, module);
                self.inlined.extend(inner.iter().map(|f| f.symbol.clone()));
                self.symbol = Some(outer.symbol.clone());
            }
            None => write_frame_text(&mut self.text, None, None, module),
        }
    }

    /// Empty again, keeping the buffers.
    fn clear(&mut self) {
        self.json.clear();
        self.text.clear();
        self.inlined.clear();
        self.symbol = None;
    }
}

/// One frame of a record's stack as [`StackWriter::walk`] hands it to an output.
enum Frame<'n> {
    /// An address, where it ran, its names, and (the last unwound frame) why the walk
    /// ended early.
    Named {
        address: u64,
        context: FrameContext,
        names: &'n Named,
        truncated: Option<&'static str>,
    },
    /// The kernel's chain cannot be read from here on (why): its rest is not guessed at.
    Broken(&'n str),
}

/// The names of frames that have none, made once.
#[derive(Debug)]
struct Unnamed {
    /// A kernel frame under `--no-symbolize`.
    kernel: Named,
    /// A frame of another context (hypervisor, guest …).
    other: Named,
    /// A user address in no mapping of its process.
    no_mapping: Named,
}

impl Default for Unnamed {
    fn default() -> Self {
        Unnamed {
            kernel: Named::unnamed(b"", stacktrace_module(None, true)),
            other: Named::unnamed(b"", stacktrace_module(None, false)),
            no_mapping: Named::unnamed(
                b",\"unsymbolized\":\"no_mapping\"",
                stacktrace_module(None, false),
            ),
        }
    }
}

/// A named user frame's key: the file read, the module as the process mapped it, the
/// file offset and the look-up distance.
type UserFrameKey = (Arc<str>, Arc<str>, u64, u64);

/// The stack writer of one formatter worker.
#[derive(Debug)]
pub struct StackWriter {
    options: StackOptions,
    maps: ProcessMaps,
    perf_maps: PerfMaps,
    /// A user frame's names by (file read, module as mapped, file offset, look-up
    /// distance): a named frame is one copy, not a look-up and escaping each time.
    user: foldhash::HashMap<UserFrameKey, Named>,
    /// A kernel frame's names by address.
    kernel: foldhash::HashMap<u64, Named>,
    /// The names of frames that have none.
    unnamed: Unnamed,
    /// The names of a frame that is not kept (JIT code, a look-up behind; reused).
    scratch: Named,
    /// Offline: the build ids of the modules on disk now.
    build_ids: build_ids::BuildIds,
    /// The unwinder of `--call-graph dwarf` (made at its first stack copy).
    unwinder: Option<Box<UserUnwinder>>,
    /// The user frames of the record being written (reused).
    unwound: Vec<u64>,
    /// Each distinct stack as written.
    cache: StackCache,
    /// `--stack-ids`: the JSON array of a stack, then its line (reused).
    frames: Vec<u8>,
    line: Vec<u8>,
    /// A frame of the stack being walked may be named otherwise next time, though its
    /// key is the same (JIT code, a look-up put off): the stack is not cached.
    uncacheable: bool,
    /// The symbolizer, shared with the run's other writers ([`StackWriter::sharing`]).
    symbols: SharedSymbols,
    /// How frames are named: the kallsyms of a recorded file ([`StackWriter::with_kallsyms`]),
    /// no time budget offline.
    naming: Naming,
}

impl StackWriter {
    /// A writer for `options`, naming frames with its thread's symbolizer
    /// ([`StackWriter::sharing`]: a run's shared one).
    pub fn new(options: StackOptions) -> Self {
        StackWriter {
            options,
            maps: ProcessMaps::new(!options.offline),
            perf_maps: PerfMaps::default(),
            user: foldhash::HashMap::default(),
            kernel: foldhash::HashMap::default(),
            unnamed: Unnamed::default(),
            scratch: Named::default(),
            build_ids: build_ids::BuildIds::default(),
            unwinder: None,
            unwound: Vec::new(),
            cache: StackCache::default(),
            frames: Vec::new(),
            line: Vec::new(),
            uncacheable: false,
            symbols: SharedSymbols::default(),
            naming: Naming {
                unbudgeted: options.offline,
                kallsyms: None,
            },
        }
    }

    /// This writer names frames with `symbols` ([`SharedSymbols::thread`]: the symbolizer
    /// thread of the run's writers, each file's names loaded once for all).
    pub fn sharing(mut self, symbols: &SharedSymbols) -> Self {
        self.symbols = symbols.clone();
        self
    }

    /// This writer names kernel frames from the kallsyms text in the file at `path` (a
    /// recorded file's own, written out for the symbolizer) instead of this machine's.
    pub fn with_kallsyms(mut self, path: &std::path::Path) -> Self {
        self.naming.kallsyms = Some(path.to_owned());
        self
    }

    /// A writer for `options` that knows the mappings of `maps` already (a flight
    /// recording's dump: the mappings were reported while the records waited).
    pub fn with_maps(options: StackOptions, maps: ProcessMaps) -> Self {
        StackWriter {
            maps,
            ..StackWriter::new(options)
        }
    }

    /// This writer as formatter worker `worker` of the run (its stack ids tell it:
    /// [`ids`]; 0 to 255).
    pub fn for_worker(mut self, worker: u32) -> Self {
        self.cache = StackCache::for_worker(worker);
        self
    }

    /// Whether stacks are written once each and named by id ([`StackWriter::write_id`]).
    pub fn ids(&self) -> bool {
        self.options.ids
    }

    /// Load now, before the first record waits on them, the names nearly every stack
    /// needs: the kernel's (blazesym reads all of `/proc/kallsyms` at the first kernel
    /// frame: ≈ 0.05 s) when kernel frames are kept, and the C library's (its symbols
    /// and debug lines, often compressed: ≈ 0.05 s; native stacks pass through it in
    /// the system call's wrapper and the program's start) — time during which a
    /// flat-out recording's rings would fill. Only when the options ask
    /// ([`StackOptions::warm`]: a live recording), by the symbolizer that names this
    /// writer's frames (the run's shared one: the first writer loads, the others find
    /// the names loaded).
    pub fn warm(&mut self) {
        if !(self.options.warm && self.options.symbolize) {
            return;
        }
        if self.options.kernel_frames && self.symbols.kallsyms_readable() {
            // Any address: the first look-up loads the table.
            self.kernel_frame(0xffff_ffff_8100_0000, &mut |_| {});
        }
        // The C library as uevrec maps it: the file traced programs of this mount
        // namespace map too (a container's own is another file, named when met).
        if let Some((path, offset)) = c_library() {
            self.symbols.user(&self.naming, &path, &[], offset);
        }
    }

    /// Take a context change (mappings, execs, forks, exits).
    pub fn apply(&mut self, time: Option<u64>, update: &ContextUpdate<'_>) {
        self.maps.apply(time, update);
    }

    /// Append `,"stack":[…]` for the record of `stamp` to `out`: the frames of the
    /// kernel's chain, then those unwound from `user` (`--call-graph dwarf`), if any; a
    /// stack written before, as it was ([`cache`]).
    pub fn write(
        &mut self,
        out: &mut Vec<u8>,
        stamp: &RecordStamp,
        stack: Callchain<'_>,
        user: Option<UserStack<'_>>,
    ) {
        out.extend_from_slice(b",\"stack\":");
        let unwound = self.unwind(stamp, stack, user);
        let key = self.cache_key(stamp, stack, &unwound);
        if let Some(json) = self.cache.json(&key) {
            out.extend_from_slice(json);
        } else {
            let at = out.len();
            self.write_frames(out, stamp, stack, &unwound);
            if !self.uncacheable {
                self.cache.keep_json(&key, &out[at..]);
            }
        }
        self.unwound = unwound.frames;
    }

    /// `--stack-ids`: append `,"stack_id":N` for the record of `stamp` to `out`, whose
    /// line starts at `start`; the first time this worker writes that stack (or each time,
    /// for a stack that may be named otherwise next time), its line
    /// `{"time":…,"uevrec":"stack","id":N,"stack":[…]}` (the record's time) goes before
    /// the record's ([`ids`]).
    pub fn write_id(
        &mut self,
        out: &mut Vec<u8>,
        start: usize,
        stamp: &RecordStamp,
        stack: Callchain<'_>,
        user: Option<UserStack<'_>>,
    ) {
        let unwound = self.unwind(stamp, stack, user);
        let key = self.cache_key(stamp, stack, &unwound);
        let id = match self.cache.id(&key) {
            Some(id) => id,
            None => {
                let mut frames = std::mem::take(&mut self.frames);
                frames.clear();
                self.write_frames(&mut frames, stamp, stack, &unwound);
                let id = self
                    .cache
                    .keep_id(&key, ids::line_len(&frames), !self.uncacheable);
                self.line.clear();
                ids::write_line(&mut self.line, ids::time_of(&out[start..]), id, &frames);
                // Before the record: a reader knows the id when it meets it.
                out.splice(start..start, self.line.iter().copied());
                self.frames = frames;
                id
            }
        };
        ids::write_key(out, id);
        self.unwound = unwound.frames;
    }

    /// What decides the frames of the record of `stamp` (its chain `stack`, its user
    /// frames `unwound`) and their names: its key in the [`cache`].
    fn cache_key<'a>(
        &mut self,
        stamp: &RecordStamp,
        stack: Callchain<'a>,
        unwound: &'a Unwound,
    ) -> StackKey<'a> {
        // Without user frames nothing of the process names a frame: its kernel-only
        // stacks are those of every process (and no `/proc` read for a kernel thread).
        let user = !unwound.frames.is_empty() || stack.entries().any(|w| w == PERF_CONTEXT_USER);
        StackKey {
            run: if user {
                self.maps.run_id(stamp.pid, stamp.time_unix_ns)
            } else {
                0
            },
            chain: stack.bytes(),
            unwound: &unwound.frames,
            truncated: unwound.truncated,
        }
    }

    /// The JSON array of the frames of the record of `stamp`, walked and named.
    fn write_frames(
        &mut self,
        out: &mut Vec<u8>,
        stamp: &RecordStamp,
        stack: Callchain<'_>,
        unwound: &Unwound,
    ) {
        out.push(b'[');
        let mut first = true;
        self.walk(stamp, stack, unwound, &mut |frame| {
            if !first {
                out.push(b',');
            }
            first = false;
            match frame {
                Frame::Broken(why) => {
                    out.extend_from_slice(b"{\"error\":");
                    let _ = serde_json::to_writer(&mut *out, why);
                }
                Frame::Named {
                    address,
                    context,
                    names,
                    truncated,
                } => {
                    out.extend_from_slice(b"{\"addr\":\"");
                    push_hex(out, address);
                    out.extend_from_slice(b"\",\"context\":\"");
                    out.extend_from_slice(context.name().as_bytes());
                    out.push(b'"');
                    out.extend_from_slice(&names.json);
                    if let Some(why) = truncated {
                        out.extend_from_slice(b",\"truncated\":\"");
                        out.extend_from_slice(why.as_bytes());
                        out.push(b'"');
                    }
                }
            }
            out.push(b'}');
        });
        out.push(b']');
    }

    /// The user frames of the record of `stamp` unwound from its stack copy `user`
    /// (`--call-graph dwarf`; none without one), after the frames of its chain `stack`.
    fn unwind(
        &mut self,
        stamp: &RecordStamp,
        stack: Callchain<'_>,
        user: Option<UserStack<'_>>,
    ) -> Unwound {
        let mut frames = std::mem::take(&mut self.unwound);
        frames.clear();
        let Some(user) = user else {
            return Unwound {
                frames,
                truncated: None,
            };
        };
        let max = self.options.max_frames.saturating_sub(chain_frames(stack));
        let unwinder = self.unwinder.get_or_insert_with(Box::default);
        let truncated = unwinder.walk(
            &mut self.maps,
            stamp.pid,
            stamp.time_unix_ns,
            &user,
            max,
            &mut frames,
        );
        Unwound { frames, truncated }
    }

    /// Hand each frame of the record of `stamp` to `emit`, innermost first: the kernel's
    /// chain (a broken chain as [`Frame::Broken`], then nothing more of it), then the user
    /// frames `unwound` from its stack copy. Notes in `uncacheable` whether a frame may
    /// be named otherwise next time.
    fn walk(
        &mut self,
        stamp: &RecordStamp,
        stack: Callchain<'_>,
        unwound: &Unwound,
        emit: &mut dyn FnMut(Frame<'_>),
    ) {
        self.uncacheable = false;
        let mut user_frames = 0u32;
        for frame in stack.frames() {
            let frame = match frame {
                Ok(f) => f,
                Err(e) => {
                    // The frames before stay; the rest of the chain is not guessed at.
                    emit(Frame::Broken(&e.to_string()));
                    break;
                }
            };
            let (address, context) = (frame.address, frame.context);
            let mut named = |names: &Named| {
                emit(Frame::Named {
                    address,
                    context,
                    names,
                    truncated: None,
                })
            };
            match context {
                FrameContext::Kernel if self.options.symbolize => {
                    self.kernel_frame(address, &mut named)
                }
                FrameContext::Kernel => named(&self.unnamed.kernel),
                FrameContext::User => {
                    // A return address but for the innermost frame: its call is the
                    // instruction before (the line of the call, as perf shows it).
                    let back = u64::from(user_frames > 0);
                    user_frames = user_frames.saturating_add(1);
                    self.user_frame(stamp, address, back, &mut named);
                }
                _ => named(&self.unnamed.other),
            }
        }
        let last = unwound.frames.len().saturating_sub(1);
        for (i, &address) in unwound.frames.iter().enumerate() {
            let truncated = unwound.truncated.filter(|_| i == last).map(Truncated::name);
            let back = u64::from(user_frames > 0);
            user_frames = user_frames.saturating_add(1);
            self.user_frame(stamp, address, back, &mut |names| {
                emit(Frame::Named {
                    address,
                    context: FrameContext::User,
                    names,
                    truncated,
                })
            });
        }
    }

    /// The names of a kernel frame, to `emit`.
    fn kernel_frame(&mut self, address: u64, emit: &mut dyn FnMut(&Named)) {
        if let Some(n) = self.kernel.get(&address) {
            return emit(n);
        }
        let r = self.symbols.kernel(&self.naming, address);
        let mut n = Named::default();
        n.resolved(&r, 0, stacktrace_module(None, true));
        if r.reason == Some("behind") {
            self.uncacheable = true;
            return emit(&n);
        }
        if self.kernel.len() >= MAX_RENDERED {
            self.kernel.clear();
        }
        emit(self.kernel.entry(address).or_insert(shrunk(n)));
    }

    /// A user frame of `module` that no file may name, with the reason `why`.
    fn unsymbolized(&mut self, module: &str, why: &str, emit: &mut dyn FnMut(&Named)) {
        let mut n = std::mem::take(&mut self.scratch);
        n.clear();
        n.json.extend_from_slice(b",\"module\":");
        let _ = serde_json::to_writer(&mut n.json, module);
        let _ = write!(n.json, ",\"unsymbolized\":\"{why}\"");
        write_frame_text(&mut n.text, None, None, module);
        emit(&n);
        self.scratch = n;
    }

    /// The names of a user frame at `address` (looked up `back` bytes before it), to
    /// `emit`.
    fn user_frame(
        &mut self,
        stamp: &RecordStamp,
        address: u64,
        back: u64,
        emit: &mut dyn FnMut(&Named),
    ) {
        let Some(m) = self.maps.find(stamp.pid, stamp.time_unix_ns, address) else {
            return emit(&self.unnamed.no_mapping);
        };
        let offset = m.file_offset(address);
        let path = m.path.clone();
        let build_id = m.build_id.clone();
        let opened = m.file.open_path(&path).cloned();
        // `//anon` (anonymous memory), `[stack]` …: not files; `[vdso]` one when it is
        // uevrec's own image (vdso.rs).
        let is_file = is_file(m);
        if !is_file && self.options.symbolize {
            // JIT code its runtime named (read again as it grows: not cached here).
            self.uncacheable = true;
            let mut n = std::mem::take(&mut self.scratch);
            n.clear();
            n.json.extend_from_slice(b",\"module\":");
            let _ = serde_json::to_writer(&mut n.json, &*path);
            if let Some((name, into)) = self.perf_maps.find(stamp.pid, address) {
                n.json.extend_from_slice(b",\"symbol\":");
                let _ = serde_json::to_writer(&mut n.json, &*name);
                let _ = write!(n.json, ",\"offset\":{into},\"perf_map\":true");
                write_frame_text(&mut n.text, Some(&name), Some(into), &path);
                n.symbol = Some(name);
            } else {
                n.json.extend_from_slice(b",\"unsymbolized\":\"no_file\"");
                write_frame_text(&mut n.text, None, None, &path);
            }
            emit(&n);
            self.scratch = n;
            return;
        }
        let open = match opened {
            Ok(open) => open,
            Err(why) if self.options.symbolize => {
                // No file may name it (another namespace's file we could not reach, or
                // not the build the process mapped): the reason, never a wrong name.
                return self.unsymbolized(&path, why, emit);
            }
            Err(_) => path.clone(),
        };
        // Offline: the build recorded, at its path or found by its build id; another
        // file at the path would give wrong names.
        let open = match self.options.offline && self.options.symbolize {
            true => match self.build_ids.locate(&open, &build_id) {
                Ok(found) => found,
                Err(why) => return self.unsymbolized(&path, why, emit),
            },
            false => open,
        };
        // By the file read (one held open for another namespace has a path of its
        // own, a build found by its id another), shown by the path the process mapped.
        let key = (open, path.clone(), offset, back);
        if let Some(n) = self.user.get(&key) {
            return emit(n);
        }
        let mut n = Named::default();
        n.json.extend_from_slice(b",\"module\":");
        let _ = serde_json::to_writer(&mut n.json, &*path);
        let mut behind = false;
        if self.options.symbolize {
            let at = offset.saturating_sub(back);
            let r = self.symbols.user(&self.naming, &key.0, &build_id, at);
            behind = r.reason == Some("behind");
            n.resolved(&r, back, &path);
        } else {
            n.json.extend_from_slice(b",\"file_offset\":\"");
            push_hex(&mut n.json, offset);
            n.json.push(b'"');
            if !build_id.is_empty() {
                n.json.extend_from_slice(b",\"build_id\":\"");
                for b in build_id.iter() {
                    n.json.push(HEX[usize::from(b >> 4)]);
                    n.json.push(HEX[usize::from(b & 15)]);
                }
                n.json.push(b'"');
            }
            write_frame_text(&mut n.text, None, None, &path);
        }
        if behind {
            self.uncacheable = true;
            return emit(&n);
        }
        if self.user.len() >= MAX_RENDERED {
            self.user.clear();
        }
        emit(self.user.entry(key).or_insert(shrunk(n)));
    }
}

/// The user frames of a record unwound from its stack copy (`--call-graph dwarf`).
struct Unwound {
    /// Innermost first (none without a stack copy).
    frames: Vec<u64>,
    /// Why the walk ended early, if it did.
    truncated: Option<Truncated>,
}

/// The frames of the kernel's chain `stack` as the walk counts them: up to and with the
/// first that cannot be read.
fn chain_frames(stack: Callchain<'_>) -> usize {
    let mut n = 0;
    for frame in stack.frames() {
        n += 1;
        if frame.is_err() {
            break;
        }
    }
    n
}

/// Whether a file names the frames of mapping `m`: a mapped file, or uevrec's copy of
/// the `[vdso]` image (anonymous memory, `[stack]` … have none).
fn is_file(m: &maps::Mapping) -> bool {
    (m.path.starts_with('/') && !m.path.starts_with("//"))
        || matches!(m.file, module_files::ModuleFile::Held(_))
}

/// `n` without spare capacity (kept in a cache).
fn shrunk(mut n: Named) -> Named {
    n.json.shrink_to_fit();
    n.text.shrink_to_fit();
    n
}

impl uevrec_parsers::StackNamer for StackWriter {
    fn context(&mut self, time_unix_ns: Option<u64>, update: &ContextUpdate<'_>) {
        self.apply(time_unix_ns, update);
    }

    fn write(
        &mut self,
        out: &mut Vec<u8>,
        stamp: &RecordStamp,
        stack: Callchain<'_>,
        user: Option<UserStack<'_>>,
    ) {
        if self.options.ids {
            // The record's line is the last in `out` (its `}\n` taken off).
            let start = memchr::memrchr(b'\n', out).map_or(0, |end| end + 1);
            self.write_id(out, start, stamp, stack, user);
        } else {
            StackWriter::write(self, out, stamp, stack, user);
        }
    }
}

/// Lowercase hex digits.
const HEX: &[u8; 16] = b"0123456789abcdef";

/// `0x` and `v` in lowercase hex (what `{v:#x}` writes, without the formatting machinery).
fn push_hex(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; 16];
    out.extend_from_slice(b"0x");
    out.extend_from_slice(hex_digits(&mut buf, v));
}

/// `v` in lowercase hex without `0x` (what `{v:x}` writes), in `buf` (ASCII; not checked
/// as UTF-8 here: the JSON path, per frame, takes the bytes).
fn hex_digits(buf: &mut [u8; 16], v: u64) -> &[u8] {
    let mut at = buf.len();
    let mut v = v;
    loop {
        at -= 1;
        buf[at] = HEX[(v & 15) as usize];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    &buf[at..]
}

/// The names of a frame (`symbol`, `offset`, `file`, `line`, and the inlined calls at
/// its address as `inlined` entries), or why there are none; `back`: how far before the
/// address it was looked up (the offset is the address's own).
fn write_resolved(out: &mut Vec<u8>, r: &Resolved, back: u64) {
    let Some((outer, inner)) = r.frames.split_last() else {
        let _ = write!(
            out,
            ",\"unsymbolized\":\"{}\"",
            r.reason.unwrap_or("not_found")
        );
        return;
    };
    write_names(out, outer, back);
    if !inner.is_empty() {
        out.extend_from_slice(b",\"inlined\":[");
        for (i, f) in inner.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.push(b'{');
            // write_names starts with a comma: skip it.
            let at = out.len();
            write_names(out, f, 0);
            out.remove(at);
            out.push(b'}');
        }
        out.push(b']');
    }
}

/// `,"symbol":…,"offset":…,"file":…,"line":…` of one function.
fn write_names(out: &mut Vec<u8>, f: &symbols::SourceFrame, back: u64) {
    out.extend_from_slice(b",\"symbol\":");
    let _ = serde_json::to_writer(&mut *out, &*f.symbol);
    if !f.inlined {
        let _ = write!(out, ",\"offset\":{}", f.offset.saturating_add(back));
    }
    if let Some(file) = &f.file {
        out.extend_from_slice(b",\"file\":");
        let _ = serde_json::to_writer(&mut *out, &**file);
    }
    if let Some(line) = f.line {
        let _ = write!(out, ",\"line\":{line}");
    }
}

/// The C library's file as this process maps it, and the file offset of a function in
/// it (`getppid`); `None` when it is not a mapped file (a static build).
fn c_library() -> Option<(Arc<str>, u64)> {
    let address = libc::getppid as unsafe extern "C" fn() -> libc::pid_t as usize as u64;
    let maps = crate::system::proc_maps::read_proc_maps(std::process::id())?;
    let m = maps.into_iter().find(|m| m.contains(address))?;
    let offset = m.file_offset(address);
    Some((m.path, offset))
}

#[cfg(test)]
mod tests {
    use super::*;
    use uevrec_parsers::Endian;
    use uevrec_parsers::callchain::PERF_CONTEXT_KERNEL;

    /// A process id no process has: its mappings are only those the tests give.
    pub(super) const PID: u32 = 4_000_000_001;
    /// Where the tests map files in it.
    pub(super) const AT: u64 = 0x10_0000_0000;
    /// Where they map a second file (a `dlopen`).
    const DLOPEN_AT: u64 = 0x20_0000_0000;

    /// The executable mapping of this process whose file is `path` (`None`: any
    /// library): `(start, end, file offset, path)`.
    pub(super) fn own_mapping(path: Option<&str>) -> (u64, u64, u64, String) {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let (range, perms, pgoff, file) = (f[0], f[1], f[2], *f.get(5)?);
                let wanted = match path {
                    Some(p) => file == p,
                    None => file.contains("/libc.so"),
                };
                if perms != "r-xp" || !wanted {
                    return None;
                }
                let (start, end) = range.split_once('-')?;
                let hex = |h| u64::from_str_radix(h, 16).ok();
                Some((hex(start)?, hex(end)?, hex(pgoff)?, file.to_owned()))
            })
            .next()
            .unwrap()
    }

    /// `path`'s mapping `(start, end, pgoff)` mapped at `at` in [`PID`].
    pub(super) fn mmap(
        at: u64,
        (start, end, pgoff): (u64, u64, u64),
        path: &[u8],
    ) -> ContextUpdate<'_> {
        ContextUpdate::Mmap {
            pid: PID,
            addr: at,
            len: end - start,
            pgoff,
            build_id: b"",
            path,
        }
    }

    /// The stacks of a recorded file's records, named without a time budget (the same
    /// names however long the look-ups take).
    pub(super) fn writer() -> StackWriter {
        StackWriter::new(StackOptions {
            symbolize: true,
            offline: true,
            max_frames: 127,
            ids: false,
            warm: false,
            kernel_frames: false,
        })
    }

    /// The JSON `stack` and the `code.stacktrace` text of the chain `words` of a record
    /// of [`PID`] at `time`, written by `w`.
    fn both(w: &mut StackWriter, words: &[u64], time: u64) -> (String, String) {
        both_of(w, PID, words, time)
    }

    /// The stamp of a record of process `pid` (its main thread) at `time`.
    pub(super) fn stamp_of(pid: u32, time: u64) -> RecordStamp {
        RecordStamp {
            pid,
            tid: pid,
            time_unix_ns: Some(time),
            ..RecordStamp::default()
        }
    }

    /// [`both`] for a record of process `pid`.
    fn both_of(w: &mut StackWriter, pid: u32, words: &[u64], time: u64) -> (String, String) {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let chain = Callchain::new(&bytes, Endian::NATIVE);
        let stamp = stamp_of(pid, time);
        let mut json = Vec::new();
        w.write(&mut json, &stamp, chain, None);
        let text = stacktrace::StackText::default()
            .render(w, &stamp, chain, None)
            .to_owned();
        (String::from_utf8(json).unwrap(), text)
    }

    /// Writes records through one writer as context changes come, and checks each
    /// against a writer that has seen only those changes and no stack before (every
    /// frame walked and named afresh), and against itself from its cache.
    struct Checker {
        cached: StackWriter,
        updates: Vec<(u64, ContextUpdate<'static>)>,
    }

    impl Checker {
        fn apply(&mut self, time: u64, update: ContextUpdate<'static>) {
            self.cached.apply(Some(time), &update);
            self.updates.push((time, update));
        }

        /// The JSON stack of `words` at `time`, checked.
        fn stack(&mut self, words: &[u64], time: u64) -> String {
            let mut fresh = writer();
            for (t, u) in &self.updates {
                fresh.apply(Some(*t), u);
            }
            let expected = both(&mut fresh, words, time);
            assert!(!expected.0.contains("\"behind\""), "{}", expected.0);
            let hits = self.cached.cache.hits;
            let first = both(&mut self.cached, words, time);
            let again = both(&mut self.cached, words, time);
            assert_eq!(first, expected, "the cached writer, first time");
            assert_eq!(again, expected, "the cached writer, again");
            assert!(
                self.cached.cache.hits >= hits + 2,
                "the second time from the cache"
            );
            expected.0
        }
    }

    /// A stack written from the cache is byte for byte the stack walked (JSON and
    /// `code.stacktrace`), and no change of a process's mappings (an exec, a library
    /// loaded, its id reused by another program) lets a stack keep the old names.
    #[test]
    fn cached_stacks_are_the_stacks_walked_and_follow_the_mappings() {
        let exe = std::env::current_exe().unwrap();
        let (start, end, pgoff, exe) = own_mapping(exe.to_str());
        let exe: &'static str = Box::leak(exe.into_boxed_str());
        let (l_start, l_end, l_pgoff, libc) = own_mapping(None);
        let libc: &'static str = Box::leak(libc.into_boxed_str());
        let here =
            cached_stacks_are_the_stacks_walked_and_follow_the_mappings as fn() as usize as u64;
        assert!((start..end).contains(&here));
        let in_exe = AT + (here - start);
        let words = [
            PERF_CONTEXT_KERNEL,
            0xffff_ffff_8100_0130,
            PERF_CONTEXT_USER,
            in_exe + 3,
            in_exe + 0x10,
            AT - 0x1000,
        ];
        let with_dlopened = [PERF_CONTEXT_USER, in_exe + 3, DLOPEN_AT + 0x40];
        let mut c = Checker {
            cached: writer(),
            updates: Vec::new(),
        };
        c.apply(1, mmap(AT, (start, end, pgoff), exe.as_bytes()));
        let before = c.stack(&words, 2);
        assert!(
            before.contains(exe) && before.contains("cached_stacks_are"),
            "{before}"
        );
        assert!(
            before.contains("no_mapping") && !before.contains(libc),
            "{before}"
        );

        // An exec: another program (libc's code where the test binary was).
        c.apply(
            10,
            ContextUpdate::Exec {
                pid: PID,
                comm: b"b",
            },
        );
        // As long as the test binary's mapping: its frames' addresses fall in it.
        let len = (end - start).max(l_end - l_start);
        c.apply(
            11,
            mmap(AT, (l_start, l_start + len, l_pgoff), libc.as_bytes()),
        );
        let exec = c.stack(&words, 12);
        assert!(exec.contains(libc) && !exec.contains(exe), "{exec}");
        assert_eq!(c.stack(&words, 5), before, "a record before the exec");

        // A library loaded: its frames are named from then on.
        let unloaded = c.stack(&with_dlopened, 12);
        assert_eq!(unloaded.matches("no_mapping").count(), 1, "{unloaded}");
        c.apply(13, mmap(DLOPEN_AT, (start, end, pgoff), exe.as_bytes()));
        let loaded = c.stack(&with_dlopened, 14);
        assert!(
            !loaded.contains("no_mapping") && loaded.contains(exe),
            "{loaded}"
        );

        // The process exits and another program reuses its id: no names of either.
        c.apply(15, ContextUpdate::Exit { tid: PID });
        c.apply(
            16,
            ContextUpdate::Fork {
                tid: PID,
                parent_tid: PID + 1,
            },
        );
        let reused = c.stack(&words, 17);
        assert_eq!(reused.matches("no_mapping").count(), 3, "{reused}");
        assert!(!reused.contains(exe) && !reused.contains(libc), "{reused}");
        assert_eq!(c.stack(&words, 12), exec, "the old program's record");
    }

    /// A live recording's writer loads the C library's names before the first record:
    /// one cold look-up on a fresh thread, after which a frame in it costs none; without
    /// `warm`, nothing is loaded.
    #[test]
    fn warm_loads_the_c_library_before_the_first_record() {
        let cold_after_warm = |warm: bool| {
            std::thread::spawn(move || {
                let mut w = StackWriter::new(StackOptions {
                    symbolize: true,
                    max_frames: 127,
                    warm,
                    ..StackOptions::default()
                });
                w.warm();
                let warmed = w.symbols.cold();
                let (path, offset) = c_library().expect("the C library is mapped");
                let named = w.symbols.user(&w.naming, &path, &[], offset);
                let names: Vec<_> = named.frames.iter().map(|f| f.symbol.to_string()).collect();
                (warmed, w.symbols.cold(), names)
            })
            .join()
            .unwrap()
        };
        let (warmed, after, names) = cold_after_warm(true);
        assert_eq!((warmed, after), (1, 1), "one look-up, in warm()");
        assert!(names.iter().any(|n| n.contains("getppid")), "{names:?}");
        let (warmed, after, _) = cold_after_warm(false);
        assert_eq!((warmed, after), (0, 1), "nothing loaded without warm");
    }

    /// Writers sharing a symbolizer thread load a file's names once: a second writer's
    /// first frame in it is no cold look-up, though it runs on another thread.
    #[test]
    fn writers_sharing_a_symbolizer_load_a_file_once() {
        let shared = SharedSymbols::thread();
        let options = StackOptions {
            symbolize: true,
            max_frames: 127,
            warm: true,
            ..StackOptions::default()
        };
        let mut first = StackWriter::new(options).sharing(&shared);
        first.warm();
        assert_eq!(
            shared.cold(),
            1,
            "the first writer's warm() loads the C library"
        );
        let mut second = StackWriter::new(options).sharing(&shared);
        std::thread::spawn(move || second.warm()).join().unwrap();
        assert_eq!(shared.cold(), 1, "the second finds it loaded");
        drop(first);
        // Another run's thread loads it again.
        let other = SharedSymbols::thread();
        let mut third = StackWriter::new(options).sharing(&other);
        third.warm();
        assert_eq!(other.cold(), 1);
    }

    /// A stack without user frames names nothing of its process: kept once for all.
    #[test]
    fn kernel_only_stacks_are_kept_once_for_every_process() {
        let mut w = writer();
        let words = [
            PERF_CONTEXT_KERNEL,
            0xffff_ffff_8100_0130,
            0xffff_ffff_8100_0200,
        ];
        let first = both_of(&mut w, PID, &words, 1);
        assert!(first.0.contains("\"context\":\"kernel\""), "{}", first.0);
        assert_eq!(both_of(&mut w, PID + 7, &words, 2), first);
        assert_eq!(both_of(&mut writer(), PID + 7, &words, 2), first);
        assert_eq!(w.cache.len(), 1);
    }

    /// A stack with JIT code is walked each time: the names its runtime adds to its
    /// perf map later are shown.
    #[test]
    fn stacks_with_jit_code_are_not_cached() {
        let perf_map = format!("/tmp/perf-{PID}.map");
        let _ = std::fs::remove_file(&perf_map);
        let mut w = StackWriter::new(StackOptions {
            symbolize: true,
            offline: false,
            max_frames: 127,
            ids: false,
            warm: false,
            kernel_frames: false,
        });
        let jit = (AT, AT + 0x1000, 0);
        w.apply(Some(1), &mmap(AT, jit, b"//anon"));
        let words = [PERF_CONTEXT_USER, AT + 0x20];
        let (unnamed, _) = both(&mut w, &words, 2);
        assert!(unnamed.contains("no_file"), "{unnamed}");
        std::fs::write(&perf_map, format!("{AT:x} 100 jitted\n")).unwrap();
        let (named, text) = both(&mut w, &words, 3);
        let _ = std::fs::remove_file(&perf_map);
        assert!(named.contains("\"symbol\":\"jitted\""), "{named}");
        assert!(text.contains("jitted+0x20"), "{text}");
        assert_eq!(w.cache.len(), 0);
    }

    /// `--stack-ids`: the lines of records of `words` (each `{"n":I}` before its stack),
    /// written by worker `worker`.
    fn with_ids(worker: u32, records: &[&[u64]]) -> Vec<serde_json::Value> {
        let mut w = StackWriter::new(StackOptions {
            ids: true,
            ..writer().options
        })
        .for_worker(worker);
        let mut out = Vec::new();
        for (i, words) in records.iter().enumerate() {
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
            let stamp = stamp_of(PID, 2);
            let start = out.len();
            out.extend_from_slice(format!("{{\"n\":{i}").as_bytes());
            w.write_id(
                &mut out,
                start,
                &stamp,
                Callchain::new(&bytes, Endian::NATIVE),
                None,
            );
            out.extend_from_slice(b"}\n");
        }
        out.split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect()
    }

    #[test]
    fn stack_ids_write_each_stack_once_before_its_first_record() {
        let one: &[u64] = &[PERF_CONTEXT_KERNEL, 0xffff_ffff_8100_0130];
        let two: &[u64] = &[PERF_CONTEXT_KERNEL, 0xffff_ffff_8100_0230];
        let lines = with_ids(0, &[one, two, one, one, two]);
        let kinds: Vec<String> = lines
            .iter()
            .map(|l| match (&l["uevrec"], &l["n"]) {
                (serde_json::Value::String(s), _) => s.clone(),
                (_, n) => format!("record {n}"),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "stack", "record 0", "stack", "record 1", "record 2", "record 3", "record 4"
            ]
        );
        // The stack line holds the array the inline form has; records name it.
        let (inline_one, _) = both(&mut writer(), one, 2);
        let inline: serde_json::Value =
            serde_json::from_str(inline_one.strip_prefix(",\"stack\":").unwrap()).unwrap();
        assert_eq!(lines[0]["stack"], inline);
        for (record, line) in [(1, 0), (4, 0), (5, 0), (3, 2), (6, 2)] {
            assert_eq!(lines[record]["stack_id"], lines[line]["id"], "{record}");
            assert!(lines[record].get("stack").is_none());
        }
        assert_ne!(lines[0]["id"], lines[2]["id"]);
        // Another worker's ids are others.
        let other = with_ids(1, &[one]);
        assert_eq!(other[0]["stack"], inline);
        assert_ne!(other[0]["id"], lines[0]["id"]);
    }

    #[test]
    fn hex_as_format_writes_it() {
        for v in [0, 1, 0xf, 0x10, 0xdead_beef, u64::MAX] {
            let mut out = Vec::new();
            push_hex(&mut out, v);
            assert_eq!(String::from_utf8(out).unwrap(), format!("{v:#x}"));
        }
    }
}
