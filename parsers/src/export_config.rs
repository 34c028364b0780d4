//! Where and how to export: command-line flags and the OpenTelemetry exporter
//! environment variables resolved into one [`ExportConfig`] per run ([`resolve`]).
//!
//! The environment follows the OTLP exporter specification
//! (<https://opentelemetry.io/docs/specs/otel/protocol/exporter/>), so its documentation
//! applies unchanged; every variable and flag with its default: docs/export.md
//! ("Configuration"). Header values are [`Secret`]s: they never appear in a message, a
//! log line or a `Debug` print.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// The per-request timeout when none is configured (the specification's 10 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The wire protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// OTLP/gRPC: protobuf messages over HTTP/2 (`grpc`).
    Grpc,
    /// OTLP/HTTP with binary protobuf bodies (`http/protobuf`), the default.
    HttpProtobuf,
    /// OTLP/HTTP with OTLP/JSON bodies (`http/json`).
    HttpJson,
}

impl Protocol {
    /// The name used by the environment variable and the flag.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Grpc => "grpc",
            Protocol::HttpProtobuf => "http/protobuf",
            Protocol::HttpJson => "http/json",
        }
    }

    /// The endpoint used when none is configured.
    pub fn default_endpoint(self) -> &'static str {
        match self {
            Protocol::Grpc => "http://localhost:4317",
            Protocol::HttpProtobuf | Protocol::HttpJson => "http://localhost:4318",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Protocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "grpc" => Ok(Protocol::Grpc),
            "http/protobuf" => Ok(Protocol::HttpProtobuf),
            "http/json" => Ok(Protocol::HttpJson),
            _ => Err("one of grpc, http/protobuf, http/json".into()),
        }
    }
}

/// The kind of telemetry in an export request (the frames' signal).
pub use crate::otlp::frame::Signal;

/// The signal's part of its OTEL_EXPORTER_OTLP_<SIGNAL>_* variables.
fn env_infix(signal: Signal) -> &'static str {
    match signal {
        Signal::Logs => "LOGS",
        Signal::Traces => "TRACES",
        Signal::Metrics => "METRICS",
    }
}

/// Compression of request bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// Uncompressed (the default).
    #[default]
    None,
    /// gzip (`Content-Encoding: gzip`, `grpc-encoding: gzip`).
    Gzip,
}

impl FromStr for Compression {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "none" => Ok(Compression::None),
            "gzip" => Ok(Compression::Gzip),
            _ => Err("gzip or none".into()),
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
        })
    }
}

/// A value that must not be shown: `Debug` and `Display` print `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap a value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// One request header: a lowercase name and a secret value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The header (gRPC metadata) name, lowercase.
    pub name: String,
    /// Its value.
    pub value: Secret,
}

/// The export flags as the command line gives them (`None`: not given).
#[derive(Debug, Clone, Default)]
pub struct ExportFlags {
    /// `--otlp-endpoint URL`: the base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub endpoint: Option<String>,
    /// `--otlp-protocol`.
    pub protocol: Option<Protocol>,
    /// `--otlp-header KEY=VALUE`, repeatable (`Debug` shows them: keep flag values out of
    /// messages; [`resolve`] turns them into [`Secret`]s).
    pub headers: Vec<String>,
    /// `--otlp-compression`.
    pub compression: Option<Compression>,
    /// `--otlp-timeout`: per request.
    pub timeout: Option<Duration>,
    /// `--otlp-ca FILE`: PEM CA certificate(s) to trust instead of the system's roots.
    pub ca: Option<PathBuf>,
    /// `--otlp-client-cert FILE`: PEM client certificate (chain) for mutual TLS.
    pub client_cert: Option<PathBuf>,
    /// `--otlp-client-key FILE`: the PEM private key of the client certificate.
    pub client_key: Option<PathBuf>,
    /// `--otlp-insecure`: a gRPC endpoint without a scheme is plain `http://`.
    pub insecure: Option<bool>,
}

/// TLS files (PEM), read when the transport is built.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Tls {
    /// CA certificate(s) to trust instead of the system's roots.
    pub ca: Option<PathBuf>,
    /// Client certificate (chain) for mutual TLS; always given with `client_key`.
    pub client_cert: Option<PathBuf>,
    /// The client certificate's private key.
    pub client_key: Option<PathBuf>,
}

