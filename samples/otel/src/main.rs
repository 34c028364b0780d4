//! OpenTelemetry logs, spans and metrics written to user_events by the real exporters:
//! `opentelemetry-user-events-logs` (tracepoints `<NAME>Logs_L1K1` … `_L5K1`, event
//! `Log`) and `opentelemetry-user-events-trace` (`<NAME>Spans_L4K1`, event `Span`), both
//! EventHeader with Common Schema 4.0 fields; with `--metrics`, also
//! `opentelemetry-user-events-metrics` (the plain user_event `otlp_metrics`, one OTLP
//! protobuf request per data point): a counter, a gauge and a histogram.
//!
//! ```text
//! otel [--name NAME] [--count N] [START OPTIONS]
//! ```
//! Within a server span (with a child client span that links elsewhere and fails), logs
//! one record per severity (fatal, error, warn, info, debug, trace) with bodies of every
//! scalar kind, attributes of every scalar kind, an event name and an event id, then
//! ends the spans and shuts both providers down.
//!
//! Report lines as the other EventHeader producers (`{"registered":..}`, one line per
//! event with the keys and `fields` uevrec must print, `{"done":..}`): times, trace and
//! span ids are all known to the producer (it sets the timestamps itself). Metrics add
//! one `{"metric":..}` line per data point the SDK was given (name, kind, unit,
//! description, attributes, value or histogram figures).

use std::time::{Duration, SystemTime};

