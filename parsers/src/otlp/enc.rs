//! The seam between the mapping and the encoding: the mapping (`mod.rs`,
//! `common_schema.rs`) decides what each record is (which `LogRecord` or `Span`, which
//! attributes in which order, which resource and scope) once, and writes it through an
//! [`Enc`]: [`Json`](super::json::Json) (OTLP/JSON, `json.rs`) or
//! [`Proto`](super::proto::Proto) (protobuf, `proto.rs`), each implemented there. The
//! writers are generic over it, so each encoding is compiled into its own copy of the
//! mapping with no run-time dispatch per value.
//!
//! The field tree ([`Fields`]) holds JSON text either way (keys and scalars as the
//! JSON-lines writers write them); the protobuf encoder reads its strings back
//! ([`super::wire::unescape`]) and its numbers. The record's vocabulary ([`Str`],
//! [`Body`], [`LogHead`], [`SpanHead`]) and attribute lists ([`Attrs`]) are here too, below
//! both encodings.

use std::fmt;
use std::marker::PhantomData;

use super::fields::{Fields, Text, dedupe};
use super::wire::{self, field};
use crate::json::write_str;

/// A string of a record (severity text, event name, span name, status message).
#[derive(Clone, Copy)]
pub(crate) enum Str<'a> {
    /// A JSON string (quotes included) needing no escape on reading back, e.g.
    /// `b"\"WARN\""`.
    Json(&'a [u8]),
    /// A name (escaped in JSON).
    Name(&'a str),
    /// Bytes that should be UTF-8 (invalid sequences become U+FFFD).
    Text(&'a [u8]),
    /// A field's string (`stringValue`), or `""` without one.
    Node(&'a Fields, Option<usize>),
}

/// A log record's body.
#[derive(Clone, Copy)]
pub(crate) enum Body<'a> {
    /// None.
    Absent,
    /// A field's value.
    Node(&'a Fields, usize),
    /// A string.
    Message(&'a dyn fmt::Display),
    /// `AnyValue` contents already in the writer's encoding.
    Encoded(&'a [u8]),
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

/// The parts of a span besides its attributes (the Common Schema mapping's result).
pub(crate) struct SpanHead<'a> {
    pub fields: &'a Fields,
    pub trace_id: Option<&'a [u8]>,
    pub span_id: Option<&'a [u8]>,
    pub parent: Option<&'a [u8]>,
    /// The node of the name.
    pub name: Option<usize>,
    pub kind: i64,
    pub start: u64,
    pub end: u64,
    /// The node of the exporter's `links` text (checked to be a list of links).
    pub links: Option<usize>,
    /// `Some` (the node of the message, if any) for a failed span: status error.
    pub error: Option<Option<usize>>,
}

/// OTLP `STATUS_CODE_ERROR`.
pub(crate) const STATUS_ERROR: i32 = 2;

/// An encoding of OTLP requests.
pub(crate) trait Enc: Sized {
    /// Whether this is protobuf.
    const PROTO: bool;
    /// The scope of uevrec's own records, as [`Enc::scope`] writes it.
    const UEVREC_SCOPE: &'static [u8];

    /// A scope named `name` (a group's scope bytes).
    fn scope(out: &mut Vec<u8>, name: &str);
    /// The resource attribute `key` = `value` (`AnyValue` as the closure writes it) after
    /// those in `out`.
    fn resource_attr(out: &mut Vec<u8>, key: &str, value: impl FnOnce(&mut Vec<u8>));
    /// Resource attributes `more` (what [`Enc::resource_attr`] wrote) after those in `out`.
    fn append_attrs(out: &mut Vec<u8>, more: &[u8]) {
        out.extend_from_slice(more);
    }

    /// `AnyValue`s.
    fn int_any(out: &mut Vec<u8>, v: i64);
    fn unsigned_any(out: &mut Vec<u8>, v: u64);
    fn message_any(out: &mut Vec<u8>, message: &dyn fmt::Display);
    fn node_any(out: &mut Vec<u8>, f: &Fields, i: usize);
    /// A string `AnyValue` whose JSON form is `json_any` and whose text is `raw`.
    fn cached_str_any(out: &mut Vec<u8>, json_any: &[u8], raw: &[u8]);

    /// A `LogRecord`: `head`, then `severity_text`, `body`, the attributes `attributes`
    /// adds and `event_name`.
    fn log_record(
        out: &mut Vec<u8>,
        keys: &mut Vec<Text>,
        head: &LogHead<'_>,
        severity_text: Str<'_>,
        body: Body<'_>,
        attributes: impl FnOnce(&mut Attrs<'_, Self>),
        event_name: Str<'_>,
    );

    /// A `Span`: `head` and the attributes `attributes` adds.
    fn span(
        out: &mut Vec<u8>,
        keys: &mut Vec<Text>,
        head: &SpanHead<'_>,
        attributes: impl FnOnce(&mut Attrs<'_, Self>),
    );
}

/// An attribute list being written (JSON: `[` … `]`; protobuf: repeated `KeyValue`
/// fields numbered `field`): keys renamed `key#2`, … when taken ([`dedupe`]), so that
/// they are unique as OTLP requires.
pub(crate) struct Attrs<'a, E> {
    pub(crate) out: &'a mut Vec<u8>,
    keys: &'a mut Vec<Text>,
    /// A bit per key written ([`key_bit`]): a key whose bit is clear is not taken, and
    /// needs no comparisons.
    seen: u128,
    /// The field number of the `KeyValue`s (protobuf).
    field: u32,
    encoding: PhantomData<E>,
}

impl<'a, E: Enc> Attrs<'a, E> {
    /// Open the list on `out` (protobuf: as fields `field`); `keys` is a reusable buffer.
    pub(crate) fn open(out: &'a mut Vec<u8>, keys: &'a mut Vec<Text>, field: u32) -> Self {
        keys.clear();
        if !E::PROTO {
            out.push(b'[');
        }
        Attrs {
            out,
            keys,
            seen: 0,
            field,
            encoding: PhantomData,
        }
    }

    /// Add the attribute whose key is the JSON string `key` and whose `AnyValue` `value`
    /// writes.
    pub(crate) fn add(&mut self, key: &[u8], value: impl FnOnce(&mut Vec<u8>)) {
        if E::PROTO {
            self.add_proto(|out| wire::unescape(out, key), value);
        } else {
            self.add_json(|out| out.extend_from_slice(key), value);
        }
    }

    /// [`Attrs::add`] with the key `name`.
    pub(crate) fn add_named(&mut self, name: &str, value: impl FnOnce(&mut Vec<u8>)) {
        if E::PROTO {
            self.add_proto(|out| out.extend_from_slice(name.as_bytes()), value);
        } else {
            self.add_json(|out| write_str(out, name), value);
        }
    }

    fn add_json(&mut self, key: impl FnOnce(&mut Vec<u8>), value: impl FnOnce(&mut Vec<u8>)) {
        if !self.keys.is_empty() {
            self.out.push(b',');
        }
        self.out.extend_from_slice(b"{\"key\":");
        let start = self.out.len();
        key(self.out);
        let mut bit = key_bit(&self.out[start..], true);
        let key = if self.seen & bit == 0 {
            Text::of(self.out, start)
        } else {
            let key = dedupe(self.out, self.keys, start, true);
            bit = key_bit(key.get(self.out), true);
            key
        };
        self.seen |= bit;
        self.keys.push(key);
        self.out.extend_from_slice(b",\"value\":");
        value(self.out);
        self.out.push(b'}');
    }

    fn add_proto(&mut self, key: impl FnOnce(&mut Vec<u8>), value: impl FnOnce(&mut Vec<u8>)) {
        let out = &mut *self.out;
        let kv = wire::open(out, self.field);
        let key_mark = wire::open(out, field::KEY);
        let start = out.len();
        key(out);
        let mut bit = key_bit(&out[start..], false);
        let mut key = if self.seen & bit == 0 {
            Text::of(out, start)
        } else {
            let key = dedupe(out, self.keys, start, false);
            bit = key_bit(key.get(out), false);
            key
        };
        self.seen |= bit;
        key = key.shifted(wire::close(out, key_mark));
        let v = wire::open(out, field::VALUE);
        value(out);
        wire::close(out, v);
        key = key.shifted(wire::close(out, kv));
        self.keys.push(key);
    }

    /// Close the list.
    pub(crate) fn close(self) {
        if !E::PROTO {
            self.out.push(b']');
        }
    }
}

/// The bit of a key in [`Attrs::seen`]: from its length and last letter (the same for a
/// key as a JSON string, `quoted`, and as text).
fn key_bit(key: &[u8], quoted: bool) -> u128 {
    let (len, last) = if quoted {
        let last = key.len().checked_sub(2).and_then(|i| key.get(i)).copied();
        (key.len(), last)
    } else {
        (key.len() + 2, key.last().copied())
    };
    1 << ((len * 7 + usize::from(last.unwrap_or(0))) % 128)
}
