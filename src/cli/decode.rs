//! `uevrec decode [FILE|-]`: a perf.data (file mode, or pipe mode from `perf record -o -`)
//! → the JSON lines `uevrec record` writes, through the same sinks.
//!
//! The decoding is `uevrec_parsers::to_lines` (pure); this module does the I/O.
//! A perf.data (or trace.dat) file is mapped (memmap2, `MADV_SEQUENTIAL`) and read in
//! place: records waiting for their time order are held as offsets into the mapping, not
//! copied, and the pages before the oldest record still held are let go
//! (`MADV_DONTNEED`, [`Behind`]), so memory does not grow with the file. Standard input is
//! read in 1 MiB pieces into the stream decoder (records waiting for their time order are
//! copied; a file-mode perf.data or a trace.dat on standard input is read whole first:
//! that layout needs its end before its data). Lines go to standard output or `-o FILE`
//! (the same file options as
//! `record`), in runs of 256 KiB.
//!
//! With `--threads N` ≥ 2 (JSON lines) the decoder hands its records, ordered, to a
//! [`RecordSink`] that stages them as the recorder's session does, for N formatter workers
//! ([`formatter::run_parallel`]), and a writer thread writes their lines: the same bytes
//! as one thread, in the same order. A record of a mapped (or wholly read) input is
//! staged by where it lies ([`StagedChunk::push_record_at`]) and the workers read it from
//! the mapping, so the decoding thread copies no trace entry; a page thread maps the
//! input ahead of the reader and lets it go [`PAGE_LAG`] behind (BENCHMARKS.md §20).
//!
//! Time: `HEADER_CLOCK_DATA` (written by `perf record -k CLOCK_MONOTONIC`) gives the
//! wall-clock time of each sample; without it `time` is `null` and stderr says so once.
//! Exit status: 0; 3 ([`EXIT_SALVAGED`]) when the input is cut short — truncated, or a
//! `record --raw` perf.data that was never finished (killed, crashed), or a trace.dat
//! that ends inside its CPU data (whole pages, and a cut page's complete events, are
//! read) — and every whole record before the cut was decoded (the output ends with a
//! `{"uevrec":"notice","what":"truncated",…}` line, stderr says what is missing and
//! where); 1 when the input is corrupt (everything before the problem is written; stderr
//! says at which byte and why), or the output failed; 141 when standard output was
//! closed by its reader.

use std::fs::File;
use std::io::{IsTerminal, Read};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use uevrec_parsers::perf_data::header::parse_magic;
use uevrec_parsers::perf_data::{PerfData, PerfDataError, writer};
use uevrec_parsers::to_lines::perf_data::{LineDecoder, Step, StreamDecoder};
use uevrec_parsers::to_lines::{DEFAULT_ORDER_BYTES, DecodeOptions, DecodeStats};
/// The trace.dat reader as this module names it, its file-to-lines driver
/// ([`uevrec_parsers::to_lines::trace_dat`]) as `trace_dat::lines`.
mod trace_dat {
    pub(super) use uevrec_parsers::to_lines::trace_dat as lines;
    pub(super) use uevrec_parsers::trace_dat::*;
}

use super::output::OutputArgs;
use super::{EXIT_ERROR, EXIT_OK, EXIT_OUTPUT_CLOSED, print_error, print_stderr, values};
use crate::selector::Selector;
use std::sync::atomic::AtomicBool;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_channel::{Receiver, Sender};
use uevrec_parsers::perf_data::records::RawRecord;
use uevrec_parsers::{
    ContextTracker, ContextUpdate, LineOptions, OutputFormat, PreparedFormat, RecordSink,
    RecordStamp,
};

use crate::formatter::{self, Lines};
use crate::pipeline::{
    BATCH_CAPACITY, Batch, CHANNEL_BATCHES, FormatSource, STAGE_BYTES, STAGE_CAPACITY,
    STAGE_CHUNKS, StageSender, Staged, StagedChunk, batch_pool, touched_buffers,
};
use crate::sink::{Sink, SinkError, write_batches};

/// `uevrec decode`.
#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// The perf.data file (file or pipe mode); standard input if absent or "-". A
    /// truncated or never-finished (killed) perf.data or trace.dat is salvaged: every whole record, then a
    /// {"uevrec":"notice","what":"truncated"} line, and exit status 3.
    #[arg(value_name = "FILE|-")]
    pub input: Option<PathBuf>,
    /// Events to decode, SYSTEM:EVENT with globs (repeatable; default: every event).
    #[arg(short = 'e', long = "event", value_name = "SELECTOR")]
    pub events: Vec<Selector>,
    /// Add the common fields (common_type, common_flags …) as "common":{…} (with
    /// --format otlp: the attribute `linux.tracepoint.common`).
    #[arg(long)]
    pub common: bool,
    /// No schema lines: without it each event's {"uevrec":"schema"} line (its format
    /// from the file) comes before its first record, and each EventHeader metadata
    /// block's when first seen.
    #[arg(long)]
    pub no_schema: bool,
    /// Leave out who wrote each record: no "comm", "cgroup", "container" or "unit"
    /// keys (otherwise taken from the perf.data's COMM, FORK, EXIT and CGROUP records and
    /// the samples' cgroup ids, where the file has them; docs/json-lines.md, "Context").
    #[arg(long)]
    pub no_context: bool,
    /// Output format: json (uevrec's JSON lines) or otlp (OTLP/JSON requests).
    #[arg(long, value_enum, default_value_t = super::output::Format::Json)]
    pub format: super::output::Format,
    /// Stop after this many records.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Records held to put the CPUs' records in time order (e.g. 64M); past it the
    /// older half is written at once.
    #[arg(long, value_name = "SIZE", default_value_t = DEFAULT_ORDER_BYTES as u64,
          value_parser = values::parse_positive_size)]
    pub order_buffer: u64,
    /// No summary on standard error (errors and notes on the input are still printed).
    #[arg(short, long)]
    pub quiet: bool,
    /// Threads: with N ≥ 2 this thread reads and orders the records, N formatter workers
    /// write the lines (JSON lines; --format otlp on one) and a thread of their own writes
    /// them out; the output is the same, byte for byte, whatever N. Default: half the
    /// online CPUs, at least 1, at most 8.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub output: OutputArgs,
}

