//! Tier 2: `--where` on the host kernel, exact. A perl child calls
//! `syscall(getppid, 424242, SEQ)` for SEQ = 1..30,000 (`raw_syscalls:sys_enter` records
//! them as `args`); `--where 'fields.args[1] % 3 == 0'` must keep exactly the 10,000
//! multiples of 3, and the 20,000 others must be named, as filtered, in the end-of-run
//! summary and in the `{"uevrec":"dropped"}` line, with one formatter and with two, on
//! both backends. Needs root and tracefs (prints why it is skipped otherwise).

use std::fs;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::Duration;

use serde_json::Value;

use crate::common::vm::BACKENDS;
use crate::common::{NR_GETPPID, PATIENCE, bin};
use crate::threads::{burst_child, wait_attached};

const CALLS: u64 = 30_000;

/// `uevrec record` (summary on) of `child`'s getppid calls into `out`, with `extra`.
fn record(child: &Child, out: &Path, extra: &[&str]) -> Child {
    let filter = format!("id == {NR_GETPPID}");
    record_with(child, out, &[&["--filter", &filter], extra].concat())
}

/// `uevrec record` (summary on) of `child`'s system calls into `out`, with `extra`.
fn record_with(child: &Child, out: &Path, extra: &[&str]) -> Child {
    Command::new(bin())
        .args(["record", "--pid", &child.id().to_string()])
        .args(["-e", "raw_syscalls:sys_enter", "-m", "16M"])
        .args(extra)
        .args(["-o", out.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// SIGINT `rec`, which must exit 0; its standard error.
fn stop(rec: &mut Child) -> String {
    // SAFETY: kill on a child we own.
    assert_eq!(unsafe { libc::kill(rec.id() as i32, libc::SIGINT) }, 0);
    let st = crate::common::wait_exit(rec, PATIENCE).expect("uevrec exits");
    let mut err = String::new();
    rec.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(st.success(), "{st}: {err}");
    err
}

/// Let `child` make its calls and wait for it to end (and the rings to be drained).
fn release(child: &mut Child) {
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait().unwrap().success());
    sleep(Duration::from_millis(300));
}

/// [`stop`] `rec`, then its standard error and what it wrote to `out`, which must hold
/// no lost records (the tests need none).
fn stopped(rec: &mut Child, out: &Path) -> (String, String) {
    let stderr = stop(rec);
    let text = fs::read_to_string(out).unwrap();
    assert!(
        !text.contains("\"uevrec\":\"lost\""),
        "{}: lost records",
        out.display()
    );
    (stderr, text)
}

#[test]
fn where_keeps_exactly_the_multiples_of_three_and_counts_the_rest() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = burst_child(CALLS as u32);
    let mut runs = Vec::new();
    for backend in BACKENDS {
        for threads in ["1", "2"] {
            let out = dir.path().join(format!("{backend}-{threads}.json"));
            let args = [
                "--backend",
                backend,
                "--threads",
                threads,
                "--where",
                "fields.args[0] == 424242 && fields.args[1] % 3 == 0",
            ];
            let mut rec = record(&child, &out, &args);
            wait_attached(&out, &mut rec);
            runs.push((format!("{backend}, --threads {threads}"), rec, out));
        }
    }
    release(&mut child);
    for (run, mut rec, out) in runs {
        let stderr = stop(&mut rec);
        let lines: Vec<Value> = fs::read_to_string(&out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{run}: {e}: {l}")))
            .collect();
        assert!(
            !lines.iter().any(|v| v["uevrec"] == "lost"),
            "{run}: lost records (the test needs none)"
        );
        let mut kept: Vec<u64> = lines
            .iter()
            .filter(|v| v.get("uevrec").is_none())
            .map(|v| {
                assert_eq!(v["fields"]["args"][0], 424242, "{run}: {v}");
                v["fields"]["args"][1].as_u64().unwrap()
            })
            .collect();
        kept.sort_unstable();
        let multiples: Vec<u64> = (1..=CALLS / 3).map(|k| 3 * k).collect();
        assert!(
            kept == multiples,
            "{run}: kept {} records, not the 10,000 multiples of 3",
            kept.len()
        );
        // One line at the end, or more with some every 10 s on a slow machine: they
        // add up.
        let dropped: Vec<&Value> = lines.iter().filter(|v| v["uevrec"] == "dropped").collect();
        assert!(!dropped.is_empty(), "{run}");
        for d in &dropped {
            assert_eq!(d["event"], "raw_syscalls:sys_enter", "{run}");
            assert_eq!(d["reason"], "filtered", "{run}");
        }
        let said: u64 = dropped.iter().map(|d| d["records"].as_u64().unwrap()).sum();
        assert_eq!(said, CALLS - CALLS / 3, "{run}");
        // The session line says which records the lines keep.
        assert_eq!(
            lines[0]["where"],
            serde_json::json!(["--where fields.args[0] == 424242 && fields.args[1] % 3 == 0"]),
            "{run}"
        );
        // The last dropped line comes after every record.
        assert_eq!(lines.last().unwrap()["uevrec"], "dropped", "{run}");
        assert!(
            stderr.contains("30000  raw_syscalls:sys_enter: 10000 kept, 20000 filtered\n"),
            "{run}: the summary does not say it: {stderr}"
        );
    }
}

#[test]
fn a_bad_condition_is_refused_at_start_with_a_caret() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    for (condition, shown, caret) in [
        (
            "fields.args[1] %% 3 == 0",
            "fields.args[1] %% 3 == 0",
            "                ^",
        ),
        ("fields.argz[1] == 0", "fields.argz[1] == 0", "^^^^^^^^^^^"),
    ] {
        let out = Command::new(bin())
            .args([
                "record",
                "-e",
                "raw_syscalls:sys_enter",
                "--where",
                condition,
            ])
            .args(["-o", "/dev/null"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{condition}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.trim_end() == format!("  {shown}"))
            .unwrap_or_else(|| panic!("{condition}: the text is not shown: {err}"));
        assert_eq!(
            lines[at + 1].trim_end(),
            format!("  {caret}"),
            "{condition}: {err}"
        );
    }
    // --raw without -o writes no lines: nothing for --where to choose.
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("r.data");
    let out = Command::new(bin())
        .args([
            "record",
            "-e",
            "raw_syscalls:sys_enter",
            "--where",
            "pid == 1",
        ])
        .arg("--raw")
        .arg(&raw)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("the perf.data keeps every record"), "{err}");
}

/// `record --otlp` with `--where`: the collector gets exactly the kept records (SEQ 0,
/// 3, … of 30,000 calls), `/metrics` counts the 20,000 others as not kept (filtered), the
/// export ledger's recorded = exported + dropped + spooled holds for the kept 10,000.
#[test]
fn where_with_export_counts_on_metrics_and_in_the_ledger() {
    use crate::common::export::{Producer, free_port, http_get, sample_sum, seqs_of, summary};
    use crate::common::otlp_receiver::{Kind, Receiver};
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let rx = Receiver::start(Kind::Grpc);
    let mut p = Producer::start();
    let addr = format!("127.0.0.1:{}", free_port());
    let mut rec = crate::common::KillOnDrop(
        Command::new(bin())
            .args([
                "record",
                "--otlp-endpoint",
                &rx.endpoint(),
                "--otlp-protocol",
                "grpc",
            ])
            .args(["--metrics-listen", &addr])
            .args(["--pid", &p.pid().to_string()])
            .args(["--filter", &format!("id == {NR_GETPPID}")])
            .args(["-e", "raw_syscalls:sys_enter"])
            .args(["--where", "fields.args[1] % 3 == 0"])
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
            .env_remove("OTEL_EXPORTER_OTLP_HEADERS")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    crate::common::wait_for("the attach", PATIENCE, || {
        http_get(&addr, "/metrics").is_some_and(|r| r.1.contains("uevrec_attached_events 1"))
    });
    // Bursts the default rings hold on a loaded machine; each delivered before the next.
    while p.next < CALLS {
        p.emit(3_000);
        let kept = p.next.div_ceil(3);
        crate::common::wait_for("the kept records at the collector", PATIENCE, || {
            seqs_of(&rx.logs()).len() as u64 >= kept
        });
    }
    let tp = "tracepoint=\"raw_syscalls:sys_enter\"";
    crate::common::wait_for("the filtered count on /metrics", PATIENCE, || {
        let page = http_get(&addr, "/metrics").unwrap_or_default().1;
        sample_sum(
            &page,
            "uevrec_records_not_kept_total",
            &format!("{tp},reason=\"filtered\""),
        ) == CALLS - CALLS / 3
    });
    let page = http_get(&addr, "/metrics").unwrap().1;
    assert_eq!(
        sample_sum(&page, "uevrec_records_recorded_total", tp),
        CALLS / 3,
        "{page}"
    );
    assert_eq!(
        sample_sum(
            &page,
            "uevrec_records_not_kept_total",
            &format!("{tp},reason=\"filter_error\"")
        ),
        0,
        "{page}"
    );
    let err = stop(&mut rec);
    let seqs = seqs_of(&rx.logs());
    let multiples: Vec<u64> = (0..CALLS).filter(|s| s % 3 == 0).collect();
    assert!(
        seqs.keys().copied().collect::<Vec<_>>() == multiples && seqs.values().all(|&n| n == 1),
        "the collector got {} distinct SEQs, not each multiple of 3 once",
        seqs.len()
    );
    let s = summary(&err);
    let line = &s.tracepoints["raw_syscalls:sys_enter"];
    assert_eq!(line.recorded, CALLS / 3, "{err}");
    assert_eq!(
        line.recorded,
        line.exported + line.dropped + line.queued,
        "{err}"
    );
    assert!(
        err.contains("30000  raw_syscalls:sys_enter: 10000 kept, 20000 filtered\n"),
        "{err}"
    );
}

/// Push-down: `fields.id == N` of `--where` goes into the kernel's filter (the ftrace
/// instance's filter file holds it), so the child's other system calls never reach
/// uevrec: with no `--filter`, exactly the 20,000 getppid calls that are not multiples of
/// 3 are counted as filtered, on both backends.
#[test]
fn a_field_comparison_is_pushed_into_the_kernel_filter() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = burst_child(CALLS as u32);
    let condition = format!("fields.id == {NR_GETPPID} && fields.args[1] % 3 == 0");
    let mut runs = Vec::new();
    for backend in BACKENDS {
        let out = dir.path().join(format!("{backend}.json"));
        let mut rec = record_with(&child, &out, &["--backend", backend, "--where", &condition]);
        wait_attached(&out, &mut rec);
        if backend == "ftrace" {
            let file = format!(
                "/sys/kernel/tracing/instances/uevrec-{}/events/raw_syscalls/sys_enter/filter",
                rec.id()
            );
            let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(text.trim(), format!("id == {NR_GETPPID}"), "{file}");
        }
        runs.push((backend, rec, out));
    }
    release(&mut child);
    for (backend, mut rec, out) in runs {
        let (stderr, _) = stopped(&mut rec, &out);
        assert!(
            stderr.contains("30000  raw_syscalls:sys_enter: 10000 kept, 20000 filtered\n"),
            "{backend}: {stderr}"
        );
    }
}

/// The `--where` summary line of `stderr` for sys_enter: (recorded, kept, [(reason, n)]).
fn counted(stderr: &str) -> (u64, u64, Vec<(String, u64)>) {
    let line = stderr
        .lines()
        .find(|l| l.contains("raw_syscalls:sys_enter: "))
        .unwrap_or_else(|| panic!("no sys_enter line in the summary: {stderr}"));
    let (recorded, rest) = line
        .trim()
        .split_once("  raw_syscalls:sys_enter: ")
        .unwrap();
    let mut parts = rest.split(", ");
    let kept = parts
        .next()
        .unwrap()
        .strip_suffix(" kept")
        .unwrap()
        .parse()
        .unwrap();
    let reasons = parts
        .map(|p| {
            let (n, why) = p.split_once(' ').unwrap();
            (why.to_string(), n.parse().unwrap())
        })
        .collect();
    (recorded.parse().unwrap(), kept, reasons)
}

/// The event lines of `text` (a run over `total` sys_enter records that left some out
/// for `reason`), checked against the summary in `stderr`: recorded = `total`, kept =
/// the lines, and kept + `reason` = `total` exactly (no other reason).
fn tally(stderr: &str, text: &str, reason: &str, total: u64) -> Vec<Value> {
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .filter(|v: &Value| v.get("uevrec").is_none())
        .collect();
    let (recorded, kept, reasons) = counted(stderr);
    assert_eq!(recorded, total, "{stderr}");
    assert_eq!(kept, lines.len() as u64, "{stderr}");
    let left_out: u64 = reasons
        .iter()
        .filter(|(r, _)| r == reason)
        .map(|r| r.1)
        .sum();
    assert_eq!(kept + left_out, total, "{stderr}");
    lines
}

/// `--sample raw_syscalls:sys_enter=0.1` over 100,000 calls: the kept count within 5
/// binomial standard deviations of 10,000 (σ ≈ 94.9), recorded = kept + sampled exactly,
/// and the kept lines are the ones counted.
#[test]
fn a_sample_keeps_the_ratio_within_binomial_bounds() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    const N: u64 = 100_000;
    let dir = tempfile::tempdir().unwrap();
    let mut child = burst_child(N as u32);
    let out = dir.path().join("sample.json");
    let args = ["--threads", "2", "--sample", "raw_syscalls:sys_enter=0.1"];
    let mut rec = record(&child, &out, &args);
    wait_attached(&out, &mut rec);
    release(&mut child);
    let (stderr, text) = stopped(&mut rec, &out);
    let kept = tally(&stderr, &text, "sampled", N).len() as u64;
    let sigma = (N as f64 * 0.1 * 0.9).sqrt();
    assert!(
        (kept as f64 - 10_000.0).abs() < 5.0 * sigma,
        "kept {kept}: {stderr}"
    );
}

