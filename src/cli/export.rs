//! `record`'s export flags: OTLP to a collector (`--otlp`, `--otlp-endpoint`, …), the
//! spool, the metrics endpoint. The OpenTelemetry exporter environment variables fill in
//! what the flags leave out (crate::delivery::export::config); docs/export.md has the semantics.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::values;
use crate::delivery::export::{Compression, Protocol};
use crate::delivery::queue::FullPolicy;

/// OTLP export, spool and metrics flags.
#[derive(Debug, Args, Default)]
#[command(next_help_heading = "Export to a collector (OTLP)")]
pub struct ExportArgs {
    /// Export the records to an OpenTelemetry collector, configured by the OTLP
    /// exporter environment variables (OTEL_EXPORTER_OTLP_ENDPOINT, _PROTOCOL, _HEADERS,
    /// _COMPRESSION, _TIMEOUT, _CERTIFICATE …) and the --otlp-* flags.
    #[arg(long)]
    pub otlp: bool,
    /// The collector (implies --otlp): for grpc the server (http://host:4317), for
    /// http/* the base URL (/v1/logs, /v1/traces, /v1/metrics are appended). Plain
    /// http only when the URL says http://.
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// grpc, http/protobuf or http/json (default: OTEL_EXPORTER_OTLP_PROTOCOL, else
    /// http/protobuf as the OTLP specification says).
    #[arg(long, value_name = "PROTOCOL")]
    pub otlp_protocol: Option<Protocol>,
    /// A header sent with every request, KEY=VALUE (repeatable; the value is never
    /// printed).
    #[arg(long, value_name = "KEY=VALUE")]
    pub otlp_header: Vec<String>,
    /// gzip or none.
    #[arg(long, value_name = "gzip|none")]
    pub otlp_compression: Option<Compression>,
    /// How long one request may take (default 10s).
    #[arg(long, value_name = "DUR", value_parser = values::parse_positive_duration)]
    pub otlp_timeout: Option<Duration>,
    /// CA certificates (PEM) to trust instead of the system's.
    #[arg(long, value_name = "FILE")]
    pub otlp_ca: Option<PathBuf>,
    /// Client certificate (PEM) for mutual TLS.
    #[arg(long, value_name = "FILE", requires = "otlp_client_key")]
    pub otlp_client_cert: Option<PathBuf>,
    /// Client private key (PEM) for mutual TLS.
    #[arg(long, value_name = "FILE", requires = "otlp_client_cert")]
    pub otlp_client_key: Option<PathBuf>,
    /// A gRPC endpoint given without a scheme is plain http:// (as
    /// OTEL_EXPORTER_OTLP_INSECURE=true).
    #[arg(long)]
    pub otlp_insecure: bool,
    /// Keep every batch on disk in DIR until the collector acknowledged it: batches
    /// survive collector outages and uevrec crashes (a new uevrec on the same DIR sends
    /// them). Without it a few MiB wait in memory.
    #[arg(long, value_name = "DIR")]
    pub spool: Option<PathBuf>,
    /// The most the spool may hold (e.g. 1G).
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = values::parse_positive_size)]
    pub spool_size: u64,
    /// When the spool is full: block (the rings fill and the kernel counts what is
    /// lost) or drop-oldest (counted, reason spool_full).
    #[arg(long, value_enum, value_name = "POLICY", default_value = "block")]
    pub spool_full: FullPolicy,
    /// On stop, how long to keep sending what is queued (the rest stays in the spool).
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = humantime::parse_duration)]
    pub drain_timeout: Duration,
    /// Serve Prometheus metrics at http://ADDR/metrics, and /healthz and /readyz
    /// (e.g. 127.0.0.1:9464).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// /readyz fails once the collector has been unreachable this long.
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = values::parse_positive_duration)]
    pub unready_after: Duration,
    /// At most this many Kubernetes pods get /metrics series of their own (labels
    /// k8s_namespace, k8s_pod); later pods' records count under k8s_pod="(other)".
    #[arg(long, value_name = "N", default_value_t = crate::delivery::metrics::Metrics::DEFAULT_MAX_PODS)]
    pub metrics_max_pods: usize,
}

impl ExportArgs {
    /// Whether export was asked for.
    pub fn enabled(&self) -> bool {
        self.otlp || self.otlp_endpoint.is_some()
    }
}

/// What a recording with export runs beside the recorder: the sink, the accounting, the
/// metrics endpoint.
pub struct ExportRun {
    /// The recorder's sink.
    pub sink: crate::delivery::DeliverySink,
    /// The accounting and the collector's health.
    pub shared: std::sync::Arc<crate::delivery::Shared>,
    /// The frames' encoding (the pipeline writes them).
    pub encoding: uevrec_parsers::otlp::OtlpEncoding,
    /// The live counters the session updates (read by `/metrics`).
    pub stats: std::sync::Arc<crate::capture::session::LiveStats>,
    /// The metrics endpoint, while it serves.
    pub server: Option<crate::delivery::metrics::MetricsServer>,
    /// Its health state.
    pub health: Option<std::sync::Arc<crate::delivery::metrics::Health>>,
    /// The queue (for the summary).
    pub queue: std::sync::Arc<dyn crate::delivery::queue::Queue>,
    /// Where the spool is, when there is one.
    pub spool_dir: Option<PathBuf>,
}

