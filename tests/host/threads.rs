//! Tier 2: `--threads N` (formatter workers) on the host kernel: the same lines in the same
//! per-CPU order as one formatter, exact accounting under overload, and `--raw`,
//! `--format otlp` and `--flight` with several workers.
//!
//! The burst: a perl child calls `syscall(getppid, 424242, SEQ)` for SEQ = 1..N (getppid
//! ignores its arguments; `raw_syscalls:sys_enter` records them as `args`), so every
//! record is known and its place in its CPU's order can be checked. Needs root and
//! tracefs (prints why it is skipped otherwise).

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::NR_GETPPID;
use crate::common::PATIENCE;
use crate::common::bin;
use crate::common::flight::{Dump, Flight};

/// A child that waits for a line on stdin, then calls getppid(424242, SEQ) for SEQ in
/// 1..=n and exits.
pub(crate) fn burst_child(n: u32) -> Child {
    Command::new("perl")
        .args([
            "-e",
            &format!("my $go = <STDIN>; syscall({NR_GETPPID}, 424242, $_) for 1..{n};"),
        ])
        .stdin(Stdio::piped())
        .spawn()
        .expect("perl is needed for the burst child")
}

/// `uevrec record` of `child`'s getppid calls with `extra` arguments.
fn record(child: &Child, extra: &[&str]) -> Child {
    Command::new(bin())
        .args(["record", "-q", "--pid", &child.id().to_string()])
        .args(["--filter", &format!("id == {NR_GETPPID}")])
        .args(["-e", "raw_syscalls:sys_enter"])
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait until `path` holds an `attached` notice.
pub(crate) fn wait_attached(path: &Path, rec: &mut Child) {
    let t0 = Instant::now();
    loop {
        let text = fs::read_to_string(path).unwrap_or_default();
        if text.contains("\"attached\"") {
            return;
        }
        if let Some(st) = rec.try_wait().unwrap() {
            panic!("uevrec ended before attaching ({st}): {}", stderr(rec));
        }
        assert!(t0.elapsed() < PATIENCE, "no attached notice: {text}");
        sleep(Duration::from_millis(20));
    }
}

fn stderr(rec: &mut Child) -> String {
    let mut s = String::new();
    if let Some(mut e) = rec.stderr.take() {
        let _ = e.read_to_string(&mut s);
    }
    s
}

/// Let `child` run its burst and wait for it to end.
fn release(mut child: Child) {
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait().unwrap().success());
}

/// SIGINT `rec`, which must exit 0.
fn stop(rec: &mut Child) {
    // SAFETY: kill on a child we own.
    assert_eq!(unsafe { libc::kill(rec.id() as i32, libc::SIGINT) }, 0);
    let st = crate::common::wait_exit(rec, PATIENCE).expect("uevrec exits");
    assert!(st.success(), "{st}: {}", stderr(rec));
}

fn parse(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The burst's records per CPU, in file order, each line without its time (each
/// recorder's ring stamps the record itself).
fn per_cpu(lines: &[Value]) -> BTreeMap<u64, Vec<String>> {
    let mut cpus: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for v in lines.iter().filter(|v| v.get("uevrec").is_none()) {
        let mut v = v.clone();
        v.as_object_mut().unwrap().remove("time");
        cpus.entry(v["cpu"].as_u64().unwrap())
            .or_default()
            .push(v.to_string());
    }
    cpus
}

/// SEQ (`args[1]`) of a record line without its time.
fn seq(line: &str) -> u64 {
    let v: Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["fields"]["args"][0], 424242, "{line}");
    v["fields"]["args"][1].as_u64().unwrap()
}

#[test]
fn workers_write_the_same_lines_in_the_same_per_cpu_order_as_one() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    const N: u32 = 200_000;
    let dir = tempfile::tempdir().unwrap();
    let child = burst_child(N);
    // Both at once on the same calls: 1 worker and 1 drain thread; 4 workers and a
    // drain thread per CPU (while the rings are busy).
    let mut runs = Vec::new();
    for (threads, drain) in [("1", "1"), ("4", "64")] {
        let out = dir.path().join(format!("t{threads}.json"));
        // Rings large enough that a loaded 2-CPU machine loses nothing either way.
        let args = [
            "-m",
            "16M",
            "--threads",
            threads,
            "--drain-threads",
            drain,
            "-o",
            out.to_str().unwrap(),
        ];
        let mut rec = record(&child, &args);
        wait_attached(&out, &mut rec);
        runs.push((rec, out));
    }
    release(child);
    sleep(Duration::from_millis(300));
    let mut got = Vec::new();
    for (mut rec, out) in runs {
        stop(&mut rec);
        let lines = parse(&out);
        assert!(
            !lines.iter().any(|v| v["uevrec"] == "lost"),
            "{}: lost records (the test needs none)",
            out.display()
        );
        let cpus = per_cpu(&lines);
        let mut all: Vec<u64> = Vec::new();
        for (cpu, recs) in &cpus {
            let seqs: Vec<u64> = recs.iter().map(|l| seq(l)).collect();
            // A CPU's ring holds one thread's calls in the order it made them.
            assert!(
                seqs.windows(2).all(|w| w[0] < w[1]),
                "{}: CPU {cpu}'s records out of order",
                out.display()
            );
            all.extend(seqs);
        }
        all.sort_unstable();
        let expected: Vec<u64> = (1..=u64::from(N)).collect();
        assert!(all == expected, "{}: not every call once", out.display());
        // The schema, session and notice lines are written too, once.
        let own = lines.iter().filter(|v| v.get("uevrec").is_some()).count();
        got.push((cpus, own));
    }
    assert_eq!(got[0].1, got[1].1, "uevrec's own lines differ");
    assert!(
        got[0].0 == got[1].0,
        "4 workers and parallel draining wrote other lines, or in another per-CPU order, \
         than 1 and 1"
    );
}

