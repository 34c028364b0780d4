//! `uevrec record --backend ftrace --raw FILE --raw-format trace-dat` on the host kernel
//! (tier `host`: root, tracefs with raw_syscalls; trace-cmd for the report check).
//!
//! The trace.dat recorder runs beside a live `record --backend ftrace -o` of the same
//! events of the same process (each in its own tracefs instance, so each ring holds its
//! own copy of every record). A perl process calls getppid a known number of times with
//! (MAGIC, sequence number, its CLOCK_REALTIME in ns) as arguments, half from its main
//! thread and half from a second thread, then execs /bin/true. Then:
//! - `uevrec decode FILE` gives exactly the live lines: the same count, in the same
//!   order, every field equal (pid — the process's, also for the second thread —, tid,
//!   cpu, event, fields), but `time`, which two
//!   rings stamp separately (within 1 ms of the live one, and between the realtime the
//!   producer read before the call and the one it read before the next), `comm` (the
//!   trace.dat's names are the kernel's saved cmdlines: one name per thread, checked to
//!   be the producer's where the kernel's table still held it) and `cgroup` (a trace.dat
//!   has none);
//! - `trace-cmd report FILE` reads the file: the same number of calls, the same pids and
//!   arguments, and times equal to decode's (to its microsecond);
//! - with a tiny ring (-m 1) and a burst while the recorder is stopped (SIGSTOP), the
//!   recorded records plus the `lost` counts are exactly the calls made, and some were
//!   lost.
//!
//! Also: `--raw-format trace-dat` without `--backend ftrace` (or with -o) is refused with
//! the fix, and no spool is left beside the file; a file whose assembly fills its disk
//! ends the run with exit status 1 and a message naming the spools, which are kept.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::NR_GETPPID;
use crate::common::PATIENCE;
use crate::common::bin;

const MAGIC: u64 = 0x5eed;
const CALLS: u64 = 2000;

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// Wait until `path` holds `n` `attached` notices.
fn wait_attached(path: &Path, rec: &mut Child, n: usize) {
    let start = Instant::now();
    loop {
        let text = fs::read_to_string(path).unwrap_or_default();
        if text.matches("\"what\":\"attached\"").count() >= n {
            return;
        }
        if let Some(st) = rec.try_wait().unwrap() {
            panic!("uevrec ended ({st}) before attaching: {text}");
        }
        assert!(start.elapsed() < PATIENCE, "not attached: {text}");
        sleep(Duration::from_millis(20));
    }
}

/// SIGINT `rec`, wait for its exit 0.
fn interrupt_and_wait(rec: &mut Child, log: &Path) {
    // SAFETY: kill on a child we own.
    assert_eq!(unsafe { libc::kill(rec.id() as i32, libc::SIGINT) }, 0);
    let st = crate::common::wait_exit(rec, PATIENCE).expect("uevrec exits after SIGINT");
    let text = fs::read_to_string(log).unwrap_or_default();
    assert_eq!(st.code(), Some(0), "{text}");
}

/// `uevrec record ARGS`, standard error into `log`.
fn record(args: &[&str], log: &Path) -> Child {
    Command::new(bin())
        .arg("record")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

/// `uevrec record --backend ftrace EXTRA --raw DAT --raw-format trace-dat` of the getppid
/// calls of process `pid`, standard error into `log`.
fn record_getppids(dat: &Path, log: &Path, pid: u32, extra: &[&str]) -> Child {
    let (pid, filter) = (pid.to_string(), format!("id == {NR_GETPPID}"));
    let mut args = vec!["--backend", "ftrace"];
    args.extend(extra);
    args.extend(["--raw", dat.to_str().unwrap(), "--raw-format", "trace-dat"]);
    args.extend([
        "--pid",
        &pid,
        "--filter",
        &filter,
        "-e",
        "raw_syscalls:sys_enter",
    ]);
    record(&args, log)
}

fn decode(file: &Path) -> Output {
    Command::new(bin())
        .arg("decode")
        .arg(file)
        .output()
        .unwrap()
}

/// The event lines of `uevrec decode FILE`.
fn decoded(file: &Path) -> Vec<Value> {
    let out = decode(file);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_lines(&String::from_utf8(out.stdout).unwrap())
}

/// No spool left beside `file`.
fn assert_no_spools(file: &Path) {
    let left: Vec<String> = fs::read_dir(file.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".uevrec-spool"))
        .collect();
    assert!(left.is_empty(), "spools left: {left:?}");
}

