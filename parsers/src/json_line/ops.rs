//! The prepared path: each field's key rendered once and the way to write its value
//! derived once from its [`FieldPlan`] ([`Op`]), run by [`LineWriter::write_prepared`](super::LineWriter::write_prepared).

use super::escape::{write_c_string, write_key};
use super::text::Text;
use super::values::{int_bytes, write_int, write_int_slice, write_value};
use crate::decode::{Endian, FieldPlan, PlanKind};
use crate::location;
use crate::schema::{Element, Field, LocKind};

/// One field of a [`PreparedFormat`]: its key and how to write its value.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    /// `open"name":` for the first field, `,"name":` for the others.
    key: Text<32>,
    /// How to write the value (derived from `plan`).
    op: Op,
    /// How to read the value (the fallback).
    plan: FieldPlan,
}

/// A [`Step`] per field of `fields`; the first key starts with `open`.
pub(crate) fn steps(open: &[u8], fields: &[Field]) -> Box<[Step]> {
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
            Step {
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
    /// An integer field of 1, 2, 4 or 8 bytes (the `size:` matches) at this offset.
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
    /// A fixed array of 1, 2, 4 or 8-byte integers filling `start..end` exactly.
    Ints {
        start: usize,
        end: usize,
        width: u8,
        signed: bool,
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
            PlanKind::Int { width, signed } => match (width, signed) {
                (1, false) => Op::U8(start),
                (2, false) => Op::U16(start),
                (4, false) => Op::U32(start),
                (8, false) => Op::U64(start),
                (1, true) => Op::I8(start),
                (2, true) => Op::I16(start),
                (4, true) => Op::I32(start),
                (8, true) => Op::I64(start),
                _ => Op::Decode,
            },
            PlanKind::Array(Element::Char) => Op::Chars { start, end },
            PlanKind::Array(Element::Integer { size, signed }) => Op::Ints {
                start,
                end,
                width: size,
                signed,
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
    #[inline]
    pub(crate) fn write(self, out: &mut Vec<u8>, raw: &[u8], big: bool) -> bool {
        match self {
            Op::U8(at) => match raw.get(at) {
                Some(&b) => write_int(out, b),
                None => return false,
            },
            Op::I8(at) => match raw.get(at) {
                Some(&b) => write_int(out, b as i8),
                None => return false,
            },
            Op::U16(at) => match int_bytes(raw, at, big) {
                Some(b) => write_int(out, u16::from_le_bytes(b)),
                None => return false,
            },
            Op::I16(at) => match int_bytes(raw, at, big) {
                Some(b) => write_int(out, i16::from_le_bytes(b)),
                None => return false,
            },
            Op::U32(at) => match int_bytes(raw, at, big) {
                Some(b) => write_int(out, u32::from_le_bytes(b)),
                None => return false,
            },
            Op::I32(at) => match int_bytes(raw, at, big) {
                Some(b) => write_int(out, i32::from_le_bytes(b)),
                None => return false,
            },
            Op::U64(at) => match int_bytes(raw, at, big) {
                Some(b) => write_int(out, u64::from_le_bytes(b)),
                None => return false,
            },
            Op::I64(at) => match int_bytes(raw, at, big) {
                Some(b) => write_int(out, i64::from_le_bytes(b)),
                None => return false,
            },
            Op::Chars { start, end } => match raw.get(start..end) {
                Some(area) => write_c_string(out, area),
                None => return false,
            },
            Op::DynChars { offset, loc } => {
                let Some(value) = int_bytes(raw, offset, big) else {
                    return false;
                };
                let value = u32::from_le_bytes(value);
                match location::resolve(loc, offset, 4, value, raw.len()) {
                    Ok(range) => match raw.get(range) {
                        Some(data) => write_c_string(out, data),
                        None => return false,
                    },
                    Err(_) => return false,
                }
            }
            Op::Ints {
                start,
                end,
                width,
                signed,
            } => match raw.get(start..end) {
                Some(area) => return write_int_slice(out, area, width, signed, big),
                None => return false,
            },
            Op::Decode => return false,
        }
        true
    }
}

/// [`write_fields`] with prepared `steps` for `fields` (the same length), including the
/// object's opening (`open`, in the first step's key).
pub(crate) fn write_steps(
    out: &mut Vec<u8>,
    open: &[u8],
    steps: &[Step],
    raw: &[u8],
    endian: Endian,
) -> bool {
    if steps.is_empty() {
        out.extend_from_slice(open);
    }
    let big = endian == Endian::Big;
    let mut failed = false;
    for step in steps {
        step.key.write(out);
        if !step.op.write(out, raw, big) {
            failed |= write_value(out, &step.plan.read(raw, endian));
        }
    }
    out.push(b'}');
    failed
}
