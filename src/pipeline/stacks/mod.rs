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

/// Rendered frames kept per worker (the keys after `addr` and `context`), by module,
/// file offset and look-up distance, or by kernel address: about 200 bytes each.
pub const MAX_RENDERED: usize = 1 << 16;

/// A rendered user frame's key: the file read, the module as the process mapped it, the
/// file offset and the look-up distance.
type UserFrameKey = (Arc<str>, Arc<str>, u64, u64);

/// The stack writer of one formatter worker.
#[derive(Debug)]
pub struct StackWriter {
    options: StackOptions,
    maps: ProcessMaps,
    perf_maps: PerfMaps,
    /// A user frame's keys after its context, by (file read, module as mapped, file
    /// offset, look-up distance): a named frame is one copy, not a look-up and escaping
    /// each time.
    user: foldhash::HashMap<UserFrameKey, Arc<[u8]>>,
    /// A kernel frame's keys after its context, by address.
    kernel: foldhash::HashMap<u64, Arc<[u8]>>,
    /// Offline: the build ids of the modules on disk now.
    build_ids: build_ids::BuildIds,
    /// The unwinder of `--call-graph dwarf` (made at its first stack copy).
    unwinder: Option<Box<UserUnwinder>>,
    /// The user frames of the record being written (reused).
    unwound: Vec<u64>,
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
            build_ids: build_ids::BuildIds::default(),
            unwinder: None,
            unwound: Vec::new(),
        }
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
        let mut user_frames = 0u32;
        let mut chain_frames = 0usize;
        for frame in stack.frames() {
            chain_frames += 1;
            let frame = match frame {
                Ok(f) => f,
                Err(e) => {
                    // The frames before stay; the rest of the chain is not guessed at.
                    sep(out, &mut first);
                    out.extend_from_slice(b"{\"error\":");
                    let _ = serde_json::to_writer(&mut *out, &e.to_string());
                    out.push(b'}');
                    break;
                }
            };
            sep(out, &mut first);
            let address = frame.address;
            out.extend_from_slice(b"{\"addr\":\"");
            push_hex(out, address);
            out.push(b'"');
            match frame.context {
                FrameContext::Kernel => {
                    out.extend_from_slice(b",\"context\":\"kernel\"");
                    if self.options.symbolize {
                        self.kernel_frame(out, address);
                    }
                }
                FrameContext::User => {
                    out.extend_from_slice(b",\"context\":\"user\"");
                    // A return address but for the innermost frame: its call is the
                    // instruction before (the line of the call, as perf shows it).
                    let back = u64::from(user_frames > 0);
                    user_frames = user_frames.saturating_add(1);
                    self.user_frame(out, stamp, address, back);
                }
                other => {
                    out.extend_from_slice(b",\"context\":\"");
                    out.extend_from_slice(other.name().as_bytes());
                    out.push(b'"');
                }
            }
            out.push(b'}');
        }
        if let Some(user) = user {
            self.write_unwound(out, stamp, &user, chain_frames, &mut first, user_frames);
        }
        out.push(b']');
    }

    /// `f` with this thread's symbolizer, without a time budget for a recorded file.
    fn symbols<R>(&self, f: impl FnOnce(&mut symbols::Symbols) -> R) -> R {
        let offline = self.options.offline;
        symbols::with(|s| {
            s.unbudgeted = offline;
            f(s)
        })
    }

    /// The user frames unwound from a stack copy, after the `chain_frames` of the
    /// kernel's chain; the last says why the walk ended early, if it did.
    fn write_unwound(
        &mut self,
        out: &mut Vec<u8>,
        stamp: &RecordStamp,
        user: &UserStack<'_>,
        chain_frames: usize,
        first: &mut bool,
        mut user_frames: u32,
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
        for &address in &frames {
            sep(out, first);
            out.extend_from_slice(b"{\"addr\":\"");
            push_hex(out, address);
            out.extend_from_slice(b"\",\"context\":\"user\"");
            let back = u64::from(user_frames > 0);
            user_frames = user_frames.saturating_add(1);
            self.user_frame(out, stamp, address, back);
            out.push(b'}');
        }
        if let (Some(why), false) = (truncated, frames.is_empty()) {
            out.pop();
            out.extend_from_slice(b",\"truncated\":\"");
            out.extend_from_slice(why.name().as_bytes());
            out.extend_from_slice(b"\"}");
        }
        self.unwound = frames;
    }

    /// The keys of a kernel frame after its context.
    fn kernel_frame(&mut self, out: &mut Vec<u8>, address: u64) {
        if let Some(r) = self.kernel.get(&address) {
            out.extend_from_slice(r);
            return;
        }
        let r = self.symbols(|s| s.kernel(address));
        let mut keys = Vec::new();
        write_resolved(&mut keys, &r, 0);
        out.extend_from_slice(&keys);
        if r.reason != Some("behind") {
            if self.kernel.len() >= MAX_RENDERED {
                self.kernel.clear();
            }
            self.kernel.insert(address, keys.into());
        }
    }

    /// The keys of a user frame after its address and context.
    fn user_frame(&mut self, out: &mut Vec<u8>, stamp: &RecordStamp, address: u64, back: u64) {
        let Some(m) = self.maps.find(stamp.pid, stamp.time_unix_ns, address) else {
            out.extend_from_slice(b",\"unsymbolized\":\"no_mapping\"");
            return;
        };
        let offset = m.file_offset(address);
        let path = m.path.clone();
        let build_id = m.build_id.clone();
        let opened = m.file.open_path(&path).cloned();
        // `//anon` (anonymous memory), `[vdso]`, `[stack]` …: not files.
        let is_file = path.starts_with('/') && !path.starts_with("//");
        if !is_file && self.options.symbolize {
            // JIT code its runtime named (read again as it grows: not cached here).
            out.extend_from_slice(b",\"module\":");
            let _ = serde_json::to_writer(&mut *out, &*path);
            if let Some((name, into)) = self.perf_maps.find(stamp.pid, address) {
                out.extend_from_slice(b",\"symbol\":");
                let _ = serde_json::to_writer(&mut *out, &*name);
                let _ = write!(out, ",\"offset\":{into},\"perf_map\":true");
            } else {
                out.extend_from_slice(b",\"unsymbolized\":\"no_file\"");
            }
            return;
        }
        let open = match opened {
            Ok(open) => open,
            Err(why) if self.options.symbolize => {
                // No file may name it (another namespace's file we could not reach, or
                // not the build the process mapped): the reason, never a wrong name.
                out.extend_from_slice(b",\"module\":");
                let _ = serde_json::to_writer(&mut *out, &*path);
                let _ = write!(out, ",\"unsymbolized\":\"{why}\"");
                return;
            }
            Err(_) => path.clone(),
        };
        // By the file read (one held open for another namespace has a path of its
        // own), shown by the path the process mapped.
        let key = (open, path.clone(), offset, back);
        if let Some(r) = self.user.get(&key) {
            out.extend_from_slice(r);
            return;
        }
        if self.options.offline
            && self.options.symbolize
            && let Some(why) = self.build_ids.differs(&key.0, &build_id)
        {
            // Another file lies at the path now: its names would be wrong.
            out.extend_from_slice(b",\"module\":");
            let _ = serde_json::to_writer(&mut *out, &*path);
            let _ = write!(out, ",\"unsymbolized\":\"{why}\"");
            return;
        }
        let mut keys = Vec::new();
        keys.extend_from_slice(b",\"module\":");
        let _ = serde_json::to_writer(&mut keys, &*path);
        let mut behind = false;
        if self.options.symbolize {
            let r = self.symbols(|s| s.user(&key.0, &build_id, offset.saturating_sub(back)));
            behind = r.reason == Some("behind");
            write_resolved(&mut keys, &r, back);
        } else {
            keys.extend_from_slice(b",\"file_offset\":\"");
            push_hex(&mut keys, offset);
            keys.push(b'"');
            if !build_id.is_empty() {
                keys.extend_from_slice(b",\"build_id\":\"");
                for b in build_id.iter() {
                    keys.push(HEX[usize::from(b >> 4)]);
                    keys.push(HEX[usize::from(b & 15)]);
                }
                keys.push(b'"');
            }
        }
        out.extend_from_slice(&keys);
        if !behind {
            if self.user.len() >= MAX_RENDERED {
                self.user.clear();
            }
            self.user.insert(key, keys.into());
        }
    }
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
    out.extend_from_slice(b"0x");
    out.extend_from_slice(&buf[at..]);
}

/// A comma before every frame but the first.
fn sep(out: &mut Vec<u8>, first: &mut bool) {
    if !*first {
        out.push(b',');
    }
    *first = false;
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
