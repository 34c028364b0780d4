//! `uevrec record --raw FILE` on the host kernel (tier `host`: root, tracefs, perf).
//!
//! One run writes both the perf.data (`--raw`) and the live JSON lines (`-o`) from the
//! same staged records, so the round trip is checked exactly: `uevrec decode FILE` gives
//! the live lines (same values, same count, same `comm`/`cgroup` context), and `perf
//! script` prints the same pid, tid, cpu, wall-clock time, fields and comm (from the
//! file's COMM/FORK/EXIT records) for every sample; `perf report --stdio` reads the file. The recorded process execs perl, calls getppid a known number of times and execs
//! a copy of /bin/true on which a uprobe event (group `uevrec_raw_test`, apart from
//! session_host's `uevrec_test`) is created *after* the recording started
//! (a late-attached event, attached by the rescan), so its sample must be in the file
//! too. Also: an existing FILE and `-` are refused, a full disk ends the run with an error and a
//! finished file holding what was written, a SIGKILLed run's file decodes (exit status 3).

use std::fs;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::PATIENCE;
use crate::common::bin;
use crate::common::perf_script::{as_perf_line, normalise, perf_script};
use crate::common::tier::Tier;

/// x86_64 and aarch64 numbers of getppid.
#[cfg(target_arch = "x86_64")]
const NR_GETPPID: u64 = 110;
#[cfg(target_arch = "aarch64")]
const NR_GETPPID: u64 = 173;

const GETPPIDS: usize = 3000;
const UPROBES: &str = "/sys/kernel/tracing/uprobe_events";

/// Why this machine cannot run the tests, if it cannot.
fn skip_reason() -> Option<String> {
    if !Path::new(UPROBES).exists() {
        return Some(format!(
            "{UPROBES} missing (kernel without CONFIG_UPROBE_EVENTS)"
        ));
    }
    crate::common::perf_skip_reason()
}

macro_rules! require_host {
    () => {
        require!(Tier::Host, skip_reason().map_or(Ok(()), Err))
    };
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// Wait until `path` holds `n` `attached` notices, the last ones naming `event` if given.
fn wait_attached(path: &Path, rec: &mut Child, n: usize, event: Option<&str>) {
    let start = Instant::now();
    loop {
        let text = fs::read_to_string(path).unwrap_or_default();
        let attached: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("\"what\":\"attached\""))
            .collect();
        if attached.len() >= n && event.is_none_or(|e| attached.iter().any(|l| l.contains(e))) {
            return;
        }
        if let Some(st) = rec.try_wait().unwrap() {
            panic!("uevrec ended ({st}) before attaching: {}", stderr(rec));
        }
        assert!(start.elapsed() < PATIENCE, "not attached: {text}");
        sleep(Duration::from_millis(20));
    }
}

fn stderr(child: &mut Child) -> String {
    let mut s = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut s);
    }
    s
}

fn interrupt_and_wait(rec: &mut Child) -> String {
    // SAFETY: kill on a child we own.
    assert_eq!(unsafe { libc::kill(rec.id() as i32, libc::SIGINT) }, 0);
    let st = crate::common::wait_exit(rec, PATIENCE).expect("uevrec exits after SIGINT");
    let err = stderr(rec);
    assert_eq!(st.code(), Some(0), "{err}");
    err
}

/// The file offset of `elf`'s entry point (an ELF64 little-endian executable): where a
/// uprobe on it goes.
fn entry_offset(elf: &[u8]) -> u64 {
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().unwrap());
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap());
    assert_eq!(&elf[..5], b"\x7fELF\x02", "an ELF64 file");
    let entry = u64_at(24);
    let (phoff, phentsize, phnum) = (u64_at(32) as usize, u16_at(54) as usize, u16_at(56));
    for i in 0..phnum as usize {
        let ph = phoff + i * phentsize;
        let kind = u32::from_le_bytes(elf[ph..ph + 4].try_into().unwrap());
        let (offset, vaddr, filesz) = (u64_at(ph + 8), u64_at(ph + 16), u64_at(ph + 32));
        if kind == 1 && (vaddr..vaddr + filesz).contains(&entry) {
            return entry - vaddr + offset;
        }
    }
    panic!("entry point {entry:#x} in no LOAD segment");
}

/// A uprobe event `uevrec_raw_test/<name>` on the entry of `prog`, removed on drop.
struct Uprobe(String);

impl Uprobe {
    fn new(name: &str, prog: &Path) -> Self {
        let off = entry_offset(&fs::read(prog).unwrap());
        let def = format!("p:uevrec_raw_test/{name} {}:{off:#x}\n", prog.display());
        let mut f = fs::OpenOptions::new().append(true).open(UPROBES).unwrap();
        f.write_all(def.as_bytes())
            .unwrap_or_else(|e| panic!("creating the uprobe {def:?}: {e}"));
        Uprobe(name.into())
    }
}

