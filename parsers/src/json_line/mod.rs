//! One decoded record → one line of JSON (UTF-8, ends with exactly one `\n`, contains no
//! other newline). The schema is documented in `docs/json-lines.md`:
//!
//! ```text
//! {"time":"2026-11-22T11:00:00.123456789Z","system":"sched","event":"sched_process_exec","cpu":1,"pid":42,"tid":42,"fields":{"filename":"/bin/true","pid":42,"old_pid":42}}
//! {"time":"…","system":"user_events_multi","event":"m","format_id":"1","cpu":0,"pid":7,"tid":7,"fields":{…}}
//! {"time":"…","system":"user_events","event":"t","cpu":0,"pid":7,"tid":7,"fields":{"a":1,"msg":null},"errors":{"msg":"__rel_loc out of bounds: …"}}
//! {"time":"…","uevrec":"lost","cpu":1,"lost":17}
//! {"time":"…","uevrec":"notice","what":"attached","event":"user_events:t","message":"id 1117"}
//! {"time":"…","uevrec":"session",…} and {"time":"…","uevrec":"schema",…} (see [`schema`])
//! ```
//!
//! Keys come in that order; `format_id` only for multi-format events, `common` (the
//! common fields) only with [`LineOptions::include_common`], `errors` only when a field
//! failed to decode (its value in `fields` is then `null`).
//!
//! Values, per [`Value`]: integers are JSON numbers (exact, also above 2^53); `char` data
//! is a JSON string (invalid UTF-8: each maximal invalid sequence becomes U+FFFD, the
//! `String::from_utf8_lossy` rule; control characters are escaped); bytes, `struct T` and
//! unknown kinds are lowercase hex strings; integer arrays are JSON arrays of numbers.
//! Time is RFC 3339 UTC with exactly 9 fractional digits, or `null` when unknown.
//!
//! Performance: everything is appended to a caller-owned `Vec<u8>`; nothing is allocated
//! per record once the Vec has grown (strings with invalid UTF-8 included). The date-time
//! part of the timestamp is formatted once per second and cached. The prepared path
//! ([`LineWriter::write_prepared`]) writes a line into a fixed-size array the writer owns,
//! with its position in a register, and appends it to the `Vec` with one copy.

use std::fmt;

use crate::decode::{Endian, Value, decode_field};
use crate::eventheader::{TracepointName, tracepoint_name::OwnedTracepointName};
use crate::schema::{EventFormat, Field};
use eventheader::PreparedName;

pub(crate) mod context;
// Reads EventHeader payloads (counts, lengths and places from the input).
#[deny(clippy::arithmetic_side_effects)]
pub mod eventheader;
mod field_steps;
mod ids;
pub(crate) mod own_lines;
mod record_writer;
mod time;

// The shared JSON text (`crate::json`), under the names this folder's files use.
use crate::json::{escape, line_buf, numbers, text, values};
pub(crate) use escape::{Escaped, write_hex, write_key, write_str};
use field_steps::{FieldStep, steps, write_steps};
pub(crate) use line_buf::LineOut;
use line_buf::{LINE_BUF, LineBuf};
pub(crate) use numbers::write_int;
pub use record_writer::RecordWriter;
pub(crate) use text::Text;
use time::TimeCache;
pub(crate) use values::write_value;

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

/// Bytes reserved per event line besides fields and raw data (time, ids, punctuation).
const RESERVE_FIXED: usize = 160;

/// The per-record part of an event line's metadata, for [`LineWriter::write_prepared`]
/// (the names are in the [`PreparedFormat`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordStamp {
    /// Wall-clock time in nanoseconds since the Unix epoch (UTC), if known.
    pub time_unix_ns: Option<u64>,
    /// CPU the record was written on.
    pub cpu: u32,
    /// Process id (from the perf sample).
    pub pid: u32,
    /// Thread id (from the perf sample).
    pub tid: u32,
}

/// An event's format with the parts of its lines that never change rendered once:
/// `,"system":"…","event":"…",("format_id":"…",)"cpu":` and each field's `"name":` key,
/// and for each field the way to write it chosen once (derived from its [`FieldPlan`](crate::decode::FieldPlan)). Build it once per
/// attached event; [`LineWriter::write_prepared`] then writes its lines.
#[derive(Debug, Clone)]
pub struct PreparedFormat {
    format: EventFormat,
    /// See [`write_head`]; then `"cpu":`.
    head: Text<64>,
    /// One step per common field: the first key opens the object (`,"common":{"name":`).
    common: Box<[FieldStep]>,
    /// One step per field: the first key opens the object (`,"fields":{"name":`).
    fields: Box<[FieldStep]>,
    /// For EventHeader events ([`crate::eventheader::detect`]), the parsed name and the
    /// constant texts of its lines.
    eventheader: Option<PreparedName>,
    /// The tracepoint system, event name (base name for multi-format events) and
    /// format id, for writers other than JSON lines ([`crate::otlp`]) and schema lines.
    names: Box<(String, String, Option<String>)>,
    /// Whether the fields' names are unique and each only ASCII letters, digits and `_`
    /// (C identifiers, as the kernel's are): keys that need no escape and no renaming,
    /// and that no writer's own key (`process.pid`, `name#2`) can equal.
    simple_names: bool,
}