/// `--rate-limit raw_syscalls:sys_enter=1000/s,1000` over a steady 4,000 calls a second
/// for 3 s: the kept records are at most the burst + 1000 a second of the records' time
/// span, and (the stream being faster than the rate) at least 1000 a second of it less
/// one; recorded = kept + throttled exactly.
#[test]
fn a_rate_limit_holds_within_the_buckets_bound() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new("perl")
        .args([
            "-e",
            &format!(
                "use Time::HiRes qw(time sleep); my $go = <STDIN>; my $t0 = time; \
                 for my $i (1..12000) {{ my $d = $t0 + $i / 4000 - time; sleep($d) if $d > 0; \
                 syscall({NR_GETPPID}, 424242, $i) }}"
            ),
        ])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let out = dir.path().join("rate.json");
    let args = [
        "--threads",
        "2",
        "--rate-limit",
        "raw_syscalls:sys_enter=1000/s,1000",
    ];
    let mut rec = record(&child, &out, &args);
    wait_attached(&out, &mut rec);
    release(&mut child);
    let (stderr, text) = stopped(&mut rec, &out);
    let times: Vec<u64> = tally(&stderr, &text, "throttled", 12_000)
        .iter()
        .map(|v| {
            let t = v["time"].as_str().unwrap();
            // HH:MM:SS.nnnnnnnnn of the RFC 3339 time: the run is within a day.
            let (hms, frac) = t[11..t.len() - 1].split_once('.').unwrap();
            let s: Vec<u64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
            (s[0] * 3600 + s[1] * 60 + s[2]) * 1_000_000_000 + frac.parse::<u64>().unwrap()
        })
        .collect();
    let kept = times.len() as u64;
    // The first record is kept (the bucket starts full); the last kept one bounds the span.
    let span_ns = times.iter().max().unwrap() - times.iter().min().unwrap();
    let most = 1000 + span_ns / 1_000_000;
    let least = (span_ns / 1_000_000).saturating_sub(1);
    assert!(
        (least..=most).contains(&kept),
        "kept {kept} over {span_ns} ns: {stderr}"
    );
}

