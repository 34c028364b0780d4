//! A record as CEL sees it: a [`VariableResolver`] over the decoded record, so a
//! condition reads the values where they lie. Nothing is turned into JSON text and no
//! map of variables is built per record: a variable is made when the condition names it,
//! and `fields` is a lazy map whose entries are decoded when read ([`Fields`]).
//!
//! Integers are CEL `int` (`uint` only above `i64::MAX`, where `int` cannot hold them),
//! so `fields.n % 3 == 0` needs no `3u`; `char` data is a `string` (invalid UTF-8
//! replaced, as in the JSON lines), byte data `bytes`, integer arrays `list(int)`.

use std::borrow::Cow;

use cel::common::types::{CelBytes, CelInt, CelList, CelString, CelUInt};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use uevrec_parsers::{Endian, FieldPlan, RecordStamp, Value};

use super::context_vars::RecordContext;
use super::eventheader_fields::EventHeaderFields;
use super::lazy_map::lazy_map;

/// A field of a format a condition may read: its name and how to decode it.
#[derive(Debug, Clone)]
pub struct FieldReader {
    /// The field's name.
    pub name: Box<str>,
    /// How it is read from the record.
    pub plan: FieldPlan,
}

/// What an EventHeader record adds (its tracepoint name's parts and its header).
#[derive(Debug, Clone, Copy)]
pub struct EventHeaderVars<'a> {
    /// The provider (the tracepoint name before `_L…K…`).
    pub provider: &'a str,
    /// The event name from the metadata block, when there is one.
    pub name: Option<&'a [u8]>,
    /// The level (header).
    pub level: u8,
    /// The keyword (tracepoint name).
    pub keyword: u64,
    /// The opcode (header).
    pub opcode: u8,
}

/// One record's variables.
#[derive(Debug)]
pub struct RecordVars<'a> {
    /// The tracepoint system.
    pub system: &'a str,
    /// The event (base name for multi-format events).
    pub event: &'a str,
    /// Time, cpu, pid, tid.
    pub stamp: &'a RecordStamp,
    /// The record's fields, decoded when read.
    pub fields: Fields<'a>,
    /// For EventHeader events, what the header and name say.
    pub eventheader: Option<EventHeaderVars<'a>>,
    /// For EventHeader events, the payload's fields (they take the place of `fields`).
    pub eventheader_fields: Option<EventHeaderFields<'a>>,
    /// Who wrote it (`comm`, `cgroup`, …).
    pub context: RecordContext<'a>,
}

impl VariableResolver for RecordVars<'_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        // CEL asks for `fields.NAME` as one qualified name first: answering it here
        // spares the map lookup (a missing field falls back to `fields`, then NAME).
        if let Some(name) = variable.strip_prefix("fields.") {
            return match &self.eventheader_fields {
                Some(f) => f.lookup(name).map(CowVal::Owned),
                None => self.fields.lookup(name).map(CowVal::Owned),
            };
        }
        let eh = self.eventheader.as_ref();
        Some(match variable {
            "system" => CowVal::owned(CelString::from(self.system)),
            "event" => CowVal::owned(CelString::from(self.event)),
            "cpu" => CowVal::owned(CelInt::from(i64::from(self.stamp.cpu))),
            "pid" => CowVal::owned(CelInt::from(i64::from(self.stamp.pid))),
            "tid" => CowVal::owned(CelInt::from(i64::from(self.stamp.tid))),
            "fields" => match &self.eventheader_fields {
                Some(f) => CowVal::Borrowed(f),
                None => CowVal::Borrowed(&self.fields),
            },
            "provider" => CowVal::owned(CelString::from(eh?.provider)),
            "name" => CowVal::owned(text(eh?.name?)),
            "level" => CowVal::owned(CelInt::from(i64::from(eh?.level))),
            "keyword" => int(eh?.keyword),
            "opcode" => CowVal::owned(CelInt::from(i64::from(eh?.opcode))),
            _ => CowVal::owned(CelString::from(self.context.value(variable)?)),
        })
    }
}

/// `char` data as a CEL string: borrowed when it is UTF-8.
fn text(bytes: &[u8]) -> CelString<'_> {
    CelString::from(String::from_utf8_lossy(bytes))
}

/// An unsigned integer as CEL `int` when it fits, else `uint`.
fn int<'b>(u: u64) -> CowVal<'b, 'b> {
    match i64::try_from(u) {
        Ok(i) => CowVal::owned(CelInt::from(i)),
        Err(_) => CowVal::owned(CelUInt::from(u)),
    }
}

/// A plain event's fields as a CEL map, each decoded when the condition reads it; a
/// name the format lacks, or a field that does not decode in this record, is a missing
/// key (`has(fields.x)` is false; reading it makes the condition fail: the record is
/// not kept, and counted).
#[derive(Debug, Clone, Copy)]
pub struct Fields<'a> {
    /// The fields the condition may read.
    pub readers: &'a [FieldReader],
    /// The record (common fields first).
    pub raw: &'a [u8],
    /// Its byte order.
    pub endian: Endian,
}

impl Fields<'_> {
    /// Field `name` as a CEL value (`None`: the format lacks it, or it does not decode).
    fn lookup<'v>(&self, name: &str) -> Option<Box<dyn Val + 'v>>
    where
        Self: 'v,
    {
        let reader = self.readers.iter().find(|r| &*r.name == name)?;
        cel_value(reader.plan.read(self.raw, self.endian))
    }

    /// The fields a condition may read.
    fn count(&self) -> i64 {
        i64::try_from(self.readers.len()).unwrap_or(i64::MAX)
    }
}

/// A decoded value as a CEL value (`None`: it did not decode).
fn cel_value<'v>(value: Value<'v>) -> Option<Box<dyn Val + 'v>> {
    Some(match value {
        Value::Signed(i) => Box::new(CelInt::from(i)),
        Value::Unsigned(u) => int(u).into_owned(),
        Value::Str(s) => Box::new(CelString::from(match String::from_utf8_lossy(s) {
            Cow::Borrowed(b) => Cow::Borrowed(b),
            Cow::Owned(o) => Cow::Owned(o),
        })),
        Value::Bytes(b) => Box::new(CelBytes::from(b)),
        Value::IntArray(a) => {
            let items: Vec<Box<dyn Val + 'v>> = a.iter().filter_map(cel_value).collect();
            Box::new(CelList::from(items))
        }
        Value::Error(_) => return None,
    })
}

lazy_map!(Fields);