/// How one signal is exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignalConfig {
    /// The full URL: for HTTP with the signal's path, for gRPC `scheme://host:port/`.
    pub endpoint: String,
    /// The wire protocol.
    pub protocol: Protocol,
    /// Extra request headers (gRPC metadata).
    pub headers: Vec<Header>,
    /// Body compression.
    pub compression: Compression,
    /// Per-request timeout.
    pub timeout: Duration,
    /// TLS files; used only when `endpoint` is `https://`.
    pub tls: Tls,
}

impl SignalConfig {
    /// Whether the endpoint uses TLS.
    pub fn is_https(&self) -> bool {
        self.endpoint.starts_with("https://")
    }
}

/// The resolved export configuration, one [`SignalConfig`] per signal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportConfig {
    /// Logs.
    pub logs: SignalConfig,
    /// Traces.
    pub traces: SignalConfig,
    /// Metrics.
    pub metrics: SignalConfig,
}

impl ExportConfig {
    /// The configuration of `signal`.
    pub fn signal(&self, signal: Signal) -> &SignalConfig {
        match signal {
            Signal::Logs => &self.logs,
            Signal::Traces => &self.traces,
            Signal::Metrics => &self.metrics,
        }
    }
}

/// A configuration that cannot be used. Messages name the flag or variable and the fix;
/// they never contain a header value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A value that is not one of the accepted ones.
    #[error("{origin}: {value:?} is not valid: expected {expected}")]
    Invalid {
        /// The flag or environment variable.
        origin: String,
        /// What was given (never a header value).
        value: String,
        /// What is accepted.
        expected: String,
    },
    /// An endpoint URL that cannot be used.
    #[error("{origin}: endpoint {endpoint:?} {problem}")]
    Endpoint {
        /// The flag or environment variable.
        origin: String,
        /// The URL given, without its query string or `user:password@`.
        endpoint: String,
        /// What is wrong and how to fix it.
        problem: String,
    },
    /// A header entry that cannot be used (its value is never shown).
    #[error("{origin}: header entry {index} {problem}")]
    Header {
        /// The flag or environment variable.
        origin: String,
        /// Which entry, counted from 1.
        index: usize,
        /// What is wrong and how to fix it.
        problem: String,
    },
    /// A client certificate without its key, or the other way round.
    #[error(
        "{given} is set but {missing} is not: mutual TLS needs both the client certificate \
         and its private key"
    )]
    ClientPair {
        /// The flag or variable that was given.
        given: String,
        /// The one that is missing.
        missing: String,
    },
}

