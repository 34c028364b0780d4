//! Call stacks on JSON lines (`-g`): each record's callchain → a `"stack"` array,
//! innermost frame first, symbolized on the formatter worker that writes the line
//! (docs/stacks.md says why there and not in a stage of its own).
//!
//! [`maps`] keeps what each process mapped (so processes that exited still get names);
//! [`symbols`] turns a file offset or a kernel address into functions, files and lines,
//! with bounded caches and a time budget.
//!
//! [`perf_map`] names JIT code from `/tmp/perf-PID.map`; [`unwind`] turns the user
//! registers and stack copy of `--call-graph dwarf` into the user frames.
//!
//! [`build_ids`] tells, for a recorded file, whether a module on disk is still the one
//! recorded; [`stacktrace`] writes a stack as OTLP's `code.stacktrace` text.
//!
//! [`module_files`] finds the file a process mapped as the process sees it (its mount
//! namespace: containers), or says why none may name its frames.
//!
//! Layers, lowest first: `build_ids`, `module_files`, `maps`, `perf_map`, `symbols`,
//! `unwind`, `stacktrace`.

pub mod build_ids;
pub mod maps;
pub mod module_files;
pub mod perf_map;
pub mod stacktrace;
pub mod symbols;
pub mod unwind;

use std::io::Write;
use std::sync::Arc;

use uevrec_parsers::callchain::{Callchain, FrameContext};
use uevrec_parsers::stack_frames::{stacktrace_module, write_frame_text};
use uevrec_parsers::user_stack::UserStack;
use uevrec_parsers::{ContextUpdate, RecordStamp};

use maps::ProcessMaps;
use perf_map::PerfMaps;
use symbols::Resolved;
use unwind::UserUnwinder;

/// What the session line says the `stack` key holds.
pub const FRAMES_IN_WORDS: &str = "stack: the frames, innermost first; each with addr (hex), \
     context (kernel, user …), and when known symbol, offset (bytes into it), module (the \
     file), file and line (of the call; of the instruction for the innermost frame), \
     inlined (the calls inlined at the address, innermost first), perf_map (true: named \
     from /tmp/perf-PID.map); a frame without names \
     says why in unsymbolized (no_mapping, no_file, behind, kallsyms_hidden, no_symbols \
     …); with --no-symbolize, user frames carry module, file_offset and build_id instead; \
     with --call-graph dwarf the last user frame says why the walk ended early in \
     truncated (stack_copy: past the copied stack, max_stack, unwind_failed)";

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
            }
            None => write_frame_text(&mut self.text, None, None, module),
        }
    }

    /// Empty again, keeping the buffers.
    fn clear(&mut self) {
        self.json.clear();
        self.text.clear();
        self.inlined.clear();
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
    /// The kallsyms that names kernel frames, when not this machine's (a recorded
    /// file's own: [`StackWriter::with_kallsyms`]).
    kallsyms: Option<std::path::PathBuf>,
}

