//! The sink of `record --otlp-endpoint`: the writer thread appends each batch to the
//! queue ([`DeliverySink`]), a sender thread sends what is queued ([`Parts`], [`Shared`]).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::ledger::{DropReason, Ledger};
use super::link::{
    Attempt, FrameSpan, FrameSplit, Link, MetaReader, NoticeMaker, Observer, Pacing,
};
use super::queue::{Queue, QueueError};

use crate::delivery::metrics::Signal;
use crate::outputs::sink::{Sink, SinkError};

/// What the sender needs.
pub struct Parts {
    /// The queue (spool or memory).
    pub queue: Arc<dyn Queue>,
    /// The transport.
    pub link: Box<dyn Link>,
    /// The retry delays.
    pub pacing: Box<dyn Pacing>,
    /// Reads a batch's metadata.
    pub meta: Arc<MetaReader>,
    /// Makes in-band notices (None: stderr only).
    pub notices: Option<Arc<NoticeMaker>>,
    /// Whether the queue survives the process (`--spool`).
    pub durable: bool,
    /// How long stopping waits for the queue to empty.
    pub drain: Duration,
    /// Quiet: no messages on stderr.
    pub quiet: bool,
    /// Observes every attempt (metrics, health).
    pub observe: Option<Box<Observer>>,
    /// Called at least every 100 ms while the sender runs (a liveness heartbeat).
    pub tick: Option<Box<dyn Fn() + Send>>,
    /// Batches with a smaller id were left by an earlier run (the spool's first id of
    /// this run; 0: none): their records count under [`super::ledger::EARLIER_RUN`].
    pub first_new_id: u64,
}

/// Shared between the sink, the sender and the caller.
#[derive(Debug, Default)]
pub struct Shared {
    /// The accounting.
    pub ledger: Ledger,
    /// Set once the writer has handed everything over (the sender drains, then ends).
    closing: AtomicBool,
    /// Set when the sender must end now (the drain time is up).
    quit: AtomicBool,
    /// Messages already said once.
    said: Mutex<BTreeSet<String>>,
}

impl Shared {
    /// Over `ledger` (one that mirrors into the metrics, or a plain one).
    pub fn new(ledger: Ledger) -> Self {
        Shared {
            ledger,
            ..Shared::default()
        }
    }
}

/// The recorder's sink for OTLP export: hands frames to the queue, runs the sender.
pub struct DeliverySink {
    queue: Arc<dyn Queue>,
    shared: Arc<Shared>,
    meta: Arc<MetaReader>,
    sender: Option<JoinHandle<()>>,
    durable: bool,
    drain: Duration,
    quiet: bool,
    /// Set `--drain-timeout` after the recording stopped
    /// ([`DeliverySink::stop_waiting_after`]): appends waiting for room give up.
    stop_wait: Arc<AtomicBool>,
    /// Splits the bytes of a batch into frames: (records, meta, body) each.
    split: Box<FrameSplit>,
    frames: Vec<FrameSpan>,
}

impl DeliverySink {
    /// Start the sender thread over `parts`; `split` turns the bytes the formatter
    /// writes into frames (records, encoded metadata, body range).
    pub fn start(
        parts: Parts,
        shared: Arc<Shared>,
        split: Box<FrameSplit>,
    ) -> std::io::Result<Self> {
        let queue = parts.queue.clone();
        let meta = parts.meta.clone();
        let (durable, drain, quiet) = (parts.durable, parts.drain, parts.quiet);
        let sh = shared.clone();
        let sender = std::thread::Builder::new()
            .name("uevrec-export".into())
            .spawn(move || send_loop(parts, &sh))?;
        Ok(DeliverySink {
            queue,
            shared,
            meta,
            sender: Some(sender),
            durable,
            drain,
            quiet,
            stop_wait: Arc::new(AtomicBool::new(false)),
            split,
            frames: Vec::new(),
        })
    }

