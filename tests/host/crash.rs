//! SIGKILL of `uevrec record` at random points, looped, for each file output (tier
//! `host`: root, tracefs with raw_syscalls, perl). Nothing the recorder wrote under a
//! final name is torn, and what it recorded is a contiguous run of the producer's
//! sequence numbers up to the last complete record.
//!
//! The producer calls `syscall(getppid, 424242, SEQ)` with SEQ = 0, 1, 2 … until killed,
//! pinned to one CPU (so every record goes through one ring, in SEQ order: "the last
//! complete record" is well defined). Each loop kills the recorder ≥ 20 times (seeded
//! random delays, the seed printed so that a failure can be replayed with
//! `UEVREC_CRASH_SEED`), a few during start-up, most while recording:
//! - `--raw FILE --raw-format trace-dat`: FILE never exists after the kill; `uevrec
//!   recover FILE` assembles it (or says that the run died before its rings started),
//!   `uevrec decode FILE` reads it whole with a contiguous run of SEQ;
//! - `-o FILE` (JSON lines, one file appended to by every run): after each kill every
//!   complete line of FILE is JSON, only the last may be torn, and each run's records are
//!   a contiguous run of SEQ; the next run cuts the torn line off (in every second loop
//!   half a line is added where the kill left no torn one, as a write cut short by the
//!   kill leaves), so that the file parses whole at the end;
//! - `-o FILE --rotate-size 16k` (rotation in progress): every `FILE.N` parses whole,
//!   and `FILE.N … FILE.1, FILE` together are a contiguous run of SEQ;
//! - `--flight` with a SIGUSR1 dump in progress: every `FILE.TIME` parses whole and ends
//!   with its `flight_end` line, its records a contiguous run of SEQ; the kill landed in
//!   a dump at least once (a temporary `.FILE.TIME.uevrec-tmp` was left, never a final
//!   name) and a dump completed at least once (up to 60 kills until both happened).

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::common::seqs::{MAGIC, decoded, seq, whole_lines};
use crate::common::{NR_GETPPID, PATIENCE, bin};

const KILLS: usize = 20;

