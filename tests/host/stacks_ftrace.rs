//! Call stacks on the ftrace backend (`record --backend ftrace -g`), end to end on the
//! host kernel: a C program built here with frame pointers (`main → outer → middle →
//! inner → syscall(SYS_setpgid, MAGIC, SEQ)`, each function out of line) is recorded on
//! `raw_syscalls:sys_enter` (`id == NR_SETPGID`, its records told apart by MAGIC); every
//! record of it carries the kernel's `kernel_stack` and `user_stack` records as its
//! `stack`, written as the perf backend writes the same chain (middle, outer, main in that
//! order; `do_syscall_64` when `/proc/kallsyms` shows addresses). The program waits on its
//! standard input after its calls: the ftrace backend reads a process's mappings from
//! `/proc/PID/maps` at its first stack, so it must still run then (docs/stacks.md).
//! `--raw-format trace-dat` keeps the stack records in the pages: `trace-cmd report`
//! prints them, and `uevrec decode` ties them to their records. A library `dlopen`ed after
//! the process's first stack makes uevrec read its mappings again.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use super::stacks::kallsyms_readable;
use crate::common::chain::build_c;
use crate::common::{PATIENCE, bin, complete_lines, wait_exit, wait_for};

/// setpgid's number (x86_64, aarch64): `setpgid(MAGIC, SEQ)` fails with ESRCH (not
/// getppid: other tests flood it).
#[cfg(target_arch = "x86_64")]
const NR_SETPGID: u32 = 109;
#[cfg(target_arch = "aarch64")]
const NR_SETPGID: u32 = 154;

/// The traced program: `chain MAGIC N` makes N calls through the chain, then waits for
/// its standard input to close.
const PROGRAM: &str = r#"#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
__attribute__((noinline)) long inner(long magic, long seq) {
    return syscall(SYS_setpgid, magic, seq);
}
__attribute__((noinline)) long middle(long magic, long seq) {
    long r = inner(magic, seq);
    __asm__ volatile("" ::: "memory");
    return r;
}
__attribute__((noinline)) long outer(long magic, long seq) {
    long r = middle(magic, seq);
    __asm__ volatile("" ::: "memory");
    return r;
}
int main(int argc, char **argv) {
    long magic = atol(argv[1]), n = atol(argv[2]);
    for (long seq = 0; seq < n; seq++) {
        outer(magic, seq);
    }
    char c;
    return read(0, &c, 1) == 1 ? 0 : 1;
}
"#;

