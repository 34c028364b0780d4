//! Send one already-encoded OTLP export request and say what became of it.
//!
//! [`Transport`] owns a single-threaded tokio runtime and, per signal, a tonic
//! [`Channel`] (gRPC) or a hyper client (OTLP/HTTP, rustls for `https://`).
//! [`Transport::send`] blocks until the collector answered, the per-request timeout
//! passed, or the connection failed, and returns an [`Outcome`]: accepted (perhaps
//! partially), worth a retry (with the server's hint), or failed for good. It knows nothing
//! of batching or the spool; the caller decides when to try again ([`super::retry`]).
//! gRPC requests are sent as they are (the caller's protobuf bytes, not decoded again).

use std::error::Error as StdError;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use bytes::{Buf, BufMut, Bytes};
use http::header::{CONTENT_ENCODING, CONTENT_TYPE, RETRY_AFTER, USER_AGENT};
use http::{HeaderMap, HeaderName, HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry_proto::tonic::collector::{
    logs::v1::ExportLogsServiceResponse, metrics::v1::ExportMetricsServiceResponse,
    trace::v1::ExportTraceServiceResponse,
};
use prost::Message;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tonic::codec::{Codec, CompressionEncoding, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::metadata::MetadataMap;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic_types::StatusExt;

use super::config::{Compression, ExportConfig, Protocol, Signal, SignalConfig, Tls};
use super::retry::{self, Verdict};

/// The most of a response body read (a success response is a few bytes; an error's
/// `Status` a message). Longer bodies are not read: memory stays bounded.
const MAX_RESPONSE: usize = 1 << 20;

/// The most of a server's message kept in an [`Outcome`].
const MAX_MESSAGE: usize = 1024;

/// What became of one export request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The collector took the request. `rejected` items of it were refused for good
    /// (partial success: count them as dropped, do not send them again), with the
    /// server's `message` (a partial success may also carry a message with nothing
    /// rejected: a warning).
    Accepted {
        /// Log records, spans or data points the server rejected.
        rejected: u64,
        /// The server's `error_message`, if any.
        message: Option<String>,
    },
    /// Not delivered, but worth another try: the server was unavailable, throttled, did
    /// not answer in time, or the connection failed.
    Retry {
        /// The wait the server asked for (`Retry-After`, `RetryInfo`), if any.
        after: Option<Duration>,
        /// What happened, for logs and the in-band notice.
        reason: String,
    },
    /// The server refused the request for good (HTTP 400, `INVALID_ARGUMENT`, …): drop
    /// it, counted, with this reason (the server's message included).
    Failed {
        /// What the server said.
        reason: String,
    },
}

/// A transport that cannot be built. Messages name the file or setting and the fix.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// A TLS file that cannot be read.
    #[error("cannot read the {what} {}: {source} (give a readable PEM file)", path.display())]
    File {
        /// Which file ("CA certificate", "client certificate", "client key").
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// TLS settings rustls or tonic refused (a PEM file without a certificate or key, no
    /// system root certificates, …).
    #[error("TLS for {endpoint}: {message}")]
    Tls {
        /// The endpoint.
        endpoint: String,
        /// What is wrong, with the fix.
        message: String,
    },
    /// An endpoint tonic or hyper cannot use.
    #[error("endpoint {endpoint}: {message}")]
    Endpoint {
        /// The endpoint.
        endpoint: String,
        /// What is wrong.
        message: String,
    },
    /// A header name or value that cannot be sent (the value is never shown).
    #[error("header {name:?} cannot be sent: its name or value has characters HTTP does not allow")]
    Header {
        /// The header's name.
        name: String,
    },
    /// The runtime could not start.
    #[error("starting the export runtime: {0}")]
    Runtime(std::io::Error),
}

/// Sends export requests to the configured collector(s), one at a time. A caller's loop,
/// in short:
///
/// ```no_run
/// use uevrec::delivery::export::{Backoff, BackoffPolicy, ExportFlags, Outcome, Signal, Transport};
/// let config = uevrec::delivery::export::resolve(&ExportFlags::default(), &uevrec::delivery::export::process_env)?;
/// let mut transport = Transport::new(&config)?;
/// let mut backoff = Backoff::new(BackoffPolicy::default());
/// let body: Vec<u8> = Vec::new(); // an encoded ExportLogsServiceRequest
/// loop {
///     match transport.send(Signal::Logs, &body) {
///         Outcome::Accepted { .. } | Outcome::Failed { .. } => break, // count, then next batch
///         Outcome::Retry { after, .. } => std::thread::sleep(backoff.next_delay(after)),
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Transport {
    runtime: tokio::runtime::Runtime,
    senders: [Sender; 3],
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Transport");
        for (s, sender) in Signal::ALL.iter().zip(&self.senders) {
            d.field(s.as_str(), &sender.endpoint());
        }
        d.finish_non_exhaustive()
    }
}

