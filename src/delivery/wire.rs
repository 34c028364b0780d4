//! The real parts behind the delivery engine's traits: the spool ([`crate::delivery::spool`]) as
//! a [`Queue`], the OTLP transport ([`crate::delivery::export`]) as a [`Link`], its backoff as
//! [`Pacing`], and the export frames of `uevrec_parsers::otlp::frame` as the batches'
//! metadata and in-band notices.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use uevrec_parsers::otlp::{FrameMeta, OtlpEncoding, read_frames};
use uevrec_parsers::{LineOptions, OutputFormat, OutputWriter, RecordWriter};

use super::link::{Attempt, BatchInfo, FrameSpan, Link, NoticeBatch, Pacing};
use super::queue::{Evicted, Occupancy, Queue, QueueError, Queued};
use crate::delivery::export::{Backoff, Transport};
use crate::delivery::spool::{Spool, SpoolError};

impl Queue for Spool {
    fn append(
        &self,
        records: u64,
        meta: &[u8],
        body: &[u8],
        stop: &AtomicBool,
    ) -> Result<Vec<Evicted>, QueueError> {
        match Spool::append(self, records, meta, body, stop) {
            Ok(out) => Ok(out
                .evicted
                .into_iter()
                .map(|(records, meta)| Evicted { records, meta })
                .collect()),
            Err(SpoolError::Stopped) => Err(QueueError::Stopped),
            Err(SpoolError::TooLarge { size, max }) => Err(QueueError::TooLarge {
                bytes: size,
                capacity: max,
            }),
            Err(e) => Err(QueueError::Spool(e.to_string())),
        }
    }

    fn next(&self, timeout: Duration) -> Option<Queued> {
        Spool::next(self, timeout).map(|e| Queued {
            id: e.id,
            records: e.records,
            meta: e.meta,
            body: e.body,
        })
    }

    fn ack(&self, id: u64) -> Result<(), QueueError> {
        Spool::ack(self, id).map_err(|e| QueueError::Spool(e.to_string()))
    }

    fn occupancy(&self) -> Occupancy {
        let s = self.stats();
        Occupancy {
            batches: s.batches,
            records: s.records,
            bytes: s.bytes,
            capacity: s.max_bytes,
        }
    }

    /// Nothing: what the spool holds stays there for the next run.
    fn rewind(&self) {}
}

impl Link for Transport {
    fn send(&mut self, signal: u8, body: &[u8]) -> Attempt {
        let Some(signal) = uevrec_parsers::otlp::frame::Signal::from_byte(signal) else {
            return Attempt::Failed {
                reason: format!("unknown signal {signal} in a queued batch"),
            };
        };
        Transport::send(self, signal, body)
    }
}

impl Pacing for Backoff {
    fn next_delay(&mut self, hint: Option<Duration>) -> Duration {
        Backoff::next_delay(self, hint)
    }

    fn reset(&mut self) {
        Backoff::reset(self)
    }
}

/// A queued batch's metadata: an encoded [`FrameMeta`].
pub fn batch_info(meta: &[u8]) -> Option<BatchInfo> {
    let m = FrameMeta::decode(meta).ok()?;
    Some(BatchInfo {
        signal: m.signal.byte(),
        items: u64::from(m.items),
        tracepoints: m
            .tracepoints
            .into_iter()
            .enumerate()
            .map(|(i, (n, c))| {
                let pod = m.pods.get(i).map_or("", String::as_str);
                (super::ledger::series_key(n, pod), u64::from(c))
            })
            .collect(),
    })
}

/// The frames of `bytes` (what the formatter wrote), each with its metadata encoded and
/// its body's place in `bytes`.
pub fn split_frames(bytes: &[u8], out: &mut Vec<FrameSpan>) -> Result<(), String> {
    let base = bytes.as_ptr() as usize;
    for frame in read_frames(bytes) {
        let frame = frame.map_err(|e| e.to_string())?;
        let mut meta = Vec::new();
        frame.meta().encode(&mut meta).map_err(|e| e.to_string())?;
        let at = frame.body.as_ptr() as usize - base;
        out.push((u64::from(frame.records), meta, at..at + frame.body.len()));
    }
    Ok(())
}

/// In-band notices as export frames of `encoding`: a log record of scope `uevrec`
/// (`uevrec.notice` `what` and its message), as the formatter writes notices.
pub fn notice_maker(
    encoding: OtlpEncoding,
    host: Option<String>,
) -> impl Fn(&str, &str) -> Option<NoticeBatch> + Send + Sync {
    move |what, message| {
        let mut w = OutputWriter::new(OutputFormat::OtlpExport(encoding), LineOptions::default());
        if let Some(h) = &host {
            w.set_host_name(h);
        }
        let mut out = Vec::new();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_nanos() as u64);
        w.write_notice(&mut out, now, what, None, message);
        w.end_lines(&mut out);
        let mut spans = Vec::new();
        split_frames(&out, &mut spans).ok()?;
        let (records, meta, body) = spans.into_iter().next()?;
        Some((records, meta, out[body].to_vec()))
    }
}
