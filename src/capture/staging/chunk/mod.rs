//! The byte format of a staged chunk: entries written by the session (or a file
//! decoder) and read back by the formatter, private to the process.

use uevrec_parsers::callchain::Callchain;
use uevrec_parsers::user_stack::{StackCopy, UserRegs, UserStack};
use uevrec_parsers::{ContextUpdate, Endian, RecordStamp};

use super::written::Mark;

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
/// Flag: the record's body (after the cgroup id, if any) starts with its call stack: a
/// `u32` byte length, then the callchain's words (native byte order, markers included).
const HAS_STACK: u32 = 8;
/// Flag (with [`HAS_STACK`]): after the callchain's words, the user registers and stack
/// copy of `--call-graph dwarf`: abi, register mask and the copy's room (`u64` each), the
/// registers' and the copy's byte lengths (`u32` each), then their bytes
/// ([`USER_STACK_HEAD`] + at most 64 registers + the copy: SIZE bytes at most).
const HAS_USER_STACK: u32 = 16;
/// Bytes before the registers of a [`HAS_USER_STACK`] body.
const USER_STACK_HEAD: usize = 32;
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
    /// Per CPU, where the ring records taken into this chunk end (`--instance`'s
    /// journal, [`StagedChunk::note_ring`]); empty unless noted.
    ring: Vec<(u32, Mark)>,
}

