//! The values of EventHeader fields as typed values, for readers that judge a record
//! rather than write it (`--where`): the value its JSON line shows, as a number, bool,
//! string, bytes or null, taken from the field's bytes (no JSON is written and read
//! back). Formats whose JSON is a string of a number (hex integers, times, UUIDs, IP
//! addresses) are that string; byte data (binary fields, hex bytes) is bytes.

use std::borrow::Cow;

use super::values::{
    by_bom, is_value_format, uint_of, write_hash_x, write_ipv6, write_time, write_uuid,
};
use crate::bytes::Endian;
use crate::eventheader::enums::{Encoding, Format};
use crate::eventheader::metadata::FieldMeta;

/// One value of an EventHeader field.
#[derive(Debug, Clone, PartialEq)]
pub enum Typed<'a> {
    /// No value (a length-0 field read as a number).
    Null,
    /// A boolean (format `boolean`, 0 or 1).
    Bool(bool),
    /// A signed integer (format `signed`, `errno`, `pid`, a port).
    Int(i64),
    /// An unsigned integer (the default of ValueN).
    UInt(u64),
    /// A float (format `float`).
    Float(f64),
    /// Text: strings of every width, and the formats the JSON line shows as strings.
    Str(Cow<'a, str>),
    /// Byte data: binary fields and `hex bytes`.
    Bytes(&'a [u8]),
}

/// The value of `field` in `bytes` (what the enumerator gave for it).
pub fn typed_value<'a>(field: &FieldMeta<'_>, bytes: &'a [u8], endian: Endian) -> Typed<'a> {
    let format = field.format();
    match field.encoding {
        Encoding::Value8 | Encoding::Value16 | Encoding::Value32 | Encoding::Value64 => {
            int_value(format, bytes, endian)
        }
        Encoding::Value128 => value128(format, bytes),
        Encoding::ZStringChar8
        | Encoding::ZStringChar16
        | Encoding::ZStringChar32
        | Encoding::StringLength16Char16
        | Encoding::StringLength16Char32 => string(
            format,
            bytes,
            field.encoding.char_size().unwrap_or(1),
            endian,
        ),
        Encoding::StringLength16Char8 | Encoding::BinaryLength16Char8 => {
            let binary = field.encoding == Encoding::BinaryLength16Char8;
            if is_value_format(format) {
                match bytes.len() {
                    0 => Typed::Null,
                    1 | 2 | 4 | 8 => int_value(format, bytes, endian),
                    16 => value128(format, bytes),
                    _ if binary => Typed::Bytes(bytes),
                    _ => Typed::Str(String::from_utf8_lossy(bytes)),
                }
            } else if binary && format == Format::Default {
                Typed::Bytes(bytes)
            } else {
                string(format, bytes, 1, endian)
            }
        }
        Encoding::Struct => Typed::Null,
    }
}

/// The JSON text a writer made of a string (`"…"` with nothing to escape) as a string.
fn rendered(write: impl FnOnce(&mut Vec<u8>)) -> Typed<'static> {
    let mut out = Vec::with_capacity(40);
    write(&mut out);
    let text = out
        .strip_prefix(b"\"")
        .and_then(|t| t.strip_suffix(b"\""))
        .unwrap_or(&out);
    Typed::Str(Cow::Owned(String::from_utf8_lossy(text).into_owned()))
}

/// A 1, 2, 4 or 8-byte value, as `write_int_value` shows it.
fn int_value<'a>(format: Format, bytes: &'a [u8], endian: Endian) -> Typed<'a> {
    let Some(u) = uint_of(bytes, endian) else {
        return Typed::Bytes(bytes);
    };
    let n = bytes.len();
    // n is 1, 2, 4 or 8 (uint_of read it).
    #[allow(clippy::arithmetic_side_effects)]
    let shift = 64 - 8 * n as u32;
    let s = ((u << shift) as i64) >> shift;
    match format {
        Format::SignedInt => Typed::Int(s),
        Format::HexInt => rendered(|out| write_hash_x(out, u)),
        Format::Errno if n == 4 => Typed::Int(s),
        Format::Pid if n >= 4 => Typed::Int(s),
        Format::Time if n >= 4 => match rendered(|out| write_time(out, s)) {
            // Out of RFC 3339's years the line shows the number.
            Typed::Str(t) if t.starts_with(|c: char| c.is_ascii_digit()) && t.contains('T') => {
                Typed::Str(t)
            }
            _ => Typed::Int(s),
        },
        Format::Boolean => match u {
            0 => Typed::Bool(false),
            1 => Typed::Bool(true),
            _ if n <= 4 => Typed::Int(i64::from(u as u32 as i32)),
            _ => Typed::UInt(u),
        },
        Format::Float if n == 4 => Typed::Float(f64::from(f32::from_bits(u as u32))),
        Format::Float if n == 8 => Typed::Float(f64::from_bits(u)),
        Format::HexBytes => Typed::Bytes(bytes),
        Format::String8 if n == 1 => Typed::Str(Cow::Owned(char::from(bytes[0]).to_string())),
        Format::StringUtf if (2..=4).contains(&n) => Typed::Str(Cow::Owned(
            char::from_u32(u as u32).unwrap_or('\u{FFFD}').to_string(),
        )),
        Format::Port if n == 2 => Typed::Int(i64::from(u16::from_be_bytes([bytes[0], bytes[1]]))),
        Format::IpAddress | Format::IpAddressObsolete if n == 4 => Typed::Str(Cow::Owned(
            std::net::Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]).to_string(),
        )),
        _ => Typed::UInt(u),
    }
}

