//! What the session sends down the staging channel, in order.

use std::sync::Arc;

use uevrec_parsers::PreparedFormat;

use super::StagedChunk;

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
    /// such pass; the flight recorder cuts its dumps by time with it (crate::outputs::flight),
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
