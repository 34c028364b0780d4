//! One decoded record → one line of JSON (UTF-8, ends with exactly one `\n`).
//!
//! OWNER: decode/json helper. The signatures below are the contract the recorder uses.

use crate::schema::EventFormat;

/// What the recorder knows about a record besides its raw bytes.
#[derive(Debug, Clone, Copy)]
pub struct RecordMeta<'a> {
    /// Wall-clock time in nanoseconds since the Unix epoch (UTC), if known.
    pub time_unix_ns: Option<u64>,
    /// CPU the record was written on.
    pub cpu: u32,
    /// Process id (from the perf sample).
    pub pid: u32,
    /// Thread id (from the perf sample).
    pub tid: u32,
    /// Tracepoint system (`user_events`, `sched`, ...).
    pub system: &'a str,
    /// Event name; for multi-format events the base name without `.<id>`.
    pub event: &'a str,
    /// For multi-format events, the format id (the hex suffix).
    pub format_id: Option<&'a str>,
}

/// Choices that change every line.
#[derive(Debug, Clone, Copy, Default)]
pub struct LineOptions {
    /// Also write the common fields (`common_type`, `common_pid`, ...).
    pub include_common: bool,
    /// The records are big-endian (perf.data from another machine); default little.
    pub big_endian: bool,
}

/// Writes JSON lines into a caller-owned buffer; keeps small caches (time formatting),
/// allocates nothing per record.
#[derive(Debug, Default)]
pub struct LineWriter {
    opts: LineOptions,
}

impl LineWriter {
    /// A writer with these options.
    pub fn new(opts: LineOptions) -> Self {
        LineWriter { opts }
    }

    /// Append one event line for the trace entry `raw` (common fields first) to `out`.
    pub fn write_record(
        &mut self,
        out: &mut Vec<u8>,
        meta: &RecordMeta<'_>,
        format: &EventFormat,
        raw: &[u8],
    ) {
        let _ = (out, meta, format, raw, self.opts);
    }

    /// Append a `{"uevrec":"lost",...}` line: the kernel dropped `lost` records on `cpu`.
    pub fn write_lost(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        cpu: u32,
        lost: u64,
    ) {
        let _ = (out, time_unix_ns, cpu, lost);
    }

    /// Append a `{"uevrec":"notice",...}` line (event attached, detached, format changed,
    /// a format file skipped ...). `event` is `system:event` when the notice concerns one.
    pub fn write_notice(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        what: &str,
        event: Option<&str>,
        message: &str,
    ) {
        let _ = (out, time_unix_ns, what, event, message);
    }
}
