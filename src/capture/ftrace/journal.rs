//! A named instance's page journal (`STATE_DIR/NAME.cpuN.journal`): a ring of page slots
//! in a file mapped shared, into which one CPU's reader reads each `trace_pipe_raw` page.
//! `read(2)` consumes the page in the kernel; the journal keeps it in the page cache, which
//! outlives a SIGKILL, until the writer's mark ([`Written`]) says its records were written.
//! The run that adopts a killed run's instance hands on the journal's unwritten records
//! first (replay), then reads the ring. Why a journal and not the rings' memory-mapped
//! interface: docs/restarts.md, "In flight at a kill".
//!
//! The tracking instance's readers (who is who, context_instance.rs) keep a journal with
//! no writer's mark ([`Journal::open`]'s `gate` None): its slots are read into in turn,
//! the oldest overwritten, never waited for, and an adopting run hands on every record
//! it holds (the names the killed run learnt, for the records it left unwritten).

use std::collections::VecDeque;
use std::fs::OpenOptions;
use std::io;
use std::path::Path;
use std::sync::Arc;

use memmap2::{MmapOptions, MmapRaw};
use uevrec_parsers::ftrace_page::{Item, PageLayout};

use crate::capture::staging::written::{Mark, Written};

/// The fewest slots a journal has: with fewer, a reader waits for the writer too often.
pub const MIN_SLOTS: usize = 256;

/// One CPU's journal.
#[derive(Debug)]
pub struct Journal {
    map: MmapRaw,
    page_size: usize,
    slots: usize,
    /// The slot the next page read goes to.
    next: usize,
    /// Per slot: the time of its last record (0: none), which the writer's mark must
    /// reach before the slot is read into again.
    last: Vec<u64>,
    /// The writer's marks; None: slots are read into again whatever they hold.
    written: Option<Arc<Written>>,
    /// Of an adopted journal whose every slot held records: its oldest record's time
    /// (0: the journal holds all its CPU's records since the instance was made).
    complete_since: u64,
    cpu: u32,
    /// Slots of a killed run holding records it did not write, oldest first.
    replay: VecDeque<usize>,
}

/// What is left of the killed run's mark while replaying: the records it covers are
/// skipped.
#[derive(Debug, Clone, Copy)]
pub struct Skip {
    mark: Mark,
    /// Records of `mark.time` seen so far.
    seen_same: u64,
}

impl Skip {
    /// Whether the record of `time` (the next one in ring order) was written, without
    /// moving on.
    pub fn covers(&self, time: u64) -> bool {
        self.mark.covers(time, self.seen_same)
    }
    /// Whether the record of `time` (the next one in ring order) was written already.
    /// Once a record was not, none after it was: the caller can drop the skip.
    pub fn written(&mut self, time: u64) -> bool {
        let covered = self.mark.covers(time, self.seen_same);
        if time == self.mark.time {
            self.seen_same = self.seen_same.saturating_add(1);
        }
        covered
    }
}

impl Journal {
    /// Open CPU `cpu`'s journal at `path` with `slots` pages of `layout`'s size. Of an
    /// `adopted` instance, the pages there whose records the writer's marks `gate` do not
    /// cover are queued for replay (and the returned [`Skip`] says what to leave out of
    /// them; with no `gate`, every page that holds records); otherwise the journal is
    /// emptied. Every page is touched for writing, so a read into it never faults.
    pub fn open(
        path: &Path,
        layout: &PageLayout,
        slots: usize,
        gate: Option<Arc<Written>>,
        cpu: u32,
        adopted: bool,
    ) -> io::Result<(Journal, Option<Skip>)> {
        let page_size = layout.page_size();
        let len = slots.saturating_mul(page_size);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(!adopted)
            .open(path)?;
        if file.metadata()?.len() != len as u64 {
            file.set_len(0)?;
            file.set_len(len as u64)?;
        }
        let map = MmapOptions::new().len(len).map_raw(&file)?;
        let mut journal = Journal {
            map,
            page_size,
            slots,
            next: 0,
            last: vec![0; slots],
            written: gate,
            complete_since: 0,
            cpu,
            replay: VecDeque::new(),
        };
        for slot in 0..slots {
            // SAFETY: the byte is inside the map, which nothing else touches now; writing
            // back what is there makes the page present and writable.
            unsafe {
                let p = journal.map.as_mut_ptr().add(slot * page_size);
                p.write_volatile(p.read_volatile());
            }
        }
        let skip = if adopted { journal.scan(layout) } else { None };
        Ok((journal, skip))
    }

