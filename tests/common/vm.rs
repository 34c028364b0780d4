//! What the tier-3 tests (the `vm` test binary, tests/vm/, run in the user_events VM by
//! scripts/vm-test.sh) share: where the sample producers are, per-test directories, the
//! user_events check, children whose JSON report lines are collected as they come.

use std::cell::Cell;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use uevrec_samples::wait_until;

use super::tier::{Tier, skip};

/// How long a VM-tier test waits for a producer or for its records to show before it
/// fails: the guest runs under TCG, slow (the host tier's is [`super::PATIENCE`]).
pub const PATIENCE: Duration = Duration::from_secs(120);

/// Where tracefs is mounted in the VM.
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Whether this kernel has user_events; when not, the test skips (or fails, when the vm
/// tier is required) and the caller returns.
pub fn user_events_here() -> bool {
    let here = Path::new(TRACEFS).join("user_events_data").exists();
    if !here {
        skip(
            Tier::Vm,
            "no user_events (this tier runs inside the VM: scripts/vm-test.sh)",
        );
    }
    here
}

/// `target/<profile>/`: the test binaries live in its `deps/`.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target dir")
        .to_path_buf()
}

/// A sample producer from `samples/src/bin/` (or `samples/otel/`).
pub fn sample(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.exists(),
        "{} missing: build it with `cargo build --workspace --bins`",
        path.display()
    );
    path
}

/// The recording backends (`uevrec record --backend B`) every acceptance test runs on.
pub const BACKENDS: [&str; 2] = ["perf", "ftrace"];

thread_local! {
    static BACKEND: Cell<&'static str> = const { Cell::new("perf") };
}

/// The backend the current test runs on (see [`each_backend`]).
pub fn backend() -> &'static str {
    BACKEND.get()
}

/// Run `test` once on each of [`BACKENDS`], one after the other: [`backend`] says which
/// (uevrec command lines take it, [`tmp_dir`] names directories with it). A failure's
/// captured output starts with the backend it failed on.
pub fn each_backend(test: impl Fn()) {
    for b in BACKENDS {
        BACKEND.set(b);
        println!("--- backend {b}");
        test();
    }
}

/// Run `test` on the backend `b` alone ([`backend`] says it), for tests whose guest time
/// cannot pay for both; the backend before it is [`backend`] again after it.
pub fn on_backend(b: &'static str, test: impl FnOnce()) {
    let before = BACKEND.replace(b);
    println!("--- backend {b}");
    test();
    BACKEND.set(before);
}

/// A fresh `$TMPDIR/uevrec-vm-<name>-<backend>` (the guest shares the host's `$TMPDIR`;
/// each run replaces the last one's files, which stay for inspection after a failure).
pub fn tmp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("uevrec-vm-{name}-{}", backend()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Collect `child`'s standard output (piped), one JSON value per line, as it comes; a
/// line that is not JSON fails the test.
pub fn collect_json_lines(child: &mut Child) -> Arc<Mutex<Vec<Value>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let out = child.stdout.take().expect("a piped stdout");
    let sink = Arc::clone(&lines);
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("producer line `{line}`: {e}"));
            sink.lock().unwrap().push(v);
        }
    });
    lines
}

/// Wait up to `timeout` for `child` to exit.
pub fn wait_child(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let end = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGINT to `child` (uevrec: stop, drain, exit).
pub fn interrupt(child: &Child) {
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(rc, 0, "kill(SIGINT): {}", std::io::Error::last_os_error());
}

/// Fail when uevrec (`child`, its standard error in the file `stderr`) has exited already.
pub fn assert_running(child: &mut Child, stderr: &Path) {
    if let Some(status) = child.try_wait().expect("try_wait") {
        panic!(
            "uevrec exited early ({status}): {}",
            fs::read_to_string(stderr).unwrap_or_default()
        );
    }
}

/// SIGINT to uevrec (`child`, its standard error in the file `stderr`), then require it to
/// exit successfully within `timeout` (a stall fails the test).
pub fn interrupt_and_wait(child: &mut Child, timeout: Duration, stderr: &Path) {
    interrupt(child);
    let status = wait_child(child, timeout);
    let stderr = fs::read_to_string(stderr).unwrap_or_default();
    let status = status.unwrap_or_else(|| {
        panic!("uevrec did not exit within {timeout:?} of SIGINT; stderr: {stderr}")
    });
    assert!(
        status.success(),
        "uevrec exited with {status}; stderr: {stderr}"
    );
}

/// uevrec's output file `out`: it ends with a newline, and every line is JSON.
pub fn output_lines(out: &Path) -> Vec<Value> {
    let text = fs::read_to_string(out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "{}: no final newline",
        out.display()
    );
    text.lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("uevrec line is not JSON ({e}): {l}"))
        })
        .collect()
}

