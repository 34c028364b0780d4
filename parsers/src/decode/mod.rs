//! Raw trace-entry bytes + [`Field`] → a typed [`Value`] borrowing the bytes.
//!
//! The record is the trace entry exactly as `PERF_SAMPLE_RAW` delivers it: common fields
//! first (`common_type` at offset 0), then the event's fields, then the dynamic data. Field
//! offsets in the schema count from the start of the record. [`decode_field`] allocates
//! nothing: strings, bytes and integer arrays are views into the record.
//!
//! Rules (one per field kind):
//! - [`FieldKind::Integer`]: the field's `size:` bytes must equal the integer width;
//! - `char` data (fixed arrays, dynamic, rest-of-record): [`Value::Str`] up to the first
//!   NUL; **without a NUL the whole area is the string and nothing is reported** (the
//!   kernel insists on a trailing NUL for user_events strings, but ftrace fixed `char[N]`
//!   fields such as `comm` may fill all N bytes, so a missing NUL is not an error);
//! - byte data (`unsigned char`, `u8`, unknown element types): [`Value::Bytes`];
//! - wider integer elements: [`Value::IntArray`]; the data length must be a multiple of the
//!   element size;
//! - dynamic fields: located by [`location::resolve`], which bounds-checks;
//! - rest-of-record fields (`size: 0`): from the field offset to the end of the record.
//!   PERF_SAMPLE_RAW pads records to a multiple of 8 bytes (minus the 4-byte size), so the
//!   rest of the record may end in up to 7 padding bytes: a `char` rest stops at the first
//!   NUL, byte and integer rests include the padding (the record has no other length);
//! - `struct T` and unknown kinds: [`Value::Bytes`] of the field's area.
//!
//! A field that cannot be decoded (record too short, location out of bounds, bad sizes) is
//! a [`Value::Error`] naming the problem; the other fields still decode.

mod error;
pub(crate) mod location;

use crate::schema::{Element, Field, FieldKind, LocKind};
pub use error::DecodeError;

pub use crate::bytes::Endian;

/// One decoded field, borrowing the record bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    /// A signed integer (sign-extended from its width).
    Signed(i64),
    /// An unsigned integer.
    Unsigned(u64),
    /// `char` data up to the first NUL (or the whole area without one); not validated as
    /// UTF-8.
    Str(&'a [u8]),
    /// Raw bytes (byte arrays, `struct T`, unknown kinds).
    Bytes(&'a [u8]),
    /// An array of integers wider than a byte (or explicitly signed bytes).
    IntArray(IntArray<'a>),
    /// The field could not be decoded.
    Error(DecodeError),
}

/// A view of an integer array inside a record; elements are read on iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntArray<'a> {
    bytes: &'a [u8],
    width: u8,
    signed: bool,
    endian: Endian,
}

impl<'a> IntArray<'a> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        // The width is 1, 2, 4 or 8 (elem_check): never 0.
        (self.bytes.len())
            .checked_div(usize::from(self.width))
            .unwrap_or(0)
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The raw element bytes, the element width (1, 2, 4 or 8), signedness and byte
    /// order: for writers that read the elements in a loop of their own.
    pub fn parts(&self) -> (&'a [u8], u8, bool, Endian) {
        (self.bytes, self.width, self.signed, self.endian)
    }

    /// Element `i` (a [`Value::Signed`] or [`Value::Unsigned`]), read where it lies;
    /// `None` past the end.
    #[inline]
    pub fn get(&self, i: usize) -> Option<Value<'static>> {
        let width = usize::from(self.width);
        let start = i.checked_mul(width)?;
        let bytes = self.bytes.get(start..start.checked_add(width)?)?;
        Some(read_int(bytes, self.signed, self.endian))
    }

    /// The elements, each a [`Value::Signed`] or [`Value::Unsigned`].
    pub fn iter(&self) -> impl Iterator<Item = Value<'static>> + 'a {
        let (signed, endian) = (self.signed, self.endian);
        self.bytes
            .chunks_exact(usize::from(self.width))
            .map(move |b| read_int(b, signed, endian))
    }
}

