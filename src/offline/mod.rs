//! Offline: files recorded earlier, turned into the lines a live recording writes.
//! [`recover`] assembles the trace.dat a killed `record --raw` left in pieces; [`decode`]
//! reads a perf.data or trace.dat (on one thread, or on N over ranges and windows).
//!
//! [`flamegraph`] folds the call stacks of JSON lines for flame graphs.
//!
//! Layers, lowest first: `recover`, `decode`, `flamegraph`.

pub mod decode;
pub mod flamegraph;
pub mod recover;
