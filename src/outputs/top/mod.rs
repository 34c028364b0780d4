//! `uevrec top`: which events fire, how often, and who writes them, live. It is `record`
//! with the formatter replaced: a counting thread (`uevrec-count`, [`counter`]) puts per
//! record only its slot, pid and length into the [`model::Model`] (no decoding, no JSON),
//! and a display thread (`uevrec-top`) closes one interval at a time and shows it, in a
//! terminal ([`view`], ratatui) or as JSON lines ([`plain`]). Process names come from
//! `/proc` ([`comm`]), only for the processes shown. crate::recorder::top starts and
//! joins the threads (drawn in docs/top.md, "How it counts").
//!
//! With `-g` the counting thread also names each record's stack as a call path, off the
//! model's lock ([`crate::pipeline::stacks::call_path`]: the bounded, time-budgeted
//! naming of `record -g`), and [`sites`] counts the busiest per row.
//!
//! Layers, lowest first: `sites`, `model`, `comm`, `pods`, `keep`, `counter`, `plain`,
//! `view`.

pub mod comm;
pub mod counter;
pub mod keep;
pub mod model;
pub mod plain;
pub mod pods;
pub mod sites;
pub mod view;

use std::io;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::capture::session::{SessionError, Summary};
use comm::CommCache;
use model::{Model, SortKey};

/// What the counting thread and the display share.
#[derive(Debug, Default)]
pub struct Shared {
    /// The counts.
    pub model: Mutex<Model>,
    /// The names of the processes counted.
    pub comms: Mutex<CommCache>,
}

/// How the numbers are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Display {
    /// The live terminal view ([`view`]).
    Terminal,
    /// JSON lines on standard output ([`plain`]).
    Lines,
}

/// The display's options.
#[derive(Debug, Clone)]
pub struct TopOptions {
    /// How long one interval lasts (the redraw period).
    pub interval: Duration,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// The first sort key.
    pub sort: SortKey,
    /// The backend's name, for the header.
    pub backend: &'static str,
    /// What a row is: an event, or a pod (`--by pod`, [`pods`]).
    pub by: pods::GroupBy,
    /// `--where` / `--sample` / `--rate-limit`: only the records they keep are counted ([`keep`]).
    pub filter: Option<std::sync::Arc<crate::pipeline::filter::Filter>>,
    /// `-g`: how the records' stacks are named for the call paths ([`sites`]).
    pub stacks: Option<crate::pipeline::stacks::StackOptions>,
}

impl Default for TopOptions {
    fn default() -> Self {
        TopOptions {
            interval: Duration::from_secs(1),
            duration: None,
            sort: SortKey::Rate,
            backend: "perf",
            by: pods::GroupBy::Event,
            filter: None,
            stacks: None,
        }
    }
}

/// What a `top` session ended with.
#[derive(Debug)]
pub struct TopOutcome {
    /// The session's result.
    pub session: Result<Summary, SessionError>,
    /// The display's result (a terminal or output error).
    pub display: io::Result<()>,
}

/// The display's clock: interval ends and the `--duration` deadline.
#[derive(Debug)]
pub struct Clock {
    interval: Duration,
    last: Instant,
    next: Instant,
    deadline: Option<Instant>,
}

impl Clock {
    /// Intervals of `interval` from now; expires after `duration`.
    pub fn new(interval: Duration, duration: Option<Duration>) -> Self {
        let now = Instant::now();
        Clock {
            interval,
            last: now,
            next: now + interval,
            deadline: duration.map(|d| now + d),
        }
    }

    /// When an interval has ended: its length (and the next one starts).
    pub fn tick_due(&mut self) -> Option<Duration> {
        (Instant::now() >= self.next).then(|| self.tick_now())
    }

    /// End the interval now (the last, shorter one): its length.
    pub fn tick_now(&mut self) -> Duration {
        let now = Instant::now();
        let elapsed = now - self.last;
        self.last = now;
        self.next = now + self.interval;
        elapsed
    }

    /// Time left in this interval.
    pub fn until_tick(&self) -> Duration {
        self.next.saturating_duration_since(Instant::now())
    }

    /// Whether `--duration` has passed.
    pub fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

/// A number in at most 6 columns: exact below 10 000, then 12k, 999k, 1.2M, 45M … (SI).
pub fn human(v: f64) -> String {
    if !v.is_finite() || v < 0.0 {
        return "?".into();
    }
    if v < 10_000.0 {
        return format!("{v:.0}");
    }
    let mut v = v;
    for unit in ["k", "M", "G", "T", "P"] {
        v /= 1000.0;
        if v < 9.95 {
            return format!("{v:.1}{unit}");
        }
        if v < 999.5 {
            return format!("{v:.0}{unit}");
        }
    }
    "huge".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_numbers_fit_six_columns() {
        let cases = [
            (0.0, "0"),
            (0.4, "0"),
            (9999.0, "9999"),
            (10_000.0, "10k"),
            (12_345.0, "12k"),
            (999_400.0, "999k"),
            (999_600.0, "1.0M"),
            (1_234_567.0, "1.2M"),
            (98_765_432_100.0, "99G"),
            (f64::NAN, "?"),
        ];
        for (v, want) in cases {
            assert_eq!(human(v), want, "{v}");
        }
        assert!(human(1e30).len() <= 6);
    }

    #[test]
    fn the_clock_ticks_and_expires() {
        let mut c = Clock::new(Duration::from_millis(20), Some(Duration::from_millis(30)));
        assert_eq!(c.tick_due(), None);
        assert!(!c.expired());
        std::thread::sleep(Duration::from_millis(35));
        let e = c.tick_due().unwrap();
        assert!(e >= Duration::from_millis(35), "{e:?}");
        assert_eq!(c.tick_due(), None, "the next interval starts at the tick");
        assert!(c.expired());
    }
}
