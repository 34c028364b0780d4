//! Where JSON lines go: standard output ([`stdout::StdoutSink`]) or a file that may rotate
//! ([`file::RotatingFile`]), and the writer loop ([`write_batches`]) that drains the
//! pipeline channel into one of them.
//!
//! Every sink receives runs of complete lines (a [`Batch`] never
//! ends mid-line) and keeps that property on its output: a line is never split across two
//! files, and a failed write leaves the output ending with a complete line.
//!
//! Layers, lowest first: `stack_lines`, `file`, `stdout`.

pub mod file;
pub mod stack_lines;
pub mod stdout;

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::capture::staging::written::FileSpan;
use crate::pipeline::Batch;

/// A destination for complete JSON lines.
pub trait Sink {
    /// Write `lines` (complete lines, each ending with `\n`) and push them to the OS.
    fn write_lines(&mut self, lines: &[u8]) -> Result<(), SinkError>;
    /// The stretch of a file the next `len` bytes of lines go to, where they go to one
    /// file (`--instance` announces it before the write, so that a run adopting after a
    /// kill inside it writes those records once: crate::capture::staging::written).
    fn span_of(&self, _len: usize) -> Option<FileSpan<'_>> {
        None
    }
    /// Close and open the output again (SIGHUP; logrotate's create/rename mode). Sinks
    /// without a path do nothing.
    fn reopen(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    /// Called while no batch arrives (every 200 ms): a sink whose reader went away says so
    /// here, so `uevrec tail | head -1` ends even when no further event comes.
    fn idle(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    /// Called once after the last batch (the pipeline has ended): a sink that hands
    /// lines on asynchronously (OTLP export) finishes here.
    fn close(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
}

/// Why a sink stopped.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The reader of standard output went away (EPIPE): stop quietly.
    #[error("output closed by its reader")]
    Closed,
    /// An I/O error on a named output.
    #[error("{what} {}: {source}{}", path.display(), hint(source))]
    Io {
        /// What was being done ("writing to", "opening", "rotating").
        what: &'static str,
        /// The file (or `<stdout>`).
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The output path is a symbolic link and following was not allowed.
    #[error(
        "refusing to write to {}: it is a symbolic link (another user could point it at a \
         file of yours); pass --follow-symlinks to write through it",
        path.display()
    )]
    Symlink {
        /// The path given.
        path: PathBuf,
    },
}

/// The fix for common errors, appended to the message.
fn hint(err: &io::Error) -> &'static str {
    match err.raw_os_error() {
        Some(libc::ENOSPC) => " (free space on that filesystem, or write elsewhere)",
        Some(libc::EDQUOT) => " (disk quota exceeded: free space, or write elsewhere)",
        Some(libc::EACCES) | Some(libc::EPERM) => {
            " (choose a path you may write, or fix its permissions)"
        }
        Some(libc::ENOENT) => " (the directory does not exist)",
        _ => "",
    }
}

impl SinkError {
    /// An I/O error about `path`; EPIPE becomes [`SinkError::Closed`].
    pub fn io(what: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        if source.kind() == io::ErrorKind::BrokenPipe {
            SinkError::Closed
        } else {
            SinkError::Io {
                what,
                path: path.into(),
                source,
            }
        }
    }
}

/// Totals the writer saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WriterStats {
    /// Batches written.
    pub batches: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// Receive batches until the channel closes and write each to `sink`, handing emptied
