//! The flight recorder's memory: the newest staged entries (records, lost counts,
//! notices, exactly as the session staged them: [`EncodedEntry`]) whose bytes total at
//! most SIZE, in staging order; pushing a new entry evicts the oldest ones until the
//! total fits again, counting the records that fell out. A dump cuts by time
//! ([`FlightBuffer::take_until`]) so that no record is in two dumps and none is missing
//! between two.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use uevrec_parsers::PreparedFormat;

use crate::capture::staging::{EncodedEntry, FormatSource, StagedEntry};

/// Bytes per storage segment (a staged entry is at most 64 KiB + its header). Segments
/// are filled back to back; one is freed (kept as a spare) once its last entry is evicted.
/// Memory: at most SIZE of entries, plus the unused tail of each segment (less than one
/// entry: < 25 % with 64 KiB entries, ~0.04 % with 100-byte ones) and two partly used
/// segments.
pub const SEGMENT_BYTES: usize = 256 * 1024;

/// Spare segments kept for reuse (beyond them, freed segments go back to the allocator).
const SPARES: usize = 2;

/// From entry `at` on, records of `slot` have this format. A record names its event by
/// slot, and the slot's format can change (an event detached, another attached in its
/// slot), so each change is kept with the position from which it holds, for as long as a
/// held record may need it.
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
    /// Sequence number of the entry at `start`.
    first: u64,
    /// The latest time of its entries (those without a time count as 0).
    max_time: u64,
}

impl Segment {
    /// The entries still held, in order, each with its offset in the segment.
    fn entries_at(&self) -> impl Iterator<Item = (usize, EncodedEntry<'_>)> {
        let mut at = self.start;
        std::iter::from_fn(move || {
            let entry = EncodedEntry::first(&self.bytes[at..])?;
            let here = at;
            at += entry.bytes.len();
            Some((here, entry))
        })
    }

    /// The entries still held, in order.
    pub fn entries(&self) -> impl Iterator<Item = EncodedEntry<'_>> {
        self.entries_at().map(|(_, e)| e)
    }

    /// A copy of the entries still held.
    fn copy(&self) -> Segment {
        Segment {
            bytes: self.bytes[self.start..].to_vec(),
            start: 0,
            first: self.first,
            max_time: self.max_time,
        }
    }
}

/// The time by which dumps cut (an entry without a time counts as 0: it goes with the
/// first dump after it was staged).
fn time_of(entry: &EncodedEntry<'_>) -> u64 {
    entry.time().unwrap_or(0)
}

/// The entries a dump took: those staged before entry `seq` with a time up to `time`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cut {
    /// The first entry staged after the dump.
    pub seq: u64,
    /// The dump's time (Unix ns).
    pub time: u64,
}

impl Cut {
    /// Whether the dump took entry `seq` at `time`.
    fn took(&self, seq: u64, time: u64) -> bool {
        seq < self.seq && time <= self.time
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

/// What one [`FlightBuffer::take_until`] took: the entries of `segments` (in staging
/// order, numbered from `first_seq`) that the previous take did not take (`after`) and
/// whose time is at most `until`.
#[derive(Debug, Default)]
pub struct Part {
    /// The segments holding the entries.
    pub segments: VecDeque<Segment>,
    /// Sequence number of the first entry of `segments`.
    pub first_seq: u64,
    /// What the previous take took (left out here).
    pub after: Cut,
    /// The cut: no entry after this time (Unix ns).
    pub until: u64,
}

impl Part {
    /// Whether entry `seq` at `time` is in the part.
    fn holds(&self, seq: u64, time: u64) -> bool {
        !self.after.took(seq, time) && time <= self.until
    }

    /// Its entries in staging order, each with its sequence number and its place
    /// (segment, offset).
    fn entries_at(&self) -> impl Iterator<Item = (u64, usize, usize, EncodedEntry<'_>)> {
        let all = self
            .segments
            .iter()
            .enumerate()
            .flat_map(|(i, s)| s.entries_at().map(move |(at, e)| (i, at, e)));
        (self.first_seq..)
            .zip(all)
            .map(|(seq, (i, at, e))| (seq, i, at, e))
            .filter(|(seq, _, _, e)| self.holds(*seq, time_of(e)))
    }
}

/// What a dump writes: the entries of one or more takes ([`Part`]s; a dump whose cut
/// waited for late records has two), with their counts.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The takes.
    pub parts: Vec<Part>,
    /// Event records in the snapshot.
    pub records: u64,
    /// Bytes of its entries (what SIZE bounds).
    pub bytes: usize,
    /// What fell out and what the kernel lost since the previous snapshot.
    pub counts: Counts,
    /// Format changes a held record may need, in order: those with `at <= first_seq`
    /// hold from the start.
    pub formats: Vec<FormatChange>,
}

impl Snapshot {
    /// Sequence number of the first entry.
    pub fn first_seq(&self) -> u64 {
        self.parts.first().map_or(0, |p| p.first_seq)
    }

