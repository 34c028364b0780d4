//! OTLP/JSON pieces written straight into the output: attribute lists with unique keys
//! ([`Attrs`]), typed `AnyValue`s, 64-bit integers as decimal strings, and the fixed
//! parts of a `LogRecord`. The OTLP/JSON rules (the protobuf JSON mapping with the
//! OTLP exceptions): lowerCamelCase keys, trace and span ids as lowercase hex, 64-bit
//! integers as decimal strings, enums as integers. Fields are written as
//! `opentelemetry-proto`'s serde mapping writes them, default values included (e.g.
//! `"droppedAttributesCount":0`), so its types read every line back.

use std::fmt;

use super::fields::{Text, dedupe, write_message};
use crate::json_line::{write_hex, write_int, write_str};

/// An attribute array being written (`[` … `]`): keys renamed `key#2`, … when taken
/// ([`dedupe`]), so that they are unique as OTLP requires.
pub(crate) struct Attrs<'a> {
    out: &'a mut Vec<u8>,
    keys: &'a mut Vec<Text>,
    /// A bit per key written ([`key_bit`]): a key whose bit is clear is not taken, and
    /// needs no comparisons.
    seen: u128,
}

impl<'a> Attrs<'a> {
    /// Open the array on `out`; `keys` is a reusable buffer.
    pub(crate) fn open(out: &'a mut Vec<u8>, keys: &'a mut Vec<Text>) -> Self {
        keys.clear();
        out.push(b'[');
        Attrs { out, keys, seen: 0 }
    }

    /// Add the attribute whose key is the JSON string `key` and whose `AnyValue` `value`
    /// writes.
    pub(crate) fn add(&mut self, key: &[u8], value: impl FnOnce(&mut Vec<u8>)) {
        self.add_with(|out| out.extend_from_slice(key), value);
    }

    /// [`Attrs::add`] with the key `name`.
    pub(crate) fn add_named(&mut self, name: &str, value: impl FnOnce(&mut Vec<u8>)) {
        self.add_with(|out| write_str(out, name), value);
    }

    fn add_with(&mut self, key: impl FnOnce(&mut Vec<u8>), value: impl FnOnce(&mut Vec<u8>)) {
        if !self.keys.is_empty() {
            self.out.push(b',');
        }
        self.out.extend_from_slice(b"{\"key\":");
        let start = self.out.len();
        key(self.out);
        let mut bit = key_bit(&self.out[start..]);
        let key = if self.seen & bit == 0 {
            Text::of(self.out, start)
        } else {
            let key = dedupe(self.out, self.keys, start);
            bit = key_bit(key.get(self.out));
            key
        };
        self.seen |= bit;
        self.keys.push(key);
        self.out.extend_from_slice(b",\"value\":");
        value(self.out);
        self.out.push(b'}');
    }

    /// Close the array.
    pub(crate) fn close(self) {
        self.out.push(b']');
    }
}

/// The bit of a key in [`Attrs::seen`]: from its length and last letter.
fn key_bit(key: &[u8]) -> u128 {
    let last = key.len().checked_sub(2).and_then(|i| key.get(i)).copied();
    1 << ((key.len() * 7 + usize::from(last.unwrap_or(0))) % 128)
}

/// `{"intValue":"…"}`.
pub(crate) fn int_any(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(b"{\"intValue\":\"");
    write_int(out, v);
    out.extend_from_slice(b"\"}");
}

/// An unsigned integer: `intValue` when it fits `int64`, else `stringValue` of its
/// digits (OTLP has no unsigned 64-bit type).
pub(crate) fn unsigned_any(out: &mut Vec<u8>, v: u64) {
    match i64::try_from(v) {
        Ok(i) => int_any(out, i),
        Err(_) => {
            out.extend_from_slice(b"{\"stringValue\":\"");
            write_int(out, v);
            out.extend_from_slice(b"\"}");
        }
    }
}

/// `{"stringValue":…}` of a `Display` text.
pub(crate) fn message_any(out: &mut Vec<u8>, message: &dyn fmt::Display) {
    out.extend_from_slice(b"{\"stringValue\":");
    write_message(out, message);
    out.push(b'}');
}

/// A 64-bit integer as OTLP/JSON writes it: a decimal string.
pub(crate) fn u64_string(out: &mut Vec<u8>, v: u64) {
    out.push(b'"');
    write_int(out, v);
    out.push(b'"');
}

/// A trace or span id (at most 16 bytes): lowercase hex, `""` when there is none.
pub(crate) fn id(out: &mut Vec<u8>, id: Option<&[u8]>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let id = id.unwrap_or_default();
    let mut text = [b'"'; 34];
    let Some(digits) = text.get_mut(1..1 + 2 * id.len()) else {
        return write_hex(out, id);
    };
    for (pair, &b) in digits.chunks_exact_mut(2).zip(id) {
        pair[0] = HEX[usize::from(b >> 4)];
        pair[1] = HEX[usize::from(b & 15)];
    }
    out.extend_from_slice(&text[..2 + 2 * id.len()]);
}

/// The fixed-size parts of a `LogRecord`.
#[derive(Debug, Default)]
pub(crate) struct LogHead<'a> {
    pub time: u64,
    pub observed: u64,
    pub severity: i32,
    pub trace_id: Option<&'a [u8]>,
    pub span_id: Option<&'a [u8]>,
}

/// A `LogRecord`: `head`, then what the closures write: `severity_text` (a JSON string),
/// `body` (an `AnyValue` or `null`), the attributes and `event_name` (a JSON string).
pub(crate) fn log_record(
    out: &mut Vec<u8>,
    keys: &mut Vec<Text>,
    head: &LogHead<'_>,
    severity_text: impl FnOnce(&mut Vec<u8>),
    body: impl FnOnce(&mut Vec<u8>),
    attributes: impl FnOnce(&mut Attrs<'_>),
    event_name: impl FnOnce(&mut Vec<u8>),
) {
    out.extend_from_slice(b"{\"timeUnixNano\":");
    u64_string(out, head.time);
    out.extend_from_slice(b",\"observedTimeUnixNano\":");
    u64_string(out, head.observed);
    out.extend_from_slice(b",\"severityNumber\":");
    write_int(out, head.severity);
    out.extend_from_slice(b",\"severityText\":");
    severity_text(out);
    out.extend_from_slice(b",\"body\":");
    body(out);
    out.extend_from_slice(b",\"attributes\":");
    let mut attrs = Attrs::open(out, keys);
    attributes(&mut attrs);
    attrs.close();
    out.extend_from_slice(b",\"droppedAttributesCount\":0,\"flags\":0,\"traceId\":");
    id(out, head.trace_id);
    out.extend_from_slice(b",\"spanId\":");
    id(out, head.span_id);
    out.extend_from_slice(b",\"eventName\":");
    event_name(out);
    out.push(b'}');
}
