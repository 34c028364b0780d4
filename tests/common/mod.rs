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
