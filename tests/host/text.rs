//! `uevrec tail` on a terminal (a pty from util-linux `script`) prints `--format text` by
//! default, in colors unless `NO_COLOR`; in a pipe it prints JSON lines.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use crate::common::{KillOnDrop, NR_GETPPID, bin, must_exit};

/// `uevrec tail` (with `args`) in a pseudo-terminal, of 3 getppid calls made by a perl
/// process once tail has attached; the terminal's output.
fn tail_in_a_terminal(args: &str, no_color: bool) -> String {
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    assert!(Command::new("mkfifo").arg(&go).status().unwrap().success());
    let producer = KillOnDrop(
        Command::new("perl")
            .args(["-e", "open my $f, '<', shift; <$f>; getppid() for 1..3"])
            .arg(&go)
            .spawn()
            .expect("perl is needed for the getppid producer"),
    );
    let tail = format!(
        "'{}' tail {args} --pid {} --filter 'id == {NR_GETPPID}' -e raw_syscalls:sys_enter \
         --count 3 --duration 60s",
        bin().display(),
        producer.0.id()
    );
    let mut script = Command::new("script");
    script
        .args(["-qec", &tail, "/dev/null"])
        .stdout(Stdio::piped());
    if no_color {
        script.env("NO_COLOR", "1");
    } else {
        script.env_remove("NO_COLOR").env("TERM", "xterm");
    }
    let mut script = KillOnDrop(script.spawn().expect("util-linux script is needed"));
    let mut out = BufReader::new(script.0.stdout.take().unwrap());
    let mut text = String::new();
    while !text.contains("attached") {
        let before = text.len();
        out.read_line(&mut text).unwrap();
        assert!(text.len() > before, "tail ended before attaching:\n{text}");
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(&go)
        .unwrap()
        .write_all(b"\n")
        .unwrap();
    std::io::Read::read_to_string(&mut out, &mut text).unwrap();
    assert!(must_exit(&mut script.0).success(), "{text}");
    text.replace('\r', "")
}

#[test]
fn tail_on_a_terminal_prints_text_in_colors() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let text = tail_in_a_terminal("", false);
    let records: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("\x1b[1;36mraw_syscalls:sys_enter\x1b[0m"))
        .collect();
    assert_eq!(records.len(), 3, "{text}");
    for r in records {
        assert!(r.contains("perl["), "{r:?}");
        assert!(
            r.contains(&format!("\x1b[2mid=\x1b[0m{NR_GETPPID} ")),
            "{r:?}"
        );
    }
    assert!(!text.contains("{\""), "JSON on a terminal:\n{text}");
}

#[test]
fn no_color_turns_colors_off() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let text = tail_in_a_terminal("", true);
    assert!(!text.contains('\x1b'), "{text:?}");
    let records = text
        .lines()
        .filter(|l| {
            l.contains(" raw_syscalls:sys_enter ") && l.contains(&format!(" id={NR_GETPPID} "))
        })
        .count();
    assert_eq!(records, 3, "{text}");
}

#[test]
fn json_stays_the_default_in_a_pipe_and_with_pretty() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let mut tail = KillOnDrop(crate::common::tail_getppid(std::process::id(), &[]));
    let mut first = String::new();
    BufReader::new(tail.0.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let line: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(line["uevrec"], "session", "{first}");
    // On a terminal too, --pretty keeps JSON; with --format text it is refused.
    let text = tail_in_a_terminal("--pretty --format json", true);
    assert!(text.contains("\"uevrec\": \"notice\""), "{text}");
    let out = Command::new(bin())
        .args([
            "tail",
            "--pretty",
            "--format",
            "text",
            "raw_syscalls:sys_enter",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--pretty indents JSON lines"), "{err}");
}
