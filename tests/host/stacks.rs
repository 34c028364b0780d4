//! Call stacks on every record (`record -g`), end to end on the host kernel: a C program
//! built here with frame pointers and debug information (`main → outer → middle → inner
//! → syscall(SYS_setpgid, MAGIC, SEQ)`, each function kept out of line: an ESRCH) is
//! recorded on `raw_syscalls:sys_enter` with `id == NR_SETPGID` (not getppid: the machine
//! is shared, and other tests' getppid floods would fill the ring while uevrec is stopped;
//! `syscalls:sys_enter_setpgid` would filter on MAGIC but its callchains have no kernel
//! part: the kernel passes it the user registers); every record of it names middle, outer and main in that
//! order with their file and line (glibc's `syscall()` keeps no frame pointer, so a
//! frame-pointer walk skips `inner`: docs/stacks.md), and the kernel's `do_syscall_64`
//! when `/proc/kallsyms` shows addresses. uevrec is stopped (SIGSTOP) while the program
//! runs and exits, so every record is symbolized after the process is gone: its names
//! come from the mappings the kernel reported while it lived (MMAP2), not from /proc.
//! With `--call-graph dwarf` the same program (and one built without frame pointers, and
//! the JIT stub) is unwound by uevrec from its stack copies: `inner` is there, and the
//! stack goes on through the stub, where `perf record --call-graph dwarf` stops.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use serde_json::Value;

use crate::common::tier::Tier;
use crate::common::{PATIENCE, bin, complete_lines, wait_for};

use crate::common::chain::build_chain_with;
pub(crate) use crate::common::chain::{NR_SETPGID, build_chain, call_line};
use crate::common::stack_frames::{holds_in_a_row, user_symbols};

/// uevrec, interrupted (then waited for) when dropped.
pub(crate) struct Recorder(pub(crate) Child);

impl Drop for Recorder {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGCONT);
            libc::kill(self.0.id() as i32, libc::SIGINT);
        }
        let _ = crate::common::wait_exit(&mut self.0, PATIENCE);
    }
}

/// `uevrec record --quiet ARGS` of every setpgid call on `raw_syscalls:sys_enter` into
/// `out`, once attached.
pub(crate) fn record_setpgid(out: &Path, args: &[&str]) -> Recorder {
    let rec = Recorder(
        Command::new(bin())
            .args(["record", "--quiet"])
            .args(args)
            .args(["-e", "raw_syscalls:sys_enter", "--filter"])
            .arg(format!("id == {NR_SETPGID}"))
            .arg("-o")
            .arg(out)
            .spawn()
            .unwrap(),
    );
    crate::common::wait_attached_notices(out, 1);
    rec
}

/// Whether `/proc/kallsyms` shows addresses (kptr_restrict may hide them as zeros).
pub(crate) fn kallsyms_readable() -> bool {
    std::fs::read_to_string("/proc/kallsyms")
        .ok()
        .and_then(|t| t.lines().next().map(|l| !l.starts_with("0000000000000000")))
        .unwrap_or(false)
}

#[test]
fn fp_stacks_name_the_chain_after_the_program_exited() {
    fp_stacks(424_242_038, &[]);
}

/// Without the context keys the trackers still report the mappings.
#[test]
fn fp_stacks_name_the_chain_without_context() {
    fp_stacks(424_242_040, &["--no-context"]);
}

