//! The choice of output: JSON lines ([`LineWriter`]) or OTLP/JSON ([`OtlpWriter`]),
//! behind one writer with the entry points every caller uses ([`RecordWriter`]: the
//! recorder's formatter, the perf.data and trace.dat decoders), and what the file
//! decoders drive it with ([`RecordSink`], [`SchemaOnce`](crate::SchemaOnce)).
//!
//! Above `json_line` and `otlp` (it dispatches to both); nothing below imports it.

use crate::callchain::Callchain;
use crate::context::{ContextTracker, ContextUpdate};
use crate::json_line::own_lines::SessionInfo;
use crate::json_line::{LineOptions, LineWriter, PreparedFormat, RecordStamp, RecordWriter};
use crate::otlp::{OtlpEncoding, OtlpWriter};
use crate::text::TextWriter;
use crate::user_stack::UserStack;

/// What the lines are (`--format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OutputFormat {
    /// uevrec's JSON lines (`docs/json-lines.md`), one line per record.
    #[default]
    JsonLines,
    /// OTLP/JSON export requests, one per line, records batched (`docs/otlp.md`).
    Otlp,
    /// One readable line per record (`--format text`, [`TextWriter`]); ANSI colors when
    /// `color`.
    Text {
        /// Colors on (a terminal without `NO_COLOR`).
        color: bool,
    },
    /// The requests of [`OutputFormat::Otlp`] as export frames
    /// ([`crate::otlp::frame`]: signal, counts and body, for uevrec's exporter) with
    /// bodies in this encoding.
    OtlpExport(OtlpEncoding),
}

impl OutputFormat {
    /// Whether its lines say who wrote each record (`comm`, `cgroup` …): a decoder
    /// keeps a [`ContextTracker`] for it.
    pub fn carries_context(self) -> bool {
        matches!(self, OutputFormat::JsonLines | OutputFormat::Text { .. })
    }
}

/// A [`LineWriter`], an [`OtlpWriter`] or a [`TextWriter`].
#[derive(Debug)]
// The JSON-lines writer stays inline (no pointer to follow on its hot path).
#[allow(clippy::large_enum_variant)]
pub enum OutputWriter {
    /// JSON lines.
    Json(LineWriter),
    /// OTLP/JSON.
    Otlp(Box<OtlpWriter>),
    /// Text.
    Text(Box<TextWriter>),
}

impl OutputWriter {
    /// A writer of `format` with `opts`.
    pub fn new(format: OutputFormat, opts: LineOptions) -> Self {
        match format {
            OutputFormat::JsonLines => OutputWriter::Json(LineWriter::new(opts)),
            OutputFormat::Otlp => OutputWriter::Otlp(Box::new(OtlpWriter::new(opts))),
            OutputFormat::Text { color } => {
                OutputWriter::Text(Box::new(TextWriter::new(opts, color)))
            }
            OutputFormat::OtlpExport(encoding) => {
                OutputWriter::Otlp(Box::new(OtlpWriter::export(opts, encoding)))
            }
        }
    }

    /// [`LineWriter::set_context`], or for OTLP [`OtlpWriter::set_context`] (the
    /// Kubernetes resource attributes).
    #[inline(always)]
    pub fn set_context(
        &mut self,
        tracker: &ContextTracker,
        stamp: &RecordStamp,
        cgroup: Option<u64>,
    ) {
        match self {
            OutputWriter::Json(w) => w.set_context(tracker, stamp, cgroup),
            OutputWriter::Otlp(w) => w.set_context(tracker, stamp, cgroup),
            OutputWriter::Text(w) => w.set_context(tracker, stamp, cgroup),
        }
    }
}

impl OutputWriter {
    /// For OTLP, [`OtlpWriter::set_stacktrace`]: the next record's `code.stacktrace`
    /// (JSON lines carry their `stack` key instead; text lines none).
    pub fn set_stacktrace(&mut self, text: Option<&str>) {
        if let OutputWriter::Otlp(w) = self {
            w.set_stacktrace(text);
        }
    }

    /// Whether the records are OTLP (a stack goes in as `code.stacktrace`).
    pub fn is_otlp(&self) -> bool {
        matches!(self, OutputWriter::Otlp(_))
    }
}

/// The self-describing lines (`crate::json_line::own_lines`): JSON lines only. OTLP has no
/// place for them: its records carry typed attributes, and a log record per schema
/// would be noise to every collector (`docs/otlp.md`).
impl OutputWriter {
    /// The `{"uevrec":"session",…}` line.
    pub fn write_session(&mut self, out: &mut Vec<u8>, time: Option<u64>, info: &SessionInfo) {
        if let OutputWriter::Json(w) = self {
            w.write_session(out, time, info);
        }
    }

    /// The `{"uevrec":"schema",…}` line of a tracefs event format.
    pub fn write_format_schema(
        &mut self,
        out: &mut Vec<u8>,
        time: Option<u64>,
        prepared: &PreparedFormat,
    ) {
        if let OutputWriter::Json(w) = self {
            w.write_format_schema(out, time, prepared);
        }
    }

