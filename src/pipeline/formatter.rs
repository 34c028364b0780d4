//! The formatter thread: staged entries ([`crate::capture::staging::StagedChunk`]: records, lost
//! counts, notices) → JSON lines ([`Batch`]es for the writer). It writes every line of
//! the output; the session writes none.
//!
//! Decoding and JSON writing are the costly part of recording (hundreds of ns per
//! record, tens of µs under emulation); doing them here rather than on the thread that
//! drains the rings lets the rings drain at memcpy speed, so a burst the formatter
//! cannot follow at once waits in the staging channel instead of overflowing a ring.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::thread;

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use uevrec_parsers::{
    ContextTracker, LineOptions, OutputFormat, OutputWriter, PreparedFormat, RecordWriter,
    SessionInfo,
};

use crate::pipeline::describe::Described;
use crate::pipeline::filter::{Filter, FormatFilter, Who};
use crate::pipeline::stacks::maps::ProcessMaps;
use crate::pipeline::stacks::shared_symbols::SharedSymbols;
use crate::pipeline::stacks::stacktrace::StackText;
use crate::pipeline::stacks::{StackOptions, StackWriter};

use crate::capture::staging::written::{Progress, WrittenMarks};
use crate::capture::staging::{Closed, Staged, StagedChunk, StagedEntry};
use crate::pipeline::{
    Announcement, BATCH_BYTES, BATCH_CAPACITY, Batch, PARTS_IN_FLIGHT, Part, Reorder, WORK_QUEUE,
};

/// What every formatting thread keeps: the formats by slot, the writer, the context.
struct Core {
    /// Event slot → its format (from [`Staged::Format`]).
    formats: Vec<Option<Arc<PreparedFormat>>>,
    writer: OutputWriter,
    /// Who is who (`comm`, `cgroup` …), when context is on.
    context: Option<ContextTracker>,
    /// Schema lines on: EventHeader metadata blocks are announced.
    schema: bool,
    /// `--where`: the rules, and each slot's filter (`None`: every record kept).
    filter: Option<Arc<Filter>>,
    filters: Vec<Option<FormatFilter>>,
    /// The records' byte order (what the filters decode with).
    endian: uevrec_parsers::Endian,
    /// Call stacks (`-g`), when records carry them.
    stacks: Option<StackWriter>,
    /// OTLP's `code.stacktrace` texts of the stacks.
    stack_text: StackText,
}

impl Core {
    fn new(format: OutputFormat, opts: LineOptions, context: Option<ContextTracker>) -> Core {
        let mut writer = OutputWriter::new(format, opts);
        if let Some(host) = host_name() {
            writer.set_host_name(&host);
        }
        Core {
            formats: Vec::new(),
            writer,
            context,
            schema: false,
            filter: None,
            filters: Vec::new(),
            endian: opts.endian,
            stacks: None,
            stack_text: StackText::default(),
        }
    }

    fn set_format(&mut self, slot: u32, prepared: Arc<PreparedFormat>) {
        let slot = slot as usize;
        if self.formats.len() <= slot {
            self.formats.resize(slot + 1, None);
        }
        if let Some(filter) = &self.filter {
            if self.filters.len() <= slot {
                self.filters.resize_with(slot + 1, || None);
            }
            self.filters[slot] = filter.for_format(&prepared);
        }
        self.formats[slot] = Some(prepared);
    }

    /// Apply the context entries of `chunk` (whose records another worker formats).
    fn apply_contexts(&mut self, chunk: &StagedChunk) {
        if let Some(c) = &mut self.context {
            for entry in chunk.entries() {
                if let StagedEntry::Context {
                    time_unix_ns,
                    update,
                } = entry
                {
                    c.apply(time_unix_ns, update);
                }
            }
        }
        if let Some(s) = &mut self.stacks {
            for entry in chunk.entries() {
                if let StagedEntry::Context {
                    time_unix_ns,
                    update,
                } = entry
                {
                    s.apply(time_unix_ns, &update);
                }
            }
        }
    }

    /// Write `entry` to `out`; returns the event records written (0 or 1). An
    /// EventHeader schema line written with it is noted in `announced`.
    #[inline]
    fn entry(
        &mut self,
        out: &mut Vec<u8>,
        entry: StagedEntry<'_>,
        announced: &mut Vec<Announcement>,
    ) -> u64 {
        match entry {
            StagedEntry::Lost {
                time_unix_ns,
                cpu,
                lost,
            } => self.writer.write_lost(out, time_unix_ns, cpu, lost),
            StagedEntry::Notice {
                time_unix_ns,
                what,
                event,
                message,
            } => self
                .writer
                .write_notice(out, time_unix_ns, what, event, message),
            StagedEntry::Context {
                time_unix_ns,
                update,
            } => {
                if let Some(s) = &mut self.stacks {
                    s.apply(time_unix_ns, &update);
                }
                if let Some(c) = &mut self.context {
                    c.apply(time_unix_ns, update);
                }
            }
            StagedEntry::Schema { slot, time_unix_ns } => {
                let prepared = self.formats.get(slot as usize).and_then(Option::as_ref);
                if let (true, Some(prepared)) = (self.schema, prepared) {
                    self.writer.write_format_schema(out, time_unix_ns, prepared);
                }
            }
            StagedEntry::Record {
                slot,
                stamp,
                cgroup,
                raw,
                stack,
                user_stack,
            } => {
                match self.formats.get(slot as usize).and_then(Option::as_ref) {
                    Some(prepared) => {
                        if let Some(Some(f)) = self.filters.get_mut(slot as usize)
                            && !f.keep(
                                prepared,
                                &stamp,
                                raw,
                                self.endian,
                                who(&self.context, cgroup),
                            )
                        {
                            return 0;
                        }
                        let start = out.len();
                        if let Some(c) = &self.context {
                            self.writer.set_context(c, &stamp, cgroup);
                        }
                        let otlp = self.writer.is_otlp();
                        if let (true, Some(s), Some(stack)) = (otlp, &mut self.stacks, stack) {
                            let text = self.stack_text.render(s, &stamp, stack, user_stack);
                            self.writer.set_stacktrace(Some(text));
                        }
                        self.writer.write_prepared(out, &stamp, prepared, raw);
                        match (&mut self.stacks, stack) {
                            (Some(_), Some(_)) if otlp => self.writer.set_stacktrace(None),
                            (Some(s), Some(stack)) => {
                                add_stack(out, start, s, &stamp, stack, user_stack)
                            }
                            _ => {}
                        }
                        if self.schema {
                            let end = out.len();
                            let t = stamp.time_unix_ns;
                            self.writer.announce_learnt(out, start, t, prepared);
                            if out.len() > end {
                                let len = out.len() - end;
                                let key = metadata_key(&out[start..start + len]);
                                announced.push(Announcement { start, len, key });
                            }
                        }
                        return 1;
                    }
                    // The session sends a slot's format before its records; should
                    // that ever fail, say so rather than drop the record silently.
                    None => self.writer.write_notice(
                        out,
                        stamp.time_unix_ns,
                        "internal_error",
                        None,
                        &format!("record of unknown event slot {slot} not decoded"),
                    ),
                }
            }
        }
        0
    }
}