/// `magic` tells this test's calls from the other tests' (each records all of them).
fn fp_stacks(magic: u64, extra: &[&str]) {
    let Some((dir, exe)) = built_here(build_chain) else {
        return;
    };
    let args = [&["-g"][..], extra].concat();
    let (session, records, _) = record_program(&exe, magic, 200, &args);
    // The session line says what the stack key holds.
    assert_eq!(session["stacks"]["call_graph"], "fp", "{session}");
    assert_eq!(session["stacks"]["symbolized"], true, "{session}");
    let kernel = kallsyms_readable();
    let file = dir.path().join("chain.c");
    for r in &records {
        let stack = r["stack"].as_array().expect("a stack on every record");
        let user: Vec<&Value> = stack.iter().filter(|f| f["context"] == "user").collect();
        let names: Vec<&str> = user.iter().filter_map(|f| f["symbol"].as_str()).collect();
        let at = |name: &str| names.iter().position(|n| *n == name);
        let (middle, outer, main) = (at("middle"), at("outer"), at("main"));
        assert!(
            middle.is_some() && middle < outer && outer < main,
            "middle, outer, main in order in {names:?}: {r}"
        );
        for name in ["middle", "outer", "main"] {
            let f = user.iter().find(|f| f["symbol"] == name).unwrap();
            assert_eq!(f["module"], exe.to_str().unwrap(), "{f}");
            assert_eq!(f["file"], file.to_str().unwrap(), "{f}");
            assert_eq!(f["line"], call_line(name), "{name}'s call line: {f}");
            assert!(f["addr"].as_str().unwrap().starts_with("0x"), "{f}");
        }
        // Kernel frames first (innermost first), told apart by their context.
        let first_user = stack.iter().position(|f| f["context"] == "user").unwrap();
        assert!(stack[..first_user].iter().all(|f| f["context"] == "kernel"));
        if kernel {
            assert!(
                stack
                    .iter()
                    .any(|f| f["context"] == "kernel" && f["symbol"] == "do_syscall_64"),
                "do_syscall_64 among the kernel frames: {r}"
            );
        } else {
            assert!(
                stack
                    .iter()
                    .filter(|f| f["context"] == "kernel")
                    .all(|f| f["unsymbolized"] == "kallsyms_hidden"),
                "kernel frames say why they have no names: {r}"
            );
        }
    }
}

/// `--no-symbolize`: user frames carry their module and file offset, no names.
#[test]
fn no_symbolize_gives_module_and_file_offset() {
    let Some((dir, exe)) = built_here(build_chain) else {
        return;
    };
    let out = dir.path().join("out.jsonl");
    let _rec = record_setpgid(&out, &["-g", "--user-callchains", "--no-symbolize"]);
    const MAGIC: u64 = 424_242_039;
    let status = Command::new(&exe)
        .args([MAGIC.to_string(), "3".into()])
        .status()
        .unwrap();
    assert!(status.success());
    let mine = || -> Vec<Value> {
        complete_lines(&out)
            .into_iter()
            .filter(|v| v["fields"]["args"][0] == MAGIC)
            .collect()
    };
    wait_for("the program's records", PATIENCE, || mine().len() >= 3);
    for r in mine() {
        let stack = r["stack"].as_array().unwrap();
        assert!(
            stack.iter().all(|f| f["context"] == "user"),
            "user frames only: {r}"
        );
        assert!(
            stack.iter().all(|f| f.get("symbol").is_none()),
            "no names: {r}"
        );
        let own: Vec<&Value> = stack
            .iter()
            .filter(|f| f["module"] == exe.to_str().unwrap())
            .collect();
        assert!(own.len() >= 3, "middle, outer and main in the program: {r}");
        for f in own {
            let offset = f["file_offset"].as_str().unwrap();
            assert!(offset.starts_with("0x"), "{f}");
            assert!(
                f["build_id"].as_str().is_some_and(|b| b.len() == 40),
                "a GNU build id: {f}"
            );
        }
    }
}

