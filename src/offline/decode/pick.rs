//! Which records `uevrec decode` writes: the events `-e` names ([`Pick::select`]) and,
//! of their records, those `--where`, `--sample` and `--rate-limit` keep
//! ([`Pick::filter`]). The decoders ask a `DecodeJudge` each record before its line
//! (the parsers' [`RecordJudge`]), on whatever path they take (one thread, staged for
//! workers, in ranges of a perf.data, in windows of a trace.dat): one place judges,
//! [`FormatFilter::keep`], as while recording, and counts into the same totals.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use uevrec_parsers::perf_data::PerfData;
use uevrec_parsers::trace_dat::TraceDat;
use uevrec_parsers::{EventFormat, Judged, RecordJudge};

use super::mapped::map_file;
use crate::pipeline::filter::{Filter, FormatFilter, WhereError, WhereRule, Who};

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

/// Check, before decoding, that every `fields.NAME` of `rules` is a field of an event
/// of the file at `path` that the rule applies to ([`Filter::check_fields`]; a
/// trace.dat describes every event of its machine, a perf.data those it recorded). A
/// file that cannot be read here is not checked: decoding it says why.
pub fn check_fields(path: &Path, rules: &[WhereRule]) -> Result<(), WhereError> {
    if rules.is_empty() {
        return Ok(());
    }
    let Some(map) = File::open(path).ok().and_then(|f| map_file(&f).ok()) else {
        return Ok(());
    };
    let bytes: &[u8] = &map;
    let formats: Vec<(String, String, EventFormat)> =
        if bytes.starts_with(uevrec_parsers::trace_dat::MAGIC) {
            let Ok(file) = TraceDat::parse(bytes) else {
                return Ok(());
            };
            (file.events().iter())
                .map(|e| (e.system.clone(), e.format.name.clone(), e.format.clone()))
                .collect()
        } else {
            let Ok((data, _)) = PerfData::open(bytes) else {
                return Ok(());
            };
            (0..data.events().len())
                .filter_map(|i| data.format(i))
                .filter_map(|p| {
                    let f = p.format.as_ref().ok()?;
                    Some((p.system.clone(), f.name.clone(), f.clone()))
                })
                .collect()
        };
    Filter::check_fields(rules, &formats)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::filter::tests::{filter, record, sys_enter};
    use crate::pipeline::filter::{Counted, RateRule};
    use uevrec_parsers::{Endian, RecordStamp};

    /// Whether `judge` keeps the sys_enter record of SEQ `seq` at `stamp`, whose own
    /// clock says `clock_ns`.
    fn keeps(judge: &mut dyn RecordJudge, seq: u64, stamp: RecordStamp, clock_ns: u64) -> bool {
        let prepared = sys_enter();
        let raw = record(110, [424242, seq, 0, 0, 0, 0]);
        judge.keep(&Judged {
            event: 0,
            prepared: &prepared,
            stamp: &stamp,
            clock_ns: Some(clock_ns),
            raw: &raw,
            endian: Endian::Little,
            context: None,
            cgroup: None,
        })
    }

    const AT_ONE: RecordStamp = RecordStamp {
        time_unix_ns: Some(1),
        cpu: 0,
        pid: 7,
        tid: 7,
    };

    #[test]
    fn a_judge_and_its_forks_keep_alike_and_count_into_the_same_totals() {
        let f = filter(&["fields.args[1] % 2 == 0"]);
        let mut judge = DecodeJudge::new(Arc::clone(&f));
        let mut fork = judge.fork();
        let first: Vec<u64> = (1..=10)
            .filter(|&s| keeps(&mut judge, s, AT_ONE, 0))
            .collect();
        let rest: Vec<u64> = (11..=20)
            .filter(|&s| keeps(fork.as_mut(), s, AT_ONE, 0))
            .collect();
        assert_eq!(first, [2, 4, 6, 8, 10]);
        assert_eq!(rest, [12, 14, 16, 18, 20]);
        let want = Counted {
            kept: 10,
            filtered: 10,
            ..Counted::default()
        };
        assert_eq!(f.counted(), [("raw_syscalls:sys_enter".to_string(), want)]);
        // Started again from the first record: counted afresh.
        f.restart();
        assert_eq!(f.counted()[0].1, Counted::default());
    }

    #[test]
    fn without_a_wall_clock_time_a_rate_limit_goes_by_the_records_own_clock() {
        let rate: RateRule = "raw_syscalls:sys_enter=1/s,1".parse().unwrap();
        let f = Filter::new(Vec::new(), Vec::new(), vec![rate]).unwrap();
        let pick = Pick {
            select: &|_, _| true,
            filter: Some(&f),
        };
        assert!(pick.in_order().is_some(), "a rate limit is judged in order");
        let mut judge = pick.judge().unwrap();
        let unknown = RecordStamp {
            time_unix_ns: None,
            ..AT_ONE
        };
        // Every half second of the trace clock: one token a second.
        let kept: Vec<u64> = (0..6u64)
            .filter(|&i| keeps(judge.as_mut(), i, unknown, i * 500_000_000))
            .collect();
        assert_eq!(kept, [0, 2, 4]);
        assert_eq!(f.counted()[0].1.throttled, 3);
    }

    #[test]
    fn without_rules_nothing_is_judged() {
        let pick = Pick {
            select: &|_, _| true,
            filter: None,
        };
        assert!(pick.judge().is_none() && pick.in_order().is_none());
    }
}
