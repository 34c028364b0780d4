//! The numbers behind `uevrec top`: per event, records and bytes (totals and per second
//! over the last interval) and the processes that wrote the most in that interval; the
//! losses of the buffers; sorting and filtering of the rows. No I/O and no clock: the
//! counting thread feeds it ([`Model::record`] …), the display closes an interval with
//! [`Model::tick`] and the elapsed time, then reads a [`Snapshot`].
//!
//! Memory is bounded: one row per event the session attached (a detached one is kept
//! [`LINGER_TICKS`] intervals, then dropped), and per row at most [`MAX_PIDS`] distinct
//! processes per interval (the rest are counted together as `other_pids`), and with
//! `-g` at most [`super::sites::MAX_SITES`] call paths.

use std::cmp::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::sites::{CallSites, Sites};
use crate::capture::selector::Selector;

/// Distinct processes counted per event and interval; records of further processes in
/// the same interval are counted in [`Row::other_pids`].
pub const MAX_PIDS: usize = 1024;

/// Processes kept per row in a snapshot, busiest first.
pub const TOP_PIDS: usize = 5;

/// Intervals a detached event's row stays visible (marked detached) before it goes.
pub const LINGER_TICKS: u32 = 5;

/// One event's counters.
#[derive(Debug, Default)]
struct EventStats {
    /// `system:event`.
    name: String,
    attached: bool,
    /// Ticks since it detached (while not attached).
    detached_ticks: u32,
    records: u64,
    bytes: u64,
    /// This interval's records and bytes.
    interval_records: u64,
    interval_bytes: u64,
    /// This interval's records per process (bounded by [`MAX_PIDS`]).
    pids: foldhash::HashMap<u32, u64>,
    /// This interval's records of processes beyond [`MAX_PIDS`].
    interval_other: u64,
    /// With `-g`: the records' call paths.
    sites: CallSites,
    /// The last closed interval, as shown.
    shown: Shown,
}

/// The last closed interval of one event.
#[derive(Debug, Default, Clone)]
struct Shown {
    records: u64,
    records_per_s: f64,
    bytes_per_s: f64,
    top: Vec<(u32, u64)>,
    other_pids: u64,
    sites: Sites,
}

/// One event as a snapshot shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `system:event`.
    pub event: String,
    /// Whether it is attached (false: detached, shown for a few intervals).
    pub attached: bool,
    /// Records per second over the last interval.
    pub records_per_s: f64,
    /// Records since the start.
    pub records: u64,
    /// Records in the last interval.
    pub interval_records: u64,
    /// Bytes of trace entries per second over the last interval.
    pub bytes_per_s: f64,
    /// Bytes of trace entries since the start.
    pub bytes: u64,
    /// The processes that wrote the most records in the last interval: (pid, records),
    /// busiest first, at most [`TOP_PIDS`].
    pub top: Vec<(u32, u64)>,
    /// Records of the last interval from processes beyond [`MAX_PIDS`].
    pub other_pids: u64,
    /// With `-g`: the busiest call paths ([`super::sites`]).
    pub sites: Sites,
}

/// Everything the display shows after a tick.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The length of the last interval.
    pub interval: Duration,
    /// One row per event (attached, or detached recently), in attach order.
    pub rows: Vec<Row>,
    /// Records per second of all events over the last interval.
    pub records_per_s: f64,
    /// Records of all events since the start.
    pub records: u64,
    /// Records the kernel lost (all buffers; losses are per CPU buffer, shared by every
    /// event, so they are not attributed to events), per second over the last interval.
    pub lost_per_s: f64,
    /// Records lost since the start.
    pub lost: u64,
    /// Records of a slot whose event was never announced (should stay 0).
    pub unattributed: u64,
    /// The session's latest notice (`what: message`), if any.
    pub notice: Option<String>,
    /// With `--where` / `--sample` / `--rate-limit`: the records they left out since the start (counted
    /// in no row); `None` without them.
    pub not_kept: Option<u64>,
}

/// The counters of a `top` session.
#[derive(Debug, Default)]
pub struct Model {
    events: Vec<EventStats>,
    /// Session slot → index in `events`.
    slots: Vec<Option<usize>>,
    lost: u64,
    interval_lost: u64,
    unattributed: u64,
    notice: Option<String>,
    /// Records `--where` / `--sample` / `--rate-limit` left out (`None`: no filter).
    not_kept: Option<u64>,
    shown_lost_per_s: f64,
    shown_records_per_s: f64,
    shown_interval: Duration,
}

