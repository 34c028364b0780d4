//! Tier 3: pre-registration (`record --register`, `uevrec register`, `unregister`,
//! `emit`) against real user_events (docs/register.md). Runs in the VM
//! (scripts/vm-test.sh register, or `../shared/vm/run.sh <this binary>`); elsewhere every
//! test says it skips (or fails with UEVREC_REQUIRE_TIERS=vm).
//!
//! The producer `first_event` registers and writes its first record at once, without
//! waiting for a recorder, then exits within milliseconds: its record is kept only when a
//! recorder is already attached to the event when it registers.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::KillOnDrop;
use crate::common::json_eq;
use crate::common::vm::{
    TRACEFS, interrupt_and_wait, output_lines, sample, user_events_here, wait_child,
};
use uevrec_samples::{event_exists, wait_until};

const STOP_TIMEOUT: Duration = Duration::from_secs(60);
const ATTACH_TIMEOUT: Duration = Duration::from_secs(120);
/// uevrec's background closer releases the events after uevrec exits (tests wait for it
/// before asserting that an event is gone).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(60);

fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("uevrec-vm-register-{test}"));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).expect("temp dir");
    d
}

fn uevrec(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_uevrec"))
        .args(args)
        .output()
        .expect("running uevrec")
}

fn ok(args: &[&str]) -> String {
    let out = uevrec(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "uevrec {args:?}: {}: {err}",
        out.status
    );
    err
}

fn exists(name: &str) -> bool {
    event_exists(Path::new(TRACEFS), "user_events", name)
}

/// Wait until `name` is gone (uevrec's closer released it and it was deleted).
fn assert_gone(name: &str) {
    assert!(
        wait_until(CLOSE_TIMEOUT, || !exists(name)),
        "user_events:{name} still exists"
    );
}

fn event_id(name: &str) -> String {
    fs::read_to_string(Path::new(TRACEFS).join(format!("events/user_events/{name}/id")))
        .expect("id file")
        .trim()
        .to_string()
}

/// `uevrec record -o DIR/out.jsonl ARGS` in the background.
struct Rec {
    child: KillOnDrop,
    out: PathBuf,
    stderr: PathBuf,
}

impl Rec {
    fn start(dir: &Path, args: &[&str]) -> Rec {
        let out = dir.join("out.jsonl");
        let stderr = dir.join("stderr");
        let child = Command::new(env!("CARGO_BIN_EXE_uevrec"))
            .arg("record")
            .arg("-o")
            .arg(&out)
            .args(args)
            .stdout(Stdio::null())
            .stderr(fs::File::create(&stderr).expect("stderr"))
            .spawn()
            .expect("spawning uevrec");
        Rec {
            child: KillOnDrop(child),
            out,
            stderr,
        }
    }

    /// Wait for the `attached` notice of `event` (SYSTEM:EVENT, or a prefix of it).
    fn wait_attached(&mut self, event: &str) {
        let out = self.out.clone();
        let child = &mut self.child;
        let seen = wait_until(ATTACH_TIMEOUT, || {
            let attached = fs::read_to_string(&out)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .any(|l| {
                    l["what"] == "attached"
                        && l["event"].as_str().is_some_and(|e| e.starts_with(event))
                });
            attached || child.try_wait().ok().flatten().is_some()
        });
        let stderr = fs::read_to_string(&self.stderr).unwrap_or_default();
        assert!(
            self.child.try_wait().expect("try_wait").is_none(),
            "uevrec exited early: {stderr}"
        );
        assert!(seen, "uevrec never attached {event}; stderr: {stderr}");
    }

    fn signal(&mut self, sig: libc::c_int) -> (Vec<Value>, String) {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
        assert_eq!(rc, 0);
        let status = wait_child(&mut self.child, STOP_TIMEOUT).expect("uevrec did not stop");
        let stderr = fs::read_to_string(&self.stderr).unwrap_or_default();
        assert!(status.success(), "uevrec: {status}: {stderr}");
        (output_lines(&self.out), stderr)
    }

