//! The lines that make a stream self-describing (`docs/json-lines.md`, "A self-describing
//! stream"): one `{"uevrec":"session",…}` line first (the machine, the clock, what was
//! asked for), then a `{"uevrec":"schema",…}` line for each event format before its
//! first record (every field's name, C type, offset, size, signedness, decoding rule and
//! JSON shape: enough to decode the raw bytes without the machine) and for each
//! EventHeader metadata block when first seen (provider, event name, every field's
//! encoding, format, array kind, tag and nested fields, and the block itself as hex).
//!
//! None of these is on the per-record path: a tracefs schema line is written when an
//! event attaches, an EventHeader one when the writer's plan cache compiles a metadata
//! block (its first sight, [`crate::json_line::eventheader::plan::PlanCache::take_learnt`]). They
//! are built with serde (a few allocations per line, a few lines per recording).
//!
//! One file per part: this one the session line, what every schema line has and the
//! writer's methods; [`format`] the body of a tracefs schema line, [`eventheader`] that of
//! an EventHeader one.

use crate::bytes::Endian;
use serde::Serialize;

use super::{LineWriter, PreparedFormat};
use crate::eventheader::TracepointName;

mod eventheader;
mod format;

/// What the `{"uevrec":"session",…}` line says: the recording machine and session. The
/// line's `time` is the session's start.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SessionInfo {
    /// The version of uevrec that wrote the stream.
    pub uevrec_version: String,
    /// The machine's host name (`uname -n`).
    pub host: String,
    /// The kernel release (`uname -r`).
    pub kernel: String,
    /// The kernel's build string (`uname -v`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kernel_version: String,
    /// The machine architecture (`uname -m`).
    pub machine: String,
    /// The byte order of the raw records (`little` or `big`).
    pub byte_order: String,
    /// `sizeof(long)` and of pointers on the recording machine (the size of `long`
    /// fields in format files).
    pub word_size: u8,
    /// The CPUs recorded (online at the start).
    pub cpus: Vec<u32>,
    /// How records were read (`perf` or `ftrace`).
    pub backend: String,
    /// The selectors asked for (`system:event` globs), in order.
    pub selectors: Vec<String>,
    /// The kernel filter expression applied to every event, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// Which records the lines keep (`--where`, `--sample`, `--rate-limit`: each flag's
    /// text as given, prefixed with the flag), if any; per tracepoint, the others are
    /// counted in `{"uevrec":"dropped"}` lines at the end.
    #[serde(rename = "where", skip_serializing_if = "Vec::is_empty")]
    pub thinning: Vec<String>,
    /// Only this thread id was recorded, if set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub only_pid: Option<i32>,
    /// uevrec's own process id (its records are left out unless `include_self`).
    pub uevrec_pid: u32,
    /// Whether uevrec's own records are kept.
    pub include_self: bool,
    /// How record times were taken and turned into the lines' `time`.
    pub clock: ClockInfo,
    /// The call stacks on the records (`-g`), if asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stacks: Option<StackInfo>,
}

/// What the records' `stack` key holds (docs/stacks.md).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StackInfo {
    /// How the stacks were taken (`fp`: the kernel walked the frame pointers; `dwarf,SIZE`:
    /// user registers and SIZE bytes of stack unwound by uevrec).
    pub call_graph: String,
    /// Frames per stack at most (0: `kernel.perf_event_max_stack`).
    pub max_stack: u16,
    /// Whether kernel frames were asked for.
    pub kernel: bool,
    /// Whether the frames were named (off: `--no-symbolize`).
    pub symbolized: bool,
    /// The key's shape, in words.
    pub frames: String,
    /// Each distinct stack on a `{"uevrec":"stack","id":N,"stack":[…]}` line of its own,
    /// records naming it by `stack_id` (`--stack-ids`); written only when on.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stack_ids: bool,
}

