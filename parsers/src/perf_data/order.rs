//! Time order across CPUs, perf's way (tools/perf/util/ordered-events.c), with a bound.
//!
//! perf record writes the rings one after the other and then a `FINISHED_ROUND` record;
//! a record written after round N's end is newer than every record of round N − 1. So
//! at the end of a round every buffered record with a time up to the largest time seen
//! before the *previous* round's end can go out, sorted by (time, arrival).
//!
//! Bound: at most `max_bytes` (record bytes + 32 bytes of index per record) are held.
//! Past it, the older half (by time) goes out at once, as perf's `OE_FLUSH__HALF` does; a
//! record arriving later with a time before what went out is still written (in arrival
//! order among such) and counted in [`Orderer::late`]. Records of a whole mapped file are
//! held as offsets into it ([`Orderer::push_external`]), not copied. Copied records live in
//! an arena whose space is reclaimed (the held records moved to a fresh one) once the
//! records let out take more room than those held and at least [`COMPACT_MIN`]; memory is
//! then about twice `max_bytes` at most (arena, let-out space and the spare it is compacted
//! into), and each byte is copied about twice on average. Likewise the index keeps the
//! entries of records let out (moving the held ones down once per many rounds) up to
//! as many as are held or `DEAD_MIN`.

/// One held record: its bytes are `arena[start..start + len]`, or with `external`
/// the caller's `source[start..start + len]` (a mapped file: not copied).
#[derive(Debug, Clone, Copy)]
struct Entry {
    time: u64,
    /// The caller's offset of the record (for messages).
    offset: u64,
    start: usize,
    len: u32,
    /// The caller's tag (31 bits) and, in the top bit, `external`.
    tag: u32,
}

/// The `external` bit of [`Entry::tag`].
const EXTERNAL: u32 = 1 << 31;

impl Entry {
    fn external(&self) -> bool {
        self.tag & EXTERNAL != 0
    }
}

/// Bytes of index counted per held record.
const ENTRY_COST: usize = 32;

/// Records let out that `entries` may keep before dropping them (see `Orderer::head`);
/// past it, at most as many as are held.
const DEAD_MIN: usize = 256;

/// The arena is compacted only once this many bytes of it were let out (and more than
/// are held), so the copying stays proportional to the bytes pushed.
pub const COMPACT_MIN: usize = 1 << 20;

/// What [`Orderer::drain`] lets out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drain {
    /// A `FINISHED_ROUND`: records up to the previous round's largest time.
    Round,
    /// The older half (the bound was reached).
    Half,
    /// Everything (end of input).
    All,
}

/// Holds records (bytes with a time and a caller's tag) and lets them out in time order.
#[derive(Debug)]
pub struct Orderer {
    /// The held records are `entries[head..]`; those before were let out.
    entries: Vec<Entry>,
    /// Records let out are dropped from the front of `entries` only once there are
    /// [`DEAD_MIN`] of them and at least as many as are held: the held ones are moved
    /// once per many rounds, not after every round (it matters most on files whose rounds
    /// hold tens of thousands of records; BENCHMARKS.md, "Instruction counts moved out of the code").
    head: usize,
    arena: Vec<u8>,
    spare: Vec<u8>,
    /// Bytes of `arena` that belong to held records (the rest was let out).
    arena_live: usize,
    max_bytes: usize,
    /// [`Orderer::held_bytes`], kept up to date: [`Orderer::over_bound`], asked after
    /// each push, is one comparison, not a sum of three fields (with `out_time` a u64;
    /// BENCHMARKS.md, "Instruction counts moved out of the code"). External
    /// records count like copies, so the bound and thus the output do not depend on
    /// whether records were copied.
    held: usize,
    /// No held external record starts before this (exact when `low_exact`).
    low_external: usize,
    /// `low_external` is exact. A drain only clears it: the scan of the held records
    /// that makes it exact waits for [`Orderer::release_point`] (every few MiB of input,
    /// not every round: per record it cost most on files whose rounds hold about ten
    /// records; BENCHMARKS.md, "Instruction counts moved out of the code").
    low_exact: bool,
    /// Largest time pushed so far.
    max_time: u64,
    /// What the next round may let out: `max_time` at the previous round's end.
    next_flush: Option<u64>,
    /// Largest time let out so far (0 before any: no time is smaller, and one u64
    /// comparison a record is cheaper than an `Option`'s).
    out_time: u64,
    late: u64,
    /// [`Drain::Half`] calls (the bound was reached).
    halves: u64,
}

