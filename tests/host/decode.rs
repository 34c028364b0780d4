//! `uevrec decode` against `perf script` on perf.data files perf records here, file mode
//! (`perf record -o FILE`) and pipe mode (`perf record -o -`, streamed through a pipe into
//! standard input), for `sched:sched_switch`, `sched:sched_process_exec` and
//! `raw_syscalls:sys_enter`: every line of those events, in order, equals perf script's
//! for the same sample: pid, tid, cpu, wall-clock time to the nanosecond (perf's `tod`,
//! both from HEADER_CLOCK_DATA) and every field (tests/common/perf_script.rs renders
//! uevrec's JSON the way perf prints it). Needs root, tracefs and perf (tier `host`).
//! Also: selectors, `--count` and `-o` on such a file, and corrupt input (tier `pure`,
//! the shared corpus).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::common::bin;
use crate::common::perf_script::{as_perf_line, normalise, perf_script};
use crate::common::tier::Tier;

const EVENTS: [&str; 3] = [
    "sched:sched_switch",
    "sched:sched_process_exec",
    "raw_syscalls:sys_enter",
];

/// Why perf cannot record here, if it cannot.
fn skip_reason() -> Option<String> {
    crate::common::perf_skip_reason()
}

macro_rules! require_host {
    () => {
        require!(Tier::Host, skip_reason().map_or(Ok(()), Err))
    };
}

/// `perf record` of the three events over a workload that execs, switches and makes
/// syscalls; `-k CLOCK_MONOTONIC` for HEADER_CLOCK_DATA. Pipe mode writes the stream to
/// `out` through perf's standard output.
fn perf_record(out: &Path, pipe: bool) {
    let mut cmd = Command::new("perf");
    cmd.args(["record", "-q", "-k", "CLOCK_MONOTONIC"]);
    for e in EVENTS {
        cmd.args(["-e", e]);
    }
    cmd.arg("-o");
    if pipe {
        cmd.arg("-").stdout(fs::File::create(out).unwrap());
    } else {
        cmd.arg(out).stdout(Stdio::null());
    }
    cmd.args([
        "--",
        "sh",
        "-c",
        "for i in 1 2 3 4 5; do /bin/true; sleep 0.01; done; \
         perl -e 'getppid() for 1..2000; select(undef, undef, undef, 0.01) for 1..5'",
    ]);
    let st = cmd.stderr(Stdio::piped()).output().unwrap();
    assert!(
        st.status.success(),
        "perf record: {}",
        String::from_utf8_lossy(&st.stderr)
    );
}

/// A temporary directory with a [`perf_record`] in it (`pipe.data` or `perf.data`).
fn recorded(pipe: bool) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir
        .path()
        .join(if pipe { "pipe.data" } else { "perf.data" });
    perf_record(&file, pipe);
    (dir, file)
}

/// A file-mode [`recorded`] file and its `uevrec decode -q` (which succeeded).
fn recorded_and_decoded() -> (tempfile::TempDir, PathBuf, Output) {
    let (dir, file) = recorded(false);
    let out = decode(&["-q", file.to_str().unwrap()], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (dir, file, out)
}

/// `uevrec decode ARGS`, with `stdin_from`'s bytes written into a pipe on its standard
/// input (a pipe, not the file: a regular file on stdin is mapped, not streamed).
fn decode(args: &[&str], stdin_from: Option<&Path>) -> Output {
    let mut cmd = Command::new(bin());
    cmd.arg("decode")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let Some(path) = stdin_from else {
        return cmd.stdin(Stdio::null()).output().unwrap();
    };
    let mut child = cmd.stdin(Stdio::piped()).spawn().unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let bytes = fs::read(path).unwrap();
    let writer = std::thread::spawn(move || pipe.write_all(&bytes));
    let out = child.wait_with_output().unwrap();
    // A reader that stopped early (--count) may leave the rest unread.
    match writer.join().unwrap() {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        r => r.unwrap(),
    }
    out
}

/// The lines of `text` but the schema lines (the tests that count them:
/// `schema_lines_describe_each_decoded_event_once`).
fn json_lines(text: &[u8]) -> Vec<Value> {
    all_json_lines(text)
        .into_iter()
        .filter(|v| v["uevrec"] != "schema")
        .collect()
}

/// Every line of `text`, parsed.
fn all_json_lines(text: &[u8]) -> Vec<Value> {
    String::from_utf8(text.to_vec())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// uevrec's lines of the three events equal perf script's, one for one.
fn compare(file: &Path, out: &Output, perf_stdin: bool) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let perf = perf_script(file, perf_stdin).unwrap();
    let expected: Vec<String> = perf
        .lines()
        .filter(|l| EVENTS.iter().any(|e| l.contains(&format!(" {e}:"))))
        .map(normalise)
        .collect();
    let lines = json_lines(&out.stdout);
    let got: Vec<String> = lines.iter().filter_map(as_perf_line).collect();
    // perf's own ring may drop samples under load (a PERF_RECORD_LOST in the file, which
    // uevrec writes as a `lost` line and perf script leaves out, as it leaves out the
    // samples): allowed, and said. Any other line that is not one of the events fails.
    let (lost, odd): (Vec<&Value>, Vec<&Value>) = lines
        .iter()
        .filter(|v| as_perf_line(v).is_none())
        .partition(|v| v["uevrec"] == "lost");
    assert!(
        odd.is_empty(),
        "lines that are not one of the three events: {odd:?}"
    );
    if !lost.is_empty() {
        let n: u64 = lost.iter().filter_map(|v| v["lost"].as_u64()).sum();
        eprintln!(
            "{}: perf's ring lost {n} records ({} lost lines); perf script leaves them out too",
            file.display(),
            lost.len()
        );
    }
    for e in EVENTS {
        let n = got.iter().filter(|l| l.contains(&format!(" {e}:"))).count();
        assert!(n > 0, "no {e} recorded");
    }
    assert!(got.len() > 2000, "{} lines", got.len());
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(g, e, "line {i} of {}", file.display());
    }
    assert_eq!(got.len(), expected.len());
    eprintln!(
        "{}: {} lines equal perf script's",
        file.display(),
        got.len()
    );
}

