//! End to end through the binary on the host kernel: needs root and tracefs (each test
//! prints why it is skipped otherwise). Uses kernel tracepoints, since the host kernel has
//! no user_events: `sched:sched_process_exec` and `raw_syscalls:sys_enter` filtered to a
//! child process that makes a known number of `getppid` calls.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::PATIENCE;
use crate::common::tier::Tier;
use crate::common::{bin, must_exit, raw_syscalls_skip_reason};

/// x86_64 and aarch64 numbers of getppid.
#[cfg(target_arch = "x86_64")]
const NR_GETPPID: u32 = 110;
#[cfg(target_arch = "aarch64")]
const NR_GETPPID: u32 = 173;

macro_rules! require_host {
    () => {
        require!(Tier::Host, raw_syscalls_skip_reason().map_or(Ok(()), Err))
    };
}

/// Every line of `text` parsed as JSON (panics on a line that is not).
fn parse_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("invalid JSON line {l:?}: {e}")))
        .collect()
}

/// Records (not uevrec's own lines) of `event`.
fn records<'a>(lines: &'a [Value], event: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|v| v.get("uevrec").is_none() && v["event"] == event)
        .collect()
}

/// Wait until `path` holds an `attached` notice (the recorder is listening).
fn wait_attached(path: &Path, child: &mut Child) {
    let start = Instant::now();
    loop {
        let text = fs::read_to_string(path).unwrap_or_default();
        if text
            .lines()
            .any(|l| l.contains("\"uevrec\":\"notice\"") && l.contains("\"attached\""))
        {
            return;
        }
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            child.stderr.take().map(|mut e| e.read_to_string(&mut err));
            panic!("uevrec ended before attaching ({st}): {err}\noutput: {text}");
        }
        assert!(
            start.elapsed() < PATIENCE,
            "no attached notice in {}: {text}",
            path.display()
        );
        sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill on a child we own.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

/// Stop recording `rec` with SIGINT; it must exit 0. The lines it wrote to `out`.
fn interrupted_lines(rec: &mut Child, out: &Path) -> Vec<Value> {
    signal(rec, libc::SIGINT);
    let st = must_exit(rec);
    assert_eq!(st.code(), Some(0), "{}", stderr_text(rec));
    parse_lines(&fs::read_to_string(out).unwrap())
}

fn stderr_text(child: &mut Child) -> String {
    let mut s = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut s);
    }
    s
}

/// A process that waits for a line on stdin, then calls getppid `n` times and exits.
fn getppid_child(n: u32) -> Child {
    Command::new("perl")
        .args(["-e", &format!("my $go = <STDIN>; getppid() for 1..{n};")])
        .stdin(Stdio::piped())
        .spawn()
        .expect("perl is needed for the getppid child")
}

/// Start `uevrec record` on sys_enter of `child`'s getppid calls into `out`.
fn record_getppid(child: &Child, out: &Path, extra: &[&str]) -> Child {
    Command::new(bin())
        .args(["record", "--pid", &child.id().to_string()])
        .args([
            "--filter",
            &format!("id == {NR_GETPPID}"),
            "-e",
            "raw_syscalls:sys_enter",
            "-o",
        ])
        .arg(out)
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Arguments choosing the ftrace backend.
const FTRACE: &[&str] = &["--backend", "ftrace"];

/// The tracefs instance the ftrace backend of uevrec process `rec` uses.
fn instance_of(rec: &Child) -> PathBuf {
    instances().join(format!("uevrec-{}", rec.id()))
}

/// The tracking instance (thread names, cgroups) beside [`instance_of`].
fn tracking_instance_of(rec: &Child) -> PathBuf {
    instances().join(format!("uevrec-{}-t", rec.id()))
}

/// tracefs's `instances` directory.
/// `uevrec record --backend ftrace -e sched:sched_process_exec`, stderr piped; the caller
/// adds the rest.
fn ftrace_exec_recording() -> Command {
    let mut cmd = Command::new(bin());
    cmd.args([
        "record",
        "--backend",
        "ftrace",
        "-e",
        "sched:sched_process_exec",
    ])
    .stderr(Stdio::piped());
    cmd
}

fn instances() -> PathBuf {
    let root = std::env::var_os("UEVREC_TRACEFS").unwrap_or_else(|| "/sys/kernel/tracing".into());
    Path::new(&root).join("instances")
}

fn release_and_reap(mut child: Child) {
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait().unwrap().success());
}

