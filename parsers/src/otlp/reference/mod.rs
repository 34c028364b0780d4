//! The message-type path `--format otlp` had before the direct writer: records become
//! `opentelemetry-proto` messages (`LogRecord`, `Span`, `KeyValue`, …) serialized by its
//! serde mapping. Kept for the tests only, as the reference the direct writer must
//! equal value for value (`super::tests`). Two changes from the original: keys added
//! after the fields (the sample's attributes, `uevrec.error`, `uevrec.errors`,
//! `statusMessage`) are made unique like the others (the original could repeat a key,
//! which OTLP forbids), and the shared rules (limits, Common Schema tables and parsers)
//! are the direct writer's.

mod common_schema;
mod value;

use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
use opentelemetry_proto::tonic::common::v1::{InstrumentationScope, KeyValue, KeyValueList};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::resource::v1::Resource;
use serde::Serialize;

use super::metrics;
use super::{
    MAX_AGE_NS, MAX_BYTES, MAX_RECORDS, SEVERITY_DEBUG, SEVERITY_ERROR, SEVERITY_FATAL,
    SEVERITY_INFO, SEVERITY_WARN,
};
use crate::decode::Endian;
use crate::eventheader::metadata::split_event_name;
use crate::eventheader::{Enumerator, TracepointName, parse_event};
use crate::json_line::{LineOptions, PreparedFormat, RecordStamp};
use common_schema::{CsEvent, Mapped};
use value::{any, kv, push_unique, string, unsigned};

/// The scope of uevrec's own records (lost counts, notices).
const UEVREC_SCOPE: &str = "uevrec";

/// The three request types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signal {
    Logs,
    Spans,
    Metrics,
}

/// Records of one signal waiting for their line.
#[derive(Debug, Default)]
struct Pending {
    /// By resource and scope (metrics: one group of whole `ResourceMetrics`).
    groups: Vec<Group>,
    records: usize,
    bytes: usize,
    /// Record time of the first record waiting.
    since: Option<u64>,
}

/// Records sharing a resource and a scope: their JSON, comma-separated.
#[derive(Debug)]
struct Group {
    resource: Vec<KeyValue>,
    scope: String,
    json: Vec<u8>,
}

/// Writes OTLP/JSON request lines into a caller-owned buffer (the OTLP counterpart of
/// [`crate::LineWriter`], with the same entry points).
#[derive(Debug, Default)]
pub(crate) struct OtlpWriter {
    opts: LineOptions,
    /// `host.name` of every resource, when known.
    host: Option<String>,
    logs: Pending,
    spans: Pending,
    metrics: Pending,
    scratch: Vec<u8>,
}

/// What every record of an event carries besides its own data.
struct Origin<'a> {
    stamp: &'a RecordStamp,
    /// `system:event`.
    tracepoint: &'a str,
    eventheader: Option<(TracepointName<'a>, u8)>,
}

impl OtlpWriter {
    /// A writer with these options (`endian` applies; `include_common` does not:
    /// OTLP records carry the sample's pid, tid and cpu as attributes instead).
    pub(crate) fn new(opts: LineOptions) -> Self {
        OtlpWriter {
            opts,
            ..Default::default()
        }
    }

    /// Put `host.name` = `name` in every record's resource from now on.
    pub(crate) fn set_host_name(&mut self, name: &str) {
        self.host = Some(name.to_owned());
    }

    /// Take one record of the event `prepared` (its trace entry `raw`); a line is
    /// appended to `out` when one is due.
    pub(crate) fn write_prepared(
        &mut self,
        out: &mut Vec<u8>,
        stamp: &RecordStamp,
        prepared: &PreparedFormat,
        raw: &[u8],
    ) {
        let tracepoint = format!("{}:{}", prepared.system(), prepared.event());
        let time = stamp.time_unix_ns.unwrap_or(0);
        if let Some(tp) = prepared.eventheader() {
            return self.eventheader(out, stamp, &tracepoint, tp, raw);
        }
        let origin = Origin {
            stamp,
            tracepoint: &tracepoint,
            eventheader: None,
        };
        if metrics::is_metrics_event(prepared) {
            match metrics::decode(prepared.format(), raw, self.endian()) {
                Ok((request, _)) => {
                    for rm in &request.resource_metrics {
                        self.add(out, Signal::Metrics, &[], "", stamp.time_unix_ns, |json| {
                            metrics::to_json(json, rm)
                        });
                    }
                    return;
                }
                Err(e) => {
                    let mut attributes = self.plain_fields(prepared, raw);
                    push_unique(&mut attributes, "uevrec.error".into(), any(string(e)));
                    add_origin(&mut attributes, &origin);
                    let record = event_record(&origin, prepared.event(), attributes);
                    return self.add_log(out, prepared.system(), time, &[], &record);
                }
            }
        }
        let mut attributes = self.plain_fields(prepared, raw);
        add_origin(&mut attributes, &origin);
        let record = event_record(&origin, prepared.event(), attributes);
        self.add_log(out, prepared.system(), time, &[], &record);
    }