impl PreparedFormat {
    /// Prepare `format` of `system:event` (for multi-format events `event` is the base
    /// name and `format_id` the hex suffix, as in [`RecordMeta`]).
    pub fn new(format: &EventFormat, system: &str, event: &str, format_id: Option<&str>) -> Self {
        let mut head = Vec::new();
        write_head(&mut head, system, event, format_id);
        head.extend_from_slice(b"\"cpu\":");
        PreparedFormat {
            format: format.clone(),
            head: Text::new(head),
            common: steps(COMMON_OPEN, &format.common_fields),
            fields: steps(FIELDS_OPEN, &format.fields),
            eventheader: crate::eventheader::detect(format, event)
                .and(OwnedTracepointName::parse(event))
                .map(PreparedName::new),
            names: Box::new((
                system.to_string(),
                event.to_string(),
                format_id.map(str::to_string),
            )),
            simple_names: simple_names(&format.fields),
        }
    }

    /// Whether the fields' names are unique C-identifier-like names (see the field).
    pub(crate) fn simple_names(&self) -> bool {
        self.simple_names
    }

    /// The tracepoint system (`user_events`, `sched`, …).
    pub fn system(&self) -> &str {
        &self.names.0
    }

    /// The event name (for multi-format events the base name without `.<id>`).
    pub fn event(&self) -> &str {
        &self.names.1
    }

    /// For multi-format events the format id (the hex suffix of the tracefs name).
    pub fn format_id(&self) -> Option<&str> {
        self.names.2.as_deref()
    }

    /// The EventHeader tracepoint name when this is an EventHeader event (its lines
    /// then carry the EventHeader keys, `docs/eventheader.md`).
    pub fn eventheader(&self) -> Option<TracepointName<'_>> {
        self.eventheader.as_ref().map(PreparedName::get)
    }

    /// The format this was prepared from.
    pub fn format(&self) -> &EventFormat {
        &self.format
    }
}

/// What opens the `common` object.
const COMMON_OPEN: &[u8] = b",\"common\":{";
/// What opens the `fields` object.
const FIELDS_OPEN: &[u8] = b",\"fields\":{";

/// Choices that change every line.
#[derive(Debug, Clone, Copy, Default)]
pub struct LineOptions {
    /// Also write the common fields (`common_type`, `common_pid`, ...).
    pub include_common: bool,
    /// The records are big-endian (perf.data from another machine); default little.
    pub endian: Endian,
}

/// Writes JSON lines into a caller-owned buffer; keeps small caches (time formatting),
/// allocates nothing per record.
#[derive(Debug)]
pub struct LineWriter {
    opts: LineOptions,
    /// Where [`LineWriter::write_prepared`] writes a line before appending it ([`LineBuf`]).
    line_buf: Box<[u8; LINE_BUF]>,
    time: TimeCache,
    ids: ids::IdsCache,
    /// Buffers of the EventHeader writer.
    eh: eventheader::Scratch,
    /// Context keys written after `"tid"` ([`LineWriter::set_context`]).
    context: context::ContextText,
    /// What `context` was written for, and the earliest record time it holds for.
    context_of: Option<(context::ContextKey, u64)>,
    /// The keys written before `context`, and what for: two threads taking turns
    /// (a pipe's two ends, a thread and the one it wakes) find theirs here.
    context_before: context::ContextText,
    /// What `context_before` was written for ([`LineWriter::context_of`]).
    context_before_of: Option<(context::ContextKey, u64)>,
    /// More keys and what for, looked at after those before.
    context_others:
        [(Option<(context::ContextKey, u64)>, context::ContextText); context::CONTEXT_OTHERS],
    /// The one of `context_others` to replace next (in turn).
    context_next: usize,
}

impl Default for LineWriter {
    fn default() -> Self {
        LineWriter::new(LineOptions::default())
    }
}

