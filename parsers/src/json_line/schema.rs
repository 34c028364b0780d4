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

use serde::Serialize;

use super::{LineWriter, PreparedFormat, write_hex};
use crate::eventheader::enums::{Encoding, Format};
use crate::eventheader::metadata::{
    ArrayKind, MetaError, attributes, read_field, split_event_name, unescape,
};
use crate::eventheader::{MAX_FIELDS, MAX_STRUCT_DEPTH, TracepointName};
use crate::schema::{Element, EventFormat, Field, FieldKind, LocKind};

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
    /// Only this thread id was recorded, if set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub only_pid: Option<i32>,
    /// uevrec's own process id (its records are left out unless `include_self`).
    pub uevrec_pid: u32,
    /// Whether uevrec's own records are kept.
    pub include_self: bool,
    /// How record times were taken and turned into the lines' `time`.
    pub clock: ClockInfo,
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

/// One field of a tracefs schema line.
#[derive(Debug, Serialize)]
struct FieldLine<'a> {
    name: &'a str,
    /// The C type as the format file declares it, name removed (see [`Field::type_text`]).
    #[serde(rename = "type")]
    type_text: &'a str,
    offset: u32,
    size: u32,
    /// The format file's `signed:` value, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    signed: Option<bool>,
    /// A common field (`common_type`, `common_pid` …).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    common: bool,
    /// The decoding rule: `int`, `array`, `data_loc`, `rel_loc`, `rest`, `struct`,
    /// `unknown`.
    kind: &'static str,
    /// The value or element type: `u8`…`u64`, `i8`…`i64`, `char` (text up to a NUL) or
    /// `byte`.
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<String>,
    /// Elements of a fixed array.
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<u32>,
    /// The shape of the value in event lines: `number`, `string`, `hex`, `numbers`.
    json: &'static str,
}

/// The element or value type token (`u32`, `i8`, `char`, `byte`).
fn element_token(e: Element) -> String {
    match e {
        Element::Char => "char".into(),
        Element::Byte => "byte".into(),
        Element::Integer { size, signed } => int_token(size, signed),
    }
}

fn int_token(size: u8, signed: bool) -> String {
    format!("{}{}", if signed { 'i' } else { 'u' }, u32::from(size) * 8)
}

/// How values of element type `e` look in event lines.
fn element_json(e: Element) -> &'static str {
    match e {
        Element::Char => "string",
        Element::Byte => "hex",
        Element::Integer { .. } => "numbers",
    }
}

impl<'a> FieldLine<'a> {
    fn new(f: &'a Field, common: bool) -> Self {
        let (kind, value, count, json) = match &f.kind {
            FieldKind::Integer { size, signed } => {
                ("int", Some(int_token(*size, *signed)), None, "number")
            }
            FieldKind::FixedArray { elem, count } => (
                "array",
                Some(element_token(*elem)),
                Some(*count),
                element_json(*elem),
            ),
            FieldKind::Dynamic { loc, elem } => {
                let kind = match loc {
                    LocKind::DataLoc => "data_loc",
                    LocKind::RelLoc => "rel_loc",
                };
                (kind, Some(element_token(*elem)), None, element_json(*elem))
            }
            FieldKind::RestOfRecord { elem } => (
                "rest",
                Some(element_token(*elem)),
                None,
                element_json(*elem),
            ),
            FieldKind::Struct { .. } => ("struct", None, None, "hex"),
            FieldKind::Unknown => ("unknown", None, None, "hex"),
        };
        FieldLine {
            name: &f.name,
            type_text: &f.type_text,
            offset: f.offset,
            size: f.size,
            signed: f.signed,
            common,
            kind,
            value,
            count,
            json,
        }
    }
}

/// The EventHeader part of a tracefs schema line.
#[derive(Debug, Serialize)]
struct EventHeaderName<'a> {
    provider: &'a str,
    level: u8,
    keyword: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<&'a str>,
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

/// A tracefs format as a schema line shows it.
#[derive(Debug, Serialize)]
struct FormatBody<'a> {
    /// The tracepoint ID (`common_type` of its records).
    id: u32,
    /// Present for EventHeader tracepoints: their payload describes itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    eventheader: Option<EventHeaderName<'a>>,
    fields: Vec<FieldLine<'a>>,
    print_fmt: &'a str,
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

/// The `format` member of a tracefs schema line.
#[derive(Debug, Serialize)]
struct FormatMember<'a> {
    format: FormatBody<'a>,
}

