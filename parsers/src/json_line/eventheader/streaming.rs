//! The streaming walk: the EventHeader part of a line written from the
//! [`Enumerator`]'s items, for every event the compiled plans do not take (and the
//! reference the plans must match byte for byte).

use super::Scratch;
use super::header::*;
use super::keys::*;
use super::values::*;
use crate::bytes::Endian;
use crate::eventheader::enumerator::{Enumerator, Item};
use crate::eventheader::header::parse_event;
use crate::eventheader::tracepoint_name::TracepointName;
use crate::json::{write_hex, write_text_contents};

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
    let endian = header.endian();
    let enumerator = match parts
        .metadata
        .map(|m| Enumerator::new(m, parts.payload, endian))
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
    write_fields(out, scratch, &mut enumerator, endian);
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
        // `start` is a place in `out`: the sum fits.
        if out.len() == start.saturating_add(1) {
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

/// `,"fields":{…}` from the walk, closing what is open when it stops early (the path
/// where it stopped goes to `scratch.err_path`).
pub(super) fn write_fields(
    out: &mut Vec<u8>,
    s: &mut Keys,
    e: &mut Enumerator<'_>,
    endian: Endian,
) {
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
                write_value(out, &field, bytes, endian);
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