/// The stack writer of formatter worker `worker`, knowing `maps` when given, naming
/// frames with the workers' `symbols`.
fn stack_writer(
    options: StackOptions,
    maps: &Option<ProcessMaps>,
    worker: usize,
    symbols: &SharedSymbols,
) -> StackWriter {
    match maps {
        Some(maps) => StackWriter::with_maps(options, maps.clone()),
        None => StackWriter::new(options),
    }
    .for_worker(worker as u32)
    .sharing(symbols)
}

/// The context `--where` reads of a record whose sample named `cgroup`.
fn who(context: &Option<ContextTracker>, cgroup: Option<u64>) -> Option<Who<'_>> {
    context.as_ref().map(|tracker| Who { tracker, cgroup })
}

/// Put the `"stack"` key of a record into its JSON line (`out[start..]`, ending `}\n`),
/// or with `--stack-ids` its `"stack_id"` (and the stack's line before it, if new); a
/// line of any other shape (text lines, which the CLI does not pair with stacks) is left
/// as it is.
fn add_stack(
    out: &mut Vec<u8>,
    start: usize,
    stacks: &mut StackWriter,
    stamp: &uevrec_parsers::RecordStamp,
    stack: uevrec_parsers::callchain::Callchain<'_>,
    user_stack: Option<uevrec_parsers::user_stack::UserStack<'_>>,
) {
    if out.len() < start + 2 || !out.ends_with(b"}\n") {
        return;
    }
    out.truncate(out.len() - 2);
    if stacks.ids() {
        stacks.write_id(out, start, stamp, stack, user_stack);
    } else {
        stacks.write(out, stamp, stack, user_stack);
    }
    out.extend_from_slice(b"}\n");
}

/// The EventHeader metadata blocks announced so far in the whole output, by a hash of
/// the block: each block's schema line is let out at its first sight only, whichever
/// worker (each with its own metadata cache) saw it. Bounded like [`Described`]: past
/// [`MAX_ANNOUNCED`] blocks it starts again (a block then seen again is announced
/// again: a redundant line, never a missing one).
#[derive(Debug, Default)]
struct Announced {
    seen: HashSet<u64>,
}

/// Blocks remembered by [`Announced`] (≈ 1 MiB of hashes).
const MAX_ANNOUNCED: usize = 1 << 16;

impl Announced {
    /// Whether `key` is new (and remember it).
    fn first(&mut self, key: u64) -> bool {
        if self.seen.len() >= MAX_ANNOUNCED {
            self.seen.clear();
        }
        self.seen.insert(key)
    }

    /// Cut from `lines` the schema lines `announced` (ascending, as written) of blocks
    /// announced before.
    fn drop_repeats(&mut self, lines: &mut Vec<u8>, announced: &[Announcement]) {
        let mut cut = 0;
        for a in announced {
            if !self.first(a.key) {
                let start = a.start - cut;
                lines.drain(start..start + a.len);
                cut += a.len;
            }
        }
    }
}

/// The key of an EventHeader schema line: a hash of its `"metadata"` value (the block
/// itself, whatever event and time it was first seen with), or of the whole line.
fn metadata_key(line: &[u8]) -> u64 {
    const KEY: &[u8] = b"\"metadata\":\"";
    let value = line
        .windows(KEY.len())
        .position(|w| w == KEY)
        .map(|at| {
            let rest = &line[at + KEY.len()..];
            &rest[..rest.iter().position(|&b| b == b'"').unwrap_or(rest.len())]
        })
        .unwrap_or(line);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// Turns staged chunks into batches of JSON lines (one thread: [`run`]).
struct Formatter<'a> {
    /// Where records staged by where they lie are read ([`StagedChunk::entries_in`]).
    input: &'a [u8],
    out: &'a Sender<Batch>,
    recycle: &'a Receiver<Vec<u8>>,
    core: Core,
    batch: Batch,
    /// The formats described so far; `None` with `--no-schema`.
    described: Option<Described>,
    announced: Announced,
    /// The schema lines written with the entry at hand.
    pending: Vec<Announcement>,
    /// `--instance`'s journal: where each CPU's ring records end in the lines so far.
    progress: Option<Progress>,
}

impl Formatter<'_> {
    fn fresh_buffer(&self) -> Vec<u8> {
        match self.recycle.try_recv() {
            Ok(mut v) => {
                v.clear();
                v
            }
            // The caller gave no (free) buffer: make one.
            Err(_) => Vec::with_capacity(BATCH_CAPACITY),
        }
    }

    /// Send the batch if it has anything, leaving a fresh one in its place.
    fn flush(&mut self) -> Result<(), Closed> {
        if self.batch.lines.is_empty() {
            return Ok(());
        }
        if let Some(progress) = &self.progress {
            // OTLP records waiting for a fuller line are not in these lines yet.
            self.core.writer.end_lines(&mut self.batch.lines);
            self.batch.marks = Some(progress.snapshot());
        }
        // Sent before a fresh buffer is taken, so the writer can have returned one.
        let full = std::mem::take(&mut self.batch);
        self.out.send(full).map_err(|_| Closed)?;
        self.batch.lines = self.fresh_buffer();
        Ok(())
    }

    fn take(&mut self, msg: Staged, chunk_recycle: &Sender<Vec<u8>>) -> Result<(), Closed> {
        let chunk = match msg {
            Staged::Format {
                slot,
                prepared,
                source,
            } => {
                if let Some(described) = &mut self.described
                    && described.first_time(&source)
                {
                    let now = Some(crate::capture::clock::now_unix_ns());
                    self.core
                        .writer
                        .write_format_schema(&mut self.batch.lines, now, &prepared);
                }
                self.core.set_format(slot, prepared);
                return Ok(());
            }
            Staged::Drained(_) => return Ok(()),
            Staged::Chunk(chunk) => chunk,
        };
        for entry in chunk.entries_in(self.input) {
            self.batch.records += self
                .core
                .entry(&mut self.batch.lines, entry, &mut self.pending);
            if !self.pending.is_empty() {
                let pending = std::mem::take(&mut self.pending);
                self.announced.drop_repeats(&mut self.batch.lines, &pending);
                self.pending = pending;
                self.pending.clear();
            }
            // With marks, a batch ends with a chunk (they say where chunks end).
            if self.batch.lines.len() >= BATCH_BYTES && self.progress.is_none() {
                self.flush()?;
            }
        }
        if let Some(progress) = &mut self.progress {
            progress.pass(chunk.ring_marks());
            if self.batch.lines.len() >= BATCH_BYTES {
                self.flush()?;
            }
        }
        // The pool channel holds every chunk, so this never waits.
        let _ = chunk_recycle.send(chunk.into_buffer());
        Ok(())
    }
}

