//! `uevrec flamegraph`: JSON lines with `stack` keys (`record -g`, `tail -g`) → folded
//! stacks (Brendan Gregg's `frame;frame;… count`, outermost frame first), the input of
//! every flame-graph tool; the CLI draws them with inferno (docs/flamegraph.md).
//!
//! A recording with `--stack-ids` names each record's stack by the id of an earlier
//! `{"uevrec":"stack"}` line (the latest line with that id: a file appended to by
//! another run may define an id again); the stack lines of each input are kept, folded,
//! while it is read.
//!
//! Each frame is named by the parsers' one helper
//! ([`uevrec_parsers::stack_frames::StackFrame::flame_names`]), from the names the
//! recording wrote: nothing is symbolized here. Records without a stack, uevrec's own
//! lines and the records the kernel lost are counted and said (never folded silently
//! away); a line that is not JSON is an error naming its number, since a flame graph of
//! part of a file would look whole.
//!
//! A perf.data or trace.dat ([`recorded_format`] tells them by their magic) is decoded by
//! [`crate::offline::decode`] into the very lines `uevrec decode FILE` writes, and those
//! are folded as they come ([`Folder::add_recorded`]): the same graph as the pipe
//! `uevrec decode FILE | uevrec flamegraph`, without writing and reading the lines again.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Deserialize;
use uevrec_parsers::OutputFormat;
use uevrec_parsers::stack_frames::StackFrame;
use uevrec_parsers::to_lines::DecodeOptions;

use crate::offline::decode::Outcome;
use crate::outputs::sink::{Sink, SinkError};

/// The format of a recorded binary file from its first bytes: `"perf.data"` (either byte
/// order, file or pipe mode) or `"trace.dat"`; `None`: not one (JSON lines, say). A file
/// too short to tell is not one.
pub fn recorded_format(start: &[u8]) -> Option<&'static str> {
    let perf = uevrec_parsers::perf_data::header::MAGIC;
    let mut swapped = perf;
    swapped.reverse();
    if start.starts_with(&perf) || start.starts_with(&swapped) {
        Some("perf.data")
    } else if start.starts_with(uevrec_parsers::trace_dat::MAGIC) {
        Some("trace.dat")
    } else {
        None
    }
}

/// What the root frame of every stack is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Root {
    /// The event (`system:event`): one tower per event.
    #[default]
    Event,
    /// The process name (`comm`, else `pid N`): one tower per program.
    Comm,
    /// None: the stacks of every event and process together.
    None,
}

/// How stacks are folded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FoldOptions {
    /// The root frame.
    pub root: Root,
    /// Kernel frames left out (the user part of each stack only).
    pub user_only: bool,
}

/// The keys of a JSON line that folding reads (the rest is skipped unread).
#[derive(Debug, Deserialize)]
struct Line<'a> {
    /// Present on uevrec's own lines (`session`, `lost`, `notice` …).
    #[serde(borrow, default)]
    uevrec: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    system: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    event: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    comm: Option<Cow<'a, str>>,
    #[serde(default)]
    pid: Option<u64>,
    #[serde(borrow, default)]
    stack: Option<Vec<StackFrame<'a>>>,
    /// `--stack-ids`: the stack line a record names.
    #[serde(default)]
    stack_id: Option<u64>,
    /// Of a stack line: its id.
    #[serde(default)]
    id: Option<u64>,
    /// Of a `lost` line: the records the kernel dropped.
    #[serde(default)]
    lost: Option<u64>,
    /// Of a notice: what it says (`truncated`: the input was cut short).
    #[serde(borrow, default)]
    what: Option<Cow<'a, str>>,
}

/// Stacks folded so far, with the counts a reader of the graph needs.
#[derive(Debug, Default)]
pub struct Folder {
    options: FoldOptions,
    /// Folded stack → records.
    stacks: foldhash::HashMap<String, u64>,
    /// Records per event (`system:event`), with a stack.
    events: BTreeMap<String, u64>,
    /// Records folded.
    pub records: u64,
    /// Records without a `stack` key (recorded without `-g`).
    pub without_stack: u64,
    /// uevrec's own lines (session, schema, notices, lost counts).
    pub own_lines: u64,
    /// Records the kernel dropped, as the `lost` lines count them.
    pub lost: u64,
    /// `truncated` notices: inputs cut short (a killed recording), salvaged up to the cut.
    pub truncated: u64,
    /// The names of the frames of the record being folded, innermost first, and where
    /// each ends in it.
    names: String,
    ends: Vec<usize>,
    key: String,
    /// The frames of the stack being folded, outermost first, `;` between them.
    path: String,
    /// `--stack-ids`: each stack line's frames folded as in `path`, by id (of the input
    /// being read: [`Folder::next_input`]).
    stack_lines: foldhash::HashMap<u64, String>,
}