/// The clock of a session: records are stamped on `source` by the kernel; uevrec adds
/// the offset `realtime − monotonic`, re-sampled every `resample_ms`, to get `time`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ClockInfo {
    /// The kernel clock the records are stamped with (`CLOCK_MONOTONIC`).
    pub source: String,
    /// How `time` is derived, in words.
    pub to_wall: String,
    /// A reference pair taken at the start: `source` nanoseconds …
    pub monotonic_ns: u64,
    /// … and `CLOCK_REALTIME` (Unix) nanoseconds at the same instant.
    pub realtime_ns: u64,
    /// How often the offset is re-sampled, in milliseconds.
    pub resample_ms: u64,
}

/// The tracepoint a schema line is for, under the keys its event lines use.
#[derive(Debug, Serialize)]
struct Tracepoint<'a> {
    system: &'a str,
    /// The event name (for multi-format events the base name).
    event: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    format_id: Option<&'a str>,
}

impl<'a> Tracepoint<'a> {
    fn of(prepared: &'a PreparedFormat) -> Self {
        Tracepoint {
            system: prepared.system(),
            event: prepared.event(),
            format_id: prepared.format_id(),
        }
    }

    /// `system:name` as tracefs and the notices name it (`.<id>` for multi-format).
    fn key(&self) -> String {
        match self.format_id {
            Some(id) => format!("{}:{}.{id}", self.system, self.event),
            None => format!("{}:{}", self.system, self.event),
        }
    }
}

/// The body of a schema line (after `"uevrec":"schema"`). Its top-level keys are none
/// of an event line's but `event`, whose value has the `system:` prefix (as in
/// notices), so filters on event lines (`.system == …`, `.fields.x`) never match it.
#[derive(Debug, Serialize)]
struct SchemaLine<'a, B: Serialize> {
    event: String,
    tracepoint: Tracepoint<'a>,
    source: &'static str,
    #[serde(flatten)]
    body: B,
}

/// Whoever an EventHeader schema line names as the tracepoint the block was first seen
/// on.
#[derive(Debug, Clone, Copy)]
pub struct FirstTracepoint<'a> {
    /// The tracefs system.
    pub system: &'a str,
    /// The tracepoint name (base name for multi-format events).
    pub event: &'a str,
    /// The multi-format id, if any.
    pub format_id: Option<&'a str>,
    /// The parsed EventHeader tracepoint name.
    pub tracepoint: TracepointName<'a>,
}

impl LineWriter {
    /// Append `{"time":…,"uevrec":"<what>",` then `body`'s members and `}\n` (`body`
    /// serializes as a JSON object).
    fn write_own_line(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        what: &str,
        body: &impl Serialize,
    ) {
        self.time.write(out, time_unix_ns);
        out.extend_from_slice(b",\"uevrec\":");
        super::write_str(out, what);
        let start = out.len();
        // Serializing these structs into a Vec cannot fail (no maps with non-string
        // keys, no I/O); should it, the line still ends valid.
        if serde_json::to_writer(&mut *out, body).is_err() {
            out.truncate(start);
            out.extend_from_slice(b"}\n");
            return;
        }
        // `{…}` → `,…}`; an empty object leaves `}`.
        if out.get(start..) == Some(b"{}") {
            out.truncate(start);
            out.push(b'}');
        } else {
            out[start] = b',';
        }
        out.push(b'\n');
    }

    /// Append the `{"uevrec":"session",…}` line (`time`: the session's start).
    pub fn write_session(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        info: &SessionInfo,
    ) {
        self.write_own_line(out, time_unix_ns, "session", info);
    }

    /// Append the `{"uevrec":"schema","source":"tracefs",…}` line of an event: its
    /// system, event name and format id (as in its event lines), tracepoint ID, every
    /// field, common fields first, and the `print fmt` text.
    pub fn write_format_schema(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        prepared: &PreparedFormat,
    ) {
        let tracepoint = Tracepoint::of(prepared);
        let line = SchemaLine {
            event: tracepoint.key(),
            tracepoint,
            source: "tracefs",
            body: format::member(prepared),
        };
        self.write_own_line(out, time_unix_ns, "schema", &line);
    }

