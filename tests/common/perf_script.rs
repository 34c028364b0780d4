//! `perf script` as the reference for `uevrec decode`: run it, read its lines, and render
//! uevrec's JSON lines the way perf prints the same sample, so that a test compares every
//! value as text.
//!
//! The perf command is always `TZ=UTC perf script -F pid,tid,cpu,tod,event,trace --ns`
//! ([`FIELDS`]): `tod` is the wall-clock time perf derives from `HEADER_CLOCK_DATA`, the
//! same reference `uevrec decode` uses. This file is std + serde_json only so that
//! `parsers/tests` can include it with `#[path]`.
#![allow(dead_code)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

/// The `-F` fields asked of perf script.
pub const FIELDS: &str = "pid,tid,cpu,tod,event,trace";

/// `perf script` on `input` (a file, or, with `stdin`, given on standard input as
/// `perf script -i -`): its standard output, or why perf could not run.
pub fn perf_script(input: &Path, stdin: bool) -> Result<String, String> {
    let mut cmd = Command::new("perf");
    cmd.env("TZ", "UTC")
        .args(["script", "-F", FIELDS, "--ns", "-i"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if stdin {
        cmd.arg("-").stdin(Stdio::piped());
    } else {
        cmd.arg(input).stdin(Stdio::null());
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("perf not runnable ({e}); install linux-perf"))?;
    if stdin {
        let bytes = std::fs::read(input).map_err(|e| e.to_string())?;
        let mut pipe = child.stdin.take().ok_or("no stdin")?;
        let writer = std::thread::spawn(move || pipe.write_all(&bytes));
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        let _ = writer.join();
        return checked(out);
    }
    checked(child.wait_with_output().map_err(|e| e.to_string())?)
}

fn checked(out: std::process::Output) -> Result<String, String> {
    if !out.status.success() {
        return Err(format!(
            "perf script failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One line of `perf script -F pid,tid,cpu,tod,event,trace --ns`, white space normalised:
/// `pid/tid [cpu] YYYY-MM-DD HH:MM:SS.nnnnnnnnn system:event: trace`.
pub fn normalise(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The sched_switch `prev_state` as perf prints it (the format's `__print_flags`, kernel
/// 5.x/6.x `TASK_REPORT` bits: S D T t X Z P I, `R` for 0, `R+` for preempted).
pub fn task_state(state: u64) -> String {
    const NAMES: [(u64, &str); 8] = [
        (0x01, "S"),
        (0x02, "D"),
        (0x04, "T"),
        (0x08, "t"),
        (0x10, "X"),
        (0x20, "Z"),
        (0x40, "P"),
        (0x80, "I"),
    ];
    if state & 0x100 != 0 {
        return "R+".into();
    }
    let names: Vec<&str> = NAMES
        .iter()
        .filter(|(bit, _)| state & bit != 0)
        .map(|(_, n)| *n)
        .collect();
    if names.is_empty() {
        "R".into()
    } else {
        names.join("|")
    }
}

/// A uevrec JSON event line rendered as [`normalise`]d perf script prints the same sample,
/// for the events the tests record (`sched:sched_switch`, `sched:sched_process_exec`,
/// `raw_syscalls:sys_enter`); `None` for other events.
pub fn as_perf_line(v: &Value) -> Option<String> {
    let f = &v["fields"];
    let s = |k: &str| {
        f[k].as_str()
            .map(str::to_string)
            .unwrap_or_else(|| f[k].to_string())
    };
    let n = |k: &str| f[k].as_u64().unwrap_or(u64::MAX);
    let event = format!("{}:{}", v["system"].as_str()?, v["event"].as_str()?);
    let trace = match event.as_str() {
        "sched:sched_switch" => format!(
            "prev_comm={} prev_pid={} prev_prio={} prev_state={} ==> next_comm={} next_pid={} next_prio={}",
            s("prev_comm"),
            s("prev_pid"),
            s("prev_prio"),
            task_state(n("prev_state")),
            s("next_comm"),
            s("next_pid"),
            s("next_prio")
        ),
        "sched:sched_process_exec" => format!(
            "filename={} pid={} old_pid={}",
            s("filename"),
            s("pid"),
            s("old_pid")
        ),
        "raw_syscalls:sys_enter" => {
            let args: Vec<String> = f["args"]
                .as_array()?
                .iter()
                .map(|a| format!("{:x}", a.as_u64().unwrap_or(u64::MAX)))
                .collect();
            format!("NR {} ({})", s("id"), args.join(", "))
        }
        _ => return None,
    };
    let time = v["time"]
        .as_str()?
        .trim_end_matches('Z')
        .replacen('T', " ", 1);
    Some(normalise(&format!(
        "{}/{} [{:03}] {time} {event}: {trace}",
        v["pid"],
        v["tid"],
        v["cpu"].as_u64()?
    )))
}
