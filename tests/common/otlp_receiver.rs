#![allow(dead_code)] // each includer (the test binaries, examples/otlp_receiver.rs) uses a part
//! OTLP receivers for the export tests: real protocol stacks on 127.0.0.1 standing in for
//! a collector (no Collector binary can be installed here, docs/pipelines.md).
//!
//! - [`Kind::Grpc`]: tonic's generated collector services from the `opentelemetry-proto`
//!   crate (`LogsService`, `TraceService`, `MetricsService`, gzip accepted) behind a hyper
//!   HTTP/2 server.
//! - [`Kind::Http`]: a hyper HTTP/1.1 server for OTLP/HTTP: `POST /v1/logs`, `/v1/traces`,
//!   `/v1/metrics`, protobuf (`application/x-protobuf`) and OTLP/JSON (`application/json`,
//!   parsed with `opentelemetry-proto`'s serde mapping) bodies, gzip request bodies; errors
//!   answered with a `google.rpc.Status` body in the request's encoding.
//!
//! Each receiver runs its own tokio runtime (one worker thread) and owns its accept loop,
//! so that it can close one connection mid-request ([`Mode::DropConnection`]) or every
//! connection and its port ([`Receiver::stop`]), and come back on the same port
//! ([`Receiver::start_on`]). [`Receiver::set_mode`] picks the answer to the next requests.

use std::convert::Infallible;
use std::io::Read;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use opentelemetry_proto::tonic::collector::logs::v1::logs_service_server::{
    LogsService, LogsServiceServer,
};
use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsPartialSuccess, ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsPartialSuccess, ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;
use tokio::sync::Notify;
use tonic::codec::CompressionEncoding;
use tonic::codegen::Service;
use tonic_types::{ErrorDetails, StatusExt};

/// Which protocol stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// OTLP/gRPC (HTTP/2).
    Grpc,
    /// OTLP/HTTP (HTTP/1.1), protobuf and JSON.
    Http,
}

/// How the receiver answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Accept and record every request.
    Ok,
    /// HTTP 503 / gRPC `UNAVAILABLE`.
    Unavailable,
    /// HTTP 429 (with `Retry-After: N` when given) / gRPC `RESOURCE_EXHAUSTED` (with a
    /// `RetryInfo` of N seconds when given).
    TooMany {
        /// Seconds to ask the client to wait.
        retry_after: Option<u64>,
    },
    /// HTTP 400 / gRPC `INVALID_ARGUMENT`, with [`BAD_REQUEST_MESSAGE`].
    BadRequest,
    /// Accept and record, but answer a partial success rejecting `rejected` items with
    /// [`PARTIAL_MESSAGE`].
    Partial {
        /// The rejected count to report.
        rejected: u64,
    },
    /// Never answer (until the mode changes the requests already waiting stay waiting).
    Stall,
    /// Close the connection as soon as a request arrives, without an answer.
    DropConnection,
}

/// The message of [`Mode::BadRequest`] answers.
pub const BAD_REQUEST_MESSAGE: &str = "test receiver refuses this request (BadRequest mode)";
/// The message of [`Mode::Partial`] answers.
pub const PARTIAL_MESSAGE: &str = "test receiver rejected some items (Partial mode)";

#[derive(Default)]
struct Shared {
    mode: Mutex<Option<Mode>>,
    logs: Mutex<Vec<ExportLogsServiceRequest>>,
    spans: Mutex<Vec<ExportTraceServiceRequest>>,
    metrics: Mutex<Vec<ExportMetricsServiceRequest>>,
    headers: Mutex<Vec<Vec<(String, String)>>>,
    requests: AtomicUsize,
    connections: AtomicUsize,
    tls_failures: Mutex<Vec<String>>,
    /// Count accepted log requests without keeping them ([`Receiver::set_count_only`]).
    count_only: AtomicBool,
    counts: LogCounts,
}

/// Running totals over the accepted log requests (kept or not).
#[derive(Default)]
struct LogCounts {
    requests: AtomicU64,
    records: AtomicU64,
    uevrec_records: AtomicU64,
    bytes: AtomicU64,
    first: Mutex<Option<Instant>>,
    last: Mutex<Option<Instant>>,
}

