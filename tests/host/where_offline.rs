//! Tier 2: `decode --where/--sample/--rate-limit` and `top --where`, exact, on files
//! recorded here. A perl child calls `syscall(getppid, 424242, SEQ)` for SEQ = 1..N; a
//! `record --raw` perf.data and a `--raw-format trace-dat` trace.dat of it are decoded
//! with `--where 'fields.args[1] % 2 == 0'` on every path (one thread; `--threads 2` in
//! ranges of the perf.data or windows of time of the trace.dat; `--threads 2` staged for
//! formatter workers), which must write exactly the even SEQs, the same bytes, and count
//! the odd ones as filtered; `--sample` and `--rate-limit` must write the same bytes
//! with any thread count. `top --where` counts only the even SEQs and the odd ones as
//! `not_kept`; `top --rate-limit` the bucket's burst. Needs root and tracefs (says why it is skipped otherwise).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::common::{NR_GETPPID, PATIENCE, bin};
use crate::decode_threads::record_both;
use crate::threads::burst_child;

/// getppid calls of the burst: a perf.data of about 5 MB, dozens of 64 KiB ranges.
const N: u64 = 40_000;

/// The condition on the SEQ argument.
const EVEN: &str = "fields.args[1] % 2 == 0";

/// `uevrec decode --threads THREADS` of `input` with `extra` arguments.
fn decode(input: &Path, threads: &str, extra: &[&str]) -> Output {
    let out = Command::new(bin())
        .args(["decode", "--threads", threads])
        .args(extra)
        .arg(input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} --threads {threads} {extra:?}: {}",
        input.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The lines of `out`.
fn lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The SEQs of the burst's records among `lines`, in order.
fn seqs(lines: &[Value]) -> Vec<u64> {
    lines
        .iter()
        .filter(|v| v.get("uevrec").is_none() && v["fields"]["args"][0] == 424242)
        .map(|v| v["fields"]["args"][1].as_u64().unwrap())
        .collect()
}

/// The `{"uevrec":"dropped"}` count of `reason` among `lines` (0 without one).
fn dropped(lines: &[Value], reason: &str) -> u64 {
    let found: Vec<&Value> = lines
        .iter()
        .filter(|v| v["uevrec"] == "dropped" && v["reason"] == reason)
        .collect();
    assert!(found.len() <= 1, "one dropped line per reason: {found:?}");
    found.first().map_or(0, |v| {
        assert_eq!(v["event"], "raw_syscalls:sys_enter", "{v}");
        v["records"].as_u64().unwrap()
    })
}

/// The summary's note on how the threads shared the work (after ` s (`), and its
/// per-tracepoint line.
fn summary(out: &Output) -> (String, String) {
    let err = String::from_utf8_lossy(&out.stderr);
    let how = err
        .lines()
        .find(|l| l.contains(" lost, from "))
        .and_then(|l| l.split_once(" s ("))
        .map_or("", |(_, how)| how)
        .to_string();
    let counts = err
        .lines()
        .find(|l| l.contains("raw_syscalls:sys_enter:"))
        .unwrap_or_default()
        .trim()
        .to_string();
    (how, counts)
}

/// The three ways `decode` shares its work, each with the words its summary says them
/// in (`""`: one thread, no note).
const PATHS: [(&str, &[&str], &str); 3] = [
    ("1", &[], ""),
    ("2", &["--range-size", "64K"], " by 2 threads"),
    (
        "2",
        &["--count", "1000000000"],
        "formatting threads after one reading",
    ),
];

#[test]
fn decode_where_writes_exactly_the_even_seqs_on_every_path() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (data, dat) = record_both(dir.path(), N as u32);
    for (file, input, parts) in [
        ("perf.data", &data, "ranges"),
        ("trace.dat", &dat, "windows"),
    ] {
        // What the file holds: every SEQ, but for what the rings lost (none expected;
        // the test then compares with what is there).
        let all = seqs(&lines(&decode(input, "1", &[])));
        assert!(all.len() as u64 > N / 2, "{file}: {} records", all.len());
        if all.len() as u64 == N {
            assert_eq!(all, (1..=N).collect::<Vec<_>>(), "{file}");
        }
        // A field no event of the file has: refused before decoding, with a caret.
        let bad = Command::new(bin())
            .args(["decode", "--where", "fields.argz[1] == 0"])
            .arg(input)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&bad.stderr);
        assert_eq!(bad.status.code(), Some(2), "{file}: {err}");
        assert!(
            err.contains("fields.argz") && err.contains("^^^"),
            "{file}: {err}"
        );
        assert!(bad.stdout.is_empty(), "{file}: lines written");
        let even: Vec<u64> = all.iter().copied().filter(|s| s % 2 == 0).collect();
        let odd = all.len() as u64 - even.len() as u64;
        let mut first: Option<Vec<u8>> = None;
        for (threads, extra, note) in PATHS {
            let run = format!("{file} --threads {threads} {extra:?}");
            let out = decode(input, threads, &[&["--where", EVEN], extra].concat());
            let (how, counts) = summary(&out);
            assert!(how.contains(note), "{run}: {how}");
            if extra.contains(&"--range-size") {
                assert!(how.contains(parts), "{run}: {how}");
            }
            let got = lines(&out);
            assert_eq!(seqs(&got), even, "{run}: not exactly the even SEQs");
            assert_eq!(dropped(&got, "filtered"), odd, "{run}");
            assert_eq!(
                counts,
                format!(
                    "{}  raw_syscalls:sys_enter: {} kept, {odd} filtered",
                    all.len(),
                    even.len()
                ),
                "{run}"
            );
            match &first {
                None => first = Some(out.stdout),
                Some(one) => assert!(*one == out.stdout, "{run}: other bytes than one thread"),
            }
        }
        // Every record before the last 1,000 left out: the schema line comes with the
        // first record kept, in a range or window far from the first (a perf.data's
        // ranges, planned by records, stop at the first that disagrees and the rest is
        // decoded again by one thread, counted afresh).
        let late = format!("fields.args[1] > {}", N - 1000);
        let one = decode(input, "1", &["--where", &late]);
        let two = decode(input, "2", &["--where", &late, "--range-size", "64K"]);
        assert!(
            one.stdout == two.stdout,
            "{file}: the last 1,000, other bytes"
        );
        let got = lines(&two);
        let kept = seqs(&got);
        assert!(kept.iter().all(|&s| s > N - 1000), "{file}");
        assert_eq!(
            dropped(&got, "filtered"),
            all.len() as u64 - kept.len() as u64,
            "{file}"
        );
    }
}

