//! Tier 3: `uevrec record --otlp-endpoint http://127.0.0.1:PORT --otlp-protocol grpc` on
//! the OpenTelemetry user_events exporters (`samples/otel` with `--metrics`: logs at every
//! severity with attributes and trace context, spans with attributes, a link and a status,
//! a counter, a gauge and a histogram through `opentelemetry-user-events-metrics`), on a
//! real kernel, delivered to a real gRPC collector service.
//!
//! The collector is the test receiver of tests/common/otlp_receiver.rs (tonic's generated
//! `LogsService`/`TraceService`/`MetricsService` of `opentelemetry-proto`): the test
//! binary itself runs inside the VM (scripts/vm-test.sh), so the receiver listens on the
//! guest's 127.0.0.1 in the test process.
//!
//! One producer run is recorded by two (three) uevrec processes at once: `--format otlp`
//! into a file (the OTLP/JSON path of tests/vm/otlp.rs) and `--otlp-endpoint` over gRPC
//! (and, where `record` has `--threads`, a second gRPC export with `--threads 2`). Then:
//! 1. every value the receiver decoded is what the producer gave the SDK (its report
//!    lines), checked on the protobuf messages;
//! 2. the OTLP/JSON lines, parsed with `opentelemetry-proto`'s serde types, are the same
//!    messages as the gRPC path's, record for record (resource, scope, record; uevrec's
//!    own `uevrec` scope aside; a log record's observed time, which each recorder takes
//!    from its own clock conversion, compared within 1 s);
//! 3. the end-of-run summary says every record was acknowledged, none dropped or queued,
//!    per tracepoint too.
//!
//! Elsewhere it skips saying so, or fails when `UEVREC_REQUIRE_TIERS` names the vm tier.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, any_value};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::metrics::v1::{Metric, metric, number_data_point};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{Span, status::StatusCode};
use serde_json::Value;
use uevrec_samples::wait_until;

use crate::common::KillOnDrop;
use crate::common::otlp_receiver::{Kind, Receiver};
use crate::common::vm::{
    self, interrupt_and_wait, kill_if_running, spawn_sample, user_events_here,
};

/// How long the producer and the deliveries may take (TCG guests are slow).
const TIMEOUT: Duration = Duration::from_secs(180);
/// The producer's name prefix: providers `<NAME>Logs` and `<NAME>Spans`.
const NAME: &str = "UevrecExport";
/// The scope of the producer's metrics (samples/otel).
const METER: &str = "uevrec-otel-meter";
/// The scope of uevrec's own records (notices, lost counts).
const UEVREC_SCOPE: &str = "uevrec";

/// One record with where it came from (its resource and scope, schema URLs included).
#[derive(Clone, Debug, PartialEq)]
struct Item<T> {
    resource: Option<Resource>,
    resource_schema_url: String,
    scope: Option<InstrumentationScope>,
    scope_schema_url: String,
    record: T,
}

impl<T> Item<T> {
    fn scope_name(&self) -> &str {
        self.scope.as_ref().map_or("", |s| s.name.as_str())
    }
}

/// What one path delivered, flattened to records.
#[derive(Debug, Default)]
struct Delivered {
    logs: Vec<Item<LogRecord>>,
    spans: Vec<Item<Span>>,
    metrics: Vec<Item<Metric>>,
}

impl Delivered {
    fn add_logs(&mut self, req: &ExportLogsServiceRequest) {
        for rl in &req.resource_logs {
            for sl in &rl.scope_logs {
                for r in &sl.log_records {
                    self.logs.push(Item {
                        resource: rl.resource.clone(),
                        resource_schema_url: rl.schema_url.clone(),
                        scope: sl.scope.clone(),
                        scope_schema_url: sl.schema_url.clone(),
                        record: r.clone(),
                    });
                }
            }
        }
    }

