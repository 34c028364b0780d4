//! The types that flow between the recording threads.
//!
//! The threads and the channels between them are drawn once, in [`crate::recorder`]:
//! the session thread copies each ring record's trace entry with its stamp into a
//! [`StagedChunk`] from a fixed pool (STAGE_CHUNKS buffers of STAGE_CAPACITY bytes,
//! allocated and touched at start); the formatter turns chunks into [`Batch`]es of lines
//! (CHANNEL_BATCHES × BATCH_BYTES) for the writer.
//!
//! Both stages are bounded: when the formatter is behind by the whole chunk pool, or the
//! writer by CHANNEL_BATCHES, the session thread waits, the rings fill and the kernel
//! counts LOST records, which become `{"uevrec":"lost"}` lines; nothing is dropped
//! silently. Empty buffers travel back on recycle channels, so no per-event allocation.
//! The buffer pools are touched up front, so uevrec's memory does not depend on how far
//! the formatter or writer ever fell behind (peak RSS is the same for 1 M or 10 M
//! events).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_channel::{Receiver, Sender};

use uevrec_parsers::{ContextUpdate, PreparedFormat, RecordStamp};

/// A run of complete JSON lines (each ends with `\n`; a batch never ends mid-line).
#[derive(Debug, Default)]
pub struct Batch {
    /// The bytes of the lines.
    pub lines: Vec<u8>,
    /// How many of them are event records (not lost/notice lines).
    pub records: u64,
}

/// Bytes of JSON lines a batch collects before it is sent on.
pub const BATCH_BYTES: usize = 256 * 1024;

/// Bytes allocated per batch buffer: [`BATCH_BYTES`] plus room for the line that
/// passes it.
pub const BATCH_CAPACITY: usize = BATCH_BYTES + 64 * 1024;

/// How many batches may wait for the writer. The raw staging below absorbs longer
/// stalls (raw records take half the bytes of their lines).
pub const CHANNEL_BATCHES: usize = 8;

/// Line buffers the CLI gives the formatter, touched at start like the chunk pool: the
/// channel's, the writer's and the formatter's.
pub const BATCH_POOL: usize = CHANNEL_BATCHES + 2;

/// `n` buffers of `capacity` bytes whose pages are all mapped now (filled with a
/// non-zero byte: zeroed memory comes from calloc as pages the kernel maps only when
/// first written), so memory use is fixed from the start.
pub fn touched_buffers(n: usize, capacity: usize) -> impl Iterator<Item = Vec<u8>> {
    (0..n).map(move |_| vec![0xa5; capacity])
}

/// Bytes of staged records a chunk collects before the session sends it on.
pub const STAGE_BYTES: usize = 192 * 1024;

/// Bytes allocated per chunk: [`STAGE_BYTES`] plus room for the one record (< 64 KiB,
/// perf's record size is a u16) and header that may pass it.
pub const STAGE_CAPACITY: usize = STAGE_BYTES + 64 * 1024 + 64;

/// Chunks in the pool: 32 × 256 KiB = 8 MiB allocated, of which the chunks fill 6 MiB
/// ([`STAGE_BYTES`] each) before they are sent: ≈ 65 k sys_enter records (96 bytes
/// staged each) absorb a burst the formatter cannot follow at once, as perf record's
/// output file does for perf.
pub const STAGE_CHUNKS: usize = 32;

/// What the session sends the formatter, in order.
#[derive(Debug)]
pub enum Staged {
    /// Records, losses and notices.
    Chunk(StagedChunk),
    /// From now on, records of `slot` have this format (sent when an event attaches,
    /// before any of its records).
    Format {
        /// The session's event slot.
        slot: u32,
        /// The format with its JSON keys rendered.
        prepared: Arc<PreparedFormat>,
        /// The event's system, name and format file text (what `record --raw` stores).
        source: Arc<FormatSource>,
    },
    /// Every record written before this time (Unix ns) was sent before this message: a
    /// pass over every buffer that began then read each one to its end. Sent after each
    /// such pass; the flight recorder cuts its dumps by time with it (crate::flight),
    /// the other consumers ignore it.
    Drained(u64),
}

/// An attached event as tracefs described it: what a raw output (perf.data) stores so
/// that readers can decode its records later.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FormatSource {
    /// The tracefs system (`sched`, `user_events`, `user_events_multi` …).
    pub system: String,
    /// The tracefs event name (multi-format versions with their `.<id>` suffix).
    pub name: String,
    /// The text of `events/<system>/<name>/format`, as read when the event attached.
    pub text: String,
}

/// The next thread down the pipeline went away (its channel is closed).
#[derive(Debug)]
pub struct Closed;

/// The session's end of the staging channel: sends [`Staged`] messages to the formatter
/// thread and takes empty chunks from the pool it returns them to.
#[derive(Debug)]
pub struct StageSender<'a> {
    stage: Sender<Staged>,
    pool: Receiver<Vec<u8>>,
    /// Set when the formatter thread has returned (the writer went away): checked once
    /// per loop, so an idle session ends without waiting for a record to send.
    formatter_gone: &'a AtomicBool,
}

