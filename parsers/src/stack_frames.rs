//! The `stack` key of a JSON line read back (what `record -g` writes, docs/stacks.md):
//! its [`StackFrame`]s, and the one place that says how a frame is called in the outputs
//! built from stacks: a flame graph's frame ([`StackFrame::flame_names`]) and a line of
//! OpenTelemetry's `code.stacktrace` ([`write_stacktrace`], as `perf script` prints it).
//!
//! Both start from the frames the JSON path named (symbol, module, inlined calls): no
//! output names an address a second time, so a flame graph, an OTLP record and a JSON
//! line of the same record always agree.

use std::borrow::Cow;
use std::fmt::Write;

use serde::Deserialize;

/// One frame of a `stack` array (the keys of docs/stacks.md; absent keys are `None`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct StackFrame<'a> {
    /// The address, `0x…`.
    #[serde(borrow, default)]
    pub addr: Option<Cow<'a, str>>,
    /// `kernel`, `user`, or another context the kernel marked.
    #[serde(borrow, default)]
    pub context: Option<Cow<'a, str>>,
    /// The file mapped at the address.
    #[serde(borrow, default)]
    pub module: Option<Cow<'a, str>>,
    /// The function.
    #[serde(borrow, default)]
    pub symbol: Option<Cow<'a, str>>,
    /// Bytes from the function's start.
    #[serde(default)]
    pub offset: Option<u64>,
    /// The offset in `module` (`--no-symbolize`), `0x…`.
    #[serde(borrow, default)]
    pub file_offset: Option<Cow<'a, str>>,
    /// `true`: JIT code named from `/tmp/perf-PID.map`.
    #[serde(default)]
    pub perf_map: bool,
    /// The calls inlined at the address, innermost first.
    #[serde(borrow, default)]
    pub inlined: Vec<InlinedFrame<'a>>,
    /// Why the frame has no names.
    #[serde(borrow, default)]
    pub unsymbolized: Option<Cow<'a, str>>,
    /// What is wrong with the callchain from here on (the frame has nothing else).
    #[serde(borrow, default)]
    pub error: Option<Cow<'a, str>>,
}

/// A call inlined at a frame's address.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct InlinedFrame<'a> {
    /// The inlined function.
    #[serde(borrow, default)]
    pub symbol: Option<Cow<'a, str>>,
}

/// The flame-graph name of a frame that ends a callchain the kernel could not have
/// written (the frames outside it are not guessed at).
pub const BROKEN_CHAIN: &str = "[broken callchain]";

impl StackFrame<'_> {
    /// Whether the kernel's part of the stack holds the frame.
    pub fn is_kernel(&self) -> bool {
        self.context.as_deref() == Some("kernel")
    }

    /// The frame's flame-graph names, innermost first: the calls inlined at its address
    /// (each with `_[i]`), then its own. Its own: the `symbol`; unnamed,
    /// `module+0xOFFSET` (the module's file name, with `--no-symbolize`'s file offset)
    /// or `[module]`; outside any module the address. Kernel frames end with `_[k]`,
    /// JIT code named by a perf map with `_[j]` (the annotations of
    /// `stackcollapse-perf.pl --all`, which flame graph palettes colour).
    pub fn flame_names(&self, mut name: impl FnMut(&str)) {
        let mut text = String::new();
        if self.error.is_some() {
            return name(BROKEN_CHAIN);
        }
        for inlined in &self.inlined {
            text.clear();
            text.push_str(inlined.symbol.as_deref().unwrap_or("[unknown]"));
            text.push_str("_[i]");
            name(&text);
        }
        text.clear();
        let module = self.module.as_deref().map(base_name);
        match (&self.symbol, module, &self.file_offset, &self.addr) {
            (Some(symbol), ..) => text.push_str(symbol),
            (None, Some(module), Some(offset), _) => {
                let _ = write!(text, "{module}+{offset}");
            }
            (None, Some(module), None, _) => {
                let _ = write!(text, "[{module}]");
            }
            (None, None, _, Some(addr)) => text.push_str(addr),
            (None, None, _, None) => text.push_str("[unknown]"),
        }
        if self.is_kernel() {
            text.push_str("_[k]");
        } else if self.perf_map {
            text.push_str("_[j]");
        }
        name(&text);
    }
}

/// The last part of a path (`/usr/lib/libc.so.6` → `libc.so.6`; `[vdso]` stays).
fn base_name(path: &str) -> &str {
    match path.rsplit_once('/') {
        Some((_, name)) if !name.is_empty() => name,
        _ => path,
    }
}