/// The formatter's options: what it writes and how (see [`run`]).
#[derive(Debug, Default)]
pub struct FormatterOptions<'a> {
    /// How records are written.
    pub opts: LineOptions,
    /// JSON lines or OTLP.
    pub format: OutputFormat,
    /// The session line to start with, and schema lines (`None`: `--no-schema`).
    pub session: Option<&'a SessionInfo>,
    /// Who is who (`None`: `--no-context`).
    pub context: Option<ContextTracker>,
    /// Call stacks on the lines of records that carry them (`None`: none asked for).
    pub stacks: Option<StackOptions>,
    /// What the processes had mapped before the first entry (a flight dump's; `None`:
    /// nothing known yet).
    pub stack_maps: Option<ProcessMaps>,
    /// Schema lines where the staged entries place them ([`StagedEntry::Schema`], the
    /// decoders of files) and for EventHeader metadata blocks, without a session line
    /// (with `session` they are on whatever this says).
    pub schema: bool,
    /// `--where`: which records are kept (`None`: all); the counts of the others are
    /// written as `{"uevrec":"dropped"}` lines at the end, and while recording when the
    /// filter says they are due ([`Filter::dropped_due`]).
    pub filter: Option<Arc<Filter>>,
    /// `--instance`'s journal: each batch carries where each CPU's ring records end in
    /// it (with workers, the dispatcher notes them in the chunks' order and each chunk's
    /// lines go as one batch that carries them: [`run_parallel`]).
    pub progress: Option<Progress>,
}

/// Receive staged messages until the session closes `staged`, writing batches to `out`
/// (taking empty buffers back from `recycle`) and returning chunk buffers on
/// `chunk_recycle`. A batch is sent when full and whenever the staging channel runs
/// empty, so lines reach the writer as soon as the formatter has caught up. Returns
/// `Err(Closed)` as soon as the writer is gone; dropping `staged` then tells the session.
///
/// With `session` (not `--no-schema`) the first line is its `{"uevrec":"session"}` line,
/// each event format gets a `{"uevrec":"schema"}` line before its first record, and so
/// does each EventHeader metadata block when first seen (`crate::pipeline::describe`).
///
/// With `context` (a tracker, fresh or as a flight snapshot left it), event lines carry
/// the `comm`/`cgroup` keys the staged context entries tell.
pub fn run(
    staged: Receiver<Staged>,
    chunk_recycle: Sender<Vec<u8>>,
    out: &Sender<Batch>,
    recycle: &Receiver<Vec<u8>>,
    lines: FormatterOptions<'_>,
) -> Result<(), Closed> {
    run_in(staged, chunk_recycle, out, recycle, lines, &[])
}

/// [`run`], the records staged by where they lie read from `input`.
fn run_in(
    staged: Receiver<Staged>,
    chunk_recycle: Sender<Vec<u8>>,
    out: &Sender<Batch>,
    recycle: &Receiver<Vec<u8>>,
    lines: FormatterOptions<'_>,
    input: &[u8],
) -> Result<(), Closed> {
    let FormatterOptions {
        opts,
        format,
        session,
        context,
        schema,
        filter,
        stacks,
        stack_maps,
        progress,
    } = lines;
    let mut core = Core::new(format, opts, context);
    core.schema = schema || session.is_some();
    core.filter = filter.clone();
    core.stacks = stacks.map(|o| stack_writer(o, &stack_maps, 0, &SharedSymbols::default()));
    if let Some(w) = core.stacks.as_mut() {
        w.warm();
    }
    let mut f = Formatter {
        input,
        out,
        recycle,
        core,
        batch: Batch::default(),
        described: session.map(|_| Described::default()),
        announced: Announced::default(),
        pending: Vec::new(),
        progress,
    };
    f.batch.lines = f.fresh_buffer();
    if let Some(info) = session {
        let start = Some(info.clock.realtime_ns);
        f.core.writer.write_session(&mut f.batch.lines, start, info);
    }
    loop {
        let msg = match staged.try_recv() {
            Ok(msg) => msg,
            Err(TryRecvError::Empty) => {
                // Caught up: OTLP records waiting for a fuller line go out now.
                f.core.writer.end_lines(&mut f.batch.lines);
                f.flush()?;
                match staged.recv() {
                    Ok(msg) => msg,
                    Err(_) => break,
                }
            }
            Err(TryRecvError::Disconnected) => break,
        };
        f.take(msg, &chunk_recycle)?;
        if let Some(filter) = filter.as_ref().filter(|f| f.dropped_due()) {
            let now = Some(crate::capture::clock::now_unix_ns());
            f.core.writer.end_lines(&mut f.batch.lines);
            filter.write_dropped(&mut f.core.writer, &mut f.batch.lines, now);
            f.core.writer.end_lines(&mut f.batch.lines);
        }
    }
    f.core.writer.end_lines(&mut f.batch.lines);
    if let Some(filter) = &filter {
        let now = Some(crate::capture::clock::now_unix_ns());
        filter.write_dropped(&mut f.core.writer, &mut f.batch.lines, now);
        f.core.writer.end_lines(&mut f.batch.lines);
    }
    f.flush()
}