#[test]
fn file_mode_equals_perf_script() {
    require_host!();
    let (_dir, file) = recorded(false);
    let out = decode(&[file.to_str().unwrap()], None);
    compare(&file, &out, false);
}

#[test]
fn pipe_mode_from_stdin_equals_perf_script() {
    require_host!();
    let (_dir, file) = recorded(true);
    let out = decode(&["-"], Some(&file));
    compare(&file, &out, true);
    // The same stream straight from perf record's pipe.
    let mut rec = Command::new("perf")
        .args([
            "record",
            "-q",
            "-k",
            "CLOCK_MONOTONIC",
            "-e",
            "sched:sched_process_exec",
            "-o",
            "-",
        ])
        .args(["--", "sh", "-c", "/bin/true; /bin/true"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = Command::new(bin())
        .args(["decode", "-q"])
        .stdin(rec.stdout.take().unwrap())
        .output()
        .unwrap();
    assert!(rec.wait().unwrap().success());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json_lines(&out.stdout);
    let execs = lines
        .iter()
        .filter(|v| v["fields"]["filename"] == "/bin/true")
        .count();
    assert_eq!(execs, 2, "{lines:?}");
}

#[test]
fn selectors_count_and_output_file() {
    require_host!();
    let (dir, file) = recorded(false);
    let out_file = dir.path().join("out.jsonl");
    let args = [
        file.to_str().unwrap(),
        "-e",
        "raw_syscalls:*",
        "--count",
        "100",
        "-o",
    ];
    let out = decode(&args[..5], None);
    assert!(out.status.success());
    assert_eq!(
        json_lines(&out.stdout).len(),
        100,
        "--count on standard output"
    );
    let out = Command::new(bin())
        .arg("decode")
        .args(args)
        .arg(&out_file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json_lines(&fs::read(&out_file).unwrap());
    assert_eq!(lines.len(), 100);
    assert!(lines.iter().all(|v| v["event"] == "sys_enter"));
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&fs::metadata(&out_file).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o640);
    // Without clock data: time null, said once on stderr.
    let plain = dir.path().join("noclock.data");
    let st = Command::new("perf")
        .args(["record", "-q", "-e", "sched:sched_process_exec", "-o"])
        .arg(&plain)
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    assert!(st.status.success());
    let out = decode(&[plain.to_str().unwrap()], None);
    assert!(out.status.success());
    let lines = json_lines(&out.stdout);
    assert!(!lines.is_empty() && lines.iter().all(|v| v["time"].is_null()));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("HEADER_CLOCK_DATA").count(), 1, "{err}");
}

fn corpus_pipe_file() -> Option<Vec<u8>> {
    let dir = std::env::var_os("UEVREC_CORPUS_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"),
        PathBuf::from,
    );
    let path = dir.join("perf-data/LinuxTracepoints-pipe.data");
    match fs::read(&path) {
        Ok(b) => Some(b),
        Err(e) => {
            crate::common::tier::skip(
                Tier::Pure,
                &format!("{}: {e} (set UEVREC_CORPUS_DIR)", path.display()),
            );
            None
        }
    }
}