#[test]
fn accounting_is_exact_with_workers_under_overload() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let secs = 4;
    let mut producer = crate::common::getppid_producer(secs);
    let args = ["-m", "1", "--threads", "3", "--drain-threads", "2"];
    let mut rec = crate::common::tail_getppid(producer.id(), &args);
    let mut out = BufReader::new(rec.stdout.take().unwrap());
    crate::common::read_to_attached(&mut out);
    producer.stdin.take().unwrap().write_all(b"go\n").unwrap();
    // The reader stalls for the whole run: the writer, the workers and the staging pool
    // fill, the rings overflow.
    let produced = crate::common::producer_count(&mut producer);
    // SAFETY: kill on a child we own.
    assert_eq!(unsafe { libc::kill(rec.id() as i32, libc::SIGINT) }, 0);
    let crate::common::GetppidTally {
        recorded,
        lost,
        lost_lines,
    } = crate::common::tally_getppid(out);
    let st = rec.wait().unwrap();
    assert!(st.success(), "{st}: {}", stderr(&mut rec));
    eprintln!("produced {produced}, recorded {recorded}, lost {lost} in {lost_lines} lines");
    assert!(
        lost_lines > 0,
        "a stalled reader must overflow 1-page rings"
    );
    assert_eq!(
        recorded + lost,
        produced,
        "recorded + lost must equal produced"
    );
}

#[test]
fn raw_and_otlp_with_workers() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    const N: u32 = 30_000;
    let dir = tempfile::tempdir().unwrap();
    let (json, raw, otlp) = (
        dir.path().join("r.json"),
        dir.path().join("r.data"),
        dir.path().join("o.json"),
    );
    let child = burst_child(N);
    let mut with_raw = record(
        &child,
        &[
            "-m",
            "4M",
            "--threads",
            "3",
            "--raw",
            raw.to_str().unwrap(),
            "-o",
            json.to_str().unwrap(),
        ],
    );
    wait_attached(&json, &mut with_raw);
    let mut as_otlp = record(
        &child,
        &[
            "-m",
            "4M",
            "--threads",
            "3",
            "--format",
            "otlp",
            "-o",
            otlp.to_str().unwrap(),
        ],
    );
    // OTLP has no notice lines: give it the time to attach.
    sleep(Duration::from_secs(2));
    release(child);
    sleep(Duration::from_millis(300));
    stop(&mut with_raw);
    stop(&mut as_otlp);
    let count = |lines: &[Value]| lines.iter().filter(|v| v.get("uevrec").is_none()).count();
    assert_eq!(count(&parse(&json)), N as usize, "JSON lines beside --raw");
    let decoded = Command::new(bin())
        .args(["decode", "--no-schema"])
        .arg(&raw)
        .output()
        .unwrap();
    assert!(decoded.status.success());
    let text = String::from_utf8(decoded.stdout).unwrap();
    assert_eq!(text.lines().count(), N as usize, "records in the perf.data");
    let logs = crate::common::otlp::records(&parse(&otlp), "logs");
    // uevrec's own records (the notices) are in scope "uevrec".
    let events = logs
        .iter()
        .filter(|(_, scope, _)| scope != "uevrec")
        .count();
    assert_eq!(events, N as usize, "OTLP log records");
}

#[test]
fn flight_with_workers() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    const N: u32 = 2_000;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.json");
    let child = burst_child(N);
    let pid = child.id().to_string();
    let filter = format!("id == {NR_GETPPID}");
    let args = [
        "--flight",
        "1M",
        "--threads",
        "3",
        "--pid",
        &pid,
        "--filter",
        &filter,
        "-e",
        "raw_syscalls:sys_enter",
    ];
    let flight = Flight::start(&out, &args);
    flight.wait_attached(1);
    release(child);
    sleep(Duration::from_millis(300));
    flight.signal(libc::SIGUSR1);
    let dump = Dump::read(&flight.wait_dumps(1), 1 << 20);
    let seqs = dump.values("sys_enter", |v| v["fields"]["args"][1].as_u64().unwrap());
    let mut sorted = seqs.clone();
    sorted.sort_unstable();
    let expected: Vec<u64> = (1..=u64::from(N)).collect();
    assert_eq!(sorted, expected, "every call in the dump once");
    flight.stop();
}
