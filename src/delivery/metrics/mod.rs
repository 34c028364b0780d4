//! Self-metrics and health endpoints (`--metrics-listen ADDR`): Prometheus text at
//! `/metrics`, liveness at `/healthz`, readiness at `/readyz`.
//!
//! [`Metrics`] holds every counter and gauge on the `prometheus-client` crate (its
//! registry and encoders: nothing of the exposition format is written by hand), updated
//! through typed methods once per batch; [`Health`] decides liveness and readiness by pure
//! functions ([`liveness`], [`readiness`]); [`serve`] answers on its own thread. Every
//! series, the accounting they keep (produced = recorded + lost; recorded = exported +
//! dropped + spooled) and their cardinality: docs/metrics.md.
//!
//! Layers, lowest first: `process`, `registry`, `health`, `server`.

mod health;
mod process;
mod registry;
mod server;

pub use health::{
    Health, HealthConfig, Heartbeat, NotReady, ReadinessInputs, Stale, liveness, readiness,
};
pub use registry::{Metrics, ScrapeHook, TracepointAccount, TracepointMetrics};
pub use server::{HEADER_TIMEOUT, MAX_CONNECTIONS, MetricsError, MetricsServer, serve};

use std::fmt;

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};

/// The `tracepoint` label of records whose tracepoint cannot be told (no tracepoint is
/// named without a `system:` part, so this never collides with one).
pub const UNKNOWN_TRACEPOINT: &str = "unknown";

/// The OTLP signal a record was exported as (the `signal` label).
pub use uevrec_parsers::otlp::frame::Signal;

/// Why records were dropped (the `reason` label of `uevrec_records_dropped_total`): each
/// drop is counted under exactly one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DropReason {
    /// The collector refused the batch with a non-retryable answer (HTTP 400,
    /// gRPC `INVALID_ARGUMENT`, …): the whole batch is dropped.
    Rejected,
    /// The collector accepted the batch but rejected some of its items
    /// (`partial_success.rejected_*`): those items.
    PartialSuccess,
    /// The spool was full under `--spool-full drop-oldest`: its oldest batches.
    SpoolFull,
    /// A spool batch failed its checksum or could not be read back.
    SpoolCorrupt,
    /// The spool could not store the batch (disk full, I/O error).
    SpoolIo,
    /// One record or batch exceeds what the collector or the spool accepts.
    TooLarge,
    /// A retry limit was reached before the collector acknowledged the batch.
    RetriesExhausted,
    /// uevrec stopped with the batch unacknowledged and no spool to keep it.
    Shutdown,
}

impl DropReason {
    /// Every reason, in the order of [`DropReason::index`].
    pub const ALL: [DropReason; 8] = [
        DropReason::Rejected,
        DropReason::PartialSuccess,
        DropReason::SpoolFull,
        DropReason::SpoolCorrupt,
        DropReason::SpoolIo,
        DropReason::TooLarge,
        DropReason::RetriesExhausted,
        DropReason::Shutdown,
    ];

    /// The label value (`rejected`, `partial_success`, `spool_full`, `spool_corrupt`,
    /// `spool_io`, `too_large`, `retries_exhausted`, `shutdown`).
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Rejected => "rejected",
            DropReason::PartialSuccess => "partial_success",
            DropReason::SpoolFull => "spool_full",
            DropReason::SpoolCorrupt => "spool_corrupt",
            DropReason::SpoolIo => "spool_io",
            DropReason::TooLarge => "too_large",
            DropReason::RetriesExhausted => "retries_exhausted",
            DropReason::Shutdown => "shutdown",
        }
    }

    /// The position of this reason in [`DropReason::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Why an export attempt will be retried (the `reason` label of
/// `uevrec_export_retries_total`), following the OTLP specification's retryable answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RetryReason {
    /// gRPC `UNAVAILABLE`, HTTP 502 or 503.
    Unavailable,
    /// Throttled: HTTP 429, gRPC `RESOURCE_EXHAUSTED` with `RetryInfo`.
    Throttled,
    /// No answer in time: the request's timeout, gRPC `DEADLINE_EXCEEDED`, HTTP 504.
    Timeout,
    /// The connection failed: refused, reset, closed mid-request, TLS handshake failed.
    Connection,
    /// Another retryable gRPC code (`CANCELLED`, `ABORTED`, `OUT_OF_RANGE`, `DATA_LOSS`).
    Other,
}

impl RetryReason {
    /// Every reason.
    pub const ALL: [RetryReason; 5] = [
        RetryReason::Unavailable,
        RetryReason::Throttled,
        RetryReason::Timeout,
        RetryReason::Connection,
        RetryReason::Other,
    ];

    /// The label value (`unavailable`, `throttled`, `timeout`, `connection`, `other`).
    pub fn as_str(self) -> &'static str {
        match self {
            RetryReason::Unavailable => "unavailable",
            RetryReason::Throttled => "throttled",
            RetryReason::Timeout => "timeout",
            RetryReason::Connection => "connection",
            RetryReason::Other => "other",
        }
    }
}

/// How one export request ended (the `outcome` label of `uevrec_export_requests_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ExportOutcome {
    /// The collector acknowledged it (a partial success included; its rejected items are
    /// counted as dropped with [`DropReason::PartialSuccess`]).
    Accepted,
    /// A retryable failure: the batch will be sent again.
    Retry(RetryReason),
    /// A non-retryable answer: the batch is dropped ([`DropReason::Rejected`]).
    Failed,
}

impl ExportOutcome {
    /// The label value: `accepted`, `retry` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            ExportOutcome::Accepted => "accepted",
            ExportOutcome::Retry(_) => "retry",
            ExportOutcome::Failed => "failed",
        }
    }
}

/// A label value that is one of this module's enums, written as its `as_str`.
macro_rules! label_value {
    ($($t:ty),*) => {$(
        impl EncodeLabelValue for $t {
            fn encode(&self, encoder: &mut LabelValueEncoder) -> fmt::Result {
                fmt::Write::write_str(encoder, self.as_str())
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )*};
}
label_value!(DropReason, RetryReason, ExportOutcome);

/// A [`Signal`] as a label value (the signal type is the parsers' frames').
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct SignalLabel(pub(crate) Signal);

impl EncodeLabelValue for SignalLabel {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> fmt::Result {
        fmt::Write::write_str(encoder, self.0.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_follow_all() {
        for (i, s) in Signal::ALL.iter().enumerate() {
            assert_eq!(s.index(), i);
        }
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
    }

    #[test]
    fn label_values_are_distinct_snake_case() {
        let mut seen = std::collections::HashSet::new();
        for v in DropReason::ALL.iter().map(|r| r.as_str()) {
            assert!(
                v.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{v}"
            );
            assert!(seen.insert(v), "{v} twice");
        }
        let retry: std::collections::HashSet<_> =
            RetryReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(retry.len(), RetryReason::ALL.len());
        assert!(!UNKNOWN_TRACEPOINT.contains(':'));
    }
}