    /// The entries in staging order, each with its sequence number.
    pub fn entries(&self) -> impl Iterator<Item = (u64, EncodedEntry<'_>)> {
        self.parts
            .iter()
            .flat_map(|p| p.entries_at().map(|(seq, _, _, e)| (seq, e)))
    }

    /// The entries in time order (those of equal times, and those without a time after
    /// the entry staged before them, in staging order), each with its sequence number.
    /// Builds an index of 24 bytes per entry.
    pub fn in_time_order(&self) -> impl Iterator<Item = (u64, EncodedEntry<'_>)> {
        let segments: Vec<&Segment> = self.parts.iter().flat_map(|p| &p.segments).collect();
        let mut index: Vec<(u64, u64, u32, u32)> = Vec::new();
        let (mut base, mut last) = (0, 0);
        for part in &self.parts {
            for (seq, i, at, entry) in part.entries_at() {
                last = entry.time().unwrap_or(last);
                // Segments and offsets fit in u32 (SEGMENT_BYTES; SIZE is far below
                // 2^32 segments).
                index.push((last, seq, (base + i) as u32, at as u32));
            }
            base += part.segments.len();
        }
        index.sort_by_key(|&(time, ..)| time);
        index.into_iter().filter_map(move |(_, seq, i, at)| {
            let segment = segments.get(i as usize)?;
            Some((seq, EncodedEntry::first(&segment.bytes[at as usize..])?))
        })
    }

