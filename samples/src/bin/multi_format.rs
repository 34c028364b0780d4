//! Two formats under one event name with `USER_EVENT_REG_MULTI_FORMAT` (Linux 6.10+).
//!
//! ```text
//! multi_format [--name NAME] [--only 1|2] [--count N] [START OPTIONS]
//! ```
//! START OPTIONS: `--timeout-secs S` (default 60), `--settle-ms MS`, `--start-file F`: when to
//! start writing once enabled (see `uevrec_samples::StartArgs`).
//! Version 1 is `NAME u32 a; u64 b`, version 2 is `NAME u32 a; __rel_loc char[] note`.
//! Each becomes its own tracepoint `user_events_multi:NAME.<hex id>`. The producer waits
//! until every registered version is enabled, then writes N records of each (default 2).
//! `--only` registers just one version (to show that a new format of an old name gets a
//! new tracepoint). Report lines: one `{"registered":..}` per version, then
//! `{"event":..,"version":V,"seq":..,"fields":{..}}` per record, then `{"done":..}`.
//! Exit status 2 if not every version was enabled within the timeout.

use clap::Parser;
use serde_json::json;
use uevrec_samples::{
    Event, Flags, PayloadValue as V, StartArgs, UserEvents, Written, announce, command,
    expected_fields, fail, report,
};

#[derive(Parser)]
#[command(about = "Register two formats of one user event name and write both")]
struct Args {
    /// Event base name.
    #[arg(long, default_value = "uevrs_multi")]
    name: String,
    /// Register only this version (1 or 2).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=2))]
    only: Option<u8>,
    /// Records per version.
    #[arg(long, default_value_t = 2)]
    count: u64,
    #[command(flatten)]
    start: StartArgs,
}

fn main() {
    let args = Args::parse();
    let events = UserEvents::open().unwrap_or_else(|e| fail(e));
    let versions: Vec<u8> = args.only.map_or(vec![1, 2], |v| vec![v]);
    let registered: Vec<(u8, Event<'_>)> = versions
        .iter()
        .map(|&v| {
            let fields = if v == 1 {
                "u32 a; u64 b"
            } else {
                "u32 a; __rel_loc char[] note"
            };
            let cmd = command(&format!("{} {fields}", args.name));
            let event = events
                .register(&cmd, Flags::MULTI_FORMAT)
                .unwrap_or_else(|e| fail(format!("{e} (MULTI_FORMAT needs Linux 6.10 or later)")));
            announce(&event, Flags::MULTI_FORMAT);
            (v, event)
        })
        .collect();
    let refs: Vec<&Event<'_>> = registered.iter().map(|(_, e)| e).collect();
    args.start.wait(&args.name, &refs);
    let mut written = 0u64;
    for seq in 0..args.count {
        for (version, event) in &registered {
            let note = format!("version {version} record {seq}");
            let values = if *version == 1 {
                vec![V::Uint(seq), V::Uint(0x1122_3344_5566_7788 + seq)]
            } else {
                vec![V::Uint(seq), V::Str(&note)]
            };
            match event.emit(&values) {
                Ok(Written::Yes) => written += 1,
                Ok(Written::Disabled) => fail("the recorder went away while writing"),
                Err(e) => fail(e),
            }
            let fields = expected_fields(event.command(), &values);
            report(&json!({"event": args.name, "version": version, "seq": seq, "fields": fields}));
        }
    }
    report(&json!({"done": args.name, "written": written}));
}
