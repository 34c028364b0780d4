//! The one spelling of "this test needs X": test tiers and loud skips.
//!
//! Tiers: `pure` (bytes only, runs anywhere; the real corpus in `../shared/corpus`),
//! `host` (root, tracefs and perf_event_open on the host kernel), `vm` (a kernel with
//! `CONFIG_USER_EVENTS=y`: scripts/vm-test.sh) and `pipelines` (rsyslog/syslog-ng swapped
//! in and out with apt-get).
//!
//! A test whose tier cannot run here calls [`skip`] (or the `require!` macro) and returns:
//! - when the environment variable `UEVREC_REQUIRE_TIERS` (comma-separated tier names, or
//!   `all`) names its tier, that is a **failure** (a panic saying what is missing);
//! - otherwise it prints `SKIP [tier] test: reason` on stderr and appends that line to the
//!   file named by `UEVREC_SKIP_LOG`, so that scripts/test-all.sh counts it as skipped,
//!   not passed.
//!
//! This file is std-only so that every test crate can include it (`parsers/tests` do so
//! with `#[path]`).
#![allow(dead_code)]

use std::fmt;
use std::io::Write;

/// A test tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Parsers and decoders on bytes (including the shared corpus).
    Pure,
    /// The host kernel: root, tracefs, perf_event_open.
    Host,
    /// A kernel with user_events (the QEMU VM).
    Vm,
    /// Log pipelines (rsyslog, syslog-ng) installed on the machine.
    Pipelines,
}

impl Tier {
    /// The tier's name in `UEVREC_REQUIRE_TIERS`.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Pure => "pure",
            Tier::Host => "host",
            Tier::Vm => "vm",
            Tier::Pipelines => "pipelines",
        }
    }

    /// Whether `UEVREC_REQUIRE_TIERS` names this tier (or `all`).
    pub fn required(self) -> bool {
        std::env::var("UEVREC_REQUIRE_TIERS").is_ok_and(|v| required_in(&v, self))
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether the tier list `list` (comma or space separated, `all` for every tier) names
/// `tier`.
pub fn required_in(list: &str, tier: Tier) -> bool {
    list.split([',', ' '])
        .map(str::trim)
        .any(|t| t == tier.name() || t == "all")
}

/// This test cannot run its `tier` here because of `why`: fail when the tier is required,
/// else say so on stderr and in `UEVREC_SKIP_LOG`. The caller returns afterwards.
#[track_caller]
pub fn skip(tier: Tier, why: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("?");
    if tier.required() {
        panic!(
            "{test}: tier `{tier}` is required (UEVREC_REQUIRE_TIERS={}) but cannot run: {why}",
            std::env::var("UEVREC_REQUIRE_TIERS").unwrap_or_default()
        );
    }
    let line = format!("SKIP [{tier}] {test}: {why}");
    eprintln!("{line}");
    if let Some(path) = std::env::var_os("UEVREC_SKIP_LOG") {
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
        if let Err(e) = appended {
            eprintln!("(could not append to UEVREC_SKIP_LOG {path:?}: {e})");
        }
    }
}

/// `require!(tier, check)`: `check` is a `Result<T, impl Display>`; on `Err(why)` the test
/// is skipped (or fails, see [`skip`]) and returns; on `Ok(v)` the macro gives `v`.
/// `require!(tier, check, value)`: the same in a test's helper, which returns `value`.
#[macro_export]
macro_rules! require {
    ($tier:expr, $check:expr) => {
        $crate::require!($tier, $check, ())
    };
    ($tier:expr, $check:expr, $skipped:expr) => {
        match $check {
            Ok(v) => v,
            Err(why) => {
                $crate::common::tier::skip($tier, &why.to_string());
                return $skipped;
            }
        }
    };
}
