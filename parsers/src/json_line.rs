//! One decoded record → one line of JSON (UTF-8, ends with exactly one `\n`, contains no
//! other newline). The schema is documented in `docs/json-lines.md`:
//!
//! ```text
//! {"time":"2026-11-22T11:00:00.123456789Z","system":"sched","event":"sched_process_exec","cpu":1,"pid":42,"tid":42,"fields":{"filename":"/bin/true","pid":42,"old_pid":42}}
//! {"time":"…","system":"user_events_multi","event":"m","format_id":"1","cpu":0,"pid":7,"tid":7,"fields":{…}}
//! {"time":"…","system":"user_events","event":"t","cpu":0,"pid":7,"tid":7,"fields":{"a":1,"msg":null},"errors":{"msg":"__rel_loc out of bounds: …"}}
//! {"time":"…","uevrec":"lost","cpu":1,"lost":17}
//! {"time":"…","uevrec":"notice","what":"attached","event":"user_events:t","message":"id 1117"}
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
//! part of the timestamp is formatted once per second and cached.

use std::fmt;
use std::time::{Duration, SystemTime};

use crate::decode::{Endian, FieldPlan, IntArray, PlanKind, Value, decode_field};
use crate::eventheader::{self, TracepointName, tracepoint_name::OwnedTracepointName};
use crate::location;
use crate::schema::{Element, EventFormat, Field, LocKind};

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
/// and for each field the way to write it chosen once (derived from its [`FieldPlan`]). Build it once per
/// attached event; [`LineWriter::write_prepared`] then writes its lines.
#[derive(Debug, Clone)]
pub struct PreparedFormat {
    format: EventFormat,
    /// See [`write_head`]; then `"cpu":`.
    head: Text<64>,
    /// One step per common field: the first key opens the object (`,"common":{"name":`).
    common: Box<[Step]>,
    /// One step per field: the first key opens the object (`,"fields":{"name":`).
    fields: Box<[Step]>,
    /// For EventHeader events ([`crate::eventheader::detect`]), the parsed name.
    eventheader: Option<OwnedTracepointName>,
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
            eventheader: eventheader::detect(format, event).and(OwnedTracepointName::parse(event)),
        }
    }

    /// The EventHeader tracepoint name when this is an EventHeader event (its lines
    /// then carry the EventHeader keys, `docs/eventheader.md`).
    pub fn eventheader(&self) -> Option<TracepointName<'_>> {
        self.eventheader.as_ref().map(OwnedTracepointName::get)
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

/// Prepared text to append, kept in a fixed-size array when it fits so that appending it
/// is one fixed-size copy (a few vector moves, no `memcpy` call) and a truncation.
#[derive(Debug, Clone)]
struct Text<const N: usize> {
    /// The text followed by zeros, when it fits.
    inline: [u8; N],
    /// Its length.
    len: usize,
    /// The text, when it does not fit (empty otherwise).
    long: Box<[u8]>,
}

impl<const N: usize> Text<N> {
    fn new(text: Vec<u8>) -> Self {
        let mut inline = [0; N];
        let len = text.len();
        match inline.get_mut(..len) {
            Some(head) => {
                head.copy_from_slice(&text);
                Text {
                    inline,
                    len,
                    long: Box::default(),
                }
            }
            None => Text {
                inline,
                len,
                long: text.into_boxed_slice(),
            },
        }
    }

    /// Append the text to `out`.
    #[inline(always)]
    fn write(&self, out: &mut Vec<u8>) {
        if self.len <= N {
            let end = out.len() + self.len;
            out.extend_from_slice(&self.inline);
            out.truncate(end);
        } else {
            out.extend_from_slice(&self.long);
        }
    }
}

/// One field of a [`PreparedFormat`]: its key and how to write its value.
#[derive(Debug, Clone)]
struct Step {
    /// `open"name":` for the first field, `,"name":` for the others.
    key: Text<32>,
    /// How to write the value (derived from `plan`).
    op: Op,
    /// How to read the value (the fallback).
    plan: FieldPlan,
}