#[test]
fn decode_sample_and_rate_limit_write_the_same_lines_with_any_threads() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (data, dat) = record_both(dir.path(), N as u32);
    for (file, input) in [("perf.data", &data), ("trace.dat", &dat)] {
        let all = seqs(&lines(&decode(input, "1", &[]))).len() as u64;
        // Half, by a hash of each record: the same records on every path; within 6
        // standard deviations of half (sd = sqrt(n)/2).
        let mut first: Option<Vec<u8>> = None;
        for (threads, extra, _) in PATHS {
            let run = format!("{file} --sample --threads {threads} {extra:?}");
            let out = decode(
                input,
                threads,
                &[&["--sample", "raw_syscalls:sys_enter=0.5"], extra].concat(),
            );
            let got = lines(&out);
            let kept = seqs(&got).len() as u64;
            assert_eq!(kept + dropped(&got, "sampled"), all, "{run}");
            let bound = 3 * (all as f64).sqrt() as u64;
            assert!(kept.abs_diff(all / 2) <= bound, "{run}: {kept} of {all}");
            match &first {
                None => first = Some(out.stdout),
                Some(one) => assert!(*one == out.stdout, "{run}: other lines than one thread"),
            }
        }
        // A rate limit by the records' own time (the trace.dat's trace clock): judged
        // in order, so the same records kept with --threads 2 (its summary says why).
        let limit = ["--rate-limit", "raw_syscalls:sys_enter=1000/s,100"];
        let one = decode(input, "1", &limit);
        let two = decode(input, "2", &[&limit[..], &["--range-size", "64K"]].concat());
        assert!(
            summary(&two)
                .0
                .contains("--rate-limit judges the records one after another"),
            "{file}: {}",
            summary(&two).0
        );
        assert!(
            one.stdout == two.stdout,
            "{file}: --rate-limit, other lines"
        );
        let got = lines(&one);
        let kept = seqs(&got).len() as u64;
        assert!(kept >= 100 && kept < all, "{file}: {kept} of {all} kept");
        assert_eq!(kept + dropped(&got, "throttled"), all, "{file}");
    }
}

