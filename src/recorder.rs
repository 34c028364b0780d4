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
//! plus a timer thread for `--duration` and a status-line thread. With `--threads N` ≥ 2
//! (JSON lines) the formatter thread only numbers the chunks and hands them out to N
//! workers (`uevrec-format0` …), whose batches a reorder thread (`uevrec-order`) puts
//! back in order before the writer ([`formatter::run_parallel`]); the line pool then
//! holds [`crate::pipeline::batch_pool`]`(N)` buffers. With `--drain-threads N` ≥ 2 the
//! session drains busy perf rings on N threads per pass (`uevrec-drain`,
//! crate::session). With `record --raw`
//! (crate::raw) a raw thread (`uevrec-raw`) takes the staged chunks first and writes
//! the perf.data; it then hands them on to the formatter (with `-o`) or back to the
//! chunk pool (raw only: no formatter, no writer). With `record --flight` (crate::flight)
//! a flight thread (`uevrec-flight`) takes the chunks instead of the formatter and keeps
//! them in memory; its own dump thread writes the dumps (no writer). [`Recorder`] takes a [`Config`]
//! (validated by the CLI), a [`Sink`] and/or a [`Raw`] output; the session never writes
//! JSON and the CLI never spawns a thread. The writer, formatter and raw threads start
//! before the session's first attach, so the self-exclusion filter names them. The
//! session thread runs real-time and the other threads at a raised nice value when
//! permitted ([`crate::sched`]: so the rings are drained in time on a busy machine).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use uevrec_parsers::{ContextTracker, LineOptions, OutputFormat};

use crate::flight::{self, FlightOptions, FlightSummary};
use crate::formatter::{self, Lines};
use crate::pipeline::{
    BATCH_CAPACITY, Batch, CHANNEL_BATCHES, STAGE_CAPACITY, STAGE_CHUNKS, StageSender, Staged,
    batch_pool, touched_buffers,
};
use crate::raw::{self, Raw, RawError, RawSummary};
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

/// A recording: a validated [`Config`], the [`Sink`] the lines go to and/or the
/// perf.data or trace.dat of `record --raw` ([`Raw`]).
pub struct Recorder {
    config: Config,
    sink: Option<Box<dyn Sink + Send>>,
    raw: Option<Raw>,
    flight: Option<FlightOptions>,
}

impl Recorder {
    /// A recorder of `config` into `sink`.
    pub fn new(config: Config, sink: Box<dyn Sink + Send>) -> Self {
        Recorder {
            config,
            sink: Some(sink),
            raw: None,
            flight: None,
        }
    }

    /// A recorder of `config` into the perf.data `raw` only (no JSON lines).
    pub fn raw_only(config: Config, raw: Raw) -> Self {
        Recorder {
            config,
            sink: None,
            raw: Some(raw),
            flight: None,
        }
    }

    /// A flight recorder of `config` (`record --flight`): records kept in memory, dumped
    /// to files as `flight` says (SIGUSR1 needs [`SignalFlags::catch_dump`]).
    pub fn flight(config: Config, flight: FlightOptions) -> Self {
        Recorder {
            config,
            sink: None,
            raw: None,
            flight: Some(flight),
        }
    }

    /// Also write the perf.data `raw` (the same records as the lines).
    pub fn with_raw(mut self, raw: Raw) -> Self {
        self.raw = Some(raw);
        self
    }

    /// Whether this is a flight recorder ([`Recorder::flight`]).
    pub fn is_flight(&self) -> bool {
        self.flight.is_some()
    }