    /// Append a log record saying the kernel dropped `lost` records on `cpu`
    /// (event name `uevrec.lost`, severity WARN, attribute `uevrec.lost.count`).
    pub(crate) fn write_lost(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        cpu: u32,
        lost: u64,
    ) {
        let time = time_unix_ns.unwrap_or(0);
        let record = LogRecord {
            time_unix_nano: time,
            observed_time_unix_nano: time,
            severity_number: SEVERITY_WARN,
            severity_text: "WARN".into(),
            event_name: "uevrec.lost".into(),
            body: Some(any(string(format!(
                "{lost} records lost on CPU {cpu}: the ring buffer was full \
                 (a larger --buffer-size or a faster output helps)"
            )))),
            attributes: vec![
                kv("uevrec.lost.count", unsigned(lost)),
                kv("cpu.logical_number", V::IntValue(i64::from(cpu))),
            ],
            ..Default::default()
        };
        self.add_log(out, UEVREC_SCOPE, time, &[], &record);
    }

    /// Append a log record for a notice (event name `uevrec.notice`, severity INFO;
    /// attributes `uevrec.notice.what` and `uevrec.notice.event`).
    pub(crate) fn write_notice(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        what: &str,
        event: Option<&str>,
        message: &str,
    ) {
        let time = time_unix_ns.unwrap_or(0);
        let mut attributes = vec![kv("uevrec.notice.what", string(what))];
        if let Some(event) = event {
            attributes.push(kv("uevrec.notice.event", string(event)));
        }
        let record = LogRecord {
            time_unix_nano: time,
            observed_time_unix_nano: time,
            severity_number: SEVERITY_INFO,
            severity_text: "INFO".into(),
            event_name: "uevrec.notice".into(),
            body: Some(any(string(message))),
            attributes,
            ..Default::default()
        };
        self.add_log(out, UEVREC_SCOPE, time, &[], &record);
    }

    /// Append every waiting record to `out` as complete lines (one per signal waiting).
    pub(crate) fn end_lines(&mut self, out: &mut Vec<u8>) {
        for signal in [Signal::Logs, Signal::Spans, Signal::Metrics] {
            self.emit(out, signal);
        }
    }

    fn endian(&self) -> Endian {
        self.opts.endian
    }

    /// A plain event's fields as attributes; fields that fail to decode are left out
    /// and explained in the `uevrec.errors` map.
    fn plain_fields(&mut self, prepared: &PreparedFormat, raw: &[u8]) -> Vec<KeyValue> {
        let mut attributes = Vec::with_capacity(prepared.format().fields.len() + 6);
        let mut errors = Vec::new();
        let endian = self.endian();
        for field in &prepared.format().fields {
            match value::plain_value(&mut self.scratch, field, raw, endian) {
                Ok(v) => value::push_unique(&mut attributes, field.name.clone(), v),
                Err(e) => push_unique(&mut errors, field.name.clone(), any(string(e))),
            }
        }
        if !errors.is_empty() {
            push_unique(
                &mut attributes,
                "uevrec.errors".into(),
                any(V::KvlistValue(KeyValueList { values: errors })),
            );
        }
        attributes
    }

