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
//!
//! A kill inside the writer's `write(2)` (or after it, before the marks are stored) leaves
//! the batch written whole or in part with the old marks. So before writing into a file
//! the writer announces the batch (its marks, the file and the stretch it goes to), and
//! the next run settles it ([`Written::settle`]): a stretch written whole gets its marks,
//! one written in part is cut off; either way no record is written twice.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
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

/// The marks file (`STATE_DIR/NAME.written`), mapped: three `u64` per CPU (time, same,
/// lost), then the announced batch: its state, the file's device and inode, where the
/// batch starts and ends in it, the path's length, [`PATH_ROOM`] bytes of path, and four
/// `u64` per CPU of the batch's marks (present, time, same, lost).
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
        let len = (Layout { cpus }.bytes()) as u64;
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
        let w = &self.words()[i * WORDS..(i + 1) * WORDS];
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

    /// Forget every mark and any announced batch (a new instance: its records start
    /// anew).
    pub fn clear(&self) {
        for cpu in 0..self.cpus as u32 {
            if let Some(words) = self.slot(cpu) {
                for w in [words.0, words.1, words.2] {
                    w.store(0, Ordering::Release);
                }
            }
        }
        self.end_announcement();
    }

    /// No batch is announced any more (its marks are stored, or forgotten).
    fn end_announcement(&self) {
        self.words()[self.layout().span()].store(0, Ordering::Release);
    }

    fn layout(&self) -> Layout {
        Layout { cpus: self.cpus }
    }

    /// Every word of the file.
    fn words(&self) -> &[AtomicU64] {
        // SAFETY: the map is `Layout::bytes` long (a multiple of 8), page-aligned, shared
        // and alive as long as `self`; every access to its words is atomic.
        unsafe {
            std::slice::from_raw_parts(
                self.map.as_ptr().cast::<AtomicU64>(),
                self.layout().bytes() / 8,
            )
        }
    }

    /// The path stored in the announcement, as words of 8 bytes (the last one padded
    /// with zeros) and its length.
    fn path_words(&self) -> (impl Iterator<Item = u64> + '_, usize) {
        let words = self.words();
        let layout = self.layout();
        let len =
            (words[layout.span() + SPAN_PATH_LEN].load(Ordering::Acquire) as usize).min(PATH_ROOM);
        let at = layout.path();
        let stored = words[at..at + len.div_ceil(8)].iter();
        (stored.map(|w| w.load(Ordering::Acquire)), len)
    }

    /// The path stored in the announcement.
    fn announced_path(&self) -> PathBuf {
        let (words, len) = self.path_words();
        let mut bytes: Vec<u8> = words.flat_map(u64::to_le_bytes).collect();
        bytes.truncate(len);
        PathBuf::from(std::ffi::OsStr::from_bytes(&bytes))
    }

    /// Announce a batch about to be written to `span` with `marks` (the writer, before
    /// its `write(2)`; [`WrittenMarks::publish`] ends the announcement). A path longer
    /// than [`PATH_ROOM`] is not announced.
    fn announce(&self, marks: &[Option<Mark>], span: &FileSpan<'_>) {
        let path = span.path.as_os_str().as_bytes();
        if path.len() > PATH_ROOM {
            return;
        }
        let words = self.words();
        let layout = self.layout();
        let at = layout.span();
        // The state is 0 here (the last publish ended the announcement): nothing below is
        // read by a later run until it is 1 again.
        let (stored, len) = self.path_words();
        if len != path.len() || !stored.eq(path.chunks(8).map(padded)) {
            for (i, w) in path.chunks(8).map(padded).enumerate() {
                words[layout.path() + i].store(w, Ordering::Release);
            }
            words[at + SPAN_PATH_LEN].store(path.len() as u64, Ordering::Release);
        }
        let values = [span.dev, span.ino, span.born, span.start, span.end];
        for (i, v) in values.into_iter().enumerate() {
            words[at + 1 + i].store(v, Ordering::Release);
        }
        for (cpu, mark) in marks.iter().enumerate().take(self.cpus) {
            let w = &words[layout.announced(cpu)..layout.announced(cpu) + 4];
            let m = mark.unwrap_or_default();
            w[1].store(m.time, Ordering::Release);
            w[2].store(m.same, Ordering::Release);
            w[3].store(m.lost, Ordering::Release);
            w[0].store(u64::from(mark.is_some()), Ordering::Release);
        }
        words[at].store(1, Ordering::Release);
    }

    /// Settle the batch a killed run announced (the run about to adopt its instance,
    /// before its own writer starts): written whole, its marks are stored; written in
    /// part, the part is cut off its file (whose last line a kill may have torn), so
    /// that this run writes those records once. A file gone or replaced is left alone.
    pub fn settle(&self) -> Settled {
        let words = self.words();
        let layout = self.layout();
        let at = layout.span();
        if words[at].load(Ordering::Acquire) != 1 {
            return Settled::Nothing;
        }
        let span: [u64; 5] = std::array::from_fn(|i| words[at + 1 + i].load(Ordering::Acquire));
        let path = self.announced_path();
        let settled = match self.settle_span(&path, span) {
            Ok(settled) => settled,
            Err(why) => Settled::Unsettled { path, why },
        };
        self.end_announcement();
        settled
    }

    /// [`Written::settle`] of the batch announced as `[dev, ino, born, start, end]` in
    /// the file at `path`: an error says why it cannot be settled.
    fn settle_span(
        &self,
        path: &Path,
        [dev, ino, born, start, end]: [u64; 5],
    ) -> Result<Settled, String> {
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| e.to_string())?;
        let m = file.metadata().map_err(|e| e.to_string())?;
        let same_birth = born == 0 || born_ns(&m).is_none_or(|b| b == born);
        if m.dev() != dev || m.ino() != ino || !same_birth {
            return Err("another file has its name now".into());
        }
        if m.len() >= end {
            // Landed whole: the marks announced with it stand.
            let words = self.words();
            let layout = self.layout();
            for cpu in 0..self.cpus {
                let w = &words[layout.announced(cpu)..layout.announced(cpu) + 4];
                if w[0].load(Ordering::Acquire) == 1 {
                    let mark = Mark {
                        time: w[1].load(Ordering::Acquire),
                        same: w[2].load(Ordering::Acquire),
                        lost: w[3].load(Ordering::Acquire),
                    };
                    self.store(cpu as u32, mark);
                }
            }
            return Ok(Settled::Landed);
        }
        if m.len() <= start {
            return Ok(Settled::Nothing);
        }
        file.set_len(start)
            .map_err(|e| format!("cutting it back to {start} bytes: {e}"))?;
        Ok(Settled::Cut {
            path: path.to_path_buf(),
            bytes: m.len() - start,
        })
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