/// `comm` is the thread's name as the line shows it: the perl child's 3,000 calls are
/// all kept under `comm == "perl"` (with a field condition: exactly the even ones), and
/// none under `comm != "perl"`, counted as filtered.
#[test]
fn comm_is_the_name_the_line_shows() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    const N: u64 = 3_000;
    let dir = tempfile::tempdir().unwrap();
    let mut child = burst_child(N as u32);
    let conditions = [
        "comm == 'perl' && fields.args[1] % 2 == 0",
        "comm != 'perl' && fields.args[0] == 424242",
    ];
    let runs: Vec<_> = conditions
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let out = dir.path().join(format!("comm-{i}.json"));
            let mut rec = record(&child, &out, &["--where", c]);
            wait_attached(&out, &mut rec);
            (rec, out)
        })
        .collect();
    release(&mut child);
    let mut kept = Vec::new();
    for (mut rec, out) in runs {
        let (stderr, text) = stopped(&mut rec, &out);
        let lines = tally(&stderr, &text, "filtered", N);
        assert!(lines.iter().all(|v| v["comm"] == "perl"), "{stderr}");
        kept.push(lines.len() as u64);
    }
    assert_eq!(kept, [N / 2, 0]);
}

/// `record --flight` with `--where`: the ring keeps every record, the dump writes the
/// multiples of 3 only and says what it left out (`{"uevrec":"dropped"}`, before its
/// `flight_end`, whose count is of the records written).
#[test]
fn a_flight_dump_writes_the_records_a_condition_keeps() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    const N: u64 = 3_000;
    let dir = tempfile::tempdir().unwrap();
    let mut child = burst_child(N as u32);
    let filter = format!("id == {NR_GETPPID}");
    let pid = child.id().to_string();
    let args = [
        "--flight",
        "64M",
        "--flight-on-exit",
        "-e",
        "raw_syscalls:sys_enter",
        "--filter",
        &filter,
        "--pid",
        &pid,
        "--where",
        "fields.args[1] % 3 == 0",
    ];
    let flight = crate::common::flight::Flight::start(&dir.path().join("f.json"), &args);
    flight.wait_attached(1);
    release(&mut child);
    let out = flight.out.clone();
    let stderr = flight.stop();
    let dumps = crate::common::flight::complete_dumps(&out);
    assert_eq!(dumps.len(), 1, "{stderr}");
    let lines: Vec<Value> = fs::read_to_string(&dumps[0])
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines[0]["message"]
            .as_str()
            .unwrap()
            .contains(&format!(" records={N} ")),
        "{}",
        lines[0]
    );
    let seqs: Vec<u64> = lines
        .iter()
        .filter(|v| v.get("system").is_some())
        .map(|v| v["fields"]["args"][1].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=N / 3).map(|k| 3 * k).collect::<Vec<_>>());
    let dropped: Vec<&Value> = lines.iter().filter(|v| v["uevrec"] == "dropped").collect();
    assert_eq!(dropped.len(), 1, "{dropped:?}");
    assert_eq!(dropped[0]["records"], N - N / 3);
    let end = lines.last().unwrap();
    assert_eq!(end["what"], "flight_end");
    assert_eq!(
        end["message"],
        format!("records={} (the dump is complete)", N / 3)
    );
}

