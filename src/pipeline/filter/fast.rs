//! The common part of CEL compiled for one event format into a tree evaluated on the
//! decoded values without CEL's interpreter: integer and string constants, the record's
//! numbers and names, who wrote it (`comm`, `container`, the `k8s_*` keys …), an
//! EventHeader event's `provider`, `name`, `level`, `keyword` and `opcode`, plain fields
//! (integers, `char` strings, an element of an integer array), `+ - * / %`, the six
//! comparisons, `&&`, `||`, `!`. A condition with anything else (an EventHeader event's
//! `fields`, functions, lists) runs in CEL's interpreter ([`super::condition`]). The answers are CEL's: integer
//! overflow, division by zero, a missing field and mismatched types are errors, and
//! `&&`/`||` absorb an error when the other side decides (the proptest in
//! `super::tests` checks the two against each other).

use std::cmp::Ordering;

use cel::common::ast::{Expr, IdedExpr, LiteralValue};
use uevrec_parsers::{Element, Endian, FieldPlan, PlanKind, RecordStamp, Value};

use super::condition::CONTEXT_VARIABLES;
use super::context_vars::RecordContext;
use super::record_vars::EventHeaderVars;

/// A record's number or name.
#[derive(Debug, Clone, Copy)]
pub(super) enum Var {
    Cpu,
    Pid,
    Tid,
    /// EventHeader: the provider (tracepoint name).
    Provider,
    /// EventHeader: the event name (metadata).
    Name,
    /// EventHeader: the level (header).
    Level,
    /// EventHeader: the keyword (tracepoint name).
    Keyword,
    /// EventHeader: the opcode (header).
    Opcode,
    /// Who wrote it: `comm`.
    Comm,
    /// Who wrote it: another of [`CONTEXT_VARIABLES`] (its index there).
    Context(u8),
}

/// What a condition is compiled for: a plain event's fields, or an EventHeader event.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scope<'a> {
    /// The tracepoint's system and event (constants for one format).
    pub system: &'a str,
    /// The event.
    pub event: &'a str,
    /// A plain event's fields (name, plan); none for EventHeader events.
    pub fields: &'a [(String, FieldPlan)],
    /// Whether the event is an EventHeader event (its `fields` are in each record: not
    /// compiled).
    pub eventheader: bool,
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
    /// The commonest comparison, in one node: an integer at a fixed place (or its
    /// remainder by a constant) against a constant.
    Leaf(Leaf),
    /// `comm == K` (`equal`) or `comm != K`: the tracker's text compared where it lies.
    CommIs {
        /// The constant.
        k: Box<str>,
        /// `==` (else `!=`).
        equal: bool,
    },
    /// A chain of `&&` (`all` true) or `||` (`all` false), flattened: CEL's answer is
    /// the same whatever the order, so it stops at the first deciding value.
    Chain {
        /// `&&` or `||`.
        all: bool,
        /// The operands.
        parts: Box<[Fast]>,
    },
}

/// `X OP K` or `X % D OP K` (a [`Fast::CmpNum`] of that shape, either side), where `X` is
/// an integer at a fixed place of the record or `cpu`, `pid`, `tid`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Leaf {
    source: Source,
    /// The divisor of `% D`, if any, made a multiplication (a division instruction costs
    /// more than the rest of the leaf).
    rem: Option<Divisor>,
    /// `OP K` as the values that hold: `lo ..= hi`, or outside it.
    lo: i128,
    hi: i128,
    outside: bool,
}

/// Where a [`Leaf`] reads its integer.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// At `offset` of the record, `width` bytes.
    Fixed {
        offset: usize,
        width: u8,
        signed: bool,
    },
    Cpu,
    Pid,
    Tid,
}

/// A constant divisor of `%`, other than 0 and -1 (their answers, an error and
/// overflow, stay with [`arithmetic`]).
#[derive(Debug, Clone, Copy)]
struct Divisor {
    reduced: strength_reduce::StrengthReducedU64,
    exact: Divides,
}

impl Divisor {
    fn new(d: i64) -> Option<Divisor> {
        (d != 0 && d != -1).then(|| Divisor {
            reduced: strength_reduce::StrengthReducedU64::new(d.unsigned_abs()),
            exact: Divides::new(d.unsigned_abs()),
        })
    }