/// buffers back on `recycle` (dropped when that channel is full). `reopen` is checked
/// before each batch and at least every 200 ms while idle (SIGHUP sets it); so is
/// [`Sink::idle`].
///
/// On a sink error it sets `stop` and returns the error; `batches` is dropped on return,
/// so a session blocked in `send` gets an error and ends.
pub fn write_batches(
    batches: Receiver<Batch>,
    recycle: &Sender<Vec<u8>>,
    sink: &mut dyn Sink,
    stop: &AtomicBool,
    reopen: &AtomicBool,
) -> Result<WriterStats, SinkError> {
    let mut stats = WriterStats::default();
    let result = loop {
        if reopen.swap(false, Ordering::AcqRel) {
            if let Err(e) = sink.reopen() {
                break Err(e);
            }
        }
        let mut batch = match batches.recv_timeout(Duration::from_millis(200)) {
            Ok(b) => b,
            Err(RecvTimeoutError::Timeout) => match sink.idle() {
                Ok(()) => continue,
                Err(e) => break Err(e),
            },
            Err(RecvTimeoutError::Disconnected) => break sink.close().map(|()| stats),
        };
        if batch.lines.is_empty() {
            continue;
        }
        if let Some(marks) = &batch.marks {
            if let Some(span) = sink.span_of(batch.lines.len()) {
                marks.announce(&span);
            }
        }
        if let Err(e) = sink.write_lines(&batch.lines) {
            break Err(e);
        }
        // `--instance`: these lines' records need not be kept for a kill any more.
        if let Some(marks) = batch.marks.take() {
            marks.publish();
        }
        stats.batches += 1;
        stats.bytes += batch.lines.len() as u64;
        batch.lines.clear();
        let _ = recycle.try_send(batch.lines);
    };
    if result.is_err() {
        stop.store(true, Ordering::Release);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink that records what it got and fails on demand.
    #[derive(Default)]
    struct Memory {
        out: Vec<u8>,
        fail_after: Option<usize>,
        reopened: usize,
    }

    impl Sink for Memory {
        fn write_lines(&mut self, lines: &[u8]) -> Result<(), SinkError> {
            if let Some(n) = self.fail_after {
                if n == 0 {
                    return Err(SinkError::io(
                        "writing to",
                        "mem",
                        io::Error::from_raw_os_error(libc::ENOSPC),
                    ));
                }
                self.fail_after = Some(n - 1);
            }
            self.out.extend_from_slice(lines);
            Ok(())
        }
        fn reopen(&mut self) -> Result<(), SinkError> {
            self.reopened += 1;
            Ok(())
        }
    }

    fn batch(s: &str) -> Batch {
        Batch {
            lines: s.as_bytes().to_vec(),
            records: s.lines().count() as u64,
            marks: None,
        }
    }

    #[test]
    fn writes_all_batches_and_recycles_buffers() {
        let (tx, rx) = crossbeam_channel::bounded(4);
        let (rtx, rrx) = crossbeam_channel::bounded(4);
        tx.send(batch("{\"a\":1}\n")).unwrap();
        tx.send(batch("{\"a\":2}\n{\"a\":3}\n")).unwrap();
        drop(tx);
        let mut sink = Memory::default();
        let (stop, reopen) = (AtomicBool::new(false), AtomicBool::new(true));
        let stats = write_batches(rx, &rtx, &mut sink, &stop, &reopen).unwrap();
        assert_eq!(sink.out, b"{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n");
        assert_eq!(
            stats,
            WriterStats {
                batches: 2,
                bytes: 24
            }
        );
        assert_eq!(sink.reopened, 1);
        assert!(!stop.load(Ordering::Acquire));
        let bufs: Vec<Vec<u8>> = rrx.try_iter().collect();
        assert_eq!(bufs.len(), 2);
        assert!(bufs.iter().all(|b| b.is_empty() && b.capacity() > 0));
    }

    #[test]
    fn error_sets_stop_and_drops_receiver() {
        let (tx, rx) = crossbeam_channel::bounded(4);
        let (rtx, _rrx) = crossbeam_channel::bounded(4);
        tx.send(batch("x\n")).unwrap();
        tx.send(batch("y\n")).unwrap();
        let mut sink = Memory {
            fail_after: Some(1),
            ..Memory::default()
        };
        let stop = AtomicBool::new(false);
        let err = write_batches(rx, &rtx, &mut sink, &stop, &AtomicBool::new(false)).unwrap_err();
        assert!(err.to_string().contains("mem"), "{err}");
        assert!(err.to_string().contains("free space"), "{err}");
        assert!(stop.load(Ordering::Acquire));
        assert!(tx.send(batch("z\n")).is_err(), "receiver must be gone");
        assert_eq!(sink.out, b"x\n");
    }

    #[test]
    fn broken_pipe_is_closed() {
        let e = SinkError::io(
            "writing to",
            "<stdout>",
            io::Error::from(io::ErrorKind::BrokenPipe),
        );
        assert!(matches!(e, SinkError::Closed));
    }
}