impl<'a> StageSender<'a> {
    /// The session's end of a staging channel: `stage` to the formatter, `pool` of empty
    /// chunk buffers back from it, `formatter_gone` set when the formatter returned.
    pub fn new(
        stage: Sender<Staged>,
        pool: Receiver<Vec<u8>>,
        formatter_gone: &'a AtomicBool,
    ) -> Self {
        StageSender {
            stage,
            pool,
            formatter_gone,
        }
    }

    /// An empty chunk from the pool; waits while every chunk is with the formatter
    /// (this is the back-pressure), `Err` once the formatter is gone.
    pub fn fresh_chunk(&self) -> Result<StagedChunk, Closed> {
        let buffer = self.pool.recv().map_err(|_| Closed)?;
        Ok(StagedChunk::with_buffer(buffer))
    }

    /// Send `chunk` if it has anything, leaving a fresh one in its place.
    pub fn flush(&self, chunk: &mut StagedChunk) -> Result<(), Closed> {
        if chunk.is_empty() {
            return Ok(());
        }
        let full = std::mem::take(chunk);
        self.stage.send(Staged::Chunk(full)).map_err(|_| Closed)?;
        *chunk = self.fresh_chunk()?;
        Ok(())
    }

    /// Say that every record written before `before_unix_ns` was sent
    /// ([`Staged::Drained`]).
    pub fn drained(&self, before_unix_ns: u64) -> Result<(), Closed> {
        self.stage
            .send(Staged::Drained(before_unix_ns))
            .map_err(|_| Closed)
    }

    /// Chunks sent and not yet taken by the formatter (the stage's occupancy).
    pub fn queued(&self) -> usize {
        self.stage.len()
    }

    /// `Err` once the formatter is gone.
    pub fn check(&self) -> Result<(), Closed> {
        if self.formatter_gone.load(Ordering::Acquire) {
            Err(Closed)
        } else {
            Ok(())
        }
    }

    /// Tell the formatter the format of `slot`'s records, after everything staged so far
    /// (so records of an event that had the slot before are not formatted with it).
    pub fn format(
        &self,
        chunk: &mut StagedChunk,
        slot: usize,
        prepared: Arc<PreparedFormat>,
        source: Arc<FormatSource>,
    ) -> Result<(), Closed> {
        self.flush(chunk)?;
        let slot = u32::try_from(slot).map_err(|_| Closed)?;
        self.stage
            .send(Staged::Format {
                slot,
                prepared,
                source,
            })
            .map_err(|_| Closed)
    }
}

/// `slot` value of a notice entry (not a record).
const NOTICE: u32 = u32::MAX;
/// `slot` value of a lost-records entry (not a record).
const LOST: u32 = u32::MAX - 1;
/// `slot` value of a context entry (who is who: [`ContextUpdate`]).
const CONTEXT: u32 = u32::MAX - 2;
/// `slot` value of a schema entry (an event's schema line goes here: `uevrec decode`).
const SCHEMA: u32 = u32::MAX - 3;
/// Bit of an entry's flags word: the entry has a time (every u64 is a valid time, so
/// "none" cannot be a sentinel value).
const HAS_TIME: u32 = 1;
/// Bit of a record entry's flags word: the body starts with the sample's cgroup id
/// (u64), then the trace entry.
const HAS_CGROUP: u32 = 2;
/// Flag: the record's trace entry is not staged but named by where it lies in the input
/// the decoder reads (`uevrec decode --threads`: a mapped file): the body (after the
/// cgroup id, if any) is its offset (`u64`) and length (`u32`) there.
const HAS_REF: u32 = 4;
/// Body bytes of a [`HAS_REF`] record (besides the cgroup id).
const REF_BODY: usize = 12;
/// Bytes of an entry's header: slot, cpu, pid, tid, length, flags (u32 each), time (u64).
const HEADER: usize = 32;
/// A notice body's event length when it names no event.
const NO_EVENT: u32 = u32::MAX;

/// Staged entries back to back, each behind a `HEADER`-byte header in native byte
/// order: a record (its event slot, stamp and raw trace entry), a count of lost records,
/// or a notice (what, event and message as text). The formatter renders all of them;
/// the session writes no JSON. Private to the process: written and read only by this
/// module.
#[derive(Debug, Default)]
pub struct StagedChunk {
    bytes: Vec<u8>,
    records: u64,
    /// Bytes staged when the last pass over every buffer ended in this chunk (see
    /// [`StagedChunk::mark_round_end`]).
    round_end: Option<usize>,
    /// Context entries held (the parallel formatter replicates them to every worker).
    contexts: u32,
}