/// What the dispatcher sends a worker of [`run_parallel`], in the session's order.
enum Work {
    /// A format for a slot; with `schema`, this worker writes its schema line as the
    /// item numbered so.
    Format {
        slot: u32,
        prepared: Arc<PreparedFormat>,
        schema: Option<u64>,
    },
    /// A chunk for this worker to format, as the item numbered `seq`; its lines go as
    /// one batch with `marks`, if any (`--instance`'s journal).
    Chunk {
        seq: u64,
        chunk: StagedChunk,
        marks: Option<WrittenMarks>,
    },
    /// The context entries of a chunk another worker formats.
    Context(Arc<StagedChunk>),
}

/// [`run`] with `workers` formatter threads (JSON lines and OTLP; text stays on one:
/// [`run`]), writing exactly what [`run`] writes, in the same order (OTLP: the same
/// records, a worker's requests cut at the end of each chunk it formats). On this thread the dispatcher numbers the items (staged chunks; the schema
/// line of a format first seen) and gives each chunk to the worker with the shortest
/// queue; every worker gets every format and every other worker's context entries, so
/// each keeps the state one formatter would (the formats by slot, who is who). The
/// workers' batches go through the reorder stage (its own thread, [`Reorder`]) to `out`
/// in the items' order; the stage also lets each EventHeader schema line out at its
/// first sight only. Each worker has [`PARTS_IN_FLIGHT`] batches in flight at most and
/// takes its buffers from `recycle`, which must hold
/// [`crate::pipeline::batch_pool`]`(workers)` of them. `started` is called once every
/// thread runs (before the first message is taken).
pub fn run_parallel(
    staged: Receiver<Staged>,
    chunk_recycle: Sender<Vec<u8>>,
    out: &Sender<Batch>,
    recycle: &Receiver<Vec<u8>>,
    lines: FormatterOptions<'_>,
    workers: usize,
    started: impl FnOnce(),
) -> Result<(), Closed> {
    run_parallel_in(
        staged,
        chunk_recycle,
        out,
        recycle,
        lines,
        workers,
        started,
        &[],
    )
}

/// [`run_parallel`] for a file decoder (`uevrec decode --threads`) whose records are
/// staged by where they lie in `input` ([`crate::capture::staging::StagedChunk::push_record_at`]):
/// each worker reads them from there, so the decoding thread copies no trace entry.
#[allow(clippy::too_many_arguments)]
pub fn run_parallel_in(
    staged: Receiver<Staged>,
    chunk_recycle: Sender<Vec<u8>>,
    out: &Sender<Batch>,
    recycle: &Receiver<Vec<u8>>,
    lines: FormatterOptions<'_>,
    workers: usize,
    started: impl FnOnce(),
    input: &[u8],
) -> Result<(), Closed> {
    if workers <= 1 || matches!(lines.format, OutputFormat::Text { .. }) {
        started();
        return run_in(staged, chunk_recycle, out, recycle, lines, input);
    }
    let FormatterOptions {
        opts,
        format,
        session,
        context,
        schema,
        filter,
        stacks,
        stack_maps,
        progress,
    } = lines;
    let (parts_tx, parts_rx) = crossbeam_channel::bounded::<Part>(workers * PARTS_IN_FLIGHT);
    // One symbolizer for all the workers: each file's names loaded once.
    let symbols = SharedSymbols::thread();
    thread::scope(|scope| {
        let mut credit_txs = Vec::with_capacity(workers);
        let mut work_txs = Vec::with_capacity(workers);
        let mut spawn_failed = false;
        for id in 0..workers {
            let (credit_tx, credit_rx) = crossbeam_channel::bounded::<()>(PARTS_IN_FLIGHT);
            for _ in 0..PARTS_IN_FLIGHT {
                let _ = credit_tx.send(());
            }
            let (work_tx, work_rx) = crossbeam_channel::bounded::<Work>(WORK_QUEUE);
            let mut core = Core::new(format, opts, context.clone());
            core.schema = schema || session.is_some();
            core.filter = filter.clone();
            core.stacks = stacks.map(|o| stack_writer(o, &stack_maps, id, &symbols));
            let worker = Worker {
                id,
                input,
                core,
                parts: parts_tx.clone(),
                credits: credit_rx,
                pool: recycle.clone(),
                chunk_recycle: chunk_recycle.clone(),
                spare: None,
            };
            let spawned = thread::Builder::new()
                .name(format!("uevrec-format{id}"))
                .spawn_scoped(scope, move || {
                    crate::system::sched::raise_worker_thread();
                    worker.run(work_rx)
                });
            if spawned.is_err() {
                spawn_failed = true;
                break;
            }
            credit_txs.push(credit_tx);
            work_txs.push(work_tx);
        }
        drop(parts_tx);
        let session_line = session.map(|info| {
            let mut w = OutputWriter::new(format, opts);
            let mut line = Vec::new();
            w.write_session(&mut line, Some(info.clock.realtime_ns), info);
            line
        });
        let dropped = filter.map(|f| (f, OutputWriter::new(format, opts)));
        let merged = thread::Builder::new()
            .name("uevrec-order".into())
            .spawn_scoped(scope, move || {
                crate::system::sched::raise_worker_thread();
                merge(parts_rx, credit_txs, out, recycle, session_line, dropped)
            });
        started();
        if spawn_failed || merged.is_err() {
            // Without every thread there is no pipeline: end the session.
            return Err(Closed);
        }
        let described = session.map(|_| Described::default());
        let dispatched = dispatch(staged, &work_txs, described, progress);
        drop(work_txs);
        let merged = merged
            .map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .unwrap_or(Err(Closed));
        dispatched.and(merged)
    })
}

