//! Helpers shared by the integration tests: tiers and loud skips ([`tier`]), children.

#![allow(dead_code)] // each test binary uses a part

#[macro_use]
pub mod tier;
pub mod cgroups;
pub mod chain;
pub mod comm;
pub mod export;
pub mod flight;
pub mod otlp;
pub mod otlp_receiver;
pub mod perf_script;
pub mod schema_line;
pub mod seqs;
pub mod session;
pub mod stack_frames;
pub mod vm;

use std::path::PathBuf;
use std::process::{Child, ExitStatus};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a host-tier test waits for things that take milliseconds on an idle machine
/// (uevrec attaching, exiting, writing a line) before it fails: generous, for shared and
/// loaded machines. The VM tier's is [`vm::PATIENCE`].
pub const PATIENCE: Duration = Duration::from_secs(60);

/// The `uevrec` binary cargo built for these tests.
pub fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("uevrec")
}

/// A child process killed (and reaped) when dropped: a failing test leaves no recorder
/// running. Derefs to the [`Child`].
pub struct KillOnDrop(pub Child);

impl std::ops::Deref for KillOnDrop {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Wait up to [`PATIENCE`] for `child` (a uevrec) to exit; panics when it does not (it is
/// killed and reaped first).
pub fn must_exit(child: &mut Child) -> ExitStatus {
    wait_exit(child, PATIENCE).unwrap_or_else(|_| panic!("uevrec did not exit within {PATIENCE:?}"))
}

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

/// The process ids of uevrec's background closers (`uevrec-close`, src/capture/perf/reaper.rs),
/// which close tracepoint descriptors after uevrec exited.
pub fn reapers() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim_end() == "uevrec-close")
        })
        .collect()
}

/// Wait up to `patience` until no background closer runs (every descriptor an earlier
/// uevrec held is closed: user_events enable bits cleared, events free to be deleted).
/// Returns how long it took, or `Err` with the closers still running.
pub fn wait_reapers_gone(patience: Duration) -> Result<Duration, Vec<u32>> {
    let start = Instant::now();
    loop {
        let left = reapers();
        if left.is_empty() {
            return Ok(start.elapsed());
        }
        if start.elapsed() > patience {
            return Err(left);
        }
        sleep(Duration::from_millis(50));
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

/// x86_64 and aarch64 numbers of getppid.
#[cfg(target_arch = "x86_64")]
pub const NR_GETPPID: u32 = 110;
/// x86_64 and aarch64 numbers of getppid.
#[cfg(target_arch = "aarch64")]
pub const NR_GETPPID: u32 = 173;

/// A producer of `raw_syscalls:sys_enter` records: waits for a line on its stdin, calls
/// getppid flat out for `secs` seconds, then prints how many calls it made.
pub fn getppid_producer(secs: u64) -> Child {
    std::process::Command::new("perl")
        .args([
            "-e",
            &format!(
                "my $go = <STDIN>; my $n = 0; my $end = time + {secs}; \
                 while (time < $end) {{ getppid() for 1..10000; $n += 10000 }} print \"$n\\n\";"
            ),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("perl is needed for the getppid producer")
}

/// Why this host cannot record `raw_syscalls`, if it cannot: it needs root and tracefs
/// with the events. `UEVREC_TRACEFS` (which uevrec itself reads too) moves tracefs:
/// scripts/test-all.sh points it at an empty folder to check that a required tier that
/// cannot run fails.
pub fn raw_syscalls_skip_reason() -> Option<&'static str> {
    // SAFETY: geteuid has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root");
    }
    let root = std::env::var_os("UEVREC_TRACEFS").unwrap_or_else(|| "/sys/kernel/tracing".into());
    if !std::path::Path::new(&root)
        .join("events/raw_syscalls/sys_enter")
        .exists()
    {
        return Some("tracefs with raw_syscalls events not mounted at /sys/kernel/tracing");
    }
    None
}

/// Whether this host can record `raw_syscalls` ([`raw_syscalls_skip_reason`]): when
/// not, the test skips (or fails, when the host tier is required) and the caller returns.
pub fn raw_syscalls_here() -> bool {
    match raw_syscalls_skip_reason() {
        None => true,
        Some(why) => {
            tier::skip(tier::Tier::Host, why);
            false
        }
    }
}

/// `uevrec tail --quiet ARGS` of the getppid calls (`raw_syscalls:sys_enter`, id
/// [`NR_GETPPID`]) of process `pid`, stdout and stderr piped.
pub fn tail_getppid(pid: u32, args: &[&str]) -> Child {
    std::process::Command::new(bin())
        .args(["tail", "--quiet"])
        .args(args)
        .args(["--pid", &pid.to_string()])
        .args(["--filter", &format!("id == {NR_GETPPID}")])
        .args(["-e", "raw_syscalls:sys_enter"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawning uevrec tail")
}

/// Whether python3 can import prometheus_client, installing it with pip once if not.
pub fn prometheus_client_here() -> Result<(), String> {
    static READY: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    READY
        .get_or_init(|| {
            let imports = || {
                std::process::Command::new("python3")
                    .args(["-c", "import prometheus_client"])
                    .output()
                    .is_ok_and(|o| o.status.success())
            };
            if imports() {
                return Ok(());
            }
            for extra in [&[][..], &["--break-system-packages"][..]] {
                let _ = std::process::Command::new("python3")
                    .args(["-m", "pip", "install", "--quiet"])
                    .args(extra)
                    .arg("prometheus-client")
                    .status();
                if imports() {
                    return Ok(());
                }
            }
            Err("python3 with the PyPI package prometheus-client is needed \
                 (python3 -m pip install prometheus-client)"
                .to_string())
        })
        .clone()
}

/// Read uevrec's standard output `out` up to its `attached` notice (a failure when it
/// ends first, or takes over 30 s): what a test reads before it starts a producer.
pub fn read_to_attached(out: &mut impl std::io::BufRead) {
    let mut line = String::new();
    let t0 = std::time::Instant::now();
    loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "uevrec ended before attaching"
        );
        if line.contains("\"attached\"") {
            return;
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "no attached notice"
        );
    }
}

/// How many calls a [`getppid_producer`] made: what it prints when done (it must exit
/// successfully).
pub fn producer_count(producer: &mut Child) -> u64 {
    let mut produced = String::new();
    std::io::Read::read_to_string(&mut producer.stdout.take().unwrap(), &mut produced).unwrap();
    assert!(producer.wait().unwrap().success());
    produced.trim().parse().expect("producer count")
}

/// What a [`tail_getppid`] wrote: its records and lost lines.
#[derive(Debug, Default, Clone, Copy)]
pub struct GetppidTally {
    /// Records (each a getppid call).
    pub recorded: u64,
    /// Records the lost lines say were lost.
    pub lost: u64,
    /// Lost lines.
    pub lost_lines: u64,
}

/// Count what a [`tail_getppid`] wrote to `out` until it ends: every line JSON, every
/// record a getppid call.
pub fn tally_getppid(out: impl std::io::BufRead) -> GetppidTally {
    let mut t = GetppidTally::default();
    for l in out.lines() {
        let v: serde_json::Value = serde_json::from_str(&l.unwrap()).expect("valid JSON line");
        match v.get("uevrec").and_then(|u| u.as_str()) {
            Some("lost") => {
                t.lost += v["lost"].as_u64().unwrap();
                t.lost_lines += 1;
            }
            Some(_) => {}
            None => {
                assert_eq!(v["fields"]["id"], NR_GETPPID);
                t.recorded += 1;
            }
        }
    }
    t
}

/// Wait until `f` holds (polled every 20 ms), or fail saying `what` after `patience`.
pub fn wait_for(what: &str, patience: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < patience, "waited {patience:?} for {what}");
        sleep(Duration::from_millis(20));
    }
}

