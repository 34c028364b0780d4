//! uevrec: record Linux user_events (and any tracefs tracepoint) into JSON lines, OTLP,
//! perf.data or trace.dat. The folders are the data path (docs/architecture.md draws it):
//! [`capture`] → [`pipeline`] → [`outputs`] or [`delivery`]; [`offline`] decodes recorded
//! files through the same pipeline; [`recorder`] builds and joins the threads; [`cli`]
//! turns flags into its configuration; [`system`] and [`messages`] are leaves for all.
//!
//! Layers, lowest first: `messages`, `system`, `capture`, `pipeline`, `outputs`,
//! `delivery`, `offline`, `recorder`, `cli`.
//! A module imports only from modules before it (`tests/pure/layers.rs` checks it, and
//! each folder's own order in its `mod.rs`).
//!
//! The modules that read what files and the kernel's rings say (`delivery::spool`,
//! `capture::perf::ring`, `capture::register`, `capture::ftrace`'s reader and spool) deny
//! `clippy::arithmetic_side_effects`, as the readers of `uevrec-parsers` do (its
//! `lib.rs` says the rule).
#![warn(missing_docs)]

pub mod capture;
pub mod cli;
pub mod delivery;
pub mod messages;
pub mod offline;
pub mod outputs;
pub mod pipeline;
pub mod recorder;
pub mod system;
