//! The OTLP/JSON encoding ([`Json`]): `LogRecord`s, `Span`s and typed `AnyValue`s written
//! straight into the output, 64-bit integers as decimal strings. The OTLP/JSON rules (the protobuf JSON mapping with the
//! OTLP exceptions): lowerCamelCase keys, trace and span ids as lowercase hex, 64-bit
//! integers as decimal strings, enums as integers. Fields are written as
//! `opentelemetry-proto`'s serde mapping writes them, default values included (e.g.
//! `"droppedAttributesCount":0`), so its types read every line back.

use std::fmt;

use super::cs_text::for_each_link;
use super::enc::{Attrs, Body, Enc, LogHead, STATUS_ERROR, SpanHead, Str};
use super::fields::{Fields, Text, write_message};
use crate::json::{write_hex, write_int, write_str, write_text};

/// OTLP/JSON.
pub(crate) struct Json;

impl Enc for Json {
    const PROTO: bool = false;
    const UEVREC_SCOPE: &'static [u8] = b"\"uevrec\"";

    fn scope(out: &mut Vec<u8>, name: &str) {
        write_str(out, name);
    }

    fn resource_attr(out: &mut Vec<u8>, key: &str, value: impl FnOnce(&mut Vec<u8>)) {
        if !out.is_empty() {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"key\":");
        write_str(out, key);
        out.extend_from_slice(b",\"value\":");
        value(out);
        out.push(b'}');
    }

    fn append_attrs(out: &mut Vec<u8>, more: &[u8]) {
        if !more.is_empty() {
            if !out.is_empty() {
                out.push(b',');
            }
            out.extend_from_slice(more);
        }
    }

    fn int_any(out: &mut Vec<u8>, v: i64) {
        int_any(out, v)
    }

    fn unsigned_any(out: &mut Vec<u8>, v: u64) {
        unsigned_any(out, v)
    }

    fn message_any(out: &mut Vec<u8>, message: &dyn fmt::Display) {
        message_any(out, message)
    }

    fn node_any(out: &mut Vec<u8>, f: &Fields, i: usize) {
        f.write_any(out, i)
    }

    fn cached_str_any(out: &mut Vec<u8>, json_any: &[u8], _: &[u8]) {
        out.extend_from_slice(json_any);
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

/// A string of a record as a JSON string.
fn string(out: &mut Vec<u8>, s: Str<'_>) {
    match s {
        Str::Json(json) => out.extend_from_slice(json),
        Str::Name(name) => write_str(out, name),
        Str::Text(bytes) => write_text(out, bytes),
        Str::Node(f, i) => {
            if !i.is_some_and(|i| f.write_str_of(out, i)) {
                out.extend_from_slice(b"\"\"");
            }
        }
    }
}

/// A `LogRecord`: `head`, `severity_text`, `body`, the attributes and `event_name`.
pub(crate) fn log_record(
    out: &mut Vec<u8>,
    keys: &mut Vec<Text>,
    head: &LogHead<'_>,
    severity_text: Str<'_>,
    body: Body<'_>,
    attributes: impl FnOnce(&mut Attrs<'_, Json>),
    event_name: Str<'_>,
) {
    out.extend_from_slice(b"{\"timeUnixNano\":");
    u64_string(out, head.time);
    out.extend_from_slice(b",\"observedTimeUnixNano\":");
    u64_string(out, head.observed);
    out.extend_from_slice(b",\"severityNumber\":");
    write_int(out, head.severity);
    out.extend_from_slice(b",\"severityText\":");
    string(out, severity_text);
    out.extend_from_slice(b",\"body\":");
    match body {
        Body::Absent => out.extend_from_slice(b"null"),
        Body::Node(f, i) => f.write_any(out, i),
        Body::Message(m) => message_any(out, m),
        Body::Encoded(any) => out.extend_from_slice(any),
    }
    out.extend_from_slice(b",\"attributes\":");
    let mut attrs = Attrs::open(out, keys, 0);
    attributes(&mut attrs);
    attrs.close();
    out.extend_from_slice(b",\"droppedAttributesCount\":0,\"flags\":0,\"traceId\":");
    id(out, head.trace_id);
    out.extend_from_slice(b",\"spanId\":");
    id(out, head.span_id);
    out.extend_from_slice(b",\"eventName\":");
    string(out, event_name);
    out.push(b'}');
}

/// A `Span`.
pub(crate) fn span(
    out: &mut Vec<u8>,
    keys: &mut Vec<Text>,
    s: &SpanHead<'_>,
    attributes: impl FnOnce(&mut Attrs<'_, Json>),
) {
    let f: &Fields = s.fields;
    out.extend_from_slice(b"{\"traceId\":");
    id(out, s.trace_id);
    out.extend_from_slice(b",\"spanId\":");
    id(out, s.span_id);
    out.extend_from_slice(b",\"traceState\":\"\",\"parentSpanId\":");
    id(out, s.parent);
    out.extend_from_slice(b",\"flags\":0,\"name\":");
    string(out, Str::Node(f, s.name));
    out.extend_from_slice(b",\"kind\":");
    write_int(out, s.kind);
    out.extend_from_slice(b",\"startTimeUnixNano\":");
    u64_string(out, s.start);
    out.extend_from_slice(b",\"endTimeUnixNano\":");
    u64_string(out, s.end);
    out.extend_from_slice(b",\"attributes\":");
    let mut attrs = Attrs::open(out, keys, 0);
    attributes(&mut attrs);
    attrs.close();
    out.extend_from_slice(
        b",\"droppedAttributesCount\":0,\"events\":[],\"droppedEventsCount\":0,\"links\":[",
    );
    if let Some(text) = s.links.and_then(|i| f.str_of(i)) {
        let mut first = true;
        for_each_link(&text, |trace_id, span_id| {
            if !std::mem::take(&mut first) {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"traceId\":");
            id(out, Some(&trace_id));
            out.extend_from_slice(b",\"spanId\":");
            id(out, Some(&span_id));
            out.extend_from_slice(
                b",\"traceState\":\"\",\"attributes\":[],\"droppedAttributesCount\":0,\"flags\":0}",
            );
        });
    }
    out.extend_from_slice(b"],\"droppedLinksCount\":0,\"status\":");
    if let Some(message) = s.error {
        out.extend_from_slice(b"{\"message\":");
        string(out, Str::Node(f, message));
        out.extend_from_slice(b",\"code\":");
        write_int(out, STATUS_ERROR);
        out.push(b'}');
    } else {
        out.extend_from_slice(b"null");
    }
    out.push(b'}');
}
