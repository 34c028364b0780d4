//! `uevrec top`'s threads: the session on the caller's thread, the counting thread in
//! place of the formatter, and the display beside them ([`crate::outputs::top`] has
//! their bodies).

use std::io;
use std::sync::atomic::AtomicBool;

use super::{Job, stage_into};
use crate::capture::session::{LiveStats, SessionConfig};
use crate::outputs::top::{self, Display, Shared, TopOptions, TopOutcome};

/// Run the session of `config` with the counting thread and the `display`, until `stop`
/// (a signal), `--duration`, q, or an error; returns once every thread has ended (the
/// terminal restored).
pub fn run(
    config: &SessionConfig,
    opts: &TopOptions,
    display: Display,
    stop: &AtomicBool,
) -> TopOutcome {
    let shared = Shared::default();
    let stats = LiveStats::default();
    let shared = &shared;
    let count = Job {
        name: "uevrec-count",
        body: |rx, pool| {
            top::counter::run(
                &rx,
                &pool,
                shared,
                opts.by,
                opts.filter.clone(),
                opts.stacks,
            )
        },
    };
    let show = Job {
        name: "uevrec-top",
        body: |done: &AtomicBool| match display {
            Display::Terminal => top::view::run(shared, opts, stop, done),
            Display::Lines => top::plain::run(shared, opts, stop, done, &mut io::stdout()),
        },
    };
    let (session, _, display) = stage_into(config, stop, &stats, count, show);
    TopOutcome {
        session,
        // No display thread (the OS refused it): the session's error says so.
        display: display.unwrap_or(Ok(())),
    }
}
