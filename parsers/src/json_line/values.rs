//! Decoded values ([`Value`]) and raw integers as JSON numbers, arrays and strings.

use super::escape::{write_hex, write_text};
use crate::decode::{Endian, IntArray, Value};

/// The `N` bytes at `at` in little-endian order (swapped if `big`), if in `raw`.
#[inline(always)]
pub(crate) fn int_bytes<const N: usize>(raw: &[u8], at: usize, big: bool) -> Option<[u8; N]> {
    let mut b = *raw.get(at..)?.first_chunk::<N>()?;
    if big {
        b.reverse();
    }
    Some(b)
}

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
    if !write_int_slice(out, bytes, width, signed, endian == Endian::Big) {
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

/// `[1,2,3]` for `bytes` holding `width`-byte integers; `false`, with nothing written,
/// for a width other than 1, 2, 4 or 8.
pub(crate) fn write_int_slice(
    out: &mut Vec<u8>,
    bytes: &[u8],
    width: u8,
    signed: bool,
    big: bool,
) -> bool {
    match (width, signed) {
        (1, false) => write_ints(out, bytes, big, u8::from_le_bytes),
        (1, true) => write_ints(out, bytes, big, i8::from_le_bytes),
        (2, false) => write_ints(out, bytes, big, u16::from_le_bytes),
        (2, true) => write_ints(out, bytes, big, i16::from_le_bytes),
        (4, false) => write_ints(out, bytes, big, u32::from_le_bytes),
        (4, true) => write_ints(out, bytes, big, i32::from_le_bytes),
        (8, false) => write_ints(out, bytes, big, u64::from_le_bytes),
        (8, true) => write_ints(out, bytes, big, i64::from_le_bytes),
        _ => return false,
    }
    true
}

/// `[e0,e1,…]` for the `N`-byte integers in `bytes` (a multiple of `N` long; a partial
/// last element is ignored), each converted by `from_le` after a byte swap if `big`.
#[inline]
fn write_ints<const N: usize, T: itoa::Integer>(
    out: &mut Vec<u8>,
    bytes: &[u8],
    big: bool,
    from_le: fn([u8; N]) -> T,
) {
    let read = |chunk: &[u8]| {
        let mut b = [0u8; N];
        b.copy_from_slice(chunk);
        if big {
            b.reverse();
        }
        from_le(b)
    };
    out.reserve(bytes.len() / N * 21 + 2);
    out.push(b'[');
    let mut chunks = bytes.chunks_exact(N);
    if let Some(first) = chunks.next() {
        write_digits(out, read(first));
        for chunk in chunks {
            out.push(b',');
            write_digits(out, read(chunk));
        }
    }
    out.push(b']');
}

/// A number: itoa's digits; below 100 (CPU numbers, small ids and values), the one or
/// two digits pushed directly (a copy of itoa's digits of unknown length is a `memcpy`
/// call costing more than itoa itself).
#[inline]
pub(crate) fn write_int<T: itoa::Integer + TryInto<u8>>(out: &mut Vec<u8>, v: T) {
    match v.try_into() {
        Ok(small @ 0..10) => out.push(b'0' + small),
        Ok(small @ 10..100) => out.extend_from_slice(&[b'0' + small / 10, b'0' + small % 10]),
        _ => write_digits(out, v),
    }
}

/// itoa's digits of `v` (what [`write_int`] writes), without [`write_int`]'s small-number
/// test: the loops over integer arrays call this (with the test, the loop ran slower).
#[inline]
fn write_digits(out: &mut Vec<u8>, v: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_as_display_writes_them() {
        fn check<T: itoa::Integer + TryInto<u8> + std::fmt::Display + Copy>(v: T) {
            let mut out = Vec::new();
            write_int(&mut out, v);
            assert_eq!(out, v.to_string().into_bytes());
        }
        for v in -300i64..300 {
            check(v);
            check(v as i8);
            check(v as u8);
            check(v as i16);
            check(v as u32);
            check(v as u64);
        }
        check(i64::MIN);
        check(u64::MAX);
        check(usize::MAX);
        check(i32::MIN);
    }
}
