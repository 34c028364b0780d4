//! Pure parsers and decoders for uevrec, the consumer side: no I/O, no `unsafe`. (The
//! producer side, register commands and payload encoding, is the `uevrec-samples` crate.)
//!
//! The data path, one private module per step, its API re-exported here:
//! 1. format files: tracefs `format` text → [`EventFormat`] ([`parse_format`], with the one
//!    C-type rule [`resolve_decl`]; [`WordSize`] for files of 32-bit machines);
//! 2. [`perf_sample`]: perf ring-buffer record bytes → sample (ids, time, cpu, raw bytes,
//!    the [`callchain`] of a stack);
//! 3. decoding: raw trace-entry bytes + schema → typed [`Value`]s, through one compiled
//!    [`FieldPlan`] per field (dynamic locations by the one rule, [`resolve_location`]);
//! 4. JSON lines: [`LineWriter`] writes one line per record ([`PreparedFormat`] once per
//!    event on the recorder's path); or OTLP/JSON requests ([`otlp::OtlpWriter`]), or one
//!    readable line per record ([`TextWriter`], `--format text`), the choice made by
//!    [`OutputWriter`].
//!
//! Subsystems keep their own namespace: [`eventheader`] (self-describing user_events),
//! [`perf_data`] (perf.data files, file and pipe mode), [`trace_dat`] (trace-cmd files)
//! and [`ftrace_page`] (ftrace ring-buffer pages), all pure readers (and writers); the
//! drivers from a whole file to lines are [`to_lines`], above them. The OTLP exporter's
//! pure parts live here too, to be fuzzed: [`spool`] (the export spool's frames and ack
//! records) and [`export_config`] (its flags and `OTEL_EXPORTER_OTLP_*` variables).
//!
//! Layers, lowest first: `bytes`, `spool`, `schema`, `event_name`, `field_type`,
//! `format_file`, `decode`, `json`, `context`, `callchain`, `user_stack`, `stack_frames`,
//! `perf_sample`, `eventheader`,
//! `ftrace_page`, `json_line`, `otlp`, `export_config`, `text`, `output`, `perf_data`,
//! `trace_dat`, `to_lines`.
//! A module imports only from modules before it; `tests/layers.rs` checks every crate
//! path against this list, and against the lists of the folders that document their own
//! (`otlp/`, `perf_data/`).
//!
//! Arithmetic on what the input says: the modules that read input (those marked
//! `#[deny(clippy::arithmetic_side_effects)]` below, and [`eventheader_json`]) add,
//! multiply or allocate by a count, size, offset or length read from the input only
//! checked (`checked_*`: an error, or a notice, when it fails) or saturating where the
//! saturated value is still right (a tally stopped at `u64::MAX` is at least every total
//! it is compared with). A total the input can push past a `u64` is said, never wrapped
//! ([`to_lines::DecodeStats::lost_overflow`]). Arithmetic that is provably bounded (a place
//! inside a slice plus a few bytes, a `u16` count of code units) is allowed where it is,
//! with the bound in a comment; the writers (sizes their caller holds, lengths of their
//! own buffers: `perf_data::writer`, `trace_dat::writer`, `otlp`'s encoders) and the unit
//! tests are allowed as a whole. Not linted: the JSON-lines writers (`json`, `json_line`
//! but its EventHeader walk, `output`, `schema`), which read nothing from the input.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[deny(clippy::arithmetic_side_effects)]
mod bytes;
#[deny(clippy::arithmetic_side_effects)]
pub mod callchain;
#[deny(clippy::arithmetic_side_effects)]
pub mod context;
#[deny(clippy::arithmetic_side_effects)]
mod decode;
#[deny(clippy::arithmetic_side_effects)]
mod event_name;
#[deny(clippy::arithmetic_side_effects)]
pub mod eventheader;
#[deny(clippy::arithmetic_side_effects)]
pub mod export_config;
#[deny(clippy::arithmetic_side_effects)]
mod field_type;
#[deny(clippy::arithmetic_side_effects)]
mod format_file;
#[deny(clippy::arithmetic_side_effects)]
pub mod ftrace_page;
mod json;
mod json_line;
#[deny(clippy::arithmetic_side_effects)]
pub mod otlp;
mod output;
#[deny(clippy::arithmetic_side_effects)]
pub mod perf_data;
#[deny(clippy::arithmetic_side_effects)]
pub mod perf_sample;
mod schema;
#[deny(clippy::arithmetic_side_effects)]
pub mod spool;
#[deny(clippy::arithmetic_side_effects)]
pub mod stack_frames;
mod text;
#[deny(clippy::arithmetic_side_effects)]
pub mod to_lines;
#[deny(clippy::arithmetic_side_effects)]
pub mod trace_dat;
#[deny(clippy::arithmetic_side_effects)]
pub mod user_stack;

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
pub use json_line::own_lines::{ClockInfo, FirstTracepoint, SessionInfo, StackInfo};
pub use json_line::{
    LineOptions, LineWriter, PreparedFormat, RecordMeta, RecordStamp, RecordWriter,
};
pub use output::{
    Judged, OutputFormat, OutputWriter, RecordJudge, RecordSink, StackNamer, add_stack,
};
pub use schema::{Element, EventFormat, Field, FieldKind, LocKind};
pub use text::TextWriter;
pub use to_lines::SchemaOnce;
