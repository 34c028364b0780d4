//! Tier 3: `uevrec record --format otlp` on the OpenTelemetry user_events exporters
//! (`samples/otel`: logs at every severity with attributes and trace context, spans with
//! attributes, links and status, and with `--metrics` a counter, a gauge and a
//! histogram through `opentelemetry-user-events-metrics`), on a real kernel.
//!
//! Every output line must parse with the official protobuf definitions
//! (`tests/otlp/validate.py`: PyPI `opentelemetry-proto`, `json_format.Parse` with
//! unknown fields refused, after hex ids → base64), and every value must equal what
//! the producer gave the SDK (its report lines). Runs in the VM (scripts/vm-test.sh);
//! elsewhere it skips saying so, or fails when `UEVREC_REQUIRE_TIERS` names the vm tier.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use uevrec_samples::wait_until;

mod common;
use common::vm::{
    self, collect_json_lines, interrupt_and_wait, kill_if_running, output_lines, sample,
    user_events_here, wait_child,
};

/// How long the producer may take (TCG guests are slow).
const TIMEOUT: Duration = Duration::from_secs(180);

/// The records of one signal from every line: (resource attributes, scope name, record).
fn records(lines: &[Value], kind: &str) -> Vec<(Value, String, Value)> {
    let (resources, scopes, items) = match kind {
        "logs" => ("resourceLogs", "scopeLogs", "logRecords"),
        "spans" => ("resourceSpans", "scopeSpans", "spans"),
        _ => ("resourceMetrics", "scopeMetrics", "metrics"),
    };
    let mut out = Vec::new();
    for line in lines {
        for r in line[resources].as_array().into_iter().flatten() {
            let attrs = attributes(&r["resource"]);
            for s in r[scopes].as_array().into_iter().flatten() {
                let scope = s["scope"]["name"].as_str().unwrap_or_default().to_string();
                for item in s[items].as_array().into_iter().flatten() {
                    out.push((attrs.clone(), scope.clone(), item.clone()));
                }
            }
        }
    }
    out
}

/// `attributes` as a JSON object of OTLP AnyValues.
fn attributes(owner: &Value) -> Value {
    let mut m = serde_json::Map::new();
    for a in owner["attributes"].as_array().into_iter().flatten() {
        m.insert(a["key"].as_str().unwrap().to_string(), a["value"].clone());
    }
    Value::Object(m)
}

/// The OTLP AnyValue of a plain JSON value as the SDK was given it (ints as strings).
fn any_value(v: &Value) -> Value {
    match v {
        Value::String(s) => json!({"stringValue": s}),
        Value::Bool(b) => json!({"boolValue": b}),
        Value::Number(n) if n.is_i64() => json!({"intValue": n.to_string()}),
        Value::Number(n) => json!({"doubleValue": n.as_f64()}),
        other => panic!("no AnyValue for {other}"),
    }
}

/// Nanoseconds (as OTLP/JSON's decimal string) of an RFC 3339 time.
fn nanos(text: &Value) -> String {
    let t = humantime::parse_rfc3339(text.as_str().unwrap()).unwrap();
    t.duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
        .to_string()
}

/// Which notices of `attached` events the OTLP output has.
fn attached(out: &Path) -> BTreeSet<String> {
    let text = fs::read_to_string(out).unwrap_or_default();
    let lines: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    records(&lines, "logs")
        .into_iter()
        .filter(|(_, _, r)| r["eventName"] == "uevrec.notice")
        .map(|(_, _, r)| attributes(&r))
        .filter(|a| a["uevrec.notice.what"]["stringValue"] == "attached")
        .filter_map(|a| {
            a["uevrec.notice.event"]["stringValue"]
                .as_str()
                .map(String::from)
        })
        .collect()
}

