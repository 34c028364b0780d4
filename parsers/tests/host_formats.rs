//! Every `format` file of the running kernel parses (tier 2: needs a readable tracefs at
//! /sys/kernel/tracing; skips, saying why, otherwise).
//!
//! Independent checks: the `name:` is the event's directory name and the `ID:` equals the
//! event's `id` file (when it has one: ftrace's own events do not).

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use uevrec_parsers::parse_format;
use uevrec_parsers::{Element, FieldKind, LocKind};

const EVENTS: &str = "/sys/kernel/tracing/events";

/// The one "this test needs X" helper, shared with the root crate's tests.
#[path = "../../tests/common/tier.rs"]
mod tier;
use tier::Tier;

/// `events/<system>/<event>` directories that have a `format` file, or `None` (reason
/// printed) when tracefs cannot be read.
fn event_dirs() -> Option<Vec<PathBuf>> {
    let systems = match std::fs::read_dir(EVENTS) {
        Ok(dir) => dir,
        Err(e) => {
            tier::skip(
                Tier::Host,
                &format!("cannot read {EVENTS}: {e} (needs root and a mounted tracefs)"),
            );
            return None;
        }
    };
    let mut dirs = Vec::new();
    for system in systems.flatten() {
        let Ok(events) = std::fs::read_dir(system.path()) else {
            continue;
        };
        dirs.extend(
            events
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.join("format").is_file()),
        );
    }
    if dirs.is_empty() {
        tier::skip(Tier::Host, &format!("no events/*/*/format under {EVENTS}"));
        return None;
    }
    dirs.sort();
    Some(dirs)
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

#[test]
fn every_host_format_file_parses() {
    let Some(dirs) = event_dirs() else { return };
    let mut failures = Vec::new();
    let (mut fields, mut vanished) = (0, 0);
    for dir in &dirs {
        let text = match std::fs::read_to_string(dir.join("format")) {
            Ok(text) => text,
            // user_events are deleted when their last producer exits: a live system's
            // events may go between listing and reading.
            Err(e) if e.kind() == ErrorKind::NotFound && !dir.exists() => {
                vanished += 1;
                continue;
            }
            Err(e) => {
                failures.push(format!("{}/format: {e}", dir.display()));
                continue;
            }
        };
        let parsed = match parse_format(&text) {
            Ok(parsed) => parsed,
            Err(e) => {
                failures.push(format!("{}: {e}", dir.display()));
                continue;
            }
        };
        fields += parsed.fields.len();
        let dir_name = dir.file_name().unwrap_or_default().to_string_lossy();
        if parsed.name != dir_name {
            failures.push(format!("{}: name {:?}", dir.display(), parsed.name));
        }
        // ftrace's own events (events/ftrace/*) have no `id` file.
        match std::fs::read_to_string(dir.join("id")).map(|id| id.trim().parse::<u32>()) {
            Ok(Ok(id)) if id == parsed.id => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            other => failures.push(format!(
                "{}: ID {} but id file {other:?}",
                dir.display(),
                parsed.id
            )),
        }
        if parsed.common_field("common_type").is_none() {
            failures.push(format!("{}: no common_type", dir.display()));
        }
    }
    println!(
        "{} host format files, {fields} event fields, {vanished} events gone before read",
        dirs.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures, first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}

#[test]
fn sched_process_exec_filename_is_a_data_loc_string() {
    let path = Path::new(EVENTS).join("sched/sched_process_exec/format");
    let text = match read(&path) {
        Ok(text) => text,
        Err(e) => {
            tier::skip(
                Tier::Host,
                &format!("{e} (needs root, a mounted tracefs and the sched events)"),
            );
            return;
        }
    };
    let parsed = parse_format(&text).expect("sched_process_exec format parses");
    let filename = parsed.field("filename").expect("a filename field");
    assert_eq!(
        filename.kind,
        FieldKind::Dynamic {
            loc: LocKind::DataLoc,
            elem: Element::Char
        }
    );
    assert_eq!(filename.type_text, "__data_loc char[]");
    assert_eq!(filename.size, 4);
}