/// Write `frames` (innermost first) as a `code.stacktrace` text: one frame a line as
/// `perf script` prints a callchain (`\tADDRESS symbol+0xOFFSET (module)`, the address
/// in 16 hex digits, `[unknown]` for what has no name, `[kernel.kallsyms]` as the
/// kernel's module), a call inlined at an address on a line of its own before its
/// frame (`\tADDRESS symbol (inlined)`), a broken callchain as a last line saying why.
/// The recorder writes the same lines straight from the frames it names, with the
/// helpers below (so the text read back from a JSON line and the recorder's agree).
pub fn write_stacktrace(out: &mut String, frames: &[StackFrame<'_>]) {
    let mut text = String::new();
    for frame in frames {
        if let Some(error) = &frame.error {
            write_broken_line(out, error);
            break;
        }
        let addr = frame.addr.as_deref().unwrap_or("0x0");
        let addr = addr.strip_prefix("0x").unwrap_or(addr);
        for inlined in &frame.inlined {
            write_inlined_line(out, addr, inlined.symbol.as_deref().unwrap_or("[unknown]"));
        }
        text.clear();
        let module = stacktrace_module(frame.module.as_deref(), frame.is_kernel());
        write_frame_text(&mut text, frame.symbol.as_deref(), frame.offset, module);
        write_frame_line(out, addr, &text);
    }
}

/// A frame's module in `code.stacktrace`: its file, else the kernel's
/// (`[kernel.kallsyms]`) or `[unknown]`.
pub fn stacktrace_module(module: Option<&str>, kernel: bool) -> &str {
    match (module, kernel) {
        (Some(module), _) => module,
        (None, true) => "[kernel.kallsyms]",
        (None, false) => "[unknown]",
    }
}

/// A frame's `code.stacktrace` line after its address: `symbol+0xOFFSET (module)`,
/// `symbol (module)` (no offset) or `[unknown] (module)`.
pub fn write_frame_text(out: &mut String, symbol: Option<&str>, offset: Option<u64>, module: &str) {
    match (symbol, offset) {
        (Some(symbol), Some(offset)) => {
            let _ = write!(out, "{symbol}+{offset:#x}");
        }
        (Some(symbol), None) => out.push_str(symbol),
        (None, _) => out.push_str("[unknown]"),
    }
    let _ = write!(out, " ({module})");
}

/// `\tADDRESS TEXT\n`: `addr` (hex, no `0x`) right-aligned in 16 columns, then the
/// frame's text ([`write_frame_text`]).
pub fn write_frame_line(out: &mut String, addr: &str, text: &str) {
    out.push('\t');
    for _ in addr.chars().count()..16 {
        out.push(' ');
    }
    out.push_str(addr);
    out.push(' ');
    out.push_str(text);
    out.push('\n');
}

/// The line of a call inlined at `addr`: `\tADDRESS symbol (inlined)`.
pub fn write_inlined_line(out: &mut String, addr: &str, symbol: &str) {
    write_frame_line(out, addr, symbol);
    out.pop();
    out.push_str(" (inlined)\n");
}

/// The last line of a broken callchain: `\t[broken callchain: WHY]`.
pub fn write_broken_line(out: &mut String, why: &str) {
    let _ = writeln!(out, "\t[broken callchain: {why}]");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(json: &str) -> Vec<StackFrame<'_>> {
        serde_json::from_str(json).unwrap()
    }

    const STACK: &str = r#"[
      {"addr":"0xffffffff8223caef","context":"kernel","symbol":"do_syscall_64","offset":527},
      {"addr":"0xffffffff81000130","context":"kernel","unsymbolized":"kallsyms_hidden"},
      {"addr":"0x559f7ab8516f","context":"user","module":"/tmp/stk/chain","symbol":"middle","offset":9,
       "inlined":[{"symbol":"leaf","file":"a.c","line":3},{"symbol":"mid\"dle"}]},
      {"addr":"0x7f00","context":"user","module":"/usr/lib/libc.so.6","file_offset":"0x1f00","build_id":"ab"},
      {"addr":"0x7f10","context":"user","module":"//anon","unsymbolized":"no_file"},
      {"addr":"0x7f20","context":"user","module":"//anon","symbol":"jit_stub","offset":4,"perf_map":true},
      {"addr":"0x10","context":"user","unsymbolized":"no_mapping"},
      {"error":"a PERF_CONTEXT_KERNEL marker after user frames"}
    ]"#;

    #[test]
    fn flame_names_follow_the_frames() {
        let mut names = Vec::new();
        for f in frames(STACK) {
            f.flame_names(|n| names.push(n.to_owned()));
        }
        assert_eq!(
            names,
            [
                "do_syscall_64_[k]",
                "0xffffffff81000130_[k]",
                "leaf_[i]",
                "mid\"dle_[i]",
                "middle",
                "libc.so.6+0x1f00",
                "[anon]",
                "jit_stub_[j]",
                "0x10",
                BROKEN_CHAIN,
            ]
        );
    }

    #[test]
    fn stacktrace_lines_as_perf_script_prints_them() {
        let mut text = String::new();
        write_stacktrace(&mut text, &frames(STACK));
        let want = "\tffffffff8223caef do_syscall_64+0x20f ([kernel.kallsyms])\n\
                    \tffffffff81000130 [unknown] ([kernel.kallsyms])\n\
                    \t    559f7ab8516f leaf (inlined)\n\
                    \t    559f7ab8516f mid\"dle (inlined)\n\
                    \t    559f7ab8516f middle+0x9 (/tmp/stk/chain)\n\
                    \t            7f00 [unknown] (/usr/lib/libc.so.6)\n\
                    \t            7f10 [unknown] (//anon)\n\
                    \t            7f20 jit_stub+0x4 (//anon)\n\
                    \t              10 [unknown] ([unknown])\n\
                    \t[broken callchain: a PERF_CONTEXT_KERNEL marker after user frames]\n";
        assert_eq!(text, want);
    }

    #[test]
    fn unknown_keys_and_escapes_are_read() {
        let f = frames(r#"[{"addr":"0x1","symbol":"a\u00e9b","x":[1,{"y":2}]}]"#);
        assert_eq!(f[0].symbol.as_deref(), Some("aéb"));
    }
}
