//! `decode --threads N` on a trace.dat in windows of time: N workers each decode a
//! window of the records from start to lines, on their own
//! ([`uevrec_parsers::to_lines::trace_dat::plan_windows`]: cut from the pages' headers
//! alone, so no thread reads the records ahead of the workers), and the lines go to the
//! writer in window order: the same bytes as one thread. The first window that cannot
//! vouch for its lines, or meets a bad page, ends the windows, and the file is decoded
//! again by one thread ([`decode_windows`]). Why the windows give the same bytes, what
//! they cannot do alone and their memory: docs/trace-dat.md ("Decoding in windows of
//! time").

use std::collections::BTreeMap;

use crossbeam_channel::{Receiver, Sender};
use uevrec_parsers::to_lines::trace_dat::{
    Decoded, FileDecoder, SchemaSpan, Window, WindowDone, Windows, decode_window,
};

use super::parallel::{Handed, Par, take_lines};

/// Bytes of pages a window holds, by default (`--range-size` sets it): 1 MiB, and 128 KiB
/// a CPU with data past 8 (each window reads about half a page per CPU it passes over,
/// under 2 % of it so). Small, so that few lines wait: windows of 16 MiB took 0.1 s more
/// of the kernel's time on a 3 M-record file, making the pages of the lines waiting
/// (BENCHMARKS.md §33).
pub(crate) fn window_bytes(cpus: usize) -> usize {
    (1 << 20).max(cpus.saturating_mul(128 << 10))
}

/// What a worker sends: window, a piece of its lines with its schema lines, and with its
/// last piece what it saw.
type Piece = (usize, Vec<u8>, Vec<SchemaSpan>, Option<WindowDone>);

/// A window's pieces (lines and their schema lines) that came, and what it saw once its
/// last did.
type Waiting = (Vec<(Vec<u8>, Vec<SchemaSpan>)>, Option<WindowDone>);

/// How a decoding in windows ended.
pub(crate) struct WindowsDone {
    /// What the windows saw (with the final losses), or what the whole decoding did when
    /// a window could not vouch for its lines.
    pub decoded: Decoded,
    /// How many windows were written.
    pub windows: usize,
    /// Why the file was decoded again whole (from the window that said so on).
    pub again: Option<String>,
}

/// The lines of the windows, in order, to the writer.
struct Forward<'p> {
    out: Handed<'p>,
    /// Pieces of windows not yet written, and what the window saw once its last came.
    waiting: BTreeMap<usize, Waiting>,
    written: usize,
    /// Events whose schema line was written.
    described: Vec<bool>,
    decoded: Decoded,
    last_time: Option<u64>,
    /// A window could not vouch for its lines: why.
    failed: Option<String>,
}

impl Forward<'_> {
    /// `lines` without the schema lines of events already described.
    fn send_piece(&mut self, mut lines: Vec<u8>, spans: Vec<SchemaSpan>) {
        let mut cut = Vec::new();
        for span in spans {
            if self.described.len() <= span.event {
                self.described.resize(span.event + 1, false);
            }
            if std::mem::replace(&mut self.described[span.event], true) {
                cut.push(span.start..span.end);
            }
        }
        for range in cut.into_iter().rev() {
            lines.drain(range);
        }
        self.out.send(lines);
    }

    /// Take a piece in; write every window now due whose last piece came.
    fn take(&mut self, piece: Piece, windows: &Windows) {
        let (i, lines, spans, done) = piece;
        let entry = self.waiting.entry(i).or_default();
        if !lines.is_empty() {
            entry.0.push((lines, spans));
        }
        if done.is_some() {
            entry.1 = done;
        }
        while self.failed.is_none() {
            let Some((_, Some(_))) = self.waiting.get(&self.written) else {
                break;
            };
            let Some((pieces, Some(done))) = self.waiting.remove(&self.written) else {
                break;
            };
            if !done.sure {
                self.failed = Some(format!(
                    "window {} met items out of time order or a bad page",
                    self.written
                ));
                break;
            }
            if !windows.joins(&done, self.written + 1) {
                self.failed = Some(format!(
                    "window {} ended a CPU before the next one starts it",
                    self.written
                ));
                break;
            }
            for (lines, spans) in pieces {
                self.send_piece(lines, spans);
            }
            self.decoded.stats.absorb(done.stats);
            self.last_time = done.last_time.or(self.last_time);
            self.written += 1;
        }
    }
}