/// What a receiver accepted on the logs service so far ([`Receiver::counts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Requests that arrived (any service, answered or not).
    pub requests: u64,
    /// Log requests accepted (modes Ok and Partial).
    pub log_requests: u64,
    /// Log records in them outside the scope `uevrec` (the recorded events).
    pub log_records: u64,
    /// Log records of scope `uevrec` (uevrec's lost counts and notices).
    pub uevrec_records: u64,
    /// Their protobuf size (the decoded request encoded again; for OTLP/JSON bodies too).
    pub log_bytes: u64,
    /// When the first log request was accepted.
    pub first_accepted: Option<Instant>,
    /// When the last one was.
    pub last_accepted: Option<Instant>,
}

impl Shared {
    fn mode(&self) -> Mode {
        self.mode.lock().unwrap().clone().unwrap_or(Mode::Ok)
    }

    /// Count an accepted log request, and keep it unless counting only.
    fn keep_logs(&self, req: ExportLogsServiceRequest) {
        let c = &self.counts;
        let (mut events, mut own) = (0, 0);
        for rl in &req.resource_logs {
            for sl in &rl.scope_logs {
                let n = sl.log_records.len() as u64;
                if sl.scope.as_ref().is_some_and(|s| s.name == "uevrec") {
                    own += n;
                } else {
                    events += n;
                }
            }
        }
        c.records.fetch_add(events, Ordering::Relaxed);
        c.uevrec_records.fetch_add(own, Ordering::Relaxed);
        c.bytes
            .fetch_add(req.encoded_len() as u64, Ordering::Relaxed);
        let now = Instant::now();
        c.first.lock().unwrap().get_or_insert(now);
        *c.last.lock().unwrap() = Some(now);
        c.requests.fetch_add(1, Ordering::Relaxed);
        if !self.count_only.load(Ordering::Relaxed) {
            self.logs.lock().unwrap().push(req);
        }
    }
}

/// Closes the connection it belongs to.
#[derive(Clone)]
struct Kill(Arc<Notify>);

/// A running receiver; see the module documentation. Dropping it stops it.
pub struct Receiver {
    runtime: Option<tokio::runtime::Runtime>,
    addr: SocketAddr,
    shared: Arc<Shared>,
    kind: Kind,
    https: bool,
}

impl Receiver {
    /// Start on 127.0.0.1 on a free port.
    pub fn start(kind: Kind) -> Receiver {
        Self::start_on(kind, 0)
    }

    /// Start on 127.0.0.1:`port` (0: a free one), e.g. again after [`Receiver::stop`].
    /// Waits up to 10 s for the port to be free.
    pub fn start_on(kind: Kind, port: u16) -> Receiver {
        Self::start_inner(kind, port, None)
    }

    /// Start with TLS on a free port, with the server certificate of `pki` (for
    /// 127.0.0.1 and localhost); with `require_client_cert`, clients must present a
    /// certificate signed by `pki`'s CA (mutual TLS). [`Receiver::endpoint`] says https.
    pub fn start_tls(kind: Kind, pki: &TestPki, require_client_cert: bool) -> Receiver {
        Self::start_inner(kind, 0, Some(pki.server_config(kind, require_client_cert)))
    }

