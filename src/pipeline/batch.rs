//! What the formatter hands on: batches of lines, and the parallel formatter's parts.

use crate::capture::staging::written::WrittenMarks;

/// A run of complete JSON lines (each ends with `\n`; a batch never ends mid-line).
#[derive(Debug, Default)]
pub struct Batch {
    /// The bytes of the lines.
    pub lines: Vec<u8>,
    /// How many of them are event records (not lost/notice lines).
    pub records: u64,
    /// Where each CPU's ring records end with these lines (`--instance`'s journal): the
    /// writer publishes them once the lines are written.
    pub marks: Option<WrittenMarks>,
}

/// One piece of a formatter worker's output ([`crate::pipeline::formatter::run_parallel`]): part
/// `part` of the lines of the item numbered `seq` (a staged chunk, or a format's schema
/// line), `last` when it is the item's last part.
#[derive(Debug)]
pub struct Part {
    /// The item's number (the dispatcher numbers items in the order the session staged
    /// them).
    pub seq: u64,
    /// The part's number within the item (0, 1, …).
    pub part: u32,
    /// Whether this is the item's last part.
    pub last: bool,
    /// The worker that wrote it (whose credit comes back when the part is let out).
    pub worker: usize,
    /// The lines (`None`: the item wrote nothing, and the worker kept its buffer).
    pub batch: Option<Batch>,
    /// EventHeader schema lines within `batch` (`crate::pipeline::formatter`: let out only on
    /// their first sight in the whole output).
    pub announced: Vec<Announcement>,
}

/// An EventHeader schema line a worker put in a batch: `len` bytes at `start`, for the
/// metadata block `key` (a hash of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Announcement {
    /// Where the line starts in the batch.
    pub start: usize,
    /// Its length (with its newline).
    pub len: usize,
    /// The block it describes.
    pub key: u64,
}
