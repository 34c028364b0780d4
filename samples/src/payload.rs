//! user_events payload encoding (values → packed bytes with dynamic locations).
//!
//! A producer writes `writev([u32 write_index, payload])`; the kernel puts the payload right
//! after the 8-byte common header, so the record is `header ++ payload`. [`encode`] builds
//! the payload for a [`RegisterCommand`]:
//!
//! - the fixed part holds every field in order, packed (no padding), in native byte order
//!   (the kernel copies the bytes as they are);
//! - dynamic data (`__data_loc` / `__rel_loc`) is appended after the fixed part, in field
//!   order, and the field's u32 is `len << 16 | off`: for `__data_loc` `off` counts from the
//!   start of the record **including** the common header (payload offset + 8); for
//!   `__rel_loc` it counts from the end of the 4-byte field itself;
//! - a [`PayloadValue::Str`] for a `char` dynamic field gets a trailing NUL, counted in
//!   `len`; the kernel checks that every dynamic field whose type contains `char` ends in
//!   NUL (EFAULT otherwise), so [`PayloadValue::Bytes`] for such a field must end in 0;
//! - a `char[N]` field takes a string NUL-padded to N bytes, or cut to N bytes at a
//!   character boundary when longer (a full field has no NUL; decoders take the whole
//!   array); raw bytes for a fixed array may be shorter (zero-padded) but never longer;
//! - integers are range-checked against the field's width and signedness.
//!
//! The kernel also drops (on the perf path, silently) records longer than
//! `PERF_MAX_TRACE_SIZE` (8192 bytes with the header); that is not an encoding error.

use crate::register::{COMMON_HEADER_SIZE, CommandField, RegisterCommand};
use uevrec_parsers::{Element, FieldKind, LocKind};

/// The largest fixed part [`encode`] builds (it bounds memory): the reach of a 16-bit
/// dynamic location. Perf drops records over 8 KiB (PERF_MAX_TRACE_SIZE) and ftrace ones
/// larger than a ring sub-buffer (a page by default) anyway.
pub const MAX_FIXED_PART: u32 = 0xffff;

