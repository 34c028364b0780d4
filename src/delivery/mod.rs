//! Delivery to a collector: the sink of `record --otlp-endpoint`.
//!
//! ```text
//!  formatter (OTLP export frames, uevrec_parsers::otlp::frame)
//!    ──writer thread: DeliverySink::write_lines → Queue::append (the spool: durable
//!      before it returns; full: block or drop-oldest)──▶
//!  sender thread (`uevrec-export`): Queue::next → Link::send → ack / retry / drop
//! ```
//!
//! Every record handed over is, at any moment, exported (acknowledged by the
//! collector), dropped with a reason, or pending in the queue ([`ledger`]). A batch
//! leaves the queue only when the collector acknowledged it or answered that it will
//! never take it; retryable failures wait (exponential backoff with jitter, the
//! server's `Retry-After` / `RetryInfo` first) and try the same batch again, so
//! batches go out oldest first. On stop the sender keeps going until the queue is
//! empty or the drain time is up; what is left stays in the spool for the next run
//! (`--spool`) or is counted as dropped (`shutdown`, without a spool).

//!
//! Layers, lowest first: `export`, `spool`, `metrics`, `link`, `ledger`, `queue`, `wire`,
//! `sink`.

pub mod export;
pub mod ledger;
pub mod link;
pub mod metrics;
pub mod queue;
pub mod sink;
pub mod spool;
pub mod wire;

pub use link::{
    Attempt, BatchInfo, FrameSpan, FrameSplit, Link, MetaReader, NoticeBatch, NoticeMaker,
    Observer, Pacing,
};
pub use sink::{DeliverySink, Parts, Shared};