/// Build [`PROGRAM`] in `dir` (`-O1 -g -fno-omit-frame-pointer`).
pub(crate) fn build(dir: &Path) -> PathBuf {
    let src = dir.join("chain.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join("chain");
    let status = Command::new("gcc")
        .args(["-O1", "-g", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("gcc builds the traced program");
    assert!(status.success(), "gcc failed on the test program");
    exe
}

/// `uevrec record ARGS` of every setpgid call on `raw_syscalls:sys_enter`, its lines (a
/// --raw recording: its notices, from standard error) into `lines`, once attached.
fn start(lines: &Path, args: &[&str]) -> std::process::Child {
    let mut cmd = Command::new(bin());
    cmd.arg("record")
        .args(args)
        .args(["-e", "raw_syscalls:sys_enter", "--filter"])
        .arg(format!("id == {NR_SETPGID}"));
    if args.contains(&"--raw") {
        cmd.stderr(std::fs::File::create(lines).unwrap());
    } else {
        cmd.args(["--quiet", "-o"])
            .arg(lines)
            .stderr(Stdio::piped());
    }
    let rec = cmd.spawn().unwrap();
    crate::common::wait_attached_notices(lines, 1);
    rec
}

/// Record `N` calls of `exe` with `uevrec record ARGS` into `out` (a JSON-lines file, or
/// the session's standard output when ARGS write a --raw file): returns uevrec's exit
/// status and standard error, and the program's process id.
fn record(exe: &Path, magic: u64, n: u64, out: &Path, args: &[&str]) -> (bool, String, u32) {
    let lines = out.with_extension("jsonl");
    let raw = args.contains(&"--raw");
    let mut rec = start(&lines, args);
    let mut child = Command::new(exe)
        .args([magic.to_string(), n.to_string()])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // The records out (JSON lines), or the ring read (a --raw file: give it time).
    if raw {
        std::thread::sleep(std::time::Duration::from_millis(1500));
    } else {
        wait_for("every record of the program", PATIENCE, || {
            mine(&complete_lines(&lines), magic).len() as u64 >= n
        });
    }
    child.stdin.take().unwrap().write_all(b"x").unwrap();
    assert!(child.wait().unwrap().success(), "the traced program failed");
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    let status = wait_exit(&mut rec, PATIENCE).expect("uevrec stops");
    let mut err = String::new();
    match rec.stderr.take() {
        Some(mut e) => drop(std::io::Read::read_to_string(&mut e, &mut err)),
        None => err = std::fs::read_to_string(&lines).unwrap_or_default(),
    }
    (status.success(), err, pid)
}

/// `r` has kernel frames, `do_syscall_64` among them when `kallsyms` is readable.
fn kernel_frames_named(r: &Value, kallsyms: bool) {
    let kernel = frames(r, "kernel");
    assert!(!kernel.is_empty(), "kernel frames: {r}");
    if kallsyms {
        assert!(
            kernel.iter().any(|f| f["symbol"] == "do_syscall_64"),
            "do_syscall_64 among the kernel frames: {r}"
        );
    }
}

/// The records of the program (`args[0] == magic`).
fn mine(lines: &[Value], magic: u64) -> Vec<Value> {
    lines
        .iter()
        .filter(|v| v["fields"]["args"][0] == magic)
        .cloned()
        .collect()
}

/// The frames of `context` of a record, innermost first.
fn frames<'v>(r: &'v Value, context: &str) -> Vec<&'v Value> {
    r["stack"]
        .as_array()
        .unwrap_or_else(|| panic!("no stack on {r}"))
        .iter()
        .filter(|f| f["context"] == context)
        .collect()
}

/// The symbols of a record's user frames, innermost first.
fn user_symbols(r: &Value) -> Vec<String> {
    frames(r, "user")
        .iter()
        .map(|f| f["symbol"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// Whether `names` holds `chain` one right after the other.
fn in_a_row(names: &[String], chain: &[&str]) -> bool {
    names
        .windows(chain.len())
        .any(|w| w.iter().zip(chain).all(|(a, b)| a == b))
}

/// The keys of a frame, sorted.
fn keys(f: &Value) -> Vec<String> {
    let mut k: Vec<String> = f.as_object().unwrap().keys().cloned().collect();
    k.sort();
    k
}

/// Every record of the program carries its stack: the chain by frame pointers (user
/// frames: the kernel's 8 at most), the kernel's frames, and the same frames (keys and
/// user symbols) as the perf backend writes for the same program.
#[test]
fn ftrace_stacks_name_the_chain_as_perf_does() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path());
    let (magic, n) = (0x38_1000u64, 200);
    let out = dir.path().join("ftrace");
    let (ok, err, _) = record(&exe, magic, n, &out, &["--backend", "ftrace", "-g"]);
    assert!(ok, "uevrec failed: {err}");
    let lines = complete_lines(&out.with_extension("jsonl"));
    let session = lines.iter().find(|v| v["uevrec"] == "session").unwrap();
    assert_eq!(session["backend"], "ftrace");
    assert_eq!(session["stacks"]["call_graph"], "fp");
    let records = mine(&lines, magic);
    let mut seqs: Vec<u64> = (records.iter())
        .map(|v| v["fields"]["args"][1].as_u64().unwrap())
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..n).collect::<Vec<_>>(), "each SEQ exactly once");
    let kallsyms = kallsyms_readable();
    for r in &records {
        let names = user_symbols(r);
        assert!(
            in_a_row(&names, &["middle", "outer", "main"]),
            "middle, outer, main in a row: {names:?} in {r}"
        );
        assert!(
            names.len() <= 8,
            "the kernel walks 8 user frames at most: {names:?}"
        );
        kernel_frames_named(r, kallsyms);
        let chain = frames(r, "user");
        let main = chain.iter().find(|f| f["symbol"] == "main").unwrap();
        assert_eq!(main["module"], exe.to_str().unwrap());
        assert!(main["line"].as_u64().is_some(), "main's line: {main}");
    }
    assert!(
        !lines.iter().any(|v| v["what"] == "stacks_untied"
            && v["message"]
                .as_str()
                .is_some_and(|m| m.contains("another process"))),
        "no user stack of another process"
    );

    // The perf backend, the same program: the same frame keys and user symbols.
    let out = dir.path().join("perf");
    let (ok, err, _) = record(&exe, magic + 1, 20, &out, &["-g"]);
    assert!(ok, "uevrec (perf) failed: {err}");
    let perf = mine(&complete_lines(&out.with_extension("jsonl")), magic + 1);
    let (p, f) = (&perf[0], &records[0]);
    assert_eq!(user_symbols(p), user_symbols(f), "perf: {p}\nftrace: {f}");
    for context in ["user", "kernel"] {
        let pk: Vec<_> = frames(p, context).iter().map(|f| keys(f)).collect();
        let fk: Vec<_> = frames(f, context).iter().map(|f| keys(f)).collect();
        assert_eq!(
            pk.last(),
            fk.last(),
            "{context} frame keys: perf {p}\nftrace {f}"
        );
    }
}

