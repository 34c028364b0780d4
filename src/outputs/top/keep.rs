//! `top --where` / `--sample` / `--rate-limit`: which records `top` counts. Each record
//! of an event a rule applies to is judged as `record` judges it ([`FormatFilter::keep`], on its
//! decoded values: only these records are decoded); those not kept are counted apart
//! ([`super::model::Model::not_kept`]) and show in the header, never in a row.

use std::sync::Arc;

use uevrec_parsers::{ContextTracker, ContextUpdate, Endian, PreparedFormat, RecordStamp};

use crate::pipeline::filter::{Filter, FormatFilter, Who};

/// The counting thread's judge: each slot's format filter, and who is who (for `comm`,
/// `cgroup`, `k8s_*` conditions).
#[derive(Debug)]
pub struct TopFilter {
    filter: Arc<Filter>,
    /// Session slot → its format and filter (`None` inside: no rule applies).
    formats: Vec<Option<(Arc<PreparedFormat>, Option<FormatFilter>)>>,
    tracker: ContextTracker,
}

impl TopFilter {
    /// A judge of `filter`'s rules, no slot known yet.
    pub fn new(filter: Arc<Filter>) -> Self {
        TopFilter {
            filter,
            formats: Vec::new(),
            tracker: ContextTracker::new(),
        }
    }

    /// From now on the records of `slot` are of the format `prepared`.
    pub fn format(&mut self, slot: u32, prepared: &Arc<PreparedFormat>) {
        let slot = slot as usize;
        if self.formats.len() <= slot {
            self.formats.resize_with(slot + 1, || None);
        }
        let judged = self.filter.for_format(prepared);
        self.formats[slot] = Some((Arc::clone(prepared), judged));
    }

    /// Who is who changed (the session's context entries).
    pub fn context(&mut self, time_unix_ns: Option<u64>, update: ContextUpdate<'_>) {
        self.tracker.apply(time_unix_ns, update);
    }

    /// Whether the record `raw` of `slot` at `stamp` is counted (judged and counted by
    /// reason in the filter's totals); a slot never announced is counted.
    pub fn keeps(
        &mut self,
        slot: u32,
        stamp: &RecordStamp,
        cgroup: Option<u64>,
        raw: &[u8],
    ) -> bool {
        let Some(Some((prepared, Some(judged)))) = self.formats.get_mut(slot as usize) else {
            return true;
        };
        let who = Who {
            tracker: &self.tracker,
            cgroup,
        };
        // Live records: in this machine's byte order.
        judged.keep(prepared, stamp, raw, Endian::NATIVE, Some(who))
    }
}
