//! Capture: from the kernel's tracepoints to staged entries. [`tracefs`] finds events and
//! their format files, [`selector`] picks them, a backend attaches them ([`perf`] rings,
//! or an [`ftrace`] instance, both behind [`backend`]'s trait), and the [`session`]
//! drains what they deliver into [`staging`] for the threads after it; [`clock`] stamps
//! records with wall-clock time, [`context`] and [`kubernetes`] say who wrote them.
//! [`pushdown`] holds the `--where` terms the kernel filters on; [`stacks`] says which call
//! stacks to record. [`register`] creates user_events before their producers start. Most of
//! the crate's `unsafe` is here (perf_event_open, the rings, splice), each block with its reason.
//!
//! Layers, lowest first: `tracefs`, `selector`, `pushdown`, `clock`, `context`, `kubernetes`,
//! `stacks`, `staging`, `backend`, `perf`, `ftrace`, `session`, `register`.

pub mod backend;
pub mod clock;
pub mod context;
pub mod ftrace;
pub mod kubernetes;
pub mod perf;
pub mod pushdown;
#[deny(clippy::arithmetic_side_effects)]
pub mod register;
pub mod selector;
pub mod session;
pub mod stacks;
pub mod staging;
pub mod tracefs;