enum Sender {
    Grpc(GrpcSender),
    Http(HttpSender),
}

impl Sender {
    fn endpoint(&self) -> &str {
        match self {
            Sender::Grpc(g) => &g.endpoint,
            Sender::Http(h) => &h.endpoint,
        }
    }
}

type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

struct GrpcSender {
    client: tonic::client::Grpc<Channel>,
    endpoint: String,
    headers: HeaderMap,
    timeout: Duration,
}

struct HttpSender {
    client: HttpClient,
    uri: http::Uri,
    endpoint: String,
    headers: HeaderMap,
    timeout: Duration,
    gzip: bool,
    json: bool,
}

impl Transport {
    /// Build the clients `config` describes (TLS files are read now). Connections are
    /// made on the first [`Transport::send`]. Must not be called from inside a tokio
    /// runtime (the transport has its own).
    pub fn new(config: &ExportConfig) -> Result<Transport, TransportError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(TransportError::Runtime)?;
        let guard = runtime.enter();
        // Signals with the same endpoint and TLS share one gRPC channel (connection);
        // HTTP clients pool connections per host themselves, one client per TLS setting.
        let mut channels: Vec<(String, Tls, Channel)> = Vec::new();
        let mut clients: Vec<(Tls, HttpClient)> = Vec::new();
        let mut build = |signal: Signal| -> Result<Sender, TransportError> {
            let c = config.signal(signal);
            let headers = header_map(c)?;
            Ok(match c.protocol {
                Protocol::Grpc => {
                    let channel = match channels
                        .iter()
                        .find(|(e, t, _)| *e == c.endpoint && *t == c.tls)
                    {
                        Some((_, _, ch)) => ch.clone(),
                        None => {
                            let ch = grpc_channel(c)?;
                            channels.push((c.endpoint.clone(), c.tls.clone(), ch.clone()));
                            ch
                        }
                    };
                    let mut client = tonic::client::Grpc::new(channel)
                        .accept_compressed(CompressionEncoding::Gzip);
                    if c.compression == Compression::Gzip {
                        client = client.send_compressed(CompressionEncoding::Gzip);
                    }
                    Sender::Grpc(GrpcSender {
                        client,
                        endpoint: c.endpoint.clone(),
                        headers,
                        timeout: c.timeout,
                    })
                }
                Protocol::HttpProtobuf | Protocol::HttpJson => {
                    let tls = if c.is_https() {
                        c.tls.clone()
                    } else {
                        Tls::default()
                    };
                    let client = match clients.iter().find(|(t, _)| *t == tls) {
                        Some((_, cl)) => cl.clone(),
                        None => {
                            let cl = http_client(c)?;
                            clients.push((tls, cl.clone()));
                            cl
                        }
                    };
                    let uri =
                        c.endpoint
                            .parse::<http::Uri>()
                            .map_err(|e| TransportError::Endpoint {
                                endpoint: c.endpoint.clone(),
                                message: e.to_string(),
                            })?;
                    Sender::Http(HttpSender {
                        client,
                        uri,
                        endpoint: c.endpoint.clone(),
                        headers,
                        timeout: c.timeout,
                        gzip: c.compression == Compression::Gzip,
                        json: c.protocol == Protocol::HttpJson,
                    })
                }
            })
        };
        let senders = [
            build(Signal::Logs)?,
            build(Signal::Traces)?,
            build(Signal::Metrics)?,
        ];
        drop(guard);
        Ok(Transport { runtime, senders })
    }

    /// The URL `signal` is sent to.
    pub fn endpoint(&self, signal: Signal) -> &str {
        self.senders[signal as usize].endpoint()
    }

    /// Send one export request for `signal` and wait for the outcome. `body` is encoded
    /// for the signal's protocol: the protobuf `Export*ServiceRequest` for gRPC and
    /// `http/protobuf`, OTLP/JSON for `http/json`; gzip is applied here when configured.
    /// Connections are made lazily and remade after the collector restarts: a request on
    /// a dead connection fails as [`Outcome::Retry`], and the next one connects again.
    pub fn send(&mut self, signal: Signal, body: &[u8]) -> Outcome {
        let body = Bytes::copy_from_slice(body);
        let sender = &mut self.senders[signal as usize];
        match sender {
            Sender::Grpc(g) => self.runtime.block_on(g.send(signal, body)),
            Sender::Http(h) => self.runtime.block_on(h.send(signal, body)),
        }
    }
}

