//! The `OTEL_EXPORTER_OTLP_*` variables (general and per signal) and the `--otlp-*` flags,
//! `--otlp-header KEY=VALUE` among them, → `export_config::resolve`:
//! - never panics; the same input resolves the same twice;
//! - a header value (every one marked with a canary) is never in an error message nor in
//!   the `Debug` of a configuration;
//! - a configuration resolved is one a client can use: each endpoint `http://` or
//!   `https://` with a host and no `user:password@`, gRPC's `scheme://authority/` only,
//!   HTTP from a base URL ending in the signal's path; header names lowercase, valid,
//!   once each and none the exporter sets itself; values visible ASCII, space or tab; the
//!   timeout above zero; a client certificate only with its key;
//! - the order of precedence: a flag over the variables, a per-signal variable over the
//!   general one; an `--otlp-header` key the last flag's value.
//!
//! Dictionary: `dict/export_config.dict`.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;
use std::time::Duration;
use uevrec_parsers::export_config::{
    Compression, ExportConfig, ExportFlags, Protocol, Signal, SignalConfig, resolve,
};

/// Marks every header value: it must never be shown.
const CANARY: &str = "Zq9Secret";

const SUFFIXES: [&str; 9] = [
    "ENDPOINT",
    "PROTOCOL",
    "HEADERS",
    "COMPRESSION",
    "TIMEOUT",
    "INSECURE",
    "CERTIFICATE",
    "CLIENT_CERTIFICATE",
    "CLIENT_KEY",
];
const INFIXES: [&str; 4] = ["", "LOGS_", "TRACES_", "METRICS_"];

#[derive(Arbitrary, Debug)]
struct Input {
    /// (suffix, infix, value); HEADERS values get canaries after every `=`.
    env: Vec<(u8, u8, String)>,
    endpoint: Option<String>,
    protocol: Option<u8>,
    /// `KEY=VALUE`: the canary goes after the first `=`.
    headers: Vec<String>,
    compression: Option<bool>,
    timeout_ms: Option<u32>,
    ca: Option<String>,
    client_cert: Option<String>,
    client_key: Option<String>,
    insecure: Option<bool>,
}

fn protocol_of(b: u8) -> Protocol {
    match b % 3 {
        0 => Protocol::Grpc,
        1 => Protocol::HttpProtobuf,
        _ => Protocol::HttpJson,
    }
}

fuzz_target!(|input: Input| {
    let mut env: HashMap<String, String> = HashMap::new();
    for (suffix, infix, value) in &input.env {
        let suffix = SUFFIXES[usize::from(*suffix) % SUFFIXES.len()];
        let infix = INFIXES[usize::from(*infix) % INFIXES.len()];
        let value = if suffix == "HEADERS" {
            value.replace('=', &format!("={CANARY}"))
        } else {
            value.clone()
        };
        env.insert(format!("OTEL_EXPORTER_OTLP_{infix}{suffix}"), value);
    }
    let flags = ExportFlags {
        endpoint: input.endpoint.clone(),
        protocol: input.protocol.map(protocol_of),
        headers: input
            .headers
            .iter()
            .map(|h| h.replacen('=', &format!("={CANARY}"), 1))
            .collect(),
        compression: input.compression.map(|gzip| {
            if gzip {
                Compression::Gzip
            } else {
                Compression::None
            }
        }),
        timeout: input
            .timeout_ms
            .map(|ms| Duration::from_millis(u64::from(ms))),
        ca: input.ca.clone().map(Into::into),
        client_cert: input.client_cert.clone().map(Into::into),
        client_key: input.client_key.clone().map(Into::into),
        insecure: input.insecure,
    };
    let lookup = |name: &str| env.get(name).cloned();
    let resolved = resolve(&flags, &lookup);
    assert_eq!(resolved, resolve(&flags, &lookup), "not the same twice");

    // The check holds where the input holds no canary of its own.
    let own_canary = input
        .env
        .iter()
        .map(|(_, _, v)| v.as_str())
        .chain(input.headers.iter().map(String::as_str))
        .chain(input.endpoint.as_deref())
        .chain(input.ca.as_deref())
        .chain(input.client_cert.as_deref())
        .chain(input.client_key.as_deref())
        .any(|t| t.contains("Zq9"));
    let config = match resolved {
        Ok(config) => config,
        Err(e) => {
            let message = e.to_string();
            assert!(!message.is_empty());
            if !own_canary {
                assert!(
                    !message.contains(CANARY),
                    "a header value in a message: {message}"
                );
            }
            return;
        }
    };
    if !own_canary {
        let shown = format!("{config:?}");
        assert!(
            !shown.contains(CANARY),
            "a header value in a Debug: {shown}"
        );
    }
    check_config(&config, &flags, &env);
});