/// A [`Step`] per field of `fields`; the first key starts with `open`.
fn steps(open: &[u8], fields: &[Field]) -> Box<[Step]> {
    fields
        .iter()
        .enumerate()
        .map(|(i, field)| {
            let mut key = Vec::with_capacity(open.len() + field.name.len() + 4);
            if i == 0 {
                key.extend_from_slice(open);
            } else {
                key.push(b',');
            }
            write_key(&mut key, &field.name);
            Step {
                key: Text::new(key),
                op: Op::of(&FieldPlan::of(field)),
                plan: FieldPlan::of(field),
            }
        })
        .collect()
}

/// How [`LineWriter::write_prepared`] writes a field, derived once from its
/// [`FieldPlan`] (which made the layout checks): the usual kinds read their bytes
/// directly (no [`Value`] in between); when a record does not fit (too short, location out
/// of bounds) or the kind is another one, the field goes through [`FieldPlan::read`] and
/// [`write_value`], which write the same bytes for what the direct path handles and
/// `null` plus an error for the rest.
#[derive(Debug, Clone, Copy)]
enum Op {
    /// An integer field of 1, 2, 4 or 8 bytes (the `size:` matches) at this offset.
    U8(usize),
    /// See [`Op::U8`].
    U16(usize),
    /// See [`Op::U8`].
    U32(usize),
    /// See [`Op::U8`].
    U64(usize),
    /// See [`Op::U8`].
    I8(usize),
    /// See [`Op::U8`].
    I16(usize),
    /// See [`Op::U8`].
    I32(usize),
    /// See [`Op::U8`].
    I64(usize),
    /// A fixed `char` array: the string up to the first NUL of `start..end`.
    Chars { start: usize, end: usize },
    /// A `__data_loc`/`__rel_loc` `char` string with a 4-byte location at `offset`.
    DynChars { offset: usize, loc: LocKind },
    /// A fixed array of 1, 2, 4 or 8-byte integers filling `start..end` exactly.
    Ints {
        start: usize,
        end: usize,
        width: u8,
        signed: bool,
    },
    /// Anything else: [`FieldPlan::read`].
    Decode,
}

impl Op {
    /// The op for a field's `plan` (which made the layout checks): a direct one for the
    /// kinds the plan shows valid whenever their bytes are in the record.
    fn of(plan: &FieldPlan) -> Op {
        let start = plan.offset();
        let Some(end) = start.checked_add(plan.size()) else {
            return Op::Decode;
        };
        match plan.kind() {
            PlanKind::Int { width, signed } => match (width, signed) {
                (1, false) => Op::U8(start),
                (2, false) => Op::U16(start),
                (4, false) => Op::U32(start),
                (8, false) => Op::U64(start),
                (1, true) => Op::I8(start),
                (2, true) => Op::I16(start),
                (4, true) => Op::I32(start),
                (8, true) => Op::I64(start),
                _ => Op::Decode,
            },
            PlanKind::Array(Element::Char) => Op::Chars { start, end },
            PlanKind::Array(Element::Integer { size, signed }) => Op::Ints {
                start,
                end,
                width: size,
                signed,
            },
            PlanKind::Dynamic {
                loc,
                elem: Element::Char,
            } if plan.size() == 4 => Op::DynChars { offset: start, loc },
            _ => Op::Decode,
        }
    }

    /// Write the value from `raw`; `false`, with nothing written, when the field must
    /// go through [`FieldPlan::read`] instead.
    #[inline]
    fn write(self, out: &mut Vec<u8>, raw: &[u8], big: bool) -> bool {
        match self {
            Op::U8(at) => match raw.get(at) {
                Some(&b) => write_int(out, b),
                None => return false,
            },
            Op::I8(at) => match raw.get(at) {
                Some(&b) => write_int(out, b as i8),
                None => return false,
            },
            Op::U16(at) => match int_bytes(raw, at, big) {
                Some(b) => write_int(out, u16::from_le_bytes(b)),
                None => return false,
            },
            Op::I16(at) => match int_bytes(raw, at, big) {
                Some(b) => write_int(out, i16::from_le_bytes(b)),
                None => return false,
            },
            Op::U32(at) => match int_bytes(raw, at, big) {
                Some(b) => write_int(out, u32::from_le_bytes(b)),
                None => return false,
            },
            Op::I32(at) => match int_bytes(raw, at, big) {
                Some(b) => write_int(out, i32::from_le_bytes(b)),
                None => return false,
            },
            Op::U64(at) => match int_bytes(raw, at, big) {
                Some(b) => write_int(out, u64::from_le_bytes(b)),
                None => return false,
            },
            Op::I64(at) => match int_bytes(raw, at, big) {
                Some(b) => write_int(out, i64::from_le_bytes(b)),
                None => return false,
            },
            Op::Chars { start, end } => match raw.get(start..end) {
                Some(area) => write_c_string(out, area),
                None => return false,
            },
            Op::DynChars { offset, loc } => {
                let Some(value) = int_bytes(raw, offset, big) else {
                    return false;
                };
                let value = u32::from_le_bytes(value);
                match location::resolve(loc, offset, 4, value, raw.len()) {
                    Ok(range) => match raw.get(range) {
                        Some(data) => write_c_string(out, data),
                        None => return false,
                    },
                    Err(_) => return false,
                }
            }
            Op::Ints {
                start,
                end,
                width,
                signed,
            } => match raw.get(start..end) {
                Some(area) => return write_int_slice(out, area, width, signed, big),
                None => return false,
            },
            Op::Decode => return false,
        }
        true
    }
}

