//! [`RecordWriter`]: the entry points of every output writer, beside the types they take
//! ([`RecordStamp`], [`PreparedFormat`]). OTLP's writer implements it; `crate::output`'s
//! `OutputWriter` implements it by dispatching to that or to JSON lines'
//! [`LineWriter`](super::LineWriter).

use super::{PreparedFormat, RecordStamp};

/// The entry points of an output writer. Each appends complete lines to the
/// caller-owned `out` (a writer that batches, OTLP, may keep records until a line is
/// due: [`RecordWriter::end_lines`] appends them).
pub trait RecordWriter {
    /// Take one record of the event `prepared` (its trace entry `raw`).
    fn write_prepared(
        &mut self,
        out: &mut Vec<u8>,
        stamp: &RecordStamp,
        prepared: &PreparedFormat,
        raw: &[u8],
    );

    /// The kernel dropped `lost` records on `cpu`.
    fn write_lost(&mut self, out: &mut Vec<u8>, time_unix_ns: Option<u64>, cpu: u32, lost: u64);

    /// A notice (event attached, detached, format changed, a format file skipped …);
    /// `event` is `system:event` when the notice concerns one.
    fn write_notice(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        what: &str,
        event: Option<&str>,
        message: &str,
    );

    /// Append what is waiting for a line, so `out` then holds every record taken so
    /// far (nothing waits in JSON lines).
    fn end_lines(&mut self, out: &mut Vec<u8>) {
        let _ = out;
    }

    /// The name of the machine the records come from, for outputs that carry it
    /// (OTLP: resource attribute `host.name`; JSON lines have no such field).
    fn set_host_name(&mut self, name: &str) {
        let _ = name;
    }
}
