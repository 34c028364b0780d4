//! debuginfod: a module's debug file or binary by its GNU build id, from the servers
//! `DEBUGINFOD_URLS` names (space-separated, as elfutils, gdb and perf read it), kept in
//! the cache those clients share (`$DEBUGINFOD_CACHE_PATH`, else
//! `$XDG_CACHE_HOME/debuginfod_client`, else `~/.cache/debuginfod_client`:
//! `HEX/debuginfo`, `HEX/executable`). For recorded files only (`uevrec decode`,
//! `uevrec flamegraph`): a fetch can take seconds, which the live symbolizer's budget
//! has not got. Without `DEBUGINFOD_URLS` nothing is asked (the cache is still read).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// What is asked for a build id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Artifact {
    /// The separate debug file (DWARF, symbols).
    Debuginfo,
    /// The binary itself (its symbols, its unwind tables).
    Executable,
}

impl Artifact {
    /// The name in the server's path and in the cache.
    fn name(self) -> &'static str {
        match self {
            Artifact::Debuginfo => "debuginfo",
            Artifact::Executable => "executable",
        }
    }
}

/// How long one request may take, connection and body (`DEBUGINFOD_TIMEOUT` seconds;
/// elfutils' default 90).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(90);

/// The largest file taken (`DEBUGINFOD_MAXSIZE` bytes; 1 GiB otherwise: debug files of
/// large programs reach hundreds of MiB, and the body goes to disk, not memory).
const DEFAULT_MAX_SIZE: u64 = 1 << 30;

/// Build ids and artifacts no server had, in this process (asked once each).
static MISSED: Mutex<Vec<(Box<[u8]>, Artifact)>> = Mutex::new(Vec::new());

/// The servers and cache of the environment when `DEBUGINFOD_URLS` names servers (the
/// environment read once).
pub fn configured() -> Option<&'static Debuginfod> {
    static FROM_ENV: std::sync::OnceLock<Debuginfod> = std::sync::OnceLock::new();
    Some(FROM_ENV.get_or_init(Debuginfod::from_env)).filter(|d| !d.urls.is_empty())
}

/// Where the servers and the cache are, as the environment says.
#[derive(Debug, Clone)]
pub struct Debuginfod {
    urls: Vec<String>,
    cache: Option<PathBuf>,
    timeout: Duration,
    max_size: u64,
}

impl Debuginfod {
    /// From `DEBUGINFOD_URLS`, `DEBUGINFOD_CACHE_PATH`, `XDG_CACHE_HOME`, `HOME`,
    /// `DEBUGINFOD_TIMEOUT` and `DEBUGINFOD_MAXSIZE`.
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let cache = var("DEBUGINFOD_CACHE_PATH")
            .map(PathBuf::from)
            .or_else(|| var("XDG_CACHE_HOME").map(|d| Path::new(&d).join("debuginfod_client")))
            .or_else(|| var("HOME").map(|h| Path::new(&h).join(".cache/debuginfod_client")));
        Debuginfod {
            urls: var("DEBUGINFOD_URLS")
                .map(|u| u.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default(),
            cache,
            timeout: var("DEBUGINFOD_TIMEOUT")
                .and_then(|t| t.parse().ok())
                .map_or(DEFAULT_TIMEOUT, Duration::from_secs),
            max_size: var("DEBUGINFOD_MAXSIZE")
                .and_then(|t| t.parse().ok())
                .filter(|&m| m > 0)
                .unwrap_or(DEFAULT_MAX_SIZE),
        }
    }

    /// The servers asked, in order.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    /// The cached file of `build_id`'s `what`, fetched first when a server has it; `Err`
    /// says why there is none (every server's answer, or no server set).
    pub fn find(&self, build_id: &[u8], what: Artifact) -> Result<PathBuf, String> {
        if build_id.is_empty() {
            return Err("no build id".into());
        }
        let hex: String = build_id.iter().map(|b| format!("{b:02x}")).collect();
        let cache = self
            .cache
            .as_ref()
            .ok_or("no debuginfod cache directory (set DEBUGINFOD_CACHE_PATH or HOME)")?;
        let path = cache.join(&hex).join(what.name());
        // An empty file is elfutils' mark of a miss; a file of ours is never empty.
        if std::fs::metadata(&path).is_ok_and(|m| m.len() > 0) {
            return Ok(path);
        }
        if self.urls.is_empty() {
            return Err("DEBUGINFOD_URLS is not set".into());
        }
        let missed = (Box::from(build_id), what);
        if MISSED.lock().unwrap().contains(&missed) {
            return Err(format!(
                "no server of DEBUGINFOD_URLS has {hex}'s {}",
                what.name()
            ));
        }
        let mut why = Vec::new();
        for url in &self.urls {
            let from = format!(
                "{}/buildid/{hex}/{}",
                url.trim_end_matches('/'),
                what.name()
            );
            match self.fetch(&from, &path) {
                Ok(()) => return Ok(path),
                Err(e) => why.push(format!("{from}: {e}")),
            }
        }
        let mut m = MISSED.lock().unwrap();
        if m.len() < 4096 {
            m.push(missed);
        }
        Err(why.join("; "))
    }

