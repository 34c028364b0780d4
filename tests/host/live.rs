//! Live means now: `uevrec tail` (and `record` to standard output) shows a record of a
//! quiet stream within a few milliseconds, not at the loop's 100 ms timeout (a lone
//! record never reaches a ring's watermark). Both backends.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use crate::common::{KillOnDrop, NR_GETPPID, bin, must_exit};

/// Calls made, one every 30 ms.
const CALLS: usize = 20;

/// How late each of [`CALLS`] lone getppid calls reached uevrec's standard output (a
/// pipe): the time this process read the line minus the record's own time (both
/// CLOCK_REALTIME); `args` chooses the command and its options.
fn latencies(args: &[&str]) -> Vec<Duration> {
    let producer = KillOnDrop(
        Command::new("perl")
            .args([
                "-e",
                &format!(
                    "my $go = <STDIN>; for (1..{CALLS}) {{ getppid(); select(undef, undef, undef, 0.03) }}"
                ),
            ])
            .stdin(Stdio::piped())
            .spawn()
            .expect("perl is needed for the getppid producer"),
    );
    let mut rec = KillOnDrop(
        Command::new(bin())
            .args(args)
            .args(["--pid", &producer.0.id().to_string()])
            .args(["--filter", &format!("id == {NR_GETPPID}")])
            .args(["--count", &CALLS.to_string(), "--duration", "60s"])
            .args(["--format", "json", "-e", "raw_syscalls:sys_enter"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut out = BufReader::new(rec.0.stdout.take().unwrap());
    crate::common::read_to_attached(&mut out);
    let mut producer = producer;
    writeln!(producer.0.stdin.take().unwrap(), "go").unwrap();
    let mut late = Vec::new();
    let mut line = String::new();
    while late.len() < CALLS {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "uevrec ended early");
        let seen = SystemTime::now();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        if v.get("uevrec").is_some() {
            continue;
        }
        let time = humantime::parse_rfc3339(v["time"].as_str().unwrap()).unwrap();
        late.push(seen.duration_since(time).unwrap_or_default());
    }
    assert!(must_exit(&mut rec.0).success());
    late.sort();
    late
}

/// The 90th percentile of `late` is under 50 ms (with the loop's 100 ms timeout a record
/// waited up to 100 ms, 0 to 100 evenly: its 90th percentile near 90 ms); every latency
/// is printed. The machine is shared: the test keeps a wide margin over the 5 ms the
/// loop aims at.
fn assert_live(what: &str, late: &[Duration]) {
    let ms: Vec<String> = late
        .iter()
        .map(|d| format!("{:.1}", d.as_secs_f64() * 1e3))
        .collect();
    eprintln!("{what}: latencies (ms, sorted): {}", ms.join(" "));
    let p90 = late[late.len() * 9 / 10 - 1];
    assert!(
        p90 < Duration::from_millis(50),
        "{what}: 90th percentile {p90:?} ≥ 50 ms: {}",
        ms.join(" ")
    );
}

#[test]
fn tail_shows_a_lone_record_within_milliseconds_perf() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    assert_live("tail, perf", &latencies(&["tail"]));
}

#[test]
fn tail_shows_a_lone_record_within_milliseconds_ftrace() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    assert_live("tail, ftrace", &latencies(&["tail", "--backend", "ftrace"]));
}

#[test]
fn record_to_a_pipe_shows_a_lone_record_within_milliseconds() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    assert_live("record to a pipe, perf", &latencies(&["record"]));
}
