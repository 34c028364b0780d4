//! The EventHeader part of a JSON line (`/work/eh-json-spec.md`, `docs/eventheader.md`):
//! from `,"provider":` to the last key before the line's closing `}`.
//!
//! Duplicate keys are renamed (`name#2`, `name#3`, … skipping suffixes already taken)
//! by comparing each new key's JSON text with the keys already written in the same
//! object: their ranges in the output buffer are kept in a [`Scratch`] whose vectors
//! keep their capacity, so nothing is allocated per record once they have grown (they
//! are bounded by [`MAX_FIELDS`](super::MAX_FIELDS) and the nesting limit for fields).

use super::enumerator::{Enumerator, Item};
use super::enums::{Encoding, Format};
use super::header::{EventParts, parse_event};
use super::metadata::{FieldMeta, attributes, split_event_name, unescape};
use super::plan::{PlanCache, PlanHint};
use super::tracepoint_name::{OwnedTracepointName, TracepointName};
use crate::json::{
    Text, first_special, hex_digits, write_escape, write_hex, write_int, write_plain, write_str,
    write_text, write_text_contents,
};

/// Reusable buffers for [`write_event`]; keep one per writer.
#[derive(Debug, Default, Clone)]
pub struct Scratch {
    /// Ranges in the output of the keys of the open objects (and of the object being
    /// written at the end: attributes, tags, errors).
    pub(super) keys: Vec<(usize, usize)>,
    /// The open objects and arrays of `fields`.
    pub(super) open: Vec<Open>,
    /// Tagged fields: (tag, first path entry in `paths`, path length).
    pub(super) tags: Vec<(u16, usize, usize)>,
    /// Key ranges making up the tagged fields' paths.
    paths: Vec<(usize, usize)>,
    /// Key ranges of the path where decoding stopped.
    err_path: Vec<(usize, usize)>,
    /// Compiled plans of the metadata blocks seen last.
    plans: PlanCache,
}

/// An open object or array of `fields`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Open {
    /// An array (its members have no keys).
    pub(super) array: bool,
    /// No member written yet.
    pub(super) first: bool,
    /// Its keys in [`Scratch::keys`] start here.
    pub(super) keys_from: usize,
    /// Its own key (`None` for array elements and the `fields` object).
    pub(super) key: Option<(usize, usize)>,
}

impl Scratch {
    /// See [`PlanCache::has_learnt`].
    #[inline]
    pub fn has_learnt(&self) -> bool {
        self.plans.has_learnt()
    }

    /// See [`PlanCache::take_learnt`].
    pub fn take_learnt(&mut self) -> Option<(&[u8], bool)> {
        self.plans.take_learnt()
    }

    fn clear(&mut self) {
        self.keys.clear();
        self.open.clear();
        self.tags.clear();
        self.paths.clear();
        self.err_path.clear();
    }
}

/// Append the EventHeader keys of a line for the event `data` (the raw trace entry from
/// offset 8, the `eventheader_flags` byte, to its end) of the tracepoint `tp`: from
/// `,"provider":` to the last key (the caller writes the line's start and its `}\n`).
/// Never panics; bad data is reported in `errors` with the bytes not decoded.
///
/// Events whose metadata compiles take its cached [`Plan`](super::plan::Plan); the
/// others, and any event where the plan meets a problem, take the streaming writer
/// ([`write_event_streaming`]), so the line is the same either way.
pub fn write_event(out: &mut Vec<u8>, scratch: &mut Scratch, tp: &TracepointName<'_>, data: &[u8]) {
    let start = out.len();
    if !write_event_planned(out, scratch, tp, data) {
        out.truncate(start);
        write_event_streaming(out, scratch, tp, data);
    }
}

/// A tracepoint name with the constant texts of its events' lines rendered once: what
/// [`write_event_prepared`] copies instead of writing it per event.
#[derive(Debug, Clone)]
pub struct PreparedName {
    name: OwnedTracepointName,
    level: u8,
    /// `,"provider":…`
    provider: Text<64>,
    /// `,"level":…,"keyword":"0x…"` and `,"group":…` for events of the name's level.
    level_keyword: Text<64>,
    /// Where its events' metadata was found last in a plan cache.
    hint: PlanHint,
}

impl PreparedName {
    /// Render the constant texts of `name`.
    pub fn new(name: OwnedTracepointName) -> Self {
        let tp = name.get();
        let (mut provider, mut level_keyword) = (Vec::new(), Vec::new());
        write_provider(&mut provider, &tp);
        write_level_keyword(&mut level_keyword, &tp, tp.level);
        PreparedName {
            level: tp.level,
            provider: Text::new(provider),
            level_keyword: Text::new(level_keyword),
            name,
            hint: PlanHint::default(),
        }
    }

    /// The parsed name, borrowed.
    pub fn get(&self) -> TracepointName<'_> {
        self.name.get()
    }
}