    fn stop(mut self) -> Vec<Value> {
        interrupt_and_wait(&mut self.child, STOP_TIMEOUT, &self.stderr);
        output_lines(&self.out)
    }
}

/// Run `first_event ARGS`; its report lines.
fn first_event(args: &[&str]) -> (Option<i32>, Vec<Value>) {
    let out = Command::new(sample("first_event"))
        .args(args)
        .output()
        .expect("first_event");
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("report line"))
        .collect();
    (out.status.code(), lines)
}

fn done(lines: &[Value]) -> &Value {
    lines
        .iter()
        .find(|l| l.get("done").is_some())
        .expect("done line")
}

fn records<'a>(lines: &'a [Value], event: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| l.get("uevrec").is_none() && l["event"] == event)
        .collect()
}

/// Step 0 of issue 27, the kernel behaviour everything else rests on: a producer that
/// registers the name and fields of a persistent event shares its tracepoint (same ID)
/// and finds its enable bit set at once while a recorder has the event open; other
/// fields are refused (EADDRINUSE).
#[test]
fn kernel_shares_a_persistent_tracepoint_and_sets_the_bit_at_once() {
    if !user_events_here() {
        return;
    }
    let d = dir("step0");
    ok(&["register", "prereg_t0", "u64 seq"]);
    let id = event_id("prereg_t0");
    let mut rec = Rec::start(&d, &["-e", "user_events:prereg_t0", "--quiet"]);
    rec.wait_attached("user_events:prereg_t0");
    let (code, rep) = first_event(&["--name", "prereg_t0", "--seq", "7"]);
    assert_eq!(code, Some(0), "{rep:?}");
    assert_eq!(done(&rep)["enabled_at_register"], true, "{rep:?}");
    assert_eq!(done(&rep)["written"], true, "{rep:?}");
    assert_eq!(
        event_id("prereg_t0"),
        id,
        "the producer got another tracepoint"
    );
    let (code, rep) = first_event(&["--name", "prereg_t0", "--fields", "u32 other"]);
    assert_eq!(code, Some(3), "{rep:?}");
    let err = done(&rep)["error"].as_str().unwrap_or_default().to_string();
    assert!(err.contains("Address already in use"), "{err}");
    let lines = rec.stop();
    let got = records(&lines, "prereg_t0");
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["fields"], json!({"seq": 7}));
    println!("step 0: id {id} shared, bit set at registration, other fields EADDRINUSE");
    assert!(wait_until(CLOSE_TIMEOUT, || uevrec(&[
        "unregister",
        "prereg_t0"
    ])
    .status
    .success()));
    assert!(!exists("prereg_t0"));
}

