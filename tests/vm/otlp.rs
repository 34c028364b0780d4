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
use std::path::{Path, PathBuf};
use std::process::Child;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};
use uevrec_samples::wait_until;

use crate::common::KillOnDrop;
use crate::common::json_eq;
use crate::common::otlp::{self, attributes, records};
use crate::common::vm::{self, interrupt_and_wait, output_lines, spawn_sample, user_events_here};

/// How long the producer may take (TCG guests are slow).
const TIMEOUT: Duration = Duration::from_secs(180);

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

/// `uevrec record --format otlp` of every event, into a per-test directory.
struct Recording {
    /// Killed when dropped: a failing test leaves no recorder running (it would hold
    /// every user event it attached, and the next tests could not delete theirs).
    child: KillOnDrop,
    out: PathBuf,
    stderr: PathBuf,
}

impl Recording {
    fn start(test: &str) -> Recording {
        let dir = vm::tmp_dir(test);
        let out = dir.join("uevrec.otlp.jsonl");
        let stderr = dir.join("uevrec.stderr");
        let child = Command::new(env!("CARGO_BIN_EXE_uevrec"))
            .args(["record", "--format", "otlp", "--quiet", "-o"])
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("spawning uevrec");
        Recording {
            child: KillOnDrop(child),
            out,
            stderr,
        }
    }

    /// Give the recorder a moment to read what the producers wrote (they write
    /// synchronously: their events are in the rings before they exit), stop it, check
    /// every line with the official protobuf definitions, and return the lines.
    fn stop(mut self) -> Vec<Value> {
        std::thread::sleep(Duration::from_secs(2));
        interrupt_and_wait(&mut self.child, Duration::from_secs(60), &self.stderr);
        otlp::validate(&self.out);
        output_lines(&self.out)
    }
}

/// Wait until the producers whose reports are `reports` have registered `n` tracepoints
/// and uevrec has attached every one.
fn wait_attached(recording: &Recording, reports: &[&Mutex<Vec<Value>>], n: usize) {
    let registered = || -> BTreeSet<String> {
        let reports = reports.iter().flat_map(|r| r.lock().unwrap().clone());
        reports
            .filter_map(|v| v["registered"].as_str().map(|t| format!("user_events:{t}")))
            .collect()
    };
    assert!(
        wait_until(TIMEOUT, || registered().len() == n),
        "the producers did not register {n} tracepoints: {:?}",
        registered()
    );
    let out = &recording.out;
    let all_attached = wait_until(TIMEOUT, || attached(out).is_superset(&registered()));
    assert!(
        all_attached,
        "uevrec never attached {:?} (stderr: {})",
        registered().difference(&attached(out)).collect::<Vec<_>>(),
        fs::read_to_string(&recording.stderr).unwrap_or_default()
    );
}

/// Wait for a producer to succeed; its report lines, ending with `done`.
fn finish(child: &mut Child, reports: &Mutex<Vec<Value>>, bin: &str) -> Vec<Value> {
    vm::finish_sample(child, reports, bin, TIMEOUT)
}

