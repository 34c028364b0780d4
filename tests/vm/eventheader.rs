//! Tier 3: uevrec decoding real EventHeader producers on a real kernel.
//!
//! The producers are the crates people use: `eh_macros` (the `eventheader` crate's
//! macros), `eh_dynamic` (`eventheader_dynamic`) and `otel` (the OpenTelemetry
//! user_events exporters for logs and spans), all in `samples/`. Each prints, per event
//! written, the keys and `fields` uevrec must print for it (docs/eventheader.md,
//! `uevrec_samples::eh`); the tests compare uevrec's lines with that account key by key.
//!
//! Like `vm_user_events.rs` (whose helpers this file copies in part: that file's
//! `Producer`/`Recorder` are specialised to its own producers; see tests/common/ for
//! what both share), these tests need `CONFIG_USER_EVENTS=y`: `scripts/vm-test.sh` runs
//! them in the VM. Elsewhere they skip saying so (tests/common/tier.rs), or fail when
//! `UEVREC_REQUIRE_TIERS` names the vm tier.
//!
//! uevrec runs with its default selectors (`user_events:*`, `user_events_multi:*`) and is
//! started before the producer registers anything (late registration). The tests in
//! this binary run one at a time (a lock), since every uevrec sees every user event.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use uevrec_samples::eh::REPORTED_KEYS;
use uevrec_samples::{Flags, RegisterCommand, UserEvents, Written, wait_until};

use crate::common::KillOnDrop;
use crate::common::json_eq;
use crate::common::vm::{
    self, assert_running, bin_dir, collect_json_lines, each_backend, interrupt_and_wait,
    output_lines, user_events_here, wait_child,
};

/// How long a producer may take from start to exit (TCG guests are ~6x slower).
const PRODUCER_TIMEOUT: Duration = Duration::from_secs(180);
/// How long uevrec or perf may take to exit once told to stop.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// One test at a time: each recorder takes every user event.
static SERIAL: Mutex<()> = Mutex::new(());

/// Skip outside a kernel with user_events (fail instead when the VM tier is required);
/// otherwise take the serialising lock.
fn require_user_events() -> Option<MutexGuard<'static, ()>> {
    if !user_events_here() {
        return None;
    }
    Some(SERIAL.lock().unwrap_or_else(|e| e.into_inner()))
}

// ---- processes -------------------------------------------------------------------------

/// A fresh `$TMPDIR/uevrec-vm-eh-<test>` (kept after the run for inspection).
fn tmp_dir(test: &str) -> PathBuf {
    vm::tmp_dir(&format!("eh-{test}"))
}

/// A running producer whose stdout JSON lines are collected as they come.
struct Producer {
    child: KillOnDrop,
    lines: Arc<Mutex<Vec<Value>>>,
    name: String,
}

