//! The fast paths of protobuf export frames: Common Schema `Log` events through compiled
//! plans, and plain events straight from their decoded fields.
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
//! falls back to the general path, which writes it from scratch.
//!
//! Plain events ([`OtlpWriter::fast_plain`]) need no plan: their fields' names are
//! their keys as they are when they are unique C identifiers
//! ([`PreparedFormat::simple_names`]), and each decoded value becomes its `AnyValue`
//! directly; a field that fails to decode sends the record to the general path.
//!
//! The tests here compare both paths byte for byte on generated Common Schema logs and
//! near misses; the reference tests (`reference/tests.rs`) on every event they write
//! (the EventHeader and plain-format corpora, generated events).

use crate::bytes::Endian;
use prost::encoding::WireType;

use super::common_schema::CS_VERSION;
use super::cs_text::{hex_id, parse_time};
use super::enc::{Attrs, Body, Enc, LogHead, Str};
use super::fields::{Class, scalar_proto};
use super::proto::{self, Proto};
use super::wire::{self, field};
use super::{Origin, OtlpWriter, TracepointValue};
use crate::decode::{Value as Decoded, decode_field};
use crate::eventheader::enumerator::read_value;
use crate::eventheader::metadata::{ArrayKind, read_field};
use crate::eventheader::{Encoding, Format, MAX_FIELDS};
use crate::json::write_value;
use crate::json_line::PreparedFormat;
use crate::json_line::eventheader::{uint_of, write_value_as};

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
    endian: Endian,
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
    /// The records written through a plan (tests: to know the fast path ran).
    #[cfg(test)]
    pub(crate) hits: usize,
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
    fn get(&mut self, meta: &[u8], endian: Endian) -> Option<&LogPlan> {
        let hit = |c: &Cached| c.endian == endian && *c.meta == *meta;
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
                        endian,
                        plan: compile(meta, endian),
                    });
                    // Just pushed: not empty.
                    self.last = self.entries.len().saturating_sub(1);
                }
            }
        }
        self.entries[self.last].plan.as_ref()
    }
}

/// The keys of the sample's and tracepoint's attributes (`Origin::add_to`), which no
/// field attribute may have for a plan (the general path would rename one of them).
const ORIGIN_KEYS: [&[u8]; 7] = [
    b"process.pid",
    b"thread.id",
    b"cpu.logical_number",
    b"linux.tracepoint",
    b"eventheader.level",
    b"eventheader.keyword",
    b"code.stacktrace",
];

