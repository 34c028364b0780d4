//! OpenTelemetry Common Schema 4.0 events (what the `opentelemetry-user-events-logs`
//! and `-trace` exporters write) → an OTLP `LogRecord` or `Span`, undoing the
//! exporters' mapping: `PartA` {`time`, `ext_dt_traceId`, `ext_dt_spanId`,
//! `ext_cloud_role`, `ext_cloud_roleInstance`}, `PartB` (`_typeName` `Log` or `Span`
//! and the record's own fields), `PartC` (the attributes). Fields this mapping does not
//! know, and known ones whose value does not parse (a bad id, a bad time), stay
//! attributes under their Common Schema names: nothing is dropped.
//!
//! Read from the event's [`Fields`] and written straight into the output: the special
//! fields are found first (their nodes noted in [`Taken`]), then the record is written
//! with every other field as an attribute, in the order PartA, PartC, PartB, fields
//! outside the parts, then the caller's (`origin`).

use super::cs_text::{for_each_link, hex_id, parse_time};
use super::enc::{Attrs, Body, Enc, LogHead, SpanHead, Str};
use super::fields::{Fields, Text};

/// `__csver__` of Common Schema 4.0.
pub(crate) const CS_VERSION: i64 = 1024;

/// The exporters' PartB names of well-known span attributes → their semantic-convention
/// names (the reverse of `opentelemetry-user-events-trace`'s table).
pub(crate) const WELL_KNOWN: &[(&str, &str)] = &[
    ("dbSystem", "db.system.name"),
    ("dbName", "db.namespace"),
    ("dbStatement", "db.query.text"),
    ("httpMethod", "http.request.method"),
    ("httpUrl", "url.full"),
    ("httpStatusCode", "http.response.status_code"),
    ("messagingSystem", "messaging.system"),
    ("messagingDestination", "messaging.destination.name"),
    ("messagingUrl", "messaging.url"),
    ("rpcSystem", "rpc.system.name"),
    ("rpcGrpcStatusCode", "rpc.response.status_code"),
];

/// What a Common Schema event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CsKind {
    /// A `Log` event → a `LogRecord`.
    Log,
    /// A `Span` event → a `Span`.
    Span,
}

/// A Common Schema event: its kind and its parts (top-level struct nodes).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cs {
    pub kind: CsKind,
    a: Option<usize>,
    b: Option<usize>,
    c: Option<usize>,
}

/// The Common Schema event `f` is (`__csver__` 1024 first, a `PartB` struct whose
/// `_typeName` is `Log` or `Span`), if it is one.
pub(crate) fn detect(f: &Fields) -> Option<Cs> {
    let first = f.top().next()?;
    if !(f.key_is(first, "__csver__") && f.int_of(first) == Some(CS_VERSION)) {
        return None;
    }
    let (mut a, mut b, mut c) = (None, None, None);
    for i in f.top().filter(|&i| f.is_struct(i)) {
        let part = if f.key_is(i, "PartA") {
            &mut a
        } else if f.key_is(i, "PartB") {
            &mut b
        } else if f.key_is(i, "PartC") {
            &mut c
        } else {
            continue;
        };
        part.get_or_insert(i);
    }
    let type_name = f.members(b?).find(|&i| f.key_is(i, "_typeName"))?;
    let kind = match f.str_bytes(type_name)?.as_ref() {
        b"Log" => CsKind::Log,
        b"Span" => CsKind::Span,
        _ => return None,
    };
    Some(Cs { kind, a, b, c })
}

/// The members of a part (none without it).
fn members(f: &Fields, part: Option<usize>) -> impl Iterator<Item = usize> + '_ {
    part.into_iter().flat_map(|p| f.members(p))
}

/// The nodes the mapping took (at most 13: 5 of PartA, 8 of a span's PartB).
#[derive(Default)]
struct Taken {
    nodes: [usize; 16],
    len: usize,
}

impl Taken {
    fn add(&mut self, i: usize) {
        if let Some(slot) = self.nodes.get_mut(self.len) {
            *slot = i;
            self.len += 1;
        }
    }