    /// Of an adopted journal: each slot's last record time, the slots with records the
    /// killed run's mark does not cover (queued, oldest first), and where the next page
    /// goes (after the newest).
    fn scan(&mut self, layout: &PageLayout) -> Option<Skip> {
        let mark = self.mark();
        let mut pending = Vec::new();
        let mut newest: Option<(u64, usize)> = None;
        let mut oldest: Option<u64> = None;
        let mut empty = false;
        for slot in 0..self.slots {
            let (mut first, mut last) = (None, 0);
            for item in layout.parse_page(self.slot(slot)) {
                if let Ok(Item::Record { time, .. }) = item {
                    first.get_or_insert(time);
                    last = time;
                }
            }
            self.last[slot] = last;
            let Some(first) = first else {
                empty = true;
                continue;
            };
            oldest = Some(oldest.map_or(first, |o| o.min(first)));
            if newest.is_none_or(|(t, _)| last > t) {
                newest = Some((last, slot));
            }
            if mark.time == 0 || last >= mark.time {
                pending.push((first, slot));
            }
        }
        pending.sort_unstable();
        self.replay = pending.into_iter().map(|(_, slot)| slot).collect();
        self.next = newest.map_or(0, |(_, slot)| (slot + 1) % self.slots);
        self.complete_since = if empty { 0 } else { oldest.unwrap_or(0) };
        (!self.replay.is_empty() && mark.time != 0).then_some(Skip { mark, seen_same: 0 })
    }

    /// The writer's mark of this CPU (none without a gate).
    fn mark(&self) -> Mark {
        self.written
            .as_ref()
            .map_or(Mark::default(), |w| w.mark(self.cpu))
    }

    /// The records this CPU's ring lost that were said in written lines, by every run
    /// of the instance (the writer's marks; 0 without them).
    pub fn lost_written(&self) -> u64 {
        self.mark().lost
    }

    /// Of an adopted journal: from when on it holds every record its CPU's ring handed
    /// out (0: since the instance was made; later when older pages were read into again).
    pub fn complete_since(&self) -> u64 {
        self.complete_since
    }

    /// The next slot to replay, if any.
    pub fn replay_next(&mut self) -> Option<usize> {
        self.replay.pop_front()
    }

    /// The slot the next page may be read into: None while the writer has not written
    /// the records of the page it holds (the ring keeps the page meanwhile).
    pub fn free_slot(&self) -> Option<usize> {
        let last = self.last[self.next];
        let free = match &self.written {
            Some(w) => last == 0 || last <= w.mark(self.cpu).time,
            None => true,
        };
        free.then_some(self.next)
    }

    /// A page was read into `slot` (from [`Journal::free_slot`]): the next goes after it.
    pub fn filled(&mut self, slot: usize) {
        self.last[slot] = 0;
        self.next = (slot + 1) % self.slots;
    }

    /// The records of `slot` were handed on; the last one's time was `last` (0: none).
    pub fn handed(&mut self, slot: usize, last: u64) {
        if let Some(l) = self.last.get_mut(slot) {
            *l = last;
        }
    }

    /// The page in `slot`.
    pub fn slot(&self, slot: usize) -> &[u8] {
        // SAFETY: `slot < slots`, so the range is inside the map; only this journal's
        // owner writes it, through `slot_mut`, never while this borrow lives.
        unsafe {
            std::slice::from_raw_parts(self.map.as_ptr().add(slot * self.page_size), self.page_size)
        }
    }

