//! From staged entries to lines: the formatter ([`formatter`]: one thread, or N workers
//! and the [`reorder`] stage that puts their output back in order), the [`Batch`]es of
//! lines it hands the writer ([`batch`], from a fixed [`pool`]), and what a stream says
//! about itself first ([`describe`]). Both ends are bounded (the chunk pool,
//! [`CHANNEL_BATCHES`]): a formatter or writer that falls behind makes the session wait,
//! the rings fill and the kernel counts lost records, which become `{"uevrec":"lost"}`
//! lines; nothing is dropped silently. The threads and channels: docs/architecture.md.
//!
//! Layers, lowest first: `pool`, `batch`, `reorder`, `stacks`, `describe`, `filter`, `formatter`.

pub mod batch;
pub mod describe;
pub mod filter;
pub mod formatter;
pub mod pool;
pub mod reorder;
pub mod stacks;

pub use batch::{Announcement, Batch, Part};
pub use pool::{
    BATCH_BYTES, BATCH_CAPACITY, BATCH_POOL, CHANNEL_BATCHES, PARTS_IN_FLIGHT, WORK_QUEUE,
    batch_pool,
};
pub use reorder::Reorder;