#[test]
fn otel_logs_spans_and_metrics_recorded_as_otlp_parse_and_keep_their_values() {
    if !user_events_here() {
        return;
    }
    let recording = Recording::start("otlp");
    // Written once uevrec has attached all 7 tracepoints: the enable bits turn on when
    // uevrec opens an event's first CPU, before the others (CI lost the first log
    // record, seq 0, waiting only for the bits).
    let start = recording.out.with_file_name("start");
    let start_arg = start.to_str().unwrap();
    let (mut producer, reports) = spawn_sample(
        "otel",
        &[
            "--name",
            "UevrecOtlp",
            "--metrics",
            "--timeout-secs",
            "150",
            "--start-file",
            start_arg,
        ],
    );
    wait_attached(&recording, &[&reports], 7);
    fs::write(&start, b"").unwrap();
    let reports = finish(&mut producer, &reports, "otel");
    // 1. The official protobuf definitions accept every line (`stop`); 2. every value is
    // what the SDK was given.
    let lines = recording.stop();
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
        // The record whose `key` is PartB's name, in `scope`, with the SDK's resource,
        // trace context and PartC attributes.
        let find = |list: &'_ [(Value, String, Value)], key: &str, want_scope: &str| {
            let (res, scope, r) = list
                .iter()
                .find(|(_, _, r)| r[key] == b["name"])
                .unwrap_or_else(|| panic!("no record for {report}"));
            assert!(same_resource(res), "{res}");
            assert_eq!(scope, want_scope);
            assert_eq!(r["traceId"], a["ext_dt_traceId"], "{r}");
            assert_eq!(r["spanId"], a["ext_dt_spanId"], "{r}");
            let attrs = attributes(r);
            for (k, v) in c.as_object().unwrap() {
                assert_eq!(attrs[k], any_value(v), "{k} in {r}");
            }
            assert!(attrs["process.pid"]["intValue"].is_string(), "{r}");
            (r.clone(), attrs)
        };
        if b["_typeName"] == "Log" {
            n_logs += 1;
            let (r, attrs) = find(&logs, "eventName", "UevrecOtlpLogs");
            assert_eq!(r["timeUnixNano"], json!(nanos(&a["time"])), "{r}");
            assert_eq!(r["severityNumber"], b["severityNumber"], "{r}");
            assert_eq!(r["severityText"], b["severityText"], "{r}");
            assert_eq!(r["body"], any_value(&b["body"]), "{r}");
            if let Some(id) = b.get("eventId") {
                assert_eq!(attrs["event_id"], any_value(id), "{r}");
            }
        } else {
            n_spans += 1;
            let (s, _) = find(&spans, "name", "UevrecOtlpSpans");
            assert_eq!(s["endTimeUnixNano"], json!(nanos(&a["time"])), "{s}");
            assert_eq!(s["startTimeUnixNano"], json!(nanos(&b["startTime"])), "{s}");
            assert_eq!(s["kind"], json!(b["kind"].as_i64().unwrap() + 1), "{s}");
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

/// The attributes uevrec adds to every record of an event (besides its fields).
const ORIGIN_KEYS: &[&str] = &[
    "process.pid",
    "thread.id",
    "cpu.logical_number",
    "linux.tracepoint",
    "eventheader.level",
    "eventheader.keyword",
];

/// Whether `record`'s attributes are `fields` (a JSON-lines `fields` object, as the
/// producer reported it) plus uevrec's own, with the same values.
fn same_fields(record: &Value, fields: &Value) -> bool {
    let attrs = attributes(record);
    let attrs = attrs.as_object().unwrap();
    let fields = fields.as_object().unwrap();
    attrs
        .keys()
        .all(|k| fields.contains_key(k) || ORIGIN_KEYS.contains(&k.as_str()))
        && fields.iter().all(|(k, v)| {
            attrs
                .get(k)
                .is_some_and(|a| json_eq(&otlp::plain(a), &otlp::as_otlp_would(v)))
        })
}

/// Plain user_events (`every_type`: every field type the kernel accepts, with
/// minimums, maximums and awkward strings) and EventHeader events that are not
/// OpenTelemetry's (`eh_dynamic`: every encoding and format, structs, arrays of structs,
/// repeated names) recorded with `--format otlp`: every line parses with the official
/// protobuf definitions, and every record is a log record whose attributes are the
/// fields with the values the producer wrote.
#[test]
fn plain_and_eventheader_events_recorded_as_otlp_keep_their_values() {
    if !user_events_here() {
        return;
    }
    let recording = Recording::start("otlp-plain");
    let start = recording.out.with_file_name("start");
    let start_arg = start.to_str().unwrap();
    let wait = ["--timeout-secs", "150", "--start-file", start_arg];
    let (mut every, every_reports) = spawn_sample(
        "every_type",
        &[&["--name", "vmt_otlp_every"][..], &wait].concat(),
    );
    let (mut eh, eh_reports) = spawn_sample(
        "eh_dynamic",
        &[&["--name", "VmtOtlpEh"][..], &wait].concat(),
    );
    // Both write once uevrec has attached all their tracepoints (1 + 4).
    wait_attached(&recording, &[&every_reports, &eh_reports], 5);
    fs::write(&start, b"").unwrap();
    let (every_pid, eh_pid) = (every.id(), eh.id());
    let every_reports = finish(&mut every, &every_reports, "every_type");
    let eh_reports = finish(&mut eh, &eh_reports, "eh_dynamic");
    let lines = recording.stop();
    let logs = records(&lines, "logs");

    // every_type: one log record per row, in time order, scope = the system. (Live
    // records are written in order per CPU, not across CPUs: the producer may move to
    // another CPU between rows; its times are its order.)
    let rows: Vec<&Value> = every_reports
        .iter()
        .filter(|r| r.get("fields").is_some())
        .collect();
    assert!(!rows.is_empty());
    let mut got: Vec<&Value> = logs
        .iter()
        .filter(|(_, scope, r)| scope == "user_events" && r["eventName"] == "vmt_otlp_every")
        .map(|(_, _, r)| r)
        .collect();
    got.sort_by_key(|r| r["timeUnixNano"].as_str().unwrap().parse::<u64>().unwrap());
    assert_eq!(got.len(), rows.len(), "records of vmt_otlp_every");
    for (row, r) in rows.iter().zip(&got) {
        assert!(same_fields(r, &row["fields"]), "{row}\n{r}");
        let attrs = attributes(r);
        assert_eq!(
            attrs["process.pid"],
            json!({"intValue": every_pid.to_string()})
        );
        assert_eq!(
            attrs["linux.tracepoint"],
            json!({"stringValue": "user_events:vmt_otlp_every"})
        );
        assert_eq!(r["severityNumber"], 0, "{r}");
    }

    // eh_dynamic: each event once, scope = its provider, eventName = its name.
    let written: Vec<&Value> = eh_reports
        .iter()
        .filter(|r| r.get("fields").is_some())
        .collect();
    assert!(written.len() > 5, "{eh_reports:?}");
    let mut used = vec![false; logs.len()];
    for w in written {
        let tracepoint = format!("user_events:{}", w["event"].as_str().unwrap());
        let hit = logs.iter().enumerate().find(|(i, (_, scope, r))| {
            !used[*i]
                && scope == w["provider"].as_str().unwrap()
                && r["eventName"] == w["name"]
                && attributes(r)["linux.tracepoint"]["stringValue"] == tracepoint.as_str()
                && same_fields(r, &w["fields"])
        });
        let Some((i, (_, _, r))) = hit else {
            panic!("no log record with the fields of {w}");
        };
        used[i] = true;
        let attrs = attributes(r);
        assert_eq!(
            attrs["process.pid"],
            json!({"intValue": eh_pid.to_string()})
        );
        let level = w["level"].as_u64().unwrap();
        assert_eq!(
            attrs["eventheader.level"],
            json!({"intValue": level.to_string()})
        );
        let keyword =
            u64::from_str_radix(w["keyword"].as_str().unwrap().trim_start_matches("0x"), 16)
                .unwrap();
        // (Keywords above int64, such as 0x8000000000000000, are decimal strings.)
        let keyword_any = match i64::try_from(keyword) {
            Ok(k) => json!({"intValue": k.to_string()}),
            Err(_) => json!({"stringValue": keyword.to_string()}),
        };
        assert_eq!(attrs["eventheader.keyword"], keyword_any, "{r}");
        let severity = [0, 21, 17, 13, 9, 5]
            .get(level as usize)
            .copied()
            .unwrap_or(0);
        assert_eq!(r["severityNumber"], severity, "{r}");
    }
}
