//! The common part of CEL compiled for one event format into a tree evaluated on the
//! decoded values without CEL's interpreter: integer and string constants, the record's
//! numbers and names, plain fields (integers, `char` strings, an element of an integer
//! array), `+ - * / %`, the six comparisons, `&&`, `||`, `!`. A condition with anything
//! else runs in CEL's interpreter ([`super::condition`]). The answers are CEL's: integer
//! overflow, division by zero, a missing field and mismatched types are errors, and
//! `&&`/`||` absorb an error when the other side decides (the proptest in
//! `super::tests` checks the two against each other).

use std::cmp::Ordering;

use cel::common::ast::{Expr, IdedExpr, LiteralValue};
use uevrec_parsers::{Element, Endian, FieldPlan, PlanKind, RecordStamp, Value};

/// A record's number or name.
#[derive(Debug, Clone, Copy)]
pub(super) enum Var {
    System,
    Event,
    Cpu,
    Pid,
    Tid,
}

/// A binary operator.
#[derive(Debug, Clone, Copy)]
pub(super) enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A compiled node.
#[derive(Debug, Clone)]
pub(super) enum Fast {
    /// An `int` constant.
    Int(i64),
    /// A `string` constant.
    Str(Box<str>),
    /// A `bool` constant.
    Bool(bool),
    /// A record variable.
    Var(Var),
    /// A plain field (its plan).
    Field(FieldPlan),
    /// A field this format lacks: always an error (CEL's missing key).
    Missing,
    /// An element of an integer array field.
    Element(FieldPlan, Box<Fast>),
    /// A binary operator.
    Bin(Op, Box<Fast>, Box<Fast>),
    /// `&&`.
    And(Box<Fast>, Box<Fast>),
    /// `||`.
    Or(Box<Fast>, Box<Fast>),
    /// `!`.
    Not(Box<Fast>),
    /// A comparison of two integer subtrees ([`Num`]): the common case, evaluated
    /// without the general value type.
    CmpNum(Op, Box<Num>, Box<Num>),
}

/// An integer subtree: constants, `cpu`/`pid`/`tid`, integer fields, elements of
/// integer arrays, and arithmetic on them.
#[derive(Debug, Clone)]
pub(super) enum Num {
    /// A constant.
    Const(i64),
    /// `cpu`, `pid` or `tid`.
    Var(Var),
    /// An integer at a fixed place of the record (an integer field, or a constant
    /// element of a fixed array): read there, nothing else decoded.
    Fixed {
        /// Where it starts.
        offset: usize,
        /// 1, 2, 4 or 8 bytes.
        width: u8,
        /// Signed or not.
        signed: bool,
    },
    /// A constant element of an integer array field (`fields.args[1]`).
    ElementAt(FieldPlan, usize),
    /// An element of an integer array field.
    Element(FieldPlan, Box<Num>),
    /// `+ - * / %`.
    Bin(Op, Box<Num>, Box<Num>),
}

/// An integer value: CEL's `int`, or `uint` above `i64::MAX`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum N {
    Int(i64),
    UInt(u64),
}

/// A value while evaluating.
#[derive(Debug, Clone, PartialEq)]
enum V<'a> {
    Int(i64),
    UInt(u64),
    Str(std::borrow::Cow<'a, str>),
    Bool(bool),
}

/// What a record is judged on.
pub(super) struct Record<'a> {
    /// The tracepoint system and event.
    pub system: &'a str,
    /// The event.
    pub event: &'a str,
    /// Time, cpu, pid, tid.
    pub stamp: &'a RecordStamp,
    /// The record.
    pub raw: &'a [u8],
    /// Its byte order.
    pub endian: Endian,
}