/// Wait until the JSON lines of `out` hold `n` `attached` notices (uevrec attached that
/// many events), or fail after [`PATIENCE`].
pub fn wait_attached_notices(out: &std::path::Path, n: usize) {
    wait_for(&format!("{n} attached notices"), PATIENCE, || {
        complete_lines(out)
            .iter()
            .filter(|v| v["what"] == "attached")
            .count()
            >= n
    });
}

/// The complete JSON lines of `path` (uevrec may be writing the last one); a complete
/// line that is not JSON fails the test.
pub fn complete_lines(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("invalid line {l:?}: {e}")))
        .collect()
}

/// The CPUs thread `tid` may run on (0: the calling thread).
pub fn allowed_cpus(tid: u32) -> Vec<usize> {
    // SAFETY: sched_getaffinity into a cpu_set_t of ours; CPU_ISSET reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let size = std::mem::size_of::<libc::cpu_set_t>();
        assert_eq!(
            libc::sched_getaffinity(tid as libc::pid_t, size, &mut set),
            0,
            "sched_getaffinity: {}",
            std::io::Error::last_os_error()
        );
        (0..libc::CPU_SETSIZE as usize)
            .filter(|c| libc::CPU_ISSET(*c, &set))
            .collect()
    }
}

/// Run thread `tid` (and the threads it starts later) on CPU `cpu` only.
pub fn pin_to(tid: u32, cpu: usize) {
    // SAFETY: a cpu_set_t zeroed is a valid empty set; CPU_SET and sched_setaffinity get
    // pointers to it, alive for the calls.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(tid as libc::pid_t, size_of::<libc::cpu_set_t>(), &set)
    };
    assert_eq!(
        rc,
        0,
        "sched_setaffinity: {}",
        std::io::Error::last_os_error()
    );
}