/// The configured headers as a header map, values marked sensitive.
fn header_map(c: &SignalConfig) -> Result<HeaderMap, TransportError> {
    let mut map = HeaderMap::new();
    for h in &c.headers {
        let bad = || TransportError::Header {
            name: h.name.clone(),
        };
        let name = HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| bad())?;
        let mut value = HeaderValue::from_str(h.value.expose()).map_err(|_| bad())?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    Ok(map)
}

fn read_file(what: &'static str, path: &Path) -> Result<Vec<u8>, TransportError> {
    std::fs::read(path).map_err(|source| TransportError::File {
        what,
        path: path.to_path_buf(),
        source,
    })
}

fn user_agent() -> String {
    format!("uevrec/{}", env!("CARGO_PKG_VERSION"))
}

fn grpc_channel(c: &SignalConfig) -> Result<Channel, TransportError> {
    let bad = |message: String| TransportError::Endpoint {
        endpoint: c.endpoint.clone(),
        message,
    };
    let mut endpoint = Endpoint::from_shared(c.endpoint.clone())
        .map_err(|e| bad(chain(&e)))?
        .user_agent(user_agent())
        .map_err(|e| bad(chain(&e)))?
        .connect_timeout(c.timeout)
        .timeout(c.timeout)
        .tcp_nodelay(true);
    if c.is_https() {
        // The files are checked here as for HTTP (tonic would take a PEM file without a
        // certificate and fail only at the handshake), then handed to tonic as PEM.
        let pem = TlsPem::load(c)?;
        let mut tls = ClientTlsConfig::new();
        tls = match &pem.ca {
            Some((pem, _)) => tls.ca_certificate(Certificate::from_pem(pem)),
            None => tls.with_native_roots(),
        };
        if let Some(((cert, _), (key, _))) = &pem.client {
            tls = tls.identity(Identity::from_pem(cert, key));
        }
        endpoint = endpoint.tls_config(tls).map_err(|e| TransportError::Tls {
            endpoint: c.endpoint.clone(),
            message: format!(
                "{} (check the PEM files given with --otlp-ca / --otlp-client-cert / \
                 --otlp-client-key or the OTEL_EXPORTER_OTLP_*CERTIFICATE variables)",
                chain(&e)
            ),
        })?;
    }
    Ok(endpoint.connect_lazy())
}

type Pem<T> = (Vec<u8>, T);