impl Fast {
    /// Compile `expr` for an event with `fields` (name, plan; none for EventHeader
    /// events); `None` when it has anything this does not evaluate.
    pub(super) fn compile(expr: &IdedExpr, fields: &[(String, FieldPlan)]) -> Option<Fast> {
        Some(match &expr.expr {
            Expr::Literal(LiteralValue::Int(i)) => Fast::Int(i64::from(*i)),
            Expr::Literal(LiteralValue::String(s)) => Fast::Str(s.to_string().into()),
            Expr::Literal(LiteralValue::Boolean(b)) => Fast::Bool(bool::from(*b)),
            Expr::Ident(name) => Fast::Var(match name.as_str() {
                "system" => Var::System,
                "event" => Var::Event,
                "cpu" => Var::Cpu,
                "pid" => Var::Pid,
                "tid" => Var::Tid,
                _ => return None,
            }),
            Expr::Select(s) if !s.test => match &s.operand.expr {
                Expr::Ident(r) if r == "fields" => match fields.iter().find(|(n, _)| *n == s.field)
                {
                    Some((_, plan)) if scalar(plan) => Fast::Field(*plan),
                    Some(_) => return None,
                    None => Fast::Missing,
                },
                _ => return None,
            },
            Expr::Call(call) if call.target.is_none() => {
                let args = &call.args;
                let bin = |op| -> Option<Fast> {
                    let [a, b] = args.as_slice() else { return None };
                    Some(Fast::Bin(
                        op,
                        Box::new(Fast::compile(a, fields)?),
                        Box::new(Fast::compile(b, fields)?),
                    ))
                };
                match call.func_name.as_str() {
                    "_+_" => bin(Op::Add)?,
                    "_-_" => bin(Op::Sub)?,
                    "_*_" => bin(Op::Mul)?,
                    "_/_" => bin(Op::Div)?,
                    "_%_" => bin(Op::Rem)?,
                    "_==_" => bin(Op::Eq)?,
                    "_!=_" => bin(Op::Ne)?,
                    "_<_" => bin(Op::Lt)?,
                    "_<=_" => bin(Op::Le)?,
                    "_>_" => bin(Op::Gt)?,
                    "_>=_" => bin(Op::Ge)?,
                    "_&&_" | "_||_" => {
                        let [a, b] = args.as_slice() else { return None };
                        let (a, b) = (
                            Box::new(Fast::compile(a, fields)?),
                            Box::new(Fast::compile(b, fields)?),
                        );
                        if call.func_name == "_&&_" {
                            Fast::And(a, b)
                        } else {
                            Fast::Or(a, b)
                        }
                    }
                    "!_" => {
                        let [a] = args.as_slice() else { return None };
                        Fast::Not(Box::new(Fast::compile(a, fields)?))
                    }
                    "_[_]" => {
                        let [list, index] = args.as_slice() else {
                            return None;
                        };
                        let Expr::Select(s) = &list.expr else {
                            return None;
                        };
                        let Expr::Ident(r) = &s.operand.expr else {
                            return None;
                        };
                        if r != "fields" || s.test {
                            return None;
                        }
                        let (_, plan) = fields.iter().find(|(n, _)| *n == s.field)?;
                        if !int_array(plan) {
                            return None;
                        }
                        Fast::Element(*plan, Box::new(Fast::compile(index, fields)?))
                    }
                    _ => return None,
                }
            }
            _ => return None,
        })
    }

    /// `self` with every comparison of two integer subtrees made a [`Fast::CmpNum`].
    pub(super) fn specialized(self) -> Fast {
        match self {
            Fast::Bin(op, a, b) if op.compares() => match (a.num(), b.num()) {
                (Some(x), Some(y)) => Fast::CmpNum(op, Box::new(x), Box::new(y)),
                _ => Fast::Bin(op, a, b),
            },
            Fast::And(a, b) => Fast::And(Box::new(a.specialized()), Box::new(b.specialized())),
            Fast::Or(a, b) => Fast::Or(Box::new(a.specialized()), Box::new(b.specialized())),
            Fast::Not(a) => Fast::Not(Box::new(a.specialized())),
            other => other,
        }
    }

