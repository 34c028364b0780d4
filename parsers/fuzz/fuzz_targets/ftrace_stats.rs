//! The `per_cpu/cpuN/stats` text of an ftrace instance → `losses::stats_total`, and the
//! loss accounting built on it (`losses::Losses`, what the ftrace backend and `uevrec
//! decode` of a trace.dat report):
//! - never panics, whatever the text and the counts (any u64: issue 43);
//! - `stats_total` is `overrun` (the last line of it) plus every `commit overrun` and
//!   `dropped events`, stopped at `u64::MAX` (an independent sum in u128);
//! - `Losses` reports what a model in u128 reports, step by step: a page's stored count as
//!   it is until the first page without one, from then on (and at the settlement) what a
//!   stats total adds beyond the most reported so far. So its reports never wrap, and
//!   with every count stored they add up to the larger of their sum and the final total.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use uevrec_parsers::ftrace_page::losses::{Losses, stats_total};

#[derive(Debug, Arbitrary)]
struct Input<'a> {
    /// A stats text, and the final one (settled at the end).
    text: &'a str,
    last: &'a str,
    /// Pages that lost records: the stored count (`None`: not stored) and whether the
    /// stats can be read then (they are `text`'s total).
    pages: Vec<(Option<u64>, bool)>,
}

/// The sum in u128, without the reader's code: `None` without an `overrun` line.
fn oracle(text: &str) -> Option<u64> {
    let mut overrun = None;
    let mut rest = 0u128;
    for (key, value) in text.lines().filter_map(|l| l.split_once(':')) {
        let Ok(n) = value.trim().parse::<u64>() else {
            continue;
        };
        match key.trim() {
            "overrun" => overrun = Some(n),
            "commit overrun" | "dropped events" => rest += u128::from(n),
            _ => {}
        }
    }
    overrun.map(|o| u64::try_from(u128::from(o) + rest).unwrap_or(u64::MAX))
}

/// Losses' rule in u128.
#[derive(Default)]
struct Model {
    reported: u128,
    by_stats: bool,
}

impl Model {
    fn missed(&mut self, count: Option<u64>, total: Option<u64>) -> u128 {
        match count {
            Some(c) if !self.by_stats => {
                self.reported += u128::from(c);
                u128::from(c)
            }
            _ => {
                self.by_stats = true;
                total.map_or(0, |t| self.settle(t))
            }
        }
    }

    fn settle(&mut self, total: u64) -> u128 {
        let n = u128::from(total).saturating_sub(self.reported);
        self.reported = self.reported.max(u128::from(total));
        n
    }
}

fuzz_target!(|input: Input<'_>| {
    let total = stats_total(input.text);
    assert_eq!(total, oracle(input.text), "{:?}", input.text);
    let last = stats_total(input.last);
    assert_eq!(last, oracle(input.last), "{:?}", input.last);

    let (mut losses, mut model) = (Losses::default(), Model::default());
    let mut sum = 0u128;
    for &(count, readable) in &input.pages {
        let t = total.filter(|_| readable);
        let n = losses.missed(count, || t);
        assert_eq!(
            u128::from(n),
            model.missed(count, t),
            "{count:?} with stats {t:?}"
        );
        sum += u128::from(n);
    }
    if let Some(last) = last {
        let n = losses.settle(last);
        assert_eq!(u128::from(n), model.settle(last));
        sum += u128::from(n);
        if input.pages.iter().all(|(c, _)| c.is_some()) {
            let stored: u128 = input.pages.iter().filter_map(|p| p.0).map(u128::from).sum();
            assert_eq!(sum, stored.max(u128::from(last)));
        }
    }
});
