//! `export::Transport` against the real receivers of tests/common/otlp_receiver.rs on
//! 127.0.0.1 (pure tier: no root, no tracefs): gRPC, HTTP/protobuf and HTTP/JSON, with
//! and without gzip; every answer a collector can give, and a collector that stalls,
//! drops the connection, goes away and comes back.

use std::time::{Duration, Instant};

use crate::common::otlp_receiver::{
    BAD_REQUEST_MESSAGE, Kind, Mode, PARTIAL_MESSAGE, Receiver, TestPki,
};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::metrics::v1::{
    Gauge, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;
use uevrec::delivery::export::{
    Compression, ExportConfig, ExportFlags, Outcome, Protocol, Signal, Transport, resolve,
};

const SECRET: &str = "Bearer tok-5ecr3t-value";

/// The three ways to export, with the receiver that speaks each.
const PROTOCOLS: [(Protocol, Kind); 3] = [
    (Protocol::Grpc, Kind::Grpc),
    (Protocol::HttpProtobuf, Kind::Http),
    (Protocol::HttpJson, Kind::Http),
];

fn config(protocol: Protocol, endpoint: &str, gzip: bool, timeout: Duration) -> ExportConfig {
    let flags = ExportFlags {
        endpoint: Some(endpoint.to_string()),
        protocol: Some(protocol),
        headers: vec![format!("authorization={SECRET}"), "x-tenant=t1".into()],
        compression: Some(if gzip {
            Compression::Gzip
        } else {
            Compression::None
        }),
        timeout: Some(timeout),
        ..Default::default()
    };
    // No environment: these tests must not depend on the caller's OTEL_* variables.
    resolve(&flags, &|_| None).expect("a valid configuration")
}

fn transport(protocol: Protocol, rx: &Receiver, gzip: bool) -> Transport {
    Transport::new(&config(
        protocol,
        &rx.endpoint(),
        gzip,
        Duration::from_secs(5),
    ))
    .expect("a transport")
}

fn string(s: &str) -> Option<AnyValue> {
    Some(AnyValue {
        value: Some(any_value::Value::StringValue(s.into())),
    })
}

fn resource() -> Option<Resource> {
    Some(Resource {
        attributes: vec![KeyValue {
            key: "service.name".into(),
            value: string("uevrec-test"),
            ..Default::default()
        }],
        ..Default::default()
    })
}

fn logs_request(first_seq: u64, n: u64) -> ExportLogsServiceRequest {
    let records = (first_seq..first_seq + n)
        .map(|seq| LogRecord {
            time_unix_nano: 1_700_000_000_000_000_000 + seq,
            severity_number: 9,
            severity_text: "INFO".into(),
            body: string(&format!("seq {seq}")),
            attributes: vec![KeyValue {
                key: "seq".into(),
                value: Some(AnyValue {
                    value: Some(any_value::Value::IntValue(seq as i64)),
                }),
                ..Default::default()
            }],
            trace_id: vec![0xab; 16],
            span_id: vec![0xcd; 8],
            ..Default::default()
        })
        .collect();
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: resource(),
            scope_logs: vec![ScopeLogs {
                log_records: records,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn spans_request() -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: resource(),
            scope_spans: vec![ScopeSpans {
                spans: vec![Span {
                    trace_id: (1..=16).collect(),
                    span_id: (1..=8).collect(),
                    name: "work".into(),
                    kind: 1,
                    start_time_unix_nano: 1_700_000_000_000_000_000,
                    end_time_unix_nano: 1_700_000_000_000_000_500,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn metrics_request() -> ExportMetricsServiceRequest {
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: resource(),
            scope_metrics: vec![ScopeMetrics {
                metrics: vec![Metric {
                    name: "queue.depth".into(),
                    unit: "1".into(),
                    data: Some(metric::Data::Gauge(Gauge {
                        data_points: vec![NumberDataPoint {
                            time_unix_nano: 1_700_000_000_000_000_000,
                            value: Some(number_data_point::Value::AsInt(42)),
                            ..Default::default()
                        }],
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// `msg` encoded for `protocol`: protobuf, or OTLP/JSON for http/json.
fn encode<M: Message + serde::Serialize>(protocol: Protocol, msg: &M) -> Vec<u8> {
    match protocol {
        Protocol::HttpJson => serde_json::to_vec(msg).unwrap(),
        _ => msg.encode_to_vec(),
    }
}

fn accepted() -> Outcome {
    Outcome::Accepted {
        rejected: 0,
        message: None,
    }
}

#[test]
fn every_signal_arrives_over_every_protocol_with_and_without_gzip() {
    for (protocol, kind) in PROTOCOLS {
        for gzip in [false, true] {
            let what = format!("{protocol} gzip={gzip}");
            let rx = Receiver::start(kind);
            let mut t = transport(protocol, &rx, gzip);
            let logs = logs_request(1, 50);
            let spans = spans_request();
            let metrics = metrics_request();
            assert_eq!(
                t.send(Signal::Logs, &encode(protocol, &logs)),
                accepted(),
                "{what}"
            );
            assert_eq!(
                t.send(Signal::Traces, &encode(protocol, &spans)),
                accepted(),
                "{what}"
            );
            assert_eq!(
                t.send(Signal::Metrics, &encode(protocol, &metrics)),
                accepted(),
                "{what}"
            );
            // What arrived, decoded by the receiver's own stack, is what was sent.
            assert_eq!(rx.logs(), [logs], "{what}");
            assert_eq!(rx.spans(), [spans], "{what}");
            assert_eq!(rx.metrics(), [metrics], "{what}");
            assert_eq!(rx.requests(), 3, "{what}");
            for headers in rx.headers_seen() {
                let get = |n: &str| {
                    headers
                        .iter()
                        .find(|(k, _)| k == n)
                        .map(|(_, v)| v.as_str())
                };
                assert_eq!(get("authorization"), Some(SECRET), "{what}");
                assert_eq!(get("x-tenant"), Some("t1"), "{what}");
                assert!(
                    get("user-agent").is_some_and(|u| u.contains("uevrec/")),
                    "{what}"
                );
                let (encoding, content_type) = match protocol {
                    Protocol::Grpc => ("grpc-encoding", "application/grpc"),
                    Protocol::HttpProtobuf => ("content-encoding", "application/x-protobuf"),
                    Protocol::HttpJson => ("content-encoding", "application/json"),
                };
                assert_eq!(get(encoding), gzip.then_some("gzip"), "{what}");
                assert!(
                    get("content-type").is_some_and(|c| c.starts_with(content_type)),
                    "{what}: {headers:?}"
                );
            }
            // gRPC: the three signals share one connection; HTTP/1.1 keeps its connection alive.
            assert_eq!(rx.connections(), 1, "{what}");
        }
    }
}

#[test]
fn per_signal_endpoints_reach_their_paths() {
    let rx = Receiver::start(Kind::Http);
    let env = |name: &str| match name {
        "OTEL_EXPORTER_OTLP_ENDPOINT" => Some(rx.endpoint()),
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT" => Some(format!("{}/v1/logs", rx.endpoint())),
        _ => None,
    };
    let c = resolve(&ExportFlags::default(), &env).unwrap();
    let mut t = Transport::new(&c).unwrap();
    assert_eq!(
        t.endpoint(Signal::Traces),
        format!("{}/v1/traces", rx.endpoint())
    );
    assert_eq!(
        t.send(Signal::Traces, &spans_request().encode_to_vec()),
        accepted()
    );
    // The metrics URL was given as-is: it points at /v1/logs, where the receiver reads
    // the body as a logs request (same wire shape: accepted, recorded as logs).
    let logs = logs_request(7, 1);
    assert_eq!(t.send(Signal::Metrics, &logs.encode_to_vec()), accepted());
    assert_eq!(rx.logs(), [logs]);
    assert_eq!(rx.spans().len(), 1);
    assert!(rx.metrics().is_empty());
}

#[test]
fn partial_success_is_counted_with_the_servers_message() {
    for (protocol, kind) in PROTOCOLS {
        let rx = Receiver::start(kind);
        rx.set_mode(Mode::Partial { rejected: 3 });
        let mut t = transport(protocol, &rx, false);
        for (signal, body) in [
            (Signal::Logs, encode(protocol, &logs_request(1, 5))),
            (Signal::Traces, encode(protocol, &spans_request())),
            (Signal::Metrics, encode(protocol, &metrics_request())),
        ] {
            assert_eq!(
                t.send(signal, &body),
                Outcome::Accepted {
                    rejected: 3,
                    message: Some(PARTIAL_MESSAGE.into())
                },
                "{protocol} {signal}"
            );
        }
        assert_eq!(rx.logs().len() + rx.spans().len() + rx.metrics().len(), 3);
    }
}

#[test]
fn unavailable_and_throttling_are_retries_with_the_servers_hint() {
    for (protocol, kind) in PROTOCOLS {
        let rx = Receiver::start(kind);
        let mut t = transport(protocol, &rx, false);
        let body = encode(protocol, &logs_request(1, 2));

        rx.set_mode(Mode::Unavailable);
        match t.send(Signal::Logs, &body) {
            Outcome::Retry {
                after: None,
                reason,
            } => {
                assert!(reason.contains("unavailable"), "{protocol}: {reason}")
            }
            other => panic!("{protocol}: Unavailable gave {other:?}"),
        }

        rx.set_mode(Mode::TooMany {
            retry_after: Some(7),
        });
        match t.send(Signal::Logs, &body) {
            Outcome::Retry { after, reason } => {
                assert_eq!(after, Some(Duration::from_secs(7)), "{protocol}: {reason}")
            }
            other => panic!("{protocol}: TooMany(7) gave {other:?}"),
        }

        // Without a hint: HTTP 429 is retryable; gRPC RESOURCE_EXHAUSTED without
        // RetryInfo is not (the specification: the server cannot recover).
        rx.set_mode(Mode::TooMany { retry_after: None });
        match (protocol, t.send(Signal::Logs, &body)) {
            (Protocol::Grpc, Outcome::Failed { reason }) => {
                assert!(
                    reason.contains("gRPC status 8 (Some resource has been exhausted)"),
                    "{reason}"
                )
            }
            (
                Protocol::HttpProtobuf | Protocol::HttpJson,
                Outcome::Retry {
                    after: None,
                    reason,
                },
            ) => {
                assert!(reason.contains("429"), "{reason}")
            }
            (p, other) => panic!("{p}: TooMany without a hint gave {other:?}"),
        }

        rx.set_mode(Mode::Ok);
        assert_eq!(t.send(Signal::Logs, &body), accepted(), "{protocol}");
        assert_eq!(
            rx.logs().len(),
            1,
            "{protocol}: only the accepted request is recorded"
        );
        assert_eq!(rx.requests(), 4, "{protocol}");
    }
}

#[test]
fn bad_request_fails_with_the_servers_message() {
    for (protocol, kind) in PROTOCOLS {
        for gzip in [false, true] {
            let rx = Receiver::start(kind);
            rx.set_mode(Mode::BadRequest);
            let mut t = transport(protocol, &rx, gzip);
            match t.send(Signal::Traces, &encode(protocol, &spans_request())) {
                Outcome::Failed { reason } => {
                    // The message comes from the google.rpc.Status (gRPC trailers; HTTP
                    // body in protobuf or JSON as the request).
                    assert!(reason.contains(BAD_REQUEST_MESSAGE), "{protocol}: {reason}");
                    assert!(!reason.contains(SECRET), "{protocol}: {reason}");
                }
                other => panic!("{protocol}: BadRequest gave {other:?}"),
            }
            assert!(rx.spans().is_empty());
        }
    }
}

#[test]
fn an_undecodable_body_is_refused_by_the_receiver_as_bad_request() {
    // The receivers really decode: garbage is a 400 / INVALID_ARGUMENT-class failure.
    for (protocol, kind) in PROTOCOLS {
        let rx = Receiver::start(kind);
        let mut t = transport(protocol, &rx, false);
        match t.send(Signal::Logs, b"\xff\xff\xff not a request") {
            Outcome::Failed { .. } => {}
            other => panic!("{protocol}: garbage gave {other:?}"),
        }
        assert!(rx.logs().is_empty());
    }
}

#[test]
fn a_stalled_collector_is_a_retry_after_the_timeout() {
    for (protocol, kind) in PROTOCOLS {
        let rx = Receiver::start(kind);
        let timeout = Duration::from_millis(300);
        let mut t = Transport::new(&config(protocol, &rx.endpoint(), false, timeout)).unwrap();
        let body = encode(protocol, &logs_request(1, 3));
        assert_eq!(t.send(Signal::Logs, &body), accepted(), "{protocol}");

        rx.set_mode(Mode::Stall);
        let start = Instant::now();
        let outcome = t.send(Signal::Logs, &body);
        let took = start.elapsed();
        match outcome {
            Outcome::Retry {
                after: None,
                reason,
            } => {
                eprintln!("{protocol} stall: {reason}");
                assert!(reason.contains("within 300ms"), "{protocol}: {reason}")
            }
            other => panic!("{protocol}: Stall gave {other:?}"),
        }
        assert!(
            took >= timeout && took < timeout * 10,
            "{protocol}: gave up after {took:?}, timeout {timeout:?}"
        );

        rx.set_mode(Mode::Ok);
        assert_eq!(
            t.send(Signal::Logs, &body),
            accepted(),
            "{protocol} after the stall"
        );
        assert_eq!(rx.logs().len(), 2);
    }
}

#[test]
fn a_dropped_connection_is_a_retry_and_the_next_send_reconnects() {
    for (protocol, kind) in PROTOCOLS {
        let rx = Receiver::start(kind);
        let mut t = transport(protocol, &rx, false);
        let body = encode(protocol, &logs_request(1, 3));
        assert_eq!(t.send(Signal::Logs, &body), accepted(), "{protocol}");

        rx.set_mode(Mode::DropConnection);
        match t.send(Signal::Logs, &body) {
            Outcome::Retry {
                after: None,
                reason,
            } => eprintln!("{protocol} drop: {reason}"),
            other => panic!("{protocol}: DropConnection gave {other:?}"),
        }
        rx.set_mode(Mode::Ok);
        assert_eq!(
            t.send(Signal::Logs, &body),
            accepted(),
            "{protocol} after the drop"
        );
        assert_eq!(rx.logs().len(), 2);
        assert_eq!(
            rx.connections(),
            2,
            "{protocol}: one connection dropped, one new"
        );
    }
}

#[test]
fn a_collector_that_goes_away_and_comes_back_on_the_same_port() {
    for (protocol, kind) in PROTOCOLS {
        let rx = Receiver::start(kind);
        let mut t = transport(protocol, &rx, true);
        let body = encode(protocol, &logs_request(1, 3));
        assert_eq!(t.send(Signal::Logs, &body), accepted(), "{protocol}");

        let port = rx.stop();
        for _ in 0..2 {
            match t.send(Signal::Logs, &body) {
                Outcome::Retry {
                    after: None,
                    reason,
                } => {
                    eprintln!("{protocol} stopped: {reason}");
                    assert!(!reason.contains(SECRET), "{reason}");
                    assert!(
                        reason.to_lowercase().contains("refused")
                            || reason.to_lowercase().contains("connect")
                            || reason.to_lowercase().contains("closed"),
                        "{protocol}: {reason}"
                    );
                }
                other => panic!("{protocol}: a stopped receiver gave {other:?}"),
            }
        }

        let rx = Receiver::start_on(kind, port);
        assert_eq!(
            t.send(Signal::Logs, &body),
            accepted(),
            "{protocol} after the restart"
        );
        assert_eq!(rx.logs(), [logs_request(1, 3)], "{protocol}");
    }
}

#[test]
fn nothing_listening_is_a_retry_not_a_failure() {
    // A port that was free a moment ago: connection refused.
    let port = Receiver::start(Kind::Http).stop();
    for (protocol, _) in PROTOCOLS {
        let c = config(
            protocol,
            &format!("http://127.0.0.1:{port}"),
            false,
            Duration::from_secs(2),
        );
        let mut t = Transport::new(&c).unwrap();
        match t.send(Signal::Metrics, &encode(protocol, &metrics_request())) {
            Outcome::Retry {
                after: None,
                reason,
            } => {
                assert!(reason.contains(&port.to_string()), "{protocol}: {reason}")
            }
            other => panic!("{protocol}: gave {other:?}"),
        }
    }
}

#[test]
fn header_values_stay_out_of_debug_and_outcomes() {
    for (protocol, kind) in PROTOCOLS {
        let rx = Receiver::start(kind);
        let c = config(protocol, &rx.endpoint(), false, Duration::from_millis(300));
        assert!(!format!("{c:?}").contains(SECRET));
        let mut t = Transport::new(&c).unwrap();
        assert!(!format!("{t:?}").contains(SECRET));
        let body = encode(protocol, &logs_request(1, 1));
        for mode in [
            Mode::BadRequest,
            Mode::Unavailable,
            Mode::Stall,
            Mode::DropConnection,
        ] {
            rx.set_mode(mode.clone());
            let outcome = t.send(Signal::Logs, &body);
            assert!(!matches!(outcome, Outcome::Accepted { .. }), "{mode:?}");
            assert!(
                !format!("{outcome:?}").contains(SECRET),
                "{protocol} {mode:?}"
            );
            assert!(
                !format!("{outcome:?}").contains("5ecr3t"),
                "{protocol} {mode:?}"
            );
        }
        // ...while the receiver did get it.
        assert_eq!(rx.last_header("authorization").as_deref(), Some(SECRET));
    }
}

/// An https configuration for `rx` with the given CA and client certificate files.
fn tls_config(
    protocol: Protocol,
    rx: &Receiver,
    ca: Option<&std::path::Path>,
    client: Option<(&std::path::Path, &std::path::Path)>,
) -> ExportConfig {
    assert!(rx.endpoint().starts_with("https://"));
    let flags = ExportFlags {
        endpoint: Some(rx.endpoint()),
        protocol: Some(protocol),
        timeout: Some(Duration::from_secs(5)),
        ca: ca.map(Into::into),
        client_cert: client.map(|(c, _)| c.into()),
        client_key: client.map(|(_, k)| k.into()),
        ..Default::default()
    };
    resolve(&flags, &|_| None).expect("a valid configuration")
}

#[test]
fn https_with_the_collectors_ca() {
    let pki = TestPki::new();
    for (protocol, kind) in PROTOCOLS {
        let rx = Receiver::start_tls(kind, &pki, false);
        let mut t = Transport::new(&tls_config(protocol, &rx, Some(&pki.ca), None)).unwrap();
        let logs = logs_request(1, 4);
        assert_eq!(
            t.send(Signal::Logs, &encode(protocol, &logs)),
            accepted(),
            "{protocol}"
        );
        assert_eq!(rx.logs(), [logs], "{protocol}");
        assert!(
            rx.tls_failures().is_empty(),
            "{protocol}: {:?}",
            rx.tls_failures()
        );
    }
}

#[test]
fn https_refuses_a_collector_the_trusted_roots_do_not_vouch_for() {
    let pki = TestPki::new();
    let other = TestPki::new();
    for (protocol, kind) in PROTOCOLS {
        let rx = Receiver::start_tls(kind, &pki, false);
        // Another CA given: the receiver's certificate is not trusted.
        let mut t = Transport::new(&tls_config(protocol, &rx, Some(&other.ca), None)).unwrap();
        match t.send(Signal::Logs, &encode(protocol, &logs_request(1, 1))) {
            Outcome::Retry { reason, .. } => {
                assert!(
                    reason.to_lowercase().contains("certificate"),
                    "{protocol}: {reason}"
                )
            }
            other => panic!("{protocol}: an untrusted server gave {other:?}"),
        }
        // The system roots (no CA given) do not know the test CA either; a machine
        // without any system roots is told so when the transport is built.
        match Transport::new(&tls_config(protocol, &rx, None, None)) {
            Ok(mut t) => match t.send(Signal::Logs, &encode(protocol, &logs_request(1, 1))) {
                Outcome::Retry { reason, .. } => assert!(
                    reason.to_lowercase().contains("certificate"),
                    "{protocol}: {reason}"
                ),
                other => panic!("{protocol}: system roots gave {other:?}"),
            },
            Err(e) => assert!(e.to_string().contains("--otlp-ca"), "{e}"),
        }
        assert!(rx.logs().is_empty(), "{protocol}");
    }
}

#[test]
fn mutual_tls_needs_the_client_certificate() {
    let pki = TestPki::new();
    for (protocol, kind) in PROTOCOLS {
        let rx = Receiver::start_tls(kind, &pki, true);
        let body = encode(protocol, &logs_request(1, 2));
        let mut without = Transport::new(&tls_config(protocol, &rx, Some(&pki.ca), None)).unwrap();
        match without.send(Signal::Logs, &body) {
            Outcome::Retry { .. } => {}
            other => panic!("{protocol}: no client certificate gave {other:?}"),
        }
        assert!(rx.logs().is_empty(), "{protocol}");
        let client = Some((pki.client_cert.as_path(), pki.client_key.as_path()));
        let mut with = Transport::new(&tls_config(protocol, &rx, Some(&pki.ca), client)).unwrap();
        assert_eq!(with.send(Signal::Logs, &body), accepted(), "{protocol}");
        assert_eq!(rx.logs().len(), 1, "{protocol}");
    }
}

#[test]
fn unusable_tls_files_are_clear_errors_when_the_transport_is_built() {
    let pki = TestPki::new();
    let junk = pki.dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate\n").unwrap();
    let missing = pki.dir.path().join("missing.pem");
    for (protocol, kind) in PROTOCOLS {
        let rx = Receiver::start_tls(kind, &pki, false);
        for (ca, client, words) in [
            (
                Some(missing.as_path()),
                None,
                vec!["CA certificate", "missing.pem", "PEM"],
            ),
            (
                Some(junk.as_path()),
                None,
                vec!["junk.pem", "no PEM certificate"],
            ),
            (
                Some(pki.ca.as_path()),
                Some((pki.client_cert.as_path(), junk.as_path())),
                vec!["client key", "junk.pem"],
            ),
        ] {
            let e = Transport::new(&tls_config(protocol, &rx, ca, client))
                .expect_err("a transport with unusable TLS files");
            for w in words {
                assert!(e.to_string().contains(w), "{protocol}: {e} lacks {w:?}");
            }
        }
    }
}
