//! Helpers shared by the integration tests: tiers and loud skips ([`tier`]), children.

#![allow(dead_code)] // each test binary uses a part

pub mod otlp;
pub mod perf_script;
pub mod tier;
pub mod vm;

use std::process::{Child, ExitStatus};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

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

/// JSON equality where numbers compare by value (`2` = `2.0`; integers exactly).
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let int = |n: &serde_json::Number| {
                n.as_i64()
                    .map(i128::from)
                    .or_else(|| n.as_u64().map(i128::from))
            };
            match (int(x), int(y)) {
                (Some(i), Some(j)) => i == j,
                _ => x.as_f64() == y.as_f64(),
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}