/// Bytes read at a time from standard input.
pub const READ_CHUNK: usize = 1 << 20;

/// How the input ended.
struct Outcome {
    stats: DecodeStats,
    /// Where and why decoding stopped early.
    stopped: Option<String>,
    /// Problems that did not stop decoding, besides those in `stats` (trace.dat).
    problems: Vec<String>,
    /// Why `time` is null, when the input says (trace.dat: no wall-clock anchor).
    time_note: Option<String>,
    /// The file has `HEADER_CLOCK_DATA`.
    clock_data: bool,
    /// The input is cut short or was never finished: what is missing and where (every
    /// whole record before was decoded): the `truncated` notice, exit status
    /// [`EXIT_SALVAGED`].
    truncated: Option<String>,
}

/// Exit status of `decode` when the input was cut short (truncated, or a recording that
/// was never finished: killed, crashed, a full disk) and every whole record it holds was
/// decoded: the output ends with a `{"uevrec":"notice","what":"truncated",…}` line and
/// standard error says what is missing and where.
pub const EXIT_SALVAGED: i32 = 3;

/// The message of the `truncated` notice for a perf.data: `unfinished` (a `record --raw`
/// file killed before its end), the sections lying past the end (`cut`), the record
/// decoding stopped at (`stopped`), `len` bytes in all.
fn truncation(
    unfinished: bool,
    cut: &[PerfDataError],
    stopped: Option<&PerfDataError>,
    len: u64,
) -> Option<String> {
    let stopped = stopped.filter(|e| matches!(e, PerfDataError::Truncated { .. }));
    if !unfinished && cut.is_empty() && stopped.is_none() {
        return None;
    }
    let mut parts = Vec::new();
    if unfinished {
        parts.push(
            "the recording was never finished (uevrec record --raw was killed or crashed): \
             its trailer (event names, sample times) is missing, and whatever the recorder \
             had not yet written"
                .to_string(),
        );
    }
    for e in cut {
        parts.push(e.to_string());
    }
    let end = match stopped {
        Some(PerfDataError::Truncated { at, need, have, .. }) => {
            parts.push(format!(
                "the input ends inside the record at byte {at} ({have} of its {need} bytes present)"
            ));
            *at
        }
        _ => {
            parts.push(format!(
                "the input ends at byte {len}, after a whole record"
            ));
            len
        }
    };
    Some(format!(
        "{}; every whole record before byte {end} was decoded",
        parts.join("; ")
    ))
}

/// The sink behind a `FnMut(&[u8]) -> bool`, keeping its first error.
struct Output {
    sink: Box<dyn Sink + Send>,
    error: Option<SinkError>,
}

/// Buffers of lines between the decoding thread and the writer (`--threads` ≥ 2): those
/// in the channel, the writer's and the one being filled.
const WRITE_POOL: usize = CHANNEL_BATCHES + 2;

/// The default of `decode --threads`: that of `record` ([`crate::recorder::default_threads`]).
fn default_threads() -> usize {
    crate::recorder::default_threads()
}

