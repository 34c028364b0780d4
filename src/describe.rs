//! What a recording says about itself in-band (`docs/json-lines.md`, "A self-describing
//! stream"): the [`SessionInfo`] of its first line, read from this machine and the
//! session's configuration. The formatter writes it, and a schema line for each event
//! format ([`crate::formatter`]); `--no-schema` turns both off.

use std::collections::HashSet;
use std::sync::Arc;

use uevrec_parsers::{ClockInfo, SessionInfo};

use crate::clock::{RESAMPLE_INTERVAL, monotonic_ns, sample_offset_ns};
use crate::pipeline::FormatSource;
use crate::raw::host::Uname;
use crate::selector::default_selectors;
use crate::session::SessionConfig;
use crate::session::backend::BackendKind;

/// This machine and `config`, now (the start of the session). The CPU list is the one
/// online now (an empty list when sysfs does not say: the session then fails to start
/// anyway).
pub fn session_info(config: &SessionConfig) -> SessionInfo {
    let uts = Uname::now();
    let selectors = if config.selectors.is_empty() {
        default_selectors()
    } else {
        config.selectors.clone()
    };
    let monotonic = monotonic_ns();
    let offset = sample_offset_ns();
    let realtime = u64::try_from(i128::from(monotonic) + offset).unwrap_or(0);
    SessionInfo {
        uevrec_version: env!("CARGO_PKG_VERSION").into(),
        host: uts.nodename,
        kernel: uts.release,
        kernel_version: uts.version,
        machine: uts.machine,
        byte_order: if cfg!(target_endian = "big") {
            "big"
        } else {
            "little"
        }
        .into(),
        word_size: std::mem::size_of::<libc::c_long>() as u8,
        cpus: crate::perf::online_cpus().unwrap_or_default(),
        backend: match config.backend {
            BackendKind::Perf => "perf",
            BackendKind::Ftrace => "ftrace",
        }
        .into(),
        selectors: selectors.iter().map(ToString::to_string).collect(),
        filter: config.filter.clone(),
        only_pid: config.pid,
        uevrec_pid: std::process::id(),
        include_self: config.include_self,
        clock: ClockInfo {
            source: "CLOCK_MONOTONIC".into(),
            to_wall: format!(
                "time = record's CLOCK_MONOTONIC stamp + (CLOCK_REALTIME - CLOCK_MONOTONIC), \
                 the offset re-sampled every {} ms (NTP steps show from the next sample)",
                RESAMPLE_INTERVAL.as_millis()
            ),
            monotonic_ns: monotonic,
            realtime_ns: realtime,
            resample_ms: RESAMPLE_INTERVAL.as_millis() as u64,
        },
    }
}

/// The event formats whose schema line was written: each format (system, tracefs name
/// and format text, which holds the ID) once per stream, however often its event is
/// detached and attached again. Holds one entry per distinct format, as the session
/// does.
#[derive(Debug, Default)]
pub struct Described {
    seen: HashSet<Arc<FormatSource>>,
}

impl Described {
    /// Whether `source` is new (and remember it).
    pub fn first_time(&mut self, source: &Arc<FormatSource>) -> bool {
        self.seen.insert(Arc::clone(source))
    }
}