/// `--max-stack N` cuts each stack at N frames; `--user-callchains` leaves the kernel's
/// out; `--call-graph dwarf` is refused with the fix.
#[test]
fn ftrace_stacks_max_stack_user_only_and_dwarf_refused() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path());
    let magic = 0x38_2000u64;
    let out = dir.path().join("cut");
    let args = ["--backend", "ftrace", "-g", "--max-stack", "3"];
    let (ok, err, _) = record(&exe, magic, 20, &out, &args);
    assert!(ok, "{err}");
    let records = mine(&complete_lines(&out.with_extension("jsonl")), magic);
    assert_eq!(records.len(), 20);
    for r in &records {
        assert_eq!(r["stack"].as_array().unwrap().len(), 3, "{r}");
    }
    let out = dir.path().join("user");
    let args = ["--backend", "ftrace", "-g", "--user-callchains"];
    let (ok, err, _) = record(&exe, magic + 1, 20, &out, &args);
    assert!(ok, "{err}");
    let records = mine(&complete_lines(&out.with_extension("jsonl")), magic + 1);
    assert_eq!(records.len(), 20);
    for r in &records {
        assert!(frames(r, "kernel").is_empty(), "{r}");
        assert!(
            in_a_row(&user_symbols(r), &["middle", "outer", "main"]),
            "{r}"
        );
    }
    let refused = Command::new(bin())
        .args(["record", "--backend", "ftrace", "--call-graph", "dwarf"])
        .args(["-e", "raw_syscalls:sys_enter", "--duration", "1", "-o"])
        .arg(dir.path().join("dwarf.jsonl"))
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("--backend perf"), "{err}");
}