/// Run `decode(flush, par)` with `flush` writing to `output`'s sink: on this thread, or
/// (`threads` ≥ 2) handing copies of the lines to a writer thread
/// ([`crate::sink::write_batches`], a fixed pool of [`crate::pipeline::batch_pool`]
/// buffers) so that the writes (the kernel's copy into the file: a third to a half of the
/// time on tmpfs) overlap the decoding; `par` then lets formatter workers fill those
/// buffers instead ([`staged`]). The same bytes in the same order either way.
fn with_output<T>(
    output: &mut Output,
    threads: usize,
    decode: impl FnOnce(&mut Flush<'_>, Option<&Par<'_>>) -> T,
) -> T {
    if threads < 2 {
        let mut flush = |lines: &[u8]| output.write(lines);
        return decode(&mut flush, None);
    }
    let pool = WRITE_POOL.max(batch_pool(threads));
    let (tx, rx) = crossbeam_channel::bounded::<Batch>(CHANNEL_BATCHES);
    let (recycle_tx, recycle_rx) = crossbeam_channel::bounded::<Vec<u8>>(pool);
    for buffer in touched_buffers(pool, BATCH_CAPACITY) {
        let _ = recycle_tx.send(buffer);
    }
    let sink = &mut output.sink;
    let (result, written) = std::thread::scope(|s| {
        let writer = std::thread::Builder::new()
            .name("uevrec-write".into())
            .spawn_scoped(s, move || {
                let (stop, reopen) = (AtomicBool::new(false), AtomicBool::new(false));
                write_batches(rx, &recycle_tx, &mut **sink, &stop, &reopen)
            });
        let writer = match writer {
            Ok(w) => w,
            Err(e) => {
                let why = format!("starting the writer thread ({e}); --threads 1 needs none");
                let err = SinkError::io("writing to", "<output>", std::io::Error::other(why));
                return (decode(&mut |_: &[u8]| false, None), Err(err));
            }
        };
        let mut tx = Some(tx);
        let result = {
            let par = tx.as_ref().map(|out| Par {
                out,
                recycle: &recycle_rx,
                workers: threads,
            });
            let mut flush = |lines: &[u8]| {
                let Some(out) = &tx else { return false };
                if lines.is_empty() {
                    return true;
                }
                // Waits only while the writer holds every buffer (the back-pressure).
                let Ok(mut buffer) = recycle_rx.recv() else {
                    return false;
                };
                buffer.clear();
                buffer.extend_from_slice(lines);
                out.send(Batch {
                    lines: buffer,
                    records: 0,
                })
                .is_ok()
            };
            decode(&mut flush, par.as_ref())
        };
        tx.take();
        let written = writer.join().unwrap_or_else(|_| {
            Err(SinkError::io(
                "writing to",
                "<output>",
                std::io::Error::other("writer thread panicked"),
            ))
        });
        (result, written.map(|_| ()))
    });
    if let Err(e) = written {
        output.error.get_or_insert(e);
    }
    result
}

impl Output {
    fn write(&mut self, lines: &[u8]) -> bool {
        if self.error.is_some() {
            return false;
        }
        match self.sink.write_lines(lines) {
            Ok(()) => true,
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }
}

/// `uevrec decode`.
pub fn decode(args: DecodeArgs) -> i32 {
    let sink = match args.output.open() {
        Ok(s) => s,
        Err(e) => {
            print_error(&e);
            return EXIT_ERROR;
        }
    };
    let mut output = Output { sink, error: None };
    let selectors = &args.events;
    let select = |system: &str, event: &str| {
        selectors.is_empty() || selectors.iter().any(|s| s.matches(system, event))
    };
    let opts = DecodeOptions {
        include_common: args.common,
        order_bytes: usize::try_from(args.order_buffer).unwrap_or(usize::MAX),
        max_records: args.count,
        format: args.format.into(),
        schema: !args.no_schema,
        context: !args.no_context,
    };
    let input = args.input.as_deref().filter(|p| *p != Path::new("-"));
    let name = input.map_or_else(|| "<stdin>".to_string(), |p| p.display().to_string());
    let started = Instant::now();
    let threads = args.threads.map_or_else(default_threads, usize::from);
    let outcome = with_output(&mut output, threads, |flush, par| {
        // OTLP requests batch records across the whole input: formatted on one thread.
        let par = par.filter(|_| opts.format == OutputFormat::JsonLines);
        let outcome = match input {
            Some(path) => decode_file(path, opts, &select, flush, par),
            None => decode_stdin(opts, &select, flush, par),
        };
        // The notice after every record (JSON lines; stderr says it in any format).
        if let Ok(Outcome {
            truncated: Some(msg),
            ..
        }) = &outcome
            && opts.format == OutputFormat::JsonLines
        {
            let mut line = Vec::new();
            uevrec_parsers::LineWriter::new(LineOptions::default()).write_notice(
                &mut line,
                None,
                "truncated",
                None,
                msg,
            );
            flush(&line);
        }
        outcome
    });
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            print_error(&format_args!("{name}: {e}"));
            return EXIT_ERROR;
        }
    };
    match output.error {
        Some(SinkError::Closed) => return EXIT_OUTPUT_CLOSED,
        Some(e) => {
            print_error(&e);
            return EXIT_ERROR;
        }
        None => {}
    }
    report(&name, &outcome, args.quiet, started)
}

