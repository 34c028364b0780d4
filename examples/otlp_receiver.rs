//! A standalone OTLP receiver for benchmarks and manual use (scripts/bench-export.sh): the
//! test receiver of tests/common/otlp_receiver.rs (tonic gRPC on opentelemetry-proto's
//! collector services, or hyper OTLP/HTTP with protobuf and JSON bodies) on 127.0.0.1,
//! counting what it accepts instead of keeping it, so that its memory stays flat however
//! much arrives.
//!
//! ```text
//! cargo run --release --example otlp_receiver -- --grpc|--http [--port N] [--mode ok|unavailable]
//! ```
//!
//! Prints `{"listening":PORT,"kind":"grpc"}` once it accepts connections (port 0, the
//! default, picks a free one). Every request is decoded (protobuf or OTLP/JSON) as a
//! collector would and its log records counted, split by scope: `log_records` (the recorded
//! events) and `uevrec_records` (scope `uevrec`: lost counts and notices). The decoding is
//! the receiver's main cost; its CPU is its own, measured apart by the benchmark.
//!
//! Commands on stdin, one per line: `stats` prints the counts and goes on; `mode ok` /
//! `mode unavailable` changes the answer to the next requests (HTTP 503 / gRPC
//! `UNAVAILABLE`) and prints the counts; any other line, SIGINT or SIGTERM prints the counts
//! and exits (end of input does not: it may run with stdin on /dev/null). The counts are one JSON line:
//! `{"requests":R,"log_requests":L,"log_records":N,"uevrec_records":U,"log_bytes":B,
//! "first_accepted_s":F,"last_accepted_s":T}` (times in seconds since the receiver started
//! listening; null before the first accepted request).

#[path = "../tests/common/otlp_receiver.rs"]
mod otlp_receiver;

use std::io::BufRead;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Instant;

use otlp_receiver::{Kind, Mode, Receiver};
use signal_hook::consts::{SIGINT, SIGTERM};

const USAGE: &str = "usage: otlp_receiver --grpc|--http [--port N] [--mode ok|unavailable]";

/// The command line.
struct Args {
    kind: Kind,
    port: u16,
    mode: Mode,
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    match s {
        "ok" => Ok(Mode::Ok),
        "unavailable" => Ok(Mode::Unavailable),
        other => Err(format!(
            "unknown mode {other:?}: use ok or unavailable; {USAGE}"
        )),
    }
}

fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let (mut kind, mut port, mut mode) = (None, 0u16, Mode::Ok);
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .ok_or_else(|| format!("{name} needs a value; {USAGE}"))
        };
        match arg.as_str() {
            "--grpc" => kind = Some(Kind::Grpc),
            "--http" => kind = Some(Kind::Http),
            "--port" => {
                let v = value("--port")?;
                port = v.parse().map_err(|_| {
                    format!("--port {v:?}: a port number 0-65535 (0: any free one)")
                })?;
            }
            "--mode" => mode = parse_mode(&value("--mode")?)?,
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown argument {other:?}; {USAGE}")),
        }
    }
    let kind = kind.ok_or_else(|| format!("say --grpc or --http; {USAGE}"))?;
    Ok(Args { kind, port, mode })
}

/// What ends the wait or changes something.
enum Event {
    Stats,
    Mode(Mode),
    Stop,
}

fn print_counts(rx: &Receiver, started: Instant) {
    let c = rx.counts();
    let secs = |t: Option<Instant>| match t {
        Some(t) => format!("{:.3}", t.duration_since(started).as_secs_f64()),
        None => "null".to_string(),
    };
    println!(
        "{{\"requests\":{},\"log_requests\":{},\"log_records\":{},\"uevrec_records\":{},\
         \"log_bytes\":{},\"first_accepted_s\":{},\"last_accepted_s\":{}}}",
        c.requests,
        c.log_requests,
        c.log_records,
        c.uevrec_records,
        c.log_bytes,
        secs(c.first_accepted),
        secs(c.last_accepted)
    );
}

/// Whether 127.0.0.1:`port` can be bound as the receiver binds it (`SO_REUSEADDR`): the
/// receiver would retry a port in use for 10 s and then panic; this says why at once.
fn port_free(port: u16) -> Result<(), String> {
    if port == 0 {
        return Ok(());
    }
    let socket = tokio::net::TcpSocket::new_v4().map_err(|e| format!("a socket: {e}"))?;
    socket
        .set_reuseaddr(true)
        .map_err(|e| format!("SO_REUSEADDR: {e}"))?;
    socket
        .bind(std::net::SocketAddr::from(([127, 0, 0, 1], port)))
        .map_err(|e| {
            format!("cannot listen on 127.0.0.1:{port}: {e}; pick another --port (0: a free one)")
        })
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("otlp_receiver: {e}");
            return ExitCode::from(2);
        }
    };
    let (tx, events) = mpsc::channel();
    let mut signals = match signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("otlp_receiver: cannot handle SIGINT/SIGTERM: {e}");
            return ExitCode::from(1);
        }
    };
    let t = tx.clone();
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            let _ = t.send(Event::Stop);
        }
    });

    if let Err(e) = port_free(args.port) {
        eprintln!("otlp_receiver: {e}");
        return ExitCode::from(1);
    }
    let rx = Receiver::start_on(args.kind, args.port);
    rx.set_count_only(true);
    rx.set_mode(args.mode);
    let started = Instant::now();
    let kind = match args.kind {
        Kind::Grpc => "grpc",
        Kind::Http => "http",
    };
    println!("{{\"listening\":{},\"kind\":\"{kind}\"}}", rx.port());

    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            let line = line.trim();
            let event = if line == "stats" {
                Event::Stats
            } else if let Some(m) = line.strip_prefix("mode ") {
                match parse_mode(m.trim()) {
                    Ok(m) => Event::Mode(m),
                    Err(e) => {
                        eprintln!("otlp_receiver: {e}");
                        continue;
                    }
                }
            } else {
                Event::Stop
            };
            let stop = matches!(event, Event::Stop);
            if tx.send(event).is_err() || stop {
                return;
            }
        }
        // End of input (e.g. started with </dev/null): only a signal stops it now.
    });

    for event in events {
        match event {
            Event::Stats => print_counts(&rx, started),
            Event::Mode(m) => {
                rx.set_mode(m);
                print_counts(&rx, started);
            }
            Event::Stop => break,
        }
    }
    print_counts(&rx, started);
    ExitCode::SUCCESS
}
