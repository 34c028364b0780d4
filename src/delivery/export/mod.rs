//! OTLP export: send the recorder's OTLP requests to a collector over gRPC or HTTP, in
//! three parts, each usable on its own: [`config`] (flags and the `OTEL_EXPORTER_OTLP_*`
//! variables resolved into an [`ExportConfig`] with one endpoint, protocol, header set,
//! compression, timeout and TLS setting per signal; header values are [`Secret`]s that
//! never print), [`transport`] (a [`Transport`] that sends ONE already-encoded request and
//! returns an [`Outcome`]; it blocks, owns its own small tokio runtime, and knows nothing
//! of batching or the spool) and [`retry`] (the OTLP specification's classification of
//! answers, and [`Backoff`]). A caller's loop is at [`Transport`].
//!
//! `config` is the pure crate's `export_config` (fuzzed there).
//!
//! Layers, lowest first: `retry`, `transport`.

/// Flags and environment resolved: [`uevrec_parsers::export_config`].
pub use uevrec_parsers::export_config as config;
pub mod retry;
pub mod transport;

pub use config::{
    Compression, ConfigError, ExportConfig, ExportFlags, Header, Protocol, Secret, Signal,
    SignalConfig, Tls, resolve,
};
pub use retry::{Backoff, BackoffPolicy, Verdict};
pub use transport::{Outcome, Transport, TransportError};

/// Read the process environment (for [`resolve`]); a value that is not UTF-8 is read
/// lossily, so that it fails validation with a message instead of being ignored.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}