/// Notes, problems and the summary on stderr; the exit status.
fn report(name: &str, o: &Outcome, quiet: bool, started: Instant) -> i32 {
    let s = &o.stats;
    for e in &s.errors {
        print_error(&format_args!("{name}: {e}"));
    }
    if s.error_count > s.errors.len() as u64 {
        print_error(&format_args!(
            "{name}: … and {} more problems",
            s.error_count - s.errors.len() as u64
        ));
    }
    for e in &o.problems {
        print_error(&format_args!("{name}: {e}"));
    }
    if let Some(e) = &o.stopped {
        print_error(&format_args!("{name}: decoding stopped: {e}"));
    }
    if let Some(msg) = &o.truncated {
        print_stderr(format_args!(
            "uevrec: {name}: truncated input salvaged: {msg}\n"
        ));
    }
    if s.time_unknown > 0 {
        let why = if let Some(note) = &o.time_note {
            note.as_str()
        } else if o.clock_data {
            "their events' clock is not the clock of the file's HEADER_CLOCK_DATA"
        } else {
            "the file has no HEADER_CLOCK_DATA (`perf record -k CLOCK_MONOTONIC` writes one)"
        };
        print_stderr(format_args!(
            "uevrec: {name}: \"time\" is null in {} lines: {why}\n",
            s.time_unknown
        ));
    }
    for (event, n) in &s.skipped {
        print_stderr(format_args!(
            "uevrec: {name}: {n} samples of {event} not decoded (written as \"undecoded\" \
             notices with their bytes in hex)\n"
        ));
    }
    if s.unknown_event > 0 {
        print_stderr(format_args!(
            "uevrec: {name}: {} samples of no known event (their id matches no attr)\n",
            s.unknown_event
        ));
    }
    if s.late > 0 {
        let why = if s.order_buffer_full > 0 {
            "--order-buffer was full; a larger one may help"
        } else {
            "they came after a FINISHED_ROUND that should have followed them; perf script \
             counts them as out of order events too"
        };
        print_stderr(format_args!(
            "uevrec: {name}: {} records written out of time order ({why})\n",
            s.late
        ));
    }
    if !quiet {
        print_stderr(format_args!(
            "uevrec: {} records, {} lost, from {name} in {:.1} s\n",
            s.records,
            s.lost,
            started.elapsed().as_secs_f64()
        ));
    }
    if o.stopped.is_some() || s.error_count > 0 || !o.problems.is_empty() {
        EXIT_ERROR
    } else if o.truncated.is_some() {
        EXIT_SALVAGED
    } else {
        EXIT_OK
    }
}

type Flush<'a> = dyn FnMut(&[u8]) -> bool + 'a;

/// How often (bytes of input) the pages of a mapped input behind the reader are let go.
pub const RELEASE_STEP: usize = 4 << 20;

/// When to let the pages of a mapped input behind the reader go: every [`RELEASE_STEP`]
/// bytes of input, those before the oldest record still held for its time order
/// ([`LineDecoder::release_point`]: records held from further back than the order
/// buffer's bound are copied first). The resident part of the mapping is thus what the
/// held records span (perf's last two rounds) plus [`RELEASE_STEP`], at most
/// `--order-buffer` + [`RELEASE_STEP`].
#[derive(Debug)]
pub struct Behind {
    next: u64,
}

impl Default for Behind {
    fn default() -> Self {
        Behind {
            next: RELEASE_STEP as u64,
        }
    }
}

impl Behind {
    /// With the record at `offset` read: whether it is time to let some input go, and
    /// `offset` as a `usize` if so.
    pub fn due(&mut self, offset: u64) -> Option<usize> {
        if offset < self.next {
            return None;
        }
        self.next = offset.saturating_add(RELEASE_STEP as u64);
        usize::try_from(offset).ok()
    }
}

/// A whole perf.data (or trace.dat) in memory or mapped: every record, then the rest of
/// the held lines. Records waiting for their time order are held as offsets into `bytes`
/// (not copied); `release(end)` is told when `bytes[..end]` is not needed any more
/// ([`Behind`]).
fn decode_bytes(
    bytes: &[u8],
    opts: DecodeOptions,
    select: &dyn Fn(&str, &str) -> bool,
    flush: &mut Flush<'_>,
    release: &dyn Fn(usize),
    par: Option<&Par<'_>>,
) -> Result<Outcome, String> {
    if bytes.starts_with(TRACE_DAT_MAGIC) {
        return decode_trace_dat(bytes, opts, select, flush, par);
    }
    // A recording killed while being finished: its records end where the finish noted
    // (the trailer after them is of no use without the file-mode header).
    let whole_len = bytes.len() as u64;
    let finishing = writer::finishing_end(bytes);
    let bytes = match finishing {
        Some(end) => &bytes[..end as usize],
        None => bytes,
    };
    let (mut data, records) = PerfData::open(bytes).map_err(|e| e.to_string())?;
    // Sections lying past the end: a cut file (the data section's part that is there is
    // decoded; the features or formats past the cut are missing).
    let (cut, rest): (Vec<PerfDataError>, Vec<PerfDataError>) = std::mem::take(&mut data.problems)
        .into_iter()
        .partition(|e| matches!(e, PerfDataError::BadSection { .. }));
    data.problems = rest;
    let unfinished = writer::is_unfinished(bytes);
    let clock_data = data.clock_data().is_some();
    let big_endian = data
        .tracing_data()
        .map_or(data.big_endian, |t| t.big_endian);
    let dec = LineDecoder::new(data, opts, select);
    let run = |dec: LineDecoder<'_>, flush: &mut Flush<'_>| {
        perf_data_records(dec, records, bytes, flush, release, clock_data)
    };
    let (mut outcome, stopped) = match par {
        Some(par) => {
            let context = opts.context.then(ContextTracker::new);
            let lines = par_lines(opts, big_endian, context);
            staged(par, lines, bytes, |sink| run(dec.with_sink(sink), flush))
        }
        None => run(dec, flush),
    };
    outcome.truncated = truncation(unfinished, &cut, stopped.as_ref(), bytes.len() as u64);
    if let (Some(end), Some(msg)) = (finishing, &mut outcome.truncated) {
        *msg = format!(
            "its finish was cut short (killed or a failed write): the records end at byte \
             {end}; the {} bytes after them (the trailer) are of no use without the file-mode \
             header, which was not written; {msg}",
            whole_len - end
        );
    }
    if outcome.truncated.is_none() {
        outcome.stopped = stopped.map(|e| e.to_string());
    }
    Ok(outcome)
}

