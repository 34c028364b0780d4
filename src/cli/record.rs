//! `uevrec record` and `uevrec tail`: the session on this thread, the writer on another,
//! optional timer and status-line threads, then the summary.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::{
    EXIT_ERROR, EXIT_OK, EXIT_OUTPUT_CLOSED, RecordArgs, RecordingArgs, TailArgs, print_error,
    print_stderr,
};
use crate::pipeline::{BATCH_CAPACITY, BATCH_POOL, Batch, CHANNEL_BATCHES, touched_buffers};
use crate::session::{self, LiveStats, SessionConfig, Summary};
use crate::signals::SignalFlags;
use crate::sink::file::{FileOptions, RotatingFile, Rotation};
use crate::sink::stdout::StdoutSink;
use crate::sink::{Sink, SinkError, write_batches};

/// `uevrec record`.
pub fn record(args: RecordArgs) -> i32 {
    let file = args.output.as_deref().filter(|p| *p != Path::new("-"));
    let sink: Box<dyn Sink + Send> = match file {
        Some(path) => {
            let opts = FileOptions {
                mode: args.file_mode,
                follow_symlinks: args.follow_symlinks,
                rotation: args.rotate_size.map(|max_bytes| Rotation {
                    max_bytes,
                    keep: args.rotate_keep,
                }),
            };
            match RotatingFile::open(path, opts) {
                Ok(f) => Box::new(f),
                Err(e) => {
                    print_error(&e);
                    return EXIT_ERROR;
                }
            }
        }
        None => Box::new(StdoutSink::new(false)),
    };
    let status_line = file.is_some() && !args.rec.quiet && std::io::stderr().is_terminal();
    run(&args.rec, sink, status_line)
}

/// `uevrec tail`.
pub fn tail(args: TailArgs) -> i32 {
    run(&args.rec, Box::new(StdoutSink::new(args.pretty)), false)
}

fn session_config(rec: &RecordingArgs) -> SessionConfig {
    SessionConfig {
        tracefs: rec.events.tracefs.clone(),
        selectors: rec.events.all_selectors(),
        buffer_pages: rec.buffer_size,
        filter: rec.filter.clone(),
        pid: rec.pid,
        include_self: rec.include_self,
        rescan_interval: rec.rescan_interval,
        include_common: rec.common,
        max_records: rec.count,
    }
}

