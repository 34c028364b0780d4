//! The command line without kernel privileges: parsing, error messages and their fixes,
//! output-file rules, `list` on a hand-built tracefs tree (the unprivileged run against the
//! host kernel: tests/host/cli.rs).

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use assert_cmd::Command;
use uevrec_samples::register::format_file_text;

fn uevrec() -> Command {
    let mut c = Command::cargo_bin("uevrec").unwrap();
    c.env_remove("UEVREC_TRACEFS");
    c
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A tracefs-like tree: `events/<system>/<event>/format` for each given format text.
fn fake_tracefs(dir: &Path, events: &[(&str, &str, &str)]) {
    fs::create_dir_all(dir.join("events")).unwrap();
    for (system, event, format) in events {
        let d = dir.join("events").join(system).join(event);
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("format"), format).unwrap();
    }
}

fn exec_format() -> String {
    format_file_text(
        "sched_process_exec",
        312,
        &[
            ("__data_loc char[] filename", 8, 4, false),
            ("pid_t pid", 12, 4, true),
            ("pid_t old_pid", 16, 4, true),
        ],
        "\"filename=%s pid=%d old_pid=%d\", __get_str(filename), REC->pid, REC->old_pid",
    )
}

/// As a 6.12 kernel prints `test u32 a; char[8] b` (garbage array length included).
fn user_format() -> String {
    format_file_text(
        "test",
        1117,
        &[("u32 a", 8, 4, false), ("char b[1055984226]", 12, 8, true)],
        "\"a=%u b=%s\", REC->a, REC->b",
    )
}