/// A seeded random number source (fastrand), its seed said on stderr.
fn rng(test: &str) -> fastrand::Rng {
    let seed = std::env::var("UEVREC_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("{test}: UEVREC_CRASH_SEED={seed}");
    fastrand::Rng::with_seed(seed)
}

/// The producer: getppid(424242, SEQ) for SEQ = 0, 1 … on CPU 0, about 100,000 a second
/// at most (1 ms asleep every 100 calls), killed when dropped.
struct Producer(Child);

impl Producer {
    fn start() -> Self {
        let script = format!(
            "my $i = 0; while (1) {{ syscall({NR_GETPPID}, {MAGIC}, $i++); \
             select(undef, undef, undef, 0.001) if $i % 100 == 0 }}"
        );
        let child = Command::new("taskset")
            .args(["-c", "0", "perl", "-e", &script])
            .stdin(Stdio::null())
            .spawn()
            .expect("taskset and perl are needed for the producer");
        Producer(child)
    }

    /// Like [`Producer::start`], flat out (no sleep): it overflows small rings.
    fn flat_out() -> Self {
        let script = format!("my $i = 0; while (1) {{ syscall({NR_GETPPID}, {MAGIC}, $i++) }}");
        let child = Command::new("taskset")
            .args(["-c", "0", "perl", "-e", &script])
            .stdin(Stdio::null())
            .spawn()
            .expect("taskset and perl are needed for the producer");
        Producer(child)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `uevrec record ARGS` of the producer's getppid calls, standard error into `log`.
fn record(producer: &Producer, args: &[&str], log: &Path) -> Child {
    Command::new(bin())
        .arg("record")
        .args(args)
        .args(["--pid", &producer.pid().to_string()])
        .args(["--filter", &format!("id == {NR_GETPPID}")])
        .args(["-e", "raw_syscalls:sys_enter"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

/// SIGKILL `child` and reap it.
fn kill9(child: &mut Child) {
    // SAFETY: kill on a child we own (not yet reaped).
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
}

/// Wait until `ready()` or `child` ended (then false) or PATIENCE is over (a failure).
fn wait_for(child: &mut Child, what: &str, mut ready: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if ready() {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        assert!(start.elapsed() < PATIENCE, "not {what} in {PATIENCE:?}");
        sleep(Duration::from_millis(10));
    }
}

/// `seqs` are n, n+1, n+2 … (`what` in the failure).
fn assert_contiguous(seqs: &[u64], what: &str) {
    if let Some(w) = seqs.windows(2).find(|w| w[1] != w[0] + 1) {
        panic!(
            "{what}: {} follows {} ({} records from {} to {})",
            w[1],
            w[0],
            seqs.len(),
            seqs[0],
            seqs[seqs.len() - 1]
        );
    }
}

/// Files in `dir` whose names start with `prefix`, sorted.
fn files_starting(dir: &Path, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    v.sort();
    v
}

/// Remove the tracefs instance a killed `--backend ftrace` recorder `pid` left (its
/// events stay enabled until then; the next recorder would remove it too).
fn remove_instance(pid: u32) {
    let dir = format!("/sys/kernel/tracing/instances/uevrec-{pid}");
    if Path::new(&dir).exists() {
        let _ = fs::remove_dir(&dir);
    }
}

/// Whether loop `i` kills during the start-up (every fifth); the others kill while
/// recording.
fn at_start_up(i: usize) -> bool {
    i % 5 == 0
}

/// In a start-up loop, a random point of the start-up (0–300 ms after the start).
fn start_up_kill(rng: &mut fastrand::Rng, i: usize) -> Option<Duration> {
    at_start_up(i).then(|| Duration::from_millis(rng.u64(0..300)))
}

#[test]
fn killed_trace_dat_runs_recover_to_a_contiguous_run() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let mut rng = rng("trace_dat");
    let dir = tempfile::tempdir().unwrap();
    let producer = Producer::start();
    let mut recovered_runs = 0;
    for i in 0..KILLS {
        let dat = dir.path().join(format!("k{i}.dat"));
        let meta = dir.path().join(format!(".k{i}.dat.uevrec-meta"));
        let log = dir.path().join(format!("k{i}.log"));
        let args = [
            "--backend",
            "ftrace",
            "--raw",
            dat.to_str().unwrap(),
            "--raw-format",
            "trace-dat",
            "-m",
            "256k",
        ];
        let mut rec = record(&producer, &args, &log);
        if let Some(d) = start_up_kill(&mut rng, i) {
            sleep(d);
        } else {
            // Recording: the format is on disk and pages were handed over (a spool
            // holds bytes); the kill comes 0–600 ms later.
            let attached = wait_for(&mut rec, "spooling", || {
                fs::read_to_string(&meta).is_ok_and(|t| t.contains("{\"format\":"))
                    && files_starting(dir.path(), &format!(".k{i}.dat.cpu"))
                        .iter()
                        .any(|n| fs::metadata(dir.path().join(n)).is_ok_and(|m| m.len() > 0))
            });
            assert!(attached, "{}", fs::read_to_string(&log).unwrap());
            sleep(Duration::from_millis(rng.u64(0..600)));
        }
        kill9(&mut rec);
        remove_instance(rec.id());
        assert!(
            !dat.exists(),
            "{} exists after the kill: it must appear only whole",
            dat.display()
        );
        if meta.exists() {
            // Decoding the killed run's file points at `recover`.
            let out = Command::new(bin())
                .arg("decode")
                .arg(&dat)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success() && err.contains("uevrec recover"),
                "decode of a killed run's file {i}: {err}"
            );
        }
        let out = Command::new(bin())
            .arg("recover")
            .arg(&dat)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            // Only a run killed before its rings started may have nothing to recover.
            assert!(
                at_start_up(i)
                    && (err.contains("nothing to recover")
                        || err.contains("nothing was recorded")
                        || err.contains("does not start with the host's line")),
                "recover {i}: {err}"
            );
            continue;
        }
        assert!(err.contains("recovered"), "{err}");
        let left = files_starting(dir.path(), &format!(".k{i}.dat"));
        assert!(left.is_empty(), "left beside it: {left:?}");
        let lines = decoded(&dat, &format!("run {i}"));
        let seqs: Vec<u64> = lines.iter().filter_map(seq).collect();
        assert!(
            !lines.iter().any(|v| v["uevrec"] == "lost"),
            "nothing lost with this ring and rate"
        );
        assert_contiguous(&seqs, &format!("run {i}"));
        if !at_start_up(i) {
            // Killed after pages were handed over: they are all in the file.
            assert!(!seqs.is_empty(), "run {i}: no records recovered: {err}");
        }
        recovered_runs += 1;
        let _ = fs::remove_file(&dat);
    }
    assert!(
        recovered_runs >= KILLS * 3 / 4,
        "{recovered_runs} recovered"
    );
}

#[test]
fn killed_json_lines_runs_leave_whole_lines_in_sequence() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let mut rng = rng("json_lines");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.json");
    let log = dir.path().join("log");
    let producer = Producer::start();
    let mut with_records = 0;
    for i in 0..KILLS {
        // Where this run's lines start: after the last whole line (a torn tail is cut).
        let before = fs::read(&out).map_or(0, |t| {
            t.iter().rposition(|&b| b == b'\n').map_or(0, |n| n + 1)
        });
        let mut rec = record(&producer, &["-o", out.to_str().unwrap()], &log);
        if let Some(d) = start_up_kill(&mut rng, i) {
            sleep(d);
        } else {
            let recording = wait_for(&mut rec, "recording", || {
                fs::read(&out).is_ok_and(|t| {
                    String::from_utf8_lossy(&t[before.min(t.len())..]).contains("sys_enter")
                })
            });
            assert!(recording, "{}", fs::read_to_string(&log).unwrap());
            sleep(Duration::from_millis(rng.u64(0..600)));
        }
        kill9(&mut rec);
        let text = String::from_utf8(fs::read(&out).unwrap_or_default()).unwrap();
        // This run's part (the one before was cut back to a whole line when it opened).
        let run = &text[before.min(text.len())..];
        let whole = &run[..run.rfind('\n').map_or(0, |n| n + 1)];
        let lines = whole_lines(whole, &format!("run {i}"));
        let seqs: Vec<u64> = lines.iter().filter_map(seq).collect();
        assert_contiguous(&seqs, &format!("run {i}"));
        with_records += usize::from(!seqs.is_empty());
        // A SIGKILL can also cut a large write(2) short (the kernel stops copying at a
        // fatal signal): such a tail, half of the last line, is added where the kill
        // left none, and the next run must cut it off before appending.
        if i % 2 == 1 && text.ends_with('\n') && !whole.is_empty() {
            let last = whole[..whole.len() - 1].rfind('\n').map_or(0, |n| n + 1);
            let half = &whole[last..last + (whole.len() - last) / 2];
            let mut f = fs::OpenOptions::new().append(true).open(&out).unwrap();
            std::io::Write::write_all(&mut f, half.as_bytes()).unwrap();
        }
    }
    assert!(with_records >= KILLS / 2, "{with_records} runs recorded");
    // One more run, ended normally: the file parses whole (torn tails were cut).
    let mut rec = record(
        &producer,
        &["-o", out.to_str().unwrap(), "--duration", "1s"],
        &log,
    );
    assert!(crate::common::wait_exit(&mut rec, PATIENCE).is_ok_and(|s| s.success()));
    let all = whole_lines(&fs::read_to_string(&out).unwrap(), "out.json");
    let sessions = all.iter().filter(|v| v["uevrec"] == "session").count();
    assert!(sessions > KILLS / 2, "{sessions} sessions");
}

#[test]
fn killed_rotating_runs_leave_whole_rotated_files_in_sequence() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let mut rng = rng("rotation");
    let dir = tempfile::tempdir().unwrap();
    let producer = Producer::start();
    let mut rotated = 0;
    for i in 0..KILLS {
        let sub = dir.path().join(format!("r{i}"));
        fs::create_dir(&sub).unwrap();
        let out = sub.join("r.json");
        let log = dir.path().join(format!("r{i}.log"));
        let args = [
            "-o",
            out.to_str().unwrap(),
            "--rotate-size",
            "16k",
            "--rotate-keep",
            "100000",
        ];
        let mut rec = record(&producer, &args, &log);
        if let Some(d) = start_up_kill(&mut rng, i) {
            sleep(d);
        } else {
            let rotating = wait_for(&mut rec, "rotating", || sub.join("r.json.1").exists());
            assert!(rotating, "{}", fs::read_to_string(&log).unwrap());
            sleep(Duration::from_millis(rng.u64(0..600)));
        }
        kill9(&mut rec);
        let numbered = files_starting(&sub, "r.json.");
        rotated += numbered.len();
        let mut seqs = Vec::new();
        // Oldest first: r.json.N … r.json.1, each whole.
        let mut ns: Vec<u32> = numbered
            .iter()
            .map(|n| n["r.json.".len()..].parse().unwrap())
            .collect();
        ns.sort_unstable_by(|a, b| b.cmp(a));
        // 1…N, or one number free where the kill fell between two renames of a
        // rotation (the next rotation takes it: src/outputs/sink/file.rs's unit tests).
        assert!(
            ns.first().is_none_or(|&top| top as usize <= ns.len() + 1),
            "numbers {ns:?}"
        );
        for n in ns {
            let name = format!("r.json.{n}");
            let text = fs::read_to_string(sub.join(&name)).unwrap();
            assert!(text.len() <= 16 * 1024, "{name}: {} bytes", text.len());
            seqs.extend(whole_lines(&text, &name).iter().filter_map(seq));
        }
        // The live file: whole lines but perhaps its last.
        let text = fs::read_to_string(&out).unwrap_or_default();
        let whole = &text[..text.rfind('\n').map_or(0, |n| n + 1)];
        seqs.extend(whole_lines(whole, "r.json").iter().filter_map(seq));
        assert_contiguous(&seqs, &format!("run {i}"));
        let hidden = files_starting(&sub, ".");
        assert!(hidden.is_empty(), "{hidden:?}");
    }
    // Every run killed while recording had rotated at least once before its kill.
    let recording = (0..KILLS).filter(|&i| !at_start_up(i)).count();
    assert!(
        rotated >= recording,
        "only {rotated} rotated files in {recording} runs"
    );
}

#[test]
fn killed_flight_dumps_are_whole_or_absent() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let mut rng = rng("flight");
    let dir = tempfile::tempdir().unwrap();
    let producer = Producer::start();
    let (mut complete, mut cut) = (0, 0);
    // At least KILLS kills; more (up to 3 × KILLS) until one landed in a dump and one
    // dump completed (how long a dump takes depends on the build and the machine).
    for i in 0..3 * KILLS {
        if i >= KILLS && complete >= 1 && cut >= 1 {
            break;
        }
        let sub = dir.path().join(format!("f{i}"));
        fs::create_dir(&sub).unwrap();
        let base = sub.join("fl.json");
        let log = dir.path().join(format!("f{i}.log"));
        let args = ["--flight", "64M", "-o", base.to_str().unwrap()];
        let mut rec = record(&producer, &args, &log);
        if let Some(d) = start_up_kill(&mut rng, i) {
            sleep(d);
        } else {
            let attached = wait_for(&mut rec, "attached", || {
                fs::read_to_string(&log).is_ok_and(|t| t.contains("\"attached\""))
            });
            assert!(attached, "{}", fs::read_to_string(&log).unwrap());
            // Records gather, then a dump is asked for; the kill comes while it is being
            // written (or before, or after: random).
            sleep(Duration::from_millis(300 + rng.u64(0..200)));
            // SAFETY: kill on a child we own.
            unsafe { libc::kill(rec.id() as i32, libc::SIGUSR1) };
            sleep(Duration::from_millis(rng.u64(0..300)));
        }
        kill9(&mut rec);
        for name in files_starting(&sub, "fl.json.") {
            let lines = whole_lines(&fs::read_to_string(sub.join(&name)).unwrap(), &name);
            assert_eq!(lines[0]["what"], "flight_dump", "{name}");
            assert_eq!(lines[lines.len() - 1]["what"], "flight_end", "{name}");
            let seqs: Vec<u64> = lines.iter().filter_map(seq).collect();
            assert!(!seqs.is_empty(), "{name}: no records");
            assert_contiguous(&seqs, &name);
            complete += 1;
        }
        cut += files_starting(&sub, ".fl.json.")
            .iter()
            .filter(|n| n.ends_with(".uevrec-tmp"))
            .count();
    }
    eprintln!("flight: {complete} dumps complete, {cut} cut by the kill");
    assert!(complete >= 1, "no dump completed before a kill");
    assert!(
        cut >= 1,
        "no kill landed in a dump: the test did not test that"
    );
}