    /// Append the `{"uevrec":"schema","source":"eventheader",…}` line of the metadata
    /// block `meta` (values in byte order `endian`), first seen on `seen`.
    pub fn write_eventheader_schema(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        seen: &FirstTracepoint<'_>,
        meta: &[u8],
        endian: Endian,
    ) {
        let tracepoint = Tracepoint {
            system: seen.system,
            event: seen.event,
            format_id: seen.format_id,
        };
        let line = SchemaLine {
            event: tracepoint.key(),
            tracepoint,
            source: "eventheader",
            body: eventheader::member(seen, meta, endian),
        };
        self.write_own_line(out, time_unix_ns, "schema", &line);
    }

    /// After an event line of `prepared` written at `out[line_start..]`: when writing it
    /// compiled a metadata block not seen before (an EventHeader event), put the block's
    /// schema line before the event line. One check per record; the line is built on
    /// first sight only. A block longer than the plan cache takes
    /// ([`crate::json_line::eventheader::plan::MAX_PLAN_METADATA`]) is never announced.
    #[inline]
    pub fn announce_learnt(
        &mut self,
        out: &mut Vec<u8>,
        line_start: usize,
        time_unix_ns: Option<u64>,
        prepared: &PreparedFormat,
    ) {
        if self.eh.has_learnt() {
            self.describe_learnt(out, line_start, time_unix_ns, prepared);
        }
    }

    /// The rare part of [`LineWriter::announce_learnt`].
    #[cold]
    #[inline(never)]
    fn describe_learnt(
        &mut self,
        out: &mut Vec<u8>,
        line_start: usize,
        time_unix_ns: Option<u64>,
        prepared: &PreparedFormat,
    ) {
        let Some((meta, endian)) = self.eh.take_learnt() else {
            return;
        };
        let Some(tracepoint) = prepared.eventheader() else {
            return;
        };
        let meta = meta.to_vec();
        let seen = FirstTracepoint {
            system: prepared.system(),
            event: prepared.event(),
            format_id: prepared.format_id(),
            tracepoint,
        };
        let end = out.len();
        self.write_eventheader_schema(out, time_unix_ns, &seen, &meta, endian);
        if let Some(moved) = out.get_mut(line_start.min(end)..) {
            moved.rotate_right(moved.len() - (end - line_start.min(end)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LineOptions, parse_format};

    fn prepared() -> PreparedFormat {
        let text = "name: m.1a\nID: 7\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\n\tfield:__rel_loc char[] msg;\toffset:8;\tsize:4;\tsigned:0;\n\nprint fmt: \"\"\n";
        PreparedFormat::new(
            &parse_format(text).unwrap(),
            "user_events_multi",
            "m",
            Some("1a"),
        )
    }

    #[test]
    fn own_lines_are_one_json_object_each() {
        let mut w = LineWriter::new(LineOptions::default());
        let mut out = Vec::new();
        w.write_session(&mut out, None, &SessionInfo::default());
        w.write_own_line(&mut out, Some(0), "empty", &serde_json::Map::new());
        w.write_format_schema(&mut out, Some(1), &prepared());
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(lines[0]["uevrec"], "session");
        assert_eq!(lines[0]["time"], serde_json::Value::Null);
        assert_eq!(
            text.lines().nth(1),
            Some(r#"{"time":"1970-01-01T00:00:00.000000000Z","uevrec":"empty"}"#)
        );
        let schema = &lines[2];
        assert_eq!(schema["event"], "user_events_multi:m.1a");
        assert_eq!(
            schema["tracepoint"],
            serde_json::json!({"system":"user_events_multi","event":"m","format_id":"1a"})
        );
        let msg = &schema["format"]["fields"][1];
        assert_eq!(msg["kind"], "rel_loc");
        assert_eq!(msg["value"], "char");
        assert_eq!(msg["json"], "string");
        // No top-level key of an event line.
        for key in ["system", "fields", "format_id", "provider", "name"] {
            assert!(schema.get(key).is_none(), "{key}");
        }
    }
}
