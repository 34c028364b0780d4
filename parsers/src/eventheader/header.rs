//! The 8-byte EventHeader and the extension blocks after it.
//!
//! ```text
//! u8 flags; u8 version; u16 id; u16 tag; u8 opcode; u8 level;      (the header)
//! [u16 size; u16 kind; u8 data[size];]...                          (when flags & 0x04)
//! payload...
//! ```
//! Multi-byte values are in the event's byte order (flags bit 0x02 = little-endian).

use std::fmt;

use crate::bytes::{Endian, u16_at};

use super::enums::{
    EXTENSION_ACTIVITY_ID, EXTENSION_CHAIN, EXTENSION_INVALID, EXTENSION_KIND_MASK,
    EXTENSION_METADATA, FLAG_EXTENSION, FLAG_LITTLE_ENDIAN, KNOWN_FLAGS,
};

/// The fixed 8-byte header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Header {
    /// Flags (`FLAG_*` in [`super::enums`]).
    pub flags: u8,
    /// Event version.
    pub version: u8,
    /// Event id (0 = none).
    pub id: u16,
    /// Event tag.
    pub tag: u16,
    /// Opcode ([`super::enums::opcode`]).
    pub opcode: u8,
    /// Level ([`super::enums::level`]).
    pub level: u8,
}

impl Header {
    /// The byte order of the event's multi-byte values (the header's one flag bit,
    /// read here).
    pub fn endian(&self) -> Endian {
        Endian::from_big(self.flags & FLAG_LITTLE_ENDIAN == 0)
    }
}

/// An event split into header, extensions and payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventParts<'a> {
    /// The header.
    pub header: Header,
    /// The metadata block's data (event name and field records), if present.
    pub metadata: Option<&'a [u8]>,
    /// The activity id, if an activity block is present.
    pub activity: Option<&'a [u8; 16]>,
    /// The related activity id, if the activity block has 32 bytes.
    pub related_activity: Option<&'a [u8; 16]>,
    /// Where the payload starts in the event data.
    pub payload_start: usize,
    /// The payload: everything after the header and extension blocks.
    pub payload: &'a [u8],
}

/// Why the header or an extension block could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderError {
    /// Fewer than 8 bytes.
    Truncated {
        /// The event data's length.
        len: usize,
    },
    /// Flags other than pointer64, little-endian and extension.
    UnsupportedFlags(u8),
    /// An extension block's 4-byte head or its data runs past the end.
    ExtensionTruncated {
        /// Where the block starts in the event data.
        at: usize,
    },
    /// An extension block of kind 0.
    InvalidExtensionKind {
        /// Where the block starts in the event data.
        at: usize,
    },
    /// A second metadata block.
    DuplicateMetadata {
        /// Where the block starts in the event data.
        at: usize,
    },
    /// A second activity block.
    DuplicateActivity {
        /// Where the block starts in the event data.
        at: usize,
    },
    /// An activity block whose size is neither 16 nor 32.
    BadActivitySize {
        /// Where the block starts in the event data.
        at: usize,
        /// Its size.
        size: u16,
    },
}

impl HeaderError {
    /// Whether this concerns the 8-byte header (else an extension block).
    pub fn is_header(&self) -> bool {
        matches!(
            self,
            HeaderError::Truncated { .. } | HeaderError::UnsupportedFlags(_)
        )
    }
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            HeaderError::Truncated { len } => {
                write!(f, "event has {len} bytes, the header needs 8")
            }
            HeaderError::UnsupportedFlags(flags) => {
                write!(f, "unsupported header flags {flags:#04x}")
            }
            HeaderError::ExtensionTruncated { at } => {
                write!(
                    f,
                    "extension block at byte {at} runs past the end of the event"
                )
            }
            HeaderError::InvalidExtensionKind { at } => {
                write!(f, "extension block at byte {at} has the invalid kind 0")
            }
            HeaderError::DuplicateMetadata { at } => {
                write!(f, "second metadata extension block at byte {at}")
            }
            HeaderError::DuplicateActivity { at } => {
                write!(f, "second activity id extension block at byte {at}")
            }
            HeaderError::BadActivitySize { at, size } => write!(
                f,
                "activity id extension block at byte {at} has {size} bytes, not 16 or 32"
            ),
        }
    }
}

/// A `u16` at `at` in the given byte order.
#[inline]
pub(crate) fn read_u16(bytes: &[u8], at: usize, endian: Endian) -> Option<u16> {
    u16_at(bytes, at, endian)
}