/// 50 short-lived jobs, each its own event (`prereg_first_N` / `prereg_nofirst_N`):
/// with --register (here through --register-file) every first record is kept; without it
/// (the same recorder, rescanning every second as by default) they are missed.
///
/// One name per start: with a single name, the first time a rescan happens to catch a
/// producer alive the recorder's descriptor keeps the event alive, and every later start
/// is recorded (seen: 19 of 50 kept), which would measure the luck of one rescan.
#[test]
fn first_events_of_short_lived_producers_are_kept_only_with_register() {
    if !user_events_here() {
        return;
    }
    const N: u64 = 50;
    let run = |test: &str, prefix: &str, register: bool| -> (u64, Vec<u64>) {
        let d = dir(test);
        let sel = format!("user_events:{prefix}_*");
        let file = d.join("events.txt");
        let mut text = String::from("# one short job per line\n");
        for seq in 0..N {
            text.push_str(&format!("{prefix}_{seq} u64 seq\n"));
        }
        fs::write(&file, text).unwrap();
        let file = file.to_string_lossy().into_owned();
        let mut args = vec!["-e", sel.as_str(), "--quiet"];
        if register {
            args.extend(["--register-file", file.as_str()]);
        }
        let mut rec = Rec::start(&d, &args);
        if register {
            for seq in 0..N {
                rec.wait_attached(&format!("user_events:{prefix}_{seq}"));
            }
        } else {
            // The recorder is up (its session line) and rescanning.
            assert!(wait_until(ATTACH_TIMEOUT, || fs::read_to_string(&rec.out)
                .unwrap_or_default()
                .contains("\"session\"")));
        }
        let mut enabled = 0;
        for seq in 0..N {
            let name = format!("{prefix}_{seq}");
            let (code, rep) = first_event(&["--name", &name, "--seq", &seq.to_string()]);
            assert_eq!(code, Some(0), "{rep:?}");
            if done(&rep)["enabled_at_register"] == true {
                enabled += 1;
            }
        }
        let lines = rec.stop();
        let mut seqs: Vec<u64> = lines
            .iter()
            .filter(|l| l.get("uevrec").is_none())
            .filter(|l| l["event"].as_str().is_some_and(|e| e.starts_with(prefix)))
            .map(|r| r["fields"]["seq"].as_u64().expect("seq"))
            .collect();
        seqs.sort();
        (enabled, seqs)
    };
    let (enabled, seqs) = run("first-with", "prereg_first", true);
    assert_eq!(enabled, N, "producers that found their bit set");
    assert_eq!(
        seqs,
        (0..N).collect::<Vec<_>>(),
        "records kept with --register"
    );
    for seq in 0..N {
        assert_gone(&format!("prereg_first_{seq}"));
    }
    let (enabled, seqs) = run("first-without", "prereg_nofirst", false);
    println!(
        "without --register: {enabled} of {N} producers found their bit set, {} records kept",
        seqs.len()
    );
    assert!(
        (seqs.len() as u64) < N / 2,
        "without pre-registration most first records must be missed, got {}",
        seqs.len()
    );
}