/// Decode `field` from the record `raw` (common fields first, offsets from the schema):
/// [`FieldPlan::of`] then [`FieldPlan::read`].
///
/// Never panics; a field that cannot be decoded is a [`Value::Error`].
///
/// ```
/// use uevrec_parsers::{decode_field, Endian, Value};
/// use uevrec_parsers::resolve_decl;
/// use uevrec_parsers::Field;
/// let d = resolve_decl("__data_loc char[] msg", 4, Some(true)).unwrap();
/// let field = Field { name: d.name, type_text: d.type_text, offset: 8, size: 4, signed: Some(true), kind: d.kind };
/// let mut raw = vec![0u8; 8];
/// raw.extend_from_slice(&((3u32 << 16) | 12).to_le_bytes());
/// raw.extend_from_slice(b"hi\0");
/// assert_eq!(decode_field(&field, &raw, Endian::Little), Value::Str(b"hi"));
/// ```
pub fn decode_field<'a>(field: &Field, raw: &'a [u8], endian: Endian) -> Value<'a> {
    FieldPlan::of(field).read(raw, endian)
}

/// How one field is read, compiled once from its schema: THE place where a field's
/// layout is checked (integer widths and sizes, array element sizes, location sizes).
/// [`FieldPlan::read`] (the decoder) and the JSON writer's prepared path
/// ([`crate::json_line::PreparedFormat`]) both run it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldPlan {
    /// Field offset from the schema.
    offset: u32,
    /// Field size from the schema.
    size: u32,
    /// What the field's area holds.
    kind: PlanKind,
}

/// What a [`FieldPlan`] reads from the field's area (checked in bounds first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanKind {
    /// An integer whose width (1, 2, 4 or 8) equals the field's size.
    Int {
        /// Its width in bytes.
        width: u8,
        /// Signed or not.
        signed: bool,
    },
    /// A fixed array filling the area; for integer elements the area is a whole number
    /// of elements of width 1, 2, 4 or 8.
    Array(Element),
    /// A `__data_loc`/`__rel_loc` location of 4 bytes (or 2: legacy offset-only).
    Dynamic {
        /// Which offset rule.
        loc: LocKind,
        /// What the located data holds.
        elem: Element,
    },
    /// From the field's offset to the end of the record (`size: 0` arrays).
    Rest(Element),
    /// The area as bytes (`struct T`, unknown kinds).
    Bytes,
    /// The schema itself is wrong for this field: every record gives this error once the
    /// area is in bounds.
    Invalid(DecodeError),
}

impl FieldPlan {
    /// The plan for `field`.
    pub fn of(field: &Field) -> FieldPlan {
        let kind = match field.kind {
            FieldKind::Integer {
                size: width,
                signed,
            } => match int_check(field.size as usize, width) {
                Ok(()) => PlanKind::Int { width, signed },
                Err(e) => PlanKind::Invalid(e),
            },
            FieldKind::FixedArray { elem, .. } => match elem_check(field.size as usize, elem) {
                Ok(()) => PlanKind::Array(elem),
                Err(e) => PlanKind::Invalid(e),
            },
            FieldKind::Dynamic { loc, elem } => match field.size {
                2 | 4 => PlanKind::Dynamic { loc, elem },
                size => PlanKind::Invalid(DecodeError::LocationSize {
                    loc,
                    size: size as usize,
                }),
            },
            FieldKind::RestOfRecord { elem } => PlanKind::Rest(elem),
            FieldKind::Struct { .. } | FieldKind::Unknown => PlanKind::Bytes,
        };
        FieldPlan {
            offset: field.offset,
            size: field.size,
            kind,
        }
    }

    /// The field's offset in the record.
    pub fn offset(&self) -> usize {
        self.offset as usize
    }

    /// The field's size in the record (`size:`).
    pub fn size(&self) -> usize {
        self.size as usize
    }

    /// What the plan reads.
    pub fn kind(&self) -> PlanKind {
        self.kind
    }