/// The `N` bytes at `at` in little-endian order (swapped if `big`), if in `raw`.
#[inline(always)]
fn int_bytes<const N: usize>(raw: &[u8], at: usize, big: bool) -> Option<[u8; N]> {
    let mut b = *raw.get(at..)?.first_chunk::<N>()?;
    if big {
        b.reverse();
    }
    Some(b)
}

/// `char` data as a JSON string: up to its first NUL (all of it without one), as
/// [`decode_field`] reads it, then as [`write_text`] writes it. One pass finds the first
/// byte that is not plain printable ASCII; when that is the NUL (or there is none), the
/// string before it is copied as it is.
#[inline]
fn write_c_string(out: &mut Vec<u8>, data: &[u8]) {
    let clean = match first_special(data) {
        None => data,
        Some(at) => match data.split_at_checked(at) {
            Some((clean, [0, ..])) => clean,
            _ => {
                let end = memchr::memchr(0, data).unwrap_or(data.len());
                return write_text(out, data.get(..end).unwrap_or_default());
            }
        },
    };
    out.push(b'"');
    out.extend_from_slice(clean);
    out.push(b'"');
}

/// The index of the first byte of `bytes` that is below 0x20 (NUL included), `"`, `\`
/// or above 0x7f ([`special_mask`]), 8 bytes at a time.
#[inline]
fn first_special(bytes: &[u8]) -> Option<usize> {
    first_flagged(bytes, special_mask)
}