/// The `eventheader` member of an EventHeader schema line.
#[derive(Debug, Serialize)]
struct EhMember<'a> {
    eventheader: EhBody<'a>,
}

/// One field of an EventHeader schema line.
#[derive(Debug, Serialize)]
struct EhFieldLine {
    name: String,
    /// `value8`, `zstring_char8`, `string_length16_char16`, `struct` … (eventheader.h's
    /// names without `event_field_encoding_`).
    encoding: &'static str,
    /// `default`, `hex_int`, `string_utf`, `uuid` … (eventheader.h's names without
    /// `event_field_format_`); absent for structs.
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<&'static str>,
    #[serde(skip_serializing_if = "is_zero")]
    tag: u16,
    /// `constant` or `variable` for arrays.
    #[serde(skip_serializing_if = "Option::is_none")]
    array: Option<&'static str>,
    /// Elements of a constant array.
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<u16>,
    /// A struct's fields.
    #[serde(skip_serializing_if = "Option::is_none")]
    fields: Option<Vec<EhFieldLine>>,
}

fn is_zero(v: &u16) -> bool {
    *v == 0
}

/// What an EventHeader schema line says about a metadata block.
#[derive(Debug, Serialize)]
struct EhBody<'a> {
    provider: &'a str,
    name: String,
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    event_attributes: serde_json::Map<String, serde_json::Value>,
    byte_order: &'static str,
    fields: Vec<EhFieldLine>,
    /// Why the field records could not all be read (the fields before are listed).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// The metadata block, hex: what any EventHeader decoder reads.
    metadata: String,
}

/// eventheader.h's name of an encoding.
fn encoding_name(e: Encoding) -> &'static str {
    match e {
        Encoding::Struct => "struct",
        Encoding::Value8 => "value8",
        Encoding::Value16 => "value16",
        Encoding::Value32 => "value32",
        Encoding::Value64 => "value64",
        Encoding::Value128 => "value128",
        Encoding::ZStringChar8 => "zstring_char8",
        Encoding::ZStringChar16 => "zstring_char16",
        Encoding::ZStringChar32 => "zstring_char32",
        Encoding::StringLength16Char8 => "string_length16_char8",
        Encoding::StringLength16Char16 => "string_length16_char16",
        Encoding::StringLength16Char32 => "string_length16_char32",
        Encoding::BinaryLength16Char8 => "binary_length16_char8",
    }
}

/// eventheader.h's name of a format.
fn format_name(f: Format) -> &'static str {
    match f {
        Format::Default => "default",
        Format::UnsignedInt => "unsigned_int",
        Format::SignedInt => "signed_int",
        Format::HexInt => "hex_int",
        Format::Errno => "errno",
        Format::Pid => "pid",
        Format::Time => "time",
        Format::Boolean => "boolean",
        Format::Float => "float",
        Format::HexBytes => "hex_bytes",
        Format::String8 => "string8",
        Format::StringUtf => "string_utf",
        Format::StringUtfBom => "string_utf_bom",
        Format::StringXml => "string_xml",
        Format::StringJson => "string_json",
        Format::Uuid => "uuid",
        Format::Port => "port",
        Format::IpAddress => "ip_address",
        Format::IpAddressObsolete => "ip_address_obsolete",
    }
}

/// Text of escaped (`;;`) name bytes.
fn unescaped(text: &[u8]) -> String {
    let bytes: Vec<u8> = unescape(text).flatten().copied().collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Reads the field records of a metadata block into [`EhFieldLine`]s.
struct MetaWalk<'m> {
    meta: &'m [u8],
    big: bool,
    pos: usize,
    fields: usize,
}