    fn start_inner(kind: Kind, port: u16, tls: Option<Arc<rustls::ServerConfig>>) -> Receiver {
        let https = tls.is_some();
        let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .thread_name("otlp-receiver")
            .build()
            .expect("starting the receiver's runtime");
        let listener = {
            let _guard = runtime.enter();
            let start = Instant::now();
            loop {
                let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
                socket.set_reuseaddr(true).expect("SO_REUSEADDR");
                let bound = socket
                    .bind(SocketAddr::from(([127, 0, 0, 1], port)))
                    .and_then(|()| socket.listen(1024));
                match bound {
                    Ok(l) => break l,
                    Err(e) if start.elapsed() < Duration::from_secs(10) => {
                        eprintln!("receiver: binding 127.0.0.1:{port}: {e}; trying again");
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    Err(e) => panic!("receiver: binding 127.0.0.1:{port}: {e}"),
                }
            }
        };
        let addr = listener.local_addr().expect("the bound address");
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                s.connections.fetch_add(1, Ordering::Relaxed);
                let _ = stream.set_nodelay(true);
                match &acceptor {
                    None => {
                        tokio::spawn(serve_connection(kind, stream, s.clone()));
                    }
                    Some(acceptor) => {
                        let (acceptor, s) = (acceptor.clone(), s.clone());
                        tokio::spawn(async move {
                            match acceptor.accept(stream).await {
                                Ok(tls) => serve_connection(kind, tls, s).await,
                                Err(e) => {
                                    s.tls_failures.lock().unwrap().push(e.to_string());
                                }
                            }
                        });
                    }
                }
            }
        });
        Receiver {
            runtime: Some(runtime),
            addr,
            shared,
            kind,
            https,
        }
    }

    /// `http://127.0.0.1:PORT` (`https://` when started with TLS).
    pub fn endpoint(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Why TLS handshakes failed, one entry per failed connection.
    pub fn tls_failures(&self) -> Vec<String> {
        self.shared.tls_failures.lock().unwrap().clone()
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The protocol stack.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// How to answer from now on.
    pub fn set_mode(&self, mode: Mode) {
        *self.shared.mode.lock().unwrap() = Some(mode);
    }

    /// Stop: the port is closed and every connection with it (a collector that went
    /// down). Returns the port, for [`Receiver::start_on`].
    pub fn stop(mut self) -> u16 {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(2));
        }
        self.addr.port()
    }

    /// Count accepted log requests ([`Receiver::counts`]) without keeping them:
    /// [`Receiver::logs`] stays empty and memory flat however much arrives.
    pub fn set_count_only(&self, count_only: bool) {
        self.shared.count_only.store(count_only, Ordering::Relaxed);
    }

    /// What arrived and what the logs service accepted so far.
    pub fn counts(&self) -> Counts {
        let c = &self.shared.counts;
        Counts {
            requests: self.shared.requests.load(Ordering::Relaxed) as u64,
            log_requests: c.requests.load(Ordering::Relaxed),
            log_records: c.records.load(Ordering::Relaxed),
            uevrec_records: c.uevrec_records.load(Ordering::Relaxed),
            log_bytes: c.bytes.load(Ordering::Relaxed),
            first_accepted: *c.first.lock().unwrap(),
            last_accepted: *c.last.lock().unwrap(),
        }
    }

    /// Every accepted log request (modes Ok and Partial), decoded.
    pub fn logs(&self) -> Vec<ExportLogsServiceRequest> {
        self.shared.logs.lock().unwrap().clone()
    }

    /// Every accepted trace request, decoded.
    pub fn spans(&self) -> Vec<ExportTraceServiceRequest> {
        self.shared.spans.lock().unwrap().clone()
    }

    /// Every accepted metrics request, decoded.
    pub fn metrics(&self) -> Vec<ExportMetricsServiceRequest> {
        self.shared.metrics.lock().unwrap().clone()
    }

    /// How many requests arrived (answered or not).
    pub fn requests(&self) -> usize {
        self.shared.requests.load(Ordering::Relaxed)
    }

    /// How many connections were accepted.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::Relaxed)
    }

    /// The headers (lowercase names; gRPC metadata included) of every request that
    /// arrived, in order.
    pub fn headers_seen(&self) -> Vec<Vec<(String, String)>> {
        self.shared.headers.lock().unwrap().clone()
    }

    /// The value of header `name` in the last request, if any.
    pub fn last_header(&self, name: &str) -> Option<String> {
        let seen = self.shared.headers.lock().unwrap();
        let last = seen.last()?;
        last.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// Note the request's arrival and headers.
fn record<B>(shared: &Shared, req: &Request<B>) {
    shared.requests.fetch_add(1, Ordering::Relaxed);
    let headers = req
        .headers()
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    shared.headers.lock().unwrap().push(headers);
}

async fn serve_connection<S>(kind: Kind, stream: S, shared: Arc<Shared>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let kill = Kill(Arc::new(Notify::new()));
    let io = TokioIo::new(stream);
    match kind {
        Kind::Http => {
            let (s, k) = (shared.clone(), kill.clone());
            let svc = service_fn(move |req| http_request(req, s.clone(), k.clone()));
            let conn = hyper::server::conn::http1::Builder::new().serve_connection(io, svc);
            tokio::select! {
                _ = conn => {}
                _ = kill.0.notified() => {}
            }
        }
        Kind::Grpc => {
            let handler = Handler {
                shared: shared.clone(),
            };
            let logs = LogsServiceServer::new(handler.clone())
                .accept_compressed(CompressionEncoding::Gzip)
                .send_compressed(CompressionEncoding::Gzip);
            let traces = TraceServiceServer::new(handler.clone())
                .accept_compressed(CompressionEncoding::Gzip)
                .send_compressed(CompressionEncoding::Gzip);
            let metrics = MetricsServiceServer::new(handler)
                .accept_compressed(CompressionEncoding::Gzip)
                .send_compressed(CompressionEncoding::Gzip);
            let (s, k) = (shared.clone(), kill.clone());
            let svc = service_fn(move |mut req: Request<Incoming>| {
                record(&s, &req);
                req.extensions_mut().insert(k.clone());
                let path = req.uri().path().to_string();
                let (mut logs, mut traces, mut metrics) =
                    (logs.clone(), traces.clone(), metrics.clone());
                async move {
                    if path.starts_with("/opentelemetry.proto.collector.logs.v1.LogsService/") {
                        logs.call(req).await
                    } else if path
                        .starts_with("/opentelemetry.proto.collector.trace.v1.TraceService/")
                    {
                        traces.call(req).await
                    } else if path
                        .starts_with("/opentelemetry.proto.collector.metrics.v1.MetricsService/")
                    {
                        metrics.call(req).await
                    } else {
                        Ok(
                            tonic::Status::unimplemented(format!("no service at {path}"))
                                .into_http(),
                        )
                    }
                }
            });
            let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(io, svc);
            tokio::select! {
                _ = conn => {}
                _ = kill.0.notified() => {}
            }
        }
    }
}

/// The gRPC services' shared answer logic.
#[derive(Clone)]
struct Handler {
    shared: Arc<Shared>,
}

impl Handler {
    /// The mode's answer: `Ok(Some(rejected))` to accept (and record), `Err` to refuse.
    async fn answer<T>(&self, req: &tonic::Request<T>) -> Result<Option<u64>, tonic::Status> {
        match self.shared.mode() {
            Mode::Ok => Ok(None),
            Mode::Partial { rejected } => Ok(Some(rejected)),
            Mode::Unavailable => Err(tonic::Status::unavailable(
                "test receiver is unavailable (Unavailable mode)",
            )),
            Mode::TooMany { retry_after } => Err(match retry_after {
                Some(s) => tonic::Status::with_error_details(
                    tonic::Code::ResourceExhausted,
                    "test receiver is throttling (TooMany mode)",
                    ErrorDetails::with_retry_info(Some(Duration::from_secs(s))),
                ),
                None => tonic::Status::resource_exhausted(
                    "test receiver is out of resources (TooMany mode, no RetryInfo)",
                ),
            }),
            Mode::BadRequest => Err(tonic::Status::invalid_argument(BAD_REQUEST_MESSAGE)),
            Mode::Stall => std::future::pending().await,
            Mode::DropConnection => {
                if let Some(kill) = req.extensions().get::<Kill>() {
                    kill.0.notify_one();
                }
                std::future::pending().await
            }
        }
    }
}

#[tonic::async_trait]
impl LogsService for Handler {
    async fn export(
        &self,
        req: tonic::Request<ExportLogsServiceRequest>,
    ) -> Result<tonic::Response<ExportLogsServiceResponse>, tonic::Status> {
        let rejected = self.answer(&req).await?;
        self.shared.keep_logs(req.into_inner());
        Ok(tonic::Response::new(ExportLogsServiceResponse {
            partial_success: rejected.map(|r| ExportLogsPartialSuccess {
                rejected_log_records: r as i64,
                error_message: PARTIAL_MESSAGE.into(),
            }),
        }))
    }
}

#[tonic::async_trait]
impl TraceService for Handler {
    async fn export(
        &self,
        req: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let rejected = self.answer(&req).await?;
        self.shared.spans.lock().unwrap().push(req.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: rejected.map(|r| ExportTracePartialSuccess {
                rejected_spans: r as i64,
                error_message: PARTIAL_MESSAGE.into(),
            }),
        }))
    }
}