impl LineWriter {
    /// A writer with these options.
    pub fn new(opts: LineOptions) -> Self {
        LineWriter {
            opts,
            line_buf: Box::new([0; LINE_BUF]),
            time: TimeCache::default(),
            ids: ids::IdsCache::default(),
            eh: eventheader::Scratch::default(),
            context: context::ContextText::default(),
            context_of: None,
            context_before: context::ContextText::default(),
            context_before_of: None,
            context_others: Default::default(),
            context_next: 0,
        }
    }

    fn endian(&self) -> Endian {
        self.opts.endian
    }

    /// Append one event line for the trace entry `raw` (common fields first) to `out`.
    ///
    /// Never panics on bad input: fields that cannot be decoded are `null` in `fields`
    /// and explained in `errors`. The same line as [`LineWriter::write_prepared`], which
    /// is faster when one format is written many times.
    pub fn write_record(
        &mut self,
        out: &mut Vec<u8>,
        meta: &RecordMeta<'_>,
        format: &EventFormat,
        raw: &[u8],
    ) {
        let endian = self.endian();
        let common = self.start_line(out, meta.time_unix_ns, format, raw);
        write_head(out, meta.system, meta.event, meta.format_id);
        out.extend_from_slice(b"\"cpu\":");
        self.ids.write(out, meta.cpu, meta.pid, meta.tid);
        self.context.write(out);
        if let Some(tp) = crate::eventheader::detect(format, meta.event) {
            self.write_eventheader(out, common, raw, |out, eh, data| {
                eventheader::write_event(out, eh, &tp, data)
            });
            return;
        }
        let mut failed = false;
        if self.opts.include_common {
            out.extend_from_slice(COMMON_OPEN);
            failed |= write_fields(out, common, raw, endian);
        }
        out.extend_from_slice(FIELDS_OPEN);
        failed |= write_fields(out, &format.fields, raw, endian);
        end_line(out, failed, common, &format.fields, raw, endian);
    }

    /// Append one event line for `raw` like [`LineWriter::write_record`] (byte for byte
    /// the same line), with the names and keys rendered once in `prepared` and each
    /// field's decoding chosen once.
    pub fn write_prepared(
        &mut self,
        out: &mut Vec<u8>,
        stamp: &RecordStamp,
        prepared: &PreparedFormat,
        raw: &[u8],
    ) {
        let endian = self.endian();
        let format = &prepared.format;
        let common = self.common(format);
        // The line is written into the line buffer, then appended with one copy.
        let mut line = LineBuf::new(&mut self.line_buf, out);
        self.time.write(&mut line, stamp.time_unix_ns);
        // The prepared head ends with `"cpu":`.
        prepared.head.write(&mut line);
        self.ids.write(&mut line, stamp.cpu, stamp.pid, stamp.tid);
        self.context.write(&mut line);
        if let Some(name) = &prepared.eventheader {
            line.finish();
            self.write_eventheader(out, common, raw, |out, eh, data| {
                eventheader::write_event_prepared(out, eh, name, data)
            });
            return;
        }
        let mut failed = false;
        if self.opts.include_common {
            failed |= line.lend(|l| write_steps(l, COMMON_OPEN, &prepared.common, raw, endian));
        }
        failed |= line.lend(|l| write_steps(l, FIELDS_OPEN, &prepared.fields, raw, endian));
        end_line(&mut line, failed, common, &format.fields, raw, endian);
        line.finish();
    }

    /// The rest of an EventHeader event's line after `"tid"`: `common` (when asked
    /// for; fields that fail are `null`, without an `errors` entry), the EventHeader
    /// keys from `raw[8..]` (`write`: [`eventheader::write_event`] or
    /// [`eventheader::write_event_prepared`]), `}` and the newline.
    #[inline(always)]
    fn write_eventheader(
        &mut self,
        out: &mut Vec<u8>,
        common: &[Field],
        raw: &[u8],
        write: impl FnOnce(&mut Vec<u8>, &mut eventheader::Scratch, &[u8]),
    ) {
        if !common.is_empty() {
            out.extend_from_slice(COMMON_OPEN);
            write_fields(out, common, raw, self.endian());
        }
        write(out, &mut self.eh, raw.get(8..).unwrap_or_default());
        out.extend_from_slice(b"}\n");
    }

