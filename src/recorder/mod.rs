//! The one place that builds the recording pipeline, spawns its threads and joins them:
//! the session on the caller's thread (on the backend [`open`] opens), behind it the
//! formatter ([`formatter::run_parallel`]) and the writer, or the raw, flight or counting
//! ([`top`]) threads, as the [`Outputs`] say; plus a `--duration` timer and a status line.
//!
//! Every thread of those groups is spawned here (by one private `spawn`) and joined here:
//! the session never writes JSON, the CLI never spawns a thread, and flight and top hand
//! their bodies to this module. The threads and channels are drawn in
//! docs/architecture.md.
//!
//! Layers, lowest first: `open`, `top`.

pub mod open;
pub mod top;

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use uevrec_parsers::{ContextTracker, LineOptions, OutputFormat};

use crate::capture::session::{LiveStats, SessionConfig, SessionError, Summary};
use crate::capture::staging::written::Progress;
use crate::capture::staging::{STAGE_CAPACITY, STAGE_CHUNKS, StageSender, Staged, touched_buffers};
use crate::outputs::flight::{self, FlightOptions, FlightSummary};
use crate::outputs::raw::{self, Raw, RawError, RawSummary};
use crate::outputs::sink::{Sink, SinkError, write_batches};
use crate::pipeline::filter::Filter;
use crate::pipeline::formatter::{self, FormatterOptions};
use crate::pipeline::{BATCH_CAPACITY, Batch, CHANNEL_BATCHES, batch_pool};
use crate::system::sched;
use crate::system::signals::SignalFlags;

/// Everything a recording needs, validated (the CLI builds it from the flags).
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// What the session records and how.
    pub session: SessionConfig,
    /// The threads around it.
    pub pipeline: PipelineOptions,
}

/// Where a recording's records go: each variant is one shape of the pipeline, so no
/// combination needs checking at run time.
pub enum Outputs {
    /// Lines (`--format`: JSON lines or OTLP/JSON) into `sink`, and with `raw` the same
    /// records into a perf.data or trace.dat too (`record --raw FILE -o OUT`).
    Lines {
        /// Where the lines go.
        sink: Box<dyn Sink + Send>,
        /// The perf.data or trace.dat of `record --raw`, when asked for.
        raw: Option<Raw>,
    },
    /// Only the perf.data or trace.dat of `record --raw` (no lines).
    Raw(Raw),
    /// The flight recorder (`record --flight`): records kept in memory, dumped to files
    /// as the options say (SIGUSR1 needs [`SignalFlags::catch_dump`]).
    Flight(Box<FlightOptions>),
}

impl Outputs {
    /// Lines into `sink`, nothing else.
    pub fn lines(sink: Box<dyn Sink + Send>) -> Self {
        Outputs::Lines { sink, raw: None }
    }
}

/// A recording: a validated [`Config`] and its [`Outputs`].
pub struct Recorder {
    config: Config,
    outputs: Outputs,
}

impl Recorder {
    /// A recorder of `config` into `outputs`.
    pub fn new(config: Config, outputs: Outputs) -> Self {
        Recorder { config, outputs }
    }

    /// The `--where` filter, whose counts the summary reports.
    pub fn filter(&self) -> Option<Arc<Filter>> {
        self.config.pipeline.filter.clone()
    }

    /// Whether this is a flight recorder ([`Outputs::Flight`]).
    pub fn is_flight(&self) -> bool {
        matches!(self.outputs, Outputs::Flight(_))
    }