    /// This subtree as a [`Num`], when it is one.
    fn num(&self) -> Option<Num> {
        Some(match self {
            Fast::Int(i) => Num::Const(*i),
            Fast::Var(v @ (Var::Cpu | Var::Pid | Var::Tid)) => Num::Var(*v),
            Fast::Field(plan) => match plan.kind() {
                PlanKind::Int { width, signed } => Num::Fixed {
                    offset: plan.offset(),
                    width,
                    signed,
                },
                _ => return None,
            },
            Fast::Element(plan, index) => match (index.as_ref(), plan.kind()) {
                (Fast::Int(i), PlanKind::Array(Element::Integer { size, signed }))
                    if *i >= 0
                        && (*i as usize).saturating_add(1) * usize::from(size) <= plan.size() =>
                {
                    Num::Fixed {
                        offset: plan.offset() + *i as usize * usize::from(size),
                        width: size,
                        signed,
                    }
                }
                (Fast::Int(i), _) if *i >= 0 => Num::ElementAt(*plan, usize::try_from(*i).ok()?),
                (index, _) => Num::Element(*plan, Box::new(index.num()?)),
            },
            Fast::Bin(op, a, b) if !op.compares() => {
                Num::Bin(*op, Box::new(a.num()?), Box::new(b.num()?))
            }
            _ => return None,
        })
    }

    /// Whether the record is kept: `Ok(bool)`, or `Err(())` where CEL errs.
    pub(super) fn holds(&self, r: &Record<'_>) -> Result<bool, ()> {
        if let Fast::CmpNum(op, a, b) = self {
            return Ok(compare(*op, a.eval(r)?, b.eval(r)?));
        }
        match self.eval(r)? {
            V::Bool(b) => Ok(b),
            _ => Err(()),
        }
    }

    fn eval<'a>(&'a self, r: &Record<'a>) -> Result<V<'a>, ()> {
        Ok(match self {
            Fast::Int(i) => V::Int(*i),
            Fast::Str(s) => V::Str(std::borrow::Cow::Borrowed(s)),
            Fast::Bool(b) => V::Bool(*b),
            Fast::Var(v) => match v {
                Var::System => V::Str(r.system.into()),
                Var::Event => V::Str(r.event.into()),
                Var::Cpu => V::Int(i64::from(r.stamp.cpu)),
                Var::Pid => V::Int(i64::from(r.stamp.pid)),
                Var::Tid => V::Int(i64::from(r.stamp.tid)),
            },
            Fast::Field(plan) => value(plan.read(r.raw, r.endian))?,
            Fast::Missing => return Err(()),
            Fast::Element(plan, index) => {
                let Value::IntArray(a) = plan.read(r.raw, r.endian) else {
                    return Err(());
                };
                let i = match index.eval(r)? {
                    V::Int(i) => usize::try_from(i).map_err(|_| ())?,
                    V::UInt(u) => usize::try_from(u).map_err(|_| ())?,
                    _ => return Err(()),
                };
                value(a.get(i).ok_or(())?)?
            }
            Fast::CmpNum(op, a, b) => V::Bool(compare(*op, a.eval(r)?, b.eval(r)?)),
            Fast::Not(a) => match a.eval(r)? {
                V::Bool(b) => V::Bool(!b),
                _ => return Err(()),
            },
            Fast::And(a, b) => logic(a.eval(r), || b.eval(r), false)?,
            Fast::Or(a, b) => logic(a.eval(r), || b.eval(r), true)?,
            Fast::Bin(op, a, b) => binary(*op, a.eval(r)?, b.eval(r)?)?,
        })
    }
}

impl Op {
    /// Whether it is one of the six comparisons.
    fn compares(self) -> bool {
        matches!(self, Op::Eq | Op::Ne | Op::Lt | Op::Le | Op::Gt | Op::Ge)
    }
}

impl Num {
    fn eval(&self, r: &Record<'_>) -> Result<N, ()> {
        match self {
            Num::Const(i) => Ok(N::Int(*i)),
            Num::Var(Var::Cpu) => Ok(N::Int(i64::from(r.stamp.cpu))),
            Num::Var(Var::Pid) => Ok(N::Int(i64::from(r.stamp.pid))),
            Num::Var(_) => Ok(N::Int(i64::from(r.stamp.tid))),
            Num::Fixed {
                offset,
                width,
                signed,
            } => fixed(r.raw, *offset, *width, *signed, r.endian),
            Num::ElementAt(plan, i) => element(plan, *i, r),
            Num::Element(plan, index) => {
                let i = match index.eval(r)? {
                    N::Int(i) => usize::try_from(i).map_err(|_| ())?,
                    N::UInt(u) => usize::try_from(u).map_err(|_| ())?,
                };
                element(plan, i, r)
            }
            Num::Bin(op, a, b) => arithmetic(*op, a.eval(r)?, b.eval(r)?),
        }
    }
}

