//! Context on every record (`comm`, `cgroup`, `container`), end to end through the binary
//! on the host kernel, on both backends: a child moves itself into a cgroup named like a
//! Docker scope (created after uevrec started, so its path comes from the kernel's
//! records, not the start-up walk), execs perl, calls getppid 3 times, renames itself
//! (`$0 =` is `prctl(PR_SET_NAME)`), then calls getppid 5 times. Also: `--no-context`,
//! and which pid a record shows when uevrec runs in its own pid namespace. Needs root,
//! tracefs and a cgroup v2 hierarchy (each test says why it is skipped otherwise).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::PATIENCE;
use crate::common::cgroups::Cgroups;
use crate::common::tier::Tier;
use crate::common::{complete_lines, wait_for};

/// A container id the cgroup is named after.
const ID: &str = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00";

/// One test at a time when the tests share a process (`cargo test`'s threads; nextest
/// runs each in its own): they watch the same CPUs' exec and rename traffic. A uevrec in a
/// pid namespace no longer takes other recorders' instances for stale ones
/// (`in_a_pid_namespace` checks it), so tests of other binaries may run beside these.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// The cgroup v2 root, or why the tests cannot run.
fn host() -> Result<PathBuf, String> {
    // SAFETY: geteuid has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root".into());
    }
    let tracing = Path::new("/sys/kernel/tracing/events");
    for e in ["sched/sched_process_exec", "syscalls/sys_enter_getppid"] {
        if !tracing.join(e).exists() {
            return Err(format!("no tracepoint {e} under {}", tracing.display()));
        }
    }
    uevrec::capture::context::cgroup_root().ok_or_else(|| "no cgroup2 file system mounted".into())
}