#[test]
fn help_lists_commands_and_exit_statuses() {
    let out = uevrec().arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for word in ["record", "tail", "list", "Exit status", "141"] {
        assert!(text.contains(word), "--help lacks {word}: {text}");
    }
    let out = uevrec().args(["record", "--help"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    for opt in [
        "--rotate-size",
        "--rotate-keep",
        "--file-mode",
        "--follow-symlinks",
        "--duration",
        "--count",
    ] {
        assert!(text.contains(opt), "record --help lacks {opt}");
    }
}

#[test]
fn bad_selector_is_a_usage_error() {
    let out = uevrec()
        .args(["record", "--tracefs", "/nonexistent", "nocolon"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert!(
        err.contains("nocolon") && err.contains("SYSTEM:EVENT"),
        "{err}"
    );
    let out = uevrec().args(["tail", "-e", "sched:"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
}

#[test]
fn bad_sizes_and_durations_are_usage_errors() {
    for args in [
        &["record", "-o", "x", "--rotate-size", "12Q"][..],
        &["record", "-o", "x", "--rotate-size", "0"],
        &["record", "-m", "0"],
        &["record", "-m", "lots"],
        &["record", "--duration", "soon"],
        &["record", "--file-mode", "999"],
        &["record", "--rotate-size", "1M"], // needs -o
    ] {
        let out = uevrec().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr_of(&out));
    }
    let out = uevrec()
        .args(["record", "-o", "x", "--rotate-size", "12Q"])
        .output()
        .unwrap();
    assert!(
        stderr_of(&out).contains("expected a size"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn missing_tracefs_path_says_how_to_mount() {
    for cmd in ["record", "tail", "list"] {
        let out = uevrec()
            .args([cmd, "--tracefs", "/nonexistent/tracing", "-e", "sched:*"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{cmd}");
        let err = stderr_of(&out);
        assert!(
            err.contains("/nonexistent/tracing") && err.contains("mount"),
            "{cmd}: {err}"
        );
    }
    // The environment variable works like --tracefs.
    let out = uevrec()
        .env("UEVREC_TRACEFS", "/nonexistent/env")
        .args(["list"])
        .output()
        .unwrap();
    assert!(
        stderr_of(&out).contains("/nonexistent/env"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn tracefs_without_user_events_names_the_kernel_option() {
    let dir = tempfile::tempdir().unwrap();
    fake_tracefs(
        dir.path(),
        &[("sched", "sched_process_exec", &exec_format())],
    );
    let tfs = dir.path().to_str().unwrap();
    for cmd in ["record", "tail", "list"] {
        let out = uevrec().args([cmd, "--tracefs", tfs]).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{cmd}: {}", stderr_of(&out));
        let err = stderr_of(&out);
        assert!(
            err.contains("CONFIG_USER_EVENTS") && err.contains("-e"),
            "{cmd}: {err}"
        );
    }
}

#[test]
fn output_symlink_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("precious");
    fs::write(&target, "keep me\n").unwrap();
    let link = dir.path().join("out.json");
    symlink(&target, &link).unwrap();
    let out = uevrec()
        .args(["record", "--tracefs", "/nonexistent", "-e", "sched:*", "-o"])
        .arg(&link)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(
        err.contains("symbolic link") && err.contains("--follow-symlinks"),
        "{err}"
    );
    assert!(err.contains("out.json"), "{err}");
    assert_eq!(fs::read_to_string(&target).unwrap(), "keep me\n");
}

#[test]
fn list_shows_fields_and_status() {
    let dir = tempfile::tempdir().unwrap();
    fake_tracefs(
        dir.path(),
        &[
            ("user_events", "test", &user_format()),
            ("sched", "sched_process_exec", &exec_format()),
        ],
    );
    fs::write(dir.path().join("user_events_data"), "").unwrap();
    fs::write(
        dir.path().join("user_events_status"),
        "test # Used by perf\n\nActive: 1\nBusy: 1\n",
    )
    .unwrap();
    let tfs = dir.path().to_str().unwrap();

    let out = uevrec().args(["list", "--tracefs", tfs]).output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("user_events:test") && text.contains("Used by perf"),
        "{text}"
    );
    assert!(
        text.contains(" a ") && text.contains("offset 12") && text.contains("size 8"),
        "{text}"
    );
    assert!(
        !text.contains("sched"),
        "default selectors are user_events only: {text}"
    );

    let out = uevrec()
        .args(["list", "--json", "--tracefs", tfs, "-e", "sched:*"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert_eq!(lines[0]["system"], "sched");
    assert_eq!(lines[0]["event"], "sched_process_exec");
    assert!(lines[0].get("status").is_none());
    assert_eq!(lines[0]["format"]["id"], 312);
    assert_eq!(lines[0]["format"]["fields"][0]["name"], "filename");
}

/// `uevrec decode` on trace-cmd trace.dat files (v6; v7 uncompressed, zstd, and one with
/// events the kernel dropped; `parsers/tests/data/trace-dat/README.md` says how each was
/// made): every record comes out as one event line, in the order and with the CPU, pid and
/// event name `trace-cmd report` printed for the same file, the drops as `lost` lines; the
/// same bytes on standard input (through a pipe) give the same lines.
#[test]
fn decode_reads_trace_dat_like_trace_cmd_report() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("parsers/tests/data/trace-dat");
    for name in ["v6", "v7-none", "v7-zstd", "v7-lost"] {
        let dat = dir.join(format!("{name}.dat"));
        let report = fs::read_to_string(dir.join(format!("{name}.report"))).unwrap();
        // `comm-pid [cpu] secs: event: fields` and `CPU:n [N EVENTS DROPPED]`.
        let mut want = Vec::new();
        for line in report.lines() {
            if let Some(rest) = line.strip_prefix("CPU:") {
                let (cpu, n) = rest.split_once(" [").unwrap();
                let n = n.split_whitespace().next().unwrap();
                want.push(format!("lost cpu {cpu} {n}"));
            } else if let Some((head, _)) = line.split_once("]") {
                let Some((task, cpu)) = head.rsplit_once('[') else {
                    continue;
                };
                let pid = task.trim_end().rsplit_once('-').unwrap().1;
                let event = line.split(": ").nth(1).unwrap().trim_end_matches(':');
                let cpu: u32 = cpu.parse().unwrap();
                want.push(format!("{event} cpu {cpu} pid {pid}"));
            }
        }
        let out = uevrec()
            .args(["decode", "-q", "--no-schema"])
            .arg(&dat)
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}: {}", stderr_of(&out));
        let got: Vec<String> = String::from_utf8(out.stdout.clone())
            .unwrap()
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                if v["uevrec"] == "lost" {
                    format!("lost cpu {} {}", v["cpu"], v["lost"])
                } else {
                    assert!(v["time"].is_null() && v["fields"].is_object(), "{l}");
                    let event = v["event"].as_str().unwrap();
                    format!("{event} cpu {} pid {}", v["cpu"], v["pid"])
                }
            })
            .collect();
        assert!(want.len() > 500, "{name}: {} report lines", want.len());
        assert_eq!(got, want, "{name}");
        let piped = uevrec()
            .args(["decode", "-q", "-"])
            .write_stdin(fs::read(&dat).unwrap())
            .output()
            .unwrap();
        assert!(piped.status.success(), "{name}: {}", stderr_of(&piped));
        // Without --no-schema: a schema line before each event's first record, the
        // other lines alike.
        let (mut schemas, mut rest, mut events) = (BTreeSet::new(), String::new(), BTreeSet::new());
        for l in String::from_utf8(piped.stdout).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            if v["uevrec"] == "schema" {
                assert!(schemas.insert(v["event"].to_string()), "{name}: twice: {l}");
            } else {
                if v["uevrec"].is_null() {
                    let key = format!(
                        "\"{}:{}\"",
                        v["system"].as_str().unwrap(),
                        v["event"].as_str().unwrap()
                    );
                    assert!(schemas.contains(&key), "{name}: {l} before its schema");
                    events.insert(key);
                }
                rest.push_str(l);
                rest.push('\n');
            }
        }
        assert_eq!(
            schemas, events,
            "{name}: the events with records are described"
        );
        assert_eq!(rest.as_bytes(), out.stdout, "{name}: stdin differs");
    }
}

/// `uevrec decode --threads N` writes the same bytes as `--threads 1`: the trace.dat files
/// of `decode_reads_trace_dat_like_trace_cmd_report` and the corpus's perf.data files
/// (file and pipe mode, `UEVREC_CORPUS_DIR`), each from its path and through a pipe on
/// standard input, to standard output and to `-o FILE`.
#[test]
fn decode_threads_write_the_same_bytes_as_one() {
    let dat = Path::new(env!("CARGO_MANIFEST_DIR")).join("parsers/tests/data/trace-dat");
    let mut inputs: Vec<std::path::PathBuf> = ["v6", "v7-none", "v7-zstd", "v7-lost"]
        .iter()
        .map(|n| dat.join(format!("{n}.dat")))
        .collect();
    let corpus = std::env::var_os("UEVREC_CORPUS_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"),
        std::path::PathBuf::from,
    );
    for name in ["LinuxTracepoints-perf.data", "LinuxTracepoints-pipe.data"] {
        let path = corpus.join("perf-data").join(name);
        if path.exists() {
            inputs.push(path);
        } else {
            eprintln!(
                "{}: not there (set UEVREC_CORPUS_DIR); left out",
                path.display()
            );
        }
    }
    let dir = tempfile::tempdir().unwrap();
    for input in &inputs {
        let run = |threads: &str, stdin: bool, to_file: bool| {
            let mut cmd = uevrec();
            cmd.args(["decode", "-q", "--threads", threads]);
            let out_file = dir.path().join(format!("out-{threads}-{stdin}.json"));
            if to_file {
                let _ = fs::remove_file(&out_file);
                cmd.arg("-o").arg(&out_file);
            }
            if stdin {
                cmd.arg("-").write_stdin(fs::read(input).unwrap());
            } else {
                cmd.arg(input);
            }
            let out = cmd.output().unwrap();
            assert!(out.status.success(), "{}: {out:?}", input.display());
            if to_file {
                fs::read(&out_file).unwrap()
            } else {
                out.stdout
            }
        };
        let one = run("1", false, false);
        assert!(one.len() > 1000, "{}: {} bytes", input.display(), one.len());
        for (threads, stdin, to_file) in
            [("2", false, false), ("4", true, false), ("2", false, true)]
        {
            let many = run(threads, stdin, to_file);
            assert!(
                many == one,
                "{}: --threads {threads} (stdin: {stdin}, -o: {to_file}) wrote other bytes",
                input.display()
            );
        }
    }
}
