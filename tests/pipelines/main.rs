//! Log pipelines fed by uevrec, run with the real daemons:
//! - rsyslog (imfile + mmjsonparse + omfile) follows the ROTATING file of `uevrec record`;
//! - syslog-ng (program() source + json-parser + date-parser) reads `uevrec tail`.
//!
//! The daemons run in the foreground on their own configs in a temp dir — the drop-ins
//! `tests/pipelines/*.conf`, the very text `docs/pipelines.md` shows (checked below) — and
//! are stopped by PID at the end, also when a test fails (a Drop guard).
//!
//! The known stream: a perl child calls `syscall(getppid, SEQ, 0, 0, 0, 0, 0)` for SEQ in
//! 0..N, in bursts it is told to make on its stdin (so uevrec attaches first).
//! `raw_syscalls:sys_enter` records the raw argument registers, so every record carries its
//! sequence number in `fields.args[0]`; uevrec's kernel filter keeps only that child's
//! getppid calls. Each test checks that every line arrives parsed (zero parse failures),
//! none is lost or duplicated (sequence numbers 0..N exactly once), numbers stay numbers,
//! and the pipeline's timestamp is uevrec's `time`. Two more tests feed uevrec's in-band
//! lines (a lost line, a line whose `time` is null) and a broken line straight into the
//! tested configs, for the routes the recordings never reach.
//!
//! Needs root, tracefs, perl and the daemon: a missing rsyslog / syslog-ng-core is installed
//! with apt-get (the two packages conflict, so the tests take turns under a file lock and
//! each installs its own). Otherwise a test prints SKIP with the reason and returns.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

use crate::common::PATIENCE;
use crate::common::bin;
use crate::common::tier::Tier;

/// x86_64 and aarch64 numbers of getppid.
#[cfg(target_arch = "x86_64")]
const NR_GETPPID: u32 = 110;
#[cfg(target_arch = "aarch64")]
const NR_GETPPID: u32 = 173;

/// Where uevrec's file and the daemons' outputs live in the documented setup.
const DOC_UEVREC_DIR: &str = "/var/log/uevrec";
const DOC_OUT_DIR: &str = "/var/log/uevrec-pipeline";
const DOC_UEVREC: &str = "/usr/local/bin/uevrec";

fn template(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/pipelines")
        .join(name);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `text` with every `@KEY@` replaced; panics on a placeholder left over.
fn render(text: &str, vars: &[(&str, &str)]) -> String {
    let mut out = text.to_owned();
    for (key, value) in vars {
        out = out.replace(&format!("@{key}@"), value);
    }
    assert!(
        !out.lines()
            .any(|l| l.matches('@').count() >= 2 && !l.contains("@cee")),
        "unreplaced placeholder in:\n{out}"
    );
    out
}

fn rsyslog_conf(uevrec_dir: &str, out_dir: &str) -> String {
    render(
        &template("rsyslog-uevrec.conf"),
        &[("UEVREC_DIR", uevrec_dir), ("OUT_DIR", out_dir)],
    )
}

fn syslog_ng_conf(uevrec: &str, selectors: &str, out_dir: &str) -> String {
    render(
        &template("syslog-ng-uevrec.conf"),
        &[
            ("UEVREC", uevrec),
            ("SELECTORS", selectors),
            ("OUT_DIR", out_dir),
        ],
    )
}

/// docs/pipelines.md pastes the configs these tests run (with the documented paths).
#[test]
fn docs_show_the_tested_configs() {
    let doc_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/pipelines.md");
    let doc = fs::read_to_string(&doc_path).unwrap();
    for (name, conf) in [
        ("rsyslog", rsyslog_conf(DOC_UEVREC_DIR, DOC_OUT_DIR)),
        ("syslog-ng", syslog_ng_conf(DOC_UEVREC, "", DOC_OUT_DIR)),
    ] {
        assert!(
            doc.contains(&conf),
            "{} does not show the tested {name} config; paste exactly:\n{conf}",
            doc_path.display()
        );
    }
}

/// Why this machine cannot run the pipeline tests, if it cannot.
fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (perf_event_open on tracepoints, apt-get)".into());
    }
    if !Path::new("/sys/kernel/tracing/events/raw_syscalls/sys_enter").exists() {
        return Some("tracefs with raw_syscalls events not mounted at /sys/kernel/tracing".into());
    }
    if Command::new("perl")
        .arg("-v")
        .stdout(Stdio::null())
        .status()
        .is_err()
    {
        return Some("perl (the sequence-number child) not installed".into());
    }
    None
}