fn check_config(config: &ExportConfig, flags: &ExportFlags, env: &HashMap<String, String>) {
    let set = |name: &str| env.get(name).filter(|v| !v.trim().is_empty());
    for signal in Signal::ALL {
        let c: &SignalConfig = config.signal(signal);
        let infix = match signal {
            Signal::Logs => "LOGS_",
            Signal::Traces => "TRACES_",
            Signal::Metrics => "METRICS_",
        };
        let var = |suffix: &str| {
            set(&format!("OTEL_EXPORTER_OTLP_{infix}{suffix}"))
                .or_else(|| set(&format!("OTEL_EXPORTER_OTLP_{suffix}")))
        };

        // Precedence: a flag, else the per-signal variable, else the general one.
        let protocol = flags.protocol.unwrap_or_else(|| {
            var("PROTOCOL").map_or(Protocol::HttpProtobuf, |v| v.parse().expect("it resolved"))
        });
        assert_eq!(c.protocol, protocol, "{signal:?}: protocol");
        let compression = flags.compression.unwrap_or_else(|| {
            var("COMPRESSION").map_or(Compression::None, |v| v.parse().expect("it resolved"))
        });
        assert_eq!(c.compression, compression, "{signal:?}: compression");
        match flags.timeout {
            Some(t) => assert_eq!(c.timeout, t),
            None => {
                if let Some(v) = var("TIMEOUT") {
                    let ms: u64 = v.trim().parse().expect("it resolved");
                    assert_eq!(c.timeout, Duration::from_millis(ms));
                }
            }
        }
        assert!(!c.timeout.is_zero(), "a zero timeout");
        assert_eq!(
            c.tls.client_cert.is_some(),
            c.tls.client_key.is_some(),
            "a client certificate without its key, or the other way round"
        );

        // The endpoint a client can use.
        let e = &c.endpoint;
        assert!(
            e.starts_with("http://") || e.starts_with("https://"),
            "{signal:?}: endpoint {e:?}"
        );
        let uri: http::Uri = e.parse().expect("the endpoint is a URL");
        let authority = uri.authority().expect("the endpoint has a host");
        assert!(!authority.host().is_empty(), "{e:?}: no host");
        assert!(!authority.as_str().contains('@'), "{e:?}: credentials");
        match c.protocol {
            Protocol::Grpc => {
                assert_eq!(uri.path(), "/", "{e:?}: gRPC with a path");
                assert!(uri.query().is_none(), "{e:?}: gRPC with a query");
                assert!(e.ends_with('/'));
            }
            Protocol::HttpProtobuf | Protocol::HttpJson => {
                let specific = set(&format!("OTEL_EXPORTER_OTLP_{infix}ENDPOINT"));
                if flags.endpoint.is_some() || specific.is_none() {
                    assert!(
                        uri.path().ends_with(signal.http_path()),
                        "{e:?}: a base URL without {}",
                        signal.http_path()
                    );
                }
            }
        }

        // Headers: valid, lowercase, once each, none the exporter's own.
        let mut names: Vec<&str> = c.headers.iter().map(|h| h.name.as_str()).collect();
        for h in &c.headers {
            assert!(!h.name.is_empty());
            assert_eq!(h.name, h.name.to_ascii_lowercase(), "a name not lowercase");
            http::HeaderName::from_bytes(h.name.as_bytes()).expect("a valid header name");
            assert!(
                !h.name.starts_with("grpc-")
                    && !matches!(
                        h.name.as_str(),
                        "content-type"
                            | "content-length"
                            | "content-encoding"
                            | "transfer-encoding"
                            | "host"
                            | "connection"
                            | "te"
                            | "user-agent"
                    ),
                "the exporter's own header {:?}",
                h.name
            );
            assert!(
                h.value
                    .expose()
                    .bytes()
                    .all(|b| b == b'\t' || (0x20..0x7f).contains(&b)),
                "a header value HTTP cannot carry"
            );
        }
        names.sort_unstable();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count, "a header twice");
        // An --otlp-header key: the last flag's value.
        for flag in &flags.headers {
            let (key, _) = flag.split_once('=').expect("it resolved");
            let name = key.trim().to_ascii_lowercase();
            let last = flags
                .headers
                .iter()
                .rev()
                .filter_map(|f| f.split_once('='))
                .find(|(k, _)| k.trim().to_ascii_lowercase() == name)
                .map(|(_, v)| v)
                .expect("the flag itself");
            let h = c
                .headers
                .iter()
                .find(|h| h.name == name)
                .expect("a flag's header is sent");
            assert_eq!(h.value.expose(), last, "a flag's header not its last value");
        }
    }
}