    fn has(&self, i: usize) -> bool {
        self.nodes[..self.len].contains(&i)
    }
}

/// What `PartA` says.
#[derive(Default)]
struct PartA {
    time: Option<u64>,
    trace_id: Option<[u8; 16]>,
    span_id: Option<[u8; 8]>,
}

/// Read `PartA`, noting what is taken (the resource fields included: [`write_resource`]).
fn part_a(f: &Fields, cs: &Cs, taken: &mut Taken) -> PartA {
    let mut a = PartA::default();
    for i in members(f, cs.a) {
        let s = || f.str_of(i);
        let id = || f.str_bytes(i);
        let took = if f.key_is(i, "time") {
            a.time = s().as_deref().and_then(parse_time);
            a.time.is_some()
        } else if f.key_is(i, "ext_dt_traceId") {
            a.trace_id = id().as_deref().and_then(hex_id);
            a.trace_id.is_some()
        } else if f.key_is(i, "ext_dt_spanId") {
            a.span_id = id().as_deref().and_then(hex_id);
            a.span_id.is_some()
        } else {
            resource_key(f, i).is_some()
        };
        if took {
            taken.add(i);
        }
    }
    a
}

/// The resource attribute a `PartA` member is: `service.name` ← `ext_cloud_role`,
/// `service.instance.id` ← `ext_cloud_roleInstance` (strings).
fn resource_key(f: &Fields, i: usize) -> Option<&'static str> {
    if !f.is_str(i) {
        return None;
    }
    if f.key_is(i, "ext_cloud_role") {
        Some("service.name")
    } else if f.key_is(i, "ext_cloud_roleInstance") {
        Some("service.instance.id")
    } else {
        None
    }
}

/// The resource attributes `PartA` names on `out`.
pub(crate) fn write_resource<E: Enc>(out: &mut Vec<u8>, f: &Fields, cs: &Cs) {
    for i in members(f, cs.a) {
        if let Some(key) = resource_key(f, i) {
            E::resource_attr(out, key, |out| E::node_any(out, f, i));
        }
    }
}

/// Add the attributes: PartA's, PartC's and PartB's members not taken (PartB's keys
/// renamed by `rename`), then the fields outside the parts.
fn add_attributes<E: Enc>(
    attrs: &mut Attrs<'_, E>,
    f: &Fields,
    cs: &Cs,
    taken: &Taken,
    rename: impl Fn(&Fields, usize) -> Option<&'static str>,
    between: impl FnOnce(&mut Attrs<'_, E>),
) {
    let add = |attrs: &mut Attrs<'_, E>, i: usize, key: &[u8]| {
        attrs.add(key, |out| E::node_any(out, f, i));
    };
    for i in members(f, cs.a).chain(members(f, cs.c)) {
        if !taken.has(i) {
            add(attrs, i, f.key(i));
        }
    }
    for i in members(f, cs.b) {
        if taken.has(i) {
            continue;
        }
        match rename(f, i) {
            Some(name) => attrs.add_named(name, |out| E::node_any(out, f, i)),
            None => add(attrs, i, f.key(i)),
        }
    }
    between(attrs);
    let parts = [cs.a, cs.b, cs.c];
    // The first field is `__csver__`.
    for i in f.top().skip(1) {
        if !parts.contains(&Some(i)) {
            add(attrs, i, f.key(i));
        }
    }
}