/// A field name as the general path's keys have it (UTF-8, invalid sequences as U+FFFD).
fn key_text(name: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    wire::lossy(&mut out, name);
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
fn compile(meta: &[u8], endian: Endian) -> Option<LogPlan> {
    let name_len = memchr::memchr(0, meta)?;
    // The NUL is inside the metadata: the sum fits.
    let mut pos = name_len.saturating_add(1);
    let mut reads = Vec::new();
    // Top-level value fields and parts' members: (part or none, key, index in `reads`).
    let mut members: Vec<(Option<u8>, Vec<u8>, usize)> = Vec::new();
    let mut top_keys: Vec<Vec<u8>> = Vec::new();
    let mut parts_seen = [false; 3];
    let mut count = 0usize;
    // (part, fields left in it)
    let mut part: Option<(u8, u8)> = None;
    while pos < meta.len() {
        let f = read_field(meta, pos, endian).ok()?;
        pos = f.next;
        // At most MAX_FIELDS + 1 (checked below).
        count = count.saturating_add(1);
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
                // A part has at least one field (format_byte != 0) and ends at 0.
                *left = left.saturating_sub(1);
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
        wire::head(&mut keys, field::KEY, key.len());
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
    fn read(&self, payload: &[u8], endian: Endian, values: &mut Vec<(usize, usize)>) -> Option<()> {
        values.clear();
        let mut pos = 0;
        for r in &self.reads {
            let (bytes, used) = read_value(payload, pos, r.encoding, endian).ok()?;
            // `bytes` is part of `payload`: the difference is its place there, and the
            // sums stay inside it.
            let start = (bytes.as_ptr() as usize).checked_sub(payload.as_ptr() as usize)?;
            values.push((start, start.saturating_add(bytes.len())));
            pos = pos.saturating_add(used);
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
        endian: Endian,
    ) {
        let r = self.reads[i];
        match r.value {
            Value::Unsigned => match uint_of(bytes, endian) {
                Some(u) => wire::unsigned_any(out, u),
                None => self.write_other(out, scratch, r, Format::Default, bytes, endian),
            },
            Value::Signed => match uint_of(bytes, endian) {
                Some(u) => wire::int_any(out, sign_extend(u, bytes.len())),
                None => self.write_other(out, scratch, r, Format::SignedInt, bytes, endian),
            },
            Value::Text => {
                let mark = wire::open(out, field::STRING_VALUE);
                wire::lossy(out, bytes);
                wire::close(out, mark);
            }
            Value::Bool32 => match uint_of(bytes, endian) {
                Some(u @ (0 | 1)) => {
                    wire::key(out, field::BOOL_VALUE, WireType::Varint);
                    out.push(u as u8);
                }
                Some(u) => wire::int_any(out, i64::from(u as u32 as i32)),
                None => self.write_other(out, scratch, r, Format::Boolean, bytes, endian),
            },
            Value::Float64 => match uint_of(bytes, endian).map(f64::from_bits) {
                // zmij writes finite values with a `.` or an exponent (a `doubleValue`)
                // and the shortest digits that read back the same value.
                Some(v) if v.is_finite() => {
                    wire::key(out, field::DOUBLE_VALUE, WireType::SixtyFourBit);
                    out.extend_from_slice(&v.to_le_bytes());
                }
                _ => self.write_other(out, scratch, r, Format::Float, bytes, endian),
            },
            Value::Other(format) => self.write_other(out, scratch, r, format, bytes, endian),
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
        endian: Endian,
    ) {
        scratch.clear();
        write_value_as(scratch, r.encoding, format, bytes, endian);
        scalar_proto(out, Class::of(scratch), scratch);
    }
}

impl OtlpWriter {
    /// A plain event (not EventHeader, not `otlp_metrics`) as a protobuf `LogRecord`
    /// straight from its decoded fields (what [`OtlpWriter::event_record`] writes from
    /// the field tree); `false` (nothing written) when the general path must write it:
    /// names that could need escapes or renaming, a field that does not decode.
    pub(super) fn fast_plain(
        &mut self,
        out: &mut Vec<u8>,
        origin: &Origin<'_>,
        prepared: &PreparedFormat,
        raw: &[u8],
    ) -> bool {
        if !prepared.simple_names() {
            return false;
        }
        let endian = self.endian();
        let FastCache { body, scratch, .. } = &mut self.fast;
        // The attributes, whole, before anything is written (a field that fails sends the
        // record to the general path, which explains it in `uevrec.errors`).
        body.clear();
        for field in &prepared.format().fields {
            let value = decode_field(field, raw, endian);
            if let Decoded::Error(_) = value {
                return false;
            }
            attr(body, field.name.as_bytes(), |out| {
                plain_value(out, scratch, &value)
            });
        }
        let attrs = &*body;
        // (`plain_resource`, on fields apart from the attributes' buffer.)
        self.resource.clear();
        self.resource.extend_from_slice(&self.host);
        Proto::append_attrs(&mut self.resource, &self.context);
        self.scope.clear();
        Proto::scope(&mut self.scope, prepared.system());
        let time = origin.stamp.time_unix_ns.unwrap_or(0);
        let head = LogHead {
            time,
            observed: time,
            ..Default::default()
        };
        let tracepoint: &TracepointValue = &self.tracepoint;
        let counted = (&tracepoint.colon[..], 1);
        let keys = &mut self.keys;
        let (resource, scope) = (&self.resource, &self.scope);
        let time = (time != 0).then_some(time);
        self.batches
            .add(out, Signal::Logs, resource, scope, time, counted, |buf| {
                proto::log_record(
                    buf,
                    keys,
                    &head,
                    Str::Json(b"\"\""),
                    Body::Absent,
                    |a: &mut Attrs<'_, Proto>| {
                        a.out.extend_from_slice(attrs);
                        origin_attrs(a.out, origin, tracepoint);
                    },
                    Str::Name(prepared.event()),
                )
            });
        #[cfg(test)]
        {
            self.fast.hits = self.fast.hits.saturating_add(1);
        }
        true
    }
}

/// A plain field's value as `AnyValue` contents, as the field tree types its JSON-lines
/// text ([`crate::json_line`]'s `write_value`): integers as `intValue` (unsigned ones
/// beyond `int64` as the digits' `stringValue`), integer arrays as `arrayValue`, text as
/// `stringValue` (invalid UTF-8 as U+FFFD), bytes as their hex `stringValue`.
fn plain_value(out: &mut Vec<u8>, scratch: &mut Vec<u8>, value: &Decoded<'_>) {
    match *value {
        Decoded::Signed(v) => wire::int_any(out, v),
        Decoded::Unsigned(v) => wire::unsigned_any(out, v),
        Decoded::Str(bytes) => {
            let mark = wire::open(out, field::STRING_VALUE);
            wire::lossy(out, bytes);
            wire::close(out, mark);
        }
        Decoded::IntArray(array) => {
            let mark = wire::open(out, field::ARRAY_VALUE);
            for v in array.iter() {
                let element = wire::open(out, field::VALUES);
                plain_value(out, scratch, &v);
                wire::close(out, element);
            }
            wire::close(out, mark);
        }
        Decoded::Bytes(_) | Decoded::Error(_) => {
            scratch.clear();
            write_value(scratch, value);
            scalar_proto(out, Class::of(scratch), scratch);
        }
    }
}

/// What [`Origin::add_to`] adds, keys unique (the plan checked that no field has one of
/// them), written as its `Attrs::add` writes them.
fn origin_attrs(out: &mut Vec<u8>, origin: &Origin<'_>, tracepoint: &TracepointValue) {
    let s = origin.stamp;
    int_attr(out, b"process.pid", i64::from(s.pid));
    int_attr(out, b"thread.id", i64::from(s.tid));
    int_attr(out, b"cpu.logical_number", i64::from(s.cpu));
    attr(out, b"linux.tracepoint", |out| {
        Proto::cached_str_any(out, &tracepoint.json, &tracepoint.colon)
    });
    if let Some((keyword, level)) = origin.eventheader {
        int_attr(out, b"eventheader.level", i64::from(level));
        attr(out, b"eventheader.keyword", |out| {
            wire::unsigned_any(out, keyword)
        });
    }
    if let Some(text) = origin.stacktrace {
        attr(out, b"code.stacktrace", |out| {
            Proto::message_any(out, &text)
        });
    }
}

/// [`attr`] with an `intValue`, its lengths known before it is written (`key` under
/// 100 bytes).
#[inline]
fn int_attr(out: &mut Vec<u8>, key: &[u8], v: i64) {
    let n = prost::encoding::encoded_len_varint(v as u64);
    // A varint of at most 10 bytes and a key under 100: small sums.
    #[allow(clippy::arithmetic_side_effects)]
    let (any, kv) = (1 + n, 4 + key.len() + 1 + n);
    out.extend_from_slice(&[0x32, kv as u8, 0x0a, key.len() as u8]);
    out.extend_from_slice(key);
    out.extend_from_slice(&[0x12, any as u8, 0x18]);
    wire::encode_varint(v as u64, out);
}

/// A `LogRecord.attributes` `KeyValue` (field 6): `key` and the
/// `AnyValue` contents `value` writes.
#[inline]
fn attr(out: &mut Vec<u8>, key: &[u8], value: impl FnOnce(&mut Vec<u8>)) {
    let kv = wire::open(out, 6);
    wire::head(out, field::KEY, key.len());
    out.extend_from_slice(key);
    let v = wire::open(out, field::VALUE);
    value(out);
    wire::close(out, v);
    wire::close(out, kv);
}

/// The low `size` bytes of `u` as a signed number.
fn sign_extend(u: u64, size: usize) -> i64 {
    // size is a value's width, 1 to 8 bytes.
    #[allow(clippy::arithmetic_side_effects)]
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
        endian: Endian,
    ) -> bool {
        let FastCache {
            plans,
            values,
            body,
            scratch,
            ..
        } = &mut self.fast;
        let Some(plan) = plans.get(meta, endian) else {
            return false;
        };
        if plan.read(payload, endian, values).is_none() {
            return false;
        }
        let bytes = |i: usize| {
            let (a, b) = values[i];
            &payload[a..b]
        };
        // What the general path checks: a Common Schema 4.0 `Log`, every special field
        // taken (else it would be an attribute).
        let int = |i: usize| {
            let u = uint_of(bytes(i), endian)?;
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
                plan.write_value(out, scratch, i, bytes(i), endian)
            });
        }
        Proto::append_attrs(&mut self.resource, &self.host);
        Proto::append_attrs(&mut self.resource, &self.context);
        body.clear();
        if let Some(i) = plan.body {
            plan.write_value(body, scratch, i, bytes(i), endian);
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
                            let kv = wire::open(out, 6);
                            out.extend_from_slice(&plan.keys[a as usize..b as usize]);
                            let v = wire::open(out, field::VALUE);
                            plan.write_value(out, scratch, i, bytes(i), endian);
                            wire::close(out, v);
                            wire::close(out, kv);
                        }
                        origin_attrs(attrs.out, origin, tracepoint);
                    },
                    text(plan.name),
                )
            });
        #[cfg(test)]
        {
            self.fast.hits = self.fast.hits.saturating_add(1);
        }
        true
    }
}