fn run(rec: &RecordingArgs, sink: Box<dyn Sink + Send>, status_line: bool) -> i32 {
    if let Err(e) = rec.events.tracefs() {
        print_error(&e);
        return EXIT_ERROR;
    }
    let flags = match SignalFlags::install() {
        Ok(f) => f,
        Err(e) => {
            print_error(&format_args!("installing signal handlers: {e}"));
            return EXIT_ERROR;
        }
    };
    let config = session_config(rec);
    let opts = PipelineOptions {
        duration: rec.duration,
        status_line,
    };
    let started = Instant::now();
    let out = run_pipeline(sink, &flags, &opts, |tx, recycle, stop, stats| {
        session::run(&config, tx, recycle, stop, stats)
    });
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

/// How [`run_pipeline`] runs.
#[derive(Debug, Default, Clone, Copy)]
pub struct PipelineOptions {
    /// Set `stop` after this long.
    pub duration: Option<Duration>,
    /// Print a status line on stderr about once a second.
    pub status_line: bool,
}

/// What [`run_pipeline`] ended with.
#[derive(Debug)]
pub struct PipelineOutcome<S, E> {
    /// The source's result.
    pub session: Result<S, E>,
    /// The writer's result.
    pub sink: Result<(), SinkError>,
}

/// Run `source` (the session) on this thread and the writer on another, with the timer
/// and status-line threads; returns both results once both ended.
pub fn run_pipeline<S, E, F>(
    mut sink: Box<dyn Sink + Send>,
    flags: &SignalFlags,
    opts: &PipelineOptions,
    source: F,
) -> PipelineOutcome<S, E>
where
    F: FnOnce(&Sender<Batch>, &Receiver<Vec<u8>>, &AtomicBool, &LiveStats) -> Result<S, E>,
{
    let (tx, rx) = crossbeam_channel::bounded::<Batch>(CHANNEL_BATCHES);
    let (recycle_tx, recycle_rx) = crossbeam_channel::bounded::<Vec<u8>>(BATCH_POOL);
    // The formatter's pool of line buffers (see crate::pipeline).
    for buffer in touched_buffers(BATCH_POOL, BATCH_CAPACITY) {
        let _ = recycle_tx.send(buffer);
    }
    // Dropped when the session is over: ends the timer and status threads.
    let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(0);
    let stats = LiveStats::default();
    let stop: &AtomicBool = &flags.stop;
    let reopen: &AtomicBool = &flags.reopen;
    thread::scope(|s| {
        let writer = thread::Builder::new()
            .name("uevrec-write".into())
            .spawn_scoped(s, move || {
                write_batches(rx, &recycle_tx, &mut *sink, stop, reopen).map(|_| ())
            })
            // As `Scope::spawn` does: without a thread there is nothing to fall back on.
            .expect("the OS refused to start the writer thread");
        if let Some(d) = opts.duration {
            let done = done_rx.clone();
            s.spawn(move || {
                if done.recv_timeout(d) == Err(RecvTimeoutError::Timeout) {
                    stop.store(true, Ordering::Release);
                }
            });
        }
        if opts.status_line {
            let (done, stats) = (done_rx.clone(), &stats);
            s.spawn(move || status_loop(&done, stats));
        }
        drop(done_rx);
        let session = source(&tx, &recycle_rx, stop, &stats);
        drop(tx);
        drop(done_tx);
        let sink = writer.join().unwrap_or_else(|_| {
            Err(SinkError::io(
                "writing to",
                "<output>",
                std::io::Error::other("writer thread panicked"),
            ))
        });
        PipelineOutcome { session, sink }
    })
}

/// `\r<rate> events/s, <total> total, <lost> lost` every second until `done` closes.
fn status_loop(done: &Receiver<()>, stats: &LiveStats) {
    let mut last = (Instant::now(), 0u64);
    while done.recv_timeout(Duration::from_secs(1)) == Err(RecvTimeoutError::Timeout) {
        let (now, total) = (Instant::now(), stats.records.load(Ordering::Relaxed));
        let rate = (total - last.1.min(total)) as f64 / now.duration_since(last.0).as_secs_f64();
        let lost = stats.lost.load(Ordering::Relaxed);
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[K{rate:.0} events/s, {total} total, {lost} lost"
        );
        let _ = err.flush();
        last = (now, total);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A sink shared with the test, failing after `ok` batches.
    struct Shared(Arc<Mutex<Vec<u8>>>, usize);

    impl Sink for Shared {
        fn write_lines(&mut self, lines: &[u8]) -> Result<(), SinkError> {
            if self.1 == 0 {
                return Err(SinkError::io(
                    "writing to",
                    "shared",
                    std::io::Error::from_raw_os_error(libc::ENOSPC),
                ));
            }
            self.1 -= 1;
            self.0.lock().unwrap().extend_from_slice(lines);
            Ok(())
        }
    }

    fn line_batch(i: u64) -> Batch {
        Batch {
            lines: format!("{{\"i\":{i}}}\n").into_bytes(),
            records: 1,
        }
    }

    #[test]
    fn all_batches_reach_the_sink_and_buffers_come_back() {
        let out = Arc::new(Mutex::new(Vec::new()));
        let flags = SignalFlags::default();
        let res = run_pipeline(
            Box::new(Shared(out.clone(), usize::MAX)),
            &flags,
            &PipelineOptions::default(),
            {
                |tx: &Sender<Batch>,
                 recycle: &Receiver<Vec<u8>>,
                 _stop: &AtomicBool,
                 stats: &LiveStats| {
                    // Every batch's buffer must come back once the writer is done
                    // with it, for the next batch to reuse.
                    let mut reused = 0;
                    for i in 0..100 {
                        tx.send(line_batch(i)).map_err(|_| "send failed")?;
                        stats.records.fetch_add(1, Ordering::Relaxed);
                        if recycle.recv_timeout(Duration::from_secs(10)).is_ok() {
                            reused += 1;
                        }
                    }
                    Ok::<_, &str>(reused)
                }
            },
        );
        assert!(res.sink.is_ok());
        assert_eq!(res.session, Ok(100), "every buffer came back for reuse");
        let expected: String = (0..100).map(|i| format!("{{\"i\":{i}}}\n")).collect();
        assert_eq!(
            String::from_utf8(out.lock().unwrap().clone()).unwrap(),
            expected
        );
    }

    #[test]
    fn sink_failure_stops_the_source() {
        let out = Arc::new(Mutex::new(Vec::new()));
        let flags = SignalFlags::default();
        let res = run_pipeline(
            Box::new(Shared(out.clone(), 3)),
            &flags,
            &PipelineOptions::default(),
            {
                |tx: &Sender<Batch>, _r: &Receiver<Vec<u8>>, stop: &AtomicBool, _s: &LiveStats| {
                    // Produce until told to stop or the channel is gone, like the session.
                    let mut i = 0;
                    while !stop.load(Ordering::Acquire) {
                        if tx.send(line_batch(i)).is_err() {
                            break;
                        }
                        i += 1;
                    }
                    Ok::<_, ()>(i)
                }
            },
        );
        assert!(flags.stop.load(Ordering::Acquire));
        let err = res.sink.unwrap_err();
        assert!(err.to_string().contains("shared"), "{err}");
        assert_eq!(
            out.lock().unwrap().as_slice(),
            b"{\"i\":0}\n{\"i\":1}\n{\"i\":2}\n"
        );
    }

    #[test]
    fn duration_sets_stop() {
        let flags = SignalFlags::default();
        let opts = PipelineOptions {
            duration: Some(Duration::from_millis(10)),
            status_line: false,
        };
        let res = run_pipeline(Box::new(Shared(Default::default(), 0)), &flags, &opts, {
            |_tx: &Sender<Batch>, _r: &Receiver<Vec<u8>>, stop: &AtomicBool, _s: &LiveStats| {
                // Fails (instead of hanging) when the duration never sets `stop`.
                let start = Instant::now();
                while !stop.load(Ordering::Acquire) {
                    if start.elapsed() > Duration::from_secs(10) {
                        return Err("--duration 10ms did not stop the session within 10 s");
                    }
                    thread::sleep(Duration::from_millis(1));
                }
                Ok(start.elapsed())
            }
        });
        let took = res.session.unwrap();
        assert!(took >= Duration::from_millis(10), "stopped after {took:?}");
        assert!(res.sink.is_ok());
    }
}
