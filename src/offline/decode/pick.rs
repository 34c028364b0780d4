//! Which records `uevrec decode` writes: the events `-e` names ([`Pick::select`]) and,
//! of their records, those `--where`, `--sample` and `--rate-limit` keep
//! ([`Pick::filter`]). The decoders ask a [`DecodeJudge`] each record before its line
//! (the parsers' [`RecordJudge`]), on whatever path they take (one thread, staged for
//! workers, in ranges of a perf.data, in windows of a trace.dat): one place judges,
//! [`FormatFilter::keep`], as while recording, and counts into the same totals.

use std::sync::Arc;

use uevrec_parsers::{Judged, RecordJudge};

use crate::pipeline::filter::{Filter, FormatFilter, Who};

/// The events and records a decoding writes.
#[derive(Clone, Copy)]
pub struct Pick<'a> {
    /// Whether the records of `system:event` are written at all (`-e`).
    pub select: &'a dyn Fn(&str, &str) -> bool,
    /// The rules of `--where`, `--sample` and `--rate-limit`, and their counts.
    pub filter: Option<&'a Arc<Filter>>,
}

impl Pick<'_> {
    /// A judge of the filter's rules for one decoder (`None`: every record written).
    pub(crate) fn judge(&self) -> Option<Box<dyn RecordJudge>> {
        self.filter
            .map(|f| Box::new(DecodeJudge::new(Arc::clone(f))) as Box<dyn RecordJudge>)
    }

    /// Why the records cannot be judged apart in ranges or windows of time, if so: a
    /// `--rate-limit` takes its tokens in the records' order, one record after another.
    pub(crate) fn in_order(&self) -> Option<&'static str> {
        self.filter
            .filter(|f| f.has_rate_limits())
            .map(|_| "--rate-limit judges the records one after another, in time order")
    }
}

/// One decoder's judge: the filter of each event's format, made at its first record.
pub(crate) struct DecodeJudge {
    filter: Arc<Filter>,
    /// Event index (in the file) → its format's filter once made (inside, `None`: no
    /// rule applies to the event, every record written).
    formats: Vec<Option<Option<FormatFilter>>>,
}

impl DecodeJudge {
    /// A judge of `filter`'s rules, no format's filter made yet.
    pub(crate) fn new(filter: Arc<Filter>) -> Self {
        DecodeJudge {
            filter,
            formats: Vec::new(),
        }
    }
}

impl RecordJudge for DecodeJudge {
    fn keep(&mut self, r: &Judged<'_>) -> bool {
        if self.formats.len() <= r.event {
            self.formats.resize_with(r.event + 1, || None);
        }
        let filter = &self.filter;
        let made = self.formats[r.event].get_or_insert_with(|| filter.for_format(r.prepared));
        let Some(format) = made else {
            return true;
        };
        // Sampling by record and rate limits go by the record's time: its own clock's
        // where the file gives no wall-clock time (the same answer, run after run).
        let mut stamp = *r.stamp;
        stamp.time_unix_ns = stamp.time_unix_ns.or(r.clock_ns);
        let who = r.context.map(|tracker| Who {
            tracker,
            cgroup: r.cgroup,
        });
        format.keep(r.prepared, &stamp, r.raw, r.endian, who)
    }

    fn fork(&self) -> Box<dyn RecordJudge> {
        Box::new(DecodeJudge::new(Arc::clone(&self.filter)))
    }
}
