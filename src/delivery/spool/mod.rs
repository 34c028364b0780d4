//! The crash-safe export spool (`--spool DIR`, `--spool-size SIZE`, issue 24): batches
//! are on disk before they count as handed over, and leave only when the collector
//! acknowledged them.
//!
//! One [`Spool`] is shared by the thread that appends encoded export requests
//! ([`Spool::append`]) and the thread that sends them ([`Spool::next`], then
//! [`Spool::ack`], [`Spool::discard`] or [`Spool::release`]). Batches are [`frame`]s in
//! append-only segment logs, each with an ack file beside it; each method says what a
//! crash costs there. The layout and the guarantees: docs/export.md ("The spool"); why a
//! segment log and not redb: BENCHMARKS.md §14.

/// The segment and ack records, pure: [`uevrec_parsers::spool`] (fuzzed there).
pub use uevrec_parsers::spool as frame;
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // Sizes and counts the tests choose.
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use frame::{ACK_LEN, AckKind, HEADER_LEN};

/// The smallest `--spool-size`: a few frames of a small batch.
pub const MIN_BYTES: u64 = 4096;
/// The largest segment target size.
pub const MAX_SEGMENT: u64 = 16 << 20;
/// How many damaged regions [`Recovered::corrupt`] lists (the counts cover all).
pub const MAX_LISTED: usize = 256;
/// How often a blocked [`Spool::append`] looks at its `stop` flag.
const STOP_POLL: Duration = Duration::from_millis(50);

/// What [`Spool::append`] does when the spool is full (`--spool-full`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum FullPolicy {
    /// Wait for acknowledgements to free space (the pipeline pushes back).
    #[default]
    Block,
    /// Delete the oldest segments, counting their batches as dropped.
    DropOldest,
}

/// Where and how big a spool is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpoolConfig {
    /// The directory (created if missing).
    pub dir: PathBuf,
    /// Bytes on disk the spool may take (at least [`MIN_BYTES`]): segment logs
    /// (acknowledged batches included until their segment is deleted) and ack files.
    pub max_bytes: u64,
    /// What a full spool does to appends.
    pub full: FullPolicy,
}

/// One batch as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its id: monotonic, also across restarts on the same directory.
    pub id: u64,
    /// How many telemetry records the body holds, for accounting.
    pub records: u64,
    /// Opaque bytes, small (signal, encoding, per-tracepoint counts …).
    pub meta: Vec<u8>,
    /// The encoded export request.
    pub body: Vec<u8>,
}

/// A damaged region found in a segment log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corrupt {
    /// The segment log.
    pub file: PathBuf,
    /// Where the region starts in it.
    pub offset: u64,
    /// How many bytes it spans.
    pub bytes: u64,
    /// The batch id, when its header was intact.
    pub id: Option<u64>,
    /// The batch's record count, when its header was intact.
    pub records: Option<u64>,
    /// Why it is not an intact frame.
    pub why: String,
    /// Whether it was the log's tail and was truncated away.
    pub truncated: bool,
}

/// What [`Spool::open`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Intact batches pending (to be sent).
    pub batches: u64,
    /// Their records.
    pub records: u64,
    /// Their frame bytes.
    pub bytes: u64,
    /// Damaged regions: batches whose header was intact count one each, regions without a
    /// header count one each too (at least one batch was there).
    pub corrupt_batches: u64,
    /// Records of the damaged batches whose header was intact.
    pub corrupt_records: u64,
    /// Damaged regions without an intact header (their records unknown).
    pub corrupt_unknown: u64,
    /// Bytes in damaged regions.
    pub corrupt_bytes: u64,
    /// Of those, bytes truncated away (torn tails).
    pub truncated_bytes: u64,
    /// The first [`MAX_LISTED`] damaged regions: where and why.
    pub corrupt: Vec<Corrupt>,
    /// Damaged frames that the ack file names (delivered already: not a loss).
    pub damaged_acked: u64,
    /// Ack records that failed their checksum or name no batch of their segment (a
    /// corrupt one may re-send an acknowledged batch: the only way a batch acknowledged
    /// long before is sent again).
    pub bad_ack_records: u64,
    /// Segment files deleted because every batch in them had left, and ack files without
    /// their log (an interrupted deletion).
    pub files_removed: u64,
    /// The id the next append gets.
    pub next_id: u64,
}

/// What [`Spool::append`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendOutcome {
    /// The id the batch got.
    pub id: u64,
    /// Batches (not handed out) dropped by [`FullPolicy::DropOldest`] to make room.
    pub evicted_batches: u64,
    /// Their records.
    pub evicted_records: u64,
    /// Each of them: its records and its `meta` (read back before its segment was
    /// deleted; empty when that read failed), so the caller can say what was dropped.
    pub evicted: Vec<(u64, Vec<u8>)>,
}

/// What [`Spool::release`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// The batch is pending again: [`Spool::next`] hands it out again (oldest first).
    Requeued,
    /// Its segment was evicted by [`FullPolicy::DropOldest`] while handed out: it is
    /// dropped now (counted in [`SpoolStats::dropped_oldest_batches`]).
    Dropped {
        /// Its records.
        records: u64,
    },
    /// Not a handed-out batch (unknown id, or acknowledged already).
    Unknown,
}