    /// Add the entries and counts of a later take (of the same buffer).
    pub fn merge(&mut self, later: Snapshot) {
        self.parts.extend(later.parts);
        self.records += later.records;
        self.bytes += later.bytes;
        self.counts.overwritten += later.counts.overwritten;
        self.counts.other_overwritten += later.counts.other_overwritten;
        self.counts.lost += later.counts.lost;
        // One timeline: the union, by position, is every change either part needs.
        for change in later.formats {
            if !self
                .formats
                .iter()
                .any(|c| c.at == change.at && c.slot == change.slot)
            {
                self.formats.push(change);
            }
        }
        self.formats.sort_by_key(|c| c.at);
    }
}

/// The newest entries whose bytes total at most `limit`, in staging order, in segments
/// of [`SEGMENT_BYTES`].
#[derive(Debug)]
pub struct FlightBuffer {
    limit: usize,
    segments: VecDeque<Segment>,
    spares: Vec<Vec<u8>>,
    /// Bytes of every entry held (dumped or not).
    total_bytes: usize,
    /// Bytes of the entries no dump took yet.
    held_bytes: usize,
    /// Records no dump took yet.
    held_records: u64,
    /// What the last dump took.
    cut: Cut,
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
            total_bytes: 0,
            held_bytes: 0,
            held_records: 0,
            cut: Cut::default(),
            first_seq: 0,
            next_seq: 0,
            counts: Counts::default(),
            formats: Vec::new(),
        }
    }

    /// Bytes of the entries held that no dump took yet.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Event records held that no dump took yet.
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
            self.segments.push_back(Segment {
                bytes,
                start: 0,
                first: self.next_seq,
                max_time: 0,
            });
        }
        let back = self.segments.back_mut().expect("a segment was just added");
        back.bytes.extend_from_slice(entry.bytes);
        back.max_time = back.max_time.max(time_of(&entry));
        self.total_bytes += len;
        self.held_bytes += len;
        self.held_records += u64::from(entry.slot.is_some());
        self.next_seq += 1;
        while self.total_bytes > self.limit {
            self.evict_oldest();
        }
    }

    fn evict_oldest(&mut self) {
        let Some(front) = self.segments.front_mut() else {
            return;
        };
        let Some(entry) = EncodedEntry::first(&front.bytes[front.start..]) else {
            // Only `push` writes segments, whole entries at a time: not reached.
            self.total_bytes = 0;
            self.held_bytes = 0;
            return;
        };
        let (len, record) = (entry.bytes.len(), entry.slot.is_some());
        let dumped = self.cut.took(front.first, time_of(&entry));
        front.start += len;
        front.first += 1;
        self.total_bytes -= len;
        self.first_seq += 1;
        if dumped {
            // In a dump already: nothing lost.
        } else if record {
            self.held_bytes -= len;
            self.held_records -= 1;
            self.counts.overwritten += 1;
        } else {
            self.held_bytes -= len;
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

    /// Hand out everything held that no dump took yet, and the counts (the formats
    /// stay: later records need them).
    pub fn take(&mut self) -> Snapshot {
        self.take_until(u64::MAX)
    }

    /// Hand out the entries held with a time up to `until` (Unix ns) that no dump took
    /// yet, and the counts; keep the later ones for the next dump. So no record is in two
    /// dumps and none is missing between two.
    ///
    /// The session stages buffer by buffer, so entries of one pass are not in time order
    /// across CPUs; the flight thread cuts only once every record up to the cut's time was
    /// staged (crate::pipeline's `Staged::Drained`). Whole segments whose entries are all
    /// up to the cut move to the snapshot (a [`Snapshot`], decoded and written by the dump
    /// thread in time order); the few after (usually the last one or two) are copied to it
    /// and stay, their entries up to the cut marked as taken ([`Cut`]).
    pub fn take_until(&mut self, until: u64) -> Snapshot {
        self.take_part(until, true)
    }

    /// [`FlightBuffer::take_until`] for the records staged late for a dump that took
    /// already: the counts stay for the next dump (what fell out since was mostly newer).
    pub fn take_late(&mut self, until: u64) -> Snapshot {
        self.take_part(until, false)
    }

    fn take_part(&mut self, until: u64, with_counts: bool) -> Snapshot {
        self.prune_formats();
        // Dumps never go back in time: what an earlier one left out came after it.
        let until = until.max(self.cut.time);
        let split = self
            .segments
            .iter()
            .position(|s| s.max_time > until)
            .unwrap_or(self.segments.len());
        let kept = self.segments.split_off(split);
        let mut segments = std::mem::take(&mut self.segments);
        // What stays for the next dump: the kept segments' entries after the cut.
        let (mut bytes, mut records, mut lost) = (0, 0, 0);
        for segment in &kept {
            for (seq, entry) in (segment.first..).zip(segment.entries()) {
                let time = time_of(&entry);
                if self.cut.took(seq, time) || time <= until {
                    continue;
                }
                bytes += entry.bytes.len();
                records += u64::from(entry.slot.is_some());
                if let Some(StagedEntry::Lost { lost: n, .. }) =
                    entry.slot.is_none().then(|| entry.decode()).flatten()
                {
                    lost += n;
                }
            }
            segments.push_back(segment.copy());
        }
        let counts = if with_counts {
            let mut counts = std::mem::take(&mut self.counts);
            counts.lost -= lost;
            self.counts.lost = lost;
            counts
        } else {
            Counts::default()
        };
        let snapshot = Snapshot {
            parts: vec![Part {
                segments,
                first_seq: self.first_seq,
                after: self.cut,
                until,
            }],
            records: self.held_records - records,
            bytes: self.held_bytes - bytes,
            counts,
            formats: self.formats.clone(),
        };
        self.segments = kept;
        self.first_seq = self.segments.front().map_or(self.next_seq, |s| s.first);
        self.total_bytes = self.segments.iter().map(|s| s.bytes.len() - s.start).sum();
        self.held_bytes = bytes;
        self.held_records = records;
        self.cut = Cut {
            seq: self.next_seq,
            time: until,
        };
        self.prune_formats();
        snapshot
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::capture::staging::StagedChunk;
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
    pub(in crate::outputs::flight) fn records(from: u64, to: u64) -> StagedChunk {
        let mut chunk = StagedChunk::default();
        for n in from..to {
            let mut raw = vec![7, 0, 0, 0, 1, 0, 0, 0];
            raw.extend_from_slice(&n.to_le_bytes());
            chunk.push_record(0, &stamp(n), &raw);
        }
        chunk
    }

    /// The number of a record of [`records`].
    fn number((_, e): (u64, EncodedEntry<'_>)) -> Option<u64> {
        match e.decode() {
            Some(StagedEntry::Record { raw, .. }) => {
                Some(u64::from_le_bytes(raw[8..].try_into().unwrap()))
            }
            _ => None,
        }
    }

    /// The record numbers a snapshot holds, in staging order.
    fn numbers(s: &Snapshot) -> Vec<u64> {
        s.entries().filter_map(number).collect()
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
        assert_eq!(s.first_seq(), 15);
        // Emptied: the next snapshot holds only what came after, counts start over.
        assert_eq!(b.held_records(), 0);
        for e in records(25, 28).encoded() {
            b.push(e);
        }
        let s = b.take();
        assert_eq!(numbers(&s), vec![25, 26, 27]);
        assert_eq!(s.counts, Counts::default());
        assert_eq!(s.first_seq(), 25);
    }

    /// Push records numbered (and timed) as `order` says, in that order.
    fn push_in(b: &mut FlightBuffer, order: &[u64]) {
        for &n in order {
            for e in records(n, n + 1).encoded() {
                b.push(e);
            }
        }
    }

    /// The record numbers a snapshot holds, in time order.
    fn by_time(s: &Snapshot) -> Vec<u64> {
        s.in_time_order().filter_map(number).collect()
    }

    #[test]
    fn dumps_cut_by_time_across_cpus_without_repeating_or_missing_a_record() {
        // Two CPUs' records staged buffer by buffer, pass by pass: 0-4 then 100-104, 10-14
        // then 110-114, and so on (times as numbers).
        let mut b = FlightBuffer::new(1 << 20);
        let mut order = Vec::new();
        for pass in 0..4u64 {
            order.extend(pass * 10..pass * 10 + 5);
            order.extend(pass * 10 + 100..pass * 10 + 105);
        }
        push_in(&mut b, &order);
        // Cut at 22: CPU 0's 0-4, 10-14, 20-22; CPU 1's 100-… are later.
        let s = b.take_until(22);
        assert_eq!(
            by_time(&s),
            vec![0, 1, 2, 3, 4, 10, 11, 12, 13, 14, 20, 21, 22]
        );
        assert_eq!(s.records, 13);
        assert_eq!(numbers(&s).len(), 13);
        assert_eq!(b.held_records(), 40 - 13);
        // Records staged after the cut with a time before it (late) go into the next.
        push_in(&mut b, &[5, 200]);
        let s = b.take_until(104);
        assert_eq!(
            by_time(&s),
            vec![5, 23, 24, 30, 31, 32, 33, 34, 100, 101, 102, 103, 104]
        );
        let s = b.take();
        assert_eq!(
            by_time(&s),
            vec![
                110, 111, 112, 113, 114, 120, 121, 122, 123, 124, 130, 131, 132, 133, 134, 200
            ]
        );
        assert_eq!(s.records, 16);
        assert_eq!(s.counts, Counts::default());
        assert_eq!((b.held_records(), b.held_bytes()), (0, 0));
    }

    #[test]
    fn what_a_dump_took_is_not_counted_as_overwritten_when_it_falls_out() {
        let mut b = FlightBuffer::new(10 * ONE);
        push_in(&mut b, &[0, 1, 5, 6, 2, 3]);
        let s = b.take_until(3);
        assert_eq!(by_time(&s), vec![0, 1, 2, 3]);
        // 5, 6 stay (with the taken 2, 3 after them in the same segment); 10 more evict
        // the oldest: 0-3 were dumped, 5 and 6 were not.
        push_in(&mut b, &(10..20).collect::<Vec<_>>());
        let s = b.take();
        assert_eq!(s.counts.overwritten, 2);
        assert_eq!(by_time(&s), (10..20).collect::<Vec<_>>());
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
    pub(in crate::outputs::flight) fn numbered(
        name: &str,
    ) -> (Arc<PreparedFormat>, Arc<FormatSource>) {
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
