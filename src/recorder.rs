//! The one place that builds the recording pipeline and joins its threads:
//!
//! ```text
//!  session (the caller's thread, crate::session): drain the rings → staged entries
//!    ──staging channel (a fixed pool of StagedChunks, crate::pipeline)──▶
//!  formatter thread (`uevrec-format`, crate::formatter): staged entries → JSON lines
//!    ──bounded channel of Batches (a fixed pool of line buffers)──▶
//!  writer thread (`uevrec-write`, crate::sink::write_batches) ──▶ the sink
//! ```
//!
//! plus a timer thread for `--duration` and a status-line thread. The session thread runs
//! real-time and the formatter and writer at a raised nice value when permitted
//! ([`crate::sched`]: so the rings are drained in time on a busy machine). [`Recorder`] takes a
//! [`Config`] (validated by the CLI) and a [`Sink`]; the session never writes JSON and
//! the CLI never spawns a thread. The writer and formatter start before the session's
//! first attach, so the self-exclusion filter names them.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use uevrec_parsers::LineOptions;

use crate::formatter;
use crate::pipeline::{
    BATCH_CAPACITY, BATCH_POOL, Batch, CHANNEL_BATCHES, STAGE_CAPACITY, STAGE_CHUNKS, StageSender,
    touched_buffers,
};
use crate::sched;
use crate::session::{self, LiveStats, SessionConfig, SessionError, Summary};
use crate::signals::SignalFlags;
use crate::sink::{Sink, SinkError, write_batches};

/// Everything a recording needs, validated (the CLI builds it from the flags).
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// What the session records and how.
    pub session: SessionConfig,
    /// The threads around it.
    pub pipeline: PipelineOptions,
}

/// A recording: a validated [`Config`] and the [`Sink`] the lines go to.
pub struct Recorder {
    config: Config,
    sink: Box<dyn Sink + Send>,
}

impl Recorder {
    /// A recorder of `config` into `sink`.
    pub fn new(config: Config, sink: Box<dyn Sink + Send>) -> Self {
        Recorder { config, sink }
    }

    /// Record until `flags.stop` (a signal, the duration timer, a sink error), `--count`
    /// or a closed output; returns once every thread has ended.
    pub fn run(self, flags: &SignalFlags) -> PipelineOutcome<Summary, SessionError> {
        let session = &self.config.session;
        run_pipeline(
            self.sink,
            flags,
            &self.config.pipeline,
            |out, recycle, stop, stats| stage_and_format(session, out, recycle, stop, stats),
        )
    }
}

/// The session on this thread and the formatter on another: records `config` into
/// batches of JSON lines sent on `out` (blocking send = back-pressure), taking empty
/// line buffers back from `recycle` when available. Returns the session's summary once
/// it stopped (`stop`, `max_records`, or `out` closed) and the formatter has sent every
/// line; setup errors (before the first attach) return `Err`.
pub fn stage_and_format(
    config: &SessionConfig,
    out: &Sender<Batch>,
    recycle: &Receiver<Vec<u8>>,
    stop: &AtomicBool,
    stats: &LiveStats,
) -> Result<Summary, SessionError> {
    // The chunk pool: every buffer allocated and touched now (see crate::pipeline).
    // Only the formatter keeps a sender, so a gone formatter ends the session's waits.
    let (stage_tx, stage_rx) = crossbeam_channel::bounded(STAGE_CHUNKS);
    let (chunk_tx, chunk_rx) = crossbeam_channel::bounded(STAGE_CHUNKS);
    for buffer in touched_buffers(STAGE_CHUNKS, STAGE_CAPACITY) {
        let _ = chunk_tx.send(buffer);
    }
    let opts = LineOptions {
        include_common: config.include_common,
        big_endian: false,
    };
    let formatter_gone = AtomicBool::new(false);
    thread::scope(|scope| {
        // Started before the first attach, so the self-exclusion filter names it.
        let formatter = thread::Builder::new()
            .name("uevrec-format".into())
            .spawn_scoped(scope, || {
                sched::raise_worker_thread();
                let r = formatter::run(stage_rx, chunk_tx, out, recycle, opts);
                formatter_gone.store(true, Ordering::Release);
                r
            })
            .map_err(SessionError::Thread)?;
        let stage = StageSender::new(stage_tx, chunk_rx, &formatter_gone);
        let priority = sched::raise_drain_thread();
        let result = session::run(config, &stage, stop, stats);
        drop(priority);
        // Closing the staging channel lets the formatter finish the lines and return.
        drop(stage);
        if let Err(panic) = formatter.join() {
            std::panic::resume_unwind(panic);
        }
        result
    })
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

/// Run `source` (the session and formatter: [`stage_and_format`]) on this thread and the
/// writer on another, with the timer and status-line threads; returns both results once
/// both ended.
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
                sched::raise_worker_thread();
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