// Every sum here counts bytes held in memory (the arena, the entries) or records of the
// caller's `source` (each pushed once), and every difference takes off what was added
// before: all stay below isize::MAX. Plain arithmetic on the hot path (BENCHMARKS.md,
// "Instruction counts moved out of the code"); the counters `late` and `halves` count
// records and drains.
#[allow(clippy::arithmetic_side_effects)]
impl Orderer {
    /// An orderer holding at most about `max_bytes` (see the module docs).
    pub fn new(max_bytes: usize) -> Self {
        Orderer {
            entries: Vec::new(),
            head: 0,
            arena: Vec::new(),
            spare: Vec::new(),
            arena_live: 0,
            max_bytes: max_bytes.max(1),
            held: 0,
            low_external: usize::MAX,
            low_exact: true,
            max_time: 0,
            next_flush: None,
            out_time: 0,
            late: 0,
            halves: 0,
        }
    }

    /// Records held.
    pub fn len(&self) -> usize {
        self.entries.len() - self.head
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.head == self.entries.len()
    }

    /// Records that arrived after newer ones had gone out (so went out late): because
    /// the bound was reached ([`Orderer::bound_reached`]), or because the input broke the
    /// round rule (perf script reports those as "out of order events" too).
    pub fn late(&self) -> u64 {
        self.late
    }

    /// How many times the bound was reached (the older half let out early).
    pub fn bound_reached(&self) -> u64 {
        self.halves
    }

    /// Bytes held (records, copied or not, and index).
    pub fn held_bytes(&self) -> usize {
        self.held
    }

    /// Whether the bound is reached: call [`Orderer::drain`] with [`Drain::Half`].
    pub fn over_bound(&self) -> bool {
        self.held > self.max_bytes
    }

    /// Start where an orderer fed from the start of the input stands just after the
    /// `FINISHED_ROUND` whose drain used `limit` (`None`: the first, which lets out
    /// nothing), given that no record had arrived late and the bound was never reached
    /// up to there: every record with a time up to `limit` went out (the newest of them
    /// at `limit`), and the records held, the newer ones of the round it ended, are pushed
    /// next. For decoders of their own on pieces of one file (range decoding,
    /// [`crate::to_lines::perf_data::RangePlanner`]).
    pub fn resume_after(&mut self, limit: Option<u64>) {
        if let Some(limit) = limit {
            self.next_flush = Some(limit);
            self.max_time = self.max_time.max(limit);
            self.out_time = self.out_time.max(limit);
        }
    }

    /// What a decoder's orderer holds between two rounds, for comparing two decoders
    /// (range decoding checks that a range starts as the range before it ended): the
    /// limit of the next round's drain, the newest time let out, and the caller's offsets
    /// of the records held, in the order they are held.
    pub fn state(&self) -> (Option<u64>, u64, Vec<u64>) {
        let held = self.entries[self.head..].iter().map(|e| e.offset).collect();
        (self.next_flush, self.out_time, held)
    }

    /// Hold a copy of `bytes` (found at the caller's `offset`) with its `time` and `tag`
    /// (31 bits: the top bit is dropped).
    pub fn push(&mut self, time: u64, tag: u32, offset: u64, bytes: &[u8]) {
        let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
        let start = self.arena.len();
        self.arena.extend_from_slice(&bytes[..len as usize]);
        self.arena_live += len as usize;
        self.held += len as usize + ENTRY_COST;
        self.hold(time, tag, offset, start, len, false);
    }