/// Occupancy and cumulative counts since [`Spool::open`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpoolStats {
    /// Pending batches (not yet acknowledged, handed out or not).
    pub batches: u64,
    /// Their records.
    pub records: u64,
    /// Bytes on disk (segment logs and ack files).
    pub bytes: u64,
    /// The configured limit.
    pub max_bytes: u64,
    /// Of the pending batches, those handed out and neither acknowledged nor released.
    pub handed_out: u64,
    /// Batches appended.
    pub appended_batches: u64,
    /// Their records.
    pub appended_records: u64,
    /// Batches acknowledged.
    pub acked_batches: u64,
    /// Their records.
    pub acked_records: u64,
    /// Batches discarded by the sender ([`Spool::discard`]).
    pub discarded_batches: u64,
    /// Their records.
    pub discarded_records: u64,
    /// Batches dropped by [`FullPolicy::DropOldest`].
    pub dropped_oldest_batches: u64,
    /// Their records.
    pub dropped_oldest_records: u64,
    /// Damaged batches or regions (at open and when read for sending).
    pub corrupt_batches: u64,
    /// Their records, where known.
    pub corrupt_records: u64,
    /// Appends that failed (I/O error, `ENOSPC` included).
    pub append_errors: u64,
    /// Acks whose record could not be written (I/O error). The batch still leaves this
    /// run's spool (the collector has it; a batch kept pending would hold its segment's
    /// space forever), but a crash before its segment is deleted sends it again.
    pub ack_errors: u64,
    /// Appends that had to wait for space ([`FullPolicy::Block`]).
    pub blocked_appends: u64,
}

/// What went wrong. No bytes on disk and no I/O failure make the spool panic: each error
/// says which file, what failed and what to do.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    /// A file operation failed.
    #[error("spool: cannot {op} {}: {source}{}", path.display(), hint(source))]
    Io {
        /// What was being done.
        op: &'static str,
        /// On which file or directory.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// Another process holds the spool's lock.
    #[error(
        "spool {}: in use by another uevrec{}; give each uevrec its own --spool directory",
        dir.display(),
        pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Locked {
        /// The spool directory.
        dir: PathBuf,
        /// The holder's pid, as it wrote it in `LOCK`.
        pid: Option<u32>,
    },
    /// A batch larger than the whole spool.
    #[error(
        "spool: a batch of {size} bytes (with its {HEADER_LEN}-byte frame header) cannot fit a --spool-size of {max} bytes; raise --spool-size or make batches smaller"
    )]
    TooLarge {
        /// The frame's size.
        size: u64,
        /// The spool's size.
        max: u64,
    },
    /// `--spool-size` below [`MIN_BYTES`].
    #[error("spool: --spool-size {max} is below the minimum of {MIN_BYTES} bytes")]
    TooSmall {
        /// The size asked for.
        max: u64,
    },
    /// `stop` was set while [`Spool::append`] waited for space.
    #[error("spool: stopped while waiting for space in a full spool")]
    Stopped,
    /// The ack record of a batch that left could not be written.
    #[error(
        "spool: cannot record the acknowledgement of batch {id} in {}: {source}{}; it is not sent again by this run, but would be after a crash until its segment is deleted",
        path.display(),
        hint(source)
    )]
    AckNotRecorded {
        /// The batch.
        id: u64,
        /// The ack file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// [`Spool::ack`] or [`Spool::discard`] of an id that is not pending.
    #[error("spool: batch {0} is not pending (acknowledged or dropped already, or never appended)")]
    UnknownId(u64),
    /// The batch ids are used up: the spool's files name a batch id near `u64::MAX`
    /// (not written by uevrec, which counts from 1).
    #[error(
        "spool: no batch id is left after {0} (its files name ids no uevrec wrote): send or move what it holds, then start with an empty --spool directory"
    )]
    IdsUsedUp(u64),
}

impl SpoolError {
    /// Whether this is the filesystem being full (`ENOSPC`, or `EDQUOT`).
    pub fn is_no_space(&self) -> bool {
        matches!(self, SpoolError::Io { source, .. } | SpoolError::AckNotRecorded { source, .. }
            if matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)))
    }
}

/// What to do about an I/O error, for the message.
fn hint(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::ENOSPC) => " (free space on that filesystem or choose a smaller --spool-size)",
        Some(libc::EDQUOT) => " (raise the disk quota or choose a smaller --spool-size)",
        Some(libc::EACCES | libc::EPERM) => {
            " (give uevrec write access to the directory or choose another --spool)"
        }
        Some(libc::EROFS) => " (the filesystem is read-only: choose a --spool on a writable one)",
        Some(libc::EIO) => " (the disk reported an I/O error: check it, or choose another --spool)",
        _ => "",
    }
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> SpoolError + 'a {
    move |source| SpoolError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// A segment: its log and ack file.
#[derive(Debug)]
struct Segment {
    log_path: PathBuf,
    ack_path: PathBuf,
    log_len: u64,
    ack_len: u64,
    /// The ack file, open for appends (opened when first needed).
    ack_file: Option<Arc<File>>,
    /// Pending batches in it.
    live: u64,
}

/// A pending batch: where it is.
#[derive(Debug, Clone, Copy)]
struct Pending {
    seg: u64,
    offset: u64,
    frame_len: u64,
    meta_len: u32,
    records: u64,
    handed_out: bool,
}

#[derive(Debug)]
struct State {
    /// By first id.
    segments: BTreeMap<u64, Segment>,
    /// The active segment's first id.
    active: u64,
    /// The active log, open for appends.
    writer: Arc<File>,
    /// The active segment takes no more appends (after a failed one).
    sealed: bool,
    pending: BTreeMap<u64, Pending>,
    /// Pending and not handed out.
    ready: BTreeSet<u64>,
    /// Handed out, their segment evicted: id → records.
    detached: HashMap<u64, u64>,
    next_id: u64,
    /// Bytes on disk, plus the frame being appended.
    bytes: u64,
    /// The last log read from, kept open.
    read_cache: Option<(u64, Arc<File>)>,
    stats: SpoolStats,
}

/// The spool: `Send + Sync`, shared by an appending and a sending thread.
#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    max_bytes: u64,
    full: FullPolicy,
    segment_target: u64,
    /// Holds the `flock` while the spool is open.
    _lock: File,
    state: Mutex<State>,
    /// Signalled when bytes are freed or the active segment empties.
    space: Condvar,
    /// Signalled when a batch becomes ready.
    ready: Condvar,
    /// One append at a time (the active segment's end is theirs).
    append_lock: Mutex<()>,
    /// One ack at a time (an ack file's end is theirs).
    ack_lock: Mutex<()>,
    /// The filesystem cannot reserve space (`EOPNOTSUPP` from fallocate): acks are
    /// written without a reservation.
    no_fallocate: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves consistent state (every update is done
    // under the lock in one step), so a poisoned lock is used as is.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn seg_paths(dir: &Path, first: u64) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("seg-{first:020}.log")),
        dir.join(format!("seg-{first:020}.ack")),
    )
}

