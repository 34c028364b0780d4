//! The command line run without privileges on the host kernel: the error a user without
//! root or CAP_PERFMON gets (the rest of the CLI's tests need no kernel: tests/pure/cli.rs).

use std::path::Path;

use crate::common::tier::Tier;

/// Run the binary as user nobody (when we are root) or as ourselves (when we are not).
fn unprivileged(args: &[&str]) -> Option<std::process::Output> {
    let bin = crate::common::bin();
    // SAFETY: geteuid has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        return Some(std::process::Command::new(bin).args(args).output().unwrap());
    }
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&bin)
        .args(args)
        .env_remove("UEVREC_TRACEFS")
        .current_dir("/")
        .output();
    match out {
        Ok(o) if !String::from_utf8_lossy(&o.stderr).contains("setpriv:") => Some(o),
        Ok(o) => {
            crate::common::tier::skip(
                Tier::Host,
                &format!("setpriv failed: {}", String::from_utf8_lossy(&o.stderr)),
            );
            None
        }
        Err(e) => {
            crate::common::tier::skip(Tier::Host, &format!("cannot run setpriv: {e}"));
            None
        }
    }
}

#[test]
fn unprivileged_run_says_root_or_cap_perfmon() {
    // SAFETY: geteuid has no side effects.
    let root = unsafe { libc::geteuid() } == 0;
    if !Path::new("/sys/kernel/tracing/events").exists() && root {
        crate::common::tier::skip(Tier::Host, "tracefs is not mounted at /sys/kernel/tracing");
        return;
    }
    let Some(out) = unprivileged(&[
        "record",
        "-q",
        "--duration",
        "1s",
        "-e",
        "sched:sched_process_exec",
    ]) else {
        return;
    };
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("root") || err.contains("CAP_PERFMON"), "{err}");
    assert!(out.stdout.is_empty(), "no output lines expected");
}

/// A refused `--filter` is shown as the user typed it, with the kernel's caret under it:
/// uevrec's own thread terms (`common_pid != …`) stay out of the message.
#[test]
fn a_refused_filter_shows_the_users_expression_and_the_caret_alone() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let out = std::process::Command::new(crate::common::bin())
        .args(["record", "--filter", "bogus ==", "-o", "/dev/null"])
        .arg("raw_syscalls:sys_enter")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("common_pid"), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == "bogus ==")
        .unwrap_or_else(|| panic!("no line with the expression alone:\n{err}"));
    let caret = lines.get(at + 1).copied().unwrap_or_default();
    assert_eq!(caret.trim(), "^", "{err}");
    assert!(
        caret.len() <= "bogus ==".len() + 1,
        "caret past the expression:\n{err}"
    );
    assert!(
        err.contains("the kernel refused the filter `bogus ==`"),
        "{err}"
    );
}
