//! The values of EventHeader fields as JSON: every encoding and format (integers, hex,
//! errno, bool, time, IP addresses, UUIDs, floats, strings in UTF-8/16/32), written from
//! the field's bytes. JSON lines and OTLP (`crate::otlp::fields`) both use them.

use crate::bytes::Endian;
use crate::eventheader::enums::{Encoding, Format};
use crate::eventheader::metadata::{FieldMeta, unescape};
use crate::json::{
    first_special, hex_digits, write_escape, write_hex, write_int, write_plain, write_text,
    write_text_contents,
};

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
pub fn write_value(out: &mut Vec<u8>, field: &FieldMeta<'_>, bytes: &[u8], endian: Endian) {
    write_value_as(out, field.encoding, field.format(), bytes, endian)
}

/// [`write_value`] for a field of this encoding and format.
pub(crate) fn write_value_as(
    out: &mut Vec<u8>,
    encoding: Encoding,
    format: Format,
    bytes: &[u8],
    endian: Endian,
) {
    match encoding {
        Encoding::Value8 | Encoding::Value16 | Encoding::Value32 | Encoding::Value64 => {
            write_int_value(out, format, bytes, endian)
        }
        Encoding::Value128 => write_value128(out, format, bytes),
        Encoding::ZStringChar8
        | Encoding::ZStringChar16
        | Encoding::ZStringChar32
        | Encoding::StringLength16Char16
        | Encoding::StringLength16Char32 => write_string(
            out,
            format,
            bytes,
            encoding.char_size().unwrap_or(1),
            endian,
        ),
        Encoding::StringLength16Char8 | Encoding::BinaryLength16Char8 => {
            let binary = encoding == Encoding::BinaryLength16Char8;
            if is_value_format(format) {
                match bytes.len() {
                    0 => out.extend_from_slice(b"null"),
                    1 | 2 | 4 | 8 => write_int_value(out, format, bytes, endian),
                    16 => write_value128(out, format, bytes),
                    _ if binary => write_hex(out, bytes),
                    _ => write_text(out, bytes),
                }
            } else if binary && format == Format::Default {
                write_hex(out, bytes)
            } else {
                write_string(out, format, bytes, 1, endian)
            }
        }
        Encoding::Struct => out.extend_from_slice(b"null"),
    }
}

