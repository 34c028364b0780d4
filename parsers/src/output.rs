//! The choice of output: JSON lines ([`LineWriter`]) or OTLP/JSON ([`OtlpWriter`]),
//! behind one writer with the entry points every caller uses (the recorder's formatter,
//! the perf.data and trace.dat decoders).

use crate::json_line::{LineOptions, LineWriter, PreparedFormat, RecordStamp};
use crate::otlp::OtlpWriter;

/// What the lines are (`--format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OutputFormat {
    /// uevrec's JSON lines (`docs/json-lines.md`), one line per record.
    #[default]
    JsonLines,
    /// OTLP/JSON export requests, one per line, records batched (`docs/otlp.md`).
    Otlp,
}

/// A [`LineWriter`] or an [`OtlpWriter`].
#[derive(Debug)]
// The JSON-lines writer stays inline (no pointer to follow on its hot path).
#[allow(clippy::large_enum_variant)]
pub enum OutputWriter {
    /// JSON lines.
    Json(LineWriter),
    /// OTLP/JSON.
    Otlp(Box<OtlpWriter>),
}

impl OutputWriter {
    /// A writer of `format` with `opts`.
    pub fn new(format: OutputFormat, opts: LineOptions) -> Self {
        match format {
            OutputFormat::JsonLines => OutputWriter::Json(LineWriter::new(opts)),
            OutputFormat::Otlp => OutputWriter::Otlp(Box::new(OtlpWriter::new(opts))),
        }
    }

    /// [`LineWriter::write_prepared`] or [`OtlpWriter::write_prepared`].
    #[inline]
    pub fn write_prepared(
        &mut self,
        out: &mut Vec<u8>,
        stamp: &RecordStamp,
        prepared: &PreparedFormat,
        raw: &[u8],
    ) {
        match self {
            OutputWriter::Json(w) => w.write_prepared(out, stamp, prepared, raw),
            OutputWriter::Otlp(w) => w.write_prepared(out, stamp, prepared, raw),
        }
    }

    /// [`LineWriter::write_lost`] or [`OtlpWriter::write_lost`].
    pub fn write_lost(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        cpu: u32,
        lost: u64,
    ) {
        match self {
            OutputWriter::Json(w) => w.write_lost(out, time_unix_ns, cpu, lost),
            OutputWriter::Otlp(w) => w.write_lost(out, time_unix_ns, cpu, lost),
        }
    }

    /// [`LineWriter::write_notice`] or [`OtlpWriter::write_notice`].
    pub fn write_notice(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        what: &str,
        event: Option<&str>,
        message: &str,
    ) {
        match self {
            OutputWriter::Json(w) => w.write_notice(out, time_unix_ns, what, event, message),
            OutputWriter::Otlp(w) => w.write_notice(out, time_unix_ns, what, event, message),
        }
    }

    /// Append what is waiting for a line (OTLP batches; nothing for JSON lines), so
    /// `out` then holds every record taken so far.
    pub fn end_lines(&mut self, out: &mut Vec<u8>) {
        if let OutputWriter::Otlp(w) = self {
            w.end_lines(out);
        }
    }
}
