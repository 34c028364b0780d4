//! The tracing data perf embeds (the `HEADER_TRACING_DATA` feature, or the bytes after a
//! `PERF_RECORD_HEADER_TRACING_DATA` record in pipe mode): the trace-cmd-style block that
//! tools/perf/util/trace-event-info.c writes and trace-event-read.c reads.
//!
//! ```text
//! "\x17\x08\x44tracing"  version (NUL-terminated, "0.5" / "0.6")
//! u8 big_endian  u8 long_size  u32 page_size           ← numbers from here on in that order
//! "header_page\0"  u64 size  text                      ← ring-buffer page layout
//! "header_event\0" u64 size  text
//! u32 count  { u64 size  text }*                        ← ftrace's own event formats
//! u32 systems { system NUL  u32 count { u64 size text }* }*   ← the recorded events' formats
//! u32 size kallsyms   u32 size printk formats
//! u64 size saved cmdlines                               ← version ≥ 0.6 only
//! ```
//!
//! Event format texts are parsed with [`parse_format_for`] and the traced machine's word
//! size (from `long_size`), so `unsigned long args[6]` is 6 elements of 4 bytes on a
//! 32-bit kernel.

use super::PerfDataError;
use super::cursor::Cursor;
use crate::bytes::ShownBytes;
use crate::bytes::{Endian, text};
use crate::field_type::WordSize;
use crate::format_file::{FormatError, parse_format_for};
use crate::schema::EventFormat;

/// The 10 bytes the block starts with.
pub const TRACING_MAGIC: &[u8; 10] = b"\x17\x08\x44tracing";

/// One event format text of the tracing data with the system it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventText {
    /// The tracepoint system (`sched`, `user_events`, …).
    pub system: String,
    /// The format file's text.
    pub text: String,
    /// Absolute offset of the text (for messages).
    pub at: u64,
}

/// A parsed tracing data block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracingData {
    /// The version string (`0.6`).
    pub version: String,
    /// The traced machine is big-endian (its records' byte order).
    pub endian: Endian,
    /// `sizeof(long)` on the traced machine.
    pub long_size: u8,
    /// The traced machine's page size.
    pub page_size: u32,
    /// `events/header_page`.
    pub header_page: String,
    /// `events/header_event`.
    pub header_event: String,
    /// ftrace's own event formats (`ftrace/function`, …).
    pub ftrace: Vec<String>,
    /// The recorded events' format texts.
    pub events: Vec<EventText>,
    /// Bytes of `/proc/kallsyms` embedded (kept as a length only).
    pub kallsyms_len: u32,
    /// `printk_formats`.
    pub printk: String,
    /// `saved_cmdlines` (version 0.6 and later).
    pub saved_cmdlines: Option<String>,
}

/// A format text of the tracing data, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedFormat {
    /// The system the format belongs to.
    pub system: String,
    /// The format, or why its text did not parse.
    pub format: Result<EventFormat, FormatError>,
    /// Absolute offset of the text.
    pub at: u64,
}

impl TracingData {
    /// Parse the block at the start of `bytes` (at absolute offset `base`); returns it with
    /// the number of bytes it took.
    pub fn parse(bytes: &[u8], base: u64) -> Result<(Self, usize), PerfDataError> {
        let mut c = Cursor::new(bytes, base, Endian::Little);
        let magic = c.take("tracing data magic", TRACING_MAGIC.len())?;
        if magic != TRACING_MAGIC {
            return Err(PerfDataError::BadTracingData {
                at: base,
                why: format!(
                    "magic {}, expected {}",
                    ShownBytes(magic),
                    ShownBytes(TRACING_MAGIC)
                ),
            });
        }
        let version = text(c.c_string("tracing data version")?);
        let endian_at = c.at();
        let endian = match c.u8("tracing data endianness")? {
            0 => Endian::Little,
            1 => Endian::Big,
            other => {
                return Err(PerfDataError::BadTracingData {
                    at: endian_at,
                    why: format!("endianness byte {other} (expected 0 or 1)"),
                });
            }
        };
        let long_at = c.at();
        let long_size = c.u8("tracing data long size")?;
        if long_size != 4 && long_size != 8 {
            return Err(PerfDataError::BadTracingData {
                at: long_at,
                why: format!("long size {long_size} (expected 4 or 8)"),
            });
        }
        let mut c = Cursor::new(c.rest(), c.at(), endian);
        let page_size = c.u32("tracing data page size")?;
        let header_page = named_text(&mut c, b"header_page\0")?;
        let header_event = named_text(&mut c, b"header_event\0")?;
        let ftrace_count = c.u32("ftrace format count")?;
        let mut ftrace = Vec::new();
        for _ in 0..ftrace_count {
            let size = c.u64("ftrace format size")?;
            ftrace.push(text(c.take_u64("ftrace format", size)?));
        }
        let systems = c.u32("event system count")?;
        let mut events = Vec::new();
        for _ in 0..systems {
            let system = text(c.c_string("event system name")?);
            let count = c.u32("event format count")?;
            for _ in 0..count {
                let size = c.u64("event format size")?;
                let at = c.at();
                let text = text(c.take_u64("event format", size)?);
                events.push(EventText {
                    system: system.clone(),
                    text,
                    at,
                });
            }
        }
        let kallsyms_len = c.u32("kallsyms size")?;
        c.take_u64("kallsyms", u64::from(kallsyms_len))?;
        let printk_len = c.u32("printk formats size")?;
        let printk = text(c.take_u64("printk formats", u64::from(printk_len))?);
        let saved_cmdlines = if version_at_least_0_6(&version) {
            let size = c.u64("saved cmdlines size")?;
            Some(text(c.take_u64("saved cmdlines", size)?))
        } else {
            None
        };
        // The cursor started at `base`.
        let used = c.at().saturating_sub(base) as usize;
        Ok((
            TracingData {
                version,
                endian,
                long_size,
                page_size,
                header_page,
                header_event,
                ftrace,
                events,
                kallsyms_len,
                printk,
                saved_cmdlines,
            },
            used,
        ))
    }

    /// The traced machine's word size.
    pub fn word_size(&self) -> WordSize {
        if self.long_size == 4 {
            WordSize::Four
        } else {
            WordSize::Eight
        }
    }

    /// Every event format text parsed with the traced machine's word size.
    pub fn formats(&self) -> Vec<ParsedFormat> {
        let word = self.word_size();
        self.events
            .iter()
            .map(|e| ParsedFormat {
                system: e.system.clone(),
                format: parse_format_for(&e.text, word),
                at: e.at,
            })
            .collect()
    }
}

/// `0.6` or later (perf writes `saved_cmdlines` from 0.6 on; trace-event-read.c compares
/// `atof(version) >= 0.6`).
fn version_at_least_0_6(version: &str) -> bool {
    let number: String = version
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    number.parse::<f64>().is_ok_and(|v| v >= 0.6)
}

/// `name` (with its NUL), `u64 size`, then `size` bytes of text.
fn named_text(c: &mut Cursor<'_>, name: &'static [u8]) -> Result<String, PerfDataError> {
    let at = c.at();
    let found = c.take("tracing data section name", name.len())?;
    if found != name {
        return Err(PerfDataError::BadTracingData {
            at,
            why: format!("expected {}, found {}", ShownBytes(name), ShownBytes(found)),
        });
    }
    let size = c.u64("tracing data section size")?;
    Ok(text(c.take_u64("tracing data section", size)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert!(version_at_least_0_6("0.6"));
        assert!(version_at_least_0_6("1.0"));
        assert!(!version_at_least_0_6("0.5"));
        assert!(!version_at_least_0_6("x"));
    }
}
