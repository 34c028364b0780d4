//! The range index that `uevrec record --raw` writes at the end of a finished perf.data's
//! records: where `uevrec decode --threads N` may cut the file into ranges that decoders
//! of their own write (`to_lines::perf_data::ranges_from_index`, a layer above), without a
//! thread reading the records ahead of them (BENCHMARKS.md §31: every such pass cost more
//! than two threads could win back on two CPUs).
//!
//! What a cut needs is what the writer knows at no cost per record: where a
//! `FINISHED_ROUND` ends and where the one before it ends (the round a decoder starting
//! there reads again to hold its newer records), the largest time written before that
//! round began (the limit of the drain at the cut), where each COMM/FORK/EXIT/CGROUP
//! record lies (who is who at the cut), and where each event's first sample lies (which
//! events had their schema line before it). Nothing in it is trusted: each range's state
//! at its start is compared with the state the range before ends in, and the first
//! mismatch ends the ranges (the file is then decoded again by one thread).
//!
//! Layout: records of type [`HEADER_EVENT_TYPE`] (perf reads past them, pipe and file
//! mode alike; so does `uevrec decode`), told apart by their `misc`: cuts
//! ([`KIND_CUTS`], 32 bytes each), context record offsets ([`KIND_CONTEXT`], 8 bytes
//! each), first samples ([`KIND_FIRST`], sample id and offset, 16 bytes each), then as the
//! very last record of the data section a tail ([`KIND_TAIL`], [`TAIL_SIZE`] bytes:
//! [`INDEX_MAGIC`], the version, where the first index record starts). Values in the
//! writer's byte order (the file's).

use super::records::Records;
use super::writer::HEADER_EVENT_TYPE;
use crate::bytes::{Endian, u64_at};

/// The first bytes of the tail record's body.
pub const INDEX_MAGIC: &[u8; 8] = b"uevrecIX";

/// The version of the layout above.
pub const INDEX_VERSION: u64 = 1;

/// `misc` of a record of cuts.
pub const KIND_CUTS: u16 = 0x7501;
/// `misc` of a record of context record offsets.
pub const KIND_CONTEXT: u16 = 0x7502;
/// `misc` of a record of first samples.
pub const KIND_FIRST: u16 = 0x7503;
/// `misc` of the tail record.
pub const KIND_TAIL: u16 = 0x7504;

/// Bytes of the tail record (header, magic, version, offset).
pub const TAIL_SIZE: usize = 32;

/// A cut is noted after at most every this many bytes of records (the decoder joins them
/// into ranges of the size it wants).
pub const CUT_EVERY: u64 = 1 << 20;

/// At most this many context records are listed; past them no more cuts are noted (a
/// range applies those before it again: cost ranges × context records).
pub const MAX_INDEX_CONTEXT: usize = 20_000;

/// Entries in one index record at most (its size must fit 16 bits).
const RECORD_ROOM: usize = 60 * 1024;

/// A place where the records may be cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// Where the round before the cut begins (after the `FINISHED_ROUND` before it).
    pub carry: u64,
    /// Where the records after the cut begin (after the cut's `FINISHED_ROUND`).
    pub start: u64,
    /// The largest time of the samples, losses and context records written before
    /// `carry`: the limit of the drain at the cut's `FINISHED_ROUND`.
    pub limit: u64,
    /// The same without the context records (a decoder without context holds none).
    pub limit_plain: u64,
}

/// A file's range index, read back ([`RangeIndex::find`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeIndex {
    /// The cuts, in file order.
    pub cuts: Vec<Cut>,
    /// Where every context record (COMM/FORK/EXIT/CGROUP) before the last cut starts.
    pub context: Vec<u64>,
    /// Each event's sample id and where its first sample starts.
    pub first_samples: Vec<(u64, u64)>,
    /// Where the index's records start (the records before it are the recording's).
    pub at: u64,
}

/// Builds the index while the records are written: told each sample, loss, context
/// record and `FINISHED_ROUND` with its offset ([`IndexBuilder::push`] appends it).
#[derive(Debug, Clone, Default)]
pub struct IndexBuilder {
    max_all: u64,
    max_plain: u64,
    /// The last `FINISHED_ROUND`: where it ends, and the maxima before it.
    prev: Option<(u64, u64, u64)>,
    last_cut: u64,
    /// [`CUT_EVERY`], or what [`IndexBuilder::every`] set.
    every: u64,
    cuts: Vec<Cut>,
    context: Vec<u64>,
    /// No more cuts (too many context records).
    full: bool,
    /// The writer's event index → whether its first sample was noted.
    seen: Vec<bool>,
    first_samples: Vec<(u64, u64)>,
}

impl IndexBuilder {
    /// A builder for records that start at file offset `data_start`.
    pub fn new(data_start: u64) -> Self {
        IndexBuilder {
            last_cut: data_start,
            every: CUT_EVERY,
            ..Self::default()
        }
    }

