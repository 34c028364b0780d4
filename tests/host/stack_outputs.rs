//! Where call stacks go besides JSON lines, end to end on the host kernel, with the C
//! chain of tests/host/stacks.rs (`main → outer → middle → inner → syscall(SYS_setpgid,
//! MAGIC, SEQ)`, frame pointers: `inner` is skipped, docs/stacks.md):
//! - `uevrec flamegraph` of a `record -g` file: exactly one folded stack with the exact
//!   count of calls, an SVG naming the chain, opened in headless Chromium;
//! - `uevrec flamegraph` of a `record -g --raw` perf.data: the folded lines of
//!   `uevrec decode FILE | uevrec flamegraph`, the chain with its exact count;
//! - `record -g --export` to a real OTLP receiver: every log record carries
//!   `code.stacktrace` naming middle, outer and main in order;
//! - `record -g --format otlp`: the same attribute in the file;
//! - `record --flight -g`: the dump's records carry their stacks, named also for a
//!   program that began before the recording and exited before the dump.

use std::path::Path;
use std::process::{Command, Stdio};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use serde_json::Value;

use super::stacks::{NR_SETPGID, build_chain, record_setpgid};
use crate::common::export::{attr, notices};
use crate::common::otlp_receiver::{Kind, Receiver};
use crate::common::tier::Tier;
use crate::common::{PATIENCE, bin, complete_lines, wait_for};

