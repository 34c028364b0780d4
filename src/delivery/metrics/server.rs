//! [`serve`]: the HTTP endpoint of `--metrics-listen`, on hyper's HTTP/1 server in a
//! current-thread tokio runtime on its own thread (the lightest server stack that does
//! HTTP properly; axum's routing is not needed for three paths). Its paths and answers:
//! docs/metrics.md.

use std::convert::Infallible;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{ACCEPT, ALLOW, CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{Semaphore, oneshot};

use super::{Health, Metrics};

/// Connections served at once (further ones wait in the kernel's backlog): with
/// [`HEADER_TIMEOUT`], neither memory nor the thread can be held by slow or many clients.
pub const MAX_CONNECTIONS: usize = 32;

/// Time a client has to send a request's headers (including the wait for the next request
/// on a kept-alive connection).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// `Content-Type` of the Prometheus text format.
const PROMETHEUS_TEXT: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;
/// `Content-Type` of OpenMetrics text.
const OPENMETRICS_TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// `Content-Type` of the other answers.
const PLAIN: &str = "text/plain; charset=utf-8";

/// Why the metrics endpoint could not start; the message says the fix.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The address could not be understood (or its name resolved).
    #[error(
        "--metrics-listen `{addr}`: {why}; give HOST:PORT, [IPV6]:PORT or :PORT (every \
         interface), e.g. 127.0.0.1:9464"
    )]
    Address {
        /// The address as given.
        addr: String,
        /// What is wrong with it.
        why: String,
    },
    /// Something listens on that port already.
    #[error(
        "cannot listen on {addr}: the address is in use (`ss -ltnp 'sport = :{port}'` names \
         the process listening there); stop it or choose another port with --metrics-listen"
    )]
    InUse {
        /// The address.
        addr: SocketAddr,
        /// Its port.
        port: u16,
    },
    /// The port is privileged.
    #[error(
        "cannot listen on {addr}: permission denied (ports below 1024 need root or \
         CAP_NET_BIND_SERVICE); choose a port of 1024 or more, e.g. :9464"
    )]
    Permission {
        /// The address.
        addr: SocketAddr,
    },
    /// The address is not one of this machine's.
    #[error(
        "cannot listen on {addr}: no interface of this machine has that address (`ip addr` \
         lists them); give one of those, or :PORT for every interface"
    )]
    NotAvailable {
        /// The address.
        addr: SocketAddr,
    },
    /// Another failure to listen.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: io::Error,
    },
    /// The server's runtime or thread could not be started.
    #[error("cannot start the metrics server: {0}")]
    Start(io::Error),
}

/// The running endpoint ([`serve`]). Dropping it shuts it down as
/// [`MetricsServer::shutdown`] does.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// The address listened on (the port chosen when the one asked was 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop accepting, close every connection, and join the server's thread.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        if let Some(stop) = self.stop.take() {
            // The thread may have ended already: nothing to tell it then.
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            // A panic on that thread ended serving; there is nothing left to stop.
            let _ = thread.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// The addresses to try for `addr`, in order: `HOST:PORT` (a name is resolved),
/// `[IPV6]:PORT`, or `:PORT` for every interface (`[::]`, which on Linux also takes IPv4
/// unless `net.ipv6.bindv6only` is set; `0.0.0.0` where IPv6 is off).
fn candidates(addr: &str) -> Result<Vec<SocketAddr>, MetricsError> {
    let bad = |why: String| MetricsError::Address {
        addr: addr.to_string(),
        why,
    };
    let port = |p: &str| {
        p.parse::<u16>()
            .map_err(|_| bad(format!("the port `{p}` is not a number from 0 to 65535")))
    };
    if let Some(p) = addr.strip_prefix(':').filter(|p| !p.contains(':')) {
        let p = port(p)?;
        return Ok(vec![
            SocketAddr::from((Ipv6Addr::UNSPECIFIED, p)),
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, p)),
        ]);
    }
    if let Ok(a) = addr.parse::<SocketAddr>() {
        return Ok(vec![a]);
    }
    let Some((host, p)) = addr.rsplit_once(':') else {
        return Err(bad("no port".into()));
    };
    if host.contains(':') && !host.starts_with('[') {
        return Err(bad("an IPv6 address goes in brackets, as [::1]:9464".into()));
    }
    let p = port(p)?;
    if host.is_empty() || host.starts_with('[') {
        return Err(bad(format!("`{host}` is not a host name or address")));
    }
    let found: Vec<SocketAddr> = (host, p)
        .to_socket_addrs()
        .map_err(|e| bad(format!("cannot resolve `{host}`: {e}")))?
        .collect();
    if found.is_empty() {
        return Err(bad(format!("`{host}` resolves to no address")));
    }
    Ok(found)
}

