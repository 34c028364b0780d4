//! The metrics endpoint (`uevrec::delivery::metrics::serve`) on 127.0.0.1, read by real clients:
//! `/metrics` fetched with Python's urllib and parsed by the PyPI package
//! prometheus-client (its Prometheus 0.0.4 text parser and its OpenMetrics parser,
//! tests/metrics/parse.py), every value compared with what the test counted itself;
//! `/healthz` and `/readyz` flipping as the recorder's health changes; 404, 405, a port in
//! use, shutdown. Pure tier: needs python3 (prometheus-client is installed with pip when
//! missing).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::sleep;
use std::time::Duration;

use crate::common::tier::Tier;
use serde_json::Value;
use uevrec::delivery::metrics::{
    DropReason, ExportOutcome, Health, HealthConfig, Metrics, MetricsError, MetricsServer,
    RetryReason, Signal, UNKNOWN_TRACEPOINT, serve,
};

/// What tests/metrics/parse.py read at `addr`'s /metrics.
fn scrape(addr: SocketAddr, openmetrics: bool) -> Value {
    crate::common::export::scrape_json(&addr.to_string(), openmetrics)
}

/// One parsed sample's value: the sample named `name` whose labels are exactly `labels`.
fn value(page: &Value, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let want: BTreeMap<&str, &str> = labels.iter().copied().collect();
    let found: Vec<f64> = page["samples"]
        .as_array()?
        .iter()
        .filter(|s| s["name"] == name)
        .filter(|s| {
            let got = s["labels"].as_object().expect("labels object");
            got.len() == want.len()
                && want
                    .iter()
                    .all(|(k, v)| got.get(*k).and_then(Value::as_str) == Some(*v))
        })
        .map(|s| s["value"].as_f64().expect("a number"))
        .collect();
    assert!(found.len() <= 1, "{name} {labels:?} {} times", found.len());
    found.first().copied()
}

/// A minimal HTTP/1.1 request over a fresh connection: (status, content type, body).
fn request(addr: SocketAddr, method: &str, path: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).expect("connecting to the metrics server");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("reading the answer");
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP answer");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    let content_type = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    (status, content_type, body.to_string())
}

fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let (status, _, body) = request(addr, "GET", path);
    (status, body)
}

fn start(metrics: &Arc<Metrics>, health: &Arc<Health>) -> MetricsServer {
    serve("127.0.0.1:0", metrics.clone(), health.clone()).expect("serving on 127.0.0.1:0")
}

/// A small deterministic generator (xorshift), so that the counts are many and varied.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// What the test expects, counted beside the metrics.
#[derive(Default)]
struct Model {
    recorded: BTreeMap<String, u64>,
    exported: BTreeMap<(String, Signal), u64>,
    dropped: BTreeMap<(String, DropReason), u64>,
    spooled: BTreeMap<String, i64>,
    lost: BTreeMap<u32, u64>,
}

impl Model {
    fn merge(&mut self, o: Model) {
        for (k, v) in o.recorded {
            *self.recorded.entry(k).or_default() += v;
        }
        for (k, v) in o.exported {
            *self.exported.entry(k).or_default() += v;
        }
        for (k, v) in o.dropped {
            *self.dropped.entry(k).or_default() += v;
        }
        for (k, v) in o.spooled {
            *self.spooled.entry(k).or_default() += v;
        }
        for (k, v) in o.lost {
            *self.lost.entry(k).or_default() += v;
        }
    }
}

const TRACEPOINTS: [&str; 4] = [
    "user_events:checkout",
    "raw_syscalls:sys_enter",
    "sched:sched_switch",
    // Not a name the kernel allows, but it proves the label escaping to a real parser.
    "odd:we\"ird\\name",
];