impl Producer {
    fn spawn(bin: &str, args: &[String]) -> Producer {
        let path = bin_dir().join(bin);
        assert!(
            path.exists(),
            "{} missing: build it with `cargo build --workspace --bins`",
            path.display()
        );
        let mut child = Command::new(&path)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {bin}: {e}"));
        let lines = collect_json_lines(&mut child);
        Producer {
            child: KillOnDrop(child),
            lines,
            name: format!("{bin} {}", args.join(" ")),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The tracepoints the producer registered, once `n` `{"registered":..}` lines came.
    fn wait_registered(&self, n: usize) -> Vec<String> {
        crate::common::vm::wait_reports(&self.lines, "registered", n, PRODUCER_TIMEOUT, &self.name)
            .iter()
            .map(|v| v["registered"].as_str().expect("a tracepoint").to_string())
            .collect()
    }

    /// Wait for a successful exit; the report lines.
    fn finish(mut self) -> Vec<Value> {
        vm::finish_sample(&mut self.child, &self.lines, &self.name, PRODUCER_TIMEOUT)
    }
}

/// `uevrec record -o FILE` with its default selectors, stopped with SIGINT.
struct Recorder {
    child: KillOnDrop,
    out: PathBuf,
    stderr: PathBuf,
}

impl Recorder {
    fn start(dir: &Path) -> Recorder {
        let out = dir.join("uevrec.jsonl");
        let stderr = dir.join("uevrec.stderr");
        let child = Command::new(env!("CARGO_BIN_EXE_uevrec"))
            .arg("record")
            .args(["--backend", vm::backend()])
            .arg("-o")
            .arg(&out)
            .arg("--quiet")
            .stdout(Stdio::null())
            .stderr(fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("spawning uevrec");
        Recorder {
            child: KillOnDrop(child),
            out,
            stderr,
        }
    }

    /// Wait until uevrec's output has an `attached` notice for every tracepoint.
    fn wait_attached(&mut self, tracepoints: &[String]) {
        let want: BTreeSet<String> = tracepoints
            .iter()
            .map(|t| format!("user_events:{t}"))
            .collect();
        let out = self.out.clone();
        let missing = || -> BTreeSet<String> {
            let seen: BTreeSet<String> = fs::read_to_string(&out)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|l| l["uevrec"] == "notice" && l["what"] == "attached")
                .filter_map(|l| l["event"].as_str().map(str::to_string))
                .collect();
            want.difference(&seen).cloned().collect()
        };
        let child = &mut self.child;
        let ok = wait_until(PRODUCER_TIMEOUT, || {
            missing().is_empty() || child.try_wait().ok().flatten().is_some()
        });
        self.assert_running();
        assert!(
            ok,
            "uevrec never attached {:?} within {PRODUCER_TIMEOUT:?}",
            missing()
        );
    }

    fn assert_running(&mut self) {
        assert_running(&mut self.child, &self.stderr);
    }

    /// SIGINT, wait, check the status; every output line parsed.
    fn stop(mut self) -> Vec<Value> {
        self.assert_running();
        interrupt_and_wait(&mut self.child, STOP_TIMEOUT, &self.stderr);
        output_lines(&self.out)
    }
}

// ---- comparison ------------------------------------------------------------------------

/// The keys (and, inside `fields`, the dotted field paths) where `want` and `got` differ.
fn differences(want: &Value, got: &Value) -> Vec<String> {
    fn walk(path: &str, want: &Value, got: &Value, out: &mut Vec<String>) {
        if json_eq(want, got) {
            return;
        }
        match (want, got) {
            (Value::Object(w), Value::Object(g)) => {
                let keys: BTreeSet<&String> = w.keys().chain(g.keys()).collect();
                for k in keys {
                    let null = Value::Null;
                    let (wv, gv) = (w.get(k), g.get(k));
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    match (wv, gv) {
                        (Some(_), None) => out.push(format!("{p}: missing in uevrec's line")),
                        (None, Some(v)) => out.push(format!("{p}: unexpected {v}")),
                        _ => walk(&p, wv.unwrap_or(&null), gv.unwrap_or(&null), out),
                    }
                }
            }
            _ => out.push(format!("{path}: want {want}, uevrec {got}")),
        }
    }
    let mut out = Vec::new();
    walk("", want, got, &mut out);
    out
}

/// The reported keys of a line (the rest, like `time`, `cpu`, `seq`, is not compared).
fn reported(line: &Value) -> Value {
    Value::Object(
        REPORTED_KEYS
            .iter()
            .filter_map(|&k| line.get(k).map(|v| (k.to_string(), v.clone())))
            .collect(),
    )
}

/// Every event the producer reported must be in uevrec's output with exactly those
/// values, and uevrec must have nothing else for the producer's tracepoints.
fn assert_recorded(
    what: &str,
    report: &[Value],
    lines: &[Value],
    tracepoints: &[String],
    pid: u32,
) {
    let expected: Vec<&Value> = report
        .iter()
        .filter(|l| l.get("fields").is_some())
        .collect();
    let done = report
        .iter()
        .find(|l| l.get("done").is_some())
        .expect("done line");
    assert_eq!(
        done["written"].as_u64(),
        Some(expected.len() as u64),
        "{what}: done line vs event lines"
    );
    assert!(!expected.is_empty(), "{what}: the producer wrote nothing");
    let tps: BTreeSet<&str> = tracepoints.iter().map(String::as_str).collect();
    let got: Vec<&Value> = lines
        .iter()
        .filter(|l| l.get("uevrec").is_none())
        .filter(|l| {
            l["system"] == "user_events" && l["event"].as_str().is_some_and(|e| tps.contains(e))
        })
        .collect();
    for l in &got {
        for key in ["time", "cpu", "pid", "tid"] {
            assert!(l.get(key).is_some(), "{what}: no `{key}` in {l}");
        }
        assert_eq!(
            l["pid"].as_u64(),
            Some(u64::from(pid)),
            "{what}: pid of {l}"
        );
    }
    let mut per_tp_want: BTreeMap<&str, usize> = BTreeMap::new();
    for e in &expected {
        *per_tp_want.entry(e["event"].as_str().unwrap()).or_default() += 1;
    }
    let mut per_tp_got: BTreeMap<&str, usize> = BTreeMap::new();
    for g in &got {
        *per_tp_got.entry(g["event"].as_str().unwrap()).or_default() += 1;
    }
    assert_eq!(
        per_tp_got, per_tp_want,
        "{what}: records per tracepoint (uevrec vs written)"
    );
    let mut used = vec![false; got.len()];
    for want in &expected {
        let want_keys = reported(want);
        let hit = got
            .iter()
            .enumerate()
            .find(|(i, g)| !used[*i] && json_eq(&want_keys, &reported(g)));
        match hit {
            Some((i, _)) => used[i] = true,
            None => {
                let same_name: Vec<&&Value> = got
                    .iter()
                    .filter(|g| g["event"] == want["event"] && g["name"] == want["name"])
                    .collect();
                let detail = match same_name.first() {
                    Some(g) => differences(&want_keys, &reported(g)).join("\n  "),
                    None => "no uevrec line with that tracepoint and event name".to_string(),
                };
                panic!(
                    "{what}: event {} / {} not decoded as reported.\n  {detail}\nreported: {want}\nuevrec: {:?}",
                    want["event"], want["name"], same_name
                );
            }
        }
    }
    println!(
        "{what}: {} events on {} tracepoints match the producer's account",
        expected.len(),
        per_tp_want.len()
    );
}

/// Start uevrec, then the producer (late registration); release it once every
/// tracepoint is attached; compare.
fn round_trip(test: &str, bin: &str, extra: &[&str]) {
    let dir = tmp_dir(test);
    let mut recorder = Recorder::start(&dir);
    // Give uevrec a moment to be up before anything registers (late registration is
    // the point; its attach notices tell us when it has seen each tracepoint).
    std::thread::sleep(Duration::from_millis(500));
    recorder.assert_running();
    let start = dir.join("start");
    let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    args.extend(["--start-file".into(), start.to_string_lossy().into_owned()]);
    let producer = Producer::spawn(bin, &args);
    let n = expected_registrations(bin);
    let tracepoints = producer.wait_registered(n);
    recorder.wait_attached(&tracepoints);
    fs::write(&start, b"").expect("start file");
    let pid = producer.pid();
    let report = producer.finish();
    let lines = recorder.stop();
    assert_recorded(
        &format!("{bin} {}", extra.join(" ")),
        &report,
        &lines,
        &tracepoints,
        pid,
    );
}

/// How many `registered` lines each producer prints.
fn expected_registrations(bin: &str) -> usize {
    match bin {
        "eh_macros" => 7,
        "eh_dynamic" => 4,
        "otel" => 6,
        other => panic!("unknown producer {other}"),
    }
}

#[test]
fn eh_macros_round_trip() {
    let Some(_serial) = require_user_events() else {
        return;
    };
    each_backend(|| {
        round_trip("macros", "eh_macros", &[]);
    });
}

#[test]
fn eh_dynamic_round_trip() {
    let Some(_serial) = require_user_events() else {
        return;
    };
    each_backend(|| {
        round_trip(
            "dynamic",
            "eh_dynamic",
            &["--name", "VmtEhDyn", "--count", "2"],
        );
    });
}

#[test]
fn otel_logs_and_spans_round_trip() {
    let Some(_serial) = require_user_events() else {
        return;
    };
    each_backend(|| {
        round_trip("otel", "otel", &["--name", "VmtOtel"]);
    });
}

// ---- differential: perf and uevrec record the same run ---------------------------------

/// perf's view: `perf script -F event,trace` lines `user_events:TP: eventheader_flags=7
/// version=0 id=0 tag=0 opcode=0 level=4`, as (tracepoint, [version, id, tag, opcode, level]).
fn perf_headers(text: &str) -> Vec<(String, [u64; 5])> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l.strip_prefix("user_events:")?;
            let (tp, fields) = rest.split_once(": ")?;
            let kv: BTreeMap<&str, u64> = fields
                .split_whitespace()
                .filter_map(|f| f.split_once('='))
                .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
                .collect();
            let get = |k: &str| {
                *kv.get(k)
                    .unwrap_or_else(|| panic!("perf line without {k}: {l}"))
            };
            Some((
                tp.to_string(),
                [
                    get("version"),
                    get("id"),
                    get("tag"),
                    get("opcode"),
                    get("level"),
                ],
            ))
        })
        .collect()
}

