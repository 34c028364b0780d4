//! The session's end of the staging channel.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_channel::{Receiver, Sender};

use uevrec_parsers::PreparedFormat;

use super::{Closed, FormatSource, Staged, StagedChunk};

/// The session's end of the staging channel: sends [`Staged`] messages to the formatter
/// thread and takes empty chunks from the pool it returns them to.
#[derive(Debug)]
pub struct StageSender<'a> {
    stage: Sender<Staged>,
    pool: Receiver<Vec<u8>>,
    /// Set when the formatter thread has returned (the writer went away): checked once
    /// per loop, so an idle session ends without waiting for a record to send.
    formatter_gone: &'a AtomicBool,
}

impl<'a> StageSender<'a> {
    /// The session's end of a staging channel: `stage` to the formatter, `pool` of empty
    /// chunk buffers back from it, `formatter_gone` set when the formatter returned.
    pub fn new(
        stage: Sender<Staged>,
        pool: Receiver<Vec<u8>>,
        formatter_gone: &'a AtomicBool,
    ) -> Self {
        StageSender {
            stage,
            pool,
            formatter_gone,
        }
    }

    /// An empty chunk from the pool; waits while every chunk is with the formatter
    /// (this is the back-pressure), `Err` once the formatter is gone.
    pub fn fresh_chunk(&self) -> Result<StagedChunk, Closed> {
        let buffer = self.pool.recv().map_err(|_| Closed)?;
        Ok(StagedChunk::with_buffer(buffer))
    }

    /// Send `chunk` if it has anything, leaving a fresh one in its place.
    pub fn flush(&self, chunk: &mut StagedChunk) -> Result<(), Closed> {
        if chunk.is_empty() {
            return Ok(());
        }
        let full = std::mem::take(chunk);
        self.stage.send(Staged::Chunk(full)).map_err(|_| Closed)?;
        *chunk = self.fresh_chunk()?;
        Ok(())
    }

    /// Say that every record written before `before_unix_ns` was sent
    /// ([`Staged::Drained`]).
    pub fn drained(&self, before_unix_ns: u64) -> Result<(), Closed> {
        self.stage
            .send(Staged::Drained(before_unix_ns))
            .map_err(|_| Closed)
    }

    /// Chunks sent and not yet taken by the formatter (the stage's occupancy).
    pub fn queued(&self) -> usize {
        self.stage.len()
    }

    /// `Err` once the formatter is gone.
    pub fn check(&self) -> Result<(), Closed> {
        if self.formatter_gone.load(Ordering::Acquire) {
            Err(Closed)
        } else {
            Ok(())
        }
    }

    /// Tell the formatter the format of `slot`'s records, after everything staged so far
    /// (so records of an event that had the slot before are not formatted with it).
    pub fn format(
        &self,
        chunk: &mut StagedChunk,
        slot: usize,
        prepared: Arc<PreparedFormat>,
        source: Arc<FormatSource>,
    ) -> Result<(), Closed> {
        self.flush(chunk)?;
        let slot = u32::try_from(slot).map_err(|_| Closed)?;
        self.stage
            .send(Staged::Format {
                slot,
                prepared,
                source,
            })
            .map_err(|_| Closed)
    }
}
