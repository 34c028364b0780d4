//! OTLP export: send the recorder's OTLP requests to a collector over gRPC or HTTP.
//!
//! Three parts, each usable on its own:
//! - [`config`]: flags and the OpenTelemetry exporter environment variables
//!   (`OTEL_EXPORTER_OTLP_*`) resolved into an [`ExportConfig`] with one endpoint,
//!   protocol, header set, compression, timeout and TLS setting per signal. Header values
//!   are [`Secret`]s that never print.
//! - [`transport`]: a [`Transport`] that sends ONE already-encoded export request
//!   (protobuf for `grpc` and `http/protobuf`, OTLP/JSON for `http/json`) and returns an
//!   [`Outcome`]: accepted (with the count a partial success rejected), retry (with the
//!   server's `Retry-After`/`RetryInfo` hint), or failed for good (with the server's
//!   message). It blocks, owns its own small tokio runtime, and knows nothing of batching
//!   or the spool.
//! - [`retry`]: the OTLP specification's classification of gRPC codes and HTTP statuses,
//!   and [`Backoff`], exponential with jitter and a cap, where a server's hint wins.
//!
//! A caller's loop, in short:
//! ```no_run
//! use uevrec::delivery::export::{Backoff, BackoffPolicy, ExportFlags, Outcome, Signal, Transport};
//! let config = uevrec::delivery::export::resolve(&ExportFlags::default(), &uevrec::delivery::export::process_env)?;
//! let mut transport = Transport::new(&config)?;
//! let mut backoff = Backoff::new(BackoffPolicy::default());
//! let body: Vec<u8> = Vec::new(); // an encoded ExportLogsServiceRequest
//! loop {
//!     match transport.send(Signal::Logs, &body) {
//!         Outcome::Accepted { .. } | Outcome::Failed { .. } => break, // count, then next batch
//!         Outcome::Retry { after, .. } => std::thread::sleep(backoff.next_delay(after)),
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod config;
pub mod retry;
pub mod transport;

pub use config::{
    Compression, ConfigError, ExportConfig, ExportFlags, Header, Protocol, Secret, Signal,
    SignalConfig, Tls, process_env, resolve,
};
pub use retry::{Backoff, BackoffPolicy, Verdict};
pub use transport::{Outcome, Transport, TransportError};