/// Why a line cannot be folded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError(pub String);

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Folder {
    /// An empty folder.
    pub fn new(options: FoldOptions) -> Self {
        Folder {
            options,
            ..Default::default()
        }
    }

    /// A new input begins: the stack lines of the one before are not its own (another
    /// run's ids may be the same numbers).
    pub fn next_input(&mut self) {
        self.stack_lines.clear();
    }

    /// Fold one JSON line (an empty line is skipped).
    pub fn add_line(&mut self, line: &[u8]) -> Result<(), LineError> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let line: Line<'_> = serde_json::from_slice(line).map_err(|e| {
            LineError(format!(
                "not a JSON line of `uevrec record` or `tail` ({e}): flame graphs are drawn \
                 from JSON lines recorded with -g (decode perf.data or trace.dat files with \
                 `uevrec decode` first)"
            ))
        })?;
        if line.uevrec.is_some() {
            if let (Some("stack"), Some(id), Some(stack)) =
                (line.uevrec.as_deref(), line.id, &line.stack)
            {
                self.fold_frames(stack);
                self.stack_lines.insert(id, self.path.clone());
            }
            self.own_lines += 1;
            self.lost = self.lost.saturating_add(line.lost.unwrap_or(0));
            if line.what.as_deref() == Some("truncated") {
                self.truncated += 1;
            }
            return Ok(());
        }
        let (Some(system), Some(event)) = (&line.system, &line.event) else {
            return Err(LineError(
                "a JSON line without `system` and `event`: not a record line of `uevrec \
                 record` or `tail` (OTLP lines are not read: record JSON lines with -g)"
                    .into(),
            ));
        };
        match (&line.stack, line.stack_id) {
            (Some(stack), _) => self.fold_frames(stack),
            (None, Some(id)) => match self.stack_lines.get(&id) {
                Some(path) => {
                    self.path.clear();
                    self.path.push_str(path);
                }
                None => {
                    return Err(LineError(format!(
                        "a record names stack_id {id}, which no {{\"uevrec\":\"stack\"}} \
                         line before it defines: the input is not a whole file of `record \
                         -g --stack-ids` (each file of one starts with the stack lines its \
                         records name; give whole files, not parts of them)"
                    )));
                }
            },
            (None, None) => {
                self.without_stack += 1;
                return Ok(());
            }
        }
        self.fold(&line, system, event);
        Ok(())
    }

    /// The frames of `stack` into `path`, outermost first (kernel frames left out with
    /// `user_only`).
    fn fold_frames(&mut self, stack: &[StackFrame<'_>]) {
        self.names.clear();
        self.ends.clear();
        for frame in stack {
            if self.options.user_only && frame.is_kernel() {
                continue;
            }
            let (names, ends) = (&mut self.names, &mut self.ends);
            frame.flame_names(|name| {
                push_frame_name(names, name);
                ends.push(names.len());
            });
        }
        self.path.clear();
        for (i, &end) in self.ends.iter().enumerate().rev() {
            let start = if i == 0 { 0 } else { self.ends[i - 1] };
            if !self.path.is_empty() {
                self.path.push(';');
            }
            self.path.push_str(&self.names[start..end]);
        }
    }

    /// Count the record of `line` with the stack in `path`.
    fn fold(&mut self, line: &Line<'_>, system: &str, event: &str) {
        self.key.clear();
        match self.options.root {
            Root::Event => {
                push_frame_name(&mut self.key, system);
                self.key.push(':');
                push_frame_name(&mut self.key, event);
            }
            Root::Comm => match (&line.comm, line.pid) {
                (Some(comm), _) => push_frame_name(&mut self.key, comm),
                (None, Some(pid)) => self.key.push_str(&format!("pid {pid}")),
                (None, None) => self.key.push_str("[unknown process]"),
            },
            Root::None => {}
        }
        if !self.key.is_empty() && !self.path.is_empty() {
            self.key.push(';');
        }
        self.key.push_str(&self.path);
        if self.key.is_empty() {
            // Every frame left out (--user-only on a kernel-only stack): still a record.
            self.key.push_str("[no frames]");
        }
        self.records += 1;
        match self.stacks.get_mut(self.key.as_str()) {
            Some(n) => *n += 1,
            None => {
                self.stacks.insert(self.key.clone(), 1);
            }
        }
        self.key.clear();
        self.key.push_str(system);
        self.key.push(':');
        self.key.push_str(event);
        match self.events.get_mut(self.key.as_str()) {
            Some(n) => *n += 1,
            None => {
                self.events.insert(self.key.clone(), 1);
            }
        }
    }

    /// The folded stacks, sorted (the order `flamegraph.pl` and inferno expect), each
    /// with its count.
    pub fn folded(&self) -> Vec<(&str, u64)> {
        let mut lines: Vec<(&str, u64)> =
            self.stacks.iter().map(|(k, &n)| (k.as_str(), n)).collect();
        lines.sort_unstable();
        lines
    }

    /// The folded stacks as lines (`frame;frame;… count`).
    pub fn folded_text(&self) -> String {
        let mut out = String::new();
        for (stack, n) in self.folded() {
            out.push_str(stack);
            out.push(' ');
            out.push_str(&n.to_string());
            out.push('\n');
        }
        out
    }

    /// The events folded, each with its records.
    pub fn events(&self) -> &BTreeMap<String, u64> {
        &self.events
    }

    /// A title for the graph: the events and the records.
    pub fn title(&self) -> String {
        let mut names: Vec<&str> = self.events.keys().map(String::as_str).collect();
        let more = names.len().saturating_sub(3);
        names.truncate(3);
        let mut title = names.join(", ");
        if more > 0 {
            title.push_str(&format!(" and {more} more events"));
        }
        if title.is_empty() {
            title.push_str("no stacks");
        }
        let s = if self.records == 1 { "" } else { "s" };
        format!("{title}: {} record{s}", self.records)
    }

    /// What was not folded, in words (empty: everything was).
    pub fn left_out(&self) -> Vec<String> {
        let mut said = Vec::new();
        if self.without_stack > 0 {
            said.push(format!(
                "{} records without a stack (recorded without -g) are not in the graph",
                self.without_stack
            ));
        }
        if self.lost > 0 {
            said.push(format!(
                "{} records were lost by the kernel while recording (the `lost` lines)",
                self.lost
            ));
        }
        if self.truncated > 0 {
            said.push(format!(
                "{} input{} cut short (a recording that was killed or never finished): \
                 the records after the cut are not in the graph",
                self.truncated,
                if self.truncated == 1 {
                    " was"
                } else {
                    "s were"
                }
            ));
        }
        said
    }

    /// Fold a perf.data or trace.dat (`None`: the one on standard input): decoded on
    /// `threads` threads into the lines `uevrec decode` writes (context keys on, for
    /// `--by comm`; no schema lines; stacks named unless `symbolize` is false), each folded
    /// as it comes. Returns how decoding ended (its errors and notes are the caller's to
    /// say), or why it could not start; a line decoding wrote that cannot be folded is an
    /// error too.
    pub fn add_recorded(
        &mut self,
        input: Option<&Path>,
        symbolize: bool,
        threads: usize,
    ) -> Result<Outcome, String> {
        let opts = DecodeOptions {
            format: OutputFormat::JsonLines,
            context: true,
            stacks: true,
            symbolize_stacks: symbolize,
            ..DecodeOptions::default()
        };
        // The sink is boxed for `decode` (`'static`): the folder moves into it and back.
        let shared = Arc::new(Mutex::new(FoldingSink {
            folder: std::mem::take(self),
            error: None,
        }));
        let sink = Box::new(SharedSink(Arc::clone(&shared)));
        let every = crate::offline::decode::pick::Pick {
            select: &|_, _| true,
            filter: None,
        };
        let (outcome, _) = crate::offline::decode::run(input, opts, &every, sink, threads, None);
        let mut sink = shared.lock().unwrap_or_else(PoisonError::into_inner);
        *self = std::mem::take(&mut sink.folder);
        match sink.error.take() {
            Some(e) => Err(e),
            None => outcome,
        }
    }
}

