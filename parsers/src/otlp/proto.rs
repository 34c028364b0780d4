//! The protobuf encoding ([`Proto`], the binary counterpart of `json.rs`): `LogRecord`s
//! and `Span`s written straight into the output from the wire pieces of `wire.rs`.
//!
//! Written by hand rather than through prost's generated structs: those would mean a
//! `LogRecord` with a `String` and a `Vec` per attribute built per record and dropped
//! again, the allocation and copying the direct writers exist to avoid; prost has no
//! streaming encoder for nested messages. Only what the field numbers say is hand-made;
//! the test decodes every request with `opentelemetry-proto`'s prost types.
//!
//! Proto3 rules kept (besides `wire.rs`'s): a message field present but empty is written
//! as an empty message (so it decodes as present, as the JSON `{}` does).

use std::fmt;

use super::cs_text::for_each_link;
use super::enc::{Attrs, Body, Enc, LogHead, STATUS_ERROR, SpanHead, Str};
use super::fields::{Fields, Text};
use super::wire::{
    self, bytes, close, close_or_drop, field, fixed64, lossy, message_any, open, unescape, varint,
};

/// Protobuf.
pub(crate) struct Proto;

impl Enc for Proto {
    const PROTO: bool = true;
    // InstrumentationScope { name: "uevrec" }.
    const UEVREC_SCOPE: &'static [u8] = b"\x0a\x06uevrec";

    fn scope(out: &mut Vec<u8>, name: &str) {
        wire::bytes(out, field::FIRST, name.as_bytes());
    }

    fn resource_attr(out: &mut Vec<u8>, key: &str, value: impl FnOnce(&mut Vec<u8>)) {
        let kv = wire::open(out, field::FIRST);
        wire::head(out, field::KEY, key.len());
        out.extend_from_slice(key.as_bytes());
        let v = wire::open(out, field::VALUE);
        value(out);
        wire::close(out, v);
        wire::close(out, kv);
    }

    fn int_any(out: &mut Vec<u8>, v: i64) {
        wire::int_any(out, v)
    }

    fn unsigned_any(out: &mut Vec<u8>, v: u64) {
        wire::unsigned_any(out, v)
    }

    fn message_any(out: &mut Vec<u8>, message: &dyn fmt::Display) {
        wire::message_any(out, message)
    }

    fn node_any(out: &mut Vec<u8>, f: &Fields, i: usize) {
        f.write_any_proto(out, i)
    }

    fn cached_str_any(out: &mut Vec<u8>, _: &[u8], raw: &[u8]) {
        wire::head(out, field::STRING_VALUE, raw.len());
        out.extend_from_slice(raw);
    }

    fn log_record(
        out: &mut Vec<u8>,
        keys: &mut Vec<Text>,
        head: &LogHead<'_>,
        severity_text: Str<'_>,
        body: Body<'_>,
        attributes: impl FnOnce(&mut Attrs<'_, Self>),
        event_name: Str<'_>,
    ) {
        log_record(out, keys, head, severity_text, body, attributes, event_name)
    }

    fn span(
        out: &mut Vec<u8>,
        keys: &mut Vec<Text>,
        head: &SpanHead<'_>,
        attributes: impl FnOnce(&mut Attrs<'_, Self>),
    ) {
        span(out, keys, head, attributes)
    }
}

/// A string field of a record (left out when empty).
fn string(out: &mut Vec<u8>, field: u32, s: Str<'_>) {
    let mark = open(out, field);
    match s {
        Str::Json(json) => unescape(out, json),
        Str::Name(name) => out.extend_from_slice(name.as_bytes()),
        Str::Text(bytes) => lossy(out, bytes),
        Str::Node(f, i) => {
            if let Some(i) = i {
                f.write_raw_str_of(out, i);
            }
        }
    }
    // Fields up to 15 have one-byte keys.
    close_or_drop(out, mark, 1);
}

/// An enum field (`int32` on the wire: negative values sign-extended).
fn enumeration(out: &mut Vec<u8>, field: u32, v: i64) {
    varint(out, field, v as u64);
}

/// A `LogRecord` as a `log_records` field (2) of `ScopeLogs`.
pub(crate) fn log_record(
    out: &mut Vec<u8>,
    keys: &mut Vec<Text>,
    head: &LogHead<'_>,
    severity_text: Str<'_>,
    body: Body<'_>,
    attributes: impl FnOnce(&mut Attrs<'_, Proto>),
    event_name: Str<'_>,
) {
    let record = open(out, field::SECOND);
    fixed64(out, 1, head.time);
    enumeration(out, 2, i64::from(head.severity));
    string(out, 3, severity_text);
    match body {
        Body::Absent => {}
        Body::Node(f, i) => {
            let mark = open(out, 5);
            f.write_any_proto(out, i);
            close(out, mark);
        }
        Body::Message(m) => {
            let mark = open(out, 5);
            message_any(out, m);
            close(out, mark);
        }
        Body::Encoded(any) => {
            let mark = open(out, 5);
            out.extend_from_slice(any);
            close(out, mark);
        }
    }
    let mut attrs = Attrs::open(out, keys, 6);
    attributes(&mut attrs);
    attrs.close();
    bytes(out, 9, head.trace_id.unwrap_or_default());
    bytes(out, 10, head.span_id.unwrap_or_default());
    fixed64(out, 11, head.observed);
    string(out, 12, event_name);
    close(out, record);
}

/// A `Span` as a `spans` field (2) of `ScopeSpans`.
pub(crate) fn span(
    out: &mut Vec<u8>,
    keys: &mut Vec<Text>,
    s: &SpanHead<'_>,
    attributes: impl FnOnce(&mut Attrs<'_, Proto>),
) {
    let f = s.fields;
    let record = open(out, field::SECOND);
    bytes(out, 1, s.trace_id.unwrap_or_default());
    bytes(out, 2, s.span_id.unwrap_or_default());
    bytes(out, 4, s.parent.unwrap_or_default());
    string(out, 5, Str::Node(f, s.name));
    enumeration(out, 6, s.kind);
    fixed64(out, 7, s.start);
    fixed64(out, 8, s.end);
    let mut attrs = Attrs::open(out, keys, 9);
    attributes(&mut attrs);
    attrs.close();
    if let Some(text) = s.links.and_then(|i| f.str_of(i)) {
        for_each_link(&text, |trace_id, span_id| {
            let link = open(out, 13);
            bytes(out, 1, &trace_id);
            bytes(out, 2, &span_id);
            close(out, link);
        });
    }
    if let Some(message) = s.error {
        let status = open(out, 15);
        string(out, 2, Str::Node(f, message));
        enumeration(out, 3, i64::from(STATUS_ERROR));
        close(out, status);
    }
    close(out, record);
}