/// Resolve flags and environment (`env` looks a variable up; uevrec's
/// `delivery::export::process_env` for the real one) into the configuration of every signal, following the OTLP exporter
/// specification.
///
/// A per-signal variable (`OTEL_EXPORTER_OTLP_{LOGS,TRACES,METRICS}_*`) replaces the
/// general one for that signal (headers too: they are not merged), and an empty variable
/// counts as unset, as the specification says. `OTEL_EXPORTER_OTLP_ENDPOINT` is a base
/// URL (for HTTP `/v1/logs`, `/v1/traces`, `/v1/metrics` is appended to its path); a
/// per-signal endpoint is used as given (`/` when it has no path). Without an endpoint the
/// default is `http://localhost:4317` for gRPC and `http://localhost:4318` for HTTP.
///
/// Flags override the environment: `--otlp-endpoint` is a base URL like
/// `OTEL_EXPORTER_OTLP_ENDPOINT` and replaces every endpoint variable; `--otlp-header
/// KEY=VALUE` is added to the headers from the environment (a flag wins over a variable
/// for the same key) and its value is taken literally, not percent-decoded; the others
/// replace their variables.
///
/// Where the specification says to warn and go on (an unparsable timeout, an unknown
/// protocol), this is an error that names the variable and the fix instead: a recorder
/// that would silently send elsewhere, or never time out, loses data quietly.
///
/// Transport security: plain text only when the URL says `http://` (or a scheme-less gRPC
/// endpoint with `OTEL_EXPORTER_OTLP_INSECURE=true`); `https://` (and a scheme-less gRPC
/// endpoint) uses TLS with the system's root certificates, or only the CA file
/// (`OTEL_EXPORTER_OTLP_CERTIFICATE`) when one is given.
pub fn resolve(
    flags: &ExportFlags,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ExportConfig, ConfigError> {
    // An empty variable is unset (specification: "Environment Variable Specification").
    let env = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let flag_headers = parse_flag_headers(&flags.headers)?;
    let one = |signal| resolve_signal(signal, flags, &flag_headers, &env);
    Ok(ExportConfig {
        logs: one(Signal::Logs)?,
        traces: one(Signal::Traces)?,
        metrics: one(Signal::Metrics)?,
    })
}

/// A value from the per-signal variable, else the general one, with the variable's name.
fn lookup(
    env: &dyn Fn(&str) -> Option<String>,
    signal: Signal,
    suffix: &str,
) -> Option<(String, String)> {
    let specific = format!("OTEL_EXPORTER_OTLP_{}_{suffix}", env_infix(signal));
    if let Some(v) = env(&specific) {
        return Some((specific, v));
    }
    let general = format!("OTEL_EXPORTER_OTLP_{suffix}");
    env(&general).map(|v| (general, v))
}

fn resolve_signal(
    signal: Signal,
    flags: &ExportFlags,
    flag_headers: &[(usize, Header)],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<SignalConfig, ConfigError> {
    let protocol = match flags.protocol {
        Some(p) => p,
        None => match lookup(env, signal, "PROTOCOL") {
            Some((origin, v)) => v.parse().map_err(|expected| ConfigError::Invalid {
                origin,
                value: v,
                expected,
            })?,
            None => Protocol::HttpProtobuf,
        },
    };

    let insecure = match flags.insecure {
        Some(b) => b,
        None => match lookup(env, signal, "INSECURE") {
            Some((origin, v)) => match v.trim().to_ascii_lowercase().as_str() {
                "true" => true,
                "false" => false,
                _ => {
                    return Err(ConfigError::Invalid {
                        origin,
                        value: v,
                        expected: "true or false".into(),
                    });
                }
            },
            None => false,
        },
    };

    let specific_endpoint = format!("OTEL_EXPORTER_OTLP_{}_ENDPOINT", env_infix(signal));
    let (origin, raw, is_base) = if let Some(e) = &flags.endpoint {
        ("--otlp-endpoint".to_string(), e.clone(), true)
    } else if let Some(e) = env(&specific_endpoint) {
        (specific_endpoint, e, false)
    } else if let Some(e) = env("OTEL_EXPORTER_OTLP_ENDPOINT") {
        ("OTEL_EXPORTER_OTLP_ENDPOINT".to_string(), e, true)
    } else {
        (
            "the default endpoint".to_string(),
            protocol.default_endpoint().to_string(),
            true,
        )
    };
    let endpoint = endpoint_url(
        &origin,
        raw.trim(),
        signal,
        protocol,
        is_base,
        insecure,
        origin == "--otlp-endpoint",
    )?;

    let mut headers = match lookup(env, signal, "HEADERS") {
        Some((origin, v)) => parse_env_headers(&origin, &v, protocol)?,
        None => Vec::new(),
    };
    for (index, h) in flag_headers {
        check_header_name(&h.name, protocol).map_err(|problem| ConfigError::Header {
            origin: "--otlp-header".into(),
            index: *index,
            problem,
        })?;
        upsert(&mut headers, h.clone());
    }

    let compression = match flags.compression {
        Some(c) => c,
        None => match lookup(env, signal, "COMPRESSION") {
            Some((origin, v)) => v.parse().map_err(|expected| ConfigError::Invalid {
                origin,
                value: v,
                expected,
            })?,
            None => Compression::None,
        },
    };

    let timeout = match flags.timeout {
        Some(t) if t.is_zero() => {
            return Err(ConfigError::Invalid {
                origin: "--otlp-timeout".into(),
                value: "0".into(),
                expected: "a duration above zero (e.g. 10s)".into(),
            });
        }
        Some(t) => t,
        None => match lookup(env, signal, "TIMEOUT") {
            Some((origin, v)) => match v.trim().parse::<u64>() {
                Ok(ms) if ms > 0 => Duration::from_millis(ms),
                _ => {
                    return Err(ConfigError::Invalid {
                        origin,
                        value: v,
                        expected: "a whole number of milliseconds above zero (e.g. 10000)".into(),
                    });
                }
            },
            None => DEFAULT_TIMEOUT,
        },
    };

    let path = |flag: &Option<PathBuf>, flag_name: &str, suffix: &str| {
        flag.clone()
            .map(|p| (flag_name.to_string(), p))
            .or_else(|| lookup(env, signal, suffix).map(|(o, v)| (o, PathBuf::from(v.trim()))))
    };
    let ca = path(&flags.ca, "--otlp-ca", "CERTIFICATE");
    let cert = path(
        &flags.client_cert,
        "--otlp-client-cert",
        "CLIENT_CERTIFICATE",
    );
    let key = path(&flags.client_key, "--otlp-client-key", "CLIENT_KEY");
    match (&cert, &key) {
        (Some((given, _)), None) => {
            return Err(ConfigError::ClientPair {
                given: given.clone(),
                missing: "--otlp-client-key (OTEL_EXPORTER_OTLP_CLIENT_KEY)".into(),
            });
        }
        (None, Some((given, _))) => {
            return Err(ConfigError::ClientPair {
                given: given.clone(),
                missing: "--otlp-client-cert (OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE)".into(),
            });
        }
        _ => {}
    }

    Ok(SignalConfig {
        endpoint,
        protocol,
        headers,
        compression,
        timeout,
        tls: Tls {
            ca: ca.map(|(_, p)| p),
            client_cert: cert.map(|(_, p)| p),
            client_key: key.map(|(_, p)| p),
        },
    })
}

/// The endpoint URL for `signal`: checked, scheme settled, signal path appended to a base
/// URL for HTTP.
fn endpoint_url(
    origin: &str,
    raw: &str,
    signal: Signal,
    protocol: Protocol,
    is_base: bool,
    insecure: bool,
    from_flag: bool,
) -> Result<String, ConfigError> {
    let shown = shown_url(raw);
    let err = |problem: String| ConfigError::Endpoint {
        origin: origin.to_string(),
        endpoint: shown.clone(),
        problem,
    };
    let with_scheme = if raw.contains("://") {
        raw.to_string()
    } else if protocol == Protocol::Grpc {
        // Specification: OTEL_EXPORTER_OTLP_INSECURE applies to a gRPC endpoint without
        // a scheme; otherwise it is secure.
        format!("{}://{raw}", if insecure { "http" } else { "https" })
    } else {
        return Err(err(
            "has no scheme: write http://HOST:PORT for plain text or https://HOST:PORT for TLS"
                .into(),
        ));
    };
    let uri: http::Uri = with_scheme.parse().map_err(|e| {
        err(format!(
            "is not a URL ({e}): write it as http(s)://HOST:PORT"
        ))
    })?;
    let scheme = uri.scheme_str().unwrap_or_default().to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return Err(err(format!(
            "has the scheme {scheme:?}: only http:// (plain text) and https:// (TLS) are supported"
        )));
    }
    let Some(authority) = uri.authority() else {
        return Err(err("has no host: write it as http(s)://HOST:PORT".into()));
    };
    if authority.as_str().contains('@') {
        return Err(err(
            "contains credentials (user:password@): pass them as a header instead, e.g. \
             --otlp-header authorization=..."
                .into(),
        ));
    }
    if authority.host().is_empty() {
        return Err(err("has no host: write it as http(s)://HOST:PORT".into()));
    }
    let path = uri.path();
    let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    match protocol {
        Protocol::Grpc => {
            if !(path.is_empty() || path == "/") || !query.is_empty() {
                return Err(err(
                    "has a path or query, which gRPC does not use: give only \
                     scheme://HOST:PORT (the service path is fixed by OTLP)"
                        .into(),
                ));
            }
            Ok(format!("{scheme}://{authority}/"))
        }
        Protocol::HttpProtobuf | Protocol::HttpJson => {
            if !is_base {
                let path = if path.is_empty() { "/" } else { path };
                return Ok(format!("{scheme}://{authority}{path}{query}"));
            }
            if from_flag
                && Signal::ALL
                    .iter()
                    .any(|s| path.trim_end_matches('/').ends_with(s.http_path()))
            {
                return Err(err(format!(
                    "already ends with a signal path: --otlp-endpoint is the collector's base \
                     URL ({scheme}://{authority}), to which /v1/logs, /v1/traces and \
                     /v1/metrics are appended; for one signal's full URL set \
                     OTEL_EXPORTER_OTLP_LOGS_ENDPOINT (or _TRACES_, _METRICS_) instead"
                )));
            }
            Ok(format!(
                "{scheme}://{authority}{}{}{query}",
                path.trim_end_matches('/'),
                signal.http_path()
            ))
        }
    }
}

/// `raw` fit to repeat in a message: the query string and any `user:password@` may
/// carry a credential, so they are left out.
fn shown_url(raw: &str) -> String {
    let no_query = raw.split('?').next().unwrap_or_default();
    let (scheme, rest) = match no_query.split_once("://") {
        Some((s, r)) => (format!("{s}://"), r),
        None => (String::new(), no_query),
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}<redacted>@{host}{path}"),
        None => format!("{scheme}{authority}{path}"),
    }
}

