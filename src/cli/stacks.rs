//! The call-stack flags of the recording commands (perf's spellings: `-g`,
//! `--call-graph`, `--max-stack`, `--user-callchains`; and `--stack-ids`;
//! docs/stacks.md).

use std::path::PathBuf;

use clap::Args;

use crate::capture::stacks::{DWARF_SUPPORTED, StackRequest, max_stack_sysctl};

/// `--call-graph`'s modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallGraph {
    /// Frame pointers, walked by the kernel.
    Fp,
    /// The user registers and this many bytes of user stack with every record, unwound
    /// in user space from each module's `.eh_frame`.
    Dwarf(u32),
    /// No stacks.
    None,
}

/// perf's default `dwarf` stack size (bytes of user stack copied per sample).
pub const DWARF_DEFAULT_SIZE: u32 = 8192;

/// `--call-graph fp|dwarf[,SIZE]|none` (SIZE: a multiple of 8 up to 65528, perf's
/// bounds; on a machine without the unwinder `dwarf` is refused with the reason, never
/// taken for `fp`).
pub fn parse_call_graph(s: &str) -> Result<CallGraph, String> {
    let (mode, size) = match s.split_once(',') {
        Some((m, size)) => (m, Some(size)),
        None => (s, None),
    };
    match (mode, size) {
        ("fp", None) => Ok(CallGraph::Fp),
        ("none", None) => Ok(CallGraph::None),
        ("dwarf", size) => {
            let size = match size {
                None => DWARF_DEFAULT_SIZE,
                Some(text) => text
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n > 0 && *n <= 65528 && n % 8 == 0)
                    .ok_or_else(|| {
                        format!(
                            "`dwarf,{text}`: the size must be a multiple of 8 from 8 to 65528 bytes"
                        )
                    })?,
            };
            if !DWARF_SUPPORTED {
                return Err(format!(
                    "`dwarf` is not supported on {} yet: uevrec unwinds x86_64 stacks only \
                     so far; use fp (or -g) here (docs/stacks.md, \"Not yet\")",
                    std::env::consts::ARCH
                ));
            }
            Ok(CallGraph::Dwarf(size))
        }
        _ => Err(format!(
            "`{s}` is not a call-graph mode: use fp, dwarf[,SIZE] or none"
        )),
    }
}

/// `--max-stack N`: 1 to `kernel.perf_event_max_stack` (the kernel refuses more).
pub fn parse_max_stack(s: &str) -> Result<u16, String> {
    let n: u16 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of frames (1 to 65535)"))?;
    if n == 0 {
        return Err("the stack needs at least one frame".into());
    }
    match max_stack_sysctl() {
        Some(limit) if n > limit => Err(format!(
            "{n} frames is more than kernel.perf_event_max_stack allows ({limit}); raise it \
             (`sysctl kernel.perf_event_max_stack={n}`) or ask for fewer"
        )),
        _ => Ok(n),
    }
}

/// Call stacks on every record.
#[derive(Debug, Args, Default)]
pub struct StackArgs {
    /// Record the call stack of every record, by frame pointers (same as --call-graph fp):
    /// on JSON lines, and into a --raw perf.data with the mappings that name them (or a
    /// trace.dat with its stack records); top counts the busiest call paths of each
    /// event. Programs and libraries built without frame pointers give short stacks. With --backend ftrace the kernel's limits hold: user
    /// frames by frame pointers only, 8 at most, no dwarf (docs/stacks.md).
    #[arg(short = 'g', help_heading = "Call stacks")]
    pub g: bool,
    /// How to record call stacks: fp (frame pointers), dwarf or dwarf,SIZE (user registers
    /// and SIZE bytes of user stack per record, default 8192, at most 65528, unwound from
    /// .eh_frame; through code without unwind information by its frame pointer; perf
    /// backend only) or none.
    #[arg(long, value_name = "MODE", value_parser = parse_call_graph, help_heading = "Call stacks")]
    pub call_graph: Option<CallGraph>,
    /// Frames per stack at most, kernel and user together (default and most:
    /// kernel.perf_event_max_stack, 127 unless changed).
    #[arg(long, value_name = "N", value_parser = parse_max_stack, help_heading = "Call stacks")]
    pub max_stack: Option<u16>,
    /// User frames only (no kernel frames).
    #[arg(long, help_heading = "Call stacks")]
    pub user_callchains: bool,
    /// Addresses only: each user frame with its module, file offset and build id, for
    /// symbolizing elsewhere; kernel frames with their address.
    #[arg(long, help_heading = "Call stacks")]
    pub no_symbolize: bool,
    /// Write each distinct stack once, on a line of its own
    /// ({"time":…,"uevrec":"stack","id":N,"stack":[…]}) before the first record that has it, and
    /// give records "stack_id":N instead of "stack": far fewer bytes a record. JSON lines
    /// only, not with --flight; every output file (after --rotate-size, a reopen) holds
    /// the stack lines its records name.
    #[arg(long, help_heading = "Call stacks")]
    pub stack_ids: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub debug_dirs: DebugDirArgs,
}

/// Where separate debug files are looked for (`--debug-dir`).
#[derive(Debug, Args, Default)]
pub struct DebugDirArgs {
    /// Look for separate debug files of stripped programs here: by build id
    /// (DIR/.build-id/xx/rest.debug) and by .gnu_debuglink (DIR/NAME); repeat for more
    /// directories, searched in order. Replaces the default, /usr/lib/debug. decode
    /// also looks here for a replaced program's recorded build (DIR/.build-id/xx/rest).
    #[arg(long = "debug-dir", value_name = "DIR", help_heading = "Call stacks")]
    pub dirs: Vec<PathBuf>,
}