impl Model {
    /// An empty model.
    pub fn new() -> Self {
        Model::default()
    }

    /// From now on, records of session slot `slot` are of event `name` (`system:event`);
    /// the same name again (re-attached) continues its row.
    pub fn attach(&mut self, slot: u32, name: &str) {
        let index = match self.events.iter().position(|e| e.name == name) {
            Some(i) => i,
            None => {
                self.events.push(EventStats {
                    name: name.to_owned(),
                    ..EventStats::default()
                });
                self.events.len() - 1
            }
        };
        let ev = &mut self.events[index];
        ev.attached = true;
        ev.detached_ticks = 0;
        let slot = slot as usize;
        if self.slots.len() <= slot {
            self.slots.resize(slot + 1, None);
        }
        self.slots[slot] = Some(index);
    }

    /// Event `name` was detached: its row stays, marked, for [`LINGER_TICKS`] intervals.
    pub fn detach(&mut self, name: &str) {
        if let Some(i) = self.events.iter().position(|e| e.name == name) {
            self.events[i].attached = false;
            for s in self.slots.iter_mut().filter(|s| **s == Some(i)) {
                *s = None;
            }
        }
    }

    /// A record of `bytes` bytes by process `pid` in session slot `slot`; true when it is
    /// that process's first record of the event in this interval (its name is worth
    /// looking up now, while it surely runs).
    pub fn record(&mut self, slot: u32, pid: u32, bytes: usize) -> bool {
        let Some(ev) = self
            .slots
            .get(slot as usize)
            .copied()
            .flatten()
            .and_then(|i| self.events.get_mut(i))
        else {
            self.unattributed += 1;
            return false;
        };
        ev.interval_records += 1;
        ev.interval_bytes += bytes as u64;
        let room = ev.pids.len() < MAX_PIDS;
        match ev.pids.get_mut(&pid) {
            Some(n) => {
                *n += 1;
                false
            }
            None if room => {
                ev.pids.insert(pid, 1);
                true
            }
            None => {
                ev.interval_other += 1;
                false
            }
        }
    }

    /// `-g`: the record just counted in session slot `slot` ([`Model::record`]) came from
    /// call path `path`.
    pub fn call_site(&mut self, slot: u32, path: &Arc<str>) {
        if let Some(ev) = self
            .slots
            .get(slot as usize)
            .copied()
            .flatten()
            .and_then(|i| self.events.get_mut(i))
        {
            ev.sites.record(path);
        }
    }

    /// Records are filtered (`--where`, `--sample`): the snapshot says how many were left
    /// out.
    pub fn filtering(&mut self) {
        self.not_kept.get_or_insert(0);
    }

    /// One record left out by `--where` / `--sample` / `--rate-limit` (counted in no row).
    pub fn not_kept(&mut self) {
        *self.not_kept.get_or_insert(0) += 1;
    }

    /// The kernel lost `lost` records.
    pub fn lost(&mut self, lost: u64) {
        self.interval_lost += lost;
    }

    /// The session said something (`attached`, `waiting` …), about `event` if any:
    /// shown until the next one.
    pub fn notice(&mut self, what: &str, event: Option<&str>, message: &str) {
        self.notice = Some(match event {
            Some(e) => format!("{what} {e}: {message}"),
            None => format!("{what}: {message}"),
        });
    }

    /// Close the interval that lasted `elapsed`: rates over it, totals, top processes;
    /// drop the rows of events detached [`LINGER_TICKS`] intervals ago.
    pub fn tick(&mut self, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let per_s = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        let mut all = 0;
        for ev in &mut self.events {
            ev.records += ev.interval_records;
            ev.bytes += ev.interval_bytes;
            all += ev.interval_records;
            let mut top: Vec<(u32, u64)> = ev.pids.drain().collect();
            top.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            top.truncate(TOP_PIDS);
            ev.shown = Shown {
                records: ev.interval_records,
                records_per_s: per_s(ev.interval_records),
                bytes_per_s: per_s(ev.interval_bytes),
                top,
                other_pids: ev.interval_other,
                sites: ev.sites.tick(secs),
            };
            (ev.interval_records, ev.interval_bytes, ev.interval_other) = (0, 0, 0);
            if !ev.attached {
                ev.detached_ticks += 1;
            }
        }
        self.lost += self.interval_lost;
        self.shown_lost_per_s = per_s(self.interval_lost);
        self.interval_lost = 0;
        self.shown_records_per_s = per_s(all);
        self.shown_interval = elapsed;
        self.drop_gone();
    }

