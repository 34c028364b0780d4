//! `uevrec top` on the host kernel (root, tracefs): in a real terminal (a tmux pane of
//! 80×24: keys sent with `send-keys`, the screen read with `capture-pane`) and as JSON
//! lines when standard output is a pipe. The events are kernel tracepoints (the host has
//! no user_events) written by a generator this test starts: a perl loop of `getppid`
//! calls.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::NR_GETPPID;
use crate::common::PATIENCE;
use crate::common::bin;
use crate::common::tier::Tier;

fn tracefs() -> PathBuf {
    std::env::var_os("UEVREC_TRACEFS")
        .unwrap_or_else(|| "/sys/kernel/tracing".into())
        .into()
}

/// Why this machine cannot run the tests, if it cannot.
fn skip_reason(needs_tmux: bool) -> Result<(), String> {
    // SAFETY: geteuid has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root".into());
    }
    for event in [
        "raw_syscalls/sys_enter",
        "sched/sched_switch",
        "syscalls/sys_enter_getppid",
    ] {
        if !tracefs().join("events").join(event).exists() {
            return Err(format!("tracefs without events/{event} at {:?}", tracefs()));
        }
    }
    let tmux = Command::new("tmux").arg("-V").output();
    if needs_tmux && !tmux.is_ok_and(|o| o.status.success()) {
        return Err("tmux is not installed (scripts/test-all.sh installs it as root)".into());
    }
    Ok(())
}

/// A child killed (and reaped) when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A perl loop: 200 getppid calls, then 10 ms asleep, until killed (~20 000 calls/s).
fn generator() -> Reaped {
    Reaped(
        Command::new("perl")
            .args([
                "-e",
                "while (1) { getppid() for 1..200; select(undef, undef, undef, 0.01) }",
            ])
            .spawn()
            .expect("perl is needed for the generator"),
    )
}

