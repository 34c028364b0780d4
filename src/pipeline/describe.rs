//! What a recording says about itself in-band (`docs/json-lines.md`, "A self-describing
//! stream"): the [`SessionInfo`] of its first line, read from this machine and the
//! session's configuration. The formatter writes it, and a schema line for each event
//! format ([`crate::pipeline::formatter`]); `--no-schema` turns both off.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};

use uevrec_parsers::{ClockInfo, SessionInfo};

use crate::capture::backend::BackendKind;
use crate::capture::clock::{RESAMPLE_INTERVAL, monotonic_ns, sample_offset_ns};
use crate::capture::selector::default_selectors;
use crate::capture::session::SessionConfig;
use crate::capture::staging::FormatSource;
use crate::system::uname::Uname;

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
        cpus: crate::capture::perf::online_cpus().unwrap_or_default(),
        backend: match config.backend {
            BackendKind::Perf => "perf",
            BackendKind::Ftrace => "ftrace",
        }
        .into(),
        selectors: selectors.iter().map(ToString::to_string).collect(),
        filter: config.filter.clone(),
        thinning: Vec::new(),
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
        stacks: config.stacks.map(|s| uevrec_parsers::StackInfo {
            call_graph: s.call_graph(),
            max_stack: s.max_stack,
            kernel: s.kernel,
            symbolized: config.symbolize,
            frames: crate::pipeline::stacks::FRAMES_IN_WORDS.into(),
            stack_ids: config.stack_ids,
        }),
    }
}

/// The event formats whose schema line was written: each format (system, tracefs name
/// and format text, which holds the ID) once per stream, however often its event is
/// detached and attached again. Bounded: a 64-bit hash per format, forgotten all at once
/// past [`MAX_DESCRIBED`] formats (a format attached again after that is described
/// again: a redundant line, never a missing one but for a hash collision, 2^-64).
#[derive(Debug, Default)]
pub struct Described {
    seen: HashSet<u64>,
}

/// Formats remembered by [`Described`] (≈ 1 MiB of hashes).
pub const MAX_DESCRIBED: usize = 1 << 16;

impl Described {
    /// Whether `source` is new (and remember it).
    pub fn first_time(&mut self, source: &FormatSource) -> bool {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        source.hash(&mut h);
        if self.seen.len() >= MAX_DESCRIBED {
            self.seen.clear();
        }
        self.seen.insert(h.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_once_and_memory_bounded() {
        let source = |n: usize, text: &str| FormatSource {
            system: "s".into(),
            name: format!("e{n}"),
            text: text.into(),
        };
        let mut d = Described::default();
        assert!(d.first_time(&source(0, "ID: 1")));
        assert!(!d.first_time(&source(0, "ID: 1")));
        // The same name with another format (deleted and registered again).
        assert!(d.first_time(&source(0, "ID: 2")));
        for n in 1..MAX_DESCRIBED * 2 {
            d.first_time(&source(n, ""));
        }
        assert!(d.seen.len() <= MAX_DESCRIBED);
    }
}