/// The integer of `width` bytes at `offset` of `raw` (an error past its end).
#[inline]
fn fixed(raw: &[u8], offset: usize, width: u8, signed: bool, endian: Endian) -> Result<N, ()> {
    let bytes = raw.get(offset..offset + usize::from(width)).ok_or(())?;
    let u = match *bytes {
        [a] => u64::from(a),
        [a, b] if endian.is_big() => u64::from(u16::from_be_bytes([a, b])),
        [a, b] => u64::from(u16::from_le_bytes([a, b])),
        [a, b, c, d] if endian.is_big() => u64::from(u32::from_be_bytes([a, b, c, d])),
        [a, b, c, d] => u64::from(u32::from_le_bytes([a, b, c, d])),
        _ => {
            let b: [u8; 8] = bytes.try_into().map_err(|_| ())?;
            if endian.is_big() {
                u64::from_be_bytes(b)
            } else {
                u64::from_le_bytes(b)
            }
        }
    };
    Ok(if signed {
        // Sign-extend from `width` bytes (1, 2, 4 or 8).
        let shift = 64 - 8 * u32::from(width);
        N::Int(((u << shift) as i64) >> shift)
    } else {
        i64::try_from(u).map_or(N::UInt(u), N::Int)
    })
}

/// Element `i` of the integer array `plan` reads.
#[inline]
fn element(plan: &FieldPlan, i: usize, r: &Record<'_>) -> Result<N, ()> {
    match plan.read(r.raw, r.endian) {
        Value::IntArray(a) => int(a.get(i).ok_or(())?),
        _ => Err(()),
    }
}

/// A decoded integer as an [`N`] (`int` when it fits).
#[inline]
fn int(v: Value<'_>) -> Result<N, ()> {
    match v {
        Value::Signed(i) => Ok(N::Int(i)),
        Value::Unsigned(u) => Ok(i64::try_from(u).map_or(N::UInt(u), N::Int)),
        _ => Err(()),
    }
}

/// A comparison of two integers (`int` and `uint` compare by value, as in CEL).
#[inline]
fn compare(op: Op, a: N, b: N) -> bool {
    let o = match (a, b) {
        (N::Int(x), N::Int(y)) => x.cmp(&y),
        (N::UInt(x), N::UInt(y)) => x.cmp(&y),
        (N::Int(x), N::UInt(y)) => {
            if x < 0 {
                Ordering::Less
            } else {
                (x as u64).cmp(&y)
            }
        }
        (N::UInt(x), N::Int(y)) => {
            if y < 0 {
                Ordering::Greater
            } else {
                x.cmp(&(y as u64))
            }
        }
    };
    match op {
        Op::Eq => o == Ordering::Equal,
        Op::Ne => o != Ordering::Equal,
        Op::Lt => o == Ordering::Less,
        Op::Le => o != Ordering::Greater,
        Op::Gt => o == Ordering::Greater,
        _ => o != Ordering::Less,
    }
}

/// CEL's integer arithmetic: overflow, division by zero and `int` with `uint` are
/// errors.
#[inline]
fn arithmetic(op: Op, a: N, b: N) -> Result<N, ()> {
    match (a, b) {
        (N::Int(x), N::Int(y)) => match op {
            Op::Add => x.checked_add(y),
            Op::Sub => x.checked_sub(y),
            Op::Mul => x.checked_mul(y),
            Op::Div => x.checked_div(y),
            _ => x.checked_rem(y),
        }
        .map(N::Int)
        .ok_or(()),
        (N::UInt(x), N::UInt(y)) => match op {
            Op::Add => x.checked_add(y),
            Op::Sub => x.checked_sub(y),
            Op::Mul => x.checked_mul(y),
            Op::Div => x.checked_div(y),
            _ => x.checked_rem(y),
        }
        .map(N::UInt)
        .ok_or(()),
        _ => Err(()),
    }
}

/// Whether a field of `plan` is one [`Fast::Field`] reads (an integer or `char` data).
fn scalar(plan: &FieldPlan) -> bool {
    matches!(
        plan.kind(),
        PlanKind::Int { .. }
            | PlanKind::Array(Element::Char)
            | PlanKind::Dynamic {
                elem: Element::Char,
                ..
            }
            | PlanKind::Rest(Element::Char)
    )
}

