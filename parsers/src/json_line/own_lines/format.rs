//! The body of a tracefs `{"uevrec":"schema","source":"tracefs",…}` line: the event's
//! format as its `format` member shows it.

use serde::Serialize;

use crate::json_line::PreparedFormat;
use crate::schema::{Element, EventFormat, Field, FieldKind, LocKind};

/// The `format` member of `prepared`'s schema line: its tracepoint ID, every field, common
/// fields first, and the `print fmt` text.
pub(super) fn member(prepared: &PreparedFormat) -> FormatMember<'_> {
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
    FormatMember {
        format: FormatBody {
            id: format.id,
            eventheader,
            fields,
            print_fmt: &format.print_fmt,
        },
    }
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

/// The `format` member of a tracefs schema line.
#[derive(Debug, Serialize)]
pub(super) struct FormatMember<'a> {
    format: FormatBody<'a>,
}