/// [`write_event`] for a [`PreparedName`] (the same text).
pub fn write_event_prepared(
    out: &mut Vec<u8>,
    scratch: &mut Scratch,
    name: &PreparedName,
    data: &[u8],
) {
    let start = out.len();
    let planned = write_planned(
        out,
        scratch,
        name.level,
        data,
        Some(&name.hint),
        |out| name.provider.write(out),
        |out| name.level_keyword.write(out),
    );
    if planned.is_none() {
        out.truncate(start);
        write_event_streaming(out, scratch, &name.get(), data);
    }
}

/// The fast path of [`write_event`] for a tracepoint of level `level` (`hint`: its
/// [`PlanHint`] when it has one), whose
/// `,"provider":…` text `provider` writes and whose `,"level":…,"keyword":…` text
/// (`,"group":…` included) `level_keyword` writes: `None` (with partial output) when
/// the event has no metadata, its metadata does not compile, its levels differ, or its
/// payload does not fit the plan: the streaming writer then writes the line (with its
/// errors).
#[inline]
fn write_planned(
    out: &mut Vec<u8>,
    scratch: &mut Scratch,
    level: u8,
    data: &[u8],
    hint: Option<&PlanHint>,
    provider: impl FnOnce(&mut Vec<u8>),
    level_keyword: impl FnOnce(&mut Vec<u8>),
) -> Option<()> {
    let parts = parse_event(data).ok()?;
    if parts.header.level != level {
        return None;
    }
    let big = parts.header.big_endian();
    let plan = scratch.plans.get(parts.metadata?, big, hint)?;
    provider(out);
    plan.write_head(out);
    level_keyword(out);
    write_header_keys(out, &parts);
    out.extend_from_slice(b",\"fields\":{");
    plan.write_fields(out, parts.payload, big)?;
    out.push(b'}');
    plan.write_tags(out);
    Some(())
}

/// Only the fast path of [`write_event`]: whether a plan wrote the event (else `out`
/// holds partial output). For the tests comparing it with [`write_event_streaming`].
#[doc(hidden)]
pub fn write_event_planned(
    out: &mut Vec<u8>,
    scratch: &mut Scratch,
    tp: &TracepointName<'_>,
    data: &[u8],
) -> bool {
    write_planned(
        out,
        scratch,
        tp.level,
        data,
        None,
        |out| write_provider(out, tp),
        |out| write_level_keyword(out, tp, tp.level),
    )
    .is_some()
}

/// [`write_event`] without the plans: the streaming walk over the metadata and payload
/// for every event (what the plans must match byte for byte; public for the tests).
#[doc(hidden)]
pub fn write_event_streaming(
    out: &mut Vec<u8>,
    scratch: &mut Scratch,
    tp: &TracepointName<'_>,
    data: &[u8],
) {
    scratch.clear();
    write_provider(out, tp);
    let parts = match parse_event(data) {
        Ok(parts) => parts,
        Err(e) => {
            write_level_keyword(out, tp, tp.level);
            out.extend_from_slice(b",\"fields\":{},\"errors\":{");
            out.extend_from_slice(if e.is_header() {
                b"\"header\":"
            } else {
                b"\"extension\":"
            });
            write_message(out, format_args!("{e}"));
            out.extend_from_slice(b"},\"undecoded\":");
            write_hex(out, data);
            return;
        }
    };
    let header = parts.header;
    let big = header.big_endian();
    let enumerator = match parts
        .metadata
        .map(|m| Enumerator::new(m, parts.payload, big))
    {
        Some(Ok(e)) => Some(e),
        Some(Err(_)) => {
            write_level_keyword(out, tp, header.level);
            write_header_keys(out, &parts);
            out.extend_from_slice(b",\"fields\":{},\"errors\":{");
            write_level_error(out, tp, header.level, true);
            out.extend_from_slice(
                b"\"extension\":\"metadata block: the event name has no NUL\"},\"undecoded\":",
            );
            write_hex(out, data);
            return;
        }
        None => None,
    };
    if let Some(e) = &enumerator {
        write_name(out, &mut scratch.keys, e.event_name());
    }
    write_level_keyword(out, tp, header.level);
    write_header_keys(out, &parts);
    let Some(mut enumerator) = enumerator else {
        out.extend_from_slice(b",\"fields\":{},\"errors\":{");
        write_level_error(out, tp, header.level, true);
        out.extend_from_slice(b"\"payload\":\"no metadata extension block\"},\"undecoded\":");
        write_hex(out, parts.payload);
        return;
    };
    write_fields(out, scratch, &mut enumerator, big);
    if !scratch.tags.is_empty() {
        write_field_tags(out, scratch);
    }
    let error = enumerator.error();
    if error.is_none() && header.level == tp.level {
        return;
    }
    out.extend_from_slice(b",\"errors\":{");
    let errors_from = scratch.keys.len();
    if header.level != tp.level {
        let start = out.len();
        out.extend_from_slice(b"\"level\"");
        scratch.keys.push((start, out.len()));
        out.push(b':');
        write_message(
            out,
            format_args!(
                "header level {} differs from the tracepoint name's level {}",
                header.level, tp.level
            ),
        );
    }
    if let Some(error) = error {
        if scratch.keys.len() > errors_from {
            out.push(b',');
        }
        let start = out.len();
        out.push(b'"');
        for (i, &(a, b)) in scratch.err_path.iter().enumerate() {
            if i > 0 {
                out.push(b'.');
            }
            copy_key_text(out, a, b);
        }
        if let Some(name) = error.field {
            if !scratch.err_path.is_empty() {
                out.push(b'.');
            }
            write_text_contents(out, name);
        }
        if out.len() == start + 1 {
            out.extend_from_slice(b"payload");
        }
        out.push(b'"');
        let range = dedupe(
            out,
            scratch.keys.get(errors_from..).unwrap_or_default(),
            start,
        );
        scratch.keys.push(range);
        out.push(b':');
        write_message(out, format_args!("{error}"));
        out.extend_from_slice(b"},\"undecoded\":");
        write_hex(
            out,
            parts.payload.get(error.payload_pos..).unwrap_or_default(),
        );
    } else {
        out.push(b'}');
    }
}

