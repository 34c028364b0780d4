//! The metadata extension block: `event_name\0` then one record per field:
//!
//! ```text
//! char name[];  u8 encoding;  [u8 format;]  [u16 tag;]  [u16 array_length;]
//! ```
//! The format byte is present when encoding & 0x80, the tag when format & 0x80, the
//! array length for constant-length arrays (encoding & 0x20 without 0x40). For a struct
//! the format's low 7 bits count its fields (1..127), whose records follow it directly.
//!
//! The event name may carry attributes: `name;attr=value;attr2=value2`, where `;;`
//! stands for a literal `;` (in the name and in values).

use crate::bytes::Endian;
use std::fmt;

use super::enums::{
    ENCODING_CARRAY, ENCODING_CHAIN, ENCODING_VARRAY, Encoding, FORMAT_CHAIN, FORMAT_VALUE_MASK,
    Format,
};
use super::header::read_u16;

/// Split an event name (without its NUL) into the name proper (still escaped: `;;` for
/// `;`) and the attribute text after it (starting at the first `;` that is not part of
/// a `;;` pair, or empty).
pub fn split_event_name(raw: &[u8]) -> (&[u8], &[u8]) {
    let end = unescaped_semicolon(raw, 0);
    raw.split_at(end)
}

/// The index of the first `;` at or after `from` that is not part of a `;;` pair, or
/// `raw.len()`.
fn unescaped_semicolon(raw: &[u8], from: usize) -> usize {
    let mut i = from;
    while let Some(&b) = raw.get(i) {
        if b == b';' {
            // i < raw.len() here: the sums below fit.
            if raw.get(i.saturating_add(1)) == Some(&b';') {
                i = i.saturating_add(2);
                continue;
            }
            return i;
        }
        i = i.saturating_add(1);
    }
    raw.len()
}

/// The `;attr=value` attributes of an event name's attribute text (from
/// [`split_event_name`]), each as (name, escaped value); an attribute without `=` has an
/// empty value.
pub fn attributes(mut text: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    std::iter::from_fn(move || {
        let rest = text.strip_prefix(b";")?;
        let end = unescaped_semicolon(rest, 0);
        let (attr, next) = rest.split_at(end);
        text = next;
        Some(match memchr::memchr(b'=', attr) {
            // eq < attr.len(): the sum fits.
            Some(eq) => (&attr[..eq], &attr[eq.saturating_add(1)..]),
            None => (attr, &[][..]),
        })
    })
}

/// The pieces of escaped text with each `;;` turned into `;`: borrowed slices that,
/// concatenated, are the unescaped text.
pub fn unescape(mut text: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        if text.is_empty() {
            return None;
        }
        match memchr::memmem::find(text, b";;") {
            Some(at) => {
                // `;;` is at `at`: at + 2 <= text.len().
                let piece = &text[..at.saturating_add(1)];
                text = &text[at.saturating_add(2)..];
                Some(piece)
            }
            None => {
                let piece = text;
                text = &[];
                Some(piece)
            }
        }
    })
}

/// Whether a field is an array, and which kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrayKind {
    /// A single value (or struct).
    Scalar,
    /// A constant-length array of this many elements (never 0).
    Constant(u16),
    /// A variable-length array: a `u16` count precedes the elements in the payload.
    Variable,
}

/// One field record of the metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldMeta<'a> {
    /// The field name, verbatim (may carry `;attr=value` text).
    pub name: &'a [u8],
    /// The encoding.
    pub encoding: Encoding,
    /// The format byte's low 7 bits (0 without a format byte); for a struct, its field
    /// count.
    pub format_byte: u8,
    /// The field tag (0 without one).
    pub tag: u16,
    /// Scalar or which kind of array.
    pub array: ArrayKind,
    /// Where the record starts in the metadata.
    pub offset: usize,
    /// Where the next record starts in the metadata.
    pub next: usize,
}