/// Every record of a mapped perf.data through `dec`, then the rest of the held lines.
fn perf_data_records<'f>(
    mut dec: LineDecoder<'_>,
    records: impl Iterator<Item = Result<RawRecord<'f>, uevrec_parsers::perf_data::PerfDataError>>,
    bytes: &'f [u8],
    flush: &mut Flush<'_>,
    release: &dyn Fn(usize),
    clock_data: bool,
) -> (Outcome, Option<PerfDataError>) {
    let mut stopped = None;
    let mut behind = Behind::default();
    for rec in records {
        match rec {
            Ok(rec) => {
                if dec.record_in(&rec, bytes, flush) == Step::Stop {
                    break;
                }
                if let Some(at) = behind.due(rec.offset) {
                    release(dec.release_point(at, bytes));
                }
            }
            Err(e) => stopped = Some(e),
        }
    }
    dec.finish_in(bytes, flush);
    let outcome = Outcome {
        stats: dec.stats().clone(),
        stopped: None,
        problems: Vec::new(),
        time_note: None,
        clock_data: clock_data || dec.data().clock_data().is_some(),
        truncated: None,
    };
    (outcome, stopped)
}

/// The line buffers of a writer thread, for formatter workers to fill (`--threads` ≥ 2
/// and JSON lines: the decoder stages its records, [`staged`]).
struct Par<'a> {
    out: &'a Sender<Batch>,
    recycle: &'a Receiver<Vec<u8>>,
    workers: usize,
}

/// What the workers of a decoding write: `opts`' lines, values of `big_endian` files so.
fn par_lines(
    opts: DecodeOptions,
    big_endian: bool,
    context: Option<ContextTracker>,
) -> Lines<'static> {
    Lines {
        opts: LineOptions {
            include_common: opts.include_common,
            big_endian,
        },
        format: OutputFormat::JsonLines,
        session: None,
        context: context.filter(|_| opts.context),
        schema: opts.schema,
    }
}

/// Run `body` with a [`RecordSink`] that stages the records it is given into chunks
/// (the session's format, [`StagedChunk`]) for `par.workers` formatter workers
/// ([`formatter::run_parallel`]: the same lines in the same order as one thread writes),
/// whose batches go to `par`'s writer. The sink sends what it holds when dropped (the
/// decoder that owns it ends); the workers are joined before this returns.
///
/// Records whose trace entry lies in `input` (the mapped file, or the whole input read
/// into memory) are staged by where they lie ([`StagedChunk::push_record_at`]) and the
/// workers read them from there: the decoding thread copies none (`&[]`: every entry is
/// copied, as for a pipe).
fn staged<T>(
    par: &Par<'_>,
    lines: Lines<'_>,
    input: &[u8],
    body: impl for<'x> FnOnce(Box<dyn RecordSink + 'x>) -> T,
) -> T {
    let (stage_tx, stage_rx) = crossbeam_channel::bounded::<Staged>(STAGE_CHUNKS);
    let (chunk_tx, chunk_rx) = crossbeam_channel::bounded::<Vec<u8>>(STAGE_CHUNKS);
    for buffer in touched_buffers(STAGE_CHUNKS, STAGE_CAPACITY) {
        let _ = chunk_tx.send(buffer);
    }
    let gone = AtomicBool::new(false);
    std::thread::scope(|s| {
        let gone_flag = &gone;
        let (out, recycle, workers) = (par.out, par.recycle, par.workers);
        let formatter = std::thread::Builder::new()
            .name("uevrec-format".into())
            .spawn_scoped(s, move || {
                let r = formatter::run_parallel_in(
                    stage_rx,
                    chunk_tx,
                    out,
                    recycle,
                    lines,
                    workers,
                    || {},
                    input,
                );
                gone_flag.store(true, Ordering::Release);
                r
            })
            // As the writer's start: without the thread there is no pipeline.
            .expect("the OS refused to start the formatter thread");
        let stage = StageSender::new(stage_tx, chunk_rx, &gone);
        let result = {
            let sink = StageSink {
                input,
                chunk: stage.fresh_chunk().ok(),
                stage: &stage,
                sent: Vec::new(),
            };
            body(Box::new(sink))
        };
        drop(stage);
        let _ = formatter.join();
        result
    })
}

/// A decoder's records staged for formatter workers ([`staged`]); each event's format is
/// sent before its first record (as the event's slot, its index in the file).
struct StageSink<'a> {
    /// The input the workers read records from ([`staged`]).
    input: &'a [u8],
    stage: &'a StageSender<'a>,
    /// `None` once the formatter is gone.
    chunk: Option<StagedChunk>,
    /// Event index → its format was sent.
    sent: Vec<bool>,
}

impl StageSink<'_> {
    /// Send the chunk once full; false when the formatter is gone.
    fn step(&mut self) -> bool {
        let Some(chunk) = &mut self.chunk else {
            return false;
        };
        if chunk.len() >= STAGE_BYTES && self.stage.flush(chunk).is_err() {
            self.chunk = None;
        }
        self.chunk.is_some()
    }
}

