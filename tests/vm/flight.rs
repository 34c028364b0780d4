//! Tier 3: `uevrec record --flight` with a user_event as the trigger, against the real
//! kernel (scripts/vm-test.sh runs this binary in the VM; elsewhere it skips loudly).
//!
//! The producer (`samples/src/bin/flight_app.rs`, pinned to one CPU) writes rounds of
//! `NAME u64 seq` records, each round ended by one `NAME_error` record (the trigger)
//! whose `seq` is the round's last; the test checks each dump's exact sequence numbers
//! and counts, on both backends.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::common::flight::{Dump, Flight, assert_run};
use crate::common::vm::{
    PATIENCE, backend, each_backend, spawn_sample, tmp_dir, user_events_here, wait_child,
    wait_reports,
};

/// SIZE: room for ~150 records of `u64 seq` (about 56 bytes staged each).
const SIZE: u64 = 8 * 1024;
/// Records per round.
const COUNT: u64 = 1000;

/// `seq` of a record.
fn seq(v: &Value) -> u64 {
    v["fields"]["seq"].as_u64().expect("a seq field")
}

#[test]
fn a_user_event_trigger_dumps_each_round_exactly() {
    if !user_events_here() {
        return;
    }
    each_backend(|| {
        let dir = tmp_dir("flight");
        let name = format!("uevrs_flight_{}", backend());
        let start = dir.join("start");
        let args: Vec<String> = [
            "--name",
            &name,
            "--count",
            &COUNT.to_string(),
            "--rounds",
            "2",
            "--timeout-secs",
            "150",
            "--start-file",
            start.to_str().unwrap(),
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        let (mut producer, lines) = spawn_sample("flight_app", &args);
        wait_reports(&lines, "registered", 2, PATIENCE, "flight_app");
        let size = SIZE.to_string();
        let event = format!("user_events:{name}");
        let trigger = format!("user_events:{name}_error");
        let flight = Flight::start(
            &dir.join("out.json"),
            &[
                "--backend",
                backend(),
                "--flight",
                &size,
                "-e",
                &event,
                "--trigger",
                &trigger,
            ],
        );
        flight.wait_attached(2);
        std::fs::write(&start, b"").unwrap();
        let done = wait_reports(&lines, "done", 1, PATIENCE, "flight_app").remove(0);
        assert!(wait_child(&mut producer, Duration::from_secs(120)).is_some());
        assert_eq!(done["written"], 2 * COUNT + 2, "{done}");
        assert_eq!(done["disabled"], 0, "{done}");

        flight.wait_dumps(2);
        let dumps = crate::common::flight::complete_dumps(&flight.out);
        for (round, path) in dumps.iter().enumerate() {
            check_round(path, round as u64, &name);
        }
        let stderr = flight.stop();
        assert!(stderr.contains("2 dumps written"), "{stderr}");
    });
}

/// Dump `round` holds the last records of that round, then its error record; the
/// records of the round that are not in it were counted as overwritten.
fn check_round(path: &Path, round: u64, name: &str) {
    let dump = Dump::read(path, SIZE);
    let last_seq = round * COUNT + COUNT - 1;
    let trigger = dump.last_record();
    assert_eq!(trigger["event"], format!("{name}_error"), "{path:?}");
    assert_eq!(seq(trigger), last_seq);
    let seqs = dump.values(name, seq);
    let held = seqs.len() as u64;
    assert!(
        held > 50,
        "{path:?}: only {held} records held in {SIZE} bytes"
    );
    // In order, none missing, none from the round before (the first dump emptied the
    // buffer).
    assert_run(&seqs, last_seq + 1 - held, last_seq);
    assert_eq!(dump.count("records"), held + 1);
    assert_eq!(dump.count("overwritten"), COUNT - held, "{path:?}");
    assert_eq!(dump.header["reason"], "trigger");
}
