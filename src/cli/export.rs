//! `record`'s export flags: OTLP to a collector (`--otlp`, `--otlp-endpoint`, …), the
//! spool, the metrics endpoint. The OpenTelemetry exporter environment variables fill in
//! what the flags leave out (crate::export::config); docs/export.md has the semantics.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::values;
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
    pub otlp_protocol: Option<String>,
    /// A header sent with every request, KEY=VALUE (repeatable; the value is never
    /// printed).
    #[arg(long, value_name = "KEY=VALUE")]
    pub otlp_header: Vec<String>,
    /// gzip or none.
    #[arg(long, value_name = "gzip|none")]
    pub otlp_compression: Option<String>,
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
}

impl ExportArgs {
    /// Whether export was asked for.
    pub fn enabled(&self) -> bool {
        self.otlp || self.otlp_endpoint.is_some()
    }
}