/// `,"name":…` and `,"event_attributes":{…}` when the event name (as stored, without
/// its NUL) has attributes; `keys` is left empty.
pub(super) fn write_name(out: &mut Vec<u8>, keys: &mut Vec<(usize, usize)>, event_name: &[u8]) {
    let (name, attrs) = split_event_name(event_name);
    out.extend_from_slice(b",\"name\":");
    write_escaped_text(out, name);
    if !attrs.is_empty() {
        out.extend_from_slice(b",\"event_attributes\":{");
        for (i, (key, value)) in attributes(attrs).enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let start = out.len();
            write_text(out, key);
            let range = dedupe(out, keys, start);
            keys.push(range);
            out.push(b':');
            write_escaped_text(out, value);
        }
        out.push(b'}');
        keys.clear();
    }
}

/// `v` as `{:#x}` writes it, as a JSON string, without the formatting machinery: the
/// 16 digits made in two words, the leading zeros shifted out, and `"0x…"` appended as
/// one fixed-size copy.
#[inline]
pub(super) fn write_hash_x(out: &mut Vec<u8>, v: u64) {
    let digits = ((67 - v.leading_zeros()) / 4).max(1) as usize;
    let (high, low) = (hex_digits((v >> 32) as u32), hex_digits(v as u32));
    let all = (u128::from(u64::from_be_bytes(high)) << 64 | u128::from(u64::from_be_bytes(low)))
        << (8 * (16 - digits));
    let mut text = [b'"'; 20];
    text[1] = b'0';
    text[2] = b'x';
    text[3..19].copy_from_slice(&all.to_be_bytes());
    if let Some(quote) = text.get_mut(3 + digits) {
        *quote = b'"';
    }
    // Not imported: `Sink::extend` would shadow `Extend::extend` in this module.
    crate::json::Sink::put(out, &text, 4 + digits);
}

/// `v` as `{:x}` writes it, without the formatting machinery.
fn write_x(out: &mut Vec<u8>, v: u64) {
    let digits = ((67 - v.leading_zeros()) / 4).max(1) as usize;
    let (high, low) = (hex_digits((v >> 32) as u32), hex_digits(v as u32));
    if let Some(low) = low.get(8usize.saturating_sub(digits)..) {
        if digits > 8 {
            out.extend_from_slice(high.get(16 - digits..).unwrap_or_default());
        }
        out.extend_from_slice(low);
    }
}

/// `,"provider":…`.
fn write_provider(out: &mut Vec<u8>, tp: &TracepointName<'_>) {
    out.extend_from_slice(b",\"provider\":");
    write_str(out, tp.provider);
}

/// `,"level":…,"keyword":"0x…"` and `,"group":…` when set.
fn write_level_keyword(out: &mut Vec<u8>, tp: &TracepointName<'_>, level: u8) {
    out.extend_from_slice(b",\"level\":");
    write_int(out, level);
    out.extend_from_slice(b",\"keyword\":");
    write_hash_x(out, tp.keyword);
    if let Some(group) = tp.group {
        out.extend_from_slice(b",\"group\":");
        write_str(out, group);
    }
}

/// `opcode`, `id`/`version`, `tag`, `activity`, `related_activity` when set.
#[inline(always)]
fn write_header_keys(out: &mut Vec<u8>, parts: &EventParts<'_>) {
    let h = &parts.header;
    let set = u32::from(h.opcode) | u32::from(h.id) | u32::from(h.version) | u32::from(h.tag);
    // The usual event has none of them: one test in line instead of five and a call.
    if set != 0 || parts.activity.is_some() {
        write_set_header_keys(out, parts);
    }
}