/// The dispatcher of [`run_parallel`]: numbers the items and hands them out. With
/// `progress` (`--instance`'s journal), each chunk goes with the marks of the chunks up
/// to it: the reorder stage lets its lines out after every earlier chunk's, so once they
/// are written, so are the records the marks cover.
fn dispatch(
    staged: Receiver<Staged>,
    work: &[Sender<Work>],
    mut described: Option<Described>,
    mut progress: Option<Progress>,
) -> Result<(), Closed> {
    let mut seq = 0u64;
    let mut turn = 0usize;
    for msg in staged {
        match msg {
            Staged::Format {
                slot,
                prepared,
                source,
            } => {
                let schema = described.as_mut().is_some_and(|d| d.first_time(&source));
                let writer = schema.then(|| pick(work, &mut turn));
                for (i, tx) in work.iter().enumerate() {
                    let msg = Work::Format {
                        slot,
                        prepared: prepared.clone(),
                        schema: (writer == Some(i)).then_some(seq),
                    };
                    tx.send(msg).map_err(|_| Closed)?;
                }
                if schema {
                    seq += 1;
                }
            }
            Staged::Drained(_) => {}
            Staged::Chunk(chunk) => {
                let to = pick(work, &mut turn);
                if chunk.contexts() > 0 {
                    let only = Arc::new(chunk.context_only());
                    for (i, tx) in work.iter().enumerate() {
                        if i != to {
                            tx.send(Work::Context(only.clone())).map_err(|_| Closed)?;
                        }
                    }
                }
                let marks = progress.as_mut().map(|p| {
                    p.pass(chunk.ring_marks());
                    p.snapshot()
                });
                work[to]
                    .send(Work::Chunk { seq, chunk, marks })
                    .map_err(|_| Closed)?;
                seq += 1;
            }
        }
    }
    Ok(())
}

/// The worker with the fewest messages waiting, the first such from `turn` on (which
/// then moves past it).
fn pick(work: &[Sender<Work>], turn: &mut usize) -> usize {
    let n = work.len();
    let best = (0..n)
        .map(|k| (*turn + k) % n)
        .min_by_key(|&i| work[i].len())
        .unwrap_or(0);
    *turn = (best + 1) % n;
    best
}

/// A formatter worker of [`run_parallel`].
struct Worker<'a> {
    id: usize,
    /// Where records staged by where they lie are read.
    input: &'a [u8],
    core: Core,
    parts: Sender<Part>,
    /// One message per part this worker may still send.
    credits: Receiver<()>,
    pool: Receiver<Vec<u8>>,
    chunk_recycle: Sender<Vec<u8>>,
    /// A buffer kept from an item that wrote nothing.
    spare: Option<Vec<u8>>,
}

impl Worker<'_> {
    fn buffer(&mut self) -> Result<Vec<u8>, Closed> {
        if let Some(b) = self.spare.take() {
            return Ok(b);
        }
        // The pool is sized so that this waits only for the writer (see batch_pool).
        let mut b = self.pool.recv().map_err(|_| Closed)?;
        b.clear();
        Ok(b)
    }

    /// Send a part once a credit allows; an empty batch goes as `None` (its buffer kept).
    fn send(
        &mut self,
        seq: u64,
        part: u32,
        last: bool,
        batch: Batch,
        announced: Vec<Announcement>,
    ) -> Result<(), Closed> {
        let batch = if batch.lines.is_empty() {
            self.spare = Some(batch.lines);
            None
        } else {
            Some(batch)
        };
        self.credits.recv().map_err(|_| Closed)?;
        let part = Part {
            seq,
            part,
            last,
            worker: self.id,
            batch,
            announced,
        };
        self.parts.send(part).map_err(|_| Closed)
    }

    fn run(mut self, work: Receiver<Work>) -> Result<(), Closed> {
        // On this thread: its symbolizer is its own.
        if let Some(w) = self.core.stacks.as_mut() {
            w.warm();
        }
        for msg in work {
            match msg {
                Work::Format {
                    slot,
                    prepared,
                    schema,
                } => {
                    if let Some(seq) = schema {
                        let mut lines = self.buffer()?;
                        let now = Some(crate::capture::clock::now_unix_ns());
                        self.core
                            .writer
                            .write_format_schema(&mut lines, now, &prepared);
                        let batch = Batch {
                            lines,
                            records: 0,
                            marks: None,
                        };
                        self.send(seq, 0, true, batch, Vec::new())?;
                    }
                    self.core.set_format(slot, prepared);
                }
                Work::Context(chunk) => self.core.apply_contexts(&chunk),
                Work::Chunk { seq, chunk, marks } => self.chunk(seq, chunk, marks)?,
            }
        }
        Ok(())
    }

    fn chunk(
        &mut self,
        seq: u64,
        chunk: StagedChunk,
        marks: Option<WrittenMarks>,
    ) -> Result<(), Closed> {
        let mut part = 0;
        let mut batch = Batch {
            lines: self.buffer()?,
            records: 0,
            marks: None,
        };
        let mut announced = Vec::new();
        for entry in chunk.entries_in(self.input) {
            batch.records += self.core.entry(&mut batch.lines, entry, &mut announced);
            // With marks, the chunk's lines are one batch: a part written before a kill
            // without them would be written again by the run that adopts.
            if batch.lines.len() >= BATCH_BYTES && marks.is_none() {
                // Sent before the next buffer is taken: a worker waiting for a buffer
                // holds none (what sizes the pool, crate::pipeline::batch_pool).
                let full = std::mem::take(&mut batch);
                self.send(seq, part, false, full, std::mem::take(&mut announced))?;
                part += 1;
                batch.lines = self.buffer()?;
            }
        }
        // OTLP requests end with the chunk (the next one may go to another worker).
        self.core.writer.end_lines(&mut batch.lines);
        batch.marks = marks;
        // The pool channel holds every chunk, so this never waits.
        let _ = self.chunk_recycle.send(chunk.into_buffer());
        self.send(seq, part, true, batch, announced)
    }
}

/// Send `filter`'s `{"uevrec":"dropped"}` lines (those since the last) as a batch of
/// their own, if any.
fn send_dropped(
    filter: &Filter,
    writer: &mut OutputWriter,
    out: &Sender<Batch>,
    recycle: &Receiver<Vec<u8>>,
) -> Result<(), Closed> {
    let mut lines = recycle.recv().map_err(|_| Closed)?;
    lines.clear();
    let now = Some(crate::capture::clock::now_unix_ns());
    filter.write_dropped(writer, &mut lines, now);
    writer.end_lines(&mut lines);
    if !lines.is_empty() {
        out.send(Batch {
            lines,
            records: 0,
            marks: None,
        })
        .map_err(|_| Closed)?;
    }
    Ok(())
}

