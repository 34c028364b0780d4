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
    /// and explained in `errors`.
    pub fn write_record(
        &mut self,
        out: &mut Vec<u8>,
        meta: &RecordMeta<'_>,
        format: &EventFormat,
        raw: &[u8],
    ) {
        let endian = if self.opts.big_endian {
            Endian::Big
        } else {
            Endian::Little
        };
        out.extend_from_slice(b"{\"time\":");
        self.time.write(out, meta.time_unix_ns);
        out.extend_from_slice(b",\"system\":");
        write_str(out, meta.system);
        out.extend_from_slice(b",\"event\":");
        write_str(out, meta.event);
        if let Some(id) = meta.format_id {
            out.extend_from_slice(b",\"format_id\":");
            write_str(out, id);
        }
        out.extend_from_slice(b",\"cpu\":");
        write_int(out, meta.cpu);
        out.extend_from_slice(b",\"pid\":");
        write_int(out, meta.pid);
        out.extend_from_slice(b",\"tid\":");
        write_int(out, meta.tid);
        let common: &[Field] = if self.opts.include_common {
            &format.common_fields
        } else {
            &[]
        };
        let mut failed = false;
        if self.opts.include_common {
            out.extend_from_slice(b",\"common\":");
            failed |= write_fields(out, common, raw, endian);
        }
        out.extend_from_slice(b",\"fields\":");
        failed |= write_fields(out, &format.fields, raw, endian);
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
fn write_fields(out: &mut Vec<u8>, fields: &[Field], raw: &[u8], endian: Endian) -> bool {
    let mut failed = false;
    out.push(b'{');
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

/// A JSON string from valid UTF-8.
fn write_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    escape_into(out, s.as_bytes());
    out.push(b'"');
}

/// A JSON string from bytes that should be UTF-8: each maximal invalid sequence becomes
/// U+FFFD (the `String::from_utf8_lossy` rule), without allocating.
fn write_text(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    if std::str::from_utf8(bytes).is_ok() {
        escape_into(out, bytes);
    } else {
        for chunk in bytes.utf8_chunks() {
            escape_into(out, chunk.valid().as_bytes());
            if !chunk.invalid().is_empty() {
                out.extend_from_slice("\u{FFFD}".as_bytes());
            }
        }
    }
    out.push(b'"');
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

/// For each byte: 0 = copy as is, `u` = `\u00XX`, else the letter after the backslash.
/// The same escapes as serde_json (RFC 8259: `"`, `\` and the C0 controls).
const ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        table[i] = b'u';
        i += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

/// THE string escaper: append the JSON-escaped contents of UTF-8 `bytes` (no quotes).
///
/// Eight bytes at a time: a word without `"`, `\` or a control byte is copied whole (the
/// usual case), otherwise its bytes go through [`ESCAPE`] one by one.
fn escape_into(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len());
    let mut words = bytes.chunks_exact(8);
    for chunk in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        if needs_escape(u64::from_le_bytes(word)) {
            chunk.iter().for_each(|&b| escape_byte(out, b));
        } else {
            out.extend_from_slice(&word);
        }
    }
    words.remainder().iter().for_each(|&b| escape_byte(out, b));
}

/// Whether any byte of `word` is below 0x20, `"` or `\` (exact as a yes/no answer: the
/// "has a byte less than n" and "has a zero byte" bit tricks).
#[inline]
fn needs_escape(word: u64) -> bool {
    const ONES: u64 = u64::MAX / 255;
    const HIGH: u64 = ONES * 0x80;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH != 0;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGH != 0;
    below_space
        || has_zero(word ^ (ONES * u64::from(b'"')))
        || has_zero(word ^ (ONES * u64::from(b'\\')))
}

#[inline]
fn escape_byte(out: &mut Vec<u8>, b: u8) {
    match ESCAPE[usize::from(b)] {
        0 => out.push(b),
        b'u' => out.extend_from_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[usize::from(b >> 4)],
            HEX[usize::from(b & 15)],
        ]),
        letter => out.extend_from_slice(&[b'\\', letter]),
    }
}

/// `fmt::Write` into a JSON string body (escaping), for `Display` messages.
struct Escaped<'a>(&'a mut Vec<u8>);

impl fmt::Write for Escaped<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        escape_into(self.0, s.as_bytes());
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
                    let expected = word.iter().any(|&b| ESCAPE[usize::from(b)] != 0);
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