    /// Remove the rows detached for [`LINGER_TICKS`] intervals (and renumber the slots).
    fn drop_gone(&mut self) {
        if self
            .events
            .iter()
            .all(|e| e.attached || e.detached_ticks < LINGER_TICKS)
        {
            return;
        }
        let mut new_index = Vec::with_capacity(self.events.len());
        let mut kept = 0;
        for ev in &self.events {
            let keep = ev.attached || ev.detached_ticks < LINGER_TICKS;
            new_index.push(keep.then_some(kept));
            kept += usize::from(keep);
        }
        self.events
            .retain(|e| e.attached || e.detached_ticks < LINGER_TICKS);
        for s in &mut self.slots {
            *s = s.and_then(|i| new_index[i]);
        }
    }

    /// What the last [`Model::tick`] closed.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            interval: self.shown_interval,
            rows: self
                .events
                .iter()
                .map(|ev| Row {
                    event: ev.name.clone(),
                    attached: ev.attached,
                    records_per_s: ev.shown.records_per_s,
                    records: ev.records,
                    interval_records: ev.shown.records,
                    bytes_per_s: ev.shown.bytes_per_s,
                    bytes: ev.bytes,
                    top: ev.shown.top.clone(),
                    other_pids: ev.shown.other_pids,
                    sites: ev.shown.sites.clone(),
                })
                .collect(),
            records_per_s: self.shown_records_per_s,
            records: self.events.iter().map(|e| e.records).sum(),
            lost_per_s: self.shown_lost_per_s,
            lost: self.lost,
            unattributed: self.unattributed,
            notice: self.notice.clone(),
            not_kept: self.not_kept,
        }
    }
}

/// What the rows are sorted by (keys in the live view: r, t, b, n; Tab cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum SortKey {
    /// Records per second, highest first.
    #[default]
    Rate,
    /// Records since the start, highest first.
    Total,
    /// Bytes per second, highest first.
    Bytes,
    /// Event name, A to Z.
    Name,
}

impl SortKey {
    /// The next key (Tab).
    pub fn next(self) -> SortKey {
        match self {
            SortKey::Rate => SortKey::Total,
            SortKey::Total => SortKey::Bytes,
            SortKey::Bytes => SortKey::Name,
            SortKey::Name => SortKey::Rate,
        }
    }

    /// Its name in the header.
    pub fn label(self) -> &'static str {
        match self {
            SortKey::Rate => "rec/s",
            SortKey::Total => "total",
            SortKey::Bytes => "bytes/s",
            SortKey::Name => "name",
        }
    }
}

/// Sort `rows` by `key` (ties: by name, so the order is stable between ticks).
pub fn sort_rows(rows: &mut [Row], key: SortKey) {
    let desc = |a: f64, b: f64| b.partial_cmp(&a).unwrap_or(Ordering::Equal);
    rows.sort_by(|a, b| {
        let first = match key {
            SortKey::Rate => desc(a.records_per_s, b.records_per_s),
            SortKey::Total => b.records.cmp(&a.records),
            SortKey::Bytes => desc(a.bytes_per_s, b.bytes_per_s),
            SortKey::Name => Ordering::Equal,
        };
        first.then_with(|| a.event.cmp(&b.event))
    });
}

/// Which rows are shown: a selector (`SYSTEM:EVENT` with globs, as on the command line)
/// or, for text without a `:`, a substring of `system:event`.
#[derive(Debug, Clone)]
pub enum RowFilter {
    /// Rows whose event the selector matches.
    Selector(Selector),
    /// Rows whose `system:event` contains this text.
    Substring(String),
}

impl RowFilter {
    /// Parse what was typed after `/`; empty text is no filter (`Ok(None)`).
    pub fn parse(text: &str) -> Result<Option<RowFilter>, String> {
        let text = text.trim();
        if text.is_empty() {
            Ok(None)
        } else if text.contains(':') {
            text.parse()
                .map(|s| Some(RowFilter::Selector(s)))
                .map_err(|e: crate::capture::selector::SelectorError| e.to_string())
        } else {
            Ok(Some(RowFilter::Substring(text.to_owned())))
        }
    }