fn host_ready() -> Result<(), String> {
    skip_reason().map_or(Ok(()), Err)
}

/// The route tests feed lines themselves: they need root (apt-get, daemons) only.
fn root_ready() -> Result<(), String> {
    // SAFETY: geteuid has no side effects.
    match unsafe { libc::geteuid() } {
        0 => Ok(()),
        _ => Err("not root (apt-get, syslog daemons)".into()),
    }
}

/// Exclusive lock across test processes: rsyslog and syslog-ng-core replace each other.
struct PackageLock(#[allow(dead_code)] File);

fn package_lock() -> PackageLock {
    let dir = if Path::new("/run/lock").is_dir() {
        PathBuf::from("/run/lock")
    } else {
        std::env::temp_dir()
    };
    let file = File::create(dir.join("uevrec-pipelines.lock")).unwrap();
    // SAFETY: flock on an fd we own; released when the file is closed.
    assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) }, 0);
    PackageLock(file)
}

/// Whether these tests may install and swap syslog daemons with apt-get: only when asked
/// (`UEVREC_PIPELINES=1`, or the pipelines tier required, as `.ci/run` does).
fn installs_asked() -> bool {
    std::env::var("UEVREC_PIPELINES").is_ok_and(|v| v == "1") || Tier::Pipelines.required()
}

/// Make sure Debian package `pkg` (providing `probe`) is installed.
fn ensure_package(pkg: &str, probe: &str) -> Result<(), String> {
    if Path::new(probe).exists() {
        return Ok(());
    }
    if !installs_asked() {
        return Err(format!(
            "{probe} missing; these tests install {pkg} with apt-get (replacing the \
             machine's syslog daemon) only when asked: UEVREC_PIPELINES=1 or \
             UEVREC_REQUIRE_TIERS=pipelines"
        ));
    }
    if !Path::new("/usr/bin/apt-get").exists() {
        return Err(format!("{probe} missing and no apt-get to install {pkg}"));
    }
    eprintln!("installing {pkg} with apt-get (replaces a conflicting syslog daemon)");
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-q", "-o", "DPkg::Lock::Timeout=120", pkg])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .output()
    };
    let mut out = install().map_err(|e| format!("apt-get: {e}"))?;
    if !out.status.success() {
        let _ = Command::new("apt-get").args(["update", "-q"]).output();
        out = install().map_err(|e| format!("apt-get: {e}"))?;
    }
    if out.status.success() && Path::new(probe).exists() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        Err(format!("apt-get install {pkg} failed: {tail:?}"))
    }
}

/// A process of ours, stopped by PID when dropped (also when the test panics), together
/// with processes it started (`also`: e.g. syslog-ng's program() source).
struct Running {
    what: &'static str,
    child: Child,
    also: Vec<i32>,
    /// Some process of `also` had to be killed: it outlived `child` by PATIENCE.
    killed_also: bool,
}