    /// After the line of a record of `prepared` written from `line_start`: the schema
    /// line of an EventHeader metadata block first seen there, put before it
    /// ([`LineWriter::announce_learnt`]).
    #[inline]
    pub fn announce_learnt(
        &mut self,
        out: &mut Vec<u8>,
        line_start: usize,
        time: Option<u64>,
        prepared: &PreparedFormat,
    ) {
        if let OutputWriter::Json(w) = self {
            w.announce_learnt(out, line_start, time, prepared);
        }
    }
}

impl OutputWriter {
    /// `records` records of `event` (`system:name`) not kept, for `reason`: a
    /// `{"uevrec":"dropped"}` line in JSON lines, a `uevrec.notice` log record
    /// (`what` = `dropped`) in OTLP, a notice line in text.
    pub fn write_dropped(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        event: &str,
        reason: &str,
        records: u64,
    ) {
        if let OutputWriter::Json(w) = self {
            w.write_dropped(out, time_unix_ns, event, reason, records);
        } else {
            let message = format!("{records} records not kept: {reason}");
            self.write_notice(out, time_unix_ns, "dropped", Some(event), &message);
        }
    }
}

/// `$call` on the writer inside `$self` (bound to `$w`): `LineWriter`'s own methods,
/// `OtlpWriter`'s and `TextWriter`'s [`RecordWriter`] ones.
macro_rules! each {
    ($self:ident, $w:ident => $call:expr) => {
        match $self {
            OutputWriter::Json($w) => $call,
            OutputWriter::Otlp($w) => $call,
            OutputWriter::Text($w) => $call,
        }
    };
}

impl RecordWriter for OutputWriter {
    #[inline]
    fn write_prepared(&mut self, o: &mut Vec<u8>, s: &RecordStamp, p: &PreparedFormat, r: &[u8]) {
        each!(self, w => w.write_prepared(o, s, p, r))
    }

    fn write_lost(&mut self, out: &mut Vec<u8>, time_unix_ns: Option<u64>, cpu: u32, lost: u64) {
        each!(self, w => w.write_lost(out, time_unix_ns, cpu, lost))
    }

    fn write_notice(&mut self, o: &mut Vec<u8>, t: Option<u64>, w: &str, e: Option<&str>, m: &str) {
        let what = w;
        each!(self, w => w.write_notice(o, t, what, e, m))
    }

    fn end_lines(&mut self, out: &mut Vec<u8>) {
        if let OutputWriter::Otlp(w) = self {
            w.end_lines(out);
        }
    }

    fn set_host_name(&mut self, name: &str) {
        if let OutputWriter::Otlp(w) = self {
            w.set_host_name(name);
        }
    }
}

/// Where a file decoder hands its records when it does not write them itself: a caller
/// that formats them elsewhere (`uevrec decode --threads N`: on N threads, in the same
/// order). It gets what the decoder's own writer would have been given, in the order it
/// would have written it; each method but [`RecordSink::context`] returns false to stop.
pub trait RecordSink {
    /// A record of the file's event `event` (`prepared`); `first`: its event's first
    /// record with schema lines on, so its `{"uevrec":"schema"}` line comes first
    /// ([`SchemaOnce`](crate::SchemaOnce)); `stack`: its call stack, when the sample
    /// carries one and [`DecodeOptions::stacks`](crate::to_lines::DecodeOptions::stacks)
    /// asks for it, with `user_stack` its user registers and stack copy when it carries
    /// them (`--call-graph dwarf`).
    // The record's parts as the decoder has them at hand: a struct would be filled per
    // record for one call.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        event: usize,
        prepared: &PreparedFormat,
        first: bool,
        stamp: &RecordStamp,
        cgroup: Option<u64>,
        raw: &[u8],
        stack: Option<Callchain<'_>>,
        user_stack: Option<UserStack<'_>>,
    ) -> bool;

    /// The kernel dropped `lost` records on `cpu` ([`RecordWriter::write_lost`]).
    fn lost(&mut self, time_unix_ns: Option<u64>, cpu: u32, lost: u64) -> bool;

    /// A notice line ([`RecordWriter::write_notice`]).
    fn notice(
        &mut self,
        time_unix_ns: Option<u64>,
        what: &str,
        event: Option<&str>,
        message: &str,
    ) -> bool;

    /// Who is who changed, for the records after it (the decoder's own tracker takes it
    /// too).
    fn context(&mut self, time_unix_ns: Option<u64>, update: ContextUpdate<'_>);
}

/// One record a file decoder is about to write, as a [`RecordJudge`] is shown it.
#[derive(Debug, Clone, Copy)]
pub struct Judged<'a> {
    /// The event's index in the file (as [`RecordSink::record`] numbers them).
    pub event: usize,
    /// The event's format.
    pub prepared: &'a PreparedFormat,
    /// The record's time, cpu, pid and tid, as its line shows them.
    pub stamp: &'a RecordStamp,
    /// The record's time on its own clock (ns), where the file has one: for a judge
    /// that goes by time when `stamp` has no wall-clock time (a trace.dat, a perf.data
    /// without `HEADER_CLOCK_DATA`).
    pub clock_ns: Option<u64>,
    /// The trace entry.
    pub raw: &'a [u8],
    /// The byte order of the entry's values.
    pub endian: crate::Endian,
    /// Who is who at the record (`None`: no context, `--no-context`).
    pub context: Option<&'a ContextTracker>,
    /// The cgroup id the sample carried (`PERF_SAMPLE_CGROUP`).
    pub cgroup: Option<u64>,
}

