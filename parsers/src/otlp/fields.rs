//! An event's decoded fields as OTLP/JSON `AnyValue`s, in buffers reused from record to
//! record: a flat tree ([`Fields`]: one [`Node`] per field, struct, array or element, in
//! payload order, each struct and array knowing where its members end) whose keys and
//! values are JSON text in one byte buffer. The Common Schema mapping reads it, then the
//! record's JSON is written from it; nothing is allocated per record once the buffers
//! have grown.
//!
//! Every value is first rendered by the JSON-lines writers (so each EventHeader format
//! rule, UUID, IP address, time, float, … exists once, in [`crate::eventheader::json`]
//! and [`crate::json_line`]), then its JSON scalar becomes the `AnyValue`
//! ([`write_any_of_scalar`]): integers that fit `int64` → `intValue`; larger integers →
//! `stringValue` of their decimal digits (OTLP has no unsigned 64-bit type); numbers with
//! a fraction or exponent → `doubleValue`; strings (bytes as hex, NaN and the infinities
//! as `"NaN"`, `"Infinity"`, `"-Infinity"`) → `stringValue`; booleans → `boolValue`;
//! `null` (a zero-length value) → the empty `AnyValue` `{}`. EventHeader structs become
//! `kvlistValue`s and arrays `arrayValue`s. A repeated key in the same struct gets the
//! suffix `#2`, `#3`, … as in JSON lines ([`dedupe`]).

use std::borrow::Cow;
use std::fmt;

use crate::decode::{Endian, Value, decode_field};
use crate::eventheader::enumerator::{Enumerator, Item};
use crate::json_line::{Escaped, write_int, write_str, write_text, write_value};
use crate::schema::Field;

/// A range of a byte buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Text {
    start: usize,
    end: usize,
}

impl Text {
    fn of(buf: &[u8], start: usize) -> Text {
        Text {
            start,
            end: buf.len(),
        }
    }

    /// Its bytes in `buf`.
    pub(crate) fn get(self, buf: &[u8]) -> &[u8] {
        buf.get(self.start..self.end).unwrap_or_default()
    }
}

/// What a value's JSON scalar is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    Str,
    Int,
    Double,
    Bool,
    Null,
}

/// One node of the tree.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// A value: its `AnyValue` JSON and, inside it, its JSON scalar (an `intValue`'s
    /// digits without their quotes).
    Value {
        any: Text,
        scalar: Text,
        class: Class,
    },
    /// A struct whose members are the nodes up to `end` (exclusive).
    Struct { end: usize },
    /// An array whose elements are the nodes up to `end` (exclusive).
    Array { end: usize },
}

/// A field, struct, array or array element.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Node {
    /// The key as a JSON string (empty for array elements).
    key: Text,
    kind: Kind,
}

/// The key of a new node.
#[derive(Clone, Copy)]
pub(crate) enum Key<'a> {
    /// Bytes that should be UTF-8 (EventHeader field names; invalid sequences become
    /// U+FFFD, as in JSON lines).
    Bytes(&'a [u8]),
    /// A name.
    Str(&'a str),
    /// An array element.
    Element,
}

/// The decoded fields of one record (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct Fields {
    /// Keys and `AnyValue`s as JSON text.
    text: Vec<u8>,
    nodes: Vec<Node>,
    /// The keys of the open structs (the top level first), for [`dedupe`].
    keys: Vec<Text>,
    /// The open structs and arrays: their node and where their keys start in `keys`.
    open: Vec<(usize, usize)>,
    /// Where a value's JSON scalar is rendered.
    scalar: Vec<u8>,
}

impl Fields {
    /// Start a new record.
    pub(crate) fn clear(&mut self) {
        self.text.clear();
        self.nodes.clear();
        self.keys.clear();
        self.open.clear();
    }

    /// The nodes of an EventHeader walk, up to its end or to where it stopped (the
    /// structs and arrays open there are closed as they are).
    pub(crate) fn eventheader(&mut self, e: &mut Enumerator<'_>) {
        let big = e.big_endian();
        for item in e.by_ref() {
            match item {
                Item::StructBegin { field, element } => {
                    self.begin(key_of(field.name, element), false)
                }
                Item::ArrayBegin { field, .. } => self.begin(Key::Bytes(field.name), true),
                Item::StructEnd { .. } | Item::ArrayEnd { .. } => self.end(),
                Item::Value {
                    field,
                    bytes,
                    element,
                } => self.value(key_of(field.name, element), |out| {
                    crate::eventheader::json::write_value(out, &field, bytes, big)
                }),
            }
        }
        while !self.open.is_empty() {
            self.end();
        }
    }