/// One entry of a [`StagedChunk`].
#[derive(Debug, PartialEq, Eq)]
pub enum StagedEntry<'a> {
    /// An event record.
    Record {
        /// The session's event slot (see [`Staged::Format`]).
        slot: u32,
        /// Time, CPU, pid and tid of the sample.
        stamp: RecordStamp,
        /// The cgroup id the sample carried (`PERF_SAMPLE_CGROUP`), if any.
        cgroup: Option<u64>,
        /// The trace entry (common fields first).
        raw: &'a [u8],
    },
    /// Who is who changed (a thread's name, a new thread, a cgroup's path …): the
    /// formatter's [`uevrec_parsers::ContextTracker`] takes it.
    Context {
        /// When (Unix ns), if known.
        time_unix_ns: Option<u64>,
        /// The change.
        update: ContextUpdate<'a>,
    },
    /// The kernel lost records on a CPU's ring (a `{"uevrec":"lost"}` line).
    Lost {
        /// When (Unix ns), if known.
        time_unix_ns: Option<u64>,
        /// The CPU whose ring lost them.
        cpu: u32,
        /// How many.
        lost: u64,
    },
    /// The `{"uevrec":"schema"}` line of the event in `slot` goes here (the decoders of
    /// files write it before an event's first record: `uevrec decode --threads`).
    Schema {
        /// The event's slot.
        slot: u32,
        /// The time of the line (its record's), if known.
        time_unix_ns: Option<u64>,
    },
    /// Something the session says (a `{"uevrec":"notice"}` line).
    Notice {
        /// When (Unix ns), if known.
        time_unix_ns: Option<u64>,
        /// What happened (`attached`, `skipped` …).
        what: &'a str,
        /// The event concerned, if any (`system:event`).
        event: Option<&'a str>,
        /// The words.
        message: &'a str,
    },
}

/// A stamp with only a time (the header of a lost or notice entry).
fn time_only(time_unix_ns: Option<u64>, cpu: u32) -> RecordStamp {
    RecordStamp {
        time_unix_ns,
        cpu,
        pid: 0,
        tid: 0,
    }
}

/// A length as stored in a header or notice body. Entries come from the ring (< 64 KiB)
/// or from the session's own short texts; a u32 cannot overflow, but clamp rather than
/// trust that.
fn len32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

impl StagedChunk {
    /// An empty chunk reusing `bytes`' allocation.
    pub fn with_buffer(mut bytes: Vec<u8>) -> Self {
        bytes.clear();
        StagedChunk {
            bytes,
            records: 0,
            round_end: None,
            contexts: 0,
        }
    }

    /// Note that a pass over every buffer ends here: records staged after this point
    /// were read later than all before it (perf's `FINISHED_ROUND`, which `record --raw`
    /// writes so readers can sort by time in bounded windows). An empty chunk keeps no
    /// mark: leaving out a round end is always safe, placing one late is not.
    pub fn mark_round_end(&mut self) {
        if !self.bytes.is_empty() {
            self.round_end = Some(self.bytes.len());
        }
    }

    /// The entries up to the last round end, and those after it (`None` when no round
    /// ended in this chunk: all entries are in the first part).
    pub fn split_at_round(&self) -> (StagedEntries<'_>, Option<StagedEntries<'_>>) {
        match self.round_end {
            Some(end) => {
                let (before, after) = self.bytes.split_at(end.min(self.bytes.len()));
                (
                    StagedEntries {
                        rest: before,
                        input: &[],
                    },
                    Some(StagedEntries {
                        rest: after,
                        input: &[],
                    }),
                )
            }
            None => (self.entries(), None),
        }
    }

    /// Bytes held.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the chunk holds nothing.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Event records held.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Context entries held ([`StagedEntry::Context`]).
    pub fn contexts(&self) -> u32 {
        self.contexts
    }

    /// A chunk of this one's context entries only, in order (what a formatter worker
    /// that does not format this chunk applies to its own tracker).
    pub fn context_only(&self) -> StagedChunk {
        let mut only = StagedChunk::default();
        for e in self.encoded().filter(EncodedEntry::is_context) {
            only.push_encoded(e);
        }
        only
    }

    /// Give back the buffer (for reuse).
    pub fn into_buffer(self) -> Vec<u8> {
        self.bytes
    }

    fn header(&mut self, slot: u32, stamp: &RecordStamp, len: usize, extra_flags: u32) {
        let flags = extra_flags
            | if stamp.time_unix_ns.is_some() {
                HAS_TIME
            } else {
                0
            };
        // Assembled on the stack and appended at once: one capacity check per entry
        // instead of seven (the session stages every record through here).
        let mut h = [0u8; HEADER];
        let words = [slot, stamp.cpu, stamp.pid, stamp.tid, len32(len), flags];
        for (dst, w) in h.chunks_exact_mut(4).zip(words) {
            dst.copy_from_slice(&w.to_ne_bytes());
        }
        h[24..].copy_from_slice(&stamp.time_unix_ns.unwrap_or(0).to_ne_bytes());
        self.bytes.extend_from_slice(&h);
    }

    /// Append a record of the event in `slot` (`slot` < `u32::MAX - 2`).
    pub fn push_record(&mut self, slot: u32, stamp: &RecordStamp, raw: &[u8]) {
        self.push_record_in(slot, stamp, None, raw);
    }

    /// [`StagedChunk::push_record`] with the cgroup id the sample carried, if any (8
    /// more bytes staged only when there is one).
    pub fn push_record_in(
        &mut self,
        slot: u32,
        stamp: &RecordStamp,
        cgroup: Option<u64>,
        raw: &[u8],
    ) {
        debug_assert!(slot < SCHEMA);
        let raw = &raw[..raw.len().min(u32::MAX as usize - 8)];
        let id_len = if cgroup.is_some() { 8 } else { 0 };
        self.bytes.reserve(HEADER + id_len + raw.len());
        let flags = if cgroup.is_some() { HAS_CGROUP } else { 0 };
        self.header(slot, stamp, id_len + raw.len(), flags);
        if let Some(id) = cgroup {
            self.bytes.extend_from_slice(&id.to_ne_bytes());
        }
        self.bytes.extend_from_slice(raw);
        self.records += 1;
    }

