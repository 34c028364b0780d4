//! Tier 2: `uevrec record --flight` on the host kernel, both backends: a trigger on a
//! real tracepoint (`sched:sched_process_exec` of the generator, `--trigger-filter`),
//! SIGUSR1 dumps, two dumps in a row, the dump at exit; exact accounting.
//!
//! The generator (perl, pinned to one CPU so that its records and its exec are staged in
//! the order they happened: uevrec stages buffer by buffer, see docs/flight-recorder.md)
//! calls `getpgid(n)` for a known run of numbers n (the record's `args[0]`; ESRCH, no
//! other effect) on command, and execs `/bin/true` on command (the trigger). uevrec
//! records only its `getpgid` calls (`--filter`), so every record in a dump is known.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

mod common;
use common::flight::{Dump, Flight, PATIENCE, assert_run, complete_dumps};

/// getpgid on x86_64 (aarch64: 155).
#[cfg(target_arch = "x86_64")]
const NR_GETPGID: u64 = 121;
#[cfg(target_arch = "aarch64")]
const NR_GETPGID: u64 = 155;

/// The numbers the generator passes start above every real pid.
const BASE: u64 = 100_000_000;
/// SIZE of the tests: room for ~160 sys_enter records (96 bytes staged each).
const SIZE: u64 = 16 * 1024;

/// The generator: a perl process pinned to CPU 0.
struct Generator {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pid: u32,
}