    /// Hold the record `source[start..start + len]` of the `source` later given to
    /// [`Orderer::drain`] (not copied; counted towards the bound as if it were).
    // Always in line: `#[inline]` left it a call (its prologue, the arguments and the
    // `Vec` field reloads, per record; BENCHMARKS.md, "Instruction counts moved out of the code").
    #[inline(always)]
    pub fn push_external(&mut self, time: u64, tag: u32, start: usize, len: u32) {
        self.held += len as usize + ENTRY_COST;
        self.low_external = self.low_external.min(start);
        self.hold(time, tag, start as u64, start, len, true);
    }

    /// The caller read `source` up to `at`: the held records of `source` (pushed with
    /// [`Orderer::push_external`]) that start more than `far` bytes before `at` are copied
    /// into the arena, and the offset before which `source` is no longer needed is
    /// returned (the oldest record still held there, else `at`), so that the caller may
    /// let the bytes before it go (unmap them). The resident part of a mapped file is then
    /// what the held records span, at most `far` (a record held long, e.g. one with a
    /// time far ahead of the others, is copied instead of pinning the mapping). O(1)
    /// unless a record is to be copied or records were let out since the last call (then
    /// the held records are looked through once).
    pub fn release_point(&mut self, at: usize, far: usize, source: &[u8]) -> usize {
        if !self.low_exact {
            self.low_external = self.lowest_external();
            self.low_exact = true;
        }
        let end = at.saturating_sub(far);
        if self.low_external < end {
            for e in self.entries[self.head..]
                .iter_mut()
                .filter(|e| e.external() && e.start < end)
            {
                let len = e.len as usize;
                // A record outside `source` stays as it is: drain skips it.
                let Some(bytes) = source.get(e.start..e.start + len) else {
                    continue;
                };
                e.start = self.arena.len();
                self.arena.extend_from_slice(bytes);
                e.tag &= !EXTERNAL;
                self.arena_live += len;
            }
            self.low_external = self.lowest_external();
        }
        self.low_external.min(at)
    }

    /// Where the oldest held external record starts (`usize::MAX`: none).
    fn lowest_external(&self) -> usize {
        let held = self.entries[self.head..].iter().filter(|e| e.external());
        held.map(|e| e.start).min().unwrap_or(usize::MAX)
    }

    #[inline(always)]
    fn hold(&mut self, time: u64, tag: u32, offset: u64, start: usize, len: u32, external: bool) {
        if time < self.out_time {
            self.late += 1;
        }
        let tag = (tag & !EXTERNAL) | if external { EXTERNAL } else { 0 };
        self.entries.push(Entry {
            time,
            offset,
            start,
            len,
            tag,
        });
        self.max_time = self.max_time.max(time);
    }