/// Whether `plan` reads an integer array.
fn int_array(plan: &FieldPlan) -> bool {
    matches!(
        plan.kind(),
        PlanKind::Array(Element::Integer { .. })
            | PlanKind::Dynamic {
                elem: Element::Integer { .. },
                ..
            }
            | PlanKind::Rest(Element::Integer { .. })
    )
}

/// A decoded value as a [`V`] (integers as `int` when they fit, as
/// [`super::record_vars`] gives them to CEL).
fn value(v: Value<'_>) -> Result<V<'_>, ()> {
    Ok(match v {
        Value::Signed(i) => V::Int(i),
        Value::Unsigned(u) => i64::try_from(u).map_or(V::UInt(u), V::Int),
        Value::Str(s) => V::Str(String::from_utf8_lossy(s)),
        _ => return Err(()),
    })
}

/// CEL's `&&` (`short` false) and `||` (`short` true): the deciding value wins over an
/// error on the other side.
fn logic<'a>(
    a: Result<V<'a>, ()>,
    b: impl FnOnce() -> Result<V<'a>, ()>,
    short: bool,
) -> Result<V<'a>, ()> {
    let a = match a {
        Ok(V::Bool(x)) => Ok(x),
        _ => Err(()),
    };
    if a == Ok(short) {
        return Ok(V::Bool(short));
    }
    let b = match b() {
        Ok(V::Bool(x)) => Ok(x),
        _ => Err(()),
    };
    match (a, b) {
        (_, Ok(x)) if x == short => Ok(V::Bool(short)),
        (Ok(_), Ok(_)) => Ok(V::Bool(!short)),
        _ => Err(()),
    }
}

/// CEL's arithmetic and comparisons on two values.
fn binary<'a>(op: Op, a: V<'a>, b: V<'a>) -> Result<V<'a>, ()> {
    use V::{Int, UInt};
    let cmp = match (&a, &b) {
        (Int(x), Int(y)) => Some(x.cmp(y)),
        (UInt(x), UInt(y)) => Some(x.cmp(y)),
        (Int(x), UInt(y)) => Some(if *x < 0 {
            Ordering::Less
        } else {
            (*x as u64).cmp(y)
        }),
        (UInt(x), Int(y)) => Some(if *y < 0 {
            Ordering::Greater
        } else {
            x.cmp(&(*y as u64))
        }),
        (V::Str(x), V::Str(y)) => Some(x.cmp(y)),
        (V::Bool(x), V::Bool(y)) => Some(x.cmp(y)),
        _ => None,
    };
    let ordered = |f: fn(Ordering) -> bool| cmp.map(|o| V::Bool(f(o))).ok_or(());
    match op {
        // Values of different kinds are unequal (CEL's heterogeneous equality).
        Op::Eq => Ok(V::Bool(cmp == Some(Ordering::Equal))),
        Op::Ne => Ok(V::Bool(cmp != Some(Ordering::Equal))),
        Op::Lt => ordered(|o| o == Ordering::Less),
        Op::Le => ordered(|o| o != Ordering::Greater),
        Op::Gt => ordered(|o| o == Ordering::Greater),
        Op::Ge => ordered(|o| o != Ordering::Less),
        _ => match (a, b) {
            (Int(x), Int(y)) => Ok(Int(match op {
                Op::Add => x.checked_add(y),
                Op::Sub => x.checked_sub(y),
                Op::Mul => x.checked_mul(y),
                Op::Div => x.checked_div(y),
                _ => x.checked_rem(y),
            }
            .ok_or(())?)),
            (UInt(x), UInt(y)) => Ok(UInt(
                match op {
                    Op::Add => x.checked_add(y),
                    Op::Sub => x.checked_sub(y),
                    Op::Mul => x.checked_mul(y),
                    Op::Div => x.checked_div(y),
                    _ => x.checked_rem(y),
                }
                .ok_or(())?,
            )),
            (V::Str(x), V::Str(y)) if matches!(op, Op::Add) => Ok(V::Str(format!("{x}{y}").into())),
            _ => Err(()),
        },
    }
}