    /// [`StagedChunk::push_record_in`] for a trace entry that lies in the input a file
    /// decoder reads, at `offset` (`len` bytes): only where it is, not its bytes, is
    /// staged (12 bytes instead of the entry's). The formatter reads it from the same
    /// input ([`StagedChunk::entries_in`]).
    pub fn push_record_at(
        &mut self,
        slot: u32,
        stamp: &RecordStamp,
        cgroup: Option<u64>,
        offset: u64,
        len: u32,
    ) {
        debug_assert!(slot < SCHEMA);
        let id_len = if cgroup.is_some() { 8 } else { 0 };
        let flags = HAS_REF | if cgroup.is_some() { HAS_CGROUP } else { 0 };
        self.header(slot, stamp, id_len + REF_BODY, flags);
        let mut body = [0u8; 8 + REF_BODY];
        body[..8].copy_from_slice(&cgroup.unwrap_or(0).to_ne_bytes());
        body[8..16].copy_from_slice(&offset.to_ne_bytes());
        body[16..].copy_from_slice(&len.to_ne_bytes());
        // Fixed lengths (no call to memcpy).
        if cgroup.is_some() {
            self.bytes.extend_from_slice(&body);
        } else {
            self.bytes.extend_from_slice(&body[8..]);
        }
        self.records += 1;
    }

    /// Append a context change (see [`ContextUpdate`]); body: a kind word, then the
    /// kind's fields (`u32` thread ids, `u64` cgroup ids) and text.
    pub fn push_context(&mut self, time_unix_ns: Option<u64>, update: &ContextUpdate<'_>) {
        // Kubernetes names: their texts joined by NULs (none can hold one).
        let joined: Vec<u8>;
        let (kind, a, b, text): (u32, u64, u64, &[u8]) = match *update {
            ContextUpdate::Pod {
                uid,
                namespace,
                name,
            } => {
                joined = [uid, namespace, name].join(&0);
                (5, 0, 0, &joined)
            }
            ContextUpdate::ContainerName { id, name } => {
                joined = [id, name].join(&0);
                (6, 0, 0, &joined)
            }
            ContextUpdate::Comm { tid, comm } => (0, tid.into(), 0, comm),
            ContextUpdate::Fork { tid, parent_tid } => (1, tid.into(), parent_tid.into(), &[]),
            ContextUpdate::Exit { tid } => (2, tid.into(), 0, &[]),
            ContextUpdate::Cgroup { id, path } => (3, id, 0, path),
            ContextUpdate::ThreadCgroup { tid, id } => (4, tid.into(), id, &[]),
        };
        let text = &text[..text.len().min(u16::MAX as usize)];
        self.header(CONTEXT, &time_only(time_unix_ns, 0), 20 + text.len(), 0);
        self.contexts += 1;
        self.bytes.extend_from_slice(&kind.to_ne_bytes());
        self.bytes.extend_from_slice(&a.to_ne_bytes());
        self.bytes.extend_from_slice(&b.to_ne_bytes());
        self.bytes.extend_from_slice(text);
    }

    /// Append the place of the schema line of `slot`'s event ([`StagedEntry::Schema`]).
    pub fn push_schema(&mut self, slot: u32, time_unix_ns: Option<u64>) {
        self.header(SCHEMA, &time_only(time_unix_ns, 0), 4, 0);
        self.bytes.extend_from_slice(&slot.to_ne_bytes());
    }

    /// Append a count of records `cpu`'s ring lost.
    pub fn push_lost(&mut self, time_unix_ns: Option<u64>, cpu: u32, lost: u64) {
        self.header(LOST, &time_only(time_unix_ns, cpu), 8, 0);
        self.bytes.extend_from_slice(&lost.to_ne_bytes());
    }

    /// Append a notice: body = what length, event length (`NO_EVENT` for none), then
    /// the three texts.
    pub fn push_notice(
        &mut self,
        time_unix_ns: Option<u64>,
        what: &str,
        event: Option<&str>,
        message: &str,
    ) {
        let event_bytes = event.unwrap_or("");
        let len = 8 + what.len() + event_bytes.len() + message.len();
        self.header(NOTICE, &time_only(time_unix_ns, 0), len, 0);
        self.bytes
            .extend_from_slice(&len32(what.len()).to_ne_bytes());
        let event_len = event.map_or(NO_EVENT, |e| len32(e.len()));
        self.bytes.extend_from_slice(&event_len.to_ne_bytes());
        self.bytes.extend_from_slice(what.as_bytes());
        self.bytes.extend_from_slice(event_bytes.as_bytes());
        self.bytes.extend_from_slice(message.as_bytes());
    }

    /// The entries in order (a record staged by where it lies,
    /// [`StagedChunk::push_record_at`], ends the iteration: use
    /// [`StagedChunk::entries_in`]).
    pub fn entries(&self) -> StagedEntries<'_> {
        self.entries_in(&[])
    }

    /// The entries in order, the records staged by where they lie
    /// ([`StagedChunk::push_record_at`]) read from `input` (the decoder's input). A
    /// record lying outside `input` ends the iteration.
    pub fn entries_in<'a>(&'a self, input: &'a [u8]) -> StagedEntries<'a> {
        StagedEntries {
            rest: &self.bytes,
            input,
        }
    }
}