/// `seg-<20 digits>.log|ack` → (first id, is log).
fn parse_seg_name(name: &str) -> Option<(u64, bool)> {
    let rest = name.strip_prefix("seg-")?;
    let (digits, ext) = rest.split_once('.')?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let is_log = match ext {
        "log" => true,
        "ack" => false,
        _ => return None,
    };
    Some((digits.parse().ok()?, is_log))
}

fn sync_dir(dir: &Path) -> Result<(), SpoolError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("fsync the directory", dir))
}

/// Create an empty file durably (the caller syncs the directory).
fn create_file(path: &Path) -> Result<File, SpoolError> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(io_err("create", path))?;
    f.sync_all().map_err(io_err("fsync", path))?;
    Ok(f)
}

fn open_rw(path: &Path) -> Result<File, SpoolError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io_err("open", path))
}

/// Cut `path` (open as `f`) to `len` bytes, durably.
fn truncate(f: &File, path: &Path, len: u64) -> Result<(), SpoolError> {
    f.set_len(len).map_err(io_err("truncate", path))?;
    f.sync_all().map_err(io_err("fsync", path))
}

/// Take the directory's lock (`DIR/LOCK`, an exclusive `flock` holding the holder's pid),
/// or say who holds it.
fn take_lock(dir: &Path) -> Result<File, SpoolError> {
    let path = dir.join("LOCK");
    crate::system::pid_lock::take(&path).map_err(|e| match e {
        crate::system::pid_lock::LockError::Held(pid) => SpoolError::Locked {
            dir: dir.to_path_buf(),
            pid,
        },
        crate::system::pid_lock::LockError::Io(op, source) => SpoolError::Io { op, path, source },
    })
}

/// The segment target size for a spool of `max_bytes`: 1/16 of it, between 4 KiB and
/// [`MAX_SEGMENT`]. The active segment rolls over to a new file when the next frame would
/// take it past this size, or when the spool is full and it holds nothing pending.
fn segment_target(max_bytes: u64) -> u64 {
    (max_bytes / 16).clamp(4096, MAX_SEGMENT)
}

impl Spool {
    /// Open (or create) the spool in `cfg.dir`: take its lock, recover what is there and
    /// start a new active segment.
    ///
    /// Each segment is read once, frame by frame: intact frames not named in its ack file
    /// become pending, oldest first; damage is counted and listed in [`Recovered`].
    /// Recovered segments are never appended to (only an empty last one named for the
    /// next id is reused). Segment names carry their first id and the active segment
    /// always exists, so ids stay monotonic across restarts even when everything was
    /// acknowledged. Memory: only an index (about 60 bytes per pending batch) and, while
    /// opening, one segment's bytes at a time.
    pub fn open(cfg: SpoolConfig) -> Result<(Spool, Recovered), SpoolError> {
        if cfg.max_bytes < MIN_BYTES {
            return Err(SpoolError::TooSmall { max: cfg.max_bytes });
        }
        let dir = cfg.dir;
        fs::create_dir_all(&dir).map_err(io_err("create the directory", &dir))?;
        let lock_file = take_lock(&dir)?;
        let mut rec = Recovered::default();

        // What files are there.
        let mut logs = BTreeSet::new();
        let mut acks = BTreeSet::new();
        for entry in fs::read_dir(&dir).map_err(io_err("list", &dir))? {
            let entry = entry.map_err(io_err("list", &dir))?;
            if let Some((first, is_log)) = entry.file_name().to_str().and_then(parse_seg_name) {
                if is_log { &mut logs } else { &mut acks }.insert(first);
            }
        }
        for &orphan in acks.difference(&logs) {
            let (_, ack) = seg_paths(&dir, orphan);
            fs::remove_file(&ack).map_err(io_err("remove", &ack))?;
            rec.files_removed = rec.files_removed.saturating_add(1);
        }

        let mut segments = BTreeMap::new();
        let mut pending = BTreeMap::new();
        let mut next_id = logs.last().copied().unwrap_or(1).max(1);
        let firsts: Vec<u64> = logs.iter().copied().collect();
        for (i, &first) in firsts.iter().enumerate() {
            let limit = firsts.get(i.saturating_add(1)).copied().unwrap_or(u64::MAX);
            let seg = recover_segment(&dir, first, limit, &mut pending, &mut rec)?;
            next_id = next_id.max(seg.1);
            segments.insert(first, seg.0);
        }
        rec.next_id = next_id;

        // The active segment: an empty last segment named after next_id is reused.
        let reuse = segments
            .last_key_value()
            .is_some_and(|(&f, s)| f == next_id && s.log_len == 0);
        let (log_path, ack_path) = seg_paths(&dir, next_id);
        let writer = if reuse {
            open_rw(&log_path)?
        } else {
            let w = create_file(&log_path)?;
            create_file(&ack_path)?;
            sync_dir(&dir)?;
            segments.insert(
                next_id,
                Segment {
                    log_path: log_path.clone(),
                    ack_path,
                    log_len: 0,
                    ack_len: 0,
                    ack_file: None,
                    live: 0,
                },
            );
            w
        };

        let mut state = State {
            segments,
            active: next_id,
            writer: Arc::new(writer),
            sealed: false,
            ready: pending.keys().copied().collect(),
            pending,
            detached: HashMap::new(),
            next_id,
            bytes: 0,
            read_cache: None,
            stats: SpoolStats {
                max_bytes: cfg.max_bytes,
                corrupt_batches: rec.corrupt_batches,
                corrupt_records: rec.corrupt_records,
                ..SpoolStats::default()
            },
        };
        // Segments with nothing pending go (their ids are below the active one's name).
        let empty: Vec<u64> = state
            .segments
            .iter()
            .filter(|&(&f, s)| f != state.active && s.live == 0)
            .map(|(&f, _)| f)
            .collect();
        for f in empty {
            delete_segment(&dir, &mut state, f)?;
            rec.files_removed = rec.files_removed.saturating_add(2);
        }
        state.bytes = state.segments.values().fold(0u64, |sum, s| {
            sum.saturating_add(s.log_len).saturating_add(s.ack_len)
        });
        for p in state.pending.values() {
            rec.batches = rec.batches.saturating_add(1);
            rec.records = rec.records.saturating_add(p.records);
            rec.bytes = rec.bytes.saturating_add(p.frame_len);
        }
        Ok((
            Spool {
                dir,
                max_bytes: cfg.max_bytes,
                full: cfg.full,
                segment_target: segment_target(cfg.max_bytes),
                _lock: lock_file,
                state: Mutex::new(state),
                space: Condvar::new(),
                ready: Condvar::new(),
                append_lock: Mutex::new(()),
                ack_lock: Mutex::new(()),
                no_fallocate: AtomicBool::new(false),
            },
            rec,
        ))
    }