/// A tmux server of its own (`-L`), one 80×24 session; killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// Run `command` (a shell command line) in a new 80×24 pane.
    fn start(command: &str) -> Tmux {
        let t = Tmux {
            socket: format!(
                "uevrec-top-test-{}-{:?}",
                std::process::id(),
                Instant::now()
            ),
        };
        t.run(&[
            "new-session",
            "-d",
            "-x",
            "80",
            "-y",
            "24",
            "-s",
            "top",
            command,
        ]);
        t
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("running tmux");
        assert!(out.status.success(), "tmux {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The pane's 24 lines.
    fn screen(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .run(&["capture-pane", "-p", "-t", "top"])
            .lines()
            .map(str::to_owned)
            .collect();
        lines.resize(24, String::new());
        lines
    }

    /// Send tmux key names (`q`, `Enter`, `C-c`).
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "top"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Type `text` literally.
    fn text(&self, text: &str) {
        self.run(&["send-keys", "-t", "top", "-l", text]);
    }

    /// Wait until the screen passes `check`; panics with the last screen after PATIENCE.
    fn wait_for(&self, what: &str, check: impl Fn(&[String]) -> bool) -> Vec<String> {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if check(&screen) {
                return screen;
            }
            if start.elapsed() > PATIENCE {
                panic!(
                    "waited {PATIENCE:?} for {what}; the screen:\n{}",
                    screen.join("\n")
                );
            }
            sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// The table rows on `screen` (below the column titles), by event name prefix.
fn table(screen: &[String]) -> Vec<&str> {
    screen[3..22]
        .iter()
        .map(String::as_str)
        .take_while(|l| !l.trim().is_empty())
        .collect()
}

/// Start `uevrec top` on three tracepoints of generator `load` in a pane; once it exits
/// the pane shows its status, then the terminal's settings (`stty -a`).
fn top_in_tmux(load: &Reaped) -> Tmux {
    let cmd = format!(
        "'{}' top --pid {} raw_syscalls:sys_enter sched:sched_switch syscalls:sys_enter_getppid; \
         echo EXIT=$?; stty -a; echo STTY-END; sleep 600",
        bin().display(),
        load.0.id()
    );
    Tmux::start(&cmd)
}

/// Wait until all three rows show, with the generator as their writer.
fn wait_rows(t: &Tmux, pid: u32) -> Vec<String> {
    let writer = format!("perl[{pid}] ");
    t.wait_for("three rows written by the generator", |s| {
        let rows = table(s);
        rows.len() == 3 && rows.iter().all(|r| r.contains(&writer))
    })
}

/// After `uevrec top` left: its status `status`, and the terminal back to normal (no
/// alternate screen, canonical mode and echo on); the screen's text.
fn assert_left_cleanly(t: &Tmux, status: i32) -> String {
    // STTY-END: stty's whole output is on the screen (EXIT= alone raced with it).
    let screen = t.wait_for("uevrec to exit and stty to report", |s| {
        s.iter().any(|l| l.starts_with("EXIT=")) && s.iter().any(|l| l.starts_with("STTY-END"))
    });
    let text = screen.join("\n");
    assert!(
        text.contains(&format!("EXIT={status}\n")),
        "exit status not {status}:\n{text}"
    );
    assert!(
        !text.contains("REC/S"),
        "the alternate screen was not left:\n{text}"
    );
    let words: Vec<&str> = text.split_whitespace().collect();
    for mode in ["icanon", "echo", "isig"] {
        assert!(
            words.contains(&mode),
            "`{mode}` not restored (stty -a):\n{text}"
        );
    }
    text
}

#[test]
fn live_view_rows_sort_filter_and_quit() {
    require!(Tier::Host, skip_reason(true));
    let load = generator();
    let t = top_in_tmux(&load);
    let screen = wait_rows(&t, load.0.id());
    assert!(
        screen[0].starts_with("uevrec top (perf) 3 events"),
        "{screen:#?}"
    );
    assert!(
        screen[2].starts_with("EVENT") && screen[2].contains("REC/S"),
        "{screen:#?}"
    );
    assert!(screen.iter().all(|l| l.len() <= 80), "{screen:#?}");

    // By rate (the default): every sys_enter is one record, getppid ones a subset of
    // them, a context switch every 10 ms at most.
    let screen = t.wait_for("rows sorted by rate", |s| {
        let rows = table(s);
        rows.len() == 3
            && rows[0].starts_with("raw_syscalls:sys_enter ")
            && rows[1].starts_with("syscalls:sys_enter_getpp~")
            && rows[2].starts_with("sched:sched_switch ")
    });
    assert!(screen[1].starts_with("sort: rec/s"), "{screen:#?}");

    t.keys(&["n"]);
    let screen = t.wait_for("rows sorted by name", |s| {
        let rows = table(s);
        s[1].starts_with("sort: name")
            && rows.len() == 3
            && rows[0].starts_with("raw_syscalls:")
            && rows[1].starts_with("sched:")
            && rows[2].starts_with("syscalls:")
    });
    assert!(screen[23].starts_with("q quit"), "{screen:#?}");

    t.keys(&["/"]);
    t.text("sched:*");
    t.wait_for("the filter prompt", |s| s[23].ends_with("/sched:*"));
    t.keys(&["Enter"]);
    t.wait_for("only the sched row", |s| {
        let rows = table(s);
        s[1].contains("filter: sched:*")
            && rows.len() == 1
            && rows[0].starts_with("sched:sched_switch")
    });

    t.keys(&["q"]);
    assert_left_cleanly(&t, 0);
}

#[test]
fn ctrl_c_leaves_the_live_view_cleanly() {
    require!(Tier::Host, skip_reason(true));
    let load = generator();
    let t = top_in_tmux(&load);
    wait_rows(&t, load.0.id());
    t.keys(&["C-c"]);
    assert_left_cleanly(&t, 0);
}

#[test]
fn a_session_error_restores_the_terminal_then_says_why() {
    require!(Tier::Host, skip_reason(true));
    // The kernel refuses the filter on the only event: the session fails after the view
    // started.
    let t = Tmux::start(&format!(
        "'{}' top --filter 'no_such_field == 1' sched:sched_switch; echo EXIT=$?; stty -a; \
         echo STTY-END; sleep 600",
        bin().display()
    ));
    let text = assert_left_cleanly(&t, 1);
    assert!(
        text.contains("uevrec: error: the kernel refused the filter"),
        "{text}"
    );
}

/// A process that waits for a line on stdin, then calls getppid `n` times and exits.
fn getppid_child(n: u32) -> Reaped {
    Reaped(
        Command::new("perl")
            // Alive until its standard input closes: a process that exited before its
            // first record reached uevrec cannot be named (docs/top.md).
            .args([
                "-e",
                &format!("my $go = <STDIN>; getppid() for 1..{n}; my $end = <STDIN>;"),
            ])
            .stdin(Stdio::piped())
            .spawn()
            .expect("perl is needed for the getppid child"),
    )
}

#[test]
fn plain_lines_count_every_record_perf() {
    plain_lines_count_every_record(&[]);
}

#[test]
fn plain_lines_count_every_record_ftrace() {
    plain_lines_count_every_record(&["--backend", "ftrace"]);
}

/// The lines of `stdout`, read by a thread of their own (joined once the process ended).
pub(crate) fn line_reader(
    stdout: std::process::ChildStdout,
) -> (mpsc::Receiver<String>, std::thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    (rx, reader)
}

/// Standard output a pipe: JSON lines every interval; after SIGINT a final set whose
/// counts hold every record (exactly the child's getppid calls), then exit status 0.
fn plain_lines_count_every_record(backend: &[&str]) {
    require!(Tier::Host, skip_reason(false));
    const N: u32 = 3000;
    let mut child = getppid_child(N);
    let mut top = Command::new(bin())
        .args([
            "top",
            "--interval",
            "200ms",
            "--pid",
            &child.0.id().to_string(),
        ])
        .args([
            "--filter",
            &format!("id == {NR_GETPPID}"),
            "raw_syscalls:sys_enter",
        ])
        .args(backend)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (rx, reader) = line_reader(top.stdout.take().unwrap());
    let mut lines: Vec<Value> = Vec::new();
    let next = |what: &str| -> Value {
        let line = rx
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|_| panic!("no line within {PATIENCE:?} while waiting for {what}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line:?}: {e}"))
    };
    // Attached (the notice rides on a totals line), then the child runs.
    loop {
        let v = next("the attached notice");
        let attached = v["notice"]
            .as_str()
            .is_some_and(|n| n.starts_with("attached "));
        lines.push(v);
        if attached {
            break;
        }
    }
    let mut stdin = child.0.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    // Its records seen in some interval (the child still alive to be named), then stop.
    loop {
        let v = next("the child's records");
        let seen = v["uevrec"] == "top" && v["records"].as_u64() == Some(N as u64);
        lines.push(v);
        if seen {
            break;
        }
    }
    drop(stdin);
    assert!(child.0.wait().unwrap().success());
    // SAFETY: kill on a child we own.
    assert_eq!(unsafe { libc::kill(top.id() as i32, libc::SIGINT) }, 0);
    let status = crate::common::wait_exit(&mut top, PATIENCE).expect("uevrec top did not exit");
    reader.join().unwrap();
    lines.extend(
        rx.try_iter()
            .map(|l| serde_json::from_str::<Value>(&l).unwrap()),
    );
    assert!(status.success(), "{status:?}");

    let events: Vec<&Value> = lines.iter().filter(|v| v["uevrec"] == "top").collect();
    let totals: Vec<&Value> = lines
        .iter()
        .filter(|v| v["uevrec"] == "top_total")
        .collect();
    assert_eq!(
        events.len() + totals.len(),
        lines.len(),
        "only top lines: {lines:#?}"
    );
    // One event line per attached event per interval (none in an interval that ended
    // before the attach: a loaded machine may take longer than one interval to attach).
    let per_interval: u64 = totals.iter().map(|t| t["events"].as_u64().unwrap()).sum();
    assert_eq!(
        events.len() as u64,
        per_interval,
        "one event line per event and interval: {lines:#?}"
    );
    // Totals never go down; the last set is final and holds every record.
    for w in events.windows(2) {
        assert!(
            w[0]["records"].as_u64() <= w[1]["records"].as_u64(),
            "{w:#?}"
        );
    }
    let (last, total) = (events.last().unwrap(), totals.last().unwrap());
    assert_eq!(last["final"], true, "{last}");
    assert_eq!(total["final"], true, "{total}");
    assert_eq!(last["event"], "raw_syscalls:sys_enter");
    assert_eq!(last["records"], N, "{last}");
    assert_eq!(total["records"], N, "{total}");
    assert_eq!(total["lost"], 0, "{total}");
    // Bytes: the trace entries as the backend hands them over, at least the format's size.
    let bytes = last["bytes"].as_u64().unwrap();
    let entry = entry_size(&tracefs().join("events/raw_syscalls/sys_enter/format"));
    assert!(
        bytes >= N as u64 * entry && bytes < N as u64 * (entry + 8),
        "{last}"
    );
    // The child wrote them all, in the interval where they were counted.
    let busy = events
        .iter()
        .find(|e| e["records_per_s"].as_f64() > Some(0.0))
        .expect("an interval with records");
    assert_eq!(busy["top"][0]["pid"], child.0.id(), "{busy}");
    assert_eq!(busy["top"][0]["comm"], "perl", "{busy}");
}

/// The size of an event's entry: the end of its last field (format file).
fn entry_size(format: &Path) -> u64 {
    let text = std::fs::read_to_string(format).unwrap();
    let num = |l: &str, key: &str| -> Option<u64> {
        let at = l.find(key)? + key.len();
        l[at..].split(';').next()?.trim().parse().ok()
    };
    text.lines()
        .filter_map(|l| Some(num(l, "offset:")? + num(l, "size:")?))
        .max()
        .unwrap()
}
