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

use crate::decode::{Endian, Value, decode_field};
use crate::schema::{EventFormat, Field};

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
/// `,"system":"…","event":"…",("format_id":"…",)` and each field's `"name":` key. Build
/// it once per attached event; [`LineWriter::write_prepared`] then writes its lines.
#[derive(Debug, Clone)]
pub struct PreparedFormat {
    format: EventFormat,
    /// See [`write_head`].
    head: Vec<u8>,
    /// `"name":` of the common fields, then of the fields; `,"name":` for all but the
    /// first of each list.
    keys: Vec<Box<[u8]>>,
}

impl PreparedFormat {
    /// Prepare `format` of `system:event` (for multi-format events `event` is the base
    /// name and `format_id` the hex suffix, as in [`RecordMeta`]).
    pub fn new(format: &EventFormat, system: &str, event: &str, format_id: Option<&str>) -> Self {
        let mut head = Vec::new();
        write_head(&mut head, system, event, format_id);
        let keys = prepared_keys(&format.common_fields)
            .chain(prepared_keys(&format.fields))
            .collect();
        PreparedFormat {
            format: format.clone(),
            head,
            keys,
        }
    }

    /// The format this was prepared from.
    pub fn format(&self) -> &EventFormat {
        &self.format
    }
}

/// `"name":` for each of `fields`, with a leading `,` for all but the first.
fn prepared_keys(fields: &[Field]) -> impl Iterator<Item = Box<[u8]>> + '_ {
    fields.iter().enumerate().map(|(i, field)| {
        let mut key = Vec::with_capacity(field.name.len() + 4);
        if i > 0 {
            key.push(b',');
        }
        write_key(&mut key, &field.name);
        key.into_boxed_slice()
    })
}

/// Where an event line's system/event/format_id part comes from.
#[derive(Clone, Copy)]
enum Head<'a> {
    /// Rendered per record from the names.
    Meta(&'a RecordMeta<'a>),
    /// Rendered once ([`PreparedFormat`]).
    Prepared(&'a [u8]),
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
}

