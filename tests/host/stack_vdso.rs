//! Frames in the vDSO (`-g`, `--call-graph dwarf`, `--backend ftrace -g`), end to end on
//! the host kernel. Calls into the vDSO make no system call, so no tracepoint fires inside
//! it, except where the vDSO falls back to the system call itself: `clock_gettime` of a
//! clock id it does not serve (past `MAX_CLOCKS`) runs the `syscall` instruction from
//! inside the vDSO (lib/vdso/gettimeofday.c, `clock_gettime_fallback`), so that record's
//! user stack starts there. A C program built here (`main → outer → middle → inner →
//! clock_gettime(MAGIC + SEQ)`, frame pointers) is recorded on `raw_syscalls:sys_enter`
//! (`id == NR_CLOCK_GETTIME`, its records told apart by the clock id): the innermost user
//! frame is named from uevrec's own copy of the vDSO image (`clock_gettime` in `[vdso]`,
//! not `no_file`), and the callers follow it; with `dwarf` `inner` too, the walk
//! going through the vDSO frame (its own unwind information: the unit test
//! `unwind::tests::the_vdso_is_unwound_from_its_own_unwind_information` shows the rule
//! used where the frame pointer would give another frame).

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::chain::build_c;
use crate::common::stack_frames::{holds_in_a_row, user_symbols};
use crate::common::{KillOnDrop, PATIENCE, bin, complete_lines, wait_exit, wait_for};

/// clock_gettime's number.
#[cfg(target_arch = "x86_64")]
const NR_CLOCK_GETTIME: u32 = 228;
#[cfg(target_arch = "aarch64")]
const NR_CLOCK_GETTIME: u32 = 113;

/// `vd MAGIC N`: N calls of `clock_gettime(MAGIC + SEQ)` through the chain, then waits
/// for a byte on its standard input (the ftrace backend reads a process's mappings at its
/// first stack: it must still run then).
const PROGRAM: &str = r#"#define _GNU_SOURCE
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
__attribute__((noinline)) long inner(long clock) {
    struct timespec ts;
    return clock_gettime((clockid_t)clock, &ts);
}
__attribute__((noinline)) long middle(long clock) {
    long r = inner(clock);
    __asm__ volatile("" ::: "memory");
    return r;
}
__attribute__((noinline)) long outer(long clock) {
    long r = middle(clock);
    __asm__ volatile("" ::: "memory");
    return r;
}
int main(int argc, char **argv) {
    long magic = atol(argv[1]), n = atol(argv[2]);
    for (long seq = 0; seq < n; seq++) {
        outer(magic + seq);
    }
    char c;
    return read(0, &c, 1) == 1 ? 0 : 1;
}
"#;

/// The records of `vd MAGIC N` recorded with `uevrec record ARGS`, each SEQ once.
fn record(dir: &Path, magic: u64, n: u64, args: &[&str]) -> Vec<Value> {
    let exe = build_c(dir, "vd", PROGRAM, "vd", &["-fno-omit-frame-pointer"]).unwrap();
    let out = dir.join(format!("{magic:x}.jsonl"));
    let mut rec = KillOnDrop(
        Command::new(bin())
            .args(["record", "--quiet"])
            .args(args)
            .args(["-e", "raw_syscalls:sys_enter", "--filter"])
            .arg(format!("id == {NR_CLOCK_GETTIME}"))
            .arg("-o")
            .arg(&out)
            .spawn()
            .unwrap(),
    );
    crate::common::wait_attached_notices(&out, 1);
    let mine = |lines: &[Value]| -> Vec<Value> {
        let clocks = magic..magic + n;
        (lines.iter())
            .filter(|v| {
                v["fields"]["args"][0]
                    .as_u64()
                    .is_some_and(|c| clocks.contains(&c))
            })
            .cloned()
            .collect()
    };
    let mut child = KillOnDrop(
        Command::new(&exe)
            .args([magic.to_string(), n.to_string()])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_for("every record of the program", PATIENCE, || {
        mine(&complete_lines(&out)).len() as u64 >= n
    });
    child.stdin.take().unwrap().write_all(b"x").unwrap();
    assert!(child.wait().unwrap().success(), "the traced program failed");
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    assert!(wait_exit(&mut rec, PATIENCE).is_ok_and(|s| s.success()));
    let records = mine(&complete_lines(&out));
    let mut clocks: Vec<u64> = (records.iter())
        .map(|v| v["fields"]["args"][0].as_u64().unwrap())
        .collect();
    clocks.sort_unstable();
    assert_eq!(
        clocks,
        (magic..magic + n).collect::<Vec<_>>(),
        "each SEQ once"
    );
    records
}

/// Every record's innermost user frame is the vDSO's `clock_gettime`, named, and
/// `callers` follow it in a row.
fn vdso_frame_named(records: &[Value], callers: &[&str]) {
    for r in records {
        let user: Vec<&Value> = (r["stack"].as_array().unwrap().iter())
            .filter(|f| f["context"] == "user")
            .collect();
        let vdso = user.first().unwrap_or_else(|| panic!("user frames: {r}"));
        assert_eq!(vdso["module"], "[vdso]", "{r}");
        assert!(
            [
                "clock_gettime",
                "__vdso_clock_gettime",
                "__kernel_clock_gettime"
            ]
            .contains(&vdso["symbol"].as_str().unwrap_or("")),
            "the vDSO frame named from uevrec's own image: {vdso}"
        );
        assert!(vdso["offset"].as_u64().is_some(), "{vdso}");
        let names = user_symbols(r);
        assert!(
            names.get(1).is_some_and(|s| s.contains("clock_gettime")),
            "glibc's clock_gettime after the vDSO: {names:?}"
        );
        assert!(holds_in_a_row(&names, callers), "{callers:?} in {names:?}");
        assert!(
            user.iter().all(|f| f.get("truncated").is_none()),
            "a whole walk: {r}"
        );
    }
}

#[test]
fn vdso_frames_named_with_frame_pointers() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let records = record(dir.path(), 0x38_6000, 20, &["-g"]);
    vdso_frame_named(&records, &["middle", "outer", "main"]);
}

/// With `dwarf` the walk goes on from the vDSO frame through glibc (no frame pointer) to
/// `inner`, which a frame-pointer walk misses (x86_64: `dwarf` is refused elsewhere).
#[cfg(target_arch = "x86_64")]
#[test]
fn vdso_frames_named_and_walked_with_dwarf() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let records = record(dir.path(), 0x38_7000, 20, &["--call-graph", "dwarf"]);
    vdso_frame_named(&records, &["inner", "middle", "outer", "main"]);
}

#[test]
fn vdso_frames_named_on_the_ftrace_backend() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let records = record(dir.path(), 0x38_8000, 20, &["--backend", "ftrace", "-g"]);
    vdso_frame_named(&records, &["middle", "outer", "main"]);
}
