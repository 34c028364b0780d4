//! Tier 3: uevrec against real user_events.
//!
//! These tests need a kernel with `CONFIG_USER_EVENTS=y`; the development machines lack
//! it, so `scripts/vm-test.sh` boots one under QEMU and runs this binary there, once, as
//! root (see docs/vm-tier.md). Anywhere else every test prints
//! that it skips (tests/common/tier.rs), or fails when `UEVREC_REQUIRE_TIERS` names vm.
//!
//! The producers are the `uevrec-samples` binaries (`samples/src/bin/`): each reports
//! what it wrote as JSON lines, in uevrec's value conventions, so a test compares
//! uevrec's output with the producer's own account, value by value. Tests run in
//! parallel; each uses its own event names. The producers wait for their enable bit and
//! then for a start file the test creates once uevrec's output says it attached the event
//! (perf: once perf starts its workload), because the bit turns on when a recorder
//! *opens* the event, a moment before it keeps records.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use uevrec_parsers::FieldKind;
use uevrec_samples::register::strip_bracket_contents;
use uevrec_samples::{
    Flags, PayloadValue, RegisterCommand, UserEvents, Written, add_persistent, event_exists,
    remove_persistent, wait_until,
};

use crate::common::KillOnDrop;
use crate::common::vm::{
    TRACEFS, assert_running, backend, each_backend, interrupt_and_wait, output_lines, spawn_sample,
    tmp_dir, user_events_here, wait_child,
};

/// How long a producer may take from start to exit (TCG guests are ~6x slower).
const PRODUCER_TIMEOUT: Duration = Duration::from_secs(180);
/// How long uevrec may take to drain and exit after SIGINT.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long uevrec's background closer (`uevrec-close`, src/capture/perf/reaper.rs) may take,
/// after uevrec exited, to close the descriptors of the few events a test records: one
/// RCU grace period per event (tens of ms; TCG guests are slower). Until then the events
/// are still in use: enable bits set, deleting them fails with EBUSY. (The ftrace
/// backend has no closer: its instance is gone when uevrec exits.)
const CLOSE_TIMEOUT: Duration = Duration::from_secs(60);

/// Wait until every background closer is done (the events uevrec recorded are released).
fn wait_released() {
    if let Err(left) = crate::common::wait_reapers_gone(CLOSE_TIMEOUT) {
        panic!("uevrec's background closers {left:?} still running after {CLOSE_TIMEOUT:?}");
    }
}

// ---- processes ------------------------------------------------------------------------

/// A running producer whose stdout JSON lines are collected as they come.
struct Producer {
    child: KillOnDrop,
    lines: Arc<Mutex<Vec<Value>>>,
    name: String,
}

impl Producer {
    fn spawn<S: AsRef<std::ffi::OsStr>>(bin: &str, args: &[S]) -> Producer {
        let (child, lines) = spawn_sample(bin, args);
        Producer {
            child: KillOnDrop(child),
            lines,
            name: format!(
                "{bin} {}",
                args.iter()
                    .map(|a| a.as_ref().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        }
    }

    fn lines(&self) -> Vec<Value> {
        self.lines.lock().unwrap().clone()
    }

    /// Wait until a report line satisfies `pred`.
    fn wait_line(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let mut found = None;
        let ok = wait_until(PRODUCER_TIMEOUT, || {
            found = self.lines().into_iter().find(|v| pred(v));
            found.is_some()
        });
        assert!(
            ok,
            "{}: no {what} line within {PRODUCER_TIMEOUT:?}; got {:?}",
            self.name,
            self.lines()
        );
        found.unwrap()
    }

    /// The `{"registered":..}` lines once `n` have arrived.
    fn wait_registered(&self, n: usize) -> Vec<Value> {
        crate::common::vm::wait_reports(&self.lines, "registered", n, PRODUCER_TIMEOUT, &self.name)
    }

    /// Wait for the producer to exit successfully; its report lines.
    fn finish(mut self) -> Vec<Value> {
        crate::common::vm::finish_sample(&mut self.child, &self.lines, &self.name, PRODUCER_TIMEOUT)
    }
}

/// The start signal `tag` of a producer in a test's directory.
fn start_file(dir: &Path, tag: &str) -> PathBuf {
    dir.join(format!("start-{tag}"))
}

/// `args` plus `--start-file` for the start signal `tag` (see [`Recorder::release`]).
fn with_start(args: &[&str], dir: &Path, tag: &str) -> Vec<String> {
    let mut v: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    v.push("--start-file".into());
    v.push(start_file(dir, tag).to_string_lossy().into_owned());
    v
}

/// `uevrec record` writing JSON lines to a file, stopped with SIGINT.
///
/// Producers wait for a start file (`--start-file`) that [`Recorder::release`] creates
/// once uevrec's output says it attached the event: the enable bit alone turns on when
/// the event is opened, a moment before recording is enabled.
struct Recorder {
    child: KillOnDrop,
    dir: PathBuf,
    out: PathBuf,
    stderr: PathBuf,
}

impl Recorder {
    fn start(dir: &Path, selectors: &[&str]) -> Recorder {
        Recorder::start_with(dir, selectors, &[])
    }

    /// [`Recorder::start`] with `extra` arguments for `uevrec record`.
    fn start_with(dir: &Path, selectors: &[&str], extra: &[&std::ffi::OsStr]) -> Recorder {
        let quiet: &std::ffi::OsStr = "--quiet".as_ref();
        Recorder::start_with_args(dir, selectors, &[&[quiet], extra].concat())
    }

    /// [`Recorder::start`] with these arguments for `uevrec record` (not `--quiet`).
    fn start_with_args(dir: &Path, selectors: &[&str], extra: &[&std::ffi::OsStr]) -> Recorder {
        let out = dir.join("uevrec.jsonl");
        let stderr = dir.join("uevrec.stderr");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_uevrec"));
        cmd.arg("record").arg("-o").arg(&out);
        cmd.args(["--backend", backend()]);
        for s in selectors {
            cmd.arg("-e").arg(s);
        }
        cmd.args(extra);
        // scripts/vm-test.sh runs this binary a second time with formatter workers.
        if let Ok(n) = std::env::var("UEVREC_VM_THREADS") {
            cmd.args(["--threads", &n]);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("spawning uevrec");
        Recorder {
            child: KillOnDrop(child),
            dir: dir.to_path_buf(),
            out,
            stderr,
        }
    }

    /// Wait until the output shows `n` `attached` notices for `system:event` (or its
    /// multi-format versions `system:event.<id>`), then create the start file `tag`.
    fn release(&mut self, tag: &str, key: &str, n: usize) {
        self.wait_attached(key, n);
        fs::write(start_file(&self.dir, tag), b"").expect("start file");
    }

    /// Wait until the output shows `n` `attached` notices for `system:event` (or its
    /// multi-format versions `system:event.<id>`).
    fn wait_attached(&mut self, key: &str, n: usize) {
        let versions = format!("{key}.");
        let out = self.out.clone();
        let attached = || {
            fs::read_to_string(&out)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|l| l["uevrec"] == "notice" && l["what"] == "attached")
                .filter(|l| {
                    l["event"]
                        .as_str()
                        .is_some_and(|e| e == key || e.starts_with(&versions))
                })
                .count()
        };
        // Give up at once if uevrec has exited (it would never attach).
        let child = &mut self.child;
        let ok = wait_until(PRODUCER_TIMEOUT, || {
            attached() >= n || child.try_wait().ok().flatten().is_some()
        });
        self.assert_running();
        assert!(
            ok,
            "uevrec never reported attaching {n} x {key} within {PRODUCER_TIMEOUT:?}; output: {}",
            fs::read_to_string(&self.out).unwrap_or_default()
        );
    }

    fn assert_running(&mut self) {
        assert_running(&mut self.child, &self.stderr);
    }

    /// SIGINT, wait (a stall fails the test), check the status; every output line parsed.
    fn stop(mut self) -> Vec<Value> {
        self.assert_running();
        interrupt_and_wait(&mut self.child, STOP_TIMEOUT, &self.stderr);
        output_lines(&self.out)
    }
}

/// uevrec's event lines for `system:event` (multi-format: base name).
fn records_of<'a>(lines: &'a [Value], system: &str, event: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| l["system"] == system && l["event"] == event && l.get("uevrec").is_none())
        .collect()
}