/// The fixed header from its 8 bytes.
#[inline(always)]
fn read_header(head: &[u8; 8]) -> Header {
    let flags = head[0];
    let endian = Endian::from_big(flags & FLAG_LITTLE_ENDIAN == 0);
    // Called with the constants 2, 4 and 6: i + 1 < 8.
    #[allow(clippy::arithmetic_side_effects)]
    let u16_at = |i: usize| {
        let b = [head[i], head[i + 1]];
        if endian.is_big() {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        }
    };
    Header {
        flags,
        version: head[1],
        id: u16_at(2),
        tag: u16_at(4),
        opcode: head[6],
        level: head[7],
    }
}

/// [`parse_event`] for the usual layout, one metadata block and no other (what the
/// producers write without activity ids): `None` for any other layout or a problem,
/// which the general walk then reads (or reports). In line, without the loop.
#[inline(always)]
fn parse_usual(data: &[u8]) -> Option<EventParts<'_>> {
    let (head, rest) = data.split_first_chunk::<8>()?;
    let header = read_header(head);
    if header.flags & !KNOWN_FLAGS != 0 || header.flags & FLAG_EXTENSION == 0 {
        return None;
    }
    let (block, rest) = rest.split_first_chunk::<4>()?;
    let endian = header.endian();
    let (size, kind) = (read_u16(block, 0, endian)?, read_u16(block, 2, endian)?);
    if kind != EXTENSION_METADATA {
        return None;
    }
    let (metadata, payload) = rest.split_at_checked(usize::from(size))?;
    Some(EventParts {
        header,
        metadata: Some(metadata),
        activity: None,
        related_activity: None,
        payload_start: 12 + usize::from(size),
        payload,
    })
}

/// Split `data` (the event from its header on) into header, extensions and payload.
/// Unknown extension kinds are skipped.
#[inline]
pub fn parse_event(data: &[u8]) -> Result<EventParts<'_>, HeaderError> {
    match parse_usual(data) {
        Some(parts) => Ok(parts),
        None => parse_any(data),
    }
}

/// [`parse_event`] for any layout: the walk over the extension blocks.
#[inline(never)]
fn parse_any(data: &[u8]) -> Result<EventParts<'_>, HeaderError> {
    let Some(head) = data.first_chunk::<8>() else {
        return Err(HeaderError::Truncated { len: data.len() });
    };
    let header = read_header(head);
    let flags = header.flags;
    let endian = header.endian();
    if flags & !KNOWN_FLAGS != 0 {
        return Err(HeaderError::UnsupportedFlags(flags));
    }
    let mut parts = EventParts {
        header,
        metadata: None,
        activity: None,
        related_activity: None,
        payload_start: 8,
        payload: data.get(8..).unwrap_or_default(),
    };
    if flags & FLAG_EXTENSION == 0 {
        return Ok(parts);
    }
    let mut pos = 8usize;
    loop {
        let at = pos;
        let (Some(size), Some(kind)) = (
            read_u16(data, pos, endian),
            read_u16(data, pos.saturating_add(2), endian),
        ) else {
            return Err(HeaderError::ExtensionTruncated { at });
        };
        // pos is inside `data` (or just past it): the sums fit, and a block past the end
        // is not got.
        let start = pos.saturating_add(4);
        let end = start.saturating_add(usize::from(size));
        let Some(block) = data.get(start..end) else {
            return Err(HeaderError::ExtensionTruncated { at });
        };
        match kind & EXTENSION_KIND_MASK {
            EXTENSION_INVALID => return Err(HeaderError::InvalidExtensionKind { at }),
            EXTENSION_METADATA => {
                if parts.metadata.is_some() {
                    return Err(HeaderError::DuplicateMetadata { at });
                }
                parts.metadata = Some(block);
            }
            EXTENSION_ACTIVITY_ID => {
                if parts.activity.is_some() {
                    return Err(HeaderError::DuplicateActivity { at });
                }
                let (first, second) = match block.len() {
                    16 | 32 => block.split_at(16),
                    _ => return Err(HeaderError::BadActivitySize { at, size }),
                };
                parts.activity = first.first_chunk::<16>();
                parts.related_activity = second.first_chunk::<16>();
            }
            _ => {}
        }
        pos = end;
        if kind & EXTENSION_CHAIN == 0 {
            break;
        }
    }
    parts.payload_start = pos;
    parts.payload = data.get(pos..).unwrap_or_default();
    Ok(parts)
}

