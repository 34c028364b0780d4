//! `--backend ftrace --instance NAME` across kills (tier `host`: root, tracefs with
//! raw_syscalls, perl): a SIGKILLed recorder leaves its named instance recording, the next
//! run adopts it and reads what it kept, so that the runs' files together hold every SEQ of
//! a `getppid(424242, SEQ)` stream once; the refusals (another recipe, a second reader, an
//! instance uevrec did not make, the perf backend); a ring overwritten during a long
//! absence, its loss counted exactly; a clean stop with `--keep-instance`; OTLP export
//! with a spool across a kill; the same kills with two formatter workers (`--threads 2`);
//! the names of processes gone while none ran, recalled by the adopting run; `uevrec
//! recover` draining a killed trace-dat run's instance; the perf backend's restart gap,
//! measured and printed. docs/restarts.md says what is promised.

use std::collections::BTreeMap;
use std::fs;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::Duration;

use serde_json::Value;

use crate::common::seqs::{MAGIC, decoded, seq};
use crate::common::{NR_GETPPID, bin, complete_lines, must_exit, wait_for};

const TRACEFS_INSTANCES: &str = "/sys/kernel/tracing/instances";

/// Kills per loop: `UEVREC_INSTANCE_KILLS` (default 5).
fn kills() -> usize {
    std::env::var("UEVREC_INSTANCE_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
}

/// Whether the kill loop also kills in start-ups (`UEVREC_INSTANCE_START_UP_KILLS=1`).
fn start_up_kills() -> bool {
    std::env::var("UEVREC_INSTANCE_START_UP_KILLS").is_ok_and(|v| v == "1")
}

/// `getppid(424242, SEQ)`, SEQ = 0, 1 …, about 2,000 a second (0.5 ms asleep after each)
/// on CPU 0, killed when dropped.
struct Producer(Child);

impl Producer {
    fn start() -> Producer {
        Producer::on("0")
    }

    /// The same on the CPUs `cpus` (a taskset list).
    fn on(cpus: &str) -> Producer {
        let script = format!(
            "my $i = 0; while (1) {{ syscall({NR_GETPPID}, {MAGIC}, $i++); \
             select(undef, undef, undef, 0.0005) }}"
        );
        Producer(
            Command::new("taskset")
                .args(["-c", cpus, "perl", "-e", &script])
                .stdin(Stdio::null())
                .spawn()
                .expect("taskset and perl are needed for the producer"),
        )
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A named instance's name for this test, removed (with its state) when dropped.
struct Name(String);

impl Name {
    fn new(test: &str) -> Name {
        let name = Name(format!("uevrec_test_{test}_{}", std::process::id()));
        name.clean();
        name
    }

    fn dir(&self) -> PathBuf {
        Path::new(TRACEFS_INSTANCES).join(&self.0)
    }

    fn clean(&self) {
        let dir = self.dir();
        let _ = fs::remove_dir(format!("{}-t", dir.display()));
        let _ = fs::remove_dir(&dir);
        // The state, lock, marks, ledgers and journals: `NAME.*`.
        let prefix = format!("{}.", self.0);
        for entry in fs::read_dir("/run/uevrec/instances")
            .into_iter()
            .flatten()
            .flatten()
        {
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
}

impl Drop for Name {
    fn drop(&mut self) {
        self.clean();
    }
}

/// What a test of a named instance needs: a folder, a name, the producer; None (said)
/// where this host cannot record raw_syscalls.
fn setup(test: &str) -> Option<(tempfile::TempDir, Name, Producer)> {
    if !crate::common::raw_syscalls_here() {
        return None;
    }
    Some((
        tempfile::tempdir().unwrap(),
        Name::new(test),
        Producer::start(),
    ))
}

/// `uevrec record --backend ftrace --instance NAME` of the producer's calls into `out`
/// (`extra` flags added), standard error into `out.err`.
fn record(producer: &Producer, name: &Name, out: &Path, extra: &[&str]) -> Child {
    let pid = producer.0.id().to_string();
    let mut args = extra.to_vec();
    args.extend(["--pid", &pid]);
    record_all(name, out, &args)
}

/// [`record`] of every process's getppid calls.
fn record_all(name: &Name, out: &Path, extra: &[&str]) -> Child {
    record_filtered(name, out, extra, &format!("id == {NR_GETPPID}"))
}

/// [`record_all`] with the kernel filter `filter` instead.
fn record_filtered(name: &Name, out: &Path, extra: &[&str], filter: &str) -> Child {
    Command::new(bin())
        .args(["record", "--backend", "ftrace", "--instance", &name.0])
        .args(extra)
        .args(["--filter", filter])
        .args(["-e", "raw_syscalls:sys_enter", "-o"])
        .arg(out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(out.with_extension("err")).unwrap())
        .spawn()
        .unwrap()
}

/// End run `run` of the kill loops writing `out`: the `last` with SIGINT (it must end
/// well), the others with SIGKILL, leaving instance `name`, then 1 s with no uevrec.
fn end_run(run: &mut Child, out: &Path, last: bool, name: &Name) {
    if last {
        signal(run, libc::SIGINT);
        let status = must_exit(run);
        assert!(
            status.success(),
            "{}",
            fs::read_to_string(out.with_extension("err")).unwrap()
        );
    } else {
        signal(run, libc::SIGKILL);
        run.wait().unwrap();
        assert!(name.dir().is_dir(), "a killed run's instance stays");
        sleep(Duration::from_secs(1));
    }
}

/// Wait until `out` says the event is attached (the run reads its rings). The notice
/// comes before the first record: only the file's first 256 KiB are read (a flat-out run
/// writes hundreds of MB a second).
fn wait_attached(out: &Path) {
    use std::io::Read as _;
    wait_for("the attached notice", crate::common::PATIENCE, || {
        let mut head = Vec::new();
        if let Ok(f) = fs::File::open(out) {
            let _ = f.take(256 * 1024).read_to_end(&mut head);
        }
        String::from_utf8_lossy(&head)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|v| v["uevrec"] == "notice" && v["what"] == "attached")
    });
}

fn signal(child: &mut Child, sig: i32) {
    // SAFETY: kill on a child we own (not yet reaped).
    unsafe { libc::kill(child.id() as i32, sig) };
}

/// What one output file holds: SEQs, lost count, the adopted notice.
#[derive(Debug, Default)]
struct Held {
    seqs: Vec<u64>,
    lost: u64,
    adopted: Option<String>,
}

fn held(out: &Path) -> Held {
    let mut h = Held::default();
    for v in complete_lines(out) {
        if v["uevrec"] == "lost" {
            h.lost += v["lost"].as_u64().unwrap_or(0);
        } else if v["uevrec"] == "notice" && v["what"] == "adopted" {
            h.adopted = v["message"].as_str().map(str::to_owned);
        } else if v["event"] == "sys_enter" && v["fields"]["args"][0] == MAGIC {
            h.seqs.push(v["fields"]["args"][1].as_u64().unwrap());
        }
    }
    h
}

/// Every SEQ of `files` together, with how often each came.
fn tally(files: &[PathBuf]) -> BTreeMap<u64, u32> {
    let mut t = BTreeMap::new();
    for f in files {
        for s in held(f).seqs {
            *t.entry(s).or_insert(0) += 1;
        }
    }
    t
}

#[test]
fn sigkilled_runs_lose_and_repeat_nothing_through_an_adopted_instance() {
    let Some((dir, name, _)) = setup("kills") else {
        return;
    };
    // On every CPU it may run on: each CPU's ring is adopted.
    let cpus = crate::common::allowed_cpus(0);
    let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
    let producer = Producer::on(&list.join(","));
    let mut rng = fastrand::Rng::new();
    let mut files = Vec::new();
    let n = kills();
    for i in 0..=n {
        // Odd runs append to one file (the next run cuts a line the kill tore), even
        // runs write a new one.
        let out = if i % 2 == 1 {
            dir.path().join("same.json")
        } else {
            dir.path().join(format!("run{i}.json"))
        };
        let mut run = record(&producer, &name, &out, &[]);
        // With UEVREC_INSTANCE_START_UP_KILLS=1, every third kill lands in the start-up
        // of an adopting run (0–200 ms in), where the backlog read at once is in flight
        // longest: the loss window docs/restarts.md measures (1 of 9 such kills lost
        // records); the CI loop kills settled runs.
        let in_start_up = start_up_kills() && i % 3 == 2 && i < n;
        if in_start_up {
            sleep(Duration::from_millis(rng.u64(0..200)));
        } else {
            wait_attached(&out);
            sleep(Duration::from_millis(rng.u64(300..1500)));
        }
        end_run(&mut run, &out, i == n, &name);
        let h = held(&out);
        if !in_start_up {
            assert_eq!(h.adopted.is_some(), i > 0, "run {i}: {:?}", h.adopted);
        }
        if !files.contains(&out) {
            files.push(out);
        }
    }
    assert!(!name.dir().exists(), "a clean stop removes the instance");
    let t = tally(&files);
    let dup: Vec<_> = t.iter().filter(|(_, c)| **c > 1).collect();
    let lost: u64 = files.iter().map(|f| held(f).lost).sum();
    let (first, last) = (*t.keys().next().unwrap(), *t.keys().last().unwrap());
    let missing = (last - first + 1) - t.len() as u64;
    eprintln!(
        "instance kills: {n} kills, SEQ {first}..={last}, {} held, {missing} missing, {} twice, \
         {lost} reported lost",
        t.len(),
        dup.len()
    );
    assert!(
        dup.is_empty(),
        "records written twice: {:?}",
        &dup[..dup.len().min(10)]
    );
    assert_eq!(lost, 0, "a 2 kHz stream overflows no ring in a second");
    assert_eq!(missing, 0, "SEQs missing across the kills");
}

/// `getppid(424242, SEQ, K)` flat out for each K of `ks` (one process each, on the CPUs
/// this test may use), killed when dropped. Each test has its own Ks: a recorder beside
/// it also reads the other test's producers.
struct FlatOut(Vec<Child>);

impl FlatOut {
    fn start(ks: Range<u64>) -> FlatOut {
        let cpus = crate::common::allowed_cpus(0);
        let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
        FlatOut(
            ks.map(|k| {
                let script =
                    format!("my $i = 0; while (1) {{ syscall({NR_GETPPID}, {MAGIC}, $i++, {k}) }}");
                Command::new("taskset")
                    .args(["-c", &list.join(","), "perl", "-e", &script])
                    .stdin(Stdio::null())
                    .spawn()
                    .expect("taskset and perl are needed for the producer")
            })
            .collect(),
        )
    }
}

impl Drop for FlatOut {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Per producer K in `ks` of a [`FlatOut`], how often each SEQ is in `files`; and the
/// records reported lost there. Whole lines only, read by their bytes: millions of
/// lines, too many to parse as JSON in a debug build.
fn flat_out_tally(files: &[PathBuf], ks: &Range<u64>) -> (BTreeMap<(u64, u64), u32>, u64) {
    let number = |s: &str| -> u64 {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        s[..end].parse().unwrap()
    };
    let mut t = BTreeMap::new();
    let mut lost = 0;
    let args = format!("\"args\":[{MAGIC},");
    for f in files {
        let text = fs::read_to_string(f).unwrap();
        let whole = text.rfind('\n').map_or("", |end| &text[..end]);
        for line in whole.lines() {
            if let Some(at) = line.find(&args) {
                let rest = &line[at + args.len()..];
                let seq = number(rest);
                let k = number(&rest[rest.find(',').unwrap() + 1..]);
                if ks.contains(&k) {
                    *t.entry((k, seq)).or_insert(0) += 1;
                }
            } else if line.contains("\"uevrec\":\"lost\"") {
                let at = line.find("\"lost\":").unwrap() + "\"lost\":".len();
                lost += number(&line[at..]);
            }
        }
    }
    (t, lost)
}

#[test]
fn sigkills_at_a_flat_out_rate_lose_nothing_uncounted_and_repeat_nothing() {
    flat_out_kills("flat", 0, &[]);
}

/// The same with two formatter workers: the dispatcher notes the marks in the chunks'
/// order, each chunk's lines go as one batch with them, after every earlier chunk's.
#[test]
fn sigkills_at_a_flat_out_rate_with_formatter_workers_lose_nothing_uncounted() {
    flat_out_kills("flat2", 100, &["--threads", "2"]);
}

/// [`kills`] SIGKILLs of `record --instance` (`extra` flags added) reading two or more
/// flat-out producers (Ks from `first_k`): every SEQ missing is one reported lost, none
/// written twice.
fn flat_out_kills(test: &str, first_k: u64, extra: &[&str]) {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let name = Name::new(test);
    let producers = crate::common::allowed_cpus(0).len().max(2) as u64;
    let ks = first_k..first_k + producers;
    let _producer = FlatOut::start(ks.clone());
    let mut rng = fastrand::Rng::new();
    let mut files = Vec::new();
    let n = kills();
    for i in 0..=n {
        let out = dir.path().join(format!("run{i}.json"));
        let mut run = record_all(&name, &out, extra);
        wait_attached(&out);
        sleep(Duration::from_millis(rng.u64(300..1500)));
        end_run(&mut run, &out, i == n, &name);
        files.push(out);
    }
    let (t, lost) = flat_out_tally(&files, &ks);
    let twice: u64 = t.values().map(|c| u64::from(c - 1)).sum();
    // A kill inside the writer's write(2) leaves part of a batch written without its
    // marks, or all of it: the adopting run settles it (docs/restarts.md, "Duplicates"):
    // nothing twice, and no killed file ends torn.
    let torn = files[..n]
        .iter()
        .filter(|f| !fs::read(f).unwrap().ends_with(b"\n"))
        .count() as u64;
    let mut missing = 0;
    for k in ks {
        let seqs: Vec<u64> = t.range((k, 0)..(k + 1, 0)).map(|((_, s), _)| *s).collect();
        if let (Some(first), Some(last)) = (seqs.first(), seqs.last()) {
            missing += (last - first + 1) - seqs.len() as u64;
        }
    }
    let settled = files
        .iter()
        .map(|f| fs::read_to_string(f.with_extension("err")).unwrap_or_default())
        .filter(|e| e.contains("killed while writing"))
        .count();
    eprintln!(
        "flat-out instance kills ({extra:?}): {n} kills, {producers} producers, {} SEQs held, \
         {missing} missing, {lost} reported lost, {twice} written twice, {torn} files torn, \
         {settled} batches cut short by a kill settled",
        t.len()
    );
    assert!(
        t.len() > 10_000,
        "the producers ran flat out: {} SEQs",
        t.len()
    );
    assert_eq!(
        (twice, torn),
        (0, 0),
        "records written twice, killed files left torn"
    );
    assert!(
        missing <= lost,
        "{} records missing beyond the {lost} reported lost",
        missing - lost
    );
}

#[test]
fn a_clean_stop_with_keep_instance_hands_over_to_the_next_run() {
    let Some((dir, name, producer)) = setup("keep") else {
        return;
    };
    let mut files = Vec::new();
    for i in 0..3 {
        let out = dir.path().join(format!("run{i}.json"));
        let keep: &[&str] = if i < 2 { &["--keep-instance"] } else { &[] };
        let mut run = record(&producer, &name, &out, keep);
        wait_attached(&out);
        sleep(Duration::from_millis(700));
        // SIGTERM, as `systemctl restart` sends.
        signal(&mut run, libc::SIGTERM);
        assert!(must_exit(&mut run).success());
        assert_eq!(
            name.dir().is_dir(),
            i < 2,
            "run {i}: kept only with --keep-instance"
        );
        assert_eq!(held(&out).adopted.is_some(), i > 0);
        files.push(out);
        sleep(Duration::from_millis(700));
    }
    let t = tally(&files);
    assert!(t.values().all(|c| *c == 1), "records written twice");
    let (first, last) = (*t.keys().next().unwrap(), *t.keys().last().unwrap());
    assert_eq!(
        (last - first + 1) as usize,
        t.len(),
        "SEQs missing across the restarts"
    );
}

/// The SEQs of process `pid`'s records in `out`, and how many of them are not called
/// `comm` (other tests' producers, which may run meanwhile, are left out).
fn named_seqs(out: &Path, pid: u32, comm: &str) -> (Vec<u64>, usize) {
    let (mut seqs, mut unnamed) = (Vec::new(), 0);
    for v in complete_lines(out) {
        if v["event"] == "sys_enter" && v["fields"]["args"][0] == MAGIC && v["pid"] == pid {
            seqs.push(v["fields"]["args"][1].as_u64().unwrap());
            if v["comm"] != comm {
                unnamed += 1;
            }
        }
    }
    (seqs, unnamed)
}

/// A process named while the killed run read (`prctl(PR_SET_NAME)`, a `task_rename` its
/// tracking reader consumed) and gone before the next run starts: the adopting run
/// recalls the name from the tracking journal, so the records written while no uevrec
/// ran carry it (without the journal they had no `comm`: /proc no longer knows the
/// process).
#[test]
fn records_written_while_none_ran_keep_their_names_across_a_kill() {
    names_across_a_kill("names", false);
}

/// The same for a process named before the killed run started, which that run knew from
/// its start-up scan of `/proc` alone: the adopting run recalls the names that scan found.
#[test]
fn a_process_the_killed_runs_scan_named_keeps_its_name_across_a_kill() {
    names_across_a_kill("scanned", true);
}

/// A producer named `uevnames` (before the first run's scan of `/proc` with
/// `named_first`, else once that run attached), the first run SIGKILLed once it wrote a
/// named record, the producer stopped 1 s later, then a run that adopts: every record of
/// the producer, in both runs' files, is named, and every SEQ is there once. Both runs
/// record the producer's calls alone (`common_pid` in the kernel filter): other tests'
/// getppid bursts beside this one would fill the rings (counted as lost, but missing
/// here).
fn names_across_a_kill(test: &str, named_first: bool) {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let name = Name::new(test);
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    // About 2 kHz under a name of its own once `go` exists, until `stop` does, then gone;
    // named at its start, or once `go` exists.
    let (go, stop) = (dir.path().join("go"), dir.path().join("stop"));
    let (early, late) = if named_first {
        ("$0 = 'uevnames';", "")
    } else {
        ("", "$0 = 'uevnames';")
    };
    let script = format!(
        "{early} select(undef, undef, undef, 0.01) until -e '{}'; {late} my $i = 0; \
         until (-e '{}') {{ syscall({NR_GETPPID}, {MAGIC}, $i++); \
         select(undef, undef, undef, 0.0005) }}",
        go.display(),
        stop.display()
    );
    let mut producer = Command::new("perl")
        .args(["-e", &script])
        .stdin(Stdio::null())
        .spawn()
        .expect("perl is needed for the producer");
    let pid = producer.id();
    if named_first {
        // Named (and its name in /proc) before the first run's scan.
        sleep(Duration::from_millis(300));
    }
    let filter = format!("id == {NR_GETPPID} && common_pid == {pid}");
    let mut first = record_filtered(&name, &a, &[], &filter);
    wait_attached(&a);
    fs::write(&go, "").unwrap();
    // A named record written: the first run knows the name.
    wait_for("a named record", crate::common::PATIENCE, || {
        let (seqs, unnamed) = named_seqs(&a, pid, "uevnames");
        seqs.len() > unnamed
    });
    sleep(Duration::from_millis(300));
    signal(&mut first, libc::SIGKILL);
    first.wait().unwrap();
    sleep(Duration::from_millis(1000));
    fs::write(&stop, "").unwrap();
    assert!(producer.wait().unwrap().success());
    sleep(Duration::from_millis(300));
    let mut second = record_filtered(&name, &b, &[], &filter);
    wait_attached(&b);
    sleep(Duration::from_millis(500));
    signal(&mut second, libc::SIGINT);
    assert!(
        must_exit(&mut second).success(),
        "{}",
        fs::read_to_string(b.with_extension("err")).unwrap()
    );
    assert!(held(&b).adopted.is_some(), "the second run adopts");
    let (seqs_a, unnamed_a) = named_seqs(&a, pid, "uevnames");
    let (seqs_b, unnamed_b) = named_seqs(&b, pid, "uevnames");
    eprintln!(
        "names across a kill ({test}): {} records before it, {} after ({unnamed_b} without \
         the name)",
        seqs_a.len(),
        seqs_b.len()
    );
    assert!(
        seqs_b.len() > 100,
        "the adopting run holds the records written while none ran: {}",
        seqs_b.len()
    );
    assert_eq!(unnamed_a, 0, "the first run names its records");
    assert_eq!(
        unnamed_b, 0,
        "records the adopting run wrote for the killed one lack the name"
    );
    let mut all = [seqs_a, seqs_b].concat();
    all.sort_unstable();
    let twice: Vec<u64> = all
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| w[0])
        .collect();
    let last = all.last().copied().unwrap_or(0);
    let missing: Vec<u64> = (0..=last)
        .filter(|s| all.binary_search(s).is_err())
        .collect();
    assert!(
        twice.is_empty() && missing.is_empty(),
        "every SEQ from 0 once: written twice {twice:?}, missing {missing:?}, the killed \
         file ends torn: {}, lost lines said {} + {}",
        !fs::read(&a).unwrap().ends_with(b"\n"),
        held(&a).lost,
        held(&b).lost
    );
}

#[test]
fn an_overwritten_ring_is_counted_exactly_and_the_rest_is_read() {
    let Some((dir, name, producer)) = setup("overwritten") else {
        return;
    };
    // 8 pages per CPU: a few hundred records, overwritten many times in 4 s at 2 kHz.
    let small = ["-m", "8"];
    let a = dir.path().join("a.json");
    let mut run = record(&producer, &name, &a, &small);
    wait_attached(&a);
    sleep(Duration::from_millis(500));
    signal(&mut run, libc::SIGKILL);
    run.wait().unwrap();
    sleep(Duration::from_secs(4));
    let b = dir.path().join("b.json");
    let mut run = record(&producer, &name, &b, &small);
    wait_attached(&b);
    sleep(Duration::from_secs(1));
    signal(&mut run, libc::SIGINT);
    assert!(must_exit(&mut run).success());
    let (ha, hb) = (held(&a), held(&b));
    assert!(hb.adopted.is_some());
    let t = tally(&[a.clone(), b.clone()]);
    assert!(t.values().all(|c| *c == 1), "records written twice");
    let (first, last) = (*t.keys().next().unwrap(), *t.keys().last().unwrap());
    let missing = (last - first + 1) - t.len() as u64;
    eprintln!(
        "overwritten: SEQ {first}..={last}, {} held, {missing} missing, lost lines {} + {}",
        t.len(),
        ha.lost,
        hb.lost
    );
    assert!(
        missing > 1000,
        "4 s at 2 kHz overflow 8 pages: only {missing} missing"
    );
    assert_eq!(ha.lost + hb.lost, missing, "the loss counted exactly");
    // After the loss, B holds a contiguous run up to its stop.
    let after: Vec<u64> = hb
        .seqs
        .iter()
        .copied()
        .skip_while(|s| *s <= ha.seqs.last().copied().unwrap_or(0))
        .collect();
    assert!(
        after.len() > 1000,
        "B read what the ring kept and what came after"
    );
}

#[test]
fn refusals_name_the_fix() {
    let Some((dir, name, producer)) = setup("refusals") else {
        return;
    };
    let a = dir.path().join("a.json");
    let mut first = record(&producer, &name, &a, &[]);
    wait_attached(&a);
    let expect_refusal = |extra: &[&str], out: &str, text: &str| {
        let out = dir.path().join(out);
        let mut run = record(&producer, &name, &out, extra);
        let status = must_exit(&mut run);
        let err = fs::read_to_string(out.with_extension("err")).unwrap();
        assert!(!status.success() && err.contains(text), "{extra:?}: {err}");
    };
    // A second reader of the same name, while the first runs.
    expect_refusal(&[], "second.json", "is being read by another uevrec");
    signal(&mut first, libc::SIGKILL);
    first.wait().unwrap();
    // Another recipe: another event, or another ring size.
    expect_refusal(
        &["-e", "raw_syscalls:sys_exit"],
        "events.json",
        "events: made with `raw_syscalls:sys_enter`, asked for `raw_syscalls:sys_enter \
         raw_syscalls:sys_exit`",
    );
    expect_refusal(
        &["-m", "64"],
        "ring.json",
        "ring size: made with 512 KiB per CPU, asked for 256 KiB",
    );
    // --instance-reset starts anew.
    let reset = dir.path().join("reset.json");
    let mut run = record(&producer, &name, &reset, &["-m", "64", "--instance-reset"]);
    wait_attached(&reset);
    signal(&mut run, libc::SIGINT);
    assert!(must_exit(&mut run).success());
    assert!(held(&reset).adopted.is_none());
    let err = fs::read_to_string(reset.with_extension("err")).unwrap();
    assert!(err.contains("--instance-reset: removed instance"), "{err}");
    // An instance someone else made.
    fs::create_dir(name.dir()).unwrap();
    expect_refusal(&[], "foreign.json", "uevrec did not make it");
    assert!(name.dir().is_dir(), "another tool's instance is left alone");
    // The perf backend has nothing that outlives it.
    let out = Command::new(bin())
        .args([
            "record",
            "--instance",
            "x",
            "-e",
            "raw_syscalls:sys_enter",
            "-o",
        ])
        .arg(dir.path().join("perf.json"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("--instance x needs --backend ftrace"),
        "{err}"
    );
}

/// Seconds since midnight (UTC) of a record's `time` (`…THH:MM:SS.NNNZ`).
fn second_of_day(time: &str) -> f64 {
    let clock = &time[11..time.len() - 1];
    let mut parts = clock.split(':').map(|p| p.parse::<f64>().unwrap());
    let (h, m, s) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    h * 3600.0 + m * 60.0 + s
}

/// Now, in seconds since midnight (UTC).
fn now_of_day() -> f64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    now.as_secs_f64() % 86_400.0
}

#[test]
fn recover_drains_what_the_killed_trace_dat_runs_rings_kept() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dat = dir.path().join("k.dat");
    let producer = Producer::start();
    let mut run = Command::new(bin())
        .args([
            "record",
            "--backend",
            "ftrace",
            "--raw-format",
            "trace-dat",
            "-m",
            "1M",
        ])
        .args(["--pid", &producer.0.id().to_string()])
        .args(["--filter", &format!("id == {NR_GETPPID}")])
        .args(["-e", "raw_syscalls:sys_enter", "--raw"])
        .arg(&dat)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let instance = Path::new(TRACEFS_INSTANCES).join(format!("uevrec-{}", run.id()));
    wait_for("the instance", crate::common::PATIENCE, || {
        instance.is_dir()
    });
    sleep(Duration::from_millis(1500));
    signal(&mut run, libc::SIGKILL);
    run.wait().unwrap();
    let killed = now_of_day();
    // The rings go on recording while no uevrec runs: a second of the stream. Another
    // uevrec on the ftrace backend meanwhile keeps the killed run's instance for recover
    // (it removes other gone processes' instances as stale).
    let other = Command::new(bin())
        .args(["record", "--backend", "ftrace", "--duration", "200ms"])
        .args(["--filter", &format!("id == {NR_GETPPID}")])
        .args(["-e", "raw_syscalls:sys_enter", "-o", "/dev/null"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&other.stderr);
    assert!(
        other.status.success() && said.contains("kept the tracefs instance"),
        "{said}"
    );
    assert!(instance.is_dir(), "the killed run's instance is kept");
    sleep(Duration::from_secs(1));
    let out = Command::new(bin())
        .arg("recover")
        .arg(&dat)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && err.contains("had gone on recording"),
        "{err}"
    );
    assert!(
        !instance.exists(),
        "recover removes the killed run's instance"
    );
    let mut seqs = Vec::new();
    let mut last_time = 0.0;
    for v in decoded(&dat, "the recovered file") {
        assert_ne!(
            v["uevrec"], "lost",
            "a 1 MiB ring keeps 2.5 s of a 2 kHz stream"
        );
        if let Some(s) = seq(&v) {
            seqs.push(s);
            last_time = second_of_day(v["time"].as_str().unwrap());
        }
    }
    assert!(!seqs.is_empty());
    if let Some(w) = seqs.windows(2).find(|w| w[1] != w[0] + 1) {
        panic!("{} follows {} in the recovered file", w[1], w[0]);
    }
    let after = (last_time - killed + 43_200.0).rem_euclid(86_400.0) - 43_200.0;
    eprintln!(
        "recover: SEQ {}..={} ({} records), the last {after:.2} s after the kill",
        seqs[0],
        seqs[seqs.len() - 1],
        seqs.len()
    );
    assert!(
        after > 0.8,
        "records written after the kill are in the file: last {after:.2} s after"
    );
}

#[test]
fn otlp_export_with_a_spool_delivers_every_seq_across_a_kill() {
    otlp_across_a_kill("otlp", &[]);
}

/// The same with two formatter workers (each chunk's OTLP lines one batch with its marks).
#[test]
fn otlp_export_with_formatter_workers_delivers_every_seq_across_a_kill() {
    otlp_across_a_kill("otlp2", &["--threads", "2"]);
}

/// A run exporting to a held-out style receiver through a spool (`extra` flags added),
/// SIGKILLed during a burst, 1,000 SEQs while none runs, a run that adopts: every SEQ
/// acknowledged.
fn otlp_across_a_kill(test: &str, extra: &[&str]) {
    use crate::common::export::{Producer as Caller, notices, seqs_of};
    use crate::common::otlp_receiver::{Kind, Receiver};
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    let name = Name::new(test);
    let rx = Receiver::start(Kind::Grpc);
    let mut p = Caller::start();
    p.pin();
    let start = |p: &Caller| {
        Command::new(bin())
            .args(["record", "--backend", "ftrace", "--instance", &name.0])
            .args(["--otlp-endpoint", &rx.endpoint(), "--otlp-protocol", "grpc"])
            .arg("--spool")
            .arg(&spool)
            .args(["--pid", &p.pid().to_string()])
            .args(extra)
            .args(["--filter", &format!("id == {NR_GETPPID}")])
            .args(["-e", "raw_syscalls:sys_enter"])
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
            .env_remove("OTEL_EXPORTER_OTLP_HEADERS")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let attached = |n: usize| {
        wait_for("the attached notice", crate::common::PATIENCE, || {
            notices(&rx.logs())
                .iter()
                .filter(|w| *w == "attached")
                .count()
                >= n
        })
    };
    let delivered = |n: usize| {
        wait_for(
            "the records at the collector",
            crate::common::PATIENCE,
            || seqs_of(&rx.logs()).len() >= n,
        )
    };
    let mut a = start(&p);
    attached(1);
    p.emit(1000);
    delivered(1000);
    // 500 more, and the kill within 50 ms; 1,000 while no uevrec runs; 500 after.
    p.emit(500);
    sleep(Duration::from_millis(fastrand::u64(0..50)));
    signal(&mut a, libc::SIGKILL);
    a.wait().unwrap();
    p.emit(1000);
    let mut b = start(&p);
    attached(2);
    p.emit(500);
    delivered(3000);
    signal(&mut b, libc::SIGINT);
    assert!(must_exit(&mut b).success());
    let logs = rx.logs();
    let seqs = seqs_of(&logs);
    let missing: Vec<u64> = (0..3000).filter(|s| !seqs.contains_key(s)).collect();
    let twice: u32 = seqs.values().map(|c| c - 1).sum();
    eprintln!(
        "otlp across a kill ({test}): {} SEQs, {twice} sent twice",
        seqs.len()
    );
    assert!(missing.is_empty(), "missing: {missing:?}");
    // The spool's own bound: the batch in flight at the kill may be sent again
    // (docs/export.md); nothing read from the rings is recorded twice.
    assert!(twice <= 512, "{twice} sent twice");
    assert!(notices(&logs).iter().any(|w| w == "adopted"));
}

#[test]
fn the_perf_backends_restart_gap_is_measured_and_said() {
    let Some((dir, _, producer)) = setup("perf_gap") else {
        return;
    };
    // What --instance is for: without it (the perf backend here), the records written
    // between a kill and the next run's attach are gone. Measured and printed; the
    // docs (restarts.md, export.md, BENCHMARKS.md §39) state it.
    let run = |out: &Path| {
        Command::new(bin())
            .args(["record", "--pid", &producer.0.id().to_string()])
            .args(["--filter", &format!("id == {NR_GETPPID}")])
            .args(["-e", "raw_syscalls:sys_enter", "-o"])
            .arg(out)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let mut first = run(&a);
    wait_attached(&a);
    sleep(Duration::from_millis(500));
    signal(&mut first, libc::SIGKILL);
    first.wait().unwrap();
    sleep(Duration::from_secs(1));
    let mut second = run(&b);
    wait_attached(&b);
    sleep(Duration::from_millis(500));
    signal(&mut second, libc::SIGINT);
    assert!(must_exit(&mut second).success());
    let (ha, hb) = (held(&a), held(&b));
    let t = tally(&[a, b]);
    assert!(t.values().all(|c| *c == 1), "records written twice");
    let (last_a, first_b) = (*ha.seqs.last().unwrap(), *hb.seqs.first().unwrap());
    let missing = first_b - last_a - 1;
    eprintln!(
        "perf restart gap: SEQ {last_a} then {first_b}: {missing} records lost across a \
         kill and a 1 s absence, {} reported",
        ha.lost + hb.lost
    );
    assert!(
        missing > 0,
        "perf rings die with their process: a gap is expected"
    );
    assert_eq!(ha.lost + hb.lost, 0, "and nothing reports it");
}