/// The producer's `{"event":..,"fields":..}` lines.
fn written(lines: &[Value]) -> Vec<&Value> {
    lines.iter().filter(|l| l.get("fields").is_some()).collect()
}

fn done_count(lines: &[Value], key: &str) -> u64 {
    let done = lines
        .iter()
        .find(|l| l.get("done").is_some())
        .expect("done line");
    done[key]
        .as_u64()
        .unwrap_or_else(|| panic!("done line without {key}: {done}"))
}

/// Match records to the producer's rows by the value of `key` and compare all fields.
fn assert_same_fields(what: &str, expected: &[&Value], got: &[&Value], key: &str) {
    assert_eq!(
        got.len(),
        expected.len(),
        "{what}: {} records recorded, {} written",
        got.len(),
        expected.len()
    );
    let by_key: BTreeMap<String, &Value> = got
        .iter()
        .map(|r| (r["fields"][key].to_string(), &r["fields"]))
        .collect();
    assert_eq!(
        by_key.len(),
        got.len(),
        "{what}: duplicate `{key}` values in the recording"
    );
    for row in expected {
        let k = row["fields"][key].to_string();
        let rec = by_key
            .get(&k)
            .unwrap_or_else(|| panic!("{what}: no record with {key}={k}"));
        let want = row["fields"].as_object().unwrap();
        let have = rec
            .as_object()
            .unwrap_or_else(|| panic!("{what}: fields not an object: {rec}"));
        for (name, value) in want {
            assert_eq!(
                have.get(name),
                Some(value),
                "{what}: field `{name}` of the record with {key}={k}"
            );
        }
        assert_eq!(have.len(), want.len(), "{what}: extra fields in {rec}");
    }
}

// ---- 1, 2: every type and awkward strings round-trip ----------------------------------

/// Whether the current backend can record an `every_type --strings` row whose strings
/// are `len` bytes (None: not a strings row). The ftrace backend cannot record entries
/// larger than [`uevrec::capture::ftrace::MAX_ENTRY`]: the kernel drops them (without a count),
/// so the 4000-byte row (an 8 KiB entry: two copies of the string) is not expected there.
fn fits_backend(len: Option<u64>) -> bool {
    // Common fields 8, u32 len 4, two dynamic locations 8, two strings with their NULs.
    let entry = len.map_or(0, |n| 20 + 2 * (n + 1));
    backend() != "ftrace" || entry <= uevrec::capture::ftrace::MAX_ENTRY as u64
}

/// Run `every_type ARGS` under uevrec; compare values (and the schema uevrec lists).
fn every_type_round_trip(test: &str, name: &str, extra: &[&str], key: &str) {
    let dir = tmp_dir(test);
    let mut args = vec!["--name", name];
    args.extend_from_slice(extra);
    let producer = Producer::spawn("every_type", &with_start(&args, &dir, "p"));
    let reg = producer.wait_registered(1).remove(0);
    let selector = format!("user_events:{name}");
    check_listed_schema(&selector, name, reg["command"].as_str().unwrap());
    let mut recorder = Recorder::start(&dir, &[&selector]);
    recorder.release("p", &selector, 1);
    let report = producer.finish();
    let lines = recorder.stop();
    let mut expected = written(&report);
    assert_eq!(expected.len() as u64, done_count(&report, "written"));
    expected.retain(|row| fits_backend(row["fields"]["len"].as_u64()));
    assert!(!expected.is_empty(), "{name}: the producer wrote nothing");
    assert_same_fields(
        name,
        &expected,
        &records_of(&lines, "user_events", name),
        key,
    );
}

/// `uevrec list --json SELECTOR` must show the schema `register.rs` computes for `command`.
fn check_listed_schema(selector: &str, name: &str, command: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_uevrec"))
        .args(["list", "--json", selector])
        .output()
        .expect("uevrec list");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "uevrec list failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = find_schema(&stdout, name)
        .unwrap_or_else(|| panic!("`uevrec list --json` shows no schema for {name}: {stdout}"));
    let id = listed["id"].as_u64().expect("schema id") as u32;
    let cmd = RegisterCommand::parse(command).unwrap_or_else(|e| panic!("{command}: {e}"));
    let computed = serde_json::to_value(cmd.event_format(id)).unwrap();
    assert_eq!(
        normalise_schema(&listed),
        normalise_schema(&computed),
        "schema of {name}: listed vs computed"
    );
}

/// The object describing event `name` in `uevrec list --json` output (an array, one
/// object, or one object per line; the schema may sit under a `format` key).
fn find_schema(text: &str, name: &str) -> Option<Value> {
    let mut candidates = Vec::new();
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        candidates.push(v);
    } else {
        candidates.extend(
            text.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok()),
        );
    }
    let mut stack = candidates;
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(ref map) => {
                if map.get("name").and_then(Value::as_str) == Some(name)
                    && map.contains_key("fields")
                {
                    return Some(v);
                }
                stack.extend(map.values().cloned());
            }
            _ => {}
        }
    }
    None
}