/// One staged entry as its encoded bytes (header and body), for a consumer that keeps
/// entries without decoding them (the flight recorder, crate::flight) and hands them on
/// later ([`StagedChunk::push_encoded`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodedEntry<'a> {
    /// The entry's bytes, header included.
    pub bytes: &'a [u8],
    /// The event slot of a record; `None` for lost counts, notices and context entries.
    pub slot: Option<u32>,
}

impl<'a> EncodedEntry<'a> {
    /// The first entry encoded at the start of `bytes` (`None` when `bytes` is empty or
    /// cut short).
    pub fn first(bytes: &'a [u8]) -> Option<Self> {
        let head = bytes.get(..HEADER)?;
        let len = u32_at(head, 16) as usize;
        let bytes = bytes.get(..HEADER + len)?;
        let slot = match u32_at(head, 0) {
            NOTICE | LOST | CONTEXT | SCHEMA => None,
            slot => Some(slot),
        };
        Some(EncodedEntry { bytes, slot })
    }

    /// The entry's time (Unix ns), if it has one.
    pub fn time(&self) -> Option<u64> {
        let flags = u32_at(self.bytes, 20);
        (flags & HAS_TIME != 0).then(|| u64_at(self.bytes, 24))
    }

    /// Whether the entry is a context change ([`StagedEntry::Context`]).
    pub fn is_context(&self) -> bool {
        self.slot.is_none() && u32_at(self.bytes, 0) == CONTEXT
    }

    /// The entry decoded.
    pub fn decode(&self) -> Option<StagedEntry<'a>> {
        StagedEntries {
            rest: self.bytes,
            input: &[],
        }
        .next()
    }
}

impl StagedChunk {
    /// The entries in order, as their encoded bytes.
    pub fn encoded(&self) -> impl Iterator<Item = EncodedEntry<'_>> {
        let mut rest = self.bytes.as_slice();
        std::iter::from_fn(move || {
            let entry = EncodedEntry::first(rest)?;
            rest = &rest[entry.bytes.len()..];
            Some(entry)
        })
    }

    /// Append an entry another chunk encoded (a byte copy).
    pub fn push_encoded(&mut self, entry: EncodedEntry<'_>) {
        self.bytes.extend_from_slice(entry.bytes);
        if entry.slot.is_some() {
            self.records += 1;
        } else if entry.is_context() {
            self.contexts += 1;
        }
    }
}

/// Iterator over a [`StagedChunk`]'s entries.
#[derive(Debug)]
pub struct StagedEntries<'a> {
    rest: &'a [u8],
    /// Where the records staged by where they lie are read ([`HAS_REF`]).
    input: &'a [u8],
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(v)
}

/// A context body as [`StagedChunk::push_context`] wrote it (None: cut short or an
/// unknown kind, which only this module's own writing could cause).
fn context_update(body: &[u8]) -> Option<ContextUpdate<'_>> {
    let (fixed, text) = body.split_at_checked(20)?;
    let (a, b) = (u64_at(fixed, 4), u64_at(fixed, 12));
    let tid = u32::try_from(a).ok();
    Some(match u32_at(fixed, 0) {
        0 => ContextUpdate::Comm {
            tid: tid?,
            comm: text,
        },
        1 => ContextUpdate::Fork {
            tid: tid?,
            parent_tid: u32::try_from(b).ok()?,
        },
        2 => ContextUpdate::Exit { tid: tid? },
        3 => ContextUpdate::Cgroup { id: a, path: text },
        4 => ContextUpdate::ThreadCgroup { tid: tid?, id: b },
        5 => {
            let mut parts = text.splitn(3, |&c| c == 0);
            ContextUpdate::Pod {
                uid: parts.next()?,
                namespace: parts.next()?,
                name: parts.next()?,
            }
        }
        6 => {
            let (id, name) = text.split_at(text.iter().position(|&c| c == 0)?);
            ContextUpdate::ContainerName {
                id,
                name: &name[1..],
            }
        }
        _ => return None,
    })
}

/// A notice body's texts: what, event, message (None when cut or not UTF-8, which only
/// this module's own writing could cause).
fn notice_texts(body: &[u8]) -> Option<(&str, Option<&str>, &str)> {
    let (lens, texts) = body.split_at_checked(8)?;
    let what_len = u32_at(lens, 0) as usize;
    let event_len = u32_at(lens, 4);
    let (what, rest) = texts.split_at_checked(what_len)?;
    let (event, message) = match event_len {
        NO_EVENT => (None, rest),
        n => {
            let (e, m) = rest.split_at_checked(n as usize)?;
            (Some(std::str::from_utf8(e).ok()?), m)
        }
    };
    Some((
        std::str::from_utf8(what).ok()?,
        event,
        std::str::from_utf8(message).ok()?,
    ))
}

impl<'a> Iterator for StagedEntries<'a> {
    type Item = StagedEntry<'a>;