    /// The nodes of a plain event's `fields` (integer arrays as arrays); the fields that
    /// fail to decode are left out and explained in a struct `uevrec.errors` at the end.
    pub(crate) fn plain(&mut self, fields: &[Field], raw: &[u8], endian: Endian) {
        let mut failed = false;
        for field in fields {
            match decode_field(field, raw, endian) {
                Value::Error(_) => failed = true,
                Value::IntArray(array) => {
                    self.begin(Key::Str(&field.name), true);
                    for v in array.iter() {
                        self.value(Key::Element, |out| {
                            write_value(out, &v);
                        });
                    }
                    self.end();
                }
                v => self.value(Key::Str(&field.name), |out| {
                    write_value(out, &v);
                }),
            }
        }
        if failed {
            self.begin(Key::Str("uevrec.errors"), false);
            for field in fields {
                if let Value::Error(e) = decode_field(field, raw, endian) {
                    self.value(Key::Str(&field.name), |out| write_message(out, &e));
                }
            }
            self.end();
        }
    }

    /// The common fields of a record as a last top-level struct
    /// `linux.tracepoint.common` (a field that fails to decode, in a record shorter than
    /// 8 bytes, is the empty value).
    pub(crate) fn common(&mut self, fields: &[Field], raw: &[u8], endian: Endian) {
        self.begin(Key::Str("linux.tracepoint.common"), false);
        for field in fields {
            self.value(Key::Str(&field.name), |out| {
                write_value(out, &decode_field(field, raw, endian));
            });
        }
        self.end();
    }

    /// Open a struct or an array.
    fn begin(&mut self, key: Key<'_>, array: bool) {
        let key = self.push_key(key);
        let kind = if array {
            Kind::Array { end: 0 }
        } else {
            Kind::Struct { end: 0 }
        };
        self.open.push((self.nodes.len(), self.keys.len()));
        self.nodes.push(Node { key, kind });
    }

    /// Close the struct or array opened last.
    fn end(&mut self) {
        let Some((node, keys_from)) = self.open.pop() else {
            return;
        };
        let len = self.nodes.len();
        if let Some(Kind::Struct { end } | Kind::Array { end }) =
            self.nodes.get_mut(node).map(|n| &mut n.kind)
        {
            *end = len;
        }
        self.keys.truncate(keys_from);
    }

    /// A value whose JSON scalar `render` writes.
    fn value(&mut self, key: Key<'_>, render: impl FnOnce(&mut Vec<u8>)) {
        let key = self.push_key(key);
        self.scalar.clear();
        render(&mut self.scalar);
        let start = self.text.len();
        let (class, scalar) = write_any_of_scalar(&mut self.text, &self.scalar);
        self.nodes.push(Node {
            key,
            kind: Kind::Value {
                any: Text::of(&self.text, start),
                scalar,
                class,
            },
        });
    }

    /// Write a member's key (renamed when its struct has it already); nothing for an
    /// array element.
    fn push_key(&mut self, key: Key<'_>) -> Text {
        let in_array = self
            .open
            .last()
            .is_some_and(|&(node, _)| matches!(self.nodes[node].kind, Kind::Array { .. }));
        let start = self.text.len();
        match key {
            _ if in_array => return Text::of(&self.text, start),
            Key::Bytes(b) => write_text(&mut self.text, b),
            Key::Str(s) => write_str(&mut self.text, s),
            Key::Element => write_str(&mut self.text, ""),
        }
        let from = self.open.last().map_or(0, |&(_, k)| k);
        let key = dedupe(&mut self.text, &self.keys[from..], start);
        self.keys.push(key);
        key
    }

