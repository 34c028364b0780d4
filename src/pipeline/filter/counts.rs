//! What became of each tracepoint's records under `--where`, `--sample` and
//! `--rate-limit`: kept, or not kept and why.
//! One [`TracepointCounts`] per tracepoint, shared by every formatter worker (atomic
//! adds), read by the end-of-run summary, the in-band `{"uevrec":"dropped"}` lines and
//! `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};

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

/// The counts of one tracepoint.
#[derive(Debug, Default)]
pub struct TracepointCounts {
    kept: AtomicU64,
    filtered: AtomicU64,
    filter_error: AtomicU64,
    sampled: AtomicU64,
    throttled: AtomicU64,
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
    /// Count one record kept.
    #[inline]
    pub fn kept(&self) {
        self.kept.fetch_add(1, Ordering::Relaxed);
    }

    /// Count one record not kept, for `reason`.
    #[inline]
    pub fn dropped(&self, reason: DropReason) {
        let counter = match reason {
            DropReason::Filtered => &self.filtered,
            DropReason::FilterError => &self.filter_error,
            DropReason::Sampled => &self.sampled,
            DropReason::Throttled => &self.throttled,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Back to nothing counted.
    pub fn reset(&self) {
        for c in [
            &self.kept,
            &self.filtered,
            &self.filter_error,
            &self.sampled,
            &self.throttled,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }

    /// The counts now.
    pub fn get(&self) -> Counted {
        Counted {
            kept: self.kept.load(Ordering::Relaxed),
            filtered: self.filtered.load(Ordering::Relaxed),
            filter_error: self.filter_error.load(Ordering::Relaxed),
            sampled: self.sampled.load(Ordering::Relaxed),
            throttled: self.throttled.load(Ordering::Relaxed),
        }
    }
}