/// Kill and reap `child` if it is still running (what a test's child does on drop).
pub fn kill_if_running(child: &mut Child) {
    if child.try_wait().ok().flatten().is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Wait up to `timeout` for the sample producer `bin` (`child`, its report lines collected
/// into `reports` by [`collect_json_lines`]) to exit successfully, then up to 5 s more for
/// the reader thread to take in its last line (the exit can be seen first); its report
/// lines, which must end with `done` (a failure shows the last 8).
pub fn finish_sample(
    child: &mut Child,
    reports: &Mutex<Vec<Value>>,
    bin: &str,
    timeout: Duration,
) -> Vec<Value> {
    let status = wait_child(child, timeout)
        .unwrap_or_else(|| panic!("{bin} still running after {timeout:?}"));
    let done = wait_until(Duration::from_secs(5), || {
        reports
            .lock()
            .unwrap()
            .last()
            .is_some_and(|v| v.get("done").is_some())
    });
    let reports = reports.lock().unwrap().clone();
    let tail = &reports[reports.len().saturating_sub(8)..];
    assert!(
        status.success(),
        "{bin} failed ({status}); its last lines: {tail:?}"
    );
    assert!(done, "{bin}: no done line; its last lines: {tail:?}");
    reports
}

/// Spawn the sample producer `bin` with `args`; its JSON report lines are collected as
/// they come.
pub fn spawn_sample<S: AsRef<std::ffi::OsStr>>(
    bin: &str,
    args: &[S],
) -> (Child, Arc<Mutex<Vec<Value>>>) {
    let mut child = std::process::Command::new(sample(bin))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {bin}: {e}"));
    let lines = collect_json_lines(&mut child);
    (child, lines)
}

/// Spawn the `rate` producer (`samples/src/bin/rate.rs`) of `events` records of the
/// user event `name`, writing once the file `start` exists, with `extra` arguments, and
/// wait until it has registered the event (a failure after [`PATIENCE`]). Its JSON report
/// lines are collected as they come.
pub fn spawn_rate(
    name: &str,
    events: u64,
    start: &Path,
    extra: &[&str],
) -> (Child, Arc<Mutex<Vec<Value>>>) {
    let events = events.to_string();
    let start = start.to_str().expect("a UTF-8 start file path");
    let mut args = vec!["--name", name, "--events", &events, "--start-file", start];
    args.extend_from_slice(extra);
    let (child, reports) = spawn_sample("rate", &args);
    wait_reports(&reports, "registered", 1, PATIENCE, "rate");
    (child, reports)
}

/// Wait until `n` of a producer's report `lines` carry `key` (a failure naming `who` after
/// `timeout`); those lines, in order.
pub fn wait_reports(
    lines: &Mutex<Vec<Value>>,
    key: &str,
    n: usize,
    timeout: Duration,
    who: &str,
) -> Vec<Value> {
    let with_key = || -> Vec<Value> {
        let lines = lines.lock().unwrap_or_else(|e| e.into_inner());
        lines
            .iter()
            .filter(|v| v.get(key).is_some())
            .cloned()
            .collect()
    };
    let count = || {
        let lines = lines.lock().unwrap_or_else(|e| e.into_inner());
        lines.iter().filter(|v| v.get(key).is_some()).count()
    };
    let ok = wait_until(timeout, || count() >= n);
    assert!(
        ok,
        "{who}: {} of {n} {key:?} lines within {timeout:?}; got {:?}",
        count(),
        lines.lock().unwrap_or_else(|e| e.into_inner())
    );
    with_key()
}

/// `uevrec record --backend B --quiet -o OUT ARGS` (B: [`backend`]), its standard error
/// in `OUT.stderr`; killed if dropped before [`Recording::stop`].
pub struct Recording {
    child: super::KillOnDrop,
    out: PathBuf,
    stderr: PathBuf,
}

impl Recording {
    /// Start uevrec with `args` after the output options.
    pub fn start<S: AsRef<std::ffi::OsStr>>(out: &Path, args: &[S]) -> Recording {
        let stderr = out.with_extension("stderr");
        let child = std::process::Command::new(super::bin())
            .args(["record", "--backend", backend(), "--quiet", "-o"])
            .arg(out)
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("spawning uevrec");
        Recording {
            child: super::KillOnDrop(child),
            out: out.to_path_buf(),
            stderr,
        }
    }

    /// Wait (up to [`PATIENCE`]) until the output has an `attached` notice for each of
    /// `events` (`system:event`); fail at once if uevrec exits.
    pub fn wait_attached(&mut self, events: &[String]) {
        let missing = |out: &Path| -> Vec<String> {
            let text = fs::read_to_string(out).unwrap_or_default();
            let attached: Vec<Value> = text
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|l| l["uevrec"] == "notice" && l["what"] == "attached")
                .collect();
            events
                .iter()
                .filter(|e| !attached.iter().any(|a| a["event"] == e.as_str()))
                .cloned()
                .collect()
        };
        let (out, child) = (self.out.clone(), &mut self.child);
        let ok = wait_until(PATIENCE, || {
            missing(&out).is_empty() || child.try_wait().ok().flatten().is_some()
        });
        assert_running(&mut self.child, &self.stderr);
        assert!(
            ok,
            "uevrec never attached {:?} within {PATIENCE:?}",
            missing(&self.out)
        );
    }

    /// SIGINT, wait (a stall fails the test), check the exit status; every output line.
    pub fn stop(self) -> Vec<Value> {
        Recording::stop_all(vec![self]).pop().unwrap()
    }

    /// [`Recording::stop`] for several at once: SIGINT to each, then wait for each (they
    /// drain and symbolize side by side); their output lines, in order.
    pub fn stop_all(mut recordings: Vec<Recording>) -> Vec<Vec<Value>> {
        for r in &mut recordings {
            assert_running(&mut r.child, &r.stderr);
            interrupt(&r.child);
        }
        recordings
            .iter_mut()
            .map(|r| {
                let status = wait_child(&mut r.child, PATIENCE);
                let stderr = fs::read_to_string(&r.stderr).unwrap_or_default();
                let status = status.unwrap_or_else(|| {
                    panic!("uevrec did not exit within {PATIENCE:?} of SIGINT; stderr: {stderr}")
                });
                assert!(
                    status.success(),
                    "uevrec exited with {status}; stderr: {stderr}"
                );
                output_lines(&r.out)
            })
            .collect()
    }
}