/// [`write_header_keys`] when some are set.
#[inline(never)]
fn write_set_header_keys(out: &mut Vec<u8>, parts: &EventParts<'_>) {
    let h = &parts.header;
    if h.opcode != 0 {
        out.extend_from_slice(b",\"opcode\":");
        write_int(out, h.opcode);
    }
    if h.id != 0 || h.version != 0 {
        out.extend_from_slice(b",\"id\":");
        write_int(out, h.id);
        out.extend_from_slice(b",\"version\":");
        write_int(out, h.version);
    }
    if h.tag != 0 {
        out.extend_from_slice(b",\"tag\":");
        write_int(out, h.tag);
    }
    if let Some(id) = parts.activity {
        out.extend_from_slice(b",\"activity\":");
        write_uuid(out, id);
    }
    if let Some(id) = parts.related_activity {
        out.extend_from_slice(b",\"related_activity\":");
        write_uuid(out, id);
    }
}

/// `"level":"…",` inside an `errors` object when the levels differ (with the comma
/// when `more` errors follow).
fn write_level_error(out: &mut Vec<u8>, tp: &TracepointName<'_>, level: u8, more: bool) {
    if level != tp.level {
        out.extend_from_slice(b"\"level\":");
        write_message(
            out,
            format_args!(
                "header level {level} differs from the tracepoint name's level {}",
                tp.level
            ),
        );
        if more {
            out.push(b',');
        }
    }
}

/// A JSON string from a `Display` message.
fn write_message(out: &mut Vec<u8>, message: std::fmt::Arguments<'_>) {
    out.push(b'"');
    let _ = std::fmt::Write::write_fmt(&mut crate::json::Escaped(out), message);
    out.push(b'"');
}

/// Text with `;;` escapes as a JSON string of the unescaped text (lossy UTF-8; the
/// pieces split at ASCII `;`, so no UTF-8 sequence is cut).
fn write_escaped_text(out: &mut Vec<u8>, text: &[u8]) {
    if memchr::memmem::find(text, b";;").is_none() {
        write_text(out, text);
        return;
    }
    out.push(b'"');
    for piece in unescape(text) {
        write_text_contents(out, piece);
    }
    out.push(b'"');
}

/// Copy the text of the key `out[a..b]` (a JSON string) without its quotes.
fn copy_key_text(out: &mut Vec<u8>, a: usize, b: usize) {
    let (from, to) = (a + 1, b.saturating_sub(1));
    if from <= to && to <= out.len() {
        out.extend_from_within(from..to);
    }
}

/// The key just written at `out[start..]` (a JSON string), renamed `key#2`, `key#3`, …
/// while it equals one of `keys`; returns its range.
fn dedupe(out: &mut Vec<u8>, keys: &[(usize, usize)], start: usize) -> (usize, usize) {
    let taken = |out: &[u8]| {
        let new = out.get(start..);
        keys.iter().any(|&(a, b)| out.get(a..b) == new)
    };
    if !taken(out) {
        return (start, out.len());
    }
    let base = out.len().saturating_sub(1);
    for n in 2u32.. {
        out.truncate(base);
        out.push(b'#');
        write_int(out, n);
        out.push(b'"');
        if !taken(out) {
            break;
        }
    }
    (start, out.len())
}

/// Start a member of the innermost open container: the comma, and for objects the
/// (deduplicated) key; returns the key's range.
pub(super) fn member(out: &mut Vec<u8>, s: &mut Scratch, name: &[u8]) -> Option<(usize, usize)> {
    let top = s.open.last_mut()?;
    if !top.first {
        out.push(b',');
    }
    top.first = false;
    if top.array {
        return None;
    }
    let start = out.len();
    write_text(out, name);
    let range = dedupe(out, s.keys.get(top.keys_from..).unwrap_or_default(), start);
    s.keys.push(range);
    out.push(b':');
    Some(range)
}

/// Remember `field`'s tag and path (first visit of its record only).
pub(super) fn note_tag(
    s: &mut Scratch,
    field: &FieldMeta<'_>,
    key: Option<(usize, usize)>,
    seen: &mut usize,
) {
    let Some(key) = key else { return };
    if field.tag == 0 || field.offset < *seen {
        return;
    }
    *seen = field.next;
    let start = s.paths.len();
    s.paths.extend(
        s.open
            .iter()
            .filter_map(|o| o.key)
            .chain(std::iter::once(key)),
    );
    s.tags.push((field.tag, start, s.paths.len() - start));
}

