//! The OTLP writer on hand-built events: a Common Schema log, a plain event, an
//! `otlp_metrics` event, lost counts, and the batching limits. Every line must
//! deserialize into the `opentelemetry-proto` request type (the VM tier checks the
//! lines against the official protobuf definitions in Python as well).

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::metrics::v1::{
    Gauge, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, metric, number_data_point,
};
use prost::Message;
use serde_json::{Value, json};

use super::*;
use crate::eventheader::{trace_entry, tracepoint_format};
use crate::otlp::frame::Frame;
use crate::parse_format;

/// A little-endian EventHeader event (from the flags byte on) with a metadata block.
pub(super) struct Eh {
    pub(super) meta: Vec<u8>,
    pub(super) payload: Vec<u8>,
}

impl Eh {
    pub(super) fn new(name: &str) -> Self {
        let mut meta = name.as_bytes().to_vec();
        meta.push(0);
        Eh {
            meta,
            payload: Vec::new(),
        }
    }

    pub(super) fn record(mut self, name: &str, encoding: u8, format: Option<u8>) -> Self {
        self.meta.extend_from_slice(name.as_bytes());
        self.meta.push(0);
        match format {
            Some(f) => self.meta.extend_from_slice(&[encoding | 0x80, f]),
            None => self.meta.push(encoding),
        }
        self
    }

    pub(super) fn structure(self, name: &str, count: u8) -> Self {
        self.record(name, 1, Some(count))
    }

    pub(super) fn str(mut self, name: &str, v: &str) -> Self {
        self = self.record(name, 10, None);
        self.payload
            .extend_from_slice(&(v.len() as u16).to_le_bytes());
        self.payload.extend_from_slice(v.as_bytes());
        self
    }

