//! An application for the flight recorder's test: rounds of ordinary records, each
//! ended by an "error" record (the trigger).
//!
//! ```text
//! flight_app [--name NAME] [--count N] [--rounds R] [--cpu C] [START OPTIONS]
//! ```
//! START OPTIONS: `--timeout-secs S` (default 60), `--settle-ms MS`, `--start-file F`: when to
//! start writing once enabled (see `uevrec_samples::StartArgs`).
//! Registers `NAME u64 seq` and `NAME_error u64 seq`, pins itself to CPU C (default 0:
//! its records then reach one ring, in the order written), waits until a recorder
//! enables both, then per round r writes N records `NAME` with `seq` = r·N … r·N + N − 1
//! and one `NAME_error` whose `seq` is the round's last. Reports `{"registered":..}` per
//! event, `{"round":r,"first":F,"last":L,"written":W,"error_written":bool}` per round, then
//! `{"done":NAME,"written":W,"disabled":D}` (`written`: records the kernel accepted,
//! error records included; `disabled`: refused because no recorder had them enabled).
//! Exit status 2 if nobody enabled the events within the timeout.

use clap::Parser;
use serde_json::json;
use uevrec_samples::{
    Event, Flags, StartArgs, UserEvents, Written, announce, command, fail, report,
};

#[derive(Parser)]
#[command(about = "Rounds of records, each ended by an error record (a flight-recorder trigger)")]
struct Args {
    /// Event name (the trigger is NAME_error).
    #[arg(long, default_value = "uevrs_flight")]
    name: String,
    /// Records per round, before its error record.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    count: u64,
    /// Rounds.
    #[arg(long, default_value_t = 1)]
    rounds: u64,
    /// The CPU to run on.
    #[arg(long, default_value_t = 0)]
    cpu: usize,
    #[command(flatten)]
    start: StartArgs,
}

/// Run on `cpu` only.
fn pin(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes a bit inside `set` (CPU_SET bounds-checks `cpu`).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; 0 = this thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if rc != 0 {
        fail(format!(
            "pinning to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        ));
    }
}

/// Write `seq` to `event`; whether the kernel took it.
fn write(event: &Event<'_>, seq: u64) -> bool {
    match event.write(&seq.to_ne_bytes()) {
        Ok(Written::Yes) => true,
        Ok(Written::Disabled) => false,
        Err(e) => fail(e),
    }
}

fn main() {
    let args = Args::parse();
    pin(args.cpu);
    let events = UserEvents::open().unwrap_or_else(|e| fail(e));
    let error_name = format!("{}_error", args.name);
    let register = |name: &str| {
        let event = events
            .register(&command(&format!("{name} u64 seq")), Flags::NONE)
            .unwrap_or_else(|e| fail(e));
        announce(&event, Flags::NONE);
        event
    };
    let (event, error) = (register(&args.name), register(&error_name));
    args.start.wait(&args.name, &[&event, &error]);
    let (mut written, mut disabled) = (0u64, 0u64);
    for round in 0..args.rounds {
        let first = round * args.count;
        let last = first + args.count - 1;
        let mut in_round = 0;
        for seq in first..=last {
            if write(&event, seq) {
                in_round += 1;
            } else {
                disabled += 1;
            }
        }
        let error_written = write(&error, last);
        written += in_round + u64::from(error_written);
        disabled += u64::from(!error_written);
        report(&json!({"round": round, "first": first, "last": last,
                       "written": in_round, "error_written": error_written}));
    }
    report(&json!({"done": args.name, "written": written, "disabled": disabled}));
}