/// The TLS files of a signal, read and parsed (PEM text kept for tonic).
struct TlsPem {
    ca: Option<Pem<Vec<CertificateDer<'static>>>>,
    client: Option<(
        Pem<Vec<CertificateDer<'static>>>,
        Pem<PrivateKeyDer<'static>>,
    )>,
}

impl TlsPem {
    fn load(c: &SignalConfig) -> Result<TlsPem, TransportError> {
        let tls_err = |message: String| TransportError::Tls {
            endpoint: c.endpoint.clone(),
            message,
        };
        let certs = |what: &'static str, path: &Path| {
            let pem = read_file(what, path)?;
            let certs = CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| {
                    tls_err(format!("{what} {}: {e} (give a PEM file)", path.display()))
                })?;
            if certs.is_empty() {
                return Err(tls_err(format!(
                    "{what} {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                    path.display()
                )));
            }
            Ok((pem, certs))
        };
        let ca = c
            .tls
            .ca
            .as_deref()
            .map(|p| certs("CA certificate", p))
            .transpose()?;
        let client = match (&c.tls.client_cert, &c.tls.client_key) {
            (Some(cert), Some(key)) => {
                let chain = certs("client certificate", cert)?;
                let key_pem = read_file("client key", key)?;
                let key_der = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
                    tls_err(format!(
                        "client key {}: {e} (give the PEM private key of the client \
                         certificate)",
                        key.display()
                    ))
                })?;
                Some((chain, (key_pem, key_der)))
            }
            _ => None,
        };
        Ok(TlsPem { ca, client })
    }
}

fn http_client(c: &SignalConfig) -> Result<HttpClient, TransportError> {
    let tls_err = |message: String| TransportError::Tls {
        endpoint: c.endpoint.clone(),
        message,
    };
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err(e.to_string()))?;
    let mut roots = rustls::RootCertStore::empty();
    if !c.is_https() {
        // Plain http: the TLS half of the connector is never used for this URL.
        let config = builder.with_root_certificates(roots).with_no_client_auth();
        return Ok(finish_http_client(config, c.timeout));
    }
    let pem = TlsPem::load(c)?;
    match pem.ca {
        Some((_, certs)) => {
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| tls_err(format!("CA certificate: {e}")))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                return Err(tls_err(
                    "no system root certificates found (install the ca-certificates \
                     package, or give the collector's CA with --otlp-ca)"
                        .into(),
                ));
            }
        }
    }
    let builder = builder.with_root_certificates(roots);
    let config = match pem.client {
        Some(((_, chain), (_, key))) => builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| tls_err(format!("client certificate and key: {e}")))?,
        None => builder.with_no_client_auth(),
    };
    Ok(finish_http_client(config, c.timeout))
}

fn finish_http_client(tls: rustls::ClientConfig, timeout: Duration) -> HttpClient {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(timeout));
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Client::builder(TokioExecutor::new()).build(connector)
}

/// `err` and its sources, joined (duplicates of the text above left out).
fn chain(err: &dyn StdError) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = e.source();
    }
    out
}

/// A server's message made safe to print: control characters replaced, length capped.
fn tidy(message: &str) -> String {
    let mut out: String = message
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_MESSAGE)
        .collect();
    if message.trim().chars().count() > MAX_MESSAGE {
        out.push('…');
    }
    out
}

/// What a success response said: rejected items and the server's message.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Ack {
    rejected: u64,
    message: Option<String>,
}

impl Ack {
    fn new(rejected: i64, message: &str) -> Ack {
        Ack {
            rejected: rejected.max(0) as u64,
            message: Some(tidy(message)).filter(|m| !m.is_empty()),
        }
    }

    fn outcome(self) -> Outcome {
        Outcome::Accepted {
            rejected: self.rejected,
            message: self.message,
        }
    }
}

