//! What travels on the channels between the recording threads.

use std::sync::Arc;

use uevrec_parsers::PreparedFormat;

use super::StagedChunk;

/// A run of complete JSON lines (each ends with `\n`; a batch never ends mid-line).
#[derive(Debug, Default)]
pub struct Batch {
    /// The bytes of the lines.
    pub lines: Vec<u8>,
    /// How many of them are event records (not lost/notice lines).
    pub records: u64,
}

/// What the session sends the formatter, in order.
#[derive(Debug)]
pub enum Staged {
    /// Records, losses and notices.
    Chunk(StagedChunk),
    /// From now on, records of `slot` have this format (sent when an event attaches,
    /// before any of its records).
    Format {
        /// The session's event slot.
        slot: u32,
        /// The format with its JSON keys rendered.
        prepared: Arc<PreparedFormat>,
        /// The event's system, name and format file text (what `record --raw` stores).
        source: Arc<FormatSource>,
    },
    /// Every record written before this time (Unix ns) was sent before this message: a
    /// pass over every buffer that began then read each one to its end. Sent after each
    /// such pass; the flight recorder cuts its dumps by time with it (crate::flight),
    /// the other consumers ignore it.
    Drained(u64),
}

/// An attached event as tracefs described it: what a raw output (perf.data) stores so
/// that readers can decode its records later.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FormatSource {
    /// The tracefs system (`sched`, `user_events`, `user_events_multi` …).
    pub system: String,
    /// The tracefs event name (multi-format versions with their `.<id>` suffix).
    pub name: String,
    /// The text of `events/<system>/<name>/format`, as read when the event attached.
    pub text: String,
}

/// The next thread down the pipeline went away (its channel is closed).
#[derive(Debug)]
pub struct Closed;

/// One piece of a formatter worker's output ([`crate::formatter::run_parallel`]): part
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
    /// EventHeader schema lines within `batch` (`crate::formatter`: let out only on
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
