//! Decoded values ([`Value`]) and raw integers as JSON numbers, arrays and strings.

use super::escape::{write_hex, write_text};
use super::line_buf::{LineBuf, LineBufParts, LineOut};
use super::numbers::{Decimal, write_int, write_int_after};
use crate::decode::{Endian, IntArray, Value};

/// Write one value; returns `true` for [`Value::Error`] (written as `null`).
pub(crate) fn write_value(out: &mut Vec<u8>, value: &Value<'_>) -> bool {
    match *value {
        Value::Signed(v) => write_int(out, v),
        Value::Unsigned(v) => write_int(out, v),
        Value::Str(bytes) => write_text(out, bytes),
        Value::Bytes(bytes) => write_hex(out, bytes),
        Value::IntArray(array) => write_int_array(out, array),
        Value::Error(_) => {
            out.extend_from_slice(b"null");
            return true;
        }
    }
    false
}

/// `[1,2,3]`: one loop per element type, each element read straight from the bytes.
fn write_int_array(out: &mut Vec<u8>, array: IntArray<'_>) {
    let (bytes, width, signed, endian) = array.parts();
    if !write_int_slice(out, bytes, width, signed, endian) {
        // `decode` makes no other arrays; the element-by-element path stays correct.
        out.push(b'[');
        for (i, v) in array.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_value(out, &v);
        }
        out.push(b']');
    }
}

/// The element type of an integer array, its width (1, 2, 4 or 8 bytes) and sign
/// checked once ([`IntKind::of`]): the prepared path then goes straight to its loop (the
/// check and the sign's test cost instructions per array; BENCHMARKS.md, "Instruction counts moved out of the code").
#[derive(Debug, Clone, Copy)]
pub(crate) enum IntKind {
    /// `u8`.
    U8,
    /// `i8`.
    I8,
    /// `u16`.
    U16,
    /// `i16`.
    I16,
    /// `u32`.
    U32,
    /// `i32`.
    I32,
    /// `u64`.
    U64,
    /// `i64`.
    I64,
}

impl IntKind {
    /// The kind of `width`-byte integers; `None` for a width other than 1, 2, 4 or 8.
    pub(crate) fn of(width: u8, signed: bool) -> Option<IntKind> {
        Some(match (width, signed) {
            (1, false) => IntKind::U8,
            (1, true) => IntKind::I8,
            (2, false) => IntKind::U16,
            (2, true) => IntKind::I16,
            (4, false) => IntKind::U32,
            (4, true) => IntKind::I32,
            (8, false) => IntKind::U64,
            (8, true) => IntKind::I64,
            _ => return None,
        })
    }
}

/// [`write_int_slice`] of `kind` into a line buffer given as its parts ([`LineBuf::lend`]: out
/// of line, its position stays in a register); returns the position after the array.
#[inline(never)]
pub(crate) fn line_buf_int_slice(
    line: LineBufParts<'_>,
    bytes: &[u8],
    kind: IntKind,
    endian: Endian,
) -> (usize, ()) {
    let mut line = LineBuf::from_parts(line);
    write_kind_slice(&mut line, bytes, kind, endian);
    (line.into_parts().1, ())
}

/// `[1,2,3]` for `bytes` holding `width`-byte integers; `false`, with nothing written,
/// for a width other than 1, 2, 4 or 8.
pub(crate) fn write_int_slice(
    out: &mut impl LineOut,
    bytes: &[u8],
    width: u8,
    signed: bool,
    endian: Endian,
) -> bool {
    let Some(kind) = IntKind::of(width, signed) else {
        return false;
    };
    write_kind_slice(out, bytes, kind, endian);
    true
}

/// `[1,2,3]` for `bytes` holding integers of `kind`.
#[inline(always)]
fn write_kind_slice(out: &mut impl LineOut, bytes: &[u8], kind: IntKind, endian: Endian) {
    // The byte order is chosen once per array, so the loop reads each element with one
    // load (a swap inside the loop made it reassemble every element byte by byte).
    macro_rules! ints {
        ($t:ty) => {
            if endian == Endian::Big {
                write_ints(out, bytes, <$t>::from_be_bytes)
            } else {
                write_ints(out, bytes, <$t>::from_le_bytes)
            }
        };
    }
    match kind {
        IntKind::U8 => ints!(u8),
        IntKind::I8 => ints!(i8),
        IntKind::U16 => ints!(u16),
        IntKind::I16 => ints!(i16),
        IntKind::U32 => ints!(u32),
        IntKind::I32 => ints!(i32),
        IntKind::U64 => ints!(u64),
        IntKind::I64 => ints!(i64),
    }
}

/// `[e0,e1,…]` for the `N`-byte integers in `bytes` (a multiple of `N` long; a partial
/// last element is ignored), each converted by `read`.
#[inline(always)]
fn write_ints<const N: usize, T: Decimal>(
    out: &mut impl LineOut,
    bytes: &[u8],
    read: impl Fn([u8; N]) -> T,
) {
    let mut elements = bytes
        .chunks_exact(N)
        .filter_map(|chunk| chunk.first_chunk::<N>());
    match elements.next() {
        Some(first) => {
            write_int_after(out, b'[', read(*first));
            for element in elements {
                write_int_after(out, b',', read(*element));
            }
        }
        None => out.put_all(b"["),
    }
    out.put_all(b"]");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every width and signedness in both byte orders, against `Display`.
    #[test]
    fn int_slices_in_both_byte_orders() {
        let values: [i64; 6] = [0, 1, -1, i64::MIN, i64::MAX, 0x0123_4567_89ab_cdef];
        for width in [1u8, 2, 4, 8] {
            for signed in [false, true] {
                for big in [false, true] {
                    let w = usize::from(width);
                    let mut bytes = Vec::new();
                    let mut expected = Vec::new();
                    for v in values {
                        let le = v.to_le_bytes();
                        let mut b = le[..w].to_vec();
                        let shift = 64 - 8 * u32::from(width);
                        expected.push(if signed {
                            ((v << shift) >> shift).to_string()
                        } else {
                            (((v as u64) << shift) >> shift).to_string()
                        });
                        if big {
                            b.reverse();
                        }
                        bytes.extend_from_slice(&b);
                    }
                    let mut out = Vec::new();
                    assert!(write_int_slice(
                        &mut out,
                        &bytes,
                        width,
                        signed,
                        Endian::from_big(big)
                    ));
                    let expected = format!("[{}]", expected.join(","));
                    assert_eq!(
                        String::from_utf8(out).unwrap(),
                        expected,
                        "{width} {signed} {big}"
                    );
                }
            }
        }
        assert!(!write_int_slice(
            &mut Vec::new(),
            &[0; 3],
            3,
            false,
            Endian::Little
        ));
        let mut out = Vec::new();
        assert!(write_int_slice(&mut out, &[], 4, true, Endian::Little));
        assert_eq!(out, b"[]");
    }
}