// Tests compute with the values they pick.
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    use super::super::tests::{Eh, eh_prepared};
    use super::*;
    use crate::eventheader::trace_entry;
    use crate::json_line::RecordWriter;
    use crate::json_line::{LineOptions, PreparedFormat, RecordStamp};
    use crate::otlp::OtlpEncoding;

    /// A field: encoding byte, format byte, payload bytes.
    type Typed = (u8, Option<u8>, Vec<u8>);

    fn text(s: &[u8]) -> Typed {
        let mut p = (s.len() as u16).to_le_bytes().to_vec();
        p.extend_from_slice(s);
        (10, None, p)
    }

    /// Any value of the encodings and formats a plan handles itself or passes on.
    fn typed() -> impl Strategy<Value = Typed> {
        let le = |v: u64, n: usize| v.to_le_bytes()[..n].to_vec();
        prop_oneof![
            "\\PC{0,10}".prop_map(|s| text(s.as_bytes())),
            prop::collection::vec(any::<u8>(), 0..8).prop_map(|b| text(&b)),
            "[a-z\"\\\\\n\u{1}é]{0,8}".prop_map(|s| {
                let mut p = s.into_bytes();
                p.push(0);
                (7, Some(11), p)
            }),
            (2u8..6, any::<u64>()).prop_map(move |(e, v)| (e, None, le(v, 1 << (e - 2)))),
            (2u8..6, any::<u64>()).prop_map(move |(e, v)| (e, Some(2), le(v, 1 << (e - 2)))),
            prop::sample::select(vec![0u64, 1, 2, u64::from(u32::MAX)]).prop_map(move |v| (
                4,
                Some(7),
                le(v, 4)
            )),
            prop_oneof![
                any::<f64>(),
                prop::sample::select(vec![
                    0.0,
                    -0.0,
                    1.0,
                    -3.0,
                    1e16,
                    1e300,
                    5e-324,
                    123_456_789.0,
                    f64::NAN,
                    f64::INFINITY,
                    f64::NEG_INFINITY,
                ]),
            ]
            .prop_map(|v: f64| (5, Some(8), v.to_le_bytes().to_vec())),
            any::<f32>().prop_map(|v| (4, Some(8), v.to_le_bytes().to_vec())),
            (
                any::<u32>(),
                prop::sample::select(vec![3u8, 4, 5, 6, 16, 17])
            )
                .prop_map(move |(v, f)| (4, Some(f), le(u64::from(v), 4))),
            prop::collection::vec(any::<u8>(), 0..6).prop_map(|b| {
                let (_, _, p) = text(&b);
                (13, None, p)
            }),
            prop::collection::vec(any::<u8>(), 16).prop_map(|b| (6, Some(15), b)),
            "[a-z]{0,4}".prop_map(|s| {
                let mut p = (s.len() as u16).to_le_bytes().to_vec();
                for c in s.encode_utf16() {
                    p.extend_from_slice(&c.to_le_bytes());
                }
                (11, None, p)
            }),
        ]
    }

    /// Mostly `good` (what the mapping takes), sometimes any value.
    fn mostly(good: impl Strategy<Value = Typed> + 'static) -> BoxedStrategy<Typed> {
        prop_oneof![16 => good, 1 => typed()].boxed()
    }

    fn hex_text(n: usize) -> impl Strategy<Value = Typed> {
        prop_oneof![
            8 => prop::collection::vec(any::<u8>(), n).prop_map(|b| {
                let h: String = b.iter().map(|b| format!("{b:02x}")).collect();
                text(h.as_bytes())
            }),
            1 => Just(text(b"0af7651916cd43dd8448eb211c8031zz")),
        ]
    }

    /// A name: mostly `prefix` and a number, sometimes one of `colliding`.
    fn name(prefix: &'static str, colliding: &'static [&'static str]) -> BoxedStrategy<String> {
        prop_oneof![
            12 => (0..40).prop_map(move |n| format!("{prefix}{n}")),
            1 => prop::sample::select(colliding).prop_map(String::from),
        ]
        .boxed()
    }

    /// Optional members with these names and values, then extra ones from `extra`.
    fn part(
        specials: Vec<(&'static str, BoxedStrategy<Typed>)>,
        extra: (&'static str, &'static [&'static str]),
    ) -> impl Strategy<Value = Vec<(String, Typed)>> {
        let specials: Vec<_> = specials
            .into_iter()
            .map(|(name, v)| {
                prop::option::weighted(0.8, v.prop_map(move |v| (name.to_string(), v)))
            })
            .collect();
        let extra = prop::collection::vec((name(extra.0, extra.1), typed()), 0..4);
        (specials, extra).prop_map(|(s, e)| s.into_iter().flatten().chain(e).collect())
    }

    /// A Common Schema log as the exporter writes it, with variations: special fields
    /// missing, of other types or values, repeated names, other parts and fields.
    fn cs_log() -> impl Strategy<Value = Vec<u8>> {
        let time = prop_oneof![
            Just(text(b"2026-11-22T11:00:00.123456789Z")),
            Just(text(b"2024-03-28T00:45:12Z")),
            Just(text(b"2024-13-28T00:45:12Z")),
        ];
        let a = part(
            vec![
                ("time", mostly(time)),
                ("ext_dt_traceId", mostly(hex_text(16))),
                ("ext_dt_spanId", mostly(hex_text(8))),
                (
                    "ext_cloud_role",
                    mostly("\\PC{0,6}".prop_map(|s| text(s.as_bytes()))),
                ),
                ("ext_cloud_roleInstance", mostly(Just(text(b"pod-7")))),
            ],
            ("a", &["time", "x", "ext_cloud_role"]),
        );
        let severity = prop_oneof![
            (-5i16..30).prop_map(|v| (3, Some(2), v.to_le_bytes().to_vec())),
            any::<i64>().prop_map(|v| (5, Some(2), v.to_le_bytes().to_vec())),
        ];
        let b = part(
            vec![
                ("body", typed().boxed()),
                ("severityNumber", mostly(severity)),
                (
                    "severityText",
                    mostly("[A-Z]{0,5}".prop_map(|s| text(s.as_bytes()))),
                ),
                ("eventId", typed().boxed()),
                ("name", mostly("\\PC{0,6}".prop_map(|s| text(s.as_bytes())))),
            ],
            ("b", &["y", "event_id", "body", "c1"]),
        );
        let c = prop::collection::vec(
            (
                name("c", &["x", "y", "event_id", "thread.id", "a1", "c1"]),
                typed(),
            ),
            0..5,
        );
        let outside =
            prop::collection::vec((name("o", &["x", "PartC", "__csver__"]), typed()), 0..2);
        let type_name =
            prop_oneof![16 => Just(&b"Log"[..]), 1 => Just(&b"Span"[..]), 1 => Just(&b"Log\0"[..])];
        let csver = prop_oneof![
            16 => Just((4u8, None, 1024u32.to_le_bytes().to_vec())),
            1 => Just((5u8, Some(2), 1024i64.to_le_bytes().to_vec())),
            1 => Just((4u8, None, 1023u32.to_le_bytes().to_vec())),
        ];
        let order = Just(vec![0usize, 1, 2]).prop_shuffle();
        (
            csver,
            type_name,
            a,
            b,
            c,
            outside,
            order,
            any::<bool>(),
            1u8..6,
        )
            .prop_map(
                |(csver, type_name, a, b, c, outside, order, with_a, level)| {
                    let mut eh = Eh::new("Ev");
                    eh = add(eh, "__csver__", &csver);
                    for p in order {
                        match p {
                            0 if with_a => eh = structure(eh, "PartA", &a, None),
                            1 => eh = structure(eh, "PartB", &b, Some(type_name)),
                            2 if !c.is_empty() => eh = structure(eh, "PartC", &c, None),
                            _ => {}
                        }
                    }
                    for (name, v) in &outside {
                        eh = add(eh, name, v);
                    }
                    trace_entry(level, &eh.meta, &eh.payload)
                },
            )
    }

    fn add(mut eh: Eh, name: &str, (encoding, format, payload): &Typed) -> Eh {
        eh = eh.record(name, *encoding, *format);
        eh.payload.extend_from_slice(payload);
        eh
    }

    fn structure(
        mut eh: Eh,
        name: &str,
        members: &[(String, Typed)],
        type_name: Option<&[u8]>,
    ) -> Eh {
        let count = members.len() + usize::from(type_name.is_some());
        if count == 0 {
            return eh;
        }
        eh = eh.structure(name, count as u8);
        if let Some(t) = type_name {
            eh = add(eh, "_typeName", &text(t));
        }
        for (name, v) in members {
            eh = add(eh, name, v);
        }
        eh
    }

    /// The protobuf frames of `events` through the plans (`fast`) or the general path,
    /// and how many records took a plan.
    fn frames(events: &[(PreparedFormat, Vec<u8>)], fast: bool) -> (Vec<u8>, usize) {
        let mut w = OtlpWriter::export(LineOptions::default(), OtlpEncoding::Protobuf);
        w.general_only = !fast;
        w.set_host_name("host \"1\"");
        let mut out = Vec::new();
        for (n, (prepared, raw)) in events.iter().enumerate() {
            let n = n as u64;
            let stamp = RecordStamp {
                time_unix_ns: (n % 23 != 5).then_some(1_795_345_200_000_000_000 + n * 7_000_000),
                cpu: (n % 3) as u32,
                pid: 1000 + n as u32,
                tid: 2000 + n as u32,
            };
            w.write_prepared(&mut out, &stamp, prepared, raw);
            if n % 17 == 16 {
                w.write_lost(&mut out, stamp.time_unix_ns, 2, u64::MAX - n);
            }
        }
        w.end_lines(&mut out);
        (out, w.fast.hits)
    }

    /// Generated Common Schema logs (and near misses) give the same frames, byte for
    /// byte, through their plans as through the general path; most take a plan.
    #[test]
    fn plans_write_what_the_general_path_writes() {
        let mut runner = TestRunner::new(Config::with_cases(400));
        let (records, hits) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
        let prepared = [eh_prepared("Prov_L4K1"), eh_prepared("Other_L1K5")];
        runner
            .run(&prop::collection::vec(cs_log(), 1..10), |events| {
                let events: Vec<_> = events
                    .into_iter()
                    .enumerate()
                    .map(|(n, raw)| (prepared[n % 7 / 6].clone(), raw))
                    .collect();
                let (fast, n) = frames(&events, true);
                let (general, none) = frames(&events, false);
                prop_assert_eq!(none, 0);
                prop_assert!(fast == general, "frames differ");
                records.set(records.get() + events.len());
                hits.set(hits.get() + n);
                Ok(())
            })
            .unwrap();
        // The generator's events are mostly ones a plan takes.
        let (records, hits) = (records.get(), hits.get());
        assert!(
            hits * 4 > records,
            "{hits} of {records} records took a plan"
        );
    }

    /// The benchmark's record (`benches/otlp.rs`) takes its plan, and the frames are
    /// those of the general path.
    #[test]
    fn the_benchmark_record_takes_its_plan() {
        let s = |name: &str, v: &str, eh: Eh| add(eh, name, &text(v.as_bytes()));
        let mut eh = Eh::new("Log");
        eh = add(eh, "__csver__", &(4, None, 1024u32.to_le_bytes().to_vec()));
        eh = eh.structure("PartA", 5);
        eh = s("time", "2026-11-22T11:00:00.123456789Z", eh);
        eh = s("ext_dt_traceId", "0af7651916cd43dd8448eb211c80319c", eh);
        eh = s("ext_dt_spanId", "b7ad6b7169203331", eh);
        eh = s("ext_cloud_role", "checkout", eh);
        eh = s("ext_cloud_roleInstance", "pod-7", eh);
        eh = eh.structure("PartC", 4);
        eh = s("user", "zoë", eh);
        eh = eh.i64("attempt", 2).f64("latency", 1.5).bool("ok", true);
        eh = eh.structure("PartB", 6);
        eh = s("_typeName", "Log", eh);
        eh = s("body", "request served from cache in 3 ms", eh);
        eh = add(
            eh,
            "severityNumber",
            &(3, Some(2), 9i16.to_le_bytes().to_vec()),
        );
        eh = s("severityText", "INFO", eh);
        eh = eh.i64("eventId", 42);
        eh = s("name", "cache-hit", eh);
        let events: Vec<_> = (0..600)
            .map(|_| {
                (
                    eh_prepared("checkout_L4K1"),
                    trace_entry(4, &eh.meta, &eh.payload),
                )
            })
            .collect();
        let (fast, hits) = frames(&events, true);
        let (general, _) = frames(&events, false);
        assert_eq!(hits, 600);
        assert!(fast == general, "frames differ");
        // A record of another metadata block with a repeated name takes no plan.
        let dup = eh_prepared("checkout_L4K1");
        let eh2 = Eh::new("Log").u32("__csver__", 1024).structure("PartB", 2);
        let eh2 = s("_typeName", "Log", eh2).i64("x", 1);
        let eh2 = eh2.structure("PartC", 2).i64("y", 1).i64("y", 2);
        let (_, hits) = frames(&[(dup, trace_entry(4, &eh2.meta, &eh2.payload))], true);
        assert_eq!(hits, 0);
    }
}
