//! Folding JSON lines with call stacks (`uevrec flamegraph`,
//! `uevrec::offline::flamegraph`): counts, frame order (outermost first, inlined calls
//! expanded), roots, records without stacks, bad lines; against a model on generated
//! records (proptest) and through the binary.

use std::collections::HashMap;
use std::process::Command;

use proptest::prelude::*;
use serde_json::{Value, json};
use uevrec::offline::flamegraph::{FoldOptions, Folder, Root};

use crate::common::bin;

/// A generated frame: its symbol (or none), the calls inlined at it, kernel or user.
#[derive(Debug, Clone)]
struct Frame {
    symbol: Option<String>,
    inlined: Vec<String>,
    kernel: bool,
}

fn frame() -> impl Strategy<Value = Frame> {
    (
        proptest::option::weighted(0.8, "[a-c]{1,2}"),
        proptest::collection::vec("[x-z]", 0..3),
        any::<bool>(),
    )
        .prop_map(|(symbol, inlined, kernel)| Frame {
            symbol,
            inlined,
            kernel,
        })
}

/// A generated record: its event, its comm, its stack (innermost first) or none.
fn record() -> impl Strategy<Value = (u8, u8, Option<Vec<Frame>>)> {
    (
        0..2u8,
        0..2u8,
        proptest::option::weighted(0.9, proptest::collection::vec(frame(), 0..5)),
    )
}

fn line(event: u8, comm: u8, stack: &Option<Vec<Frame>>) -> String {
    let mut v = json!({"time": "2026-01-01T00:00:00Z", "system": "s", "event": format!("e{event}"),
        "pid": 7, "comm": format!("p{comm}"), "fields": {"x": [1, {"y": "a;b"}]}});
    if let Some(stack) = stack {
        let frames: Vec<Value> = stack
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let mut o = json!({"addr": format!("{:#x}", 0x1000 + i), "context": if f.kernel { "kernel" } else { "user" }});
                match &f.symbol {
                    Some(s) => o["symbol"] = json!(s),
                    None => o["module"] = json!("/lib/m.so"),
                }
                if !f.inlined.is_empty() {
                    o["inlined"] = f.inlined.iter().map(|s| json!({"symbol": s})).collect();
                }
                o
            })
            .collect();
        v["stack"] = Value::Array(frames);
    }
    v.to_string()
}

/// The model: a record's folded stack, written independently of the code.
fn model_key(event: u8, comm: u8, stack: &[Frame], options: FoldOptions) -> String {
    let mut parts: Vec<String> = match options.root {
        Root::Event => vec![format!("s:e{event}")],
        Root::Comm => vec![format!("p{comm}")],
        Root::None => vec![],
    };
    for f in stack.iter().rev() {
        if options.user_only && f.kernel {
            continue;
        }
        let own = match &f.symbol {
            Some(s) => s.clone(),
            None => "[m.so]".to_owned(),
        };
        parts.push(if f.kernel { format!("{own}_[k]") } else { own });
        for inl in f.inlined.iter().rev() {
            parts.push(format!("{inl}_[i]"));
        }
    }
    if parts.is_empty() {
        return "[no frames]".into();
    }
    parts.join(";")
}

