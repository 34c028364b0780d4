//! The header keys of the EventHeader part of a line: `"provider"`, `"level"`,
//! `"keyword"`, `"group"`, the header's `"id"`, `"version"`, `"tag"`, `"opcode"` and the
//! activity ids, and the messages of `"errors"`.

use super::values::{write_hash_x, write_uuid};
use crate::eventheader::header::EventParts;
use crate::eventheader::tracepoint_name::TracepointName;
use crate::json::{write_int, write_str};

/// `,"provider":…`.
pub(super) fn write_provider(out: &mut Vec<u8>, tp: &TracepointName<'_>) {
    out.extend_from_slice(b",\"provider\":");
    write_str(out, tp.provider);
}

/// `,"level":…,"keyword":"0x…"` and `,"group":…` when set.
pub(super) fn write_level_keyword(out: &mut Vec<u8>, tp: &TracepointName<'_>, level: u8) {
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
pub(super) fn write_header_keys(out: &mut Vec<u8>, parts: &EventParts<'_>) {
    let h = &parts.header;
    let set = u32::from(h.opcode) | u32::from(h.id) | u32::from(h.version) | u32::from(h.tag);
    // The usual event has none of them: one test in line instead of five and a call.
    if set != 0 || parts.activity.is_some() {
        write_set_header_keys(out, parts);
    }
}

/// [`write_header_keys`] when some are set.
#[inline(never)]
pub(super) fn write_set_header_keys(out: &mut Vec<u8>, parts: &EventParts<'_>) {
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
pub(super) fn write_level_error(out: &mut Vec<u8>, tp: &TracepointName<'_>, level: u8, more: bool) {
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
pub(super) fn write_message(out: &mut Vec<u8>, message: std::fmt::Arguments<'_>) {
    out.push(b'"');
    let _ = std::fmt::Write::write_fmt(&mut crate::json::Escaped(out), message);
    out.push(b'"');
}