/// Decode an `Export*ServiceResponse` in protobuf.
fn ack_from_protobuf(signal: Signal, body: &[u8]) -> Result<Ack, prost::DecodeError> {
    Ok(match signal {
        Signal::Logs => ExportLogsServiceResponse::decode(body)?
            .partial_success
            .map(|p| Ack::new(p.rejected_log_records, &p.error_message)),
        Signal::Traces => ExportTraceServiceResponse::decode(body)?
            .partial_success
            .map(|p| Ack::new(p.rejected_spans, &p.error_message)),
        Signal::Metrics => ExportMetricsServiceResponse::decode(body)?
            .partial_success
            .map(|p| Ack::new(p.rejected_data_points, &p.error_message)),
    }
    .unwrap_or_default())
}

/// Decode an `Export*ServiceResponse` in OTLP/JSON. By hand over a `serde_json::Value`:
/// the serde derives in opentelemetry-proto read int64 fields only as JSON numbers, while
/// protojson (the Collector's encoder) writes them as strings; field names may be
/// lowerCamelCase or the proto names.
fn ack_from_json(signal: Signal, body: &[u8]) -> Result<Ack, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Ack::default());
    }
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let field = |v: &'_ serde_json::Value, camel: &str, snake: &str| {
        v.get(camel)
            .or_else(|| v.get(snake))
            .filter(|x| !x.is_null())
            .cloned()
    };
    let Some(partial) = field(&v, "partialSuccess", "partial_success") else {
        return Ok(Ack::default());
    };
    let (camel, snake) = match signal {
        Signal::Logs => ("rejectedLogRecords", "rejected_log_records"),
        Signal::Traces => ("rejectedSpans", "rejected_spans"),
        Signal::Metrics => ("rejectedDataPoints", "rejected_data_points"),
    };
    let rejected = match field(&partial, camel, snake) {
        None => 0,
        Some(serde_json::Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_u64().map(|u| u.min(i64::MAX as u64) as i64))
            .ok_or_else(|| format!("{camel} is not an integer"))?,
        Some(serde_json::Value::String(s)) => s
            .trim()
            .parse::<i64>()
            .map_err(|_| format!("{camel} is not an integer"))?,
        Some(_) => return Err(format!("{camel} is not an integer")),
    };
    let message = field(&partial, "errorMessage", "error_message");
    Ok(Ack::new(
        rejected,
        message
            .as_ref()
            .and_then(|m| m.as_str())
            .unwrap_or_default(),
    ))
}

/// The message of a `google.rpc.Status` error body (protobuf or JSON), else the body's
/// text when it is short readable text (a proxy's error page), else nothing.
fn status_message(body: &[u8], json: bool) -> Option<String> {
    if body.is_empty() {
        return None;
    }
    let from_json = || -> Option<String> {
        let v: serde_json::Value = serde_json::from_slice(body).ok()?;
        v.get("message")?.as_str().map(str::to_string)
    };
    let from_proto = || -> Option<String> {
        let s = tonic_types::pb::Status::decode(body).ok()?;
        Some(s.message).filter(|m| !m.is_empty())
    };
    let decoded = if json {
        from_json().or_else(from_proto)
    } else {
        from_proto().or_else(from_json)
    };
    decoded
        .or_else(|| {
            std::str::from_utf8(body)
                .ok()
                .filter(|t| !t.trim().is_empty())
                .map(str::to_string)
        })
        .map(|m| tidy(&m))
        .filter(|m| !m.is_empty())
}

fn gzip(body: &[u8]) -> Bytes {
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 4 + 64),
        flate2::Compression::default(),
    );
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(body);
    Bytes::from(enc.finish().unwrap_or_default())
}

/// A gzip response body, inflated up to [`MAX_RESPONSE`].
fn gunzip(body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(body)
        .take(MAX_RESPONSE as u64)
        .read_to_end(&mut out)
        .ok()?;
    Some(out)
}