/// Run the chain `n` times with `magic`.
pub(crate) fn run_chain(exe: &Path, magic: u64, n: u64) {
    let status = Command::new(exe)
        .args([magic.to_string(), n.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Whether a JSON line is a record of the chain run with `magic`.
pub(crate) fn of_magic(v: &Value, magic: u64) -> bool {
    v["fields"]["args"][0] == magic
}

/// `uevrec flamegraph ARGS`: its exit status, standard output and standard error.
pub(crate) fn flamegraph(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(bin())
        .arg("flamegraph")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn flamegraph_of_a_recording_folds_the_chain_with_its_exact_count() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = require!(Tier::Host, build_chain(dir.path()));
    let out = dir.path().join("out.jsonl");
    const MAGIC: u64 = 424_242_380;
    const N: u64 = 150;
    let rec = record_setpgid(&out, &["-g"]);
    run_chain(&exe, MAGIC, N);
    wait_for("every record of the program", PATIENCE, || {
        let lines = complete_lines(&out);
        lines.iter().filter(|v| of_magic(v, MAGIC)).count() as u64 >= N
    });
    drop(rec);
    // This test's records (other tests' setpgid calls are in the file too), uevrec's own
    // lines, and one record of another program without a stack (counted, said).
    let text = std::fs::read_to_string(&out).unwrap();
    let mut mine: Vec<&str> = text
        .lines()
        .filter(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            of_magic(&v, MAGIC) || v["uevrec"].is_string()
        })
        .collect();
    assert_eq!(
        mine.iter().filter(|l| l.contains("\"stack\"")).count() as u64,
        N
    );
    let without = r#"{"time":"2026-01-01T00:00:00Z","system":"s","event":"e","pid":1,"fields":{}}"#;
    mine.push(without);
    let input = dir.path().join("mine.jsonl");
    std::fs::write(&input, mine.join("\n") + "\n").unwrap();
    let input = input.to_str().unwrap();

    let (ok, folded, err) = flamegraph(&["--folded", input]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = folded.lines().collect();
    assert_eq!(lines.len(), 1, "one stack: {folded}");
    let (stack, count) = lines[0].rsplit_once(' ').unwrap();
    assert_eq!(count, N.to_string(), "{folded}");
    assert!(
        stack.starts_with("raw_syscalls:sys_enter;"),
        "the event is the root: {stack}"
    );
    assert!(
        stack.contains(";main;outer;middle;"),
        "outermost first: {stack}"
    );
    assert!(
        err.contains("1 records without a stack"),
        "the record without a stack is said: {err}"
    );
    // By process, user frames only.
    let (ok, folded, err) = flamegraph(&["--folded", "--by", "comm", "--user-only", input]);
    assert!(ok, "{err}");
    let (stack, count) = folded.trim_end().rsplit_once(' ').unwrap();
    assert_eq!(count, N.to_string());
    assert!(stack.starts_with("chain;"), "{stack}");
    assert!(!stack.contains("_[k]"), "no kernel frames: {stack}");
    assert!(stack.ends_with(";main;outer;middle;syscall"), "{stack}");

    // The SVG: the chain's frames with their counts, the title with the event.
    let svg = dir.path().join("out.svg");
    let (ok, _, err) = flamegraph(&[input, "-o", svg.to_str().unwrap()]);
    assert!(ok, "{err}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<?xml") && text.trim_end().ends_with("</svg>"));
    for name in ["main", "outer", "middle"] {
        assert!(
            text.contains(&format!("<title>{name} ({N} records, ")),
            "{name} with {N} records in the SVG"
        );
    }
    assert!(
        text.contains(&format!("raw_syscalls:sys_enter: {N} records")),
        "the title says the event and the count"
    );
    in_chromium(&svg, dir.path());
}

/// A perf.data is decoded and folded in one step: the same lines as the pipe through
/// `uevrec decode`, and the chain (its own program name, so other tests' chains are told
/// apart) with the exact number of calls.
#[test]
fn flamegraph_of_a_raw_perf_data_equals_decode_piped_into_it() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let built = require!(Tier::Host, build_chain(dir.path()));
    let exe = dir.path().join("flamechain");
    std::fs::rename(&built, &exe).unwrap();
    let out = dir.path().join("out.jsonl");
    let data = dir.path().join("out.data");
    const MAGIC: u64 = 424_242_381;
    const N: u64 = 120;
    let rec = record_setpgid(&out, &["-g", "--raw", data.to_str().unwrap()]);
    run_chain(&exe, MAGIC, N);
    wait_for("every record of the program", PATIENCE, || {
        let lines = complete_lines(&out);
        lines.iter().filter(|v| of_magic(v, MAGIC)).count() as u64 >= N
    });
    drop(rec);
    let data = data.to_str().unwrap();

    let (ok, direct, err) = flamegraph(&["--folded", "--by", "comm", data]);
    assert!(ok, "{err}");
    let mut decoded = Command::new(bin())
        .args(["decode", "--quiet", data])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let piped = Command::new(bin())
        .args(["flamegraph", "--folded", "--by", "comm"])
        .stdin(decoded.stdout.take().unwrap())
        .output()
        .unwrap();
    assert!(decoded.wait().unwrap().success());
    assert!(piped.status.success());
    assert_eq!(direct, String::from_utf8(piped.stdout).unwrap());
    let mine: Vec<&str> = direct
        .lines()
        .filter(|l| l.starts_with("flamechain;"))
        .collect();
    assert_eq!(mine.len(), 1, "one stack of the program: {direct}");
    let (stack, count) = mine[0].rsplit_once(' ').unwrap();
    assert_eq!(count, N.to_string(), "{direct}");
    assert!(
        stack.contains(";main;outer;middle;"),
        "named, outermost first: {stack}"
    );

    // Standard input redirected from the file reads the same; piped, it is refused.
    let redirected = Command::new(bin())
        .args(["flamegraph", "--folded", "--by", "comm"])
        .stdin(std::fs::File::open(data).unwrap())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(redirected.stdout).unwrap(), direct);
    let mut cat = Command::new("cat")
        .arg(data)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let piped = Command::new(bin())
        .args(["flamegraph", "--folded"])
        .stdin(cat.stdout.take().unwrap())
        .output()
        .unwrap();
    let _ = cat.wait();
    assert!(!piped.status.success());
    let err = String::from_utf8_lossy(&piped.stderr);
    assert!(err.contains("standard input is a piped perf.data"), "{err}");
}

/// Headless Chromium loads the SVG (its script runs) and has the frames in its DOM; a
/// screenshot is taken.
fn in_chromium(svg: &Path, dir: &Path) {
    let found = Command::new("chromium")
        .arg("--version")
        .stdout(Stdio::null())
        .status();
    require!(
        Tier::Host,
        found.map_err(|e| format!(
            "chromium is needed to open the flame graph (apt-get install chromium): {e}"
        ))
    );
    let url = format!("file://{}", svg.display());
    let headless = |extra: &[&str]| {
        Command::new("chromium")
            .args(["--headless", "--no-sandbox", "--disable-gpu"])
            .arg(format!(
                "--user-data-dir={}",
                dir.join("chromium").display()
            ))
            .args(extra)
            .arg(&url)
            .output()
            .unwrap()
    };
    let dom = headless(&["--dump-dom"]);
    let text = String::from_utf8_lossy(&dom.stdout);
    for name in ["main", "outer", "middle"] {
        assert!(
            text.contains(&format!("<title>{name} (")),
            "{name} in Chromium's DOM: {}",
            String::from_utf8_lossy(&dom.stderr)
        );
    }
    let png = dir.join("flamegraph.png");
    let shot = headless(&[
        &format!("--screenshot={}", png.display()),
        "--window-size=1200,400",
    ]);
    let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 1000,
        "a screenshot of the graph: {}",
        String::from_utf8_lossy(&shot.stderr)
    );
}