/// The getppid(MAGIC, i, realtime ns) calls of `lines`, by `i`.
fn calls(lines: &[Value]) -> Vec<&Value> {
    lines
        .iter()
        .filter(|v| {
            v["event"] == "sys_enter"
                && v["fields"]["id"] == u64::from(NR_GETPPID)
                && v["fields"]["args"][0] == MAGIC
        })
        .collect()
}

/// A line's `time` (`YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`) in Unix ns.
fn time_ns(v: &Value) -> i128 {
    let t = v["time"].as_str().expect("a time");
    let n = |r: std::ops::Range<usize>| t[r].parse::<i128>().unwrap();
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    // Days since 1970-01-01 (Howard Hinnant's days_from_civil).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let secs = days * 86_400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19);
    let frac = &t[20..t.len() - 1];
    let ns = format!("{frac:0<9}").parse::<i128>().unwrap();
    secs * 1_000_000_000 + ns
}

/// `v` without `time`, `comm` and `cgroup` (a trace.dat keeps no cgroups).
fn bare(v: &Value) -> Value {
    let mut v = v.clone();
    let o = v.as_object_mut().unwrap();
    o.remove("time");
    o.remove("comm");
    o.remove("cgroup");
    v
}

/// Send `sig` to `child`.
fn signal(child: &Child, sig: i32) {
    // SAFETY: kill on a child we own.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

#[test]
fn trace_dat_decodes_to_the_live_lines_and_trace_cmd_reads_it() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (dat, live) = (dir.path().join("t.dat"), dir.path().join("live.json"));
    let (dat_log, live_log) = (dir.path().join("dat.log"), dir.path().join("live.log"));
    // Half the calls from the main thread, half from a second one (its records' `pid`
    // is the process's: the file's saved tgids, as live).
    let half = CALLS / 2;
    // (The second thread exists before the recorders start: --pid takes the threads
    // that exist then.)
    let mut producer = Command::new("perl")
        .args([
            "-Mthreads",
            "-MThread::Queue",
            "-MTime::HiRes=clock_gettime,CLOCK_REALTIME",
            "-e",
            &format!(
                "$| = 1; my $q = Thread::Queue->new; sub call {{ \
                 syscall({NR_GETPPID}, {MAGIC}, $_[0], int(clock_gettime(CLOCK_REALTIME) * 1e9)) }} \
                 my $t = threads->create(sub {{ $q->dequeue; call($_) for {half}..{last} }}); \
                 print \"ready\\n\"; my $go = <STDIN>; call($_) for 0..{h1}; $q->enqueue(1); \
                 $t->join; exec '/bin/true'",
                h1 = half - 1,
                last = CALLS - 1
            ),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("perl");
    let mut ready = [0u8; 6];
    producer
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut ready)
        .unwrap();
    assert_eq!(&ready, b"ready\n");
    let pid = producer.id().to_string();
    let producer_pid = u64::from(producer.id());
    let events = [
        "-e",
        "raw_syscalls:sys_enter",
        "-e",
        "sched:sched_process_exec",
    ];
    let common = ["--backend", "ftrace", "--pid", &pid];
    let dat_s = dat.to_str().unwrap();
    let mut args: Vec<&str> = vec!["--raw", dat_s, "--raw-format", "trace-dat"];
    args.extend(common);
    args.extend(events);
    let mut rec_dat = record(&args, &dat_log);
    let live_s = live.to_str().unwrap();
    let mut args: Vec<&str> = vec!["-o", live_s];
    args.extend(common);
    args.extend(events);
    let mut rec_live = record(&args, &live_log);
    wait_attached(&dat_log, &mut rec_dat, 2);
    wait_attached(&live, &mut rec_live, 2);
    producer.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(producer.wait().unwrap().success());
    sleep(Duration::from_millis(300));
    interrupt_and_wait(&mut rec_dat, &dat_log);
    interrupt_and_wait(&mut rec_live, &live_log);
    assert_no_spools(&dat);
    let bytes = fs::read(&dat).unwrap();
    let file = uevrec_parsers::trace_dat::TraceDat::parse(&bytes).unwrap();
    assert!(file.kallsyms().is_empty(), "no kallsyms without -g");

    let got = decoded(&dat);
    let want = json_lines(&fs::read_to_string(&live).unwrap());
    let (got_calls, mut want_calls) = (calls(&got), calls(&want));
    // Live lines come ring by ring; decode merges the CPUs by time: the same calls.
    want_calls.sort_by_key(|v| v["fields"]["args"][1].as_u64());
    assert_eq!(got_calls.len() as u64, CALLS, "calls decoded");
    assert_eq!(want_calls.len() as u64, CALLS, "calls recorded live");
    let mut worst = 0i128;
    for (i, (g, w)) in got_calls.iter().zip(&want_calls).enumerate() {
        assert!(crate::common::json_eq(&bare(g), &bare(w)), "{g}\n{w}");
        assert_eq!(g["fields"]["args"][1], i as u64, "in order");
        let t = time_ns(g);
        worst = worst.max((t - time_ns(w)).abs());
        // Stamped after the producer read the clock for this call, before the next.
        let before = i128::from(g["fields"]["args"][2].as_u64().unwrap());
        assert!(t >= before - 1_000_000, "call {i}: {t} < {before}");
        if let Some(next) = got_calls.get(i + 1) {
            let after = i128::from(next["fields"]["args"][2].as_u64().unwrap());
            assert!(t <= after + 1_000_000, "call {i}: {t} > {after}");
        }
        assert_eq!(g["pid"], producer_pid, "the process: {g}");
        assert_eq!(
            g["tid"] == producer_pid,
            (i as u64) < half,
            "the thread: {g}"
        );
        // The kernel's saved name of the thread, when its table (saved_cmdlines_size
        // entries, 128 by default) still held it at the stop.
        if let Some(comm) = g.get("comm") {
            assert!(comm == "perl" || comm == "true", "{g}");
        }
    }
    assert!(worst < 1_000_000, "times differ by up to {worst} ns");
    let named = got_calls.iter().filter(|g| g.get("comm").is_some()).count();
    let exec = |lines: &[Value]| -> Vec<Value> {
        lines
            .iter()
            .filter(|v| v["event"] == "sched_process_exec")
            .map(bare)
            .collect()
    };
    let (got_exec, want_exec) = (exec(&got), exec(&want));
    assert_eq!(got_exec.len(), 1, "{got_exec:?}");
    assert!(crate::common::json_eq(&got_exec[0], &want_exec[0]));
    assert_eq!(got_exec[0]["fields"]["filename"], "/bin/true");

    // trace-cmd reads it: the same calls, pids, arguments, and times to the µs.
    let out = Command::new("trace-cmd")
        .args(["report", dat_s])
        .output()
        .expect("trace-cmd is needed (scripts/test-all.sh installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reported: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(&format!("NR {NR_GETPPID} ({MAGIC:x}, ")))
        .collect();
    assert_eq!(reported.len() as u64, CALLS, "{text}");
    for (line, g) in reported.iter().zip(&got_calls) {
        assert!(line.contains(&format!("-{} ", g["tid"])), "{line}");
        assert!(
            line.contains(&format!(
                "({MAGIC:x}, {:x}, {:x},",
                g["fields"]["args"][1].as_u64().unwrap(),
                g["fields"]["args"][2].as_u64().unwrap()
            )),
            "{line} vs {g}"
        );
        let secs = line
            .split_whitespace()
            .find_map(|w| w.strip_suffix(':').filter(|w| w.contains('.')))
            .unwrap_or_else(|| panic!("no time in {line}"));
        let (s, us) = secs.split_once('.').unwrap();
        let us = s.parse::<i128>().unwrap() * 1_000_000 + us.parse::<i128>().unwrap();
        assert!((us - time_ns(g) / 1000).abs() <= 1, "{line} vs {g}");
    }
    assert_eq!(text.matches("sched_process_exec:").count(), 1, "{text}");
    eprintln!(
        "{CALLS} calls: decode = live (times within {worst} ns, {named} named from the saved \
         cmdlines), trace-cmd report agrees"
    );
}

#[test]
fn recorded_plus_lost_is_what_was_produced_with_a_tiny_ring() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (dat, log) = (dir.path().join("t.dat"), dir.path().join("dat.log"));
    let mut producer = crate::common::getppid_producer(1);
    let mut rec = record_getppids(&dat, &log, producer.id(), &["-m", "1"]);
    wait_attached(&log, &mut rec, 1);
    // The recorder stopped while the producer runs: its rings overflow for sure.
    signal(&rec, libc::SIGSTOP);
    producer.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut made = String::new();
    producer
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut made)
        .unwrap();
    assert!(producer.wait().unwrap().success());
    signal(&rec, libc::SIGCONT);
    let made: u64 = made.trim().parse().unwrap();
    sleep(Duration::from_millis(200));
    interrupt_and_wait(&mut rec, &log);
    assert_no_spools(&dat);
    let lines = decoded(&dat);
    let recorded = lines.iter().filter(|v| v["event"] == "sys_enter").count() as u64;
    let lost: u64 = lines
        .iter()
        .filter(|v| v["uevrec"] == "lost")
        .map(|v| v["lost"].as_u64().unwrap())
        .sum();
    let notices = lines
        .iter()
        .filter(|v| v["uevrec"] == "notice" && v["what"] == "lost")
        .count();
    // The CPUs' final stats count what no page could (a full page has no room for it).
    assert_eq!(notices, 0, "every loss has its count");
    assert!(lost > 0, "a 1-page ring must overflow ({made} calls)");
    assert_eq!(recorded + lost, made, "{recorded} recorded + {lost} lost");
    eprintln!("{made} calls: {recorded} recorded + {lost} lost");
}

#[test]
fn trace_dat_needs_the_ftrace_backend_and_no_lines() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.dat");
    let f = f.to_str().unwrap();
    for (args, fix) in [
        (
            vec!["--raw", f, "--raw-format", "trace-dat"],
            "--backend ftrace",
        ),
        (
            vec![
                "--backend",
                "ftrace",
                "--raw",
                f,
                "--raw-format",
                "trace-dat",
                "-o",
                "x.json",
            ],
            "drop -o",
        ),
        (
            vec!["--backend", "ftrace", "--raw-format", "trace-dat"],
            "add --raw FILE",
        ),
    ] {
        let out = Command::new(bin())
            .arg("record")
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(fix), "{args:?}: {err}");
        assert!(!Path::new(f).exists());
    }
}