#[tonic::async_trait]
impl MetricsService for Handler {
    async fn export(
        &self,
        req: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        let rejected = self.answer(&req).await?;
        self.shared.metrics.lock().unwrap().push(req.into_inner());
        Ok(tonic::Response::new(ExportMetricsServiceResponse {
            partial_success: rejected.map(|r| ExportMetricsPartialSuccess {
                rejected_data_points: r as i64,
                error_message: PARTIAL_MESSAGE.into(),
            }),
        }))
    }
}

/// One OTLP/HTTP request.
async fn http_request(
    req: Request<Incoming>,
    shared: Arc<Shared>,
    kill: Kill,
) -> Result<Response<Full<Bytes>>, Infallible> {
    record(&shared, &req);
    let json = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let gzip = req
        .headers()
        .get(http::header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
    let path = req.uri().path().to_string();
    let mode = shared.mode();
    match mode {
        Mode::Stall => std::future::pending().await,
        Mode::DropConnection => {
            kill.0.notify_one();
            return std::future::pending().await;
        }
        _ => {}
    }
    if req.method() != http::Method::POST {
        return Ok(status_response(
            StatusCode::METHOD_NOT_ALLOWED,
            12,
            "POST only",
            json,
        ));
    }
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return Ok(status_response(
                StatusCode::BAD_REQUEST,
                3,
                &e.to_string(),
                json,
            ));
        }
    };
    let body = if gzip {
        let mut out = Vec::new();
        if let Err(e) = flate2::read::GzDecoder::new(&body[..]).read_to_end(&mut out) {
            return Ok(status_response(
                StatusCode::BAD_REQUEST,
                3,
                &format!("bad gzip body: {e}"),
                json,
            ));
        }
        Bytes::from(out)
    } else {
        body
    };
    let refuse = |status, code, msg: &str| Ok(status_response(status, code, msg, json));
    match mode {
        Mode::Unavailable => {
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                14,
                "test receiver is unavailable (Unavailable mode)",
            );
        }
        Mode::TooMany { retry_after } => {
            let mut r = status_response(
                StatusCode::TOO_MANY_REQUESTS,
                8,
                "test receiver is throttling (TooMany mode)",
                json,
            );
            if let Some(s) = retry_after {
                r.headers_mut()
                    .insert(http::header::RETRY_AFTER, s.to_string().parse().unwrap());
            }
            return Ok(r);
        }
        Mode::BadRequest => return refuse(StatusCode::BAD_REQUEST, 3, BAD_REQUEST_MESSAGE),
        _ => {}
    }
    let rejected = match mode {
        Mode::Partial { rejected } => Some(rejected),
        _ => None,
    };
    let answer = match path.as_str() {
        "/v1/logs" => accept(
            &body,
            json,
            |r| shared.keep_logs(r),
            ExportLogsServiceResponse {
                partial_success: rejected.map(|r| ExportLogsPartialSuccess {
                    rejected_log_records: r as i64,
                    error_message: PARTIAL_MESSAGE.into(),
                }),
            },
        ),
        "/v1/traces" => accept(
            &body,
            json,
            |r| shared.spans.lock().unwrap().push(r),
            ExportTraceServiceResponse {
                partial_success: rejected.map(|r| ExportTracePartialSuccess {
                    rejected_spans: r as i64,
                    error_message: PARTIAL_MESSAGE.into(),
                }),
            },
        ),
        "/v1/metrics" => accept(
            &body,
            json,
            |r| shared.metrics.lock().unwrap().push(r),
            ExportMetricsServiceResponse {
                partial_success: rejected.map(|r| ExportMetricsPartialSuccess {
                    rejected_data_points: r as i64,
                    error_message: PARTIAL_MESSAGE.into(),
                }),
            },
        ),
        other => {
            return refuse(StatusCode::NOT_FOUND, 5, &format!("no OTLP path {other}"));
        }
    };
    Ok(answer.unwrap_or_else(|e| status_response(StatusCode::BAD_REQUEST, 3, &e, json)))
}