impl LineWriter {
    /// A writer with these options.
    pub fn new(opts: LineOptions) -> Self {
        LineWriter {
            opts,
            time: TimeCache::default(),
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
        let stamp = RecordStamp {
            time_unix_ns: meta.time_unix_ns,
            cpu: meta.cpu,
            pid: meta.pid,
            tid: meta.tid,
        };
        self.write_event(out, &stamp, Head::Meta(meta), format, None, raw);
    }

    /// Append one event line for `raw` like [`LineWriter::write_record`] (byte for byte
    /// the same line), with the names and keys rendered once in `prepared`.
    pub fn write_prepared(
        &mut self,
        out: &mut Vec<u8>,
        stamp: &RecordStamp,
        prepared: &PreparedFormat,
        raw: &[u8],
    ) {
        self.write_event(
            out,
            stamp,
            Head::Prepared(&prepared.head),
            &prepared.format,
            Some(&prepared.keys),
            raw,
        );
    }

    /// The one event-line writer behind [`LineWriter::write_record`] and
    /// [`LineWriter::write_prepared`]. `keys`, if given, are [`PreparedFormat::keys`].
    fn write_event(
        &mut self,
        out: &mut Vec<u8>,
        stamp: &RecordStamp,
        head: Head<'_>,
        format: &EventFormat,
        keys: Option<&[Box<[u8]>]>,
        raw: &[u8],
    ) {
        let endian = if self.opts.big_endian {
            Endian::Big
        } else {
            Endian::Little
        };
        let common: &[Field] = if self.opts.include_common {
            &format.common_fields
        } else {
            &[]
        };
        // One capacity check for the usual line: the fixed parts, ~24 bytes per field
        // and the raw bytes (their text is mostly no longer than they are).
        out.reserve(RESERVE_FIXED + 24 * (common.len() + format.fields.len()) + raw.len());
        out.extend_from_slice(b"{\"time\":");
        self.time.write(out, stamp.time_unix_ns);
        match head {
            Head::Prepared(bytes) => out.extend_from_slice(bytes),
            Head::Meta(meta) => write_head(out, meta.system, meta.event, meta.format_id),
        }
        out.extend_from_slice(b"\"cpu\":");
        write_int(out, stamp.cpu);
        out.extend_from_slice(b",\"pid\":");
        write_int(out, stamp.pid);
        out.extend_from_slice(b",\"tid\":");
        write_int(out, stamp.tid);
        // Prepared keys: the common fields' first, then the fields'.
        let (common_keys, field_keys) = match keys {
            Some(k) if k.len() == format.common_fields.len() + format.fields.len() => {
                let (c, f) = k.split_at(format.common_fields.len());
                (Some(c), Some(f))
            }
            _ => (None, None),
        };
        let mut failed = false;
        if self.opts.include_common {
            out.extend_from_slice(b",\"common\":");
            failed |= write_fields(out, common, common_keys, raw, endian);
        }
        out.extend_from_slice(b",\"fields\":");
        failed |= write_fields(out, &format.fields, field_keys, raw, endian);
        if failed {
            // Rare: decode again (cheap, allocation-free) to write the messages.
            out.extend_from_slice(b",\"errors\":{");
            let mut first = true;
            for field in common.iter().chain(&format.fields) {
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
        out.extend_from_slice(b"}\n");
    }

    /// Append a `{"uevrec":"lost",...}` line: the kernel dropped `lost` records on `cpu`.
    pub fn write_lost(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        cpu: u32,
        lost: u64,
    ) {
        out.extend_from_slice(b"{\"time\":");
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
        out.extend_from_slice(b"{\"time\":");
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

/// Write `{"name":value,...}` for `fields`; returns whether any field failed to decode.
/// `keys`, if given, hold each field's `"name":` (with a leading `,` after the first).
fn write_fields(
    out: &mut Vec<u8>,
    fields: &[Field],
    keys: Option<&[Box<[u8]>]>,
    raw: &[u8],
    endian: Endian,
) -> bool {
    let mut failed = false;
    out.push(b'{');
    for (i, field) in fields.iter().enumerate() {
        match keys.and_then(|k| k.get(i)) {
            Some(key) => out.extend_from_slice(key),
            None => {
                if i > 0 {
                    out.push(b',');
                }
                write_key(out, &field.name);
            }
        }
        failed |= write_value(out, &decode_field(field, raw, endian));
    }
    out.push(b'}');
    failed
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
        Value::IntArray(array) => {
            out.push(b'[');
            for (i, v) in array.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, &v);
            }
            out.push(b']');
        }
        Value::Error(_) => {
            out.extend_from_slice(b"null");
            return true;
        }
    }
    false
}

fn write_int(out: &mut Vec<u8>, v: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// `"key":`
fn write_key(out: &mut Vec<u8>, key: &str) {
    write_str(out, key);
    out.push(b':');
}

/// A JSON string from valid UTF-8. Strings needing no escape (the usual case, found 8
/// bytes at a time) are copied; others go through serde_json's escaper (RFC 8259: `"`,
/// `\`, and the C0 controls as `\n`-style or `\u00XX` escapes).
fn write_str(out: &mut Vec<u8>, s: &str) {
    write_scanned_str(out, s, scan(s.as_bytes()));
}

/// [`write_str`] when `s` was scanned already.
fn write_scanned_str(out: &mut Vec<u8>, s: &str, found: Scan) {
    if found.escape {
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
/// U+FFFD (the `String::from_utf8_lossy` rule), without allocating. Clean ASCII is copied
/// after one scan; other text is validated, and only invalid text takes the piecewise path.
fn write_text(out: &mut Vec<u8>, bytes: &[u8]) {
    let found = scan(bytes);
    if found.ascii && !found.escape {
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
    } else if let Ok(s) = std::str::from_utf8(bytes) {
        write_scanned_str(out, s, found);
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
fn write_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len() * 2 + 2);
    out.push(b'"');
    for &b in bytes {
        out.extend_from_slice(&[HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
    }
    out.push(b'"');
}

/// What [`scan`] found.
#[derive(Debug, Clone, Copy)]
struct Scan {
    /// Some byte is `"`, `\` or below 0x20.
    escape: bool,
    /// All bytes are below 0x80.
    ascii: bool,
}

/// Look at `bytes` 8 at a time (the tail padded with spaces, built in registers).
#[inline]
fn scan(bytes: &[u8]) -> Scan {
    let (mut escape, mut high) = (false, 0u64);
    let mut words = bytes.chunks_exact(8);
    for chunk in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        high |= word;
        escape |= needs_escape(word);
    }
    let mut word = u64::from_le_bytes([b' '; 8]);
    for (i, &b) in words.remainder().iter().enumerate() {
        let shift = 8 * i;
        word = (word & !(0xff << shift)) | (u64::from(b) << shift);
    }
    high |= word;
    escape |= needs_escape(word);
    Scan {
        escape,
        ascii: high & (u64::MAX / 255 * 0x80) == 0,
    }
}

/// Whether any byte of `word` is below 0x20, `"` or `\` (exact as a yes/no answer: the
/// "has a byte less than n" and "has a zero byte" bit tricks).
#[inline]
fn needs_escape(word: u64) -> bool {
    const ONES: u64 = u64::MAX / 255;
    const HIGH: u64 = ONES * 0x80;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH != 0;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGH != 0;
    // `|`, not `||`: no branches, escapes in text are irregular.
    below_space
        | has_zero(word ^ (ONES * u64::from(b'"')))
        | has_zero(word ^ (ONES * u64::from(b'\\')))
}

/// `fmt::Write` into a JSON string body (escaping), for `Display` messages.
struct Escaped<'a>(&'a mut Vec<u8>);

impl fmt::Write for Escaped<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        write_str_contents(self.0, s);
        Ok(())
    }
}

/// The formatted `YYYY-MM-DDTHH:MM:SS.` of the last second seen.
///
/// The civil-date conversion is humantime's (`format_rfc3339_seconds`, no allocation; it
/// takes a `SystemTime`, which `UNIX_EPOCH + Duration` builds without a clock read). It
/// runs once per distinct second; the 9 nanosecond digits are written per record.
#[derive(Debug, Default)]
struct TimeCache {
    /// The second `prefix` is for, if any.
    secs: Option<u64>,
    /// `YYYY-MM-DDTHH:MM:SS.`
    prefix: [u8; 20],
}

impl TimeCache {
    /// Write `"…Z"` for `time_unix_ns`, or `null`.
    fn write(&mut self, out: &mut Vec<u8>, time_unix_ns: Option<u64>) {
        let Some(ns) = time_unix_ns else {
            out.extend_from_slice(b"null");
            return;
        };
        let (secs, nanos) = (ns / 1_000_000_000, ns % 1_000_000_000);
        if self.secs != Some(secs) && !self.refresh(secs) {
            out.extend_from_slice(b"null");
            return;
        }
        let mut digits = [b'0'; 9];
        let mut n = nanos;
        for d in digits.iter_mut().rev() {
            *d = b'0' + (n % 10) as u8;
            n /= 10;
        }
        out.push(b'"');
        out.extend_from_slice(&self.prefix);
        out.extend_from_slice(&digits);
        out.extend_from_slice(b"Z\"");
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
        self.prefix[..19].copy_from_slice(&buf[..19]);
        self.prefix[19] = b'.';
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
        String::from_utf8(out).unwrap()
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
            String::from_utf8(out).unwrap(),
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
                    let expected = word.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\');
                    assert_eq!(needs_escape(u64::from_le_bytes(word)), expected, "{word:?}");
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
