//! `--threads` ≥ 2: the writer thread ([`with_output`]) and the formatter workers fed
//! by a [`RecordSink`] that stages the decoder's records ([`staged`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_channel::{Receiver, Sender};
use uevrec_parsers::callchain::Callchain;
use uevrec_parsers::to_lines::DecodeOptions;
use uevrec_parsers::user_stack::UserStack;
use uevrec_parsers::{
    ContextTracker, ContextUpdate, LineOptions, OutputFormat, PreparedFormat, RecordSink,
    RecordStamp,
};

use super::{Flush, Output};
use crate::capture::staging::{
    FormatSource, STAGE_BYTES, STAGE_CAPACITY, STAGE_CHUNKS, StageSender, Staged, StagedChunk,
    touched_buffers,
};
use crate::outputs::sink::{SinkError, write_batches};
use crate::pipeline::formatter::{self, FormatterOptions};
use crate::pipeline::stacks::StackOptions;
use crate::pipeline::{BATCH_CAPACITY, Batch, CHANNEL_BATCHES, batch_pool};

/// Buffers of lines between the decoding thread and the writer (`--threads` ≥ 2): those
/// in the channel, the writer's and the one being filled.
pub(crate) const WRITE_POOL: usize = CHANNEL_BATCHES + 2;

/// Buffers the writer may give back beyond the pool (range decoding's).
const RECYCLE_EXTRA: usize = 1024;

/// Run `decode(flush, par)` with `flush` writing to `output`'s sink: on this thread, or
/// (`threads` ≥ 2) handing copies of the lines to a writer thread
/// ([`crate::outputs::sink::write_batches`], a fixed pool of [`crate::pipeline::batch_pool`]
/// buffers) so that the writes (the kernel's copy into the file: a third to a half of the
/// time on tmpfs) overlap the decoding; `par` then lets formatter workers fill those
/// buffers instead ([`staged`]). The same bytes in the same order either way.
pub(crate) fn with_output<T>(
    output: &mut Output,
    threads: usize,
    range_bytes: Option<usize>,
    decode: impl FnOnce(&mut Flush<'_>, Option<&Par<'_>>) -> T,
) -> T {
    if threads < 2 {
        let mut flush = |lines: &[u8]| output.write(lines);
        return decode(&mut flush, None);
    }
    let pool = WRITE_POOL.max(batch_pool(threads));
    let (tx, rx) = crossbeam_channel::bounded::<Batch>(CHANNEL_BATCHES);
    // Room for more than the pool: range decoding ([`super::ranges`]) holds more
    // buffers at a time (the lines of ranges not yet due), and each one given back is
    // one that need not be made from fresh pages.
    let (recycle_tx, recycle_rx) = crossbeam_channel::bounded::<Vec<u8>>(pool + RECYCLE_EXTRA);
    for buffer in touched_buffers(pool, BATCH_CAPACITY) {
        let _ = recycle_tx.send(buffer);
    }
    let give_back = recycle_tx.clone();
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
                give_back: &give_back,
                workers: threads,
                range_bytes,
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
                    marks: None,
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

/// The line buffers of a writer thread, for formatter workers to fill (`--threads` ≥ 2
/// and JSON lines: the decoder stages its records, [`staged`]).
pub(crate) struct Par<'a> {
    pub(super) out: &'a Sender<Batch>,
    pub(super) recycle: &'a Receiver<Vec<u8>>,
    /// Where buffers taken from `recycle` and not handed to the writer go back (a
    /// decoding that stops its workers early drops their lines): the one-thread flush
    /// waits on `recycle`, so every buffer taken must come back one way or the other.
    pub(super) give_back: &'a Sender<Vec<u8>>,
    pub(super) workers: usize,
    /// Bytes of records per range, when a whole perf.data is decoded in ranges
    /// ([`super::ranges`], `--range-size`).
    pub(super) range_bytes: Option<usize>,
}

/// Lines handed to `par`'s writer in whole buffers, in order (the forwarders of ranges
/// and windows of time): the bytes it took, and whether it took every buffer (the first
/// refusal, a writer that stopped, ends the sending).
pub(crate) struct Handed<'p> {
    par: &'p Par<'p>,
    /// Bytes of lines the writer took.
    pub(crate) bytes: u64,
    /// The writer took everything so far.
    pub(crate) whole: bool,
}

