//! The prepared path: each field's key rendered once and the way to write its value
//! derived once from its [`FieldPlan`] ([`Op`]), run by [`LineWriter::write_prepared`](super::LineWriter::write_prepared).

use super::escape::{write_c_string, write_c_string_at, write_key};
use super::line_buf::{LineBuf, LineBufParts, LineOut};
use super::numbers::write_int;
use super::text::Text;
use super::values::{IntKind, line_buf_int_slice, write_value};
use crate::decode::location;
use crate::decode::{Endian, FieldPlan, PlanKind};
use crate::schema::{Element, Field, LocKind};

/// One field of a [`PreparedFormat`]: its key and how to write its value.
#[derive(Debug, Clone)]
pub(crate) struct FieldStep {
    /// `open"name":` for the first field, `,"name":` for the others.
    key: Text<32>,
    /// How to write the value (derived from `plan`).
    op: Op,
    /// How to read the value (the fallback).
    plan: FieldPlan,
}

/// A [`FieldStep`] per field of `fields`; the first key starts with `open`.
pub(crate) fn steps(open: &[u8], fields: &[Field]) -> Box<[FieldStep]> {
    fields
        .iter()
        .enumerate()
        .map(|(i, field)| {
            let mut key = Vec::with_capacity(open.len() + field.name.len() + 4);
            if i == 0 {
                key.extend_from_slice(open);
            } else {
                key.push(b',');
            }
            write_key(&mut key, &field.name);
            FieldStep {
                key: Text::new(key),
                op: Op::of(&FieldPlan::of(field)),
                plan: FieldPlan::of(field),
            }
        })
        .collect()
}

/// How [`LineWriter::write_prepared`] writes a field, derived once from its
/// [`FieldPlan`] (which made the layout checks): the usual kinds read their bytes
/// directly (no [`Value`] in between); when a record does not fit (too short, location out
/// of bounds) or the kind is another one, the field goes through [`FieldPlan::read`] and
/// [`write_value`], which write the same bytes for what the direct path handles and
/// `null` plus an error for the rest.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Op {
    /// An integer field of 1, 2, 4 or 8 bytes (the `size:` matches) ending at this
    /// offset (the end, not the start: one comparison with the record's length checks
    /// it is there; from the start it took two and their combination).
    U8(usize),
    /// See [`Op::U8`].
    U16(usize),
    /// See [`Op::U8`].
    U32(usize),
    /// See [`Op::U8`].
    U64(usize),
    /// See [`Op::U8`].
    I8(usize),
    /// See [`Op::U8`].
    I16(usize),
    /// See [`Op::U8`].
    I32(usize),
    /// See [`Op::U8`].
    I64(usize),
    /// A fixed `char` array: the string up to the first NUL of `start..end`.
    Chars { start: usize, end: usize },
    /// A `__data_loc`/`__rel_loc` `char` string with a 4-byte location at `offset`.
    DynChars { offset: usize, loc: LocKind },
    /// A fixed array of integers of `kind` filling `start..end` exactly.
    Ints {
        start: usize,
        end: usize,
        kind: IntKind,
    },
    /// Anything else: [`FieldPlan::read`].
    Decode,
}

impl Op {
    /// The op for a field's `plan` (which made the layout checks): a direct one for the
    /// kinds the plan shows valid whenever their bytes are in the record.
    pub(crate) fn of(plan: &FieldPlan) -> Op {
        let start = plan.offset();
        let Some(end) = start.checked_add(plan.size()) else {
            return Op::Decode;
        };
        match plan.kind() {
            PlanKind::Int { width, signed } => {
                let Some(end) = start.checked_add(usize::from(width)) else {
                    return Op::Decode;
                };
                match (width, signed) {
                    (1, false) => Op::U8(end),
                    (2, false) => Op::U16(end),
                    (4, false) => Op::U32(end),
                    (8, false) => Op::U64(end),
                    (1, true) => Op::I8(end),
                    (2, true) => Op::I16(end),
                    (4, true) => Op::I32(end),
                    (8, true) => Op::I64(end),
                    _ => Op::Decode,
                }
            }
            PlanKind::Array(Element::Char) => Op::Chars { start, end },
            PlanKind::Array(Element::Integer { size, signed }) => match IntKind::of(size, signed) {
                Some(kind) => Op::Ints { start, end, kind },
                None => Op::Decode,
            },
            PlanKind::Dynamic {
                loc,
                elem: Element::Char,
            } if plan.size() == 4 => Op::DynChars { offset: start, loc },
            _ => Op::Decode,
        }
    }