impl Running {
    fn new(what: &'static str, child: Child) -> Running {
        Running {
            what,
            child,
            also: Vec::new(),
            killed_also: false,
        }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Still running? Panics with its stderr if it ended.
    fn check_alive(&mut self) {
        if let Some(st) = self.child.try_wait().unwrap() {
            panic!(
                "{} ended early ({st}): {}",
                self.what,
                stderr_text(&mut self.child)
            );
        }
    }

    /// Send `sig` and wait for the end (SIGKILL after PATIENCE).
    fn stop_with(&mut self, sig: i32) -> ExitStatus {
        if self.child.try_wait().unwrap().is_none() {
            // SAFETY: kill on our own child.
            unsafe { libc::kill(self.pid(), sig) };
        }
        let status = wait_exit(&mut self.child, self.what);
        for pid in std::mem::take(&mut self.also) {
            self.killed_also |= !wait_gone(pid);
        }
        status
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop_with(libc::SIGTERM);
    }
}

fn wait_exit(child: &mut Child, what: &str) -> ExitStatus {
    crate::common::wait_exit(child, PATIENCE).unwrap_or_else(|status| {
        eprintln!("{what} did not stop within {PATIENCE:?}: killed");
        status
    })
}

/// Process state letter of `pid` (None: gone).
fn proc_state(pid: i32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// Wait for a process that is not our child to end; false if it had to be killed
/// (SIGKILL after PATIENCE).
fn wait_gone(pid: i32) -> bool {
    let start = Instant::now();
    while matches!(proc_state(pid), Some(s) if s != 'Z') {
        if start.elapsed() > PATIENCE {
            eprintln!("pid {pid} outlived its parent by {PATIENCE:?}: killed");
            // SAFETY: kill on a process our daemon started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            return false;
        }
        sleep(Duration::from_millis(20));
    }
    true
}

/// Children of `parent` (from /proc/*/stat).
fn children_of(parent: i32) -> Vec<i32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let rest = s.rsplit_once(") ")?.1.to_owned();
                    rest.split(' ').nth(1)?.parse::<i32>().ok()
                })
                == Some(parent)
        })
        .collect()
}

fn stderr_text(child: &mut Child) -> String {
    let mut s = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut s);
    }
    s
}

/// The sequence child: each line `K` on its stdin makes it call getppid K more times, with
/// the running sequence number as first argument; it exits at end of input.
struct SeqChild {
    run: Running,
    stdin: Option<ChildStdin>,
    next: u64,
}

impl SeqChild {
    fn spawn() -> SeqChild {
        let script = format!(
            "my $i = 0; while (my $n = <STDIN>) {{ syscall({NR_GETPPID}, $i++, 0, 0, 0, 0, 0) for 1 .. $n }}"
        );
        let mut child = Command::new("perl")
            .args(["-e", &script])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        SeqChild {
            run: Running::new("perl sequence child", child),
            stdin,
            next: 0,
        }
    }

    fn pid(&self) -> i32 {
        self.run.pid()
    }

    /// uevrec's selector arguments for exactly this child's calls.
    fn filter(&self) -> String {
        format!("common_pid == {} && id == {NR_GETPPID}", self.pid())
    }

    /// Make the next `k` calls; returns the last sequence number.
    fn burst(&mut self, k: u64) -> u64 {
        let stdin = self.stdin.as_mut().expect("child still open");
        writeln!(stdin, "{k}").unwrap();
        stdin.flush().unwrap();
        self.next += k;
        self.next - 1
    }

    /// Close its input and reap it.
    fn finish(mut self) {
        drop(self.stdin.take());
        let st = wait_exit(&mut self.run.child, "perl sequence child");
        assert!(st.success(), "{st}: {}", stderr_text(&mut self.run.child));
    }
}

/// Complete lines appended to a file since the last call.
struct Follower {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
}

impl Follower {
    fn new(path: PathBuf) -> Follower {
        Follower {
            path,
            offset: 0,
            partial: Vec::new(),
        }
    }