impl RecordSink for StageSink<'_> {
    fn record(
        &mut self,
        event: usize,
        prepared: &PreparedFormat,
        first: bool,
        stamp: &RecordStamp,
        cgroup: Option<u64>,
        raw: &[u8],
    ) -> bool {
        let (Some(chunk), Ok(slot)) = (&mut self.chunk, u32::try_from(event)) else {
            return false;
        };
        if !self.sent.get(event).copied().unwrap_or(false) {
            if self.sent.len() <= event {
                self.sent.resize(event + 1, false);
            }
            self.sent[event] = true;
            let source = Arc::new(FormatSource {
                system: prepared.system().into(),
                name: prepared.event().into(),
                text: String::new(),
            });
            let sent = self
                .stage
                .format(chunk, event, Arc::new(prepared.clone()), source);
            if sent.is_err() {
                self.chunk = None;
                return false;
            }
        }
        if first {
            chunk.push_schema(slot, stamp.time_unix_ns);
        }
        match offset_in(self.input, raw) {
            Some((offset, len)) => chunk.push_record_at(slot, stamp, cgroup, offset, len),
            None => chunk.push_record_in(slot, stamp, cgroup, raw),
        }
        self.step()
    }

    fn lost(&mut self, time_unix_ns: Option<u64>, cpu: u32, lost: u64) -> bool {
        if let Some(chunk) = &mut self.chunk {
            chunk.push_lost(time_unix_ns, cpu, lost);
        }
        self.step()
    }

    fn notice(&mut self, time: Option<u64>, what: &str, event: Option<&str>, msg: &str) -> bool {
        if let Some(chunk) = &mut self.chunk {
            chunk.push_notice(time, what, event, msg);
        }
        self.step()
    }

    fn context(&mut self, time_unix_ns: Option<u64>, update: ContextUpdate<'_>) {
        if let Some(chunk) = &mut self.chunk {
            chunk.push_context(time_unix_ns, &update);
        }
        self.step();
    }
}

/// Where `part` lies in `input` (offset, length), if it lies wholly there. Addresses
/// compared as numbers: no pointer is made from them.
fn offset_in(input: &[u8], part: &[u8]) -> Option<(u64, u32)> {
    let base = input.as_ptr() as usize;
    let at = (part.as_ptr() as usize).checked_sub(base)?;
    let len = u32::try_from(part.len()).ok()?;
    (at.checked_add(part.len())? <= input.len()).then_some((at as u64, len))
}

impl Drop for StageSink<'_> {
    fn drop(&mut self) {
        if let Some(chunk) = &mut self.chunk {
            let _ = self.stage.flush(chunk);
        }
    }
}

fn decode_file(
    path: &Path,
    opts: DecodeOptions,
    select: &dyn Fn(&str, &str) -> bool,
    flush: &mut Flush<'_>,
    par: Option<&Par<'_>>,
) -> Result<Outcome, String> {
    let file = File::open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound && crate::raw::dat::has_leftovers(path) {
            format!(
                "opening: {e}; a killed `uevrec record --raw {p} --raw-format trace-dat` left \
                 its spools beside it: run `uevrec recover {p}`, then decode it",
                p = path.display()
            )
        } else {
            format!("opening: {e}")
        }
    })?;
    decode_open_file(&file, opts, select, flush, par)
}

fn decode_open_file(
    file: &File,
    opts: DecodeOptions,
    select: &dyn Fn(&str, &str) -> bool,
    flush: &mut Flush<'_>,
    par: Option<&Par<'_>>,
) -> Result<Outcome, String> {
    let len = file
        .metadata()
        .map_err(|e| format!("reading size: {e}"))?
        .len();
    if len == 0 {
        return decode_bytes(&[], opts, select, flush, &|_| (), par);
    }
    let map = MappedInput::open(file)?;
    if par.is_none() {
        let release = |end| map.release_before(end);
        return decode_bytes(map.bytes(), opts, select, flush, &release, par);
    }
    // With workers, a thread of its own maps the pages ahead of the reader
    // (`MADV_POPULATE_READ`: the page faults off the decoding thread) and lets them go
    // [`PAGE_LAG`] behind it, after the workers (which read the records from the
    // mapping) are done with them (`MADV_DONTNEED`: its cost off the decoding thread too).
    let (tx, rx) = crossbeam_channel::bounded::<usize>(64);
    let map = &map;
    std::thread::scope(|s| {
        let pager = std::thread::Builder::new()
            .name("uevrec-pages".into())
            .spawn_scoped(s, move || {
                map.populate(0, PAGE_AHEAD);
                for at in rx {
                    map.populate(at, at.saturating_add(PAGE_AHEAD));
                    map.release_before(at.saturating_sub(PAGE_LAG));
                }
            });
        let tx = pager.is_ok().then_some(tx);
        let release = |end: usize| match &tx {
            // Full: the next one says as much.
            Some(tx) => {
                let _ = tx.try_send(end);
            }
            // No thread: as with one thread.
            None => map.release_before(end),
        };
        let result = decode_bytes(map.bytes(), opts, select, flush, &release, par);
        drop(tx);
        result
    })
}

/// Bytes of a mapped input that the page thread of `decode --threads` maps ahead of the
/// reader's point ([`MappedInput::populate`]).
pub const PAGE_AHEAD: usize = 16 << 20;

