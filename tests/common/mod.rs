//! Helpers shared by the integration tests: tiers and loud skips ([`tier`]), children.

#![allow(dead_code)] // each test binary uses a part

pub mod perf_script;
pub mod tier;
pub mod vm;

use std::process::{Child, ExitStatus};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// Wait up to `patience` for `child` to exit. On timeout it is killed (and reaped) and
/// the result is `Err` with its final status, for the caller to fail or report.
pub fn wait_exit(child: &mut Child, patience: Duration) -> Result<ExitStatus, ExitStatus> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("waiting for a child") {
            return Ok(status);
        }
        if start.elapsed() > patience {
            let _ = child.kill();
            return Err(child.wait().expect("reaping a killed child"));
        }
        sleep(Duration::from_millis(10));
    }
}

/// Why `perf record`/`perf script` tests cannot run here, if they cannot: they need root,
/// tracefs with the raw_syscalls events at /sys/kernel/tracing, and perf.
pub fn perf_skip_reason() -> Option<String> {
    // SAFETY: geteuid has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if !std::path::Path::new("/sys/kernel/tracing/events/raw_syscalls/sys_enter").exists() {
        return Some("tracefs with raw_syscalls events not mounted at /sys/kernel/tracing".into());
    }
    match std::process::Command::new("perf").arg("--version").output() {
        Ok(o) if o.status.success() => None,
        _ => Some("perf not installed (linux-perf)".into()),
    }
}