/// `--raw FILE --raw-format trace-dat -g`: the stack records stay in the pages,
/// `trace-cmd report` prints them after the program's records, and `uevrec decode` ties
/// them to their records.
#[test]
fn ftrace_stacks_in_trace_dat() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path());
    let magic = 0x38_3000u64;
    let dat = dir.path().join("rec.dat");
    let args = [
        "--backend",
        "ftrace",
        "-g",
        "--raw",
        dat.to_str().unwrap(),
        "--raw-format",
        "trace-dat",
    ];
    let (ok, err, _) = record(&exe, magic, 20, &dir.path().join("dat"), &args);
    assert!(ok, "{err}");
    let report = require!(
        crate::common::tier::Tier::Host,
        Command::new("trace-cmd")
            .arg("report")
            .arg(&dat)
            .output()
            .map_err(|e| format!("trace-cmd is needed (apt-get install trace-cmd): {e}"))
    );
    let text = String::from_utf8_lossy(&report.stdout);
    let hex = format!("{magic:x}");
    let mut after = text.lines().skip_while(|l| !l.contains(&hex));
    let block: Vec<&str> = after.by_ref().take(40).collect();
    assert!(
        block.iter().any(|l| l.contains("kernel_stack"))
            && block.iter().any(|l| l.contains("user_stack")),
        "trace-cmd report shows the stack records after the program's record:\n{}",
        block.join("\n")
    );
    // The file's kallsyms section names the kernel frames for trace-cmd too; where
    // kptr_restrict hides the addresses, the file holds none and a notice says so.
    let kallsyms = kallsyms_readable();
    let bytes = std::fs::read(&dat).unwrap();
    let file = uevrec_parsers::trace_dat::TraceDat::parse(&bytes).unwrap();
    assert_eq!(file.kallsyms().is_empty(), !kallsyms, "kallsyms with -g");
    if kallsyms {
        assert!(
            block.iter().any(|l| l.contains("do_syscall_64")),
            "trace-cmd report names do_syscall_64 from the file's kallsyms:\n{}",
            block.join("\n")
        );
    } else {
        assert!(err.contains("kallsyms_hidden"), "the notice: {err}");
    }

    let decoded = Command::new(bin())
        .arg("decode")
        .arg(&dat)
        .output()
        .unwrap();
    assert!(
        decoded.status.success(),
        "{}",
        String::from_utf8_lossy(&decoded.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&decoded.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let records = mine(&lines, magic);
    assert_eq!(records.len(), 20, "every record decoded");
    for r in &records {
        let user = frames(r, "user");
        assert!(!user.is_empty(), "user frames: {r}");
        // No mappings in a trace.dat: addresses, never a wrong name.
        assert!(user.iter().all(|f| f.get("symbol").is_none()), "{r}");
        kernel_frames_named(r, kallsyms);
    }
    let note = (lines.iter().find(|v| v["what"] == "stacks"))
        .and_then(|v| v["message"].as_str())
        .unwrap_or_default();
    let whose = if kallsyms {
        "the file's kallsyms"
    } else {
        "this machine's"
    };
    assert!(note.contains(whose), "the stacks notice: {note}");
    assert!(
        !lines.iter().any(|v| v["uevrec"].is_null()
            && (v["event"] == "kernel_stack" || v["event"] == "user_stack")),
        "the stack records are not lines of their own"
    );
}

/// A program that exec'd and exited before uevrec read its first stack: its mappings
/// cannot be read any more, so its user frames say `no_mapping`, never the names of the
/// program it was forked from (this test binary); its kernel frames are still named.
#[test]
fn ftrace_stacks_of_a_program_gone_before_its_first_stack_name_nothing_wrong() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path());
    let (magic, n) = (0x38_4000u64, 20);
    let out = dir.path().join("gone.jsonl");
    let mut rec = start(&out, &["--backend", "ftrace", "-g"]);
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(rec.id() as i32, libc::SIGSTOP) };
    let mut child = Command::new(&exe)
        .args([magic.to_string(), n.to_string()])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"x").unwrap();
    assert!(child.wait().unwrap().success());
    // SAFETY: as above.
    unsafe { libc::kill(rec.id() as i32, libc::SIGCONT) };
    wait_for("every record of the program", PATIENCE, || {
        mine(&complete_lines(&out), magic).len() as u64 >= n
    });
    // SAFETY: as above.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    assert!(wait_exit(&mut rec, PATIENCE).is_ok_and(|s| s.success()));
    let records = mine(&complete_lines(&out), magic);
    assert_eq!(records.len() as u64, n);
    for r in &records {
        let user = frames(r, "user");
        assert!(!user.is_empty(), "{r}");
        for f in user {
            assert!(
                f.get("symbol").is_none() && f["unsymbolized"] == "no_mapping",
                "a frame named from another program's mappings: {f} in {r}"
            );
        }
        assert!(!frames(r, "kernel").is_empty(), "{r}");
    }
}

/// [`PROGRAM`]'s chain, without its `main`.
fn chain_only() -> &'static str {
    &PROGRAM[..PROGRAM.find("int main").unwrap()]
}

/// The library [`dlopen_program`] loads: [`PROGRAM`]'s chain as `lib_outer → lib_middle
/// → lib_inner → syscall`.
fn library() -> String {
    chain_only()
        .replace("inner(", "lib_inner(")
        .replace("middle(", "lib_middle(")
        .replace("outer(", "lib_outer(")
}

/// `dl MAGIC N LIBRARY`: N calls through [`PROGRAM`]'s chain (SEQ 0 to N-1), then, once a
/// byte comes on its standard input, `dlopen(LIBRARY)` and N calls through its chain (SEQ
/// N to 2N-1), then waits for another byte.
fn dlopen_program() -> String {
    format!(
        "{}{}",
        chain_only(),
        r#"#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    long magic = atol(argv[1]), n = atol(argv[2]);
    for (long seq = 0; seq < n; seq++) {
        outer(magic, seq);
    }
    char c;
    if (read(0, &c, 1) != 1) return 1;
    void *lib = dlopen(argv[3], RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "%s\n", dlerror());
        return 2;
    }
    long (*lib_outer)(long, long) = (long (*)(long, long))dlsym(lib, "lib_outer");
    if (!lib_outer) return 3;
    for (long seq = n; seq < 2 * n; seq++) {
        lib_outer(magic, seq);
    }
    return read(0, &c, 1) == 1 ? 0 : 1;
}
"#
    )
}