/// uevrec's header values in the same shape.
fn uevrec_header(l: &Value) -> [u64; 5] {
    let n = |k: &str| l.get(k).and_then(Value::as_u64).unwrap_or(0);
    [n("version"), n("id"), n("tag"), n("opcode"), n("level")]
}

fn differential(test: &str, bin: &str, extra: &[&str]) {
    let dir = tmp_dir(test);
    let data = dir.join("perf.data");
    let (ready, stop, start) = (
        dir.join("perf-ready"),
        dir.join("perf-stop"),
        dir.join("start"),
    );
    let mut recorder = Recorder::start(&dir);
    std::thread::sleep(Duration::from_millis(500));
    let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    args.extend(["--start-file".into(), start.to_string_lossy().into_owned()]);
    let producer = Producer::spawn(bin, &args);
    let tracepoints = producer.wait_registered(expected_registrations(bin));
    // perf cannot attach late: it starts once the tracepoints exist.
    let mut perf_cmd = Command::new("perf");
    perf_cmd.args(["record", "-q", "-a"]);
    for tp in &tracepoints {
        perf_cmd.arg("-e").arg(format!("user_events:{tp}"));
    }
    let mut perf = perf_cmd
        .arg("-o")
        .arg(&data)
        .args([
            "--",
            "sh",
            "-c",
            r#"touch "$0"; while [ ! -e "$1" ]; do sleep 0.05; done"#,
        ])
        .args([&ready, &stop])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("perf record (install linux-perf on the host; the guest uses the host's /usr)");
    recorder.wait_attached(&tracepoints);
    assert!(
        wait_until(PRODUCER_TIMEOUT, || ready.exists()),
        "perf record never started its workload"
    );
    fs::write(&start, b"").expect("start file");
    let report = producer.finish();
    fs::write(&stop, b"").expect("stop file");
    let status = wait_child(&mut perf, STOP_TIMEOUT).expect("perf record did not stop");
    assert!(status.success(), "perf record: {status}");
    let lines = recorder.stop();
    let out = Command::new("perf")
        .args(["script", "-F", "event,trace", "-i"])
        .arg(&data)
        .output()
        .expect("perf script");
    let perf_text = String::from_utf8_lossy(&out.stdout);
    let mut perf_view: BTreeMap<String, Vec<[u64; 5]>> = BTreeMap::new();
    for (tp, h) in perf_headers(&perf_text) {
        perf_view.entry(tp).or_default().push(h);
    }
    let tps: BTreeSet<&String> = tracepoints.iter().collect();
    let mut uevrec_view: BTreeMap<String, Vec<[u64; 5]>> = BTreeMap::new();
    for l in lines.iter().filter(|l| l.get("uevrec").is_none()) {
        if let Some(tp) = l["event"].as_str().filter(|e| tps.contains(&e.to_string())) {
            uevrec_view
                .entry(tp.to_string())
                .or_default()
                .push(uevrec_header(l));
        }
    }
    for v in perf_view.values_mut().chain(uevrec_view.values_mut()) {
        v.sort();
    }
    let written = report.iter().filter(|l| l.get("fields").is_some()).count();
    let perf_total: usize = perf_view.values().map(Vec::len).sum();
    assert_eq!(
        perf_total, written,
        "{bin}: perf recorded {perf_total} of {written}: {perf_text}"
    );
    assert_eq!(
        uevrec_view, perf_view,
        "{bin}: per tracepoint (version, id, tag, opcode, level): uevrec vs perf"
    );
    println!(
        "{bin}: perf and uevrec agree on {perf_total} events over {} tracepoints",
        perf_view.len()
    );
}

