//! What delivery needs of the world around it: a [`Link`] that sends one request, a
//! [`Pacing`] between tries, and the readers and makers of batch metadata (the OTLP
//! transport and frames in uevrec; fakes in tests).

use std::time::Duration;

/// What one attempt to send a batch came to: the transport's [`crate::delivery::export::Outcome`] (fakes in
/// tests give the same answers).
pub use crate::delivery::export::Outcome as Attempt;

/// Something that sends one export request (the OTLP transport; fakes in tests).
pub trait Link: Send {
    /// Send `body`, an export request of `signal` (0 logs, 1 traces, 2 metrics).
    fn send(&mut self, signal: u8, body: &[u8]) -> Attempt;
}

/// The delays between tries.
pub trait Pacing: Send {
    /// The delay before the next try after a failure (`hint`: the server's).
    fn next_delay(&mut self, hint: Option<Duration>) -> Duration;
    /// A try succeeded: start again from the shortest delay.
    fn reset(&mut self);
}

/// A batch's metadata, decoded: its signal and records per tracepoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchInfo {
    /// 0 logs, 1 traces, 2 metrics.
    pub signal: u8,
    /// OTLP items (log records, spans, metric data points).
    pub items: u64,
    /// Records per tracepoint.
    pub tracepoints: Vec<(String, u64)>,
}

/// Reads a queued batch's metadata ([`uevrec_parsers::otlp::FrameMeta`] in uevrec).
pub type MetaReader = dyn Fn(&[u8]) -> Option<BatchInfo> + Send + Sync;

/// A notice batch ready to queue: its records, encoded metadata and body.
pub type NoticeBatch = (u64, Vec<u8>, Vec<u8>);

/// Makes an in-band notice batch saying `message` (`what`: its kind): the collector's
/// answers reach the collector too.
pub type NoticeMaker = dyn Fn(&str, &str) -> Option<NoticeBatch> + Send + Sync;

/// Observes each attempt: its signal, what came of it, how long it took and the bytes
/// sent (metrics, health).
pub type Observer = dyn Fn(u8, &Attempt, Duration, usize) + Send;

/// One frame of a batch: records, encoded metadata, the body's range in the batch.
pub type FrameSpan = (u64, Vec<u8>, std::ops::Range<usize>);

/// Splits the bytes the formatter wrote into frames.
pub type FrameSplit = dyn FnMut(&[u8], &mut Vec<FrameSpan>) -> Result<(), String> + Send;