    fn poll(&mut self) -> Vec<String> {
        let Ok(mut f) = File::open(&self.path) else {
            return Vec::new();
        };
        f.seek(SeekFrom::Start(self.offset)).unwrap();
        let mut buf = Vec::new();
        f.read_to_end(&mut buf).unwrap();
        self.offset += buf.len() as u64;
        self.partial.extend_from_slice(&buf);
        let Some(last_nl) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return Vec::new();
        };
        let rest = self.partial.split_off(last_nl + 1);
        let done = std::mem::replace(&mut self.partial, rest);
        String::from_utf8(done)
            .expect("pipeline output is UTF-8")
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// One output line of both pipelines: `<PRI>1 TIMESTAMP HOST uevrec - - - JSON`.
struct OutLine {
    timestamp: String,
    json: Value,
}

fn parse_out_line(line: &str) -> OutLine {
    let (header, json) = line
        .split_once(" - - - ")
        .unwrap_or_else(|| panic!("not an RFC 5424 line: {line:?}"));
    let fields: Vec<&str> = header.split(' ').collect();
    assert_eq!(fields.len(), 4, "header of {line:?}");
    assert!(
        fields[0].starts_with('<') && fields[0].ends_with(">1"),
        "{line:?}"
    );
    assert_eq!(fields[3], "uevrec", "{line:?}");
    OutLine {
        timestamp: fields[1].to_owned(),
        json: serde_json::from_str(json)
            .unwrap_or_else(|e| panic!("output JSON does not parse ({e}): {line:?}")),
    }
}

/// Sequence number of an event record (None for uevrec's own lines), after checking that
/// its numbers are JSON numbers.
fn seq_of(v: &Value) -> Option<u64> {
    if v.get("uevrec").is_some() {
        return None;
    }
    assert_eq!(v["event"], "sys_enter", "{v}");
    for key in ["cpu", "pid", "tid"] {
        assert!(v[key].is_u64(), "{key} is not an integer: {v}");
    }
    assert_eq!(
        v["fields"]["id"].as_u64(),
        Some(u64::from(NR_GETPPID)),
        "{v}"
    );
    let args = v["fields"]["args"].as_array().expect("args is an array");
    assert_eq!(args.len(), 6, "{v}");
    assert!(args.iter().all(Value::is_u64), "args not integers: {v}");
    assert!(args[1..].iter().all(|a| a == 0), "{v}");
    args[0].as_u64()
}

/// `seqs` is exactly 0..n, each once.
fn assert_exact_sequence(mut seqs: Vec<u64>, n: u64, what: &str) {
    seqs.sort_unstable();
    let dups: BTreeSet<u64> = seqs
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| w[0])
        .collect();
    let have: BTreeSet<u64> = seqs.iter().copied().collect();
    let missing: Vec<u64> = (0..n).filter(|s| !have.contains(s)).take(20).collect();
    assert!(
        dups.is_empty() && missing.is_empty() && seqs.len() as u64 == n,
        "{what}: {} records for {n}; duplicated {dups:?}; first missing {missing:?}",
        seqs.len()
    );
}

/// A JSON value as text with object keys sorted (line comparison regardless of key order).
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&map[k])))
                .collect();
            format!("{{{}}}", items.join(","))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", items.join(","))
        }
        other => other.to_string(),
    }
}

/// Non-empty lines of a file that may not exist.
fn file_lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Wait until `follow` delivered a record with sequence number `seq` (collecting all lines).
fn wait_for_seq(follow: &mut Follower, got: &mut Vec<OutLine>, seq: u64, daemon: &mut Running) {
    let start = Instant::now();
    loop {
        got.extend(follow.poll().iter().map(|l| parse_out_line(l)));
        if got.iter().any(|o| o.json["fields"]["args"][0] == seq) {
            return;
        }
        daemon.check_alive();
        assert!(
            start.elapsed() < PATIENCE,
            "{} did not deliver record {seq} within {PATIENCE:?} ({} lines so far)",
            daemon.what,
            got.len()
        );
        sleep(Duration::from_millis(20));
    }
}

