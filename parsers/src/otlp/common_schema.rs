//! OpenTelemetry Common Schema 4.0 events (what the `opentelemetry-user-events-logs`
//! and `-trace` exporters write) → an OTLP `LogRecord` or `Span`, undoing the
//! exporters' mapping: `PartA` {`time`, `ext_dt_traceId`, `ext_dt_spanId`,
//! `ext_cloud_role`, `ext_cloud_roleInstance`}, `PartB` (`_typeName` `Log` or `Span`
//! and the record's own fields), `PartC` (the attributes). Fields this mapping does not
//! know, and known ones whose value does not parse (a bad id, a bad time), stay
//! attributes under their Common Schema names: nothing is dropped.

use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::trace::v1::{Span, Status, span::Link};

use super::value::{kv, push_unique, string};

/// `__csver__` of Common Schema 4.0.
const CS_VERSION: i64 = 1024;

/// The exporters' PartB names of well-known span attributes → their semantic-convention
/// names (the reverse of `opentelemetry-user-events-trace`'s table).
const WELL_KNOWN: &[(&str, &str)] = &[
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

/// OTLP `STATUS_CODE_ERROR`.
const STATUS_ERROR: i32 = 2;

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
                attributes.push(kv("statusMessage", string(status.message)));
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
            "ext_dt_traceId" => match s.and_then(|s| hex_id(s, 16)) {
                Some(id) => self.trace_id = id,
                None => add(attributes, f),
            },
            "ext_dt_spanId" => match s.and_then(|s| hex_id(s, 8)) {
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
        "parentId" => match s.and_then(|s| hex_id(s, 8)) {
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

/// The exporter's `links`: `[{"toTraceId":"<32 hex>","toSpanId":"<16 hex>"},…]`.
fn parse_links(text: &str) -> Option<Vec<Link>> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct CsLink {
        to_trace_id: String,
        to_span_id: String,
    }
    let links: Vec<CsLink> = serde_json::from_str(text).ok()?;
    links
        .into_iter()
        .map(|l| {
            Some(Link {
                trace_id: hex_id(&l.to_trace_id, 16)?,
                span_id: hex_id(&l.to_span_id, 8)?,
                ..Default::default()
            })
        })
        .collect()
}

/// An RFC 3339 time (`…Z`, up to 9 fractional digits) as nanoseconds since the epoch.
fn parse_time(text: &str) -> Option<u64> {
    let t = humantime::parse_rfc3339(text).ok()?;
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    u64::try_from(d.as_nanos()).ok()
}

/// `n` bytes from `2n` hex digits.
fn hex_id(text: &str, n: usize) -> Option<Vec<u8>> {
    if text.len() != 2 * n {
        return None;
    }
    (0..n)
        .map(|i| u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::KeyValueList;

    fn part(name: &str, values: Vec<KeyValue>) -> KeyValue {
        kv(name, V::KvlistValue(KeyValueList { values }))
    }

    fn span_event(part_b: Vec<KeyValue>) -> Vec<KeyValue> {
        vec![
            kv("__csver__", V::IntValue(1024)),
            part(
                "PartA",
                vec![
                    kv("time", string("2024-03-28T00:45:12.3Z")),
                    kv("ext_dt_traceId", string("0af7651916cd43dd8448eb211c80319c")),
                    kv("ext_dt_spanId", string("b7ad6b7169203331")),
                    kv("ext_cloud_role", string("svc")),
                ],
            ),
            part("PartB", part_b),
            part("PartC", vec![kv("rows", V::IntValue(0))]),
        ]
    }

    #[test]
    fn a_span_maps_back() {
        let fields = span_event(vec![
            kv("_typeName", string("Span")),
            kv("name", string("SELECT")),
            kv("startTime", string("2024-03-28T00:45:12.2Z")),
            kv("success", V::BoolValue(false)),
            kv("kind", V::IntValue(2)),
            kv("parentId", string("00f067aa0ba902b7")),
            kv(
                "links",
                string(
                    r#"[{"toTraceId":"0af7651916cd43dd8448eb211c80319c","toSpanId":"00f067aa0ba902b7"}]"#,
                ),
            ),
            kv("dbSystem", string("postgresql")),
            kv("statusMessage", string("reset")),
        ]);
        let cs = map(fields, 9).unwrap();
        assert_eq!(cs.resource, vec![kv("service.name", string("svc"))]);
        let Mapped::Span(span) = cs.mapped else {
            panic!("not a span")
        };
        assert_eq!(span.kind, 3);
        assert_eq!(span.start_time_unix_nano, 1_711_586_712_200_000_000);
        assert_eq!(span.end_time_unix_nano, 1_711_586_712_300_000_000);
        assert_eq!(
            span.parent_span_id,
            [0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]
        );
        assert_eq!(span.links.len(), 1);
        assert_eq!(
            span.status,
            Some(Status {
                code: STATUS_ERROR,
                message: "reset".into()
            })
        );
        let keys: Vec<&str> = span.attributes.iter().map(|a| a.key.as_str()).collect();
        assert_eq!(keys, ["rows", "db.system.name"]);
    }

    #[test]
    fn bad_ids_and_unknown_fields_stay_attributes() {
        let mut fields = span_event(vec![
            kv("_typeName", string("Span")),
            kv("parentId", string("nothex")),
            kv("other", V::BoolValue(true)),
        ]);
        fields.push(kv("outside", V::IntValue(1)));
        let Mapped::Span(span) = map(fields, 0).unwrap().mapped else {
            panic!("not a span")
        };
        let keys: Vec<&str> = span.attributes.iter().map(|a| a.key.as_str()).collect();
        assert_eq!(keys, ["rows", "parentId", "other", "outside"]);
        assert_eq!(span.status, None);
    }

    #[test]
    fn other_events_are_given_back() {
        let fields = vec![kv("__csver__", V::IntValue(1024)), kv("x", V::IntValue(1))];
        assert_eq!(map(fields.clone(), 0).unwrap_err(), fields);
        let no_type = span_event(vec![kv("name", string("x"))]);
        assert!(map(no_type, 0).is_err());
    }
}