/// `--call-graph dwarf` where stacks cannot go is refused with the reason, as `fp` is; a
/// size perf would refuse is refused too. (A `--raw` perf.data takes its stack copies:
/// stacks_raw.rs.)
#[test]
fn dwarf_is_refused_where_stacks_cannot_go() {
    for (args, says) in [
        (
            &["--call-graph", "dwarf", "--backend", "ftrace"][..],
            "--backend perf",
        ),
        (&["--call-graph", "dwarf,7"][..], "multiple of 8"),
        (&["--call-graph", "dwarf,65536"][..], "multiple of 8"),
        (
            &["--call-graph", "dwarf", "--format", "text"][..],
            "not to text lines",
        ),
        (
            &[
                "--call-graph",
                "dwarf",
                "--raw",
                "/nonexistent/never-written.dat",
                "--raw-format",
                "trace-dat",
            ][..],
            "a trace.dat with --call-graph dwarf",
        ),
    ] {
        let out = Command::new(bin())
            .arg("record")
            .args(args)
            .args(["-e", "raw_syscalls:sys_enter", "-o", "/dev/null"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// The program `build` makes in a new directory, there with it; None (said, when it is
/// the program that cannot be built) where these tests cannot run.
pub(crate) fn built_here(
    build: impl FnOnce(&Path) -> Result<PathBuf, String>,
) -> Option<(tempfile::TempDir, PathBuf)> {
    if !crate::common::raw_syscalls_here() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    match build(dir.path()) {
        Ok(exe) => Some((dir, exe)),
        Err(why) => {
            crate::common::tier::skip(Tier::Host, &why);
            None
        }
    }
}

/// Record `exe MAGIC N` with `uevrec record ARGS` (uevrec stopped while the program runs
/// and exits, so every stack is unwound and named after the process is gone); checks
/// that nothing was lost and every SEQ came once; returns the session line and the
/// program's records and its process id.
fn record_program(exe: &Path, magic: u64, n: u64, args: &[&str]) -> (Value, Vec<Value>, u32) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let mut rec = record_setpgid(&out, args);
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(rec.0.id() as i32, libc::SIGSTOP) };
    let mut child = Command::new(exe)
        .args([magic.to_string(), n.to_string()])
        .spawn()
        .unwrap();
    let pid = child.id();
    let status = child.wait().unwrap();
    assert!(status.success(), "{} failed: {status}", exe.display());
    // SAFETY: as above.
    unsafe { libc::kill(rec.0.id() as i32, libc::SIGCONT) };
    let mine = |lines: &[Value]| -> Vec<Value> {
        lines
            .iter()
            .filter(|v| v["fields"]["args"][0] == magic)
            .cloned()
            .collect()
    };
    wait_for("every record of the program", PATIENCE, || {
        mine(&complete_lines(&out)).len() as u64 >= n
    });
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(rec.0.id() as i32, libc::SIGINT) };
    assert!(crate::common::wait_exit(&mut rec.0, PATIENCE).is_ok_and(|s| s.success()));
    let lines = complete_lines(&out);
    let lost: u64 = lines
        .iter()
        .filter(|v| v["uevrec"] == "lost")
        .map(|v| v["lost"].as_u64().unwrap())
        .sum();
    assert_eq!(lost, 0, "records lost");
    let records = mine(&lines);
    let mut seqs: Vec<u64> = records
        .iter()
        .map(|v| v["fields"]["args"][1].as_u64().unwrap())
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..n).collect::<Vec<_>>(), "each SEQ exactly once");
    let session = lines
        .iter()
        .find(|v| v["uevrec"] == "session")
        .unwrap()
        .clone();
    (session, records, pid)
}

/// `--call-graph dwarf` on the frame-pointer build: `inner`, which a frame-pointer walk
/// misses (glibc's `syscall()` keeps no frame pointer), is there, then middle, outer and
/// main, one after the other, each with its call's line; kernel frames first.
#[test]
fn dwarf_stacks_recover_the_frame_the_frame_pointers_miss() {
    let Some((dir, exe)) =
        built_here(|dir| build_chain_with(dir, "chain", &["-fno-omit-frame-pointer"]))
    else {
        return;
    };
    let (session, records, _) = record_program(
        &exe,
        424_242_050,
        200,
        &["--call-graph", "dwarf", "-m", "4M"],
    );
    assert_eq!(session["stacks"]["call_graph"], "dwarf,8192", "{session}");
    let file = dir.path().join("chain.c");
    for r in &records {
        let names = user_symbols(r);
        assert!(
            holds_in_a_row(&names, &["syscall", "inner", "middle", "outer", "main"]),
            "syscall, inner, middle, outer, main one after the other in {names:?}: {r}"
        );
        let stack = r["stack"].as_array().unwrap();
        let first_user = stack.iter().position(|f| f["context"] == "user").unwrap();
        assert!(
            stack[..first_user].iter().all(|f| f["context"] == "kernel"),
            "{r}"
        );
        assert!(first_user > 0, "kernel frames from the kernel's chain: {r}");
        for name in ["middle", "outer", "main"] {
            let f = stack.iter().find(|f| f["symbol"] == name).unwrap();
            assert_eq!(f["module"], exe.to_str().unwrap(), "{f}");
            assert_eq!(f["file"], file.to_str().unwrap(), "{f}");
            assert_eq!(f["line"], call_line(name), "{name}'s call line: {f}");
        }
        assert!(
            stack.iter().all(|f| f.get("truncated").is_none()),
            "the whole stack fits 8 KiB: {r}"
        );
    }
}