#[test]
fn records_exec_of_a_known_path() {
    records_exec_of_a_known_path_on(&[]);
}

#[test]
fn records_exec_of_a_known_path_ftrace() {
    records_exec_of_a_known_path_on(FTRACE);
}

/// [`records_exec_of_a_known_path`] with `backend` (extra arguments choosing the backend).
fn records_exec_of_a_known_path_on(backend: &[&str]) {
    require_host!();
    let dir = tempfile::tempdir().unwrap();
    let prog = dir.path().join("uevrec-exec-probe");
    fs::copy("/bin/true", &prog).unwrap();
    let out = dir.path().join("exec.json");
    let mut rec = Command::new(bin())
        .args(["record", "-q", "-e", "sched:sched_process_exec", "-o"])
        .arg(&out)
        .args(backend)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_attached(&out, &mut rec);
    for _ in 0..3 {
        assert!(Command::new(&prog).status().unwrap().success());
    }
    // The last exec is in the ring; SIGINT drains it.
    let lines = interrupted_lines(&mut rec, &out);
    let ours: Vec<_> = records(&lines, "sched_process_exec")
        .into_iter()
        .filter(|v| v["fields"]["filename"] == prog.to_str().unwrap())
        .collect();
    assert_eq!(ours.len(), 3, "{lines:#?}");
    for v in ours {
        assert_eq!(v["system"], "sched");
        assert_eq!(v["fields"]["pid"], v["pid"]);
        assert!(v["time"].as_str().unwrap().ends_with('Z'));
    }
    let mode = std::os::unix::fs::PermissionsExt::mode(&fs::metadata(&out).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o640);
}

#[test]
fn rotation_loses_and_duplicates_nothing() {
    rotation_loses_and_duplicates_nothing_on(&[]);
}

#[test]
fn rotation_loses_and_duplicates_nothing_ftrace() {
    rotation_loses_and_duplicates_nothing_on(FTRACE);
}

/// [`rotation_loses_and_duplicates_nothing`] with `backend` (extra arguments choosing the backend).
fn rotation_loses_and_duplicates_nothing_on(backend: &[&str]) {
    require_host!();
    const N: u32 = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rot.json");
    let child = getppid_child(N);
    let mut rec = record_getppid(
        &child,
        &out,
        &[
            &["--rotate-size", "64k", "--rotate-keep", "10000", "-m", "8M"],
            backend,
        ]
        .concat(),
    );
    wait_attached(&out, &mut rec);
    release_and_reap(child);
    signal(&rec, libc::SIGTERM);
    let st = must_exit(&mut rec);
    assert_eq!(st.code(), Some(0), "{}", stderr_text(&mut rec));

    let mut files: Vec<(u32, PathBuf)> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_owned();
            let n = if name == "rot.json" {
                0
            } else {
                name.strip_prefix("rot.json.")?.parse().ok()?
            };
            Some((n, p))
        })
        .collect();
    files.sort_by_key(|f| std::cmp::Reverse(f.0)); // oldest (highest number) first
    assert!(
        files.len() > 4,
        "expected > 3 rotations, got files {files:?}"
    );
    let mut times = std::collections::HashSet::new();
    let mut count = 0;
    for (_, p) in &files {
        let text = fs::read_to_string(p).unwrap();
        assert!(
            text.is_empty() || text.ends_with('\n'),
            "{} ends mid-line",
            p.display()
        );
        assert!(
            text.len() <= 64 * 1024,
            "{} is {} bytes",
            p.display(),
            text.len()
        );
        for v in parse_lines(&text) {
            assert_ne!(v["uevrec"], "lost", "records were lost: {v}");
            if v.get("uevrec").is_some() {
                continue;
            }
            assert_eq!(v["fields"]["id"], NR_GETPPID, "{v}");
            // Each call has its own timestamp: a duplicated line would repeat one.
            assert!(
                times.insert(v["time"].as_str().unwrap().to_owned()),
                "duplicate {v}"
            );
            count += 1;
        }
    }
    assert_eq!(
        count,
        N,
        "every getppid exactly once across {} files",
        files.len()
    );
}

#[test]
fn sigint_drains_pending_events() {
    require_host!();
    stop_signal_drains_pending_events(libc::SIGINT, &[]);
}

#[test]
fn sigterm_drains_pending_events() {
    require_host!();
    stop_signal_drains_pending_events(libc::SIGTERM, &[]);
}