    /// Let records out in (time, arrival) order through `emit(tag, offset, bytes)`, which
    /// may say stop (the rest stay held). Returns whether `emit` said stop. `source` is
    /// what [`Orderer::push_external`] offsets point into (records outside it are
    /// skipped).
    pub fn drain(
        &mut self,
        how: Drain,
        source: &[u8],
        emit: &mut dyn FnMut(u32, u64, &[u8]) -> bool,
    ) -> bool {
        // Stable: equal times keep their arrival order. Each CPU's records arrive sorted,
        // so the sort mostly merges runs.
        let held = &mut self.entries[self.head..];
        held.sort_by_key(|e| e.time);
        let count = match how {
            Drain::All => held.len(),
            Drain::Half => held.len().div_ceil(2),
            Drain::Round => match self.next_flush {
                Some(limit) => held.partition_point(|e| e.time <= limit),
                None => 0,
            },
        };
        match how {
            Drain::Round => self.next_flush = Some(self.max_time),
            Drain::Half => self.halves += 1,
            Drain::All => {}
        }
        let mut stopped = false;
        let mut sent = 0usize;
        // Bytes let out, summed here and taken off the fields once (the fields' updates
        // per record cost instructions on every record; BENCHMARKS.md, "Instruction counts moved out of the code").
        let (mut external_out, mut arena_out) = (0, 0);
        for e in &self.entries[self.head..self.head + count] {
            let external = e.external();
            let from = if external { source } else { &self.arena };
            sent += 1;
            if external {
                external_out += e.len as usize;
            } else {
                arena_out += e.len as usize;
            }
            let Some(bytes) = from.get(e.start..e.start + e.len as usize) else {
                continue;
            };
            if !emit(e.tag & !EXTERNAL, e.offset, bytes) {
                stopped = true;
                break;
            }
        }
        self.held -= external_out + arena_out + sent * ENTRY_COST;
        self.arena_live -= arena_out;
        // The records let out are in time order: the last is the newest.
        if let Some(last) = sent
            .checked_sub(1)
            .map(|i| self.entries[self.head + i].time)
        {
            self.out_time = self.out_time.max(last);
        }
        self.head += sent;
        if self.is_empty() {
            self.entries.clear();
            self.head = 0;
        } else if self.head >= DEAD_MIN.max(self.len()) {
            self.entries.drain(..self.head);
            self.head = 0;
        }
        // Still a lower bound (records only left); made exact when needed.
        self.low_exact = false;
        let let_out = self.arena.len() - self.arena_live;
        if self.is_empty() || (let_out >= COMPACT_MIN && let_out > self.arena_live) {
            self.compact();
        }
        stopped
    }