    /// An EventHeader event: a Common Schema log or span, else a log record of its
    /// fields.
    fn eventheader(
        &mut self,
        out: &mut Vec<u8>,
        stamp: &RecordStamp,
        tracepoint: &str,
        tp: TracepointName<'_>,
        raw: &[u8],
    ) {
        let time = stamp.time_unix_ns.unwrap_or(0);
        let data = raw.get(8..).unwrap_or_default();
        let parts = parse_event(data);
        let level = parts.as_ref().map_or(tp.level, |p| p.header.level);
        let origin = Origin {
            stamp,
            tracepoint,
            eventheader: Some((tp, level)),
        };
        let walk = match &parts {
            Ok(p) => match p.metadata {
                Some(meta) => Enumerator::new(meta, p.payload, p.header.endian())
                    .map_err(|e| format!("bad metadata: {e}")),
                None => Err("no metadata block: the payload cannot be decoded".to_string()),
            },
            Err(e) => Err(format!("bad EventHeader: {e}")),
        };
        let mut e = match walk {
            Ok(e) => e,
            Err(message) => {
                let mut attributes = vec![kv("uevrec.error", string(message))];
                add_origin(&mut attributes, &origin);
                let record = event_record(&origin, tp.provider, attributes);
                return self.add_log(out, tp.provider, time, &[], &record);
            }
        };
        let (name, _) = split_event_name(e.event_name());
        let name = String::from_utf8_lossy(name).into_owned();
        let (fields, error) = value::eventheader_fields(&mut self.scratch, &mut e);
        let fields = match error {
            // A Common Schema event decodes whole or is shown as the fields it has.
            None => match common_schema::map(fields, time) {
                Ok(cs) => return self.common_schema(out, &origin, tp.provider, cs),
                Err(fields) => fields,
            },
            Some(_) => fields,
        };
        let mut attributes = fields;
        if let Some(message) = error {
            push_unique(&mut attributes, "uevrec.error".into(), any(string(message)));
        }
        add_origin(&mut attributes, &origin);
        let record = event_record(&origin, &name, attributes);
        self.add_log(out, tp.provider, time, &[], &record);
    }

    /// A mapped Common Schema record, scope = the provider.
    fn common_schema(&mut self, out: &mut Vec<u8>, origin: &Origin<'_>, scope: &str, cs: CsEvent) {
        let time = origin.stamp.time_unix_ns;
        match cs.mapped {
            Mapped::Log(mut record) => {
                add_origin(&mut record.attributes, origin);
                self.add_log(out, scope, time.unwrap_or(0), &cs.resource, &record);
            }
            Mapped::Span(mut span) => {
                add_origin(&mut span.attributes, origin);
                self.add(out, Signal::Spans, &cs.resource, scope, time, |json| {
                    to_json(json, &span)
                });
            }
        }
    }

    fn add_log(
        &mut self,
        out: &mut Vec<u8>,
        scope: &str,
        time: u64,
        resource: &[KeyValue],
        record: &LogRecord,
    ) {
        let time = (time != 0).then_some(time);
        self.add(out, Signal::Logs, resource, scope, time, |json| {
            to_json(json, record)
        });
    }

    fn pending(&mut self, signal: Signal) -> &mut Pending {
        match signal {
            Signal::Logs => &mut self.logs,
            Signal::Spans => &mut self.spans,
            Signal::Metrics => &mut self.metrics,
        }
    }

    /// Add one record (`write` appends its JSON) of `signal` to the group of `resource`
    /// (plus `host.name`) and `scope`, ending lines that are due.
    fn add(
        &mut self,
        out: &mut Vec<u8>,
        signal: Signal,
        resource: &[KeyValue],
        scope: &str,
        time: Option<u64>,
        write: impl FnOnce(&mut Vec<u8>),
    ) {
        if let Some(t) = time {
            for s in [Signal::Logs, Signal::Spans, Signal::Metrics] {
                if self
                    .pending(s)
                    .since
                    .is_some_and(|since| t.saturating_sub(since) >= MAX_AGE_NS)
                {
                    self.emit(out, s);
                }
            }
        }
        let host = self.host.clone();
        let p = self.pending(signal);
        let found = p.groups.iter().position(|g| {
            g.scope == scope
                && g.resource.len() == resource.len() + usize::from(host.is_some())
                && g.resource.starts_with(resource)
        });
        let group = match found {
            Some(i) => &mut p.groups[i],
            None => {
                let mut attributes = resource.to_vec();
                if let Some(host) = host {
                    attributes.push(kv("host.name", string(host)));
                }
                p.groups.push(Group {
                    resource: attributes,
                    scope: scope.to_owned(),
                    json: Vec::new(),
                });
                let last = p.groups.len() - 1;
                &mut p.groups[last]
            }
        };
        let before = group.json.len();
        if before > 0 {
            group.json.push(b',');
        }
        write(&mut group.json);
        p.bytes += group.json.len() - before;
        p.records += 1;
        if p.since.is_none() {
            p.since = time;
        }
        if p.records >= MAX_RECORDS || p.bytes >= MAX_BYTES {
            self.emit(out, signal);
        }
    }