// Tests compute with the values they pick.
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    fn ext(out: &mut Vec<u8>, kind: u16, data: &[u8], endian: Endian) {
        let (s, k) = (data.len() as u16, kind);
        if endian.is_big() {
            out.extend_from_slice(&s.to_be_bytes());
            out.extend_from_slice(&k.to_be_bytes());
        } else {
            out.extend_from_slice(&s.to_le_bytes());
            out.extend_from_slice(&k.to_le_bytes());
        }
        out.extend_from_slice(data);
    }

    #[test]
    fn header_fields_both_orders() {
        let le = [0x03, 2, 5, 0, 7, 0, 1, 4];
        let p = parse_event(&le).unwrap();
        assert_eq!(
            p.header,
            Header {
                flags: 3,
                version: 2,
                id: 5,
                tag: 7,
                opcode: 1,
                level: 4
            }
        );
        assert_eq!(p.header.endian(), Endian::Little);
        assert_eq!(p.metadata, None);
        assert_eq!(p.payload_start, 8);
        let be = [0x01, 2, 0, 5, 0, 7, 1, 4, 9];
        let p = parse_event(&be).unwrap();
        assert_eq!((p.header.id, p.header.tag), (5, 7));
        assert_eq!(p.header.endian(), Endian::Big);
        assert_eq!(p.payload, &[9]);
    }

    #[test]
    fn extensions() {
        for endian in [Endian::Little, Endian::Big] {
            let mut d = vec![
                if endian.is_big() { 0x05 } else { 0x07 },
                0,
                0,
                0,
                0,
                0,
                0,
                4,
            ];
            ext(&mut d, 0x8000 | 7, b"xyz", endian); // unknown, skipped
            ext(&mut d, 0x8000 | 2, &[0xaa; 32], endian);
            ext(&mut d, 1, b"ev\0", endian);
            d.extend_from_slice(b"payload");
            let p = parse_event(&d).unwrap();
            assert_eq!(p.metadata, Some(&b"ev\0"[..]));
            assert_eq!(p.activity, Some(&[0xaa; 16]));
            assert_eq!(p.related_activity, Some(&[0xaa; 16]));
            assert_eq!(p.payload, b"payload");
            assert_eq!(p.payload_start, d.len() - 7);
        }
    }

    #[test]
    fn errors() {
        assert_eq!(
            parse_event(&[7, 0, 0]),
            Err(HeaderError::Truncated { len: 3 })
        );
        assert_eq!(
            parse_event(&[0x0f, 0, 0, 0, 0, 0, 0, 4]),
            Err(HeaderError::UnsupportedFlags(0x0f))
        );
        let head = [7u8, 0, 0, 0, 0, 0, 0, 4];
        let mut d = head.to_vec();
        d.extend_from_slice(&[3, 0]);
        assert_eq!(
            parse_event(&d),
            Err(HeaderError::ExtensionTruncated { at: 8 })
        );
        let mut d = head.to_vec();
        ext(&mut d, 1, b"ab", Endian::Little);
        d.truncate(d.len() - 1);
        assert_eq!(
            parse_event(&d),
            Err(HeaderError::ExtensionTruncated { at: 8 })
        );
        let mut d = head.to_vec();
        ext(&mut d, 0x8001, b"a\0", Endian::Little);
        ext(&mut d, 1, b"b\0", Endian::Little);
        assert_eq!(
            parse_event(&d),
            Err(HeaderError::DuplicateMetadata { at: 14 })
        );
        let mut d = head.to_vec();
        ext(&mut d, 0x8002, &[0; 16], Endian::Little);
        ext(&mut d, 2, &[0; 16], Endian::Little);
        assert_eq!(
            parse_event(&d),
            Err(HeaderError::DuplicateActivity { at: 28 })
        );
        let mut d = head.to_vec();
        ext(&mut d, 2, &[0; 8], Endian::Little);
        assert_eq!(
            parse_event(&d),
            Err(HeaderError::BadActivitySize { at: 8, size: 8 })
        );
        let mut d = head.to_vec();
        ext(&mut d, 0, &[], Endian::Little);
        assert_eq!(
            parse_event(&d),
            Err(HeaderError::InvalidExtensionKind { at: 8 })
        );
        for e in [
            HeaderError::Truncated { len: 1 },
            HeaderError::UnsupportedFlags(9),
        ] {
            assert!(e.is_header() && !e.to_string().is_empty());
        }
    }
}
