//! An event's decoded fields as OTLP/JSON `AnyValue`s, in buffers reused from record to
//! record: a flat tree ([`Fields`]: one [`Node`] per field, struct, array or element, in
//! payload order, each struct and array knowing where its members end) whose keys and
//! values are JSON text in one byte buffer. The Common Schema mapping reads it, then the
//! record's JSON is written from it; nothing is allocated per record once the buffers
//! have grown.
//!
//! The text is what the JSON-lines writers write (so each EventHeader format rule, UUID,
//! IP address, time, float, … exists once, in [`crate::json_line::eventheader`] and
//! [`crate::json_line`]): for an EventHeader event whose metadata compiles, the
//! `fields` members its cached [`Plan`](crate::json_line::eventheader::plan::Plan) writes, read
//! back by [`Fields::eventheader_planned`]; otherwise each value of the
//! [`Enumerator`]'s walk ([`Fields::eventheader`]) or of the plain event's fields
//! ([`Fields::plain`]). A value's JSON scalar becomes its `AnyValue` ([`Class`]):
//! integers that fit `int64` → `intValue`; larger integers → `stringValue` of their
//! decimal digits (OTLP has no unsigned 64-bit type); numbers with a fraction or
//! exponent → `doubleValue`; strings (bytes as hex, NaN and the infinities as `"NaN"`,
//! `"Infinity"`, `"-Infinity"`) → `stringValue`; booleans → `boolValue`; `null` (a
//! zero-length value) → the empty `AnyValue` `{}`. EventHeader structs become
//! `kvlistValue`s and arrays `arrayValue`s. A repeated key in the same struct gets the
//! suffix `#2`, `#3`, … as in JSON lines ([`dedupe`]).

use std::borrow::Cow;
use std::fmt;

use crate::decode::{Endian, Value, decode_field};
use crate::eventheader::enumerator::{Enumerator, Item};
use crate::json::{Escaped, first_special, unique_key, write_str, write_text, write_value};
use crate::schema::Field;

/// A range of a byte buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Text {
    start: usize,
    end: usize,
}

impl Text {
    pub(crate) fn of(buf: &[u8], start: usize) -> Text {
        Text {
            start,
            end: buf.len(),
        }
    }

    /// Its bytes in `buf`.
    pub(crate) fn get(self, buf: &[u8]) -> &[u8] {
        buf.get(self.start..self.end).unwrap_or_default()
    }

    /// The range after its bytes moved up by `by`.
    pub(crate) fn shifted(self, by: usize) -> Text {
        Text {
            start: self.start + by,
            end: self.end + by,
        }
    }
}

/// What a value's JSON scalar is, and so its `AnyValue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// A JSON string → `stringValue`.
    Str,
    /// An integer that fits `int64` → `intValue` (its digits in quotes).
    Int,
    /// An integer beyond `int64` → `stringValue` of its digits.
    Digits,
    /// Another number → `doubleValue`.
    Double,
    /// `true` or `false` → `boolValue`.
    Bool,
    /// `null` (or nothing) → the empty `AnyValue`.
    Null,
}

impl Class {
    /// The class of the JSON scalar `s`.
    pub(crate) fn of(s: &[u8]) -> Class {
        match s.first() {
            Some(b'"') => Class::Str,
            Some(b't' | b'f') => Class::Bool,
            None | Some(b'n') => Class::Null,
            Some(_) if s.iter().any(|b| matches!(b, b'.' | b'e' | b'E')) => Class::Double,
            Some(_) if is_int64(s) => Class::Int,
            Some(_) => Class::Digits,
        }
    }
}

/// One node of the tree.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// A value: its JSON scalar.
    Value { scalar: Text, class: Class },
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
}

impl Fields {
    /// Start a new record.
    pub(crate) fn clear(&mut self) {
        self.text.clear();
        self.nodes.clear();
        self.keys.clear();
        self.open.clear();
    }

    /// The nodes of the `fields` members a JSON-lines plan wrote (`write`, returning
    /// `None` where it met a problem); `false`, with nothing kept, when it did (the
    /// caller then walks the event with [`Fields::eventheader`]). The plan's keys are
    /// unique already (the JSON-lines rule).
    pub(crate) fn eventheader_planned(
        &mut self,
        write: impl FnOnce(&mut Vec<u8>) -> Option<()>,
    ) -> bool {
        self.clear();
        if write(&mut self.text).is_some() && self.read_members() {
            return true;
        }
        self.clear();
        false
    }