/// Cleanup on SIGINT, SIGTERM and an error exit; an event someone else created is never
/// deleted; --keep-registered keeps them; another format is a clear error.
#[test]
fn cleanup_on_every_exit_path_and_never_foreign_events() {
    if !user_events_here() {
        return;
    }
    ok(&["register", "prereg_foreign", "u32 a"]);
    for (sig, name) in [
        (libc::SIGINT, "prereg_own_int"),
        (libc::SIGTERM, "prereg_own_term"),
    ] {
        let d = dir(name);
        let reg = format!("{name} u32 a");
        let sel = format!("user_events:{name}");
        let mut rec = Rec::start(
            &d,
            &[
                "-e",
                &sel,
                "--register",
                &reg,
                "--register",
                "prereg_foreign u32 a",
            ],
        );
        rec.wait_attached(&sel);
        assert!(exists(name));
        let (_, stderr) = rec.signal(sig);
        assert!(
            stderr.contains(&format!("unregistered `{reg}`")),
            "{stderr}"
        );
        assert!(
            stderr.contains("`prereg_foreign u32 a` exists already"),
            "{stderr}"
        );
        assert_gone(name);
        assert!(
            exists("prereg_foreign"),
            "a foreign event was deleted ({sig})"
        );
    }
    // An error after creation: the output file cannot be opened.
    let out = uevrec(&[
        "record",
        "-o",
        "/nonexistent-dir/x.jsonl",
        "--register",
        "prereg_own_err u32 a",
        "--register",
        "prereg_foreign u32 a",
        "-e",
        "user_events:prereg_own_err",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("registered `prereg_own_err u32 a`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("unregistered `prereg_own_err u32 a`"),
        "{stderr}"
    );
    assert!(!exists("prereg_own_err"));
    assert!(exists("prereg_foreign"));
    // Another format of an existing name: both formats in the error, nothing created.
    let out = uevrec(&[
        "record",
        "--register",
        "prereg_foreign u64 b",
        "-e",
        "user_events:x",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("existing `u32 a`") && stderr.contains("requested `u64 b`"),
        "{stderr}"
    );
    // --keep-registered.
    let d = dir("keep");
    let mut rec = Rec::start(
        &d,
        &[
            "-e",
            "user_events:prereg_keep",
            "--register",
            "prereg_keep u32 a",
            "--keep-registered",
        ],
    );
    rec.wait_attached("user_events:prereg_keep");
    let (_, stderr) = rec.signal(libc::SIGINT);
    assert!(stderr.contains("kept `prereg_keep u32 a`"), "{stderr}");
    std::thread::sleep(Duration::from_secs(1));
    assert!(exists("prereg_keep"));
    assert!(wait_until(CLOSE_TIMEOUT, || uevrec(&[
        "unregister",
        "prereg_keep",
        "u32 a"
    ])
    .status
    .success()));
    assert!(!exists("prereg_keep"));
    ok(&["unregister", "prereg_foreign", "u32 a"]);
    assert!(!exists("prereg_foreign"));
}

/// The register errors say the rule and the field, the length limit, and EBUSY.
#[test]
fn register_errors_say_the_fix() {
    if !user_events_here() {
        return;
    }
    let err = |args: &[&str]| {
        let out = uevrec(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = err(&["register", "prereg_bad", "u32 a; long b"]);
    assert!(e.contains("field 2 `long b`") && e.contains("s64"), "{e}");
    let long = "n".repeat(520);
    let e = err(&["register", &long, "u32 a"]);
    assert!(e.contains("at most 511 bytes"), "{e}");
    // In use: a producer-free persistent event a recorder holds open.
    ok(&["register", "prereg_busy", "u32 a"]);
    let d = dir("busy");
    let mut rec = Rec::start(&d, &["-e", "user_events:prereg_busy", "--quiet"]);
    rec.wait_attached("user_events:prereg_busy");
    let e = err(&["unregister", "prereg_busy", "u32 a"]);
    assert!(e.contains("still in use (EBUSY)"), "{e}");
    rec.stop();
    assert!(wait_until(CLOSE_TIMEOUT, || uevrec(&[
        "unregister",
        "prereg_busy"
    ])
    .status
    .success()));
    // Not root: no CAP_PERFMON, no tracefs access.
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_uevrec"))
        .args(["register", "--tracefs", TRACEFS, "prereg_nobody", "u32 a"])
        .output()
        .expect("setpriv");
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(
        e.contains("root") && e.contains("CAP_PERFMON") || e.contains("needs root"),
        "{e}"
    );
}

const EVERY_TYPE: &str = "prereg_emit u8 a; s8 b; u16 c; s16 d; u32 e; s32 f; u64 g; s64 h; int i; \
    unsigned int j; short k; unsigned short l; char m; unsigned char n; char[8] o; \
    unsigned char[3] p; __data_loc char[] q; __rel_loc char[] r; __data_loc u8[] s; \
    __rel_loc u8[] t; __data_loc u32[] u; __data_loc s16[] v; struct foo w 4";

/// `uevrec emit` writes every field type the kernel accepts; uevrec's recording and perf
/// read the values back.
#[test]
fn emit_round_trips_every_field_type() {
    if !user_events_here() {
        return;
    }
    let d = dir("emit");
    let mut rec = Rec::start(
        &d,
        &[
            "-e",
            "user_events:prereg_emit",
            "--quiet",
            "--register",
            EVERY_TYPE,
        ],
    );
    rec.wait_attached("user_events:prereg_emit");
    // perf too: its workload starts (READY) once its events are enabled.
    let ready = d.join("perf-ready");
    let stop = d.join("perf-stop");
    let data = d.join("perf.data");
    let mut perf = Command::new("perf")
        .args(["record", "-q", "-a", "-e", "user_events:prereg_emit", "-o"])
        .arg(&data)
        .args(["--", "sh", "-c"])
        .arg(format!(
            "touch {}; while [ ! -e {} ]; do sleep 0.1; done",
            ready.display(),
            stop.display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("perf (the VM has Debian's perf)");
    assert!(
        wait_until(ATTACH_TIMEOUT, || ready.exists()),
        "perf never started"
    );
    let values = [
        "a=255",
        "b=-128",
        "c=65535",
        "d=-32768",
        "e=4294967295",
        "f=-2147483648",
        "g=18446744073709551615",
        "h=-9223372036854775808",
        "i=-7",
        "j=7",
        "k=-300",
        "l=300",
        "m=65",
        "n=200",
        "o=hello",
        "p=0a0b0c",
        "q=data loc",
        "r=rel loc",
        "s=0102",
        "t=ff",
        "u=1,4294967295",
        "v=-1,2",
        "w=deadbeef",
    ];
    let mut args = vec!["emit", "prereg_emit"];
    args.extend(values);
    ok(&args);
    // Missing or unknown fields, and inline declarations of a name that exists.
    let out = uevrec(&["emit", "prereg_emit", "zz=1"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no field `zz`"));
    fs::write(&stop, b"").unwrap();
    assert!(
        wait_child(&mut perf, STOP_TIMEOUT).is_some(),
        "perf did not stop"
    );
    let lines = rec.stop();
    let got = records(&lines, "prereg_emit");
    assert_eq!(got.len(), 1, "{got:?}");
    let want = json!({
        "a": 255, "b": -128, "c": 65535, "d": -32768, "e": 4294967295u64, "f": -2147483648i64,
        "g": u64::MAX, "h": i64::MIN, "i": -7, "j": 7, "k": -300, "l": 300, "m": 65, "n": 200,
        "o": "hello", "p": "0a0b0c", "q": "data loc", "r": "rel loc", "s": "0102", "t": "ff",
        "u": [1, 4294967295u64], "v": [-1, 2], "w": "deadbeef"
    });
    assert!(
        json_eq(&got[0]["fields"], &want),
        "uevrec: {}\nwant: {want}",
        got[0]["fields"]
    );
    let script = Command::new("perf")
        .args(["script", "-F", "trace", "-i"])
        .arg(&data)
        .output()
        .expect("perf script");
    let text = String::from_utf8_lossy(&script.stdout);
    // perf prints s8/s16 fields as unsigned (b, d, k: the same bits; uevrec's signed
    // values are checked above).
    let part = "a=255 b=128 c=65535 d=32768 e=4294967295 f=-2147483648 g=18446744073709551615 \
         h=-9223372036854775808 i=-7 j=7 k=65236 l=300 m=65 n=200 o=hello";
    assert!(text.contains(part), "perf script lacks `{part}`: {text}");
    assert!(text.contains("q=data loc r=rel loc"), "{text}");
    // Nobody records it now: emit says so instead of pretending.
    assert_gone("prereg_emit");
    let out = uevrec(&[
        "emit",
        "--fields",
        "u32 a",
        "--wait",
        "100ms",
        "prereg_emit2",
        "a=1",
    ]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(e.contains("nobody records `prereg_emit2`"), "{e}");
}

/// A multi-format version is pre-registered (a producer of the same fields shares it and
/// its first record is kept) and one version is deleted through dynamic_events, the
/// other stays.
#[test]
fn multi_format_versions_are_created_and_deleted_one_by_one() {
    if !user_events_here() {
        return;
    }
    let versions = || -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(Path::new(TRACEFS).join("events/user_events_multi"))
            .map(|it| {
                it.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("prereg_mf."))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    ok(&["register", "--multi-format", "prereg_mf", "u32 a"]);
    ok(&["register", "--multi-format", "prereg_mf", "u64 b"]);
    let both = versions();
    assert_eq!(both.len(), 2, "{both:?}");
    let d = dir("mf");
    let mut rec = Rec::start(&d, &["-e", "user_events_multi:prereg_mf.*", "--quiet"]);
    rec.wait_attached("user_events_multi:prereg_mf.");
    let (code, rep) = first_event(&[
        "--name",
        "prereg_mf",
        "--fields",
        "u32 a",
        "--multi-format",
        "--seq",
        "9",
    ]);
    assert_eq!(code, Some(0), "{rep:?}");
    assert_eq!(done(&rep)["enabled_at_register"], true, "{rep:?}");
    let lines = rec.stop();
    let got: Vec<&Value> = lines
        .iter()
        .filter(|l| l.get("uevrec").is_none() && l["event"] == "prereg_mf")
        .collect();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["fields"], json!({"a": 9}));
    assert_eq!(versions(), both, "the producer got a version of its own");
    // Delete the u32 version only.
    assert!(wait_until(CLOSE_TIMEOUT, || uevrec(&[
        "unregister",
        "prereg_mf",
        "u32 a"
    ])
    .status
    .success()));
    let left = versions();
    assert_eq!(left.len(), 1, "{left:?}");
    let fmt = fs::read_to_string(
        Path::new(TRACEFS).join(format!("events/user_events_multi/{}/format", left[0])),
    )
    .unwrap();
    assert!(fmt.contains("field:u64 b;"), "{fmt}");
    ok(&["unregister", "prereg_mf", "u64 b"]);
    assert!(versions().is_empty());
}

/// --register-eventheader with a level glob: the eventheader crate's producer, which does
/// not wait (--timeout-secs 0), has every event recorded and decoded with every field.
#[test]
fn eventheader_preregistration_keeps_the_first_events() {
    if !user_events_here() {
        return;
    }
    let d = dir("eh");
    let mut rec = Rec::start(
        &d,
        &[
            "-e",
            "user_events:UevrecEhMacros*",
            "--register-eventheader",
            "UevrecEhMacros_L*K1",
            "--register-eventheader",
            "UevrecEhMacros_L5K23",
            "--register-eventheader",
            "UevrecEhMacros_L1Kf00000000000000f",
            "--register-eventheader",
            "UevrecEhMacros2_L4K10",
            "--register-eventheader",
            "UevrecEhMacrosG_L4K1Guevrecgrp",
        ],
    );
    let stderr = fs::read_to_string(&rec.stderr).unwrap_or_default();
    rec.wait_attached("user_events:UevrecEhMacrosG_L4K1Guevrecgrp");
    rec.wait_attached("user_events:UevrecEhMacros_L5K23");
    // Every pre-registered tracepoint attached before the producer starts.
    let attached = fs::read_to_string(&rec.out)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("\"attached\""))
        .count();
    assert!(attached >= 9, "{attached} attached; {stderr}");
    let out = Command::new(sample("eh_macros"))
        .args(["--timeout-secs", "0"])
        .output()
        .expect("eh_macros");
    let report: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("report"))
        .collect();
    assert!(
        out.status.success(),
        "eh_macros did not find its events enabled: {report:?}"
    );
    let lines = rec.stop();
    let written: Vec<&Value> = report
        .iter()
        .filter(|l| l.get("fields").is_some())
        .collect();
    assert!(!written.is_empty());
    let got: Vec<&Value> = lines
        .iter()
        .filter(|l| l.get("uevrec").is_none() && l.get("provider").is_some())
        .collect();
    assert_eq!(got.len(), written.len(), "records vs writes");
    let keys = uevrec_samples::eh::REPORTED_KEYS;
    let pick = |l: &Value| -> Value {
        Value::Object(
            keys.iter()
                .filter_map(|&k| l.get(k).map(|v| (k.to_string(), v.clone())))
                .collect(),
        )
    };
    // The first event, with every field, and then all of them (uevrec's order across
    // CPUs may differ from the write order).
    let first = got
        .iter()
        .find(|g| g["event"] == written[0]["event"] && g["name"] == written[0]["name"])
        .expect("the first event recorded");
    assert!(
        json_eq(&pick(written[0]), &pick(first)),
        "first: {}\nuevrec: {first}",
        written[0]
    );
    let mut used = vec![false; got.len()];
    for w in &written {
        let hit = (0..got.len()).find(|&i| !used[i] && json_eq(&pick(w), &pick(got[i])));
        let i = hit.unwrap_or_else(|| panic!("written {w} not recorded as such"));
        used[i] = true;
    }
    for n in 1..=5 {
        assert_gone(&format!("UevrecEhMacros_L{n}K1"));
    }
}
