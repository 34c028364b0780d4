//! How far the writer got, per CPU (`--instance`): the time of the last record of each
//! CPU's ring that was written out, and how many records of that same time were. Kept in
//! a file shared by memory map (page cache: it outlives a SIGKILL), so that the run
//! adopting a killed run's instance hands on only what was not written (the ftrace
//! backend's page journal: docs/restarts.md, "In flight at a kill").
//!
//! The formatter notes every record it handles in a [`Progress`]; each batch it sends
//! carries a copy ([`WrittenMarks`]), which the writer publishes once the batch's lines
//! are written. Records of one CPU reach the formatter in ring order, so a mark says
//! "every record of that CPU up to here".

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::{MmapOptions, MmapRaw};

/// Where a CPU's written records end: the last one's time and how many records of that
/// time were written (`time` 0: none yet), and the records its ring lost that were said
/// in written lines. In a chunk's notes ([`super::StagedChunk::note_ring`]) `lost` is
/// what the chunk says; in a [`Progress`] and the file, the instance's total.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mark {
    /// The time (the ring's clock, ns) of the last record written.
    pub time: u64,
    /// Records of exactly that time written (1 unless several share a nanosecond).
    pub same: u64,
    /// Records lost.
    pub lost: u64,
}

impl Mark {
    /// Whether a record of `time` that comes after `seen_same` records of the same time
    /// (in ring order) was written already.
    pub fn covers(&self, time: u64, seen_same: u64) -> bool {
        time < self.time || (time == self.time && seen_same < self.same)
    }

    /// This mark moved past one more record of `time` (records come in time order).
    pub fn advance(&mut self, time: u64) {
        if time == self.time {
            self.same = self.same.saturating_add(1);
        } else {
            (self.time, self.same) = (time, 1);
        }
    }
}

/// The marks file (`STATE_DIR/NAME.written`), mapped: three `u64` per CPU: time, same,
/// lost.
#[derive(Debug)]
pub struct Written {
    map: MmapRaw,
    cpus: usize,
    _file: File,
}

impl Written {
    /// Map `path` (made if missing) for CPUs `0..cpus`; what it holds is kept (a killed
    /// run's marks, for the run that adopts its instance).
    pub fn open(path: &Path, cpus: usize) -> io::Result<Written> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let len = (cpus.max(1) * WORDS * 8) as u64;
        if file.metadata()?.len() < len {
            file.set_len(len)?;
        }
        let map = MmapOptions::new().len(len as usize).map_raw(&file)?;
        Ok(Written {
            map,
            cpus,
            _file: file,
        })
    }

    /// The time, same-count and lost words of `cpu`, if the file has them.
    fn slot(&self, cpu: u32) -> Option<(&AtomicU64, &AtomicU64, &AtomicU64)> {
        let i = cpu as usize;
        if i >= self.cpus {
            return None;
        }
        // SAFETY: the map is `cpus * WORDS` u64s, page-aligned, shared and alive as long
        // as `self`; every access to it is atomic.
        let words = unsafe {
            std::slice::from_raw_parts(self.map.as_ptr().cast::<AtomicU64>(), self.cpus * WORDS)
        };
        let w = &words[i * WORDS..(i + 1) * WORDS];
        Some((&w[0], &w[1], &w[2]))
    }

    /// CPU `cpu`'s mark (0: nothing written, or a CPU the file has no room for).
    pub fn mark(&self, cpu: u32) -> Mark {
        self.slot(cpu)
            .map_or(Mark::default(), |(time, same, lost)| Mark {
                time: time.load(Ordering::Acquire),
                same: same.load(Ordering::Acquire),
                lost: lost.load(Ordering::Acquire),
            })
    }

    /// Forget every mark (a new instance: its records start anew).
    pub fn clear(&self) {
        for cpu in 0..self.cpus as u32 {
            if let Some(words) = self.slot(cpu) {
                for w in [words.0, words.1, words.2] {
                    w.store(0, Ordering::Release);
                }
            }
        }
    }

    /// Store `mark` for `cpu`. The count first: a kill between the two stores leaves the
    /// old time with the new count; every record of the old time is written by then (the
    /// new time is later, or the same with a count as large), so the pair never says more
    /// was written than was.
    fn store(&self, cpu: u32, mark: Mark) {
        if let Some((time, same, lost)) = self.slot(cpu) {
            same.store(mark.same, Ordering::Release);
            time.store(mark.time, Ordering::Release);
            lost.store(mark.lost, Ordering::Release);
        }
    }
}