/// The `code.stacktrace` text of a log record.
fn stacktrace(r: &LogRecord) -> Option<&str> {
    match attr(r, "code.stacktrace")?.value.as_ref()? {
        any_value::Value::StringValue(s) => Some(s),
        _ => None,
    }
}

/// The chain in a stack trace text, in order: middle, outer, main, each a line as perf
/// script prints it.
fn assert_chain(text: &str, exe: &Path) {
    let at = |name: &str| {
        text.lines().position(|l| {
            l.contains(&format!(" {name}+0x")) && l.ends_with(&format!("({})", exe.display()))
        })
    };
    let (middle, outer, main) = (at("middle"), at("outer"), at("main"));
    assert!(
        middle.is_some() && middle < outer && outer < main,
        "middle, outer, main in order:\n{text}"
    );
}

/// The `code.stacktrace` of every log record of an event in `requests` that names
/// `module` (the chain's; other tests' programs call setpgid too); every such record must
/// have one.
fn chain_stacktraces(requests: &[ExportLogsServiceRequest], module: &str) -> Vec<String> {
    let mut texts = Vec::new();
    for req in requests {
        for rl in &req.resource_logs {
            for sl in &rl.scope_logs {
                for r in &sl.log_records {
                    if attr(r, "linux.tracepoint").is_none() {
                        continue; // uevrec's own notices
                    }
                    let text = stacktrace(r).expect("code.stacktrace on every record");
                    if text.contains(module) {
                        texts.push(text.to_owned());
                    }
                }
            }
        }
    }
    texts
}

#[test]
fn export_with_stacks_puts_code_stacktrace_on_every_record() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = require!(Tier::Host, build_chain(dir.path()));
    const MAGIC: u64 = 424_242_381;
    const N: u64 = 100;
    let rx = Receiver::start(Kind::Grpc);
    let mut rec = Command::new(bin())
        .args(["record", "--quiet", "-g", "--otlp-protocol", "grpc"])
        .args(["--otlp-endpoint", &rx.endpoint()])
        .args(["-e", "raw_syscalls:sys_enter", "--filter"])
        .arg(format!("id == {NR_SETPGID}"))
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
        .env_remove("OTEL_EXPORTER_OTLP_HEADERS")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the attached notice at the receiver", PATIENCE, || {
        notices(&rx.logs()).iter().any(|w| w == "attached")
    });
    run_chain(&exe, MAGIC, N);
    let module = format!("({})", exe.display());
    let mine = |rx: &Receiver| chain_stacktraces(&rx.logs(), &module);
    wait_for("every record of the program", PATIENCE, || {
        mine(&rx).len() as u64 >= N
    });
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    assert!(crate::common::wait_exit(&mut rec, PATIENCE).is_ok_and(|s| s.success()));
    let texts = mine(&rx);
    assert_eq!(texts.len() as u64, N);
    for text in &texts {
        assert_chain(text, &exe);
    }
}

#[test]
fn otlp_file_with_stacks_has_code_stacktrace() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = require!(Tier::Host, build_chain(dir.path()));
    const MAGIC: u64 = 424_242_382;
    const N: u64 = 20;
    let out = dir.path().join("out.otlp");
    let mut rec = Command::new(bin())
        .args(["record", "--quiet", "-g", "--format", "otlp"])
        .args(["-e", "raw_syscalls:sys_enter", "--filter"])
        .arg(format!("id == {NR_SETPGID}"))
        .arg("-o")
        .arg(&out)
        .spawn()
        .unwrap();
    // The attached notice is a log record of the file once its batch ended.
    wait_for("the attached notice in the OTLP file", PATIENCE, || {
        std::fs::read_to_string(&out).is_ok_and(|t| t.contains("{\"stringValue\":\"attached\"}"))
    });
    run_chain(&exe, MAGIC, N);
    let module = format!("({})", exe.display());
    let texts = || -> Vec<String> {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        // A line being written does not parse yet.
        let requests: Vec<ExportLogsServiceRequest> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        chain_stacktraces(&requests, &module)
    };
    wait_for("the program's records in the OTLP file", PATIENCE, || {
        texts().len() as u64 >= N
    });
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    assert!(crate::common::wait_exit(&mut rec, PATIENCE).is_ok_and(|s| s.success()));
    let texts = texts();
    assert_eq!(texts.len() as u64, N);
    for text in &texts {
        assert_chain(text, &exe);
    }
}