    /// The start shared by [`LineWriter::write_record`] and
    /// [`LineWriter::write_prepared`]: one capacity check for the usual line (the fixed
    /// parts, ~24 bytes per field and the raw bytes, whose text is mostly no longer than
    /// they are), then `{"time":…`. Returns the common fields the line shows (all of
    /// them with [`LineOptions::include_common`], else none).
    #[inline(always)]
    fn start_line<'f>(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        format: &'f EventFormat,
        raw: &[u8],
    ) -> &'f [Field] {
        let common = self.common(format);
        out.reserve(RESERVE_FIXED + 24 * (common.len() + format.fields.len()) + raw.len());
        self.time.write(out, time_unix_ns);
        common
    }

    /// The common fields a line of `format` shows: all of them with
    /// [`LineOptions::include_common`], else none.
    #[inline(always)]
    fn common<'f>(&self, format: &'f EventFormat) -> &'f [Field] {
        if self.opts.include_common {
            &format.common_fields
        } else {
            &[]
        }
    }

    /// Append a `{"uevrec":"lost",...}` line: the kernel dropped `lost` records on `cpu`.
    pub fn write_lost(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        cpu: u32,
        lost: u64,
    ) {
        self.time.write(out, time_unix_ns);
        out.extend_from_slice(b",\"uevrec\":\"lost\",\"cpu\":");
        write_int(out, cpu);
        out.extend_from_slice(b",\"lost\":");
        write_int(out, lost);
        out.extend_from_slice(b"}\n");
    }

    /// Append a `{"uevrec":"dropped",...}` line: `records` records of `event`
    /// (`system:name`) were not kept, for `reason` (`filtered`, `filter_error`: the
    /// recorder's `--where`; docs/filtering.md).
    pub fn write_dropped(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        event: &str,
        reason: &str,
        records: u64,
    ) {
        self.time.write(out, time_unix_ns);
        out.extend_from_slice(b",\"uevrec\":\"dropped\",\"event\":");
        write_str(out, event);
        out.extend_from_slice(b",\"reason\":");
        write_str(out, reason);
        out.extend_from_slice(b",\"records\":");
        write_int(out, records);
        out.extend_from_slice(b"}\n");
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
        self.time.write(out, time_unix_ns);
        out.extend_from_slice(b",\"uevrec\":\"notice\",\"what\":");
        write_str(out, what);
        if let Some(event) = event {
            out.extend_from_slice(b",\"event\":");
            write_str(out, event);
        }
        out.extend_from_slice(b",\"message\":");
        write_str(out, message);
        out.extend_from_slice(b"}\n");
    }
}

/// Write `"name":value,...}` for `fields` (the `{` is written already); returns whether
/// any field failed to decode.
fn write_fields(out: &mut Vec<u8>, fields: &[Field], raw: &[u8], endian: Endian) -> bool {
    let mut failed = false;
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_key(out, &field.name);
        failed |= write_value(out, &decode_field(field, raw, endian));
    }
    out.push(b'}');
    failed
}

/// The end of an event line: the `errors` object if a field `failed`, then `}` and the
/// newline.
#[inline(always)]
fn end_line(
    out: &mut impl LineOut,
    failed: bool,
    common: &[Field],
    fields: &[Field],
    raw: &[u8],
    endian: Endian,
) {
    if failed {
        write_errors(out.vec(), common, fields, raw, endian);
    }
    out.put_all(b"}\n");
}

/// `,"errors":{"name":"message",...}` for the fields that fail to decode (rare: they
/// are decoded again, which is cheap and allocation-free, for the messages).
fn write_errors(out: &mut Vec<u8>, common: &[Field], fields: &[Field], raw: &[u8], endian: Endian) {
    out.extend_from_slice(b",\"errors\":{");
    let mut first = true;
    for field in common.iter().chain(fields) {
        if let Value::Error(e) = decode_field(field, raw, endian) {
            if !first {
                out.push(b',');
            }
            first = false;
            write_key(out, &field.name);
            out.push(b'"');
            // `Escaped::write_str` never fails, so neither does `write!`.
            let _ = fmt::Write::write_fmt(&mut Escaped(out), format_args!("{e}"));
            out.push(b'"');
        }
    }
    out.push(b'}');
}

/// `,"system":"…","event":"…",` and `"format_id":"…",` if there is one: the part of an
/// event line between the time and `"cpu"`.
fn write_head(out: &mut Vec<u8>, system: &str, event: &str, format_id: Option<&str>) {
    out.extend_from_slice(b",\"system\":");
    write_str(out, system);
    out.extend_from_slice(b",\"event\":");
    write_str(out, event);
    if let Some(id) = format_id {
        out.extend_from_slice(b",\"format_id\":");
        write_str(out, id);
    }
    out.push(b',');
}

/// Whether `fields` have unique names made of ASCII letters, digits and `_` only.
fn simple_names(fields: &[Field]) -> bool {
    fields.iter().enumerate().all(|(i, f)| {
        f.name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && fields[..i].iter().all(|g| g.name != f.name)
    })
}
