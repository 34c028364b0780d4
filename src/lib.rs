//! uevrec: record Linux user_events (and any tracefs tracepoint) into JSON lines.
//!
//! Modules follow the data path: [`tracefs`] finds events and their format files,
//! [`selector`] picks them, [`perf`] attaches per-CPU rings, [`session`] reads and decodes
//! (with `uevrec_parsers`), [`pipeline`] carries batches of lines to [`sink`]s, [`clock`]
//! turns sample times into wall-clock time, [`cli`] is the command line.
#![warn(missing_docs)]

pub mod cli;
pub mod clock;
pub mod perf;
pub mod pipeline;
pub mod selector;
pub mod session;
pub mod signals;
pub mod sink;
pub mod tracefs;
