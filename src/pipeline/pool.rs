//! The sizes of the buffer pools and channels: the only knobs of the pipeline's memory,
//! all allocated (and touched) at start.

/// Bytes of JSON lines a batch collects before it is sent on.
pub const BATCH_BYTES: usize = 256 * 1024;

/// Bytes allocated per batch buffer: [`BATCH_BYTES`] plus room for the line that
/// passes it.
pub const BATCH_CAPACITY: usize = BATCH_BYTES + 64 * 1024;

/// How many batches may wait for the writer. The raw staging below absorbs longer
/// stalls (raw records take half the bytes of their lines).
pub const CHANNEL_BATCHES: usize = 8;

/// Line buffers the CLI gives the formatter, touched at start like the chunk pool: the
/// channel's, the writer's and the formatter's.
pub const BATCH_POOL: usize = CHANNEL_BATCHES + 2;

/// Parts a formatter worker may have sent and not yet seen let out by the reorder
/// stage (its credits): what bounds the stage's memory.
pub const PARTS_IN_FLIGHT: usize = 4;

/// Staged messages that may wait for each formatter worker.
pub const WORK_QUEUE: usize = 4;

/// Line buffers in the pool of a pipeline with `workers` formatter workers: the writer's
/// channel and its own ([`BATCH_POOL`]), and per worker the parts in flight and the
/// one it fills ([`PARTS_IN_FLIGHT`] + 1). With one worker, [`BATCH_POOL`].
pub fn batch_pool(workers: usize) -> usize {
    if workers <= 1 {
        BATCH_POOL
    } else {
        BATCH_POOL + workers * (PARTS_IN_FLIGHT + 1)
    }
}