    /// The spool directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Append a batch of `records` records; `Ok` once it is durable: the frame is written
    /// at the end of the active log and fdatasync'd, and a new segment file is made durable
    /// (file and directory fsync) before a frame goes into it. A crash loses at most the
    /// batch being appended, which the caller was never told was handed over; its partial
    /// frame is a torn tail, found by the checksums at the next open and truncated.
    ///
    /// The batch's ack record gets its disk space here (`fallocate` with
    /// `FALLOC_FL_KEEP_SIZE`), so a full filesystem fails this append (the batch is counted
    /// dropped), not its [`Spool::ack`]. A failed append (`ENOSPC` included) truncates its
    /// partial frame, closes the active segment to appends (the next append starts a new
    /// one) and is counted in [`SpoolStats::append_errors`]; the batches already spooled
    /// stay readable.
    ///
    /// When full, [`FullPolicy::Block`] waits (polling `stop` every 50 ms) until
    /// acknowledgements free a segment, or until `stop` is set (then
    /// [`SpoolError::Stopped`]; a batch that fits is appended even when `stop` is set, so
    /// the last batches of a run are kept). [`FullPolicy::DropOldest`] deletes the oldest
    /// segments (and, when needed, rolls the active one) until the frame fits: their
    /// pending batches that were not handed out are dropped and counted in
    /// [`AppendOutcome`] and [`SpoolStats`]; those handed out stay with the sender (the
    /// bytes it holds are in memory already): its later [`Spool::ack`] counts them as
    /// acknowledged, its [`Spool::release`] as dropped ([`Released::Dropped`]). Eviction
    /// works in whole segments because only deleting a file gives bytes back. A frame
    /// larger than the whole spool is [`SpoolError::TooLarge`] (the caller counts it
    /// dropped).
    pub fn append(
        &self,
        records: u64,
        meta: &[u8],
        body: &[u8],
        stop: &AtomicBool,
    ) -> Result<AppendOutcome, SpoolError> {
        // Lengths of buffers in memory: their sum fits a u64.
        let payload = (meta.len() as u64).saturating_add(body.len() as u64);
        let frame_len = payload.saturating_add(HEADER_LEN as u64);
        // The frame and its ack record must fit an otherwise empty spool.
        if frame_len.saturating_add(ACK_LEN as u64) > self.max_bytes || payload > frame::MAX_PAYLOAD
        {
            return Err(SpoolError::TooLarge {
                size: frame_len,
                max: self.max_bytes,
            });
        }
        let _appending = lock(&self.append_lock);
        let mut st = lock(&self.state);
        let mut outcome = AppendOutcome {
            id: 0,
            evicted_batches: 0,
            evicted_records: 0,
            evicted: Vec::new(),
        };
        let mut blocked = false;
        loop {
            let active = &st.segments[&st.active];
            if st.sealed
                || (active.log_len > 0
                    && active.log_len.saturating_add(frame_len) > self.segment_target)
            {
                if let Err(e) = self.roll(&mut st) {
                    st.stats.append_errors = st.stats.append_errors.saturating_add(1);
                    return Err(e);
                }
            }
            if st.bytes.saturating_add(frame_len) <= self.max_bytes {
                break;
            }
            let active = &st.segments[&st.active];
            if active.live == 0 && active.log_len > 0 {
                // Everything in it left: a new segment gives its bytes back.
                if let Err(e) = self.roll(&mut st) {
                    st.stats.append_errors = st.stats.append_errors.saturating_add(1);
                    return Err(e);
                }
                continue;
            }
            match self.full {
                FullPolicy::Block => {
                    if stop.load(Ordering::Relaxed) {
                        return Err(SpoolError::Stopped);
                    }
                    if !blocked {
                        blocked = true;
                        st.stats.blocked_appends = st.stats.blocked_appends.saturating_add(1);
                    }
                    st = self
                        .space
                        .wait_timeout(st, STOP_POLL)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                FullPolicy::DropOldest => {
                    let oldest = *st
                        .segments
                        .keys()
                        .next()
                        .expect("the active segment exists");
                    if oldest == st.active {
                        if let Err(e) = self.roll(&mut st) {
                            st.stats.append_errors = st.stats.append_errors.saturating_add(1);
                            return Err(e);
                        }
                    } else {
                        let (b, r) = match self.evict(&mut st, oldest, &mut outcome.evicted) {
                            Ok(dropped) => dropped,
                            Err(e) => {
                                st.stats.append_errors = st.stats.append_errors.saturating_add(1);
                                return Err(e);
                            }
                        };
                        outcome.evicted_batches = outcome.evicted_batches.saturating_add(b);
                        outcome.evicted_records = outcome.evicted_records.saturating_add(r);
                    }
                }
            }
        }

        let id = st.next_id;
        st.next_id = id.checked_add(1).ok_or(SpoolError::IdsUsedUp(id))?;
        outcome.id = id;
        let seg_id = st.active;
        let offset = st.segments[&seg_id].log_len;
        let writer = Arc::clone(&st.writer);
        let reserve = self.ack_reservation(&mut st, seg_id);
        st.bytes = st.bytes.saturating_add(frame_len);
        drop(st);

        // The batch's ack record gets its disk space now: on a full filesystem it is this
        // append that fails (its records are counted dropped), not the ack later (a
        // batch that cannot be acknowledged would hold its segment's space forever).
        if let Some((ack, end, ack_path)) = reserve
            && let Err(source) = reserve_ack_space(&ack, end)
        {
            if source.raw_os_error() == Some(libc::EOPNOTSUPP) {
                self.no_fallocate.store(true, Ordering::Relaxed);
            } else {
                let mut st = lock(&self.state);
                st.bytes = st.bytes.saturating_sub(frame_len);
                st.stats.append_errors = st.stats.append_errors.saturating_add(1);
                return Err(SpoolError::Io {
                    op: "reserve acknowledgement space in",
                    path: ack_path,
                    source,
                });
            }
        }

        let header = frame::encode_header(id, records, meta, body).expect("payload size checked");
        let written = writer
            .write_all_at(&header, offset)
            .and_then(|()| writer.write_all_at(meta, offset.saturating_add(HEADER_LEN as u64)))
            .and_then(|()| {
                writer.write_all_at(
                    body,
                    offset
                        .saturating_add(frame_len)
                        .saturating_sub(body.len() as u64),
                )
            })
            .and_then(|()| writer.sync_data());

        let mut st = lock(&self.state);
        match written {
            Ok(()) => {
                let seg = st
                    .segments
                    .get_mut(&seg_id)
                    .expect("the active segment stays");
                seg.log_len = seg.log_len.saturating_add(frame_len);
                seg.live = seg.live.saturating_add(1);
                st.pending.insert(
                    id,
                    Pending {
                        seg: seg_id,
                        offset,
                        frame_len,
                        meta_len: meta.len() as u32,
                        records,
                        handed_out: false,
                    },
                );
                st.ready.insert(id);
                st.stats.appended_batches = st.stats.appended_batches.saturating_add(1);
                st.stats.appended_records = st.stats.appended_records.saturating_add(records);
                drop(st);
                self.ready.notify_all();
                Ok(outcome)
            }
            Err(source) => {
                st.bytes = st.bytes.saturating_sub(frame_len);
                st.stats.append_errors = st.stats.append_errors.saturating_add(1);
                // Take the partial frame away; appends go to a new segment from now on
                // (after a failed fdatasync the file's cached pages cannot be trusted).
                let _ = writer.set_len(offset).and_then(|()| writer.sync_all());
                st.sealed = true;
                Err(SpoolError::Io {
                    op: "append to",
                    path: st.segments[&seg_id].log_path.clone(),
                    source,
                })
            }
        }
    }

    /// Start a new active segment; the old one goes if nothing in it is pending.
    fn roll(&self, st: &mut State) -> Result<(), SpoolError> {
        let first = st.next_id;
        let (log_path, ack_path) = seg_paths(&self.dir, first);
        if st.active == first {
            // Still empty and named for the next id (after a failed append): start it over.
            let w = create_file(&log_path)?;
            st.writer = Arc::new(w);
            st.sealed = false;
            return Ok(());
        }
        let writer = create_file(&log_path)?;
        if let Err(e) = create_file(&ack_path).and_then(|_| sync_dir(&self.dir)) {
            let _ = fs::remove_file(&log_path);
            let _ = fs::remove_file(&ack_path);
            return Err(e);
        }
        let old = st.active;
        st.segments.insert(
            first,
            Segment {
                log_path,
                ack_path,
                log_len: 0,
                ack_len: 0,
                ack_file: None,
                live: 0,
            },
        );
        st.active = first;
        st.writer = Arc::new(writer);
        st.sealed = false;
        if st.segments[&old].live == 0 {
            delete_segment(&self.dir, st, old)?;
        }
        Ok(())
    }

    /// Drop segment `first` with its batches (DropOldest): (batches, records) dropped now.
    fn evict(
        &self,
        st: &mut State,
        first: u64,
        evicted: &mut Vec<(u64, Vec<u8>)>,
    ) -> Result<(u64, u64), SpoolError> {
        // A segment's ids lie between its first id and the next segment's.
        let end = st
            .segments
            .range(first.saturating_add(1)..)
            .next()
            .map_or(u64::MAX, |(&f, _)| f);
        let ids: Vec<u64> = st
            .pending
            .range(first..end)
            .filter(|(_, p)| p.seg == first)
            .map(|(&id, _)| id)
            .collect();
        let (mut batches, mut records) = (0u64, 0u64);
        let log = File::open(&st.segments[&first].log_path).ok();
        for id in ids {
            let p = st.pending.remove(&id).expect("listed above");
            st.ready.remove(&id);
            if p.handed_out {
                st.detached.insert(id, p.records);
            } else {
                batches = batches.saturating_add(1);
                records = records.saturating_add(p.records);
                let mut meta = vec![0; p.meta_len as usize];
                let read = log.as_ref().map(|f| {
                    std::os::unix::fs::FileExt::read_exact_at(
                        f,
                        &mut meta,
                        p.offset.saturating_add(HEADER_LEN as u64),
                    )
                });
                if !matches!(read, Some(Ok(()))) {
                    meta.clear();
                }
                evicted.push((p.records, meta));
            }
        }
        st.stats.dropped_oldest_batches = st.stats.dropped_oldest_batches.saturating_add(batches);
        st.stats.dropped_oldest_records = st.stats.dropped_oldest_records.saturating_add(records);
        delete_segment(&self.dir, st, first)?;
        Ok((batches, records))
    }

    /// The oldest batch neither acknowledged nor handed out since [`Spool::open`] (or
    /// released since), waiting up to `timeout` for one. A batch that fails its checksum
    /// when read is never returned: it is counted in [`SpoolStats::corrupt_batches`]
    /// and recorded in its ack file, and the next one is tried.
    ///
    /// Retries: the sender keeps the [`Entry`] and retries it itself until it can
    /// [`Spool::ack`] (or [`Spool::discard`]) it; [`Spool::release`] is for giving a batch
    /// back (a sender stopping with batches in hand), so that a later `next` returns it
    /// again.
    ///
    /// Duplicates: a crash re-sends exactly the batches handed out here whose
    /// [`Spool::ack`] had not returned, so at most the number of batches the sender has in
    /// flight at once (one for a sender that sends one batch at a time). A torn ack record
    /// is one of those.
    pub fn next(&self, timeout: Duration) -> Option<Entry> {
        let deadline = Instant::now().checked_add(timeout);
        let mut st = lock(&self.state);
        loop {
            if let Some(id) = st.ready.pop_first() {
                let p = {
                    let p = st.pending.get_mut(&id).expect("ready ids are pending");
                    p.handed_out = true;
                    *p
                };
                let file = match &st.read_cache {
                    Some((seg, f)) if *seg == p.seg => Ok(Arc::clone(f)),
                    _ => {
                        let path = &st.segments[&p.seg].log_path;
                        File::open(path).map(Arc::new).map_err(io_err("open", path))
                    }
                };
                let file = match file {
                    Ok(f) => {
                        st.read_cache = Some((p.seg, Arc::clone(&f)));
                        f
                    }
                    Err(e) => {
                        self.found_corrupt(&mut st, id, &e.to_string());
                        continue;
                    }
                };
                drop(st);
                match read_entry(&file, id, &p) {
                    Ok(entry) => return Some(entry),
                    Err(why) => {
                        st = lock(&self.state);
                        self.found_corrupt(&mut st, id, &why);
                        continue;
                    }
                }
            }
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => Duration::from_secs(3600),
            };
            if left.is_zero() {
                return None;
            }
            st = self
                .ready
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Batch `id` failed its checksum (or could not be read) when read for sending.
    fn found_corrupt(&self, st: &mut State, id: u64, why: &str) {
        let Some(p) = st.pending.remove(&id) else {
            // Evicted meanwhile: it was handed out, so it is detached; it never reaches
            // the sender, so it is dropped.
            if let Some(records) = st.detached.remove(&id) {
                st.stats.dropped_oldest_batches = st.stats.dropped_oldest_batches.saturating_add(1);
                st.stats.dropped_oldest_records =
                    st.stats.dropped_oldest_records.saturating_add(records);
            }
            return;
        };
        st.stats.corrupt_batches = st.stats.corrupt_batches.saturating_add(1);
        st.stats.corrupt_records = st.stats.corrupt_records.saturating_add(p.records);
        let seg = st
            .segments
            .get_mut(&p.seg)
            .expect("pending batches have a segment");
        eprintln!(
            "uevrec: spool: batch {id} ({} records) in {} at offset {} is damaged ({why}): counted as corrupt, not sent",
            p.records,
            seg.log_path.display(),
            p.offset
        );
        // Best effort: so that a later open does not hand it out either (it would fail
        // its checksum again anyway).
        let _ = ack_file(seg).and_then(|f| {
            let r = frame::encode_ack(id, AckKind::Corrupt);
            f.write_all_at(&r, seg.ack_len)
                .and_then(|()| f.sync_data())
                .map_err(io_err("append to", &seg.ack_path))
        });
        seg.ack_len = seg.ack_len.saturating_add(ACK_LEN as u64);
        st.bytes = st.bytes.saturating_add(ACK_LEN as u64);
        self.left(st, p.seg);
    }

    /// A batch of segment `seg` left: delete the segment when it was the last.
    fn left(&self, st: &mut State, seg: u64) {
        let s = st
            .segments
            .get_mut(&seg)
            .expect("segment of a pending batch");
        s.live = s.live.saturating_sub(1);
        if s.live == 0 {
            if seg != st.active {
                if let Err(e) = delete_segment(&self.dir, st, seg) {
                    // Not fatal: it is deleted at the next open.
                    eprintln!("uevrec: {e}");
                }
            }
            self.space.notify_all();
        }
    }

    /// Batch `id` was acknowledged by the collector: remove it durably (the ack record is
    /// fdatasync'd before `Ok`); it is never handed out again, even after a crash.
    ///
    /// The record's disk space was reserved by [`Spool::append`]. Should it still fail to
    /// be written ([`SpoolError::AckNotRecorded`]: an I/O error, or a filesystem that
    /// cannot reserve), the batch leaves this run's spool all the same, so that its
    /// segment is deleted and gives its space back; only a crash before that deletion
    /// re-sends it.
    pub fn ack(&self, id: u64) -> Result<(), SpoolError> {
        self.remove(id, AckKind::Acked)
    }

    /// Batch `id` is given up by the sender (a non-retryable answer): removed durably like
    /// [`Spool::ack`], counted in [`SpoolStats::discarded_batches`] instead.
    pub fn discard(&self, id: u64) -> Result<(), SpoolError> {
        self.remove(id, AckKind::Discarded)
    }

    fn remove(&self, id: u64, kind: AckKind) -> Result<(), SpoolError> {
        let _acking = lock(&self.ack_lock);
        let mut st = lock(&self.state);
        let count = |st: &mut State, records: u64| match kind {
            AckKind::Discarded => {
                st.stats.discarded_batches = st.stats.discarded_batches.saturating_add(1);
                st.stats.discarded_records = st.stats.discarded_records.saturating_add(records);
            }
            _ => {
                st.stats.acked_batches = st.stats.acked_batches.saturating_add(1);
                st.stats.acked_records = st.stats.acked_records.saturating_add(records);
            }
        };
        let Some(p) = st.pending.get(&id).copied() else {
            if let Some(records) = st.detached.remove(&id) {
                count(&mut st, records);
                return Ok(());
            }
            return Err(SpoolError::UnknownId(id));
        };
        let seg = st
            .segments
            .get_mut(&p.seg)
            .expect("pending batches have a segment");
        let file = match ack_file(seg) {
            Ok(f) => f,
            Err(e) => {
                st.stats.ack_errors = st.stats.ack_errors.saturating_add(1);
                return Err(e);
            }
        };
        // The record's place is reserved now: a corrupt-batch record written meanwhile
        // (by `next`) goes after it. A failed write leaves a hole that the next open
        // counts as a bad ack record (its batch is sent again).
        let (offset, path) = (seg.ack_len, seg.ack_path.clone());
        seg.ack_len = seg.ack_len.saturating_add(ACK_LEN as u64);
        st.bytes = st.bytes.saturating_add(ACK_LEN as u64);
        drop(st);

        let r = frame::encode_ack(id, kind);
        let written = file
            .write_all_at(&r, offset)
            .and_then(|()| file.sync_data());

        let mut st = lock(&self.state);
        let result = match written {
            Ok(()) => Ok(()),
            Err(source) => {
                // The collector has the batch: it leaves this run's spool all the same,
                // so that its segment can be deleted (which makes the missing record
                // moot). Only a crash before that sends it again.
                st.stats.ack_errors = st.stats.ack_errors.saturating_add(1);
                Err(SpoolError::AckNotRecorded { id, path, source })
            }
        };
        match st.pending.remove(&id) {
            Some(p) => {
                st.ready.remove(&id);
                count(&mut st, p.records);
                self.left(&mut st, p.seg);
            }
            None => {
                // Evicted while the record was written.
                if let Some(records) = st.detached.remove(&id) {
                    count(&mut st, records);
                }
            }
        }
        result
    }

    /// What to reserve for the ack record of a batch about to be appended to `seg`: its
    /// ack file and the end its records may reach (every written record plus one per
    /// pending batch and this one). `None` where the filesystem cannot reserve, or the
    /// ack file cannot be opened (the ack reports that later).
    fn ack_reservation(&self, st: &mut State, seg: u64) -> Option<(Arc<File>, u64, PathBuf)> {
        if self.no_fallocate.load(Ordering::Relaxed) {
            return None;
        }
        let seg = st.segments.get_mut(&seg)?;
        let end = seg
            .live
            .saturating_add(1)
            .saturating_mul(ACK_LEN as u64)
            .saturating_add(seg.ack_len);
        let file = ack_file(seg).ok()?;
        Some((file, end, seg.ack_path.clone()))
    }

    /// Give back a handed-out batch: [`Spool::next`] hands it out again, oldest first.
    pub fn release(&self, id: u64) -> Released {
        let mut st = lock(&self.state);
        if let Some(p) = st.pending.get_mut(&id) {
            if !p.handed_out {
                return Released::Unknown;
            }
            p.handed_out = false;
            st.ready.insert(id);
            drop(st);
            self.ready.notify_all();
            return Released::Requeued;
        }
        match st.detached.remove(&id) {
            Some(records) => {
                st.stats.dropped_oldest_batches = st.stats.dropped_oldest_batches.saturating_add(1);
                st.stats.dropped_oldest_records =
                    st.stats.dropped_oldest_records.saturating_add(records);
                Released::Dropped { records }
            }
            None => Released::Unknown,
        }
    }

    /// Occupancy now and counts since open.
    pub fn stats(&self) -> SpoolStats {
        let st = lock(&self.state);
        let mut s = st.stats;
        s.batches = st.pending.len() as u64;
        s.records = st.pending.values().map(|p| p.records).sum();
        s.handed_out = (st.pending.values().filter(|p| p.handed_out).count() as u64)
            .saturating_add(st.detached.len() as u64);
        s.bytes = st.bytes;
        s
    }
}

/// The segment's ack file, opened for appends when first needed.
fn ack_file(seg: &mut Segment) -> Result<Arc<File>, SpoolError> {
    if let Some(f) = &seg.ack_file {
        return Ok(Arc::clone(f));
    }
    let f = Arc::new(
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&seg.ack_path)
            .map_err(io_err("open", &seg.ack_path))?,
    );
    seg.ack_file = Some(Arc::clone(&f));
    Ok(f)
}

/// Give `ack` disk space up to `end` bytes without changing its size (fallocate with
/// `FALLOC_FL_KEEP_SIZE`: ranges already allocated cost nothing, so this allocates a page
/// once per 256 batches).
fn reserve_ack_space(ack: &File, end: u64) -> io::Result<()> {
    // SAFETY: fallocate(2) on a file descriptor `ack` keeps open for the call.
    let rc = unsafe {
        libc::fallocate(
            ack.as_raw_fd(),
            libc::FALLOC_FL_KEEP_SIZE,
            0,
            end as libc::off_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Delete segment `first`: the log, a directory fsync (so that the log cannot come back
/// without its acks), then the ack file.
fn delete_segment(dir: &Path, st: &mut State, first: u64) -> Result<(), SpoolError> {
    let Some(seg) = st.segments.get(&first) else {
        return Ok(());
    };
    match fs::remove_file(&seg.log_path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("remove", &seg.log_path)(e)),
    }
    sync_dir(dir)?;
    let _ = fs::remove_file(&seg.ack_path);
    let seg = st.segments.remove(&first).expect("looked up above");
    st.bytes = st
        .bytes
        .saturating_sub(seg.log_len.saturating_add(seg.ack_len));
    if st.read_cache.as_ref().is_some_and(|(s, _)| *s == first) {
        st.read_cache = None;
    }
    Ok(())
}

/// Read and check batch `id` at `p`; `Err(why)` when it fails.
fn read_entry(file: &File, id: u64, p: &Pending) -> Result<Entry, String> {
    // `meta_len` ≤ the payload's length (its header said so); saturated, the read fails.
    let head_len = HEADER_LEN.saturating_add(p.meta_len as usize);
    let mut head = vec![0u8; head_len];
    let mut body = vec![0u8; (p.frame_len as usize).saturating_sub(head_len)];
    file.read_exact_at(&mut head, p.offset)
        .and_then(|()| file.read_exact_at(&mut body, p.offset.saturating_add(head_len as u64)))
        .map_err(|e| format!("read failed: {e}"))?;
    let header = frame::parse_header(&head).map_err(|e| format!("header: {e}"))?;
    if header.id != id || header.frame_len() != p.frame_len || header.meta_len != p.meta_len {
        return Err("header changed since the spool was opened".into());
    }
    if !frame::payload_ok(&header, &[&head[HEADER_LEN..], &body]) {
        return Err(frame::Why::PayloadChecksum.to_string());
    }
    head.drain(..HEADER_LEN);
    Ok(Entry {
        id,
        records: header.records,
        meta: head,
        body,
    })
}

/// Recover segment `first` (ids below `limit`): its pending batches go to `pending`,
/// damage to `rec`. Returns the segment and the next id it implies.
///
/// A damaged frame whose header is intact (payload checksum failure, or the file ends
/// inside it) is reported with its id and record count and skipped by its length; bytes
/// with no valid header are skipped up to the next magic followed by a header passing its
/// checksum, and reported as a region (records unknown). Damage reaching the end of the
/// log (a torn tail) is truncated away; damage in the middle stays in the file until the
/// segment is deleted, so an open before that reports it again. A damaged frame whose id
/// the ack file names was delivered already ([`Recovered::damaged_acked`], not a loss).
/// Skipping damage never re-sends another batch: ids must increase within a segment and
/// lie within it.
fn recover_segment(
    dir: &Path,
    first: u64,
    limit: u64,
    pending: &mut BTreeMap<u64, Pending>,
    rec: &mut Recovered,
) -> Result<(Segment, u64), SpoolError> {
    let (log_path, ack_path) = seg_paths(dir, first);
    let log = open_rw(&log_path)?;
    let mut buf = Vec::new();
    (&log)
        .read_to_end(&mut buf)
        .map_err(io_err("read", &log_path))?;
    let mut next_id = first;

    // Acks first: which ids left.
    let mut left: HashMap<u64, AckKind> = HashMap::new();
    let mut ack_len = 0u64;
    match File::open(&ack_path) {
        Ok(mut f) => {
            let mut acks = Vec::new();
            f.read_to_end(&mut acks)
                .map_err(io_err("read", &ack_path))?;
            let records = acks.chunks_exact(ACK_LEN);
            // The bytes of whole records (a torn last one is cut off below).
            let whole = acks.len().saturating_sub(records.remainder().len());
            for r in records {
                match frame::parse_ack(r) {
                    Some((id, kind)) if id >= first && id < limit => {
                        left.insert(id, kind);
                        next_id = next_id.max(id.saturating_add(1));
                    }
                    _ => rec.bad_ack_records = rec.bad_ack_records.saturating_add(1),
                }
            }
            ack_len = whole as u64;
            if whole != acks.len() {
                // A torn ack record: its batch was not acknowledged durably.
                let f = open_rw(&ack_path)?;
                truncate(&f, &ack_path, ack_len)?;
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            create_file(&ack_path)?;
            sync_dir(dir)?;
        }
        Err(e) => return Err(io_err("open", &ack_path)(e)),
    }

    let mut live = 0u64;
    let mut last_id = None;
    let mut truncate_at = None;
    let damage = |rec: &mut Recovered, d: frame::Damage, why: String| {
        if let Some(h) = d.header {
            if left.contains_key(&h.id) {
                rec.damaged_acked = rec.damaged_acked.saturating_add(1);
                return;
            }
            rec.corrupt_records = rec.corrupt_records.saturating_add(h.records);
        } else {
            rec.corrupt_unknown = rec.corrupt_unknown.saturating_add(1);
        }
        rec.corrupt_batches = rec.corrupt_batches.saturating_add(1);
        rec.corrupt_bytes = rec.corrupt_bytes.saturating_add(d.bytes);
        if d.tail {
            rec.truncated_bytes = rec.truncated_bytes.saturating_add(d.bytes);
        }
        if rec.corrupt.len() < MAX_LISTED {
            rec.corrupt.push(Corrupt {
                file: log_path.clone(),
                offset: d.offset,
                bytes: d.bytes,
                id: d.header.map(|h| h.id),
                records: d.header.map(|h| h.records),
                why,
                truncated: d.tail,
            });
        }
    };
    for item in frame::scan(&buf) {
        match item {
            frame::Item::Frame { offset, header, .. } => {
                let h = header;
                if h.id < first || h.id >= limit || last_id.is_some_and(|l| h.id <= l) {
                    // Intact but out of place: not written by this spool's appends.
                    let d = frame::Damage {
                        offset,
                        bytes: h.frame_len(),
                        header: Some(h),
                        why: frame::Why::PayloadChecksum,
                        tail: false,
                    };
                    damage(
                        rec,
                        d,
                        format!("batch id {} out of order in its segment", h.id),
                    );
                    continue;
                }
                last_id = Some(h.id);
                next_id = next_id.max(h.id.saturating_add(1));
                if left.contains_key(&h.id) {
                    continue;
                }
                live = live.saturating_add(1);
                pending.insert(
                    h.id,
                    Pending {
                        seg: first,
                        offset,
                        frame_len: h.frame_len(),
                        meta_len: h.meta_len,
                        records: h.records,
                        handed_out: false,
                    },
                );
            }
            frame::Item::Damage(d) => {
                if let Some(h) = d.header {
                    if h.id >= first && h.id < limit {
                        next_id = next_id.max(h.id.saturating_add(1));
                    }
                }
                if d.tail {
                    truncate_at = Some(d.offset);
                }
                damage(rec, d, d.why.to_string());
            }
        }
    }
    let mut log_len = buf.len() as u64;
    if let Some(at) = truncate_at {
        truncate(&log, &log_path, at)?;
        log_len = at;
    }
    Ok((
        Segment {
            log_path,
            ack_path,
            log_len,
            ack_len,
            ack_file: None,
            live,
        },
        next_id,
    ))
}