impl<'p> Handed<'p> {
    /// Nothing handed yet.
    pub(crate) fn new(par: &'p Par<'p>) -> Self {
        Handed {
            par,
            bytes: 0,
            whole: true,
        }
    }

    /// Hand `lines` to the writer (while it takes them).
    pub(crate) fn send(&mut self, lines: Vec<u8>) {
        if self.whole && !lines.is_empty() {
            self.bytes += lines.len() as u64;
            self.whole = self
                .par
                .out
                .send(Batch {
                    lines,
                    records: 0,
                    marks: None,
                })
                .is_ok();
        }
    }

    /// A buffer of lines that will not be written: back into the pool ([`Par::give_back`]).
    pub(crate) fn give_back(&self, lines: Vec<u8>) {
        let _ = self.par.give_back.try_send(lines);
    }
}

/// A worker's lines in `buf`, taken whole, leaving in `buf` an empty buffer from the
/// writer's `recycle` pool (a new one when it has none): the worker goes on in memory
/// already touched, and nothing is copied.
pub(crate) fn take_lines(buf: &mut Vec<u8>, recycle: &Receiver<Vec<u8>>) -> Vec<u8> {
    let mut next = recycle
        .try_recv()
        .unwrap_or_else(|_| Vec::with_capacity(BATCH_CAPACITY));
    next.clear();
    std::mem::swap(buf, &mut next);
    next
}

/// `flush` without the first `skip` bytes of what it is given: a decoding again from the
/// start that writes only past what was written before it.
pub(crate) fn past<'f>(mut skip: u64, flush: &'f mut Flush<'_>) -> impl FnMut(&[u8]) -> bool + 'f {
    move |lines: &[u8]| {
        let at = usize::try_from(skip).unwrap_or(usize::MAX).min(lines.len());
        skip -= at as u64;
        flush(&lines[at..])
    }
}

/// What the workers of a decoding write: `opts`' lines, values in `endian` order.
pub(crate) fn par_lines(
    opts: DecodeOptions,
    endian: uevrec_parsers::Endian,
    context: Option<ContextTracker>,
) -> FormatterOptions<'static> {
    FormatterOptions {
        opts: LineOptions {
            include_common: opts.include_common,
            endian,
        },
        format: OutputFormat::JsonLines,
        session: None,
        context: context.filter(|_| opts.context),
        schema: opts.schema,
        filter: None,
        stacks: stack_options(opts),
        stack_maps: None,
        progress: None,
    }
}

/// How the stacks of a decoded file are named ([`DecodeOptions::stacks`]; `symbolize`:
/// not `--no-symbolize`), or `None` without stacks.
pub(crate) fn stack_options(opts: DecodeOptions) -> Option<StackOptions> {
    (opts.stacks && opts.format == OutputFormat::JsonLines).then_some(StackOptions {
        symbolize: opts.symbolize_stacks,
        offline: true,
        // A recorded chain is as long as the kernel made it; no stack copies are unwound.
        max_frames: usize::MAX,
        ids: opts.stack_ids,
        warm: false,
        kernel_frames: false,
    })
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
pub(crate) fn staged<T>(
    par: &Par<'_>,
    lines: FormatterOptions<'_>,
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
pub(crate) struct StageSink<'a> {
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
        stack: Option<Callchain<'_>>,
        user_stack: Option<UserStack<'_>>,
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
        match (stack, offset_in(self.input, raw)) {
            // The chain, the user stack copy and the entry are copied (a staged reference
            // holds one part).
            (Some(stack), _) => {
                chunk.push_record_stacked(slot, stamp, cgroup, Some(stack), user_stack, raw)
            }
            (None, Some((offset, len))) => chunk.push_record_at(slot, stamp, cgroup, offset, len),
            (None, None) => chunk.push_record_in(slot, stamp, cgroup, raw),
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
pub(crate) fn offset_in(input: &[u8], part: &[u8]) -> Option<(u64, u32)> {
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
