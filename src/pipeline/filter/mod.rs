//! `--where`: keep a record only when CEL conditions hold over its decoded values, and
//! count every record not kept by its reason (docs/filtering.md says what and why).
//!
//! A condition is compiled once ([`Condition`]); for each event format the formatter
//! builds a [`FormatFilter`] once (which conditions apply, which fields they read and how
//! to decode them), and each record is then judged on its decoded values
//! ([`record_vars`]), before any JSON is written for it.
//!
//! `--sample` and `--rate-limit` ([`limits`]) then thin what `--where` kept.
//!
//! The common part of CEL is compiled per format into a tree evaluated on the decoded
//! values (`fast.rs`); the rest runs in CEL's interpreter.
//!
//! Layers, lowest first: `counts`, `lazy_map`, `condition`, `context_vars`, `eventheader_fields`,
//! `record_vars`, `fast`, `limits`.

pub mod condition;
pub mod context_vars;
pub mod counts;
pub mod eventheader_fields;
mod fast;
mod lazy_map;
pub mod limits;
pub mod record_vars;

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use uevrec_parsers::{Endian, EventFormat, FieldPlan, OutputWriter, PreparedFormat, RecordStamp};

pub use condition::{Condition, Literal, WhereError};
use context_vars::RecordContext;
pub use context_vars::Who;
pub use counts::{Counted, Counter, DropReason, TracepointCounts};
use eventheader_fields::EventHeaderFields;
use limits::RateState;
pub use limits::{RateRule, SampleBy, SampleRule};
use record_vars::{EventHeaderVars, FieldReader, Fields, RecordVars};
use uevrec_parsers::eventheader_json::typed::Typed;

use crate::capture::pushdown::{PushedTerm, PushedValue};
use crate::capture::selector::Selector;

/// One `--where` flag: a condition, for every recorded event or for those a selector
/// names (`SELECTOR=EXPR`).
#[derive(Debug, Clone)]
pub struct WhereRule {
    selector: Option<Selector>,
    condition: Arc<Condition>,
}

impl FromStr for WhereRule {
    type Err = WhereError;

    /// `EXPR`, or `SYSTEM:EVENT=EXPR` when the text before the first `=` is a selector
    /// (no space, one `:`) and that `=` is not the start of `==`.
    fn from_str(text: &str) -> Result<Self, WhereError> {
        if let Some((head, rest)) = text.split_once('=')
            && !rest.starts_with('=')
            && !head.is_empty()
            && !head.contains(char::is_whitespace)
            && head.matches(':').count() == 1
            && !head.contains(['!', '<', '>', '(', '"', '\''])
        {
            let selector: Selector =
                head.parse()
                    .map_err(|e: crate::capture::selector::SelectorError| WhereError {
                        text: text.to_string(),
                        message: format!("--where {e}"),
                        at: (0, head.chars().count()),
                    })?;
            let offset = head.chars().count() + 1;
            let condition = Condition::parse(rest).map_err(|mut e| {
                e.text = text.to_string();
                e.at = (e.at.0 + offset, e.at.1 + offset);
                e
            })?;
            return Ok(WhereRule {
                selector: Some(selector),
                condition: Arc::new(condition),
            });
        }
        Ok(WhereRule {
            selector: None,
            condition: Arc::new(Condition::parse(text)?),
        })
    }
}

impl WhereRule {
    /// Whether this rule is for `system:event`.
    fn applies(&self, system: &str, event: &str) -> bool {
        self.selector
            .as_ref()
            .is_none_or(|s| s.matches(system, event))
    }

    /// The rule's condition.
    pub fn condition(&self) -> &Condition {
        &self.condition
    }
}