    pub(super) fn i64(mut self, name: &str, v: i64) -> Self {
        self = self.record(name, 5, Some(2));
        self.payload.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub(super) fn u32(mut self, name: &str, v: u32) -> Self {
        self = self.record(name, 4, None);
        self.payload.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub(super) fn f64(mut self, name: &str, v: f64) -> Self {
        self = self.record(name, 5, Some(8));
        self.payload.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub(super) fn bool(mut self, name: &str, v: bool) -> Self {
        self = self.record(name, 4, Some(7));
        self.payload.extend_from_slice(&u32::from(v).to_le_bytes());
        self
    }

    /// The trace entry (level 2).
    pub(super) fn raw(&self) -> Vec<u8> {
        trace_entry(2, &self.meta, &self.payload)
    }
}

const STAMP: RecordStamp = RecordStamp {
    time_unix_ns: Some(1_711_586_712_500_000_000),
    cpu: 1,
    pid: 42,
    tid: 43,
};

pub(super) fn eh_prepared(tracepoint: &str) -> PreparedFormat {
    PreparedFormat::new(
        &tracepoint_format(tracepoint, 7),
        "user_events",
        tracepoint,
        None,
    )
}

fn lines(out: &[u8]) -> Vec<Value> {
    std::str::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn attributes(record: &Value) -> serde_json::Map<String, Value> {
    record["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["key"].as_str().unwrap().to_string(), a["value"].clone()))
        .collect()
}

#[test]
fn a_common_schema_log_becomes_an_otlp_log_record() {
    let ev = Eh::new("Log")
        .u32("__csver__", 1024)
        .structure("PartA", 4)
        .str("time", "2024-03-28T00:45:12.1Z")
        .str("ext_dt_traceId", "0af7651916cd43dd8448eb211c80319c")
        .str("ext_dt_spanId", "b7ad6b7169203331")
        .str("ext_cloud_role", "svc")
        .structure("PartC", 3)
        .str("user", "zoë")
        .f64("latency", 1.5)
        .bool("ok", true)
        .structure("PartB", 6)
        .str("_typeName", "Log")
        .i64("body", -7)
        .record("severityNumber", 3, Some(2))
        .str("severityText", "ERROR")
        .i64("eventId", 42)
        .str("name", "disk");
    let mut ev = ev;
    // severityNumber's value (i16 17) sits between body and severityText in the payload.
    let body_end = ev.payload.len() - (2 + 5) - 8 - (2 + 4);
    ev.payload.splice(body_end..body_end, 17i16.to_le_bytes());
    let mut w = OtlpWriter::new(LineOptions::default());
    w.set_host_name("h1");
    let mut out = Vec::new();
    w.write_prepared(&mut out, &STAMP, &eh_prepared("Prov_L2K1"), &ev.raw());
    assert!(out.is_empty(), "a record waits for its line");
    w.end_lines(&mut out);
    let parsed: ExportLogsServiceRequest =
        serde_json::from_slice(out.strip_suffix(b"\n").unwrap()).unwrap();
    assert_eq!(parsed.resource_logs.len(), 1);
    let line = &lines(&out)[0];
    let rl = &line["resourceLogs"][0];
    assert_eq!(
        rl["resource"]["attributes"],
        json!([
            {"key": "service.name", "value": {"stringValue": "svc"}},
            {"key": "host.name", "value": {"stringValue": "h1"}},
        ])
    );
    let sl = &rl["scopeLogs"][0];
    assert_eq!(sl["scope"]["name"], "Prov");
    let r = &sl["logRecords"][0];
    assert_eq!(r["timeUnixNano"], "1711586712100000000");
    assert_eq!(r["observedTimeUnixNano"], "1711586712500000000");
    assert_eq!(r["severityNumber"], 17);
    assert_eq!(r["severityText"], "ERROR");
    assert_eq!(r["eventName"], "disk");
    assert_eq!(r["body"], json!({"intValue": "-7"}));
    assert_eq!(r["traceId"], "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(r["spanId"], "b7ad6b7169203331");
    let a = attributes(r);
    assert_eq!(a["user"], json!({"stringValue": "zoë"}));
    assert_eq!(a["latency"], json!({"doubleValue": 1.5}));
    assert_eq!(a["ok"], json!({"boolValue": true}));
    assert_eq!(a["event_id"], json!({"intValue": "42"}));
    assert_eq!(a["process.pid"], json!({"intValue": "42"}));
    assert_eq!(a["thread.id"], json!({"intValue": "43"}));
    assert_eq!(a["cpu.logical_number"], json!({"intValue": "1"}));
    assert_eq!(a["eventheader.level"], json!({"intValue": "2"}));
    assert_eq!(a["eventheader.keyword"], json!({"intValue": "1"}));
}

#[test]
fn other_eventheader_events_keep_structs_and_arrays() {
    let mut ev = Eh::new("Thing")
        .structure("s", 2)
        .u32("a", 1)
        .str("b", "x")
        .record("arr", 4 | 0x40, None);
    ev.payload.extend_from_slice(&2u16.to_le_bytes());
    ev.payload.extend_from_slice(&5u32.to_le_bytes());
    ev.payload.extend_from_slice(&6u32.to_le_bytes());
    let ev = ev.u32("a", 9);
    let mut w = OtlpWriter::new(LineOptions::default());
    let mut out = Vec::new();
    w.write_prepared(&mut out, &STAMP, &eh_prepared("P_L2K1"), &ev.raw());
    w.end_lines(&mut out);
    let r = &lines(&out)[0]["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0];
    assert_eq!(r["eventName"], "Thing");
    assert_eq!(r["severityNumber"], 17);
    let a = attributes(r);
    assert_eq!(
        a["s"],
        json!({"kvlistValue": {"values": [
            {"key": "a", "value": {"intValue": "1"}},
            {"key": "b", "value": {"stringValue": "x"}},
        ]}})
    );
    assert_eq!(
        a["arr"],
        json!({"arrayValue": {"values": [{"intValue": "5"}, {"intValue": "6"}]}})
    );
    assert_eq!(a["a"], json!({"intValue": "9"}));
    assert_eq!(
        a["linux.tracepoint"],
        json!({"stringValue": "user_events:P_L2K1"})
    );
}

/// A plain user_event format with a `u32` and a `__rel_loc u8[]` (the metrics layout).
pub(super) fn metrics_format(name: &str) -> crate::EventFormat {
    let text = format!(
        "name: {name}\nID: 9\nformat:\n\
         \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
         \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
         \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
         \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
         \tfield:u32 protocol;\toffset:8;\tsize:4;\tsigned:0;\n\
         \tfield:char version[8];\toffset:12;\tsize:8;\tsigned:0;\n\
         \tfield:__rel_loc u8[] buffer;\toffset:20;\tsize:4;\tsigned:0;\n\n\
         print fmt: \"\"\n"
    );
    parse_format(&text).unwrap()
}

/// The trace entry of a metrics-layout event carrying `buffer`.
pub(super) fn metrics_raw(buffer: &[u8]) -> Vec<u8> {
    let mut raw = vec![0u8; 8];
    raw.extend_from_slice(&0u32.to_le_bytes());
    raw.extend_from_slice(b"v0.19.00");
    // __rel_loc: offset from the end of the field (24), length in the high half.
    raw.extend_from_slice(&((buffer.len() as u32) << 16).to_le_bytes());
    raw.extend_from_slice(buffer);
    raw
}

#[test]
fn otlp_metrics_events_become_the_same_request() {
    let request = ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "m".into(),
                    ..Default::default()
                }),
                metrics: vec![Metric {
                    name: "g".into(),
                    data: Some(metric::Data::Gauge(Gauge {
                        data_points: vec![NumberDataPoint {
                            time_unix_nano: 5,
                            value: Some(number_data_point::Value::AsInt(-3)),
                            ..Default::default()
                        }],
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let format = metrics_format("otlp_metrics");
    let prepared = PreparedFormat::new(&format, "user_events", "otlp_metrics", None);
    let mut w = OtlpWriter::new(LineOptions::default());
    let mut out = Vec::new();
    w.write_prepared(
        &mut out,
        &STAMP,
        &prepared,
        &metrics_raw(&request.encode_to_vec()),
    );
    w.end_lines(&mut out);
    let back: ExportMetricsServiceRequest =
        serde_json::from_slice(out.strip_suffix(b"\n").unwrap()).unwrap();
    assert_eq!(back, request);
    let line = &lines(&out)[0];
    let point =
        &line["resourceMetrics"][0]["scopeMetrics"][0]["metrics"][0]["gauge"]["dataPoints"][0];
    assert_eq!(point["asInt"], "-3");
    assert_eq!(point["timeUnixNano"], "5");

    // A buffer that is not a request: a log record saying so, with the fields.
    let mut out = Vec::new();
    w.write_prepared(&mut out, &STAMP, &prepared, &metrics_raw(&[0xff, 0xff]));
    w.end_lines(&mut out);
    let r = &lines(&out)[0]["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0];
    let a = attributes(r);
    assert!(
        a["uevrec.error"]["stringValue"]
            .as_str()
            .unwrap()
            .contains("not an ExportMetricsServiceRequest"),
        "{a:?}"
    );
    assert_eq!(a["protocol"], json!({"intValue": "0"}));
}

#[test]
fn plain_events_and_lost_counts_are_log_records() {
    let format = metrics_format("plain");
    let prepared = PreparedFormat::new(&format, "user_events", "plain", None);
    let mut w = OtlpWriter::new(LineOptions::default());
    let mut out = Vec::new();
    w.write_prepared(&mut out, &STAMP, &prepared, &metrics_raw(b"\x01\x02"));
    w.write_lost(&mut out, Some(2), 3, 17);
    w.end_lines(&mut out);
    let line = &lines(&out)[0];
    let scopes: Vec<&Value> = line["resourceLogs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rl| &rl["scopeLogs"][0])
        .collect();
    assert_eq!(scopes.len(), 2);
    assert_eq!(scopes[0]["scope"]["name"], "user_events");
    let a = attributes(&scopes[0]["logRecords"][0]);
    assert_eq!(a["version"], json!({"stringValue": "v0.19.00"}));
    assert_eq!(a["buffer"], json!({"stringValue": "0102"}));
    assert_eq!(scopes[1]["scope"]["name"], "uevrec");
    let lost = &scopes[1]["logRecords"][0];
    assert_eq!(lost["eventName"], "uevrec.lost");
    assert_eq!(lost["severityNumber"], 13);
    assert_eq!(
        attributes(lost)["uevrec.lost.count"],
        json!({"intValue": "17"})
    );
}

#[test]
fn lines_end_at_512_records_and_after_a_second() {
    let mut w = OtlpWriter::new(LineOptions::default());
    let mut out = Vec::new();
    for _ in 0..MAX_RECORDS + 1 {
        w.write_notice(&mut out, Some(1), "n", None, "m");
    }
    let first = lines(&out);
    assert_eq!(first.len(), 1);
    let records = &first[0]["resourceLogs"][0]["scopeLogs"][0]["logRecords"];
    assert_eq!(records.as_array().unwrap().len(), MAX_RECORDS);
    w.end_lines(&mut out);
    assert_eq!(lines(&out).len(), 2);

    let mut out = Vec::new();
    w.write_notice(&mut out, Some(1), "n", None, "m");
    w.write_notice(&mut out, Some(1 + MAX_AGE_NS - 1), "n", None, "m");
    assert!(out.is_empty());
    w.write_notice(&mut out, Some(1 + MAX_AGE_NS), "n", None, "m");
    assert_eq!(lines(&out).len(), 1, "the line of the first two ended");
}

#[test]
fn common_fields_are_one_attribute_with_common() {
    let opts = LineOptions {
        include_common: true,
        endian: crate::Endian::Little,
    };
    let common = |record: &Value| {
        let a = attributes(record);
        a.get("linux.tracepoint.common")
            .cloned()
            .unwrap_or(Value::Null)
    };
    let mut w = OtlpWriter::new(opts);
    let mut out = Vec::new();
    // A plain event, a Common Schema log and another EventHeader event.
    let format = metrics_format("plain");
    let plain = PreparedFormat::new(&format, "user_events", "plain", None);
    let mut raw = metrics_raw(b"\x01");
    raw[..8].copy_from_slice(&[7, 0, 1, 2, 42, 0, 0, 0]);
    w.write_prepared(&mut out, &STAMP, &plain, &raw);
    let log = Eh::new("Log")
        .u32("__csver__", 1024)
        .structure("PartB", 1)
        .str("_typeName", "Log");
    let mut raw = log.raw();
    raw[..8].copy_from_slice(&[7, 0, 1, 2, 42, 0, 0, 0]);
    w.write_prepared(&mut out, &STAMP, &eh_prepared("P_L2K1"), &raw);
    let other = Eh::new("Other").u32("a", 1);
    let mut raw = other.raw();
    raw[..8].copy_from_slice(&[7, 0, 1, 2, 42, 0, 0, 0]);
    w.write_prepared(&mut out, &STAMP, &eh_prepared("P_L2K1"), &raw);
    w.end_lines(&mut out);
    let want = json!({"kvlistValue": {"values": [
        {"key": "common_type", "value": {"intValue": "7"}},
        {"key": "common_flags", "value": {"intValue": "1"}},
        {"key": "common_preempt_count", "value": {"intValue": "2"}},
        {"key": "common_pid", "value": {"intValue": "42"}},
    ]}});
    let line = &lines(&out)[0];
    let mut seen = 0;
    for rl in line["resourceLogs"].as_array().unwrap() {
        for r in rl["scopeLogs"][0]["logRecords"].as_array().unwrap() {
            assert_eq!(common(r), want, "{r}");
            seen += 1;
        }
    }
    assert_eq!(seen, 3);
    // Without --common, no such attribute.
    let mut w = OtlpWriter::new(LineOptions::default());
    let mut out = Vec::new();
    w.write_prepared(&mut out, &STAMP, &eh_prepared("P_L2K1"), &raw);
    w.end_lines(&mut out);
    let r = &lines(&out)[0]["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0];
    assert_eq!(common(r), Value::Null, "{r}");
}

#[test]
fn a_common_schema_span_becomes_an_otlp_span() {
    let links =
        r#"[{"toTraceId":"0af7651916cd43dd8448eb211c80319c","toSpanId":"00f067aa0ba902b7"}]"#;
    let ev = Eh::new("Span")
        .u32("__csver__", 1024)
        .structure("PartA", 3)
        .str("time", "2024-03-28T00:45:12.3Z")
        .str("ext_dt_traceId", "0AF7651916CD43DD8448EB211C80319C")
        .str("ext_dt_spanId", "b7ad6b7169203331")
        .structure("PartC", 1)
        .i64("rows", 0)
        .structure("PartB", 9)
        .str("_typeName", "Span")
        .str("name", "SELECT")
        .str("startTime", "2024-03-28T00:45:12.2Z")
        .bool("success", false)
        .i64("kind", 2)
        .str("parentId", "00f067aa0ba902b7")
        .str("links", links)
        .str("dbSystem", "postgresql")
        .str("statusMessage", "reset");
    let mut w = OtlpWriter::new(LineOptions::default());
    let mut out = Vec::new();
    w.write_prepared(&mut out, &STAMP, &eh_prepared("Prov_L4K1"), &ev.raw());
    w.end_lines(&mut out);
    let s = &lines(&out)[0]["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
    assert_eq!(s["name"], "SELECT");
    assert_eq!(s["kind"], 3);
    assert_eq!(s["traceId"], "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(s["startTimeUnixNano"], "1711586712200000000");
    assert_eq!(s["endTimeUnixNano"], "1711586712300000000");
    assert_eq!(s["parentSpanId"], "00f067aa0ba902b7");
    assert_eq!(s["links"][0]["spanId"], "00f067aa0ba902b7");
    assert_eq!(s["status"], json!({"message": "reset", "code": 2}));
    let a = attributes(s);
    let keys: Vec<&String> = a.keys().collect();
    assert!(
        a.contains_key("db.system.name") && a.contains_key("rows"),
        "{keys:?}"
    );
    assert!(
        !a.contains_key("statusMessage") && !a.contains_key("links"),
        "{keys:?}"
    );
}

/// Feed `w` a span, two plain events of two tracepoints, a metrics event with two data
/// points in two resources, an empty metrics request, a lost count and a notice.
fn mixed_records(w: &mut OtlpWriter, out: &mut Vec<u8>) {
    let span = Eh::new("Span")
        .u32("__csver__", 1024)
        .structure("PartB", 2)
        .str("_typeName", "Span")
        .str("name", "op");
    w.write_prepared(out, &STAMP, &eh_prepared("Prov_L4K1"), &span.raw());
    let format = metrics_format("plain");
    let plain = PreparedFormat::new(&format, "user_events", "plain", None);
    let other = PreparedFormat::new(&format, "sys", "other", None);
    for p in [&plain, &other, &plain] {
        w.write_prepared(out, &STAMP, p, &metrics_raw(b"\x01"));
    }
    let point = |v| NumberDataPoint {
        value: Some(number_data_point::Value::AsInt(v)),
        ..Default::default()
    };
    let rm = |points| ResourceMetrics {
        scope_metrics: vec![ScopeMetrics {
            metrics: vec![Metric {
                name: "g".into(),
                data: Some(metric::Data::Gauge(Gauge {
                    data_points: points,
                })),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let request = ExportMetricsServiceRequest {
        resource_metrics: vec![rm(vec![point(1), point(2)]), rm(vec![point(3)])],
    };
    let format = metrics_format("otlp_metrics");
    let metrics = PreparedFormat::new(&format, "user_events", "otlp_metrics", None);
    w.write_prepared(
        out,
        &STAMP,
        &metrics,
        &metrics_raw(&request.encode_to_vec()),
    );
    w.write_prepared(out, &STAMP, &metrics, &metrics_raw(&[]));
    w.write_lost(out, Some(2), 3, 17);
    w.write_notice(out, Some(3), "attached", None, "m");
    w.end_lines(out);
}

#[test]
fn export_frames_carry_the_lines_and_their_counts() {
    let mut lines_out = Vec::new();
    mixed_records(&mut OtlpWriter::new(LineOptions::default()), &mut lines_out);
    let mut frames_out = Vec::new();
    let mut w = OtlpWriter::export(LineOptions::default(), OtlpEncoding::Json);
    mixed_records(&mut w, &mut frames_out);
    let frames: Vec<Frame<'_>> = read_frames(&frames_out).collect::<Result<_, _>>().unwrap();
    // The same requests, as lines and as frames' bodies; logs, then spans, then metrics.
    let lines: Vec<&[u8]> = lines_out
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(lines.len(), 3);
    let signals: Vec<ExportSignal> = frames.iter().map(|f| f.signal).collect();
    assert_eq!(
        signals,
        [
            ExportSignal::Logs,
            ExportSignal::Traces,
            ExportSignal::Metrics
        ]
    );
    for (f, line) in frames.iter().zip(&lines) {
        assert_eq!(f.encoding, OtlpEncoding::Json);
        if f.signal != ExportSignal::Metrics {
            assert_eq!(f.body, *line);
        }
    }
    fn counts<'a>(f: &Frame<'a>) -> Vec<(&'a str, u32)> {
        f.tracepoints.iter().collect()
    }
    assert_eq!((frames[0].records, frames[0].items), (5, 5));
    assert_eq!(
        counts(&frames[0]),
        [("user_events:plain", 2), ("sys:other", 1), ("uevrec", 2)]
    );
    assert_eq!((frames[1].records, frames[1].items), (1, 1));
    assert_eq!(counts(&frames[1]), [("user_events:Prov_L4K1", 1)]);
    // Two metrics events (one without resources): 2 records, 3 data points, and the
    // body is the request of both.
    assert_eq!((frames[2].records, frames[2].items), (2, 3));
    assert_eq!(counts(&frames[2]), [("user_events:otlp_metrics", 2)]);
    let body: ExportMetricsServiceRequest = serde_json::from_slice(frames[2].body).unwrap();
    let line: ExportMetricsServiceRequest = serde_json::from_slice(lines[2]).unwrap();
    assert_eq!(body, line);
    assert_eq!(body.resource_metrics.len(), 2);
    // Protobuf frames: the same counts; the metrics body is the two events' requests
    // passed through.
    let mut proto_out = Vec::new();
    mixed_records(
        &mut OtlpWriter::export(LineOptions::default(), OtlpEncoding::Protobuf),
        &mut proto_out,
    );
    let proto: Vec<Frame<'_>> = read_frames(&proto_out).collect::<Result<_, _>>().unwrap();
    for (p, j) in proto.iter().zip(&frames) {
        assert_eq!(p.encoding, OtlpEncoding::Protobuf);
        assert_eq!(
            (p.signal, p.records, p.items),
            (j.signal, j.records, j.items)
        );
        assert_eq!(counts(p), counts(j));
    }
    assert_eq!(
        ExportMetricsServiceRequest::decode(proto[2].body).unwrap(),
        body
    );
    // Counts restart with each frame.
    let mut more = Vec::new();
    w.write_lost(&mut more, Some(4), 0, 1);
    w.end_lines(&mut more);
    let f = read_frames(&more).next().unwrap().unwrap();
    assert_eq!((f.records, counts(&f)), (1, vec![("uevrec", 1)]));
}

/// The Kubernetes identity as resource attributes: records of cgroup `cgroup` are written
/// after the tracker took `updates`; the requests come back decoded (JSON lines by serde,
/// protobuf frames by prost), so both encoders and both paths (general and compiled) are
/// checked against `opentelemetry-proto`'s own types.
mod k8s_resource {
    use super::*;
    use crate::context::{ContextTracker, ContextUpdate};
    use opentelemetry_proto::tonic::common::v1::any_value;

    const UID: &str = "1b4e28ba-2fa1-11d2-883f-0016d3cca427";
    const UID2: &str = "6fa459ea-ee8a-3ca4-894e-db77e160355e";
    const ID: &str = "5f6a8b7c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809102";

    fn pod_path(uid: &str) -> String {
        let uid_ = uid.replace('-', "_");
        format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid_}.slice/cri-containerd-{ID}.scope"
        )
    }

    /// One plain record and one Common Schema log per cgroup in `cgroups`, then the
    /// requests: (resource attributes, records) per resource, in order of first sight.
    fn export(
        w: &mut OtlpWriter,
        t: &ContextTracker,
        cgroups: &[u64],
    ) -> Vec<(Vec<(String, String)>, usize)> {
        let plain = PreparedFormat::new(&metrics_format("plain"), "user_events", "plain", None);
        let cs = Eh::new("Log")
            .u32("__csver__", 1024)
            .structure("PartB", 1)
            .str("_typeName", "Log");
        let mut out = Vec::new();
        for &c in cgroups {
            w.set_context(t, &STAMP, Some(c));
            w.write_prepared(&mut out, &STAMP, &plain, &metrics_raw(b"\x01"));
            w.write_prepared(&mut out, &STAMP, &eh_prepared("Prov_L4K1"), &cs.raw());
        }
        w.end_lines(&mut out);
        let requests: Vec<ExportLogsServiceRequest> = match w.batches.framed() {
            None => out
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| serde_json::from_slice(l).unwrap())
                .collect(),
            Some(OtlpEncoding::Protobuf) => read_frames(&out)
                .map(|f| ExportLogsServiceRequest::decode(f.unwrap().body).unwrap())
                .collect(),
            Some(OtlpEncoding::Json) => unreachable!(),
        };
        let mut groups = Vec::new();
        for rl in requests.iter().flat_map(|r| &r.resource_logs) {
            let attrs = rl
                .resource
                .as_ref()
                .unwrap()
                .attributes
                .iter()
                .map(|kv| {
                    let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(any_value::Value::StringValue(s)) => s.clone(),
                        other => panic!("{}: not a string: {other:?}", kv.key),
                    };
                    (kv.key.clone(), v)
                })
                .collect();
            let records: usize = rl.scope_logs.iter().map(|s| s.log_records.len()).sum();
            // (A resource has one ResourceLogs per scope: plain events and the Common
            // Schema log have different scopes.)
            match groups.iter_mut().find(|(a, _)| *a == attrs) {
                Some((_, n)) => *n += records,
                None => groups.push((attrs, records)),
            }
        }
        groups
    }

    fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|&(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn check(mut make: impl FnMut() -> OtlpWriter) {
        let mut t = ContextTracker::new();
        let path = pod_path(UID);
        t.apply(
            None,
            ContextUpdate::Cgroup {
                id: 7,
                path: path.as_bytes(),
            },
        );
        t.apply(
            None,
            ContextUpdate::Cgroup {
                id: 9,
                path: b"/system.slice/cron.service",
            },
        );
        let uid_only = kv(&[
            ("host.name", "h"),
            ("container.id", ID),
            ("k8s.pod.uid", UID),
        ]);
        let bare = kv(&[("host.name", "h")]);
        // Before the names: the UID (and container id) alone; outside pods: nothing.
        let mut w = make();
        w.set_host_name("h");
        let got = export(&mut w, &t, &[7, 9]);
        // Plain records and Common Schema logs of a pod share its resource.
        assert_eq!(got, vec![(uid_only.clone(), 2), (bare.clone(), 2)]);
        // The names come.
        t.apply(
            None,
            ContextUpdate::Pod {
                uid: UID.as_bytes(),
                namespace: b"shop",
                name: b"cart-0",
            },
        );
        t.apply(
            None,
            ContextUpdate::ContainerName {
                id: ID.as_bytes(),
                name: b"app",
            },
        );
        let named = kv(&[
            ("host.name", "h"),
            ("container.id", ID),
            ("k8s.pod.uid", UID),
            ("k8s.namespace.name", "shop"),
            ("k8s.pod.name", "cart-0"),
            ("k8s.container.name", "app"),
        ]);
        assert_eq!(export(&mut w, &t, &[7]), vec![(named.clone(), 2)]);
        // The pod replaced by another of the same name (a new UID, a new cgroup): its
        // records carry the new UID, no name until the kubelet names that UID.
        let path2 = pod_path(UID2);
        t.apply(
            None,
            ContextUpdate::Cgroup {
                id: 8,
                path: path2.as_bytes(),
            },
        );
        let new_uid = kv(&[
            ("host.name", "h"),
            ("container.id", ID),
            ("k8s.pod.uid", UID2),
            ("k8s.container.name", "app"),
        ]);
        // Records of two pods in one request: one ResourceLogs each, in order.
        assert_eq!(
            export(&mut w, &t, &[7, 8, 7]),
            vec![(named.clone(), 4), (new_uid, 2)]
        );
        t.apply(
            None,
            ContextUpdate::Pod {
                uid: UID2.as_bytes(),
                namespace: b"shop",
                name: b"cart-0",
            },
        );
        let got = export(&mut w, &t, &[8]);
        assert_eq!(got[0].0[2], ("k8s.pod.uid".to_string(), UID2.to_string()));
        assert_eq!(
            got[0].0[4],
            ("k8s.pod.name".to_string(), "cart-0".to_string())
        );
        // Without set_context (--no-context): no Kubernetes attributes.
        let mut w = make();
        w.set_host_name("h");
        let plain = PreparedFormat::new(&metrics_format("plain"), "user_events", "plain", None);
        let mut out = Vec::new();
        w.write_prepared(&mut out, &STAMP, &plain, &metrics_raw(b"\x01"));
        w.end_lines(&mut out);
        assert!(!String::from_utf8_lossy(&out).contains("k8s."));
    }

    /// The per-cgroup cache of rendered attributes: a cgroup id whose path changes to
    /// another pod's (ids are inode numbers, reused once a cgroup is removed) gets the
    /// new pod's attributes, never the cached ones; the frames count each record under
    /// its pod, uevrec's own records under none.
    #[test]
    fn a_reused_cgroup_id_gets_the_new_pod_and_frames_count_pods() {
        let mut t = ContextTracker::new();
        let cgroup = |t: &mut ContextTracker, id, uid| {
            let path = pod_path(uid);
            t.apply(
                None,
                ContextUpdate::Cgroup {
                    id,
                    path: path.as_bytes(),
                },
            );
        };
        cgroup(&mut t, 7, UID);
        let (uid, namespace, name) = (UID.as_bytes(), &b"shop"[..], &b"cart-0"[..]);
        t.apply(
            None,
            ContextUpdate::Pod {
                uid,
                namespace,
                name,
            },
        );
        let mut w = OtlpWriter::export(LineOptions::default(), OtlpEncoding::Protobuf);
        let got = export(&mut w, &t, &[7, 9, 7]);
        assert_eq!(got[0].0[1], ("k8s.pod.uid".to_string(), UID.to_string()));
        cgroup(&mut t, 7, UID2);
        let got = export(&mut w, &t, &[7]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0[1], ("k8s.pod.uid".to_string(), UID2.to_string()));
        assert!(!got[0].0.iter().any(|(_, v)| v == "cart-0"), "{got:?}");

        // The frames' tables: per tracepoint and pod.
        let plain = PreparedFormat::new(&metrics_format("plain"), "user_events", "plain", None);
        let mut out = Vec::new();
        cgroup(&mut t, 8, UID);
        for c in [8, 7, 8, 9] {
            w.set_context(&t, &STAMP, Some(c));
            w.write_prepared(&mut out, &STAMP, &plain, &metrics_raw(b"\x01"));
        }
        w.write_lost(&mut out, None, 0, 3);
        w.end_lines(&mut out);
        let f = read_frames(&out).next().unwrap().unwrap();
        let uid2 = format!("/{UID2}");
        assert_eq!(
            f.tracepoints.entries().collect::<Vec<_>>(),
            [
                ("user_events:plain", "shop/cart-0", 2),
                ("user_events:plain", uid2.as_str(), 1),
                ("user_events:plain", "", 1),
                ("uevrec", "", 1),
            ]
        );
    }

    #[test]
    fn pods_are_resources_in_json_lines() {
        check(|| OtlpWriter::new(LineOptions::default()));
    }

    #[test]
    fn pods_are_resources_in_protobuf_frames() {
        check(|| OtlpWriter::export(LineOptions::default(), OtlpEncoding::Protobuf));
        // The general path as well as the compiled one.
        check(|| {
            let mut w = OtlpWriter::export(LineOptions::default(), OtlpEncoding::Protobuf);
            w.general_only = true;
            w
        });
    }
}

/// `set_stacktrace`: the next records carry `code.stacktrace` (logs, spans; JSON lines and
/// protobuf frames, the fast paths included) until it is unset.
#[test]
fn a_stack_set_is_code_stacktrace_on_logs_and_spans_until_unset() {
    const TEXT: &str = "\t    559f7ab8516f middle+0x9 (/tmp/chain)\n";
    let format = metrics_format("plain");
    let prepared = PreparedFormat::new(&format, "user_events", "plain", None);
    let span = Eh::new("Span")
        .u32("__csver__", 1024)
        .structure("PartA", 1)
        .str("time", "2024-03-28T00:45:12.3Z")
        .structure("PartB", 3)
        .str("_typeName", "Span")
        .str("name", "SELECT")
        .str("startTime", "2024-03-28T00:45:12.2Z");
    let feed = |w: &mut OtlpWriter, out: &mut Vec<u8>| {
        w.set_stacktrace(Some(TEXT));
        w.write_prepared(out, &STAMP, &prepared, &metrics_raw(b"\x01"));
        w.write_prepared(out, &STAMP, &eh_prepared("Prov_L4K1"), &span.raw());
        w.set_stacktrace(None);
        w.write_prepared(out, &STAMP, &prepared, &metrics_raw(b"\x02"));
        w.end_lines(out);
    };
    let stack_of = |attrs: &[opentelemetry_proto::tonic::common::v1::KeyValue]| {
        attrs
            .iter()
            .find(|kv| kv.key == "code.stacktrace")
            .map(|kv| format!("{:?}", kv.value))
    };
    let mut out = Vec::new();
    feed(&mut OtlpWriter::new(LineOptions::default()), &mut out);
    let logs: ExportLogsServiceRequest =
        serde_json::from_slice(out.split(|&b| b == b'\n').next().unwrap()).unwrap();
    let records = &logs.resource_logs[0].scope_logs[0].log_records;
    assert_eq!(records.len(), 2);
    assert!(
        stack_of(&records[0].attributes)
            .unwrap()
            .contains("middle+0x9")
    );
    assert_eq!(stack_of(&records[1].attributes), None);
    let line = &lines(&out)[1];
    let span_attrs = attributes(&line["resourceSpans"][0]["scopeSpans"][0]["spans"][0]);
    assert_eq!(span_attrs["code.stacktrace"], json!({"stringValue": TEXT}));

    let mut frames_out = Vec::new();
    feed(
        &mut OtlpWriter::export(LineOptions::default(), OtlpEncoding::Protobuf),
        &mut frames_out,
    );
    let frames: Vec<Frame<'_>> = read_frames(&frames_out).collect::<Result<_, _>>().unwrap();
    let logs = ExportLogsServiceRequest::decode(frames[0].body).unwrap();
    let records = &logs.resource_logs[0].scope_logs[0].log_records;
    assert!(
        stack_of(&records[0].attributes)
            .unwrap()
            .contains("middle+0x9")
    );
    assert_eq!(stack_of(&records[1].attributes), None);
}
