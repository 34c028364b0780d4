//! The README's "Start here" commands run as written (as root: `sudo` dropped), in
//! order, in a fresh folder (decode reads the perf.data the record before it wrote). The
//! ones that run until Ctrl-C get `--duration 2s`; while `tail` runs, /bin/true is
//! executed so that it has an exec to show.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// The commands of the README's "Start here" block, as words (single quotes honoured,
/// `sudo` and the comments dropped).
fn start_here() -> Vec<Vec<String>> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let section = readme
        .split("## Start here")
        .nth(1)
        .expect("README: no \"Start here\"");
    let block = section
        .split("```bash\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    block
        .lines()
        .map(|l| l.split(" # ").next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut words = Vec::new();
            for (i, part) in l.split('\'').enumerate() {
                if i % 2 == 1 {
                    words.push(part.to_string());
                } else {
                    words.extend(part.split_whitespace().map(str::to_string));
                }
            }
            words.retain(|w| w != "sudo");
            words
        })
        .collect()
}

fn run(dir: &Path, words: &[String]) -> Output {
    assert_eq!(words[0], "uevrec", "{words:?}");
    let mut cmd = Command::new(crate::common::bin());
    cmd.args(&words[1..]).current_dir(dir);
    if matches!(words[1].as_str(), "tail" | "record") {
        cmd.args(["--duration", "2s"]);
    }
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if words[1] == "tail" {
        std::thread::sleep(Duration::from_millis(1000));
        for _ in 0..3 {
            Command::new("/bin/true").status().unwrap();
        }
    }
    child.wait_with_output().unwrap()
}

#[test]
fn the_readmes_start_here_commands_run() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let commands = start_here();
    assert_eq!(commands.len(), 5, "{commands:?}");
    let dir = tempfile::tempdir().unwrap();
    for words in &commands {
        let out = run(dir.path(), words);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{words:?}:\n{stdout}\n{stderr}");
        match words[1].as_str() {
            "list" => assert!(stdout.contains("sched_switch"), "{stdout}"),
            "tail" => assert!(stdout.contains("sched_process_exec"), "{stdout}"),
            _ => {}
        }
    }
    // record --raw wrote a perf.data, and decode -o replaced the events.json that record
    // -o wrote (no user_events here: it waited for them) with the perf.data's records.
    let events = std::fs::read_to_string(dir.path().join("events.json")).unwrap();
    assert!(
        events.contains("\"system\":\"sched\",\"event\":\"sched_switch\""),
        "{events}"
    );
    assert!(dir.path().join("rec.data").exists());
}
