//! Delivery to a collector: the sink of `record --otlp-endpoint`. The writer thread
//! appends each batch of OTLP export frames to the [`queue`] (the [`spool`] with
//! `--spool`), and a sender thread sends them oldest first ([`link`], [`export`]); a batch
//! leaves only when the collector acknowledged it or answered that it never will. Every
//! record handed over is, at any moment, exported, dropped with a reason, or pending
//! ([`ledger`]). Threads: docs/architecture.md; retries and stopping: docs/export.md.
//!
//! Layers, lowest first: `export`, `spool`, `metrics`, `link`, `ledger`, `queue`, `wire`,
//! `sink`.

pub mod export;
pub mod ledger;
pub mod link;
pub mod metrics;
pub mod queue;
pub mod sink;
#[deny(clippy::arithmetic_side_effects)]
pub mod spool;
pub mod wire;

pub use link::{
    Attempt, BatchInfo, FrameSpan, FrameSplit, Link, MetaReader, NoticeBatch, NoticeMaker,
    Observer, Pacing,
};
pub use sink::{DeliverySink, Parts, Shared};
