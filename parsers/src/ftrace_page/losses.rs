//! Exact loss accounting for one CPU's ring of a tracefs instance (the ftrace backend
//! while recording, and `uevrec decode` of a trace.dat with the CPUs' `stats`).
//!
//! The instance runs in overwrite mode: when the ring is full the writer overwrites the
//! oldest page and adds its records to the CPU's `overrun` counter. The reader learns of
//! it from the next page it takes: the page's missed-events flag, with the count (the
//! overrun since the previous report) stored after the data when it fits
//! ([`super::PageHeader::missed`]). Records can also be dropped
//! without a page to tell (`commit overrun`, and `dropped events` outside overwrite
//! mode), and when the count does not fit it is not stored at all. So:
//!
//! - while every count was stored, each is reported as it comes: their sum is the
//!   kernel's own tally of overruns reported so far, which never exceeds `overrun`;
//! - from the first missed page without a count on, each missed page reports what the
//!   CPU's `stats` file says was lost (`overrun + commit overrun + dropped events`) beyond
//!   what was already reported;
//! - at the end, after the ring was drained, [`Losses::settle`] reports the rest from
//!   `stats`.
//!
//! Every report is a difference to a counter that only grows, so the reports never add
//! up to more than the kernel's final count, and the settlement makes them add up to it
//! exactly: records kept + reported lost = records produced.

/// The losses of one CPU's ring reported so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Losses {
    /// Records reported lost.
    reported: u64,
    /// A count was missing once: report from the `stats` totals from now on.
    by_stats: bool,
}

impl Losses {
    /// A page said records were lost before it: `count` when the kernel stored it.
    /// `total` reads the CPU's `stats` totals (None when unreadable). Returns how many to
    /// report now.
    pub fn missed(&mut self, count: Option<u64>, total: impl FnOnce() -> Option<u64>) -> u64 {
        match count {
            Some(c) if !self.by_stats => {
                // `c` is the page's claim, any u64: the tally stops at u64::MAX rather than
                // wrap. Stopped there it is at least every stats total, so nothing more
                // is reported from the stats, which is right: the pages alone claim more.
                self.reported = self.reported.saturating_add(c);
                c
            }
            _ => {
                self.by_stats = true;
                total().map_or(0, |t| self.settle(t))
            }
        }
    }

    /// The ring's `stats` total is `total`: report what was lost beyond the reports so far
    /// (at the end of a session, after draining).
    pub fn settle(&mut self, total: u64) -> u64 {
        let n = total.saturating_sub(self.reported);
        // reported + n, without a sum that could overflow.
        self.reported = self.reported.max(total);
        n
    }

    /// Records reported lost so far.
    #[cfg(test)]
    pub fn reported(&self) -> u64 {
        self.reported
    }
}

/// The records a CPU's ring lost, from its `per_cpu/cpuN/stats` text: `overrun` +
/// `commit overrun` + `dropped events`. None when `overrun` is missing.
pub fn stats_total(text: &str) -> Option<u64> {
    let mut overrun = None;
    let mut rest = 0u64;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let Ok(n) = value.trim().parse::<u64>() else {
            continue;
        };
        match key.trim() {
            "overrun" => overrun = Some(n),
            "commit overrun" | "dropped events" => rest = rest.saturating_add(n),
            _ => {}
        }
    }
    overrun.map(|o| o.saturating_add(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATS: &str = "entries: 12\noverrun: 100\ncommit overrun: 3\nbytes: 4096\n\
                         oldest event ts:  9323.886628\nnow ts:  9323.886628\n\
                         dropped events: 2\nread events: 40\n";

    #[test]
    fn the_stats_total_adds_every_kind_of_loss() {
        assert_eq!(stats_total(STATS), Some(105));
        assert_eq!(stats_total("entries: 1\n"), None);
    }

    #[test]
    fn stored_counts_are_reported_as_they_come_and_settled_at_the_end() {
        let mut l = Losses::default();
        assert_eq!(l.missed(Some(10), || panic!("no stats read")), 10);
        assert_eq!(l.missed(Some(5), || panic!("no stats read")), 5);
        // Overruns after the last page, and a commit overrun: only stats know them.
        assert_eq!(l.settle(18), 3);
        assert_eq!(l.reported(), 18);
        assert_eq!(l.settle(18), 0);
    }

    #[test]
    fn after_a_missing_count_the_stats_decide_and_nothing_is_counted_twice() {
        let mut l = Losses::default();
        assert_eq!(l.missed(Some(4), || None), 4);
        // Not stored: 6 were lost for this page, and 3 more already after it.
        assert_eq!(l.missed(None, || Some(13)), 9);
        // That page's count (3) was already reported from the stats.
        assert_eq!(l.missed(Some(3), || Some(13)), 0);
        assert_eq!(l.missed(Some(2), || Some(15)), 2);
        // Unreadable stats: nothing now, the settlement catches up.
        assert_eq!(l.missed(Some(1), || None), 0);
        assert_eq!(l.settle(16), 1);
        assert_eq!(l.reported(), 16);
    }

    #[test]
    fn counts_past_what_a_u64_holds_stop_the_tally_and_report_nothing_twice() {
        let mut l = Losses::default();
        assert_eq!(l.missed(Some(u64::MAX - 1), || None), u64::MAX - 1);
        // Each page's claim is reported as it is; the tally stops at u64::MAX.
        assert_eq!(l.missed(Some(5), || None), 5);
        assert_eq!(l.reported(), u64::MAX);
        // No stats total is beyond it: nothing more to settle.
        assert_eq!(l.settle(u64::MAX), 0);
        assert_eq!(l.missed(None, || Some(7)), 0);
    }
}