    fn next(&mut self) -> Option<StagedEntry<'a>> {
        // Only this module writes chunks, so a short header or body cannot happen; the
        // checks end the iteration instead of panicking all the same.
        let (head, body) = self.rest.split_at_checked(HEADER)?;
        let len = u32_at(head, 16) as usize;
        let Some((entry, rest)) = body.split_at_checked(len) else {
            self.rest = &[];
            return None;
        };
        self.rest = rest;
        let flags = u32_at(head, 20);
        let has_time = flags & HAS_TIME != 0;
        let time_unix_ns = has_time.then(|| u64_at(head, 24));
        let cpu = u32_at(head, 4);
        let item = match u32_at(head, 0) {
            NOTICE => {
                let Some((what, event, message)) = notice_texts(entry) else {
                    self.rest = &[];
                    return None;
                };
                StagedEntry::Notice {
                    time_unix_ns,
                    what,
                    event,
                    message,
                }
            }
            LOST if entry.len() == 8 => StagedEntry::Lost {
                time_unix_ns,
                cpu,
                lost: u64_at(entry, 0),
            },
            CONTEXT => {
                let Some(update) = context_update(entry) else {
                    self.rest = &[];
                    return None;
                };
                StagedEntry::Context {
                    time_unix_ns,
                    update,
                }
            }
            SCHEMA if entry.len() == 4 => StagedEntry::Schema {
                slot: u32_at(entry, 0),
                time_unix_ns,
            },
            LOST | SCHEMA => {
                self.rest = &[];
                return None;
            }
            slot => {
                let (cgroup, raw) = if flags & HAS_CGROUP != 0 {
                    let Some((id, raw)) = entry.split_at_checked(8) else {
                        self.rest = &[];
                        return None;
                    };
                    (Some(u64_at(id, 0)), raw)
                } else {
                    (None, entry)
                };
                let raw = if flags & HAS_REF != 0 {
                    let at = (raw.len() == REF_BODY).then(|| {
                        let offset = usize::try_from(u64_at(raw, 0)).unwrap_or(usize::MAX);
                        (offset, u32_at(raw, 8) as usize)
                    });
                    let found = at
                        .and_then(|(offset, len)| self.input.get(offset..offset.checked_add(len)?));
                    let Some(found) = found else {
                        self.rest = &[];
                        return None;
                    };
                    found
                } else {
                    raw
                };
                StagedEntry::Record {
                    slot,
                    stamp: RecordStamp {
                        time_unix_ns,
                        cpu,
                        pid: u32_at(head, 8),
                        tid: u32_at(head, 12),
                    },
                    cgroup,
                    raw,
                }
            }
        };
        Some(item)
    }
}

/// One piece of a formatter worker's output ([`crate::formatter::run_parallel`]): part
/// `part` of the lines of the item numbered `seq` (a staged chunk, or a format's schema
/// line), `last` when it is the item's last part.
#[derive(Debug)]
pub struct Part {
    /// The item's number (the dispatcher numbers items in the order the session staged
    /// them).
    pub seq: u64,
    /// The part's number within the item (0, 1, …).
    pub part: u32,
    /// Whether this is the item's last part.
    pub last: bool,
    /// The worker that wrote it (whose credit comes back when the part is let out).
    pub worker: usize,
    /// The lines (`None`: the item wrote nothing, and the worker kept its buffer).
    pub batch: Option<Batch>,
    /// EventHeader schema lines within `batch` (`crate::formatter`: let out only on
    /// their first sight in the whole output).
    pub announced: Vec<Announcement>,
}

/// An EventHeader schema line a worker put in a batch: `len` bytes at `start`, for the
/// metadata block `key` (a hash of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Announcement {
    /// Where the line starts in the batch.
    pub start: usize,
    /// Its length (with its newline).
    pub len: usize,
    /// The block it describes.
    pub key: u64,
}

/// The reorder stage: items numbered `(seq, part)` taken in any order, let out in the
/// order of their numbers (`seq` 0, 1, 2 …; within a `seq`, parts 0, 1 … up to the one
/// marked last). Holds only what arrived early; the caller bounds that (each formatter
/// worker has a fixed number of parts in flight, [`PARTS_IN_FLIGHT`]).
#[derive(Debug)]
pub struct Reorder<T> {
    next: (u64, u32),
    held: std::collections::BTreeMap<(u64, u32), (bool, T)>,
}

impl<T> Default for Reorder<T> {
    fn default() -> Self {
        Reorder {
            next: (0, 0),
            held: std::collections::BTreeMap::new(),
        }
    }
}

impl<T> Reorder<T> {
    /// Take part `part` of item `seq` (`last`: the item has no more parts). A number
    /// taken twice, or one already let out, is a caller's bug: the item is kept until
    /// dropped with the stage, never let out twice.
    pub fn push(&mut self, seq: u64, part: u32, last: bool, item: T) {
        self.held.insert((seq, part), (last, item));
    }

    /// The next item in order, if it has arrived.
    pub fn pop(&mut self) -> Option<T> {
        let (last, item) = self.held.remove(&self.next)?;
        self.next = if last {
            (self.next.0 + 1, 0)
        } else {
            (self.next.0, self.next.1 + 1)
        };
        Some(item)
    }

    /// Items that arrived early and wait for those before them.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The item let out next: `(seq, part)`.
    pub fn next(&self) -> (u64, u32) {
        self.next
    }
}

/// Parts a formatter worker may have sent and not yet seen let out by the reorder
/// stage (its credits): what bounds the stage's memory.
pub const PARTS_IN_FLIGHT: usize = 4;

/// Staged messages that may wait for each formatter worker.
pub const WORK_QUEUE: usize = 4;