/// The child: waits for a line, moves itself into `scope`, execs perl (getppid ×3,
/// rename to `ctx-renamed`, getppid ×5), on any CPU.
fn child(scope: &Path) -> Child {
    let script = format!(
        "read go; echo $$ > {}/cgroup.procs; \
         exec perl -e 'getppid() for 1..3; $0 = q(ctx-renamed); getppid() for 1..5'",
        scope.display()
    );
    Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `uevrec record --backend BACKEND EXTRA` of execs and getppid calls into `out`, once
/// both events are attached.
fn record_execs_and_getppid(backend: &str, extra: &[&str], out: &Path) -> Child {
    let rec = Command::new(crate::common::bin())
        .args(["record", "--quiet", "--backend", backend])
        .args([
            "-e",
            "sched:sched_process_exec",
            "-e",
            "syscalls:sys_enter_getppid",
        ])
        .args(extra)
        .arg("-o")
        .arg(out)
        .spawn()
        .unwrap();
    crate::common::wait_attached_notices(out, 2);
    rec
}

/// Run the child under `uevrec record --backend BACKEND EXTRA`; the records of the
/// child, time-ordered, and the path of the cgroup it ran in (from the v2 root).
fn record_child(root: &Path, backend: &str, extra: &[&str]) -> (Vec<Value>, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.json");
    let parent = root.join(format!("uevrec-ctx-{}-{backend}", std::process::id()));
    fs::create_dir_all(&parent).unwrap();
    let _cg = Cgroups(parent.clone());
    let scope = parent.join(format!("docker-{ID}.scope"));
    let mut c = child(&scope);
    let pid = c.id().to_string();
    let mut rec = record_execs_and_getppid(backend, &[&["--pid", &pid], extra].concat(), &out);
    // Created now: its path must come from the kernel (PERF_RECORD_CGROUP), not the
    // start-up walk.
    fs::create_dir(&scope).unwrap();
    use std::io::Write;
    c.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(c.wait().unwrap().success());
    let pid = c.id();
    wait_for("the child's 9 records", PATIENCE, || {
        complete_lines(&out)
            .iter()
            .filter(|v| v["pid"] == pid && v.get("uevrec").is_none())
            .count()
            >= 9
    });
    // SAFETY: signalling our own child.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    assert!(rec.wait().unwrap().success());
    let mut got: Vec<Value> = complete_lines(&out)
        .into_iter()
        .filter(|v| v["pid"] == pid && v.get("uevrec").is_none())
        .collect();
    got.sort_by(|a, b| a["time"].as_str().cmp(&b["time"].as_str()));
    let path = format!(
        "/{}/docker-{ID}.scope",
        parent.file_name().unwrap().to_str().unwrap()
    );
    (got, path)
}

fn exec_then_rename_in_a_docker_scope(backend: &str) {
    let root = require!(Tier::Host, host());
    let _one = serial();
    let (got, path) = record_child(&root, backend, &[]);
    let names: Vec<(&str, &str)> = got
        .iter()
        .map(|v| {
            (
                v["event"].as_str().unwrap(),
                v["comm"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    let mut want = vec![("sched_process_exec", "perl")];
    want.extend([("sys_enter_getppid", "perl"); 3]);
    want.extend([("sys_enter_getppid", "ctx-renamed"); 5]);
    assert_eq!(names, want, "{got:#?}");
    for v in &got {
        assert_eq!(v["cgroup"], path.as_str(), "{v}");
        assert_eq!(v["container"], ID, "{v}");
        assert!(v.get("unit").is_none(), "{v}");
    }
}

#[test]
fn exec_then_rename_in_a_docker_scope_perf() {
    exec_then_rename_in_a_docker_scope("perf");
}

#[test]
fn exec_then_rename_in_a_docker_scope_ftrace() {
    exec_then_rename_in_a_docker_scope("ftrace");
}

#[test]
fn no_context_writes_no_context_keys() {
    let root = require!(Tier::Host, host());
    let _one = serial();
    for backend in ["perf", "ftrace"] {
        let (got, _) = record_child(&root, backend, &["--no-context"]);
        assert_eq!(got.len(), 9, "{got:#?}");
        for v in &got {
            for key in ["comm", "cgroup", "container", "unit"] {
                assert!(v.get(key).is_none(), "{backend}: {key} in {v}");
            }
        }
    }
}

/// uevrec in its own pid namespace (`unshare --pid --fork --mount-proc`, as in a
/// container without `--pid=host`): with the perf backend a record's `pid`/`tid` are the
/// writer's ids in uevrec's namespace and `comm` is right; the trace entry's
/// `common_pid` stays the id in the initial namespace. With the ftrace backend `pid`/`tid`
/// are the initial namespace's ids (what the kernel wrote in the entry).
#[test]
fn in_a_pid_namespace() {
    let _root = require!(Tier::Host, host());
    let _one = serial();
    if Command::new("unshare").arg("--version").output().is_err() {
        return crate::common::tier::skip(Tier::Host, "unshare (util-linux) not installed");
    }
    // An instance named like a live uevrec's (this test process's id: alive, but not
    // visible from the namespace's own /proc). The ftrace backend in the namespace must
    // neither take it for stale and remove it (as it did: a containerized uevrec removed
    // the instances of recorders running on the host) nor name its own instance after
    // its namespace's id (every container's uevrec would be `uevrec-1`).
    let decoy = Path::new("/sys/kernel/tracing/instances")
        .join(format!("uevrec-{}-s9999", std::process::id()));
    fs::create_dir(&decoy).unwrap();
    struct Rmdir<'a>(&'a Path);
    impl Drop for Rmdir<'_> {
        fn drop(&mut self) {
            let _ = fs::remove_dir(self.0);
        }
    }
    let _decoy = Rmdir(&decoy);
    for backend in ["perf", "ftrace"] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.json");
        let pid_file = dir.path().join("pid");
        // The producer waits for uevrec's attached notice, then calls getppid 4 times.
        let producer = format!(
            "perl -e 'open(my $p, \">\", $ARGV[1]); print $p \"$$\\n\"; close $p; \
             until (do {{ local $/; my $t = q(); if (open(my $f, \"<\", $ARGV[0])) {{ $t = <$f> // q() }} $t =~ /attached/ }}) \
             {{ select(undef, undef, undef, 0.05) }} $0 = q(ns-producer); getppid() for 1..4' {} {}",
            out.display(),
            pid_file.display()
        );
        // `timeout`: a producer that never sees the attached notice must not hang the run.
        let mut child = Command::new("timeout")
            .args([
                "60",
                "unshare",
                "--pid",
                "--fork",
                "--mount-proc",
                "sh",
                "-c",
            ])
            .arg(format!(
                "{producer} & P=$!; {} record --quiet --backend {backend} --common \
                 -e syscalls:sys_enter_getppid --duration 20 -o {} & U=$!; wait $P; \
                 sleep 0.5; kill -INT $U; wait $U",
                crate::common::bin().display(),
                out.display()
            ))
            .spawn()
            .unwrap();
        // While it runs: the names of the instances made from inside the namespace.
        let mut ns_named = false;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            ns_named |= fs::read_dir(decoy.parent().unwrap())
                .unwrap()
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("uevrec-ns"));
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "{backend}: {status}");
        if backend == "ftrace" {
            assert!(ns_named, "no uevrec-ns<inode>-<pid> instance seen");
        }
        assert!(
            decoy.is_dir(),
            "{backend}: uevrec in a pid namespace removed {}, a live process's instance",
            decoy.display()
        );
        let ns_pid: u64 = fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let all = complete_lines(&out);
        let mine: Vec<&Value> = all.iter().filter(|v| v["comm"] == "ns-producer").collect();
        assert_eq!(mine.len(), 4, "{backend}: {all:#?}");
        for v in mine {
            let common_pid = v["common"]["common_pid"].as_u64().unwrap();
            assert_ne!(common_pid, ns_pid, "{backend}: {v}");
            let want = if backend == "perf" {
                ns_pid
            } else {
                common_pid
            };
            assert_eq!(v["pid"], want, "{backend}: {v}");
            assert_eq!(v["tid"], want, "{backend}: {v}");
        }
    }
}

