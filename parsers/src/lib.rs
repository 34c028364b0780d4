//! Pure parsers and decoders for uevrec, the consumer side: no I/O, no `unsafe`. (The
//! producer side, register commands and payload encoding, is the `uevrec-samples` crate.)
//!
//! The data path, one module per step:
//! 1. [`format_file`]: tracefs `format` text → [`schema::EventFormat`]
//!    (types resolved by [`field_type`]);
//! 2. [`perf_sample`]: perf ring-buffer record bytes → sample (ids, time, cpu, raw bytes);
//! 3. [`location`] + [`decode`]: raw trace-entry bytes + schema → typed field values;
//! 4. [`json_line`]: values → one JSON line.
//!
//! [`perf_data`] reads perf.data files (file and pipe mode) into the same lines.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod decode;
pub mod event_name;
pub mod eventheader;
pub mod field_type;
pub mod format_file;
pub mod ftrace_page;
pub mod json_line;
pub mod location;
pub mod perf_data;
pub mod perf_sample;
pub mod schema;
pub mod trace_dat;