#[test]
fn otel_logs_spans_and_metrics_recorded_as_otlp_parse_and_keep_their_values() {
    if !user_events_here() {
        return;
    }
    let dir = vm::tmp_dir("otlp");
    let out = dir.join("uevrec.otlp.jsonl");
    let stderr = dir.join("uevrec.stderr");
    let mut uevrec = Command::new(env!("CARGO_BIN_EXE_uevrec"))
        .args(["record", "--format", "otlp", "--quiet", "-o"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(fs::File::create(&stderr).unwrap())
        .spawn()
        .expect("spawning uevrec");
    let mut producer = Command::new(sample("otel"))
        .args(["--name", "UevrecOtlp", "--metrics"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawning otel");
    let reports = collect_json_lines(&mut producer);
    let registered = || -> BTreeSet<String> {
        reports
            .lock()
            .unwrap()
            .iter()
            .filter_map(|v| v["registered"].as_str())
            .map(|t| format!("user_events:{t}"))
            .collect()
    };
    assert!(
        wait_until(TIMEOUT, || registered().len() == 7),
        "otel did not register its 7 tracepoints: {:?}",
        reports.lock().unwrap()
    );
    let all_attached = wait_until(TIMEOUT, || attached(&out).is_superset(&registered()));
    assert!(
        all_attached,
        "uevrec never attached {:?} (stderr: {})",
        registered().difference(&attached(&out)).collect::<Vec<_>>(),
        fs::read_to_string(&stderr).unwrap_or_default()
    );
    let status = wait_child(&mut producer, TIMEOUT).expect("otel still running");
    assert!(status.success(), "otel failed: {status}");
    let reports = reports.lock().unwrap().clone();
    assert!(
        reports.last().is_some_and(|v| v.get("done").is_some()),
        "{reports:?}"
    );
    // The exporters write synchronously: their events are in the rings before otel
    // exits. Give the recorder a moment to read them, then stop it.
    std::thread::sleep(Duration::from_secs(2));
    interrupt_and_wait(&mut uevrec, Duration::from_secs(60), &stderr);
    kill_if_running(&mut uevrec);

    // 1. The official protobuf definitions accept every line.
    let check = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp/validate.py"))
        .arg(&out)
        .output()
        .expect("python3 (with the PyPI package opentelemetry-proto) must run here");
    let said = String::from_utf8_lossy(&check.stdout).into_owned()
        + &String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success(), "validate.py: {said}");
    assert!(said.starts_with("ok "), "{said}");

    // 2. Every value is what the SDK was given.
    let lines = output_lines(&out);
    let logs = records(&lines, "logs");
    let spans = records(&lines, "spans");
    let resource = json!({
        "service.name": {"stringValue": "uevrec-otel"},
        "service.instance.id": {"stringValue": "instance-1"},
    });
    let same_resource = |r: &Value| {
        resource
            .as_object()
            .unwrap()
            .iter()
            .all(|(k, v)| &r[k] == v)
    };
    let mut n_logs = 0;
    let mut n_spans = 0;
    for report in reports.iter().filter(|r| r.get("fields").is_some()) {
        let f = &report["fields"];
        let (a, b, c) = (&f["PartA"], &f["PartB"], &f["PartC"]);
        if b["_typeName"] == "Log" {
            n_logs += 1;
            let (res, scope, r) = logs
                .iter()
                .find(|(_, _, r)| r["eventName"] == b["name"])
                .unwrap_or_else(|| panic!("no log record for {report}"));
            assert!(same_resource(res), "{res}");
            assert_eq!(scope, "UevrecOtlpLogs");
            assert_eq!(r["timeUnixNano"], json!(nanos(&a["time"])), "{r}");
            assert_eq!(r["traceId"], a["ext_dt_traceId"], "{r}");
            assert_eq!(r["spanId"], a["ext_dt_spanId"], "{r}");
            assert_eq!(r["severityNumber"], b["severityNumber"], "{r}");
            assert_eq!(r["severityText"], b["severityText"], "{r}");
            assert_eq!(r["body"], any_value(&b["body"]), "{r}");
            let attrs = attributes(r);
            for (k, v) in c.as_object().unwrap() {
                assert_eq!(attrs[k], any_value(v), "{k} in {r}");
            }
            if let Some(id) = b.get("eventId") {
                assert_eq!(attrs["event_id"], any_value(id), "{r}");
            }
            assert!(attrs["process.pid"]["intValue"].is_string(), "{r}");
        } else {
            n_spans += 1;
            let (res, scope, s) = spans
                .iter()
                .find(|(_, _, s)| s["name"] == b["name"])
                .unwrap_or_else(|| panic!("no span for {report}"));
            assert!(same_resource(res), "{res}");
            assert_eq!(scope, "UevrecOtlpSpans");
            assert_eq!(s["traceId"], a["ext_dt_traceId"], "{s}");
            assert_eq!(s["spanId"], a["ext_dt_spanId"], "{s}");
            assert_eq!(s["endTimeUnixNano"], json!(nanos(&a["time"])), "{s}");
            assert_eq!(s["startTimeUnixNano"], json!(nanos(&b["startTime"])), "{s}");
            assert_eq!(s["kind"], json!(b["kind"].as_i64().unwrap() + 1), "{s}");
            let attrs = attributes(s);
            for (k, v) in c.as_object().unwrap() {
                assert_eq!(attrs[k], any_value(v), "{k} in {s}");
            }
        }
    }
    assert_eq!((n_logs, n_spans), (6, 2), "{reports:?}");
    // What the SDK was given for the spans (samples/otel): semantic-convention names,
    // parent, link and status.
    let span = |name: &str| &spans.iter().find(|(_, _, s)| s["name"] == name).unwrap().2;
    let server = span("GET /a");
    let client = span("SELECT users");
    let sa = attributes(server);
    assert_eq!(sa["http.request.method"], json!({"stringValue": "GET"}));
    assert_eq!(
        sa["url.full"],
        json!({"stringValue": "https://example.test/a?b=c"})
    );
    assert_eq!(sa["http.response.status_code"], json!({"intValue": "200"}));
    assert_eq!(server.get("status"), Some(&Value::Null), "{server}");
    assert_eq!(client["parentSpanId"], server["spanId"]);
    assert_eq!(
        attributes(client)["db.system.name"],
        json!({"stringValue": "postgresql"})
    );
    assert_eq!(
        client["links"][0]["traceId"],
        "0af7651916cd43dd8448eb211c80319c"
    );
    assert_eq!(client["links"][0]["spanId"], "b7ad6b7169203331");
    assert_eq!(
        client["status"],
        json!({"message": "connection reset", "code": 2})
    );

    // 3. Metrics: each data point the SDK was given, in a request of its own.
    let metrics = records(&lines, "metrics");
    let wanted: Vec<&Value> = reports.iter().filter_map(|r| r.get("metric")).collect();
    assert_eq!(wanted.len(), 4, "{reports:?}");
    for w in wanted {
        let point = metrics
            .iter()
            .filter(|(_, scope, m)| scope == "uevrec-otel-meter" && m["name"] == w["name"])
            .flat_map(|(res, _, m)| {
                assert!(same_resource(res), "{res}");
                assert_eq!(m["unit"], w["unit"]);
                assert_eq!(m["description"], w["description"]);
                let data = &m[w["kind"].as_str().unwrap()];
                if w["monotonic"] == true {
                    assert_eq!(data["isMonotonic"], true, "{m}");
                }
                data["dataPoints"].as_array().cloned().unwrap_or_default()
            })
            .find(|p| {
                let a = attributes(p);
                w["attributes"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .all(|(k, v)| a[k] == any_value(v))
            })
            .unwrap_or_else(|| panic!("no data point for {w} in {metrics:?}"));
        match w["kind"].as_str().unwrap() {
            "histogram" => {
                assert_eq!(point["count"], json!(w["count"].to_string()), "{point}");
                for k in ["sum", "min", "max", "explicitBounds"] {
                    assert_eq!(point[k], w[k], "{k} in {point}");
                }
                let counts: Vec<String> = w["bucketCounts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c.to_string())
                    .collect();
                assert_eq!(point["bucketCounts"], json!(counts), "{point}");
            }
            _ if w.get("asInt").is_some() => {
                assert_eq!(point["asInt"], json!(w["asInt"].to_string()), "{point}")
            }
            _ => assert_eq!(point["asDouble"], w["asDouble"], "{point}"),
        }
    }
}
