//! Call stacks on real user_events (issue 38's VM tier): `samples/stacks`' `stack_chain`
//! writes a plain user_event and an EventHeader event from a known call chain
//! (`write_through_chain` → `outer` → `middle` → `inner` → `syscall(SYS_writev)`; the
//! C functions built with frame pointers and debug information, `samples/stacks/src/chain.c`),
//! recorded at once by two uevrecs on the perf backend: `-g` (frame pointers) and
//! `--call-graph dwarf`. Every record of both events names middle and outer in order
//! with their file and line (`-g`: glibc's `syscall()` keeps no frame pointer, so the
//! walk skips `inner`, as on the host: tests/host/stacks.rs), and with `dwarf` the whole
//! chain, `inner` included, one frame after the other.
//!
//!
//! A third uevrec records the same on the ftrace backend with `-g` (its own instance's
//! `options/stacktrace` and `options/userstacktrace`, tied to each record): the same
//! frame-pointer chain as the perf backend's `-g`. The producer stays until that uevrec
//! holds its records: the ftrace backend reads a process's mappings from `/proc` at its
//! first stack, and names nothing of a program gone by then (docs/stacks.md).

use std::collections::BTreeMap;
use std::fs;
use std::sync::{Mutex, MutexGuard};

use serde_json::{Value, json};

use uevrec_samples::{Flags, RegisterCommand, UserEvents};

use crate::common::KillOnDrop;
use crate::common::vm::{
    self, PATIENCE, Recording, finish_sample, spawn_sample, user_events_here, wait_reports,
};

/// The chain's source: its `/* CALL f */` comments mark the line of each call.
const CHAIN_C: &str = include_str!("../../samples/stacks/src/chain.c");

/// Records of each event the producer writes.
const COUNT: u64 = 5;

