//! Tier 3: uevrec with thousands of user_events, i.e. thousands of perf descriptors (and
//! 10,000 events on the ftrace backend, which needs none).
//!
//! perf needs one descriptor per event per CPU, so `uevrec record` must raise its
//! open-file limit (`RLIMIT_NOFILE`) as events come, and say on standard error when it
//! cannot. The producer is `samples/src/bin/many_events.rs`, started *after* uevrec (late
//! registration: uevrec finds the events at a rescan). Needs a kernel with
//! `CONFIG_USER_EVENTS=y`: run this binary in the test VM as root
//! (`../shared/vm/run.sh target/debug/deps/vm_many_events-* --nocapture`). Elsewhere each
//! test skips with that reason (tests/common/tier.rs), or fails when `UEVREC_REQUIRE_TIERS`
//! names the vm tier.
//!
//! The tests run one at a time (a lock): each records with uevrec's default selectors
//! or a prefix glob and would otherwise see the others' events and compete for the
//! guest's two CPUs. Self-contained on purpose (its own copies of the few process
//! helpers of `vm_user_events.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use uevrec_samples::wait_until;

use crate::common::KillOnDrop;
use crate::common::vm::{
    collect_json_lines, interrupt_and_wait, output_lines, sample, tmp_dir, user_events_here,
};

/// How long registering, attaching and writing may take (TCG guests are ~6x slower).
const PRODUCER_TIMEOUT: Duration = Duration::from_secs(400);
/// How long uevrec may take to drain and exit after SIGINT, and then its background
/// closer (`uevrec-close`, src/capture/perf/reaper.rs) to close the descriptors. Closing is slow:
/// the kernel waits for RCU grace periods for each event's last perf descriptor, one
/// event at a time (`perf_trace_event_unreg`, under `event_mutex`); 2,000 events took
/// 77 s in the guest, which uevrec's exit no longer waits for.
const STOP_TIMEOUT: Duration = Duration::from_secs(300);
/// `CAP_SYS_RESOURCE` (linux/capability.h): what raising a hard limit needs.
const CAP_SYS_RESOURCE: libc::c_ulong = 24;

/// One test at a time (see the module docs).
static SERIAL: Mutex<()> = Mutex::new(());

// ---- processes ------------------------------------------------------------------------

/// A running `many_events` whose stdout JSON lines are collected as they come.
struct Producer {
    child: KillOnDrop,
    lines: Arc<Mutex<Vec<Value>>>,
}

impl Producer {
    fn spawn(count: usize, prefix: &str, start_file: &Path) -> Producer {
        let mut child = Command::new(sample("many_events"))
            .args(["--count", &count.to_string(), "--prefix", prefix])
            .args(["--timeout-secs", &PRODUCER_TIMEOUT.as_secs().to_string()])
            .arg("--start-file")
            .arg(start_file)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawning many_events");
        let lines = collect_json_lines(&mut child);
        Producer {
            child: KillOnDrop(child),
            lines,
        }
    }

    /// Wait for a successful exit; the report lines.
    fn finish(mut self) -> Vec<Value> {
        crate::common::vm::finish_sample(
            &mut self.child,
            &self.lines,
            "many_events",
            PRODUCER_TIMEOUT,
        )
    }
}

/// How uevrec is started.
#[derive(Default)]
struct Setup<'a> {
    /// `--backend` (none: the default, perf).
    backend: Option<&'a str>,
    /// `-e` selectors (none: uevrec's defaults).
    selectors: &'a [&'a str],
    /// RLIMIT_NOFILE (soft, hard) set before exec.
    nofile: Option<(u64, u64)>,
    /// Drop CAP_SYS_RESOURCE from the bounding set before exec, so that uevrec, even as
    /// root, cannot raise its hard limit.
    drop_sys_resource: bool,
}

/// `uevrec record` writing JSON lines to a file, stopped with SIGINT.
struct Recorder {
    child: KillOnDrop,
    out: PathBuf,
    stderr: PathBuf,
}