/// `--backend ftrace` with rings of two pages and a producer flat out (the ring
/// overflows), killed while recording: in each run's JSON lines (one ring, so in SEQ
/// order) every SEQ missing before a record was said lost by lost lines before that
/// record (issue #26).
#[test]
fn killed_ftrace_runs_say_every_loss_before_the_records_after_it() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let mut rng = rng("ftrace_losses");
    let dir = tempfile::tempdir().unwrap();
    let producer = Producer::flat_out();
    let mut said = 0;
    for i in 0..KILLS / 2 {
        let out = dir.path().join(format!("l{i}.json"));
        let log = dir.path().join(format!("l{i}.log"));
        let args = [
            "--backend",
            "ftrace",
            "-m",
            "8k",
            "-o",
            out.to_str().unwrap(),
        ];
        let mut rec = record(&producer, &args, &log);
        let recording = wait_for(&mut rec, "recording", || {
            fs::read_to_string(&out).is_ok_and(|t| t.contains("sys_enter"))
        });
        assert!(recording, "{}", fs::read_to_string(&log).unwrap());
        sleep(Duration::from_millis(100 + rng.u64(0..500)));
        kill9(&mut rec);
        remove_instance(rec.id());
        let text = fs::read_to_string(&out).unwrap();
        let whole = &text[..text.rfind('\n').map_or(0, |n| n + 1)];
        let (mut told, mut missing, mut next) = (0, 0, None);
        for v in whole_lines(whole, &format!("run {i}")) {
            if v["uevrec"] == "lost" {
                told += v["lost"].as_u64().unwrap();
                continue;
            }
            let Some(s) = seq(&v) else { continue };
            if let Some(n) = next {
                assert!(s >= n, "run {i}: {s} after {}", n - 1);
                missing += s - n;
                assert!(
                    missing <= told,
                    "run {i}: {missing} SEQ missing before {s}, {told} said lost before it"
                );
            }
            next = Some(s + 1);
        }
        said += told;
    }
    eprintln!(
        "ftrace_losses: {said} records said lost in {} runs",
        KILLS / 2
    );
    assert!(said > 0, "no ring overflowed: no loss was tested");
}