/// A cut stream: the lines before the cut, exit 1, the byte where it stopped.
#[test]
fn truncated_input_decodes_what_it_can_and_says_where() {
    let Some(bytes) = corpus_pipe_file() else {
        return;
    };
    let mut child = Command::new(bin())
        .args(["decode", "-q", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&bytes[..100_003])
        .unwrap();
    let out = child.wait_with_output().unwrap();
    // Salvaged (issue 26): the 60 whole records, then the truncated notice; exit 3.
    assert_eq!(out.status.code(), Some(3));
    let lines = json_lines(&out.stdout);
    assert_eq!(lines.len(), 61);
    assert_eq!(lines[60]["what"], "truncated", "{}", lines[60]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "truncated input salvaged: the input ends inside the record at byte 100000 \
             (3 of its 8 bytes present)"
        ),
        "{err}"
    );
}

/// `--count` on a stream stops early without calling the unread rest a truncation.
#[test]
fn count_on_a_stream_exits_zero() {
    require_host!();
    let (_dir, file) = recorded(true);
    for count in ["1", "5", "100"] {
        let out = decode(&["-q", "--count", count, "-"], Some(&file));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "--count {count}: {err}");
        assert_eq!(json_lines(&out.stdout).len().to_string(), count);
        assert!(!err.contains("stopped"), "{err}");
    }
}

/// A decoded perf.data describes each event before its first record, with the format
/// the file stores (here: this machine's format files).
#[test]
fn schema_lines_describe_each_decoded_event_once() {
    require_host!();
    let (_dir, _file, out) = recorded_and_decoded();
    let lines = all_json_lines(&out.stdout);
    let root = std::env::var_os("UEVREC_TRACEFS").unwrap_or_else(|| "/sys/kernel/tracing".into());
    for key in EVENTS {
        let at: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i]["uevrec"] == "schema" && lines[i]["event"] == key)
            .collect();
        assert_eq!(at.len(), 1, "{key}: one schema line");
        let (system, event) = key.split_once(':').unwrap();
        let first = lines
            .iter()
            .position(|v| v["system"] == system && v["event"] == event)
            .unwrap();
        assert!(at[0] < first, "{key}: described before its first record");
        let text = fs::read_to_string(
            Path::new(&root)
                .join("events")
                .join(system)
                .join(event)
                .join("format"),
        );
        let format = uevrec_parsers::parse_format(&text.unwrap()).unwrap();
        assert_eq!(
            crate::common::schema_line::format_from_schema(&lines[at[0]]),
            Ok(format),
            "{key}"
        );
    }
}

/// Context from the file (`PERF_RECORD_COMM`/`FORK`/`EXIT`, which perf record writes for
/// the workload): every sample's `comm` equals the comm perf script resolves from the same
/// records (its own thread map, an independent reader), line for line; the workload's
/// exec of `/bin/true` shows `true` on its exec record; `--no-context` leaves the keys out.
#[test]
fn comm_from_the_file_equals_perf_scripts() {
    require_host!();
    let (_dir, file, out) = recorded_and_decoded();
    let lines = json_lines(&out.stdout);
    let expected = crate::common::comm::perf_script(&file, &EVENTS);
    let got = crate::common::comm::decoded(&lines, |v| format!(":{}", v["tid"]));
    crate::common::comm::assert_same(&got, &expected);
    let exec_true = lines
        .iter()
        .find(|v| v["event"] == "sched_process_exec" && v["fields"]["filename"] == "/bin/true")
        .expect("an exec of /bin/true");
    assert_eq!(exec_true["comm"], "true", "{exec_true}");
    eprintln!("{} lines: comm equals perf script's", got.len());

    let out = decode(&["-q", "--no-context", file.to_str().unwrap()], None);
    assert!(out.status.success());
    assert!(
        json_lines(&out.stdout)
            .iter()
            .all(|v| v.get("comm").is_none() && v.get("cgroup").is_none())
    );
}

/// A mapped input truncated by another program while `decode` reads it: a message saying
/// so and exit status 1, not a death by SIGBUS. The decoder is held on a full pipe (its
/// output, ~600 KB, is more than the pipe and its 256 KiB write buffer take) while the
/// file is cut to its first page; what follows needs pages past the new end.
#[test]
fn input_truncated_while_mapped_is_a_message_and_exit_1() {
    require_host!();
    let (_dir, file) = recorded(false);
    // One thread: with more, the buffers between the decoder and the writer hold the
    // whole output, so the decoding would be over before the cut.
    let child = Command::new(bin())
        .args(["decode", "-q", "--threads", "1", file.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(4096)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains("shrank while it was being read"),
        "{stderr}"
    );
    // What was written before the cut is whole lines of JSON.
    for line in out.stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        serde_json::from_slice::<Value>(line).unwrap();
    }
}

