//! Outputs: where formatted lines and staged records end up on this machine. [`sink`]
//! writes lines to standard output or to files that rotate; [`raw`] writes the staged
//! records as a perf.data or trace.dat (`record --raw`); [`flight`] keeps them in memory
//! and dumps the newest on demand (`record --flight`); [`top`] counts them for a live
//! table instead (`uevrec top`).
//!
//! Layers, lowest first: `sink`, `raw`, `flight`, `top`.

pub mod flight;
pub mod raw;
pub mod sink;
pub mod top;