    /// The field's area in `raw` (`offset..offset + size`), if the record holds it.
    #[inline]
    pub fn area<'a>(&self, raw: &'a [u8]) -> Option<&'a [u8]> {
        let offset = self.offset as usize;
        raw.get(offset..offset.checked_add(self.size as usize)?)
    }

    /// Decode the field from the record `raw`. Never panics; a field that cannot be
    /// decoded is a [`Value::Error`] (a record too short for the field's area first,
    /// then what is wrong with the schema or the data).
    pub fn read<'a>(&self, raw: &'a [u8], endian: Endian) -> Value<'a> {
        let Some(area) = self.area(raw) else {
            return Value::Error(self.truncated(raw.len()));
        };
        match self.kind {
            PlanKind::Int { signed, .. } => read_int(area, signed, endian),
            PlanKind::Array(elem) => array(area, elem, endian),
            PlanKind::Dynamic { loc, elem } => {
                let value = match *area {
                    [a, b, c, d] => read_u32([a, b, c, d], endian),
                    [a, b] => u32::from(read_u16([a, b], endian)),
                    _ => 0, // `of` allows 2 and 4 only
                };
                let offset = self.offset as usize;
                match location::resolve(loc, offset, area.len(), value, raw.len()) {
                    Ok(range) => match raw.get(range) {
                        Some(data) => array(data, elem, endian),
                        None => Value::Error(self.truncated(raw.len())),
                    },
                    Err(e) => Value::Error(e),
                }
            }
            // `area` being in bounds proves `offset <= raw.len()`.
            PlanKind::Rest(elem) => array(
                raw.get(self.offset as usize..).unwrap_or_default(),
                elem,
                endian,
            ),
            PlanKind::Bytes => Value::Bytes(area),
            PlanKind::Invalid(e) => Value::Error(e),
        }
    }

    fn truncated(&self, record_len: usize) -> DecodeError {
        DecodeError::Truncated {
            offset: self.offset,
            size: self.size,
            record_len,
        }
    }
}

/// The rule for an integer of `width` bytes in a field of `size` bytes.
fn int_check(size: usize, width: u8) -> Result<(), DecodeError> {
    if !matches!(width, 1 | 2 | 4 | 8) {
        Err(DecodeError::IntegerWidth { width })
    } else if size != usize::from(width) {
        Err(DecodeError::IntegerSize {
            size: size as u32,
            width,
        })
    } else {
        Ok(())
    }
}

/// The rule for `len` bytes of array data of element type `elem`: integer elements are
/// 1, 2, 4 or 8 bytes wide and the data is a whole number of them.
fn elem_check(len: usize, elem: Element) -> Result<(), DecodeError> {
    match elem {
        Element::Char | Element::Byte => Ok(()),
        Element::Integer { size, .. } if !matches!(size, 1 | 2 | 4 | 8) => {
            Err(DecodeError::IntegerWidth { width: size })
        }
        // size is 1, 2, 4 or 8 here.
        Element::Integer { size, .. } if len.checked_rem(usize::from(size)) != Some(0) => {
            Err(DecodeError::NotMultiple {
                len,
                elem_size: size,
            })
        }
        Element::Integer { .. } => Ok(()),
    }
}

/// Array data (fixed, dynamic or rest-of-record) of element type `elem`.
fn array(data: &[u8], elem: Element, endian: Endian) -> Value<'_> {
    if let Err(e) = elem_check(data.len(), elem) {
        return Value::Error(e);
    }
    match elem {
        Element::Char => {
            let end = memchr::memchr(0, data).unwrap_or(data.len());
            Value::Str(&data[..end])
        }
        Element::Byte => Value::Bytes(data),
        Element::Integer { size, signed } => Value::IntArray(IntArray {
            bytes: data,
            width: size,
            signed,
            endian,
        }),
    }
}

fn read_u16(b: [u8; 2], endian: Endian) -> u16 {
    match endian {
        Endian::Little => u16::from_le_bytes(b),
        Endian::Big => u16::from_be_bytes(b),
    }
}

fn read_u32(b: [u8; 4], endian: Endian) -> u32 {
    match endian {
        Endian::Little => u32::from_le_bytes(b),
        Endian::Big => u32::from_be_bytes(b),
    }
}

/// THE integer reader: `b` is 1, 2, 4 or 8 bytes (callers check); other lengths yield
/// [`DecodeError::IntegerWidth`].
fn read_int(b: &[u8], signed: bool, endian: Endian) -> Value<'static> {
    let (unsigned, bits) = match *b {
        [a] => (u64::from(a), 8),
        [a, c] => (u64::from(read_u16([a, c], endian)), 16),
        [a, c, d, e] => (u64::from(read_u32([a, c, d, e], endian)), 32),
        [a, c, d, e, f, g, h, i] => {
            let bytes = [a, c, d, e, f, g, h, i];
            let v = match endian {
                Endian::Little => u64::from_le_bytes(bytes),
                Endian::Big => u64::from_be_bytes(bytes),
            };
            (v, 64)
        }
        _ => {
            let width = u8::try_from(b.len()).unwrap_or(u8::MAX);
            return Value::Error(DecodeError::IntegerWidth { width });
        }
    };
    if signed {
        // bits is 8, 16, 32 or 64.
        #[allow(clippy::arithmetic_side_effects)]
        let shift = 64 - bits;
        Value::Signed(((unsigned << shift) as i64) >> shift)
    } else {
        Value::Unsigned(unsigned)
    }
}