/// Name, id and each field's name/offset/size/signed/kind/type text, with the garbage
/// numbers the kernel prints inside user_events array brackets removed
/// ([`strip_bracket_contents`]).
fn normalise_schema(schema: &Value) -> Value {
    let fields = |key: &str| -> Vec<Value> {
        schema[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|f| {
                        json!({
                            "name": f["name"], "offset": f["offset"], "size": f["size"],
                            "signed": f["signed"], "kind": f["kind"],
                            "type_text": strip_bracket_contents(f["type_text"].as_str().unwrap_or("")),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    json!({"name": schema["name"], "id": schema["id"], "common_fields": fields("common_fields"), "fields": fields("fields")})
}

#[test]
fn t1_every_type_round_trips() {
    if !user_events_here() {
        return;
    }
    each_backend(|| {
        every_type_round_trip("t1", "vmt_every", &[], "f_u8");
    });
}

#[test]
fn t2_dynamic_strings_round_trip() {
    if !user_events_here() {
        return;
    }
    each_backend(|| {
        every_type_round_trip("t2", "vmt_strings", &["--strings"], "len");
    });
}

// ---- 3: multi-format -------------------------------------------------------------------

#[test]
fn t3_multi_format_versions() {
    if !user_events_here() {
        return;
    }
    each_backend(|| {
        let dir = tmp_dir("t3");
        let name = "vmt_multi";
        let args = with_start(&["--name", name, "--count", "3"], &dir, "p");
        let producer = Producer::spawn("multi_format", &args);
        producer.wait_registered(2);
        // While the producer is registered: which `name.<id>` tracepoint has which fields.
        let multi_dir = Path::new(TRACEFS).join("events/user_events_multi");
        let mut version_of_id: BTreeMap<String, u64> = BTreeMap::new();
        for entry in fs::read_dir(&multi_dir).expect("events/user_events_multi") {
            let tracepoint = entry.unwrap().file_name().to_string_lossy().into_owned();
            let Some(id) = tracepoint.strip_prefix(&format!("{name}.")) else {
                continue;
            };
            let text = fs::read_to_string(multi_dir.join(&tracepoint).join("format")).unwrap();
            let version = if text.contains("field:u64 b;") { 1 } else { 2 };
            assert!(
                version == 1 || text.contains(" note"),
                "{tracepoint}: {text}"
            );
            version_of_id.insert(id.to_string(), version);
        }
        assert_eq!(version_of_id.len(), 2, "two tracepoints: {version_of_id:?}");
        let selector = format!("user_events_multi:{name}");
        let mut recorder = Recorder::start(&dir, &[&selector]);
        recorder.release("p", &selector, 2);
        let report = producer.finish();
        let lines = recorder.stop();
        let recs = records_of(&lines, "user_events_multi", name);
        let rows = written(&report);
        assert_eq!(rows.len(), 6);
        assert_eq!(recs.len(), rows.len(), "records: {recs:?}");
        let mut ids: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
        for rec in &recs {
            let id = rec["format_id"]
                .as_str()
                .unwrap_or_else(|| panic!("no format_id: {rec}"))
                .to_string();
            let version = if rec["fields"].get("b").is_some() {
                1
            } else {
                2
            };
            ids.entry(version).or_default().insert(id);
            let row = rows
                .iter()
                .find(|r| r["version"] == version && r["fields"]["a"] == rec["fields"]["a"])
                .unwrap_or_else(|| panic!("no written row for {rec}"));
            assert_eq!(rec["fields"], row["fields"]);
        }
        assert_eq!(ids.len(), 2, "both versions recorded: {ids:?}");
        let (v1, v2) = (&ids[&1], &ids[&2]);
        assert_eq!(
            (v1.len(), v2.len()),
            (1, 1),
            "one format_id per version: {ids:?}"
        );
        assert_ne!(v1, v2);
        for (version, id_set) in &ids {
            let id = id_set.iter().next().unwrap();
            assert_eq!(
                version_of_id.get(id),
                Some(version),
                "format_id {id}: {version_of_id:?}"
            );
        }
    });
}

// ---- 4: late registration ----------------------------------------------------------------

#[test]
fn t4_late_registration() {
    if !user_events_here() {
        return;
    }
    each_backend(|| {
        let dir = tmp_dir("t4");
        let name = "vmt_late";
        // (Deleted after the previous backend's run, maybe a moment late.)
        assert!(wait_until(Duration::from_secs(10), || !event_exists(
            Path::new(TRACEFS),
            "user_events",
            name
        )));
        let selector = format!("user_events:{name}");
        let mut recorder = Recorder::start(&dir, &[&selector]);
        // uevrec is up (its output file exists) before the event does.
        assert!(
            wait_until(PRODUCER_TIMEOUT, || recorder.out.exists()),
            "uevrec never started"
        );
        std::thread::sleep(Duration::from_secs(1));
        recorder.assert_running();
        let producer = Producer::spawn("every_type", &with_start(&["--name", name], &dir, "p"));
        producer.wait_registered(1);
        recorder.release("p", &selector, 1);
        let report = producer.finish();
        let lines = recorder.stop();
        assert_same_fields(
            name,
            &written(&report),
            &records_of(&lines, "user_events", name),
            "f_u8",
        );
    });
}

// ---- 5: the enable bit follows the recorder ----------------------------------------------

#[test]
fn t5_enable_bit_follows_recorder() {
    if !user_events_here() {
        return;
    }
    each_backend(|| {
        let dir = tmp_dir("t5");
        let name = "vmt_bit";
        let producer = Producer::spawn(
            "enable_bit",
            &[
                "--name",
                name,
                "--interval-ms",
                "2",
                "--timeout-secs",
                "150",
            ],
        );
        producer.wait_registered(1);
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !producer.lines().iter().any(|l| l.get("enabled").is_some()),
            "the bit must be clear before anyone records: {:?}",
            producer.lines()
        );
        let recorder = Recorder::start(&dir, &[&format!("user_events:{name}")]);
        producer.wait_line("enabled:true", |l| l["enabled"] == true);
        std::thread::sleep(Duration::from_secs(2));
        let lines = recorder.stop();
        // The bit clears when the last descriptor of the event closes: uevrec exits at
        // once and (perf) leaves that close to its background closer, which is done within
        // CLOSE_TIMEOUT. The producer exits by itself only once it has seen the bit cleared.
        wait_released();
        let report = producer.finish();
        let done = report.last().unwrap();
        assert_eq!(done["saw_off_after_on"], true, "{done}");
        let written = done["written"].as_u64().unwrap();
        let recs = records_of(&lines, "user_events", name);
        assert!(
            !recs.is_empty(),
            "nothing recorded while enabled ({written} written)"
        );
        assert!(
            recs.len() as u64 <= written,
            "{} records but only {written} written",
            recs.len()
        );
        let seqs: BTreeSet<u64> = recs
            .iter()
            .map(|r| r["fields"]["seq"].as_u64().expect("seq"))
            .collect();
        assert_eq!(seqs.len(), recs.len(), "duplicate records");
        assert!(
            seqs.iter().all(|&s| s < written),
            "a seq never written: {seqs:?}"
        );
    });
}

// ---- 6: persistent event via dynamic_events --------------------------------------------------

#[test]
fn t6_persistent_event() {
    if !user_events_here() {
        return;
    }
    each_backend(|| {
        let dir = tmp_dir("t6");
        let tracefs = Path::new(TRACEFS);
        let name = "vmt_persist";
        let cmd = RegisterCommand::parse(&format!("{name} u32 a; char[8] b")).unwrap();
        add_persistent(tracefs, &cmd).expect("u: line on dynamic_events");
        assert!(event_exists(tracefs, "user_events", name));
        let dynamic = fs::read_to_string(tracefs.join("dynamic_events")).unwrap();
        assert!(dynamic.contains(name), "dynamic_events lists it: {dynamic}");

        let selector = format!("user_events:{name}");
        let mut recorder = Recorder::start(&dir, &[&selector]);
        recorder.release("t", &selector, 1);
        {
            let events = UserEvents::open().expect("user_events_data");
            let event = events
                .register(&cmd, Flags::NONE)
                .expect("register the persistent event's command");
            assert!(
                event.wait_enabled(PRODUCER_TIMEOUT),
                "uevrec did not enable {name}"
            );
            for a in 0..3u32 {
                let w = event
                    .emit(&[PayloadValue::Uint(a.into()), PayloadValue::Str("persist")])
                    .expect("write");
                assert_eq!(w, Written::Yes);
            }
            event.unregister().expect("unregister");
        }
        let lines = recorder.stop();
        let recs = records_of(&lines, "user_events", name);
        let got: Vec<(u64, &str)> = recs
            .iter()
            .map(|r| {
                (
                    r["fields"]["a"].as_u64().unwrap(),
                    r["fields"]["b"].as_str().unwrap(),
                )
            })
            .collect();
        let mut got = got;
        got.sort();
        assert_eq!(got, vec![(0, "persist"), (1, "persist"), (2, "persist")]);
        // No producer, no recorder (once its background closer is done; before that,
        // deleting fails with EBUSY): a persistent event stays until deleted with its fields.
        wait_released();
        assert!(
            event_exists(tracefs, "user_events", name),
            "a persistent event outlives its users"
        );
        remove_persistent(tracefs, &cmd).expect("-: line on dynamic_events");
        assert!(
            wait_until(Duration::from_secs(5), || !event_exists(
                tracefs,
                "user_events",
                name
            )),
            "still there after -:"
        );
    });
}

// ---- 7: accounting -----------------------------------------------------------------------------

#[test]
fn t7_accounting_written_equals_recorded_plus_lost() {
    if !user_events_here() {
        return;
    }
    each_backend(|| {
        let dir = tmp_dir("t7");
        let name = "vmt_rate";
        let events = "40000";
        let args = with_start(
            &["--name", name, "--events", events, "--threads", "2"],
            &dir,
            "p",
        );
        let producer = Producer::spawn("rate", &args);
        producer.wait_registered(1);
        let selector = format!("user_events:{name}");
        let mut recorder = Recorder::start(&dir, &[&selector]);
        recorder.release("p", &selector, 1);
        let report = producer.finish();
        let lines = recorder.stop();
        let written = done_count(&report, "written");
        assert_eq!(written, events.parse::<u64>().unwrap(), "{report:?}");
        let recs = records_of(&lines, "user_events", name);
        let lost: u64 = lines
            .iter()
            .filter(|l| l["uevrec"] == "lost")
            .map(|l| l["lost"].as_u64().unwrap_or(0))
            .sum();
        let pairs: BTreeSet<(u64, u64)> = recs
            .iter()
            .map(|r| {
                (
                    r["fields"]["thread"].as_u64().unwrap(),
                    r["fields"]["seq"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(pairs.len(), recs.len(), "duplicate records");
        println!(
            "t7: producer {written} records at {}/s; uevrec kept {} and reported {lost} lost",
            report.last().unwrap()["per_sec"],
            recs.len()
        );
        assert_eq!(
            recs.len() as u64 + lost,
            written,
            "records + lost must equal written"
        );
    });
}

// ---- 8: differential against perf --------------------------------------------------------------

/// Record one `every_type` run with `perf record` and return perf's field texts per
/// record (`perf script -F trace`, split at the known field names) plus the producer's
/// report.
fn perf_run(test: &str, name: &str, extra: &[&str]) -> (Vec<BTreeMap<String, String>>, Vec<Value>) {
    let dir = tmp_dir(test);
    let data = dir.join("perf.data");
    // perf opens the event (the enable bit turns on), then spends a while (seconds under
    // emulation) synthesizing process info before it enables recording and starts its
    // workload; the workload's first act tells the producer to write.
    let (ready, stop) = (dir.join("perf-ready"), dir.join("perf-stop"));
    let ready_arg = ready.to_str().unwrap().to_string();
    let mut args = vec!["--name", name, "--start-file", &ready_arg];
    args.extend_from_slice(extra);
    let producer = Producer::spawn("every_type", &args);
    let reg = producer.wait_registered(1).remove(0);
    let mut perf = Command::new("perf")
        .args([
            "record",
            "-q",
            "-a",
            "-e",
            &format!("user_events:{name}"),
            "-o",
        ])
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
        .expect("perf record (install linux-perf on the host)");
    let report = producer.finish();
    fs::write(&stop, b"").unwrap();
    let status = wait_child(&mut perf, STOP_TIMEOUT).expect("perf record did not stop");
    assert!(status.success(), "perf record: {status}");
    (perf_fields(&data, reg["command"].as_str().unwrap()), report)
}

/// `perf script -F trace` of `data` (one event, registered with `command`): perf's field
/// texts per record.
fn perf_fields(data: &Path, command: &str) -> Vec<BTreeMap<String, String>> {
    let out = Command::new("perf")
        .args(["script", "-F", "trace", "-i"])
        .arg(data)
        .output()
        .expect("perf script");
    assert!(
        out.status.success(),
        "perf script -i {}: {out:?}",
        data.display()
    );
    // Byte arrays come out raw (not UTF-8); they are not compared.
    let text = String::from_utf8_lossy(&out.stdout);
    let cmd = RegisterCommand::parse(command).unwrap();
    let names: Vec<String> = cmd.fields.iter().map(|f| f.name.clone()).collect();
    split_perf_records(&text, &names)
}

/// `perf script -F trace` prints `a=1 b=text ...` per record, strings raw (newlines
/// included). Split at `name=` markers in field order; a record starts at a line that
/// begins with the first field's marker.
fn split_perf_records(text: &str, names: &[String]) -> Vec<BTreeMap<String, String>> {
    let first = format!("{}=", names[0]);
    let mut starts: Vec<usize> = Vec::new();
    if text.starts_with(&first) {
        starts.push(0);
    }
    starts.extend(
        text.match_indices(&format!("\n{first}"))
            .map(|(i, _)| i + 1),
    );
    let mut records = Vec::new();
    for (n, &start) in starts.iter().enumerate() {
        // Each record ends with one newline of perf's own (the string may end with more).
        let end = starts.get(n + 1).copied().unwrap_or(text.len()) - 1;
        let rec = &text[start..end];
        let mut fields = BTreeMap::new();
        let mut pos = first.len();
        for (i, name) in names.iter().enumerate() {
            let (value_end, next_pos) = match names.get(i + 1) {
                Some(next) => {
                    let marker = format!(" {next}=");
                    let at = rec[pos..]
                        .find(&marker)
                        .unwrap_or_else(|| panic!("no `{marker}` in {rec:?}"))
                        + pos;
                    (at, at + marker.len())
                }
                None => (rec.len(), rec.len()),
            };
            fields.insert(name.clone(), rec[pos..value_end].to_string());
            pos = next_pos;
        }
        records.push(fields);
    }
    records
}

/// Compare perf's text for every integer and char-string field with uevrec's values.
/// perf prints s8/s16/char/short as unsigned (a known perf bug), so integers are
/// compared modulo 2^bits; byte arrays, u32 arrays and structs are skipped: perf prints
/// pointers/garbage for them (their print fmt is `%llu` of the field address).
fn assert_perf_agrees(
    what: &str,
    command: &str,
    perf: &[BTreeMap<String, String>],
    uevrec: &[&Value],
    key: &str,
) {
    let format = RegisterCommand::parse(command).unwrap();
    assert_eq!(
        perf.len(),
        uevrec.len(),
        "{what}: perf has {} records, uevrec {}",
        perf.len(),
        uevrec.len()
    );
    let mut compared = 0;
    for rec in uevrec {
        let fields = &rec["fields"];
        let perf_rec = perf
            .iter()
            .find(|p| same_int(&p[key], &fields[key], 8))
            .unwrap_or_else(|| panic!("{what}: perf has no record with {key}={}", fields[key]));
        for field in &format.fields {
            let (p, u) = (&perf_rec[&field.name], &fields[&field.name]);
            match &field.kind {
                FieldKind::Integer { size, .. } => {
                    assert!(
                        same_int(p, u, *size),
                        "{what}: {} perf={p} uevrec={u}",
                        field.name
                    );
                }
                FieldKind::FixedArray {
                    elem: uevrec_parsers::Element::Char,
                    ..
                }
                | FieldKind::Dynamic {
                    elem: uevrec_parsers::Element::Char,
                    ..
                } => {
                    assert_eq!(Some(p.as_str()), u.as_str(), "{what}: {}", field.name);
                }
                _ => continue,
            }
            compared += 1;
        }
    }
    assert!(compared > 0);
    println!("{what}: agree on {compared} values");
}

fn same_int(perf: &str, uevrec: &Value, size: u8) -> bool {
    let Ok(p) = perf.trim().parse::<i128>() else {
        return false;
    };
    let u = uevrec
        .as_i64()
        .map(i128::from)
        .or_else(|| uevrec.as_u64().map(i128::from));
    let Some(u) = u else { return false };
    let modulus = 1i128 << (8 * u32::from(size));
    p.rem_euclid(modulus) == u.rem_euclid(modulus)
}

fn perf_differential(test: &str, name: &str, extra: &[&str], key: &str) {
    if Command::new("perf").arg("--version").output().is_err() {
        panic!("perf not found: install linux-perf on the host (the guest uses the host's /usr)");
    }
    // perf's view of one run, compared with what the producer says it wrote.
    let (perf, report) = perf_run(test, name, extra);
    let rows = written(&report);
    assert_eq!(
        perf.len(),
        rows.len(),
        "{name}: perf recorded {} of {} records",
        perf.len(),
        rows.len()
    );
    let command = report[0]["command"].as_str().unwrap().to_string();
    assert_perf_agrees(
        &format!("{name} (perf vs producer)"),
        &command,
        &perf,
        &rows,
        key,
    );
    // uevrec's view of an identical run (the producer's values are fixed), compared
    // with perf's.
    let dir = tmp_dir(&format!("{test}-uevrec"));
    let mut args = vec!["--name", name];
    args.extend_from_slice(extra);
    let producer = Producer::spawn("every_type", &with_start(&args, &dir, "p"));
    producer.wait_registered(1);
    let selector = format!("user_events:{name}");
    let mut recorder = Recorder::start(&dir, &[&selector]);
    recorder.release("p", &selector, 1);
    producer.finish();
    let lines = recorder.stop();
    let mut perf = perf;
    perf.retain(|r| fits_backend(r.get("len").and_then(|n| n.parse().ok())));
    assert_perf_agrees(
        &format!("{name} (perf vs uevrec)"),
        &command,
        &perf,
        &records_of(&lines, "user_events", name),
        key,
    );
}

#[test]
fn t8_perf_agrees_every_type() {
    if !user_events_here() {
        return;
    }
    each_backend(|| {
        perf_differential("t8a", "vmt_perf_every", &[], "f_u8");
    });
}

#[test]
fn t8_perf_agrees_strings() {
    if !user_events_here() {
        return;
    }
    each_backend(|| {
        perf_differential("t8b", "vmt_perf_strings", &["--strings"], "len");
    });
}

// ---- 9: producers come and go ------------------------------------------------------------------

#[test]
fn t9_producer_exit_and_reregistration() {
    if !user_events_here() {
        return;
    }
    each_backend(|| {
        let dir = tmp_dir("t9");
        let tracefs = Path::new(TRACEFS);
        let (plain, multi) = ("vmt_gone", "vmt_gone_multi");
        let (plain_sel, multi_sel) = (
            format!("user_events:{plain}"),
            format!("user_events_multi:{multi}"),
        );
        let mut recorder = Recorder::start(&dir, &[&plain_sel, &multi_sel]);
        // A producer registers, writes, exits: uevrec holds the tracepoint (a perf fd is a
        // reference), so the event stays; the same producer again reuses it.
        let mut plain_written = 0;
        let mut ids = BTreeSet::new();
        for n in ["5", "7"] {
            let p = Producer::spawn(
                "rate",
                &with_start(&["--name", plain, "--events", n], &dir, n),
            );
            p.wait_registered(1);
            recorder.release(n, &plain_sel, 1);
            ids.insert(
                fs::read_to_string(tracefs.join(format!("events/user_events/{plain}/id")))
                    .expect("the registered event's id"),
            );
            plain_written += done_count(&p.finish(), "written");
            recorder.assert_running();
        }
        // A new format under a multi-format name: a new tracepoint (new ID) uevrec must find.
        let mut multi_rows = Vec::new();
        for (n, version) in [(1, "1"), (2, "2")] {
            let args = ["--name", multi, "--only", version, "--count", "2"];
            let p = Producer::spawn(
                "multi_format",
                &with_start(&args, &dir, &format!("v{version}")),
            );
            p.wait_registered(1);
            recorder.release(&format!("v{version}"), &multi_sel, n);
            let report = p.finish();
            multi_rows.extend(written(&report).into_iter().cloned());
            recorder.assert_running();
        }
        let lines = recorder.stop();
        assert_eq!(
            records_of(&lines, "user_events", plain).len() as u64,
            plain_written
        );
        let multi_recs = records_of(&lines, "user_events_multi", multi);
        assert_eq!(multi_recs.len(), multi_rows.len(), "{multi_recs:?}");
        let format_ids: BTreeSet<&str> = multi_recs
            .iter()
            .filter_map(|r| r["format_id"].as_str())
            .collect();
        assert_eq!(format_ids.len(), 2, "two formats, two ids: {format_ids:?}");
        assert_eq!(
            ids.len(),
            1,
            "same name and format while held: same tracepoint id: {ids:?}"
        );
        // uevrec gone (and its background closer): nothing holds the plain event any more,
        // the kernel deletes it.
        wait_released();
        assert!(
            wait_until(Duration::from_secs(10), || !event_exists(
                tracefs,
                "user_events",
                plain
            )),
            "{plain} not auto-deleted after the producer and uevrec left"
        );
    });
}

// ---- 10: record --raw ----------------------------------------------------------------------------

/// `uevrec record --raw` and `-o` in one run, started before `bin ARGS` registers
/// `selector` (`versions` tracepoints: late registration): the perf.data decoded by
/// `uevrec decode` equals the live lines, line for line. Returns the file, the decoded
/// lines and the producer's report.
fn raw_run(
    test: &str,
    selector: &str,
    bin: &str,
    args: &[&str],
    versions: usize,
) -> (PathBuf, Vec<Value>, Vec<Value>) {
    let dir = tmp_dir(test);
    let data = dir.join("raw.data");
    // With context (the default): the perf.data holds the COMM/FORK/EXIT/CGROUP records
    // and the samples' cgroup ids, so the decoded lines carry the live `comm`/`cgroup`.
    let raw_args = [std::ffi::OsStr::new("--raw"), data.as_os_str()];
    let mut recorder = Recorder::start_with(&dir, &[selector], &raw_args);
    assert!(
        wait_until(PRODUCER_TIMEOUT, || recorder.out.exists()),
        "uevrec never started"
    );
    let producer = Producer::spawn(bin, &with_start(args, &dir, "p"));
    producer.wait_registered(versions);
    recorder.release("p", selector, versions);
    let report = producer.finish();
    let all_live = recorder.stop();
    // Schema lines: compared without their time (live: when the event attached;
    // decoded: its first record's), the session line only live.
    let untimed = |l: &Value| {
        let mut l = l.clone();
        l.as_object_mut().map(|o| o.remove("time"));
        l
    };
    let live_schemas: Vec<Value> = all_live
        .iter()
        .filter(|l| l["uevrec"] == "schema")
        .map(untimed)
        .collect();
    let live: Vec<Value> = all_live
        .into_iter()
        .filter(|l| !["notice", "session", "schema"].contains(&l["uevrec"].as_str().unwrap_or("")))
        .collect();
    let out = Command::new(env!("CARGO_BIN_EXE_uevrec"))
        .args(["decode", "-q"])
        .arg(&data)
        .output()
        .expect("uevrec decode");
    assert!(out.status.success(), "uevrec decode: {out:?}");
    let (schemas, decoded): (Vec<Value>, Vec<Value>) = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .partition(|l| l["uevrec"] == "schema");
    assert_eq!(
        schemas.len(),
        versions,
        "{test}: one schema line per format: {schemas:?}"
    );
    for s in &schemas {
        let s = untimed(s);
        assert!(
            live_schemas.contains(&s),
            "{test}: {s} not as live: {live_schemas:?}"
        );
    }
    // The same lines (decode orders by time, live by buffer): as multisets.
    let mut left: Vec<&Value> = live.iter().collect();
    for line in &decoded {
        let at = left
            .iter()
            .position(|l| *l == line)
            .unwrap_or_else(|| panic!("{test}: decoded line not recorded live: {line}"));
        left.swap_remove(at);
    }
    assert!(
        left.is_empty(),
        "{test}: live lines not in the perf.data: {left:?}"
    );
    // Context came through: the producer's records are named (equal to live, above).
    let named = decoded
        .iter()
        .filter(|l| {
            l["system"]
                .as_str()
                .is_some_and(|s| s.starts_with("user_events"))
        })
        .map(|l| {
            l["comm"]
                .as_str()
                .unwrap_or_else(|| panic!("{test}: no comm: {l}"))
        })
        .collect::<BTreeSet<_>>();
    assert_eq!(named.len(), 1, "{test}: one producer, one name: {named:?}");
    (data, decoded, report)
}

#[test]
fn t10_record_raw_every_type_late() {
    if !user_events_here() {
        return;
    }
    let name = "vmt_raw_every";
    let selector = format!("user_events:{name}");
    let (data, decoded, report) = raw_run("t10a", &selector, "every_type", &["--name", name], 1);
    let recs = records_of(&decoded, "user_events", name);
    assert_same_fields(name, &written(&report), &recs, "f_u8");
    // perf script reads the same file and agrees.
    let command = report[0]["command"].as_str().unwrap();
    let perf = perf_fields(&data, command);
    assert_perf_agrees(
        &format!("{name} (perf.data of record --raw)"),
        command,
        &perf,
        &recs,
        "f_u8",
    );
}

#[test]
fn t10_record_raw_multi_format_versions() {
    if !user_events_here() {
        return;
    }
    // perf script is not asked: perf cannot handle `user_events_multi:name.N` events
    // (it crashes on the dotted names, see docs/overview.md's comparison).
    let name = "vmt_raw_multi";
    let selector = format!("user_events_multi:{name}");
    let args = ["--name", name, "--count", "3"];
    let (_, decoded, report) = raw_run("t10b", &selector, "multi_format", &args, 2);
    let recs = records_of(&decoded, "user_events_multi", name);
    let mut rows: Vec<&Value> = written(&report).into_iter().map(|r| &r["fields"]).collect();
    assert_eq!((recs.len(), rows.len()), (6, 6), "{recs:?}");
    for rec in &recs {
        let at = rows
            .iter()
            .position(|f| **f == rec["fields"])
            .unwrap_or_else(|| panic!("no written row for {rec}"));
        rows.swap_remove(at);
    }
    let ids: BTreeSet<&str> = recs
        .iter()
        .filter_map(|r| r["format_id"].as_str())
        .collect();
    assert_eq!(ids.len(), 2, "both versions, each with its format: {ids:?}");
}

// ---- 11: a self-describing stream ----------------------------------------------------------

/// The index of every line of `lines` satisfying `pred`.
fn positions(lines: &[Value], pred: impl Fn(&Value) -> bool) -> Vec<usize> {
    (0..lines.len()).filter(|&i| pred(&lines[i])).collect()
}

/// A field key of an EventHeader line without the `#2` a repeated name gets.
fn base_key(key: &str) -> &str {
    match key.rsplit_once('#') {
        Some((base, n)) if n.parse::<u32>().is_ok() => base,
        _ => key,
    }
}

/// Session line first; waiting notices (stderr too) for selectors that match nothing
/// yet, then one `matching` each; one schema line per tracepoint format (both versions
/// of a multi-format event), equal to the format file, before its first record; one per
/// EventHeader metadata block before the first event carrying it.
#[test]
fn t11_self_describing_stream() {
    if !user_events_here() {
        return;
    }
    each_backend(|| {
        let dir = tmp_dir("t11");
        let (late, multi, eh) = ("vmt_sd_late", "vmt_sd_multi", "VmtSdEh");
        assert!(wait_until(Duration::from_secs(10), || !event_exists(
            Path::new(TRACEFS),
            "user_events",
            late
        )));
        let selectors = [
            format!("user_events:{late}"),
            format!("user_events_multi:{multi}"),
            format!("user_events:{eh}*"),
        ];
        let sel: Vec<&str> = selectors.iter().map(String::as_str).collect();
        let mut recorder = Recorder::start_with_args(&dir, &sel, &[]);
        let out = recorder.out.clone();
        let waiting = || {
            let text = fs::read_to_string(&out).unwrap_or_default();
            text.lines()
                .filter(|l| l.contains("\"what\":\"waiting\""))
                .count()
        };
        assert!(
            wait_until(PRODUCER_TIMEOUT, || waiting() == 3),
            "3 waiting notices"
        );

        let p_late = Producer::spawn("every_type", &with_start(&["--name", late], &dir, "late"));
        p_late.wait_registered(1);
        let format_file = |system: &str, name: &str| {
            let path = Path::new(TRACEFS)
                .join("events")
                .join(system)
                .join(name)
                .join("format");
            uevrec_parsers::parse_format(&fs::read_to_string(path).unwrap()).unwrap()
        };
        let late_format = format_file("user_events", late);
        recorder.release("late", &selectors[0], 1);
        let args = with_start(&["--name", multi, "--count", "1"], &dir, "multi");
        let p_multi = Producer::spawn("multi_format", &args);
        p_multi.wait_registered(2);
        let mut multi_formats = BTreeMap::new();
        for entry in fs::read_dir(Path::new(TRACEFS).join("events/user_events_multi")).unwrap() {
            let tracepoint = entry.unwrap().file_name().to_string_lossy().into_owned();
            if let Some(id) = tracepoint.strip_prefix(&format!("{multi}.")) {
                let format = format_file("user_events_multi", &tracepoint);
                multi_formats.insert(id.to_string(), format);
            }
        }
        assert_eq!(multi_formats.len(), 2);
        recorder.release("multi", &selectors[1], 2);
        let p_eh = Producer::spawn("eh_dynamic", &with_start(&["--name", eh], &dir, "eh"));
        let eh_tracepoints: Vec<String> = p_eh
            .wait_registered(4)
            .iter()
            .map(|v| v["registered"].as_str().unwrap().to_string())
            .collect();
        for tp in &eh_tracepoints {
            recorder.wait_attached(&format!("user_events:{tp}"), 1);
        }
        fs::write(start_file(&dir, "eh"), b"").unwrap();
        for p in [p_late, p_multi, p_eh] {
            p.finish();
        }
        let stderr_path = recorder.stderr.clone();
        let lines = recorder.stop();
        let stderr = fs::read_to_string(stderr_path).unwrap();

        // The session line first.
        assert_eq!(lines[0]["uevrec"], "session", "{}", lines[0]);
        assert_eq!(lines[0]["backend"], backend());
        assert_eq!(lines[0]["selectors"], json!(selectors));
        // Each selector: one waiting notice, then one matching notice; once each on
        // stderr too.
        for s in &selectors {
            let said = |what: &str| {
                positions(&lines, |l| {
                    l["what"] == what
                        && l["message"]
                            .as_str()
                            .is_some_and(|m| m.contains(s.as_str()))
                })
            };
            let (waits, matches) = (said("waiting"), said("matching"));
            assert_eq!((waits.len(), matches.len()), (1, 1), "{s}: {lines:#?}");
            assert!(waits[0] < matches[0]);
            let waits_err = format!("uevrec: waiting for {s} to appear");
            assert_eq!(stderr.matches(&waits_err).count(), 1, "{stderr}");
            let matches_err = format!("uevrec: {s} now matches ");
            assert_eq!(stderr.matches(&matches_err).count(), 1, "{stderr}");
        }
        // One tracefs schema line per tracepoint format, as the format file says, before
        // its first record.
        let tracefs_schemas = positions(&lines, |l| {
            l["uevrec"] == "schema" && l["source"] == "tracefs"
        });
        let mut described = BTreeSet::new();
        for &i in &tracefs_schemas {
            assert!(
                described.insert(lines[i]["event"].to_string()),
                "twice: {}",
                lines[i]
            );
        }
        assert_eq!(
            tracefs_schemas.len(),
            1 + 2 + eh_tracepoints.len(),
            "{described:?}"
        );
        let schema_of = |key: &str| {
            let at = *tracefs_schemas
                .iter()
                .find(|&&i| lines[i]["event"] == key)
                .unwrap();
            let read = crate::common::schema_line::format_from_schema(&lines[at]).unwrap();
            (at, read)
        };
        let (at, read) = schema_of(&selectors[0]);
        assert_eq!(read, late_format);
        let first = positions(&lines, |l| l.get("uevrec").is_none() && l["event"] == late);
        assert!(!first.is_empty() && at < first[0]);
        for (id, format) in &multi_formats {
            let (at, read) = schema_of(&format!("user_events_multi:{multi}.{id}"));
            assert_eq!(&read, format, "version {id}");
            assert_eq!(lines[at]["tracepoint"]["format_id"], id.as_str());
            let first = positions(&lines, |l| {
                l.get("uevrec").is_none() && l["format_id"] == id.as_str()
            });
            assert!(!first.is_empty() && at < first[0], "version {id}");
        }
        for tp in &eh_tracepoints {
            let (at, _) = schema_of(&format!("user_events:{tp}"));
            assert!(
                lines[at]["format"]["eventheader"]["provider"]
                    .as_str()
                    .is_some_and(|p| p.starts_with(eh))
            );
        }
        // EventHeader: each metadata block once, before the first event carrying it,
        // naming that event's fields.
        let eh_schemas = positions(&lines, |l| {
            l["uevrec"] == "schema" && l["source"] == "eventheader"
        });
        let blocks: BTreeSet<String> = eh_schemas
            .iter()
            .map(|&i| lines[i]["eventheader"]["metadata"].to_string())
            .collect();
        assert_eq!(blocks.len(), eh_schemas.len(), "a block described twice");
        let eh_records = positions(&lines, |l| {
            l.get("uevrec").is_none() && l.get("provider").is_some()
        });
        assert!(!eh_records.is_empty());
        for &r in &eh_records {
            let rec = &lines[r];
            // (Parsed into a map sorted by key: compared as sorted lists.)
            let mut keys: Vec<&str> = rec["fields"]
                .as_object()
                .unwrap()
                .keys()
                .map(|k| base_key(k))
                .collect();
            keys.sort_unstable();
            let described = eh_schemas.iter().filter(|&&i| i < r).any(|&i| {
                let b = &lines[i]["eventheader"];
                let mut names: Vec<&str> = b["fields"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|f| f["name"].as_str().unwrap())
                    .collect();
                names.sort_unstable();
                b["name"] == rec["name"] && names == keys
            });
            assert!(described, "no schema line before {rec}");
        }
        println!(
            "{}: {} tracefs schema lines, {} EventHeader blocks for {} events",
            backend(),
            tracefs_schemas.len(),
            eh_schemas.len(),
            eh_records.len()
        );
    });
}

// ---- 12: record --raw-format trace-dat, an event registered late -------------------------

/// `record --backend ftrace --raw F --raw-format trace-dat` of a user_events event that
/// the producer registers after uevrec started (attached by the rescan; its format read
/// then goes into the trace.dat), then `uevrec decode F`: every value the producer wrote,
/// once each, with wall-clock times inside the recording; no spool left beside F.
#[test]
fn t12_record_trace_dat_late_registration() {
    if !user_events_here() {
        return;
    }
    let name = "vmt_dat_late";
    assert!(wait_until(Duration::from_secs(10), || !event_exists(
        Path::new(TRACEFS),
        "user_events",
        name
    )));
    let dir = {
        let d = std::env::temp_dir().join("uevrec-vm-t12-trace-dat");
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    };
    let (dat, stderr) = (dir.join("t.dat"), dir.join("uevrec.stderr"));
    let selector = format!("user_events:{name}");
    let started = std::time::SystemTime::now();
    let mut rec = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_uevrec"))
            .args([
                "record",
                "--backend",
                "ftrace",
                "--raw-format",
                "trace-dat",
                "--raw",
            ])
            .arg(&dat)
            .args(["-e", &selector])
            .stdout(Stdio::null())
            .stderr(fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("spawning uevrec"),
    );
    // uevrec is up (its metadata file beside the spools exists: the trace.dat itself
    // appears only whole, at the end) before the event does.
    let meta = dat.with_file_name(format!(
        ".{}.uevrec-meta",
        dat.file_name().unwrap().to_string_lossy()
    ));
    assert!(
        wait_until(PRODUCER_TIMEOUT, || meta.exists()),
        "uevrec never started"
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_running(&mut rec, &stderr);
    let producer = Producer::spawn("every_type", &with_start(&["--name", name], &dir, "p"));
    producer.wait_registered(1);
    // The notices go to standard error (no JSON lines are written).
    let attached = wait_until(PRODUCER_TIMEOUT, || {
        fs::read_to_string(&stderr)
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains("\"what\":\"attached\"") && l.contains(&selector))
    });
    assert!(
        attached,
        "{}",
        fs::read_to_string(&stderr).unwrap_or_default()
    );
    fs::write(start_file(&dir, "p"), b"").unwrap();
    let report = producer.finish();
    interrupt_and_wait(&mut rec, STOP_TIMEOUT, &stderr);
    let spools: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".uevrec-spool"))
        .map(|e| e.file_name())
        .collect();
    assert!(spools.is_empty(), "spools left: {spools:?}");
    let out = Command::new(env!("CARGO_BIN_EXE_uevrec"))
        .args(["decode", "-q"])
        .arg(&dat)
        .output()
        .expect("uevrec decode");
    assert!(out.status.success(), "uevrec decode: {out:?}");
    let decoded: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let recs = records_of(&decoded, "user_events", name);
    assert_same_fields(name, &written(&report), &recs, "f_u8");
    let since = started
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    for r in [recs.first(), recs.last()].into_iter().flatten() {
        // `YYYY-MM-DDTHH:MM:SS…Z` of this recording (wall clock, not trace-clock stamps).
        let t = r["time"].as_str().unwrap_or_else(|| panic!("no time: {r}"));
        let secs = std::process::Command::new("date")
            .args(["-u", "-d", t, "+%s"])
            .output()
            .unwrap();
        let secs: u64 = String::from_utf8_lossy(&secs.stdout)
            .trim()
            .parse()
            .unwrap();
        assert!(
            secs + 1 >= since && secs <= since + PRODUCER_TIMEOUT.as_secs() + 60,
            "{r}"
        );
    }
    println!(
        "{}: {} late-registered records from the trace.dat, every value as written",
        name,
        recs.len()
    );
}
