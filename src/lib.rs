//! uevrec: record Linux user_events (and any tracefs tracepoint) into JSON lines, OTLP,
//! perf.data or trace.dat.
//!
//! The folders are the data path, in the order data flows:
//!
//! ```text
//! capture ──staged entries──▶ pipeline ──lines──▶ outputs (files, stdout, raw, flight, top)
//!                                             └──▶ delivery (queue, spool, OTLP export, metrics)
//! offline: recorded files ──▶ pipeline ──▶ outputs
//! ```
//!
//! [`recorder`] is the one owner that builds those threads and joins them; [`cli`] turns
//! flags into its configuration. [`system`] and [`messages`] are leaves for every layer.
//!
//! Layers, lowest first: `messages`, `system`, `capture`, `pipeline`, `outputs`,
//! `delivery`, `offline`, `recorder`, `cli`.
//! A module imports only from modules before it (`tests/pure/layers.rs` checks it, and
//! each folder's own order in its `mod.rs`).
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
