//! The traced C chain of the stack tests (issue 38): `main → outer → middle → inner →
//! syscall(SYS_setpgid, MAGIC, SEQ)`, each function kept out of line, built here with gcc;
//! tests/host/stacks.rs says what it proves.

use std::path::{Path, PathBuf};
use std::process::Command;

/// setpgid's number (x86_64, aarch64): `setpgid(MAGIC, SEQ)` fails with ESRCH.
#[cfg(target_arch = "x86_64")]
pub const NR_SETPGID: u32 = 109;
#[cfg(target_arch = "aarch64")]
pub const NR_SETPGID: u32 = 154;

/// The traced program; the `/* CALL n */` comments mark the lines of its calls.
pub const CHAIN_C: &str = r#"#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
__attribute__((noinline)) long inner(long magic, long seq) {
    return syscall(SYS_setpgid, magic, seq);
}
__attribute__((noinline)) long middle(long magic, long seq) {
    long r = inner(magic, seq); /* CALL middle */
    __asm__ volatile("" ::: "memory");
    return r;
}
__attribute__((noinline)) long outer(long magic, long seq) {
    long r = middle(magic, seq); /* CALL outer */
    __asm__ volatile("" ::: "memory");
    return r;
}
int main(int argc, char **argv) {
    long magic = atol(argv[1]), n = atol(argv[2]);
    for (long seq = 0; seq < n; seq++) {
        outer(magic, seq); /* CALL main */
    }
    return 0;
}
"#;

/// The line of `/* CALL function */` in [`CHAIN_C`].
pub fn call_line(function: &str) -> u64 {
    let mark = format!("/* CALL {function} */");
    CHAIN_C.lines().position(|l| l.contains(&mark)).unwrap() as u64 + 1
}

/// Build [`CHAIN_C`] in `dir` with gcc (`-O1 -g -fno-omit-frame-pointer`).
pub fn build_chain(dir: &Path) -> Result<PathBuf, String> {
    build_chain_with(dir, "chain", &["-fno-omit-frame-pointer"])
}

/// Build [`CHAIN_C`] in `dir` as `name` with gcc and `flags` (`-O1 -g` and these).
pub fn build_chain_with(dir: &Path, name: &str, flags: &[&str]) -> Result<PathBuf, String> {
    build_c(dir, "chain", CHAIN_C, name, flags)
}

/// Write `source` to `dir/STEM.c` and build it as `dir/name` with gcc and `flags` (`-O1
/// -g` and these); an error when gcc is not here, a panic when it fails on the source.
pub fn build_c(
    dir: &Path,
    stem: &str,
    source: &str,
    name: &str,
    flags: &[&str],
) -> Result<PathBuf, String> {
    let src = dir.join(format!("{stem}.c"));
    std::fs::write(&src, source).unwrap();
    let exe = dir.join(name);
    let status = Command::new("gcc")
        .args(["-O1", "-g"])
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .map_err(|e| format!("gcc is needed to build the traced program: {e}"))?;
    assert!(status.success(), "gcc failed on {}", src.display());
    Ok(exe)
}