/// When the file of `m` was made, in ns since the epoch (None where the file system does
/// not say).
pub fn born_ns(m: &std::fs::Metadata) -> Option<u64> {
    let d = m
        .created()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    u64::try_from(d.as_nanos()).ok()
}

/// Up to 8 bytes of a path as a word, zeros after them.
fn padded(piece: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..piece.len()].copy_from_slice(piece);
    u64::from_le_bytes(w)
}

/// Room for the announced batch's file path, in bytes (longer paths are not announced).
pub const PATH_ROOM: usize = 4096;

/// The word of the announcement holding the path's length (after state, dev, ino, born,
/// start, end).
const SPAN_PATH_LEN: usize = 6;

/// Where things are in the file, in words, for `cpus` CPUs.
#[derive(Debug, Clone, Copy)]
struct Layout {
    cpus: usize,
}

impl Layout {
    /// The announcement's first word (its state).
    fn span(self) -> usize {
        self.cpus.max(1) * WORDS
    }

    /// The path's first word.
    fn path(self) -> usize {
        self.span() + SPAN_PATH_LEN + 1
    }

    /// The first of CPU `cpu`'s four words of announced marks.
    fn announced(self, cpu: usize) -> usize {
        self.path() + PATH_ROOM / 8 + cpu * 4
    }

    fn bytes(self) -> usize {
        self.announced(self.cpus.max(1)) * 8
    }
}

/// The stretch of an output file a batch's lines are about to be written to.
#[derive(Debug, Clone, Copy)]
pub struct FileSpan<'a> {
    /// The file's path (absolute: the next run may start elsewhere).
    pub path: &'a Path,
    /// Its device, as `stat` says.
    pub dev: u64,
    /// Its inode (with `dev` and `born`: the same file, not another one given its name
    /// since, which may get the same inode number).
    pub ino: u64,
    /// When it was made (ns since the epoch; 0 where the file system does not say).
    pub born: u64,
    /// Its length before the batch.
    pub start: u64,
    /// Its length once the batch is written.
    pub end: u64,
}