/// The `--where` rules of a recording and what they counted, shared by every formatter
/// worker and read at the end (and by `/metrics`).
pub struct Filter {
    rules: Vec<WhereRule>,
    samples: Vec<SampleRule>,
    rates: Vec<RateRule>,
    /// Tracepoint → its rate limit's buckets (shared by the workers).
    buckets: Mutex<BTreeMap<String, Arc<RateState>>>,
    /// CEL's standard functions, built once.
    env: Arc<cel::Env>,
    /// Tracepoint (`system:event`) → its counts.
    counts: Mutex<BTreeMap<String, Arc<TracepointCounts>>>,
    /// What the `{"uevrec":"dropped"}` lines said so far, and when the next are due.
    said: Said,
}

/// The `{"uevrec":"dropped"}` lines of a run: each says the records not kept since the
/// last one of its tracepoint and reason, so that they add up to the counts; written
/// every `--dropped-every` while recording (if any were not kept since), and at the end.
#[derive(Debug, Default)]
struct Said {
    /// Tracepoint → what its lines said.
    counts: Mutex<BTreeMap<String, Counted>>,
    /// The interval (ns; 0: at the end only).
    every_ns: AtomicU64,
    /// When the next lines are due (the monotonic clock, ns; 0: not started).
    next_ns: AtomicU64,
}

impl Filter {
    /// The filter of `rules`, `samples` and `rates`; `None` without any (every record
    /// kept, nothing counted).
    pub fn new(
        rules: Vec<WhereRule>,
        samples: Vec<SampleRule>,
        rates: Vec<RateRule>,
    ) -> Option<Arc<Filter>> {
        let any = !(rules.is_empty() && samples.is_empty() && rates.is_empty());
        any.then(|| {
            Arc::new(Filter {
                rules,
                samples,
                rates,
                buckets: Mutex::default(),
                env: Arc::new(cel::Env::stdlib()),
                counts: Mutex::default(),
                said: Said::default(),
            })
        })
    }

    /// The same rules with nothing counted and full buckets: a filter of their own for
    /// one pass over records (a flight recorder's dump).
    pub fn fresh(&self) -> Arc<Filter> {
        Arc::new(Filter {
            rules: self.rules.clone(),
            samples: self.samples.clone(),
            rates: self.rates.clone(),
            buckets: Mutex::default(),
            env: Arc::clone(&self.env),
            counts: Mutex::default(),
            said: Said::default(),
        })
    }

