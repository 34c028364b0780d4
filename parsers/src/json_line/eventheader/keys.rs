//! Key bookkeeping of the EventHeader part of a line: duplicate keys are renamed
//! (`name#2`, `name#3`, … skipping suffixes already taken) by comparing each new key's
//! JSON text with the keys already written in the same object, whose ranges in the output
//! buffer a [`Keys`] keeps (its vectors keep their capacity, so nothing is allocated per
//! record once they have grown; they are bounded by
//! [`MAX_FIELDS`](crate::eventheader::MAX_FIELDS) and the nesting limit for fields). The
//! streaming walk and the compiled plans both go through these functions.

use super::values::write_escaped_text;
use crate::eventheader::metadata::{FieldMeta, attributes, split_event_name};
use crate::json::{unique_key, write_int, write_text};

/// The ranges of the keys written so far, per open object (reusable buffers).
#[derive(Debug, Default, Clone)]
pub struct Keys {
    /// Ranges in the output of the keys of the open objects (and of the object being
    /// written at the end: attributes, tags, errors).
    pub(super) keys: Vec<(usize, usize)>,
    /// The open objects and arrays of `fields`.
    pub(super) open: Vec<Open>,
    /// Tagged fields: (tag, first path entry in `paths`, path length).
    pub(super) tags: Vec<(u16, usize, usize)>,
    /// Key ranges making up the tagged fields' paths.
    pub(super) paths: Vec<(usize, usize)>,
    /// Key ranges of the path where decoding stopped.
    pub(super) err_path: Vec<(usize, usize)>,
}

impl Keys {
    /// Forget every key (a new line).
    pub(super) fn clear(&mut self) {
        self.keys.clear();
        self.open.clear();
        self.tags.clear();
        self.paths.clear();
        self.err_path.clear();
    }
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

/// Copy the text of the key `out[a..b]` (a JSON string) without its quotes.
pub(super) fn copy_key_text(out: &mut Vec<u8>, a: usize, b: usize) {
    let (from, to) = (a.saturating_add(1), b.saturating_sub(1));
    if from <= to && to <= out.len() {
        out.extend_from_within(from..to);
    }
}

/// The key just written at `out[start..]` (a JSON string), made unique among `keys`
/// ([`unique_key`], the one rule); returns its range.
pub(super) fn dedupe(out: &mut Vec<u8>, keys: &[(usize, usize)], start: usize) -> (usize, usize) {
    unique_key(out, keys, |k| k, start, true)
}

/// Start a member of the innermost open container: the comma, and for objects the
/// (deduplicated) key; returns the key's range.
pub(super) fn member(out: &mut Vec<u8>, s: &mut Keys, name: &[u8]) -> Option<(usize, usize)> {
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
    s: &mut Keys,
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
    // The paths only grew since `start`.
    s.tags
        .push((field.tag, start, s.paths.len().saturating_sub(start)));
}

/// Close the innermost open container.
pub(super) fn close(out: &mut Vec<u8>, s: &mut Keys) {
    if s.open.len() <= 1 {
        return;
    }
    if let Some(open) = s.open.pop() {
        out.push(if open.array { b']' } else { b'}' });
        s.keys.truncate(open.keys_from);
    }
}

/// `,"field_tags":{"path":tag,…}`.
pub(super) fn write_field_tags(out: &mut Vec<u8>, s: &mut Keys) {
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
            // A place in the paths (or none): the sum fits.
            if let Some(&(a, b)) = s.paths.get(from.saturating_add(j)) {
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
