//! Many events at once: registers N user_events and writes each one once.
//!
//! ```text
//! many_events [--count N] [--prefix P] [START OPTIONS]
//! ```
//! START OPTIONS: `--timeout-secs S` (default 60), `--settle-ms MS`, `--start-file F`: when to
//! start writing once enabled (see `uevrec_samples::StartArgs`).
//! Registers `P_0 u32 seq` … `P_<N-1> u32 seq` (default `uevrec_many_0` … `uevrec_many_1999`)
//! on one `user_events_data` descriptor, waits until a recorder has enabled every one of
//! them, then writes event `P_i` once with `seq` = i. A recorder needs one descriptor per
//! event and CPU, so this is the workload for its open-file limit. Reports one
//! `{"registered":..}` line per event, one `{"event":NAME,"seq":i,"fields":{"seq":i}}` per
//! record the kernel took, then `{"done":P,"count":N,"written":W,"disabled":D,
//! "register_ms":..,"wait_ms":..,"write_ms":..}` (`disabled`: writes refused because the
//! recorder had left, EBADF). Exit status 2 if the events were not all enabled within
//! the timeout.

use std::time::Instant;

use clap::Parser;
use serde_json::json;
use uevrec_samples::{Flags, StartArgs, UserEvents, Written, announce, command, fail, report};

#[derive(Parser)]
#[command(about = "Register N user_events and write each once")]
struct Args {
    /// How many events to register.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..=32768))]
    count: u32,
    /// Event names are `PREFIX_<i>`.
    #[arg(long, default_value = "uevrec_many")]
    prefix: String,
    #[command(flatten)]
    start: StartArgs,
}

fn main() {
    let args = Args::parse();
    let events = UserEvents::open().unwrap_or_else(|e| fail(e));
    let t0 = Instant::now();
    let registered: Vec<_> = (0..args.count)
        .map(|i| {
            let cmd = command(&format!("{}_{i} u32 seq", args.prefix));
            let event = events
                .register(&cmd, Flags::NONE)
                .unwrap_or_else(|e| fail(format!("registering {}: {e}", cmd.name)));
            announce(&event, Flags::NONE);
            event
        })
        .collect();
    let register_ms = t0.elapsed().as_millis() as u64;

    let t1 = Instant::now();
    let refs: Vec<_> = registered.iter().collect();
    args.start.wait(&args.prefix, &refs);
    let wait_ms = t1.elapsed().as_millis() as u64;

    let t2 = Instant::now();
    let (mut written, mut disabled) = (0u64, 0u64);
    for (i, event) in (0u32..).zip(&registered) {
        match event.write(&i.to_ne_bytes()) {
            Ok(Written::Yes) => {
                written += 1;
                report(&json!({"event": event.command().name, "seq": i, "fields": {"seq": i}}));
            }
            Ok(Written::Disabled) => disabled += 1,
            Err(e) => fail(e),
        }
    }
    report(&json!({
        "done": args.prefix,
        "count": args.count,
        "written": written,
        "disabled": disabled,
        "register_ms": register_ms,
        "wait_ms": wait_ms,
        "write_ms": t2.elapsed().as_millis() as u64,
    }));
}
