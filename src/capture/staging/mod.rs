//! Staging: what the session hands the threads after it. Each ring record's trace entry
//! is copied with its stamp into a [`StagedChunk`] from a fixed pool ([`pool`]: allocated
//! and touched at start, so memory does not depend on how far a consumer fell behind);
//! chunks and format changes travel as [`Staged`] messages through the session's
//! [`StageSender`], and empty chunks come back on a recycle channel.
//!
//! [`written`] keeps how far the writer got, per CPU (`--instance`).
//!
//! Layers, lowest first: `pool`, `written`, `chunk`, `staged`, `sender`.

pub mod chunk;
pub mod pool;
pub mod sender;
mod staged;
pub mod written;

pub use chunk::{EncodedEntry, StagedChunk, StagedEntries, StagedEntry};
pub use pool::{STAGE_BYTES, STAGE_CAPACITY, STAGE_CHUNKS, touched_buffers};
pub use sender::StageSender;
pub use staged::{Closed, FormatSource, Staged};