/// One entry of a [`StagedChunk`].
#[derive(Debug, PartialEq, Eq)]
pub enum StagedEntry<'a> {
    /// An event record.
    Record {
        /// The session's event slot (see [`Staged::Format`](super::Staged::Format)).
        slot: u32,
        /// Time, CPU, pid and tid of the sample.
        stamp: RecordStamp,
        /// The cgroup id the sample carried (`PERF_SAMPLE_CGROUP`), if any.
        cgroup: Option<u64>,
        /// The trace entry (common fields first).
        raw: &'a [u8],
        /// The call stack the sample carried (`PERF_SAMPLE_CALLCHAIN`), if any.
        stack: Option<Callchain<'a>>,
        /// The user registers and stack copy (`--call-graph dwarf`), if any.
        user_stack: Option<UserStack<'a>>,
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

/// Copy the `len` bytes at `src` to `dst`: entries of 32 to 128 bytes (most trace
/// entries) in two fixed-length moves that overlap in the middle, in line; others by
/// `memcpy` (whose call and size dispatch showed in the session's profile, BENCHMARKS.md
/// issue 41).
///
/// # Safety
/// `src` is readable and `dst` writable for `len` bytes, and the two do not overlap.
#[inline(always)]
unsafe fn copy_entry(src: *const u8, dst: *mut u8, len: usize) {
    use std::ptr::copy_nonoverlapping as copy;
    // SAFETY: each move lies within the first `len` bytes of both (the caller's).
    unsafe {
        if (32..=64).contains(&len) {
            copy(src, dst, 32);
            copy(src.add(len - 32), dst.add(len - 32), 32);
        } else if (64..=128).contains(&len) {
            copy(src, dst, 64);
            copy(src.add(len - 64), dst.add(len - 64), 64);
        } else {
            copy(src, dst, len);
        }
    }
}

/// An entry's header: slot, cpu, pid, tid, body length `len`, flags (`extra_flags` and
/// [`HAS_TIME`] when the stamp has a time), time.
#[inline]
fn header_bytes(slot: u32, stamp: &RecordStamp, len: usize, extra_flags: u32) -> [u8; HEADER] {
    let flags = extra_flags
        | if stamp.time_unix_ns.is_some() {
            HAS_TIME
        } else {
            0
        };
    let mut h = [0u8; HEADER];
    let words = [slot, stamp.cpu, stamp.pid, stamp.tid, len32(len), flags];
    for (dst, w) in h.chunks_exact_mut(4).zip(words) {
        dst.copy_from_slice(&w.to_ne_bytes());
    }
    h[24..].copy_from_slice(&stamp.time_unix_ns.unwrap_or(0).to_ne_bytes());
    h
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
            ring: Vec::new(),
        }
    }

    /// A ring record of `cpu` at `time` (the ring's clock) was taken, staged or left
    /// out: the formatter's marks pass it once this chunk is formatted
    /// (crate::capture::staging::written).
    pub fn note_ring(&mut self, cpu: u32, time: u64) {
        self.ring_note(cpu).advance(time);
    }

    /// `cpu`'s ring said it lost `lost` records (staged here: [`StagedChunk::push_lost`]).
    pub fn note_lost(&mut self, cpu: u32, lost: u64) {
        let note = self.ring_note(cpu);
        note.lost = note.lost.saturating_add(lost);
    }

    fn ring_note(&mut self, cpu: u32) -> &mut Mark {
        let i = match self.ring.iter().rposition(|(c, _)| *c == cpu) {
            Some(i) => i,
            None => {
                self.ring.push((cpu, Mark::default()));
                self.ring.len() - 1
            }
        };
        &mut self.ring[i].1
    }

    /// Per CPU, where the ring records taken into this chunk end
    /// ([`StagedChunk::note_ring`]): the last one's time and how many of that time.
    pub fn ring_marks(&self) -> &[(u32, Mark)] {
        &self.ring
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
        // Assembled on the stack and appended at once: one capacity check per entry
        // instead of seven (the session stages every record through here).
        self.bytes
            .extend_from_slice(&header_bytes(slot, stamp, len, extra_flags));
    }

    /// Append a record of the event in `slot` (`slot` < `u32::MAX - 2`).
    pub fn push_record(&mut self, slot: u32, stamp: &RecordStamp, raw: &[u8]) {
        self.push_record_in(slot, stamp, None, raw);
    }

    /// [`StagedChunk::push_record`] with the cgroup id the sample carried, if any (8
    /// more bytes staged only when there is one).
    #[inline]
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
        let flags = if cgroup.is_some() { HAS_CGROUP } else { 0 };
        // Header and cgroup id assembled on the stack, then one capacity check and two
        // copies straight into the buffer: the session stages every record through here
        // (BENCHMARKS.md, issue 41).
        let mut head = [0u8; HEADER + 8];
        head[..HEADER].copy_from_slice(&header_bytes(slot, stamp, id_len + raw.len(), flags));
        head[HEADER..].copy_from_slice(&cgroup.unwrap_or(0).to_ne_bytes());
        // All 40 bytes are copied (a fixed length: no call to memcpy), the raw entry
        // over the id when there is none.
        let head_len = HEADER + id_len;
        self.bytes.reserve(head.len() + raw.len());
        let spare = self.bytes.spare_capacity_mut();
        // SAFETY: `reserve` made room for all of `head` and raw after the bytes held;
        // the first `head_len` bytes of head and raw are written before `set_len` counts
        // them, and neither overlaps the buffer.
        unsafe {
            let at = spare.as_mut_ptr().cast::<u8>();
            std::ptr::copy_nonoverlapping(head.as_ptr(), at, head.len());
            copy_entry(raw.as_ptr(), at.add(head_len), raw.len());
            self.bytes.set_len(self.bytes.len() + head_len + raw.len());
        }
        self.records += 1;
    }

    /// [`StagedChunk::push_record_in`] with the call stack the sample carried, if any
    /// (its words and a length staged only when there is one), and the user registers
    /// and stack copy of `--call-graph dwarf` (the bytes the kernel copied, no more).
    #[inline]
    pub fn push_record_stacked(
        &mut self,
        slot: u32,
        stamp: &RecordStamp,
        cgroup: Option<u64>,
        stack: Option<Callchain<'_>>,
        user: Option<UserStack<'_>>,
        raw: &[u8],
    ) {
        match stack {
            None => self.push_record_in(slot, stamp, cgroup, raw),
            Some(stack) => self.push_record_with_stack(slot, stamp, cgroup, stack, user, raw),
        }
    }

    /// [`StagedChunk::push_record_stacked`] of a record with a call stack.
    #[inline(never)]
    fn push_record_with_stack(
        &mut self,
        slot: u32,
        stamp: &RecordStamp,
        cgroup: Option<u64>,
        stack: Callchain<'_>,
        user: Option<UserStack<'_>>,
        raw: &[u8],
    ) {
        debug_assert!(slot < SCHEMA);
        // All come from one ring record (< 64 KiB).
        let words = stack.bytes();
        let user_len = user.map_or(0, |u| {
            USER_STACK_HEAD + u.regs.bytes().len() + u.stack.bytes.len()
        });
        let raw = &raw[..raw
            .len()
            .min(u32::MAX as usize - 16 - words.len() - user_len)];
        let id_len = if cgroup.is_some() { 8 } else { 0 };
        let len = id_len + 4 + words.len() + user_len + raw.len();
        self.bytes.reserve(HEADER + len);
        let flags = HAS_STACK
            | if cgroup.is_some() { HAS_CGROUP } else { 0 }
            | if user.is_some() { HAS_USER_STACK } else { 0 };
        self.header(slot, stamp, len, flags);
        if let Some(id) = cgroup {
            self.bytes.extend_from_slice(&id.to_ne_bytes());
        }
        self.bytes
            .extend_from_slice(&len32(words.len()).to_ne_bytes());
        self.bytes.extend_from_slice(words);
        if let Some(u) = user {
            let (regs, copy) = (u.regs.bytes(), u.stack.bytes);
            let mut head = [0u8; USER_STACK_HEAD];
            head[..8].copy_from_slice(&u.regs.abi().to_ne_bytes());
            head[8..16].copy_from_slice(&u.regs.mask().to_ne_bytes());
            head[16..24].copy_from_slice(&u.stack.size.to_ne_bytes());
            head[24..28].copy_from_slice(&len32(regs.len()).to_ne_bytes());
            head[28..].copy_from_slice(&len32(copy.len()).to_ne_bytes());
            self.bytes.extend_from_slice(&head);
            self.bytes.extend_from_slice(regs);
            self.bytes.extend_from_slice(copy);
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
            ContextUpdate::Exec { pid, comm } => (7, pid.into(), 0, comm),
            ContextUpdate::Mmap {
                pid,
                addr,
                len,
                pgoff,
                build_id,
                path,
            } => {
                // The length and file offset, the build id behind its length, the path.
                let id = &build_id[..build_id.len().min(u8::MAX as usize)];
                let mut v = Vec::with_capacity(17 + id.len() + path.len());
                v.extend_from_slice(&len.to_ne_bytes());
                v.extend_from_slice(&pgoff.to_ne_bytes());
                v.push(id.len() as u8);
                v.extend_from_slice(id);
                v.extend_from_slice(path);
                joined = v;
                (8, pid.into(), addr, &joined)
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
/// entries without decoding them (the flight recorder, crate::outputs::flight) and hands them on
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
        7 => ContextUpdate::Exec {
            pid: tid?,
            comm: text,
        },
        8 => {
            let (fixed, rest) = text.split_at_checked(17)?;
            let (build_id, path) = rest.split_at_checked(usize::from(fixed[16]))?;
            ContextUpdate::Mmap {
                pid: tid?,
                addr: b,
                len: u64_at(fixed, 0),
                pgoff: u64_at(fixed, 8),
                build_id,
                path,
            }
        }
        _ => return None,
    })
}