/// Wait until uevrec's `attached` notice came through the pipeline (uevrec and the daemon
/// are both listening); returns the lines seen so far. Panics if one of `procs` ended.
fn wait_attached(follow: &mut Follower, procs: &mut [&mut Running]) -> Vec<OutLine> {
    let mut got: Vec<OutLine> = Vec::new();
    let start = Instant::now();
    while !got.iter().any(|o| o.json["what"] == "attached") {
        got.extend(follow.poll().iter().map(|l| parse_out_line(l)));
        for p in procs.iter_mut() {
            p.check_alive();
        }
        assert!(
            start.elapsed() < PATIENCE,
            "no attached notice through {}",
            procs[0].what
        );
        sleep(Duration::from_millis(20));
    }
    got
}

/// rsyslogd in the foreground on the tested drop-in (uevrec's file and the outputs in
/// `dir`), after the one line of global settings a standalone rsyslogd needs.
fn start_rsyslog(dir: &Path) -> Running {
    let d = dir.to_str().unwrap();
    fs::create_dir(dir.join("work")).unwrap();
    let conf = dir.join("rsyslog.conf");
    fs::write(
        &conf,
        format!(
            "global(workDirectory=\"{d}/work\" maxMessageSize=\"64k\")\n{}",
            rsyslog_conf(d, d)
        ),
    )
    .unwrap();
    let check = Command::new("rsyslogd")
        .args(["-N1", "-f"])
        .arg(&conf)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "rsyslogd -N1 rejects the config: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    Running::new(
        "rsyslogd",
        Command::new("rsyslogd")
            .args(["-n", "-f"])
            .arg(&conf)
            .arg("-i")
            .arg(dir.join("rsyslogd.pid"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// syslog-ng in the foreground on `drop_in` (with its `@version` line), all its state
/// files in `dir`.
fn start_syslog_ng(dir: &Path, drop_in: &str, stdin: Stdio) -> Running {
    let d = dir.to_str().unwrap();
    let conf = dir.join("syslog-ng.conf");
    fs::write(&conf, format!("@version: 3.38\n{drop_in}")).unwrap();
    let check = Command::new("syslog-ng")
        .arg("--syntax-only")
        .arg(format!("--cfgfile={}", conf.display()))
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "syslog-ng --syntax-only rejects the config: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    Running::new(
        "syslog-ng",
        Command::new("syslog-ng")
            .arg("-F")
            .arg(format!("--cfgfile={}", conf.display()))
            .arg(format!("--persist-file={d}/syslog-ng.persist"))
            .arg(format!("--pidfile={d}/syslog-ng.pid"))
            .arg(format!("--control={d}/syslog-ng.ctl"))
            .stdin(stdin)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// uevrec's in-band lines as the schema defines them, and a line that is not JSON: what
/// the lost-record and unparsed routes are for (the recordings above produce neither).
const LOST_LINE: &str =
    r#"{"time":"2026-11-22T11:00:00.123456789Z","uevrec":"lost","cpu":1,"lost":17}"#;
const NULL_TIME_LINE: &str = r#"{"time":null,"uevrec":"notice","what":"attached","event":"user_events:test","message":"id 1117"}"#;
const BROKEN_LINE: &str = r#"{"time":"2026-11-22T11:00:00.123456789Z","system":"#;

/// Wait until `path` has `n` lines; returns them.
fn wait_lines(path: &Path, n: usize, daemon: &mut Running) -> Vec<String> {
    let start = Instant::now();
    loop {
        let lines = file_lines(path);
        if lines.len() >= n {
            return lines;
        }
        daemon.check_alive();
        assert!(
            start.elapsed() < PATIENCE,
            "{} wrote {} of {n} lines to {} in {PATIENCE:?}",
            daemon.what,
            lines.len(),
            path.display()
        );
        sleep(Duration::from_millis(20));
    }
}

/// rsyslog routes uevrec's lost line to the lost file, a broken line to the unparsed file.
#[test]
fn rsyslog_routes_lost_and_unparsed_lines() {
    require!(Tier::Pipelines, root_ready());
    let _lock = package_lock();
    require!(
        Tier::Pipelines,
        ensure_package("rsyslog", "/usr/sbin/rsyslogd")
    );
    let dir = tempfile::tempdir().unwrap();
    let mut rsyslog = start_rsyslog(dir.path());
    let mut f = File::create(dir.path().join("events.json")).unwrap();
    writeln!(f, "{LOST_LINE}\n{BROKEN_LINE}\n{NULL_TIME_LINE}").unwrap();
    drop(f);
    let unparsed = wait_lines(&dir.path().join("uevrec-unparsed.log"), 1, &mut rsyslog);
    let lost = wait_lines(&dir.path().join("uevrec-lost.log"), 1, &mut rsyslog);
    let all = wait_lines(&dir.path().join("uevrec.log"), 2, &mut rsyslog);
    rsyslog.stop_with(libc::SIGTERM);

    assert_eq!(unparsed.len(), 1, "{unparsed:?}");
    assert!(unparsed[0].ends_with(BROKEN_LINE), "{unparsed:?}");
    let lost_value: Value = serde_json::from_str(LOST_LINE).unwrap();
    assert_eq!(lost.len(), 1, "{lost:?}");
    let routed = parse_out_line(&lost[0]);
    assert_eq!(routed.json, lost_value);
    assert_eq!(routed.timestamp, "2026-11-22T11:00:00.123456789Z");
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(parse_out_line(&all[0]).json, lost_value);
    let null_time = parse_out_line(&all[1]);
    assert_eq!(null_time.json["time"], Value::Null);
    assert_eq!(null_time.timestamp, "-", "RFC 5424 nil TIMESTAMP");
}

/// syslog-ng routes uevrec's lost line to the lost file, a broken line to the unparsed
/// file, and keeps the receive time for a line whose time is null. The tested drop-in
/// with its program() source replaced by stdin().
#[test]
fn syslog_ng_routes_lost_null_time_and_unparsed_lines() {
    require!(Tier::Pipelines, root_ready());
    let _lock = package_lock();
    require!(
        Tier::Pipelines,
        ensure_package("syslog-ng-core", "/usr/sbin/syslog-ng")
    );
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let tested = syslog_ng_conf(DOC_UEVREC, "", d);
    let program = format!("program(\"{DOC_UEVREC} tail --quiet\"");
    assert!(tested.contains(&program), "source line changed: {tested}");
    let drop_in = tested.replace(&program, "stdin(");
    let mut sng = start_syslog_ng(dir.path(), &drop_in, Stdio::piped());
    let mut input = sng.child.stdin.take().unwrap();
    writeln!(input, "{LOST_LINE}\n{BROKEN_LINE}\n{NULL_TIME_LINE}").unwrap();
    drop(input); // syslog-ng ends at the end of stdin
    let st = wait_exit(&mut sng.child, "syslog-ng");
    assert!(
        st.success(),
        "syslog-ng: {st}: {}",
        stderr_text(&mut sng.child)
    );

    let unparsed = file_lines(&dir.path().join("uevrec-unparsed.log"));
    assert_eq!(unparsed, [BROKEN_LINE]);
    let lost = file_lines(&dir.path().join("uevrec-lost.log"));
    assert_eq!(lost, [LOST_LINE]);
    let all: Vec<OutLine> = file_lines(&dir.path().join("uevrec.log"))
        .iter()
        .map(|l| parse_out_line(l))
        .collect();
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].timestamp, "2026-11-22T11:00:00.123456+00:00");
    assert_eq!(all[1].json["time"], Value::Null);
    // The receive time: today, not the lost line's.
    assert!(
        all[1].timestamp.len() == 32 && all[1].timestamp != all[0].timestamp,
        "{}",
        all[1].timestamp
    );
}

/// rsyslog's imfile tails the rotating file of `uevrec record` across many rotations.
///
/// imfile follows one rotation at a time: when uevrec rotates again before imfile has
/// opened the previous new file, that whole file is never read (measured here: 16 KiB
/// files rotated every ~50 ms lost whole files; every ~200 ms lost none). So the child
/// makes bursts smaller than a file and waits until rsyslog delivered each burst: every
/// burst crosses at most one rotation. Real deployments rotate at 100M (contrib unit).
#[test]
fn rsyslog_tails_rotating_file() {
    require!(Tier::Pipelines, host_ready());
    let _lock = package_lock();
    require!(
        Tier::Pipelines,
        ensure_package("rsyslog", "/usr/sbin/rsyslogd")
    );
    const BURST: u64 = 50; // ~7 KiB of lines, half a file
    const BURSTS: u64 = 30;
    const N: u64 = BURST * BURSTS;

    let dir = tempfile::tempdir().unwrap();
    let mut rsyslog = start_rsyslog(dir.path());

    let mut child = SeqChild::spawn();
    let events = dir.path().join("events.json");
    let mut rec = Running::new(
        "uevrec record",
        Command::new(bin())
            .args(["record", "--quiet", "-e", "raw_syscalls:sys_enter"])
            .args(["--filter", &child.filter()])
            .args([
                "--rotate-size",
                "16k",
                "--rotate-keep",
                "100000",
                "-m",
                "1M",
            ])
            .args(["--duration", "50s", "-o"])
            .arg(&events)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );

    // uevrec's attached notice reaches rsyslog's output: both are listening.
    let mut follow = Follower::new(dir.path().join("uevrec.log"));
    let mut got = wait_attached(&mut follow, &mut [&mut rsyslog, &mut rec]);
    for _ in 0..BURSTS {
        let last = child.burst(BURST);
        wait_for_seq(&mut follow, &mut got, last, &mut rsyslog);
    }
    child.finish();
    let st = rec.stop_with(libc::SIGINT);
    assert_eq!(
        st.code(),
        Some(0),
        "uevrec: {}",
        stderr_text(&mut rec.child)
    );

    // Everything uevrec wrote, oldest file first.
    let mut files: Vec<(u64, PathBuf)> = fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            let name = p.file_name()?.to_str()?.to_owned();
            let n = match name.strip_prefix("events.json") {
                Some("") => 0,
                Some(suffix) => suffix.strip_prefix('.')?.parse().ok()?,
                None => return None,
            };
            Some((n, p))
        })
        .collect();
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    assert!(files.len() >= 4, "expected >= 3 rotations, got {files:?}");
    let written: Vec<Value> = files
        .iter()
        .flat_map(|(_, p)| file_lines(p))
        .map(|l| serde_json::from_str(&l).unwrap())
        .collect();

    // Wait for rsyslog to deliver the lines after the last burst (uevrec's stop), then stop it.
    let start = Instant::now();
    while got.len() < written.len() && start.elapsed() < PATIENCE {
        got.extend(follow.poll().iter().map(|l| parse_out_line(l)));
        sleep(Duration::from_millis(20));
    }
    let st = rsyslog.stop_with(libc::SIGTERM);
    got.extend(follow.poll().iter().map(|l| parse_out_line(l)));
    assert!(st.success(), "rsyslogd: {st}");

    let unparsed = file_lines(&dir.path().join("uevrec-unparsed.log"));
    assert!(
        unparsed.is_empty(),
        "lines rsyslog could not parse: {unparsed:?}"
    );
    for o in &got {
        assert_eq!(
            o.json["time"], o.timestamp,
            "syslog TIMESTAMP is not the record's time"
        );
    }
    // Same multiset of lines, compared as JSON values: nothing lost, duplicated or retyped.
    let mut a: Vec<String> = written.iter().map(canonical).collect();
    let mut b: Vec<String> = got.iter().map(|o| canonical(&o.json)).collect();
    a.sort();
    b.sort();
    if a != b {
        let only_uevrec: Vec<&String> = a.iter().filter(|l| !b.contains(l)).take(3).collect();
        let only_rsyslog: Vec<&String> = b.iter().filter(|l| !a.contains(l)).take(3).collect();
        panic!(
            "uevrec wrote {} lines over {} files, rsyslog delivered {}; only in uevrec: \
             {only_uevrec:?}; only in rsyslog: {only_rsyslog:?}",
            a.len(),
            files.len(),
            b.len()
        );
    }
    let seqs = got.iter().filter_map(|o| seq_of(&o.json)).collect();
    assert_exact_sequence(seqs, N, "rsyslog");
    let lost_written = written.iter().filter(|v| v["uevrec"] == "lost").count();
    assert_eq!(
        lost_written, 0,
        "the kernel dropped records (ring too small?)"
    );
    assert_eq!(
        file_lines(&dir.path().join("uevrec-lost.log")).len(),
        lost_written,
        "lost-record route"
    );
    eprintln!(
        "rsyslog: {} lines over {} files ({} rotations), all parsed, sequence 0..{N} exactly once",
        got.len(),
        files.len(),
        files.len() - 1
    );
}