    /// Write the value from `raw`; `false`, with nothing written, when the field must
    /// go through [`FieldPlan::read`] instead.
    #[inline(always)]
    pub(crate) fn write(self, out: &mut LineBuf<'_>, raw: &[u8], endian: Endian) -> bool {
        // The integer ending at `$end` as a `$t` in the record's byte order (one load and
        // a swap if big; swapping the bytes before the conversion made the compiler move
        // them one by one), widened to 64 bits.
        macro_rules! int {
            ($t:ty, $end:expr) => {
                match raw.get(..$end).and_then(<[u8]>::last_chunk) {
                    Some(&b) if endian == Endian::Big => <$t>::from_be_bytes(b).into(),
                    Some(&b) => <$t>::from_le_bytes(b).into(),
                    None => return false,
                }
            };
        }
        // One number writer for the unsigned kinds and one for the signed (each is
        // inlined where it is called).
        let number: Result<u64, i64> = match self {
            Op::U8(end) => Ok(int!(u8, end)),
            Op::U16(end) => Ok(int!(u16, end)),
            Op::U32(end) => Ok(int!(u32, end)),
            Op::U64(end) => Ok(int!(u64, end)),
            Op::I8(end) => Err(int!(i8, end)),
            Op::I16(end) => Err(int!(i16, end)),
            Op::I32(end) => Err(int!(i32, end)),
            Op::I64(end) => Err(int!(i64, end)),
            other => return other.write_other(out, raw, endian),
        };
        match number {
            Ok(u) => write_int(out, u),
            Err(s) => write_int(out, s),
        }
        true
    }

    /// [`Op::write`] for the kinds other than single integers.
    #[inline(always)]
    fn write_other(self, out: &mut LineBuf<'_>, raw: &[u8], endian: Endian) -> bool {
        match self {
            Op::Chars { start, end } => return write_c_string_at(out, raw, start, end),
            Op::DynChars { offset, loc } => {
                let value = match raw.get(offset..).and_then(<[u8]>::first_chunk) {
                    Some(&b) if endian == Endian::Big => u32::from_be_bytes(b),
                    Some(&b) => u32::from_le_bytes(b),
                    None => return false,
                };
                match location::resolve(loc, offset, 4, value, raw.len()) {
                    Ok(range) => match raw.get(range) {
                        Some(data) => write_c_string(out.vec(), data),
                        None => return false,
                    },
                    Err(_) => return false,
                }
            }
            Op::Ints { start, end, kind } => {
                let Some(area) = raw.get(start..end) else {
                    return false;
                };
                out.lend(|line| line_buf_int_slice(line, area, kind, endian));
            }
            Op::U8(_)
            | Op::U16(_)
            | Op::U32(_)
            | Op::U64(_)
            | Op::I8(_)
            | Op::I16(_)
            | Op::I32(_)
            | Op::I64(_)
            | Op::Decode => return false,
        }
        true
    }
}

/// [`write_fields`] with prepared `steps` for `fields` (the same length), including the
/// object's opening (`open`, in the first step's key), into a line buffer given as its parts
/// ([`LineBuf::lend`]); returns the position after the object and whether a field failed.
pub(crate) fn write_steps(
    line: LineBufParts<'_>,
    open: &[u8],
    steps: &[FieldStep],
    raw: &[u8],
    endian: Endian,
) -> (usize, bool) {
    let mut line = LineBuf::from_parts(line);
    if steps.is_empty() {
        line.extend(open);
    }
    let mut failed = false;
    for step in steps {
        step.key.write(&mut line);
        if !step.op.write(&mut line, raw, endian) {
            failed |= write_value(line.vec(), &step.plan.read(raw, endian));
        }
    }
    line.put_all(b"}");
    (line.into_parts().1, failed)
}