/// Headers from `--otlp-header KEY=VALUE` flags (values literal), each with its position
/// (from 1) for messages.
fn parse_flag_headers(flags: &[String]) -> Result<Vec<(usize, Header)>, ConfigError> {
    let mut out: Vec<(usize, Header)> = Vec::new();
    // Counted from 1 (positions in a slice: no overflow).
    for (index, entry) in (1..).zip(flags) {
        let err = |problem: String| ConfigError::Header {
            origin: "--otlp-header".into(),
            index,
            problem,
        };
        let Some((key, value)) = entry.split_once('=') else {
            return Err(err("has no '=': write --otlp-header KEY=VALUE".into()));
        };
        let name = header_name(key).map_err(err)?;
        check_header_value(value).map_err(err)?;
        let h = Header {
            name,
            value: Secret::new(value),
        };
        match out.iter_mut().find(|(_, x)| x.name == h.name) {
            Some(x) => *x = (index, h),
            None => out.push((index, h)),
        }
    }
    Ok(out)
}

/// Headers from `OTEL_EXPORTER_OTLP_HEADERS`: `key1=value1,key2=value2`, each value
/// percent-decoded (W3C Baggage syntax without properties, as the specification says).
fn parse_env_headers(
    origin: &str,
    list: &str,
    protocol: Protocol,
) -> Result<Vec<Header>, ConfigError> {
    let mut out: Vec<Header> = Vec::new();
    for (index, entry) in (1..).zip(list.split(',')) {
        let err = |problem: String| ConfigError::Header {
            origin: origin.to_string(),
            index,
            problem,
        };
        if entry.trim().is_empty() {
            continue;
        }
        let Some((key, value)) = entry.split_once('=') else {
            return Err(err(format!(
                "has no '=': write {origin}=key1=value1,key2=value2"
            )));
        };
        let name = header_name(key).map_err(err)?;
        check_header_name(&name, protocol).map_err(err)?;
        let value = percent_encoding::percent_decode_str(value.trim())
            .decode_utf8()
            .map_err(|_| {
                err(format!(
                    "(key {name:?}) has a value whose percent-decoding is not UTF-8: \
                     percent-encode the value's UTF-8 bytes"
                ))
            })?;
        check_header_value(&value).map_err(|p| err(format!("(key {name:?}) {p}")))?;
        upsert(
            &mut out,
            Header {
                name,
                value: Secret::new(value),
            },
        );
    }
    Ok(out)
}