/// Queue bytes in memory without `--spool`.
const MEMORY_QUEUE: u64 = 16 << 20;

impl ExportArgs {
    fn flags(&self) -> crate::delivery::export::ExportFlags {
        crate::delivery::export::ExportFlags {
            endpoint: self.otlp_endpoint.clone(),
            protocol: self.otlp_protocol,
            headers: self.otlp_header.clone(),
            compression: self.otlp_compression,
            timeout: self.otlp_timeout,
            ca: self.otlp_ca.clone(),
            client_cert: self.otlp_client_cert.clone(),
            client_key: self.otlp_client_key.clone(),
            insecure: self.otlp_insecure.then_some(true),
        }
    }

    /// Resolve the configuration, connect nothing yet, open the spool and the metrics
    /// endpoint, start the sender: errors say the fix.
    pub fn open(&self, quiet: bool, host: Option<String>) -> Result<ExportRun, String> {
        use std::sync::Arc;

        use crate::delivery::export::{Backoff, BackoffPolicy, Transport, process_env, resolve};
        use crate::delivery::metrics::{self, Health, HealthConfig, Metrics};
        use crate::delivery::queue::{MemoryQueue, Queue};
        use crate::delivery::{DeliverySink, Parts, Shared, ledger, wire};
        use uevrec_parsers::otlp::OtlpEncoding;

        let config = resolve(&self.flags(), &process_env).map_err(|e| e.to_string())?;
        let json = |p: Protocol| p == Protocol::HttpJson;
        let enc = json(config.logs.protocol);
        if json(config.traces.protocol) != enc || json(config.metrics.protocol) != enc {
            return Err("the per-signal OTLP protocols mix http/json with protobuf \
                        (grpc, http/protobuf): use one body encoding for every signal"
                .into());
        }
        let encoding = if enc {
            OtlpEncoding::Json
        } else {
            OtlpEncoding::Protobuf
        };
        let transport = Transport::new(&config).map_err(|e| e.to_string())?;

        let metrics = self.metrics_listen.as_ref().map(|_| {
            let m = Metrics::new();
            m.set_max_pods(self.metrics_max_pods);
            Arc::new(m)
        });
        let ledger = match &metrics {
            Some(m) => ledger::Ledger::with_metrics(m.clone()),
            None => ledger::Ledger::default(),
        };
        let shared = Arc::new(Shared::new(ledger));

        let (queue, first_new_id): (Arc<dyn Queue>, u64) = match &self.spool {
            Some(dir) => {
                let full = self.spool_full;
                let (spool, found) =
                    crate::delivery::spool::Spool::open(crate::delivery::spool::SpoolConfig {
                        dir: dir.clone(),
                        max_bytes: self.spool_size,
                        full,
                    })
                    .map_err(|e| e.to_string())?;
                if found.records > 0 {
                    shared
                        .ledger
                        .from_spool(&[(ledger::EARLIER_RUN.to_string(), found.records)]);
                }
                if found.corrupt_records > 0 {
                    shared.ledger.corrupt_at_start(found.corrupt_records);
                }
                if !quiet && (found.batches > 0 || found.corrupt_batches > 0) {
                    crate::messages::print(format_args!(
                        "uevrec: spool {}: {} batches ({} records) of an earlier run to send{}\n",
                        dir.display(),
                        found.batches,
                        found.records,
                        if found.corrupt_batches > 0 {
                            format!(
                                "; {} damaged batches ({} records known, {} regions unknown, \
                                 {} bytes) skipped and counted",
                                found.corrupt_batches,
                                found.corrupt_records,
                                found.corrupt_unknown,
                                found.corrupt_bytes
                            )
                        } else {
                            String::new()
                        }
                    ));
                }
                (Arc::new(spool), found.next_id)
            }
            None => (Arc::new(MemoryQueue::new(MEMORY_QUEUE, self.spool_full)), 0),
        };

        let stats = Arc::new(crate::capture::session::LiveStats::default());
        let (server, health) = match (&self.metrics_listen, &metrics) {
            (Some(addr), Some(m)) => {
                let health = Arc::new(Health::new(HealthConfig {
                    unready_after: self.unready_after,
                    ..HealthConfig::default()
                }));
                let (q, st, h) = (queue.clone(), stats.clone(), health.clone());
                m.on_scrape(Box::new(move |m: &Metrics| {
                    let o = q.occupancy();
                    m.set_spool(o.bytes, o.capacity, o.batches);
                    m.set_stage_chunks(
                        st.stage_queued.load(std::sync::atomic::Ordering::Relaxed),
                        crate::capture::staging::STAGE_CHUNKS as u64,
                    );
                    let attached = st.attached.load(std::sync::atomic::Ordering::Relaxed);
                    if st.scanned.load(std::sync::atomic::Ordering::Acquire) {
                        h.set_attached(attached);
                        h.set_waiting(attached == 0);
                    }
                    let have: std::collections::BTreeMap<u32, u64> =
                        m.lost_by_cpu().into_iter().collect();
                    let now = st
                        .lost_per_cpu
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .clone();
                    for (cpu, n) in now {
                        let before = have.get(&cpu).copied().unwrap_or(0);
                        if n > before {
                            m.records_lost(cpu, n - before);
                        }
                    }
                }));
                let server = metrics::serve(addr, m.clone(), health.clone())
                    .map_err(|e| format!("--metrics-listen {addr}: {e}"))?;
                (Some(server), Some(health))
            }
            _ => (None, None),
        };

        let observe: Option<Box<crate::delivery::Observer>> = match (&metrics, &health) {
            (Some(m), Some(h)) => {
                let (m, h) = (m.clone(), h.clone());
                Some(Box::new(move |signal, attempt, took, bytes| {
                    use crate::delivery::Attempt;
                    use crate::delivery::metrics::{ExportOutcome, RetryReason};
                    let signal = uevrec_parsers::otlp::frame::Signal::from_byte(signal)
                        .unwrap_or(uevrec_parsers::otlp::frame::Signal::Logs);
                    let outcome = match attempt {
                        Attempt::Accepted { .. } => {
                            h.collector_reachable();
                            ExportOutcome::Accepted
                        }
                        Attempt::Failed { .. } => {
                            h.collector_reachable();
                            ExportOutcome::Failed
                        }
                        Attempt::Retry { reason, after } => {
                            h.collector_unreachable();
                            ExportOutcome::Retry(retry_reason(reason, after.is_some()))
                        }
                    };
                    let _ = RetryReason::ALL;
                    m.export_attempt(signal, outcome, took, bytes as u64);
                }))
            }
            _ => None,
        };
        let tick: Option<Box<dyn Fn() + Send>> = health.as_ref().map(|h| {
            let beat = h.heartbeat("uevrec-export");
            Box::new(move || beat.beat()) as Box<dyn Fn() + Send>
        });

        let parts = Parts {
            queue: queue.clone(),
            link: Box::new(transport),
            pacing: Box::new(Backoff::new(BackoffPolicy::default())),
            meta: Arc::new(wire::batch_info),
            notices: Some(Arc::new(wire::notice_maker(encoding, host))),
            durable: self.spool.is_some(),
            drain: self.drain_timeout,
            quiet,
            observe,
            tick,
            first_new_id,
        };
        let sink = DeliverySink::start(parts, shared.clone(), Box::new(wire::split_frames))
            .map_err(|e| format!("starting the export thread: {e}"))?;
        Ok(ExportRun {
            sink,
            shared,
            encoding,
            stats,
            server,
            health,
            queue,
            spool_dir: self.spool.clone(),
        })
    }
}