    /// Note a cut after every `bytes` of records (at least one round) instead of
    /// [`CUT_EVERY`] (tests: small files cut at every round).
    pub fn every(mut self, bytes: u64) -> Self {
        self.every = bytes;
        self
    }

    /// A sample of the writer's event `event` (sample id `id`) at `offset`, time `time`.
    #[inline]
    pub fn sample(&mut self, event: usize, id: u64, offset: u64, time: u64) {
        self.max_plain = self.max_plain.max(time);
        self.max_all = self.max_all.max(time);
        if self.seen.get(event) != Some(&true) {
            self.first_sample(event, id, offset);
        }
    }

    #[cold]
    fn first_sample(&mut self, event: usize, id: u64, offset: u64) {
        if self.seen.len() <= event {
            // An event index plus one fits.
            self.seen.resize(event.saturating_add(1), false);
        }
        self.seen[event] = true;
        self.first_samples.push((id, offset));
    }

    /// A `PERF_RECORD_LOST` with time `time`.
    pub fn lost(&mut self, time: u64) {
        self.max_plain = self.max_plain.max(time);
        self.max_all = self.max_all.max(time);
    }

    /// A context record (COMM/FORK/EXIT/CGROUP) at `offset` with time `time`.
    pub fn context(&mut self, offset: u64, time: u64) {
        self.max_all = self.max_all.max(time);
        if self.context.len() == MAX_INDEX_CONTEXT {
            self.full = true;
            return;
        }
        self.context.push(offset);
    }

    /// A `FINISHED_ROUND` that ends at `end`.
    pub fn round(&mut self, end: u64) {
        if let Some((carry, limit, limit_plain)) = self.prev
            && !self.full
            // Rounds end after the last cut: end >= last_cut.
            && end.saturating_sub(self.last_cut) >= self.every
        {
            self.cuts.push(Cut {
                carry,
                start: end,
                limit,
                limit_plain,
            });
            self.last_cut = end;
        }
        self.prev = Some((end, self.max_all, self.max_plain));
    }

    /// Append the index records to `out`, whose end is at file offset `at`; the tail is
    /// the last record appended (and must stay the last of the data section).
    pub fn push(&self, out: &mut Vec<u8>, at: u64) {
        let last = self.cuts.last().map_or(0, |c| c.start);
        let cuts: Vec<[u64; 4]> = (self.cuts.iter())
            .map(|c| [c.carry, c.start, c.limit, c.limit_plain])
            .collect();
        push_entries(out, KIND_CUTS, &cuts);
        let context: Vec<[u64; 1]> = (self.context.iter())
            .filter(|&&o| o < last)
            .map(|&o| [o])
            .collect();
        push_entries(out, KIND_CONTEXT, &context);
        let first: Vec<[u64; 2]> = self.first_samples.iter().map(|&(i, o)| [i, o]).collect();
        push_entries(out, KIND_FIRST, &first);
        let mut tail = [0u8; TAIL_SIZE];
        header(&mut tail, KIND_TAIL, TAIL_SIZE);
        tail[8..16].copy_from_slice(INDEX_MAGIC);
        tail[16..24].copy_from_slice(&INDEX_VERSION.to_ne_bytes());
        tail[24..32].copy_from_slice(&at.to_ne_bytes());
        out.extend_from_slice(&tail);
    }
}

/// A [`HEADER_EVENT_TYPE`] record header of `misc` and `size` at the start of `out`.
fn header(out: &mut [u8], misc: u16, size: usize) {
    out[0..4].copy_from_slice(&HEADER_EVENT_TYPE.to_ne_bytes());
    out[4..6].copy_from_slice(&misc.to_ne_bytes());
    // Callers keep sizes below 64 KiB.
    out[6..8].copy_from_slice(&(size as u16).to_ne_bytes());
}

/// `entries` in records of `misc`, as many as fit each (none when there are none).
// The index's writer: N is 1 to 4 and the records it makes are below 64 KiB.
#[allow(clippy::arithmetic_side_effects)]
fn push_entries<const N: usize>(out: &mut Vec<u8>, misc: u16, entries: &[[u64; N]]) {
    let per = RECORD_ROOM / (8 * N);
    for chunk in entries.chunks(per) {
        let size = 8 + chunk.len() * 8 * N;
        let at = out.len();
        out.resize(at + 8, 0);
        header(&mut out[at..], misc, size);
        for v in chunk.iter().flatten() {
            out.extend_from_slice(&v.to_ne_bytes());
        }
    }
}

