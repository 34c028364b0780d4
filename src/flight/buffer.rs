//! The flight recorder's memory: the newest staged entries (records, lost counts,
//! notices, exactly as the session staged them: [`EncodedEntry`]) whose bytes total at
//! most SIZE, oldest first; pushing a new entry evicts the oldest ones until the total
//! fits again, counting the records that fell out. [`FlightBuffer::take`] hands out
//! everything held (a [`Snapshot`], to be decoded and written by the dump thread) and
//! leaves the buffer empty: a dump clears it, so no record is in two dumps.
//!
//! Storage: segments of [`SEGMENT_BYTES`] filled back to back; a segment is freed (kept
//! as a spare) once its last entry is evicted. Memory: at most SIZE of entries, plus the
//! unused tail of each segment (less than one entry: < 25 % with 64 KiB entries, ~0.04 %
//! with 100-byte ones) and two partly used segments.
//!
//! Formats: a record names its event by slot; the slot's format can change (an event
//! detached, another attached in its slot), so each [`FormatChange`] is kept with the
//! position (entry sequence number) from which it holds, for as long as a held record
//! may need it.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use uevrec_parsers::PreparedFormat;

use crate::pipeline::{EncodedEntry, FormatSource, StagedEntry};

/// Bytes per storage segment (a staged entry is at most 64 KiB + its header).
pub const SEGMENT_BYTES: usize = 256 * 1024;

/// Spare segments kept for reuse (beyond them, freed segments go back to the allocator).
const SPARES: usize = 2;

/// From entry `at` on, records of `slot` have this format.
#[derive(Debug, Clone)]
pub struct FormatChange {
    /// Sequence number of the first entry staged after the change.
    pub at: u64,
    /// The session's event slot.
    pub slot: u32,
    /// The format, rendered for the lines.
    pub prepared: Arc<PreparedFormat>,
    /// What tracefs said (system, name, format text).
    pub source: Arc<FormatSource>,
}

/// A run of encoded entries; those before `start` were evicted.
#[derive(Debug, Default)]
pub struct Segment {
    bytes: Vec<u8>,
    start: usize,
}

impl Segment {
    /// The entries still held, in order.
    pub fn entries(&self) -> impl Iterator<Item = EncodedEntry<'_>> {
        let mut rest = &self.bytes[self.start..];
        std::iter::from_fn(move || {
            let entry = EncodedEntry::first(rest)?;
            rest = &rest[entry.bytes.len()..];
            Some(entry)
        })
    }
}

/// Counts since the previous [`FlightBuffer::take`] (or the start).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Event records that fell out of the buffer (overwritten by newer ones).
    pub overwritten: u64,
    /// Lost-count and notice entries that fell out.
    pub other_overwritten: u64,
    /// Records the kernel reported lost (their `lost` lines may have fallen out too).
    pub lost: u64,
}

/// Everything a [`FlightBuffer`] held when taken, oldest first.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The entries.
    pub segments: VecDeque<Segment>,
    /// Sequence number of the first entry.
    pub first_seq: u64,
    /// Event records held.
    pub records: u64,
    /// Bytes of entries held (what SIZE bounds).
    pub bytes: usize,
    /// What fell out and what the kernel lost since the previous snapshot.
    pub counts: Counts,
    /// Format changes a held record may need, in order: those with `at <= first_seq`
    /// hold from the start.
    pub formats: Vec<FormatChange>,
}

impl Snapshot {
    /// The entries, each with its sequence number.
    pub fn entries(&self) -> impl Iterator<Item = (u64, EncodedEntry<'_>)> {
        (self.first_seq..).zip(self.segments.iter().flat_map(Segment::entries))
    }
}

/// The newest entries whose bytes total at most `limit` (see the module docs).
#[derive(Debug)]
pub struct FlightBuffer {
    limit: usize,
    segments: VecDeque<Segment>,
    spares: Vec<Vec<u8>>,
    held_bytes: usize,
    held_records: u64,
    /// Sequence number of the oldest entry held (== `next_seq` when empty).
    first_seq: u64,
    next_seq: u64,
    counts: Counts,
    formats: Vec<FormatChange>,
}

impl FlightBuffer {
    /// An empty buffer holding at most `limit` bytes of entries.
    pub fn new(limit: usize) -> Self {
        FlightBuffer {
            limit,
            segments: VecDeque::new(),
            spares: Vec::new(),
            held_bytes: 0,
            held_records: 0,
            first_seq: 0,
            next_seq: 0,
            counts: Counts::default(),
            formats: Vec::new(),
        }
    }

    /// Bytes of entries held.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Event records held.
    pub fn held_records(&self) -> u64 {
        self.held_records
    }