/// One field's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadValue<'a> {
    /// A signed integer (for integer fields of any width; range-checked).
    Int(i64),
    /// An unsigned integer (for integer fields of any width; range-checked).
    Uint(u64),
    /// Text, for `char[N]` and `char` dynamic fields.
    Str(&'a str),
    /// Raw bytes: `unsigned char[N]` / `char[N]` (at most N), `struct` fields (exactly
    /// SIZE), and any dynamic field (a whole number of elements).
    Bytes(&'a [u8]),
    /// Elements of a `__data_loc u16[]`-like field.
    U16s(&'a [u16]),
    /// Elements of a `__data_loc s16[]`-like field.
    I16s(&'a [i16]),
    /// Elements of a `__data_loc u32[]`-like field.
    U32s(&'a [u32]),
    /// Elements of a `__data_loc s32[]` / `int[]` field.
    I32s(&'a [i32]),
    /// Elements of a `__data_loc u64[]`-like field.
    U64s(&'a [u64]),
    /// Elements of a `__data_loc s64[]`-like field.
    I64s(&'a [i64]),
}

impl PayloadValue<'_> {
    /// The variant's name, for error messages.
    fn variant(&self) -> &'static str {
        match self {
            PayloadValue::Int(_) => "Int",
            PayloadValue::Uint(_) => "Uint",
            PayloadValue::Str(_) => "Str",
            PayloadValue::Bytes(_) => "Bytes",
            PayloadValue::U16s(_) => "U16s",
            PayloadValue::I16s(_) => "I16s",
            PayloadValue::U32s(_) => "U32s",
            PayloadValue::I32s(_) => "I32s",
            PayloadValue::U64s(_) => "U64s",
            PayloadValue::I64s(_) => "I64s",
        }
    }
}

/// What is wrong with one value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueProblem {
    /// The value's variant does not fit the field's type.
    #[error("expected PayloadValue::{expected}, got PayloadValue::{got}")]
    Mismatch {
        /// The variant(s) the field takes.
        expected: &'static str,
        /// The variant given.
        got: &'static str,
    },
    /// The integer does not fit the field.
    #[error("value {value} does not fit a {bits}-bit {} integer", if *signed { "signed" } else { "unsigned" })]
    OutOfRange {
        /// The value given.
        value: i128,
        /// The field's width in bits.
        bits: u32,
        /// Whether the field is signed.
        signed: bool,
    },
    /// More bytes than the field (or a dynamic location's 16-bit length) holds.
    #[error("{len} bytes do not fit: the field holds at most {max}")]
    TooLong {
        /// Bytes given (with the NUL for strings in dynamic fields).
        len: usize,
        /// The most the field holds.
        max: usize,
    },
    /// Struct bytes of the wrong size.
    #[error("a struct field takes exactly {size} bytes, got {len}")]
    StructSize {
        /// The field's size.
        size: usize,
        /// Bytes given.
        len: usize,
    },
    /// Bytes for an array that are not a whole number of elements.
    #[error("{len} bytes are not a whole number of {elem}-byte elements")]
    Ragged {
        /// Bytes given.
        len: usize,
        /// Element size.
        elem: u32,
    },
    /// The dynamic data starts past what a 16-bit offset can reach.
    #[error(
        "the data would start at offset {offset}, past the 16-bit limit (65535) of a dynamic \
         location: send less data before this field"
    )]
    OffsetTooLarge {
        /// The offset the location would need.
        offset: usize,
    },
    /// A `char` dynamic field's data does not end in NUL.
    #[error(
        "the kernel requires the data of a dynamic field whose type contains `char` to end \
         with a NUL byte (the write fails with EFAULT otherwise): append a 0 byte or pass \
         PayloadValue::Str"
    )]
    NeedsNul,
    /// A field lies outside the command's fixed part (only possible for a command whose
    /// fields were edited by hand).
    #[error(
        "the field lies outside the command's fixed part: build commands with \
         RegisterCommand::parse instead of editing their fields"
    )]
    BadLayout,
    /// A string with a NUL inside.
    #[error("the string has a NUL byte at {at}; decoders would stop there")]
    InteriorNul {
        /// Byte index of the NUL.
        at: usize,
    },
}

/// Why a payload could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// Not one value per field.
    #[error("{got} values for {expected} fields: pass one value per field, in field order")]
    Count {
        /// Number of fields.
        expected: usize,
        /// Number of values.
        got: usize,
    },
    /// The fields take more than [`MAX_FIXED_PART`] bytes.
    #[error(
        "the fields take {size} bytes, more than uevrec encodes (limit {}; perf records at \
         most 8 KiB anyway): use smaller struct fields",
        MAX_FIXED_PART
    )]
    FixedPartTooLarge {
        /// Size of the fixed part.
        size: u32,
    },
    /// One value does not fit its field.
    #[error("field `{field}` ({type_text}): {problem}")]
    Field {
        /// The field name.
        field: String,
        /// The field's type as written in the command.
        type_text: String,
        /// What is wrong.
        problem: ValueProblem,
    },
}