    /// Once `stop` is set, appends waiting for room in a full queue (`block`) wait
    /// `drain` more, then give up: their records are counted as dropped (`shutdown`).
    /// Without this they wait as long as the collector is being tried.
    pub fn stop_waiting_after(&mut self, stop: Arc<AtomicBool>, drain: Duration) {
        let (give_up, shared, stopping) =
            (self.stop_wait.clone(), self.shared.clone(), stop.clone());
        let watch = std::thread::Builder::new()
            .name("uevrec-export-stop".into())
            .spawn(move || {
                while !stopping.load(Ordering::Acquire) {
                    if shared.closing.load(Ordering::Acquire) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                let deadline = Instant::now() + drain;
                while Instant::now() < deadline && !shared.closing.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(50));
                }
                give_up.store(true, Ordering::Release);
            });
        if watch.is_err() {
            // No watcher: give up at once when stopping (nothing waits forever).
            self.stop_wait = stop;
        }
    }

    /// The accounting.
    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    fn counts(&self, meta: &[u8]) -> Vec<(String, u64)> {
        (self.meta)(meta).map(|b| b.tracepoints).unwrap_or_default()
    }
}

impl Sink for DeliverySink {
    fn write_lines(&mut self, bytes: &[u8]) -> Result<(), SinkError> {
        let mut frames = std::mem::take(&mut self.frames);
        frames.clear();
        if let Err(e) = (self.split)(bytes, &mut frames) {
            // The formatter wrote them: a broken frame is a bug, said loudly.
            let msg = format!("unreadable export frames: {e}");
            report(&self.shared, self.quiet, None, "export", &msg);
        }
        for (records, meta, body) in frames.drain(..) {
            let counts = self.counts(&meta);
            // Counted before it is queued: the sender may ack it before append returns.
            self.shared.ledger.recorded(&counts);
            match self
                .queue
                .append(records, &meta, &bytes[body], &self.stop_wait)
            {
                Ok(evicted) => {
                    for e in evicted {
                        let c = self.counts(&e.meta);
                        self.shared.ledger.dropped(&c, DropReason::SpoolFull);
                    }
                }
                Err(e) => {
                    self.shared.ledger.dropped(&counts, drop_reason(&e));
                    let what = match e {
                        QueueError::Spool(_) => "spool_io",
                        _ => "export",
                    };
                    report(&self.shared, self.quiet, None, what, &e.to_string());
                }
            }
        }
        self.frames = frames;
        Ok(())
    }