    fn add_spans(&mut self, req: &ExportTraceServiceRequest) {
        for rs in &req.resource_spans {
            for ss in &rs.scope_spans {
                for s in &ss.spans {
                    self.spans.push(Item {
                        resource: rs.resource.clone(),
                        resource_schema_url: rs.schema_url.clone(),
                        scope: ss.scope.clone(),
                        scope_schema_url: ss.schema_url.clone(),
                        record: s.clone(),
                    });
                }
            }
        }
    }

    fn add_metrics(&mut self, req: &ExportMetricsServiceRequest) {
        for rm in &req.resource_metrics {
            for sm in &rm.scope_metrics {
                for m in &sm.metrics {
                    self.metrics.push(Item {
                        resource: rm.resource.clone(),
                        resource_schema_url: rm.schema_url.clone(),
                        scope: sm.scope.clone(),
                        scope_schema_url: sm.schema_url.clone(),
                        record: m.clone(),
                    });
                }
            }
        }
    }

    /// What the gRPC receiver decoded.
    fn from_receiver(rx: &Receiver) -> Delivered {
        let mut d = Delivered::default();
        rx.logs().iter().for_each(|r| d.add_logs(r));
        rx.spans().iter().for_each(|r| d.add_spans(r));
        rx.metrics().iter().for_each(|r| d.add_metrics(r));
        d
    }

    /// The OTLP/JSON lines of `--format otlp` in `file`, each parsed with
    /// `opentelemetry-proto`'s serde types as the request its top-level key names. With
    /// `strict`, a line that does not parse fails the test; otherwise (while uevrec is
    /// still writing) it is skipped.
    fn from_json_file(file: &Path, strict: bool) -> Delivered {
        let text = fs::read_to_string(file).unwrap_or_default();
        if strict {
            assert!(
                text.is_empty() || text.ends_with('\n'),
                "{}: no final newline",
                file.display()
            );
        }
        let mut d = Delivered::default();
        for line in text.lines() {
            let parsed = (|| -> Result<(), String> {
                let v: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
                let err = |e: serde_json::Error| e.to_string();
                if v.get("resourceLogs").is_some() {
                    d.add_logs(&serde_json::from_str(line).map_err(err)?);
                } else if v.get("resourceSpans").is_some() {
                    d.add_spans(&serde_json::from_str(line).map_err(err)?);
                } else if v.get("resourceMetrics").is_some() {
                    d.add_metrics(&serde_json::from_str(line).map_err(err)?);
                } else {
                    return Err("no resourceLogs, resourceSpans or resourceMetrics".into());
                }
                Ok(())
            })();
            if let Err(e) = parsed
                && strict
            {
                panic!(
                    "{}: line is no OTLP/JSON request ({e}): {line}",
                    file.display()
                );
            }
        }
        d
    }

    /// The tracepoints uevrec said (in-band `attached` notices) it attached.
    fn attached(&self) -> BTreeSet<String> {
        self.logs
            .iter()
            .filter(|i| i.record.event_name == "uevrec.notice")
            .filter(|i| {
                string(attr(&i.record.attributes, "uevrec.notice.what")) == Some("attached")
            })
            .filter_map(|i| string(attr(&i.record.attributes, "uevrec.notice.event")))
            .map(String::from)
            .collect()
    }

    /// Without uevrec's own records (scope `uevrec`): what the producer wrote.
    fn producers_only(mut self) -> Delivered {
        self.logs.retain(|i| i.scope_name() != UEVREC_SCOPE);
        self.spans.retain(|i| i.scope_name() != UEVREC_SCOPE);
        self.metrics.retain(|i| i.scope_name() != UEVREC_SCOPE);
        self
    }
}

/// The value of attribute `key` in `attrs`.
fn attr<'a>(
    attrs: &'a [opentelemetry_proto::tonic::common::v1::KeyValue],
    key: &str,
) -> Option<&'a AnyValue> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
}

fn string(v: Option<&AnyValue>) -> Option<&str> {
    match v.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => Some(s),
        _ => None,
    }
}

