//! `record -g --stack-ids` end to end on the host kernel, with the C chain of
//! tests/host/stacks.rs (`main → outer → middle → inner → syscall(SYS_setpgid, MAGIC,
//! SEQ)`, frame pointers): recorded beside a plain `-g` recording of the same calls,
//! - every record names a `stack_id` that a stack line before it in the same file
//!   defines, and no record carries `stack`;
//! - the stacks so named are those the plain recording has inline, record by record
//!   (middle → outer → main);
//! - stack lines are few: one per distinct stack and formatter worker, not one a record;
//! - `uevrec flamegraph --folded` of both gives the same stacks and counts;
//! - with `--rotate-size`, every file defines the stacks its records name;
//! - the flag is refused where it cannot hold (no -g, --flight, OTLP).

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::stack_outputs::{flamegraph, of_magic, run_chain};
use super::stacks::{build_chain, record_setpgid};
use crate::common::stack_frames::{holds_in_a_row, user_symbols};
use crate::common::tier::Tier;
use crate::common::{PATIENCE, bin, complete_lines, wait_for};

/// The lines of a `--stack-ids` file with each record's stack resolved through the stack
/// lines before it (`stack_id` replaced by the `stack` it names); panics on a record
/// that names an id no earlier line of the file defines.
fn resolved(text: &str) -> Vec<Value> {
    let mut stacks: HashMap<u64, Value> = HashMap::new();
    let mut lines = Vec::new();
    for line in text.lines() {
        let mut v: Value = serde_json::from_str(line).unwrap();
        if v["uevrec"] == "stack" {
            assert!(
                v["time"].is_string(),
                "time first, as uevrec's other lines: {v}"
            );
            stacks.insert(v["id"].as_u64().unwrap(), v["stack"].clone());
            continue;
        }
        if v["uevrec"].is_null() {
            assert!(v.get("stack").is_none(), "no stack inline: {v}");
        }
        if let Some(id) = v.get("stack_id").and_then(Value::as_u64) {
            let stack = stacks
                .get(&id)
                .unwrap_or_else(|| panic!("stack_id {id} named before a line defines it: {v}"));
            v["stack"] = stack.clone();
        }
        lines.push(v);
    }
    lines
}

/// A record's SEQ.
fn seq(v: &Value) -> u64 {
    v["fields"]["args"][1].as_u64().unwrap()
}

/// `uevrec flamegraph --folded` of `lines` written to `path`.
fn folded(path: &Path, lines: &[&str]) -> String {
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
    let (ok, folded, err) = flamegraph(&["--folded", path.to_str().unwrap()]);
    assert!(ok, "{err}");
    folded
}