/// The user registers and stack copy at the start of `body` as
/// [`StagedChunk::push_record_stacked`] wrote them, and the bytes after them (None: cut
/// short, which only this module's own writing could cause).
fn user_stack(body: &[u8]) -> Option<(UserStack<'_>, &[u8])> {
    let (head, rest) = body.split_at_checked(USER_STACK_HEAD)?;
    let (abi, mask, size) = (u64_at(head, 0), u64_at(head, 8), u64_at(head, 16));
    let (regs, rest) = rest.split_at_checked(u32_at(head, 24) as usize)?;
    let (copy, rest) = rest.split_at_checked(u32_at(head, 28) as usize)?;
    let user = UserStack {
        regs: UserRegs::new(abi, mask, regs, Endian::NATIVE),
        stack: StackCopy { bytes: copy, size },
    };
    Some((user, rest))
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
                let (stack, raw) = if flags & HAS_STACK != 0 {
                    let words = raw
                        .split_at_checked(4)
                        .and_then(|(n, rest)| rest.split_at_checked(u32_at(n, 0) as usize));
                    let Some((words, raw)) = words else {
                        self.rest = &[];
                        return None;
                    };
                    (Some(Callchain::new(words, Endian::NATIVE)), raw)
                } else {
                    (None, raw)
                };
                let (user_stack, raw) = if flags & HAS_USER_STACK != 0 {
                    let Some((user, raw)) = user_stack(raw) else {
                        self.rest = &[];
                        return None;
                    };
                    (Some(user), raw)
                } else {
                    (None, raw)
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
                    stack,
                    user_stack,
                }
            }
        };
        Some(item)
    }
}

#[cfg(test)]
mod tests;