impl FieldMeta<'_> {
    /// The format ([`Format::Default`] for unknown values and for structs).
    pub fn format(&self) -> Format {
        if self.encoding == Encoding::Struct {
            Format::Default
        } else {
            Format::from_u8(self.format_byte)
        }
    }

    /// For a struct, the number of fields it groups (0 for other encodings).
    pub fn struct_field_count(&self) -> u8 {
        if self.encoding == Encoding::Struct {
            self.format_byte
        } else {
            0
        }
    }
}

/// Why a field record could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaError {
    /// The name has no NUL, or the record ends before its encoding, format, tag or
    /// array length.
    Truncated {
        /// Where the record starts in the metadata.
        offset: usize,
    },
    /// Encoding value 0 or 14..31.
    BadEncoding {
        /// Where the record starts.
        offset: usize,
        /// The encoding byte.
        byte: u8,
    },
    /// Both array flags set (reserved).
    BadArrayFlags {
        /// Where the record starts.
        offset: usize,
    },
    /// A constant-length array of length 0.
    ZeroLengthArray {
        /// Where the record starts.
        offset: usize,
    },
    /// A (non-array) struct with no fields.
    EmptyStruct {
        /// Where the record starts.
        offset: usize,
    },
}

impl fmt::Display for MetaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MetaError::Truncated { offset } => {
                write!(f, "field record at metadata byte {offset} is truncated")
            }
            MetaError::BadEncoding { offset, byte } => write!(
                f,
                "field record at metadata byte {offset} has the unknown encoding {byte:#04x}"
            ),
            MetaError::BadArrayFlags { offset } => write!(
                f,
                "field record at metadata byte {offset} has both array flags set"
            ),
            MetaError::ZeroLengthArray { offset } => write!(
                f,
                "field record at metadata byte {offset} is a constant-length array of length 0"
            ),
            MetaError::EmptyStruct { offset } => write!(
                f,
                "field record at metadata byte {offset} is a struct with no fields"
            ),
        }
    }
}

/// Read the field record at `offset` of `meta` (values in byte order `endian`).
pub fn read_field(meta: &[u8], offset: usize, endian: Endian) -> Result<FieldMeta<'_>, MetaError> {
    let truncated = MetaError::Truncated { offset };
    let rest = meta.get(offset..).ok_or(truncated)?;
    let name_len = memchr::memchr(0, rest).ok_or(truncated)?;
    let name = &rest[..name_len];
    // The NUL is inside `meta`: this and the steps below stay near its length.
    let mut pos = offset.saturating_add(name_len).saturating_add(1);
    let byte = *meta.get(pos).ok_or(truncated)?;
    pos = pos.saturating_add(1);
    let encoding = Encoding::from_u8(byte).ok_or(MetaError::BadEncoding { offset, byte })?;
    let (mut format_byte, mut tag) = (0, 0);
    if byte & ENCODING_CHAIN != 0 {
        let f = *meta.get(pos).ok_or(truncated)?;
        pos = pos.saturating_add(1);
        format_byte = f & FORMAT_VALUE_MASK;
        if f & FORMAT_CHAIN != 0 {
            tag = read_u16(meta, pos, endian).ok_or(truncated)?;
            pos = pos.saturating_add(2);
        }
    }
    let array = match byte & (ENCODING_CARRAY | ENCODING_VARRAY) {
        0 => ArrayKind::Scalar,
        ENCODING_VARRAY => ArrayKind::Variable,
        ENCODING_CARRAY => {
            let n = read_u16(meta, pos, endian).ok_or(truncated)?;
            pos = pos.saturating_add(2);
            if n == 0 {
                return Err(MetaError::ZeroLengthArray { offset });
            }
            ArrayKind::Constant(n)
        }
        _ => return Err(MetaError::BadArrayFlags { offset }),
    };
    // A struct array may have no fields (the reference decoder accepts it); a single
    // struct may not.
    if encoding == Encoding::Struct && format_byte == 0 && array == ArrayKind::Scalar {
        return Err(MetaError::EmptyStruct { offset });
    }
    Ok(FieldMeta {
        name,
        encoding,
        format_byte,
        tag,
        array,
        offset,
        next: pos,
    })
}