    /// Bytes of storage allocated (segments held and spare).
    pub fn allocated(&self) -> usize {
        let held: usize = self.segments.iter().map(|s| s.bytes.capacity()).sum();
        held + self.spares.iter().map(Vec::capacity).sum::<usize>()
    }

    /// Keep `entry` (copied), evicting the oldest entries while more than `limit` bytes
    /// are held (an entry larger than `limit` falls out at once).
    pub fn push(&mut self, entry: EncodedEntry<'_>) {
        if let Some(StagedEntry::Lost { lost, .. }) =
            entry.slot.is_none().then(|| entry.decode()).flatten()
        {
            self.counts.lost += lost;
        }
        let len = entry.bytes.len();
        let room = self
            .segments
            .back()
            .is_some_and(|s| s.bytes.len() + len <= s.bytes.capacity());
        if !room {
            let bytes = self
                .spares
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(SEGMENT_BYTES.max(len)));
            self.segments.push_back(Segment { bytes, start: 0 });
        }
        let back = self.segments.back_mut().expect("a segment was just added");
        back.bytes.extend_from_slice(entry.bytes);
        self.held_bytes += len;
        self.held_records += u64::from(entry.slot.is_some());
        self.next_seq += 1;
        while self.held_bytes > self.limit {
            self.evict_oldest();
        }
    }

    fn evict_oldest(&mut self) {
        let Some(front) = self.segments.front_mut() else {
            return;
        };
        let Some(entry) = EncodedEntry::first(&front.bytes[front.start..]) else {
            // Only `push` writes segments, whole entries at a time: not reached.
            self.held_bytes = 0;
            return;
        };
        let (len, record) = (entry.bytes.len(), entry.slot.is_some());
        front.start += len;
        self.held_bytes -= len;
        self.first_seq += 1;
        if record {
            self.held_records -= 1;
            self.counts.overwritten += 1;
        } else {
            self.counts.other_overwritten += 1;
        }
        if front.start == front.bytes.len() {
            let mut done = self.segments.pop_front().expect("front exists").bytes;
            if self.spares.len() < SPARES && done.capacity() == SEGMENT_BYTES {
                done.clear();
                self.spares.push(done);
            }
        }
    }

    /// From the next entry on, records of `slot` have this format.
    pub fn format(&mut self, slot: u32, prepared: Arc<PreparedFormat>, source: Arc<FormatSource>) {
        self.formats.push(FormatChange {
            at: self.next_seq,
            slot,
            prepared,
            source,
        });
        self.prune_formats();
    }

    /// Forget the format changes no held or future record needs: those followed, for
    /// the same slot, by a change that holds from the oldest entry on.
    fn prune_formats(&mut self) {
        let first = self.first_seq;
        let mut superseded = BTreeSet::new();
        let mut keep = vec![true; self.formats.len()];
        for (i, change) in self.formats.iter().enumerate().rev() {
            if superseded.contains(&change.slot) {
                keep[i] = false;
            } else if change.at <= first {
                superseded.insert(change.slot);
            }
        }
        let mut keep = keep.into_iter();
        self.formats.retain(|_| keep.next().unwrap_or(true));
    }

    /// Hand out everything held and the counts, leaving the buffer empty (the formats
    /// stay: later records need them).
    pub fn take(&mut self) -> Snapshot {
        self.prune_formats();
        let snapshot = Snapshot {
            segments: std::mem::take(&mut self.segments),
            first_seq: self.first_seq,
            records: self.held_records,
            bytes: self.held_bytes,
            counts: std::mem::take(&mut self.counts),
            formats: self.formats.clone(),
        };
        self.first_seq = self.next_seq;
        self.held_bytes = 0;
        self.held_records = 0;
        self.prune_formats();
        snapshot
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::pipeline::StagedChunk;
    use uevrec_parsers::RecordStamp;

    fn stamp(n: u64) -> RecordStamp {
        RecordStamp {
            time_unix_ns: Some(n),
            cpu: 0,
            pid: 1,
            tid: 1,
        }
    }

    /// A chunk of records `from..to` of slot 0: 8 common bytes (type 7), then the number.
    pub(in crate::flight) fn records(from: u64, to: u64) -> StagedChunk {
        let mut chunk = StagedChunk::default();
        for n in from..to {
            let mut raw = vec![7, 0, 0, 0, 1, 0, 0, 0];
            raw.extend_from_slice(&n.to_le_bytes());
            chunk.push_record(0, &stamp(n), &raw);
        }
        chunk
    }

    /// The record numbers a snapshot holds, in order.
    fn numbers(s: &Snapshot) -> Vec<u64> {
        s.entries()
            .filter_map(|(_, e)| match e.decode() {
                Some(StagedEntry::Record { raw, .. }) => {
                    Some(u64::from_le_bytes(raw[8..].try_into().unwrap()))
                }
                _ => None,
            })
            .collect()
    }

    /// Bytes one record of [`records`] takes (32-byte header + 16).
    const ONE: usize = 48;

    #[test]
    fn keeps_the_newest_records_in_order_and_counts_what_fell_out() {
        let mut b = FlightBuffer::new(10 * ONE + ONE / 2);
        for e in records(0, 25).encoded() {
            b.push(e);
        }
        assert_eq!(b.held_records(), 10);
        assert_eq!(b.held_bytes(), 10 * ONE);
        let s = b.take();
        assert_eq!(numbers(&s), (15..25).collect::<Vec<_>>());
        assert_eq!(s.counts.overwritten, 15);
        assert_eq!(s.records, 10);
        assert_eq!(s.first_seq, 15);
        // Emptied: the next snapshot holds only what came after, counts start over.
        assert_eq!(b.held_records(), 0);
        for e in records(25, 28).encoded() {
            b.push(e);
        }
        let s = b.take();
        assert_eq!(numbers(&s), vec![25, 26, 27]);
        assert_eq!(s.counts, Counts::default());
        assert_eq!(s.first_seq, 25);
    }

    #[test]
    fn lost_counts_and_notices_take_room_and_are_counted_apart() {
        let mut chunk = records(0, 2);
        chunk.push_lost(None, 1, 500);
        chunk.push_notice(None, "attached", Some("s:e"), "x");
        let mut b = FlightBuffer::new(4 * ONE);
        for e in chunk.encoded() {
            b.push(e);
        }
        for e in records(2, 6).encoded() {
            b.push(e);
        }
        let s = b.take();
        assert_eq!(numbers(&s), vec![2, 3, 4, 5]);
        assert_eq!(s.counts.overwritten, 2);
        assert_eq!(s.counts.other_overwritten, 2);
        assert_eq!(s.counts.lost, 500);
    }

    #[test]
    fn memory_stays_bounded_whatever_was_pushed() {
        let limit = 3 * SEGMENT_BYTES + 100;
        let mut b = FlightBuffer::new(limit);
        let mut next = 0;
        for _ in 0..40 {
            for e in records(next, next + 10_000).encoded() {
                b.push(e);
            }
            next += 10_000;
            assert!(b.held_bytes() <= limit);
            assert!(
                b.allocated() <= limit + (2 + SPARES) * SEGMENT_BYTES,
                "{} allocated",
                b.allocated()
            );
        }
        let s = b.take();
        let n = numbers(&s);
        assert_eq!(n.len() as u64, s.records);
        assert_eq!(*n.last().unwrap(), next - 1);
        assert_eq!(s.counts.overwritten + s.records, next);
        assert!(n.windows(2).all(|w| w[1] == w[0] + 1));
    }

    #[test]
    fn an_entry_larger_than_size_falls_out_at_once() {
        let mut b = FlightBuffer::new(ONE - 1);
        for e in records(0, 3).encoded() {
            b.push(e);
        }
        let s = b.take();
        assert_eq!(s.records, 0);
        assert_eq!(s.counts.overwritten, 3);
    }

    /// The format of [`records`]' event `s:name` (`u64 n` after the 8 common bytes).
    pub(in crate::flight) fn numbered(name: &str) -> (Arc<PreparedFormat>, Arc<FormatSource>) {
        let text =
            uevrec_samples::register::format_file_text(name, 7, &[("u64 n", 8, 8, false)], "\"\"");
        let format = uevrec_parsers::parse_format(&text).unwrap();
        let source = FormatSource {
            system: "s".into(),
            name: name.into(),
            text,
        };
        (
            Arc::new(PreparedFormat::new(&format, "s", name, None)),
            Arc::new(source),
        )
    }

    #[test]
    fn format_changes_are_kept_while_a_held_record_needs_them() {
        let mut b = FlightBuffer::new(4 * ONE);
        let (p1, s1) = numbered("one");
        let (p2, s2) = numbered("two");
        b.format(0, p1.clone(), s1.clone());
        for e in records(0, 3).encoded() {
            b.push(e);
        }
        b.format(0, p2.clone(), s2.clone());
        for e in records(3, 5).encoded() {
            b.push(e);
        }
        // Held: 1, 2 (format one), 3, 4 (format two).
        let s = b.take();
        assert_eq!(numbers(&s), vec![1, 2, 3, 4]);
        let names: Vec<(u64, &str)> = s
            .formats
            .iter()
            .map(|c| (c.at, c.source.name.as_str()))
            .collect();
        assert_eq!(names, vec![(0, "one"), (3, "two")]);
        // After the take only "two" can be needed.
        for e in records(5, 6).encoded() {
            b.push(e);
        }
        let s = b.take();
        let names: Vec<&str> = s.formats.iter().map(|c| c.source.name.as_str()).collect();
        assert_eq!(names, vec!["two"]);
    }
}