/// syslog-ng runs `uevrec tail` as its program() source and parses every line.
#[test]
fn syslog_ng_reads_uevrec_tail() {
    require!(Tier::Pipelines, host_ready());
    let _lock = package_lock();
    require!(
        Tier::Pipelines,
        ensure_package("syslog-ng-core", "/usr/sbin/syslog-ng")
    );
    const N: u64 = 3000;

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let mut child = SeqChild::spawn();
    // --duration: uevrec never outlives the test even if syslog-ng forgot to stop it.
    let selectors = format!(
        " -e raw_syscalls:sys_enter --filter '{}' -m 1M --duration 50s",
        child.filter()
    );
    let conf = syslog_ng_conf(bin().to_str().unwrap(), &selectors, d);
    let mut sng = start_syslog_ng(dir.path(), &conf, Stdio::null());

    let mut follow = Follower::new(dir.path().join("uevrec.log"));
    let mut got = wait_attached(&mut follow, &mut [&mut sng]);
    sng.also = children_of(sng.pid());
    assert!(!sng.also.is_empty(), "syslog-ng started no program()");
    let last = child.burst(N);
    wait_for_seq(&mut follow, &mut got, last, &mut sng);
    child.finish();
    // Stopping syslog-ng stops its program(): `also` is waited for, killed only if it lingers.
    let st = sng.stop_with(libc::SIGTERM);
    got.extend(follow.poll().iter().map(|l| parse_out_line(l)));
    assert!(!sng.killed_also, "uevrec tail outlived syslog-ng");
    assert!(
        st.success(),
        "syslog-ng: {st}: {}",
        stderr_text(&mut sng.child)
    );

    let unparsed = file_lines(&dir.path().join("uevrec-unparsed.log"));
    assert!(
        unparsed.is_empty(),
        "lines syslog-ng could not parse: {unparsed:?}"
    );
    for o in &got {
        // date-parser took "time" (ns, Z) as the message time; ISODATE shows microseconds.
        let time = o.json["time"].as_str().expect("time is a string");
        assert_eq!(
            o.timestamp,
            format!("{}+00:00", &time[..26]),
            "ISODATE is not the record's time"
        );
    }
    let lost = got.iter().filter(|o| o.json["uevrec"] == "lost").count();
    assert_eq!(lost, 0, "the kernel dropped records (ring too small?)");
    assert_eq!(
        file_lines(&dir.path().join("uevrec-lost.log")).len(),
        lost,
        "lost-record route"
    );
    let seqs = got.iter().filter_map(|o| seq_of(&o.json)).collect();
    assert_exact_sequence(seqs, N, "syslog-ng");
    eprintln!(
        "syslog-ng: {} lines, all parsed, sequence 0..{N} exactly once",
        got.len()
    );
}