    /// Nodes for the JSON members in `text` (`"key":value,…`, as the JSON-lines writers
    /// write them); `false` at anything else.
    fn read_members(&mut self) -> bool {
        let text = &self.text;
        let mut pos = 0;
        // A bit per open level, the innermost lowest: set for arrays.
        let mut arrays: u64 = 0;
        loop {
            let in_array = arrays & 1 == 1;
            match text.get(pos) {
                Some(b',') => {
                    pos += 1;
                    continue;
                }
                Some(b'}' | b']') => {
                    let Some((node, _)) = self.open.pop() else {
                        return false;
                    };
                    let len = self.nodes.len();
                    if let Kind::Struct { end } | Kind::Array { end } = &mut self.nodes[node].kind {
                        *end = len;
                    }
                    arrays >>= 1;
                    pos += 1;
                    continue;
                }
                None => return self.open.is_empty(),
                Some(_) => {}
            }
            let key = if in_array {
                Text::of(text, pos)
            } else {
                let Some(key) = json_string(text, pos) else {
                    return false;
                };
                if text.get(key.end) != Some(&b':') {
                    return false;
                }
                pos = key.end + 1;
                key
            };
            let kind = match text.get(pos) {
                Some(b'{') => Kind::Struct { end: 0 },
                Some(b'[') => Kind::Array { end: 0 },
                Some(b'"') => {
                    let Some(scalar) = json_string(text, pos) else {
                        return false;
                    };
                    Kind::Value {
                        scalar,
                        class: Class::Str,
                    }
                }
                _ => {
                    let rest = text.get(pos..).unwrap_or_default();
                    // (Scalars are short: a loop beats memchr's set-up.)
                    let len = rest
                        .iter()
                        .position(|b| matches!(b, b',' | b'}' | b']'))
                        .unwrap_or(rest.len());
                    let scalar = Text {
                        start: pos,
                        end: pos + len,
                    };
                    Kind::Value {
                        scalar,
                        class: Class::of(scalar.get(text)),
                    }
                }
            };
            match kind {
                Kind::Value { scalar, .. } => pos = scalar.end,
                _ => {
                    if self.open.len() >= 63 {
                        return false;
                    }
                    self.open.push((self.nodes.len(), 0));
                    arrays = arrays << 1 | u64::from(matches!(kind, Kind::Array { .. }));
                    pos += 1;
                }
            }
            self.nodes.push(Node { key, kind });
        }
    }

    /// The nodes of an EventHeader walk, up to its end or to where it stopped (the
    /// structs and arrays open there are closed as they are).
    pub(crate) fn eventheader(&mut self, e: &mut Enumerator<'_>) {
        let endian = e.endian();
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
                    crate::json_line::eventheader::write_value(out, &field, bytes, endian)
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
        let start = self.text.len();
        render(&mut self.text);
        let scalar = Text::of(&self.text, start);
        let class = Class::of(scalar.get(&self.text));
        self.nodes.push(Node {
            key,
            kind: Kind::Value { scalar, class },
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
        let key = dedupe(&mut self.text, &self.keys[from..], start, true);
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
            Kind::Value { scalar, class: c } if c == class => Some(scalar.get(&self.text)),
            _ => None,
        }
    }

    /// Whether node `i` is a string (`stringValue`).
    pub(crate) fn is_str(&self, i: usize) -> bool {
        matches!(
            self.kind(i),
            Some(Kind::Value {
                class: Class::Str | Class::Digits,
                ..
            })
        )
    }

    /// Write node `i`'s string (`stringValue`) as a JSON string; `false` (nothing
    /// written) when it is not one.
    pub(crate) fn write_str_of(&self, out: &mut Vec<u8>, i: usize) -> bool {
        match self.kind(i) {
            Some(Kind::Value {
                scalar,
                class: Class::Str,
            }) => out.extend_from_slice(scalar.get(&self.text)),
            Some(Kind::Value {
                scalar,
                class: Class::Digits,
            }) => {
                out.push(b'"');
                out.extend_from_slice(scalar.get(&self.text));
                out.push(b'"');
            }
            _ => return false,
        }
        true
    }

    /// Node `i`'s string (`stringValue`) as bytes (no UTF-8 check: for comparisons and
    /// ASCII parsers).
    pub(crate) fn str_bytes(&self, i: usize) -> Option<Cow<'_, [u8]>> {
        if let Some(digits) = self.scalar(i, Class::Digits) {
            return Some(Cow::Borrowed(digits));
        }
        let json = self.scalar(i, Class::Str)?;
        let inner = json.get(1..json.len().checked_sub(1)?)?;
        if !inner.contains(&b'\\') {
            return Some(Cow::Borrowed(inner));
        }
        serde_json::from_slice::<String>(json)
            .ok()
            .map(|s| Cow::Owned(s.into_bytes()))
    }

