//! Comparing the `comm` of decoded lines with another reader's, line for line.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

/// (comm, tid) of every event line of `lines` (those with a `system`), a line without
/// `comm` named by `unknown` (the other reader's spelling of "no name").
pub fn decoded(lines: &[Value], unknown: impl Fn(&Value) -> String) -> Vec<(String, String)> {
    lines
        .iter()
        .filter(|v| v.get("system").is_some())
        .map(|v| {
            let comm = v["comm"]
                .as_str()
                .map_or_else(|| unknown(v), str::to_string);
            (comm, v["tid"].to_string())
        })
        .collect()
}

/// (comm, tid) of every sample of `events` (`system:event`) that `perf script` prints for
/// `file` (perf's own thread map from the file's COMM/FORK/EXIT records).
pub fn perf_script(file: &Path, events: &[&str]) -> Vec<(String, String)> {
    let perf = Command::new("perf")
        .env("TZ", "UTC")
        .args(["script", "-F", "comm,tid,tod,event", "--ns", "-i"])
        .arg(file)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(perf.status.success(), "perf script -i {}", file.display());
    // `COMM TID YYYY-MM-DD HH:MM:SS.nnnnnnnnn system:event:`: the comm may hold spaces.
    String::from_utf8_lossy(&perf.stdout)
        .lines()
        .filter(|l| events.iter().any(|e| l.contains(&format!(" {e}:"))))
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let n = words.len();
            (words[..n - 4].join(" "), words[n - 4].to_string())
        })
        .collect()
}

/// The same number of lines, each with the same (comm, tid); says how many differ and
/// shows the first ones when not.
pub fn assert_same(got: &[(String, String)], expected: &[(String, String)]) {
    assert_eq!(got.len(), expected.len(), "lines");
    let differ: Vec<_> = got
        .iter()
        .zip(expected)
        .enumerate()
        .filter(|(_, (g, e))| g != e)
        .collect();
    assert!(
        differ.is_empty(),
        "{} of {} differ, first (line, got, expected): {:?}",
        differ.len(),
        got.len(),
        &differ[..differ.len().min(5)]
    );
}
