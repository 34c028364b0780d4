//! Process ids on the ftrace backend when a thread id is reused: an ftrace record carries
//! only the thread id, so uevrec finds the process id itself (src/capture/ftrace/tgid.rs). A
//! thread of this test process calls getppid and exits; the next process is made to get
//! its id (`/proc/sys/kernel/ns_last_pid`) and calls getppid too: its record must name
//! itself, not the test process that the id belonged to a moment before. (CI,
//! 2026-11-28: under load, a recycled id named an exited process, and with it that
//! process's cgroup and pod.)

use std::path::Path;
use std::process::{Child, Command};

use serde_json::Value;

use crate::common::{NR_GETPPID, PATIENCE, bin, complete_lines, wait_for};

/// The record of getppid(`magic`, `seq`), once it is written.
fn record(out: &Path, magic: u64, seq: u64) -> Value {
    let find = || {
        complete_lines(out)
            .into_iter()
            .find(|v| v["fields"]["args"][0] == magic && v["fields"]["args"][1] == seq)
    };
    wait_for(&format!("the record of seq {seq}"), PATIENCE, || {
        find().is_some()
    });
    find().unwrap()
}

struct Stop(Child);

impl Drop for Stop {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGINT) };
        let _ = crate::common::wait_exit(&mut self.0, PATIENCE);
    }
}

#[test]
fn a_reused_thread_id_names_its_new_process_ftrace() {
    reused_thread_id(424_242, &[]);
}

/// Without the context, the tracking instance follows new tasks all the same.
#[test]
fn a_reused_thread_id_names_its_new_process_ftrace_no_context() {
    reused_thread_id(424_243, &["--no-context"]);
}

/// `magic` tells this test's calls from the other's (both record every getppid).
fn reused_thread_id(magic: u64, extra: &[&str]) {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let _rec = Stop(
        Command::new(bin())
            .args(["record", "--quiet", "--backend", "ftrace"])
            .args(extra)
            .args(["-e", "raw_syscalls:sys_enter", "--filter"])
            .arg(format!("id == {NR_GETPPID}"))
            .arg("-o")
            .arg(&out)
            .spawn()
            .unwrap(),
    );
    wait_for("uevrec's attached notice", PATIENCE, || {
        complete_lines(&out).iter().any(|v| v["what"] == "attached")
    });
    let me = std::process::id();
    // Other processes on this machine may take the id first: try again with a new one.
    for attempt in 0..30u64 {
        let seq = attempt * 2;
        let tid = std::thread::spawn(move || {
            // SAFETY: gettid and getppid have no memory effects (getppid ignores the
            // arguments, which the tracepoint records).
            unsafe {
                libc::syscall(libc::SYS_getppid, magic, seq);
                libc::gettid() as u32
            }
        })
        .join()
        .unwrap();
        let v = record(&out, magic, seq);
        assert_eq!(
            (v["pid"].as_u64(), v["tid"].as_u64()),
            (Some(me.into()), Some(tid.into())),
            "{v}"
        );
        std::fs::write("/proc/sys/kernel/ns_last_pid", format!("{}", tid - 1))
            .expect("writing /proc/sys/kernel/ns_last_pid (root)");
        let mut child = Command::new("perl")
            .args([
                "-e",
                &format!("syscall({NR_GETPPID}, {magic}, {})", seq + 1),
            ])
            .spawn()
            .expect("perl");
        let pid = child.id();
        assert!(child.wait().unwrap().success());
        if pid != tid {
            continue;
        }
        let v = record(&out, magic, seq + 1);
        assert_eq!(
            (v["pid"].as_u64(), v["tid"].as_u64()),
            (Some(pid.into()), Some(pid.into())),
            "the new process {pid} with the id of this process's thread: {v}"
        );
        return;
    }
    panic!("30 tries to give a new process a thread's id, each taken first by another process");
}