#[test]
fn stack_ids_name_the_stacks_inline_recording_has() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = require!(Tier::Host, build_chain(dir.path()));
    const MAGIC: u64 = 424_242_390;
    const N: u64 = 400;
    let (with_ids, inline) = (
        dir.path().join("ids.jsonl"),
        dir.path().join("inline.jsonl"),
    );
    let rec_ids = record_setpgid(&with_ids, &["-g", "--stack-ids", "--threads", "2"]);
    let rec_inline = record_setpgid(&inline, &["-g"]);
    run_chain(&exe, MAGIC, N);
    for out in [&with_ids, &inline] {
        wait_for("every record of the program", PATIENCE, || {
            let lines = complete_lines(out);
            lines.iter().filter(|v| of_magic(v, MAGIC)).count() as u64 >= N
        });
    }
    drop(rec_ids);
    drop(rec_inline);

    let ids_text = std::fs::read_to_string(&with_ids).unwrap();
    let inline_text = std::fs::read_to_string(&inline).unwrap();
    let lines = resolved(&ids_text);
    let session = lines.iter().find(|v| v["uevrec"] == "session").unwrap();
    assert_eq!(session["stacks"]["stack_ids"], true, "{session}");
    let mine: Vec<&Value> = lines.iter().filter(|v| of_magic(v, MAGIC)).collect();
    assert_eq!(mine.len() as u64, N);
    let inline_by_seq: HashMap<u64, Value> = inline_text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| of_magic(v, MAGIC))
        .map(|v| (seq(&v), v))
        .collect();
    assert_eq!(inline_by_seq.len() as u64, N);
    let mut ids_used = std::collections::HashSet::new();
    for r in &mine {
        let names = user_symbols(r);
        assert!(
            holds_in_a_row(&names, &["middle", "outer", "main"]),
            "middle, outer, main in {names:?}: {r}"
        );
        let plain = &inline_by_seq[&seq(r)];
        assert_eq!(names, user_symbols(plain), "SEQ {}", seq(r));
        ids_used.insert(r["stack_id"].as_u64().unwrap());
    }
    // One stack line per distinct stack and worker (2 workers), not one a record (other
    // programs' setpgid calls, each program run its own stacks, are not counted here).
    assert!(
        ids_used.len() <= 4,
        "{} stack ids for one call site",
        ids_used.len()
    );
    // Fewer bytes a record: the point of the form.
    let mean = |text: &str| {
        let mine: Vec<&str> = text
            .lines()
            .filter(|l| l.contains(&format!("[{MAGIC},")))
            .collect();
        mine.iter().map(|l| l.len()).sum::<usize>() / mine.len().max(1)
    };
    assert!(
        mean(&ids_text) * 3 < mean(&inline_text),
        "{} bytes a record with ids, {} inline",
        mean(&ids_text),
        mean(&inline_text)
    );

    // The same flame graph: this test's records and uevrec's own lines of each file.
    let keep = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                of_magic(&v, MAGIC) || v["uevrec"].is_string()
            })
            .map(str::to_owned)
            .collect()
    };
    let (a, b) = (keep(&ids_text), keep(&inline_text));
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let b: Vec<&str> = b.iter().map(String::as_str).collect();
    let with_ids_folded = folded(&dir.path().join("a.jsonl"), &a);
    let inline_folded = folded(&dir.path().join("b.jsonl"), &b);
    assert_eq!(with_ids_folded, inline_folded);
    assert!(
        with_ids_folded.contains(";main;outer;middle;") && with_ids_folded.ends_with(" 400\n"),
        "{with_ids_folded}"
    );
}

#[test]
fn every_rotated_file_defines_the_stacks_its_records_name() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = require!(Tier::Host, build_chain(dir.path()));
    const MAGIC: u64 = 424_242_391;
    const N: u64 = 600;
    let out = dir.path().join("rot.jsonl");
    let args = [
        "-g",
        "--stack-ids",
        "--threads",
        "2",
        "--rotate-size",
        "30K",
        "--rotate-keep",
        "100",
    ];
    let rec = record_setpgid(&out, &args);
    let files = || -> Vec<std::path::PathBuf> {
        let mut all = vec![out.clone()];
        for n in 1..=100 {
            let p = dir.path().join(format!("rot.jsonl.{n}"));
            if p.exists() {
                all.push(p);
            }
        }
        all
    };
    run_chain(&exe, MAGIC, N);
    wait_for("every record of the program", PATIENCE, || {
        let n: usize = files()
            .iter()
            .map(|f| {
                complete_lines(f)
                    .iter()
                    .filter(|v| of_magic(v, MAGIC))
                    .count()
            })
            .sum();
        n as u64 >= N
    });
    drop(rec);
    let files = files();
    assert!(files.len() >= 3, "rotated: {files:?}");
    let mut seqs = Vec::new();
    for f in &files {
        // Each file alone: every stack_id defined in it before it is named.
        let lines = resolved(&std::fs::read_to_string(f).unwrap());
        for r in lines.iter().filter(|v| of_magic(v, MAGIC)) {
            let names = user_symbols(r);
            assert!(
                holds_in_a_row(&names, &["middle", "outer", "main"]),
                "{}: {names:?}",
                f.display()
            );
            seqs.push(seq(r));
        }
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (0..N).collect::<Vec<_>>(), "each SEQ exactly once");
}