#[test]
fn flight_dump_keeps_the_stacks() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = require!(Tier::Host, build_chain(dir.path()));
    const MAGIC: u64 = 424_242_383;
    const N: u64 = 50;
    let dump = flight_dump_of(dir.path(), &exe, MAGIC, N, || run_chain(&exe, MAGIC, N));
    // And the dump draws.
    let (ok, folded, err) = flamegraph(&["--folded", "--user-only", dump.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(folded.contains(";main;outer;middle;"), "{folded}");
}

/// A program that began before the recording and exited before the dump still gets its
/// names: the recording stages every running process's mappings at its start (as `perf
/// record` synthesizes them), where reading `/proc` at the dump would find it gone.
#[test]
fn flight_dump_names_a_program_that_began_before_and_exited() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The chain, waiting for a byte on standard input before its calls.
    let waiting = crate::common::chain::CHAIN_C.replace(
        "int main(int argc, char **argv) {",
        "int main(int argc, char **argv) {\n    char go;\n    if (read(0, &go, 1) != 1) return 1;",
    );
    let exe = require!(
        Tier::Host,
        crate::common::chain::build_c(
            dir.path(),
            "waiting",
            &waiting,
            "waiting_chain",
            &["-fno-omit-frame-pointer"],
        )
    );
    const MAGIC: u64 = 424_242_384;
    const N: u64 = 40;
    let mut program = Command::new(&exe)
        .args([MAGIC.to_string(), N.to_string()])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    flight_dump_of(dir.path(), &exe, MAGIC, N, || {
        use std::io::Write;
        let mut stdin = program.stdin.take().unwrap();
        stdin.write_all(b"g").unwrap();
        drop(stdin);
        assert!(program.wait().unwrap().success());
    });
}

/// `record -g --flight 4M` of the setpgid calls, dumps at `base`, attached.
pub(crate) fn flight_of_setpgid(base: &Path) -> crate::common::flight::Flight {
    let filter = format!("id == {NR_SETPGID}");
    let flight = crate::common::flight::Flight::start(
        base,
        &[
            "-g",
            "--flight",
            "4M",
            "-e",
            "raw_syscalls:sys_enter",
            "--filter",
            &filter,
        ],
    );
    flight.wait_attached(1);
    flight
}

/// A `record --flight -g` of the chain's calls, `run` making them once it attached, then
/// one dump on SIGUSR1: its path, after checking that it holds the `n` calls of `magic`,
/// each naming middle, outer and main in `exe`.
fn flight_dump_of(
    dir: &Path,
    exe: &Path,
    magic: u64,
    n: u64,
    run: impl FnOnce(),
) -> std::path::PathBuf {
    let flight = flight_of_setpgid(&dir.join("flight"));
    run();
    // Each record is in the buffer once the session drained it; a dump on SIGUSR1 cuts
    // at its time: wait a little, as the flight tests do.
    std::thread::sleep(std::time::Duration::from_millis(500));
    flight.signal(libc::SIGUSR1);
    let dump = flight.wait_dumps(1);
    flight.stop();
    let text = std::fs::read_to_string(&dump).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v| of_magic(v, magic))
        .collect();
    assert_eq!(records.len() as u64, n, "every call in the dump");
    for r in &records {
        let names: Vec<&str> = r["stack"]
            .as_array()
            .expect("a stack on every dumped record")
            .iter()
            .filter(|f| f["module"] == exe.to_str().unwrap())
            .filter_map(|f| f["symbol"].as_str())
            .collect();
        assert_eq!(names, ["middle", "outer", "main"], "{r}");
    }
    dump
}