/// Why trace-cmd cannot record here, if it cannot.
fn trace_cmd_skip_reason() -> Option<String> {
    if let Some(why) = skip_reason() {
        return Some(why);
    }
    let found = Command::new("trace-cmd")
        .arg("-h")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    (!found).then(|| "trace-cmd is not installed (apt-get install trace-cmd)".to_string())
}

/// The top tracefs instance's events `events`, enabled until dropped (then disabled and
/// the buffer cleared). `trace-cmd record` cannot run in this sandbox (it writes
/// `/proc/sys/kernel/ftrace_enabled` and `set_ftrace_pid`, refused here), so the test
/// enables the events itself (and `tracing_on`, restored after) and `trace-cmd extract`
/// writes the file; an instance's buffer would be a named buffer of the file, which
/// `uevrec decode` does not read.
struct TopEvents(Vec<PathBuf>, String);

impl TopEvents {
    fn enable(events: &[&str]) -> Self {
        let root = Path::new("/sys/kernel/tracing");
        fs::write(root.join("trace"), "").unwrap();
        let on = fs::read_to_string(root.join("tracing_on")).unwrap();
        fs::write(root.join("tracing_on"), "1").unwrap();
        let paths: Vec<PathBuf> = events
            .iter()
            .map(|e| {
                let (system, name) = e.split_once(':').unwrap();
                root.join("events").join(system).join(name).join("enable")
            })
            .collect();
        for p in &paths {
            fs::write(p, "1").unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        }
        TopEvents(paths, on)
    }
}

impl TopEvents {
    /// Disable the events (what they recorded stays in the buffer).
    fn stop(&self) {
        for p in &self.0 {
            let _ = fs::write(p, "0");
        }
    }
}

impl Drop for TopEvents {
    fn drop(&mut self) {
        self.stop();
        let _ = fs::write("/sys/kernel/tracing/trace", "");
        let _ = fs::write("/sys/kernel/tracing/tracing_on", self.1.trim());
    }
}

/// trace.dat context (tier host): a trace.dat written by trace-cmd (`extract` of the top
/// instance) with `sched:sched_process_exec` and `raw_syscalls:sys_enter` while a shell
/// renames itself and runs programs; every event line's `comm` (from the file's saved
/// cmdlines) equals the comm `trace-cmd report` prints on the same record, line for line
/// (a pid the file saved no name for: no key, where trace-cmd prints `<...>`; pid 0:
/// no key, where it prints `<idle>`).
#[test]
fn trace_dat_comm_equals_trace_cmd_reports() {
    require!(Tier::Host, trace_cmd_skip_reason().map_or(Ok(()), Err));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.dat");
    {
        let events = TopEvents::enable(&["sched:sched_process_exec", "raw_syscalls:sys_enter"]);
        let status = Command::new("sh")
            .args([
                "-c",
                "printf uevrec-td > /proc/self/comm; /bin/true; /bin/echo hi > /dev/null; \
                 sleep 0.05",
            ])
            .status()
            .unwrap();
        assert!(status.success());
        events.stop();
        let out = Command::new("trace-cmd")
            .args(["extract", "-o"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "trace-cmd extract: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let report = Command::new("trace-cmd")
        .args(["report", "-i"])
        .arg(&file)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(report.status.success());
    // `COMM-PID [CPU] SECS: EVENT: …`; the comm may hold spaces and dashes.
    let expected: Vec<(String, String)> = String::from_utf8_lossy(&report.stdout)
        .lines()
        .filter_map(|l| {
            let (head, _) = l.split_once("] ")?;
            let (task, _cpu) = head.rsplit_once('[')?;
            let (comm, pid) = task.trim().rsplit_once('-')?;
            Some((comm.to_string(), pid.to_string()))
        })
        .collect();
    let out = decode(&["-q", "--no-schema", file.to_str().unwrap()], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json_lines(&out.stdout);
    assert!(lines.iter().all(|v| v["pid"] == v["tid"]));
    let got = crate::common::comm::decoded(&lines, |v| match v["tid"].as_u64() {
        Some(0) => "<idle>".to_string(),
        _ => "<...>".to_string(),
    });
    crate::common::comm::assert_same(&got, &expected);
    let named = got.iter().filter(|(c, _)| !c.starts_with('<')).count();
    assert!(named > 0, "no record has a saved name");
    let renamed = got.iter().filter(|(c, _)| c == "uevrec-td").count();
    eprintln!(
        "{} records: comm equals trace-cmd report's ({named} named, {renamed} `uevrec-td`)",
        got.len()
    );
    assert!(
        renamed > 0,
        "the renamed shell's records show its saved name"
    );
    let out = decode(&["-q", "--no-context", file.to_str().unwrap()], None);
    assert!(
        json_lines(&out.stdout)
            .iter()
            .all(|v| v.get("comm").is_none())
    );
}