    /// Record until `flags.stop` (a signal, the duration timer, a sink error), `--count`
    /// or a closed output; returns once every thread has ended.
    pub fn run(self, flags: &SignalFlags) -> PipelineOutcome<Summary, SessionError> {
        let session = &self.config.session;
        let shape = (
            self.config.pipeline.format,
            self.config.pipeline.threads,
            self.config.pipeline.filter.clone(),
        );
        let mut raw_result = None;
        let mut flight_result = None;
        let mut outcome = match self.outputs {
            Outputs::Lines { sink, raw } => run_pipeline(
                sink,
                flags,
                &self.config.pipeline,
                |out, recycle, stop, stats| {
                    let behind = Downstream::Lines { raw, out, recycle };
                    let staged = stage(session, shape, behind, stop, stats);
                    raw_result = staged.raw;
                    staged.session
                },
            ),
            Outputs::Raw(raw) => run_watched(flags, &self.config.pipeline, |stop, stats| {
                let staged = stage(session, shape, Downstream::Raw(raw), stop, stats);
                raw_result = staged.raw;
                staged.session
            }),
            Outputs::Flight(opts) => run_watched(flags, &self.config.pipeline, |stop, stats| {
                let behind = Downstream::Flight(opts, &flags.dump);
                let staged = stage(session, shape, behind, stop, stats);
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
    let behind = Downstream::Lines {
        raw: None,
        out,
        recycle,
    };
    stage(config, (format, 1, None), behind, stop, stats).session
}

/// Start `body` on a thread of `scope` named `name`, at the workers' raised nice value
/// ([`sched::raise_worker_thread`]): the one spawn of every thread group this module
/// assembles.
fn spawn<'scope, T, F>(
    scope: &'scope Scope<'scope, '_>,
    name: &str,
    body: F,
) -> io::Result<ScopedJoinHandle<'scope, T>>
where
    T: Send + 'scope,
    F: FnOnce() -> T + Send + 'scope,
{
    thread::Builder::new()
        .name(name.into())
        .spawn_scoped(scope, move || {
            sched::raise_worker_thread();
            body()
        })
}

/// [`spawn`], setting `gone` when `body` returns or unwinds (so the session, waiting on
/// a thread downstream of it, ends instead of waiting for ever).
fn spawn_downstream<'scope, T, F>(
    scope: &'scope Scope<'scope, '_>,
    name: &str,
    gone: &'scope AtomicBool,
    body: F,
) -> io::Result<ScopedJoinHandle<'scope, T>>
where
    T: Send + 'scope,
    F: FnOnce() -> T + Send + 'scope,
{
    spawn(scope, name, move || {
        let _gone = SetOnDrop(gone);
        body()
    })
}

/// The thread's result; its panic goes on in the joining thread.
fn join<T>(handle: ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// Sets the flag when dropped: also when the thread unwinds.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// What takes the staged chunks behind the session: one of the pipeline's shapes.
enum Downstream<'a> {
    /// The formatter (batches of lines out on `out`, empty buffers back on `recycle`),
    /// behind the raw writer when there is one.
    Lines {
        raw: Option<Raw>,
        out: &'a Sender<Batch>,
        recycle: &'a Receiver<Vec<u8>>,
    },
    /// The raw writer alone (perf.data or trace.dat).
    Raw(Raw),
    /// The flight recorder, with the SIGUSR1 flag.
    Flight(Box<FlightOptions>, &'a AtomicBool),
}

/// What [`stage`] ended with.
struct Staging {
    session: Result<Summary, SessionError>,
    raw: Option<Result<RawSummary, RawError>>,
    flight: Option<FlightSummary>,
}

/// The threads [`stage`] started behind the session, joined in this order.
#[derive(Default)]
struct Crew<'scope> {
    raw: Option<ScopedJoinHandle<'scope, Result<RawSummary, RawError>>>,
    formatter: Option<ScopedJoinHandle<'scope, Result<(), crate::capture::staging::Closed>>>,
    flight: Option<ScopedJoinHandle<'scope, FlightSummary>>,
    dump: Option<ScopedJoinHandle<'scope, FlightSummary>>,
}

impl Crew<'_> {
    /// Join every thread (they end once the staging channel is closed).
    fn join(self) -> (Option<Result<RawSummary, RawError>>, Option<FlightSummary>) {
        let raw = self.raw.map(join);
        // The formatter's own result is the session's business (a closed output).
        if let Some(f) = self.formatter {
            let _ = join(f);
        }
        let kept = self.flight.map(join);
        let flight = match (kept, self.dump.map(join)) {
            (Some(kept), Some(dumped)) => Some(FlightSummary {
                dumps: dumped.dumps,
                failed: dumped.failed,
                ..kept
            }),
            (kept, _) => kept,
        };
        (raw, flight)
    }
}

/// The session on this thread (on the backend [`open`] opens), with behind it what
/// `behind` says, each on a thread of its own: the raw writer (perf.data) and/or the
/// formatter (batches of `format` out, empty buffers back; `threads` workers of it:
/// [`formatter::run_parallel`]), or the flight recorder and its dump thread. With both
/// raw and lines, the raw writer hands the chunks on to the formatter.
fn stage(
    config: &SessionConfig,
    (format, threads, filter): (OutputFormat, usize, Option<Arc<Filter>>),
    behind: Downstream<'_>,
    stop: &AtomicBool,
    stats: &LiveStats,
) -> Staging {
    let ((stage_tx, stage_rx), (chunk_tx, chunk_rx)) = chunk_pool();
    let opts = LineOptions {
        include_common: config.include_common,
        endian: uevrec_parsers::Endian::Little,
    };
    let context = config.context;
    let stacks = stack_options(config);
    // A named instance's page journal, when the writer writes the lines (open.rs).
    let written = match &behind {
        Downstream::Lines { .. } => open::writer_marks(config),
        _ => None,
    };
    let progress = written.clone().map(Progress::new);
    let downstream_gone = AtomicBool::new(false);
    let session_info = config.schema.then(|| {
        let mut info = crate::pipeline::describe::session_info(config);
        info.thinning = filter.as_ref().map(|f| f.describe()).unwrap_or_default();
        info
    });
    thread::scope(|scope| {
        let gone = &downstream_gone;
        // Started before the first attach, so the self-exclusion filter names them.
        let started = (|| -> io::Result<Crew<'_>> {
            let mut crew = Crew::default();
            let (lines, input, back) = match behind {
                Downstream::Raw(raw) => {
                    crew.raw = Some(spawn_downstream(scope, "uevrec-raw", gone, move || {
                        raw::run_raw(raw, stage_rx, raw::Next::Recycle(chunk_tx))
                    })?);
                    return Ok(crew);
                }
                Downstream::Flight(mut flight_opts, dump_flag) => {
                    // The dumps are written as the lines would be.
                    (flight_opts.format, flight_opts.line_options) = (format, opts);
                    flight_opts.session = session_info.clone();
                    flight_opts.context = context;
                    flight_opts.stacks = stacks;
                    flight_opts.filter = filter.clone();
                    let (dump_tx, dump_rx) = flight::request_channel();
                    let flight_opts = Arc::new(*flight_opts);
                    let dump_opts = Arc::clone(&flight_opts);
                    crew.dump = Some(spawn(scope, "uevrec-dump", move || {
                        flight::dump::run(dump_rx, &dump_opts, format_fed)
                    })?);
                    crew.flight =
                        Some(spawn_downstream(scope, "uevrec-flight", gone, move || {
                            flight::run(stage_rx, chunk_tx, &flight_opts, dump_flag, dump_tx)
                        })?);
                    return Ok(crew);
                }
                Downstream::Lines {
                    raw: Some(raw),
                    out,
                    recycle,
                } => {
                    let (tx, rx) = crossbeam_channel::bounded(STAGE_CHUNKS);
                    crew.raw = Some(spawn_downstream(scope, "uevrec-raw", gone, move || {
                        raw::run_raw(raw, stage_rx, raw::Next::Forward(tx))
                    })?);
                    ((out, recycle), rx, chunk_tx)
                }
                Downstream::Lines {
                    raw: None,
                    out,
                    recycle,
                } => ((out, recycle), stage_rx, chunk_tx),
            };
            let (out, recycle) = lines;
            let info = session_info.as_ref();
            // The workers too start before the first attach: wait for them.
            let (ready_tx, ready_rx) = crossbeam_channel::bounded::<()>(1);
            crew.formatter = Some(spawn_downstream(scope, "uevrec-format", gone, move || {
                let lines = FormatterOptions {
                    opts,
                    format,
                    session: info,
                    context: context.then(ContextTracker::new),
                    schema: false,
                    filter,
                    stacks,
                    stack_maps: None,
                    progress,
                };
                let started = move || {
                    let _ = ready_tx.send(());
                };
                formatter::run_parallel(input, back, out, recycle, lines, threads, started)
            })?);
            let _ = ready_rx.recv();
            Ok(crew)
        })();
        let crew = match started {
            Ok(crew) => crew,
            // The threads that did start end as their input closes; the scope joins
            // them.
            Err(e) => {
                drop(stage_tx);
                return Staging {
                    session: Err(SessionError::Thread(e)),
                    raw: None,
                    flight: None,
                };
            }
        };
        let stage = StageSender::new(stage_tx, chunk_rx, gone);
        // Real-time when permitted, so the rings are drained in time on a busy machine
        // (the threads behind it run at the workers' raised nice value: `spawn`).
        let priority = sched::raise_drain_thread();
        let result = open::run_session(config, &stage, stop, stats, written);
        drop(priority);
        // Closing the staging channel lets the threads finish and return.
        drop(stage);
        let (raw, flight) = crew.join();
        Staging {
            session: result,
            raw,
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

/// A thread of [`stage_into`]: its name and its body.
struct Job<F> {
    /// The thread's name (at most 15 bytes show in `/proc`).
    name: &'static str,
    /// What it runs.
    body: F,
}

/// The session on this thread and `consume` on a thread of its own (in place of the
/// formatter: `uevrec top` counts instead of writing lines), fed the staged messages and
/// returning each chunk buffer on the pool sender it is given; and `view` on another,
/// given a flag set once the session ended (`uevrec top`'s display). Both start before
/// the first attach, so the self-exclusion filter names them; when `consume` returns
/// (or panics) the session ends, and when `view` does, `stop` is set. Returns the
/// session's result and the two threads' (`None` for a thread that did not run: the OS
/// refused a thread).
#[allow(clippy::type_complexity)]
fn stage_into<R, F, W, V>(
    config: &SessionConfig,
    stop: &AtomicBool,
    stats: &LiveStats,
    consume: Job<F>,
    view: Job<V>,
) -> (Result<Summary, SessionError>, Option<R>, Option<W>)
where
    R: Send,
    F: FnOnce(Receiver<Staged>, Sender<Vec<u8>>) -> R + Send,
    W: Send,
    V: FnOnce(&AtomicBool) -> W + Send,
{
    let ((stage_tx, stage_rx), (chunk_tx, chunk_rx)) = chunk_pool();
    let (gone, done) = (AtomicBool::new(false), AtomicBool::new(false));
    thread::scope(|scope| {
        let (gone, done) = (&gone, &done);
        let body = view.body;
        // Also when the view panics: the session must not run on unseen.
        let shown = spawn(scope, view.name, move || {
            let _stop = SetOnDrop(stop);
            body(done)
        });
        let shown = match shown {
            Ok(t) => t,
            Err(e) => return (Err(SessionError::Thread(e)), None, None),
        };
        let body = consume.body;
        let consumer =
            spawn_downstream(scope, consume.name, gone, move || body(stage_rx, chunk_tx));
        let (result, consumed) = match consumer {
            Ok(consumer) => {
                let stage = StageSender::new(stage_tx, chunk_rx, gone);
                let priority = sched::raise_drain_thread();
                let result = open::run_session(config, &stage, stop, stats, None);
                drop(priority);
                drop(stage);
                (result, Some(join(consumer)))
            }
            Err(e) => (Err(SessionError::Thread(e)), None),
        };
        done.store(true, Ordering::Release);
        (result, consumed, Some(join(shown)))
    })
}

/// Chunks and batches in flight between [`format_fed`]'s feeder, formatter and caller.
const FED_DEPTH: usize = 4;

/// Format what `feed` stages (on a thread of its own, taking chunk buffers from the pool
/// receiver it is given) with the ordinary formatter (crate::pipeline::formatter, on
/// another, as `lines` says), each batch of lines passed to `write` on this thread: the
/// flight recorder's dumps ([`flight::dump::FormatFed`]), so a dump's lines are the
/// lines `record -o` writes. Returns the records written; `write`'s first error ends it
/// (the formatter's next send fails, it ends, and the feeder after it).
pub fn format_fed(
    lines: FormatterOptions<'_>,
    feed: flight::dump::Feed<'_>,
    write: &mut dyn FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<u64> {
    let (stage_tx, stage_rx) = crossbeam_channel::bounded(FED_DEPTH);
    let (chunk_tx, chunk_rx) = crossbeam_channel::bounded(2 * FED_DEPTH + 2);
    let (out_tx, out_rx) = crossbeam_channel::bounded::<Batch>(FED_DEPTH);
    let (recycle_tx, recycle_rx) = crossbeam_channel::bounded(2 * FED_DEPTH);
    thread::scope(|scope| {
        // Owned here, so that an error below drops it before the scope waits for the
        // formatter.
        let out_rx = out_rx;
        spawn(scope, "uevrec-dumpfmt", move || {
            formatter::run(stage_rx, chunk_tx, &out_tx, &recycle_rx, lines)
        })?;
        spawn(scope, "uevrec-dumpfeed", move || feed(&stage_tx, &chunk_rx))?;
        let mut records = 0;
        while let Ok(batch) = out_rx.recv() {
            write(&batch.lines)?;
            records += batch.records;
            let _ = recycle_tx.try_send(batch.lines);
        }
        Ok(records)
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
    /// Formatter workers (`--threads`; 0 and 1: one formatter thread). Text is
    /// formatted on one whatever this says ([`formatter::run_parallel`]).
    pub threads: usize,
    /// `--where`: which records the lines keep (`None`: all). A perf.data of `--raw`
    /// keeps every record whatever this says.
    pub filter: Option<Arc<Filter>>,
}

/// The default of `--threads`: half the online CPUs, at least 1 and at most 8 (the
/// session's drain thread and the writer need CPUs too; past 8 workers the writer, not
/// the formatting, limits a file's rate).
pub fn default_threads() -> usize {
    let cpus = crate::capture::perf::online_cpus().map_or(1, |c| c.len());
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
        let writer = spawn(s, "uevrec-write", move || {
            write_batches(rx, &recycle_tx, &mut *sink, stop, reopen).map(|_| ())
        });
        let writer = match writer {
            Ok(w) => Ok(w),
            Err(e) => {
                // Without a writer the lines have nowhere to go: the source finds its
                // output closed at once (the receiver went with the closure) and ends.
                stop.store(true, Ordering::Release);
                Err(SinkError::io(
                    "starting the writer thread for",
                    "<output>",
                    e,
                ))
            }
        };
        let done_tx = spawn_watchers(s, opts, stop, &stats);
        let session = source(&tx, &recycle_rx, stop, &stats);
        drop(tx);
        drop(done_tx);
        let sink = writer.and_then(|w| {
            w.join().unwrap_or_else(|_| {
                Err(SinkError::io(
                    "writing to",
                    "<output>",
                    std::io::Error::other("writer thread panicked"),
                ))
            })
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

/// How the live stacks of `config` are named (`None`: no `-g`).
pub fn stack_options(config: &SessionConfig) -> Option<crate::pipeline::stacks::StackOptions> {
    config
        .stacks
        .map(|s| crate::pipeline::stacks::StackOptions {
            symbolize: config.symbolize,
            offline: false,
            max_frames: usize::from(match s.max_stack {
                0 => crate::capture::stacks::max_stack_sysctl().unwrap_or(127),
                n => n,
            }),
            ids: config.stack_ids,
            warm: true,
            kernel_frames: s.kernel,
        })
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
            marks: None,
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