impl Drop for Uprobe {
    fn drop(&mut self) {
        // EBUSY while a recorder (another test's?) still has it open: try for a while.
        let undef = format!("-:uevrec_raw_test/{}\n", self.0);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            let removed = fs::OpenOptions::new()
                .append(true)
                .open(UPROBES)
                .and_then(|mut f| f.write_all(undef.as_bytes()));
            if removed.is_ok() {
                return;
            }
            sleep(Duration::from_millis(50));
        }
        eprintln!("could not remove the uprobe uevrec_raw_test/{}", self.0);
    }
}

/// `cmd` (a `uevrec record` with its events) writing the perf.data `raw` and the JSON
/// lines `live` in one run, started, its stderr piped.
fn spawn_both(mut cmd: Command, raw: &Path, live: &Path) -> Child {
    cmd.arg("--raw").arg(raw).arg("-o").arg(live);
    cmd.stderr(Stdio::piped()).spawn().unwrap()
}

fn decode(file: &Path) -> Output {
    Command::new(bin())
        .args(["decode", "-q"])
        .arg(file)
        .output()
        .unwrap()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn one_run_gives_perf_data_equal_to_the_live_lines_and_to_perf_script() {
    require_host!();
    let dir = tempfile::tempdir().unwrap();
    let late_prog = dir.path().join("late-true");
    fs::copy("/bin/true", &late_prog).unwrap();
    // Waits for a line, then execs perl, which calls getppid and execs the copy of true.
    let script = format!(
        "read x; exec perl -e 'getppid() for 1..{GETPPIDS}; exec q({})'",
        late_prog.display()
    );
    let mut work = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = work.id();
    let (raw, live) = (dir.path().join("rec.data"), dir.path().join("live.json"));
    let mut cmd = Command::new(bin());
    cmd.args([
        "record",
        "--pid",
        &pid.to_string(),
        "--rescan-interval",
        "100ms",
    ])
    .args([
        "-e",
        "sched:sched_process_exec",
        "-e",
        "raw_syscalls:sys_enter",
    ])
    .args(["-e", "uevrec_raw_test:*"]);
    let mut rec = spawn_both(cmd, &raw, &live);
    wait_attached(&live, &mut rec, 2, None);
    // An event that appears after the start: attached by the rescan.
    let late = format!("late_{pid}");
    let _probe = Uprobe::new(&late, &late_prog);
    wait_attached(&live, &mut rec, 3, Some(&format!("uevrec_raw_test:{late}")));
    work.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(work.wait().unwrap().success());
    sleep(Duration::from_millis(300));
    let err = interrupt_and_wait(&mut rec);
    assert!(err.contains("uevrec: wrote "), "{err}");

    // The round trip: the same lines, values and count as the live recording; the
    // schema lines of the events with records alike too (all but their time: the
    // perf.data stores the format files the live recording read).
    let live_text = fs::read_to_string(&live).unwrap();
    let own = |l: &&str, what: &str| l.contains(&format!("\"uevrec\":\"{what}\""));
    let live_lines: Vec<String> = live_text
        .lines()
        .filter(|l| !own(l, "notice") && !own(l, "session") && !own(l, "schema"))
        .map(String::from)
        .collect();
    let out = decode(&raw);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let untimed = |l: &str| {
        let mut v: Value = serde_json::from_str(l).unwrap();
        v.as_object_mut().unwrap().remove("time");
        v
    };
    let decoded_schemas: Vec<Value> = text
        .lines()
        .filter(|l| own(l, "schema"))
        .map(untimed)
        .collect();
    let live_schemas: Vec<Value> = live_text
        .lines()
        .filter(|l| own(l, "schema"))
        .map(untimed)
        .collect();
    assert_eq!(
        decoded_schemas.len(),
        3,
        "exec, sys_enter, the late uprobe: {decoded_schemas:?}"
    );
    for s in &decoded_schemas {
        assert!(
            live_schemas.contains(s),
            "{s} differs from the live one: {live_schemas:?}"
        );
    }
    let decoded: Vec<String> = text
        .lines()
        .filter(|l| !own(l, "schema"))
        .map(String::from)
        .collect();
    assert_eq!(decoded.len(), live_lines.len());
    assert_eq!(sorted(decoded.clone()), sorted(live_lines));

    // The values are the workload's.
    let values: Vec<Value> = json_lines(&text)
        .into_iter()
        .filter(|v| v["uevrec"] != "schema")
        .collect();
    let getppids = values
        .iter()
        .filter(|v| v["event"] == "sys_enter" && v["fields"]["id"] == NR_GETPPID)
        .count();
    assert!(getppids >= GETPPIDS, "{getppids} getppid calls");
    let execs: Vec<&Value> = values
        .iter()
        .filter(|v| v["event"] == "sched_process_exec")
        .collect();
    assert_eq!(execs.len(), 2, "{execs:?}");
    assert_eq!(execs[1]["fields"]["filename"], late_prog.to_str().unwrap());
    assert!(values.iter().all(|v| v["pid"] == pid));
    let late_hits: Vec<&Value> = values.iter().filter(|v| v["event"] == late).collect();
    assert_eq!(late_hits.len(), 1, "the late event's sample: {late_hits:?}");

    // perf script: every sample with the same pid, tid, cpu, time and fields.
    let perf = perf_script(&raw, false).unwrap();
    let perf_lines: Vec<String> = perf.lines().map(normalise).collect();
    assert_eq!(perf_lines.len(), values.len(), "{perf}");
    let known: Vec<String> = values.iter().filter_map(as_perf_line).collect();
    assert_eq!(known.len(), values.len() - 1, "all but the uprobe");
    let perf_known: Vec<String> = perf_lines
        .iter()
        .filter(|l| !l.contains("uevrec_raw_test:"))
        .cloned()
        .collect();
    assert_eq!(sorted(known), sorted(perf_known));
    let probe = &late_hits[0];
    let perf_probe = perf_lines
        .iter()
        .find(|l| l.contains(&format!("uevrec_raw_test:{late}:")))
        .expect("perf script prints the late event");
    let ip = probe["fields"]["__probe_ip"].as_u64().unwrap();
    let time = probe["time"]
        .as_str()
        .unwrap()
        .trim_end_matches('Z')
        .replacen('T', " ", 1);
    assert!(
        perf_probe.contains(&format!("({ip:x})")) && perf_probe.contains(&time),
        "{perf_probe} vs {probe}"
    );

    // Context: the names are in the file (COMM/FORK/EXIT records from the start-up scan
    // and the tracker), so perf script resolves the same comm for every sample; the
    // workload's own names are there.
    let events = [
        "sched:sched_process_exec",
        "raw_syscalls:sys_enter",
        &format!("uevrec_raw_test:{late}"),
    ];
    let expected = crate::common::comm::perf_script(&raw, &events);
    let got = crate::common::comm::decoded(&values, |v| format!(":{}", v["tid"]));
    crate::common::comm::assert_same(&got, &expected);
    let comm_of = |file: &str| {
        execs
            .iter()
            .find(|v| v["fields"]["filename"] == file)
            .map(|v| v["comm"].clone())
    };
    assert_eq!(
        comm_of(late_prog.to_str().unwrap()),
        Some("late-true".into())
    );
    assert!(
        values
            .iter()
            .any(|v| v["event"] == "sys_enter" && v["comm"] == "perl"),
        "perl's getppid calls are named"
    );
    assert_eq!(late_hits[0]["comm"], "late-true", "{}", late_hits[0]);

    // perf report reads it and names the events.
    let report = Command::new("perf")
        .args(["report", "--stdio", "-i"])
        .arg(&raw)
        .output()
        .unwrap();
    let report_text = String::from_utf8_lossy(&report.stdout);
    assert!(report.status.success(), "{report_text}");
    for e in [
        "raw_syscalls:sys_enter",
        "sched:sched_process_exec",
        "uevrec_raw_test:",
    ] {
        assert!(
            report_text.contains(e),
            "perf report names {e}: {report_text}"
        );
    }
    eprintln!(
        "{} samples: decode equals the live lines, perf script the same values",
        values.len()
    );
}

/// `record --raw FILE` of every sys_enter system-wide (plenty of records), until stopped.
fn record_busy(file: &Path) -> Child {
    Command::new(bin())
        .args(["record", "-e", "raw_syscalls:sys_enter", "--raw"])
        .arg(file)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn existing_file_full_disk_and_killed_run() {
    require_host!();
    let dir = tempfile::tempdir().unwrap();
    // An existing file is never touched.
    let existing = dir.path().join("exists.data");
    fs::write(&existing, "keep").unwrap();
    let out = Command::new(bin())
        .args(["record", "-e", "raw_syscalls:sys_enter", "--raw"])
        .arg(&existing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("never overwrites"));
    assert_eq!(fs::read_to_string(&existing).unwrap(), "keep");
    // Standard output cannot hold a file-mode perf.data.
    let out = Command::new(bin())
        .args(["record", "-e", "raw_syscalls:sys_enter", "--raw", "-"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--raw needs a file"));

    // A full disk: an error, and the file finished with what was written before.
    let small = dir.path().join("small");
    fs::create_dir(&small).unwrap();
    let mounted = Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            "size=2m",
            "uevrec-test",
            small.to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(mounted.success(), "mounting a 2 MiB tmpfs");
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(&small);
    let full = small.join("full.data");
    let mut rec = record_busy(&full);
    // Syscalls of our own, in case the machine is quiet.
    let busy = Command::new("perl")
        .args(["-e", "getppid() for 1..3000000"])
        .spawn()
        .unwrap();
    let st = crate::common::wait_exit(&mut rec, PATIENCE).expect("a full disk ends the recording");
    let err = stderr(&mut rec);
    let mut busy = busy;
    let _ = busy.kill();
    let _ = busy.wait();
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    let out = decode(&full);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let n = text.lines().filter(|l| !l.contains("\"uevrec\":")).count();
    assert!(n > 1000, "{n} records decoded from the full disk's file");
    let said = format!("was finished with the {n} samples written before");
    assert!(err.contains(&said), "{said}: {err}");
    let perf = perf_script(&full, false).unwrap();
    assert_eq!(perf.lines().count(), n, "perf script reads as many");

    // SIGKILL: no header; decode says so.
    let killed = dir.path().join("killed.data");
    let mut rec = record_busy(&killed);
    let start = Instant::now();
    while fs::metadata(&killed).map_or(0, |m| m.len()) < 200_000 {
        assert!(start.elapsed() < PATIENCE, "nothing written");
        sleep(Duration::from_millis(20));
    }
    rec.kill().unwrap();
    rec.wait().unwrap();
    // The killed run's file decodes to its last whole record (tests/host/crash_raw.rs
    // checks the records themselves), with the truncated notice and exit status 3.
    let out = decode(&killed);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("never finished"), "{err}");
    let lines = json_lines(&String::from_utf8_lossy(&out.stdout));
    assert!(lines.len() > 100, "{} lines", lines.len());
    let last = lines.last().unwrap();
    assert_eq!(last["what"], "truncated", "{last}");
}

/// `--raw` with the ftrace backend: its records carry no cgroup id, so the file's samples
/// get the one the writer's tracker gives (what the live formatter names); the decoded
/// lines equal the live ones with their `comm`/`cgroup` (as multisets; where the ftrace
/// backend's order limit leaves a key out live, decode leaves it out too), and perf script
/// resolves the same comm as decode for every sample, line for line.
#[test]
fn ftrace_backend_raw_file_keeps_the_live_context() {
    require_host!();
    let dir = tempfile::tempdir().unwrap();
    let (raw, live) = (dir.path().join("f.data"), dir.path().join("f.json"));
    let mut cmd = Command::new(bin());
    let event = "sched:sched_process_exec";
    cmd.args(["record", "--backend", "ftrace", "-e", event]);
    let mut rec = spawn_both(cmd, &raw, &live);
    wait_attached(&live, &mut rec, 1, None);
    let st = Command::new("sh")
        .args([
            "-c",
            "printf raw-ftrace-sh > /proc/self/comm; /bin/true; /bin/echo hi > /dev/null",
        ])
        .status()
        .unwrap();
    assert!(st.success());
    sleep(Duration::from_millis(300));
    interrupt_and_wait(&mut rec);
    let events = |text: &str| -> Vec<Value> {
        json_lines(text)
            .into_iter()
            .filter(|v| v.get("uevrec").is_none())
            .collect()
    };
    let live = events(&fs::read_to_string(&live).unwrap());
    let out = decode(&raw);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoded = events(&String::from_utf8(out.stdout).unwrap());
    // The same lines; a `comm` the live lines lack (the ftrace backend's order limit:
    // a thread's creation seen late on another CPU) decode may have, sorting the file's
    // records by time (docs/json-lines.md, "Context").
    let without_comm = |v: &[Value]| {
        let mut lines: Vec<String> = v
            .iter()
            .map(|l| {
                let mut l = l.clone();
                l.as_object_mut().map(|o| o.remove("comm"));
                l.to_string()
            })
            .collect();
        lines.sort();
        lines
    };
    assert_eq!(without_comm(&decoded), without_comm(&live));
    let named = |v: &[Value]| v.iter().filter(|l| l.get("comm").is_some()).count();
    assert!(named(&decoded) >= named(&live));
    let expected = crate::common::comm::perf_script(&raw, &["sched:sched_process_exec"]);
    let got = crate::common::comm::decoded(&decoded, |v| format!(":{}", v["tid"]));
    crate::common::comm::assert_same(&got, &expected);
    // An exec's rename and its record are on the exec'ing task's CPU, in order.
    let named_true = decoded
        .iter()
        .any(|v| v["fields"]["filename"] == "/bin/true" && v["comm"] == "true");
    assert!(named_true, "{decoded:#?}");
    eprintln!(
        "{} records: decode equals live, perf script's comm decode's",
        got.len()
    );
}