#[test]
fn sigint_drains_pending_events_and_removes_the_instance_ftrace() {
    require_host!();
    stop_signal_drains_pending_events(libc::SIGINT, FTRACE);
}

#[test]
fn sigterm_drains_pending_events_and_removes_the_instance_ftrace() {
    require_host!();
    stop_signal_drains_pending_events(libc::SIGTERM, FTRACE);
}

/// Stop uevrec with `sig` right after the producer ended: every record still in the rings
/// is written before exit (and the ftrace backend's instance is gone after it).
fn stop_signal_drains_pending_events(sig: i32, backend: &[&str]) {
    // The ring (4 MiB per CPU) holds all N records even if uevrec read none before the stop.
    const N: u32 = 5_000;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("int.json");
    let child = getppid_child(N);
    let mut rec = record_getppid(&child, &out, &[&["-m", "4M"], backend].concat());
    wait_attached(&out, &mut rec);
    let (inst, tracking) = (instance_of(&rec), tracking_instance_of(&rec));
    for i in [&inst, &tracking] {
        assert_eq!(i.exists(), !backend.is_empty(), "{}", i.display());
    }
    release_and_reap(child);
    // At once: the last records are still in the rings, below the wakeup watermark.
    signal(&rec, sig);
    let st = must_exit(&mut rec);
    assert_eq!(st.code(), Some(0), "{}", stderr_text(&mut rec));
    for i in [&inst, &tracking] {
        assert!(!i.exists(), "{} left behind", i.display());
    }
    let lines = parse_lines(&fs::read_to_string(&out).unwrap());
    assert!(
        !lines.iter().any(|v| v["uevrec"] == "lost"),
        "records were lost"
    );
    assert_eq!(records(&lines, "sys_enter").len(), N as usize);
}

#[test]
fn summary_goes_to_stderr() {
    require_host!();
    const N: u32 = 100;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sum.json");
    let child = getppid_child(N);
    let mut rec = record_getppid(&child, &out, &[]);
    wait_attached(&out, &mut rec);
    release_and_reap(child);
    signal(&rec, libc::SIGINT);
    assert_eq!(must_exit(&mut rec).code(), Some(0));
    let err = stderr_text(&mut rec);
    assert!(err.contains(&format!("{N} records")), "{err}");
    assert!(err.contains("raw_syscalls:sys_enter"), "{err}");
}

#[test]
fn sighup_reopens_a_renamed_file() {
    sighup_reopens_a_renamed_file_on(&[]);
}

#[test]
fn sighup_reopens_a_renamed_file_ftrace() {
    sighup_reopens_a_renamed_file_on(FTRACE);
}

/// [`sighup_reopens_a_renamed_file`] with `backend` (extra arguments choosing the backend).
fn sighup_reopens_a_renamed_file_on(backend: &[&str]) {
    require_host!();
    const N: u32 = 300;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("hup.json");
    let old = dir.path().join("hup.json.old");
    let child = getppid_child(N);
    let mut rec = record_getppid(&child, &out, backend);
    wait_attached(&out, &mut rec);
    // logrotate's create mode: rename, then SIGHUP; uevrec opens a new file at the path.
    fs::rename(&out, &old).unwrap();
    signal(&rec, libc::SIGHUP);
    let start = Instant::now();
    while !out.exists() {
        assert!(start.elapsed() < PATIENCE, "no new file after SIGHUP");
        sleep(Duration::from_millis(10));
    }
    release_and_reap(child);
    let new_lines = interrupted_lines(&mut rec, &out);
    let old_lines = parse_lines(&fs::read_to_string(&old).unwrap());
    assert_eq!(records(&new_lines, "sys_enter").len(), N as usize);
    assert!(records(&old_lines, "sys_enter").is_empty());
}

/// Run `uevrec tail SELECTOR`, read its first line, close the pipe like `head -1`;
/// returns the line, the exit status and stderr.
fn tail_first_line_then_close(selector: &str) -> (String, ExitStatus, String) {
    let mut tail = Command::new(bin())
        .args(["tail", selector])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(tail.stdout.take().unwrap());
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    drop(reader);
    let st = must_exit(&mut tail);
    (first, st, stderr_text(&mut tail))
}

#[test]
fn tail_into_closed_pipe_exits_141() {
    require_host!();
    let (first, st, err) = tail_first_line_then_close("raw_syscalls:sys_enter");
    serde_json::from_str::<Value>(&first).unwrap();
    assert_eq!(st.code(), Some(141), "{err}");
    assert_eq!(err, "", "exit on a closed pipe is quiet");
}