// Tests compute with the values they pick.
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    #[test]
    fn event_name_and_attributes() {
        let (name, attrs) = split_event_name(b"My;;Event;a=1;b=x;;y;;;c");
        assert_eq!(name, b"My;;Event");
        assert_eq!(unescape(name).collect::<Vec<_>>().concat(), b"My;Event");
        let got: Vec<_> = attributes(attrs).collect();
        assert_eq!(
            got,
            vec![
                (&b"a"[..], &b"1"[..]),
                (&b"b"[..], &b"x;;y;;"[..]),
                (&b"c"[..], &b""[..])
            ]
        );
        assert_eq!(unescape(b"x;;y;;").collect::<Vec<_>>().concat(), b"x;y;");
        assert_eq!(split_event_name(b"plain"), (&b"plain"[..], &b""[..]));
        assert_eq!(attributes(b"").count(), 0);
        assert_eq!(
            attributes(b";=v;k=").collect::<Vec<_>>(),
            vec![(&b""[..], &b"v"[..]), (&b"k"[..], &b""[..])]
        );
    }

    #[test]
    fn field_records() {
        for endian in [Endian::Little, Endian::Big] {
            let tag = if endian.is_big() {
                [0x12, 0x34]
            } else {
                [0x34, 0x12]
            };
            let len = if endian.is_big() { [0, 3] } else { [3, 0] };
            let mut m = b"ev\0a\0\x02b\0\x85\x88".to_vec();
            m.extend_from_slice(&tag);
            m.extend_from_slice(b"c\0\xa6\x0f");
            m.extend_from_slice(&len);
            m.extend_from_slice(b"s\0\xc1\x02");
            let a = read_field(&m, 3, endian).unwrap();
            assert_eq!(
                (a.name, a.encoding, a.format_byte, a.tag, a.array, a.next),
                (&b"a"[..], Encoding::Value8, 0, 0, ArrayKind::Scalar, 6)
            );
            let b = read_field(&m, a.next, endian).unwrap();
            assert_eq!(
                (b.encoding, b.format(), b.tag),
                (Encoding::Value64, Format::Float, 0x1234)
            );
            let c = read_field(&m, b.next, endian).unwrap();
            assert_eq!(
                (c.encoding, c.format(), c.array),
                (Encoding::Value128, Format::Uuid, ArrayKind::Constant(3))
            );
            let s = read_field(&m, c.next, endian).unwrap();
            assert_eq!(
                (s.encoding, s.struct_field_count(), s.array, s.next),
                (Encoding::Struct, 2, ArrayKind::Variable, m.len())
            );
            assert_eq!(s.format(), Format::Default);
        }
    }

    #[test]
    fn bad_records() {
        let cases: [(&[u8], MetaError); 9] = [
            (b"a", MetaError::Truncated { offset: 0 }),
            (b"a\0", MetaError::Truncated { offset: 0 }),
            (b"a\0\x82", MetaError::Truncated { offset: 0 }),
            (b"a\0\x82\x80\x01", MetaError::Truncated { offset: 0 }),
            (b"a\0\x22\x01", MetaError::Truncated { offset: 0 }),
            (b"a\0\x00", MetaError::BadEncoding { offset: 0, byte: 0 }),
            (
                b"a\0\x0e",
                MetaError::BadEncoding {
                    offset: 0,
                    byte: 14,
                },
            ),
            (b"a\0\x62", MetaError::BadArrayFlags { offset: 0 }),
            (b"a\0\x22\0\0", MetaError::ZeroLengthArray { offset: 0 }),
        ];
        for (m, e) in cases {
            assert_eq!(read_field(m, 0, Endian::Little), Err(e), "{m:?}");
            assert!(!e.to_string().is_empty());
        }
        assert_eq!(
            read_field(b"s\0\x01", 0, Endian::Little),
            Err(MetaError::EmptyStruct { offset: 0 })
        );
        assert_eq!(
            read_field(b"s\0\x81\x00", 0, Endian::Little),
            Err(MetaError::EmptyStruct { offset: 0 })
        );
        assert_eq!(
            read_field(b"", 5, Endian::Little),
            Err(MetaError::Truncated { offset: 5 })
        );
    }
}