/// The payload for `values` (one per field of `cmd`, in order).
///
/// ```
/// use uevrec_samples::payload::{encode, PayloadValue};
/// use uevrec_samples::register::RegisterCommand;
/// let cmd = RegisterCommand::parse("ev u16 n; __data_loc char[] s").unwrap();
/// let bytes = encode(&cmd, &[PayloadValue::Uint(7), PayloadValue::Str("hi")]).unwrap();
/// // u16, then the location (len 3 incl. NUL, offset 6 + 8), then "hi\0".
/// let loc: u32 = (3 << 16) | 14;
/// let mut want = 7u16.to_ne_bytes().to_vec();
/// want.extend_from_slice(&loc.to_ne_bytes());
/// want.extend_from_slice(b"hi\0");
/// assert_eq!(bytes, want);
/// ```
pub fn encode(cmd: &RegisterCommand, values: &[PayloadValue<'_>]) -> Result<Vec<u8>, PayloadError> {
    let mut out = Vec::new();
    encode_into(cmd, values, &mut out)?;
    Ok(out)
}

/// Like [`encode`], appending the payload to `out` (which keeps its earlier contents; on
/// error `out` is left as it was). Reusing one buffer avoids an allocation per write.
pub fn encode_into(
    cmd: &RegisterCommand,
    values: &[PayloadValue<'_>],
    out: &mut Vec<u8>,
) -> Result<(), PayloadError> {
    if values.len() != cmd.fields.len() {
        return Err(PayloadError::Count {
            expected: cmd.fields.len(),
            got: values.len(),
        });
    }
    let fixed = cmd.payload_size();
    if fixed > MAX_FIXED_PART {
        return Err(PayloadError::FixedPartTooLarge { size: fixed });
    }
    let start = out.len();
    out.resize(start + fixed as usize, 0);
    for (field, value) in cmd.fields.iter().zip(values) {
        if let Err(problem) = put_field(field, value, out, start) {
            out.truncate(start);
            return Err(PayloadError::Field {
                field: field.name.clone(),
                type_text: field.type_text.clone(),
                problem,
            });
        }
    }
    Ok(())
}

/// Write one field's value; `start` is where the payload begins in `out`.
fn put_field(
    field: &CommandField,
    value: &PayloadValue<'_>,
    out: &mut Vec<u8>,
    start: usize,
) -> Result<(), ValueProblem> {
    let at = start + field.payload_offset() as usize;
    let size = field.size as usize;
    let mismatch = |expected| ValueProblem::Mismatch {
        expected,
        got: value.variant(),
    };
    match &field.kind {
        FieldKind::Integer {
            size: width,
            signed,
        } => {
            let v = match *value {
                PayloadValue::Int(v) => i128::from(v),
                PayloadValue::Uint(v) => i128::from(v),
                _ => return Err(mismatch("Int or Uint")),
            };
            put_integer(slot(out, at, usize::from(*width))?, v, *signed)
        }
        FieldKind::FixedArray { elem, .. } => {
            let bytes = match (*value, elem) {
                (PayloadValue::Str(s), Element::Char) => {
                    check_no_nul(s)?;
                    &s.as_bytes()[..floor_char_boundary(s, size)]
                }
                (PayloadValue::Bytes(b), _) if b.len() <= size => b,
                (PayloadValue::Bytes(b), _) => {
                    return Err(ValueProblem::TooLong {
                        len: b.len(),
                        max: size,
                    });
                }
                (_, Element::Char) => return Err(mismatch("Str or Bytes")),
                _ => return Err(mismatch("Bytes")),
            };
            slot(out, at, bytes.len())?.copy_from_slice(bytes);
            Ok(())
        }
        FieldKind::Dynamic { loc, elem } => put_dynamic(field, *loc, *elem, value, out, start),
        FieldKind::Struct { .. } | FieldKind::RestOfRecord { .. } | FieldKind::Unknown => {
            match *value {
                PayloadValue::Bytes(b) if b.len() == size => {
                    slot(out, at, size)?.copy_from_slice(b);
                    Ok(())
                }
                PayloadValue::Bytes(b) => Err(ValueProblem::StructSize { size, len: b.len() }),
                _ => Err(mismatch("Bytes")),
            }
        }
    }
}

/// Append a dynamic field's data and write its location.
fn put_dynamic(
    field: &CommandField,
    loc: LocKind,
    elem: Element,
    value: &PayloadValue<'_>,
    out: &mut Vec<u8>,
    start: usize,
) -> Result<(), ValueProblem> {
    let data_at = out.len();
    let expected = match elem {
        Element::Char => "Str (or Bytes ending in 0)",
        Element::Byte | Element::Integer { size: 1, .. } => "Bytes",
        Element::Integer {
            size: 2,
            signed: false,
        } => "U16s (or Bytes)",
        Element::Integer {
            size: 2,
            signed: true,
        } => "I16s (or Bytes)",
        Element::Integer {
            size: 4,
            signed: false,
        } => "U32s (or Bytes)",
        Element::Integer {
            size: 4,
            signed: true,
        } => "I32s (or Bytes)",
        Element::Integer {
            size: 8,
            signed: false,
        } => "U64s (or Bytes)",
        Element::Integer { signed: true, .. } => "I64s (or Bytes)",
        Element::Integer { .. } => "Bytes",
    };
    let elem_ok = |size: u8, signed: bool| elem == Element::Integer { size, signed };
    match *value {
        PayloadValue::Str(s) if elem == Element::Char => {
            check_no_nul(s)?;
            out.extend_from_slice(s.as_bytes());
            out.push(0);
        }
        PayloadValue::Bytes(b) if b.len() % elem.size() as usize == 0 => out.extend_from_slice(b),
        PayloadValue::Bytes(b) => {
            return Err(ValueProblem::Ragged {
                len: b.len(),
                elem: elem.size(),
            });
        }
        PayloadValue::U16s(v) if elem_ok(2, false) => push_all(out, v, u16::to_ne_bytes),
        PayloadValue::I16s(v) if elem_ok(2, true) => push_all(out, v, i16::to_ne_bytes),
        PayloadValue::U32s(v) if elem_ok(4, false) => push_all(out, v, u32::to_ne_bytes),
        PayloadValue::I32s(v) if elem_ok(4, true) => push_all(out, v, i32::to_ne_bytes),
        PayloadValue::U64s(v) if elem_ok(8, false) => push_all(out, v, u64::to_ne_bytes),
        PayloadValue::I64s(v) if elem_ok(8, true) => push_all(out, v, i64::to_ne_bytes),
        _ => {
            return Err(ValueProblem::Mismatch {
                expected,
                got: value.variant(),
            });
        }
    }
    let len = out.len() - data_at;
    if len > 0xffff {
        return Err(ValueProblem::TooLong { len, max: 0xffff });
    }
    if field.kernel_requires_nul() && (len == 0 || out.last() != Some(&0)) {
        return Err(ValueProblem::NeedsNul);
    }
    let payload_off = data_at - start;
    let field_at = field.payload_offset() as usize;
    let off = match loc {
        LocKind::DataLoc => payload_off + COMMON_HEADER_SIZE as usize,
        LocKind::RelLoc => payload_off
            .checked_sub(field_at + 4)
            .ok_or(ValueProblem::BadLayout)?,
    };
    if off > 0xffff {
        return Err(ValueProblem::OffsetTooLarge { offset: off });
    }
    // Both fit in 16 bits (checked above).
    let value = ((len as u32) << 16) | off as u32;
    slot(out, start + field_at, 4)?.copy_from_slice(&value.to_ne_bytes());
    Ok(())
}

/// The `len` bytes of the fixed part at `at`; [`ValueProblem::BadLayout`] when a
/// hand-built command puts a field outside its own fixed part.
fn slot(out: &mut [u8], at: usize, len: usize) -> Result<&mut [u8], ValueProblem> {
    at.checked_add(len)
        .and_then(|end| out.get_mut(at..end))
        .ok_or(ValueProblem::BadLayout)
}

/// Append every element's bytes.
fn push_all<T: Copy, const N: usize>(out: &mut Vec<u8>, values: &[T], bytes: fn(T) -> [u8; N]) {
    for &v in values {
        out.extend_from_slice(&bytes(v));
    }
}

/// Write `v` into `dst` (1, 2, 4 or 8 bytes) after checking it fits.
fn put_integer(dst: &mut [u8], v: i128, signed: bool) -> Result<(), ValueProblem> {
    if !matches!(dst.len(), 1 | 2 | 4 | 8) {
        return Err(ValueProblem::Mismatch {
            expected: "Bytes",
            got: "Int or Uint",
        });
    }
    let bits = dst.len() as u32 * 8;
    let (min, max) = if signed {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    };
    if v < min || v > max {
        return Err(ValueProblem::OutOfRange {
            value: v,
            bits,
            signed,
        });
    }
    // Two's complement truncated to the width (in range, so lossless).
    let raw = v as u64;
    match dst.len() {
        1 => dst.copy_from_slice(&(raw as u8).to_ne_bytes()),
        2 => dst.copy_from_slice(&(raw as u16).to_ne_bytes()),
        4 => dst.copy_from_slice(&(raw as u32).to_ne_bytes()),
        _ => dst.copy_from_slice(&raw.to_ne_bytes()),
    }
    Ok(())
}

fn check_no_nul(s: &str) -> Result<(), ValueProblem> {
    match s.bytes().position(|b| b == 0) {
        Some(at) => Err(ValueProblem::InteriorNul { at }),
        None => Ok(()),
    }
}

/// The largest index ≤ `max` that is a char boundary of `s`.
fn floor_char_boundary(s: &str, max: usize) -> usize {
    if max >= s.len() {
        return s.len();
    }
    (0..=max)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use PayloadValue as V;

    fn cmd(text: &str) -> RegisterCommand {
        RegisterCommand::parse(text).unwrap()
    }

    fn problem(text: &str, values: &[PayloadValue<'_>]) -> ValueProblem {
        match encode(&cmd(text), values) {
            Err(PayloadError::Field { problem, .. }) => problem,
            other => panic!("{text}: expected a value problem, got {other:?}"),
        }
    }

    /// `len << 16 | off`, native byte order.
    fn loc(len: u32, off: u32) -> [u8; 4] {
        ((len << 16) | off).to_ne_bytes()
    }

    #[test]
    fn kernel_facts_example_byte_exact() {
        let c = cmd("test u32 a; char[8] b; __rel_loc char[] msg; __data_loc char[] dmsg");
        let got = encode(
            &c,
            &[
                V::Uint(0x1122_3344),
                V::Str("hi"),
                V::Str("hello"),
                V::Str("x"),
            ],
        )
        .unwrap();
        let mut want = Vec::new();
        want.extend_from_slice(&0x1122_3344u32.to_ne_bytes()); // payload 0..4: a
        want.extend_from_slice(b"hi\0\0\0\0\0\0"); // 4..12: b, NUL-padded
        // 12..16: msg, __rel_loc: data at payload 20, the field ends at 16 → off 4, len 6.
        want.extend_from_slice(&loc(6, 20 - 16));
        // 16..20: dmsg, __data_loc: data at payload 26 → record offset 26 + 8 = 34, len 2.
        want.extend_from_slice(&loc(2, 26 + 8));
        want.extend_from_slice(b"hello\0"); // 20..26
        want.extend_from_slice(b"x\0"); // 26..28
        assert_eq!(got, want);
        assert_eq!(got.len(), 28);
    }

    #[test]
    fn every_kind_byte_exact() {
        let c = cmd(
            "ev s8 a; u16 b; s64 c; unsigned char[3] d; struct pt p 4; __data_loc u32[] v; \
             __rel_loc u8[] r; __data_loc unsigned char[] z",
        );
        let got = encode(
            &c,
            &[
                V::Int(-2),
                V::Uint(65535),
                V::Int(i64::MIN),
                V::Bytes(&[1, 2]),
                V::Bytes(&[9, 8, 7, 6]),
                V::U32s(&[1, 0xdead_beef]),
                V::Bytes(&[]),
                V::Bytes(b"ab\0"),
            ],
        )
        .unwrap();
        let mut want = vec![0xfe]; // 0: a = -2
        want.extend_from_slice(&65535u16.to_ne_bytes()); // 1..3
        want.extend_from_slice(&i64::MIN.to_ne_bytes()); // 3..11
        want.extend_from_slice(&[1, 2, 0]); // 11..14: d zero-padded
        want.extend_from_slice(&[9, 8, 7, 6]); // 14..18: p
        want.extend_from_slice(&loc(8, 30 + 8)); // 18..22: v data at payload 30
        want.extend_from_slice(&loc(0, 38 - 26)); // 22..26: r empty, at payload 38, field ends 26
        want.extend_from_slice(&loc(3, 38 + 8)); // 26..30: z data at payload 38
        want.extend_from_slice(&1u32.to_ne_bytes()); // 30..38
        want.extend_from_slice(&0xdead_beefu32.to_ne_bytes());
        want.extend_from_slice(b"ab\0"); // 38..41
        assert_eq!(got, want);
    }

    #[test]
    fn fixed_strings_pad_and_truncate_at_char_boundaries() {
        let c = cmd("ev char[4] s");
        assert_eq!(encode(&c, &[V::Str("")]).unwrap(), b"\0\0\0\0");
        assert_eq!(encode(&c, &[V::Str("abcd")]).unwrap(), b"abcd");
        assert_eq!(encode(&c, &[V::Str("abcdef")]).unwrap(), b"abcd");
        // "abcé" is 5 bytes; é would be cut in half, so only "abc" fits.
        assert_eq!(encode(&c, &[V::Str("abcé")]).unwrap(), b"abc\0");
        assert_eq!(encode(&c, &[V::Bytes(b"ab")]).unwrap(), b"ab\0\0");
    }

    #[test]
    fn integer_ranges() {
        let ok = |t: &str, v| encode(&cmd(t), &[v]).is_ok();
        assert!(ok("e u8 x", V::Uint(255)));
        assert!(ok("e s8 x", V::Int(-128)));
        assert!(ok("e s64 x", V::Int(i64::MIN)));
        assert!(ok("e u64 x", V::Uint(u64::MAX)));
        assert!(ok("e char x", V::Int(-1)));
        let range = |value: i128, bits, signed| ValueProblem::OutOfRange {
            value,
            bits,
            signed,
        };
        assert_eq!(problem("e u8 x", &[V::Uint(256)]), range(256, 8, false));
        assert_eq!(problem("e s8 x", &[V::Int(-129)]), range(-129, 8, true));
        assert_eq!(problem("e s8 x", &[V::Uint(128)]), range(128, 8, true));
        assert_eq!(problem("e u32 x", &[V::Int(-1)]), range(-1, 32, false));
        assert_eq!(
            problem("e s64 x", &[V::Uint(u64::MAX)]),
            range(u64::MAX.into(), 64, true)
        );
        assert_eq!(
            problem("e unsigned short x", &[V::Uint(65536)]),
            range(65536, 16, false)
        );
    }

    #[test]
    fn typed_arrays_must_match_the_element() {
        let c = cmd("ev __data_loc int[] v");
        let got = encode(&c, &[V::I32s(&[-1, 2])]).unwrap();
        let mut want = loc(8, 12).to_vec();
        want.extend_from_slice(&(-1i32).to_ne_bytes());
        want.extend_from_slice(&2i32.to_ne_bytes());
        assert_eq!(got, want);
        assert_eq!(
            problem("ev __data_loc int[] v", &[V::U32s(&[1])]),
            ValueProblem::Mismatch {
                expected: "I32s (or Bytes)",
                got: "U32s"
            }
        );
        assert_eq!(
            problem("ev __data_loc u32[] v", &[V::Bytes(&[1, 2, 3])]),
            ValueProblem::Ragged { len: 3, elem: 4 }
        );
        for (t, v) in [
            ("e __data_loc u16[] v", V::U16s(&[1])),
            ("e __data_loc s16[] v", V::I16s(&[1])),
            ("e __data_loc u64[] v", V::U64s(&[1])),
            ("e __data_loc s64[] v", V::I64s(&[1])),
            ("e __data_loc s8[] v", V::Bytes(&[1, 2, 3])),
        ] {
            assert!(encode(&cmd(t), &[v]).is_ok(), "{t}");
        }
    }

    #[test]
    fn refused_values() {
        use ValueProblem as P;
        let mismatch = |expected, got| P::Mismatch { expected, got };
        assert_eq!(
            problem("e u32 x", &[V::Str("1")]),
            mismatch("Int or Uint", "Str")
        );
        assert_eq!(
            problem("e unsigned char[4] x", &[V::Str("a")]),
            mismatch("Bytes", "Str")
        );
        assert_eq!(
            problem("e char[4] x", &[V::Int(1)]),
            mismatch("Str or Bytes", "Int")
        );
        assert_eq!(
            problem("e unsigned char[4] x", &[V::Bytes(&[0; 5])]),
            P::TooLong { len: 5, max: 4 }
        );
        assert_eq!(
            problem("e struct s x 4", &[V::Bytes(&[0; 3])]),
            P::StructSize { size: 4, len: 3 }
        );
        assert_eq!(
            problem("e struct s x 4", &[V::Uint(0)]),
            mismatch("Bytes", "Uint")
        );
        assert_eq!(
            problem("e char[4] x", &[V::Str("a\0b")]),
            P::InteriorNul { at: 1 }
        );
        assert_eq!(
            problem("e __data_loc char[] x", &[V::Str("a\0")]),
            P::InteriorNul { at: 1 }
        );
        assert_eq!(
            problem("e __data_loc char[] x", &[V::Bytes(b"ab")]),
            P::NeedsNul
        );
        assert_eq!(
            problem("e __rel_loc char[] x", &[V::Bytes(b"")]),
            P::NeedsNul
        );
        assert_eq!(
            problem("e __data_loc unsigned char[] x", &[V::Bytes(b"a")]),
            P::NeedsNul
        );
        assert_eq!(
            problem("e __data_loc u8[] x", &[V::Str("a")]),
            mismatch("Bytes", "Str")
        );
        assert_eq!(
            problem("e __data_loc u8[] x", &[V::Bytes(&vec![0; 65536])]),
            P::TooLong {
                len: 65536,
                max: 65535
            }
        );
        assert_eq!(
            encode(&cmd("e u8 a; u8 b"), &[V::Uint(1)]),
            Err(PayloadError::Count {
                expected: 2,
                got: 1
            })
        );
        let msg = encode(&cmd("e __data_loc char[] s"), &[V::Bytes(b"x")])
            .unwrap_err()
            .to_string();
        assert!(msg.starts_with("field `s` (__data_loc char[]): "), "{msg}");
        assert!(msg.contains("EFAULT"), "{msg}");
    }

    #[test]
    fn hand_edited_layouts_are_errors_not_panics() {
        let mut c = cmd("e u32 a; __rel_loc char[] s; u8 b");
        c.fields[0].offset = 1000; // outside the fixed part
        assert_eq!(
            problem_for(&c, &[V::Uint(1), V::Str("x"), V::Uint(2)]),
            ValueProblem::BadLayout
        );
        let mut c = cmd("e __rel_loc char[] s; u8 b");
        c.fields.truncate(1);
        c.fields[0].offset = 2; // before the payload, and a rel_loc ending past its data
        c.fields[0].size = 100;
        let _ = encode(&c, &[V::Str("x")]); // any result, no panic
        c.fields[0].offset = u32::MAX;
        c.fields[0].size = u32::MAX;
        assert_eq!(
            encode(&c, &[V::Str("x")]),
            Err(PayloadError::FixedPartTooLarge { size: u32::MAX })
        );
        // A valid command whose structs no ring could record.
        assert_eq!(
            encode(&cmd("e struct s a 70000"), &[V::Bytes(&[])]),
            Err(PayloadError::FixedPartTooLarge { size: 70000 })
        );
    }

    fn problem_for(c: &RegisterCommand, values: &[PayloadValue<'_>]) -> ValueProblem {
        match encode(c, values) {
            Err(PayloadError::Field { problem, .. }) => problem,
            other => panic!("expected a value problem, got {other:?}"),
        }
    }

    #[test]
    fn sixteen_bit_offsets() {
        let big = vec![7u8; 0xffff];
        // __data_loc counts from the record start: the second field's data would start at
        // payload 8 + 65535, record offset 65551 > 65535.
        assert_eq!(
            problem(
                "e __data_loc u8[] a; __data_loc u8[] b",
                &[V::Bytes(&big), V::Bytes(b"z")]
            ),
            ValueProblem::OffsetTooLarge {
                offset: 8 + 0xffff + 8
            }
        );
        // __rel_loc counts from the end of its field (payload 8): exactly 65535, allowed.
        let c = cmd("e __data_loc u8[] a; __rel_loc u8[] b");
        let got = encode(&c, &[V::Bytes(&big), V::Bytes(b"z")]).unwrap();
        assert_eq!(&got[0..4], &loc(0xffff, 16));
        assert_eq!(&got[4..8], &loc(1, 0xffff));
        assert_eq!(got.len(), 8 + 0xffff + 1);
        assert_eq!(got[8 + 0xffff], b'z');
    }

    #[test]
    fn encode_into_appends_and_restores_on_error() {
        let c = cmd("e u16 a; __data_loc char[] s");
        let mut out = b"IDX!".to_vec();
        encode_into(&c, &[V::Uint(1), V::Str("ok")], &mut out).unwrap();
        let mut want = b"IDX!".to_vec();
        want.extend_from_slice(&1u16.to_ne_bytes());
        want.extend_from_slice(&loc(3, 6 + 8)); // payload offsets do not count what came before
        want.extend_from_slice(b"ok\0");
        assert_eq!(out, want);
        let before = out.clone();
        assert!(encode_into(&c, &[V::Uint(1), V::Bytes(b"no nul")], &mut out).is_err());
        assert_eq!(out, before);
        // Reuse keeps the capacity: no allocation once the buffer is big enough.
        out.clear();
        let cap = out.capacity();
        encode_into(&c, &[V::Uint(2), V::Str("x")], &mut out).unwrap();
        assert_eq!(out.capacity(), cap);
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    /// Owned data for one arbitrary value.
    #[derive(Debug, Clone)]
    enum Owned {
        Int(i64),
        Uint(u64),
        Str(String),
        Bytes(Vec<u8>),
        U32s(Vec<u32>),
        I64s(Vec<i64>),
    }

    impl Owned {
        fn value(&self) -> PayloadValue<'_> {
            match self {
                Owned::Int(v) => PayloadValue::Int(*v),
                Owned::Uint(v) => PayloadValue::Uint(*v),
                Owned::Str(s) => PayloadValue::Str(s),
                Owned::Bytes(b) => PayloadValue::Bytes(b),
                Owned::U32s(v) => PayloadValue::U32s(v),
                Owned::I64s(v) => PayloadValue::I64s(v),
            }
        }
    }

    fn owned() -> impl Strategy<Value = Owned> {
        prop_oneof![
            any::<i64>().prop_map(Owned::Int),
            any::<u64>().prop_map(Owned::Uint),
            "\\PC{0,12}".prop_map(Owned::Str),
            prop::collection::vec(any::<u8>(), 0..12).prop_map(Owned::Bytes),
            prop::collection::vec(any::<u32>(), 0..4).prop_map(Owned::U32s),
            prop::collection::vec(any::<i64>(), 0..4).prop_map(Owned::I64s),
        ]
    }

    proptest! {
        #[test]
        fn arbitrary_values_never_panic(values in prop::collection::vec(owned(), 0..9)) {
            let cmd = RegisterCommand::parse(
                "ev s8 a; u64 b; char[4] c; unsigned char[3] d; struct s e 5; \
                 __data_loc char[] f; __rel_loc u32[] g; __data_loc s64[] h",
            )
            .unwrap();
            let values: Vec<PayloadValue<'_>> = values.iter().map(Owned::value).collect();
            let mut out = vec![0xAA];
            match encode_into(&cmd, &values, &mut out) {
                Ok(()) => prop_assert!(out.len() > cmd.payload_size() as usize),
                Err(_) => prop_assert_eq!(out, vec![0xAA]),
            }
        }
    }
}