/// `,"fields":{…}` from the walk, closing what is open when it stops early (the path
/// where it stopped goes to `scratch.err_path`).
fn write_fields(out: &mut Vec<u8>, s: &mut Scratch, e: &mut Enumerator<'_>, big: bool) {
    out.extend_from_slice(b",\"fields\":{");
    s.open.push(Open {
        array: false,
        first: true,
        keys_from: 0,
        key: None,
    });
    let mut seen = 0;
    for item in e.by_ref() {
        match item {
            Item::Value {
                field,
                bytes,
                element,
            } => {
                let key = member(out, s, field.name);
                if !element {
                    note_tag(s, &field, key, &mut seen);
                }
                write_value(out, &field, bytes, big);
            }
            Item::StructBegin { field, element } => {
                let key = member(out, s, field.name);
                if !element {
                    note_tag(s, &field, key, &mut seen);
                }
                out.push(b'{');
                s.open.push(Open {
                    array: false,
                    first: true,
                    keys_from: s.keys.len(),
                    key,
                });
            }
            Item::ArrayBegin { field, .. } => {
                let key = member(out, s, field.name);
                note_tag(s, &field, key, &mut seen);
                out.push(b'[');
                s.open.push(Open {
                    array: true,
                    first: true,
                    keys_from: s.keys.len(),
                    key,
                });
            }
            Item::StructEnd { .. } | Item::ArrayEnd { .. } => close(out, s),
        }
    }
    if e.error().is_some() {
        let path: &[Open] = s.open.get(1..).unwrap_or_default();
        s.err_path.extend(path.iter().filter_map(|o| o.key));
        while s.open.len() > 1 {
            close(out, s);
        }
    }
    out.push(b'}');
    s.open.clear();
    s.keys.clear();
}

/// Close the innermost open container.
pub(super) fn close(out: &mut Vec<u8>, s: &mut Scratch) {
    if s.open.len() <= 1 {
        return;
    }
    if let Some(open) = s.open.pop() {
        out.push(if open.array { b']' } else { b'}' });
        s.keys.truncate(open.keys_from);
    }
}

/// `,"field_tags":{"path":tag,…}`.
pub(super) fn write_field_tags(out: &mut Vec<u8>, s: &mut Scratch) {
    out.extend_from_slice(b",\"field_tags\":{");
    s.keys.clear();
    for i in 0..s.tags.len() {
        let Some(&(tag, from, len)) = s.tags.get(i) else {
            break;
        };
        if i > 0 {
            out.push(b',');
        }
        let start = out.len();
        out.push(b'"');
        for j in 0..len {
            if let Some(&(a, b)) = s.paths.get(from + j) {
                if j > 0 {
                    out.push(b'.');
                }
                copy_key_text(out, a, b);
            }
        }
        out.push(b'"');
        let range = dedupe(out, &s.keys, start);
        s.keys.push(range);
        out.push(b':');
        write_int(out, tag);
    }
    out.push(b'}');
    s.keys.clear();
}

/// Whether `format` on a Length16 field means "read the bytes as a ValueN".
pub(super) fn is_value_format(format: Format) -> bool {
    !matches!(
        format,
        Format::Default
            | Format::HexBytes
            | Format::String8
            | Format::StringUtf
            | Format::StringUtfBom
            | Format::StringXml
            | Format::StringJson
    )
}

/// One value of `field` (the bytes the enumerator gave).
pub fn write_value(out: &mut Vec<u8>, field: &FieldMeta<'_>, bytes: &[u8], big: bool) {
    write_value_as(out, field.encoding, field.format(), bytes, big)
}

/// [`write_value`] for a field of this encoding and format.
pub(crate) fn write_value_as(
    out: &mut Vec<u8>,
    encoding: Encoding,
    format: Format,
    bytes: &[u8],
    big: bool,
) {
    match encoding {
        Encoding::Value8 | Encoding::Value16 | Encoding::Value32 | Encoding::Value64 => {
            write_int_value(out, format, bytes, big)
        }
        Encoding::Value128 => write_value128(out, format, bytes),
        Encoding::ZStringChar8
        | Encoding::ZStringChar16
        | Encoding::ZStringChar32
        | Encoding::StringLength16Char16
        | Encoding::StringLength16Char32 => {
            write_string(out, format, bytes, encoding.char_size().unwrap_or(1), big)
        }
        Encoding::StringLength16Char8 | Encoding::BinaryLength16Char8 => {
            let binary = encoding == Encoding::BinaryLength16Char8;
            if is_value_format(format) {
                match bytes.len() {
                    0 => out.extend_from_slice(b"null"),
                    1 | 2 | 4 | 8 => write_int_value(out, format, bytes, big),
                    16 => write_value128(out, format, bytes),
                    _ if binary => write_hex(out, bytes),
                    _ => write_text(out, bytes),
                }
            } else if binary && format == Format::Default {
                write_hex(out, bytes)
            } else {
                write_string(out, format, bytes, 1, big)
            }
        }
        Encoding::Struct => out.extend_from_slice(b"null"),
    }
}

/// A 1, 2, 4 or 8-byte value as a zero-extended number, in the given byte order
/// (`None` for other lengths).
#[inline]
pub(crate) fn uint_of(bytes: &[u8], big: bool) -> Option<u64> {
    macro_rules! read {
        ($t:ty) => {{
            let b = *bytes.first_chunk()?;
            u64::from(if big {
                <$t>::from_be_bytes(b)
            } else {
                <$t>::from_le_bytes(b)
            })
        }};
    }
    Some(match bytes.len() {
        1 => u64::from(bytes[0]),
        2 => read!(u16),
        4 => read!(u32),
        8 => read!(u64),
        _ => return None,
    })
}

