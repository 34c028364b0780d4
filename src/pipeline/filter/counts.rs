//! What became of each tracepoint's records under `--where`, `--sample` and
//! `--rate-limit`: kept, or not kept and why.
//! One [`TracepointCounts`] per tracepoint, shared by every formatter worker (each
//! counting in a lane of its own), read by the end-of-run summary, the in-band `{"uevrec":"dropped"}` lines and
//! `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Why a record was not kept (the `reason` of `{"uevrec":"dropped"}` lines and of
/// `/metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// A `--where` condition was false for it.
    Filtered,
    /// A `--where` condition could not be evaluated on it (a field it reads is missing
    /// from this record or did not decode, or the values' types do not fit the
    /// operators): not kept, as a condition that does not hold.
    FilterError,
    /// Left out of a `--sample`.
    Sampled,
    /// Over a `--rate-limit`.
    Throttled,
}

impl DropReason {
    /// Every reason, in the order they are reported.
    pub const ALL: [DropReason; 4] = [
        DropReason::Filtered,
        DropReason::FilterError,
        DropReason::Sampled,
        DropReason::Throttled,
    ];

    /// The reason's name in lines, the summary and `/metrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Filtered => "filtered",
            DropReason::FilterError => "filter_error",
            DropReason::Sampled => "sampled",
            DropReason::Throttled => "throttled",
        }
    }
}

/// The counts of one tracepoint: a lane per judge of its records (a worker's filter of
/// the tracepoint's format), summed when read.
#[derive(Debug, Default)]
pub struct TracepointCounts {
    lanes: Mutex<Vec<Arc<Lane>>>,
}

/// One judge's counts, written through its [`Counter`] alone.
#[derive(Debug, Default)]
struct Lane {
    kept: AtomicU64,
    filtered: AtomicU64,
    filter_error: AtomicU64,
    sampled: AtomicU64,
    throttled: AtomicU64,
}

/// What one judge counts with: its lane's only writer, so that each count is a load and
/// a store rather than a locked add (which cost as much as judging a one-clause
/// condition: BENCHMARKS.md, "Issue 40: the leaves' path"); it counts through `&mut`.
#[derive(Debug)]
pub struct Counter {
    lane: Arc<Lane>,
}

/// A copy of [`TracepointCounts`] at one time.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    /// Records kept.
    pub kept: u64,
    /// Records whose condition was false.
    pub filtered: u64,
    /// Records whose condition could not be evaluated.
    pub filter_error: u64,
    /// Records left out of a sample.
    pub sampled: u64,
    /// Records over a rate limit.
    pub throttled: u64,
}

impl Counted {
    /// Records not kept, for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        match reason {
            DropReason::Filtered => self.filtered,
            DropReason::FilterError => self.filter_error,
            DropReason::Sampled => self.sampled,
            DropReason::Throttled => self.throttled,
        }
    }

    /// `N kept, N filtered` and each other reason with records (the end-of-run
    /// summaries of `record` and `decode`).
    pub fn words(&self) -> String {
        let mut text = format!("{} kept", self.kept);
        for reason in DropReason::ALL {
            let dropped = self.dropped(reason);
            if dropped > 0 || reason == DropReason::Filtered {
                text.push_str(&format!(", {dropped} {}", reason.as_str()));
            }
        }
        text
    }

    /// Every record the filter saw: kept + not kept.
    pub fn seen(&self) -> u64 {
        self.kept + self.filtered + self.filter_error + self.sampled + self.throttled
    }
}

impl TracepointCounts {
    /// A counter for one more judge of this tracepoint's records.
    pub fn counter(&self) -> Counter {
        let lane = Arc::new(Lane::default());
        self.lanes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::clone(&lane));
        Counter { lane }
    }

    /// Back to nothing counted (while no judge counts: a count made meanwhile could be
    /// kept).
    pub fn reset(&self) {
        for lane in self
            .lanes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            for c in lane.all() {
                c.store(0, Ordering::Relaxed);
            }
        }
    }

    /// The counts now: every judge's, added.
    pub fn get(&self) -> Counted {
        let mut sum = Counted::default();
        for lane in self
            .lanes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            sum.kept += lane.kept.load(Ordering::Relaxed);
            sum.filtered += lane.filtered.load(Ordering::Relaxed);
            sum.filter_error += lane.filter_error.load(Ordering::Relaxed);
            sum.sampled += lane.sampled.load(Ordering::Relaxed);
            sum.throttled += lane.throttled.load(Ordering::Relaxed);
        }
        sum
    }
}

impl Lane {
    fn all(&self) -> [&AtomicU64; 5] {
        [
            &self.kept,
            &self.filtered,
            &self.filter_error,
            &self.sampled,
            &self.throttled,
        ]
    }
}

impl Counter {
    /// Count one record kept.
    #[inline]
    pub fn kept(&mut self) {
        add_one(&self.lane.kept);
    }

    /// Count one record not kept, for `reason`.
    #[inline]
    pub fn dropped(&mut self, reason: DropReason) {
        let lane = &self.lane;
        add_one(match reason {
            DropReason::Filtered => &lane.filtered,
            DropReason::FilterError => &lane.filter_error,
            DropReason::Sampled => &lane.sampled,
            DropReason::Throttled => &lane.throttled,
        });
    }
}

/// One more in a count that one thread writes.
#[inline]
fn add_one(count: &AtomicU64) {
    count.store(count.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}