/// How far behind the reader's point the page thread of `decode --threads` lets a mapped
/// input's pages go: past the records still with the formatter workers (the staging
/// channel's chunks and the workers' queues, a few thousand records each, hold the
/// places of some 25 MB of a 120-byte-record perf.data); a page let go too early is only
/// read in again. The resident part of the mapping is then at most `--order-buffer` +
/// [`RELEASE_STEP`] + this + [`PAGE_AHEAD`].
pub const PAGE_LAG: usize = 64 << 20;

/// A file mapped read-only for one pass from start to end (`MADV_SEQUENTIAL`), whose
/// pages behind the reader are let go ([`MappedInput::release_before`]) so that its
/// resident part stays bounded: the way `uevrec decode` reads a perf.data, without a copy
/// of its bytes (the page cache's pages are mapped).
pub struct MappedInput {
    map: memmap2::Mmap,
    /// Bytes from the start already let go (a multiple of the page size).
    released: AtomicUsize,
    /// Bytes from the start already mapped in ([`MappedInput::populate`]).
    populated: AtomicUsize,
}

impl MappedInput {
    /// `file` mapped.
    pub fn open(file: &File) -> Result<Self, String> {
        let map = map_file(file)?;
        // Only a hint: reading works without it.
        let _ = map.advise(memmap2::Advice::Sequential);
        Ok(MappedInput {
            map,
            released: AtomicUsize::new(0),
            populated: AtomicUsize::new(0),
        })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Drop the pages wholly before byte `end` from this process (`MADV_DONTNEED`; the
    /// file's pages stay in the page cache, and reading them again faults them back in).
    pub fn release_before(&self, end: usize) {
        let page = crate::perf::page_size();
        let end = end.min(self.map.len()) / page * page;
        let from = self.released.load(Ordering::Relaxed);
        if end <= from {
            return;
        }
        // SAFETY: a private read-only mapping of a file: MADV_DONTNEED only unmaps the
        // pages; touching them again maps the file's bytes again, unchanged (a file
        // changed underneath is the caveat of `map_file`, not of this call). `from..end`
        // lies inside the mapping.
        let dropped = unsafe {
            self.map
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, from, end - from)
        };
        if dropped.is_ok() {
            self.released.store(end, Ordering::Relaxed);
        }
    }

    /// Map in the pages of bytes `from..to` not mapped in yet by an earlier call
    /// (`MADV_POPULATE_READ`, Linux 5.14+; only a hint: on failure the reader's own page
    /// faults map them), so that the thread reading them next does not take the faults.
    pub fn populate(&self, from: usize, to: usize) {
        let page = crate::perf::page_size();
        let from = from.max(self.populated.load(Ordering::Relaxed)) / page * page;
        let to = to.min(self.map.len());
        if to <= from {
            return;
        }
        let _ = self
            .map
            .advise_range(memmap2::Advice::PopulateRead, from, to - from);
        self.populated.store(to, Ordering::Relaxed);
    }
}

/// `file` mapped read-only.
fn map_file(file: &File) -> Result<memmap2::Mmap, String> {
    truncation_guard();
    // SAFETY: a read-only private mapping of a file opened for reading; nothing here writes
    // through it. Another process truncating the file while it is mapped faults the reads
    // (SIGBUS), as with every mmap reader (perf's too): `truncation_guard` turns that into
    // a message and exit status 1; the decoder itself never trusts the bytes.
    unsafe { memmap2::Mmap::map(file) }.map_err(|e| format!("mapping: {e}"))
}

/// What `uevrec decode` says when its mapped input shrinks under it.
const TRUNCATED: &[u8] =
    b"uevrec decode: the input file shrank while it was being read (truncated by another \
program?); stopped. Decode a finished copy of the file, or pipe it in (uevrec decode - < FILE).\n";

/// Install (once) a SIGBUS handler that reports [`TRUNCATED`] and exits with status 1:
/// a read of a mapped page past the file's new end raises SIGBUS, which would otherwise
/// kill the process without a word.
fn truncation_guard() {
    extern "C" fn on_sigbus(_: libc::c_int) {
        // SAFETY: write(2) and _exit(2) are async-signal-safe; the buffer is static.
        unsafe {
            libc::write(2, TRUNCATED.as_ptr().cast(), TRUNCATED.len());
            libc::_exit(1);
        }
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: a zeroed sigaction with a plain handler (no SA_SIGINFO) and an empty
        // mask is a valid argument; the handler only calls async-signal-safe functions.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
        }
    });
}

/// Feed `dec` what `read` returns, [`READ_CHUNK`] bytes at a time, until the input ends
/// or decoding stops, then let out what it holds. Returns why decoding stopped early, if
/// it did (a framing error, or the input ending inside a record), or the read error.
fn pump(
    dec: &mut StreamDecoder<'_>,
    read: &mut dyn FnMut(&mut [u8]) -> std::io::Result<usize>,
    flush: &mut Flush<'_>,
) -> Result<Option<PerfDataError>, String> {
    let mut stopped = None;
    let mut done = false;
    loop {
        let buf = dec.buffer(READ_CHUNK);
        let n = match read(&mut buf[..READ_CHUNK]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("reading: {e}")),
        };
        if n == 0 {
            break;
        }
        dec.filled(n);
        match dec.process(flush) {
            Ok(Step::Continue) => {}
            Ok(Step::Stop) => {
                done = true;
                break;
            }
            Err(e) => {
                stopped = Some(e);
                break;
            }
        }
    }
    // After a stop (--count, closed output) the unread rest is not a truncation.
    match dec.finish(flush) {
        Err(e) if stopped.is_none() && !done => stopped = Some(e),
        _ => {}
    }
    Ok(stopped)
}

