//! The message-type Common Schema mapping (see `super`): Common Schema 4.0 fields as
//! `KeyValue`s → an OTLP `LogRecord` or `Span`.

use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::trace::v1::{Span, Status, span::Link};

use super::super::common_schema::{CS_VERSION, WELL_KNOWN};
use super::super::cs_text::{for_each_link, hex_id, parse_time};
use super::super::enc::STATUS_ERROR;
use super::value::{push_unique, string};

/// A Common Schema event as OTLP.
#[derive(Debug)]
pub(crate) enum Mapped {
    /// A `Log` event.
    Log(LogRecord),
    /// A `Span` event.
    Span(Box<Span>),
}

/// A mapped event and the resource attributes its `PartA` names.
#[derive(Debug)]
pub(crate) struct CsEvent {
    /// The record.
    pub mapped: Mapped,
    /// `service.name` and `service.instance.id`, when `PartA` has them.
    pub resource: Vec<KeyValue>,
}

/// The Common Schema event in `fields` (an EventHeader event's top-level fields), or
/// `Err(fields)` unchanged when it is not one (`__csver__` 1024 first, a `PartB` whose
/// `_typeName` is `Log` or `Span`). `observed` is the sample time.
pub(crate) fn map(mut fields: Vec<KeyValue>, observed: u64) -> Result<CsEvent, Vec<KeyValue>> {
    let is_cs = fields
        .first()
        .is_some_and(|f| f.key == "__csver__" && int_of(f) == Some(CS_VERSION));
    let type_name = fields
        .iter()
        .find(|f| f.key == "PartB")
        .and_then(|b| match value_of(b) {
            Some(V::KvlistValue(list)) => list.values.iter().find(|f| f.key == "_typeName"),
            _ => None,
        })
        .and_then(str_of)
        .map(str::to_owned);
    let is_log = match type_name.as_deref() {
        Some("Log") if is_cs => true,
        Some("Span") if is_cs => false,
        _ => return Err(fields),
    };
    fields.remove(0);
    let part_a = take_part(&mut fields, "PartA");
    let part_b = take_part(&mut fields, "PartB");
    let part_c = take_part(&mut fields, "PartC");
    let mut a = PartA::default();
    let mut attributes = Vec::new();
    for f in part_a {
        a.take(f, &mut attributes);
    }
    for f in part_c {
        add(&mut attributes, f);
    }
    let mapped = if is_log {
        let mut record = LogRecord {
            time_unix_nano: a.time.unwrap_or(0),
            observed_time_unix_nano: observed,
            trace_id: a.trace_id,
            span_id: a.span_id,
            ..Default::default()
        };
        for f in part_b {
            log_part_b(&mut record, f, &mut attributes);
        }
        record.attributes = attributes;
        Mapped::Log(record)
    } else {
        let mut span = Span {
            trace_id: a.trace_id,
            span_id: a.span_id,
            end_time_unix_nano: a.time.unwrap_or(0),
            ..Default::default()
        };
        let mut failed = false;
        for f in part_b {
            span_part_b(&mut span, f, &mut attributes, &mut failed);
        }
        if failed {
            let status = span.status.get_or_insert_with(Status::default);
            status.code = STATUS_ERROR;
        } else if span.status.is_some() {
            // A status message on a successful span (not something the exporter
            // writes): keep it as an attribute rather than claim an error.
            if let Some(status) = span.status.take() {
                push_unique(
                    &mut attributes,
                    "statusMessage".into(),
                    super::value::any(string(status.message)),
                );
            }
        }
        span.attributes = attributes;
        Mapped::Span(Box::new(span))
    };
    // Fields outside the three parts (none in the exporters' events) stay attributes.
    let extra: Vec<KeyValue> = fields;
    let mut cs = CsEvent {
        mapped,
        resource: a.resource,
    };
    match &mut cs.mapped {
        Mapped::Log(r) => extra.into_iter().for_each(|f| add(&mut r.attributes, f)),
        Mapped::Span(s) => extra.into_iter().for_each(|f| add(&mut s.attributes, f)),
    }
    Ok(cs)
}

/// What `PartA` says.
#[derive(Default)]
struct PartA {
    time: Option<u64>,
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
    resource: Vec<KeyValue>,
}