/// A 1, 2, 4 or 8-byte value (any other length: its hex).
pub(super) fn write_int_value(out: &mut Vec<u8>, format: Format, bytes: &[u8], big: bool) {
    let Some(u) = uint_of(bytes, big) else {
        return write_hex(out, bytes);
    };
    let n = bytes.len();
    let shift = 64 - 8 * n as u32;
    let s = ((u << shift) as i64) >> shift;
    match format {
        Format::SignedInt => write_int(out, s),
        Format::HexInt => write_hash_x(out, u),
        Format::Errno if n == 4 => write_int(out, s),
        Format::Pid if n >= 4 => write_int(out, s),
        Format::Time if n >= 4 => write_time(out, s),
        Format::Boolean => match u {
            0 => out.extend_from_slice(b"false"),
            1 => out.extend_from_slice(b"true"),
            _ if n <= 4 => write_int(out, u as u32 as i32),
            _ => write_int(out, u),
        },
        Format::Float if n == 4 => write_float(out, f32::from_bits(u as u32)),
        Format::Float if n == 8 => write_float(out, f64::from_bits(u)),
        Format::HexBytes => write_hex(out, bytes),
        Format::String8 if n == 1 => {
            out.push(b'"');
            push_char(out, char::from(bytes[0]));
            out.push(b'"');
        }
        Format::StringUtf if (2..=4).contains(&n) => {
            out.push(b'"');
            push_char(out, char::from_u32(u as u32).unwrap_or('\u{FFFD}'));
            out.push(b'"');
        }
        Format::Port if n == 2 => write_int(out, u16::from_be_bytes([bytes[0], bytes[1]])),
        Format::IpAddress | Format::IpAddressObsolete if n == 4 => {
            out.push(b'"');
            for (i, b) in bytes.iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                write_int(out, *b);
            }
            out.push(b'"');
        }
        _ => write_int(out, u),
    }
}

/// A 16-byte value: UUID, IPv6 or hex.
fn write_value128(out: &mut Vec<u8>, format: Format, bytes: &[u8]) {
    let Some(b) = bytes.first_chunk::<16>() else {
        return write_hex(out, bytes);
    };
    match format {
        Format::Uuid => write_uuid(out, b),
        Format::IpAddress | Format::IpAddressObsolete => write_ipv6(out, b),
        _ => write_hex(out, bytes),
    }
}

/// An IPv6 address (16 bytes in network order) as a JSON string of the text
/// `std::net::Ipv6Addr` displays, without the formatting machinery: `::ffff:a.b.c.d`
/// for IPv4-mapped addresses, else the segments in hex with the first longest run of
/// two or more zero segments as `::`.
fn write_ipv6(out: &mut Vec<u8>, b: &[u8; 16]) {
    let ip = std::net::Ipv6Addr::from(*b);
    out.push(b'"');
    if let Some(v4) = ip.to_ipv4_mapped() {
        out.extend_from_slice(b"::ffff:");
        for (i, octet) in v4.octets().into_iter().enumerate() {
            if i > 0 {
                out.push(b'.');
            }
            write_int(out, octet);
        }
    } else {
        let segments = ip.segments();
        // The first longest run of zero segments: (start, length).
        let (mut longest, mut current) = ((0, 0), (0, 0));
        for (i, &segment) in segments.iter().enumerate() {
            if segment != 0 {
                current = (0, 0);
                continue;
            }
            if current.1 == 0 {
                current.0 = i;
            }
            current.1 += 1;
            if current.1 > longest.1 {
                longest = current;
            }
        }
        let joined = |out: &mut Vec<u8>, segments: &[u16]| {
            for (i, &segment) in segments.iter().enumerate() {
                if i > 0 {
                    out.push(b':');
                }
                write_x(out, u64::from(segment));
            }
        };
        if longest.1 > 1 {
            joined(out, segments.get(..longest.0).unwrap_or_default());
            out.extend_from_slice(b"::");
            joined(
                out,
                segments.get(longest.0 + longest.1..).unwrap_or_default(),
            );
        } else {
            joined(out, &segments);
        }
    }
    out.push(b'"');
}

/// `"xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"` from 16 bytes in network order.
fn write_uuid(out: &mut Vec<u8>, b: &[u8; 16]) {
    let mut digits = [0u8; 32];
    for (d, word) in digits.chunks_exact_mut(8).zip(b.chunks_exact(4)) {
        let mut w = [0u8; 4];
        w.copy_from_slice(word);
        d.copy_from_slice(&hex_digits(u32::from_be_bytes(w)));
    }
    let mut text = [b'-'; 38];
    let (first, last) = (0, text.len() - 1);
    text[first] = b'"';
    text[last] = b'"';
    // Digit groups of 8, 4, 4, 4 and 12, each after a quote or a dash.
    for (from, to, at) in [
        (0, 8, 1),
        (8, 12, 10),
        (12, 16, 15),
        (16, 20, 20),
        (20, 32, 25),
    ] {
        text[at..at + to - from].copy_from_slice(&digits[from..to]);
    }
    out.extend_from_slice(&text);
}