/// Replace the header of the same name, or append.
fn upsert(headers: &mut Vec<Header>, h: Header) {
    match headers.iter_mut().find(|x| x.name == h.name) {
        Some(x) => *x = h,
        None => headers.push(h),
    }
}

/// A valid header name, lowercased. The text is shown only when it is a valid name (an
/// entry without its '=' or a misplaced value could be a token).
fn header_name(key: &str) -> Result<String, String> {
    let key = key.trim();
    if key.is_empty() {
        return Err("has an empty key: write KEY=VALUE".into());
    }
    match http::HeaderName::from_bytes(key.as_bytes()) {
        Ok(n) => Ok(n.as_str().to_string()),
        Err(_) => Err(
            "has a key that is not a valid header name (letters, digits and !#$%&'*+-.^_`|~ \
             only)"
                .into(),
        ),
    }
}

/// Headers that uevrec sets itself, or that the protocol owns.
fn check_header_name(name: &str, protocol: Protocol) -> Result<(), String> {
    const RESERVED: [&str; 8] = [
        "content-type",
        "content-length",
        "content-encoding",
        "transfer-encoding",
        "host",
        "connection",
        "te",
        "user-agent",
    ];
    if RESERVED.contains(&name) || name.starts_with("grpc-") {
        return Err(format!(
            "sets {name:?}, which the exporter sets itself: remove it (use \
             --otlp-compression for compression)"
        ));
    }
    if protocol == Protocol::Grpc && name.ends_with("-bin") {
        return Err(format!(
            "sets {name:?}: gRPC binary metadata (-bin keys) is not supported; use a text key"
        ));
    }
    Ok(())
}