/// One thread's batches: records recorded, spooled, then acknowledged or dropped.
fn run_batches(metrics: &Metrics, seed: u64, batches: usize) -> Model {
    let mut rng = Rng(seed);
    let mut model = Model::default();
    let handles: Vec<_> = TRACEPOINTS.iter().map(|t| metrics.tracepoint(t)).collect();
    for _ in 0..batches {
        let i = rng.below(TRACEPOINTS.len() as u64) as usize;
        let (tp, h) = (TRACEPOINTS[i].to_string(), &handles[i]);
        let n = 1 + rng.below(500);
        h.recorded(n);
        h.spooled_add(n);
        *model.recorded.entry(tp.clone()).or_default() += n;
        *model.spooled.entry(tp.clone()).or_default() += n as i64;
        // Part of the batch leaves the spool: acknowledged, or dropped for a reason.
        let out = rng.below(n + 1);
        let dropped = rng.below(out + 1) / 4;
        let signal = Signal::ALL[rng.below(3) as usize];
        let reason = DropReason::ALL[rng.below(DropReason::ALL.len() as u64) as usize];
        h.exported(signal, out - dropped);
        if dropped > 0 {
            h.dropped(reason, dropped);
            *model.dropped.entry((tp.clone(), reason)).or_default() += dropped;
        }
        h.spooled_sub(out);
        *model.exported.entry((tp.clone(), signal)).or_default() += out - dropped;
        *model.spooled.entry(tp).or_default() -= out as i64;
        if rng.below(10) == 0 {
            let cpu = rng.below(4) as u32;
            let lost = rng.below(1000);
            metrics.records_lost(cpu, lost);
            *model.lost.entry(cpu).or_default() += lost;
        }
    }
    // Records of no known tracepoint (a damaged spool batch).
    metrics.records_recorded(UNKNOWN_TRACEPOINT, 3);
    metrics.records_dropped(UNKNOWN_TRACEPOINT, DropReason::SpoolCorrupt, 3);
    *model.recorded.entry(UNKNOWN_TRACEPOINT.into()).or_default() += 3;
    *model
        .dropped
        .entry((UNKNOWN_TRACEPOINT.into(), DropReason::SpoolCorrupt))
        .or_default() += 3;
    model
}