impl StackWriter {
    /// A writer for `options` (each formatter thread makes its own symbolizer,
    /// [`symbols::with`], at its first stack).
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
            kallsyms: None,
        }
    }

    /// This writer names kernel frames from the kallsyms text in the file at `path` (a
    /// recorded file's own, written out for the symbolizer) instead of this machine's.
    pub fn with_kallsyms(mut self, path: &std::path::Path) -> Self {
        self.kallsyms = Some(path.to_owned());
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

    /// Take a context change (mappings, execs, forks, exits).
    pub fn apply(&mut self, time: Option<u64>, update: &ContextUpdate<'_>) {
        self.maps.apply(time, update);
    }

    /// Append `,"stack":[…]` for the record of `stamp` to `out`: the frames of the
    /// kernel's chain, then those unwound from `user` (`--call-graph dwarf`), if any.
    pub fn write(
        &mut self,
        out: &mut Vec<u8>,
        stamp: &RecordStamp,
        stack: Callchain<'_>,
        user: Option<UserStack<'_>>,
    ) {
        out.extend_from_slice(b",\"stack\":[");
        let mut first = true;
        self.walk(stamp, stack, user, &mut |frame| {
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

    /// Hand each frame of the record of `stamp` to `emit`, innermost first: the kernel's
    /// chain (a broken chain as [`Frame::Broken`], then nothing more of it), then the user
    /// frames unwound from `user` (`--call-graph dwarf`), if any.
    fn walk(
        &mut self,
        stamp: &RecordStamp,
        stack: Callchain<'_>,
        user: Option<UserStack<'_>>,
        emit: &mut dyn FnMut(Frame<'_>),
    ) {
        let mut user_frames = 0u32;
        let mut chain_frames = 0usize;
        for frame in stack.frames() {
            chain_frames += 1;
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
        if let Some(user) = user {
            self.walk_unwound(stamp, &user, chain_frames, user_frames, emit);
        }
    }

    /// `f` with this thread's symbolizer, without a time budget for a recorded file.
    fn symbols<R>(&self, f: impl FnOnce(&mut symbols::Symbols) -> R) -> R {
        let offline = self.options.offline;
        symbols::with(|s| {
            s.unbudgeted = offline;
            s.use_kallsyms(self.kallsyms.as_deref());
            f(s)
        })
    }

    /// The user frames unwound from a stack copy, after the `chain_frames` of the
    /// kernel's chain; the last says why the walk ended early, if it did.
    fn walk_unwound(
        &mut self,
        stamp: &RecordStamp,
        user: &UserStack<'_>,
        chain_frames: usize,
        mut user_frames: u32,
        emit: &mut dyn FnMut(Frame<'_>),
    ) {
        let max = self.options.max_frames.saturating_sub(chain_frames);
        let mut frames = std::mem::take(&mut self.unwound);
        frames.clear();
        let unwinder = self.unwinder.get_or_insert_with(Box::default);
        let truncated = unwinder.walk(
            &mut self.maps,
            stamp.pid,
            stamp.time_unix_ns,
            user,
            max,
            &mut frames,
        );
        let last = frames.len().saturating_sub(1);
        for (i, &address) in frames.iter().enumerate() {
            let truncated = truncated.filter(|_| i == last).map(|why| why.name());
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
        self.unwound = frames;
    }

    /// The names of a kernel frame, to `emit`.
    fn kernel_frame(&mut self, address: u64, emit: &mut dyn FnMut(&Named)) {
        if let Some(n) = self.kernel.get(&address) {
            return emit(n);
        }
        let r = self.symbols(|s| s.kernel(address));
        let mut n = Named::default();
        n.resolved(&r, 0, stacktrace_module(None, true));
        if r.reason == Some("behind") {
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
        // `//anon` (anonymous memory), `[vdso]`, `[stack]` …: not files.
        let is_file = path.starts_with('/') && !path.starts_with("//");
        if !is_file && self.options.symbolize {
            // JIT code its runtime named (read again as it grows: not cached here).
            let mut n = std::mem::take(&mut self.scratch);
            n.clear();
            n.json.extend_from_slice(b",\"module\":");
            let _ = serde_json::to_writer(&mut n.json, &*path);
            if let Some((name, into)) = self.perf_maps.find(stamp.pid, address) {
                n.json.extend_from_slice(b",\"symbol\":");
                let _ = serde_json::to_writer(&mut n.json, &*name);
                let _ = write!(n.json, ",\"offset\":{into},\"perf_map\":true");
                write_frame_text(&mut n.text, Some(&name), Some(into), &path);
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
        // By the file read (one held open for another namespace has a path of its
        // own), shown by the path the process mapped.
        let key = (open, path.clone(), offset, back);
        if let Some(n) = self.user.get(&key) {
            return emit(n);
        }
        if self.options.offline
            && self.options.symbolize
            && let Some(why) = self.build_ids.differs(&key.0, &build_id)
        {
            // Another file lies at the path now: its names would be wrong.
            return self.unsymbolized(&path, why, emit);
        }
        let mut n = Named::default();
        n.json.extend_from_slice(b",\"module\":");
        let _ = serde_json::to_writer(&mut n.json, &*path);
        let mut behind = false;
        if self.options.symbolize {
            let r = self.symbols(|s| s.user(&key.0, &build_id, offset.saturating_sub(back)));
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
            return emit(&n);
        }
        if self.user.len() >= MAX_RENDERED {
            self.user.clear();
        }
        emit(self.user.entry(key).or_insert(shrunk(n)));
    }
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

    fn write(&mut self, out: &mut Vec<u8>, stamp: &RecordStamp, stack: Callchain<'_>) {
        StackWriter::write(self, out, stamp, stack, None);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_as_format_writes_it() {
        for v in [0, 1, 0xf, 0x10, 0xdead_beef, u64::MAX] {
            let mut out = Vec::new();
            push_hex(&mut out, v);
            assert_eq!(String::from_utf8(out).unwrap(), format!("{v:#x}"));
        }
    }
}
