//! Tier 3 (the user_events VM, scripts/vm-test.sh): `record --threads 2` writes what
//! `--threads 1` writes, on real user_events and both backends (issue 25).
//!
//! One `rate` producer (two writer threads, so both CPUs write) is recorded by two
//! uevrec processes at once, one with one formatter and one with two workers and the
//! reorder stage: they see the same records from the kernel, so each CPU's records must
//! come out as the same lines in the same order (the `time` key aside: each recorder
//! samples its own wall-clock offset), none lost, as many as the producer wrote.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use uevrec_samples::wait_until;

use crate::common::KillOnDrop;
use crate::common::vm::{
    assert_running, backend, each_backend, finish_sample, interrupt_and_wait, output_lines,
    spawn_rate, tmp_dir, user_events_here,
};

/// How long a producer or an attach may take (TCG guests are slow).
const PATIENCE: Duration = Duration::from_secs(180);
/// How long uevrec may take to drain and exit after SIGINT.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// Records the producer writes (two threads): enough for many chunks and batches, few
/// enough that 4 MiB rings lose none under emulation.
const EVENTS: u64 = 10_000;

/// A `uevrec record --threads N` writing JSON lines to a file (killed on drop).
struct Rec {
    child: KillOnDrop,
    out: PathBuf,
    stderr: PathBuf,
}

impl Rec {
    fn start(dir: &Path, threads: u32, selector: &str) -> Rec {
        let out = dir.join(format!("threads{threads}.jsonl"));
        let stderr = dir.join(format!("threads{threads}.stderr"));
        let child = Command::new(env!("CARGO_BIN_EXE_uevrec"))
            .arg("record")
            .arg("-o")
            .arg(&out)
            .args(["--backend", backend(), "--quiet", "-m", "1024"])
            .args(["--threads", &threads.to_string(), "-e", selector])
            .stdout(Stdio::null())
            .stderr(fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("spawning uevrec");
        Rec {
            child: KillOnDrop(child),
            out,
            stderr,
        }
    }

    /// Whether the output says `selector` is attached.
    fn attached(&self, selector: &str) -> bool {
        fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|l| l["uevrec"] == "notice" && l["what"] == "attached" && l["event"] == selector)
    }

    fn stop(mut self) -> Vec<Value> {
        assert_running(&mut self.child, &self.stderr);
        interrupt_and_wait(&mut self.child, STOP_TIMEOUT, &self.stderr);
        output_lines(&self.out)
    }
}

/// Each CPU's record lines of `event`, in file order, without `time`; and the sum of
/// the `lost` lines.
fn per_cpu(lines: &[Value], event: &str) -> (BTreeMap<u64, Vec<String>>, u64) {
    let mut cpus: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut lost = 0;
    for l in lines {
        if l["uevrec"] == "lost" {
            lost += l["lost"].as_u64().unwrap_or(0);
        }
        if l["event"] == event && l.get("fields").is_some() && l.get("uevrec").is_none() {
            let mut record = l.clone();
            record.as_object_mut().unwrap().remove("time");
            let cpu = l["cpu"].as_u64().expect("a record has its cpu");
            cpus.entry(cpu).or_default().push(record.to_string());
        }
    }
    (cpus, lost)
}

#[test]
fn threads_2_writes_the_lines_of_threads_1() {
    if !user_events_here() {
        return;
    }
    each_backend(|| {
        let dir = tmp_dir("threads");
        let name = "vmt_threads";
        let start = dir.join("start");
        let (mut producer, report) = spawn_rate(name, EVENTS, &start, &["--threads", "2"]);
        let selector = format!("user_events:{name}");
        let one = Rec::start(&dir, 1, &selector);
        let two = Rec::start(&dir, 2, &selector);
        let both = wait_until(PATIENCE, || {
            one.attached(&selector) && two.attached(&selector)
        });
        assert!(both, "the two recorders did not both attach {selector}");
        fs::write(&start, b"").expect("start file");
        let report = finish_sample(&mut producer, &report, "rate", PATIENCE);
        let written = report.iter().find_map(|v| v["written"].as_u64()).unwrap();
        assert_eq!(written, EVENTS);
        let (lines1, lines2) = (one.stop(), two.stop());
        let (cpus1, lost1) = per_cpu(&lines1, name);
        let (cpus2, lost2) = per_cpu(&lines2, name);
        assert_eq!(
            (lost1, lost2),
            (0, 0),
            "a recorder lost records; the comparison needs both complete"
        );
        let count = |c: &BTreeMap<u64, Vec<String>>| c.values().map(Vec::len).sum::<usize>();
        assert_eq!(
            count(&cpus1) as u64,
            written,
            "--threads 1 kept every record"
        );
        assert_eq!(
            count(&cpus2) as u64,
            written,
            "--threads 2 kept every record"
        );
        assert_eq!(
            cpus1.keys().collect::<Vec<_>>(),
            cpus2.keys().collect::<Vec<_>>(),
            "the same CPUs"
        );
        for (cpu, recs1) in &cpus1 {
            let recs2 = &cpus2[cpu];
            if let Some(i) = (0..recs1.len()).find(|&i| recs1[i] != recs2[i]) {
                panic!(
                    "cpu {cpu}: record {i} differs between --threads 1 and 2:\n  {}\n  {}",
                    recs1[i], recs2[i]
                );
            }
        }
        println!(
            "threads: {written} records on CPUs {:?}, the same lines with 1 and 2 workers",
            cpus1.iter().map(|(c, r)| (*c, r.len())).collect::<Vec<_>>()
        );
    });
}