/// Record `program` (its records told apart by `magic`) with `--backend ftrace -g` into
/// `out`: it makes its first records, and its next once a byte comes on its standard
/// input, sent when `counts[0]` of its records are out; another byte, sent when
/// `counts[1]` are, ends it; then uevrec stops. The lines of `out`.
fn record_in_two_steps(
    mut program: Command,
    magic: u64,
    counts: [u64; 2],
    out: &Path,
) -> Vec<Value> {
    let mut rec = crate::common::KillOnDrop(start(out, &["--backend", "ftrace", "-g"]));
    let mut child = crate::common::KillOnDrop(program.stdin(Stdio::piped()).spawn().unwrap());
    let mut stdin = child.stdin.take().unwrap();
    for count in counts {
        wait_for(&format!("{count} records of the program"), PATIENCE, || {
            mine(&complete_lines(out), magic).len() as u64 >= count
        });
        stdin.write_all(b"x").unwrap();
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "the traced program failed: {status}");
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    assert!(wait_exit(&mut rec, PATIENCE).is_ok_and(|s| s.success()));
    complete_lines(out)
}

/// A library loaded after the process's first stack: its mappings were read then, so a
/// user frame in the library lies in no mapping known, which makes uevrec read the
/// process's `/proc/PID/maps` again: every record after the `dlopen` names the library's
/// chain (`lib_middle → lib_outer → main`, the library as `module`), and a `stacks_maps`
/// notice counts the reads again.
#[test]
fn ftrace_stacks_name_a_library_loaded_after_the_first_stack() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fp = "-fno-omit-frame-pointer";
    let lib = build_c(
        dir.path(),
        "libchain",
        &library(),
        "libchain.so",
        &[fp, "-shared", "-fPIC"],
    )
    .unwrap();
    let exe = build_c(dir.path(), "dl", &dlopen_program(), "dl", &[fp]).unwrap();
    let (magic, n) = (0x38_5000u64, 50);
    let mut program = Command::new(&exe);
    program.args([magic.to_string(), n.to_string()]).arg(&lib);
    // The first records out: the process's mappings were read (before the dlopen).
    let lines = record_in_two_steps(program, magic, [n, 2 * n], &dir.path().join("dl.jsonl"));
    let records = mine(&lines, magic);
    assert_eq!(records.len() as u64, 2 * n);
    for r in &records {
        let seq = r["fields"]["args"][1].as_u64().unwrap();
        let names = user_symbols(r);
        if seq < n {
            assert!(in_a_row(&names, &["middle", "outer", "main"]), "{r}");
            continue;
        }
        assert!(
            in_a_row(&names, &["lib_middle", "lib_outer", "main"]),
            "the library's chain named after the dlopen: {names:?} in {r}"
        );
        let user = frames(r, "user");
        let lib_frame = user.iter().find(|f| f["symbol"] == "lib_outer").unwrap();
        assert_eq!(lib_frame["module"], lib.to_str().unwrap());
        assert!(lib_frame["line"].as_u64().is_some(), "{lib_frame}");
    }
    let notice = (lines.iter())
        .find(|v| v["what"] == "stacks_maps")
        .and_then(|v| v["message"].as_str())
        .unwrap_or_else(|| panic!("a stacks_maps notice"));
    assert!(notice.contains("read again"), "{notice}");
    assert!(!notice.contains(" 0 found new mappings"), "{notice}");
}

