//! The types that flow between the recording threads.
//!
//! ```text
//!  rings (one per CPU)
//!    ──session thread: parse each ring record's perf header, copy the trace entry with
//!      its stamp into a StagedChunk (a memcpy: the rings drain as fast as perf record's)
//!    ──channel of Staged; the chunks come from a fixed pool (STAGE_CHUNKS buffers of
//!      STAGE_CAPACITY bytes, allocated and touched at start)──▶
//!  formatter thread: decode + JSON lines (uevrec_parsers::json_line) into a Batch
//!    ──bounded channel of Batch (CHANNEL_BATCHES × BATCH_BYTES)──▶
//!  writer thread ──▶ sink (stdout/file)
//! ```
//!
//! Both stages are bounded: when the formatter is behind by the whole chunk pool, or the
//! writer by CHANNEL_BATCHES, the session thread waits, the rings fill and the kernel
//! counts LOST records, which become `{"uevrec":"lost"}` lines; nothing is dropped
//! silently. Empty buffers travel back on recycle channels, so no per-event allocation.
//! The buffer pools are touched up front, so uevrec's memory does not depend on how far
//! the formatter or writer ever fell behind (peak RSS is the same for 1 M or 10 M
//! events).

use std::sync::Arc;

use uevrec_parsers::json_line::{PreparedFormat, RecordStamp};

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
    /// Records and ready-made lines.
    Chunk(StagedChunk),
    /// From now on, records of `slot` have this format (sent when an event attaches,
    /// before any of its records).
    Format {
        /// The session's event slot.
        slot: u32,
        /// The format with its JSON keys rendered.
        prepared: Arc<PreparedFormat>,
    },
}

/// `slot` value of an entry that is a ready-made line, not a record.
const LINE: u32 = u32::MAX;
/// Bit of an entry's flags word: the entry has a time (every u64 is a valid time, so
/// "none" cannot be a sentinel value).
const HAS_TIME: u32 = 1;
/// Bytes of an entry's header: slot, cpu, pid, tid, length, flags (u32 each), time (u64).
const HEADER: usize = 32;

/// Staged entries back to back: a record (its event slot, stamp and raw trace entry) or
/// a ready-made JSON line (lost records, notices), each behind a [`HEADER`]-byte header
/// in native byte order. Private to the process: written and read only by this module.
#[derive(Debug, Default)]
pub struct StagedChunk {
    bytes: Vec<u8>,
    records: u64,
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
        /// The trace entry (common fields first).
        raw: &'a [u8],
    },
    /// A complete JSON line (ending in `\n`).
    Line(&'a [u8]),
}

impl StagedChunk {
    /// An empty chunk reusing `bytes`' allocation.
    pub fn with_buffer(mut bytes: Vec<u8>) -> Self {
        bytes.clear();
        StagedChunk { bytes, records: 0 }
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

    /// Give back the buffer (for reuse).
    pub fn into_buffer(self) -> Vec<u8> {
        self.bytes
    }

    fn header(&mut self, slot: u32, stamp: &RecordStamp, len: usize) {
        // Entries come from the ring (< 64 KiB) or from one line writer call; a u32
        // cannot overflow, but clamp rather than trust that.
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        self.bytes.extend_from_slice(&slot.to_ne_bytes());
        self.bytes.extend_from_slice(&stamp.cpu.to_ne_bytes());
        self.bytes.extend_from_slice(&stamp.pid.to_ne_bytes());
        self.bytes.extend_from_slice(&stamp.tid.to_ne_bytes());
        self.bytes.extend_from_slice(&len.to_ne_bytes());
        let flags = if stamp.time_unix_ns.is_some() {
            HAS_TIME
        } else {
            0
        };
        self.bytes.extend_from_slice(&flags.to_ne_bytes());
        let time = stamp.time_unix_ns.unwrap_or(0);
        self.bytes.extend_from_slice(&time.to_ne_bytes());
    }

    /// Append a record of the event in `slot` (`slot` < `u32::MAX`).
    pub fn push_record(&mut self, slot: u32, stamp: &RecordStamp, raw: &[u8]) {
        debug_assert_ne!(slot, LINE);
        let raw = &raw[..raw.len().min(u32::MAX as usize)];
        self.bytes.reserve(HEADER + raw.len());
        self.header(slot, stamp, raw.len());
        self.bytes.extend_from_slice(raw);
        self.records += 1;
    }

    /// Append a ready-made line: `write` appends one complete JSON line to the buffer
    /// it is given.
    pub fn push_line(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let start = self.bytes.len();
        let none = RecordStamp {
            time_unix_ns: None,
            cpu: 0,
            pid: 0,
            tid: 0,
        };
        self.header(LINE, &none, 0);
        write(&mut self.bytes);
        let len = u32::try_from(self.bytes.len() - start - HEADER).unwrap_or(u32::MAX);
        self.bytes[start + 16..start + 20].copy_from_slice(&len.to_ne_bytes());
    }

    /// The entries in order.
    pub fn entries(&self) -> StagedEntries<'_> {
        StagedEntries { rest: &self.bytes }
    }
}

/// Iterator over a [`StagedChunk`]'s entries.
#[derive(Debug)]
pub struct StagedEntries<'a> {
    rest: &'a [u8],
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
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
        let slot = u32_at(head, 0);
        if slot == LINE {
            return Some(StagedEntry::Line(entry));
        }
        let mut time = [0u8; 8];
        time.copy_from_slice(&head[24..32]);
        let time = u64::from_ne_bytes(time);
        let has_time = u32_at(head, 20) & HAS_TIME != 0;
        Some(StagedEntry::Record {
            slot,
            stamp: RecordStamp {
                time_unix_ns: has_time.then_some(time),
                cpu: u32_at(head, 4),
                pid: u32_at(head, 8),
                tid: u32_at(head, 12),
            },
            raw: entry,
        })
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
        chunk.push_line(|b| b.extend_from_slice(b"{\"x\":1}\n"));
        chunk.push_record(3, &stamp(None, 0), b"");
        chunk.push_record(9, &stamp(Some(u64::MAX), 2), &[0xff; 70]);
        assert_eq!(chunk.records(), 3);
        let got: Vec<StagedEntry<'_>> = chunk.entries().collect();
        assert_eq!(
            got,
            vec![
                StagedEntry::Record {
                    slot: 0,
                    stamp: stamp(Some(5), 1),
                    raw: b"abc"
                },
                StagedEntry::Line(b"{\"x\":1}\n"),
                StagedEntry::Record {
                    slot: 3,
                    stamp: stamp(None, 0),
                    raw: b""
                },
                StagedEntry::Record {
                    slot: 9,
                    stamp: stamp(Some(u64::MAX), 2),
                    raw: &[0xff; 70]
                },
            ]
        );
        let buf = chunk.into_buffer();
        assert_eq!(buf.len(), 4 * HEADER + 3 + 8 + 70);
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
            assert_eq!(StagedEntries { rest: &bytes }.count(), 0, "cut at {cut_at}");
        }
    }
}