    /// Append the line of `signal`'s waiting records (if any) to `out`.
    fn emit(&mut self, out: &mut Vec<u8>, signal: Signal) {
        let p = std::mem::take(self.pending(signal));
        if p.groups.is_empty() {
            return;
        }
        out.reserve(p.bytes + 256 * p.groups.len());
        let (resources, scopes, records) = match signal {
            Signal::Logs => ("resourceLogs", "scopeLogs", "logRecords"),
            Signal::Spans => ("resourceSpans", "scopeSpans", "spans"),
            Signal::Metrics => {
                out.extend_from_slice(b"{\"resourceMetrics\":[");
                for g in &p.groups {
                    out.extend_from_slice(&g.json);
                }
                out.extend_from_slice(b"]}\n");
                return;
            }
        };
        out.extend_from_slice(format!("{{\"{resources}\":[").as_bytes());
        for (i, g) in p.groups.into_iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"resource\":");
            to_json(
                out,
                &Resource {
                    attributes: g.resource,
                    ..Default::default()
                },
            );
            out.extend_from_slice(format!(",\"{scopes}\":[{{\"scope\":").as_bytes());
            to_json(
                out,
                &InstrumentationScope {
                    name: g.scope,
                    ..Default::default()
                },
            );
            out.extend_from_slice(format!(",\"{records}\":[").as_bytes());
            out.extend_from_slice(&g.json);
            out.extend_from_slice(b"]}]}");
        }
        out.extend_from_slice(b"]}\n");
    }
}

/// Serialize `value` (an OTLP message) as OTLP/JSON onto `out`.
fn to_json(out: &mut Vec<u8>, value: &impl Serialize) {
    // Writing to a Vec cannot fail, and the messages have only string keys.
    let _ = serde_json::to_writer(out, value);
}

/// A log record for an event that is not a Common Schema one: time = observed time =
/// the sample's, the EventHeader level as severity, `event_name` = `name`.
fn event_record(origin: &Origin<'_>, name: &str, attributes: Vec<KeyValue>) -> LogRecord {
    let time = origin.stamp.time_unix_ns.unwrap_or(0);
    let (severity_number, severity_text) = match origin.eventheader {
        Some((_, level)) => severity_of_level(level),
        None => (0, ""),
    };
    LogRecord {
        time_unix_nano: time,
        observed_time_unix_nano: time,
        severity_number,
        severity_text: severity_text.into(),
        event_name: name.into(),
        attributes,
        ..Default::default()
    }
}

/// OTLP severity of an EventHeader level (1 critical … 5 verbose; others unspecified).
fn severity_of_level(level: u8) -> (i32, &'static str) {
    match level {
        1 => (SEVERITY_FATAL, "FATAL"),
        2 => (SEVERITY_ERROR, "ERROR"),
        3 => (SEVERITY_WARN, "WARN"),
        4 => (SEVERITY_INFO, "INFO"),
        5 => (SEVERITY_DEBUG, "DEBUG"),
        _ => (0, ""),
    }
}

/// The sample's and the tracepoint's attributes, under semantic-convention names where
/// there are some: `process.pid`, `thread.id`, `cpu.logical_number`,
/// `linux.tracepoint` (`system:event`), and for EventHeader events
/// `eventheader.level` and `eventheader.keyword`.
fn add_origin(attributes: &mut Vec<KeyValue>, origin: &Origin<'_>) {
    let s = origin.stamp;
    let mut add = |key: &str, v| push_unique(attributes, key.into(), any(v));
    add("process.pid", V::IntValue(i64::from(s.pid)));
    add("thread.id", V::IntValue(i64::from(s.tid)));
    add("cpu.logical_number", V::IntValue(i64::from(s.cpu)));
    add("linux.tracepoint", string(origin.tracepoint));
    if let Some((tp, level)) = origin.eventheader {
        add("eventheader.level", V::IntValue(i64::from(level)));
        add("eventheader.keyword", unsigned(tp.keyword));
    }
}

mod tests;