/// How many children [`renames_and_execs_across_cpus`] starts.
const CHILDREN: usize = 12;

/// A parent started after uevrec, pinned to the last CPU and renamed `ctx-parent`, forks
/// [`CHILDREN`] children in quick succession. Each calls getppid twice, execs `taskset`
/// to move to CPU 0 (even ones: its later records are in a ring read before the one
/// that holds its fork and first records) or to any CPU (odd ones), which execs perl: getppid ×2,
/// renames itself `ctx-a` then `ctx-b` (getppid ×2 after each), and execs perl again
/// through a symbolic link named `ctx-exec` (getppid ×2). Every record of every child
/// (its getppid calls and its three execs) must carry the name the child had at that
/// moment, although its fork, renames and records are read from different CPUs' rings,
/// several changes apart.
fn renames_and_execs_across_cpus(backend: &str) {
    let _root = require!(Tier::Host, host());
    let _one = serial();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let last = cpus - 1;
    if cpus < 2 {
        return crate::common::tier::skip(Tier::Host, "one CPU: nothing runs on another CPU");
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.json");
    let link = dir.path().join("ctx-exec");
    std::os::unix::fs::symlink(
        String::from_utf8(
            Command::new("sh")
                .args(["-c", "command -v perl"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim(),
        &link,
    )
    .unwrap();
    let mut rec = record_execs_and_getppid(backend, &[], &out);
    let inner = "getppid() for 1..2; $0 = q(ctx-a); getppid() for 1..2; $0 = q(ctx-b); \
                 getppid() for 1..2; exec { $ARGV[0] } $ARGV[0], q(-e), q(getppid() for 1..2)";
    let parent = format!(
        "$0 = q(ctx-parent); my @kids; \
         for my $i (0..{}) {{ \
           my $pid = fork() // die; \
           if ($pid == 0) {{ \
             getppid() for 1..2; \
             exec(q(taskset), q(-c), ($i % 2 ? q(0-{last}) : q(0)), q(perl), q(-e), q({inner}), $ARGV[0]) or die; \
           }} \
           push @kids, $pid; \
         }} \
         waitpid($_, 0) for @kids; print qq($_\\n) for @kids;",
        CHILDREN - 1,
    );
    let done = Command::new("taskset")
        .args(["-c", &last.to_string(), "perl", "-e", &parent])
        .arg(&link)
        .output()
        .unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let kids: Vec<u64> = String::from_utf8(done.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(kids.len(), CHILDREN);
    let want: Vec<(&str, &str)> = [
        ("sys_enter_getppid", "ctx-parent"),
        ("sys_enter_getppid", "ctx-parent"),
        ("sched_process_exec", "taskset"),
        ("sched_process_exec", "perl"),
        ("sys_enter_getppid", "perl"),
        ("sys_enter_getppid", "perl"),
        ("sys_enter_getppid", "ctx-a"),
        ("sys_enter_getppid", "ctx-a"),
        ("sys_enter_getppid", "ctx-b"),
        ("sys_enter_getppid", "ctx-b"),
        ("sched_process_exec", "ctx-exec"),
        ("sys_enter_getppid", "ctx-exec"),
        ("sys_enter_getppid", "ctx-exec"),
    ]
    .into();
    let count = |all: &[Value]| {
        all.iter()
            .filter(|v| v.get("uevrec").is_none() && kids.contains(&v["tid"].as_u64().unwrap_or(0)))
            .count()
    };
    wait_for("every record of the children", PATIENCE, || {
        count(&complete_lines(&out)) >= CHILDREN * want.len()
    });
    // SAFETY: signalling our own child.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    assert!(rec.wait().unwrap().success());
    let all = complete_lines(&out);
    assert!(
        !all.iter()
            .any(|v| v["uevrec"] == "lost" || v["what"] == "context_lost"),
        "{backend}: records lost"
    );
    let mut cpus_seen = std::collections::BTreeSet::new();
    for &kid in &kids {
        let mut mine: Vec<&Value> = all
            .iter()
            .filter(|v| v.get("uevrec").is_none() && v["tid"] == kid)
            .collect();
        mine.sort_by(|a, b| a["time"].as_str().cmp(&b["time"].as_str()));
        cpus_seen.extend(mine.iter().map(|v| v["cpu"].as_u64()));
        let got: Vec<(&str, &str)> = mine
            .iter()
            .map(|v| {
                (
                    v["event"].as_str().unwrap(),
                    v["comm"].as_str().unwrap_or("-"),
                )
            })
            .collect();
        assert_eq!(got, want, "{backend}: child {kid}: {mine:#?}");
    }
    assert!(
        cpus_seen.len() >= 2,
        "{backend}: all on one CPU: {cpus_seen:?}"
    );
}

#[test]
fn renames_and_execs_across_cpus_perf() {
    renames_and_execs_across_cpus("perf");
}

#[test]
fn renames_and_execs_across_cpus_ftrace() {
    renames_and_execs_across_cpus("ftrace");
}