/// A float as serde_json writes it (its float formatter, `zmij`: the shortest text that
/// reads back the same, `f32` shortest for `f32` values, exponents from `1e+16` and
/// below `1e-5`), or `"NaN"`, `"Infinity"`, `"-Infinity"`.
fn write_float<F: zmij::Float>(out: &mut Vec<u8>, v: F) {
    let mut buffer = zmij::Buffer::new();
    match buffer.format(v).as_bytes() {
        b"NaN" => out.extend_from_slice(b"\"NaN\""),
        b"inf" => out.extend_from_slice(b"\"Infinity\""),
        b"-inf" => out.extend_from_slice(b"\"-Infinity\""),
        text => out.extend_from_slice(text),
    }
}

/// `time_t` seconds as `"YYYY-MM-DDTHH:MM:SSZ"` (years 0..=9999, RFC 3339's range),
/// else the number.
fn write_time(out: &mut Vec<u8>, secs: i64) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    if !(0..=9999).contains(&year) {
        return write_int(out, secs);
    }
    // `"YYYY-MM-DDTHH:MM:SSZ"`, the digits written in place.
    let mut text = *b"\"0000-00-00T00:00:00Z\"";
    let year = year as u32;
    let digits = |text: &mut [u8; 22], at: usize, v: u32| {
        text[at] = b'0' + (v / 10 % 10) as u8;
        text[at + 1] = b'0' + (v % 10) as u8;
    };
    digits(&mut text, 1, year / 100);
    digits(&mut text, 3, year);
    digits(&mut text, 6, month as u32);
    digits(&mut text, 9, day as u32);
    digits(&mut text, 12, (rem / 3600) as u32);
    digits(&mut text, 15, (rem / 60 % 60) as u32);
    digits(&mut text, 18, (rem % 60) as u32);
    out.extend_from_slice(&text);
}

/// A string of `unit`-byte code units in the given format.
pub(super) fn write_string(
    out: &mut Vec<u8>,
    format: Format,
    bytes: &[u8],
    unit: usize,
    big: bool,
) {
    match format {
        Format::HexBytes => write_hex(out, bytes),
        Format::String8 if write_plain(out, bytes) => {}
        Format::String8 => {
            out.push(b'"');
            for &b in bytes {
                push_char(out, char::from(b));
            }
            out.push(b'"');
        }
        Format::StringUtfBom | Format::StringXml | Format::StringJson => {
            let (unit, big, skip) = match bytes {
                [0, 0, 0xfe, 0xff, ..] => (4, true, 4),
                [0xff, 0xfe, 0, 0, ..] => (4, false, 4),
                [0xfe, 0xff, ..] => (2, true, 2),
                [0xff, 0xfe, ..] => (2, false, 2),
                [0xef, 0xbb, 0xbf, ..] => (1, big, 3),
                _ => (unit, big, 0),
            };
            write_units(out, bytes.get(skip..).unwrap_or_default(), unit, big)
        }
        _ => write_units(out, bytes, unit, big),
    }
}

/// UTF-8, UTF-16 or UTF-32 code units as a JSON string (invalid → U+FFFD).
fn write_units(out: &mut Vec<u8>, bytes: &[u8], unit: usize, big: bool) {
    match unit {
        2 if write_ascii_units::<2>(out, bytes, big) => {}
        4 if write_ascii_units::<4>(out, bytes, big) => {}
        2 => {
            out.push(b'"');
            let chunks = bytes.chunks_exact(2);
            let partial = !chunks.remainder().is_empty();
            let units = chunks.map(|c| {
                let b = [c[0], c[1]];
                if big {
                    u16::from_be_bytes(b)
                } else {
                    u16::from_le_bytes(b)
                }
            });
            for c in char::decode_utf16(units) {
                push_char(out, c.unwrap_or('\u{FFFD}'));
            }
            if partial {
                push_char(out, '\u{FFFD}');
            }
            out.push(b'"');
        }
        4 => {
            out.push(b'"');
            let chunks = bytes.chunks_exact(4);
            let partial = !chunks.remainder().is_empty();
            for c in chunks {
                let b = [c[0], c[1], c[2], c[3]];
                let v = if big {
                    u32::from_be_bytes(b)
                } else {
                    u32::from_le_bytes(b)
                };
                push_char(out, char::from_u32(v).unwrap_or('\u{FFFD}'));
            }
            if partial {
                push_char(out, '\u{FFFD}');
            }
            out.push(b'"');
        }
        _ => write_text(out, bytes),
    }
}