impl RangeIndex {
    /// The index at the end of `data`, a data section that starts at file offset `base`
    /// in byte order `endian`: `Ok(None)` when there is none (a perf file, an unfinished
    /// recording), `Err` when one is there but cannot be read (why).
    pub fn find(data: &[u8], base: u64, endian: Endian) -> Result<Option<RangeIndex>, String> {
        let Some(tail_at) = data.len().checked_sub(TAIL_SIZE) else {
            return Ok(None);
        };
        let tail = &data[tail_at..];
        let tail_offset = base.saturating_add(tail_at as u64);
        // Its header as the records' framing reads one.
        let Some(Ok(rec)) = Records::new(tail, tail_offset, endian).next() else {
            return Ok(None);
        };
        if rec.header.kind != HEADER_EVENT_TYPE
            || rec.header.misc != KIND_TAIL
            || rec.bytes.len() != TAIL_SIZE
            || &tail[8..16] != INDEX_MAGIC
        {
            return Ok(None);
        }
        let version = u64_at(tail, 16, endian).unwrap_or(0);
        if version != INDEX_VERSION {
            return Err(format!(
                "its range index has version {version}, not {INDEX_VERSION}"
            ));
        }
        let at = u64_at(tail, 24, endian).unwrap_or(u64::MAX);
        if at < base || at > tail_offset {
            return Err(format!(
                "its range index starts at byte {at}, outside its records"
            ));
        }
        let mut index = RangeIndex {
            at,
            ..RangeIndex::default()
        };
        // base <= at <= tail_offset (checked above): inside `data`.
        let bytes = &data[at.saturating_sub(base) as usize..tail_at];
        for rec in Records::new(bytes, at, endian) {
            let rec = rec.map_err(|e| format!("its range index: {e}"))?;
            if rec.header.kind != HEADER_EVENT_TYPE {
                return Err(format!(
                    "its range index holds a record of type {} at byte {}",
                    rec.header.kind, rec.offset
                ));
            }
            let body = &rec.bytes[8..];
            let words: Vec<u64> = (body.chunks_exact(8))
                .filter_map(|w| u64_at(w, 0, endian))
                .collect();
            match rec.header.misc {
                KIND_CUTS => index.cuts.extend(words.chunks_exact(4).map(|w| Cut {
                    carry: w[0],
                    start: w[1],
                    limit: w[2],
                    limit_plain: w[3],
                })),
                KIND_CONTEXT => index.context.extend(words),
                KIND_FIRST => {
                    (index.first_samples).extend(words.chunks_exact(2).map(|w| (w[0], w[1])))
                }
                other => {
                    return Err(format!(
                        "its range index holds a record of kind {other:#x} at byte {}",
                        rec.offset
                    ));
                }
            }
        }
        index.check(base)?;
        Ok(Some(index))
    }

    /// Offsets in order and inside the records (`base..at`).
    fn check(&self, base: u64) -> Result<(), String> {
        let inside = |o: u64| o >= base && o <= self.at;
        let mut before = base;
        for c in &self.cuts {
            if !(before <= c.carry && c.carry < c.start && inside(c.start)) {
                return Err(format!(
                    "its range index has a cut out of order ({}..{})",
                    c.carry, c.start
                ));
            }
            before = c.start;
        }
        if !self.context.is_sorted() || !self.context.iter().all(|&o| inside(o)) {
            return Err("its range index lists context records out of order".into());
        }
        if !self.first_samples.iter().all(|&(_, o)| inside(o)) {
            return Err("its range index has a first sample outside the records".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_reads_back_as_it_was_built() {
        let mut b = IndexBuilder::new(1000);
        b.sample(0, 7, 1000, 5);
        b.round(1100);
        b.context(1100, 9);
        b.sample(1, 8, 1200, 6);
        b.round(1100 + CUT_EVERY);
        b.lost(20);
        b.round(1200 + 2 * CUT_EVERY);
        let mut data = vec![0u8; (1200 + 2 * CUT_EVERY - 1000) as usize];
        let at = 1000 + data.len() as u64;
        b.push(&mut data, at);
        let index = RangeIndex::find(&data, 1000, Endian::Little)
            .unwrap()
            .unwrap();
        assert_eq!(
            index.cuts,
            vec![
                Cut {
                    carry: 1100,
                    start: 1100 + CUT_EVERY,
                    limit: 5,
                    limit_plain: 5
                },
                Cut {
                    carry: 1100 + CUT_EVERY,
                    start: 1200 + 2 * CUT_EVERY,
                    limit: 9,
                    limit_plain: 6
                }
            ]
        );
        assert_eq!(index.context, vec![1100]);
        assert_eq!(index.first_samples, vec![(7, 1000), (8, 1200)]);
        assert_eq!(index.at, at);
    }

    #[test]
    fn no_tail_is_no_index_and_a_bad_one_is_said() {
        assert_eq!(RangeIndex::find(&[0u8; 64], 0, Endian::Little), Ok(None));
        let mut data = vec![0u8; 64];
        IndexBuilder::new(0).push(&mut data, 64);
        assert!(
            RangeIndex::find(&data, 0, Endian::Little)
                .unwrap()
                .is_some()
        );
        let n = data.len();
        data[n - 8..].copy_from_slice(&1_000_000u64.to_ne_bytes());
        let e = RangeIndex::find(&data, 0, Endian::Little).unwrap_err();
        assert!(e.contains("outside its records"), "{e}");
        data[n - 16..n - 8].copy_from_slice(&2u64.to_ne_bytes());
        let e = RangeIndex::find(&data, 0, Endian::Little).unwrap_err();
        assert!(e.contains("version 2"), "{e}");
    }
}