/// The folder behind decoding's sink, with the first line it could not fold.
struct FoldingSink {
    folder: Folder,
    error: Option<String>,
}

/// [`FoldingSink`] where `decode` hands its lines (from its writer thread with workers).
struct SharedSink(Arc<Mutex<FoldingSink>>);

impl Sink for SharedSink {
    fn write_lines(&mut self, lines: &[u8]) -> Result<(), SinkError> {
        let mut sink = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        for line in lines.split(|&b| b == b'\n') {
            if let Err(e) = sink.folder.add_line(line) {
                sink.error = Some(format!("a line of the decoded records: {e}"));
                // Stops decoding: nothing is drawn from part of the input.
                return Err(SinkError::Closed);
            }
        }
        Ok(())
    }
}

/// `name` as a folded frame: `;` separates frames and a line is one stack, so a `;` in a
/// name becomes `:` and a control character a space.
fn push_frame_name(out: &mut String, name: &str) {
    if !name.bytes().any(|b| b == b';' || b.is_ascii_control()) {
        return out.push_str(name);
    }
    out.extend(name.chars().map(|c| match c {
        ';' => ':',
        c if c.is_ascii_control() => ' ',
        c => c,
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kept_on_one_frame() {
        let mut s = String::new();
        push_frame_name(&mut s, "a;b\nc");
        assert_eq!(s, "a:b c");
    }
}
