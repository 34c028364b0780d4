//! Tier 3: a `record --raw` perf.data of a user_events producer, the recorder killed with
//! SIGKILL mid-run, decodes: exit status 3, the `truncated` notice last, and every value
//! of every record up to the last whole one.
//!
//! The producer is `rate` (`samples/src/bin/rate.rs`): one thread writes
//! `vmc_rate u32 thread; u64 seq` records with seq = 0, 1, 2 … (thread 0) as fast as it
//! can. Once the perf.data holds a few MiB, uevrec gets SIGKILL (no chance to finish the
//! file); then the producer is stopped. The decoded records must be seq 0, 1, 2 … with no
//! gap the file's `lost` lines do not account for, each with thread 0 and the producer's
//! process id. The producer runs on CPU 0 only: one ring, so seq order is write order.
//! (Unpinned, it may write a few records on the other CPU and come back; when the kill
//! lands after uevrec read the newer records of CPU 0 and before it read the other ring,
//! those records are missing from the file with nothing lost to report. The 3 missing
//! seqs of a run of the ftrace backend here were that (both sides of the gap on CPU 0, no
//! ring overflow in the whole run); the 1,228 of CI, issue #26, most likely too.) Runs for
//! both backends. Needs a kernel with user_events: run with
//! `scripts/vm-test.sh vm_crash` or `../shared/vm/run.sh <this test binary> --test-threads=1`.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;
use uevrec_samples::wait_until;

use crate::common::KillOnDrop;
use crate::common::vm::{
    PATIENCE, backend, each_backend, kill_if_running, spawn_rate, tmp_dir, user_events_here,
};

/// How long a step may take (TCG guests are slow).
/// The perf.data holds at least this much when uevrec is killed.
const KILL_AT: u64 = 3 << 20;

/// The `attached` notices for `selector` in the JSON lines at `out`.
fn attached(out: &Path, selector: &str) -> bool {
    fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|l| l["uevrec"] == "notice" && l["what"] == "attached" && l["event"] == selector)
}

#[test]
fn a_sigkilled_raw_recording_of_user_events_decodes_every_value() {
    if !user_events_here() {
        return;
    }
    each_backend(|| {
        let dir = tmp_dir("crash");
        let name = "vmc_rate";
        let selector = format!("user_events:{name}");
        let start = dir.join("start");
        let (mut producer, _report) =
            spawn_rate(name, 50_000_000, &start, &["--timeout-secs", "300"]);
        // One CPU, one ring: the records come in seq order, so a record missing before
        // the last one written was lost in the ring (or dropped by uevrec), never one
        // still waiting in another CPU's ring when uevrec was killed.
        crate::common::pin_to(producer.id(), 0);
        // The perf.data on the guest's tmpfs, not in `dir`: that is the host's /tmp over
        // 9p, where 3 of 7 runs (2026-11-28) ended in a record whose bytes belonged about
        // 300 KB later in the stream, as if a write(2) cut by the kill had landed out of
        // place; the host tier's kill loops on a local filesystem (crash_raw.rs) never
        // showed it. Cleared below like `dir`.
        let local = Path::new("/dev/shm").join(format!("uevrec-vm-crash-{}", backend()));
        let _ = fs::remove_dir_all(&local);
        fs::create_dir_all(&local).expect("a directory on the guest's /dev/shm");
        let data = local.join("raw.data");
        let out = dir.join("live.jsonl");
        let stderr = dir.join("uevrec.stderr");
        let mut recorder = KillOnDrop(
            Command::new(env!("CARGO_BIN_EXE_uevrec"))
                .args(["record", "--backend", backend(), "-e", &selector, "-o"])
                .arg(&out)
                .arg("--raw")
                .arg(&data)
                .stdout(Stdio::null())
                .stderr(fs::File::create(&stderr).unwrap())
                .spawn()
                .expect("spawning uevrec"),
        );
        assert!(
            wait_until(PATIENCE, || attached(&out, &selector)
                || recorder.try_wait().ok().flatten().is_some()),
            "uevrec never attached: {}",
            fs::read_to_string(&stderr).unwrap_or_default()
        );
        fs::write(&start, b"").unwrap();
        let grew = wait_until(PATIENCE, || {
            fs::metadata(&data).is_ok_and(|m| m.len() >= KILL_AT)
                || recorder.try_wait().ok().flatten().is_some()
        });
        assert!(
            recorder.try_wait().unwrap().is_none(),
            "uevrec exited before the kill: {}",
            fs::read_to_string(&stderr).unwrap_or_default()
        );
        assert!(grew, "the perf.data never reached {KILL_AT} bytes");
        // SIGKILL: no finish, no trailer, no file-mode header.
        recorder.kill().unwrap();
        let status = recorder.wait().unwrap();
        assert!(!status.success(), "{status}");
        kill_if_running(&mut producer);
        let producer_pid = u64::from(producer.id());
        let size = fs::metadata(&data).unwrap().len();

        let decoded = Command::new(env!("CARGO_BIN_EXE_uevrec"))
            .args(["decode", "-q"])
            .arg(&data)
            .output()
            .expect("uevrec decode");
        let err = String::from_utf8_lossy(&decoded.stderr);
        assert_eq!(decoded.status.code(), Some(3), "{size} bytes: {err}");
        assert!(err.contains("truncated input salvaged"), "{err}");
        let lines: Vec<Value> = String::from_utf8(decoded.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        let last = lines.last().expect("no output");
        assert_eq!(last["what"], "truncated", "{last}");
        // Every record: the producer's, thread 0, seq one more than the last one's or
        // past a gap the lost lines account for.
        let mut next = 0u64;
        let (mut records, mut gaps, mut lost) = (0u64, 0u64, 0u64);
        // Where the gaps are (seq before, size) and the lost lines (after seq, count).
        let (mut gap_at, mut lost_at) = (Vec::new(), Vec::new());
        let mut last_cpu = None;
        for l in &lines {
            if l["uevrec"] == "lost" {
                lost += l["lost"].as_u64().unwrap();
                lost_at.push((next, l["lost"].as_u64().unwrap()));
                continue;
            }
            if l["uevrec"].is_string() {
                assert_ne!(l["what"], "undecoded", "{l}");
                continue;
            }
            assert_eq!(l["event"], name, "{l}");
            assert_eq!(l["system"], "user_events", "{l}");
            assert_eq!(l["fields"]["thread"], 0, "{l}");
            assert_eq!(l["pid"].as_u64(), Some(producer_pid), "{l}");
            let seq = l["fields"]["seq"].as_u64().unwrap();
            assert!(seq >= next, "seq {seq} after {}: {l}", next.wrapping_sub(1));
            if seq > next {
                gap_at.push((next, seq - next, last_cpu, l["cpu"].as_u64()));
            }
            last_cpu = l["cpu"].as_u64();
            gaps += seq - next;
            next = seq + 1;
            records += 1;
        }
        println!(
            "{}: killed at {size} bytes; {records} records (seq 0..{next}), {lost} lost, {gaps} missing",
            backend()
        );
        // At least the bytes before the last write: 1 MiB of 3 at 48 bytes a sample.
        assert!(records > 10_000, "{records} records in {size} bytes");
        assert!(
            gaps <= lost,
            "{gaps} seqs missing, {lost} lost reported; gaps (from seq, size, CPU before, CPU after) {:?}, lost lines (after seq, count) {:?}",
            &gap_at[..gap_at.len().min(20)],
            &lost_at[..lost_at.len().min(20)]
        );
        let _ = fs::remove_dir_all(&dir);
        let _ = fs::remove_dir_all(&local);
    });
}