    /// Whether `event` (`system:event`) passes.
    pub fn matches(&self, event: &str) -> bool {
        match self {
            RowFilter::Selector(s) => event
                .split_once(':')
                .is_some_and(|(system, name)| s.matches(system, name)),
            RowFilter::Substring(t) => event.contains(t.as_str()),
        }
    }
}

impl std::fmt::Display for RowFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RowFilter::Selector(s) => write!(f, "{s}"),
            RowFilter::Substring(t) => f.write_str(t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    fn row<'a>(s: &'a Snapshot, event: &str) -> &'a Row {
        s.rows.iter().find(|r| r.event == event).unwrap()
    }

    #[test]
    fn rates_are_over_the_interval_and_totals_accumulate() {
        let mut m = Model::new();
        m.attach(0, "sched:sched_switch");
        for _ in 0..300 {
            m.record(0, 10, 64);
        }
        m.tick(Duration::from_millis(1500));
        let s = m.snapshot();
        let r = row(&s, "sched:sched_switch");
        assert_eq!((r.records_per_s, r.records), (200.0, 300));
        assert_eq!((r.bytes_per_s, r.bytes), (200.0 * 64.0, 300 * 64));
        assert_eq!((s.records_per_s, s.records), (200.0, 300));
        assert_eq!(s.interval, Duration::from_millis(1500));
        // A quiet interval: the rate drops to 0, the total stays.
        m.tick(SEC);
        let s = m.snapshot();
        let r = row(&s, "sched:sched_switch");
        assert_eq!((r.records_per_s, r.records, r.bytes), (0.0, 300, 300 * 64));
        assert!(r.top.is_empty());
        // Records before a tick do not show until it.
        m.record(0, 10, 1);
        assert_eq!(m.snapshot().records, 300);
        m.tick(Duration::ZERO);
        let s = m.snapshot();
        assert_eq!((s.records, s.records_per_s), (301, 0.0), "no division by 0");
    }

    #[test]
    fn top_processes_are_the_busiest_of_the_interval_and_bounded() {
        let mut m = Model::new();
        m.attach(3, "s:e");
        for (pid, n) in [(7, 5), (8, 50), (9, 20), (1, 1), (2, 1), (3, 1), (4, 2)] {
            for _ in 0..n {
                m.record(3, pid, 8);
            }
        }
        m.tick(SEC);
        let s = m.snapshot();
        assert_eq!(
            row(&s, "s:e").top,
            vec![(8, 50), (9, 20), (7, 5), (4, 2), (1, 1)],
            "busiest first, ties by pid, at most TOP_PIDS"
        );
        // Only the interval counts; a process is new again in each interval.
        assert!(m.record(3, 1, 8));
        assert!(!m.record(3, 1, 8));
        assert!(!m.record(9, 1, 8), "no event: not counted as a process");
        m.tick(SEC);
        assert_eq!(row(&m.snapshot(), "s:e").top, vec![(1, 2)]);
        // More distinct processes than MAX_PIDS: the rest are counted, not stored.
        for pid in 0..(MAX_PIDS as u32 + 10) {
            m.record(3, pid, 1);
        }
        m.tick(SEC);
        let s = m.snapshot();
        let r = row(&s, "s:e");
        assert_eq!(r.other_pids, 10);
        assert_eq!(r.records_per_s, (MAX_PIDS + 10) as f64);
    }

    #[test]
    fn lost_is_counted_for_all_events() {
        let mut m = Model::new();
        m.attach(0, "a:b");
        m.lost(30);
        m.lost(10);
        m.tick(Duration::from_secs(2));
        let s = m.snapshot();
        assert_eq!((s.lost, s.lost_per_s), (40, 20.0));
        m.tick(SEC);
        let s = m.snapshot();
        assert_eq!((s.lost, s.lost_per_s), (40, 0.0));
    }

    #[test]
    fn detached_rows_linger_then_go_and_slots_follow() {
        let mut m = Model::new();
        m.attach(0, "a:one");
        m.attach(1, "a:two");
        m.record(0, 1, 1);
        m.detach("a:one");
        // The slot no longer names it: a late record is unattributed, not miscounted.
        m.record(0, 1, 1);
        m.tick(SEC);
        let s = m.snapshot();
        assert!(!row(&s, "a:one").attached);
        assert_eq!(row(&s, "a:one").records, 1);
        assert_eq!(s.unattributed, 1);
        for _ in 1..LINGER_TICKS {
            m.tick(SEC);
        }
        let s = m.snapshot();
        assert_eq!(
            s.rows.iter().map(|r| r.event.as_str()).collect::<Vec<_>>(),
            ["a:two"]
        );
        // The other slot still counts into its row after the renumbering.
        m.record(1, 5, 4);
        m.tick(SEC);
        assert_eq!(row(&m.snapshot(), "a:two").records, 1);
        // Re-attached under another slot: the row comes back with a fresh count.
        m.attach(0, "a:one");
        m.record(0, 2, 1);
        m.tick(SEC);
        let s = m.snapshot();
        assert!(row(&s, "a:one").attached);
        assert_eq!(row(&s, "a:one").records, 1);
    }

    #[test]
    fn reattaching_before_the_row_goes_continues_its_total() {
        let mut m = Model::new();
        m.attach(0, "a:x");
        m.record(0, 1, 1);
        m.detach("a:x");
        m.tick(SEC);
        m.attach(4, "a:x");
        m.record(4, 1, 1);
        m.tick(SEC);
        let s = m.snapshot();
        assert_eq!(s.rows.len(), 1);
        assert_eq!(row(&s, "a:x").records, 2);
        for _ in 0..LINGER_TICKS + 1 {
            m.tick(SEC);
        }
        assert_eq!(m.snapshot().rows.len(), 1, "attached rows never go");
    }

    fn rows_of(spec: &[(&str, f64, u64, f64)]) -> Vec<Row> {
        spec.iter()
            .map(|&(event, rate, total, bytes)| Row {
                event: event.into(),
                attached: true,
                records_per_s: rate,
                records: total,
                interval_records: 0,
                bytes_per_s: bytes,
                bytes: 0,
                top: vec![],
                other_pids: 0,
                sites: Sites::default(),
            })
            .collect()
    }

    fn names(rows: &[Row]) -> Vec<&str> {
        rows.iter().map(|r| r.event.as_str()).collect()
    }

    #[test]
    fn sorting_by_each_key() {
        let mut rows = rows_of(&[
            ("s:b", 10.0, 5, 300.0),
            ("s:a", 20.0, 1, 100.0),
            ("s:c", 10.0, 9, 200.0),
        ]);
        sort_rows(&mut rows, SortKey::Rate);
        assert_eq!(names(&rows), ["s:a", "s:b", "s:c"], "ties by name");
        sort_rows(&mut rows, SortKey::Total);
        assert_eq!(names(&rows), ["s:c", "s:b", "s:a"]);
        sort_rows(&mut rows, SortKey::Bytes);
        assert_eq!(names(&rows), ["s:b", "s:c", "s:a"]);
        sort_rows(&mut rows, SortKey::Name);
        assert_eq!(names(&rows), ["s:a", "s:b", "s:c"]);
        let mut key = SortKey::Rate;
        for _ in 0..4 {
            key = key.next();
        }
        assert_eq!(key, SortKey::Rate, "Tab cycles through every key");
    }

    #[test]
    fn filtering_by_selector_or_substring() {
        let f = RowFilter::parse("sched:sched_*").unwrap().unwrap();
        assert!(f.matches("sched:sched_switch"));
        assert!(!f.matches("raw_syscalls:sys_enter"));
        let f = RowFilter::parse(" sys_ ").unwrap().unwrap();
        assert!(f.matches("raw_syscalls:sys_enter"));
        assert!(!f.matches("sched:sched_switch"));
        assert_eq!(f.to_string(), "sys_");
        // Multi-format versions match their base name, as on the command line.
        let f = RowFilter::parse("user_events_multi:m").unwrap().unwrap();
        assert!(f.matches("user_events_multi:m.1f"));
        assert!(RowFilter::parse("").unwrap().is_none());
        let e = RowFilter::parse("a:[").unwrap_err();
        assert!(e.contains("bad glob"), "{e}");
    }

    #[test]
    fn notices_and_unknown_slots() {
        let mut m = Model::new();
        m.record(9, 1, 1);
        m.notice("waiting", None, "no event matches x:y yet");
        m.tick(SEC);
        let s = m.snapshot();
        assert_eq!(s.unattributed, 1);
        assert_eq!(
            s.notice.as_deref(),
            Some("waiting: no event matches x:y yet")
        );
        assert!(s.rows.is_empty());
    }
}