// Tests compute with the values they pick.
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;
    use crate::field_type::resolve_field;

    fn field(decl: &str, offset: u32, size: u32, signed: bool) -> Field {
        resolve_field(decl, offset, size, Some(signed)).unwrap()
    }

    #[test]
    fn integers_every_width_and_sign_both_endians() {
        let raw = [0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9, 0x80];
        let le = Endian::Little;
        assert_eq!(
            decode_field(&field("s8 a", 0, 1, true), &raw, le),
            Value::Signed(-1)
        );
        assert_eq!(
            decode_field(&field("u8 a", 0, 1, false), &raw, le),
            Value::Unsigned(0xff)
        );
        assert_eq!(
            decode_field(&field("s16 a", 0, 2, true), &raw, le),
            Value::Signed(-257)
        );
        assert_eq!(
            decode_field(&field("u16 a", 0, 2, false), &raw, le),
            Value::Unsigned(0xfeff)
        );
        assert_eq!(
            decode_field(&field("s32 a", 0, 4, true), &raw, le),
            Value::Signed(i64::from(i32::from_le_bytes([0xff, 0xfe, 0xfd, 0xfc])))
        );
        assert_eq!(
            decode_field(&field("u32 a", 0, 4, false), &raw, le),
            Value::Unsigned(0xfcfdfeff)
        );
        assert_eq!(
            decode_field(&field("s64 a", 0, 8, true), &raw, le),
            Value::Signed(i64::from_le_bytes(raw))
        );
        assert_eq!(
            decode_field(&field("u64 a", 0, 8, false), &raw, Endian::Big),
            Value::Unsigned(u64::from_be_bytes(raw))
        );
        assert_eq!(
            decode_field(&field("u16 a", 0, 2, false), &raw, Endian::Big),
            Value::Unsigned(0xfffe)
        );
    }

    #[test]
    fn integer_size_mismatch_is_an_error() {
        let mut f = field("u32 a", 0, 4, false);
        f.size = 2;
        assert_eq!(
            decode_field(&f, &[0; 8], Endian::Little),
            Value::Error(DecodeError::IntegerSize { size: 2, width: 4 })
        );
        f.kind = FieldKind::Integer {
            size: 3,
            signed: false,
        };
        f.size = 3;
        assert_eq!(
            decode_field(&f, &[0; 8], Endian::Little),
            Value::Error(DecodeError::IntegerWidth { width: 3 })
        );
    }

    #[test]
    fn truncated_record_names_the_field_area() {
        let f = field("u64 a", 4, 8, false);
        let v = decode_field(&f, &[0; 11], Endian::Little);
        assert_eq!(
            v,
            Value::Error(DecodeError::Truncated {
                offset: 4,
                size: 8,
                record_len: 11
            })
        );
        let Value::Error(e) = v else { unreachable!() };
        assert!(
            e.to_string()
                .starts_with("record too short: field at offset 4 size 8 > record length 11")
        );
        let f = Field {
            offset: u32::MAX,
            size: u32::MAX,
            ..f
        };
        assert!(matches!(
            decode_field(&f, &[0; 11], Endian::Little),
            Value::Error(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn strings_stop_at_nul_or_take_the_area() {
        let raw = b"abc\0def\0ghij";
        assert_eq!(
            decode_field(&field("char s[8]", 0, 8, true), raw, Endian::Little),
            Value::Str(b"abc")
        );
        assert_eq!(
            decode_field(&field("char s[4]", 8, 4, true), raw, Endian::Little),
            Value::Str(b"ghij")
        );
        assert_eq!(
            decode_field(
                &field("unsigned char s[4]", 0, 4, false),
                raw,
                Endian::Little
            ),
            Value::Bytes(b"abc\0")
        );
        assert_eq!(
            decode_field(&field("char rest[]", 4, 0, true), raw, Endian::Little),
            Value::Str(b"def")
        );
        assert_eq!(
            decode_field(&field("u8 rest[]", 8, 0, false), raw, Endian::Little),
            Value::Bytes(b"ghij")
        );
        assert_eq!(
            decode_field(&field("u8 rest[]", 12, 0, false), raw, Endian::Little),
            Value::Bytes(b"")
        );
        assert!(matches!(
            decode_field(&field("u8 rest[]", 13, 0, false), raw, Endian::Little),
            Value::Error(DecodeError::Truncated {
                offset: 13,
                size: 0,
                record_len: 12
            })
        ));
    }

    #[test]
    fn dynamic_fields_both_kinds_and_endians() {
        let mut raw = vec![0u8; 8];
        raw.extend_from_slice(&((4u32 << 16) | 16).to_le_bytes()); // data_loc at 8 → 16..20
        raw.extend_from_slice(&((4u32 << 16) | 4).to_le_bytes()); // rel_loc at 12 → 20..24
        raw.extend_from_slice(b"hey\0");
        raw.extend_from_slice(&[1, 0, 2, 0]);
        let d = field("__data_loc char[] d", 8, 4, true);
        let r = field("__rel_loc u16[] r", 12, 4, false);
        assert_eq!(decode_field(&d, &raw, Endian::Little), Value::Str(b"hey"));
        let Value::IntArray(a) = decode_field(&r, &raw, Endian::Little) else {
            panic!("not an array")
        };
        assert_eq!(
            a.iter().collect::<Vec<_>>(),
            [Value::Unsigned(1), Value::Unsigned(2)]
        );
        // Big-endian: location values and elements both swap.
        let mut be = raw.clone();
        be[8..12].copy_from_slice(&((4u32 << 16) | 16).to_be_bytes());
        be[12..16].copy_from_slice(&((4u32 << 16) | 4).to_be_bytes());
        assert_eq!(decode_field(&d, &be, Endian::Big), Value::Str(b"hey"));
        let Value::IntArray(a) = decode_field(&r, &be, Endian::Big) else {
            panic!("not an array")
        };
        assert_eq!(
            a.iter().collect::<Vec<_>>(),
            [Value::Unsigned(256), Value::Unsigned(512)]
        );
    }

    #[test]
    fn dynamic_errors_do_not_stop_other_fields() {
        let mut raw = vec![0u8; 8];
        raw.extend_from_slice(&((10u32 << 16) | 300).to_le_bytes());
        raw.extend_from_slice(&((3u32 << 16) | 12).to_le_bytes());
        raw.extend_from_slice(&[1, 2, 3, 4]);
        let bad = field("__rel_loc char[] msg", 8, 4, true);
        let v = decode_field(&bad, &raw, Endian::Little);
        let Value::Error(e) = v else {
            panic!("expected an error, got {v:?}")
        };
        assert_eq!(
            e.to_string(),
            "__rel_loc out of bounds: offset 312 + length 10 > record length 20"
        );
        let odd = field("__data_loc u32[] v", 12, 4, false);
        let v = decode_field(&odd, &raw, Endian::Little);
        assert_eq!(
            v,
            Value::Error(DecodeError::NotMultiple {
                len: 3,
                elem_size: 4
            })
        );
        let fine = field("u32 x", 16, 4, false);
        assert_eq!(
            decode_field(&fine, &raw, Endian::Little),
            Value::Unsigned(0x04030201)
        );
    }

    #[test]
    fn legacy_two_byte_data_loc() {
        let mut raw = vec![0u8; 8];
        raw.extend_from_slice(&12u16.to_le_bytes());
        raw.extend_from_slice(&[0, 0]);
        raw.extend_from_slice(b"tail");
        let f = field("__data_loc char[] s", 8, 2, true);
        assert_eq!(decode_field(&f, &raw, Endian::Little), Value::Str(b"tail"));
    }

    #[test]
    fn struct_and_unknown_are_bytes() {
        let raw = [1, 2, 3, 4, 5];
        assert_eq!(
            decode_field(&field("struct foo f", 1, 3, false), &raw, Endian::Little),
            Value::Bytes(&[2, 3, 4])
        );
        assert_eq!(
            decode_field(&field("__int128 x", 0, 5, true), &raw, Endian::Little),
            Value::Bytes(&raw)
        );
    }
}