/// Built without frame pointers throughout: a frame-pointer walk loses the chain (shown
/// here), `dwarf` keeps it whole.
#[test]
fn without_frame_pointers_only_dwarf_keeps_the_chain() {
    let Some((_dir, exe)) =
        built_here(|dir| build_chain_with(dir, "chain_nofp", &["-fomit-frame-pointer"]))
    else {
        return;
    };
    let chain = ["syscall", "inner", "middle", "outer", "main"];
    let (_, fp, _) = record_program(&exe, 424_242_051, 50, &["-g", "--user-callchains"]);
    for r in &fp {
        let names = user_symbols(r);
        assert!(
            !holds_in_a_row(&names, &chain[1..]),
            "frame pointers cannot give the chain here: {names:?}"
        );
    }
    let (_, dwarf, _) = record_program(
        &exe,
        424_242_052,
        50,
        &["--call-graph", "dwarf", "--user-callchains", "-m", "4M"],
    );
    for r in &dwarf {
        let names = user_symbols(r);
        assert!(holds_in_a_row(&names, &chain), "{names:?}: {r}");
        assert!(
            r["stack"]
                .as_array()
                .unwrap()
                .iter()
                .all(|f| f["context"] == "user"),
            "user frames only: {r}"
        );
    }
}

/// A stack copy too small for the stack: the walk stops where the copy ends, and the
/// last frame says so.
#[test]
fn a_short_stack_copy_marks_the_last_frame() {
    let Some((_dir, exe)) =
        built_here(|dir| build_chain_with(dir, "chain", &["-fno-omit-frame-pointer"]))
    else {
        return;
    };
    let (session, records, _) =
        record_program(&exe, 424_242_053, 20, &["--call-graph", "dwarf,64"]);
    assert_eq!(session["stacks"]["call_graph"], "dwarf,64", "{session}");
    for r in &records {
        let names = user_symbols(r);
        assert!(
            !names.contains(&"__libc_start_call_main".to_string()),
            "main's caller lies past 64 bytes: {names:?}"
        );
        let stack = r["stack"].as_array().unwrap();
        let last = stack.last().unwrap();
        assert_eq!(last["context"], "user", "{r}");
        assert_eq!(last["truncated"], "stack_copy", "{r}");
        assert_eq!(
            stack
                .iter()
                .filter(|f| f.get("truncated").is_some())
                .count(),
            1,
            "{r}"
        );
    }
}

/// A JIT stub: executable anonymous memory named in `/tmp/perf-PID.map`, between
/// `caller` and `callee` (x86_64 code: push rbp; mov rbp,rsp; mov rax,rdi; mov rdi,rsi;
/// call rax; pop rbp; ret).
#[cfg(target_arch = "x86_64")]
const JIT_C: &str = r#"#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
static long magic;
__attribute__((noinline)) long callee(long seq) { return syscall(SYS_setpgid, magic, seq); }
typedef long (*stub_fn)(long (*)(long), long);
__attribute__((noinline)) long caller(stub_fn stub, long seq) {
    long r = stub(callee, seq);
    __asm__ volatile("" ::: "memory");
    return r;
}
int main(int argc, char **argv) {
    magic = atol(argv[1]);
    long n = atol(argv[2]);
    static const unsigned char code[] = {0x55, 0x48, 0x89, 0xe5, 0x48, 0x89, 0xf8, 0x48,
                                         0x89, 0xf7, 0xff, 0xd0, 0x5d, 0xc3};
    unsigned char *mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return 2;
    memcpy(mem, code, sizeof code);
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
    FILE *f = fopen(path, "w");
    if (!f) return 3;
    fprintf(f, "%lx %zx jit_stub\n", (unsigned long)mem, sizeof code);
    fclose(f);
    for (long seq = 0; seq < n; seq++) caller((stub_fn)mem, seq);
    return 0;
}
"#;

/// Build [`JIT_C`] in `dir` with gcc (`-O1 -g -fno-omit-frame-pointer`).
#[cfg(target_arch = "x86_64")]
fn build_jit(dir: &Path) -> Result<PathBuf, String> {
    crate::common::chain::build_c(dir, "jit", JIT_C, "jit", &["-fno-omit-frame-pointer"])
}

