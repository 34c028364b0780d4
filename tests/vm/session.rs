//! Tier 3: the session in-process (`recorder::stage_and_format`) on user_events, which
//! only the VM's kernel has (the host tier's session tests: tests/host/session.rs).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use uevrec::capture::backend::BackendKind::{self, Ftrace, Perf};
use uevrec::capture::session::SessionConfig;
use uevrec_samples::{Flags, RegisterCommand, UserEvents};

use crate::common::session::*;
use crate::common::tier::Tier;

#[test]
fn multi_format_versions_are_attached_late_and_named_by_base() {
    multi_format_versions_are_attached_late_and_named_by_base_on(Perf);
}

#[test]
fn multi_format_versions_are_attached_late_and_named_by_base_ftrace() {
    multi_format_versions_are_attached_late_and_named_by_base_on(Ftrace);
}

/// The multi-format tests one at a time: with the default selectors each session would
/// attach the other's events, and their enable bits would turn on before this session
/// records them.
static MULTI_FORMAT_TURN: Mutex<()> = Mutex::new(());

fn multi_format_versions_are_attached_late_and_named_by_base_on(backend: BackendKind) {
    let t = require!(Tier::Vm, host());
    let _turn = MULTI_FORMAT_TURN.lock().unwrap_or_else(|e| e.into_inner());
    if !t.has_user_events() {
        crate::common::tier::skip(
            Tier::Vm,
            "this kernel has no user_events (runs in the VM: scripts/vm-test.sh)",
        );
        return;
    }
    let name = format!("uevrec_mf_{}_{backend:?}", std::process::id());
    // Default selectors (user_events:* and user_events_multi:*); this process writes.
    let cfg = SessionConfig {
        include_self: true,
        ..config_on(backend, &[])
    };
    let mut run = start(cfg, 16, false);
    assert!(
        run.wait_for(Duration::from_secs(10), |v| v["uevrec"] == "notice")
            .is_some()
    );
    let events = UserEvents::open_in(t.root()).expect("opening user_events_data");
    let command = |text: &str| RegisterCommand::parse(text).expect("a valid command");
    let v1 = match events.register(&command(&format!("{name} u32 a")), Flags::MULTI_FORMAT) {
        Ok(e) => e,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            crate::common::tier::skip(
                Tier::Vm,
                &format!("this kernel has no multi-format user_events (6.10+): {e}"),
            );
            return;
        }
        Err(e) => panic!("registering {name}: {e}"),
    };
    let v2 = events
        .register(
            &command(&format!("{name} u32 a; u32 b")),
            Flags::MULTI_FORMAT,
        )
        .unwrap();
    // Both versions are found by a rescan and recorded once the session says `attached`
    // (the enable bit alone turns on when perf opens an event, before it records).
    let versions = format!("user_events_multi:{name}.");
    let attached = |run: &Running| {
        run.lines()
            .iter()
            .filter(|v| v["uevrec"] == "notice" && v["what"] == "attached")
            .filter(|v| {
                v["event"]
                    .as_str()
                    .is_some_and(|e| e.starts_with(&versions))
            })
            .count()
    };
    let t0 = Instant::now();
    while attached(&run) < 2 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        attached(&run) == 2 && v1.is_enabled() && v2.is_enabled(),
        "versions not attached: {:?}",
        run.lines()
    );
    v1.write(&7u32.to_ne_bytes()).unwrap();
    let mut p2 = 8u32.to_ne_bytes().to_vec();
    p2.extend_from_slice(&9u32.to_ne_bytes());
    v2.write(&p2).unwrap();
    let is_ours = |v: &Value| v["system"] == "user_events_multi" && v["event"] == name.as_str();
    let r2 = run.wait_for(Duration::from_secs(5), |v| {
        is_ours(v) && v["fields"]["b"] == 9
    });
    let r1 = run.wait_for(Duration::from_secs(1), |v| {
        is_ours(v) && v["fields"]["a"] == 7
    });
    let (summary, _) = run.finish();
    let (r1, r2) = (r1.expect("no v1 record"), r2.expect("no v2 record"));
    let (id1, id2) = (
        r1["format_id"].as_str().unwrap(),
        r2["format_id"].as_str().unwrap(),
    );
    assert_ne!(id1, id2, "{r1} {r2}");
    assert_eq!(r2["fields"]["a"], 8);
    for id in [id1, id2] {
        assert_eq!(
            summary.records_per_event[&format!("user_events_multi:{name}.{id}")],
            1,
            "{summary:?}"
        );
        assert!(run.lines().iter().any(|v| is_notice(
            v,
            "attached",
            &format!("user_events_multi:{name}.{id}")
        )));
    }
}