    /// The page in `slot`, to read into.
    pub fn slot_mut(&mut self, slot: usize) -> &mut [u8] {
        // SAFETY: as in `slot`, and `&mut self` makes this the only borrow.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.map.as_mut_ptr().add(slot * self.page_size),
                self.page_size,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::staging::written::Progress;
    use uevrec_parsers::Endian;

    /// A 4 KiB page of the standard 64-bit layout with records (4-byte payloads) at
    /// `times` (each delta from the page's timestamp, `times[0]`).
    fn page(times: &[u64]) -> Vec<u8> {
        let mut p = vec![0u8; 4096];
        p[..8].copy_from_slice(&times[0].to_ne_bytes());
        let mut at = 16;
        let mut prev = times[0];
        for &t in times {
            let delta = (t - prev) as u32;
            prev = t;
            // type_len 1: one 4-byte word of data.
            let head = 1u32 | (delta << 5);
            p[at..at + 4].copy_from_slice(&head.to_ne_bytes());
            p[at + 4..at + 8].copy_from_slice(&(t as u32).to_ne_bytes());
            at += 8;
        }
        p[8..16].copy_from_slice(&((at - 16) as u64).to_ne_bytes());
        p
    }

    #[test]
    fn a_journal_without_marks_overwrites_its_oldest_and_replays_all() {
        let dir = tempfile::tempdir().unwrap();
        let layout = PageLayout::standard(8, Endian::NATIVE);
        let path = dir.path().join("t");
        let (mut j, _) = Journal::open(&path, &layout, 3, None, 0, false).unwrap();
        // Five pages into three slots: never waits, the oldest read into again.
        for first in [10, 20, 30, 40, 50] {
            let slot = j.free_slot().expect("never waits");
            j.slot_mut(slot).copy_from_slice(&page(&[first, first + 1]));
            j.filled(slot);
            j.handed(slot, first + 1);
        }
        drop(j);
        let (mut j, skip) = Journal::open(&path, &layout, 3, None, 0, true).unwrap();
        assert!(skip.is_none());
        let mut firsts = Vec::new();
        while let Some(slot) = j.replay_next() {
            firsts.push(u64::from_ne_bytes(j.slot(slot)[..8].try_into().unwrap()));
        }
        assert_eq!(firsts, [30, 40, 50], "oldest first");
        assert_eq!(
            j.complete_since(),
            30,
            "read into again: complete from 30 on"
        );
        // Not full: complete since the instance was made.
        let (mut j, _) = Journal::open(&path, &layout, 3, None, 0, false).unwrap();
        let slot = j.free_slot().unwrap();
        j.slot_mut(slot).copy_from_slice(&page(&[7]));
        j.filled(slot);
        drop(j);
        let (j, _) = Journal::open(&path, &layout, 3, None, 0, true).unwrap();
        assert_eq!(j.complete_since(), 0);
    }

    #[test]
    fn an_adopted_journal_replays_what_was_not_written_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let layout = PageLayout::standard(8, Endian::NATIVE);
        let written = Arc::new(Written::open(&dir.path().join("w"), 1).unwrap());
        let path = dir.path().join("j");
        let (mut j, skip) =
            Journal::open(&path, &layout, 4, Some(Arc::clone(&written)), 0, false).unwrap();
        assert!(skip.is_none());
        // Three pages read (slots 0, 1, 2); the writer wrote up to the second record of
        // the second page.
        for times in [[100, 110, 120], [130, 140, 150], [160, 170, 180]] {
            let slot = j.free_slot().unwrap();
            j.slot_mut(slot).copy_from_slice(&page(&times));
            j.filled(slot);
            j.handed(slot, times[2]);
        }
        let mut p = Progress::new(Arc::clone(&written));
        let note = |time, same| Mark {
            time,
            same,
            lost: 0,
        };
        p.pass(&[(0, note(120, 1))]);
        p.pass(&[(0, note(140, 1))]);
        p.snapshot().publish();
        // Slot 3 is free, slot 0's records are written: free too after slot 3.
        assert_eq!(j.free_slot(), Some(3));
        j.filled(3);
        assert_eq!(j.free_slot(), Some(0));
        drop(j);
        let (mut j, skip) = Journal::open(&path, &layout, 4, Some(written), 0, true).unwrap();
        let mut skip = skip.unwrap();
        assert_eq!(
            (j.replay_next(), j.replay_next(), j.replay_next()),
            (Some(1), Some(2), None)
        );
        let kept: Vec<u64> = [130, 140, 150, 160]
            .into_iter()
            .filter(|&t| !skip.written(t))
            .collect();
        assert_eq!(kept, [150, 160]);
        // Slot 3 (empty, read into but never handed) is where pages go next, then slot 0
        // (written); slots 1 and 2 wait for their records to be written.
        assert_eq!(j.free_slot(), Some(3));
    }
}
