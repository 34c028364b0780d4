//! Load generator: N records as fast as possible from T threads sharing one registration.
//!
//! ```text
//! rate [--name NAME] [--events N] [--threads T] [--rename COMM] [START OPTIONS]
//! ```
//! `--rename COMM`: once started, rename the process (its main thread, by writing
//! `/proc/thread-self/comm`, which is `prctl(PR_SET_NAME)`) before the writer threads
//! start, so the recorder sees a rename mid-run (tests/vm/context.rs).
//! START OPTIONS: `--timeout-secs S` (default 60), `--settle-ms MS`, `--start-file F`: when to
//! start writing once enabled (see `uevrec_samples::StartArgs`). `--exit-file F`: after the
//! done line, stay alive until F exists (at most the timeout).
//! Registers `NAME u32 thread; u64 seq`, waits until a recorder enables it, then thread
//! `t` writes records `seq` = 0, 1, ... of its share of N with no pause (no allocation per
//! record: the fields go to the kernel as iovecs pointing at two integers). Reports
//! `{"registered":..}`, then `{"done":NAME,"written":W,"disabled":D,"threads":T,
//! "per_thread":[..],"elapsed_ns":..,"per_sec":..}`; `written` counts the writes the kernel
//! accepted, `disabled` those refused because the recorder had left (EBADF).
//! Exit status 2 if nobody enabled the event within the timeout.

use std::io::IoSlice;
use std::time::Instant;

use clap::Parser;
use serde_json::json;
use uevrec_samples::{
    Event, Flags, StartArgs, UserEvents, Written, announce, command, fail, report, wait_until,
};

#[derive(Parser)]
#[command(about = "Write N user_events records as fast as possible from T threads")]
struct Args {
    /// Event name.
    #[arg(long, default_value = "uevrs_rate")]
    name: String,
    /// Total records to write.
    #[arg(long, default_value_t = 100_000)]
    events: u64,
    /// Writer threads.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    threads: u32,
    /// Rename the process to this once started, before writing.
    #[arg(long)]
    rename: Option<String>,
    /// After the done line, stay alive (registered) until this file exists, at most the
    /// start timeout: for tests that look the process up while it still runs.
    #[arg(long)]
    exit_file: Option<std::path::PathBuf>,
    #[command(flatten)]
    start: StartArgs,
}

/// Counts of one writer thread.
#[derive(Default, Clone, Copy)]
struct Counts {
    written: u64,
    disabled: u64,
}

fn main() {
    let args = Args::parse();
    let events = UserEvents::open().unwrap_or_else(|e| fail(e));
    let cmd = command(&format!("{} u32 thread; u64 seq", args.name));
    let event = events
        .register(&cmd, Flags::NONE)
        .unwrap_or_else(|e| fail(e));
    announce(&event, Flags::NONE);
    args.start.wait(&args.name, &[&event]);
    if let Some(comm) = &args.rename {
        std::fs::write("/proc/thread-self/comm", comm).unwrap_or_else(|e| fail(e));
    }

    let threads = u64::from(args.threads);
    let start = Instant::now();
    let per_thread: Vec<Counts> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let share = args.events / threads + u64::from(t < args.events % threads);
                let event = &event;
                s.spawn(move || write_share(event, t as u32, share))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| fail("a writer thread panicked"))
            })
            .collect()
    });
    let elapsed = start.elapsed();
    let written: u64 = per_thread.iter().map(|c| c.written).sum();
    let disabled: u64 = per_thread.iter().map(|c| c.disabled).sum();
    report(&json!({
        "done": args.name,
        "written": written,
        "disabled": disabled,
        "threads": args.threads,
        "per_thread": per_thread.iter().map(|c| c.written).collect::<Vec<_>>(),
        "elapsed_ns": elapsed.as_nanos() as u64,
        "per_sec": (written as f64 / elapsed.as_secs_f64().max(1e-9)).round() as u64,
    }));
    if let Some(file) = &args.exit_file {
        let timeout = std::time::Duration::from_secs(args.start.timeout_secs);
        wait_until(timeout, || file.exists());
    }
}

/// Write `share` records `(thread, seq)` for `seq` in `0..share`.
fn write_share(event: &Event<'_>, thread: u32, share: u64) -> Counts {
    let mut counts = Counts::default();
    let thread_bytes = thread.to_ne_bytes();
    for seq in 0..share {
        let seq_bytes = seq.to_ne_bytes();
        match event.write_vectored(&[IoSlice::new(&thread_bytes), IoSlice::new(&seq_bytes)]) {
            Ok(Written::Yes) => counts.written += 1,
            Ok(Written::Disabled) => counts.disabled += 1,
            Err(e) => fail(e),
        }
    }
    counts
}