#[test]
fn stack_ids_are_refused_where_they_cannot_hold() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.jsonl");
    let out = out.to_str().unwrap();
    for (args, says) in [
        (&["--stack-ids", "-o", out][..], "add -g"),
        (
            &["-g", "--stack-ids", "--flight", "1M", "-o", out],
            "--flight",
        ),
        (
            &["-g", "--stack-ids", "--format", "otlp", "-o", out],
            "OTLP",
        ),
    ] {
        let run = Command::new(bin())
            .arg("record")
            .args(args)
            .args(["-e", "raw_syscalls:sys_enter", "--duration", "1s"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(
            !run.status.success() && err.contains(says),
            "{args:?}: {err}"
        );
    }
}

/// `uevrec decode --stack-ids` of a `record -g --raw` file: the stacks `decode` writes
/// inline, each record's through its id; on one thread and on two; a rotation's files
/// each define what they name; refused for OTLP lines.
#[test]
fn decode_with_stack_ids_names_the_stacks_decode_writes_inline() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = require!(Tier::Host, build_chain(dir.path()));
    const MAGIC: u64 = 424_242_392;
    const N: u64 = 300;
    let (raw, live) = (dir.path().join("rec.data"), dir.path().join("live.jsonl"));
    let rec = record_setpgid(&live, &["-g", "--raw", raw.to_str().unwrap()]);
    run_chain(&exe, MAGIC, N);
    wait_for("every record of the program", PATIENCE, || {
        let lines = complete_lines(&live);
        lines.iter().filter(|v| of_magic(v, MAGIC)).count() as u64 >= N
    });
    drop(rec);
    let decode = |args: &[&str]| -> String {
        let out = Command::new(bin())
            .arg("decode")
            .args(args)
            .arg(&raw)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "decode {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let by_seq = |lines: &[Value]| -> Vec<(u64, Vec<String>)> {
        let mut mine: Vec<(u64, Vec<String>)> = lines
            .iter()
            .filter(|v| of_magic(v, MAGIC))
            .map(|v| (seq(v), user_symbols(v)))
            .collect();
        mine.sort();
        mine
    };
    let inline_text = decode(&[]);
    let inline: Vec<Value> = inline_text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let inline = by_seq(&inline);
    assert_eq!(inline.len() as u64, N);
    for (seq, names) in &inline {
        assert!(
            holds_in_a_row(names, &["middle", "outer", "main"]),
            "SEQ {seq}: {names:?}"
        );
    }
    for threads in ["1", "2"] {
        let text = decode(&["--stack-ids", "--threads", threads]);
        let stack_lines = text
            .lines()
            .filter(|l| l.contains("\"uevrec\":\"stack\""))
            .count();
        assert_eq!(by_seq(&resolved(&text)), inline, "--threads {threads}");
        assert!(
            stack_lines * 10 < N as usize,
            "--threads {threads}: {stack_lines} stack lines for {N} records of one call site"
        );
        assert!(
            text.len() * 2 < inline_text.len(),
            "--threads {threads}: fewer bytes"
        );
    }

    // Rotated: each file defines the stacks its records name.
    let out = dir.path().join("rot.jsonl");
    let args = [
        "--stack-ids",
        "-o",
        out.to_str().unwrap(),
        "--rotate-size",
        "20K",
        "--rotate-keep",
        "100",
    ];
    assert_eq!(decode(&args), "");
    let mut seqs = Vec::new();
    for n in 0..=100 {
        let f = match n {
            0 => out.clone(),
            n => dir.path().join(format!("rot.jsonl.{n}")),
        };
        if let Ok(text) = std::fs::read_to_string(&f) {
            seqs.extend(by_seq(&resolved(&text)).into_iter().map(|(s, _)| s));
        }
    }
    assert!(
        dir.path().join("rot.jsonl.2").exists(),
        "rotated at least twice"
    );
    seqs.sort_unstable();
    assert_eq!(seqs, (0..N).collect::<Vec<_>>(), "each SEQ exactly once");

    let otlp = Command::new(bin())
        .args(["decode", "--stack-ids", "--format", "otlp"])
        .arg(&raw)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&otlp.stderr);
    assert!(
        !otlp.status.success() && err.contains("JSON lines"),
        "{err}"
    );
}
