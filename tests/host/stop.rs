//! Tier 2: stopping is fast however many tracepoints are attached (issue 16, "Fast stop").
//!
//! Closing the last perf descriptor of a tracepoint makes the kernel wait for RCU grace
//! periods, one tracepoint after another (≈ 39 ms each on the development host, 28 s for
//! the 722 `syscalls:*` events). uevrec hands that wait to a background closer
//! (`uevrec-close`, src/capture/perf/reaper.rs) and exits at once. This test records `syscalls:*`
//! on every CPU for `--duration 1` into a pipe and checks that the pipe ends and uevrec
//! exits well within [`BOUND`] (the order of magnitude: before, it took 28 s), that the
//! closer holds nothing but perf descriptors, and that it is gone within [`CLOSE_BOUND`].
//! Needs root and tracefs with the syscalls events (prints why it is skipped otherwise).

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::tier::Tier;

/// From start to exit: 1 s of recording, the attach of 722 × CPUs descriptors, the
/// drain and the stop. Generous for loaded machines; the closes alone took 28 s before.
const BOUND: Duration = Duration::from_secs(10);

/// How long the background closer may take (≈ 28 s here; loaded machines are slower).
const CLOSE_BOUND: Duration = Duration::from_secs(240);

/// Why this machine cannot run the test, if it cannot.
fn skip_reason() -> Option<&'static str> {
    // SAFETY: geteuid has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root");
    }
    let root = std::env::var_os("UEVREC_TRACEFS").unwrap_or_else(|| "/sys/kernel/tracing".into());
    if !Path::new(&root).join("events/syscalls").exists() {
        return Some("tracefs with the syscalls events not mounted at /sys/kernel/tracing");
    }
    None
}

/// What a process's descriptors point to (`/proc/PID/fd/*` link targets).
fn fd_targets(pid: u32) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    dir.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|p| p.to_string_lossy().into_owned())
        .collect()
}

#[test]
fn stop_with_every_syscall_tracepoint_is_fast() {
    require!(Tier::Host, skip_reason().map_or(Ok(()), Err));
    // An earlier run's closer holds the kernel's event_mutex now and then: let it finish
    // so that attaching is not slowed down by it.
    if let Err(left) = crate::common::wait_reapers_gone(CLOSE_BOUND) {
        panic!("earlier background closers still running after {CLOSE_BOUND:?}: {left:?}");
    }
    let start = Instant::now();
    let mut rec = Command::new(crate::common::bin())
        // A filter nothing matches keeps the output to uevrec's own lines.
        .args(["record", "--duration", "1", "--filter", "common_pid == 0"])
        .args(["-e", "syscalls:*"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = String::new();
    // Ends when every holder of the pipe's write end closed it: uevrec and its closer.
    rec.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let eof = start.elapsed();
    let status = crate::common::wait_exit(&mut rec, BOUND.saturating_sub(eof))
        .unwrap_or_else(|st| panic!("uevrec still running {BOUND:?} after its start ({st})"));
    let exited = start.elapsed();
    let mut err = String::new();
    rec.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "{status}: {err}");
    let attached = out.lines().filter(|l| l.contains("\"attached\"")).count();
    assert!(
        attached >= 100,
        "only {attached} syscall events attached: the test proves nothing; stderr: {err}"
    );
    eprintln!(
        "RESULT {attached} events: output ended after {:.2} s, exit after {:.2} s",
        eof.as_secs_f64(),
        exited.as_secs_f64()
    );
    assert!(
        exited < BOUND,
        "uevrec -e syscalls:* --duration 1 took {exited:?} to exit"
    );
    // The closer holds perf descriptors only (it closed the pipe, files, everything else
    // before the first close), and it goes once they are closed.
    for pid in crate::common::reapers() {
        let other: Vec<String> = fd_targets(pid)
            .into_iter()
            .filter(|t| t != "anon_inode:[perf_event]")
            .collect();
        assert!(other.is_empty(), "closer {pid} holds {other:?}");
    }
    match crate::common::wait_reapers_gone(CLOSE_BOUND) {
        Ok(took) => eprintln!(
            "RESULT background close of {attached} events done {:.2} s after exit",
            took.as_secs_f64()
        ),
        Err(left) => panic!("background closers {left:?} still running after {CLOSE_BOUND:?}"),
    }
}