/// The index of the first byte of `bytes` whose high bit `mask` flags, 8 bytes at a time
/// (`mask`'s lowest flag must be exact); a last partial word is read again overlapping
/// the one before (its first bytes were unflagged already), or padded with spaces (which
/// no mask flags) when `bytes` is shorter than 8. THE word-at-a-time scanner: strings to
/// copy ([`write_c_string`], [`write_text`]) and strings to escape ([`write_str`]) use it.
#[inline]
fn first_flagged(bytes: &[u8], mask: impl Fn(u64) -> u64) -> Option<usize> {
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let flags = mask(u64::from_le_bytes(word));
        if flags != 0 {
            return Some(at + (flags.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let rest = words.remainder();
    if rest.is_empty() {
        return None;
    }
    let (start, word) = match bytes.last_chunk::<8>() {
        Some(last) => (bytes.len() - 8, u64::from_le_bytes(*last)),
        None => {
            let mut word = [b' '; 8];
            for (w, &b) in word.iter_mut().zip(rest) {
                *w = b;
            }
            (at, u64::from_le_bytes(word))
        }
    };
    let flags = mask(word);
    (flags != 0).then(|| start + (flags.trailing_zeros() / 8) as usize)
}

/// Bytes `1` in every byte lane.
const ONES: u64 = u64::MAX / 255;
/// The high bit of every byte lane.
const HIGH: u64 = ONES * 0x80;

/// The high bit of each byte of `word` that JSON must escape: below 0x20, `"` or `\`.
/// Bytes above a flagged one may be flagged too (borrows), but the lowest flag is exact.
#[inline]
fn escape_mask(word: u64) -> u64 {
    let zero = |v: u64| v.wrapping_sub(ONES) & !v;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word;
    (below_space | zero(word ^ (ONES * u64::from(b'"'))) | zero(word ^ (ONES * u64::from(b'\\'))))
        & HIGH
}

/// [`escape_mask`] plus the bytes above 0x7f (not plain ASCII).
#[inline]
fn special_mask(word: u64) -> u64 {
    escape_mask(word) | (word & HIGH)
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
    time: TimeCache,
    /// Buffers of the EventHeader writer.
    eh: eventheader::json::Scratch,
}

impl LineWriter {
    /// A writer with these options.
    pub fn new(opts: LineOptions) -> Self {
        LineWriter {
            opts,
            time: TimeCache::default(),
            eh: eventheader::json::Scratch::default(),
        }
    }

    fn endian(&self) -> Endian {
        if self.opts.big_endian {
            Endian::Big
        } else {
            Endian::Little
        }
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
        write_ids(out, meta.cpu, meta.pid, meta.tid);
        if let Some(tp) = eventheader::detect(format, meta.event) {
            self.write_eventheader(out, common, raw, &tp);
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
        let common = self.start_line(out, stamp.time_unix_ns, format, raw);
        // The prepared head ends with `"cpu":`.
        prepared.head.write(out);
        write_ids(out, stamp.cpu, stamp.pid, stamp.tid);
        if let Some(tp) = prepared.eventheader() {
            self.write_eventheader(out, common, raw, &tp);
            return;
        }
        let mut failed = false;
        if self.opts.include_common {
            failed |= write_steps(out, COMMON_OPEN, &prepared.common, raw, endian);
        }
        failed |= write_steps(out, FIELDS_OPEN, &prepared.fields, raw, endian);
        end_line(out, failed, common, &format.fields, raw, endian);
    }

    /// The rest of an EventHeader event's line after `"tid"`: `common` (when asked
    /// for; fields that fail are `null`, without an `errors` entry), the EventHeader
    /// keys from `raw[8..]` ([`eventheader::json::write_event`]), `}` and the newline.
    fn write_eventheader(
        &mut self,
        out: &mut Vec<u8>,
        common: &[Field],
        raw: &[u8],
        tp: &TracepointName<'_>,
    ) {
        if !common.is_empty() {
            out.extend_from_slice(COMMON_OPEN);
            write_fields(out, common, raw, self.endian());
        }
        eventheader::json::write_event(out, &mut self.eh, tp, raw.get(8..).unwrap_or_default());
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
        let common: &[Field] = if self.opts.include_common {
            &format.common_fields
        } else {
            &[]
        };
        out.reserve(RESERVE_FIXED + 24 * (common.len() + format.fields.len()) + raw.len());
        self.time.write(out, time_unix_ns);
        common
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

/// [`write_fields`] with prepared `steps` for `fields` (the same length), including the
/// object's opening (`open`, in the first step's key).
fn write_steps(out: &mut Vec<u8>, open: &[u8], steps: &[Step], raw: &[u8], endian: Endian) -> bool {
    if steps.is_empty() {
        out.extend_from_slice(open);
    }
    let big = endian == Endian::Big;
    let mut failed = false;
    for step in steps {
        step.key.write(out);
        if !step.op.write(out, raw, big) {
            failed |= write_value(out, &step.plan.read(raw, endian));
        }
    }
    out.push(b'}');
    failed
}

/// The values of `"cpu":`, `"pid"` and `"tid"` (the `"cpu":` key is already written).
#[inline(always)]
fn write_ids(out: &mut Vec<u8>, cpu: u32, pid: u32, tid: u32) {
    write_int(out, cpu);
    out.extend_from_slice(b",\"pid\":");
    write_int(out, pid);
    out.extend_from_slice(b",\"tid\":");
    write_int(out, tid);
}

/// The end of an event line: the `errors` object if a field `failed`, then `}` and the
/// newline.
#[inline(always)]
fn end_line(
    out: &mut Vec<u8>,
    failed: bool,
    common: &[Field],
    fields: &[Field],
    raw: &[u8],
    endian: Endian,
) {
    if failed {
        write_errors(out, common, fields, raw, endian);
    }
    out.extend_from_slice(b"}\n");
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

/// Write one value; returns `true` for [`Value::Error`] (written as `null`).
fn write_value(out: &mut Vec<u8>, value: &Value<'_>) -> bool {
    match *value {
        Value::Signed(v) => write_int(out, v),
        Value::Unsigned(v) => write_int(out, v),
        Value::Str(bytes) => write_text(out, bytes),
        Value::Bytes(bytes) => write_hex(out, bytes),
        Value::IntArray(array) => write_int_array(out, array),
        Value::Error(_) => {
            out.extend_from_slice(b"null");
            return true;
        }
    }
    false
}

/// `[1,2,3]`: one loop per element type, each element read straight from the bytes.
fn write_int_array(out: &mut Vec<u8>, array: IntArray<'_>) {
    let (bytes, width, signed, endian) = array.parts();
    if !write_int_slice(out, bytes, width, signed, endian == Endian::Big) {
        // `decode` makes no other arrays; the element-by-element path stays correct.
        out.push(b'[');
        for (i, v) in array.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_value(out, &v);
        }
        out.push(b']');
    }
}

/// `[1,2,3]` for `bytes` holding `width`-byte integers; `false`, with nothing written,
/// for a width other than 1, 2, 4 or 8.
fn write_int_slice(out: &mut Vec<u8>, bytes: &[u8], width: u8, signed: bool, big: bool) -> bool {
    match (width, signed) {
        (1, false) => write_ints(out, bytes, big, u8::from_le_bytes),
        (1, true) => write_ints(out, bytes, big, i8::from_le_bytes),
        (2, false) => write_ints(out, bytes, big, u16::from_le_bytes),
        (2, true) => write_ints(out, bytes, big, i16::from_le_bytes),
        (4, false) => write_ints(out, bytes, big, u32::from_le_bytes),
        (4, true) => write_ints(out, bytes, big, i32::from_le_bytes),
        (8, false) => write_ints(out, bytes, big, u64::from_le_bytes),
        (8, true) => write_ints(out, bytes, big, i64::from_le_bytes),
        _ => return false,
    }
    true
}

/// `[e0,e1,…]` for the `N`-byte integers in `bytes` (a multiple of `N` long; a partial
/// last element is ignored), each converted by `from_le` after a byte swap if `big`.
#[inline]
fn write_ints<const N: usize, T: itoa::Integer>(
    out: &mut Vec<u8>,
    bytes: &[u8],
    big: bool,
    from_le: fn([u8; N]) -> T,
) {
    let read = |chunk: &[u8]| {
        let mut b = [0u8; N];
        b.copy_from_slice(chunk);
        if big {
            b.reverse();
        }
        from_le(b)
    };
    out.reserve(bytes.len() / N * 21 + 2);
    out.push(b'[');
    let mut chunks = bytes.chunks_exact(N);
    if let Some(first) = chunks.next() {
        write_int(out, read(first));
        for chunk in chunks {
            out.push(b',');
            write_int(out, read(chunk));
        }
    }
    out.push(b']');
}

/// A number: itoa's digits.
#[inline]
pub(crate) fn write_int(out: &mut Vec<u8>, v: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// `"key":`
pub(crate) fn write_key(out: &mut Vec<u8>, key: &str) {
    write_str(out, key);
    out.push(b':');
}

/// A JSON string from valid UTF-8. Strings needing no escape (the usual case, found 8
/// bytes at a time) are copied; others go through serde_json's escaper (RFC 8259: `"`,
/// `\`, and the C0 controls as `\n`-style or `\u00XX` escapes).
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    if first_flagged(s.as_bytes(), escape_mask).is_some() {
        write_escaped(out, s);
    } else {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }
}

/// serde_json's escaper, out of line (inlined, it ran 30% slower in the string-heavy bench).
#[inline(never)]
fn write_escaped(out: &mut Vec<u8>, s: &str) {
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// A JSON string from bytes that should be UTF-8: each maximal invalid sequence becomes
/// U+FFFD (the `String::from_utf8_lossy` rule), without allocating. Plain ASCII needing
/// no escape is copied after one scan; other text is validated, and only invalid text
/// takes the piecewise path.
pub(crate) fn write_text(out: &mut Vec<u8>, bytes: &[u8]) {
    if first_special(bytes).is_none() {
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
    } else if let Ok(s) = std::str::from_utf8(bytes) {
        write_str(out, s);
    } else {
        out.push(b'"');
        for chunk in bytes.utf8_chunks() {
            write_str_contents(out, chunk.valid());
            if !chunk.invalid().is_empty() {
                out.extend_from_slice("\u{FFFD}".as_bytes());
            }
        }
        out.push(b'"');
    }
}

/// The escaped contents of `s` without the quotes (rare paths: invalid UTF-8, messages).
fn write_str_contents(out: &mut Vec<u8>, s: &str) {
    let mark = out.len();
    write_str(out, s);
    out.pop();
    out.remove(mark);
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Bytes as a lowercase hex JSON string (`"0aff"`).
pub(crate) fn write_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len() * 2 + 2);
    out.push(b'"');
    for &b in bytes {
        out.extend_from_slice(&[HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
    }
    out.push(b'"');
}

/// `fmt::Write` into a JSON string body (escaping), for `Display` messages.
pub(crate) struct Escaped<'a>(pub(crate) &'a mut Vec<u8>);

impl fmt::Write for Escaped<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        write_str_contents(self.0, s);
        Ok(())
    }
}

/// The start of every line, `{"time":"YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ"`, with the
/// date-time part of the last second seen.
///
/// The civil-date conversion is humantime's (`format_rfc3339_seconds`, no allocation; it
/// takes a `SystemTime`, which `UNIX_EPOCH + Duration` builds without a clock read). It
/// runs once per distinct second; per record, itoa writes the 9 nanosecond digits into
/// the cached text, which is then appended as one fixed-size copy.
#[derive(Debug)]
struct TimeCache {
    /// The second `line` is for, if any.
    secs: Option<u64>,
    /// `{"time":"YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ"`.
    line: [u8; TIME_LINE],
}

/// Length of `{"time":"YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ"`.
const TIME_LINE: usize = 40;
/// Where the date-time starts in [`TimeCache::line`] (after `{"time":"`).
const TIME_AT: usize = 9;

impl Default for TimeCache {
    fn default() -> Self {
        let mut line = [b'0'; TIME_LINE];
        line[..TIME_AT].copy_from_slice(b"{\"time\":\"");
        line[TIME_LINE - 2..].copy_from_slice(b"Z\"");
        TimeCache { secs: None, line }
    }
}

impl TimeCache {
    /// Write `{"time":"…Z"` for `time_unix_ns`, or `{"time":null`.
    #[inline]
    fn write(&mut self, out: &mut Vec<u8>, time_unix_ns: Option<u64>) {
        let Some(ns) = time_unix_ns else {
            out.extend_from_slice(b"{\"time\":null");
            return;
        };
        let (secs, nanos) = (ns / 1_000_000_000, ns % 1_000_000_000);
        if self.secs != Some(secs) && !self.refresh(secs) {
            out.extend_from_slice(b"{\"time\":null");
            return;
        }
        // `1nnnnnnnnn`: always 10 digits, the last 9 zero-padded nanoseconds; the leading
        // `1` lands on the decimal point and is put back.
        let mut digits = itoa::Buffer::new();
        if let Ok(digits) = <&[u8; 10]>::try_from(digits.format(nanos + 1_000_000_000).as_bytes()) {
            self.line[TIME_AT + 19..TIME_AT + 29].copy_from_slice(digits);
            self.line[TIME_AT + 19] = b'.';
        }
        out.extend_from_slice(&self.line);
    }

    /// Format the prefix for `secs`; `false` if humantime refuses (past year 9999, which
    /// a `u64` of nanoseconds cannot reach: it ends in 2554).
    fn refresh(&mut self, secs: u64) -> bool {
        let Some(time) = SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(secs)) else {
            return false;
        };
        let mut buf = [0u8; 32];
        let mut cursor = &mut buf[..];
        let stamp = humantime::format_rfc3339_seconds(time);
        if std::io::Write::write_fmt(&mut cursor, format_args!("{stamp}")).is_err() {
            return false;
        }
        let written = 32 - cursor.len();
        // `YYYY-MM-DDTHH:MM:SSZ`: keep all but the `Z`, add the decimal point.
        if written != 20 || buf[19] != b'Z' {
            return false;
        }
        self.line[TIME_AT..TIME_AT + 19].copy_from_slice(&buf[..19]);
        self.line[TIME_AT + 19] = b'.';
        self.secs = Some(secs);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(ns: Option<u64>) -> String {
        let mut out = Vec::new();
        TimeCache::default().write(&mut out, ns);
        let line = String::from_utf8(out).unwrap();
        line.strip_prefix("{\"time\":").unwrap().to_string()
    }

    #[test]
    fn time_format() {
        assert_eq!(time(None), "null");
        assert_eq!(time(Some(0)), "\"1970-01-01T00:00:00.000000000Z\"");
        assert_eq!(
            time(Some(1_795_345_200_123_456_789)),
            "\"2026-11-22T11:00:00.123456789Z\""
        );
        assert_eq!(
            time(Some(951_825_600_000_000_001)),
            "\"2000-02-29T12:00:00.000000001Z\""
        );
        assert_eq!(time(Some(u64::MAX)), "\"2554-07-21T23:34:33.709551615Z\"");
    }

    #[test]
    fn time_cache_follows_the_second() {
        let mut cache = TimeCache::default();
        let mut out = Vec::new();
        for ns in [
            1_999_999_999u64,
            2_000_000_000,
            1_000_000_000,
            2_000_000_005,
        ] {
            cache.write(&mut out, Some(ns));
            out.push(b' ');
        }
        assert_eq!(
            String::from_utf8(out).unwrap().replace("{\"time\":", ""),
            "\"1970-01-01T00:00:01.999999999Z\" \"1970-01-01T00:00:02.000000000Z\" \
             \"1970-01-01T00:00:01.000000000Z\" \"1970-01-01T00:00:02.000000005Z\" "
        );
    }

    #[test]
    fn escapes_match_serde_json() {
        for b in 0u8..=0x7f {
            let s = [b'a', b, b'z'];
            let s = std::str::from_utf8(&s).unwrap();
            let mut out = Vec::new();
            write_str(&mut out, s);
            assert_eq!(out, serde_json::to_vec(s).unwrap(), "byte {b:#x}");
        }
        let mut out = Vec::new();
        write_str(&mut out, "é\u{2028}😀");
        assert_eq!(out, serde_json::to_vec("é\u{2028}😀").unwrap());
    }

    #[test]
    fn word_test_agrees_with_the_table() {
        // Every pair of byte values at every pair of adjacent positions (borrows between
        // bytes are where such bit tricks go wrong), the other bytes plain or high.
        for filler in [b'a', 0x80, 0xff] {
            for pos in 0..7 {
                for pair in 0..=u16::MAX {
                    let mut word = [filler; 8];
                    word[pos..pos + 2].copy_from_slice(&pair.to_le_bytes());
                    let expected = word
                        .iter()
                        .position(|&b| b < 0x20 || b == b'"' || b == b'\\');
                    let flags = escape_mask(u64::from_le_bytes(word));
                    let lowest = (flags != 0).then(|| (flags.trailing_zeros() / 8) as usize);
                    assert_eq!(lowest, expected, "{word:?}");
                }
            }
        }
    }

    #[test]
    fn first_special_agrees_with_a_byte_loop() {
        let special = |b: u8| b < 0x20 || b == b'"' || b == b'\\' || b >= 0x80;
        // Every length up to 3 words, every position, every byte value class.
        for len in 0..24 {
            for pos in 0..len {
                for b in [0u8, 1, 0x1f, b'"', b'\\', 0x7f, 0x80, 0xff, b' ', b'a'] {
                    for filler in [b'a', b'~', b' '] {
                        let mut bytes = vec![filler; len];
                        bytes[pos] = b;
                        if pos + 1 < len {
                            bytes[pos + 1] = 0; // something special after it, too
                        }
                        let expected = bytes.iter().position(|&b| special(b));
                        assert_eq!(first_special(&bytes), expected, "{bytes:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn lossy_rule_matches_std() {
        let cases: [&[u8]; 6] = [
            b"\xff",
            b"a\xf0\x9f\x98b",
            b"\xe2\x82",
            b"\xc0\xaf\xed\xa0\x80x",
            b"ok\xf4\x90\x80\x80",
            b"\x80\x80\x80",
        ];
        for bytes in cases {
            let mut out = Vec::new();
            write_text(&mut out, bytes);
            let expected = serde_json::to_vec(&String::from_utf8_lossy(bytes)).unwrap();
            assert_eq!(out, expected, "{bytes:?}");
        }
    }
}