#[test]
fn perf_and_uevrec_see_the_same_eventheader_events() {
    let Some(_serial) = require_user_events() else {
        return;
    };
    each_backend(|| {
        if Command::new("perf").arg("--version").output().is_err() {
            panic!(
                "perf not found: install linux-perf on the host (the guest uses the host's /usr)"
            );
        }
        differential("diff-macros", "eh_macros", &[]);
        differential("diff-dynamic", "eh_dynamic", &["--name", "VmtEhDiff"]);
        differential("diff-otel", "otel", &["--name", "VmtOtelDiff"]);
    });
}

/// An EventHeader event registered as a multi-format version
/// (`USER_EVENT_REG_MULTI_FORMAT`: tracepoint `user_events_multi:<name>.<hex>`), its payload
/// built here byte by byte (no crate registers multi-format events): the `.<hex>` suffix
/// is stripped before the EventHeader name is read, and the line carries `format_id`.
#[test]
fn eventheader_multi_format_version() {
    let Some(_serial) = require_user_events() else {
        return;
    };
    each_backend(|| {
        let dir = tmp_dir("eh-multi");
        let mut rec = Recorder::start(&dir);
        let provider = format!("VmtEhMulti{}", std::process::id());
        let tracepoint = format!("{provider}_L4K2");
        let command = RegisterCommand::parse(&format!(
            "{tracepoint} u8 eventheader_flags; u8 version; u16 id; u16 tag; u8 opcode; u8 level"
        ))
        .expect("the EventHeader register command");
        let events = UserEvents::open().expect("opening user_events_data");
        let event = events
            .register(&command, Flags::MULTI_FORMAT)
            .expect("registering a multi-format EventHeader event (Linux 6.10+)");
        // uevrec attaches the new version at a rescan.
        let prefix = format!("user_events_multi:{tracepoint}.");
        let out = rec.out.clone();
        let attached = wait_until(PRODUCER_TIMEOUT, || {
            fs::read_to_string(&out)
                .unwrap_or_default()
                .lines()
                .any(|l| {
                    serde_json::from_str::<Value>(l).is_ok_and(|v| {
                        v["what"] == "attached"
                            && v["event"].as_str().is_some_and(|e| e.starts_with(&prefix))
                    })
                })
        });
        rec.assert_running();
        assert!(attached, "uevrec never attached {prefix}<hex>");
        assert!(event.wait_enabled(PRODUCER_TIMEOUT), "enable bit never set");

        // Header: flags 0x07 (pointer64, little-endian, extension follows), version 0, id 0,
        // tag 0, opcode 0, level 4; one metadata extension block; then the payload.
        let mut data = vec![0x07, 0, 0, 0, 0, 0, 0, 4];
        let mut meta = b"MultiEv;k=v\0".to_vec();
        meta.extend_from_slice(b"n\0\x04"); // Value32, default format
        meta.extend_from_slice(b"s\0\x07"); // ZStringChar8
        data.extend_from_slice(&(meta.len() as u16).to_le_bytes());
        data.extend_from_slice(&1u16.to_le_bytes()); // kind 1: metadata, no block after it
        data.extend_from_slice(&meta);
        data.extend_from_slice(&42u32.to_le_bytes());
        data.extend_from_slice(b"hi \xc3\xa9\0");
        assert_eq!(
            event.write(&data).expect("writing the event"),
            Written::Yes,
            "the event was not enabled"
        );
        let lines = rec.stop();
        let ours: Vec<&Value> = lines
            .iter()
            .filter(|l| l["system"] == "user_events_multi" && l["event"] == tracepoint.as_str())
            .collect();
        assert_eq!(ours.len(), 1, "one line for the one write: {lines:?}");
        let line = ours[0];
        assert!(
            line["format_id"].as_str().is_some_and(|id| !id.is_empty()),
            "{line}"
        );
        assert_eq!(line["provider"], provider.as_str(), "{line}");
        assert_eq!(line["name"], "MultiEv", "{line}");
        assert_eq!(
            line["event_attributes"],
            serde_json::json!({"k": "v"}),
            "{line}"
        );
        assert_eq!(line["level"], 4, "{line}");
        assert_eq!(line["keyword"], "0x2", "{line}");
        assert_eq!(
            line["fields"],
            serde_json::json!({"n": 42, "s": "hi é"}),
            "{line}"
        );
        assert!(line.get("errors").is_none(), "{line}");
    });
}