use clap::Parser;
use eventheader_dynamic as ehd;
use opentelemetry::logs::{AnyValue, LogRecord, Logger, LoggerProvider, Severity};
use opentelemetry::metrics::MeterProvider;
use opentelemetry::trace::{
    Link, Span, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId,
    TraceState, Tracer, TracerProvider,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::logs::SdkLoggerProvider;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use serde_json::{Map, Value, json};
use uevrec_samples::eh::{Written, float, rfc3339_nanos};
use uevrec_samples::{Flags, StartArgs, UserEvents, command, fail, report};

#[derive(Parser)]
#[command(about = "Write OpenTelemetry logs and spans through the user_events exporters")]
struct Args {
    /// Name prefix: the providers are `<NAME>Logs` and `<NAME>Spans`.
    #[arg(long, default_value = "UevrecOtel")]
    name: String,
    /// Repeat the whole scenario this many times.
    #[arg(long, default_value_t = 1)]
    count: u64,
    /// Also record metrics (counter, gauge, histogram) through the metrics exporter,
    /// exported once when the meter provider shuts down.
    #[arg(long)]
    metrics: bool,
    #[command(flatten)]
    start: StartArgs,
}

const SERVICE: &str = "uevrec-otel";
const INSTANCE: &str = "instance-1";
/// Base of every timestamp the producer sets (2024-03-28T00:45:12Z).
const T0: u64 = 1_711_586_712;

fn at(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(T0 * 1000 + ms)
}

fn time_text(t: SystemTime) -> String {
    let d = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970");
    rfc3339_nanos(d.as_secs() as i64, d.subsec_nanos())
}

/// One log record to write: severity, body, attributes.
struct LogCase {
    severity: Severity,
    text: &'static str,
    body: AnyValue,
    body_json: Value,
    event_name: &'static str,
    event_id: Option<i64>,
}

fn log_cases() -> Vec<LogCase> {
    let s = |v: &str| AnyValue::String(v.to_string().into());
    vec![
        LogCase {
            severity: Severity::Fatal,
            text: "FATAL",
            body: s("disk on fire: \"/dev/sda\" é 🦀\n"),
            body_json: json!("disk on fire: \"/dev/sda\" é 🦀\n"),
            event_name: "disk-fire",
            event_id: Some(42),
        },
        LogCase {
            severity: Severity::Error,
            text: "ERROR",
            body: AnyValue::Int(-7),
            body_json: json!(-7),
            event_name: "int-body",
            event_id: None,
        },
        LogCase {
            severity: Severity::Warn,
            text: "WARN",
            body: AnyValue::Double(0.25),
            body_json: float(0.25),
            event_name: "double-body",
            event_id: Some(-1),
        },
        LogCase {
            severity: Severity::Info,
            text: "INFO",
            body: AnyValue::Boolean(true),
            body_json: json!(true),
            event_name: "bool-body",
            event_id: None,
        },
        LogCase {
            severity: Severity::Debug,
            text: "DEBUG",
            body: s(""),
            body_json: json!(""),
            event_name: "empty-body",
            event_id: None,
        },
        LogCase {
            severity: Severity::Trace,
            text: "TRACE",
            body: s("trace level"),
            body_json: json!("trace level"),
            event_name: "trace",
            event_id: None,
        },
    ]
}

/// EventHeader level the logs exporter uses for `severity`.
fn level_of(severity: Severity) -> u8 {
    match severity as i32 {
        1..=8 => 5,
        9..=12 => 4,
        13..=16 => 3,
        17..=20 => 2,
        _ => 1,
    }
}

fn main() {
    let args = Args::parse();
    let logs_name = format!("{}Logs", args.name);
    let spans_name = format!("{}Spans", args.name);
    let resource = || {
        Resource::builder_empty()
            .with_service_name(SERVICE)
            .with_attribute(KeyValue::new("service.instance.id", INSTANCE))
            .build()
    };
    let log_processor = opentelemetry_user_events_logs::Processor::builder(&logs_name)
        .build()
        .unwrap_or_else(|e| fail(format!("logs processor: {e}")));
    let logger_provider = SdkLoggerProvider::builder()
        .with_resource(resource())
        .with_log_processor(log_processor)
        .build();
    let span_processor = opentelemetry_user_events_trace::Processor::builder(&spans_name)
        .build()
        .unwrap_or_else(|e| fail(format!("span processor: {e}")));
    let tracer_provider = SdkTracerProvider::builder()
        .with_resource(resource())
        .with_span_processor(span_processor)
        .build();
    let logger = logger_provider.logger("uevrec-otel");
    let tracer = tracer_provider.tracer("uevrec-otel");

    // The trace exporter offers no "enabled" query: a second registration of its
    // tracepoint (same name, own enable bit) tells when a recorder listens.
    let mut probe = ehd::Provider::new(&spans_name, &ehd::Provider::new_options());
    let span_set = probe.register_set(ehd::Level::Informational, 1);
    if span_set.errno() != 0 {
        fail(format!(
            "registering {spans_name}_L4K1: errno {} (needs user_events and tracefs)",
            span_set.errno()
        ));
    }
    for level in 1..=5 {
        report(&json!({"registered": format!("{logs_name}_L{level}K1")}));
    }
    report(&json!({"registered": format!("{spans_name}_L4K1")}));
    let metrics = args.metrics.then(|| Metrics::start(&resource));
    let severities = [
        Severity::Fatal,
        Severity::Error,
        Severity::Warn,
        Severity::Info,
        Severity::Debug,
    ];
    args.start.wait_for("otel", || {
        span_set.enabled()
            && severities
                .iter()
                .all(|&s| logger.event_enabled(s, "uevrec-otel", None))
            && metrics.as_ref().is_none_or(Metrics::enabled)
    });

    let mut written = 0u64;
    let mut seq = 0u64;
    let mut emit = |w: Written| {
        let mut line = w.to_json();
        line["seq"] = json!(seq);
        report(&line);
        seq += 1;
        written += 1;
    };
    let role = |m: &mut Map<String, Value>| {
        m.insert("ext_cloud_role".into(), json!(SERVICE));
        m.insert("ext_cloud_roleInstance".into(), json!(INSTANCE));
    };
    for round in 0..args.count {
        let base = round * 10_000;
        // The server span: well-known attributes go to PartB, others to PartC.
        let server_attrs = vec![
            KeyValue::new("http.request.method", "GET"),
            KeyValue::new("url.full", "https://example.test/a?b=c"),
            KeyValue::new("http.response.status_code", 200i64),
            KeyValue::new("tenant", "acme \"corp\""),
            KeyValue::new("retries", 3i64),
            KeyValue::new("ratio", 0.5f64),
            KeyValue::new("cached", false),
        ];
        let server = tracer
            .span_builder("GET /a")
            .with_kind(SpanKind::Server)
            .with_start_time(at(base))
            .with_attributes(server_attrs)
            .start(&tracer);
        let server_ctx = server.span_context().clone();
        let cx = Context::current_with_span(server);
        {
            let _guard = cx.clone().attach();
            for (i, case) in log_cases().into_iter().enumerate() {
                let mut record = logger.create_log_record();
                let ts = at(base + 100 + i as u64);
                record.set_timestamp(ts);
                record.set_severity_number(case.severity);
                record.set_severity_text(case.text);
                record.set_body(case.body);
                record.set_event_name(case.event_name);
                record.add_attribute("user", "zoë");
                record.add_attribute("attempt", 2i64);
                record.add_attribute("latency", 1.5f64);
                record.add_attribute("ok", true);
                if let Some(id) = case.event_id {
                    record.add_attribute("event_id", id);
                }
                logger.emit(record);
                let level = level_of(case.severity);
                let mut part_a = Map::new();
                part_a.insert("time".into(), json!(time_text(ts)));
                part_a.insert(
                    "ext_dt_traceId".into(),
                    json!(server_ctx.trace_id().to_string()),
                );
                part_a.insert(
                    "ext_dt_spanId".into(),
                    json!(server_ctx.span_id().to_string()),
                );
                role(&mut part_a);
                let mut part_b = Map::new();
                part_b.insert("_typeName".into(), json!("Log"));
                part_b.insert("body".into(), case.body_json);
                part_b.insert("severityNumber".into(), json!(case.severity as i32));
                part_b.insert("severityText".into(), json!(case.text));
                if let Some(id) = case.event_id {
                    part_b.insert("eventId".into(), json!(id));
                }
                part_b.insert("name".into(), json!(case.event_name));
                let w = Written::new(&logs_name, "Log", level, 1)
                    .field("__csver__", json!(1024))
                    .field("PartA", Value::Object(part_a))
                    .field(
                        "PartC",
                        json!({"user": "zoë", "attempt": 2, "latency": 1.5, "ok": true}),
                    )
                    .field("PartB", Value::Object(part_b));
                emit(w);
            }
            // A failing client child span with a link.
            let linked = SpanContext::new(
                TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").expect("trace id"),
                SpanId::from_hex("b7ad6b7169203331").expect("span id"),
                TraceFlags::SAMPLED,
                true,
                TraceState::default(),
            );
            let mut child = tracer
                .span_builder("SELECT users")
                .with_kind(SpanKind::Client)
                .with_start_time(at(base + 200))
                .with_attributes(vec![
                    KeyValue::new("db.system.name", "postgresql"),
                    KeyValue::new("rows", 0i64),
                ])
                .with_links(vec![Link::with_context(linked.clone())])
                .start(&tracer);
            child.set_status(Status::error("connection reset"));
            let child_ctx = child.span_context().clone();
            child.end_with_timestamp(at(base + 300));
            let mut part_a = Map::new();
            part_a.insert("time".into(), json!(time_text(at(base + 300))));
            part_a.insert(
                "ext_dt_traceId".into(),
                json!(child_ctx.trace_id().to_string()),
            );
            part_a.insert(
                "ext_dt_spanId".into(),
                json!(child_ctx.span_id().to_string()),
            );
            role(&mut part_a);
            let links = format!(
                r#"[{{"toTraceId":"{}","toSpanId":"{}"}}]"#,
                linked.trace_id(),
                linked.span_id()
            );
            let w = Written::new(&spans_name, "Span", 4, 1)
                .field("__csver__", json!(1024))
                .field("PartA", Value::Object(part_a))
                .field(
                    "PartB",
                    json!({
                        "_typeName": "Span",
                        "name": "SELECT users",
                        "startTime": time_text(at(base + 200)),
                        "success": false,
                        "kind": 2,
                        "parentId": server_ctx.span_id().to_string(),
                        "links": links,
                        "dbSystem": "postgresql",
                        "statusMessage": "connection reset",
                    }),
                )
                .field("PartC", json!({"rows": 0}));
            emit(w);
        }
        cx.span().end_with_timestamp(at(base + 400));
        let mut part_a = Map::new();
        part_a.insert("time".into(), json!(time_text(at(base + 400))));
        part_a.insert(
            "ext_dt_traceId".into(),
            json!(server_ctx.trace_id().to_string()),
        );
        part_a.insert(
            "ext_dt_spanId".into(),
            json!(server_ctx.span_id().to_string()),
        );
        role(&mut part_a);
        let w = Written::new(&spans_name, "Span", 4, 1)
            .field("__csver__", json!(1024))
            .field("PartA", Value::Object(part_a))
            .field(
                "PartB",
                json!({
                    "_typeName": "Span",
                    "name": "GET /a",
                    "startTime": time_text(at(base)),
                    "success": true,
                    "kind": 1,
                    "httpMethod": "GET",
                    "httpUrl": "https://example.test/a?b=c",
                    "httpStatusCode": 200,
                }),
            )
            .field(
                "PartC",
                json!({"tenant": "acme \"corp\"", "retries": 3, "ratio": 0.5, "cached": false}),
            );
        emit(w);
    }
    probe.unregister();
    if let Some(m) = metrics {
        m.finish();
    }
    if let Err(e) = tracer_provider.force_flush() {
        fail(format!("flushing spans: {e}"));
    }
    if let Err(e) = tracer_provider.shutdown() {
        fail(format!("shutting down the tracer provider: {e}"));
    }
    if let Err(e) = logger_provider.shutdown() {
        fail(format!("shutting down the logger provider: {e}"));
    }
    report(&json!({"done": "otel", "written": written}));
}

/// The metrics part: the exporter's provider and a second registration of its
/// `otlp_metrics` tracepoint (the exporter offers no "enabled" query).
struct Metrics {
    provider: SdkMeterProvider,
    // Declared before `_user_events`: dropped (unregistered) first.
    probe: uevrec_samples::Event<'static>,
    _user_events: &'static UserEvents,
}

/// The command `opentelemetry-user-events-metrics` 0.14 registers.
const METRICS_COMMAND: &str = "otlp_metrics u32 protocol;char[8] version;__rel_loc u8[] buffer;";

impl Metrics {
    fn start(resource: &dyn Fn() -> Resource) -> Metrics {
        let exporter = opentelemetry_user_events_metrics::MetricsExporter::new();
        let provider = SdkMeterProvider::builder()
            .with_resource(resource())
            .with_periodic_exporter(exporter)
            .build();
        let user_events: &'static UserEvents = Box::leak(Box::new(
            UserEvents::open().unwrap_or_else(|e| fail(format!("user_events: {e}"))),
        ));
        let probe = user_events
            .register(&command(METRICS_COMMAND), Flags::default())
            .unwrap_or_else(|e| fail(format!("registering otlp_metrics: {e}")));
        report(&json!({"registered": "otlp_metrics"}));
        Metrics {
            provider,
            probe,
            _user_events: user_events,
        }
    }

    fn enabled(&self) -> bool {
        self.probe.is_enabled()
    }

    /// Record the instruments, report each data point, shut the provider down (which
    /// exports every point once, cumulative).
    fn finish(self) {
        let meter = self.provider.meter("uevrec-otel-meter");
        let counter = meter
            .u64_counter("requests")
            .with_unit("{request}")
            .with_description("Requests served")
            .build();
        let a = [KeyValue::new("route", "/a")];
        let b = [KeyValue::new("route", "/b")];
        counter.add(3, &a);
        counter.add(4, &a);
        counter.add(1, &b);
        let gauge = meter
            .f64_gauge("temperature")
            .with_unit("Cel")
            .with_description("Room temperature")
            .build();
        gauge.record(21.5, &[KeyValue::new("room", "lab")]);
        let bounds = vec![0.15, 1.0];
        let histogram = meter
            .f64_histogram("latency")
            .with_unit("s")
            .with_description("Request latency")
            .with_boundaries(bounds.clone())
            .build();
        let values = [0.1, 0.2, 5.0];
        for v in values {
            histogram.record(v, &a);
        }
        let common = |name: &str, kind: &str, unit: &str, description: &str| {
            json!({"name": name, "kind": kind, "unit": unit, "description": description,
                   "scope": "uevrec-otel-meter"})
        };
        let point = |mut m: Value, attributes: Value, fields: Value| {
            m["attributes"] = attributes;
            for (k, v) in fields.as_object().expect("an object") {
                m[k] = v.clone();
            }
            report(&json!({"metric": m}));
        };
        let requests = common("requests", "sum", "{request}", "Requests served");
        point(
            requests.clone(),
            json!({"route": "/a"}),
            json!({"asInt": 7, "monotonic": true}),
        );
        point(
            requests,
            json!({"route": "/b"}),
            json!({"asInt": 1, "monotonic": true}),
        );
        point(
            common("temperature", "gauge", "Cel", "Room temperature"),
            json!({"room": "lab"}),
            json!({"asDouble": 21.5}),
        );
        point(
            common("latency", "histogram", "s", "Request latency"),
            json!({"route": "/a"}),
            json!({"count": 3, "sum": values.iter().sum::<f64>(), "min": 0.1, "max": 5.0,
                   "explicitBounds": bounds, "bucketCounts": [1, 1, 1]}),
        );
        if let Err(e) = self.provider.shutdown() {
            fail(format!("shutting down the meter provider: {e}"));
        }
        drop(self.probe);
    }
}