impl PartA {
    fn take(&mut self, f: KeyValue, attributes: &mut Vec<KeyValue>) {
        let s = str_of(&f);
        match f.key.as_str() {
            "time" => match s.and_then(parse_time) {
                Some(t) => self.time = Some(t),
                None => add(attributes, f),
            },
            "ext_dt_traceId" => match s
                .and_then(|s| hex_id::<16>(s.as_bytes()))
                .map(|id| id.to_vec())
            {
                Some(id) => self.trace_id = id,
                None => add(attributes, f),
            },
            "ext_dt_spanId" => match s
                .and_then(|s| hex_id::<8>(s.as_bytes()))
                .map(|id| id.to_vec())
            {
                Some(id) => self.span_id = id,
                None => add(attributes, f),
            },
            "ext_cloud_role" if s.is_some() => self.resource.push(rename(f, "service.name")),
            "ext_cloud_roleInstance" if s.is_some() => {
                self.resource.push(rename(f, "service.instance.id"))
            }
            _ => add(attributes, f),
        }
    }
}

/// One `PartB` field of a `Log` event.
fn log_part_b(record: &mut LogRecord, f: KeyValue, attributes: &mut Vec<KeyValue>) {
    match f.key.as_str() {
        "_typeName" => {}
        "body" => record.body = f.value,
        "severityNumber" => match int_of(&f).and_then(|n| i32::try_from(n).ok()) {
            Some(n) => record.severity_number = n,
            None => add(attributes, f),
        },
        "severityText" if str_of(&f).is_some() => {
            record.severity_text = str_of(&f).unwrap_or_default().to_owned()
        }
        // The exporter moves the `event_id` attribute here.
        "eventId" => add(attributes, rename(f, "event_id")),
        "name" if str_of(&f).is_some() => {
            record.event_name = str_of(&f).unwrap_or_default().to_owned()
        }
        _ => add(attributes, f),
    }
}

/// One `PartB` field of a `Span` event; `failed` is set by `success` = false.
fn span_part_b(span: &mut Span, f: KeyValue, attributes: &mut Vec<KeyValue>, failed: &mut bool) {
    let s = str_of(&f);
    match f.key.as_str() {
        "_typeName" => {}
        "name" if s.is_some() => span.name = s.unwrap_or_default().to_owned(),
        "startTime" => match s.and_then(parse_time) {
            Some(t) => span.start_time_unix_nano = t,
            None => add(attributes, f),
        },
        "success" => match value_of(&f) {
            Some(V::BoolValue(ok)) => *failed = !ok,
            _ => add(attributes, f),
        },
        // Common Schema kinds 0..=4 (internal, server, client, producer, consumer) are
        // OTLP's 1..=5.
        "kind" => match int_of(&f).filter(|k| (0..=4).contains(k)) {
            Some(k) => span.kind = k as i32 + 1,
            None => add(attributes, f),
        },
        "parentId" => match s
            .and_then(|s| hex_id::<8>(s.as_bytes()))
            .map(|id| id.to_vec())
        {
            Some(id) => span.parent_span_id = id,
            None => add(attributes, f),
        },
        "links" => match s.and_then(parse_links) {
            Some(links) => span.links = links,
            None => add(attributes, f),
        },
        "statusMessage" if s.is_some() => {
            span.status.get_or_insert_with(Status::default).message =
                s.unwrap_or_default().to_owned()
        }
        key => match WELL_KNOWN.iter().find(|(cs, _)| *cs == key) {
            Some((_, name)) => add(attributes, rename(f, name)),
            None => add(attributes, f),
        },
    }
}

/// The exporter's `links`.
fn parse_links(text: &str) -> Option<Vec<Link>> {
    let mut links = Vec::new();
    let ok = for_each_link(text, |trace_id, span_id| {
        links.push(Link {
            trace_id: trace_id.to_vec(),
            span_id: span_id.to_vec(),
            ..Default::default()
        })
    });
    ok.then_some(links)
}

/// Remove the struct field `name` from `fields`; its members (none when absent or not a
/// struct, which then stays where it is).
fn take_part(fields: &mut Vec<KeyValue>, name: &str) -> Vec<KeyValue> {
    let Some(i) = fields
        .iter()
        .position(|f| f.key == name && matches!(value_of(f), Some(V::KvlistValue(_))))
    else {
        return Vec::new();
    };
    match fields.remove(i).value.and_then(|v| v.value) {
        Some(V::KvlistValue(list)) => list.values,
        _ => Vec::new(),
    }
}

fn value_of(f: &KeyValue) -> Option<&V> {
    f.value.as_ref().and_then(|v| v.value.as_ref())
}

fn str_of(f: &KeyValue) -> Option<&str> {
    match value_of(f) {
        Some(V::StringValue(s)) => Some(s),
        _ => None,
    }
}

fn int_of(f: &KeyValue) -> Option<i64> {
    match value_of(f) {
        Some(V::IntValue(i)) => Some(*i),
        _ => None,
    }
}

fn rename(f: KeyValue, key: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        ..f
    }
}

fn add(attributes: &mut Vec<KeyValue>, f: KeyValue) {
    push_unique(
        attributes,
        f.key,
        f.value.unwrap_or(AnyValue { value: None }),
    );
}