impl MetaWalk<'_> {
    /// Up to `remaining` records (all, to the end, for `u32::MAX`) at nesting `depth`;
    /// stops at the first problem, keeping the fields read.
    fn body(
        &mut self,
        remaining: u32,
        depth: usize,
        out: &mut Vec<EhFieldLine>,
    ) -> Result<(), String> {
        let mut left = remaining;
        while left != 0 && self.pos < self.meta.len() {
            let f =
                read_field(self.meta, self.pos, self.big).map_err(|e: MetaError| e.to_string())?;
            self.fields += 1;
            if self.fields > MAX_FIELDS {
                return Err(format!("more than {MAX_FIELDS} fields"));
            }
            self.pos = f.next;
            left -= 1;
            let (array, count) = match f.array {
                ArrayKind::Scalar => (None, None),
                ArrayKind::Constant(n) => (Some("constant"), Some(n)),
                ArrayKind::Variable => (Some("variable"), None),
            };
            let is_struct = f.encoding == Encoding::Struct;
            let mut line = EhFieldLine {
                name: String::from_utf8_lossy(f.name).into_owned(),
                encoding: encoding_name(f.encoding),
                format: (!is_struct).then(|| format_name(f.format())),
                tag: f.tag,
                array,
                count,
                fields: None,
            };
            if is_struct {
                if depth >= MAX_STRUCT_DEPTH {
                    out.push(line);
                    return Err(format!("structs nested deeper than {MAX_STRUCT_DEPTH}"));
                }
                let mut inner = Vec::new();
                let r = self.body(u32::from(f.struct_field_count()), depth + 1, &mut inner);
                line.fields = Some(inner);
                out.push(line);
                r?;
            } else {
                out.push(line);
            }
        }
        Ok(())
    }
}

/// Whoever an EventHeader schema line names as the tracepoint the block was first seen
/// on.
#[derive(Debug, Clone, Copy)]
pub struct SeenOn<'a> {
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
        let format: &EventFormat = prepared.format();
        let fields = (format.common_fields.iter().map(|f| FieldLine::new(f, true)))
            .chain(format.fields.iter().map(|f| FieldLine::new(f, false)))
            .collect();
        let eventheader = prepared.eventheader().map(|tp| EventHeaderName {
            provider: tp.provider,
            level: tp.level,
            keyword: format!("0x{:x}", tp.keyword),
            group: tp.group,
        });
        let tracepoint = Tracepoint::of(prepared);
        let line = SchemaLine {
            event: tracepoint.key(),
            tracepoint,
            source: "tracefs",
            body: FormatMember {
                format: FormatBody {
                    id: format.id,
                    eventheader,
                    fields,
                    print_fmt: &format.print_fmt,
                },
            },
        };
        self.write_own_line(out, time_unix_ns, "schema", &line);
    }

    /// Append the `{"uevrec":"schema","source":"eventheader",…}` line of the metadata
    /// block `meta` (values big-endian if `big`), first seen on `seen`.
    pub fn write_eventheader_schema(
        &mut self,
        out: &mut Vec<u8>,
        time_unix_ns: Option<u64>,
        seen: &SeenOn<'_>,
        meta: &[u8],
        big: bool,
    ) {
        let name_len = memchr::memchr(0, meta).unwrap_or(meta.len());
        let (name, attrs) = split_event_name(&meta[..name_len]);
        let event_attributes = attributes(attrs)
            .map(|(k, v)| (unescaped(k), serde_json::Value::String(unescaped(v))))
            .collect();
        let mut walk = MetaWalk {
            meta,
            big,
            pos: name_len + 1,
            fields: 0,
        };
        let mut fields = Vec::new();
        let mut error = walk.body(u32::MAX, 0, &mut fields).err();
        if name_len == meta.len() {
            error = Some("the metadata has no NUL-terminated event name".into());
        }
        // `write_hex` writes a JSON string: quotes and digits (never escapes).
        let mut hex = Vec::with_capacity(meta.len() * 2 + 2);
        write_hex(&mut hex, meta);
        let hex = hex.get(1..hex.len() - 1).unwrap_or_default();
        let tracepoint = Tracepoint {
            system: seen.system,
            event: seen.event,
            format_id: seen.format_id,
        };
        let line = SchemaLine {
            event: tracepoint.key(),
            tracepoint,
            source: "eventheader",
            body: EhMember {
                eventheader: EhBody {
                    provider: seen.tracepoint.provider,
                    name: unescaped(name),
                    event_attributes,
                    byte_order: if big { "big" } else { "little" },
                    fields,
                    error,
                    metadata: String::from_utf8_lossy(hex).into_owned(),
                },
            },
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
        let Some((meta, big)) = self.eh.take_learnt() else {
            return;
        };
        let Some(tracepoint) = prepared.eventheader() else {
            return;
        };
        let meta = meta.to_vec();
        let seen = SeenOn {
            system: prepared.system(),
            event: prepared.event(),
            format_id: prepared.format_id(),
            tracepoint,
        };
        let end = out.len();
        self.write_eventheader_schema(out, time_unix_ns, &seen, &meta, big);
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