    /// Record until `flags.stop` (a signal, the duration timer, a sink error), `--count`
    /// or a closed output; returns once every thread has ended.
    pub fn run(self, flags: &SignalFlags) -> PipelineOutcome<Summary, SessionError> {
        let session = &self.config.session;
        let format = self.config.pipeline.format;
        let threads = self.config.pipeline.threads;
        let raw = self.raw;
        let mut raw_result = None;
        let mut flight_result = None;
        let mut outcome = match self.sink {
            Some(sink) => run_pipeline(
                sink,
                flags,
                &self.config.pipeline,
                |out, recycle, stop, stats| {
                    let consumers = Consumers {
                        raw,
                        lines: Some((out, recycle)),
                        flight: None,
                    };
                    let staged = stage(session, (format, threads), consumers, stop, stats);
                    raw_result = staged.raw;
                    staged.session
                },
            ),
            None => run_watched(flags, &self.config.pipeline, |stop, stats| {
                let consumers = Consumers {
                    raw,
                    lines: None,
                    flight: self.flight.map(|f| (f, &*flags.dump)),
                };
                let staged = stage(session, (format, threads), consumers, stop, stats);
                raw_result = staged.raw;
                flight_result = staged.flight;
                staged.session
            }),
        };
        outcome.raw = raw_result;
        outcome.flight = flight_result;
        outcome
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
    stage_and_format_as(config, OutputFormat::JsonLines, out, recycle, stop, stats)
}

/// [`stage_and_format`] writing `format` (JSON lines or OTLP/JSON).
pub fn stage_and_format_as(
    config: &SessionConfig,
    format: OutputFormat,
    out: &Sender<Batch>,
    recycle: &Receiver<Vec<u8>>,
    stop: &AtomicBool,
    stats: &LiveStats,
) -> Result<Summary, SessionError> {
    let consumers = Consumers {
        raw: None,
        lines: Some((out, recycle)),
        flight: None,
    };
    stage(config, (format, 1), consumers, stop, stats).session
}

/// The raw writer's result, when there is one.
type RawResult = Option<Result<RawSummary, RawError>>;

/// What takes the staged chunks behind the session.
struct Consumers<'a> {
    /// The raw writer (perf.data or trace.dat).
    raw: Option<Raw>,
    /// The formatter: batches of lines out, empty buffers back.
    lines: Option<(&'a Sender<Batch>, &'a Receiver<Vec<u8>>)>,
    /// The flight recorder, with the SIGUSR1 flag (instead of the other two).
    flight: Option<(FlightOptions, &'a AtomicBool)>,
}

/// What [`stage`] ended with.
struct Staging {
    session: Result<Summary, SessionError>,
    raw: RawResult,
    flight: Option<FlightSummary>,
}

/// The session on this thread, with behind it the raw writer (`raw`: perf.data) and/or
/// the formatter (`lines`: batches of `format` out, empty buffers back), or the flight
/// recorder, each on a thread of its own; with both raw and lines, the raw writer hands
/// the chunks on to the formatter (`threads` workers of it: [`formatter::run_parallel`]).
fn stage(
    config: &SessionConfig,
    (format, threads): (OutputFormat, usize),
    consumers: Consumers<'_>,
    stop: &AtomicBool,
    stats: &LiveStats,
) -> Staging {
    let Consumers { raw, lines, flight } = consumers;
    let failed = |e| Staging {
        session: Err(SessionError::Thread(e)),
        raw: None,
        flight: None,
    };
    let ((stage_tx, stage_rx), (chunk_tx, chunk_rx)) = chunk_pool();
    let opts = LineOptions {
        include_common: config.include_common,
        big_endian: false,
    };
    let context = config.context;
    let downstream_gone = AtomicBool::new(false);
    let session_info = config.schema.then(|| crate::describe::session_info(config));
    thread::scope(|scope| {
        // Started before the first attach, so the self-exclusion filter names them.
        let (mut format_rx, mut chunk_back) = (Some(stage_rx), Some(chunk_tx));
        let raw_thread = match raw {
            Some(raw) => {
                let input = format_rx.take();
                let next = if lines.is_some() {
                    let (tx, rx) = crossbeam_channel::bounded(STAGE_CHUNKS);
                    format_rx = Some(rx);
                    raw::Next::Forward(tx)
                } else {
                    raw::Next::Recycle(chunk_back.take().expect("the pool sender is here"))
                };
                let gone = &downstream_gone;
                let spawned = thread::Builder::new()
                    .name("uevrec-raw".into())
                    .spawn_scoped(scope, move || {
                        sched::raise_worker_thread();
                        let r =
                            raw::run_raw(raw, input.expect("the staging receiver is here"), next);
                        gone.store(true, Ordering::Release);
                        r
                    });
                match spawned {
                    Ok(t) => Some(t),
                    Err(e) => return failed(e),
                }
            }
            None => None,
        };
        let flight = match flight {
            Some((mut flight_opts, dump_flag)) => {
                // The dumps are written as the lines would be.
                (flight_opts.format, flight_opts.line_options) = (format, opts);
                flight_opts.session = session_info.clone();
                flight_opts.context = context;
                let rx = format_rx.take().expect("no raw output with --flight");
                let back = chunk_back.take().expect("no raw output with --flight");
                let gone = &downstream_gone;
                let spawned = thread::Builder::new()
                    .name("uevrec-flight".into())
                    .spawn_scoped(scope, move || {
                        sched::raise_worker_thread();
                        let r = flight::run(rx, back, &flight_opts, dump_flag);
                        gone.store(true, Ordering::Release);
                        r
                    });
                match spawned {
                    Ok(t) => Some(t),
                    Err(e) => return failed(e),
                }
            }
            _ => None,
        };
        let formatter = match (lines, format_rx, chunk_back) {
            (Some((out, recycle)), Some(rx), Some(back)) => {
                let gone = &downstream_gone;
                let info = session_info.as_ref();
                // The workers too start before the first attach: wait for them.
                let (ready_tx, ready_rx) = crossbeam_channel::bounded::<()>(1);
                let spawned = thread::Builder::new()
                    .name("uevrec-format".into())
                    .spawn_scoped(scope, move || {
                        sched::raise_worker_thread();
                        let lines = Lines {
                            opts,
                            format,
                            session: info,
                            context: context.then(ContextTracker::new),
                            schema: false,
                        };
                        let started = move || {
                            let _ = ready_tx.send(());
                        };
                        let r = formatter::run_parallel(
                            rx, back, out, recycle, lines, threads, started,
                        );
                        gone.store(true, Ordering::Release);
                        r
                    });
                match spawned {
                    Ok(t) => {
                        let _ = ready_rx.recv();
                        Some(t)
                    }
                    Err(e) => return failed(e),
                }
            }
            _ => None,
        };
        let stage = StageSender::new(stage_tx, chunk_rx, &downstream_gone);
        let priority = sched::raise_drain_thread();
        let result = session::run(config, &stage, stop, stats);
        drop(priority);
        // Closing the staging channel lets the threads finish and return.
        drop(stage);
        let raw_result =
            raw_thread.map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        if let Some(Err(panic)) = formatter.map(|t| t.join()) {
            std::panic::resume_unwind(panic);
        }
        let flight = flight.map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        Staging {
            session: result,
            raw: raw_result,
            flight,
        }
    })
}

/// The staging channel and the chunk pool: every buffer allocated and touched now (see
/// crate::pipeline). Only the last thread keeps a pool sender, so a gone thread ends the
/// session's waits.
#[allow(clippy::type_complexity)]
fn chunk_pool() -> (
    (Sender<Staged>, Receiver<Staged>),
    (Sender<Vec<u8>>, Receiver<Vec<u8>>),
) {
    let stage = crossbeam_channel::bounded(STAGE_CHUNKS);
    let (chunk_tx, chunk_rx) = crossbeam_channel::bounded(STAGE_CHUNKS);
    for buffer in touched_buffers(STAGE_CHUNKS, STAGE_CAPACITY) {
        let _ = chunk_tx.send(buffer);
    }
    (stage, (chunk_tx, chunk_rx))
}

/// The session on this thread and `consume` on a thread of its own named `name` (in
/// place of the formatter: `uevrec top` counts instead of writing lines), fed the staged
/// messages and returning each chunk buffer on the pool sender it is given. The thread
/// starts before the first attach, so the self-exclusion filter names it; when it
/// returns (or panics) the session ends. Returns the session's result and `consume`'s
/// (`None` when the thread could not start).
pub fn stage_into<R, F>(
    config: &SessionConfig,
    name: &str,
    stop: &AtomicBool,
    stats: &LiveStats,
    consume: F,
) -> (Result<Summary, SessionError>, Option<R>)
where
    R: Send,
    F: FnOnce(Receiver<Staged>, Sender<Vec<u8>>) -> R + Send,
{
    /// Sets the flag when dropped: also when the thread unwinds.
    struct SetOnDrop<'a>(&'a AtomicBool);
    impl Drop for SetOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }
    let ((stage_tx, stage_rx), (chunk_tx, chunk_rx)) = chunk_pool();
    let gone = AtomicBool::new(false);
    thread::scope(|scope| {
        let gone_flag = &gone;
        let spawned = thread::Builder::new()
            .name(name.into())
            .spawn_scoped(scope, move || {
                let _gone = SetOnDrop(gone_flag);
                sched::raise_worker_thread();
                consume(stage_rx, chunk_tx)
            });
        let consumer = match spawned {
            Ok(t) => t,
            Err(e) => return (Err(SessionError::Thread(e)), None),
        };
        let stage = StageSender::new(stage_tx, chunk_rx, &gone);
        let priority = sched::raise_drain_thread();
        let result = session::run(config, &stage, stop, stats);
        drop(priority);
        drop(stage);
        let consumed = consumer
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (result, Some(consumed))
    })
}

