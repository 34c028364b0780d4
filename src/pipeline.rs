//! The types that flow between the recording threads.
//!
//! ```text
//!  rings (one per CPU) ──reader thread: read records, decode, format JSON──▶ Batch
//!        ──bounded crossbeam channel (back-pressure: a full channel stalls the reader,
//!          the rings fill, the kernel counts LOST)──▶ writer thread ──▶ sink (stdout/file)
//!  empty buffers go back to the reader on a second channel, so no per-event allocation.
//! ```

/// A run of complete JSON lines (each ends with `\n`; a batch never ends mid-line).
#[derive(Debug, Default)]
pub struct Batch {
    /// The bytes of the lines.
    pub lines: Vec<u8>,
    /// How many of them are event records (not lost/notice lines).
    pub records: u64,
}

/// Bytes of JSON lines a batch collects before it is sent on.
pub const BATCH_BYTES: usize = 256 * 1024;

/// How many batches may wait for the writer (the bound on buffered memory is
/// `CHANNEL_BATCHES * BATCH_BYTES` plus the rings).
pub const CHANNEL_BATCHES: usize = 16;