/// Whether binding failed because the address family is not available here (IPv6 off),
/// so that the next candidate is worth trying.
fn family_missing(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EAFNOSUPPORT) || e.kind() == io::ErrorKind::AddrNotAvailable
}

fn bind(addr: &str) -> Result<TcpListener, MetricsError> {
    let all = candidates(addr)?;
    let mut last = None;
    for (i, a) in all.iter().enumerate() {
        match TcpListener::bind(a) {
            Ok(l) => return Ok(l),
            Err(e) if i + 1 < all.len() && family_missing(&e) => last = Some((*a, e)),
            Err(e) => return Err(bind_error(*a, e)),
        }
    }
    // Only reached when `all` ended with a skipped failure, which cannot happen (the last
    // candidate returns); kept as an error rather than a panic.
    let (a, e) = last.unwrap_or((
        all[0],
        io::Error::new(io::ErrorKind::AddrNotAvailable, "no address"),
    ));
    Err(bind_error(a, e))
}

fn bind_error(addr: SocketAddr, e: io::Error) -> MetricsError {
    match e.kind() {
        io::ErrorKind::AddrInUse => MetricsError::InUse {
            addr,
            port: addr.port(),
        },
        io::ErrorKind::PermissionDenied => MetricsError::Permission { addr },
        io::ErrorKind::AddrNotAvailable => MetricsError::NotAvailable { addr },
        _ => MetricsError::Bind { addr, source: e },
    }
}

/// Listen on `addr` (`127.0.0.1:9464`, `[::]:9464`, `:9464`; port 0 picks a free one)
/// now, and answer `/metrics`, `/healthz` and `/readyz` from `metrics` and `health` on a
/// thread of its own until [`MetricsServer::shutdown`].
pub fn serve(
    addr: &str,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
) -> Result<MetricsServer, MetricsError> {
    let listener = bind(addr)?;
    let local = listener.local_addr().map_err(MetricsError::Start)?;
    listener
        .set_nonblocking(true)
        .map_err(MetricsError::Start)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(MetricsError::Start)?;
    let listener = {
        let _in_runtime = runtime.enter();
        tokio::net::TcpListener::from_std(listener).map_err(MetricsError::Start)?
    };
    let (stop, stopped) = oneshot::channel();
    let state = Arc::new(State { metrics, health });
    let thread = std::thread::Builder::new()
        .name("uevrec-metrics".into())
        .spawn(move || runtime.block_on(accept_loop(listener, stopped, state)))
        .map_err(MetricsError::Start)?;
    Ok(MetricsServer {
        addr: local,
        stop: Some(stop),
        thread: Some(thread),
    })
}

struct State {
    metrics: Arc<Metrics>,
    health: Arc<Health>,
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    mut stop: oneshot::Receiver<()>,
    state: Arc<State>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let slot = tokio::select! {
            _ = &mut stop => return,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => return, // never closed
            },
        };
        let stream = tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => {
                    // Out of descriptors or a connection reset before accept: wait a
                    // little rather than spin, then go on.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let state = state.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                let answer = handle(&state, &req);
                async move { Ok::<_, Infallible>(answer) }
            });
            // A connection ending in error (a client gone, a timeout) concerns only it.
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The answer to one request (its body is ignored: every path is read-only).
fn handle<B>(state: &State, req: &Request<B>) -> Response<Full<Bytes>> {
    let accept = req
        .headers()
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let (status, content_type, body) = answer(
        &state.metrics,
        &state.health,
        req.method(),
        req.uri().path(),
        accept,
    );
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if status == StatusCode::METHOD_NOT_ALLOWED {
        headers.insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
    }
    response
}

