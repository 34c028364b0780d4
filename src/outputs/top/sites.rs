//! `top -g`: each row's busiest call paths (a record's stack as its functions' names,
//! [`crate::pipeline::stacks::call_path`]), counted per interval and since the start.
//!
//! Bounded: at most [`MAX_SITES`] distinct paths per row. The records of a path that
//! finds the table full are counted in `other`; at each tick, while the table is full,
//! the paths that had no record in the interval leave it, their totals moving to
//! `other`, so a new path gets in once an old one goes quiet. A row's paths and `other`
//! always add up to its records.

use std::cmp::Ordering;
use std::sync::Arc;

/// Distinct call paths counted per row (event or pod).
pub const MAX_SITES: usize = 256;

/// Call paths kept per row in a snapshot, busiest first.
pub const TOP_SITES: usize = 10;

/// The path of a record that came without its stack (the ftrace backend's stack records
/// that never came: docs/stacks.md).
pub const NO_STACK: &str = "[no stack]";

/// One call path's counts.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    /// Since the start (since it entered the table, for a path).
    records: u64,
    /// In this interval.
    interval: u64,
}

/// One call path as a snapshot shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Site {
    /// Its functions, innermost first, one a line ([`crate::pipeline::stacks::call_path`]).
    pub path: Arc<str>,
    /// Records in the last interval.
    pub interval_records: u64,
    /// Records per second over the last interval.
    pub records_per_s: f64,
    /// Records since it entered the table.
    pub records: u64,
}

/// A row's call paths as a snapshot shows them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sites {
    /// The busiest of the last interval (ties: the most since the start, then by path),
    /// at most [`TOP_SITES`].
    pub top: Vec<Site>,
    /// Records of the last interval of paths not kept (the table was full).
    pub other_interval: u64,
    /// Records since the start of paths not kept, or dropped from the full table.
    pub other_records: u64,
    /// Distinct paths in the table.
    pub distinct: usize,
}

/// One row's call paths, bounded by [`MAX_SITES`].
#[derive(Debug, Default)]
pub struct CallSites {
    sites: foldhash::HashMap<Arc<str>, Counts>,
    other: Counts,
}

impl CallSites {
    /// A record of call path `path`.
    pub fn record(&mut self, path: &Arc<str>) {
        let room = self.sites.len() < MAX_SITES;
        let counts = match self.sites.get_mut(path) {
            Some(c) => c,
            None if room => self.sites.entry(Arc::clone(path)).or_default(),
            None => &mut self.other,
        };
        counts.records += 1;
        counts.interval += 1;
    }

    /// Close the interval that lasted `secs` seconds: the busiest paths of it; a full
    /// table lets its quiet paths go.
    pub fn tick(&mut self, secs: f64) -> Sites {
        let per_s = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        let mut top: Vec<Site> = self
            .sites
            .iter()
            .filter(|(_, c)| c.records > 0)
            .map(|(path, c)| Site {
                path: Arc::clone(path),
                interval_records: c.interval,
                records_per_s: per_s(c.interval),
                records: c.records,
            })
            .collect();
        top.sort_unstable_by(busiest_first);
        top.truncate(TOP_SITES);
        let shown = Sites {
            top,
            other_interval: self.other.interval,
            other_records: self.other.records,
            distinct: self.sites.len(),
        };
        let full = self.sites.len() >= MAX_SITES;
        let other = &mut self.other;
        self.sites.retain(|_, c| {
            let keep = !full || c.interval > 0;
            if !keep {
                other.records += c.records;
            }
            c.interval = 0;
            keep
        });
        other.interval = 0;
        shown
    }
}

/// The busiest of the interval first, then the most since the start, then by path.
pub fn busiest_first(a: &Site, b: &Site) -> Ordering {
    b.interval_records
        .cmp(&a.interval_records)
        .then(b.records.cmp(&a.records))
        .then_with(|| a.path.cmp(&b.path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(name: &str) -> Arc<str> {
        Arc::from(name)
    }

    fn names(s: &Sites) -> Vec<(&str, u64, u64)> {
        s.top
            .iter()
            .map(|t| (&*t.path, t.interval_records, t.records))
            .collect()
    }

    #[test]
    fn busiest_of_the_interval_first_then_by_total_then_by_path() {
        let mut c = CallSites::default();
        for (p, n) in [("a", 3), ("b", 5), ("c", 3), ("d", 1)] {
            for _ in 0..n {
                c.record(&path(p));
            }
        }
        let s = c.tick(0.5);
        assert_eq!(
            names(&s),
            [("b", 5, 5), ("a", 3, 3), ("c", 3, 3), ("d", 1, 1)]
        );
        assert_eq!(s.top[0].records_per_s, 10.0);
        // The next interval: d alone is busy; the others are ordered by their totals.
        c.record(&path("d"));
        c.record(&path("d"));
        let s = c.tick(1.0);
        assert_eq!(
            names(&s),
            [("d", 2, 3), ("b", 0, 5), ("a", 0, 3), ("c", 0, 3)]
        );
        assert_eq!((s.other_interval, s.other_records, s.distinct), (0, 0, 4));
    }

    #[test]
    fn bounded_with_the_rest_in_other_and_quiet_paths_leave_a_full_table() {
        let mut c = CallSites::default();
        for i in 0..MAX_SITES + 10 {
            c.record(&path(&format!("p{i}")));
        }
        c.record(&path("p0"));
        let s = c.tick(1.0);
        assert_eq!(s.distinct, MAX_SITES);
        assert_eq!((s.other_interval, s.other_records), (10, 10));
        assert_eq!(s.top.len(), TOP_SITES);
        assert_eq!(names(&s)[0], ("p0", 2, 2));
        // Every path had a record: all stay, and a new one still goes to other.
        c.record(&path("new"));
        c.record(&path("p1"));
        let s = c.tick(1.0);
        assert_eq!((s.other_interval, s.other_records), (1, 11));
        assert_eq!(s.distinct, MAX_SITES);
        // That interval only p1 was busy: the rest left the full table, their totals
        // in other (every record still counted once).
        assert_eq!(s.top.len(), TOP_SITES);
        let s = c.tick(1.0);
        assert_eq!(s.distinct, 1);
        assert_eq!(names(&s), [("p1", 0, 2)]);
        assert_eq!(s.other_records, 11 + MAX_SITES as u64);
        // Room again: a new path gets in.
        c.record(&path("new"));
        let s = c.tick(1.0);
        assert_eq!(names(&s)[0], ("new", 1, 1));
        let counted: u64 = s.top.iter().map(|t| t.records).sum::<u64>() + s.other_records;
        assert_eq!(counted, MAX_SITES as u64 + 10 + 1 + 2 + 1);
    }
}
