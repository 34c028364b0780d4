//! Wall-clock time for records. Tracepoint perf events accept only
//! `CLOCK_MONOTONIC`/`CLOCK_MONOTONIC_RAW` as their clock, so samples carry monotonic
//! nanoseconds; [`WallClock`] converts them to Unix time with an offset `REALTIME -
//! MONOTONIC` that is re-sampled (by default every second, [`WallClock::maybe_resample`])
//! so NTP steps and slews are followed. The accuracy: [`sample_offset_ns`] (the offset)
//! and [`WallClock`] (between re-samples).

use std::time::{Duration, Instant};

/// How often a recording re-samples its [`WallClock`] offset.
pub const RESAMPLE_INTERVAL: Duration = Duration::from_secs(1);

/// Read a clock in nanoseconds.
fn now_ns(clock: libc::clockid_t) -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes to it.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    debug_assert_eq!(rc, 0, "clock_gettime failed");
    i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec)
}

/// Nanoseconds of `CLOCK_MONOTONIC` now (the clock perf samples are stamped with).
pub fn monotonic_ns() -> u64 {
    now_ns(libc::CLOCK_MONOTONIC) as u64
}

/// Nanoseconds of `CLOCK_REALTIME` now (Unix time).
pub fn now_unix_ns() -> u64 {
    u64::try_from(now_ns(libc::CLOCK_REALTIME)).unwrap_or(0)
}

/// Measure `REALTIME - MONOTONIC` in nanoseconds, keeping the tightest of 5 tries: each
/// reads REALTIME, MONOTONIC, REALTIME back to back, so the offset itself is exact to
/// within that window (well under a microsecond).
pub fn sample_offset_ns() -> i128 {
    let mut best = (i128::MAX, 0i128);
    for _ in 0..5 {
        let r1 = now_ns(libc::CLOCK_REALTIME);
        let m = now_ns(libc::CLOCK_MONOTONIC);
        let r2 = now_ns(libc::CLOCK_REALTIME);
        let window = r2 - r1;
        if window < best.0 {
            best = (window, r1 + window / 2 - m);
        }
    }
    best.1
}

/// Converts monotonic sample times to Unix nanoseconds, re-sampling its offset. Between
/// re-samples NTP may slew the realtime clock by at most 500 ppm, i.e. ≤ 0.5 ms per second
/// of interval; a step of the realtime clock shows in records converted after the next
/// re-sample (records already in the rings at that moment are converted with the new
/// offset).
#[derive(Debug, Clone)]
pub struct WallClock {
    offset_ns: i128,
    sampled_at: Instant,
    interval: Duration,
}

impl WallClock {
    /// A clock sampled now, re-sampled every `interval`.
    pub fn new(interval: Duration) -> Self {
        WallClock {
            offset_ns: sample_offset_ns(),
            sampled_at: Instant::now(),
            interval,
        }
    }

    /// Re-sample the offset if the interval has passed; cheap to call per batch.
    pub fn maybe_resample(&mut self) {
        if self.sampled_at.elapsed() >= self.interval {
            self.offset_ns = sample_offset_ns();
            self.sampled_at = Instant::now();
        }
    }

    /// The current offset `REALTIME - MONOTONIC` in nanoseconds.
    pub fn offset_ns(&self) -> i128 {
        self.offset_ns
    }

    /// Unix time in nanoseconds for a monotonic timestamp (None before 1970 or past u64).
    #[inline]
    pub fn to_unix_ns(&self, monotonic_ns: u64) -> Option<u64> {
        u64::try_from(i128::from(monotonic_ns) + self.offset_ns).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_now_to_now() {
        let clock = WallClock::new(Duration::from_secs(1));
        let wall = clock.to_unix_ns(monotonic_ns()).unwrap() as i128;
        let real = now_ns(libc::CLOCK_REALTIME);
        assert!(
            (wall - real).abs() < 50_000_000,
            "wall {wall} vs realtime {real}"
        );
    }

    #[test]
    fn resample_respects_interval() {
        let mut clock = WallClock::new(Duration::from_secs(3600));
        let before = clock.sampled_at;
        clock.maybe_resample();
        assert_eq!(before, clock.sampled_at);
        clock.interval = Duration::ZERO;
        clock.maybe_resample();
        assert!(clock.sampled_at > before);
    }
}