/// Decode the windows `windows` of the file `d` decodes with `par.workers` workers,
/// handing the lines to `par`'s writer in order; when a window cannot vouch for its lines,
/// `again(skip)` decodes the file whole from its start, writing only past the first
/// `skip` bytes of its lines.
///
/// What the windows cannot know alone is done here, in order: each event's schema line
/// comes only with its first record in the file (a window writes one for its own first,
/// and the lines of events a window before described are cut out:
/// `Forward::send_piece`), and the losses the rings' final `stats` add are written after
/// the last window (`Windows::finish`).
pub(crate) fn decode_windows(
    d: &FileDecoder<'_>,
    mut windows: Windows,
    par: &Par<'_>,
    populate: &(dyn Fn(usize, usize) + Sync),
    again: impl FnOnce(u64) -> Result<Decoded, String>,
) -> Result<WindowsDone, String> {
    let workers = par.workers.max(1);
    // Memory: at most this many windows planned and not yet written, the lines of those
    // not yet due waiting in pieces (docs/trace-dat.md, "Decoding in windows of time").
    let out_at_once = workers + 2;
    let count = windows.windows.len();
    let mut fwd = Forward {
        out: Handed::new(par),
        waiting: BTreeMap::new(),
        written: 0,
        described: Vec::new(),
        decoded: Decoded::default(),
        last_time: None,
        failed: None,
    };
    std::thread::scope(|s| {
        // Made in here: dropped before the workers are joined, so that none waits on a
        // channel whose other end is gone.
        let (job_tx, job_rx) =
            crossbeam_channel::bounded::<(&Window, Vec<(usize, usize)>)>(workers);
        let (done_tx, done_rx) = crossbeam_channel::unbounded::<Piece>();
        for w in 0..workers {
            let (jobs, done) = (job_rx.clone(), done_tx.clone());
            let recycle = par.recycle.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("uevrec-window{w}"))
                .spawn_scoped(s, move || work(d, &jobs, &done, &recycle, populate));
            if spawned.is_err() && w == 0 {
                // As the staged path's threads: without one there is no pipeline.
                panic!("the OS refused to start the window decoding threads");
            }
        }
        drop((job_rx, done_tx));
        let mut sent = 0;
        for (i, window) in windows.windows.iter().enumerate() {
            // At most `out_at_once` windows out: wait for the oldest to be written.
            while sent - fwd.written >= out_at_once && fwd.failed.is_none() && fwd.out.whole {
                match done_rx.recv() {
                    Ok(piece) => fwd.take(piece, &windows),
                    Err(_) => break,
                }
            }
            while let Ok(piece) = done_rx.try_recv() {
                fwd.take(piece, &windows);
            }
            let spans = windows.spans(i);
            if fwd.failed.is_some() || !fwd.out.whole || job_tx.send((window, spans)).is_err() {
                break;
            }
            sent += 1;
        }
        drop(job_tx);
        while fwd.written < sent && fwd.failed.is_none() && fwd.out.whole {
            match done_rx.recv() {
                Ok(piece) => fwd.take(piece, &windows),
                Err(_) => break,
            }
        }
        // When the windows ended early: wait for the workers to finish the windows they
        // are at (no more are given) and put every buffer of lines not written back into
        // the pool (the one-thread decoding after them waits on it).
        if fwd.failed.is_some() || !fwd.out.whole {
            for (_, lines, _, _) in done_rx.iter() {
                fwd.out.give_back(lines);
            }
            for (_, (pieces, _)) in std::mem::take(&mut fwd.waiting) {
                for (lines, _) in pieces {
                    fwd.out.give_back(lines);
                }
            }
        }
        drop(done_rx);
    });
    if let Some(why) = fwd.failed.take() {
        let decoded = again(fwd.out.bytes)?;
        return Ok(WindowsDone {
            decoded,
            windows: fwd.written,
            again: Some(why),
        });
    }
    if fwd.written == count && fwd.out.whole {
        let mut stats = std::mem::take(&mut fwd.decoded.stats);
        let lines = windows.finish(d, fwd.last_time, &mut stats);
        fwd.decoded.stats = stats;
        fwd.out.send(lines);
    }
    fwd.decoded.problems = d.problems().to_vec();
    Ok(WindowsDone {
        decoded: fwd.decoded,
        windows: fwd.written,
        again: None,
    })
}

/// A worker: decode the windows it is given, their lines in the writer's recycled
/// buffers.
fn work(
    d: &FileDecoder<'_>,
    jobs: &Receiver<(&Window, Vec<(usize, usize)>)>,
    done: &Sender<Piece>,
    recycle: &Receiver<Vec<u8>>,
    populate: &(dyn Fn(usize, usize) + Sync),
) {
    for (window, spans) in jobs {
        let i = window.index;
        // Its pages mapped in at once, not a page fault a page (BENCHMARKS.md §34).
        for (from, to) in spans {
            populate(from, to);
        }
        let mut gone = false;
        // The lines' buffer goes on whole; the decoder goes on in an empty one.
        let mut piece = |lines: &mut Vec<u8>, spans: &[SchemaSpan]| {
            if gone {
                return false;
            }
            let next = take_lines(lines, recycle);
            gone = done.send((i, next, spans.to_vec(), None)).is_err();
            !gone
        };
        let outcome = decode_window(d, window, &mut piece);
        if gone
            || done
                .send((i, Vec::new(), Vec::new(), Some(outcome)))
                .is_err()
        {
            return;
        }
    }
}