/// How [`run_pipeline`] runs.
#[derive(Debug, Default, Clone)]
pub struct PipelineOptions {
    /// Set `stop` after this long.
    pub duration: Option<Duration>,
    /// Print a status line on stderr about once a second.
    pub status_line: bool,
    /// What the lines are (`--format`).
    pub format: OutputFormat,
    /// The live counters, when someone else reads them too (the metrics endpoint);
    /// otherwise the pipeline keeps its own.
    pub stats: Option<std::sync::Arc<LiveStats>>,
    /// Formatter workers (`--threads`; 0 and 1: one formatter thread). OTLP is
    /// formatted on one whatever this says ([`formatter::run_parallel`]).
    pub threads: usize,
}

/// The default of `--threads`: half the online CPUs, at least 1 and at most 8 (the
/// session's drain thread and the writer need CPUs too; past 8 workers the writer, not
/// the formatting, limits a file's rate).
pub fn default_threads() -> usize {
    let cpus = crate::perf::online_cpus().map_or(1, |c| c.len());
    (cpus / 2).clamp(1, 8)
}

/// What [`run_pipeline`] ended with.
#[derive(Debug)]
pub struct PipelineOutcome<S, E> {
    /// The source's result.
    pub session: Result<S, E>,
    /// The writer's result.
    pub sink: Result<(), SinkError>,
    /// The raw (perf.data) writer's result, when there was one.
    pub raw: Option<Result<RawSummary, RawError>>,
    /// What the flight recorder did, when there was one.
    pub flight: Option<FlightSummary>,
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
    let pool = batch_pool(opts.threads);
    let (recycle_tx, recycle_rx) = crossbeam_channel::bounded::<Vec<u8>>(pool);
    // The formatter's pool of line buffers (see crate::pipeline).
    for buffer in touched_buffers(pool, BATCH_CAPACITY) {
        let _ = recycle_tx.send(buffer);
    }
    let stats = opts.stats.clone().unwrap_or_default();
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
        let done_tx = spawn_watchers(s, opts, stop, &stats);
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
        PipelineOutcome {
            session,
            sink,
            raw: None,
            flight: None,
        }
    })
}

