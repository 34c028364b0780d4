//! Compiled protobuf plans: the fast path of Common Schema `Log` events in protobuf
//! export frames.
//!
//! The general path ([`super::OtlpWriter::eventheader`]) writes an event's fields as
//! JSON-lines text, reads that text back into the field tree ([`super::fields`]), finds
//! the Common Schema parts in the tree, then writes the `LogRecord`: per record, every
//! key is written, compared and read back, and every value is written as JSON text and
//! then parsed again for protobuf. A producer writes the same metadata block for every
//! instance of an event, so all of that except the values can be decided once per
//! block: a [`LogPlan`] knows where each field is, which fields the mapping takes
//! (`PartA.time`, the ids, the cloud role, `PartB`'s body, severity and name) and each
//! attribute's key as a protobuf `KeyValue.key` field, encoded once. A record then
//! reads its values from the payload and writes them straight as protobuf.
//!
//! A plan only ever writes what the general path writes, byte for byte: metadata whose
//! mapping could depend on more than the values' bytes in simple ways (arrays, nested
//! structs, repeated names, a special field of an unexpected type, a key that one of the
//! sample's attributes would collide with) gets no plan, and a record whose values the
//! general path would treat differently (`__csver__` not 1024, `_typeName` not `Log`, a
//! time or id that does not parse, a severity beyond `int32`, a payload cut short)
//! falls back to the general path, which writes it from scratch. The tests compare both
//! paths on generated events (`tests.rs`).

use prost::encoding::WireType;

use super::common_schema::{CS_VERSION, hex_id, parse_time};
use super::enc::{Attrs, Body, Enc, Proto, Str};
use super::fields::{Class, scalar_proto};
use super::json::LogHead;
use super::proto::{self, field};
use super::{Origin, OtlpWriter, TracepointValue};
use crate::eventheader::enumerator::read_value;
use crate::eventheader::json::{uint_of, write_value_as};
use crate::eventheader::metadata::{ArrayKind, read_field};
use crate::eventheader::{Encoding, Format, MAX_FIELDS};

use super::batch::Signal;

/// The metadata blocks a [`FastCache`] remembers (it starts again when full).
const CACHE_ENTRIES: usize = 256;
/// The longest metadata block given a plan.
const MAX_METADATA: usize = 4096;

/// How a value's bytes become an `AnyValue`.
#[derive(Debug, Clone, Copy)]
enum Value {
    /// Value8..Value64 shown as an unsigned number: `intValue`, or the digits as
    /// `stringValue` beyond `int64`.
    Unsigned,
    /// Value8..Value64 shown as a signed number: `intValue`.
    Signed,
    /// UTF-8 text (Length16 or zero-terminated): `stringValue`, invalid sequences as
    /// U+FFFD.
    Text,
    /// A Value32 boolean: `boolValue` for 0 and 1, else the number.
    Bool32,
    /// A Value64 float: `doubleValue`, or the JSON-lines strings of NaN and the
    /// infinities.
    Float64,
    /// Anything else: the JSON-lines text, typed as the field tree types it.
    Other(Format),
}

/// One scalar field of the metadata.
#[derive(Debug, Clone, Copy)]
struct Read {
    encoding: Encoding,
    value: Value,
}

/// Where a field of the plan goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Csver,
    TypeName,
    Time,
    TraceId,
    SpanId,
    /// A resource attribute (`service.name`, `service.instance.id`).
    Resource(&'static str),
    Body,
    SeverityNumber,
    SeverityText,
    Name,
    /// An attribute (its key at [`LogPlan::attrs`]).
    Attribute,
}