/// Status, content type and body for `method` on `path`:
///
/// | path | answer |
/// |---|---|
/// | `/metrics` | 200, the metrics: Prometheus text 0.0.4, or OpenMetrics 1.0 when `Accept` names `application/openmetrics-text` |
/// | `/healthz` | 200 `ok`, or 503 with one stale thread per line ([`Health::alive`]) |
/// | `/readyz` | 200 `ready`, or 503 with one reason per line ([`Health::ready`]) |
/// | `/` | 200, a list of these paths |
/// | other | 404; methods other than GET and HEAD: 405 |
fn answer(
    metrics: &Metrics,
    health: &Health,
    method: &Method,
    path: &str,
    accept: &str,
) -> (StatusCode, &'static str, String) {
    if !matches!(path, "/metrics" | "/healthz" | "/readyz" | "/") {
        return (
            StatusCode::NOT_FOUND,
            PLAIN,
            format!("not found: {path}; this server answers /metrics, /healthz and /readyz\n"),
        );
    }
    if method != Method::GET && method != Method::HEAD {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            PLAIN,
            format!("{method} is not allowed here: use GET\n"),
        );
    }
    let lines = |why: &[String]| why.iter().map(|l| format!("{l}\n")).collect::<String>();
    match path {
        "/metrics" => {
            metrics.run_hooks();
            health.publish(metrics);
            let openmetrics = accept.contains("application/openmetrics-text");
            let body = metrics.encode(openmetrics);
            let ty = if openmetrics {
                OPENMETRICS_TEXT
            } else {
                PROMETHEUS_TEXT
            };
            (StatusCode::OK, ty, body)
        }
        "/healthz" => match health.alive() {
            Ok(()) => (StatusCode::OK, PLAIN, "ok\n".into()),
            Err(stale) => (
                StatusCode::SERVICE_UNAVAILABLE,
                PLAIN,
                lines(&stale.iter().map(ToString::to_string).collect::<Vec<_>>()),
            ),
        },
        "/readyz" => {
            metrics.run_hooks();
            match health.ready(metrics) {
                Ok(()) => (StatusCode::OK, PLAIN, "ready\n".into()),
                Err(why) => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    PLAIN,
                    lines(&why.iter().map(ToString::to_string).collect::<Vec<_>>()),
                ),
            }
        }
        _ => (
            StatusCode::OK,
            PLAIN,
            "uevrec\n/metrics  Prometheus metrics\n/healthz  liveness\n/readyz   readiness\n"
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        let one = |a: &str| candidates(a).unwrap();
        assert_eq!(one("127.0.0.1:9464"), ["127.0.0.1:9464".parse().unwrap()]);
        assert_eq!(one("[::1]:0"), ["[::1]:0".parse().unwrap()]);
        assert_eq!(
            one(":9464"),
            [
                "[::]:9464".parse::<SocketAddr>().unwrap(),
                "0.0.0.0:9464".parse().unwrap()
            ]
        );
        assert!(one("localhost:9464").iter().all(|a| a.port() == 9464));
        for (bad, says) in [
            ("9464", "no port"),
            (":http", "the port `http` is not a number"),
            ("127.0.0.1:70000", "the port `70000`"),
            ("::1:9464", "brackets"),
            ("[::1:9464", "is not a host name"),
            ("", "no port"),
        ] {
            let e = candidates(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(e.contains("e.g. 127.0.0.1:9464"), "{e}");
        }
    }

    #[test]
    fn routes() {
        let m = Metrics::new();
        let h = Health::default();
        let get = |path: &str, accept: &str| answer(&m, &h, &Method::GET, path, accept);
        let (s, ty, body) = get("/metrics", "");
        assert_eq!((s, ty), (StatusCode::OK, PROMETHEUS_TEXT));
        assert!(body.contains("uevrec_ready 0\n"), "{body}");
        let (_, ty, body) = get("/metrics", "application/openmetrics-text;version=1.0.0,*/*");
        assert_eq!(ty, OPENMETRICS_TEXT);
        assert!(body.ends_with("# EOF\n"));
        assert_eq!(get("/healthz", "").0, StatusCode::OK);
        let (s, _, body) = get("/readyz", "");
        assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, "starting: no events attached yet\n");
        h.set_attached(1);
        assert_eq!(get("/readyz", "").2, "ready\n");
        assert_eq!(get("/nope", "").0, StatusCode::NOT_FOUND);
        assert_eq!(get("/metrics/", "").0, StatusCode::NOT_FOUND);
        assert_eq!(
            answer(&m, &h, &Method::POST, "/metrics", "").0,
            StatusCode::METHOD_NOT_ALLOWED
        );
    }

    #[test]
    fn in_use_and_privileged_ports_say_the_fix() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap().to_string();
        let e = bind(&addr).unwrap_err();
        assert!(matches!(e, MetricsError::InUse { .. }), "{e:?}");
        assert!(e.to_string().contains("choose another port"), "{e}");
        let e = bind_error(
            "0.0.0.0:80".parse().unwrap(),
            io::Error::from(io::ErrorKind::PermissionDenied),
        );
        assert!(e.to_string().contains("CAP_NET_BIND_SERVICE"), "{e}");
        let e = bind("192.0.2.1:0").unwrap_err();
        assert!(matches!(e, MetricsError::NotAvailable { .. }), "{e:?}");
    }
}