    /// `v % d` as CEL answers it: the sign of `v`, whatever the divisor's (`int % int`
    /// only: a `uint` with this `int` is an error).
    #[inline]
    fn rem(self, v: N) -> Result<N, ()> {
        match v {
            N::Int(x) => {
                // Below |d| ≤ 2^63: fits.
                let r = (x.unsigned_abs() % self.reduced) as i64;
                Ok(N::Int(if x < 0 { -r } else { r }))
            }
            N::UInt(_) => Err(()),
        }
    }

    /// Whether `v % d == 0` (as [`Divisor::rem`] errs on a `uint`).
    #[inline]
    fn divides(self, v: N) -> Result<bool, ()> {
        match v {
            N::Int(x) => Ok(self.exact.divides(x.unsigned_abs())),
            N::UInt(_) => Err(()),
        }
    }
}

/// Whether a constant divides a number, by one multiplication and a comparison
/// (Granlund and Montgomery; Hacker's Delight, 10–16): with `d = d0 · 2^k`, `d0` odd,
/// `x` is a multiple of `d` when `(x · d0⁻¹ mod 2^64)` rotated right by `k` is at most
/// `⌊(2^64 − 1) / d⌋`. Written here since `strength_reduce` gives the remainder only, and
/// `x % d == 0` is how a condition keeps one record in `d`.
#[derive(Debug, Clone, Copy)]
struct Divides {
    inverse: u64,
    shift: u32,
    limit: u64,
}

impl Divides {
    /// For `d` > 0.
    fn new(d: u64) -> Divides {
        let shift = d.trailing_zeros();
        let odd = d >> shift;
        // Newton's iteration doubles the correct low bits: 3 (an odd number is its own
        // inverse modulo 8) → 6 → 12 → 24 → 48 → 96.
        let mut inverse = odd;
        for _ in 0..5 {
            inverse = inverse.wrapping_mul(2u64.wrapping_sub(odd.wrapping_mul(inverse)));
        }
        Divides {
            inverse,
            shift,
            limit: u64::MAX / d,
        }
    }

    #[inline]
    fn divides(self, x: u64) -> bool {
        x.wrapping_mul(self.inverse).rotate_right(self.shift) <= self.limit
    }
}

impl Leaf {
    /// Whether every leaf of a chain of `&&` holds, as [`Fast::holds`] answers for the
    /// chain: a false anywhere wins over an error.
    #[inline]
    pub(super) fn all_hold(
        leaves: &[Leaf],
        stamp: &RecordStamp,
        raw: &[u8],
        endian: Endian,
    ) -> Result<bool, ()> {
        let mut failed = false;
        for leaf in leaves {
            match leaf.holds(stamp, raw, endian) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(()) => failed = true,
            }
        }
        if failed { Err(()) } else { Ok(true) }
    }

    /// The leaf comparing `a` with `b`, when they have its shape.
    fn of(op: Op, a: &Num, b: &Num) -> Option<Leaf> {
        let (x, k, op) = match (a, b) {
            (x, Num::Const(k)) => (x, *k, op),
            (Num::Const(k), x) => (x, *k, op.flipped()),
            _ => return None,
        };
        let (x, rem) = match x {
            Num::Bin(Op::Rem, x, d) => match d.as_ref() {
                Num::Const(d) => (x.as_ref(), Some(Divisor::new(*d)?)),
                _ => return None,
            },
            x => (x, None),
        };
        let source = match *x {
            Num::Fixed {
                offset,
                width,
                signed,
            } => Source::Fixed {
                offset,
                width,
                signed,
            },
            Num::Var(Var::Cpu) => Source::Cpu,
            Num::Var(Var::Pid) => Source::Pid,
            Num::Var(Var::Tid) => Source::Tid,
            _ => return None,
        };
        let k = i128::from(k);
        let (lo, hi, outside) = match op {
            Op::Eq => (k, k, false),
            Op::Ne => (k, k, true),
            Op::Lt => (i128::MIN, k - 1, false),
            Op::Le => (i128::MIN, k, false),
            Op::Gt => (k + 1, i128::MAX, false),
            Op::Ge => (k, i128::MAX, false),
            _ => return None,
        };
        Some(Leaf {
            source,
            rem,
            lo,
            hi,
            outside,
        })
    }

    /// As the [`Fast::CmpNum`] it stands for answers.
    #[inline(always)]
    pub(super) fn holds(
        &self,
        stamp: &RecordStamp,
        raw: &[u8],
        endian: Endian,
    ) -> Result<bool, ()> {
        let mut v = match self.source {
            Source::Fixed {
                offset,
                width,
                signed,
            } => match raw.get(offset..offset.wrapping_add(8)) {
                // Eight bytes there, little-endian: one load, masked to the width.
                Some(eight) if !endian.is_big() => {
                    let u = u64::from_le_bytes(eight.try_into().map_err(|_| ())?);
                    let shift = 64 - 8 * u32::from(width);
                    if signed {
                        N::Int(((u << shift) as i64) >> shift)
                    } else {
                        let u = (u << shift) >> shift;
                        i64::try_from(u).map_or(N::UInt(u), N::Int)
                    }
                }
                _ => fixed(raw, offset, width, signed, endian)?,
            },
            Source::Cpu => N::Int(i64::from(stamp.cpu)),
            Source::Pid => N::Int(i64::from(stamp.pid)),
            Source::Tid => N::Int(i64::from(stamp.tid)),
        };
        if let Some(d) = self.rem {
            if self.lo == 0 && self.hi == 0 {
                // `% D == 0` or `% D != 0`.
                return Ok(d.divides(v)? != self.outside);
            }
            v = d.rem(v)?;
        }
        // `int` and `uint` compare by value, as in CEL: both fit an i128.
        let v = match v {
            N::Int(x) => i128::from(x),
            N::UInt(u) => i128::from(u),
        };
        Ok((self.lo <= v && v <= self.hi) != self.outside)
    }
}

