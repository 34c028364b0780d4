//! A reader of `{"uevrec":"schema","source":"tracefs"}` lines that uses nothing but the
//! line (not the format file, not uevrec's C-type rules): what a program decoding a
//! recording years later would do. Shared by the pure tests (`parsers/tests/corpus.rs`)
//! and the host and VM tiers, which check that it decodes records as the recorder did.
#![allow(dead_code)]

use serde_json::Value;
use uevrec_parsers::{Element, EventFormat, Field, FieldKind, LocKind};

/// An element or value type token of a schema line (`u32`, `i8`, `char`, `byte`).
fn element(token: &str) -> Result<Element, String> {
    match token {
        "char" => Ok(Element::Char),
        "byte" => Ok(Element::Byte),
        _ => {
            let (signed, bits) = match token.split_at_checked(1) {
                Some(("i", bits)) => (true, bits),
                Some(("u", bits)) => (false, bits),
                _ => return Err(format!("unknown value type {token:?}")),
            };
            let bits: u8 = bits.parse().map_err(|_| format!("bad type {token:?}"))?;
            Ok(Element::Integer {
                size: bits / 8,
                signed,
            })
        }
    }
}

/// The [`EventFormat`] a tracefs schema line describes (`line` parsed from JSON).
pub fn format_from_schema(line: &Value) -> Result<EventFormat, String> {
    if line["uevrec"] != "schema" || line["source"] != "tracefs" {
        return Err(format!("not a tracefs schema line: {line}"));
    }
    let text = |v: &Value, key: &str| -> Result<String, String> {
        v[key]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("no {key:?} in {v}"))
    };
    let num = |v: &Value, key: &str| -> Result<u32, String> {
        v[key]
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| format!("no {key:?} in {v}"))
    };
    let tp = &line["tracepoint"];
    let name = match tp["format_id"].as_str() {
        Some(id) => format!("{}.{id}", text(tp, "event")?),
        None => text(tp, "event")?,
    };
    let body = &line["format"];
    let mut format = EventFormat {
        name,
        id: num(body, "id")?,
        common_fields: Vec::new(),
        fields: Vec::new(),
        print_fmt: text(body, "print_fmt")?,
    };
    for f in body["fields"].as_array().ok_or("no fields array")? {
        let value = || element(f["value"].as_str().ok_or(format!("no value in {f}"))?);
        let type_text = text(f, "type")?;
        let kind = match f["kind"].as_str().unwrap_or_default() {
            "int" => match value()? {
                Element::Integer { size, signed } => FieldKind::Integer { size, signed },
                Element::Char | Element::Byte => FieldKind::Integer {
                    size: 1,
                    signed: false,
                },
            },
            "array" => FieldKind::FixedArray {
                elem: value()?,
                count: num(f, "count")?,
            },
            "data_loc" => FieldKind::Dynamic {
                loc: LocKind::DataLoc,
                elem: value()?,
            },
            "rel_loc" => FieldKind::Dynamic {
                loc: LocKind::RelLoc,
                elem: value()?,
            },
            "rest" => FieldKind::RestOfRecord { elem: value()? },
            "struct" => FieldKind::Struct {
                type_name: type_text
                    .strip_prefix("struct ")
                    .unwrap_or(&type_text)
                    .to_string(),
            },
            "unknown" => FieldKind::Unknown,
            other => return Err(format!("unknown kind {other:?} in {f}")),
        };
        let field = Field {
            name: text(f, "name")?,
            type_text,
            offset: num(f, "offset")?,
            size: num(f, "size")?,
            signed: f["signed"].as_bool(),
            kind,
        };
        if f["common"] == true {
            format.common_fields.push(field);
        } else {
            format.fields.push(field);
        }
    }
    Ok(format)
}

/// Whether `value` (a field's value in an event line) has the shape the schema line's
/// `json` key promises.
pub fn has_shape(value: &Value, shape: &str) -> bool {
    match shape {
        "number" => value.is_number(),
        "string" => value.is_string(),
        "hex" => value
            .as_str()
            .is_some_and(|s| s.len() % 2 == 0 && s.bytes().all(|b| b.is_ascii_hexdigit())),
        "numbers" => value
            .as_array()
            .is_some_and(|a| a.iter().all(Value::is_number)),
        _ => false,
    }
}