    /// Node `i`'s string (`stringValue`).
    pub(crate) fn str_of(&self, i: usize) -> Option<Cow<'_, str>> {
        if let Some(digits) = self.scalar(i, Class::Digits) {
            return std::str::from_utf8(digits).ok().map(Cow::Borrowed);
        }
        let json = self.scalar(i, Class::Str)?;
        let inner = json.get(1..json.len().checked_sub(1)?)?;
        if !inner.contains(&b'\\') {
            // The writers write valid UTF-8.
            return std::str::from_utf8(inner).ok().map(Cow::Borrowed);
        }
        serde_json::from_slice::<String>(json).ok().map(Cow::Owned)
    }

    /// Node `i`'s integer (`intValue`).
    pub(crate) fn int_of(&self, i: usize) -> Option<i64> {
        parse_i64(self.scalar(i, Class::Int)?)
    }

    /// Node `i`'s boolean (`boolValue`).
    pub(crate) fn bool_of(&self, i: usize) -> Option<bool> {
        self.scalar(i, Class::Bool).map(|s| s == b"true")
    }

    /// Node `i` as an `AnyValue`.
    pub(crate) fn write_any(&self, out: &mut Vec<u8>, i: usize) {
        match self.kind(i) {
            Some(Kind::Value { scalar, class }) => {
                let (open, close): (&[u8], &[u8]) = match class {
                    Class::Str => (b"{\"stringValue\":", b"}"),
                    Class::Int => (b"{\"intValue\":\"", b"\"}"),
                    Class::Digits => (b"{\"stringValue\":\"", b"\"}"),
                    Class::Double => (b"{\"doubleValue\":", b"}"),
                    Class::Bool => (b"{\"boolValue\":", b"}"),
                    Class::Null => return out.extend_from_slice(b"{}"),
                };
                out.extend_from_slice(open);
                out.extend_from_slice(scalar.get(&self.text));
                out.extend_from_slice(close);
            }
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

impl Fields {
    /// Node `i` as protobuf `AnyValue` contents (what [`Fields::write_any`] writes as
    /// JSON).
    pub(crate) fn write_any_proto(&self, out: &mut Vec<u8>, i: usize) {
        use super::wire::{self, field};
        match self.kind(i) {
            Some(Kind::Value { scalar, class }) => scalar_proto(out, class, scalar.get(&self.text)),
            Some(Kind::Struct { .. }) => {
                let list = wire::open(out, field::KVLIST_VALUE);
                for m in self.members(i) {
                    let kv = wire::open(out, field::VALUES);
                    let key = wire::open(out, field::KEY);
                    wire::unescape(out, self.key(m));
                    wire::close(out, key);
                    let value = wire::open(out, field::VALUE);
                    self.write_any_proto(out, m);
                    wire::close(out, value);
                    wire::close(out, kv);
                }
                wire::close(out, list);
            }
            Some(Kind::Array { end }) => {
                let array = wire::open(out, field::ARRAY_VALUE);
                let mut at = i + 1;
                while at < end {
                    let value = wire::open(out, field::VALUES);
                    self.write_any_proto(out, at);
                    wire::close(out, value);
                    at = self.after(at);
                }
                wire::close(out, array);
            }
            None => {}
        }
    }

    /// Node `i`'s string (`stringValue`) as text; `false` (nothing written) when it is
    /// not one.
    pub(crate) fn write_raw_str_of(&self, out: &mut Vec<u8>, i: usize) -> bool {
        match self.kind(i) {
            Some(Kind::Value {
                scalar,
                class: Class::Str,
            }) => super::wire::unescape(out, scalar.get(&self.text)),
            Some(Kind::Value {
                scalar,
                class: Class::Digits,
            }) => out.extend_from_slice(scalar.get(&self.text)),
            _ => return false,
        }
        true
    }
}

/// A JSON scalar of `class` as protobuf `AnyValue` contents (what [`Fields::write_any`]
/// writes as JSON for a value node). Shared by the field tree and the compiled protobuf
/// plans (`fast.rs`), so that both write the same bytes.
pub(crate) fn scalar_proto(out: &mut Vec<u8>, class: Class, text: &[u8]) {
    use super::wire::{self, field};
    use prost::encoding::WireType;
    match class {
        Class::Str => {
            let mark = wire::open(out, field::STRING_VALUE);
            wire::unescape(out, text);
            wire::close(out, mark);
        }
        Class::Int => wire::int_any(out, parse_i64(text).unwrap_or(0)),
        Class::Digits => {
            wire::head(out, field::STRING_VALUE, text.len());
            out.extend_from_slice(text);
        }
        Class::Double => {
            // The shortest text that reads back as the value (zmij), so parsing gives
            // the value back.
            let v = std::str::from_utf8(text)
                .ok()
                .and_then(|t| t.parse::<f64>().ok())
                .unwrap_or(f64::NAN);
            wire::key(out, field::DOUBLE_VALUE, WireType::SixtyFourBit);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Class::Bool => {
            wire::key(out, field::BOOL_VALUE, WireType::Varint);
            out.push(u8::from(text == b"true"));
        }
        Class::Null => {}
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

/// The JSON string starting at `start` of `text` (its range, quotes included).
#[inline]
fn json_string(text: &[u8], start: usize) -> Option<Text> {
    if text.get(start) != Some(&b'"') {
        return None;
    }
    let mut at = start + 1;
    loop {
        let rest = text.get(at..)?;
        // 8 bytes at a time to the next quote, backslash or non-ASCII byte.
        let found = first_special(rest)?;
        match rest[found] {
            b'"' => {
                return Some(Text {
                    start,
                    end: at + found + 1,
                });
            }
            b'\\' => at += found + 2,
            _ => at += found + 1,
        }
    }
}

/// Whether the JSON integer `digits` fits `int64`.
fn is_int64(digits: &[u8]) -> bool {
    parse_i64(digits).is_some()
}

/// The JSON integer `digits` (`-`, then digits) as an `i64`, if it is one that fits.
fn parse_i64(digits: &[u8]) -> Option<i64> {
    let (negative, digits) = match digits {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, digits),
    };
    if digits.is_empty() {
        return None;
    }
    // Accumulate negatively: i64::MIN has no positive counterpart.
    let mut v: i64 = 0;
    for &d in digits {
        let d = i64::from(d.checked_sub(b'0').filter(|d| *d < 10)?);
        v = v.checked_mul(10)?.checked_sub(d)?;
    }
    if negative { Some(v) } else { v.checked_neg() }
}

/// `message` as a JSON string (escaped, no allocation).
pub(crate) fn write_message(out: &mut Vec<u8>, message: &dyn fmt::Display) {
    out.push(b'"');
    // `Escaped` never fails, so neither does `write!`.
    let _ = fmt::Write::write_fmt(&mut Escaped(out), format_args!("{message}"));
    out.push(b'"');
}

/// The key just written at `start..` in `buf` (a JSON string when `quoted`, else its
/// text), made unique among `keys` ([`unique_key`], the one rule for JSON lines and
/// OTLP: attribute and kvlist keys must be unique); returns its range.
pub(crate) fn dedupe(buf: &mut Vec<u8>, keys: &[Text], start: usize, quoted: bool) -> Text {
    let (start, end) = unique_key(buf, keys, |k| (k.start, k.end), start, quoted);
    Text { start, end }
}

// Tests compute with the values they pick.
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    /// The `AnyValue` of a JSON scalar.
    fn any(scalar: &str) -> (Class, String) {
        let mut f = Fields::default();
        f.value(Key::Str("k"), |out| {
            out.extend_from_slice(scalar.as_bytes())
        });
        let mut out = Vec::new();
        f.write_any(&mut out, 0);
        (
            Class::of(scalar.as_bytes()),
            String::from_utf8(out).unwrap(),
        )
    }

    #[test]
    fn json_scalars_map_to_typed_values() {
        assert_eq!(any("-7"), (Class::Int, r#"{"intValue":"-7"}"#.into()));
        assert_eq!(
            any("18446744073709551615"),
            (
                Class::Digits,
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
    fn planned_members_read_back_as_the_walk_builds_them() {
        let text = br#""a":1,"s":{"x":"q\"}","y":[1,{"z":null}]},"e":[],"t":true"#;
        let mut f = Fields::default();
        assert!(f.eventheader_planned(|out| {
            out.extend_from_slice(text);
            Some(())
        }));
        let top: Vec<usize> = f.top().collect();
        assert_eq!(top.len(), 4);
        let mut out = Vec::new();
        f.write_any(&mut out, top[1]);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"kvlistValue":{"values":[{"key":"x","value":{"stringValue":"q\"}"}},{"key":"y","value":{"arrayValue":{"values":[{"intValue":"1"},{"kvlistValue":{"values":[{"key":"z","value":{}}]}}]}}}]}}"#
        );
        assert_eq!(f.bool_of(top[3]), Some(true));
        for bad in [&b"\"a\":1}"[..], b"\"a\":{", b"\"a\"1", b"\"a"] {
            assert!(!f.eventheader_planned(|out| {
                out.extend_from_slice(bad);
                Some(())
            }));
        }
        assert!(!f.eventheader_planned(|_| None));
    }

    #[test]
    fn integers_parse_as_std_does() {
        for text in [
            "0",
            "-0",
            "7",
            "-7",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "18446744073709551615",
            "",
            "-",
            "1-",
            "12a",
        ] {
            assert_eq!(
                parse_i64(text.as_bytes()),
                text.parse::<i64>().ok(),
                "{text}"
            );
        }
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