/// A 1, 2, 4 or 8-byte value as a zero-extended number, in the given byte order
/// (`None` for other lengths).
#[inline]
pub(crate) fn uint_of(bytes: &[u8], endian: Endian) -> Option<u64> {
    macro_rules! read {
        ($t:ty) => {{
            let b = *bytes.first_chunk()?;
            u64::from(if endian.is_big() {
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
pub(super) fn write_int_value(out: &mut Vec<u8>, format: Format, bytes: &[u8], endian: Endian) {
    let Some(u) = uint_of(bytes, endian) else {
        return write_hex(out, bytes);
    };
    let n = bytes.len();
    // n is 1, 2, 4 or 8 (uint_of read it).
    #[allow(clippy::arithmetic_side_effects)]
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
pub(super) fn write_value128(out: &mut Vec<u8>, format: Format, bytes: &[u8]) {
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
// Indexes and run lengths of 8 segments.
#[allow(clippy::arithmetic_side_effects)]
pub(super) fn write_ipv6(out: &mut Vec<u8>, b: &[u8; 16]) {
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
// Constant places in a 38-byte text.
#[allow(clippy::arithmetic_side_effects)]
pub(super) fn write_uuid(out: &mut Vec<u8>, b: &[u8; 16]) {
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
pub(super) fn write_float<F: zmij::Float>(out: &mut Vec<u8>, v: F) {
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
// Any i64 of seconds is within ±1.1e14 days: every step of the civil date (Hinnant's
// algorithm) fits an i64 with room; the digits are of values below 10,000.
#[allow(clippy::arithmetic_side_effects)]
pub(super) fn write_time(out: &mut Vec<u8>, secs: i64) {
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
    endian: Endian,
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
            let (unit, endian, skip) = by_bom(bytes, unit, endian);
            write_units(out, bytes.get(skip..).unwrap_or_default(), unit, endian)
        }
        _ => write_units(out, bytes, unit, endian),
    }
}

/// The code unit size and byte order a byte order mark at the start of `bytes` says,
/// and the mark's length; without one, `unit` and `endian` as given and 0.
pub(super) fn by_bom(bytes: &[u8], unit: usize, endian: Endian) -> (usize, Endian, usize) {
    match bytes {
        [0, 0, 0xfe, 0xff, ..] => (4, Endian::Big, 4),
        [0xff, 0xfe, 0, 0, ..] => (4, Endian::Little, 4),
        [0xfe, 0xff, ..] => (2, Endian::Big, 2),
        [0xff, 0xfe, ..] => (2, Endian::Little, 2),
        [0xef, 0xbb, 0xbf, ..] => (1, endian, 3),
        _ => (unit, endian, 0),
    }
}

/// UTF-8, UTF-16 or UTF-32 code units as a JSON string (invalid → U+FFFD).
pub(super) fn write_units(out: &mut Vec<u8>, bytes: &[u8], unit: usize, endian: Endian) {
    match unit {
        2 if write_ascii_units::<2>(out, bytes, endian) => {}
        4 if write_ascii_units::<4>(out, bytes, endian) => {}
        2 => {
            out.push(b'"');
            let chunks = bytes.chunks_exact(2);
            let partial = !chunks.remainder().is_empty();
            let units = chunks.map(|c| {
                let b = [c[0], c[1]];
                if endian.is_big() {
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
                let v = if endian.is_big() {
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
pub(super) fn write_ascii_units<const N: usize>(
    out: &mut Vec<u8>,
    bytes: &[u8],
    endian: Endian,
) -> bool {
    let units = bytes.chunks_exact(N);
    if !units.remainder().is_empty() {
        return false;
    }
    // The byte holding the unit's low 8 bits; all the others must be 0.
    // N is 2 or 4 (a code unit's size).
    #[allow(clippy::arithmetic_side_effects)]
    let low = if endian.is_big() { N - 1 } else { 0 };
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
        // A place inside `out`: the sum fits.
        .get(mark.saturating_add(1)..)
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
pub(super) fn push_char(out: &mut Vec<u8>, c: char) {
    match u8::try_from(c) {
        Ok(b) if b.is_ascii() => write_escape(out, b),
        _ => {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
}

/// Text with `;;` escapes as a JSON string of the unescaped text (lossy UTF-8; the
/// pieces split at ASCII `;`, so no UTF-8 sequence is cut).
pub(super) fn write_escaped_text(out: &mut Vec<u8>, text: &[u8]) {
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

/// `v` as `{:#x}` writes it, as a JSON string, without the formatting machinery: the
/// 16 digits made in two words, the leading zeros shifted out, and `"0x…"` appended as
/// one fixed-size copy.
#[inline]
// 1 to 16 digits of a u64: every place and shift is within the 20-byte text.
#[allow(clippy::arithmetic_side_effects)]
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
    // Not imported: `LineOut::extend` would shadow `Extend::extend` in this module.
    crate::json::LineOut::put(out, &text, 4 + digits);
}

/// `v` as `{:x}` writes it, without the formatting machinery.
// 1 to 16 digits of a u64.
#[allow(clippy::arithmetic_side_effects)]
pub(super) fn write_x(out: &mut Vec<u8>, v: u64) {
    let digits = ((67 - v.leading_zeros()) / 4).max(1) as usize;
    let (high, low) = (hex_digits((v >> 32) as u32), hex_digits(v as u32));
    if let Some(low) = low.get(8usize.saturating_sub(digits)..) {
        if digits > 8 {
            out.extend_from_slice(high.get(16 - digits..).unwrap_or_default());
        }
        out.extend_from_slice(low);
    }
}