/// What a [`StreamDecoder`] saw, with `stopped` from [`pump`] (an input ending inside a
/// record is a truncation: everything before it was decoded).
fn stream_outcome(
    dec: &StreamDecoder<'_>,
    stopped: Option<PerfDataError>,
    clock_data: bool,
) -> Outcome {
    let (stats, clock) = dec.decoder().map_or_else(Default::default, |d| {
        (d.stats().clone(), d.data().clock_data().is_some())
    });
    let truncated = match &stopped {
        Some(e @ PerfDataError::Truncated { .. }) => truncation(false, &[], Some(e), dec.offset()),
        _ => None,
    };
    Outcome {
        stats,
        stopped: stopped
            .filter(|_| truncated.is_none())
            .map(|e| e.to_string()),
        problems: Vec::new(),
        time_note: None,
        clock_data: clock_data || clock,
        truncated,
    }
}

fn decode_stdin(
    opts: DecodeOptions,
    select: &dyn Fn(&str, &str) -> bool,
    flush: &mut Flush<'_>,
    par: Option<&Par<'_>>,
) -> Result<Outcome, String> {
    let mut stdin = std::io::stdin().lock();
    // `< perf.data`: a regular file on standard input is read like a named one.
    if let Ok(fd) = stdin.as_fd().try_clone_to_owned() {
        let file = File::from(fd);
        if file.metadata().is_ok_and(|m| m.is_file()) {
            return decode_open_file(&file, opts, select, flush, par);
        }
    }
    if stdin.is_terminal() {
        return Err(
            "standard input is a terminal: give a perf.data file or pipe one in \
                    (perf record -o - … | uevrec decode)"
                .into(),
        );
    }
    let read_err = |e: std::io::Error| format!("reading: {e}");
    // The first 16 bytes tell a pipe-mode stream from a file-mode perf.data or a
    // trace.dat, which need their end first and are read whole.
    let mut head = Vec::with_capacity(16);
    (&mut stdin)
        .take(16)
        .read_to_end(&mut head)
        .map_err(read_err)?;
    let whole = head.len() == 16
        && (head.starts_with(TRACE_DAT_MAGIC) || parse_magic(&head).is_ok_and(|(_, pipe)| !pipe));
    if whole {
        stdin.read_to_end(&mut head).map_err(read_err)?;
        return decode_bytes(&head, opts, select, flush, &|_| (), par);
    }
    let mut run = |mut dec: StreamDecoder<'_>, flush: &mut Flush<'_>| {
        dec.feed(&head);
        let mut read = |buf: &mut [u8]| stdin.read(buf);
        let stopped = pump(&mut dec, &mut read, flush)?;
        if dec.decoder().is_none() {
            return Err(stopped.map_or_else(|| "no input".into(), |e| e.to_string()));
        }
        Ok(stream_outcome(&dec, stopped, false))
    };
    let dec = StreamDecoder::new(opts, select);
    match par {
        Some(par) => {
            // The header's byte order (the tracing data's, in every perf.data seen).
            let big_endian = parse_magic(&head).is_ok_and(|(big, _)| big);
            let lines = par_lines(opts, big_endian, Some(ContextTracker::new()));
            // Pipe mode: the records are copied out of the stream's buffer.
            staged(par, lines, &[], |sink| run(dec.with_sink(sink), flush))
        }
        None => run(dec, flush),
    }
}

/// The first bytes of a trace-cmd `trace.dat`.
const TRACE_DAT_MAGIC: &[u8] = uevrec_parsers::trace_dat::MAGIC;

/// A whole trace-cmd trace.dat (v6 or v7): [`trace_dat::lines::decode_lines`].
fn decode_trace_dat(
    bytes: &[u8],
    opts: DecodeOptions,
    select: &dyn Fn(&str, &str) -> bool,
    flush: &mut Flush<'_>,
    par: Option<&Par<'_>>,
) -> Result<Outcome, String> {
    let file = trace_dat::TraceDat::parse(bytes).map_err(|e| e.to_string())?;
    let decoded = match par {
        Some(par) => {
            let big_endian = file.endian() == uevrec_parsers::Endian::Big;
            let context = trace_dat::lines::context_of(&file);
            let lines = par_lines(opts, big_endian, Some(context));
            staged(par, lines, bytes, |mut sink| {
                trace_dat::lines::decode_into(&file, &opts, select, flush, Some(sink.as_mut()))
            })
        }
        None => trace_dat::lines::decode_lines(&file, &opts, select, flush),
    }
    .map_err(|e| e.to_string())?;
    let clock = file.trace_clock().unwrap_or("local");
    Ok(Outcome {
        stats: decoded.stats,
        stopped: None,
        problems: decoded.problems,
        time_note: Some(format!(
            "a trace.dat holds raw `{clock}` trace-clock stamps and no wall-clock anchor (records are in time order)"
        )),
        clock_data: false,
        truncated: (!decoded.truncated.is_empty()).then(|| {
            format!(
                "{}; every whole record before the cut was decoded",
                decoded.truncated.join("; ")
            )
        }),
    })
}