impl Recorder {
    fn start(dir: &Path, setup: &Setup<'_>) -> Recorder {
        let out = dir.join("uevrec.jsonl");
        let stderr = dir.join("uevrec.stderr");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_uevrec"));
        cmd.arg("record").arg("-o").arg(&out).arg("--quiet");
        cmd.args(["--rescan-interval", "1s"]);
        if let Some(b) = setup.backend {
            cmd.args(["--backend", b]);
        }
        for s in setup.selectors {
            cmd.arg("-e").arg(s);
        }
        let nofile = setup.nofile;
        let drop_cap = setup.drop_sys_resource;
        // SAFETY: the closure runs in the forked child before exec and only makes
        // async-signal-safe system calls (setrlimit, prctl) on plain stack values.
        unsafe {
            cmd.pre_exec(move || {
                if let Some((soft, hard)) = nofile {
                    let rl = libc::rlimit {
                        rlim_cur: soft,
                        rlim_max: hard,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                if drop_cap && libc::prctl(libc::PR_CAPBSET_DROP, CAP_SYS_RESOURCE, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("spawning uevrec");
        Recorder {
            child: KillOnDrop(child),
            out,
            stderr,
        }
    }

    /// The output's lines so far (a partial last line is left out).
    fn lines(&self) -> Vec<Value> {
        fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn stderr(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Wait until `cond` holds for the output (fails at once if uevrec exits).
    fn wait_output(&mut self, what: &str, cond: impl Fn(&[Value]) -> bool) {
        let (child, out) = (&mut self.child, self.out.clone());
        let ok = wait_until(PRODUCER_TIMEOUT, || {
            let lines: Vec<Value> = fs::read_to_string(&out)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            cond(&lines) || child.try_wait().ok().flatten().is_some()
        });
        if let Some(status) = self.child.try_wait().expect("try_wait") {
            panic!("uevrec exited early ({status}): {}", self.stderr());
        }
        assert!(
            ok,
            "uevrec: no {what} within {PRODUCER_TIMEOUT:?}; stderr: {}",
            self.stderr()
        );
    }

    /// SIGINT, wait, check the status; every output line parsed, and the stop time
    /// (SIGINT to exit). Also waits for the background closer, so that the next test
    /// starts with the events gone and the kernel's event_mutex free.
    fn stop(mut self) -> (Vec<Value>, Duration) {
        let t0 = Instant::now();
        interrupt_and_wait(&mut self.child, STOP_TIMEOUT, &self.stderr);
        let took = t0.elapsed();
        match crate::common::wait_reapers_gone(STOP_TIMEOUT) {
            Ok(closed) => println!(
                "background close done {:.2} s after uevrec exited",
                closed.as_secs_f64()
            ),
            Err(left) => panic!("background closers {left:?} still running after {STOP_TIMEOUT:?}"),
        }
        (output_lines(&self.out), took)
    }
}

// ---- reading the output ---------------------------------------------------------------

/// Notices `what` about events named `<prefix>_<i>` (in `user_events`).
fn notices<'a>(lines: &'a [Value], what: &str, prefix: &str) -> Vec<&'a Value> {
    let key = format!("user_events:{prefix}_");
    lines
        .iter()
        .filter(|l| l["uevrec"] == "notice" && l["what"] == what)
        .filter(|l| l["event"].as_str().is_some_and(|e| e.starts_with(&key)))
        .collect()
}

/// Seconds since midnight UTC of an RFC 3339 `...THH:MM:SS.fffffffffZ` time.
fn day_seconds(time: &Value) -> f64 {
    let t = time.as_str().unwrap_or_else(|| panic!("no time: {time}"));
    let clock = t
        .split_once('T')
        .expect("RFC 3339 time")
        .1
        .trim_end_matches('Z');
    let parts: Vec<f64> = clock.split(':').map(|p| p.parse().expect("time")).collect();
    parts[0] * 3600.0 + parts[1] * 60.0 + parts[2]
}

/// Seconds from the first to the last of `lines` (by their `time`).
fn span(lines: &[&Value]) -> f64 {
    let (Some(first), Some(last)) = (lines.first(), lines.last()) else {
        return 0.0;
    };
    let d = day_seconds(&last["time"]) - day_seconds(&first["time"]);
    if d < 0.0 { d + 86_400.0 } else { d }
}

/// Names `<prefix>_<i>` of the event in each notice.
fn event_names(notices: &[&Value]) -> BTreeSet<String> {
    notices
        .iter()
        .map(|n| {
            let e = n["event"].as_str().unwrap();
            e.strip_prefix("user_events:").unwrap().to_string()
        })
        .collect()
}

// ---- the run ----------------------------------------------------------------------------

/// What [`record_many`] saw.
struct Run {
    lines: Vec<Value>,
    stderr: String,
    attach_secs: f64,
    stop: Duration,
}

/// Start uevrec, then a producer of `count` events `<prefix>_<i>`; once all are
/// attached, let it write each once; stop uevrec. Checks that every event was attached
/// once, with no `skipped` notice, and recorded exactly once with its own `seq`.
fn record_many(test: &str, prefix: &str, count: usize, setup: &Setup<'_>) -> Run {
    let dir = tmp_dir(test);
    let start = dir.join("start");
    let mut recorder = Recorder::start(&dir, setup);
    // uevrec is up (its first scan found nothing yet) before the events exist.
    recorder.wait_output("first notice", |l| !l.is_empty());
    let t0 = Instant::now();
    let producer = Producer::spawn(count, prefix, &start);
    recorder.wait_output(&format!("{count} attached notices"), |l| {
        notices(l, "attached", prefix).len() + notices(l, "skipped", prefix).len() >= count
    });
    let waited = t0.elapsed();
    fs::write(&start, b"").expect("start file");
    let report = producer.finish();
    // Every record written is in the rings; give the reader one loop to take them.
    let want: usize = count;
    recorder.wait_output("records", |l| {
        l.iter()
            .filter(|r| r.get("uevrec").is_none() && r["system"] == "user_events")
            .count()
            >= want
    });
    let stderr_before_stop = recorder.stderr();
    let (lines, stop) = recorder.stop();

    let done = report.last().unwrap();
    println!("{test}: producer {done}");
    assert_eq!(done["written"], count as u64, "{done}");
    assert_eq!(done["disabled"], 0, "{done}");

    let skipped = notices(&lines, "skipped", prefix);
    assert!(
        skipped.is_empty(),
        "{} events skipped, e.g. {}; stderr: {stderr_before_stop}",
        skipped.len(),
        skipped[0]
    );
    let too_many: Vec<&Value> = lines
        .iter()
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.contains("Too many open files"))
        })
        .collect();
    assert!(too_many.is_empty(), "{too_many:?}");
    let attached = notices(&lines, "attached", prefix);
    let names = event_names(&attached);
    let expected: BTreeSet<String> = (0..count).map(|i| format!("{prefix}_{i}")).collect();
    assert_eq!(attached.len(), count, "attached notices");
    assert_eq!(names, expected, "attached events");

    // Exactly one record per event, carrying the event's own index.
    let mut per_event: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for r in lines
        .iter()
        .filter(|l| l.get("uevrec").is_none() && l["system"] == "user_events")
    {
        let name = r["event"].as_str().unwrap().to_string();
        per_event
            .entry(name)
            .or_default()
            .push(r["fields"]["seq"].as_u64().unwrap_or(u64::MAX));
    }
    assert_eq!(
        per_event.keys().cloned().collect::<BTreeSet<_>>(),
        expected,
        "events with records"
    );
    for (name, seqs) in &per_event {
        let i: u64 = name.rsplit('_').next().unwrap().parse().unwrap();
        assert_eq!(seqs, &[i], "{name}: records");
    }
    let attach_secs = span(&attached);
    println!(
        "{test}: {count} events: producer registered in {} ms, attached (first to last \
         notice) in {attach_secs:.2} s, all attached {:.2} s after the producer started, \
         stop (SIGINT to exit) {:.2} s",
        done["register_ms"],
        waited.as_secs_f64(),
        stop.as_secs_f64()
    );
    let stderr = fs::read_to_string(dir.join("uevrec.stderr")).unwrap_or_default();
    Run {
        lines,
        stderr,
        attach_secs,
        stop,
    }
}

/// The limits-notices uevrec wrote.
fn fd_limit_notices(lines: &[Value]) -> Vec<&Value> {
    lines
        .iter()
        .filter(|l| l["uevrec"] == "notice" && l["what"] == "fd_limit")
        .collect()
}

impl Run {
    /// [`fd_limit_notices`] of this run.
    fn fd_limit_notices(&self) -> Vec<&Value> {
        fd_limit_notices(&self.lines)
    }
}

// ---- tests ------------------------------------------------------------------------------

/// The case: 2,000 events with the default selectors and the guest's default
/// limits (soft 1024, hard 4096): uevrec had attached 507. Now every event attaches and
/// each record arrives once.
#[test]
fn two_thousand_events_default_limits() {
    if !user_events_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let run = record_many("many-2000", "uevrec_many", 2000, &Setup::default());
    assert!(
        !run.stderr.contains("not attached"),
        "stderr: {}",
        run.stderr
    );
    println!(
        "RESULT 2000 events: attach {:.2} s, stop {:.2} s, limit notices {:?}",
        run.attach_secs,
        run.stop.as_secs_f64(),
        fd_limit_notices(&run.lines)
            .iter()
            .map(|n| n["message"].clone())
            .collect::<Vec<_>>()
    );
}

/// The ftrace backend needs no descriptor per event: 10,000 events (default selectors,
/// default limits) attach, each record arrives once, and stop is quick.
#[test]
fn ten_thousand_events_ftrace() {
    if !user_events_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let setup = Setup {
        backend: Some("ftrace"),
        ..Setup::default()
    };
    let run = record_many("many-10000-ftrace", "uevrec_ft", 10_000, &setup);
    assert!(
        run.fd_limit_notices().is_empty(),
        "{:?}",
        run.fd_limit_notices()
    );
    assert!(
        !run.stderr.contains("not attached"),
        "stderr: {}",
        run.stderr
    );
    println!(
        "RESULT 10000 events, ftrace backend: attach {:.2} s, stop {:.2} s",
        run.attach_secs,
        run.stop.as_secs_f64(),
    );
}

/// Hard limit 1024 (as root): 600 events on the guest's CPUs need more, so uevrec raises
/// the hard limit at the rescan that finds them, and says so in-band.
#[test]
fn hard_limit_raised_for_late_events() {
    if !user_events_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cpus = fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| uevrec::capture::perf::parse_cpu_list(&s))
        .map_or(1, |v| v.len());
    let count = 600;
    let need = uevrec::system::fd_limit::needed(count, cpus);
    let setup = Setup {
        backend: None,
        selectors: &["user_events:uevrec_hard_*"],
        nofile: Some((1024, 1024)),
        drop_sys_resource: false,
    };
    let run = record_many("many-hard", "uevrec_hard", count, &setup);
    let raised = fd_limit_notices(&run.lines);
    if need > 1024 {
        let want = need.div_ceil(uevrec::system::fd_limit::STEP) * uevrec::system::fd_limit::STEP;
        assert!(
            raised.iter().any(|n| n["message"]
                .as_str()
                .unwrap()
                .contains(&format!("to {want}/{want}"))),
            "no notice of the hard limit going to {want}: {raised:?}"
        );
    }
    assert!(!run.stderr.contains("not attached"), "{}", run.stderr);
}

/// Limit 300/300 and no CAP_SYS_RESOURCE: the limit cannot be raised, so some of 200
/// events cannot be attached; uevrec says how many on stderr, once, with the limit and
/// the fix, and keeps the in-band `skipped` notices. (uevrec says it once per scan that
/// skipped some: the producer registers all 200 before uevrec starts, so that one scan
/// meets them all. Started the other way round, the registrations of a slow guest
/// straddled two rescans in CI, and the 57 skipped came as 38 and then 19.)
#[test]
fn unraisable_limit_is_reported_on_stderr() {
    if !user_events_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (count, prefix) = (200, "uevrec_fdlow");
    let dir = tmp_dir("many-low");
    let setup = Setup {
        backend: None,
        selectors: &["user_events:uevrec_fdlow_*"],
        nofile: Some((300, 300)),
        drop_sys_resource: true,
    };
    // Never released: its events are not all enabled, it is killed at the end.
    let producer = Producer::spawn(count, prefix, &dir.join("start"));
    crate::common::vm::wait_reports(
        &producer.lines,
        "registered",
        count,
        PRODUCER_TIMEOUT,
        "the producer",
    );
    let mut recorder = Recorder::start(&dir, &setup);
    recorder.wait_output("a notice for every event", |l| {
        notices(l, "attached", prefix).len() + notices(l, "skipped", prefix).len() >= count
    });
    // The stderr line follows the scan's last notice.
    std::thread::sleep(Duration::from_millis(500));
    let stderr = recorder.stderr();
    let before = recorder.lines();
    let (lines, _) = recorder.stop();
    drop(producer);
    let attached = notices(&lines, "attached", prefix).len();
    let skipped = notices(&lines, "skipped", prefix);
    assert!(
        !skipped.is_empty(),
        "all {count} attached under limit 300: was CAP_SYS_RESOURCE still there? \
         notices: {:?}",
        fd_limit_notices(&lines)
    );
    assert_eq!(
        attached + skipped.len(),
        count,
        "every event has one notice"
    );
    assert_eq!(
        notices(&before, "skipped", prefix).len(),
        skipped.len(),
        "no retries"
    );
    for s in &skipped {
        assert!(
            s["message"]
                .as_str()
                .unwrap()
                .contains("Too many open files"),
            "{s}"
        );
    }
    let want = format!(
        "uevrec: {} events not attached: too many open files (limit 300; ",
        skipped.len()
    );
    let matching: Vec<&str> = stderr.lines().filter(|l| l.starts_with(&want)).collect();
    assert_eq!(
        matching.len(),
        1,
        "want one `{want}…` line; stderr: {stderr}"
    );
    assert!(matching[0].contains("ulimit -n"), "{}", matching[0]);
    assert_eq!(
        stderr.matches("not attached").count(),
        1,
        "one line per cause: {stderr}"
    );
    println!(
        "RESULT limit 300/300 without CAP_SYS_RESOURCE: {attached} attached, {} skipped; \
         stderr: {}",
        skipped.len(),
        matching[0]
    );
}