    /// The top-level nodes.
    pub(crate) fn top(&self) -> Members<'_> {
        Members {
            fields: self,
            at: 0,
            end: self.nodes.len(),
        }
    }

    /// The members of struct `i` (none for other nodes).
    pub(crate) fn members(&self, i: usize) -> Members<'_> {
        let end = match self.kind(i) {
            Some(Kind::Struct { end }) => end,
            _ => i,
        };
        Members {
            fields: self,
            at: i + 1,
            end: end.max(i + 1),
        }
    }

    fn kind(&self, i: usize) -> Option<Kind> {
        self.nodes.get(i).map(|n| n.kind)
    }

    /// The node after `i` and its members.
    fn after(&self, i: usize) -> usize {
        match self.kind(i) {
            Some(Kind::Struct { end } | Kind::Array { end }) => end.max(i + 1),
            _ => i + 1,
        }
    }

    /// Node `i`'s key as a JSON string.
    pub(crate) fn key(&self, i: usize) -> &[u8] {
        self.nodes.get(i).map_or(b"\"\"", |n| n.key.get(&self.text))
    }

    /// Whether node `i`'s key is `name` (a name needing no escape).
    pub(crate) fn key_is(&self, i: usize, name: &str) -> bool {
        let key = self.key(i);
        key.len() == name.len() + 2 && key.get(1..=name.len()) == Some(name.as_bytes())
    }

    /// Whether node `i` is a struct.
    pub(crate) fn is_struct(&self, i: usize) -> bool {
        matches!(self.kind(i), Some(Kind::Struct { .. }))
    }

    /// Node `i`'s JSON scalar when it is a value of `class`.
    fn scalar(&self, i: usize, class: Class) -> Option<&[u8]> {
        match self.kind(i)? {
            Kind::Value {
                scalar, class: c, ..
            } if c == class => Some(scalar.get(&self.text)),
            _ => None,
        }
    }

    /// Node `i`'s string (`stringValue`) as a JSON string.
    pub(crate) fn str_json(&self, i: usize) -> Option<&[u8]> {
        self.scalar(i, Class::Str)
    }

    /// Node `i`'s string (`stringValue`).
    pub(crate) fn str_of(&self, i: usize) -> Option<Cow<'_, str>> {
        let json = self.str_json(i)?;
        let inner = json.get(1..json.len().checked_sub(1)?)?;
        if !inner.contains(&b'\\') {
            // The writers write valid UTF-8.
            return std::str::from_utf8(inner).ok().map(Cow::Borrowed);
        }
        serde_json::from_slice::<String>(json).ok().map(Cow::Owned)
    }

    /// Node `i`'s integer (`intValue`).
    pub(crate) fn int_of(&self, i: usize) -> Option<i64> {
        std::str::from_utf8(self.scalar(i, Class::Int)?)
            .ok()?
            .parse()
            .ok()
    }

    /// Node `i`'s boolean (`boolValue`).
    pub(crate) fn bool_of(&self, i: usize) -> Option<bool> {
        self.scalar(i, Class::Bool).map(|s| s == b"true")
    }

    /// Node `i` as an `AnyValue`.
    pub(crate) fn write_any(&self, out: &mut Vec<u8>, i: usize) {
        match self.kind(i) {
            Some(Kind::Value { any, .. }) => out.extend_from_slice(any.get(&self.text)),
            Some(Kind::Struct { .. }) => {
                out.extend_from_slice(b"{\"kvlistValue\":{\"values\":[");
                for (n, m) in self.members(i).enumerate() {
                    if n > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(b"{\"key\":");
                    out.extend_from_slice(self.key(m));
                    out.extend_from_slice(b",\"value\":");
                    self.write_any(out, m);
                    out.push(b'}');
                }
                out.extend_from_slice(b"]}}");
            }
            Some(Kind::Array { end }) => {
                out.extend_from_slice(b"{\"arrayValue\":{\"values\":[");
                let mut at = i + 1;
                while at < end {
                    if at > i + 1 {
                        out.push(b',');
                    }
                    self.write_any(out, at);
                    at = self.after(at);
                }
                out.extend_from_slice(b"]}}");
            }
            None => out.extend_from_slice(b"{}"),
        }
    }
}

/// The key of an EventHeader item.
fn key_of(name: &[u8], element: bool) -> Key<'_> {
    if element {
        Key::Element
    } else {
        Key::Bytes(name)
    }
}

/// The nodes of one level (the top level or a struct's members), in order.
pub(crate) struct Members<'a> {
    fields: &'a Fields,
    at: usize,
    end: usize,
}

impl Iterator for Members<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        (self.at < self.end).then(|| {
            let i = self.at;
            self.at = self.fields.after(i);
            i
        })
    }
}