/// `--dropped-every 200ms` while a producer calls getppid(424242, SEQ) about 1,000 times
/// a second for 1.5 s under `--where 'fields.args[1] % 3 == 0'`: dropped lines come
/// while it runs (before its last records), each says what was left out since the last,
/// and they add up to the summary's count, with one formatter and with two.
#[test]
fn dropped_lines_come_while_recording_and_add_up() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    const SLOW_CALLS: u64 = 1500;
    let dir = tempfile::tempdir().unwrap();
    for threads in ["1", "2"] {
        let mut child = Command::new("perl")
            .args([
                "-e",
                &format!(
                    "my $go = <STDIN>; for my $i (1..{SLOW_CALLS}) {{ \
                     syscall({NR_GETPPID}, 424242, $i); select(undef, undef, undef, 0.001) }}"
                ),
            ])
            .stdin(Stdio::piped())
            .spawn()
            .expect("perl is needed for the producer");
        let out = dir.path().join(format!("t{threads}.json"));
        let args = [
            "--threads",
            threads,
            "--where",
            "fields.args[1] % 3 == 0",
            "--dropped-every",
            "200ms",
        ];
        let mut rec = record(&child, &out, &args);
        wait_attached(&out, &mut rec);
        release(&mut child);
        let (stderr, text) = stopped(&mut rec, &out);
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let last_record = lines
            .iter()
            .rposition(|v| v.get("uevrec").is_none())
            .expect("records");
        let dropped: Vec<(usize, u64)> = lines
            .iter()
            .enumerate()
            .filter(|(_, v)| v["uevrec"] == "dropped")
            .map(|(i, v)| {
                assert_eq!(v["reason"], "filtered", "{v}");
                (i, v["records"].as_u64().unwrap())
            })
            .collect();
        let kept = lines.iter().filter(|v| v.get("uevrec").is_none()).count() as u64;
        let said: u64 = dropped.iter().map(|(_, n)| n).sum();
        eprintln!(
            "--threads {threads}: {kept} kept, {} dropped lines saying {said}",
            dropped.len()
        );
        assert_eq!(kept, SLOW_CALLS / 3, "--threads {threads}");
        assert_eq!(said, SLOW_CALLS - SLOW_CALLS / 3, "--threads {threads}");
        assert!(
            dropped.iter().filter(|(i, _)| *i < last_record).count() >= 2,
            "--threads {threads}: dropped lines while recording: {dropped:?}"
        );
        assert!(dropped.iter().all(|(_, n)| *n > 0), "{dropped:?}");
        assert!(
            stderr.contains(&format!(
                "raw_syscalls:sys_enter: {} kept, {} filtered",
                SLOW_CALLS / 3,
                SLOW_CALLS - SLOW_CALLS / 3
            )),
            "--threads {threads}: {stderr}"
        );
    }
}