#[test]
fn idle_tail_into_closed_pipe_exits_141() {
    require_host!();
    // Nothing matches: the session line and one "waiting" notice, then silence; the
    // closed pipe must still be noticed without another write.
    let (first, st, err) = tail_first_line_then_close("nosuchsystem:nosuchevent");
    assert!(first.contains("\"uevrec\":\"session\""), "{first}");
    assert_eq!(st.code(), Some(141), "{err}");
    assert_eq!(
        err, "uevrec: waiting for nosuchsystem:nosuchevent to appear (rescanning every 1s)\n",
        "the selector's wait is said once; the exit on a closed pipe is quiet"
    );
}

/// A tiny tmpfs mounted for the test, unmounted on drop.
struct TinyFs(tempfile::TempDir);

impl TinyFs {
    fn mount(size: &str) -> Result<TinyFs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let st = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tinyfs",
            ])
            .arg(dir.path())
            .status()
            .map_err(|e| e.to_string())?;
        if st.success() {
            Ok(TinyFs(dir))
        } else {
            Err(format!("mount -t tmpfs failed: {st}"))
        }
    }
}

impl Drop for TinyFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

#[test]
fn full_filesystem_is_a_clear_error_and_file_ends_with_newline() {
    require_host!();
    let fs_ = require!(Tier::Host, TinyFs::mount("64k"));
    let out = fs_.0.path().join("full.json");
    let mut rec = Command::new(bin())
        .args(["record", "-q", "-e", "raw_syscalls:sys_enter", "-o"])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let st = must_exit(&mut rec);
    let err = stderr_text(&mut rec);
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(
        err.contains(out.to_str().unwrap()),
        "error must name the file: {err}"
    );
    assert!(err.contains("No space left"), "{err}");
    let bytes = fs::read(&out).unwrap();
    assert!(!bytes.is_empty());
    assert_eq!(bytes.last(), Some(&b'\n'));
    parse_lines(std::str::from_utf8(&bytes).unwrap());
}

#[test]
fn an_error_exit_removes_the_instance_ftrace() {
    require_host!();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("err.json");
    // The kernel refuses this filter on the only event: a setup error after the instance
    // was made.
    let mut rec = ftrace_exec_recording()
        .args(["--filter", "no_such_field == 1", "-o"])
        .arg(&out)
        .spawn()
        .unwrap();
    let pid = rec.id();
    let st = must_exit(&mut rec);
    let err = stderr_text(&mut rec);
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(err.contains("no_such_field == 1"), "{err}");
    let left: Vec<_> = fs::read_dir(instances())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(&format!("uevrec-{pid}")))
        .collect();
    assert!(left.is_empty(), "instances left behind: {left:?}");
}

#[test]
fn a_killed_runs_instance_is_removed_by_the_next_start_ftrace() {
    require_host!();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("killed.json");
    let mut killed = ftrace_exec_recording().arg("-o").arg(&out).spawn().unwrap();
    wait_attached(&out, &mut killed);
    let stale = instance_of(&killed);
    let stale_tracking = tracking_instance_of(&killed);
    signal(&killed, libc::SIGKILL);
    must_exit(&mut killed);
    for s in [&stale, &stale_tracking] {
        assert!(s.exists(), "SIGKILL cannot remove {}", s.display());
    }
    // The next run (a normal stop after --duration) removes it and says so, and removes
    // its own.
    let next = ftrace_exec_recording()
        .args(["--duration", "1", "-o"])
        .arg(dir.path().join("next.json"))
        .spawn()
        .unwrap();
    let own = [instance_of(&next), tracking_instance_of(&next)];
    let next = next.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&next.stderr);
    assert!(next.status.success(), "{err}");
    for s in [&stale, &stale_tracking] {
        assert!(!s.exists(), "{} still there: {err}", s.display());
        assert!(
            err.contains(&format!(
                "removed the tracefs instance {} left by process {}, which is gone",
                s.display(),
                killed.id()
            )),
            "{err}"
        );
    }
    for o in &own {
        assert!(!o.exists(), "{} left behind", o.display());
    }
}