/// `reload MAGIC N M FIRST SECOND`: pinned to one CPU, `dlopen(FIRST)` and N calls
/// through its chain (SEQ 0 to N-1); once a byte comes on its standard input,
/// `dlclose(FIRST)`, `dlopen(SECOND)`, which the kernel maps at the addresses FIRST had
/// (exit 4 if not), and M calls through its chain 10 ms apart (SEQ N to N+M-1); then
/// waits for another byte.
fn reload_program() -> String {
    r#"#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
typedef long (*chain_fn)(long, long);
static void *base(void *lib, const char *name, chain_fn *f) {
    Dl_info info;
    *f = (chain_fn)dlsym(lib, name);
    return *f && dladdr((void *)*f, &info) ? info.dli_fbase : NULL;
}
int main(int argc, char **argv) {
    long magic = atol(argv[1]), n = atol(argv[2]), m = atol(argv[3]);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) return 5;
    chain_fn f;
    void *first = dlopen(argv[4], RTLD_NOW);
    void *at = first ? base(first, "lib_outer", &f) : NULL;
    if (!at) return 2;
    for (long seq = 0; seq < n; seq++) f(magic, seq);
    char c;
    if (read(0, &c, 1) != 1) return 1;
    dlclose(first);
    void *second = dlopen(argv[5], RTLD_NOW);
    void *again = second ? base(second, "alt_outer", &f) : NULL;
    if (!again) return 3;
    if (again != at) {
        fprintf(stderr, "the second library went to %p, not to %p\n", again, at);
        return 4;
    }
    for (long seq = n; seq < n + m; seq++) {
        f(magic, seq);
        usleep(10000);
    }
    return read(0, &c, 1) == 1 ? 0 : 1;
}
"#
    .to_string()
}

/// A library unmapped (`dlclose`) and another mapped over its addresses (`dlopen`): every
/// frame of the second lies in a mapping the last read knew, so only the reads a second
/// apart see it. Once a record names the second library, every later one does (one CPU:
/// the records come in their order), and the last second's records all do.
#[test]
fn ftrace_stacks_name_a_library_mapped_over_an_unmapped_ones_addresses() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fp = "-fno-omit-frame-pointer";
    let lib_flags = [fp, "-shared", "-fPIC"];
    let first = build_c(dir.path(), "first", &library(), "libfirst.so", &lib_flags).unwrap();
    let alt = library().replace("lib_", "alt_");
    let second = build_c(dir.path(), "second", &alt, "libsecond.so", &lib_flags).unwrap();
    let exe = build_c(dir.path(), "reload", &reload_program(), "reload", &[fp]).unwrap();
    // 250 calls 10 ms apart: well over the second after which the process is read again.
    let (magic, n, m) = (0x38_6000u64, 20, 250);
    let mut program = Command::new(&exe);
    program
        .args([magic, n, m].map(|v| v.to_string()))
        .args([&first, &second]);
    let lines = record_in_two_steps(program, magic, [n, n + m], &dir.path().join("re.jsonl"));
    let mut records = mine(&lines, magic);
    records.sort_by_key(|r| r["fields"]["args"][1].as_u64());
    assert_eq!(records.len() as u64, n + m);
    let named_second = |r: &Value| {
        let user = frames(r, "user");
        let lib = user.iter().find(|f| f["symbol"] == "alt_outer");
        lib.is_some_and(|f| f["module"] == second.to_str().unwrap())
    };
    for r in &records[..n as usize] {
        let names = user_symbols(r);
        assert!(
            in_a_row(&names, &["lib_middle", "lib_outer", "main"]),
            "{r}"
        );
    }
    let later = &records[n as usize..];
    let since = later.iter().position(named_second).unwrap_or_else(|| {
        panic!(
            "no record names the second library: {}",
            later[later.len() - 1]
        )
    });
    for r in &later[since..] {
        let names = user_symbols(r);
        assert!(
            named_second(r) && in_a_row(&names, &["alt_middle", "alt_outer", "main"]),
            "once named, every later record names the second library: {names:?} in {r}"
        );
    }
    // The calls are 10 ms apart (or more): the last second's are after any check's wait.
    assert!(
        since + 100 <= later.len(),
        "named from the {since}th call after the reload"
    );
    for r in &later[..since] {
        let names = user_symbols(r);
        assert!(
            in_a_row(&names, &["lib_middle", "lib_outer", "main"]),
            "before the read, the known names: {names:?} in {r}"
        );
    }
    let notice = (lines.iter())
        .find(|v| v["what"] == "stacks_maps")
        .and_then(|v| v["message"].as_str())
        .unwrap_or_else(|| panic!("a stacks_maps notice"));
    assert!(notice.contains("a second apart"), "{notice}");
    assert!(!notice.contains(" 0 found a mapping changed"), "{notice}");
}
