//! Shows the enable-bit protocol: writes only while a recorder has the event enabled, and
//! reports every change of the bit.
//!
//! ```text
//! enable_bit [--name NAME] [--bit B] [--interval-ms MS] [--timeout-secs S]
//! ```
//! Registers `NAME u64 seq` with enable bit B (default 31), then polls the bit every MS
//! milliseconds (default 1), writing one record per poll while it is set. It exits once
//! the bit has been set and cleared again (the recorder came and went), or after the
//! timeout. Report lines: `{"registered":..}`, `{"enabled":true|false,"after_ms":..}` per
//! change, then `{"done":NAME,"written":N,"disabled_writes":D,"polls_while_off":P,
//! "saw_on":bool,"saw_off_after_on":bool}`. Exit status 2 on timeout.

use std::io::IoSlice;
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::json;
use uevrec_samples::{Flags, UserEvents, Written, announce, command, fail, report};

#[derive(Parser)]
#[command(about = "Write a user event only while its enable bit is set")]
struct Args {
    /// Event name.
    #[arg(long, default_value = "uevrs_enable")]
    name: String,
    /// Enable bit (0..=31).
    #[arg(long, default_value_t = 31)]
    bit: u8,
    /// Pause between polls of the enable bit.
    #[arg(long, default_value_t = 1)]
    interval_ms: u64,
    /// Give up (status 2) when the bit has not come and gone by then.
    #[arg(long, default_value_t = 120)]
    timeout_secs: u64,
}

fn main() {
    let args = Args::parse();
    let events = UserEvents::open().unwrap_or_else(|e| fail(e));
    let cmd = command(&format!("{} u64 seq", args.name));
    let event = events
        .register_bit(&cmd, Flags::NONE, args.bit)
        .unwrap_or_else(|e| fail(e));
    announce(&event, Flags::NONE);

    let start = Instant::now();
    let deadline = start + Duration::from_secs(args.timeout_secs);
    let (mut written, mut disabled_writes, mut polls_while_off) = (0u64, 0u64, 0u64);
    let (mut saw_on, mut saw_off_after_on) = (false, false);
    let mut last = false;
    while Instant::now() < deadline {
        let on = event.is_enabled();
        if on != last {
            report(&json!({"enabled": on, "after_ms": start.elapsed().as_millis() as u64}));
            last = on;
            saw_on |= on;
            if saw_on && !on {
                saw_off_after_on = true;
                break;
            }
        }
        if on {
            match event.write_vectored(&[IoSlice::new(&written.to_ne_bytes())]) {
                Ok(Written::Yes) => written += 1,
                Ok(Written::Disabled) => disabled_writes += 1,
                Err(e) => fail(e),
            }
        } else {
            polls_while_off += 1;
        }
        std::thread::sleep(Duration::from_millis(args.interval_ms));
    }
    report(&json!({
        "done": args.name,
        "written": written,
        "disabled_writes": disabled_writes,
        "polls_while_off": polls_while_off,
        "saw_on": saw_on,
        "saw_off_after_on": saw_off_after_on,
    }));
    if !saw_off_after_on {
        std::process::exit(2);
    }
}
