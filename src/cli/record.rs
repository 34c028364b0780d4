//! `uevrec record` and `uevrec tail`: flags → a validated [`Config`] and a sink, the
//! [`Recorder`] runs them, then the summary and the exit status.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use super::{
    EXIT_ERROR, EXIT_OK, EXIT_OUTPUT_CLOSED, RecordArgs, RecordingArgs, TailArgs, print_error,
    print_stderr,
};
use crate::recorder::{Config, PipelineOptions, Recorder};
use crate::session::{SessionConfig, Summary};
use crate::signals::SignalFlags;
use crate::sink::stdout::StdoutSink;
use crate::sink::{Sink, SinkError};
use crate::tracefs::TracefsError;

/// `uevrec record`.
pub fn record(args: RecordArgs) -> i32 {
    let sink = match args.output.open() {
        Ok(s) => s,
        Err(e) => {
            print_error(&e);
            return EXIT_ERROR;
        }
    };
    let status_line =
        args.output.file().is_some() && !args.rec.quiet && std::io::stderr().is_terminal();
    run(&args.rec, sink, status_line)
}

/// `uevrec tail`.
pub fn tail(args: TailArgs) -> i32 {
    run(&args.rec, Box::new(StdoutSink::new(args.pretty)), false)
}

/// The flags as a [`Config`]; tracefs is found (and checked) here, once.
fn config(rec: &RecordingArgs, status_line: bool) -> Result<Config, TracefsError> {
    let tracefs = rec.events.tracefs()?;
    let session = SessionConfig {
        tracefs: Some(tracefs),
        selectors: rec.events.all_selectors(),
        backend: rec.backend,
        buffer_pages: rec.buffer_size,
        filter: rec.filter.clone(),
        pid: rec.pid,
        include_self: rec.include_self,
        rescan_interval: rec.rescan_interval,
        include_common: rec.common,
        max_records: rec.count,
    };
    let pipeline = PipelineOptions {
        duration: rec.duration,
        status_line,
    };
    Ok(Config { session, pipeline })
}

fn run(rec: &RecordingArgs, sink: Box<dyn Sink + Send>, status_line: bool) -> i32 {
    let config = match config(rec, status_line) {
        Ok(c) => c,
        Err(e) => {
            print_error(&e);
            return EXIT_ERROR;
        }
    };
    let flags = match SignalFlags::install() {
        Ok(f) => f,
        Err(e) => {
            print_error(&format_args!("installing signal handlers: {e}"));
            return EXIT_ERROR;
        }
    };
    let started = Instant::now();
    let out = Recorder::new(config, sink).run(&flags);
    if status_line {
        print_stderr(format_args!("\r\x1b[K"));
    }
    match out.sink {
        Err(SinkError::Closed) => return EXIT_OUTPUT_CLOSED,
        Err(e) => {
            if let Ok(summary) = &out.session {
                print_summary(summary, started.elapsed(), rec.quiet);
            }
            print_error(&e);
            return EXIT_ERROR;
        }
        Ok(()) => {}
    }
    match out.session {
        Ok(summary) => {
            print_summary(&summary, started.elapsed(), rec.quiet);
            EXIT_OK
        }
        Err(e) => {
            print_error(&e);
            EXIT_ERROR
        }
    }
}

/// The end-of-run summary on stderr.
fn print_summary(summary: &Summary, elapsed: Duration, quiet: bool) {
    if quiet {
        return;
    }
    let mut text = format!(
        "uevrec: {} records, {} lost, in {:.1} s\n",
        summary.records,
        summary.lost,
        elapsed.as_secs_f64()
    );
    for (event, n) in &summary.records_per_event {
        text.push_str(&format!("  {n:>12}  {event}\n"));
    }
    for (cpu, n) in summary.lost_per_cpu.iter().filter(|(_, n)| **n > 0) {
        text.push_str(&format!("  {n:>12}  lost on CPU {cpu}\n"));
    }
    let _ = std::io::stderr().write_all(text.as_bytes());
}