/// The AnyValue of a plain JSON value as the SDK was given it.
fn any(v: &Value) -> AnyValue {
    let value = match v {
        Value::String(s) => any_value::Value::StringValue(s.clone()),
        Value::Bool(b) => any_value::Value::BoolValue(*b),
        Value::Number(n) if n.is_i64() => any_value::Value::IntValue(n.as_i64().unwrap()),
        Value::Number(n) => any_value::Value::DoubleValue(n.as_f64().unwrap()),
        other => panic!("no AnyValue for {other}"),
    };
    AnyValue { value: Some(value) }
}

/// Nanoseconds since the epoch of an RFC 3339 time.
fn nanos(text: &Value) -> u64 {
    let t = humantime::parse_rfc3339(text.as_str().expect("a time string")).unwrap();
    t.duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The resource the producer gave its providers.
fn assert_producer_resource(resource: &Option<Resource>) {
    let attrs = &resource.as_ref().expect("a resource").attributes;
    assert_eq!(
        string(attr(attrs, "service.name")),
        Some("uevrec-otel"),
        "{resource:?}"
    );
    assert_eq!(
        string(attr(attrs, "service.instance.id")),
        Some("instance-1"),
        "{resource:?}"
    );
}

/// A running `uevrec record`, its standard error in a file.
struct Recorder {
    child: KillOnDrop,
    stderr: PathBuf,
    what: String,
}

impl Recorder {
    fn spawn(what: &str, dir: &Path, args: &[&str]) -> Recorder {
        let stderr = dir.join(format!("{what}.stderr"));
        let child = Command::new(env!("CARGO_BIN_EXE_uevrec"))
            .arg("record")
            .args(args)
            // The environment must not choose for the test.
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
            .env_remove("OTEL_EXPORTER_OTLP_HEADERS")
            .stdout(Stdio::null())
            .stderr(fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("spawning uevrec");
        Recorder {
            child: KillOnDrop(child),
            stderr,
            what: what.into(),
        }
    }

    fn stderr(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// SIGINT; it must exit successfully. Returns its standard error.
    fn stop(mut self) -> String {
        interrupt_and_wait(&mut self.child, Duration::from_secs(60), &self.stderr);
        kill_if_running(&mut self.child);
        self.stderr()
    }
}

/// Whether `uevrec record` has a `--threads` flag.
fn record_has_threads() -> bool {
    let help = Command::new(env!("CARGO_BIN_EXE_uevrec"))
        .args(["record", "--help"])
        .output()
        .expect("uevrec record --help");
    String::from_utf8_lossy(&help.stdout).contains("--threads")
}

/// The per-tracepoint lines of the export summary: tracepoint → (recorded, exported,
/// dropped, queued); and the totals line's (acknowledged, dropped, still queued).
fn export_summary(stderr: &str) -> ((u64, u64, u64), BTreeMap<String, [u64; 4]>) {
    let numbers = |s: &str| -> Vec<u64> {
        s.split(|c: char| !c.is_ascii_digit())
            .filter_map(|w| w.parse().ok())
            .collect()
    };
    let mut total = None;
    let mut per = BTreeMap::new();
    for line in stderr.lines() {
        if let Some(rest) = line.strip_prefix("uevrec: export: ") {
            let n = numbers(rest);
            total = Some((n[0], n[1], n[2]));
        } else if let Some((tp, rest)) = line.trim_start().rsplit_once(": ")
            && rest.ends_with(" queued")
        {
            let n = numbers(rest);
            per.insert(tp.to_string(), [n[0], n[1], n[2], n[3]]);
        }
    }
    (
        total.unwrap_or_else(|| panic!("no export summary in:\n{stderr}")),
        per,
    )
}

/// Wait for a producer to succeed; its report lines, ending with `done`.
fn finish(child: &mut Child, reports: &Mutex<Vec<Value>>) -> Vec<Value> {
    vm::finish_sample(child, reports, "otel", TIMEOUT)
}

/// `json` and `grpc` hold the same items, each as often (a log record's observed time,
/// taken by each recorder from its own clock conversion, compared within `slack_ns` and
/// then set aside by `normalise`).
fn assert_same_items<T: Clone + PartialEq + Debug>(
    what: &str,
    json: &[Item<T>],
    grpc: &[Item<T>],
    normalise: impl Fn(&mut T) -> u64,
    slack_ns: u64,
) -> u64 {
    assert_eq!(
        json.len(),
        grpc.len(),
        "{what}: {} over OTLP/JSON, {} over gRPC\nJSON: {json:#?}\ngRPC: {grpc:#?}",
        json.len(),
        grpc.len()
    );
    let norm = |items: &[Item<T>]| -> Vec<(Item<T>, u64)> {
        items
            .iter()
            .map(|i| {
                let mut i = i.clone();
                let t = normalise(&mut i.record);
                (i, t)
            })
            .collect()
    };
    let (json, grpc) = (norm(json), norm(grpc));
    let mut used = vec![false; grpc.len()];
    let mut worst = 0;
    for (j, tj) in &json {
        let hit = grpc
            .iter()
            .enumerate()
            .find(|(k, (g, tg))| !used[*k] && g == j && tj.abs_diff(*tg) <= slack_ns);
        let Some((k, (_, tg))) = hit else {
            panic!(
                "{what}: no gRPC record equals this OTLP/JSON one:\n{j:#?}\ngRPC records:\n{grpc:#?}"
            );
        };
        used[k] = true;
        worst = worst.max(tj.abs_diff(*tg));
    }
    worst
}

/// Check every value of `d` (the gRPC path) against the producer's `reports`.
fn check_against_reports(d: &Delivered, reports: &[Value]) {
    let logs_scope = format!("{NAME}Logs");
    let spans_scope = format!("{NAME}Spans");
    let mut n_logs = 0;
    let mut n_spans = 0;
    for report in reports.iter().filter(|r| r.get("fields").is_some()) {
        let f = &report["fields"];
        let (a, b, c) = (&f["PartA"], &f["PartB"], &f["PartC"]);
        // The trace context and the PartC attributes of a record.
        let common =
            |resource: &Option<Resource>,
             trace_id: &[u8],
             span_id: &[u8],
             attrs: &[opentelemetry_proto::tonic::common::v1::KeyValue]| {
                assert_producer_resource(resource);
                assert_eq!(hex(trace_id), a["ext_dt_traceId"], "{report}");
                assert_eq!(hex(span_id), a["ext_dt_spanId"], "{report}");
                for (k, v) in c.as_object().unwrap() {
                    assert_eq!(attr(attrs, k), Some(&any(v)), "{k} of {report}");
                }
                assert!(
                    matches!(
                        attr(attrs, "process.pid").and_then(|v| v.value.as_ref()),
                        Some(any_value::Value::IntValue(_))
                    ),
                    "process.pid of {report}"
                );
            };
        if b["_typeName"] == "Log" {
            n_logs += 1;
            let hits: Vec<_> = d
                .logs
                .iter()
                .filter(|i| i.scope_name() == logs_scope && i.record.event_name == b["name"])
                .collect();
            assert_eq!(hits.len(), 1, "log records for {report}: {hits:#?}");
            let r = &hits[0].record;
            common(&hits[0].resource, &r.trace_id, &r.span_id, &r.attributes);
            assert_eq!(r.time_unix_nano, nanos(&a["time"]), "{r:?}");
            assert_ne!(r.observed_time_unix_nano, 0, "{r:?}");
            assert_eq!(
                i64::from(r.severity_number),
                b["severityNumber"].as_i64().unwrap(),
                "{r:?}"
            );
            assert_eq!(r.severity_text, b["severityText"], "{r:?}");
            assert_eq!(r.body.as_ref(), Some(&any(&b["body"])), "{r:?}");
            if let Some(id) = b.get("eventId") {
                assert_eq!(attr(&r.attributes, "event_id"), Some(&any(id)), "{r:?}");
            }
        } else {
            n_spans += 1;
            let hits: Vec<_> = d
                .spans
                .iter()
                .filter(|i| i.scope_name() == spans_scope && i.record.name == b["name"])
                .collect();
            assert_eq!(hits.len(), 1, "spans for {report}: {hits:#?}");
            let s = &hits[0].record;
            common(&hits[0].resource, &s.trace_id, &s.span_id, &s.attributes);
            assert_eq!(s.end_time_unix_nano, nanos(&a["time"]), "{s:?}");
            assert_eq!(s.start_time_unix_nano, nanos(&b["startTime"]), "{s:?}");
            assert_eq!(i64::from(s.kind), b["kind"].as_i64().unwrap() + 1, "{s:?}");
        }
    }
    assert_eq!((n_logs, n_spans), (6, 2), "{reports:?}");
    let producer_logs = d.logs.iter().filter(|i| i.scope_name() == logs_scope);
    assert_eq!(producer_logs.count(), 6, "{:#?}", d.logs);
    assert_eq!(d.spans.len(), 2, "{:#?}", d.spans);

    // What the SDK was given for the spans (samples/otel): semantic-convention names,
    // parent, link and status.
    let span = |name: &str| {
        &d.spans
            .iter()
            .find(|i| i.record.name == name)
            .unwrap()
            .record
    };
    let server = span("GET /a");
    let client = span("SELECT users");
    let sa = &server.attributes;
    assert_eq!(string(attr(sa, "http.request.method")), Some("GET"));
    assert_eq!(
        string(attr(sa, "url.full")),
        Some("https://example.test/a?b=c")
    );
    assert_eq!(
        attr(sa, "http.response.status_code"),
        Some(&any(&Value::from(200)))
    );
    assert_eq!(server.status, None, "{server:?}");
    assert_eq!(client.parent_span_id, server.span_id);
    assert_eq!(
        string(attr(&client.attributes, "db.system.name")),
        Some("postgresql")
    );
    assert_eq!(client.links.len(), 1, "{client:?}");
    assert_eq!(
        hex(&client.links[0].trace_id),
        "0af7651916cd43dd8448eb211c80319c"
    );
    assert_eq!(hex(&client.links[0].span_id), "b7ad6b7169203331");
    let status = client.status.as_ref().expect("the client span's status");
    assert_eq!(status.message, "connection reset");
    assert_eq!(status.code, StatusCode::Error as i32);

    // Metrics: each data point the SDK was given.
    let wanted: Vec<&Value> = reports.iter().filter_map(|r| r.get("metric")).collect();
    assert_eq!(wanted.len(), 4, "{reports:?}");
    let same_attrs = |got: &[opentelemetry_proto::tonic::common::v1::KeyValue], w: &Value| {
        let want = w["attributes"].as_object().unwrap();
        got.len() == want.len() && want.iter().all(|(k, v)| attr(got, k) == Some(&any(v)))
    };
    for w in wanted {
        let metrics: Vec<&Metric> = d
            .metrics
            .iter()
            .filter(|i| i.scope_name() == METER && i.record.name == w["name"])
            .inspect(|i| assert_producer_resource(&i.resource))
            .map(|i| &i.record)
            .collect();
        assert!(!metrics.is_empty(), "no metric for {w} in {:#?}", d.metrics);
        for m in &metrics {
            assert_eq!(m.unit, w["unit"], "{m:?}");
            assert_eq!(m.description, w["description"], "{m:?}");
        }
        let points: Vec<_> = metrics.iter().filter_map(|m| m.data.as_ref()).collect();
        match w["kind"].as_str().unwrap() {
            "histogram" => {
                let p: Vec<_> = points
                    .iter()
                    .filter_map(|d| match d {
                        metric::Data::Histogram(h) => Some(&h.data_points),
                        _ => None,
                    })
                    .flatten()
                    .filter(|p| same_attrs(&p.attributes, w))
                    .collect();
                assert_eq!(p.len(), 1, "data points for {w}: {p:?}");
                let p = p[0];
                assert_eq!(p.count, w["count"].as_u64().unwrap(), "{p:?}");
                assert_eq!(p.sum, w["sum"].as_f64(), "{p:?}");
                assert_eq!(p.min, w["min"].as_f64(), "{p:?}");
                assert_eq!(p.max, w["max"].as_f64(), "{p:?}");
                let bounds: Vec<f64> = w["explicitBounds"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_f64().unwrap())
                    .collect();
                assert_eq!(p.explicit_bounds, bounds, "{p:?}");
                let counts: Vec<u64> = w["bucketCounts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap())
                    .collect();
                assert_eq!(p.bucket_counts, counts, "{p:?}");
            }
            kind => {
                let p: Vec<_> = points
                    .iter()
                    .filter_map(|d| match (kind, d) {
                        ("sum", metric::Data::Sum(s)) => {
                            if w["monotonic"] == true {
                                assert!(s.is_monotonic, "{s:?}");
                            }
                            Some(&s.data_points)
                        }
                        ("gauge", metric::Data::Gauge(g)) => Some(&g.data_points),
                        _ => None,
                    })
                    .flatten()
                    .filter(|p| same_attrs(&p.attributes, w))
                    .collect();
                assert_eq!(p.len(), 1, "data points for {w}: {p:?}");
                let want = match w.get("asInt") {
                    Some(n) => number_data_point::Value::AsInt(n.as_i64().unwrap()),
                    None => number_data_point::Value::AsDouble(w["asDouble"].as_f64().unwrap()),
                };
                assert_eq!(p[0].value, Some(want), "{w}");
            }
        }
    }
}

/// What a recorder has attached by now (read from where its records go).
type AttachedNow<'a> = Box<dyn Fn() -> BTreeSet<String> + 'a>;

/// Set a log record's observed time aside (returned).
fn observed(r: &mut LogRecord) -> u64 {
    std::mem::take(&mut r.observed_time_unix_nano)
}

#[test]
fn otel_logs_spans_and_metrics_exported_over_grpc_equal_the_otlp_json_path() {
    if !user_events_here() {
        return;
    }
    let dir = vm::tmp_dir("export");
    let json_out = dir.join("uevrec.otlp.jsonl");
    let json_rec = Recorder::spawn(
        "json",
        &dir,
        &[
            "--format",
            "otlp",
            "--quiet",
            "-o",
            json_out.to_str().unwrap(),
        ],
    );
    let grpc_args = |rx: &Receiver| {
        vec![
            "--otlp-endpoint".to_string(),
            rx.endpoint(),
            "--otlp-protocol".into(),
            "grpc".into(),
        ]
    };
    let rx = Receiver::start(Kind::Grpc);
    let args = grpc_args(&rx);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let grpc_rec = Recorder::spawn("grpc", &dir, &args);
    // `--threads 2` where `record` has it: a third recorder, its own receiver.
    let (threads_rx, threads_rec) = if record_has_threads() {
        let rx = Receiver::start(Kind::Grpc);
        let args = grpc_args(&rx);
        let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
        args.extend(["--threads", "2"]);
        let rec = Recorder::spawn("grpc-threads2", &dir, &args);
        (Some(rx), Some(rec))
    } else {
        println!("NOTE: `uevrec record` has no --threads flag: the --threads 2 export is not run");
        (None, None)
    };

    // The producer writes once every recorder has attached all its 7 tracepoints
    // (5 log levels, spans, otlp_metrics): the enable bits turn on with the first.
    let start = dir.join("start");
    let (mut producer, reports) = spawn_sample(
        "otel",
        &[
            "--name",
            NAME,
            "--metrics",
            "--timeout-secs",
            "170",
            "--start-file",
            start.to_str().unwrap(),
        ],
    );
    let registered = || -> BTreeSet<String> {
        reports
            .lock()
            .unwrap()
            .iter()
            .filter_map(|v| v["registered"].as_str().map(|t| format!("user_events:{t}")))
            .collect()
    };
    assert!(
        wait_until(TIMEOUT, || registered().len() == 7),
        "the producer did not register 7 tracepoints: {:?}",
        registered()
    );
    let mut waits: Vec<(&Recorder, AttachedNow<'_>)> = vec![
        (
            &json_rec,
            Box::new(|| Delivered::from_json_file(&json_out, false).attached()),
        ),
        (
            &grpc_rec,
            Box::new(|| Delivered::from_receiver(&rx).attached()),
        ),
    ];
    if let (Some(rx), Some(rec)) = (&threads_rx, &threads_rec) {
        waits.push((rec, Box::new(|| Delivered::from_receiver(rx).attached())));
    }
    for (rec, attached) in &waits {
        let all = wait_until(TIMEOUT, || attached().is_superset(&registered()));
        assert!(
            all,
            "uevrec ({}) never attached {:?}; stderr: {}",
            rec.what,
            registered().difference(&attached()).collect::<Vec<_>>(),
            rec.stderr()
        );
    }
    drop(waits);
    fs::write(&start, b"").unwrap();
    let reports = finish(&mut producer, &reports);

    // The producer's events are in the rings once it exited: give the recorders a moment
    // to read them, then stop them (the gRPC ones deliver what is queued first).
    std::thread::sleep(Duration::from_secs(2));
    json_rec.stop();
    let json = Delivered::from_json_file(&json_out, true).producers_only();

    let mut exports = vec![("grpc", grpc_rec, &rx)];
    if let (Some(rx), Some(rec)) = (&threads_rx, threads_rec) {
        exports.push(("grpc --threads 2", rec, rx));
    }
    for (what, rec, rx) in exports {
        let err = rec.stop();
        let all = Delivered::from_receiver(rx);
        let total_records =
            all.logs.len() as u64 + all.spans.len() as u64 + all.metrics.len() as u64;
        let grpc = all.producers_only();
        println!(
            "{what}: {} log records, {} spans, {} metrics from the producer; {} requests",
            grpc.logs.len(),
            grpc.spans.len(),
            grpc.metrics.len(),
            rx.requests()
        );
        // 1. Every value is what the SDK was given.
        check_against_reports(&grpc, &reports);
        // 2. The same messages as the OTLP/JSON path, record for record.
        let slack = Duration::from_secs(1).as_nanos() as u64;
        let worst = assert_same_items("log records", &json.logs, &grpc.logs, observed, slack);
        assert_same_items("spans", &json.spans, &grpc.spans, |_| 0, 0);
        assert_same_items("metrics", &json.metrics, &grpc.metrics, |_| 0, 0);
        println!("{what}: observed times differ from the OTLP/JSON path's by at most {worst} ns");
        // 3. Everything acknowledged, nothing dropped or queued, per tracepoint too.
        let ((acked, dropped, queued), per) = export_summary(&err);
        assert_eq!((dropped, queued), (0, 0), "{what}: {err}");
        assert_eq!(acked, total_records, "{what}: {err}");
        for tp in registered() {
            let [recorded, exported, dropped, queued] = per
                .get(&tp)
                .copied()
                .unwrap_or_else(|| panic!("{what}: no summary line for {tp}:\n{err}"));
            assert!(recorded > 0, "{what}: {tp} recorded nothing:\n{err}");
            assert_eq!(
                (exported, dropped, queued),
                (recorded, 0, 0),
                "{what}: {tp}:\n{err}"
            );
        }
    }
}
