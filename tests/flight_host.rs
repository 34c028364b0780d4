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
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

/// getpgid on x86_64 (aarch64: 155).
#[cfg(target_arch = "x86_64")]
const NR_GETPGID: u64 = 121;
#[cfg(target_arch = "aarch64")]
const NR_GETPGID: u64 = 155;

/// The numbers the generator passes start above every real pid.
const BASE: u64 = 100_000_000;
/// SIZE of the tests: room for ~160 sys_enter records (96 bytes staged each).
const SIZE: u64 = 16 * 1024;
const PATIENCE: Duration = Duration::from_secs(30);

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

/// A running `uevrec record --flight` whose stderr is collected.
struct Flight {
    child: Child,
    stderr: Arc<Mutex<String>>,
    out: PathBuf,
}

impl Flight {
    fn start(dir: &Path, backend: &str, generator: u32, extra: &[&str]) -> Flight {
        let out = dir.join(format!("{backend}.json"));
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("uevrec"))
            .args([
                "record",
                "--backend",
                backend,
                "--flight",
                &SIZE.to_string(),
            ])
            .arg("-o")
            .arg(&out)
            .args(["-e", "raw_syscalls:sys_enter"])
            .args([
                "--filter",
                &format!("id == {NR_GETPGID} && common_pid == {generator}"),
            ])
            .args(extra)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().unwrap();
        let s = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                s.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Flight { child, stderr, out }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Wait until stderr shows `n` `attached` notices.
    fn wait_attached(&self, n: usize) {
        let t0 = Instant::now();
        while self.stderr().matches("\"what\":\"attached\"").count() < n {
            assert!(t0.elapsed() < PATIENCE, "not attached: {}", self.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn dumps(&self) -> Vec<PathBuf> {
        complete_dumps(&self.out)
    }

    /// Wait until there are `n` complete dumps; returns the newest.
    fn wait_dumps(&self, n: usize) -> PathBuf {
        let t0 = Instant::now();
        loop {
            let d = self.dumps();
            if d.len() >= n {
                assert_eq!(d.len(), n, "more dumps than expected: {}", self.stderr());
                return d[n - 1].clone();
            }
            assert!(t0.elapsed() < PATIENCE, "no dump {n}: {}", self.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill has no memory effects; the pid is our child's.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
    }

    fn stop(mut self) -> String {
        self.signal(libc::SIGINT);
        let status = common::wait_exit(&mut self.child, PATIENCE).expect("uevrec exits");
        // Let the reader thread take the last bytes.
        std::thread::sleep(Duration::from_millis(100));
        assert!(status.success(), "{status}: {}", self.stderr());
        self.stderr()
    }
}

/// A dump file: the header's counts and the lines between header and footer.
#[derive(Debug)]
struct Dump {
    header: std::collections::BTreeMap<String, String>,
    lines: Vec<Value>,
}

impl Dump {
    fn read(path: &Path) -> Dump {
        let text = fs::read_to_string(path).unwrap();
        let mut lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        let first = lines.remove(0);
        let last = lines.pop().unwrap();
        assert_eq!(first["what"], "flight_dump", "{first}");
        assert_eq!(last["what"], "flight_end", "{last}");
        let header = first["message"]
            .as_str()
            .unwrap()
            .split(' ')
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect();
        let records = lines.iter().filter(|v| v.get("system").is_some()).count();
        let dump = Dump { header, lines };
        assert_eq!(dump.count("records"), records as u64, "{path:?}");
        assert_eq!(
            last["message"],
            format!("records={records} (the dump is complete)")
        );
        assert_eq!(dump.count("lost"), 0, "no loss expected: {:?}", dump.header);
        assert!(dump.count("held_bytes") <= SIZE);
        dump
    }

    fn count(&self, key: &str) -> u64 {
        self.header[key].parse().unwrap()
    }

    /// The generator's numbers in the dump's sys_enter records, in order.
    fn numbers(&self) -> Vec<u64> {
        self.lines
            .iter()
            .filter(|v| v["event"] == "sys_enter")
            .map(|v| v["fields"]["args"][0].as_u64().unwrap() - BASE)
            .collect()
    }
}

/// The complete dumps of `-o out` (those whose last line is `flight_end`), by name.
fn complete_dumps(out: &Path) -> Vec<PathBuf> {
    let dir = out.parent().unwrap();
    let prefix = format!("{}.", out.file_name().unwrap().to_str().unwrap());
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with(&prefix)
        })
        .filter(|p| {
            fs::read_to_string(p)
                .unwrap()
                .contains("\"what\":\"flight_end\"")
        })
        .collect();
    found.sort();
    found
}

/// `numbers` is exactly `from..=to`.
fn assert_run(numbers: &[u64], from: u64, to: u64) {
    let expected: Vec<u64> = (from..=to).collect();
    assert_eq!(numbers, expected.as_slice());
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("uevrec-flight-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
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
        let flight = Flight::start(
            &dir,
            backend,
            generator.pid,
            &[
                "--trigger",
                "sched:sched_process_exec",
                "--trigger-filter",
                &filter,
            ],
        );
        flight.wait_attached(2);
        let n = 1000;
        generator.run(1, n);
        generator.exec();
        let dump = Dump::read(&flight.wait_dumps(1));
        // The trigger record is the last one, after the last records before it.
        let last = dump.lines.last().unwrap();
        assert_eq!(last["event"], "sched_process_exec", "{backend}: {last}");
        assert_eq!(last["fields"]["filename"], "/bin/true");
        let numbers = dump.numbers();
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
        let flight = Flight::start(&dir, backend, generator.pid, &["--flight-on-exit"]);
        flight.wait_attached(1);
        // Time for the session (which drains every 100 ms at most) to stage the records.
        let staged = Duration::from_millis(500);
        generator.run(1, 600);
        std::thread::sleep(staged);
        flight.signal(libc::SIGUSR1);
        let first = Dump::read(&flight.wait_dumps(1));
        let a = first.numbers();
        assert_run(&a, 601 - a.len() as u64, 600);
        assert_eq!(first.count("overwritten"), 600 - a.len() as u64);
        assert_eq!(first.header["reason"], "signal");

        // The first dump emptied the buffer: the second holds only what came after.
        generator.run(601, 1200);
        std::thread::sleep(staged);
        flight.signal(libc::SIGUSR1);
        let second = Dump::read(&flight.wait_dumps(2));
        let b = second.numbers();
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
        let exit = Dump::read(&names[2]);
        assert_run(&exit.numbers(), 1201, 1250);
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