    /// Move the held records' bytes to the front of a fresh arena.
    fn compact(&mut self) {
        self.spare.clear();
        for e in self.entries[self.head..]
            .iter_mut()
            .filter(|e| !e.external())
        {
            let start = self.spare.len();
            self.spare
                .extend_from_slice(&self.arena[e.start..e.start + e.len as usize]);
            e.start = start;
        }
        std::mem::swap(&mut self.arena, &mut self.spare);
        // Keep the spare's memory only up to the bound.
        if self.spare.capacity() > self.max_bytes.saturating_mul(2) {
            self.spare = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records pushed with their time as offset: `(time, tag, bytes)` in drain order.
    fn collect(o: &mut Orderer, how: Drain) -> Vec<(u64, u32, Vec<u8>)> {
        let mut out = Vec::new();
        o.drain(how, &[], &mut |tag, t, b| {
            out.push((t, tag, b.to_vec()));
            true
        });
        out
    }

    #[test]
    fn rounds_release_up_to_the_previous_round() {
        let mut o = Orderer::new(1 << 20);
        o.push(5, 0, 5, b"a");
        o.push(3, 1, 3, b"b");
        // First round: nothing known to be complete yet.
        assert!(collect(&mut o, Drain::Round).is_empty());
        o.push(4, 2, 4, b"c");
        o.push(9, 3, 9, b"d");
        // Second round: up to 5 (the max before the first round's end).
        let out = collect(&mut o, Drain::Round);
        assert_eq!(out.iter().map(|e| e.0).collect::<Vec<_>>(), vec![3, 4, 5]);
        assert_eq!(out[0].2, b"b");
        assert_eq!(o.len(), 1);
        let out = collect(&mut o, Drain::All);
        assert_eq!(out, vec![(9, 3, b"d".to_vec())]);
        assert_eq!(o.late(), 0);
        // A record older than what a round let out: late, with the bound never reached.
        o.push(1, 4, 1, b"e");
        assert_eq!(collect(&mut o, Drain::All).len(), 1);
        assert_eq!((o.late(), o.bound_reached()), (1, 0));
    }

    #[test]
    fn equal_times_keep_arrival_order() {
        let mut o = Orderer::new(1 << 20);
        for tag in 0..10 {
            o.push(7, tag, 7, &[tag as u8]);
        }
        let tags: Vec<u32> = collect(&mut o, Drain::All).iter().map(|e| e.1).collect();
        assert_eq!(tags, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn the_bound_flushes_half_and_counts_late_records() {
        let mut o = Orderer::new(200);
        let mut out = Vec::new();
        for t in (0..20u64).rev() {
            o.push(t, 0, t, &[0; 8]);
            if o.over_bound() {
                o.drain(Drain::Half, &[], &mut |_, t, _| {
                    out.push(t);
                    true
                });
            }
            assert!(o.held_bytes() <= 200 + 40);
        }
        o.drain(Drain::All, &[], &mut |_, t, _| {
            out.push(t);
            true
        });
        assert_eq!(out.len(), 20);
        assert!(o.late() > 0 && o.bound_reached() > 0);
    }

    #[test]
    fn external_records_are_not_copied() {
        let source = b"abcdef";
        let mut o = Orderer::new(1 << 20);
        o.push_external(2, 0, 3, 3);
        o.push(1, 1, 1, b"x");
        o.push_external(3, 2, 5, 9); // outside the source: skipped
        assert_eq!(o.held_bytes(), 1 + 3 + 9 + 3 * ENTRY_COST);
        let mut out = Vec::new();
        o.drain(Drain::All, source, &mut |tag, offset, b| {
            out.push((offset, tag, b.to_vec()));
            true
        });
        assert_eq!(out, vec![(1, 1, b"x".to_vec()), (3, 0, b"def".to_vec())]);
    }

    #[test]
    fn external_records_held_far_behind_are_copied() {
        let source = b"abcdefgh".to_vec();
        let mut o = Orderer::new(1 << 20);
        o.push_external(3, 0, 0, 2); // "ab": more than 3 bytes before 7
        o.push_external(1, 1, 4, 2); // "ef": within
        let held = o.held_bytes();
        // Nothing is copied within reach; the oldest held record is where the caller may
        // let go.
        assert_eq!(o.release_point(7, 8, &source), 0);
        assert_eq!(o.release_point(7, 3, &source), 4);
        assert_eq!(o.held_bytes(), held);
        // The caller may now let `source[..4]` go.
        let gone = b"XXXXefgh";
        let mut out = Vec::new();
        o.drain(Drain::All, gone, &mut |tag, offset, b| {
            out.push((offset, tag, b.to_vec()));
            true
        });
        assert_eq!(out, vec![(4, 1, b"ef".to_vec()), (0, 0, b"ab".to_vec())]);
        assert_eq!(o.held_bytes(), 0);
        // Nothing held: everything read may go.
        assert_eq!(o.release_point(7, 3, &source), 7);
    }

    #[test]
    fn let_out_space_is_reclaimed_in_bulk() {
        let mut o = Orderer::new(1 << 30);
        let record = [7u8; 100];
        let mut out = 0usize;
        for round in 0..100_000u64 {
            o.push(round, 0, round, &record);
            o.drain(Drain::Round, &[], &mut |_, _, b| {
                assert_eq!(b, record);
                out += 1;
                true
            });
            // Held: one record; the let-out space waits for COMPACT_MIN, no more.
            assert!(o.arena_live <= 200);
            assert!(o.arena.len() <= COMPACT_MIN + 200, "{}", o.arena.len());
            // The let-out entries are dropped once there are DEAD_MIN of them.
            assert!(o.entries.len() <= DEAD_MIN + 1 && o.len() == 1);
        }
        assert_eq!(out, 99_999);
        assert_eq!(collect(&mut o, Drain::All).len(), 1);
        assert!(o.arena.is_empty() && o.held_bytes() == 0);
    }

    #[test]
    fn stop_keeps_the_rest() {
        let mut o = Orderer::new(1 << 20);
        for t in 0..5 {
            o.push(t, 0, t, &[t as u8]);
        }
        let mut n = 0;
        assert!(o.drain(Drain::All, &[], &mut |_, _, _| {
            n += 1;
            n < 2
        }));
        assert_eq!(o.len(), 3);
        assert_eq!(collect(&mut o, Drain::All)[0].2, vec![2]);
    }
}
