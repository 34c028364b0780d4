//! Offline: files recorded earlier, turned into the lines a live recording writes.
//! [`recover`] assembles the trace.dat a killed `record --raw` left in pieces; [`decode`]
//! reads a perf.data or trace.dat (on one thread, or on N over ranges and windows).
//!
//! Layers, lowest first: `recover`, `decode`.

pub mod decode;
pub mod recover;