/// `N`-byte code units that are all plain printable ASCII needing no escape as a JSON
/// string of their low bytes; `false` (nothing written) for other units or a partial one.
fn write_ascii_units<const N: usize>(out: &mut Vec<u8>, bytes: &[u8], big: bool) -> bool {
    let units = bytes.chunks_exact(N);
    if !units.remainder().is_empty() {
        return false;
    }
    // The byte holding the unit's low 8 bits; all the others must be 0.
    let low = if big { N - 1 } else { 0 };
    let mut high = 0u8;
    for unit in units.clone() {
        for (i, &b) in unit.iter().enumerate() {
            high |= if i == low { b & 0x80 } else { b };
        }
    }
    if high != 0 {
        return false;
    }
    let mark = out.len();
    out.push(b'"');
    out.extend(units.map(|unit| unit[low]));
    if out
        .get(mark + 1..)
        .is_none_or(|text| first_special(text).is_some())
    {
        out.truncate(mark);
        return false;
    }
    out.push(b'"');
    true
}

/// One character inside a JSON string, escaped as serde_json escapes (in line: it is
/// called per character).
#[inline]
fn push_char(out: &mut Vec<u8>, c: char) {
    match u8::try_from(c) {
        Ok(b) if b.is_ascii() => write_escape(out, b),
        _ => {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_as_serde_json_writes_them() {
        // Special values and random bit patterns, as f64 and as f32 (the low 32 bits);
        // non-finite ones as the documented strings, the others as serde_json's text,
        // which reads back to the same value.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut patterns = vec![0, 1, 0x8000_0000_0000_0000, 0x7ff0_0000_0000_0000];
        patterns.extend((0..20_000).map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }));
        patterns.extend([1e16, 1e-5, 1e21, 0.1, 65.0].map(f64::to_bits));
        let special = |finite: bool, nan: bool, positive: bool| match (finite, nan, positive) {
            (true, ..) => None,
            (false, true, _) => Some(b"\"NaN\"".to_vec()),
            (false, false, true) => Some(b"\"Infinity\"".to_vec()),
            (false, false, false) => Some(b"\"-Infinity\"".to_vec()),
        };
        for bits in patterns {
            let double = f64::from_bits(bits);
            let mut out = Vec::new();
            write_float(&mut out, double);
            let expected = special(double.is_finite(), double.is_nan(), double > 0.0)
                .unwrap_or_else(|| serde_json::to_vec(&double).unwrap());
            assert_eq!(out, expected, "{double:?}");
            let single = f32::from_bits(bits as u32);
            out.clear();
            write_float(&mut out, single);
            let expected = special(single.is_finite(), single.is_nan(), single > 0.0)
                .unwrap_or_else(|| serde_json::to_vec(&single).unwrap());
            assert_eq!(out, expected, "{single:?}");
            if single.is_finite() {
                let back: f32 = std::str::from_utf8(&out).unwrap().parse().unwrap();
                assert_eq!(back.to_bits(), single.to_bits());
            }
        }
    }

    #[test]
    fn hex_numbers_and_uuids_as_format_writes_them() {
        let mut v = 1u64;
        for shift in 0..64 {
            for x in [0, 1u64 << shift, (1u64 << shift) - 1, v, u64::MAX >> shift] {
                let mut out = Vec::new();
                write_hash_x(&mut out, x);
                assert_eq!(out, format!("\"{x:#x}\"").into_bytes());
            }
            v = v.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        }
        let b: [u8; 16] = std::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ 0xa5);
        let mut out = Vec::new();
        write_uuid(&mut out, &b);
        let hex: String = b.iter().map(|b| format!("{b:02x}")).collect();
        let expected = format!(
            "\"{}-{}-{}-{}-{}\"",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        );
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    #[test]
    fn ipv6_as_std_displays_it() {
        // Every pattern of zero and non-zero segments (non-zero ones varied), and the
        // IPv4-mapped and IPv4-compatible forms.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for pattern in 0u32..256 {
            for round in 0..4 {
                let mut b = [0u8; 16];
                for (i, pair) in b.chunks_exact_mut(2).enumerate() {
                    if pattern >> i & 1 == 1 {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        let v = match round {
                            0 => seed as u16 | 1,
                            1 => (seed as u16 & 0xf) | 1,
                            2 => 0xffff,
                            _ => (seed as u16 & 0xff) | 0x100,
                        };
                        pair.copy_from_slice(&v.to_be_bytes());
                    }
                }
                let mut mapped = b;
                mapped[..10].fill(0);
                mapped[10..12].fill(0xff);
                for b in [b, mapped] {
                    let mut out = Vec::new();
                    write_ipv6(&mut out, &b);
                    let expected = format!("\"{}\"", std::net::Ipv6Addr::from(b));
                    assert_eq!(String::from_utf8(out).unwrap(), expected);
                }
            }
        }
    }
}