/// The `AnyValue` of the JSON scalar `scalar` as the JSON-lines writers write it (see the
/// module documentation), appended to `out`; returns its class and where the scalar
/// stands in `out`.
pub(crate) fn write_any_of_scalar(out: &mut Vec<u8>, scalar: &[u8]) -> (Class, Text) {
    let (class, open, close): (Class, &[u8], &[u8]) = match scalar.first() {
        Some(b'"') => (Class::Str, b"{\"stringValue\":", b"}"),
        Some(b't' | b'f') => (Class::Bool, b"{\"boolValue\":", b"}"),
        None | Some(b'n') => {
            out.extend_from_slice(b"{}");
            return (Class::Null, Text::of(out, out.len()));
        }
        Some(_) if scalar.iter().any(|b| matches!(b, b'.' | b'e' | b'E')) => {
            (Class::Double, b"{\"doubleValue\":", b"}")
        }
        Some(_) if is_int64(scalar) => (Class::Int, b"{\"intValue\":\"", b"\"}"),
        // Digits beyond int64 (unsigned 64-bit values): their text.
        Some(_) => {
            out.extend_from_slice(b"{\"stringValue\":");
            let start = out.len();
            out.push(b'"');
            out.extend_from_slice(scalar);
            out.push(b'"');
            let text = Text::of(out, start);
            out.push(b'}');
            return (Class::Str, text);
        }
    };
    out.extend_from_slice(open);
    let start = out.len();
    out.extend_from_slice(scalar);
    let text = Text::of(out, start);
    out.extend_from_slice(close);
    (class, text)
}

/// Whether the JSON integer `digits` fits `int64`.
fn is_int64(digits: &[u8]) -> bool {
    std::str::from_utf8(digits).is_ok_and(|s| s.parse::<i64>().is_ok())
}

/// `message` as a JSON string (escaped, no allocation).
pub(crate) fn write_message(out: &mut Vec<u8>, message: &dyn fmt::Display) {
    out.push(b'"');
    // `Escaped` never fails, so neither does `write!`.
    let _ = fmt::Write::write_fmt(&mut Escaped(out), format_args!("{message}"));
    out.push(b'"');
}

/// The key just written at `start..` in `buf` (a JSON string), renamed `key#2`,
/// `key#3`, … when one of `keys` (ranges of `buf`) has it already; returns its range.
/// THE rule for unique keys (OTLP attribute and kvlist keys must be unique), as in JSON
/// lines.
pub(crate) fn dedupe(buf: &mut Vec<u8>, keys: &[Text], start: usize) -> Text {
    let taken = |buf: &[u8], at: usize| {
        keys.iter()
            .any(|k| k.get(buf) == buf.get(at..).unwrap_or_default())
    };
    let end = buf.len();
    if !taken(buf, start) {
        return Text { start, end };
    }
    for n in 2u32.. {
        buf.truncate(end);
        // The candidate after the key: the key without its closing quote, `#n"`.
        buf.extend_from_within(start..end - 1);
        buf.push(b'#');
        write_int(buf, n);
        buf.push(b'"');
        if !taken(buf, end) {
            buf.copy_within(end.., start);
            let len = buf.len() - end;
            buf.truncate(start + len);
            return Text::of(buf, start);
        }
    }
    Text::of(buf, start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn any(scalar: &str) -> (Class, String) {
        let mut out = Vec::new();
        let (class, _) = write_any_of_scalar(&mut out, scalar.as_bytes());
        (class, String::from_utf8(out).unwrap())
    }

    #[test]
    fn json_scalars_map_to_typed_values() {
        assert_eq!(any("-7"), (Class::Int, r#"{"intValue":"-7"}"#.into()));
        assert_eq!(
            any("18446744073709551615"),
            (
                Class::Str,
                r#"{"stringValue":"18446744073709551615"}"#.into()
            )
        );
        assert_eq!(any("1.5"), (Class::Double, r#"{"doubleValue":1.5}"#.into()));
        assert_eq!(any("1e300").0, Class::Double);
        assert_eq!(
            any("\"a\\\"b\""),
            (Class::Str, r#"{"stringValue":"a\"b"}"#.into())
        );
        assert_eq!(any("true"), (Class::Bool, r#"{"boolValue":true}"#.into()));
        assert_eq!(any("null"), (Class::Null, "{}".into()));
    }

    #[test]
    fn repeated_keys_get_suffixes() {
        let mut f = Fields::default();
        for _ in 0..3 {
            f.value(Key::Str("k"), |out| out.extend_from_slice(b"1"));
        }
        f.value(Key::Str("k#2#2"), |out| out.extend_from_slice(b"1"));
        f.value(Key::Str("k#2"), |out| out.extend_from_slice(b"1"));
        let keys: Vec<&[u8]> = f.top().map(|i| f.key(i)).collect();
        assert_eq!(
            keys,
            [
                &b"\"k\""[..],
                b"\"k#2\"",
                b"\"k#3\"",
                b"\"k#2#2\"",
                b"\"k#2#3\""
            ]
        );
    }
}