/// Which records a file decoder writes, beside its selector of events: the caller's
/// judgement of each record (`uevrec decode --where`; this crate judges nothing). Asked
/// once per record of a selected event, in the order the records are written, before
/// its line or [`RecordSink::record`]; a record it does not keep is neither written nor
/// counted in [`crate::to_lines::DecodeStats::records`] (the judge counts it).
pub trait RecordJudge: Send + Sync {
    /// Whether `record` is written.
    fn keep(&mut self, record: &Judged<'_>) -> bool;

    /// A judge of the same rules for another decoder of the same input (a range, a
    /// window of time), counting into the same totals.
    fn fork(&self) -> Box<dyn RecordJudge>;
}

/// Names the frames of call stacks and writes a record's `"stack"` key (the recorder's
/// symbolizer: this crate reads no files), told of the processes' mappings, execs,
/// forks and exits in time order with the records (a file decoder: from the file's own
/// `PERF_RECORD_MMAP2`, `COMM`, `FORK` and `EXIT` records).
pub trait StackNamer {
    /// A change of the processes at `time_unix_ns` (those that are not about mappings
    /// and programs are passed over).
    fn context(&mut self, time_unix_ns: Option<u64>, update: &ContextUpdate<'_>);

    /// Append `,"stack":[…]` of the record of `stamp` to `out`: the frames of `stack`,
    /// and with `user` (`--call-graph dwarf`'s registers and stack copy) the user frames
    /// unwound from it.
    fn write(
        &mut self,
        out: &mut Vec<u8>,
        stamp: &RecordStamp,
        stack: Callchain<'_>,
        user: Option<UserStack<'_>>,
    );
}

/// Put the `"stack"` key into the JSON line that ends `out` (`…}\n`): the line then ends
/// `…,"stack":[…]}\n`. A line of another shape (OTLP, text) is left as it is.
pub fn add_stack(
    out: &mut Vec<u8>,
    namer: &mut dyn StackNamer,
    stamp: &RecordStamp,
    stack: Callchain<'_>,
    user: Option<UserStack<'_>>,
) {
    if !out.ends_with(b"}\n") {
        return;
    }
    out.truncate(out.len().saturating_sub(2));
    namer.write(out, stamp, stack, user);
    out.extend_from_slice(b"}\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json_line::own_lines::SessionInfo;
    use crate::parse_format;
    use crate::to_lines::SchemaOnce;

    fn prepared() -> PreparedFormat {
        let text = "name: m.1a\nID: 7\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\n\tfield:__rel_loc char[] msg;\toffset:8;\tsize:4;\tsigned:0;\n\nprint fmt: \"\"\n";
        PreparedFormat::new(
            &parse_format(text).unwrap(),
            "user_events_multi",
            "m",
            Some("1a"),
        )
    }

    #[test]
    fn otlp_has_no_schema_lines_and_decoders_describe_once() {
        let mut otlp = OutputWriter::new(OutputFormat::Otlp, LineOptions::default());
        let mut out = Vec::new();
        otlp.write_session(&mut out, None, &SessionInfo::default());
        otlp.write_format_schema(&mut out, None, &prepared());
        assert!(out.is_empty());
        let mut json = OutputWriter::new(OutputFormat::JsonLines, LineOptions::default());
        let (p, raw) = (prepared(), [0u8; 12]);
        let stamp = RecordStamp::default();
        for on in [true, false] {
            let mut first = SchemaOnce::new(on);
            let mut out = Vec::new();
            for event in [3, 3, 0] {
                first.write_record(&mut json, &mut out, event, &stamp, &p, &raw, |_| {});
            }
            let text = String::from_utf8(out).unwrap();
            let schemas = text.lines().filter(|l| l.contains(r#""uevrec":"schema""#));
            assert_eq!(schemas.count(), if on { 2 } else { 0 }, "{text}");
            assert_eq!(
                text.lines().filter(|l| l.contains(r#""fields":{"#)).count(),
                3
            );
        }
    }

    #[test]
    fn dropped_counts_reach_every_format() {
        let formats = [
            OutputFormat::JsonLines,
            OutputFormat::Otlp,
            OutputFormat::Text { color: false },
        ];
        for format in formats {
            let mut writer = OutputWriter::new(format, LineOptions::default());
            let mut out = Vec::new();
            writer.write_dropped(&mut out, None, "raw_syscalls:sys_enter", "filtered", 20_000);
            writer.end_lines(&mut out);
            let text = String::from_utf8(out).unwrap();
            assert!(
                text.contains("raw_syscalls:sys_enter"),
                "{format:?}: {text}"
            );
            assert!(text.contains("20000"), "{format:?}: {text}");
            assert!(text.contains("filtered"), "{format:?}: {text}");
        }
    }
}