#[test]
fn metrics_read_by_prometheus_parsers_equal_the_counts() {
    require!(Tier::Pure, crate::common::prometheus_client_here());
    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health::default());
    let server = start(&metrics, &health);
    let addr = server.local_addr();

    // Four threads update at once, as the recorder's threads do.
    metrics.init_cpus(0..4);
    let mut model = Model::default();
    std::thread::scope(|s| {
        let runs: Vec<_> = (1..=4u64)
            .map(|seed| {
                let m = &metrics;
                s.spawn(move || run_batches(m, seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), 2000))
            })
            .collect();
        for r in runs {
            model.merge(r.join().unwrap());
        }
    });

    // Export attempts with known durations (one thread: the histogram's sum in order).
    let durations_ms = [
        0.4, 1.0, 3.0, 7.5, 12.0, 80.0, 400.0, 2200.0, 9000.0, 45000.0,
    ];
    let mut requests: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    let mut retries: BTreeMap<&str, u64> = BTreeMap::new();
    let mut sent = 0u64;
    for (i, ms) in durations_ms.iter().enumerate() {
        let outcome = match i % 4 {
            0 | 1 => ExportOutcome::Accepted,
            2 => ExportOutcome::Retry(RetryReason::ALL[i % RetryReason::ALL.len()]),
            _ => ExportOutcome::Failed,
        };
        let bytes = 1000 * i as u64 + 17;
        metrics.export_attempt(
            Signal::Logs,
            outcome,
            Duration::from_secs_f64(ms / 1000.0),
            bytes,
        );
        sent += bytes;
        *requests.entry(("logs", outcome.as_str())).or_default() += 1;
        if let ExportOutcome::Retry(r) = outcome {
            *retries.entry(r.as_str()).or_default() += 1;
        }
    }

    // Gauges owned elsewhere, read at scrape time.
    let spool_bytes = Arc::new(AtomicU64::new(123_456));
    let b = spool_bytes.clone();
    metrics.on_scrape(Box::new(move |m| {
        m.set_spool(b.load(Ordering::Relaxed), 1 << 30, 42);
        m.set_stage_chunks(5, 64);
    }));
    metrics.spool_corrupt_bytes(999);
    health.set_attached(4);
    health.collector_reachable();

    for openmetrics in [false, true] {
        let page = scrape(addr, openmetrics);
        let ctype = page["content_type"].as_str().unwrap();
        if openmetrics {
            assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
        } else {
            assert!(ctype.starts_with("text/plain; version=0.0.4"), "{ctype}");
        }
        let v = |name: &str, labels: &[(&str, &str)]| {
            value(&page, name, labels).unwrap_or_else(|| panic!("no {name} {labels:?}"))
        };

        for (tp, n) in &model.recorded {
            assert_eq!(
                v("uevrec_records_recorded_total", &[("tracepoint", tp)]),
                *n as f64
            );
        }
        for ((tp, signal), n) in &model.exported {
            assert_eq!(
                v(
                    "uevrec_records_exported_total",
                    &[("tracepoint", tp), ("signal", signal.as_str())]
                ),
                *n as f64
            );
        }
        for ((tp, reason), n) in &model.dropped {
            assert_eq!(
                v(
                    "uevrec_records_dropped_total",
                    &[("tracepoint", tp), ("reason", reason.as_str())]
                ),
                *n as f64,
                "{tp} {reason}"
            );
        }
        for (tp, n) in &model.spooled {
            assert_eq!(
                v("uevrec_records_spooled", &[("tracepoint", tp)]),
                *n as f64
            );
        }
        for cpu in 0..4u32 {
            let lost = model.lost.get(&cpu).copied().unwrap_or(0);
            assert_eq!(
                v("uevrec_records_lost_total", &[("cpu", &cpu.to_string())]),
                lost as f64
            );
        }
        // No series beyond the model's: as many samples as it has entries.
        let count = |name: &str| {
            page["samples"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| s["name"] == name)
                .count()
        };
        assert_eq!(count("uevrec_records_dropped_total"), model.dropped.len());
        assert_eq!(count("uevrec_records_exported_total"), model.exported.len());

        // The summary's numbers (Metrics::accounts) are the page's, and they add up:
        // recorded = exported + dropped + spooled.
        let accounts = metrics.accounts();
        assert_eq!(accounts.len(), TRACEPOINTS.len() + 1);
        for a in &accounts {
            let tp = [("tracepoint", a.tracepoint.as_str())];
            let page_sum = |name: &str| -> f64 {
                page["samples"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|s| s["name"] == name && s["labels"]["tracepoint"] == a.tracepoint)
                    .map(|s| s["value"].as_f64().unwrap())
                    .sum()
            };
            assert_eq!(v("uevrec_records_recorded_total", &tp), a.recorded as f64);
            assert_eq!(
                page_sum("uevrec_records_exported_total"),
                a.exported_total() as f64
            );
            assert_eq!(
                page_sum("uevrec_records_dropped_total"),
                a.dropped_total() as f64
            );
            let spooled = if a.tracepoint == UNKNOWN_TRACEPOINT {
                0.0
            } else {
                v("uevrec_records_spooled", &tp)
            };
            assert_eq!(spooled, a.spooled as f64);
            assert_eq!(a.unaccounted(), 0, "{a:?}");
            assert_eq!(
                a.recorded as f64,
                page_sum("uevrec_records_exported_total")
                    + page_sum("uevrec_records_dropped_total")
                    + spooled,
                "{}: recorded = exported + dropped + spooled on the page",
                a.tracepoint
            );
        }

        for ((signal, outcome), n) in &requests {
            assert_eq!(
                v(
                    "uevrec_export_requests_total",
                    &[("signal", signal), ("outcome", outcome)]
                ),
                *n as f64
            );
        }
        for (reason, n) in &retries {
            assert_eq!(
                v("uevrec_export_retries_total", &[("reason", reason)]),
                *n as f64
            );
        }
        assert_eq!(
            v("uevrec_export_sent_bytes_total", &[("signal", "logs")]),
            sent as f64
        );
        // Every bucket counts the durations at or below its bound.
        let buckets: Vec<(String, f64)> = page["samples"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["name"] == "uevrec_export_duration_seconds_bucket")
            .map(|s| {
                (
                    s["labels"]["le"].as_str().unwrap().to_string(),
                    s["value"].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(buckets.len(), 15, "14 bounds from 1 ms to 30 s, and +Inf");
        for (le, n) in &buckets {
            let bound: f64 = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            let want = durations_ms
                .iter()
                .filter(|ms| *ms / 1000.0 <= bound)
                .count();
            assert_eq!(*n, want as f64, "le={le}");
        }
        assert_eq!(
            v(
                "uevrec_export_duration_seconds_count",
                &[("signal", "logs")]
            ),
            durations_ms.len() as f64
        );
        let sum: f64 = durations_ms.iter().map(|ms| ms / 1000.0).sum();
        let got = v("uevrec_export_duration_seconds_sum", &[("signal", "logs")]);
        assert!((got - sum).abs() < 1e-9 * sum, "{got} vs {sum}");

        assert_eq!(
            v("uevrec_spool_bytes", &[]),
            spool_bytes.load(Ordering::Relaxed) as f64
        );
        assert_eq!(v("uevrec_spool_capacity_bytes", &[]), (1u64 << 30) as f64);
        assert_eq!(v("uevrec_spool_batches", &[]), 42.0);
        assert_eq!(v("uevrec_spool_corrupt_bytes_total", &[]), 999.0);
        assert_eq!(v("uevrec_stage_chunks_in_use", &[]), 5.0);
        assert_eq!(v("uevrec_stage_chunks", &[]), 64.0);
        assert_eq!(v("uevrec_attached_events", &[]), 4.0);
        assert_eq!(v("uevrec_collector_up", &[]), 1.0);
        assert_eq!(v("uevrec_collector_unreachable_seconds", &[]), 0.0);
        assert_eq!(v("uevrec_ready", &[]), 1.0);
        assert_eq!(
            v(
                "uevrec_build_info",
                &[("version", env!("CARGO_PKG_VERSION"))]
            ),
            1.0
        );
        assert!(v("process_resident_memory_bytes", &[]) > 0.0);
        assert!(v("process_open_fds", &[]) > 0.0);
        let families = page["families"].as_object().unwrap();
        let ty = |f: &str| families.get(f).and_then(Value::as_str);
        assert_eq!(ty("uevrec_records_recorded"), Some("counter"));
        assert_eq!(ty("uevrec_export_duration_seconds"), Some("histogram"));
        assert_eq!(ty("uevrec_records_spooled"), Some("gauge"));
        // The scrape hook ran for this scrape: the next one sees the new value.
        spool_bytes.fetch_add(1, Ordering::Relaxed);
    }
    server.shutdown();
}

#[test]
fn health_endpoints_flip() {
    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health::new(HealthConfig {
        unready_after: Duration::from_millis(300),
        spool_full_ratio: 0.9,
        stale_after: Duration::from_millis(400),
    }));
    let spool = Arc::new(AtomicU64::new(0));
    let s = spool.clone();
    metrics.on_scrape(Box::new(move |m| {
        m.set_spool(s.load(Ordering::Relaxed), 1000, 1)
    }));
    let server = start(&metrics, &health);
    let addr = server.local_addr();
    let ready_gauge = || {
        let (_, body) = get(addr, "/metrics");
        body.lines()
            .find_map(|l| l.strip_prefix("uevrec_ready "))
            .map(str::to_string)
            .expect("uevrec_ready on /metrics")
    };

    assert_eq!(
        get(addr, "/readyz"),
        (503, "starting: no events attached yet\n".into())
    );
    health.set_attached(0);
    assert_eq!(
        get(addr, "/readyz"),
        (503, "no events attached, and none waited for\n".into())
    );
    health.set_waiting(true);
    assert_eq!(get(addr, "/readyz"), (200, "ready\n".into()));
    health.set_attached(2);
    assert_eq!(ready_gauge(), "1");

    // The collector goes away: still ready until it has been away for longer than 300 ms.
    health.collector_unreachable();
    assert_eq!(get(addr, "/readyz").0, 200);
    sleep(Duration::from_millis(350));
    health.collector_unreachable(); // retries keep failing
    let (status, body) = get(addr, "/readyz");
    assert_eq!(status, 503);
    assert!(body.starts_with("collector unreachable for "), "{body}");
    assert!(body.ends_with(" s (more than 0.3 s)\n"), "{body}");
    assert_eq!(ready_gauge(), "0");
    // It comes back.
    health.collector_reachable();
    assert_eq!(get(addr, "/readyz"), (200, "ready\n".into()));

    // The spool fills to 90 %, then drains.
    spool.store(900, Ordering::Relaxed);
    assert_eq!(
        get(addr, "/readyz"),
        (
            503,
            "spool nearly full: 900 of 1000 bytes (90.0 %, limit 90.0 %)\n".into()
        )
    );
    spool.store(100, Ordering::Relaxed);
    assert_eq!(get(addr, "/readyz").0, 200);

    // Liveness: a thread that stops beating makes /healthz 503, naming it.
    let beat = health.heartbeat("drain");
    assert_eq!(get(addr, "/healthz"), (200, "ok\n".into()));
    sleep(Duration::from_millis(450));
    let (status, body) = get(addr, "/healthz");
    assert_eq!(status, 503);
    assert!(
        body.starts_with("thread drain: no heartbeat for "),
        "{body}"
    );
    beat.beat();
    assert_eq!(get(addr, "/healthz").0, 200);
    beat.retire();
    sleep(Duration::from_millis(450));
    assert_eq!(
        get(addr, "/healthz").0,
        200,
        "a retired thread no longer counts"
    );

    health.set_stopping();
    assert_eq!(get(addr, "/readyz"), (503, "stopping\n".into()));
    server.shutdown();
}

#[test]
fn unknown_paths_and_methods() {
    let server = start(&Arc::new(Metrics::new()), &Arc::new(Health::default()));
    let addr = server.local_addr();
    let (status, _, body) = request(addr, "GET", "/nope");
    assert_eq!(status, 404);
    assert!(body.contains("/metrics, /healthz and /readyz"), "{body}");
    assert_eq!(request(addr, "GET", "/metrics?x=1").0, 200);
    let (status, ctype, body) = request(addr, "HEAD", "/metrics");
    assert_eq!((status, body.as_str()), (200, ""));
    assert!(ctype.starts_with("text/plain; version=0.0.4"), "{ctype}");
    assert_eq!(request(addr, "POST", "/metrics").0, 405);
    assert_eq!(request(addr, "GET", "/").0, 200);
    server.shutdown();
}

#[test]
fn port_in_use_is_a_clear_error() {
    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health::default());
    let first = start(&metrics, &health);
    let addr = first.local_addr().to_string();
    let e = serve(&addr, metrics.clone(), health.clone()).unwrap_err();
    assert!(matches!(e, MetricsError::InUse { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("cannot listen on {addr}: the address is in use")),
        "{msg}"
    );
    assert!(msg.contains("choose another port"), "{msg}");
    let e = serve("localhost", metrics.clone(), health.clone()).unwrap_err();
    assert!(e.to_string().contains("no port"), "{e}");

    // Once shut down the port is free again, and nothing answers there meanwhile.
    let port = first.local_addr();
    first.shutdown();
    assert!(
        TcpStream::connect(port).is_err(),
        "still answering after shutdown"
    );
    let again = serve(&addr, metrics, health).expect("the port is free after shutdown");
    assert_eq!(again.local_addr(), port);
    again.shutdown();
}

#[test]
fn many_clients_at_once_are_all_answered() {
    let metrics = Arc::new(Metrics::new());
    metrics.records_recorded("s:e", 7);
    let server = start(&metrics, &Arc::new(Health::default()));
    let addr = server.local_addr();
    // More clients than the server serves at once: the rest wait, none is refused. One of
    // them holds its connection open without sending anything meanwhile.
    let idle = TcpStream::connect(addr).unwrap();
    std::thread::scope(|s| {
        let clients: Vec<_> = (0..3 * uevrec::delivery::metrics::MAX_CONNECTIONS)
            .map(|_| s.spawn(move || get(addr, "/metrics")))
            .collect();
        for c in clients {
            let (status, body) = c.join().unwrap();
            assert_eq!(status, 200);
            assert!(body.contains("uevrec_records_recorded_total{tracepoint=\"s:e\"} 7\n"));
        }
    });
    drop(idle);
    server.shutdown();
}

#[test]
fn shutdown_with_a_client_connected_returns() {
    let server = start(&Arc::new(Metrics::new()), &Arc::new(Health::default()));
    let mut held = TcpStream::connect(server.local_addr()).unwrap();
    // A request half sent: the connection is open and busy when the server stops.
    held.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
    sleep(Duration::from_millis(50));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        server.shutdown();
        tx.send(()).unwrap();
    });
    rx.recv_timeout(Duration::from_secs(5))
        .expect("shutdown returns while a client holds a connection");
    let mut rest = Vec::new();
    held.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let n = held.read_to_end(&mut rest).unwrap_or(0);
    assert_eq!(n, 0, "the connection was closed without an answer");
}