impl Generator {
    fn start() -> Generator {
        let script = format!(
            "$| = 1; print \"$$\\n\"; \
             while (my $c = <STDIN>) {{ chomp $c; \
               if ($c =~ /^run (\\d+) (\\d+)$/) {{ syscall({NR_GETPGID}, $_) for $1..$2; print \"done\\n\" }} \
               elsif ($c eq 'exec') {{ exec '/bin/true' }} }}"
        );
        let mut child = Command::new("taskset")
            .args(["-c", "0", "perl", "-e", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("taskset and perl are needed for the generator");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let pid = line.trim().parse().expect("the generator prints its pid");
        Generator {
            child,
            stdin,
            stdout,
            pid,
        }
    }

    /// getpgid(BASE + n) for n in `from..=to`; returns once done.
    fn run(&mut self, from: u64, to: u64) {
        writeln!(self.stdin, "run {} {}", BASE + from, BASE + to).unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "done\n");
    }

    /// Exec /bin/true (the trigger); returns once it exited.
    fn exec(mut self) {
        writeln!(self.stdin, "exec").unwrap();
        assert!(common::wait_exit(&mut self.child, PATIENCE).is_ok());
    }
}

impl Drop for Generator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("uevrec-flight-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// `uevrec record --backend B --flight SIZE` of the generator's getpgid calls, plus `extra`.
fn start(dir: &Path, backend: &str, generator: u32, extra: &[&str]) -> Flight {
    let filter = format!("id == {NR_GETPGID} && common_pid == {generator}");
    let size = SIZE.to_string();
    let mut args = vec!["--backend", backend, "--flight", &size];
    args.extend(["-e", "raw_syscalls:sys_enter", "--filter", &filter]);
    args.extend(extra);
    Flight::start(&dir.join(format!("{backend}.json")), &args)
}

/// The generator's numbers in the dump's sys_enter records, in order.
fn numbers(dump: &Dump) -> Vec<u64> {
    dump.values("sys_enter", |v| {
        v["fields"]["args"][0].as_u64().unwrap() - BASE
    })
}

#[test]
fn a_trigger_tracepoint_dumps_the_last_records_before_it() {
    if !common::raw_syscalls_here() {
        return;
    }
    let dir = tmp("trigger");
    for backend in ["perf", "ftrace"] {
        let mut generator = Generator::start();
        let filter = format!("pid == {}", generator.pid);
        let trigger = ["--trigger", "sched:sched_process_exec"];
        let flight = start(
            &dir,
            backend,
            generator.pid,
            &[trigger[0], trigger[1], "--trigger-filter", &filter],
        );
        flight.wait_attached(2);
        let n = 1000;
        generator.run(1, n);
        generator.exec();
        let dump = Dump::read(&flight.wait_dumps(1), SIZE);
        // The trigger record is the last one, after the last records before it.
        let last = dump.lines.last().unwrap();
        assert_eq!(last["event"], "sched_process_exec", "{backend}: {last}");
        assert_eq!(last["fields"]["filename"], "/bin/true");
        let numbers = numbers(&dump);
        let held = numbers.len() as u64;
        assert!(held > 100, "{backend}: only {held} held in {SIZE} bytes");
        assert_run(&numbers, n - held + 1, n);
        assert_eq!(dump.count("records"), held + 1);
        // Everything recorded is in the dump or counted as overwritten.
        assert_eq!(dump.count("overwritten"), n - held, "{backend}");
        assert_eq!(dump.header["reason"], "trigger");
        assert!(SIZE - dump.count("held_bytes") < 512, "{:?}", dump.header);
        let stderr = flight.stop();
        assert!(stderr.contains("1 dumps written"), "{stderr}");
    }
}

#[test]
fn sigusr1_dumps_twice_in_a_row_and_at_exit_without_repeating_a_record() {
    if !common::raw_syscalls_here() {
        return;
    }
    let dir = tmp("signal");
    for backend in ["perf", "ftrace"] {
        let mut generator = Generator::start();
        let flight = start(&dir, backend, generator.pid, &["--flight-on-exit"]);
        flight.wait_attached(1);
        // Time for the session (which drains every 100 ms at most) to stage the records.
        let staged = Duration::from_millis(500);
        generator.run(1, 600);
        std::thread::sleep(staged);
        flight.signal(libc::SIGUSR1);
        let first = Dump::read(&flight.wait_dumps(1), SIZE);
        let a = numbers(&first);
        assert_run(&a, 601 - a.len() as u64, 600);
        assert_eq!(first.count("overwritten"), 600 - a.len() as u64);
        assert_eq!(first.header["reason"], "signal");

        // The first dump emptied the buffer: the second holds only what came after.
        generator.run(601, 1200);
        std::thread::sleep(staged);
        flight.signal(libc::SIGUSR1);
        let second = Dump::read(&flight.wait_dumps(2), SIZE);
        let b = numbers(&second);
        assert_run(&b, 1201 - b.len() as u64, 1200);
        assert_eq!(
            second.count("overwritten"),
            600 - b.len() as u64,
            "{backend}"
        );

        // Fewer records than fit: the exit dump holds all of them, nothing overwritten.
        generator.run(1201, 1250);
        std::thread::sleep(staged);
        let out = flight.out.clone();
        let stderr = flight.stop();
        let names = complete_dumps(&out);
        assert_eq!(names.len(), 3, "{stderr}");
        let exit = Dump::read(&names[2], SIZE);
        assert_run(&numbers(&exit), 1201, 1250);
        assert_eq!(exit.count("overwritten"), 0);
        assert_eq!(exit.header["reason"], "exit");
        assert!(stderr.contains("3 dumps written"), "{stderr}");
    }
}

/// (Runs anywhere: the command line is checked before tracefs is looked at.)
#[test]
fn flight_flags_are_checked() {
    let uevrec = || Command::new(assert_cmd::cargo::cargo_bin("uevrec"));
    let run = |args: &[&str]| {
        let out = uevrec().args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["record", "--flight", "1M", "-e", "s:e"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--output"), "{err}");
    let (code, err) = run(&["record", "--flight", "1M", "-o", "-", "-e", "s:e"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--flight needs -o FILE"), "{err}");
    let (code, err) = run(&[
        "record",
        "--flight",
        "1M",
        "-o",
        "/nonexistent/x",
        "-e",
        "s:e",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("/nonexistent/x does not exist"), "{err}");
    let (code, err) = run(&["record", "--trigger", "s:e", "-o", "x"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--flight"), "{err}");
    let (code, err) = run(&["record", "--flight", "0", "-o", "x"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("greater than 0"), "{err}");
    let (code, err) = run(&["record", "--flight", "1M", "-o", "x", "--raw", "y"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot be used with"), "{err}");
}

#[test]
fn otlp_dumps_are_valid_otlp_requests_with_the_same_records() {
    if !common::raw_syscalls_here() {
        return;
    }
    let dir = tmp("otlp");
    let mut generator = Generator::start();
    let filter = format!("pid == {}", generator.pid);
    let trigger = ["--trigger", "sched:sched_process_exec", "--trigger-filter"];
    let mut args = vec!["--format", "otlp"];
    args.extend(trigger);
    args.push(&filter);
    let flight = start(&dir, "perf", generator.pid, &args);
    flight.wait_attached(2);
    let n = 1000;
    generator.run(1, n);
    generator.exec();
    let path = flight.wait_dumps(1);
    common::otlp::validate(&path);
    let lines: Vec<Value> = fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let logs = common::otlp::records(&lines, "logs");
    let what = |log: &Value| common::otlp::attributes(log)["uevrec.notice.what"].clone();
    let (first, last) = (&logs[0].2, &logs[logs.len() - 1].2);
    assert_eq!(what(first)["stringValue"], "flight_dump", "{first}");
    assert_eq!(what(last)["stringValue"], "flight_end", "{last}");
    let events: Vec<&Value> = logs
        .iter()
        .filter(|(_, scope, _)| scope != "uevrec")
        .map(|(_, _, log)| log)
        .collect();
    let header = first["body"]["stringValue"].as_str().unwrap();
    assert!(
        header.contains(&format!(" records={} ", events.len())),
        "{header}"
    );
    assert_eq!(events.last().unwrap()["eventName"], "sched_process_exec");
    let numbers: Vec<u64> = events[..events.len() - 1]
        .iter()
        .map(|log| {
            let args = common::otlp::plain(&common::otlp::attributes(log)["args"]);
            args[0].as_u64().unwrap() - BASE
        })
        .collect();
    let held = numbers.len() as u64;
    assert!(held > 100, "only {held}");
    assert_run(&numbers, n - held + 1, n);
    assert!(
        header.contains(&format!(" overwritten={} ", n - held)),
        "{header}"
    );
    flight.stop();
}