    fn close(&mut self) -> Result<(), SinkError> {
        self.shared.closing.store(true, Ordering::Release);
        // Appends that gave up waiting for room did so --drain-timeout after the stop:
        // the drain time is spent, and the collector was not taking the queue then.
        let deadline = if self.stop_wait.load(Ordering::Acquire) {
            Instant::now()
        } else {
            Instant::now() + self.drain
        };
        while self.queue.occupancy().batches > 0 && Instant::now() < deadline {
            if self.sender.as_ref().is_some_and(|s| s.is_finished()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.shared.quit.store(true, Ordering::Release);
        if let Some(s) = self.sender.take() {
            let _ = s.join();
        }
        if !self.durable {
            // What is left in memory is lost with the process: counted.
            self.queue.rewind();
            let mut ids = Vec::new();
            while let Some(q) = self.queue.next(Duration::ZERO) {
                ids.push(q.id);
                let c = self.counts(&q.meta);
                self.shared.ledger.dropped(&c, DropReason::Shutdown);
            }
            for id in ids {
                let _ = self.queue.ack(id);
            }
        }
        Ok(())
    }
}

impl Drop for DeliverySink {
    fn drop(&mut self) {
        if self.sender.is_some() {
            let _ = self.close();
        }
    }
}

/// Say `message` once (per `what` and text; at most 64 distinct messages a run) on
/// stderr and, when `notices` is given, in-band: a notice batch queued like any other
/// (its records counted under the tracepoint `uevrec`).
fn report(
    shared: &Shared,
    quiet: bool,
    notices: Option<(&NoticeMaker, &dyn Queue, &MetaReader)>,
    what: &str,
    message: &str,
) {
    {
        // Said once per kind of message: spool errors name the segment file, which
        // changes; the first one says the fix.
        let key = if what == "spool_io" {
            let words = message.split_whitespace().filter(|w| !w.contains('/'));
            words.collect::<Vec<_>>().join(" ")
        } else {
            message.to_string()
        };
        let mut said = shared.said.lock().unwrap_or_else(|e| e.into_inner());
        if said.len() >= 64 || !said.insert(format!("{what}\0{key}")) {
            return;
        }
    }
    if !quiet {
        crate::messages::print(format_args!("uevrec: {what}: {message}\n"));
    }
    let Some((make, queue, meta)) = notices else {
        return;
    };
    let Some((records, m, body)) = make(what, message) else {
        return;
    };
    let counts = meta(&m).map(|b| b.tracepoints).unwrap_or_default();
    // Never waits for room: a notice finding the queue full is dropped, counted.
    let no_wait = AtomicBool::new(true);
    shared.ledger.recorded(&counts);
    match queue.append(records, &m, &body, &no_wait) {
        Ok(evicted) => {
            for e in evicted {
                let c = meta(&e.meta).map(|b| b.tracepoints).unwrap_or_default();
                shared.ledger.dropped(&c, DropReason::SpoolFull);
            }
        }
        Err(e) => shared.ledger.dropped(&counts, drop_reason(&e)),
    }
}

/// The reason a batch that could not be queued is counted under.
fn drop_reason(e: &QueueError) -> DropReason {
    match e {
        QueueError::TooLarge { .. } => DropReason::TooLarge,
        QueueError::Stopped => DropReason::Shutdown,
        QueueError::Spool(_) => DropReason::SpoolIo,
    }
}

/// The sender thread: oldest batch first, until quit (or closing and empty). A retryable
/// failure waits (its [`Pacing`]; in the recorder the OTLP backoff with jitter, the
/// server's `Retry-After` / `RetryInfo` first) and tries the same batch again, so the
/// batches behind it wait and go out in order; on stop it keeps going until the queue is
/// empty or the drain time is up ([`Shared`]'s `quit`).
fn send_loop(mut p: Parts, shared: &Shared) {
    let in_band = |shared: &Shared, what: &str, msg: &str, p: &Parts| {
        let notices = p.notices.as_deref().map(|n| (n, &*p.queue, &*p.meta));
        report(shared, p.quiet, notices, what, msg);
    };
    'batches: loop {
        if shared.quit.load(Ordering::Acquire) {
            return;
        }
        if let Some(tick) = &p.tick {
            tick();
        }
        let Some(batch) = p.queue.next(Duration::from_millis(100)) else {
            if shared.closing.load(Ordering::Acquire) && p.queue.occupancy().batches == 0 {
                return;
            }
            continue;
        };
        let Some(mut info) = (p.meta)(&batch.meta) else {
            shared.ledger.corrupt_at_start(batch.records);
            let _ = p.queue.ack(batch.id);
            continue;
        };
        if batch.id < p.first_new_id {
            info.tracepoints = vec![(super::ledger::EARLIER_RUN.to_string(), batch.records)];
        }
        loop {
            let started = Instant::now();
            let attempt = p.link.send(info.signal, &batch.body);
            if let Some(o) = &p.observe {
                o(info.signal, &attempt, started.elapsed(), batch.body.len());
            }
            match attempt {
                Attempt::Accepted { rejected, message } => {
                    p.pacing.reset();
                    // Ack first: once acknowledged, a crash must not send it again.
                    if let Err(e) = p.queue.ack(batch.id) {
                        report(shared, p.quiet, None, "spool", &e.to_string());
                    }
                    let signal = Signal::from_byte(info.signal).unwrap_or(Signal::Logs);
                    shared.ledger.exported(
                        &info.tracepoints,
                        signal,
                        rejected,
                        signal != Signal::Metrics,
                    );
                    if rejected > 0 {
                        let msg = format!(
                            "the collector rejected {rejected} of {} items: {}",
                            info.items,
                            message.as_deref().unwrap_or("(no message)")
                        );
                        in_band(shared, "partial_success", &msg, &p);
                    }
                    continue 'batches;
                }
                Attempt::Failed { reason } => {
                    if let Err(e) = p.queue.ack(batch.id) {
                        report(shared, p.quiet, None, "spool", &e.to_string());
                    }
                    shared
                        .ledger
                        .dropped(&info.tracepoints, DropReason::Rejected);
                    let msg = format!(
                        "the collector refused a batch of {} records: {reason}",
                        batch.records
                    );
                    in_band(shared, "export_rejected", &msg, &p);
                    continue 'batches;
                }
                Attempt::Retry { after, reason } => {
                    report(
                        shared,
                        p.quiet,
                        None,
                        "export",
                        &format!("collector unavailable, retrying: {reason}"),
                    );
                    let delay = p.pacing.next_delay(after);
                    let until = Instant::now() + delay;
                    while Instant::now() < until {
                        if shared.quit.load(Ordering::Acquire) {
                            return;
                        }
                        if let Some(tick) = &p.tick {
                            tick();
                        }
                        std::thread::sleep((until - Instant::now()).min(Duration::from_millis(20)));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