/// The reorder stage of [`run_parallel`]: the session line first, then the workers'
/// parts in the items' order, each credit given back as its part goes out; with
/// `dropped`, the `{"uevrec":"dropped"}` lines of `--where` last.
fn merge(
    parts: Receiver<Part>,
    credits: Vec<Sender<()>>,
    out: &Sender<Batch>,
    recycle: &Receiver<Vec<u8>>,
    session_line: Option<Vec<u8>>,
    dropped: Option<(Arc<Filter>, OutputWriter)>,
) -> Result<(), Closed> {
    if let Some(line) = session_line {
        let mut lines = recycle.recv().map_err(|_| Closed)?;
        lines.clear();
        lines.extend_from_slice(&line);
        out.send(Batch {
            lines,
            records: 0,
            marks: None,
        })
        .map_err(|_| Closed)?;
    }
    let mut stage = Reorder::default();
    let mut announced = Announced::default();
    let mut dropped = dropped;
    for part in parts.iter() {
        stage.push(part.seq, part.part, part.last, part);
        while let Some(part) = stage.pop() {
            let _ = credits[part.worker].try_send(());
            if let Some(mut batch) = part.batch {
                announced.drop_repeats(&mut batch.lines, &part.announced);
                out.send(batch).map_err(|_| Closed)?;
            }
        }
        if let Some((filter, writer)) = dropped.as_mut().filter(|(f, _)| f.dropped_due()) {
            send_dropped(filter, writer, out, recycle)?;
        }
    }
    // Every worker is done (the parts channel closed): the counts are final.
    if let Some((filter, mut writer)) = dropped {
        send_dropped(&filter, &mut writer, out, recycle)?;
    }
    Ok(())
}

