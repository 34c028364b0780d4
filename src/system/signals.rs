//! Signal handling for a recording: SIGINT/SIGTERM ask to stop (a second one ends the
//! process at once with status 130), SIGHUP asks the file sink to reopen its file.
//!
//! Handlers only set flags (`signal-hook`); the session and the writer poll them.

use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use signal_hook::flag;

/// Exit status when a second SIGINT/SIGTERM arrives during the shutdown.
pub const FORCED_EXIT_STATUS: i32 = 130;

/// Flags set by signals.
#[derive(Debug, Clone, Default)]
pub struct SignalFlags {
    /// Set by SIGINT or SIGTERM: stop recording, drain, flush, summarize.
    pub stop: Arc<AtomicBool>,
    /// Set by SIGHUP: reopen the output file.
    pub reopen: Arc<AtomicBool>,
    /// Set by SIGUSR1 once [`SignalFlags::catch_dump`] was called: write a flight dump.
    pub dump: Arc<AtomicBool>,
}

impl SignalFlags {
    /// Install the handlers for this process.
    pub fn install() -> io::Result<SignalFlags> {
        let flags = SignalFlags::default();
        for sig in [SIGINT, SIGTERM] {
            // Order matters: the conditional exit sees the flag as it was before this signal.
            flag::register_conditional_shutdown(sig, FORCED_EXIT_STATUS, Arc::clone(&flags.stop))?;
            flag::register(sig, Arc::clone(&flags.stop))?;
        }
        flag::register(SIGHUP, Arc::clone(&flags.reopen))?;
        Ok(flags)
    }

    /// Also catch SIGUSR1 (a flight dump); without this call it keeps its default
    /// action (ending the process), as for any program that does not expect it.
    pub fn catch_dump(&self) -> io::Result<()> {
        flag::register(SIGUSR1, Arc::clone(&self.dump)).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn sighup_sets_reopen_only() {
        let flags = SignalFlags::install().unwrap();
        signal_hook::low_level::raise(SIGHUP).unwrap();
        assert!(flags.reopen.load(Ordering::Acquire));
        assert!(!flags.stop.load(Ordering::Acquire));
    }

    #[test]
    fn sigusr1_sets_dump_once_caught() {
        let flags = SignalFlags::install().unwrap();
        flags.catch_dump().unwrap();
        signal_hook::low_level::raise(SIGUSR1).unwrap();
        assert!(flags.dump.load(Ordering::Acquire));
        assert!(!flags.stop.load(Ordering::Acquire));
    }
}