/// Line buffers in the pool of a pipeline with `workers` formatter workers: the writer's
/// channel and its own ([`BATCH_POOL`]), and per worker the parts in flight and the
/// one it fills ([`PARTS_IN_FLIGHT`] + 1). With one worker, [`BATCH_POOL`].
pub fn batch_pool(workers: usize) -> usize {
    if workers <= 1 {
        BATCH_POOL
    } else {
        BATCH_POOL + workers * (PARTS_IN_FLIGHT + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(time: Option<u64>, cpu: u32) -> RecordStamp {
        RecordStamp {
            time_unix_ns: time,
            cpu,
            pid: 7,
            tid: 8,
        }
    }

    #[test]
    fn entries_come_back_in_order() {
        let mut chunk = StagedChunk::with_buffer(vec![1, 2, 3]);
        assert!(chunk.is_empty());
        chunk.push_record(0, &stamp(Some(5), 1), b"abc");
        chunk.push_notice(Some(6), "attached", Some("s:e"), "id 1, 2 CPUs");
        chunk.push_record(3, &stamp(None, 0), b"");
        chunk.push_lost(None, 4, 1 << 40);
        chunk.push_notice(None, "waiting", None, "");
        chunk.push_record(9, &stamp(Some(u64::MAX), 2), &[0xff; 70]);
        chunk.push_context(
            Some(7),
            &ContextUpdate::Comm {
                tid: 8,
                comm: b"sh",
            },
        );
        chunk.push_record_in(1, &stamp(Some(8), 1), Some(1 << 33), b"xy");
        chunk.push_context(
            None,
            &ContextUpdate::Cgroup {
                id: 1 << 40,
                path: b"/a/b",
            },
        );
        chunk.push_context(
            None,
            &ContextUpdate::Fork {
                tid: 9,
                parent_tid: 8,
            },
        );
        chunk.push_context(None, &ContextUpdate::Exit { tid: 9 });
        chunk.push_context(None, &ContextUpdate::ThreadCgroup { tid: 8, id: 3 });
        chunk.push_schema(3, Some(9));
        assert_eq!(chunk.records(), 4);
        let got: Vec<StagedEntry<'_>> = chunk.entries().collect();
        assert_eq!(
            got,
            vec![
                StagedEntry::Record {
                    slot: 0,
                    stamp: stamp(Some(5), 1),
                    cgroup: None,
                    raw: b"abc"
                },
                StagedEntry::Notice {
                    time_unix_ns: Some(6),
                    what: "attached",
                    event: Some("s:e"),
                    message: "id 1, 2 CPUs"
                },
                StagedEntry::Record {
                    slot: 3,
                    stamp: stamp(None, 0),
                    cgroup: None,
                    raw: b""
                },
                StagedEntry::Lost {
                    time_unix_ns: None,
                    cpu: 4,
                    lost: 1 << 40
                },
                StagedEntry::Notice {
                    time_unix_ns: None,
                    what: "waiting",
                    event: None,
                    message: ""
                },
                StagedEntry::Record {
                    slot: 9,
                    stamp: stamp(Some(u64::MAX), 2),
                    cgroup: None,
                    raw: &[0xff; 70]
                },
                StagedEntry::Context {
                    time_unix_ns: Some(7),
                    update: ContextUpdate::Comm {
                        tid: 8,
                        comm: b"sh"
                    }
                },
                StagedEntry::Record {
                    slot: 1,
                    stamp: stamp(Some(8), 1),
                    cgroup: Some(1 << 33),
                    raw: b"xy"
                },
                StagedEntry::Context {
                    time_unix_ns: None,
                    update: ContextUpdate::Cgroup {
                        id: 1 << 40,
                        path: b"/a/b"
                    }
                },
                StagedEntry::Context {
                    time_unix_ns: None,
                    update: ContextUpdate::Fork {
                        tid: 9,
                        parent_tid: 8
                    }
                },
                StagedEntry::Context {
                    time_unix_ns: None,
                    update: ContextUpdate::Exit { tid: 9 }
                },
                StagedEntry::Context {
                    time_unix_ns: None,
                    update: ContextUpdate::ThreadCgroup { tid: 8, id: 3 }
                },
                StagedEntry::Schema {
                    slot: 3,
                    time_unix_ns: Some(9)
                },
            ]
        );
        let buf = chunk.into_buffer();
        let notice = 8 + "attached".len() + "s:e".len() + "id 1, 2 CPUs".len();
        let context = 5 * 20 + 2 + 4;
        assert_eq!(
            buf.len(),
            13 * HEADER + 3 + notice + 70 + 8 + 8 + "waiting".len() + context + 8 + 2 + 4
        );
    }

    #[test]
    fn encoded_entries_copy_verbatim() {
        let mut chunk = StagedChunk::default();
        chunk.push_record(4, &stamp(Some(5), 1), b"abc");
        chunk.push_lost(None, 2, 9);
        chunk.push_notice(Some(6), "attached", Some("s:e"), "m");
        chunk.push_context(Some(7), &ContextUpdate::Exit { tid: 3 });
        chunk.push_record_in(5, &stamp(Some(8), 1), Some(42), b"de");
        let slots: Vec<Option<u32>> = chunk.encoded().map(|e| e.slot).collect();
        // A context entry is no record (the flight recorder keeps records by slot).
        assert_eq!(slots, vec![Some(4), None, None, None, Some(5)]);
        let mut copy = StagedChunk::default();
        for e in chunk.encoded() {
            assert_eq!(EncodedEntry::first(e.bytes), Some(e));
            copy.push_encoded(e);
        }
        assert_eq!(copy.records(), 2);
        assert!(copy.entries().eq(chunk.entries()));
        let lost = chunk.encoded().nth(1).unwrap().decode();
        assert_eq!(
            lost,
            Some(StagedEntry::Lost {
                time_unix_ns: None,
                cpu: 2,
                lost: 9
            })
        );
        let bytes = chunk.into_buffer();
        assert_eq!(EncodedEntry::first(&bytes[..HEADER + 2]), None);
    }

    #[test]
    fn context_only_keeps_the_context_entries() {
        let mut chunk = StagedChunk::default();
        chunk.push_record(4, &stamp(Some(5), 1), b"abc");
        chunk.push_context(Some(7), &ContextUpdate::Exit { tid: 3 });
        chunk.push_lost(None, 2, 9);
        chunk.push_context(None, &ContextUpdate::Comm { tid: 4, comm: b"x" });
        assert_eq!(chunk.contexts(), 2);
        let only = chunk.context_only();
        assert_eq!(only.contexts(), 2);
        assert_eq!(only.records(), 0);
        let kept: Vec<StagedEntry<'_>> = only.entries().collect();
        let all: Vec<StagedEntry<'_>> = chunk
            .entries()
            .filter(|e| matches!(e, StagedEntry::Context { .. }))
            .collect();
        assert_eq!(kept, all);
    }

    mod reorder {
        use super::super::Reorder;
        use proptest::prelude::*;

        proptest! {
            /// Items with 1 to 4 parts each, spread over 1 to 6 workers (each worker's
            /// parts arrive in its own order, as over a channel), the workers' streams
            /// interleaved at random: the stage lets out every part once, in order.
            #[test]
            fn any_arrival_order_comes_out_in_order(
                parts in proptest::collection::vec(1u32..5, 0..60),
                owners in proptest::collection::vec(0usize..6, 60),
                workers in 1usize..7,
                picks in proptest::collection::vec(0usize..1000, 0..400),
            ) {
                let mut streams: Vec<std::collections::VecDeque<(u64, u32, bool)>> =
                    vec![Default::default(); workers];
                let mut expected = Vec::new();
                for (seq, &n) in parts.iter().enumerate() {
                    let w = owners[seq] % workers;
                    for p in 0..n {
                        streams[w].push_back((seq as u64, p, p + 1 == n));
                        expected.push((seq as u64, p));
                    }
                }
                let mut stage = Reorder::default();
                let mut got = Vec::new();
                let mut picks = picks.into_iter();
                loop {
                    let ready: Vec<usize> =
                        (0..workers).filter(|&w| !streams[w].is_empty()).collect();
                    if ready.is_empty() {
                        break;
                    }
                    let w = ready[picks.next().unwrap_or(0) % ready.len()];
                    let (seq, part, last) = streams[w].pop_front().unwrap();
                    stage.push(seq, part, last, (seq, part));
                    while let Some(item) = stage.pop() {
                        got.push(item);
                    }
                }
                prop_assert_eq!(stage.held(), 0);
                prop_assert_eq!(got, expected);
            }
        }
    }

    #[test]
    fn a_record_staged_by_where_it_lies_is_read_from_the_input() {
        let input = b"..header..TRACE-ENTRY..rest";
        let st = stamp(Some(7), 3);
        let mut chunk = StagedChunk::default();
        chunk.push_record_at(2, &st, None, 10, 11);
        chunk.push_record_at(4, &st, Some(99), 0, 2);
        chunk.push_lost(Some(8), 1, 5);
        assert_eq!(chunk.records(), 2);
        let got: Vec<_> = chunk.entries_in(input).collect();
        let record = |slot, cgroup, raw| StagedEntry::Record {
            slot,
            stamp: stamp(Some(7), 3),
            cgroup,
            raw,
        };
        assert_eq!(got[0], record(2, None, &b"TRACE-ENTRY"[..]));
        assert_eq!(got[1], record(4, Some(99), &b".."[..]));
        assert_eq!(got.len(), 3, "{got:?}");
        // Without the input, or past its end, the iteration ends there.
        assert_eq!(chunk.entries().count(), 0);
        assert_eq!(chunk.entries_in(&input[..20]).count(), 0);
    }

    #[test]
    fn an_empty_chunk_has_no_entries() {
        assert_eq!(StagedChunk::with_buffer(vec![1, 2]).entries().count(), 0);
    }

    #[test]
    fn a_cut_chunk_ends_the_iteration() {
        let mut chunk = StagedChunk::default();
        chunk.push_record(1, &stamp(Some(1), 0), b"abcdef");
        let mut bytes = chunk.into_buffer();
        // The body cut short, then the header itself.
        for cut_at in [HEADER + 3, HEADER - 1] {
            bytes.truncate(cut_at);
            assert_eq!(
                StagedEntries {
                    rest: &bytes,
                    input: &[]
                }
                .count(),
                0,
                "cut at {cut_at}"
            );
        }
    }
}