/// A value HTTP can carry (visible ASCII, spaces and tabs). The value is never shown.
fn check_header_value(value: &str) -> Result<(), String> {
    // Stricter than `http::HeaderValue` (which allows bytes above 127): gRPC metadata
    // and many proxies take ASCII only.
    match value
        .bytes()
        .all(|b| b == b'\t' || (0x20..0x7f).contains(&b))
    {
        true => Ok(()),
        false => Err(
            "has a value with characters a header cannot carry (only visible ASCII, space \
             and tab; in the environment variable, percent-encode others)"
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn resolve_env(pairs: &[(&str, &str)]) -> Result<ExportConfig, ConfigError> {
        resolve(&ExportFlags::default(), &env_of(pairs))
    }

    fn header(name: &str, value: &str) -> Header {
        Header {
            name: name.into(),
            value: Secret::new(value),
        }
    }

    #[test]
    fn defaults_are_the_specifications() {
        let c = resolve_env(&[]).unwrap();
        assert_eq!(c.logs.protocol, Protocol::HttpProtobuf);
        assert_eq!(c.logs.endpoint, "http://localhost:4318/v1/logs");
        assert_eq!(c.traces.endpoint, "http://localhost:4318/v1/traces");
        assert_eq!(c.metrics.endpoint, "http://localhost:4318/v1/metrics");
        assert_eq!(c.logs.timeout, Duration::from_secs(10));
        assert_eq!(c.logs.compression, Compression::None);
        assert!(c.logs.headers.is_empty());
        assert_eq!(c.logs.tls, Tls::default());
        let g = resolve_env(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).unwrap();
        for s in Signal::ALL {
            assert_eq!(g.signal(s).endpoint, "http://localhost:4317/");
            assert_eq!(g.signal(s).protocol, Protocol::Grpc);
        }
    }

    #[test]
    fn base_endpoint_gets_signal_paths_for_http() {
        for (base, logs) in [
            ("http://c:4318", "http://c:4318/v1/logs"),
            ("http://c:4318/", "http://c:4318/v1/logs"),
            ("https://c/mypath", "https://c/mypath/v1/logs"),
            ("https://c/mypath/", "https://c/mypath/v1/logs"),
            ("HTTPS://c:1/p?tenant=a", "https://c:1/p/v1/logs?tenant=a"),
        ] {
            let c = resolve_env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", base)]).unwrap();
            assert_eq!(c.logs.endpoint, logs, "{base}");
            assert!(c.metrics.endpoint.contains("/v1/metrics"));
        }
    }

    #[test]
    fn signal_endpoint_is_used_as_given() {
        let c = resolve_env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://t:9/custom/traces",
            ),
            ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://m:9"),
        ])
        .unwrap();
        assert_eq!(c.logs.endpoint, "http://base:4318/v1/logs");
        assert_eq!(c.traces.endpoint, "http://t:9/custom/traces");
        // No path: the root path, nothing appended.
        assert_eq!(c.metrics.endpoint, "http://m:9/");
    }

    #[test]
    fn per_signal_variables_win_over_general_ones() {
        let c = resolve_env(&[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "100"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
            ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "none"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "a=1,b=2"),
            ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "c=3"),
        ])
        .unwrap();
        assert_eq!(c.logs.protocol, Protocol::Grpc);
        assert_eq!(c.logs.endpoint, "http://localhost:4317/");
        assert_eq!(c.traces.protocol, Protocol::HttpJson);
        assert_eq!(c.traces.endpoint, "http://localhost:4318/v1/traces");
        assert_eq!(c.logs.timeout, Duration::from_millis(2500));
        assert_eq!(c.metrics.timeout, Duration::from_millis(100));
        assert_eq!(c.logs.compression, Compression::Gzip);
        assert_eq!(c.traces.compression, Compression::None);
        assert_eq!(c.logs.headers, [header("a", "1"), header("b", "2")]);
        // Replaced, not merged.
        assert_eq!(c.traces.headers, [header("c", "3")]);
    }

    #[test]
    fn empty_variables_are_unset() {
        let c = resolve_env(&[
            ("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", ""),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:1"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", " "),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", ""),
        ])
        .unwrap();
        assert_eq!(c.logs.endpoint, "http://x:1/v1/logs");
        assert_eq!(c.logs.protocol, Protocol::HttpProtobuf);
        assert_eq!(c.logs.timeout, DEFAULT_TIMEOUT);
    }

    #[test]
    fn headers_are_percent_decoded_and_trimmed() {
        let c = resolve_env(&[(
            "OTEL_EXPORTER_OTLP_HEADERS",
            " Api-Key = sec%20ret%3D%2C ,x-tenant=a%2Fb,,dup=1,dup=2",
        )])
        .unwrap();
        assert_eq!(
            c.logs.headers,
            [
                header("api-key", "sec ret=,"),
                header("x-tenant", "a/b"),
                header("dup", "2")
            ]
        );
    }

    #[test]
    fn flags_override_the_environment() {
        let flags = ExportFlags {
            endpoint: Some("https://flag:443".into()),
            protocol: Some(Protocol::Grpc),
            headers: vec!["authorization=Bearer%20x".into(), "x-new=1".into()],
            compression: Some(Compression::Gzip),
            timeout: Some(Duration::from_millis(1500)),
            ca: Some("/ca.pem".into()),
            client_cert: Some("/c.pem".into()),
            client_key: Some("/k.pem".into()),
            insecure: None,
        };
        let env = env_of(&[
            (
                "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
                "http://env:4318/v1/logs",
            ),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=env,x-env=2"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "none"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "99"),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/env-ca.pem"),
        ]);
        let c = resolve(&flags, &env).unwrap();
        for s in Signal::ALL {
            let c = c.signal(s);
            assert_eq!(c.endpoint, "https://flag:443/");
            assert_eq!(c.protocol, Protocol::Grpc);
            assert_eq!(c.compression, Compression::Gzip);
            assert_eq!(c.timeout, Duration::from_millis(1500));
            assert_eq!(c.tls.ca.as_deref(), Some(std::path::Path::new("/ca.pem")));
            assert!(c.is_https());
            // Flag values are literal; the flag wins for the same key; env keys stay.
            assert_eq!(
                c.headers,
                [
                    header("authorization", "Bearer%20x"),
                    header("x-env", "2"),
                    header("x-new", "1")
                ]
            );
        }
    }

    #[test]
    fn grpc_without_scheme_is_tls_unless_insecure() {
        let c = resolve_env(&[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"),
        ])
        .unwrap();
        assert_eq!(c.logs.endpoint, "https://collector:4317/");
        let c = resolve_env(&[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"),
            ("OTEL_EXPORTER_OTLP_INSECURE", "TRUE"),
        ])
        .unwrap();
        assert_eq!(c.logs.endpoint, "http://collector:4317/");
        // INSECURE does not turn an https:// URL into plain text.
        let c = resolve_env(&[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4317"),
            ("OTEL_EXPORTER_OTLP_INSECURE", "true"),
        ])
        .unwrap();
        assert_eq!(c.logs.endpoint, "https://collector:4317/");
    }

    #[test]
    fn bad_values_name_the_variable_and_the_fix() {
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str]);
        let cases: [Case; 10] = [
            (
                &[("OTEL_EXPORTER_OTLP_PROTOCOL", "http")],
                &[
                    "OTEL_EXPORTER_OTLP_PROTOCOL",
                    "grpc, http/protobuf, http/json",
                ],
            ),
            (
                &[("OTEL_EXPORTER_OTLP_LOGS_COMPRESSION", "zstd")],
                &["OTEL_EXPORTER_OTLP_LOGS_COMPRESSION", "gzip or none"],
            ),
            (
                &[("OTEL_EXPORTER_OTLP_TIMEOUT", "10s")],
                &["OTEL_EXPORTER_OTLP_TIMEOUT", "milliseconds"],
            ),
            (
                &[("OTEL_EXPORTER_OTLP_TIMEOUT", "0")],
                &["OTEL_EXPORTER_OTLP_TIMEOUT", "above zero"],
            ),
            (
                &[("OTEL_EXPORTER_OTLP_INSECURE", "yes")],
                &["OTEL_EXPORTER_OTLP_INSECURE", "true or false"],
            ),
            (
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")],
                &["OTEL_EXPORTER_OTLP_ENDPOINT", "http://HOST:PORT"],
            ),
            (
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://c:21")],
                &["only http:// (plain text) and https://"],
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317/v1/logs"),
                ],
                &["gRPC does not use"],
            ),
            (
                &[("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "/c.pem")],
                &["OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "private key"],
            ),
            (
                &[("OTEL_EXPORTER_OTLP_HEADERS", "content-type=text/plain")],
                &["sets \"content-type\"", "remove it"],
            ),
        ];
        for (env, words) in cases {
            let msg = resolve_env(env).unwrap_err().to_string();
            for w in words {
                assert!(msg.contains(w), "{msg:?} lacks {w:?}");
            }
        }
        let flags = ExportFlags {
            endpoint: Some("http://c:4318/v1/traces".into()),
            ..Default::default()
        };
        let msg = resolve(&flags, &env_of(&[])).unwrap_err().to_string();
        assert!(
            msg.contains("--otlp-endpoint") && msg.contains("base"),
            "{msg}"
        );
        let flags = ExportFlags {
            timeout: Some(Duration::ZERO),
            ..Default::default()
        };
        assert!(resolve(&flags, &env_of(&[])).is_err());
    }

    #[test]
    fn secrets_never_appear_in_errors_or_debug() {
        const S: &str = "s3cr3tTOKEN";
        let c = resolve_env(&[(
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization=Bearer s3cr3tTOKEN",
        )])
        .unwrap();
        assert_eq!(c.logs.headers[0].value.expose(), "Bearer s3cr3tTOKEN");
        assert!(!format!("{c:?}").contains(S));
        assert!(!format!("{}", c.logs.headers[0].value).contains(S));
        let env_cases = [
            "s3cr3tTOKEN",                   // no '='
            "ok=1,s3cr3tTOKEN",              // the second entry has no '='
            "x=s3cr3tTOKEN\u{1}",            // a control character
            "x=s3cr3tTOKEN%FF",              // not UTF-8 once decoded
            "bad key=s3cr3tTOKEN",           // an invalid name
            "=s3cr3tTOKEN",                  // an empty name
            "s3cr3tTOKEN s3cr3tTOKEN=1",     // the token in an invalid name
            "content-length=s3cr3tTOKEN",    // a reserved name
            "x=\u{e9}s3cr3tTOKEN",           // non-ASCII
            "grpc-timeout=s3cr3tTOKEN, a=b", // reserved prefix
        ];
        for v in env_cases {
            let e = resolve_env(&[("OTEL_EXPORTER_OTLP_HEADERS", v)]).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains("OTEL_EXPORTER_OTLP_HEADERS"), "{msg}");
            assert!(!msg.contains(S), "{v:?} leaked: {msg}");
            assert!(!format!("{e:?}").contains(S), "{v:?} leaked in Debug");
        }
        for v in ["s3cr3tTOKEN", "a b=s3cr3tTOKEN", "x=s3cr3tTOKEN\n"] {
            let flags = ExportFlags {
                headers: vec![v.into()],
                ..Default::default()
            };
            let e = resolve(&flags, &env_of(&[])).unwrap_err();
            assert!(e.to_string().contains("--otlp-header"), "{e}");
            assert!(!e.to_string().contains(S), "{v:?} leaked: {e}");
            assert!(!format!("{e:?}").contains(S));
        }
        // Credentials in the URL: refused, and neither they nor a query are repeated.
        for url in [
            "https://user:s3cr3tTOKEN@c:4318",
            "https://c:4318/x?key=s3cr3tTOKEN&bad=%",
        ] {
            if let Err(e) = resolve_env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", url)]) {
                assert!(!e.to_string().contains(S), "{url}: {e}");
            }
        }
        assert!(
            resolve_env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://u:s3cr3tTOKEN@c")]).is_err()
        );
        assert_eq!(
            shown_url("https://u:p@h:1/x?k=v"),
            "https://<redacted>@h:1/x"
        );
        assert_eq!(shown_url("h:1"), "h:1");
    }

    #[test]
    fn grpc_refuses_binary_metadata() {
        let e = resolve_env(&[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "trace-bin=AAAA"),
        ])
        .unwrap_err();
        assert!(e.to_string().contains("-bin"), "{e}");
        // The same key is fine over HTTP.
        assert!(resolve_env(&[("OTEL_EXPORTER_OTLP_HEADERS", "trace-bin=AAAA")]).is_ok());
    }

    #[test]
    fn protocol_and_compression_parse_their_names() {
        for p in [Protocol::Grpc, Protocol::HttpProtobuf, Protocol::HttpJson] {
            assert_eq!(p.as_str().parse::<Protocol>(), Ok(p));
            assert_eq!(p.to_string(), p.as_str());
        }
        for c in [Compression::None, Compression::Gzip] {
            assert_eq!(c.to_string().parse::<Compression>(), Ok(c));
        }
        assert!("GRPC".parse::<Protocol>().is_err());
    }
}