#[test]
fn both_backends_record_the_same_calls_with_the_same_values() {
    require_host!();
    const N: u32 = 2_000;
    let dir = tempfile::tempdir().unwrap();
    let child = getppid_child(N);
    // Both at once on the same calls: each call must give one identical record in each
    // (but its time: each ring stamps a record when it writes it).
    let (perf_out, ftrace_out) = (dir.path().join("perf.json"), dir.path().join("ftrace.json"));
    let mut perf = record_getppid(&child, &perf_out, &[]);
    let mut ftrace = record_getppid(&child, &ftrace_out, FTRACE);
    wait_attached(&perf_out, &mut perf);
    wait_attached(&ftrace_out, &mut ftrace);
    release_and_reap(child);
    let mut got = Vec::new();
    for (mut rec, out) in [(perf, perf_out), (ftrace, ftrace_out)] {
        let lines = interrupted_lines(&mut rec, &out);
        assert!(
            !lines.iter().any(|v| v["uevrec"] == "lost"),
            "{}",
            out.display()
        );
        let mut recs: Vec<String> = records(&lines, "sys_enter")
            .into_iter()
            .map(|v| {
                let mut v = v.clone();
                v.as_object_mut().unwrap().remove("time");
                v.to_string()
            })
            .collect();
        recs.sort();
        got.push(recs);
    }
    assert_eq!(got[0].len(), N as usize);
    assert_eq!(got[0], got[1], "perf and ftrace records differ");
}

/// Record `n` getppid calls of a child with `extra` arguments; the lines.
fn getppid_lines(n: u32, extra: &[&str]) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("getppid.json");
    let child = getppid_child(n);
    let mut rec = record_getppid(&child, &out, extra);
    wait_attached(&out, &mut rec);
    release_and_reap(child);
    sleep(Duration::from_millis(200));
    interrupted_lines(&mut rec, &out)
}

#[test]
fn a_recording_starts_with_its_session_and_describes_each_event_before_its_records() {
    require_host!();
    let lines = getppid_lines(5, &["-q"]);
    // The session line first: this machine, this session.
    let session = &lines[0];
    assert_eq!(session["uevrec"], "session", "{session}");
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(session["kernel"], release.trim());
    let host = fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(session["host"], host.trim());
    assert_eq!(session["uevrec_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(session["backend"], "perf");
    assert_eq!(
        session["selectors"],
        serde_json::json!(["raw_syscalls:sys_enter"])
    );
    assert_eq!(session["filter"], format!("id == {NR_GETPPID}"));
    assert!(session["cpus"].as_array().is_some_and(|c| !c.is_empty()));
    assert_eq!(session["clock"]["source"], "CLOCK_MONOTONIC");
    let (mono, real) = (
        &session["clock"]["monotonic_ns"],
        &session["clock"]["realtime_ns"],
    );
    assert!(mono.as_u64().unwrap() > 0 && real.as_u64().unwrap() > 1_700_000_000_000_000_000);
    // One schema line for the event, before its first record, equal to the format file.
    let schemas: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i]["uevrec"] == "schema")
        .collect();
    assert_eq!(schemas.len(), 1, "{lines:#?}");
    let schema = &lines[schemas[0]];
    assert_eq!(schema["event"], "raw_syscalls:sys_enter");
    let first = lines
        .iter()
        .position(|v| v["event"] == "sys_enter")
        .unwrap();
    assert!(schemas[0] < first, "the schema comes before the records");
    let root = std::env::var_os("UEVREC_TRACEFS").unwrap_or_else(|| "/sys/kernel/tracing".into());
    let text = fs::read_to_string(Path::new(&root).join("events/raw_syscalls/sys_enter/format"));
    let format = uevrec_parsers::parse_format(&text.unwrap()).unwrap();
    assert_eq!(
        crate::common::schema_line::format_from_schema(schema),
        Ok(format)
    );
    // Filters on event lines never meet the recorder's own lines.
    for v in &lines {
        if v.get("uevrec").is_some() {
            assert!(
                v.get("system").is_none() && v.get("fields").is_none(),
                "{v}"
            );
        }
    }
    assert_eq!(records(&lines, "sys_enter").len(), 5);

    // --no-schema: the same recording without them.
    let lines = getppid_lines(5, &["-q", "--no-schema"]);
    let own: Vec<&Value> = lines.iter().filter(|v| v.get("uevrec").is_some()).collect();
    assert!(
        own.iter().all(|v| v["uevrec"] == "notice"),
        "only notices: {own:#?}"
    );
    assert_eq!(records(&lines, "sys_enter").len(), 5);
}