/// [`run_pipeline`] without a writer: `source` (the session with the raw writer) on
/// this thread, with the timer and status-line threads.
fn run_watched<S, E, F>(
    flags: &SignalFlags,
    opts: &PipelineOptions,
    source: F,
) -> PipelineOutcome<S, E>
where
    F: FnOnce(&AtomicBool, &LiveStats) -> Result<S, E>,
{
    let stats = opts.stats.clone().unwrap_or_default();
    let stop: &AtomicBool = &flags.stop;
    thread::scope(|s| {
        let done_tx = spawn_watchers(s, opts, stop, &stats);
        let session = source(stop, &stats);
        drop(done_tx);
        PipelineOutcome {
            session,
            sink: Ok(()),
            raw: None,
            flight: None,
        }
    })
}

/// The `--duration` timer and the status line (as `opts` asks), running until the
/// returned sender is dropped.
fn spawn_watchers<'scope, 'env>(
    s: &'scope thread::Scope<'scope, 'env>,
    opts: &PipelineOptions,
    stop: &'env AtomicBool,
    stats: &'env LiveStats,
) -> Sender<()> {
    let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(0);
    if let Some(d) = opts.duration {
        let done = done_rx.clone();
        s.spawn(move || {
            if done.recv_timeout(d) == Err(RecvTimeoutError::Timeout) {
                stop.store(true, Ordering::Release);
            }
        });
    }
    if opts.status_line {
        s.spawn(move || status_loop(&done_rx, stats));
    }
    done_tx
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
            ..Default::default()
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