    /// The filter of the format `prepared`, or `None` when no rule applies to it.
    pub fn for_format(self: &Arc<Self>, prepared: &PreparedFormat) -> Option<FormatFilter> {
        let (system, event) = (prepared.system(), prepared.event());
        let rules: Vec<usize> = (0..self.rules.len())
            .filter(|&i| self.rules[i].applies(system, event))
            .collect();
        let sample = self
            .samples
            .iter()
            .find(|s| s.selector.matches(system, event))
            .cloned();
        let rate = self
            .rates
            .iter()
            .find(|r| r.selector.matches(system, event));
        if rules.is_empty() && sample.is_none() && rate.is_none() {
            return None;
        }
        let key = format!("{system}:{event}");
        let rate = rate.map(|r| {
            self.buckets
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(key.clone())
                .or_insert_with(|| Arc::new(RateState::new(r.clone())))
                .clone()
        });
        let eventheader = prepared.eventheader().is_some();
        let readers = if eventheader {
            Vec::new()
        } else {
            let all = rules.iter().any(|&i| self.rules[i].condition.all_fields());
            let read = |name: &str| {
                rules.iter().any(|&i| {
                    self.rules[i]
                        .condition
                        .fields()
                        .iter()
                        .any(|(n, _)| n == name)
                })
            };
            prepared
                .format()
                .fields
                .iter()
                .filter(|f| all || read(&f.name))
                .map(|f| FieldReader {
                    name: f.name.as_str().into(),
                    plan: FieldPlan::of(f),
                })
                .collect()
        };
        let plans: Vec<(String, FieldPlan)> = if eventheader {
            Vec::new()
        } else {
            prepared
                .format()
                .fields
                .iter()
                .map(|f| (f.name.clone(), FieldPlan::of(f)))
                .collect()
        };
        // An EventHeader event's fields are in each record, not its format: conditions
        // on them run in CEL's interpreter over the decoded payload.
        let scope = fast::Scope {
            system,
            event,
            fields: &plans,
            eventheader,
        };
        let fast: Vec<Option<fast::Fast>> = rules
            .iter()
            .map(|&i| {
                let expr = self.rules[i].condition.program().expression();
                fast::Fast::compile(expr, &scope).map(fast::Fast::specialized)
            })
            .collect();
        let counts = self
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key)
            .or_default()
            .counter();
        let leaves: Option<Vec<Box<[fast::Leaf]>>> = fast
            .iter()
            .map(|f| f.as_ref().and_then(fast::Fast::leaves))
            .collect();
        let leaves = leaves.map(|mut rules| match rules.as_slice() {
            [one] if one.len() == 1 => Leaves::One(one[0]),
            _ => Leaves::All(std::mem::take(&mut rules).into_boxed_slice()),
        });
        Some(FormatFilter {
            filter: Arc::clone(self),
            rules,
            leaves,
            all_fast: fast.iter().all(Option::is_some),
            fast,
            readers,
            counts,
            sample,
            rate,
        })
    }

    /// The flags as given (`--where TEXT`, `--sample TEXT`, `--rate-limit TEXT`), for
    /// the session line.
    pub fn describe(&self) -> Vec<String> {
        let rules = self.rules.iter().map(|r| match &r.selector {
            Some(s) => format!("--where {s}={}", r.condition.text()),
            None => format!("--where {}", r.condition.text()),
        });
        let samples = self.samples.iter().map(|s| format!("--sample {}", s.text));
        let rates = self
            .rates
            .iter()
            .map(|r| format!("--rate-limit {}", r.text));
        rules.chain(samples).chain(rates).collect()
    }

    /// Whether a `--rate-limit` is among the rules (its buckets take tokens in the
    /// records' order: judged apart, out of order, other records would be kept).
    pub fn has_rate_limits(&self) -> bool {
        !self.rates.is_empty()
    }

    /// Count afresh, with full buckets: for a pass over the records started again from
    /// the first one (`decode`, where its ranges or windows could not go on).
    pub fn restart(&self) {
        for counts in self
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            counts.reset();
        }
        self.buckets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.said
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// The `{"uevrec":"dropped"}` lines of the records not kept since the last lines,
    /// one per tracepoint and reason with any, at `time` (at the end, once every worker
    /// is done, they make the lines add up to the counts).
    pub fn write_dropped(&self, writer: &mut OutputWriter, out: &mut Vec<u8>, time: Option<u64>) {
        let mut said = self
            .said
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (event, counted) in self.counted() {
            let before = said.entry(event.clone()).or_default();
            for reason in DropReason::ALL {
                let n = counted
                    .dropped(reason)
                    .saturating_sub(before.dropped(reason));
                if n > 0 {
                    writer.write_dropped(out, time, &event, reason.as_str(), n);
                }
            }
            *before = counted;
        }
    }

    /// Write `{"uevrec":"dropped"}` lines every `every` while recording, besides at the
    /// end (zero: at the end only).
    pub fn say_dropped_every(&self, every: std::time::Duration) {
        let ns = u64::try_from(every.as_nanos()).unwrap_or(u64::MAX);
        self.said.every_ns.store(ns, Ordering::Relaxed);
    }

    /// Whether the periodic `{"uevrec":"dropped"}` lines are due now (true once per
    /// interval, to one caller).
    pub fn dropped_due(&self) -> bool {
        let every = self.said.every_ns.load(Ordering::Relaxed);
        if every == 0 {
            return false;
        }
        let now = crate::capture::clock::monotonic_ns();
        let next = self.said.next_ns.load(Ordering::Relaxed);
        if next == 0 {
            // The first interval starts with the first call.
            let _ = self.said.next_ns.compare_exchange(
                0,
                now.saturating_add(every),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            return false;
        }
        now >= next
            && self
                .said
                .next_ns
                .compare_exchange(
                    next,
                    now.saturating_add(every),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// Every tracepoint's counts so far, by `system:event`.
    pub fn counted(&self) -> Vec<(String, Counted)> {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(k, c)| (k.clone(), c.get()))
            .collect()
    }

    /// The terms of `rules` the kernel can judge ([`crate::capture::pushdown`]): each
    /// comparison of a field with a constant among a condition's top-level `&&`
    /// operands (a record failing one is not kept whatever the rest says). Strings with
    /// a `"`, `\` or a glob character (`*?[`, which the kernel's `==` would match as a
    /// pattern) stay with uevrec.
    pub fn pushed_terms(rules: &[WhereRule]) -> Vec<PushedTerm> {
        let mut terms = Vec::new();
        for rule in rules {
            let c = &rule.condition;
            let fields = c.field_comparisons().into_iter().map(|t| (t, false));
            let header = c.header_comparisons().into_iter().map(|t| (t, true));
            for ((field, op, literal), header) in fields.chain(header) {
                let value = match literal {
                    Literal::Int(n) => PushedValue::Int(n),
                    Literal::Str(s) if !s.contains(['"', '\\', '*', '?', '[']) => {
                        PushedValue::Str(s)
                    }
                    Literal::Str(_) => continue,
                };
                terms.push(PushedTerm {
                    selector: rule.selector.clone(),
                    field,
                    op,
                    value,
                    header,
                });
            }
        }
        terms
    }

    /// Check, before recording, that every `fields.NAME` a rule reads is a field of at
    /// least one event it applies to among `formats` (`system`, `event`, format): the
    /// error points at the first that is not. An EventHeader event's fields are in its
    /// records, not its format: a rule that applies to one is not checked, and neither
    /// is a rule no event matches yet (user events may register later).
    pub fn check_fields(
        rules: &[WhereRule],
        formats: &[(String, String, EventFormat)],
    ) -> Result<(), WhereError> {
        for rule in rules {
            let matching: Vec<_> = formats
                .iter()
                .filter(|(s, e, _)| rule.applies(s, e))
                .collect();
            let eventheader = matching
                .iter()
                .any(|(_, e, f)| uevrec_parsers::eventheader::detect(f, e).is_some());
            if matching.is_empty() || eventheader {
                continue;
            }
            for (name, at) in rule.condition.fields() {
                let known = matching
                    .iter()
                    .any(|(_, _, f)| f.fields.iter().any(|x| &x.name == name));
                if !known {
                    let mut names: Vec<String> = matching
                        .iter()
                        .map(|(s, e, _)| format!("{s}:{e}"))
                        .collect();
                    names.truncate(3);
                    if matching.len() > 3 {
                        names.push(format!("and {} more", matching.len() - 3));
                    }
                    return Err(rule.condition.unknown_field(name, *at, &names.join(", ")));
                }
            }
        }
        Ok(())
    }
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // cel::Env has no Debug of its own.
        f.debug_struct("Filter")
            .field("rules", &self.rules)
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

/// Rules that are leaves ([`fast::Leaf`]) alone.
#[derive(Debug)]
enum Leaves {
    /// One rule of one leaf (kept inline: no pointer to follow).
    One(fast::Leaf),
    /// Each rule as a chain of `&&` of leaves.
    All(Box<[Box<[fast::Leaf]>]>),
}

/// The filter of one event format (see [`Filter::for_format`]).
#[derive(Debug)]
pub struct FormatFilter {
    filter: Arc<Filter>,
    /// The rules that apply (indexes into the filter's rules); all must hold.
    rules: Vec<usize>,
    /// Each rule as the leaves of one chain of `&&`, when every rule is one: judged
    /// without the tree or the record's context (the commonest conditions).
    leaves: Option<Leaves>,
    /// Each rule compiled for this format where it can be ([`fast`]).
    fast: Vec<Option<fast::Fast>>,
    /// Whether every rule is compiled (none runs in CEL's interpreter).
    all_fast: bool,
    /// The fields they read (plain events).
    readers: Vec<FieldReader>,
    counts: Counter,
    /// The `--sample` for this tracepoint.
    sample: Option<SampleRule>,
    /// The `--rate-limit` buckets of this tracepoint.
    rate: Option<Arc<RateState>>,
}

impl FormatFilter {
    /// Whether the record `raw` (of `prepared`, this filter's format) is kept; counted
    /// either way. `who`: the formatter's context of the record (`None`: no context).
    #[inline]
    pub fn keep(
        &mut self,
        prepared: &PreparedFormat,
        stamp: &RecordStamp,
        raw: &[u8],
        endian: Endian,
        who: Option<Who<'_>>,
    ) -> bool {
        match self.judge(prepared, stamp, raw, endian, who) {
            None => {
                self.counts.kept();
                true
            }
            Some(reason) => {
                self.counts.dropped(reason);
                false
            }
        }
    }

    /// `None` when the record is kept, else why not: `--where`, then `--sample`, then
    /// `--rate-limit` (a record a condition drops takes no token).
    #[inline]
    fn judge(
        &self,
        prepared: &PreparedFormat,
        stamp: &RecordStamp,
        raw: &[u8],
        endian: Endian,
        who: Option<Who<'_>>,
    ) -> Option<DropReason> {
        if !self.rules.is_empty()
            && let Some(reason) = self.condition(prepared, stamp, raw, endian, who)
        {
            return Some(reason);
        }
        if self.sample.is_some() || self.rate.is_some() {
            return self.limit(prepared, stamp, raw, who);
        }
        None
    }

    /// `--sample`, then `--rate-limit` (out of line, as [`Self::evaluate`]).
    #[inline(never)]
    fn limit(
        &self,
        prepared: &PreparedFormat,
        stamp: &RecordStamp,
        raw: &[u8],
        who: Option<Who<'_>>,
    ) -> Option<DropReason> {
        if let Some(s) = &self.sample {
            let trace = match s.by {
                SampleBy::Trace if prepared.eventheader().is_some() => trace_id(raw),
                _ => None,
            };
            if !s.keeps(stamp, raw, trace) {
                return Some(DropReason::Sampled);
            }
        }
        if let Some(r) = &self.rate
            && !r.admits(stamp, || who.and_then(|w| w.pod_uid(stamp)))
        {
            return Some(DropReason::Throttled);
        }
        None
    }

    /// `None` when every `--where` condition holds, else why the record is not kept.
    #[inline]
    fn condition(
        &self,
        prepared: &PreparedFormat,
        stamp: &RecordStamp,
        raw: &[u8],
        endian: Endian,
        who: Option<Who<'_>>,
    ) -> Option<DropReason> {
        match &self.leaves {
            Some(Leaves::One(leaf)) => {
                return match leaf.holds(stamp, raw, endian) {
                    Ok(true) => None,
                    Ok(false) => Some(DropReason::Filtered),
                    Err(()) => Some(DropReason::FilterError),
                };
            }
            Some(Leaves::All(rules)) => {
                for leaves in rules.iter() {
                    match fast::Leaf::all_hold(leaves, stamp, raw, endian) {
                        Ok(true) => {}
                        Ok(false) => return Some(DropReason::Filtered),
                        Err(()) => return Some(DropReason::FilterError),
                    }
                }
                return None;
            }
            None => {}
        }
        self.evaluate(prepared, stamp, raw, endian, who)
    }

    /// [`Self::condition`] through the compiled trees or CEL's interpreter (kept out of
    /// line: the leaves' path is a few instructions).
    #[inline(never)]
    fn evaluate(
        &self,
        prepared: &PreparedFormat,
        stamp: &RecordStamp,
        raw: &[u8],
        endian: Endian,
        who: Option<Who<'_>>,
    ) -> Option<DropReason> {
        let context = RecordContext::new(who, stamp);
        if self.all_fast {
            let record = fast::Record {
                stamp,
                raw,
                endian,
                eventheader: prepared
                    .eventheader()
                    .map(|tp| eventheader_vars(tp, event_parts(raw))),
                context: &context,
            };
            for f in self.fast.iter().flatten() {
                match f.holds(&record) {
                    Ok(true) => {}
                    Ok(false) => return Some(DropReason::Filtered),
                    Err(()) => return Some(DropReason::FilterError),
                }
            }
            return None;
        }
        let eventheader = prepared.eventheader().map(|tp| (tp, event_parts(raw)));
        let vars = RecordVars {
            system: prepared.system(),
            event: prepared.event(),
            stamp,
            fields: Fields {
                readers: &self.readers,
                raw,
                endian,
            },
            eventheader: eventheader.map(|(tp, parts)| eventheader_vars(tp, parts)),
            eventheader_fields: eventheader.map(|(_, parts)| eventheader_fields(parts)),
            context,
        };
        let mut context = cel::Context::with_env(Arc::clone(&self.filter.env));
        context.set_variable_resolver(&vars);
        for &i in &self.rules {
            let program = self.filter.rules[i].condition.program();
            match program.execute(&context) {
                Ok(cel::Value::Bool(true)) => {}
                Ok(cel::Value::Bool(false)) => return Some(DropReason::Filtered),
                Ok(_) | Err(_) => return Some(DropReason::FilterError),
            }
        }
        None
    }
}

/// EventHeader record `raw` split into header, extension blocks and payload (`None`
/// when they cannot be read).
fn event_parts(raw: &[u8]) -> Option<uevrec_parsers::eventheader::EventParts<'_>> {
    raw.get(8..)
        .and_then(|data| uevrec_parsers::eventheader::parse_event(data).ok())
}

/// The payload fields of an EventHeader record (none when its header or extension
/// blocks cannot be read).
fn eventheader_fields(
    parts: Option<uevrec_parsers::eventheader::EventParts<'_>>,
) -> EventHeaderFields<'_> {
    match parts {
        Some(p) => EventHeaderFields {
            metadata: p.metadata,
            payload: p.payload,
            endian: p.header.endian(),
        },
        None => EventHeaderFields {
            metadata: None,
            payload: &[],
            endian: Endian::Little,
        },
    }
}

