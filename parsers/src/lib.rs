//! Pure parsers and decoders for uevrec, the consumer side: no I/O, no `unsafe`. (The
//! producer side, register commands and payload encoding, is the `uevrec-samples` crate.)
//!
//! The data path, one private module per step, its API re-exported here:
//! 1. format files: tracefs `format` text → [`EventFormat`] ([`parse_format`], with the one
//!    C-type rule [`resolve_decl`]; [`WordSize`] for files of 32-bit machines);
//! 2. [`perf_sample`]: perf ring-buffer record bytes → sample (ids, time, cpu, raw bytes);
//! 3. decoding: raw trace-entry bytes + schema → typed [`Value`]s, through one compiled
//!    [`FieldPlan`] per field (dynamic locations by the one rule, [`resolve_location`]);
//! 4. JSON lines: [`LineWriter`] writes one line per record ([`PreparedFormat`] once per
//!    event on the recorder's path); or OTLP/JSON requests ([`otlp::OtlpWriter`]), the
//!    choice made by [`OutputWriter`].
//!
//! Subsystems keep their own namespace: [`eventheader`] (self-describing user_events),
//! [`perf_data`] (perf.data files, file and pipe mode), [`trace_dat`] (trace-cmd files)
//! and [`ftrace_page`] (ftrace ring-buffer pages), all pure readers (and writers); the
//! drivers from a whole file to lines are [`to_lines`], above them.
//!
//! Layers, lowest first: `bytes`, `schema`, `event_name`, `field_type`, `format_file`, `decode`,
//! `json`, `context`, `perf_sample`, `eventheader`, `ftrace_page`, `json_line`, `otlp`,
//! `output`, `perf_data`, `trace_dat`, `to_lines`.
//! A module imports only from modules before it; `tests/layers.rs` checks every crate
//! path against this list, and against the lists of the folders that document their own
//! (`otlp/`, `perf_data/`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod bytes;
pub mod context;
mod decode;
mod event_name;
pub mod eventheader;
mod field_type;
mod format_file;
pub mod ftrace_page;
mod json;
mod json_line;
pub mod otlp;
mod output;
pub mod perf_data;
pub mod perf_sample;
mod schema;
pub mod to_lines;
pub mod trace_dat;

pub use bytes::Endian;
pub use context::{ContextTracker, ContextUpdate};
pub use decode::location::resolve as resolve_location;
pub use decode::{DecodeError, FieldPlan, IntArray, PlanKind, Value, decode_field};
pub use event_name::{is_version_of, split_multi_format};
pub use field_type::{
    Decl, DeclError, WordSize, resolve_decl, resolve_decl_for, resolve_field, resolve_field_for,
    signedness_of, size_of_type,
};
pub use format_file::{FormatError, parse_format, parse_format_for};
/// The EventHeader part of a JSON line (rendering; [`eventheader`] decodes).
pub use json_line::eventheader as eventheader_json;
pub use json_line::own_lines::{ClockInfo, FirstTracepoint, SessionInfo};
pub use json_line::{
    LineOptions, LineWriter, PreparedFormat, RecordMeta, RecordStamp, RecordWriter,
};
pub use output::{OutputFormat, OutputWriter, RecordSink};
pub use schema::{Element, EventFormat, Field, FieldKind, LocKind};
pub use to_lines::SchemaOnce;
