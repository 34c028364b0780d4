//! uevrec: record Linux user_events (and any tracefs tracepoint) into JSON lines.
//!
//! Modules follow the data path: [`tracefs`] finds events and their format files,
//! [`selector`] picks them, [`perf`] attaches per-CPU rings (or [`ftrace`] a tracefs
//! instance, `--backend ftrace`), [`session`] drains them into
//! staged entries, [`formatter`] renders those as JSON lines (with `uevrec_parsers`),
//! [`pipeline`] holds what travels between the threads on the way to the [`sink`]s
//! (or, with `record --raw`, to a perf.data: [`raw`]),
//! [`describe`] what the stream's first lines say about it,
//! [`recorder`] builds the threads and joins them ([`sched`] their priorities), [`clock`] turns sample times into
//! wall-clock time, [`cli`] is the command line (flags → a [`recorder::Config`]);
//! [`top`] counts the staged records instead of formatting them (`uevrec top`);
//! [`export`] sends OTLP requests to a collector (gRPC, HTTP).
#![warn(missing_docs)]

pub mod backend;
pub mod cli;
pub mod clock;
pub mod context;
pub mod decode;
pub mod delivery;
pub mod describe;
pub mod durable;
pub mod epoll;
pub mod export;
pub mod fd_limit;
pub mod flight;
pub mod formatter;
pub mod ftrace;
pub mod kubernetes;
pub mod metrics;
pub mod perf;
pub mod pipeline;
pub mod raw;
pub mod recorder;
pub mod register;
pub mod sched;
pub mod selector;
pub mod session;
pub mod signals;
pub mod sink;
pub mod spool;
pub mod stderr;
pub mod top;
pub mod tracefs;