impl DebugDirArgs {
    /// Make them the directories every formatter worker's symbolizer looks in.
    pub fn apply(&self) {
        crate::pipeline::stacks::symbols::set_debug_dirs(self.dirs.clone());
    }
}

/// Why stacks cannot go where the command sends its records (`None`: they can): JSON
/// lines carry a `stack` key, OTLP records `code.stacktrace`, a `--raw` perf.data the
/// callchains and mappings (`raw`: a `--raw` file that cannot take them); a stack asked
/// for is never dropped silently.
pub fn unsupported_output(stacks: &StackArgs, format_text: bool, raw: bool) -> Option<String> {
    stacks.request()?;
    let what = if format_text {
        "text lines (--format text; tail on a terminal writes JSON lines when -g asks for stacks)"
    } else if raw {
        "a --raw perf.data without its process records (--no-context: the MMAP2 records \
         that name the frames go with them), or a trace.dat with --call-graph dwarf (its \
         stack records are the kernel's frame-pointer walks)"
    } else {
        return None;
    };
    Some(format!(
        "call stacks (-g, --call-graph) are written on JSON lines, OTLP and --raw perf.data files so far, not to {what} (docs/stacks.md, \"Not yet\"): drop -g, or record JSON lines, OTLP or a perf.data with context"
    ))
}

/// Why `--stack-ids` cannot be taken (`None`: it can, or was not asked for): it names
/// the stacks of -g on JSON lines (`json_lines`: the command writes some); a flight
/// recorder (`flight`) overwrites its oldest lines, so a stack line could go while the
/// records that name it stay.
pub fn stack_ids_refused(stacks: &StackArgs, json_lines: bool, flight: bool) -> Option<String> {
    if !stacks.stack_ids {
        return None;
    }
    if stacks.request().is_none() {
        return Some(
            "--stack-ids names the call stacks of -g or --call-graph: add -g (docs/stacks.md)"
                .into(),
        );
    }
    if flight {
        return Some(
            "--stack-ids does not go with --flight: the flight recorder overwrites its oldest              lines, a stack line among them, while records that name it stay; its dumps keep              each record's stack on its line: drop --stack-ids"
                .into(),
        );
    }
    (!json_lines).then(|| {
        "--stack-ids writes the stacks of JSON lines once each; OTLP records carry their          code.stacktrace and a --raw file its callchains: drop --stack-ids, or write JSON          lines (--format json, -o FILE with --raw)"
            .into()
    })
}

impl StackArgs {
    /// The stacks asked for (`None`: none; `--call-graph none` wins over -g).
    pub fn request(&self) -> Option<StackRequest> {
        let (on, dwarf) = match self.call_graph {
            Some(CallGraph::None) => (false, None),
            Some(CallGraph::Fp) => (true, None),
            Some(CallGraph::Dwarf(size)) => (true, Some(size)),
            None => (self.g, None),
        };
        on.then(|| StackRequest {
            max_stack: self.max_stack.unwrap_or(0),
            kernel: !self.user_callchains,
            dwarf,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes() {
        assert_eq!(parse_call_graph("fp"), Ok(CallGraph::Fp));
        assert_eq!(parse_call_graph("none"), Ok(CallGraph::None));
        if DWARF_SUPPORTED {
            assert_eq!(parse_call_graph("dwarf"), Ok(CallGraph::Dwarf(8192)));
            assert_eq!(parse_call_graph("dwarf,65528"), Ok(CallGraph::Dwarf(65528)));
            assert!(parse_call_graph("dwarf,65536").is_err());
        } else {
            let e = parse_call_graph("dwarf").unwrap_err();
            assert!(e.contains("not supported"), "{e}");
        }
        assert!(
            parse_call_graph("dwarf,7")
                .unwrap_err()
                .contains("multiple of 8")
        );
        assert!(
            parse_call_graph("lbr")
                .unwrap_err()
                .contains("not a call-graph mode")
        );
        assert!(parse_max_stack("0").is_err());
        assert_eq!(parse_max_stack("3"), Ok(3));
    }

    #[test]
    fn requests() {
        let mut a = StackArgs::default();
        assert_eq!(a.request(), None);
        a.g = true;
        assert_eq!(
            a.request(),
            Some(StackRequest {
                max_stack: 0,
                kernel: true,
                dwarf: None,
            })
        );
        a.call_graph = Some(CallGraph::None);
        assert_eq!(a.request(), None);
        a.call_graph = Some(CallGraph::Fp);
        a.user_callchains = true;
        a.max_stack = Some(20);
        assert_eq!(
            a.request(),
            Some(StackRequest {
                max_stack: 20,
                kernel: false,
                dwarf: None,
            })
        );
        a.call_graph = Some(CallGraph::Dwarf(4096));
        assert_eq!(a.request().and_then(|r| r.dwarf), Some(4096));
    }

    #[test]
    fn stack_ids_need_stacks_on_json_lines_outside_the_flight_recorder() {
        let mut a = StackArgs::default();
        assert_eq!(stack_ids_refused(&a, false, true), None, "not asked for");
        a.stack_ids = true;
        assert!(
            stack_ids_refused(&a, true, false)
                .unwrap()
                .contains("add -g")
        );
        a.g = true;
        assert_eq!(stack_ids_refused(&a, true, false), None);
        assert!(
            stack_ids_refused(&a, true, true)
                .unwrap()
                .contains("--flight")
        );
        assert!(
            stack_ids_refused(&a, false, false)
                .unwrap()
                .contains("OTLP")
        );
        a.call_graph = Some(CallGraph::None);
        assert!(
            stack_ids_refused(&a, true, false)
                .unwrap()
                .contains("add -g")
        );
    }
}