/// Decode a request (protobuf or OTLP/JSON), hand it to `keep`, and answer `response`.
fn accept<Req, Resp>(
    body: &[u8],
    json: bool,
    keep: impl FnOnce(Req),
    response: Resp,
) -> Result<Response<Full<Bytes>>, String>
where
    Req: Message + Default + serde::de::DeserializeOwned,
    Resp: Message + serde::Serialize,
{
    let req = if json {
        serde_json::from_slice::<Req>(body).map_err(|e| format!("bad OTLP/JSON body: {e}"))?
    } else {
        Req::decode(body).map_err(|e| format!("bad protobuf body: {e}"))?
    };
    keep(req);
    let bytes = if json {
        serde_json::to_vec(&response).unwrap()
    } else {
        response.encode_to_vec()
    };
    Ok(body_response(StatusCode::OK, bytes, json))
}

fn body_response(status: StatusCode, body: Vec<u8>, json: bool) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(if json {
            "application/json"
        } else {
            "application/x-protobuf"
        }),
    );
    r
}

/// An error answer with a `google.rpc.Status` body in the request's encoding.
fn status_response(
    status: StatusCode,
    code: i32,
    message: &str,
    json: bool,
) -> Response<Full<Bytes>> {
    let body = if json {
        serde_json::to_vec(&serde_json::json!({ "code": code, "message": message })).unwrap()
    } else {
        tonic_types::pb::Status {
            code,
            message: message.into(),
            details: vec![],
        }
        .encode_to_vec()
    };
    body_response(status, body, json)
}