/// A 16-byte value: UUID, IPv6 or bytes.
fn value128(format: Format, bytes: &[u8]) -> Typed<'_> {
    let Some(b) = bytes.first_chunk::<16>() else {
        return Typed::Bytes(bytes);
    };
    match format {
        Format::Uuid => rendered(|out| write_uuid(out, b)),
        Format::IpAddress | Format::IpAddressObsolete => rendered(|out| write_ipv6(out, b)),
        _ => Typed::Bytes(bytes),
    }
}

/// A string of `unit`-byte code units in the given format (invalid code units: U+FFFD).
fn string(format: Format, bytes: &[u8], unit: usize, endian: Endian) -> Typed<'_> {
    match format {
        Format::HexBytes => Typed::Bytes(bytes),
        Format::String8 => match std::str::from_utf8(bytes) {
            Ok(ascii) if ascii.is_ascii() => Typed::Str(Cow::Borrowed(ascii)),
            _ => Typed::Str(Cow::Owned(bytes.iter().map(|&b| char::from(b)).collect())),
        },
        Format::StringUtfBom | Format::StringXml | Format::StringJson => {
            let (unit, endian, skip) = by_bom(bytes, unit, endian);
            Typed::Str(units(bytes.get(skip..).unwrap_or_default(), unit, endian))
        }
        _ => Typed::Str(units(bytes, unit, endian)),
    }
}

/// UTF-8, UTF-16 or UTF-32 code units as text (borrowed when UTF-8 and valid).
fn units(bytes: &[u8], unit: usize, endian: Endian) -> Cow<'_, str> {
    // A code unit of 2 or 4 bytes (the chunks below).
    let word = |c: &[u8]| -> u32 {
        match *c {
            [a, b] if endian.is_big() => u32::from(u16::from_be_bytes([a, b])),
            [a, b] => u32::from(u16::from_le_bytes([a, b])),
            [a, b, d, e] if endian.is_big() => u32::from_be_bytes([a, b, d, e]),
            [a, b, d, e] => u32::from_le_bytes([a, b, d, e]),
            _ => 0xFFFD,
        }
    };
    let chunks = bytes.chunks_exact(unit.max(1));
    let partial = !chunks.remainder().is_empty();
    let mut text: String = match unit {
        2 => char::decode_utf16(chunks.map(|c| word(c) as u16))
            .map(|c| c.unwrap_or('\u{FFFD}'))
            .collect(),
        4 => chunks
            .map(|c| char::from_u32(word(c)).unwrap_or('\u{FFFD}'))
            .collect(),
        _ => return String::from_utf8_lossy(bytes),
    };
    if partial {
        text.push('\u{FFFD}');
    }
    Cow::Owned(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(encoding: Encoding, format: u8) -> FieldMeta<'static> {
        FieldMeta {
            name: b"f",
            encoding,
            format_byte: format,
            tag: 0,
            array: crate::eventheader::metadata::ArrayKind::Scalar,
            offset: 0,
            next: 0,
        }
    }

    #[test]
    fn values_are_what_the_json_line_shows() {
        let le = Endian::Little;
        let v = |e, f, b: &'static [u8]| typed_value(&field(e, f), b, le);
        assert_eq!(v(Encoding::Value32, 0, &[7, 0, 0, 0]), Typed::UInt(7));
        assert_eq!(v(Encoding::Value16, 2, &[0xfe, 0xff]), Typed::Int(-2));
        assert_eq!(v(Encoding::Value8, 7, &[1]), Typed::Bool(true));
        assert_eq!(v(Encoding::Value8, 7, &[3]), Typed::Int(3));
        assert_eq!(
            v(Encoding::Value32, 3, &[0x10, 0, 0, 0]),
            Typed::Str("0x10".into())
        );
        assert_eq!(
            v(Encoding::Value64, 8, &[0, 0, 0, 0, 0, 0, 0xf8, 0x3f]),
            Typed::Float(1.5)
        );
        assert_eq!(v(Encoding::Value16, 16, &[0x1f, 0x90]), Typed::Int(8080));
        assert_eq!(
            v(Encoding::Value32, 17, &[10, 0, 0, 1]),
            Typed::Str("10.0.0.1".into())
        );
        assert_eq!(
            v(Encoding::Value32, 6, &[0, 0, 0, 0]),
            Typed::Str("1970-01-01T00:00:00Z".into())
        );
        assert_eq!(
            v(Encoding::ZStringChar8, 0, b"hello"),
            Typed::Str("hello".into())
        );
        assert_eq!(
            v(Encoding::ZStringChar16, 0, &[b'h', 0, b'i', 0]),
            Typed::Str("hi".into())
        );
        assert_eq!(
            v(Encoding::ZStringChar8, 10, &[0xe9]),
            Typed::Str("é".into())
        );
        assert_eq!(
            v(Encoding::BinaryLength16Char8, 0, &[1, 2, 3]),
            Typed::Bytes(&[1, 2, 3])
        );
        assert_eq!(v(Encoding::StringLength16Char8, 1, &[]), Typed::Null);
        assert_eq!(
            v(Encoding::Value128, 15, &[0x12; 16]),
            Typed::Str("12121212-1212-1212-1212-121212121212".into())
        );
    }
}