/// `--call-graph dwarf` through the JIT stub, which has no unwind information: the walk
/// follows its frame pointer, so the stack goes on to `caller` and `main`; `perf record
/// --call-graph dwarf` stops at the stub (shown when perf is here).
#[cfg(target_arch = "x86_64")]
#[test]
fn dwarf_walks_through_jit_code_where_perf_stops() {
    let Some((dir, exe)) = built_here(build_jit) else {
        return;
    };
    let (_, records, pid) = record_program(
        &exe,
        424_242_054,
        20,
        &["--call-graph", "dwarf", "--user-callchains", "-m", "4M"],
    );
    let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
    for r in &records {
        let names = user_symbols(r);
        assert!(
            holds_in_a_row(&names, &["syscall", "callee", "jit_stub", "caller", "main"]),
            "the stub's callee, the stub, its caller and main in {names:?}: {r}"
        );
        let stack = r["stack"].as_array().unwrap();
        let stub = stack.iter().find(|f| f["symbol"] == "jit_stub").unwrap();
        assert_eq!(
            (&stub["perf_map"], &stub["module"]),
            (&Value::Bool(true), &Value::from("//anon"))
        );
        assert!(stack.iter().all(|f| f.get("truncated").is_none()), "{r}");
    }
    // The peer on the same program.
    if let Some(why) = crate::common::perf_skip_reason() {
        crate::common::tier::skip(Tier::Host, &why);
        return;
    }
    // perf 6.1 aborts in its own build-id code when a `uevrec -g` runs beside it (the
    // kernel marks its MMAP2 records as carrying build ids: docs/stacks.md); the host
    // tests that run either are one test group (.config/nextest.toml), so a crash here is
    // a failure, not a reason to compare nothing.
    let samples = perf_dwarf_samples(&exe, dir.path())
        .unwrap_or_else(|why| panic!("perf record/script --call-graph dwarf: {why}"));
    assert_eq!(
        samples.len(),
        3,
        "perf's samples through the stub: {samples:?}"
    );
    for sample in samples {
        assert!(sample.contains("callee"), "{sample}");
        assert!(
            !sample.contains("caller") && !sample.contains("main"),
            "perf stops at the stub (its stack ends with jit_stub): if it walks on now, \
             docs/stacks.md should say so: {sample}"
        );
    }
}

/// `perf record --call-graph dwarf` of `exe` (the JIT program) and `perf script` of it:
/// the samples whose stack holds the stub, or what perf said when it failed. The
/// program's perf map is removed after.
#[cfg(target_arch = "x86_64")]
fn perf_dwarf_samples(exe: &Path, dir: &Path) -> Result<Vec<String>, String> {
    let data = dir.join("perf.data");
    let perf = Command::new("perf")
        .args(["record", "-q", "--no-buildid", "--call-graph", "dwarf"])
        .args(["-e", "raw_syscalls:sys_enter", "--filter"])
        .arg(format!("id == {NR_SETPGID}"))
        .arg("-o")
        .arg(&data)
        .arg(exe)
        .args(["424242055", "3"])
        .output()
        .unwrap();
    let script = Command::new("perf")
        .arg("script")
        .arg("-i")
        .arg(&data)
        .args(["-F", "pid,ip,sym"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&script.stdout);
    for pid in text.lines().filter_map(|l| l.trim().parse::<u32>().ok()) {
        let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
    }
    if !perf.status.success() || !script.status.success() {
        return Err(format!(
            "{}{}",
            String::from_utf8_lossy(&perf.stderr),
            String::from_utf8_lossy(&script.stderr)
        ));
    }
    Ok(text
        .split("\n\n")
        .filter(|s| s.contains("jit_stub"))
        .map(String::from)
        .collect())
}

/// JIT code is named from the process's perf map, after the process exited.
#[cfg(target_arch = "x86_64")]
#[test]
fn jit_stub_named_from_its_perf_map() {
    let Some((dir, exe)) = built_here(build_jit) else {
        return;
    };
    let out = dir.path().join("out.jsonl");
    let rec = record_setpgid(&out, &["-g", "--user-callchains"]);
    const MAGIC: u64 = 424_242_041;
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(rec.0.id() as i32, libc::SIGSTOP) };
    let child = Command::new(&exe)
        .args([MAGIC.to_string(), "5".into()])
        .spawn()
        .unwrap();
    let pid = child.id();
    let status = crate::common::wait_exit(&mut { child }, PATIENCE).unwrap();
    // SAFETY: as above.
    unsafe { libc::kill(rec.0.id() as i32, libc::SIGCONT) };
    let map = format!("/tmp/perf-{pid}.map");
    assert!(status.success(), "the JIT program failed: {status}");
    let mine = || -> Vec<Value> {
        complete_lines(&out)
            .into_iter()
            .filter(|v| v["fields"]["args"][0] == MAGIC)
            .collect()
    };
    wait_for("the program's records", PATIENCE, || mine().len() >= 5);
    let records = mine();
    let _ = std::fs::remove_file(&map);
    for r in records {
        let names: Vec<&str> = r["stack"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f["symbol"].as_str())
            .collect();
        let at = |n: &str| names.iter().position(|x| *x == n);
        assert!(
            at("jit_stub").is_some() && at("jit_stub") < at("caller") && at("caller") < at("main"),
            "jit_stub, caller, main in order in {names:?}: {r}"
        );
        let stub = r["stack"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["symbol"] == "jit_stub")
            .unwrap();
        assert_eq!(stub["perf_map"], true, "{stub}");
        assert_eq!(stub["module"], "//anon", "{stub}");
    }
}