/// A throwaway PKI for the TLS tests: a CA, a server certificate for 127.0.0.1 and
/// localhost, and a client certificate, all signed by the CA; the CA and client files are
/// written as PEM for the exporter to read.
pub struct TestPki {
    /// Holds the PEM files.
    pub dir: tempfile::TempDir,
    /// The CA certificate (PEM).
    pub ca: std::path::PathBuf,
    /// The client certificate (PEM).
    pub client_cert: std::path::PathBuf,
    /// The client certificate's key (PEM).
    pub client_key: std::path::PathBuf,
    ca_der: rustls::pki_types::CertificateDer<'static>,
    server_der: rustls::pki_types::CertificateDer<'static>,
    server_key_der: Vec<u8>,
}

impl TestPki {
    /// Generate the certificates and write the PEM files.
    pub fn new() -> TestPki {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
            KeyUsagePurpose,
        };
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "uevrec test CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_key = KeyPair::generate().unwrap();
        let ca = ca_params.self_signed(&ca_key).unwrap();

        let leaf = |names: Vec<String>, usage| {
            let mut p = CertificateParams::new(names).unwrap();
            p.extended_key_usages = vec![usage];
            let key = KeyPair::generate().unwrap();
            let cert = p.signed_by(&key, &ca, &ca_key).unwrap();
            (cert, key)
        };
        let (server, server_key) = leaf(
            vec!["127.0.0.1".into(), "localhost".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (client, client_key) = leaf(
            vec!["uevrec-client".into()],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, pem: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).unwrap();
            path
        };
        TestPki {
            ca: write("ca.pem", ca.pem()),
            client_cert: write("client.pem", client.pem()),
            client_key: write("client-key.pem", client_key.serialize_pem()),
            ca_der: ca.der().clone(),
            server_der: server.der().clone(),
            server_key_der: server_key.serialize_der(),
            dir,
        }
    }

    fn server_config(&self, kind: Kind, require_client_cert: bool) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = if require_client_cert {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(self.ca_der.clone()).unwrap();
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .unwrap();
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(self.server_key_der.clone().into());
        let mut config = builder
            .with_single_cert(vec![self.server_der.clone()], key)
            .unwrap();
        config.alpn_protocols = match kind {
            Kind::Grpc => vec![b"h2".to_vec()],
            Kind::Http => vec![b"http/1.1".to_vec()],
        };
        Arc::new(config)
    }
}