impl GrpcSender {
    async fn send(&mut self, signal: Signal, body: Bytes) -> Outcome {
        let mut request = tonic::Request::from_parts(
            MetadataMap::from_headers(self.headers.clone()),
            tonic::Extensions::default(),
            body,
        );
        request.set_timeout(self.timeout);
        let path = http::uri::PathAndQuery::from_static(signal.grpc_path());
        let client = &mut self.client;
        let call = async move {
            if let Err(e) = client.ready().await {
                return Err(tonic::Status::from_error(Box::new(e)));
            }
            client.unary(request, path, PreEncoded { signal }).await
        };
        let result = match tokio::time::timeout(self.timeout, call).await {
            Ok(r) => r,
            Err(_) => {
                return Outcome::Retry {
                    after: None,
                    reason: format!(
                        "no answer from {} within {} (the export timeout)",
                        self.endpoint,
                        humantime::format_duration(self.timeout)
                    ),
                };
            }
        };
        match result {
            Ok(response) => response.into_inner().outcome(),
            Err(status) => self.judge(status),
        }
    }

    fn judge(&self, status: tonic::Status) -> Outcome {
        // A status with a source was made here from a transport error (connection
        // refused or reset, timeout, HTTP/2 error): the server did not answer, whatever
        // code tonic chose for it. Try again.
        if let Some(source) = status.source() {
            let mut timed_out = false;
            let mut e: Option<&(dyn StdError + 'static)> = Some(source);
            while let Some(x) = e {
                timed_out |= x.is::<tonic::TimeoutExpired>();
                e = x.source();
            }
            let reason = if timed_out {
                format!(
                    "no answer from {} within {} (the export timeout)",
                    self.endpoint,
                    humantime::format_duration(self.timeout)
                )
            } else {
                let mut what = tidy(status.message());
                let detail = chain(source);
                if !what.contains(&detail) {
                    what = if detail.starts_with(&what) {
                        detail
                    } else {
                        format!("{what}: {detail}")
                    };
                }
                format!("gRPC call to {} failed: {what}", self.endpoint)
            };
            return Outcome::Retry {
                after: None,
                reason,
            };
        }
        let retry_delay = status
            .get_details_retry_info()
            .map(|info| info.retry_delay.unwrap_or_default());
        let mut reason = format!(
            "{} answered gRPC status {} ({}): {}",
            self.endpoint,
            status.code() as i32,
            status.code().description(),
            tidy(status.message())
        );
        match retry::grpc(status.code(), retry_delay) {
            Verdict::Retry { after } => {
                if let Some(after) = after {
                    reason.push_str(&format!(
                        " (retry in {})",
                        humantime::format_duration(after)
                    ));
                }
                Outcome::Retry { after, reason }
            }
            Verdict::Fail => Outcome::Failed { reason },
        }
    }
}

impl HttpSender {
    async fn send(&mut self, signal: Signal, body: Bytes) -> Outcome {
        let body = if self.gzip { gzip(&body) } else { body };
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = self.uri.clone();
        let h = request.headers_mut();
        h.clone_from(&self.headers);
        h.insert(
            CONTENT_TYPE,
            HeaderValue::from_static(if self.json {
                "application/json"
            } else {
                "application/x-protobuf"
            }),
        );
        if self.gzip {
            h.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        if let Ok(ua) = HeaderValue::from_str(&user_agent()) {
            h.insert(USER_AGENT, ua);
        }
        let client = &self.client;
        let exchange = async move {
            let response = client.request(request).await.map_err(|e| chain(&e))?;
            let (parts, body) = response.into_parts();
            let body = match Limited::new(body, MAX_RESPONSE).collect().await {
                Ok(b) => Some(b.to_bytes()),
                Err(e) if e.is::<http_body_util::LengthLimitError>() => None,
                Err(e) => return Err(format!("reading the response: {}", chain(&*e))),
            };
            Ok((parts, body))
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Err(_) => Outcome::Retry {
                after: None,
                reason: format!(
                    "no answer from {} within {} (the export timeout)",
                    self.endpoint,
                    humantime::format_duration(self.timeout)
                ),
            },
            Ok(Err(e)) => Outcome::Retry {
                after: None,
                reason: format!("HTTP request to {} failed: {e}", self.endpoint),
            },
            Ok(Ok((parts, body))) => self.judge(signal, parts, body),
        }
    }

    fn judge(&self, signal: Signal, parts: http::response::Parts, body: Option<Bytes>) -> Outcome {
        let body = match body {
            Some(b)
                if parts.headers.get(CONTENT_ENCODING).is_some_and(|v| {
                    v.to_str()
                        .is_ok_and(|v| v.trim().eq_ignore_ascii_case("gzip"))
                }) =>
            {
                gunzip(&b).map(Bytes::from)
            }
            other => other,
        };
        let json = match parts
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
        {
            Some(ct) if ct.contains("json") => true,
            Some(ct) if ct.contains("protobuf") => false,
            _ => self.json,
        };
        let status = parts.status;
        if status.is_success() {
            let Some(body) = body else {
                return Outcome::Accepted {
                    rejected: 0,
                    message: Some("the response body was too large to read".into()),
                };
            };
            let ack = if json {
                ack_from_json(signal, &body)
            } else {
                ack_from_protobuf(signal, &body).map_err(|e| e.to_string())
            };
            return match ack {
                Ok(ack) => ack.outcome(),
                // Delivered (2xx) even if the response is not understood: say so.
                Err(e) => Outcome::Accepted {
                    rejected: 0,
                    message: Some(format!("the response body could not be decoded: {e}")),
                },
            };
        }
        let message = body.as_deref().and_then(|b| status_message(b, json));
        let mut reason = format!("{} answered HTTP {}", self.endpoint, status_text(status));
        if let Some(m) = message {
            reason.push_str(": ");
            reason.push_str(&m);
        }
        let retry_after = parts.headers.get(RETRY_AFTER).and_then(|v| v.to_str().ok());
        match retry::http(status.as_u16(), retry_after, SystemTime::now()) {
            Verdict::Retry { after } => {
                if let Some(after) = after {
                    reason.push_str(&format!(
                        " (retry in {})",
                        humantime::format_duration(after)
                    ));
                }
                Outcome::Retry { after, reason }
            }
            Verdict::Fail => Outcome::Failed { reason },
        }
    }
}

fn status_text(status: StatusCode) -> String {
    match status.canonical_reason() {
        Some(r) => format!("{} {r}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

/// The gRPC codec for pre-encoded requests: the encoder copies the caller's protobuf
/// bytes into the frame as they are (decoding them into prost types only to encode them
/// again would double the work for nothing); the decoder reads the signal's
/// `Export*ServiceResponse`. Written here because tonic's `ProstCodec` needs the message
/// type on both sides.
#[derive(Debug, Clone, Copy)]
struct PreEncoded {
    signal: Signal,
}

impl Codec for PreEncoded {
    type Encode = Bytes;
    type Decode = Ack;
    type Encoder = BytesEncoder;
    type Decoder = AckDecoder;

    fn encoder(&mut self) -> BytesEncoder {
        BytesEncoder
    }

    fn decoder(&mut self) -> AckDecoder {
        AckDecoder {
            signal: self.signal,
        }
    }
}

#[derive(Debug)]
struct BytesEncoder;

impl Encoder for BytesEncoder {
    type Item = Bytes;
    type Error = tonic::Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put(item);
        Ok(())
    }
}

#[derive(Debug)]
struct AckDecoder {
    signal: Signal,
}

impl Decoder for AckDecoder {
    type Item = Ack;
    type Error = tonic::Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Ack>, tonic::Status> {
        let bytes = src.copy_to_bytes(src.remaining());
        // The server answered OK: the request was delivered even when the response is
        // not understood, so that is a note, not an error (an error here would read as
        // a failed delivery).
        Ok(Some(ack_from_protobuf(self.signal, &bytes).unwrap_or_else(
            |e| Ack {
                rejected: 0,
                message: Some(format!("the response could not be decoded: {e}")),
            },
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsPartialSuccess;
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsPartialSuccess;

    #[test]
    fn protobuf_acks_per_signal() {
        assert_eq!(
            ack_from_protobuf(Signal::Logs, &[]).unwrap(),
            Ack::default()
        );
        let r = ExportLogsServiceResponse {
            partial_success: Some(ExportLogsPartialSuccess {
                rejected_log_records: 3,
                error_message: "bad\nrecords".into(),
            }),
        };
        assert_eq!(
            ack_from_protobuf(Signal::Logs, &r.encode_to_vec()).unwrap(),
            Ack {
                rejected: 3,
                message: Some("bad records".into())
            }
        );
        let r = ExportMetricsServiceResponse {
            partial_success: Some(ExportMetricsPartialSuccess {
                rejected_data_points: -5,
                error_message: String::new(),
            }),
        };
        assert_eq!(
            ack_from_protobuf(Signal::Metrics, &r.encode_to_vec()).unwrap(),
            Ack::default()
        );
        assert!(ack_from_protobuf(Signal::Traces, &[0xff, 0xff]).is_err());
    }

    #[test]
    fn json_acks_accept_numbers_strings_and_both_spellings() {
        let cases: [(&str, Signal, u64, Option<&str>); 6] = [
            ("", Signal::Logs, 0, None),
            ("{}", Signal::Logs, 0, None),
            (r#"{"partialSuccess":null}"#, Signal::Logs, 0, None),
            (
                r#"{"partialSuccess":{"rejectedLogRecords":"7","errorMessage":"x"}}"#,
                Signal::Logs,
                7,
                Some("x"),
            ),
            (
                r#"{"partial_success":{"rejected_spans":2}}"#,
                Signal::Traces,
                2,
                None,
            ),
            (
                r#"{"partialSuccess":{"rejectedDataPoints":4,"errorMessage":""}}"#,
                Signal::Metrics,
                4,
                None,
            ),
        ];
        for (body, signal, rejected, message) in cases {
            let ack = ack_from_json(signal, body.as_bytes()).unwrap();
            assert_eq!(ack.rejected, rejected, "{body}");
            assert_eq!(ack.message.as_deref(), message, "{body}");
        }
        assert!(ack_from_json(Signal::Logs, b"{").is_err());
        assert!(
            ack_from_json(
                Signal::Logs,
                br#"{"partialSuccess":{"rejectedLogRecords":"many"}}"#
            )
            .is_err()
        );
    }

    #[test]
    fn status_bodies_give_the_message() {
        let s = tonic_types::pb::Status {
            code: 3,
            message: "field x is bad".into(),
            details: vec![],
        };
        assert_eq!(
            status_message(&s.encode_to_vec(), false).as_deref(),
            Some("field x is bad")
        );
        assert_eq!(
            status_message(br#"{"code":3,"message":"json says no"}"#, true).as_deref(),
            Some("json says no")
        );
        // A proxy's text page.
        assert_eq!(
            status_message(b"upstream down\n", false).as_deref(),
            Some("upstream down")
        );
        assert_eq!(status_message(b"", true), None);
        assert_eq!(status_message(&[0xff, 0xfe, 0x00], false), None);
    }

    #[test]
    fn messages_are_tidied_and_capped() {
        assert_eq!(tidy(" a\u{1b}[31mb\r\n "), "a [31mb");
        let long = "x".repeat(5000);
        let t = tidy(&long);
        assert_eq!(t.chars().count(), MAX_MESSAGE + 1);
        assert!(t.ends_with('…'));
    }

    #[test]
    fn gzip_round_trips() {
        let body = b"hello hello hello hello".repeat(100);
        let z = gzip(&body);
        assert!(z.len() < body.len());
        assert_eq!(gunzip(&z).unwrap(), body);
        assert!(gunzip(b"not gzip").is_none());
    }
}
