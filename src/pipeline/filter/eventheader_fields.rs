//! An EventHeader record's fields as CEL sees them: a lazy map over the record's
//! metadata and payload. `fields.NAME` walks the payload with the parsers' enumerator
//! (no allocation) up to the top-level field NAME and builds only its value: a scalar,
//! a list for an array, a map for a struct (keys as the JSON line writes them: a
//! repeated key gets `#2`, `#3`, …). Values are what the JSON line shows
//! ([`typed_value`]). A field the record lacks, or a payload that stops decoding before
//! it, is a missing key.
//!
//! Nothing is compiled per metadata block: the condition is compiled once, and each
//! record's walk is bounded by the enumerator's own limits (128 field records, structs
//! 8 deep, `4096 + 32 × payload` steps).

use std::collections::HashMap;

use cel::common::types::{
    CelBool, CelBytes, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt,
};
use cel::common::value::Val;
use uevrec_parsers::Endian;
use uevrec_parsers::eventheader::metadata::split_event_name;
use uevrec_parsers::eventheader::{Enumerator, FieldMeta, Item};
use uevrec_parsers::eventheader_json::typed::{Typed, typed_value};

use super::lazy_map::lazy_map;

/// The fields of one EventHeader record (the metadata block's data and the payload).
#[derive(Debug, Clone, Copy)]
pub struct EventHeaderFields<'a> {
    /// The metadata block's data (`None`: the record has none; no field is readable).
    pub metadata: Option<&'a [u8]>,
    /// The payload.
    pub payload: &'a [u8],
    /// The byte order of the values.
    pub endian: Endian,
}

impl<'a> EventHeaderFields<'a> {
    fn walk(&self) -> Option<Enumerator<'a>> {
        Enumerator::new(self.metadata?, self.payload, self.endian).ok()
    }

    /// The number of top-level fields the record decodes (`size(fields)`).
    fn count(&self) -> i64 {
        let mut n = 0i64;
        let mut depth = 0usize;
        for item in self.walk().into_iter().flatten() {
            match item {
                Item::StructBegin { .. } | Item::ArrayBegin { .. } => {
                    n += i64::from(depth == 0);
                    depth += 1;
                }
                Item::StructEnd { .. } | Item::ArrayEnd { .. } => depth = depth.saturating_sub(1),
                Item::Value { .. } => n += i64::from(depth == 0),
            }
        }
        n
    }

    /// The value of top-level field `name` (its first occurrence), built as a CEL value.
    pub fn lookup<'v>(&self, name: &str) -> Option<Box<dyn Val + 'v>>
    where
        'a: 'v,
    {
        let mut walk = self.walk()?;
        let mut depth = 0usize;
        while let Some(item) = walk.next() {
            match item {
                Item::Value { field, bytes, .. } if depth == 0 => {
                    if key_of(&field) == name.as_bytes() {
                        return Some(cel_value(typed_value(&field, bytes, walk.endian())));
                    }
                }
                Item::StructBegin { field, .. } | Item::ArrayBegin { field, .. }
                    if depth == 0 && key_of(&field) == name.as_bytes() =>
                {
                    return built(item, &mut walk);
                }
                Item::StructBegin { .. } | Item::ArrayBegin { .. } => depth += 1,
                Item::StructEnd { .. } | Item::ArrayEnd { .. } => depth = depth.saturating_sub(1),
                Item::Value { .. } => {}
            }
        }
        None
    }

    /// The scalar at `path` (struct member names from the top level, first
    /// occurrences), as text when it is one: e.g. `["PartA", "ext_dt_traceId"]`.
    pub fn text_at(&self, path: &[&[u8]]) -> Option<Typed<'a>> {
        let mut walk = self.walk()?;
        // How much of `path` the open structs match, and how deep they are.
        let (mut matched, mut depth) = (0usize, 0usize);
        while let Some(item) = walk.next() {
            match item {
                Item::Value {
                    field,
                    bytes,
                    element: false,
                } if depth == matched && path.get(matched) == Some(&key_of(&field)) => {
                    return (matched + 1 == path.len())
                        .then(|| typed_value(&field, bytes, walk.endian()));
                }
                Item::StructBegin {
                    field,
                    element: false,
                } if depth == matched && path.get(matched) == Some(&key_of(&field)) => {
                    matched += 1;
                    depth += 1;
                }
                Item::StructBegin { .. } | Item::ArrayBegin { .. } => depth += 1,
                Item::StructEnd { .. } | Item::ArrayEnd { .. } => {
                    if depth == matched {
                        // The struct the path goes through ends without the rest.
                        return None;
                    }
                    depth = depth.saturating_sub(1);
                }
                Item::Value { .. } => {}
            }
        }
        None
    }
}

/// A field's key: its name without `;attr=value` text.
fn key_of<'m>(field: &FieldMeta<'m>) -> &'m [u8] {
    split_event_name(field.name).0
}

/// The value of the struct or array `begin` opened, read from `walk` up to its end.
fn built<'a, 'v>(begin: Item<'a>, walk: &mut Enumerator<'a>) -> Option<Box<dyn Val + 'v>>
where
    'a: 'v,
{
    match begin {
        Item::StructBegin { .. } => {
            let mut members: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = HashMap::new();
            loop {
                let item = walk.next()?;
                let (field, value) = match item {
                    Item::StructEnd { .. } => return Some(Box::new(CelMap::from(members))),
                    Item::Value { field, bytes, .. } => {
                        (field, cel_value(typed_value(&field, bytes, walk.endian())))
                    }
                    Item::StructBegin { field, .. } | Item::ArrayBegin { field, .. } => {
                        (field, built(item, walk)?)
                    }
                    Item::ArrayEnd { .. } => return None,
                };
                let name = String::from_utf8_lossy(key_of(&field)).into_owned();
                let mut key = name.clone();
                let mut n = 1u32;
                while members.contains_key(&CelMapKey::from(key.as_str())) {
                    n += 1;
                    key = format!("{name}#{n}");
                }
                members.insert(CelMapKey::from(key), value);
            }
        }
        Item::ArrayBegin { .. } => {
            let mut items: Vec<Box<dyn Val + 'v>> = Vec::new();
            loop {
                let item = walk.next()?;
                items.push(match item {
                    Item::ArrayEnd { .. } => return Some(Box::new(CelList::from(items))),
                    Item::Value { field, bytes, .. } => {
                        cel_value(typed_value(&field, bytes, walk.endian()))
                    }
                    Item::StructBegin { .. } | Item::ArrayBegin { .. } => built(item, walk)?,
                    Item::StructEnd { .. } => return None,
                });
            }
        }
        _ => None,
    }
}

/// A typed value as a CEL value (integers as `int` where they fit, as plain fields).
fn cel_value<'v>(value: Typed<'v>) -> Box<dyn Val + 'v> {
    match value {
        Typed::Null => Box::new(CelNull),
        Typed::Bool(b) => Box::new(CelBool::from(b)),
        Typed::Int(i) => Box::new(CelInt::from(i)),
        Typed::UInt(u) => match i64::try_from(u) {
            Ok(i) => Box::new(CelInt::from(i)),
            Err(_) => Box::new(CelUInt::from(u)),
        },
        Typed::Float(f) => Box::new(CelDouble::from(f)),
        Typed::Str(s) => Box::new(CelString::from(s)),
        Typed::Bytes(b) => Box::new(CelBytes::from(b)),
    }
}

lazy_map!(EventHeaderFields);