/// A file that cannot be assembled (its disk fills up while the spools are copied in):
/// exit status 1, a message naming the spools, and the spools kept with every page.
#[test]
fn a_failed_assembly_keeps_the_spools_and_says_so() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // 2 MiB: room for the spools (~1.4 MB), not for them and the file's copy of them.
    let small = dir.path().join("small");
    fs::create_dir(&small).unwrap();
    let small_s = small.to_str().unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=2m", "uevrec-test", small_s])
        .status()
        .unwrap();
    assert!(mounted.success(), "mounting a 2 MiB tmpfs");
    struct Unmount<'a>(&'a str);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(small_s);
    let (dat, log) = (small.join("t.dat"), dir.path().join("dat.log"));
    let calls = 20_000;
    let mut producer = Command::new("perl")
        .args([
            "-e",
            &format!("my $go = <STDIN>; syscall({NR_GETPPID}) for 1..{calls};"),
        ])
        .stdin(Stdio::piped())
        .spawn()
        .expect("perl");
    let mut rec = record_getppids(&dat, &log, producer.id(), &[]);
    wait_attached(&log, &mut rec, 1);
    producer.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(producer.wait().unwrap().success());
    sleep(Duration::from_millis(200));
    signal(&rec, libc::SIGINT);
    let st = crate::common::wait_exit(&mut rec, PATIENCE).expect("uevrec exits after SIGINT");
    let err = fs::read_to_string(&log).unwrap();
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(err.contains("assembling the trace.dat"), "{err}");
    assert!(err.contains("kept in"), "{err}");
    let spools: Vec<PathBuf> = fs::read_dir(&small)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".uevrec-spool"))
        .collect();
    assert!(!spools.is_empty(), "the spools are kept: {err}");
    let bytes: u64 = spools.iter().map(|p| fs::metadata(p).unwrap().len()).sum();
    // Every call is in the spools: at most 60 records of 68 bytes per 4 KiB page.
    assert!(bytes >= calls / 60 * 4096, "{bytes} bytes kept: {err}");
    for p in &spools {
        assert!(
            err.contains(&p.display().to_string()),
            "{err} names {}",
            p.display()
        );
    }
    eprintln!("{bytes} bytes of pages kept in {} spools", spools.len());
}