#[test]
fn top_where_counts_only_what_the_condition_keeps() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    const CALLS: u64 = 3000;
    // A field no matching event has: refused at start, as `record` refuses it.
    let bad = Command::new(bin())
        .args([
            "top",
            "--plain",
            "--duration",
            "1s",
            "raw_syscalls:sys_enter",
        ])
        .args(["--where", "fields.argz[1] == 0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{err}");
    assert!(err.contains("fields.argz") && err.contains("^^^"), "{err}");
    let mut child = burst_child(CALLS as u32);
    let top = TopRun::start(
        child.id(),
        &[
            "--where",
            "fields.args[0] == 424242 && fields.args[1] % 2 == 0",
        ],
    );
    // Attached (the notice rides on a totals line, which says not_kept from the start).
    let v = top.attached();
    assert_eq!(v["not_kept"], 0, "{v}");
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait().unwrap().success());
    // Every record judged: the row holds the even SEQs, the totals the odd ones.
    let (mut row, mut not_kept) = (0, 0);
    while row < CALLS / 2 || not_kept < CALLS / 2 {
        let v = top.next("the burst's records");
        match v["uevrec"].as_str() {
            Some("top") => row = v["records"].as_u64().unwrap(),
            Some("top_total") => not_kept = v["not_kept"].as_u64().unwrap(),
            _ => panic!("not a top line: {v}"),
        }
        assert!(row <= CALLS / 2 && not_kept <= CALLS / 2, "{v}");
    }
    let last = top.stop();
    let total = last
        .iter()
        .rfind(|v| v["uevrec"] == "top_total")
        .expect("a final totals line");
    assert_eq!(total["final"], true, "{total}");
    assert_eq!(total["records"], CALLS / 2, "{total}");
    assert_eq!(total["not_kept"], CALLS / 2, "{total}");
}

/// `top --rate-limit 'raw_syscalls:sys_enter=100/s,500'` over a burst of 3,000 calls
/// (milliseconds long): the rows count the bucket's 500 and what the burst's time
/// refilled, the totals line's `not_kept` every other record, the two adding up to the
/// burst exactly.
#[test]
fn top_rate_limit_counts_the_burst_and_leaves_out_the_rest() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    const CALLS: u64 = 3000;
    let mut child = burst_child(CALLS as u32);
    let top = TopRun::start(
        child.id(),
        &["--rate-limit", "raw_syscalls:sys_enter=100/s,500"],
    );
    top.attached();
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait().unwrap().success());
    // Until every record of the burst is counted, kept or not.
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let v = top.next("totals lines");
        if v["uevrec"] == "top_total"
            && v["records"].as_u64().unwrap() + v["not_kept"].as_u64().unwrap() >= CALLS
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the burst never added up: {v}"
        );
    }
    let last = top.stop();
    let total = last
        .iter()
        .rfind(|v| v["uevrec"] == "top_total")
        .expect("a final totals line");
    let (kept, not_kept) = (
        total["records"].as_u64().unwrap(),
        total["not_kept"].as_u64().unwrap(),
    );
    eprintln!("top --rate-limit: {kept} counted, {not_kept} not kept of {CALLS}");
    assert_eq!(kept + not_kept, CALLS, "{total}");
    // The burst of 500, and 100 a second of the burst's own time (well under a second
    // even on a loaded machine).
    assert!((500..=600).contains(&kept), "{total}");
}

/// A `uevrec top --plain --interval 200ms` of process `pid`'s getppid calls, its lines
/// read as they come.
struct TopRun {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    reader: std::thread::JoinHandle<()>,
}

impl TopRun {
    /// Start it with `flags` besides those.
    fn start(pid: u32, flags: &[&str]) -> TopRun {
        let mut child = Command::new(bin())
            .args([
                "top",
                "--plain",
                "--interval",
                "200ms",
                "--pid",
                &pid.to_string(),
            ])
            .args([
                "--filter",
                &format!("id == {NR_GETPPID}"),
                "raw_syscalls:sys_enter",
            ])
            .args(flags)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let (lines, reader) = crate::top::line_reader(child.stdout.take().unwrap());
        TopRun {
            child,
            lines,
            reader,
        }
    }

    /// The next line, waiting for `what`.
    fn next(&self, what: &str) -> Value {
        let line = self
            .lines
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|_| panic!("no line within {PATIENCE:?} while waiting for {what}"));
        json_of(line)
    }

    /// The line with the attached notice (the lines before it skipped).
    fn attached(&self) -> Value {
        loop {
            let v = self.next("the attached notice");
            if v["notice"]
                .as_str()
                .is_some_and(|n| n.starts_with("attached "))
            {
                return v;
            }
        }
    }

    /// Stop it (SIGINT) and wait: it exits 0; the lines not read yet.
    fn stop(mut self) -> Vec<Value> {
        // SAFETY: kill on a child we own.
        let sent = unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        assert_eq!(sent, 0);
        let status = crate::common::wait_exit(&mut self.child, PATIENCE).expect("uevrec top exits");
        self.reader.join().unwrap();
        assert!(status.success(), "{status:?}");
        self.lines.try_iter().map(json_of).collect()
    }
}

/// A top line read as JSON.
fn json_of(line: String) -> Value {
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line:?}: {e}"))
}