proptest! {
    #[test]
    fn folding_counts_every_record_once_in_model_order(
        records in proptest::collection::vec(record(), 0..40),
        root in prop_oneof![Just(Root::Event), Just(Root::Comm), Just(Root::None)],
        user_only in any::<bool>(),
    ) {
        let options = FoldOptions { root, user_only };
        let mut folder = Folder::new(options);
        folder.add_line(br#"{"uevrec":"session","version":"x"}"#).unwrap();
        folder.add_line(b"").unwrap();
        let mut want: HashMap<String, u64> = HashMap::new();
        let mut without = 0;
        for (event, comm, stack) in &records {
            folder.add_line(line(*event, *comm, stack).as_bytes()).unwrap();
            match stack {
                Some(s) => *want.entry(model_key(*event, *comm, s, options)).or_default() += 1,
                None => without += 1,
            }
        }
        let got: HashMap<String, u64> =
            folder.folded().into_iter().map(|(k, n)| (k.to_owned(), n)).collect();
        prop_assert_eq!(got, want);
        prop_assert_eq!(folder.without_stack, without);
        prop_assert_eq!(folder.records, records.len() as u64 - without);
        prop_assert_eq!(folder.own_lines, 1);
        let folded = folder.folded();
        prop_assert!(folded.windows(2).all(|w| w[0].0 < w[1].0), "sorted, each stack once");
    }
}

/// The lines of `records` as `record -g --stack-ids` writes them: each distinct stack
/// once, on a stack line before the first record that names it by `stack_id`.
fn lines_with_ids(records: &[(u8, u8, Option<Vec<Frame>>)]) -> Vec<String> {
    let mut ids: HashMap<String, u64> = HashMap::new();
    let mut out = Vec::new();
    for (event, comm, stack) in records {
        let mut v: Value = serde_json::from_str(&line(*event, *comm, stack)).unwrap();
        if let Some(stack) = v.as_object_mut().unwrap().remove("stack") {
            let next = ids.len() as u64 * 8192 + 5;
            let id = *ids.entry(stack.to_string()).or_insert_with(|| {
                out.push(json!({"uevrec": "stack", "id": next, "stack": stack}).to_string());
                next
            });
            v["stack_id"] = json!(id);
        }
        out.push(v.to_string());
    }
    out
}

/// Folded `lines` under `options`.
fn folded(lines: &[String], options: FoldOptions) -> Vec<(String, u64)> {
    let mut folder = Folder::new(options);
    for l in lines {
        folder.add_line(l.as_bytes()).unwrap();
    }
    let f = folder.folded().into_iter().map(|(k, n)| (k.to_owned(), n));
    f.collect()
}

proptest! {
    #[test]
    fn stack_ids_fold_as_the_stacks_inline(
        records in proptest::collection::vec(record(), 0..40),
        root in prop_oneof![Just(Root::Event), Just(Root::Comm), Just(Root::None)],
        user_only in any::<bool>(),
    ) {
        let options = FoldOptions { root, user_only };
        let inline: Vec<String> = records.iter().map(|(e, c, s)| line(*e, *c, s)).collect();
        prop_assert_eq!(folded(&lines_with_ids(&records), options), folded(&inline, options));
    }
}

#[test]
fn a_stack_id_is_the_latest_line_of_its_input_and_an_unknown_one_an_error() {
    let stack = |name: &str| {
        json!({"uevrec": "stack", "id": 1, "stack": [{"addr": "0x1", "context": "user", "symbol": name}]}).to_string()
    };
    let record = r#"{"system":"s","event":"e","stack_id":1}"#.to_owned();
    // Another run appended to the file: the same id, another stack.
    let lines = [
        stack("a"),
        record.clone(),
        stack("b"),
        record.clone(),
        record.clone(),
    ];
    assert_eq!(
        folded(&lines, FoldOptions::default()),
        [("s:e;a".to_owned(), 1), ("s:e;b".to_owned(), 2)]
    );
    let mut folder = Folder::new(FoldOptions::default());
    folder.add_line(stack("a").as_bytes()).unwrap();
    folder.next_input();
    let e = folder.add_line(record.as_bytes()).unwrap_err();
    assert!(
        e.0.contains("stack_id 1") && e.0.contains("whole files"),
        "{e}"
    );
    assert_eq!(folder.records, 0);
}

#[test]
fn lost_records_and_missing_stacks_are_said() {
    let mut folder = Folder::new(FoldOptions::default());
    folder
        .add_line(br#"{"uevrec":"lost","cpu":0,"lost":12}"#)
        .unwrap();
    folder
        .add_line(br#"{"system":"s","event":"e","pid":1,"fields":{}}"#)
        .unwrap();
    let said = folder.left_out().join("\n");
    assert!(said.contains("1 records without a stack"), "{said}");
    assert!(said.contains("12 records were lost"), "{said}");
    assert_eq!(folder.title(), "no stacks: 0 records");
}

#[test]
fn frames_with_separators_stay_one_frame_and_comm_falls_back_to_the_pid() {
    let mut folder = Folder::new(FoldOptions {
        root: Root::Comm,
        user_only: false,
    });
    let line = br#"{"system":"s","event":"e","pid":42,"stack":[{"addr":"0x1","context":"user","symbol":"f<a;b>\n"}]}"#;
    folder.add_line(line).unwrap();
    assert_eq!(folder.folded_text(), "pid 42;f<a:b>  1\n");
}

#[test]
fn lines_that_are_no_records_are_errors() {
    let mut folder = Folder::new(FoldOptions::default());
    let e = folder.add_line(b"{\"system\":").unwrap_err().to_string();
    assert!(e.contains("not a JSON line"), "{e}");
    let e = folder
        .add_line(br#"{"resourceLogs":[]}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("OTLP lines are not read"), "{e}");
}

#[test]
fn the_binary_names_the_bad_line_and_the_bad_perf_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    let good = r#"{"system":"s","event":"e","pid":1,"stack":[{"addr":"0x1","context":"user","symbol":"f"}]}"#;
    std::fs::write(&path, format!("{good}\n{good}\nnot json\n")).unwrap();
    let out = Command::new(bin())
        .args(["flamegraph", "--folded"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.jsonl, line 3: not a JSON line"), "{err}");

    // A perf.data is decoded, not read as lines: one cut short in its header is an error
    // naming the file and why, and nothing is drawn.
    let perf = dir.path().join("perf.data");
    std::fs::write(&perf, b"PERFILE2\0\0\0\0").unwrap();
    let out = Command::new(bin())
        .arg("flamegraph")
        .arg(&perf)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("perf.data: truncated at byte 8") && !err.contains("line 1"),
        "{err}"
    );

    // From standard input, to standard output.
    let out = Command::new(bin())
        .args(["flamegraph", "--folded", "--by", "none"])
        .stdin(std::fs::File::open(dir.path().join("bad.jsonl")).unwrap())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("standard input, line 3"), "{err}");
}

#[test]
fn recorded_files_are_told_by_their_magic() {
    use uevrec::offline::flamegraph::recorded_format;
    assert_eq!(recorded_format(b"PERFILE2\x68\0\0\0"), Some("perf.data"));
    assert_eq!(recorded_format(b"2ELIFREP"), Some("perf.data"));
    assert_eq!(
        recorded_format(b"\x17\x08\x44tracing6\0"),
        Some("trace.dat")
    );
    for other in [
        &b"{\"system\":\"s\"}\n"[..],
        b"PERFILE",
        b"",
        b"\x17\x08\x44trac",
    ] {
        assert_eq!(recorded_format(other), None, "{other:?}");
    }
}

/// A trace.dat (here one without stacks) is decoded and its records counted.
#[test]
fn a_trace_dat_is_decoded_and_its_records_without_stacks_are_said() {
    let dat = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/parsers/tests/data/trace-dat/v7-none.dat"
    );
    let out = Command::new(bin())
        .args(["flamegraph", "--folded", dat])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("(818 records without one)"), "{err}");
    assert!(!err.contains("\"time\" is null"), "no note on times: {err}");
}

/// A `truncated` notice (decode of a recording cut short) is said with what is left out.
#[test]
fn a_truncated_input_is_said() {
    let mut folder = Folder::new(FoldOptions::default());
    folder
        .add_line(br#"{"uevrec":"notice","what":"truncated","message":"cut at byte 9"}"#)
        .unwrap();
    let said = folder.left_out().join("; ");
    assert!(said.contains("1 input was cut short"), "{said}");
}