/// The `Log` event `f` as a `LogRecord` (observed at `observed`), `origin` adding the
/// last attributes.
pub(crate) fn write_log<E: Enc>(
    out: &mut Vec<u8>,
    keys: &mut Vec<Text>,
    f: &Fields,
    cs: &Cs,
    observed: u64,
    origin: impl FnOnce(&mut Attrs<'_, E>),
) {
    let mut taken = Taken::default();
    let a = part_a(f, cs, &mut taken);
    let (mut body, mut severity, mut severity_text, mut name) = (None, 0, None, None);
    for i in members(f, cs.b) {
        let took = if f.key_is(i, "_typeName") {
            true
        } else if f.key_is(i, "body") {
            body = Some(i);
            true
        } else if f.key_is(i, "severityNumber") {
            let n = f.int_of(i).and_then(|n| i32::try_from(n).ok());
            severity = n.unwrap_or(0);
            n.is_some()
        } else if f.key_is(i, "severityText") {
            severity_text = f.is_str(i).then_some(i);
            severity_text.is_some()
        } else if f.key_is(i, "name") {
            name = f.is_str(i).then_some(i);
            name.is_some()
        } else {
            false
        };
        if took {
            taken.add(i);
        }
    }
    let head = LogHead {
        time: a.time.unwrap_or(0),
        observed,
        severity,
        trace_id: a.trace_id.as_ref().map(|id| &id[..]),
        span_id: a.span_id.as_ref().map(|id| &id[..]),
    };
    E::log_record(
        out,
        keys,
        &head,
        Str::Node(f, severity_text),
        body.map_or(Body::Absent, |i| Body::Node(f, i)),
        |attrs| {
            // The exporter moves the `event_id` attribute to PartB's `eventId`.
            let rename = |f: &Fields, i| f.key_is(i, "eventId").then_some("event_id");
            add_attributes(attrs, f, cs, &taken, rename, |_| {});
            origin(attrs);
        },
        Str::Node(f, name),
    );
}

/// The `Span` event `f` as a `Span`, `origin` adding the last attributes.
pub(crate) fn write_span<E: Enc>(
    out: &mut Vec<u8>,
    keys: &mut Vec<Text>,
    f: &Fields,
    cs: &Cs,
    origin: impl FnOnce(&mut Attrs<'_, E>),
) {
    let mut taken = Taken::default();
    let a = part_a(f, cs, &mut taken);
    let mut name = None;
    let (mut start, mut kind, mut failed) = (0, 0, false);
    let (mut parent, mut links, mut status_message) = (None, None, None);
    for i in members(f, cs.b) {
        let s = || f.str_of(i);
        let took = if f.key_is(i, "_typeName") {
            true
        } else if f.key_is(i, "name") {
            name = f.is_str(i).then_some(i);
            name.is_some()
        } else if f.key_is(i, "startTime") {
            let t = s().as_deref().and_then(parse_time);
            start = t.unwrap_or(0);
            t.is_some()
        } else if f.key_is(i, "success") {
            let ok = f.bool_of(i);
            failed = ok == Some(false);
            ok.is_some()
        } else if f.key_is(i, "kind") {
            // Common Schema kinds 0..=4 (internal, server, client, producer, consumer)
            // are OTLP's 1..=5.
            let k = f.int_of(i).filter(|k| (0..=4).contains(k));
            kind = k.map_or(0, |k| k + 1);
            k.is_some()
        } else if f.key_is(i, "parentId") {
            parent = f.str_bytes(i).as_deref().and_then(hex_id::<8>);
            parent.is_some()
        } else if f.key_is(i, "links") {
            links = s().filter(|s| for_each_link(s, |_, _| {})).map(|_| i);
            links.is_some()
        } else if f.key_is(i, "statusMessage") {
            status_message = f.is_str(i).then_some(i);
            status_message.is_some()
        } else {
            false
        };
        if took {
            taken.add(i);
        }
    }
    let head = SpanHead {
        fields: f,
        trace_id: a.trace_id.as_ref().map(|id| &id[..]),
        span_id: a.span_id.as_ref().map(|id| &id[..]),
        parent: parent.as_ref().map(|id| &id[..]),
        name,
        kind,
        start,
        end: a.time.unwrap_or(0),
        links,
        error: failed.then_some(status_message),
    };
    E::span(out, keys, &head, |attrs| {
        let rename = |f: &Fields, i| {
            WELL_KNOWN
                .iter()
                .find(|(cs, _)| f.key_is(i, cs))
                .map(|&(_, name)| name)
        };
        add_attributes(attrs, f, cs, &taken, rename, |attrs| {
            // A status message on a successful span (not something the exporter writes):
            // an attribute rather than a claim of an error.
            if let Some(i) = status_message.filter(|_| !failed) {
                attrs.add_named("statusMessage", |out| E::node_any(out, f, i));
            }
        });
        origin(attrs);
    });
}