/// One test at a time: each recorder takes every record of the events it names.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> Option<MutexGuard<'static, ()>> {
    user_events_here().then(|| SERIAL.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The line of `/* CALL function */` in [`CHAIN_C`].
fn call_line(function: &str) -> u64 {
    let mark = format!("/* CALL {function} */");
    CHAIN_C.lines().position(|l| l.contains(&mark)).unwrap() as u64 + 1
}

/// The name a frame's symbol gives the chain: Rust's path and hash left out
/// (`stack_chain::write_through_chain::h0123…` → `write_through_chain`).
fn short_name(symbol: &str) -> &str {
    let mut parts: Vec<&str> = symbol.split("::").collect();
    if parts.len() > 1
        && parts
            .last()
            .is_some_and(|p| p.len() == 17 && p.starts_with('h'))
    {
        parts.pop();
    }
    parts.last().copied().unwrap_or(symbol)
}

/// The user frames' short names of a record, innermost first (`?` where unnamed).
fn user_names(record: &Value) -> Vec<String> {
    record["stack"]
        .as_array()
        .unwrap_or_else(|| panic!("a stack on every record: {record}"))
        .iter()
        .filter(|f| f["context"] == "user")
        .map(|f| short_name(f["symbol"].as_str().unwrap_or("?")).to_string())
        .collect()
}

/// Whether `names` holds `chain` one right after the other.
fn holds_in_a_row(names: &[String], chain: &[&str]) -> bool {
    names
        .windows(chain.len())
        .any(|w| w.iter().zip(chain).all(|(a, b)| a == b))
}

/// Check one recorder's output: exactly `COUNT` records of each event (seq 0..COUNT
/// once each, the EventHeader ones decoded), nothing lost, kernel frames before user
/// frames, `chain` one frame after the other in every record, and `with_lines`' frames
/// at their call lines in chain.c.
fn check(what: &str, lines: &[Value], name: &str, chain: &[&str], with_lines: &[&str]) {
    let lost: u64 = lines
        .iter()
        .filter(|l| l["uevrec"] == "lost")
        .filter_map(|l| l["lost"].as_u64())
        .sum();
    assert_eq!(lost, 0, "{what}: records lost");
    let plain = format!("{name}_plain");
    let eventheader = format!("{name}_L4K1");
    let mut seqs: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for r in lines.iter().filter(|l| l.get("uevrec").is_none()) {
        let event = r["event"].as_str().unwrap_or_default();
        if event == eventheader {
            assert_eq!(
                (&r["provider"], &r["name"], &r["level"]),
                (&json!(name), &json!("Chain"), &json!(4)),
                "{what}: {r}"
            );
        } else {
            assert_eq!(event, plain, "{what}: a record of another event: {r}");
        }
        seqs.entry(if event == plain {
            "plain"
        } else {
            "eventheader"
        })
        .or_default()
        .push(r["fields"]["seq"].as_u64().expect("fields.seq"));
        let names = user_names(r);
        assert!(
            holds_in_a_row(&names, chain),
            "{what}: {chain:?} one after the other in {names:?}: {r}"
        );
        let stack = r["stack"].as_array().unwrap();
        let first_user = stack.iter().position(|f| f["context"] == "user").unwrap();
        assert!(
            first_user > 0 && stack[..first_user].iter().all(|f| f["context"] == "kernel"),
            "{what}: kernel frames first: {r}"
        );
        for function in with_lines {
            let f = stack
                .iter()
                .find(|f| f["context"] == "user" && f["symbol"] == *function)
                .unwrap();
            assert!(
                f["file"]
                    .as_str()
                    .is_some_and(|p| p.ends_with("samples/stacks/src/chain.c")),
                "{what}: {function}'s file: {f}"
            );
            assert_eq!(
                f["line"],
                call_line(function),
                "{what}: {function}'s line: {f}"
            );
        }
    }
    for v in seqs.values_mut() {
        v.sort_unstable();
    }
    let all: Vec<u64> = (0..COUNT).collect();
    assert_eq!(
        seqs,
        BTreeMap::from([("eventheader", all.clone()), ("plain", all)]),
        "{what}: each seq once per event"
    );
    println!(
        "{what}: {} records, each with {chain:?} in its stack",
        2 * COUNT
    );
}

#[test]
fn fp_dwarf_and_ftrace_stacks_name_the_chain_on_plain_and_eventheader_events() {
    let Some(_serial) = serial() else {
        return;
    };
    let dir = vm::tmp_dir("stacks");
    let name = format!("VmtStacks{}", std::process::id());
    let start = dir.join("start");
    let count = COUNT.to_string();
    // uevrec's trackers must be running before the producer starts, so that they see
    // its exec and mappings (MMAP2) and name its frames after it exited: a user event
    // registered here, attached after them, says when (the producer's own events are
    // attached when it registers them). Without context (not needed here) uevrec
    // starts in seconds under emulation, not tens of seconds.
    let user_events = UserEvents::open().expect("opening user_events_data");
    let ready = RegisterCommand::parse(&format!("{name}_ready u32 unused")).unwrap();
    let _ready = user_events
        .register(&ready, Flags::NONE)
        .expect("registering the ready event");
    let ready = [format!("user_events:{name}_ready")];
    let events = [
        format!("user_events:{name}_plain"),
        format!("user_events:{name}_L4K1"),
    ];
    let selectors: Vec<&str> = events
        .iter()
        .chain(&ready)
        .flat_map(|e| ["-e", e.as_str()])
        .collect();
    let start_recording = |out: &str, call_graph: &[&str]| {
        let args = [call_graph, &["--no-context"], &selectors[..]].concat();
        Recording::start(&dir.join(out), &args)
    };
    let mut fp = start_recording("fp.jsonl", &["-g"]);
    let mut dwarf = start_recording("dwarf.jsonl", &["--call-graph", "dwarf"]);
    let mut ftrace = None;
    vm::on_backend("ftrace", || {
        ftrace = Some(start_recording("ftrace.jsonl", &["-g"]));
    });
    let mut ftrace = ftrace.unwrap();
    fp.wait_attached(&ready);
    dwarf.wait_attached(&ready);
    ftrace.wait_attached(&ready);
    let hold = dir.join("hold");
    let (child, reports) = spawn_sample(
        "stack_chain",
        &[
            &name,
            &count,
            start.to_str().unwrap(),
            hold.to_str().unwrap(),
        ],
    );
    let mut child = KillOnDrop(child);
    wait_reports(&reports, "registered", 2, PATIENCE, "stack_chain");
    fp.wait_attached(&events);
    dwarf.wait_attached(&events);
    ftrace.wait_attached(&events);
    fs::write(&start, b"").expect("start file");
    // The ftrace backend's records, with their stacks, before the producer exits.
    let held = dir.join("ftrace.jsonl");
    let give_up = std::time::Instant::now() + PATIENCE;
    while fs::read_to_string(&held)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("\"stack\""))
        .count()
        < 2 * COUNT as usize
    {
        assert!(
            std::time::Instant::now() < give_up,
            "the ftrace backend's uevrec wrote no {} records with stacks",
            2 * COUNT
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    fs::write(&hold, b"").expect("hold file");
    let report = finish_sample(&mut child, &reports, "stack_chain", PATIENCE);
    let done = report.iter().find(|l| l.get("done").is_some()).unwrap();
    assert_eq!(done["written"], 2 * COUNT, "{done}");

    let [fp, dwarf, ftrace]: [Vec<Value>; 3] = Recording::stop_all(vec![fp, dwarf, ftrace])
        .try_into()
        .unwrap();
    let session = fp.iter().find(|l| l["uevrec"] == "session").unwrap();
    assert_eq!(session["stacks"]["call_graph"], "fp", "{session}");
    check(
        "-g",
        &fp,
        &name,
        &["middle", "outer", "write_through_chain"],
        &["middle", "outer"],
    );

    check(
        "--backend ftrace -g",
        &ftrace,
        &name,
        &["middle", "outer", "write_through_chain"],
        &["middle", "outer"],
    );

    let session = dwarf.iter().find(|l| l["uevrec"] == "session").unwrap();
    assert_eq!(session["stacks"]["call_graph"], "dwarf,8192", "{session}");
    check(
        "--call-graph dwarf",
        &dwarf,
        &name,
        &["syscall", "inner", "middle", "outer", "write_through_chain"],
        &["inner", "middle", "outer"],
    );
}