/// An integer subtree: constants, `cpu`/`pid`/`tid`, an EventHeader `level`/`opcode`,
/// integer fields, elements of integer arrays, and arithmetic on them.
#[derive(Debug, Clone)]
pub(super) enum Num {
    /// A constant.
    Const(i64),
    /// `cpu`, `pid`, `tid`, `level` or `opcode`.
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
    /// Time, cpu, pid, tid.
    pub stamp: &'a RecordStamp,
    /// The record.
    pub raw: &'a [u8],
    /// Its byte order.
    pub endian: Endian,
    /// Of an EventHeader event: what its name and header say.
    pub eventheader: Option<EventHeaderVars<'a>>,
    /// Who wrote it, read when a condition names it.
    pub context: &'a RecordContext<'a>,
}

impl Fast {
    /// Compile `expr` for an event of `scope`; `None` when it has anything this does not
    /// evaluate.
    pub(super) fn compile(expr: &IdedExpr, scope: &Scope<'_>) -> Option<Fast> {
        let fields = scope.fields;
        Some(match &expr.expr {
            Expr::Literal(LiteralValue::Int(i)) => Fast::Int(i64::from(*i)),
            Expr::Literal(LiteralValue::String(s)) => Fast::Str(s.to_string().into()),
            Expr::Literal(LiteralValue::Boolean(b)) => Fast::Bool(bool::from(*b)),
            Expr::Ident(name) => Fast::Var(match name.as_str() {
                "system" => return Some(Fast::Str(scope.system.into())),
                "event" => return Some(Fast::Str(scope.event.into())),
                "cpu" => Var::Cpu,
                "pid" => Var::Pid,
                "tid" => Var::Tid,
                // A plain event has none of these: an error, as in CEL.
                "provider" | "name" | "level" | "keyword" | "opcode" if !scope.eventheader => {
                    return Some(Fast::Missing);
                }
                "provider" => Var::Provider,
                "name" => Var::Name,
                "level" => Var::Level,
                "keyword" => Var::Keyword,
                "opcode" => Var::Opcode,
                "comm" => Var::Comm,
                other => Var::Context(
                    u8::try_from(CONTEXT_VARIABLES.iter().position(|&c| c == other)?).ok()?,
                ),
            }),
            Expr::Select(_) if scope.eventheader => return None,
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
                        Box::new(Fast::compile(a, scope)?),
                        Box::new(Fast::compile(b, scope)?),
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
                            Box::new(Fast::compile(a, scope)?),
                            Box::new(Fast::compile(b, scope)?),
                        );
                        if call.func_name == "_&&_" {
                            Fast::And(a, b)
                        } else {
                            Fast::Or(a, b)
                        }
                    }
                    "!_" => {
                        let [a] = args.as_slice() else { return None };
                        Fast::Not(Box::new(Fast::compile(a, scope)?))
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
                        if r != "fields" || s.test || scope.eventheader {
                            return None;
                        }
                        let (_, plan) = fields.iter().find(|(n, _)| *n == s.field)?;
                        if !int_array(plan) {
                            return None;
                        }
                        Fast::Element(*plan, Box::new(Fast::compile(index, scope)?))
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
            Fast::Bin(op, a, b) if op.compares() => {
                // Two constants (`system == 'raw_syscalls'`, `system` being this format's).
                if let (Some(x), Some(y)) = (a.constant(), b.constant())
                    && let Ok(V::Bool(v)) = binary(op, x, y)
                {
                    return Fast::Bool(v);
                }
                if let (Op::Eq | Op::Ne, Fast::Var(Var::Comm), Fast::Str(k))
                | (Op::Eq | Op::Ne, Fast::Str(k), Fast::Var(Var::Comm)) = (op, &*a, &*b)
                {
                    return Fast::CommIs {
                        k: k.clone(),
                        equal: matches!(op, Op::Eq),
                    };
                }
                match (a.num(), b.num()) {
                    (Some(x), Some(y)) => match Leaf::of(op, &x, &y) {
                        Some(leaf) => Fast::Leaf(leaf),
                        None => Fast::CmpNum(op, Box::new(x), Box::new(y)),
                    },
                    _ => Fast::Bin(op, a, b),
                }
            }
            f @ (Fast::And(..) | Fast::Or(..)) => {
                let all = matches!(f, Fast::And(..));
                let mut parts = Vec::new();
                f.operands(all, &mut parts);
                // A constant that decides the chain decides it whatever the others are
                // (CEL: it wins over their errors); one that does not is left out.
                let mut kept = Vec::with_capacity(parts.len());
                for part in parts.into_iter().map(Fast::specialized) {
                    match part {
                        Fast::Bool(b) if b == all => {}
                        Fast::Bool(b) => return Fast::Bool(b),
                        part => kept.push(part),
                    }
                }
                match kept.len() {
                    0 => Fast::Bool(all),
                    1 => kept.remove(0),
                    _ => Fast::Chain {
                        all,
                        parts: kept.into_boxed_slice(),
                    },
                }
            }
            Fast::Not(a) => Fast::Not(Box::new(a.specialized())),
            other => other,
        }
    }