/// Build [`CHAIN_C`](crate::common::chain::CHAIN_C) as another program: `outer` and `middle` renamed `alpha` and `beta`.
fn build_other(dir: &Path) -> PathBuf {
    let flags = ["-fno-omit-frame-pointer", "-Douter=alpha", "-Dmiddle=beta"];
    build_chain_with(dir, "other", &flags).unwrap()
}

/// A process id reused by another program while uevrec was stopped: every record of the
/// first program names its functions, every record of the second its own, none the
/// other's (both symbolized after both exited).
#[test]
fn a_reused_process_id_never_gets_the_old_programs_names() {
    let Some((dir, first)) = built_here(build_chain) else {
        return;
    };
    let second = build_other(dir.path());
    let out = dir.path().join("out.jsonl");
    let rec = record_setpgid(&out, &["-g", "--user-callchains"]);
    let run = |exe: &Path, magic: u64| -> u32 {
        let mut child = Command::new(exe)
            .args([magic.to_string(), "3".into()])
            .spawn()
            .unwrap();
        let pid = child.id();
        assert!(child.wait().unwrap().success());
        pid
    };
    // Other processes on this machine may take the id first: try again with new calls.
    let mut pair = None;
    for attempt in 0..30u64 {
        let (magic_a, magic_b) = (424_242_100 + 2 * attempt, 424_242_101 + 2 * attempt);
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(rec.0.id() as i32, libc::SIGSTOP) };
        let pid_a = run(&first, magic_a);
        std::fs::write("/proc/sys/kernel/ns_last_pid", format!("{}", pid_a - 1))
            .expect("writing /proc/sys/kernel/ns_last_pid (root)");
        let pid_b = run(&second, magic_b);
        // SAFETY: as above.
        unsafe { libc::kill(rec.0.id() as i32, libc::SIGCONT) };
        if pid_a == pid_b {
            pair = Some((magic_a, magic_b));
            break;
        }
    }
    let (magic_a, magic_b) =
        pair.expect("30 tries to give the second program the first's process id");
    let of = |magic: u64| -> Vec<Value> {
        complete_lines(&out)
            .into_iter()
            .filter(|v| v["fields"]["args"][0] == magic)
            .collect()
    };
    wait_for("both programs' records", PATIENCE, || {
        of(magic_a).len() >= 3 && of(magic_b).len() >= 3
    });
    let names = |r: &Value| -> Vec<String> {
        r["stack"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f["symbol"].as_str().map(String::from))
            .collect()
    };
    for r in of(magic_a) {
        let n = names(&r);
        assert!(
            n.contains(&"middle".into()) && n.contains(&"outer".into()),
            "{n:?}: {r}"
        );
        assert!(
            !n.contains(&"alpha".into()) && !n.contains(&"beta".into()),
            "{n:?}: {r}"
        );
    }
    for r in of(magic_b) {
        let n = names(&r);
        assert!(
            n.contains(&"beta".into()) && n.contains(&"alpha".into()),
            "{n:?}: {r}"
        );
        assert!(
            !n.contains(&"middle".into()) && !n.contains(&"outer".into()),
            "{n:?}: {r}"
        );
        let own = r["stack"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["module"] == second.to_str().unwrap());
        assert!(own, "the second program's module: {r}");
    }
}
