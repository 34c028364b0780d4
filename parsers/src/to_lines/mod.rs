//! The file-to-lines drivers: a whole perf.data ([`perf_data`]) or trace.dat
//! ([`trace_dat`]) file → the JSON lines (or OTLP requests) live recording writes; the
//! whole of `uevrec decode` but the I/O. The layer above the pure readers
//! ([`crate::perf_data`], [`crate::trace_dat`]) and the writers ([`crate::OutputWriter`]):
//! what both drivers share ([`DecodeOptions`], [`DecodeStats`], [`SchemaOnce`]) is here.

pub mod perf_data;
pub mod trace_dat;

use std::collections::BTreeMap;

use crate::json_line::{PreparedFormat, RecordStamp, RecordWriter};
use crate::output::{OutputFormat, OutputWriter};
use crate::perf_data::PerfDataError;

/// Lines are handed to the caller's sink in runs of about this many bytes.
pub const FLUSH_BYTES: usize = 256 * 1024;
/// Default bound of the time-order buffer ([`crate::perf_data::order::Orderer`]): 64 MiB of records.
pub const DEFAULT_ORDER_BYTES: usize = 64 << 20;
/// At most this many [`DecodeStats::errors`] are kept (all are counted).
pub const MAX_KEPT_ERRORS: usize = 20;

/// How to decode.
#[derive(Debug, Clone, Copy)]
pub struct DecodeOptions {
    /// Write the common fields too (`--common`).
    pub include_common: bool,
    /// Bound of the time-order buffer in bytes.
    pub order_bytes: usize,
    /// Stop after this many event lines.
    pub max_records: Option<u64>,
    /// JSON lines or OTLP/JSON (`--format`).
    pub format: OutputFormat,
    /// Schema lines before each event's first record ([`crate::SchemaOnce`]).
    pub schema: bool,
    /// `comm`/`cgroup`/`container`/`unit` keys from the file's `PERF_RECORD_COMM`,
    /// `FORK`, `EXIT` and `CGROUP` records and the samples' `PERF_SAMPLE_CGROUP`
    /// (JSON lines only), applied in time order with the samples.
    pub context: bool,
    /// The `stack` key on the lines of samples that carry a callchain, named by the
    /// [`StackNamer`](crate::StackNamer) given to the decoder (JSON lines only); the
    /// file's `PERF_RECORD_MMAP2`, `COMM`, `FORK` and `EXIT` records are applied in time
    /// order with the samples for it, with or without `context`.
    pub stacks: bool,
    /// With `stacks`: the frames named (else each with its module, file offset and
    /// build id, `--no-symbolize`); what the caller's namer is told, this crate names
    /// nothing.
    pub symbolize_stacks: bool,
    /// With `stacks`: each distinct stack on a line of its own, the records naming it
    /// by id (`--stack-ids`); what the caller's namer is told.
    pub stack_ids: bool,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            include_common: false,
            order_bytes: DEFAULT_ORDER_BYTES,
            max_records: None,
            format: OutputFormat::JsonLines,
            schema: false,
            context: false,
            stacks: false,
            symbolize_stacks: true,
            stack_ids: false,
        }
    }
}

/// What decoding saw.
#[derive(Debug, Clone, Default)]
pub struct DecodeStats {
    /// Event lines written.
    pub records: u64,
    /// Records lost: the sum of the `lost` lines, or `u64::MAX` when that sum is more than
    /// a `u64` holds ([`DecodeStats::lost_overflow`]); [`DecodeStats::lost_words`] says
    /// either in words.
    pub lost: u64,
    /// The `lost` lines add up to more than a `u64` holds (a file can claim any count in
    /// each): `lost` stopped at `u64::MAX`, and the decoding ended with a `lost` notice
    /// saying so ([`LOST_OVERFLOW`]).
    pub lost_overflow: bool,
    /// Event lines whose `time` is `null`.
    pub time_unknown: u64,
    /// Samples whose event could not be told (no id, or an id of no attr).
    pub unknown_event: u64,
    /// Samples skipped per event name: the event has no format in the file, or a
    /// `sample_type` this reader cannot lay out.
    pub skipped: BTreeMap<String, u64>,
    /// Samples written after newer ones (the order buffer's bound was reached, or the
    /// file's rounds were not in order for them).
    pub late: u64,
    /// How many times the order buffer's bound was reached (its older half let out early).
    pub order_buffer_full: u64,
    /// Problems that did not stop decoding (first [`MAX_KEPT_ERRORS`]).
    pub errors: Vec<PerfDataError>,
    /// How many problems there were.
    pub error_count: u64,
}