/// The trace id of EventHeader record `raw`: its `PartA.ext_dt_traceId` (32 hex digits,
/// where the OpenTelemetry user_events exporters put it), as 16 bytes.
fn trace_id(raw: &[u8]) -> Option<[u8; 16]> {
    let path: [&[u8]; 2] = [b"PartA", b"ext_dt_traceId"];
    let text = match eventheader_fields(event_parts(raw)).text_at(&path)? {
        Typed::Str(text) => text,
        _ => return None,
    };
    let text = text.as_bytes();
    if text.len() != 32 {
        return None;
    }
    let mut id = [0u8; 16];
    for (i, pair) in text.chunks_exact(2).enumerate() {
        let pair = std::str::from_utf8(pair).ok()?;
        id[i] = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(id)
}

/// The EventHeader variables of a record (`parts`) of an event named `tp`: the header's
/// level and opcode (the name's level when the header cannot be read) and the metadata's
/// event name (without its `;attr=value` suffixes).
fn eventheader_vars<'a>(
    tp: uevrec_parsers::eventheader::TracepointName<'a>,
    parts: Option<uevrec_parsers::eventheader::EventParts<'a>>,
) -> EventHeaderVars<'a> {
    let name = parts.and_then(|p| p.metadata).map(|m| {
        let end = m.iter().position(|&b| b == 0).unwrap_or(m.len());
        let name = &m[..end];
        let cut = name.iter().position(|&b| b == b';').unwrap_or(name.len());
        &name[..cut]
    });
    EventHeaderVars {
        provider: tp.provider,
        name,
        level: parts.map_or(tp.level, |p| p.header.level),
        keyword: tp.keyword,
        opcode: parts.map_or(0, |p| p.header.opcode),
    }
}

#[cfg(test)]
pub(crate) mod tests;