    /// The value of a constant (`None`: not one).
    fn constant(&self) -> Option<V<'_>> {
        match self {
            Fast::Int(i) => Some(V::Int(*i)),
            Fast::Str(s) => Some(V::Str(std::borrow::Cow::Borrowed(s))),
            Fast::Bool(b) => Some(V::Bool(*b)),
            _ => None,
        }
    }

    /// The operands of a chain of `&&` (`all`) or `||` in `self`, into `out`.
    fn operands(self, all: bool, out: &mut Vec<Fast>) {
        match self {
            Fast::And(a, b) if all => {
                a.operands(all, out);
                b.operands(all, out);
            }
            Fast::Or(a, b) if !all => {
                a.operands(all, out);
                b.operands(all, out);
            }
            other => out.push(other),
        }
    }

    /// This subtree as a [`Num`], when it is one.
    fn num(&self) -> Option<Num> {
        Some(match self {
            Fast::Int(i) => Num::Const(*i),
            Fast::Var(v @ (Var::Cpu | Var::Pid | Var::Tid | Var::Level | Var::Opcode)) => {
                Num::Var(*v)
            }
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

    /// The leaves of `self` when it is a [`Leaf`] or a chain of `&&` of leaves only (the
    /// commonest conditions, judged without the tree: [`Leaf::all_hold`]).
    pub(super) fn leaves(&self) -> Option<Box<[Leaf]>> {
        match self {
            Fast::Bool(true) => Some(Box::new([])),
            Fast::Leaf(leaf) => Some(Box::new([*leaf])),
            Fast::Chain { all: true, parts } => parts
                .iter()
                .map(|p| match p {
                    Fast::Leaf(leaf) => Some(*leaf),
                    _ => None,
                })
                .collect(),
            _ => None,
        }
    }

    /// Whether the record is kept: `Ok(bool)`, or `Err(())` where CEL errs.
    pub(super) fn holds(&self, r: &Record<'_>) -> Result<bool, ()> {
        match self {
            Fast::Leaf(leaf) => return leaf.holds(r.stamp, r.raw, r.endian),
            Fast::CommIs { k, equal } => return Ok(r.context.comm_is(k) == *equal),
            Fast::CmpNum(op, a, b) => return Ok(compare(*op, a.eval(r)?, b.eval(r)?)),
            Fast::Chain { all, parts } => {
                // CEL: the deciding value (false for `&&`, true for `||`) wins over an
                // error anywhere; without one, an error is the answer.
                let mut failed = false;
                for p in parts.iter() {
                    match p.holds(r) {
                        Ok(b) if b != *all => return Ok(b),
                        Ok(_) => {}
                        Err(()) => failed = true,
                    }
                }
                return if failed { Err(()) } else { Ok(*all) };
            }
            _ => {}
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
                Var::Cpu => V::Int(i64::from(r.stamp.cpu)),
                Var::Pid => V::Int(i64::from(r.stamp.pid)),
                Var::Tid => V::Int(i64::from(r.stamp.tid)),
                Var::Provider => V::Str(r.eventheader.ok_or(())?.provider.into()),
                Var::Name => V::Str(String::from_utf8_lossy(
                    r.eventheader.ok_or(())?.name.ok_or(())?,
                )),
                Var::Level => V::Int(i64::from(r.eventheader.ok_or(())?.level)),
                Var::Keyword => {
                    let k = r.eventheader.ok_or(())?.keyword;
                    i64::try_from(k).map_or(V::UInt(k), V::Int)
                }
                Var::Opcode => V::Int(i64::from(r.eventheader.ok_or(())?.opcode)),
                Var::Comm => V::Str(r.context.comm()),
                Var::Context(i) => {
                    let name = CONTEXT_VARIABLES[usize::from(*i)];
                    V::Str(r.context.value(name).ok_or(())?.into())
                }
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
            Fast::Leaf(leaf) => V::Bool(leaf.holds(r.stamp, r.raw, r.endian)?),
            Fast::Chain { .. } | Fast::CommIs { .. } => V::Bool(self.holds(r)?),
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

    /// The comparison with its sides swapped (`a < b` is `b > a`).
    fn flipped(self) -> Op {
        match self {
            Op::Lt => Op::Gt,
            Op::Le => Op::Ge,
            Op::Gt => Op::Lt,
            Op::Ge => Op::Le,
            other => other,
        }
    }
}

impl Num {
    fn eval(&self, r: &Record<'_>) -> Result<N, ()> {
        match self {
            Num::Const(i) => Ok(N::Int(*i)),
            Num::Var(Var::Cpu) => Ok(N::Int(i64::from(r.stamp.cpu))),
            Num::Var(Var::Pid) => Ok(N::Int(i64::from(r.stamp.pid))),
            Num::Var(Var::Level) => Ok(N::Int(i64::from(r.eventheader.ok_or(())?.level))),
            Num::Var(Var::Opcode) => Ok(N::Int(i64::from(r.eventheader.ok_or(())?.opcode))),
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

#[cfg(test)]
mod tests {
    use super::Divides;

    /// The multiplication answers as `%` does, for divisors odd, even, powers of two and
    /// the largest, on numbers at and beside their multiples.
    #[test]
    fn divides_answers_as_remainder() {
        let divisors = [
            1u64,
            2,
            3,
            5,
            6,
            7,
            10,
            12,
            64,
            1000,
            641,
            u64::from(u32::MAX),
            1 << 62,
            1 << 63,
            (1 << 63) - 1,
        ];
        for d in divisors {
            let test = Divides::new(d);
            for m in [0u64, 1, 2, 3, 1000, u64::MAX / d] {
                let at = m.wrapping_mul(d);
                for x in [
                    at.wrapping_sub(1),
                    at,
                    at.wrapping_add(1),
                    u64::MAX,
                    0,
                    1 << 63,
                ] {
                    assert_eq!(test.divides(x), x % d == 0, "{x} by {d}");
                }
            }
        }
    }
}