/// What became of the batch a killed run was writing ([`Written::settle`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Settled {
    /// None was announced (none in flight, or lines not written to a file).
    Nothing,
    /// It was written whole: its marks now stand.
    Landed,
    /// Part of it was written: those `bytes` were cut off `path`, and the records are
    /// written again.
    Cut {
        /// The killed run's output file.
        path: PathBuf,
        /// The bytes cut off its end.
        bytes: u64,
    },
    /// Its file could not be settled: the records are written again, and some of them may
    /// be in that file already.
    Unsettled {
        /// The killed run's output file.
        path: PathBuf,
        /// Why, in words.
        why: String,
    },
}

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
    /// The batch's lines are about to be written to `span` of a file: say so, so that a
    /// run adopting after a kill inside the write knows what landed
    /// ([`Written::settle`]).
    pub fn announce(&self, span: &FileSpan<'_>) {
        self.to.announce(&self.marks, span);
    }

    /// The batch's lines are written: store its marks (of the CPUs this run handled
    /// records of; the others keep what the file says), then end its announcement.
    pub fn publish(&self) {
        for (cpu, mark) in self.marks.iter().enumerate() {
            if let Some(mark) = mark {
                self.to.store(cpu as u32, *mark);
            }
        }
        self.to.end_announcement();
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

    /// A batch announced and then written whole, in part or not at all before a kill:
    /// the next run's settle stores its marks, cuts the part off, or leaves all as it was.
    #[test]
    fn a_killed_writers_announced_batch_is_settled_by_what_landed() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.json");
        let marks_path = dir.path().join("n.written");
        let note = |time| Mark {
            time,
            same: 1,
            lost: 0,
        };
        // `landed` of the 8 bytes of a batch after 4 bytes already there, then a kill.
        let kill_after = |landed: usize| {
            std::fs::write(&out, b"old\n").unwrap();
            let w = Arc::new(Written::open(&marks_path, 2).unwrap());
            w.clear();
            let mut p = Progress::new(Arc::clone(&w));
            p.pass(&[(1, note(10))]);
            p.snapshot().publish();
            p.pass(&[(1, note(20))]);
            let m = std::fs::metadata(&out).unwrap();
            let span = FileSpan {
                path: &out,
                dev: m.dev(),
                ino: m.ino(),
                born: born_ns(&m).unwrap_or(0),
                start: 4,
                end: 12,
            };
            p.snapshot().announce(&span);
            let mut f = OpenOptions::new().append(true).open(&out).unwrap();
            io::Write::write_all(&mut f, &b"new1\nnew2\n"[..landed]).unwrap();
        };
        let settle = || {
            let w = Written::open(&marks_path, 2).unwrap();
            let settled = w.settle();
            (settled, w.mark(1).time, std::fs::read(&out).unwrap())
        };
        kill_after(10);
        assert_eq!(
            settle(),
            (Settled::Landed, 20, b"old\nnew1\nnew2\n".to_vec())
        );
        assert_eq!(settle().0, Settled::Nothing, "settled once");
        kill_after(7);
        let cut = Settled::Cut {
            path: out.clone(),
            bytes: 7,
        };
        assert_eq!(settle(), (cut, 10, b"old\n".to_vec()));
        kill_after(0);
        assert_eq!(settle(), (Settled::Nothing, 10, b"old\n".to_vec()));
        // Another file given the name since (maybe the same inode number, made later):
        // left alone.
        kill_after(10);
        std::fs::remove_file(&out).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&out, b"other\n").unwrap();
        let (settled, time, bytes) = settle();
        assert!(matches!(settled, Settled::Unsettled { .. }), "{settled:?}");
        assert_eq!((time, bytes), (10, b"other\n".to_vec()));
        // Published: nothing to settle.
        kill_after(10);
        let w = Arc::new(Written::open(&marks_path, 2).unwrap());
        let mut p = Progress::new(Arc::clone(&w));
        p.pass(&[(1, note(30))]);
        p.snapshot().publish();
        assert_eq!(
            settle(),
            (Settled::Nothing, 30, b"old\nnew1\nnew2\n".to_vec())
        );
    }

    /// A path is announced as it was given, whatever its length up to the room.
    #[test]
    fn announced_paths_come_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let w = Arc::new(Written::open(&dir.path().join("n.written"), 1).unwrap());
        let p = Progress::new(Arc::clone(&w));
        for len in [1, 7, 8, 9, 100, PATH_ROOM] {
            let path = PathBuf::from(format!("/{}", "a".repeat(len - 1)));
            let span = FileSpan {
                path: &path,
                dev: 1,
                ino: 2,
                born: 3,
                start: 0,
                end: 1,
            };
            p.snapshot().announce(&span);
            assert_eq!(w.announced_path(), path);
        }
    }
}