/// What one metadata block of a Common Schema `Log` event compiles to.
#[derive(Debug)]
pub(crate) struct LogPlan {
    /// Every value field, in payload order.
    reads: Box<[Read]>,
    /// The fields the mapping takes, by index into `reads`.
    type_name: usize,
    time: Option<usize>,
    trace_id: Option<usize>,
    span_id: Option<usize>,
    body: Option<usize>,
    severity_number: Option<usize>,
    severity_text: Option<usize>,
    name: Option<usize>,
    /// The resource attributes, in order: key, field.
    resource: Box<[(&'static str, usize)]>,
    /// The attributes, in order: their `KeyValue.key` field (the range of `keys`), field.
    attrs: Box<[(u32, u32, usize)]>,
    keys: Box<[u8]>,
}

/// One cached metadata block.
#[derive(Debug)]
struct Cached {
    meta: Box<[u8]>,
    big: bool,
    plan: Option<LogPlan>,
}

/// Plans by metadata block, and the buffers their records reuse.
#[derive(Debug, Default)]
pub(crate) struct FastCache {
    plans: Plans,
    /// The value of each field of the record being written.
    values: Vec<(usize, usize)>,
    /// The body's `AnyValue` contents.
    body: Vec<u8>,
    /// JSON text of values of [`Value::Other`].
    scratch: Vec<u8>,
}

/// Plans by metadata block.
#[derive(Debug, Default)]
struct Plans {
    entries: Vec<Cached>,
    /// The entry found last.
    last: usize,
}

impl Plans {
    /// The plan of `meta` (compiled on first sight), if it has one.
    fn get(&mut self, meta: &[u8], big: bool) -> Option<&LogPlan> {
        let hit = |c: &Cached| c.big == big && *c.meta == *meta;
        if !self.entries.get(self.last).is_some_and(hit) {
            match self.entries.iter().position(hit) {
                Some(i) => self.last = i,
                None => {
                    if meta.len() > MAX_METADATA {
                        return None;
                    }
                    if self.entries.len() >= CACHE_ENTRIES {
                        self.entries.clear();
                    }
                    self.entries.push(Cached {
                        meta: meta.into(),
                        big,
                        plan: compile(meta, big),
                    });
                    self.last = self.entries.len() - 1;
                }
            }
        }
        self.entries[self.last].plan.as_ref()
    }
}

/// The keys of the sample's and tracepoint's attributes (`Origin::add_to`), which no
/// field attribute may have for a plan (the general path would rename one of them).
const ORIGIN_KEYS: [&[u8]; 6] = [
    b"process.pid",
    b"thread.id",
    b"cpu.logical_number",
    b"linux.tracepoint",
    b"eventheader.level",
    b"eventheader.keyword",
];

/// A field name as the general path's keys have it (UTF-8, invalid sequences as U+FFFD).
fn key_text(name: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    proto::lossy(&mut out, name);
    out
}

/// How a scalar field's value is written.
fn value_of(encoding: Encoding, format: Format) -> Value {
    use Encoding::*;
    match (encoding, format) {
        (Value8 | Value16 | Value32 | Value64, Format::Default | Format::UnsignedInt) => {
            Value::Unsigned
        }
        (Value8 | Value16 | Value32 | Value64, Format::SignedInt) => Value::Signed,
        (Value32, Format::Boolean) => Value::Bool32,
        (Value64, Format::Float) => Value::Float64,
        (StringLength16Char8 | ZStringChar8, Format::Default | Format::StringUtf) => Value::Text,
        (BinaryLength16Char8, Format::StringUtf) => Value::Text,
        _ => Value::Other(format),
    }
}

/// Compile a metadata block: `None` unless its events are Common Schema `Log` events
/// whose mapping the plan can do (see the module documentation).
fn compile(meta: &[u8], big: bool) -> Option<LogPlan> {
    let name_len = memchr::memchr(0, meta)?;
    let mut pos = name_len + 1;
    let mut reads = Vec::new();
    // Top-level value fields and parts' members: (part or none, key, index in `reads`).
    let mut members: Vec<(Option<u8>, Vec<u8>, usize)> = Vec::new();
    let mut top_keys: Vec<Vec<u8>> = Vec::new();
    let mut parts_seen = [false; 3];
    let mut count = 0;
    // (part, fields left in it)
    let mut part: Option<(u8, u8)> = None;
    while pos < meta.len() {
        let f = read_field(meta, pos, big).ok()?;
        pos = f.next;
        count += 1;
        if count > MAX_FIELDS || f.array != ArrayKind::Scalar {
            return None;
        }
        let key = key_text(f.name);
        if f.encoding == Encoding::Struct {
            if f.format_byte == 0 {
                return None;
            }
            // Only the parts, at the top level.
            let p = match (part, &key[..]) {
                (None, b"PartA") => 0,
                (None, b"PartB") => 1,
                (None, b"PartC") => 2,
                _ => return None,
            };
            if parts_seen[p] || top_keys.contains(&key) {
                return None;
            }
            parts_seen[p] = true;
            top_keys.push(key);
            part = Some((p as u8, f.format_byte));
            continue;
        }
        let index = reads.len();
        reads.push(Read {
            encoding: f.encoding,
            value: value_of(f.encoding, f.format()),
        });
        match &mut part {
            Some((p, left)) => {
                let p = *p;
                if members.iter().any(|(q, k, _)| *q == Some(p) && *k == key) {
                    return None;
                }
                members.push((Some(p), key, index));
                *left -= 1;
                if *left == 0 {
                    part = None;
                }
            }
            None => {
                if top_keys.contains(&key) {
                    return None;
                }
                top_keys.push(key.clone());
                members.push((None, key, index));
            }
        }
    }
    if part.is_some() || !parts_seen[1] {
        return None;
    }
    // `__csver__` first, an integer.
    let (None, first, 0) = members.first()? else {
        return None;
    };
    if first != b"__csver__" || !matches!(reads[0].value, Value::Unsigned | Value::Signed) {
        return None;
    }
    let is_text = |i: usize| matches!(reads[i].value, Value::Text);
    let is_int = |i: usize| matches!(reads[i].value, Value::Unsigned | Value::Signed);
    let mut roles = vec![Role::Attribute; reads.len()];
    roles[0] = Role::Csver;
    for (p, key, i) in &members {
        let i = *i;
        let (role, fits) = match (p, &key[..]) {
            (Some(0), b"time") => (Role::Time, is_text(i)),
            (Some(0), b"ext_dt_traceId") => (Role::TraceId, is_text(i)),
            (Some(0), b"ext_dt_spanId") => (Role::SpanId, is_text(i)),
            (Some(0), b"ext_cloud_role") => (Role::Resource("service.name"), is_text(i)),
            (Some(0), b"ext_cloud_roleInstance") => {
                (Role::Resource("service.instance.id"), is_text(i))
            }
            (Some(1), b"_typeName") => (Role::TypeName, is_text(i)),
            (Some(1), b"body") => (Role::Body, true),
            (Some(1), b"severityNumber") => (Role::SeverityNumber, is_int(i)),
            (Some(1), b"severityText") => (Role::SeverityText, is_text(i)),
            (Some(1), b"name") => (Role::Name, is_text(i)),
            _ => continue,
        };
        if !fits {
            return None;
        }
        roles[i] = role;
    }
    let find = |role: Role| roles.iter().position(|&r| r == role);
    let type_name = find(Role::TypeName)?;
    // The attributes in the general path's order: PartA's, PartC's, PartB's (`eventId`
    // as `event_id`), then the fields outside the parts.
    let mut order: Vec<(Vec<u8>, usize)> = Vec::new();
    for want in [Some(0), Some(2), Some(1), None] {
        for (p, key, i) in &members {
            if *p != want || roles[*i] != Role::Attribute {
                continue;
            }
            let key = if want == Some(1) && key == b"eventId" {
                b"event_id".to_vec()
            } else {
                key.clone()
            };
            order.push((key, *i));
        }
    }
    let mut keys = Vec::new();
    let mut attrs = Vec::new();
    for (n, (key, i)) in order.iter().enumerate() {
        let taken = order[..n].iter().any(|(k, _)| k == key);
        if taken || ORIGIN_KEYS.contains(&&key[..]) {
            return None;
        }
        let start = u32::try_from(keys.len()).ok()?;
        proto::head(&mut keys, field::KEY, key.len());
        keys.extend_from_slice(key);
        attrs.push((start, u32::try_from(keys.len()).ok()?, *i));
    }
    let resource: Box<[(&'static str, usize)]> = members
        .iter()
        .filter_map(|&(_, _, i)| match roles[i] {
            Role::Resource(key) => Some((key, i)),
            _ => None,
        })
        .collect();
    Some(LogPlan {
        reads: reads.into(),
        type_name,
        time: find(Role::Time),
        trace_id: find(Role::TraceId),
        span_id: find(Role::SpanId),
        body: find(Role::Body),
        severity_number: find(Role::SeverityNumber),
        severity_text: find(Role::SeverityText),
        name: find(Role::Name),
        resource,
        attrs: attrs.into(),
        keys: keys.into(),
    })
}

impl LogPlan {
    /// Find each field's value in `payload` (`values`: ranges of it); `None` where the
    /// general path would report a problem.
    fn read(&self, payload: &[u8], big: bool, values: &mut Vec<(usize, usize)>) -> Option<()> {
        values.clear();
        let mut pos = 0;
        for r in &self.reads {
            let (bytes, used) = read_value(payload, pos, r.encoding, big).ok()?;
            let start = bytes.as_ptr() as usize - payload.as_ptr() as usize;
            values.push((start, start + bytes.len()));
            pos += used;
        }
        Some(())
    }

    /// The `AnyValue` contents of field `i` (its bytes `bytes`).
    fn write_value(
        &self,
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
        i: usize,
        bytes: &[u8],
        big: bool,
    ) {
        let r = self.reads[i];
        match r.value {
            Value::Unsigned => match uint_of(bytes, big) {
                Some(u) => proto::unsigned_any(out, u),
                None => self.write_other(out, scratch, r, Format::Default, bytes, big),
            },
            Value::Signed => match uint_of(bytes, big) {
                Some(u) => proto::int_any(out, sign_extend(u, bytes.len())),
                None => self.write_other(out, scratch, r, Format::SignedInt, bytes, big),
            },
            Value::Text => {
                let mark = proto::open(out, field::STRING_VALUE);
                proto::lossy(out, bytes);
                proto::close(out, mark);
            }
            Value::Bool32 => match uint_of(bytes, big) {
                Some(u @ (0 | 1)) => {
                    proto::key(out, field::BOOL_VALUE, WireType::Varint);
                    out.push(u as u8);
                }
                Some(u) => proto::int_any(out, i64::from(u as u32 as i32)),
                None => self.write_other(out, scratch, r, Format::Boolean, bytes, big),
            },
            Value::Float64 => match uint_of(bytes, big).map(f64::from_bits) {
                // zmij writes finite values with a `.` or an exponent (a `doubleValue`)
                // and the shortest digits that read back the same value.
                Some(v) if v.is_finite() => {
                    proto::key(out, field::DOUBLE_VALUE, WireType::SixtyFourBit);
                    out.extend_from_slice(&v.to_le_bytes());
                }
                _ => self.write_other(out, scratch, r, Format::Float, bytes, big),
            },
            Value::Other(format) => self.write_other(out, scratch, r, format, bytes, big),
        }
    }

    /// A value as the general path writes it: its JSON-lines text, typed.
    #[inline(never)]
    fn write_other(
        &self,
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
        r: Read,
        format: Format,
        bytes: &[u8],
        big: bool,
    ) {
        scratch.clear();
        write_value_as(scratch, r.encoding, format, bytes, big);
        let class = if scratch.first() == Some(&b'"') {
            Class::Str
        } else {
            Class::of(scratch)
        };
        scalar_proto(out, class, scratch);
    }
}

/// The low `size` bytes of `u` as a signed number.
fn sign_extend(u: u64, size: usize) -> i64 {
    let shift = 64 - 8 * size as u32;
    ((u << shift) as i64) >> shift
}

impl OtlpWriter {
    /// A Common Schema `Log` event of metadata `meta` (payload `payload`) through its
    /// plan, as a protobuf `LogRecord`; `false` (nothing written) when the general path
    /// must write it. The scope is set already.
    pub(super) fn fast_log(
        &mut self,
        out: &mut Vec<u8>,
        origin: &Origin<'_>,
        meta: &[u8],
        payload: &[u8],
        big: bool,
    ) -> bool {
        let FastCache {
            plans,
            values,
            body,
            scratch,
        } = &mut self.fast;
        let Some(plan) = plans.get(meta, big) else {
            return false;
        };
        if plan.read(payload, big, values).is_none() {
            return false;
        }
        let bytes = |i: usize| {
            let (a, b) = values[i];
            &payload[a..b]
        };
        // What the general path checks: a Common Schema 4.0 `Log`, every special field
        // taken (else it would be an attribute).
        let int = |i: usize| {
            let u = uint_of(bytes(i), big)?;
            match plan.reads[i].value {
                Value::Signed => Some(sign_extend(u, bytes(i).len())),
                _ => i64::try_from(u).ok(),
            }
        };
        if int(0) != Some(CS_VERSION) || bytes(plan.type_name) != b"Log" {
            return false;
        }
        let mut time = 0;
        if let Some(i) = plan.time {
            match std::str::from_utf8(bytes(i)).ok().and_then(parse_time) {
                Some(t) => time = t,
                None => return false,
            }
        }
        let trace_id = match plan.trace_id.map(|i| hex_id::<16>(bytes(i))) {
            Some(None) => return false,
            Some(id) => id,
            None => None,
        };
        let span_id = match plan.span_id.map(|i| hex_id::<8>(bytes(i))) {
            Some(None) => return false,
            Some(id) => id,
            None => None,
        };
        let mut severity = 0;
        if let Some(i) = plan.severity_number {
            match int(i).and_then(|n| i32::try_from(n).ok()) {
                Some(n) => severity = n,
                None => return false,
            }
        }
        self.resource.clear();
        for &(key, i) in &plan.resource {
            Proto::resource_attr(&mut self.resource, key, |out| {
                plan.write_value(out, scratch, i, bytes(i), big)
            });
        }
        Proto::append_attrs(&mut self.resource, &self.host);
        body.clear();
        if let Some(i) = plan.body {
            plan.write_value(body, scratch, i, bytes(i), big);
        }
        let observed = origin.stamp.time_unix_ns;
        let head = LogHead {
            time,
            observed: observed.unwrap_or(0),
            severity,
            trace_id: trace_id.as_ref().map(|id| &id[..]),
            span_id: span_id.as_ref().map(|id| &id[..]),
        };
        let text = |i: Option<usize>| Str::Text(i.map_or(&[][..], bytes));
        let body = match plan.body {
            Some(_) => Body::Encoded(body),
            None => Body::Absent,
        };
        let tracepoint: &TracepointValue = &self.tracepoint;
        let counted = (&tracepoint.colon[..], 1);
        let keys = &mut self.keys;
        let time = observed.filter(|&t| t != 0);
        let (resource, scope) = (&self.resource, &self.scope);
        self.batches
            .add(out, Signal::Logs, resource, scope, time, counted, |buf| {
                proto::log_record(
                    buf,
                    keys,
                    &head,
                    text(plan.severity_text),
                    body,
                    |attrs: &mut Attrs<'_, Proto>| {
                        for &(a, b, i) in &plan.attrs {
                            let out = &mut *attrs.out;
                            let kv = proto::open(out, 6);
                            out.extend_from_slice(&plan.keys[a as usize..b as usize]);
                            let v = proto::open(out, field::VALUE);
                            plan.write_value(out, scratch, i, bytes(i), big);
                            proto::close(out, v);
                            proto::close(out, kv);
                        }
                        origin.add_to(attrs, tracepoint);
                    },
                    text(plan.name),
                )
            });
        true
    }
}
