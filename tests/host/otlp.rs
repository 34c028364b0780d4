//! Tier 2 (host kernel): lost records under `--format otlp` are OTLP log records a
//! pipeline can alert on. `uevrec tail --format otlp -m 1` records
//! `raw_syscalls:sys_enter` of a child calling getppid flat out while the reader of
//! uevrec's stdout stalls; then every line must parse with the official protobuf
//! definitions (`tests/otlp/validate.py`), the drops must be `uevrec.lost` records
//! (severity WARN, `uevrec.lost.count`, `cpu.logical_number`), and
//! `recorded + lost == produced` must hold exactly.
//! Needs root, tracefs and python3 with the PyPI package opentelemetry-proto.

use std::io::{BufRead, BufReader, Read, Write};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::NR_GETPPID;
use crate::common::otlp::{self, attributes, records};

/// How long the reader stalls (and the producer runs): far more than 1-page rings and
/// uevrec's buffers hold.
const STALL: Duration = Duration::from_secs(4);

#[test]
fn lost_records_are_uevrec_lost_log_records() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let mut producer = crate::common::getppid_producer(STALL.as_secs() - 1);
    let mut rec = crate::common::tail_getppid(producer.id(), &["--format", "otlp", "-m", "1"]);
    let mut out = BufReader::new(rec.stdout.take().unwrap());
    let mut text = String::new();
    // Read up to the attached notice, then stop reading: the stall.
    let t0 = Instant::now();
    while !text.contains("\"attached\"") {
        assert!(
            out.read_line(&mut text).unwrap() > 0,
            "uevrec ended before attaching"
        );
        assert!(t0.elapsed() < Duration::from_secs(30), "no attached notice");
    }
    producer.stdin.take().unwrap().write_all(b"go\n").unwrap();
    thread::sleep(STALL);
    let mut produced = String::new();
    let mut producer_out = producer.stdout.take().unwrap();
    producer_out.read_to_string(&mut produced).unwrap();
    assert!(producer.wait().unwrap().success());
    let produced: u64 = produced.trim().parse().expect("producer count");

    // Stop uevrec; it drains into the pipe as we read it now.
    // SAFETY: kill on a child we own.
    assert_eq!(unsafe { libc::kill(rec.id() as i32, libc::SIGINT) }, 0);
    out.read_to_string(&mut text).unwrap();
    let status = rec.wait().unwrap();
    let mut err = String::new();
    rec.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "uevrec failed: {status}: {err}");

    let file = std::env::temp_dir().join(format!("uevrec-otlp-lost-{}.jsonl", std::process::id()));
    std::fs::write(&file, &text).unwrap();
    otlp::validate(&file);
    let _ = std::fs::remove_file(&file);
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON request per line"))
        .collect();
    let logs = records(&lines, "logs");
    let (mut recorded, mut lost, mut lost_records) = (0u64, 0u64, 0u64);
    for (_, scope, r) in &logs {
        let attrs = attributes(r);
        match (scope.as_str(), r["eventName"].as_str()) {
            ("uevrec", Some("uevrec.lost")) => {
                assert_eq!(r["severityNumber"], 13, "{r}");
                assert!(attrs["cpu.logical_number"]["intValue"].is_string(), "{r}");
                let n = attrs["uevrec.lost.count"]["intValue"].as_str().unwrap();
                lost += n.parse::<u64>().unwrap();
                lost_records += 1;
            }
            ("raw_syscalls", Some("sys_enter")) => {
                assert_eq!(
                    attrs["id"]["intValue"],
                    NR_GETPPID.to_string().as_str(),
                    "{r}"
                );
                recorded += 1;
            }
            _ => {}
        }
    }
    eprintln!(
        "produced {produced}, recorded {recorded}, lost {lost} in {lost_records} uevrec.lost \
         records, {} lines",
        lines.len()
    );
    assert!(
        lost_records > 0,
        "a {STALL:?} stall must overflow 1-page rings"
    );
    assert_eq!(
        recorded + lost,
        produced,
        "recorded + lost must equal produced"
    );
}