/// Words per CPU in the file.
const WORDS: usize = 3;

/// The formatter's running marks: where each CPU's records handled so far end.
#[derive(Debug)]
pub struct Progress {
    to: Arc<Written>,
    /// Per CPU, None until its first chunk: then it starts from the file's mark (a
    /// killed run's, when the instance was adopted; the backend empties the file of a new
    /// instance before any record is read).
    marks: Vec<Option<Mark>>,
}

impl Progress {
    /// Progress to be published into `to`.
    pub fn new(to: Arc<Written>) -> Progress {
        let marks = vec![None; to.cpus];
        Progress { to, marks }
    }

    /// The records of a chunk were handled: `notes` says where each CPU's end and what
    /// they said lost (a CPU's records of one time may span two chunks: their counts add
    /// up).
    pub fn pass(&mut self, notes: &[(u32, Mark)]) {
        for &(cpu, m) in notes {
            let Some(slot) = self.marks.get_mut(cpu as usize) else {
                continue;
            };
            let have = slot.get_or_insert_with(|| self.to.mark(cpu));
            have.lost = have.lost.saturating_add(m.lost);
            if m.time == 0 {
                continue;
            }
            if have.time == m.time {
                have.same = have.same.saturating_add(m.same);
            } else {
                (have.time, have.same) = (m.time, m.same);
            }
        }
    }

    /// A copy for the batch being sent: what it and the batches before it hold.
    pub fn snapshot(&self) -> WrittenMarks {
        WrittenMarks {
            to: Arc::clone(&self.to),
            marks: self.marks.clone().into_boxed_slice(),
        }
    }
}

/// The marks a batch's lines reach; the writer publishes them after writing the batch.
#[derive(Debug)]
pub struct WrittenMarks {
    to: Arc<Written>,
    marks: Box<[Option<Mark>]>,
}

impl WrittenMarks {
    /// The batch's lines are written: store its marks (of the CPUs this run handled
    /// records of; the others keep what the file says).
    pub fn publish(&self) {
        for (cpu, mark) in self.marks.iter().enumerate() {
            if let Some(mark) = mark {
                self.to.store(cpu as u32, *mark);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_survive_a_new_mapping_and_cover_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n.written");
        let w = Arc::new(Written::open(&path, 3).unwrap());
        let mut p = Progress::new(Arc::clone(&w));
        let note = |time, same, lost| Mark { time, same, lost };
        p.pass(&[(0, note(10, 1, 0)), (2, note(5, 1, 0))]);
        p.pass(&[(0, note(20, 1, 7))]);
        p.pass(&[(0, note(20, 1, 0))]);
        let snap = p.snapshot();
        assert_eq!(w.mark(0), Mark::default(), "nothing before the publish");
        snap.publish();
        drop((p, snap, w));
        let again = Written::open(&path, 3).unwrap();
        let m = again.mark(0);
        assert_eq!(m, note(20, 2, 7));
        assert!(m.covers(19, 0) && m.covers(20, 1) && !m.covers(20, 2) && !m.covers(21, 0));
        assert_eq!(again.mark(1), Mark::default());
        assert_eq!(again.mark(2), note(5, 1, 0));
        // A new run's progress starts from the file's marks.
        let again = Arc::new(again);
        let mut p = Progress::new(Arc::clone(&again));
        p.pass(&[(0, note(0, 0, 3))]);
        p.snapshot().publish();
        assert_eq!(again.mark(0), note(20, 2, 10));
        assert_eq!(again.mark(7), Mark::default(), "beyond the file: none");
        again.clear();
        assert_eq!(again.mark(0), Mark::default());
    }
}