/// The metrics' retry reason of a transport's retry (its reason text).
fn retry_reason(reason: &str, hinted: bool) -> crate::delivery::metrics::RetryReason {
    use crate::delivery::metrics::RetryReason;
    let r = reason.to_ascii_lowercase();
    if hinted || r.contains("429") || r.contains("resource_exhausted") || r.contains("throttl") {
        RetryReason::Throttled
    } else if r.contains("timed out")
        || r.contains("timeout")
        || r.contains("deadline")
        || r.contains("504")
    {
        RetryReason::Timeout
    } else if r.contains("unavailable") || r.contains("503") || r.contains("502") {
        RetryReason::Unavailable
    } else if r.contains("connect")
        || r.contains("refused")
        || r.contains("reset")
        || r.contains("closed")
        || r.contains("broken")
        || r.contains("tls")
        || r.contains("certificate")
    {
        RetryReason::Connection
    } else {
        RetryReason::Other
    }
}

/// The end-of-run lines of an export: exported, dropped by reason, still queued.
pub fn summary_text(
    run: &crate::delivery::ledger::LedgerSnapshot,
    spool: Option<&std::path::Path>,
) -> String {
    use crate::delivery::ledger::DropReason;
    let t = &run.total;
    let mut text = format!(
        "uevrec: export: {} records acknowledged by the collector, {} dropped, {} still {}",
        t.exported,
        t.dropped_total(),
        t.pending,
        match spool {
            Some(d) => format!("in the spool {} (sent by the next run on it)", d.display()),
            None => "queued (lost: no --spool)".to_string(),
        }
    );
    if t.from_spool > 0 {
        text.push_str(&format!(
            "; {} of them were left by an earlier run",
            t.from_spool
        ));
    }
    text.push('\n');
    for r in DropReason::ALL {
        if t.dropped(r) > 0 {
            text.push_str(&format!(
                "  {:>12}  dropped: {}\n",
                t.dropped(r),
                r.as_str()
            ));
        }
    }
    for (tp, c) in &run.per_tracepoint {
        text.push_str(&format!(
            "  {tp}: {} recorded, {} exported, {} dropped, {} queued\n",
            c.recorded + c.from_spool,
            c.exported,
            c.dropped_total(),
            c.pending
        ));
    }
    text
}