/// The message of the `lost` notice that ends a decoding whose `lost` lines add up to
/// more than a counter holds ([`DecodeStats::lost_overflow`]): each line's count is the
/// file's, their total is not given.
pub const LOST_OVERFLOW: &str = "the file claims more lost records than a counter holds: \
     its lost lines add up to more than 18446744073709551615, so no total is given (each \
     lost line's own count is what the file says)";

impl DecodeStats {
    /// Count `n` more records lost (a `lost` line's count, read from the input): the total
    /// stops at `u64::MAX` rather than wrap, and [`DecodeStats::lost_overflow`] says so.
    pub fn add_lost(&mut self, n: u64) {
        match self.lost.checked_add(n) {
            Some(total) => self.lost = total,
            None => {
                self.lost = u64::MAX;
                self.lost_overflow = true;
            }
        }
    }

    /// The message of the notice that ends the decoding when the total lost cannot be
    /// represented ([`LOST_OVERFLOW`]), else `None`.
    pub fn lost_notice(&self) -> Option<&'static str> {
        self.lost_overflow.then_some(LOST_OVERFLOW)
    }

    /// The records lost in words, for a summary: the count, or "more than
    /// 18446744073709551615" when it cannot be represented.
    pub fn lost_words(&self) -> String {
        if self.lost_overflow {
            format!("more than {}", u64::MAX)
        } else {
            self.lost.to_string()
        }
    }
}

/// `bytes` as lowercase hex (the `undecoded` notices).
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    // A slice is at most isize::MAX bytes: twice that fits a usize.
    let mut s = String::with_capacity(bytes.len().saturating_mul(2));
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// For the decoders of files (perf.data, trace.dat, `uevrec decode`): each event's
/// schema line just before its first record (a trace.dat holds the formats of every
/// event of its machine; only those with records are described), and each EventHeader
/// metadata block's when first seen. Events are known by their index in the file; off,
/// it only writes the records.
#[derive(Debug, Default)]
pub struct SchemaOnce {
    on: bool,
    /// Event index → described already.
    described: Vec<bool>,
}

impl SchemaOnce {
    /// Schema lines when `on`.
    pub fn new(on: bool) -> Self {
        SchemaOnce {
            on,
            described: Vec::new(),
        }
    }

    /// Mark the events `described` says as described already (range decoding: those
    /// whose schema line an earlier range wrote).
    pub fn seed(&mut self, described: &[bool]) {
        if self.described.len() < described.len() {
            self.described.resize(described.len(), false);
        }
        for (mine, &theirs) in self.described.iter_mut().zip(described) {
            *mine |= theirs;
        }
    }

    /// The events described so far (event index → described), without the undescribed
    /// ones at its end (so that two equal sets compare equal); none when off.
    pub fn described(&self) -> Vec<bool> {
        if !self.on {
            return Vec::new();
        }
        // An index of the vector, plus one: fits.
        let len = (self.described.iter().rposition(|&d| d)).map_or(0, |i| i.saturating_add(1));
        self.described[..len].to_vec()
    }

    /// Whether a record of event `event` written now would come with its schema line,
    /// without noting it.
    pub fn is_new(&self, event: usize) -> bool {
        self.on && !self.described.get(event).copied().unwrap_or(false)
    }

    /// Whether a record of event `event` written now would come with its schema line
    /// (on, and the event's first record), noting that it did.
    pub fn first(&mut self, event: usize) -> bool {
        if !self.on || self.described.get(event).copied().unwrap_or(false) {
            return false;
        }
        if self.described.len() <= event {
            self.described.resize(event.saturating_add(1), false);
        }
        self.described[event] = true;
        true
    }

    /// Write the record `raw` of the event `event` (`prepared`), with the schema lines
    /// that come first, calling `then(out)` right after the record's own line (before the
    /// schema lines it taught, if any): where its `stack` key goes. Always in line: a
    /// call cost as much as what it does besides [`RecordWriter::write_prepared`].
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn write_record(
        &mut self,
        writer: &mut OutputWriter,
        out: &mut Vec<u8>,
        event: usize,
        stamp: &RecordStamp,
        prepared: &PreparedFormat,
        raw: &[u8],
        then: impl FnOnce(&mut Vec<u8>),
    ) {
        if !self.on {
            writer.write_prepared(out, stamp, prepared, raw);
            then(out);
            return;
        }
        if !self.described.get(event).copied().unwrap_or(false) {
            if self.described.len() <= event {
                self.described.resize(event.saturating_add(1), false);
            }
            self.described[event] = true;
            writer.write_format_schema(out, stamp.time_unix_ns, prepared);
        }
        let start = out.len();
        writer.write_prepared(out, stamp, prepared, raw);
        then(out);
        writer.announce_learnt(out, start, stamp.time_unix_ns, prepared);
    }
}