    /// `url`'s body into `path` (through a temporary file beside it, renamed when whole:
    /// a reader never sees half a file).
    fn fetch(&self, url: &str, path: &Path) -> Result<(), String> {
        let dir = path.parent().ok_or("no cache directory")?;
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)
            .map_err(|e| format!("cannot write in {}: {e}", dir.display()))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("no async runtime: {e}"))?;
        let body = runtime.block_on(async {
            tokio::time::timeout(self.timeout, self.download(url, tmp.as_file_mut()))
                .await
                .unwrap_or_else(|_| Err(format!("no answer in {} s", self.timeout.as_secs())))
        });
        body?;
        tmp.persist(path)
            .map_err(|e| format!("cannot keep {}: {}", path.display(), e.error))?;
        Ok(())
    }

    /// GET `url`, its body written to `out`.
    async fn download(&self, url: &str, out: &mut std::fs::File) -> Result<(), String> {
        let uri: http::Uri = url.parse().map_err(|e| format!("not a URL: {e}"))?;
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        if uri.scheme_str() == Some("https") {
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        }
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client: Client<_, Empty<bytes::Bytes>> =
            Client::builder(TokioExecutor::new()).build(connector);
        let response = client
            .get(uri)
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("HTTP {status}"));
        }
        let mut body = response.into_body();
        let mut written = 0u64;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| format!("cut off: {e}"))?;
            if let Ok(data) = frame.into_data() {
                written = written.saturating_add(data.len() as u64);
                if written > self.max_size {
                    return Err(format!(
                        "larger than {} bytes (DEBUGINFOD_MAXSIZE)",
                        self.max_size
                    ));
                }
                out.write_all(&data)
                    .map_err(|e| format!("cannot write: {e}"))?;
            }
        }
        if written == 0 {
            return Err("an empty answer".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::net::TcpListener;

    /// A server on 127.0.0.1 answering each request with `answer(path)`: its URL, and
    /// the paths asked (in order).
    fn server(answer: fn(&str) -> (u16, Vec<u8>)) -> (String, std::sync::Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let asked = std::sync::Arc::new(Mutex::new(Vec::new()));
        let log = asked.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let mut conn = conn.unwrap();
                let mut line = String::new();
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                reader.read_line(&mut line).unwrap();
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap() == 0 || h == "\r\n" {
                        break;
                    }
                }
                let path = line.split(' ').nth(1).unwrap_or("").to_owned();
                log.lock().unwrap().push(path.clone());
                let (status, body) = answer(&path);
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(head.as_bytes());
                let _ = conn.write_all(&body);
            }
        });
        (url, asked)
    }

    fn client(urls: Vec<String>, cache: &Path) -> Debuginfod {
        Debuginfod {
            urls,
            cache: Some(cache.to_owned()),
            timeout: Duration::from_secs(10),
            max_size: 1 << 20,
        }
    }

    #[test]
    fn fetched_into_the_shared_cache_layout_then_read_from_it() {
        let (url, asked) = server(|path| match path {
            "/buildid/0a0b/executable" => (200, b"ELF!".to_vec()),
            _ => (404, Vec::new()),
        });
        let cache = tempfile::tempdir().unwrap();
        let (missing, _) = server(|_| (404, Vec::new()));
        let d = client(vec![missing, url], cache.path());
        let got = d.find(&[0x0a, 0x0b], Artifact::Executable).unwrap();
        assert_eq!(got, cache.path().join("0a0b/executable"));
        assert_eq!(std::fs::read(&got).unwrap(), b"ELF!");
        // Cached: no second request.
        assert_eq!(d.find(&[0x0a, 0x0b], Artifact::Executable).unwrap(), got);
        assert_eq!(asked.lock().unwrap().len(), 1);
    }

    #[test]
    fn misses_say_what_each_server_answered_and_are_asked_once() {
        let (url, asked) = server(|_| (404, Vec::new()));
        let cache = tempfile::tempdir().unwrap();
        let d = client(vec![url.clone()], cache.path());
        let why = d.find(&[0xfe, 0x01], Artifact::Debuginfo).unwrap_err();
        assert!(why.contains("/buildid/fe01/debuginfo: HTTP 404"), "{why}");
        assert!(d.find(&[0xfe, 0x01], Artifact::Debuginfo).is_err());
        assert_eq!(asked.lock().unwrap().len(), 1, "a miss is remembered");
        assert!(!cache.path().join("fe01/debuginfo").exists());
        let none = client(Vec::new(), cache.path());
        assert!(
            none.find(&[1], Artifact::Debuginfo)
                .unwrap_err()
                .contains("DEBUGINFOD_URLS")
        );
    }

    #[test]
    fn too_large_or_unreachable_leaves_nothing_in_the_cache() {
        let (url, _) = server(|_| (200, vec![7; 2 << 20]));
        let cache = tempfile::tempdir().unwrap();
        let d = client(vec![url], cache.path());
        let why = d.find(&[0x33], Artifact::Executable).unwrap_err();
        assert!(why.contains("DEBUGINFOD_MAXSIZE"), "{why}");
        let gone = client(vec!["http://127.0.0.1:1".into()], cache.path());
        let why = gone.find(&[0x34], Artifact::Executable).unwrap_err();
        assert!(why.contains("cannot connect"), "{why}");
        let left: Vec<_> = walk(cache.path());
        assert!(left.is_empty(), "{left:?}");
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                files.extend(walk(&p));
            } else {
                files.push(p);
            }
        }
        files
    }
}