/// This machine's name (`host.name` of OTLP resources), if the kernel says.
pub(crate) fn host_name() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    Some(name.trim().to_string()).filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::staging::{FormatSource, StagedChunk};
    use uevrec_parsers::RecordStamp;
    use uevrec_parsers::parse_format;
    use uevrec_samples::register::format_file_text;

    #[test]
    fn formats_records_losses_and_notices_in_order() {
        let text = format_file_text("e", 7, &[("u32 n", 8, 4, false)], "\"\"");
        let format = parse_format(&text).unwrap();
        let prepared = Arc::new(PreparedFormat::new(&format, "s", "e", None));
        let (stage_tx, stage_rx) = crossbeam_channel::bounded(8);
        let (chunk_tx, chunk_rx) = crossbeam_channel::bounded(8);
        let (out_tx, out_rx) = crossbeam_channel::bounded(8);
        let (_rec_tx, rec_rx) = crossbeam_channel::bounded(8);
        let stamp = RecordStamp {
            time_unix_ns: Some(1_000_000_000),
            cpu: 1,
            pid: 2,
            tid: 3,
        };
        let mut raw = vec![7, 0, 0, 0, 2, 0, 0, 0];
        raw.extend_from_slice(&42u32.to_le_bytes());
        let mut chunk = StagedChunk::default();
        chunk.push_notice(None, "waiting", Some("s:e"), "no \"e\"");
        chunk.push_record(0, &stamp, &raw);
        chunk.push_lost(Some(2_000_000_000), 3, 17);
        chunk.push_record(5, &stamp, &raw);
        let source = Arc::new(FormatSource {
            system: "s".into(),
            name: "e".into(),
            text: String::new(),
        });
        stage_tx
            .send(Staged::Format {
                slot: 0,
                prepared,
                source,
            })
            .unwrap();
        stage_tx.send(Staged::Chunk(chunk)).unwrap();
        drop(stage_tx);
        run(
            stage_rx,
            chunk_tx,
            &out_tx,
            &rec_rx,
            FormatterOptions::default(),
        )
        .unwrap();
        drop(out_tx);
        let text: Vec<u8> = out_rx.iter().flat_map(|b| b.lines).collect();
        let text = String::from_utf8(text).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        // Byte for byte what the session used to write itself.
        let mut w = uevrec_parsers::LineWriter::new(LineOptions::default());
        let mut expected = Vec::new();
        w.write_notice(&mut expected, None, "waiting", Some("s:e"), "no \"e\"");
        assert_eq!(format!("{}\n", lines[0]).as_bytes(), expected);
        assert_eq!(
            lines[1],
            "{\"time\":\"1970-01-01T00:00:01.000000000Z\",\"system\":\"s\",\"event\":\"e\",\
             \"cpu\":1,\"pid\":2,\"tid\":3,\"fields\":{\"n\":42}}"
        );
        expected.clear();
        w.write_lost(&mut expected, Some(2_000_000_000), 3, 17);
        assert_eq!(format!("{}\n", lines[2]).as_bytes(), expected);
        assert!(
            lines[3].contains("\"what\":\"internal_error\""),
            "{}",
            lines[3]
        );
        assert!(lines[3].contains("slot 5"), "{}", lines[3]);
        // The chunk's buffer came back.
        assert!(chunk_rx.try_recv().is_ok());
    }

    /// A staged stream as a session sends it: formats (one slot reused for another
    /// event), records of both, context changes, losses and notices, over `chunks`
    /// chunks of a few hundred entries (some chunks past [`BATCH_BYTES`] of lines).
    fn staged_stream(chunks: usize) -> Vec<Staged> {
        use uevrec_parsers::ContextUpdate;
        let format = |name: &str, id: u32| {
            let text = format_file_text(name, id, &[("u32 n", 8, 4, false)], "\"\"");
            let format = parse_format(&text).unwrap();
            let prepared = Arc::new(PreparedFormat::new(&format, "s", name, None));
            let source = Arc::new(FormatSource {
                system: "s".into(),
                name: name.into(),
                text,
            });
            (prepared, source)
        };
        let mut out = Vec::new();
        let mut n = 0u32;
        for c in 0..chunks {
            if c % 7 == 0 {
                let (prepared, source) = format(if c % 14 == 0 { "a" } else { "b" }, 7);
                out.push(Staged::Format {
                    slot: 0,
                    prepared,
                    source,
                });
            }
            if c == 3 {
                let (prepared, source) = format("c", 9);
                out.push(Staged::Format {
                    slot: 1,
                    prepared,
                    source,
                });
            }
            let mut chunk = StagedChunk::default();
            let records: u64 = if c % 5 == 4 { 4000 } else { 300 };
            for i in 0..records {
                n += 1;
                let tid = 100 + (n % 13);
                if i % 97 == 0 {
                    let comm = format!("t{}-{c}", tid);
                    let update = ContextUpdate::Comm {
                        tid,
                        comm: comm.as_bytes(),
                    };
                    chunk.push_context(Some(u64::from(n)), &update);
                }
                let stamp = RecordStamp {
                    time_unix_ns: Some(1_000_000_000 + u64::from(n)),
                    cpu: n % 3,
                    pid: tid,
                    tid,
                };
                let mut raw = vec![7, 0, 0, 0];
                raw.extend_from_slice(&tid.to_le_bytes());
                raw.extend_from_slice(&n.to_le_bytes());
                let slot = if c >= 3 && i % 3 == 0 { 1 } else { 0 };
                chunk.push_record(slot, &stamp, &raw);
                // Where CPU n % 3's ring records end (`--instance`'s marks): at n.
                chunk.note_ring(n % 3, u64::from(n));
                if i % 1000 == 999 {
                    chunk.push_lost(Some(u64::from(n)), n % 3, i);
                    chunk.push_notice(None, "note", Some("s:a"), "words");
                }
            }
            out.push(Staged::Chunk(chunk));
            out.push(Staged::Drained(u64::from(n)));
        }
        out
    }

    /// The channels around [`run_parallel`] with `workers`: `stream` staged (its channel
    /// closed), the chunk pool's return, the batches, and the line pool filled.
    #[allow(clippy::type_complexity)]
    fn piped(
        stream: Vec<Staged>,
        workers: usize,
    ) -> (
        Receiver<Staged>,
        Sender<Vec<u8>>,
        (Sender<Batch>, Receiver<Batch>),
        (Sender<Vec<u8>>, Receiver<Vec<u8>>),
    ) {
        let pool = crate::pipeline::batch_pool(workers);
        let (stage_tx, stage_rx) = crossbeam_channel::bounded(stream.len() + 1);
        let (chunk_tx, _) = crossbeam_channel::unbounded();
        let (rec_tx, rec_rx) = crossbeam_channel::bounded(pool);
        for b in crate::capture::staging::touched_buffers(pool, 16) {
            rec_tx.send(b).unwrap();
        }
        for msg in stream {
            stage_tx.send(msg).unwrap();
        }
        (
            stage_rx,
            chunk_tx,
            crossbeam_channel::bounded::<Batch>(8),
            (rec_tx, rec_rx),
        )
    }

    /// `stream` through [`run_parallel`] with `workers`: the bytes written, schema lines'
    /// `time` (the moment they are written) left out.
    fn formatted(stream: Vec<Staged>, workers: usize, session: Option<&SessionInfo>) -> String {
        formatted_slowly(stream, workers, session, std::time::Duration::ZERO)
    }

    /// [`formatted`] by a writer that takes `delay` per batch.
    fn formatted_slowly(
        stream: Vec<Staged>,
        workers: usize,
        session: Option<&SessionInfo>,
        delay: std::time::Duration,
    ) -> String {
        formatted_as(stream, workers, session, delay, OutputFormat::JsonLines)
    }

    /// [`formatted_slowly`] in `format`.
    fn formatted_as(
        stream: Vec<Staged>,
        workers: usize,
        session: Option<&SessionInfo>,
        delay: std::time::Duration,
        format: OutputFormat,
    ) -> String {
        let (stage_rx, chunk_tx, (out_tx, out_rx), (rec_tx, rec_rx)) = piped(stream, workers);
        let text = thread::scope(|s| {
            let writer = s.spawn(move || {
                let mut all = Vec::new();
                for mut b in out_rx.iter() {
                    thread::sleep(delay);
                    all.extend_from_slice(&b.lines);
                    b.lines.clear();
                    let _ = rec_tx.try_send(b.lines);
                }
                all
            });
            let lines = FormatterOptions {
                opts: LineOptions::default(),
                format,
                session,
                context: Some(ContextTracker::new()),
                schema: false,
                filter: None,
                stacks: None,
                stack_maps: None,
                progress: None,
            };
            let mut called = false;
            run_parallel(stage_rx, chunk_tx, &out_tx, &rec_rx, lines, workers, || {
                called = true
            })
            .unwrap();
            assert!(called, "started() was called");
            drop(out_tx);
            writer.join().unwrap()
        });
        let text = String::from_utf8(text).unwrap();
        text.lines()
            .map(|l| {
                if l.contains("\"uevrec\":\"schema\"") {
                    let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                    v.as_object_mut().unwrap().remove("time");
                    v.to_string()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn workers_write_what_one_formatter_writes() {
        let info = crate::pipeline::describe::session_info(&Default::default());
        for session in [None, Some(&info)] {
            let one = formatted(staged_stream(40), 1, session);
            assert!(one.lines().count() > 30_000, "{}", one.lines().count());
            assert!(one.contains("\"comm\":\"t"), "context keys are written");
            let schemas = one.matches("\"uevrec\":\"schema\"").count();
            // a, b, c: each described once (a and b attach again and again).
            assert_eq!(schemas, if session.is_some() { 3 } else { 0 });
            for workers in [2, 3, 5] {
                let many = formatted(staged_stream(40), workers, session);
                if many != one {
                    let (a, b): (Vec<&str>, Vec<&str>) =
                        (one.lines().collect(), many.lines().collect());
                    let at = a
                        .iter()
                        .zip(&b)
                        .position(|(x, y)| x != y)
                        .unwrap_or(a.len().min(b.len()));
                    panic!(
                        "{workers} workers differ from one at line {at} of {}/{}:\n{:?}\n{:?}",
                        a.len(),
                        b.len(),
                        a.get(at),
                        b.get(at)
                    );
                }
            }
        }
    }

    /// `--format otlp` on workers: the same log records as one formatter, each resource's
    /// and scope's (a request groups its records by them) in the same order, with each
    /// worker's requests cut at the end of its chunks.
    #[test]
    fn otlp_workers_write_the_records_one_formatter_writes() {
        use std::collections::BTreeMap;
        let records = |text: &str| -> BTreeMap<String, Vec<serde_json::Value>> {
            let mut out: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
            for line in text.lines() {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                for r in v["resourceLogs"].as_array().into_iter().flatten() {
                    for s in r["scopeLogs"].as_array().into_iter().flatten() {
                        let key = format!("{} {}", r["resource"], s["scope"]);
                        let group = out.entry(key).or_default();
                        group.extend(s["logRecords"].as_array().into_iter().flatten().cloned());
                    }
                }
            }
            out
        };
        let zero = std::time::Duration::ZERO;
        let one = formatted_as(staged_stream(40), 1, None, zero, OutputFormat::Otlp);
        let one = records(&one);
        let total: usize = one.values().map(Vec::len).sum();
        assert!(total > 30_000 && one.len() >= 2, "{total} in {}", one.len());
        for workers in [2, 3] {
            let text = formatted_as(staged_stream(40), workers, None, zero, OutputFormat::Otlp);
            let many = records(&text);
            assert_eq!(
                many.keys().collect::<Vec<_>>(),
                one.keys().collect::<Vec<_>>()
            );
            for (resource, want) in &one {
                let got = &many[resource];
                assert_eq!(got.len(), want.len(), "{workers} workers, {resource}");
                if let Some(at) = want.iter().zip(got).position(|(a, b)| a != b) {
                    panic!(
                        "{workers} workers, {resource}, record {at}: {} / {}",
                        want[at], got[at]
                    );
                }
            }
        }
    }

    /// `--instance`'s marks with one formatter and with workers: whenever the writer
    /// publishes a batch's marks, every record they cover is in the lines written so far
    /// (a kill then loses nothing the journal let go), and at the end they cover all.
    #[test]
    fn marks_published_never_cover_a_record_not_written() {
        use crate::capture::staging::written::{Progress, Written};
        let dir = tempfile::tempdir().unwrap();
        for workers in [1, 2, 3] {
            let written =
                Arc::new(Written::open(&dir.path().join(format!("w{workers}")), 3).unwrap());
            let (stage_rx, chunk_tx, (out_tx, out_rx), (rec_tx, rec_rx)) =
                piped(staged_stream(40), workers);
            let marks = Arc::clone(&written);
            let (n_max, published) = thread::scope(|s| {
                let writer = s.spawn(move || {
                    let mut seen = std::collections::HashSet::new();
                    let mut published = 0;
                    for mut b in out_rx.iter() {
                        let text = std::str::from_utf8(&b.lines).unwrap();
                        for line in text.lines() {
                            if let Some(at) = line.find("\"n\":") {
                                let digits: String = line[at + 4..]
                                    .chars()
                                    .take_while(char::is_ascii_digit)
                                    .collect();
                                seen.insert(digits.parse::<u64>().unwrap());
                            }
                        }
                        if let Some(m) = b.marks.take() {
                            m.publish();
                            published += 1;
                            for cpu in 0..3u32 {
                                let upto = marks.mark(cpu).time;
                                let missing = (1..=upto)
                                    .filter(|n| n % 3 == u64::from(cpu))
                                    .find(|n| !seen.contains(n));
                                assert_eq!(missing, None, "{workers} workers, CPU {cpu}");
                            }
                        }
                        b.lines.clear();
                        let _ = rec_tx.try_send(b.lines);
                    }
                    (seen.iter().copied().max().unwrap(), published)
                });
                let lines = FormatterOptions {
                    context: Some(ContextTracker::new()),
                    progress: Some(Progress::new(Arc::clone(&written))),
                    ..FormatterOptions::default()
                };
                run_parallel(stage_rx, chunk_tx, &out_tx, &rec_rx, lines, workers, || {}).unwrap();
                drop(out_tx);
                writer.join().unwrap()
            });
            assert!(
                published > 1,
                "{workers} workers: {published} batches with marks"
            );
            for cpu in 0..3u32 {
                let last = (1..=n_max).rev().find(|n| n % 3 == u64::from(cpu)).unwrap();
                assert_eq!(written.mark(cpu).time, last, "{workers} workers, CPU {cpu}");
            }
        }
    }

    /// A writer slower than the workers (the line buffers wait for it and for their turn
    /// in the reorder stage): the pipeline still ends, with the lines one formatter
    /// writes.
    #[test]
    fn a_slow_writer_gets_every_line_in_order() {
        let (done_tx, done_rx) = crossbeam_channel::bounded(1);
        thread::spawn(move || {
            let delay = std::time::Duration::from_millis(2);
            let _ = done_tx.send(formatted_slowly(staged_stream(30), 3, None, delay));
        });
        let many = done_rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("the pipeline finished (no deadlock)");
        assert!(many == formatted(staged_stream(30), 1, None));
    }

    #[test]
    fn repeated_announcements_are_cut() {
        let line = |t: u32, meta: &str| {
            format!("{{\"uevrec\":\"schema\",\"time\":{t},\"metadata\":\"{meta}\"}}\n")
        };
        let (a1, a2, b) = (line(1, "aa"), line(2, "aa"), line(3, "bb"));
        assert_eq!(metadata_key(a1.as_bytes()), metadata_key(a2.as_bytes()));
        assert_ne!(metadata_key(a1.as_bytes()), metadata_key(b.as_bytes()));
        let mut seen = Announced::default();
        let mut batch = Vec::new();
        let mut announced = Vec::new();
        for l in [&a1, &a2, &b] {
            let start = batch.len();
            batch.extend_from_slice(l.as_bytes());
            let key = metadata_key(l.as_bytes());
            announced.push(Announcement {
                start,
                len: l.len(),
                key,
            });
            batch.extend_from_slice(b"{\"record\":1}\n");
        }
        seen.drop_repeats(&mut batch, &announced);
        let expected = format!("{a1}{{\"record\":1}}\n{{\"record\":1}}\n{b}{{\"record\":1}}\n");
        assert_eq!(String::from_utf8(batch).unwrap(), expected);
    }

    #[test]
    fn a_closed_writer_ends_it() {
        let (stage_tx, stage_rx) = crossbeam_channel::bounded(8);
        let (chunk_tx, _chunk_rx) = crossbeam_channel::bounded(8);
        let (out_tx, out_rx) = crossbeam_channel::bounded(8);
        let (_rec_tx, rec_rx) = crossbeam_channel::bounded(8);
        drop(out_rx);
        let mut chunk = StagedChunk::default();
        chunk.push_notice(None, "waiting", None, "");
        stage_tx.send(Staged::Chunk(chunk)).unwrap();
        assert!(
            run(
                stage_rx,
                chunk_tx,
                &out_tx,
                &rec_rx,
                FormatterOptions::default(),
            )
            .is_err()
        );
    }
}
