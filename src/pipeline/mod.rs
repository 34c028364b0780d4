//! The types that flow between the recording threads.
//!
//! The threads and the channels between them are drawn once, in [`crate::recorder`]:
//! the session thread copies each ring record's trace entry with its stamp into a
//! [`StagedChunk`] from a fixed pool (STAGE_CHUNKS buffers of STAGE_CAPACITY bytes,
//! allocated and touched at start); the formatter turns chunks into [`Batch`]es of lines
//! (CHANNEL_BATCHES × BATCH_BYTES) for the writer.
//!
//! Both stages are bounded: when the formatter is behind by the whole chunk pool, or the
//! writer by CHANNEL_BATCHES, the session thread waits, the rings fill and the kernel
//! counts LOST records, which become `{"uevrec":"lost"}` lines; nothing is dropped
//! silently. Empty buffers travel back on recycle channels, so no per-event allocation.
//! The buffer pools are touched up front, so uevrec's memory does not depend on how far
//! the formatter or writer ever fell behind (peak RSS is the same for 1 M or 10 M
//! events).
//!
//! One file per job: [`pool`] (the pool sizes, the only tuning knobs), [`messages`] (what
//! travels on the channels), [`sender`] (the session's end of the staging channel),
//! [`chunk`] (the byte format of a staged chunk, written and read here only) and
//! [`reorder`] (the parallel formatter's reorder stage). Their items are re-exported
//! here, so users name them `crate::pipeline::X`.

pub mod chunk;
pub mod messages;
pub mod pool;
pub mod reorder;
pub mod sender;

pub use chunk::{EncodedEntry, StagedChunk, StagedEntries, StagedEntry};
pub use messages::{Announcement, Batch, Closed, FormatSource, Part, Staged};
pub use pool::{
    BATCH_BYTES, BATCH_CAPACITY, BATCH_POOL, CHANNEL_BATCHES, PARTS_IN_FLIGHT, STAGE_BYTES,
    STAGE_CAPACITY, STAGE_CHUNKS, WORK_QUEUE, batch_pool, touched_buffers,
};
pub use reorder::Reorder;
pub use sender::StageSender;
