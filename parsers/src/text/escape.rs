//! What a traced program wrote, made safe to print on a terminal, and the colors.
//!
//! A string is printed bare when every character is a letter, a digit or one of
//! `_-.:/@+`; otherwise in double quotes with Rust's escapes (`\n`, `\t`, `\"`, `\\`,
//! `\u{1b}` for ESC and every other control or invisible formatting character, such as
//! the bidi overrides): nothing in it can end the line, move the cursor, color the
//! terminal or pass for another key.

use super::ordered::Json;

/// Whether `s` can be printed without quotes.
fn bare(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_alphanumeric() && !c.is_control() || "_-.:/@+".contains(c))
}

/// `s`, quoted and escaped unless [`bare`].
pub(super) fn write_text(out: &mut Vec<u8>, s: &str) {
    if bare(s) && s.chars().all(|c| c.escape_debug().len() == 1) {
        out.extend_from_slice(s.as_bytes());
        return;
    }
    out.push(b'"');
    let mut buf = [0u8; 4];
    for c in s.chars() {
        if c == '\'' {
            out.push(b'\'');
        } else {
            for e in c.escape_debug() {
                out.extend_from_slice(e.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// A sentence (a notice's message) unquoted, each control or invisible formatting
/// character escaped as in [`write_text`] (quotes and backslashes stay as they are:
/// nothing else can pass for the end of the line).
pub(super) fn write_sentence(out: &mut Vec<u8>, s: &str) {
    let mut buf = [0u8; 4];
    for c in s.chars() {
        if matches!(c, '\'' | '"' | '\\') || c.escape_debug().len() == 1 {
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        } else {
            for e in c.escape_debug() {
                out.extend_from_slice(e.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
}

/// `v` as text: strings by [`write_text`], arrays `[a,b]`, objects `{k=v,k2=v2}`.
pub(super) fn write_value(out: &mut Vec<u8>, v: &Json) {
    use std::io::Write;
    match v {
        Json::Null => out.extend_from_slice(b"null"),
        Json::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Json::Unsigned(n) => {
            let _ = write!(out, "{n}");
        }
        Json::Signed(n) => {
            let _ = write!(out, "{n}");
        }
        Json::Float(f) => {
            let _ = write!(out, "{f}");
        }
        Json::Str(s) => write_text(out, s),
        Json::Arr(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Json::Obj(keys) => {
            out.push(b'{');
            for (i, (k, item)) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_text(out, k);
                out.push(b'=');
                write_value(out, item);
            }
            out.push(b'}');
        }
    }
}

/// ANSI colors, or none.
#[derive(Debug, Clone, Copy)]
pub(super) struct Paint {
    /// Colors on.
    pub(super) color: bool,
}

impl Paint {
    /// `write` between the SGR code `sgr` and a reset, or bare without colors.
    fn with(self, sgr: &str, out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
        if self.color {
            out.extend_from_slice(b"\x1b[");
            out.extend_from_slice(sgr.as_bytes());
            out.push(b'm');
            write(out);
            out.extend_from_slice(b"\x1b[0m");
        } else {
            write(out);
        }
    }

    /// Times and the day's line: dim.
    pub(super) fn dim(self, out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
        self.with("2", out, write)
    }

    /// The event's name: bold cyan.
    pub(super) fn event(self, out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
        self.with("1;36", out, write)
    }

    /// A field's `name=`: dim, so that values stand out.
    pub(super) fn key(self, out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
        self.with("2", out, write)
    }

    /// Notices: yellow.
    pub(super) fn notice(self, out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
        self.with("33", out, write)
    }

    /// Losses: bold red.
    pub(super) fn lost(self, out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
        self.with("1;31", out, write)
    }
}
