//! Build ids in `record -g --raw` perf.data files, end to end on the host kernel:
//!
//! - `perf buildid-list -i FILE` lists the traced program's build id at its path and the
//!   running kernel's as `[kernel.kallsyms]` (the file's `HEADER_BUILD_ID` feature);
//! - a program that mapped its files before the recording started (its mappings read
//!   from `/proc`, which gives no build ids) gets its file's build id on its mappings:
//!   `uevrec decode --no-symbolize` shows it on its frames, perf lists it;
//! - `uevrec decode` names the frames of a program replaced at its path by another build
//!   from the recorded build found by its id (perf's build-id cache, a `--debug-dir`);
//!   found nowhere, `build_id_mismatch` and a notice of where it looked;
//! - a `perf record -g` file lists its build ids only in `HEADER_BUILD_ID`: `uevrec
//!   decode` takes them, so a program replaced since is not named from the new file.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::stacks::{Recorder, build_chain, kallsyms_readable};
use super::stacks_raw::{
    N, assert_unnamed_in, decode, decode_lines, of, perf_record_with, rebuild, record_raw,
    record_raw_while,
};
use crate::common::chain::build_c;
use crate::common::tier::Tier;
use crate::common::{PATIENCE, wait_for};

/// The GNU build id of the ELF file `path`, in hex.
fn build_id_of(path: &Path) -> String {
    let id = blazesym::helper::read_elf_build_id(path)
        .unwrap()
        .expect("gcc writes a build id");
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// `perf buildid-list ARGS`'s lines (the command must succeed).
fn perf_buildid_list(args: &[&str]) -> Vec<String> {
    let out = Command::new("perf")
        .arg("buildid-list")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "perf buildid-list: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn perf_lists_the_build_ids_of_the_program_and_the_kernel() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    if let Some(why) = crate::common::perf_skip_reason() {
        require!(Tier::Host, Err::<(), _>(why));
    }
    let magic: u64 = 424_242_150;
    let dir = tempfile::tempdir().unwrap();
    let exe = require!(Tier::Host, build_chain(dir.path()));
    let (raw, _) = record_raw(dir.path(), &exe, magic, &["-g"]);
    let listed = perf_buildid_list(&["-i", raw.to_str().unwrap()]);
    let program = format!("{} {}", build_id_of(&exe), exe.display());
    assert!(listed.contains(&program), "{program} in {listed:?}");
    let libc = listed.iter().filter(|l| l.contains("/libc.so")).count();
    assert_eq!(libc, 1, "libc's (syscall) once: {listed:?}");
    if kallsyms_readable() {
        // `perf buildid-list -k`: the running kernel's, read by perf itself.
        let kernel = perf_buildid_list(&["-k"]);
        let kernel = format!("{} [kernel.kallsyms]", kernel[0].trim());
        assert!(listed.contains(&kernel), "{kernel} in {listed:?}");
    }
    assert!(
        listed.iter().all(|l| !l.starts_with(' ')),
        "every module listed with its id: {listed:?}"
    );
}

/// The traced program of [`a_program_from_before_the_recording_has_its_build_id`]: it
/// waits for its third argument to exist, then makes `setpgid(MAGIC, SEQ)` calls.
const WAITS_C: &str = r#"#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
__attribute__((noinline)) long call(long magic, long seq) {
    long r = syscall(SYS_setpgid, magic, seq);
    __asm__ volatile("" ::: "memory");
    return r;
}
int main(int argc, char **argv) {
    long magic = atol(argv[1]), n = atol(argv[2]);
    while (access(argv[3], F_OK) != 0) usleep(10000);
    for (long seq = 0; seq < n; seq++) call(magic, seq);
    return 0;
}
"#;

#[test]
fn a_program_from_before_the_recording_has_its_build_id() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let magic: u64 = 424_242_151;
    let dir = tempfile::tempdir().unwrap();
    let built = build_c(
        dir.path(),
        "waits",
        WAITS_C,
        "waits",
        &["-fno-omit-frame-pointer"],
    );
    let exe = require!(Tier::Host, built);
    let go = dir.path().join("go");
    // Killed on the way out should the test fail before it ends.
    let mut program = Recorder(
        Command::new(&exe)
            .args([magic.to_string(), N.to_string()])
            .arg(&go)
            .spawn()
            .unwrap(),
    );
    // Its mappings are made before uevrec starts: uevrec reads them from /proc.
    wait_for("the program's mappings", PATIENCE, || {
        std::fs::read_to_string(format!("/proc/{}/maps", program.0.id()))
            .is_ok_and(|m| m.contains("libc.so"))
    });
    let (raw, _) = record_raw_while(dir.path(), magic, &["-g"], || {
        std::fs::write(&go, "").unwrap();
        assert!(program.0.wait().unwrap().success());
    });

    let id = build_id_of(&exe);
    let records = of(&decode(&raw, &["--no-symbolize"]), magic);
    assert_eq!(records.len() as u64, N);
    for r in &records {
        let in_exe: Vec<&Value> = (r["stack"].as_array().unwrap().iter())
            .filter(|f| f["module"] == exe.to_str().unwrap())
            .collect();
        assert!(!in_exe.is_empty(), "a frame in the program: {r}");
        for f in in_exe {
            assert_eq!(f["build_id"], id.as_str(), "the file's build id: {f}");
        }
    }
    if crate::common::perf_skip_reason().is_none() {
        let listed = perf_buildid_list(&["-i", raw.to_str().unwrap()]);
        let program = format!("{id} {}", exe.display());
        assert!(listed.contains(&program), "{program} in {listed:?}");
    }
}

/// `uevrec decode ARGS FILE` with `PERF_BUILDID_DIR=cache`: every line.
fn decode_with_cache(file: &Path, cache: &Path, args: &[&str]) -> Vec<Value> {
    decode_lines(file, args, &[("PERF_BUILDID_DIR", cache)])
}

/// The program replaced at its path by another build after `record -g --raw`: `uevrec
/// decode` names its frames from the recorded build found by its id, in perf's build-id
/// cache (`PERF_BUILDID_DIR/.build-id/xx/REST/elf`) or in a `--debug-dir`'s `.build-id`
/// tree (`DIR/.build-id/xx/REST`) or from a debuginfod server; found nowhere, they say
/// `build_id_mismatch` and a notice names the module and where it was looked for.
#[test]
fn decode_finds_a_replaced_program_by_its_build_id() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let magic: u64 = 424_242_152;
    let dir = tempfile::tempdir().unwrap();
    let exe = require!(Tier::Host, build_chain(dir.path()));
    let source = dir.path().join("chain.c");
    let (raw, _) = record_raw(dir.path(), &exe, magic, &["-g"]);
    let id = build_id_of(&exe);
    let original = dir.path().join("original");
    std::fs::copy(&exe, &original).unwrap();
    rebuild(&exe, &source);
    assert_ne!(build_id_of(&exe), id, "another build");

    // Found nowhere (an empty cache, no debug directory holding it).
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let lines = decode_with_cache(&raw, &empty, &["--debug-dir", empty.to_str().unwrap()]);
    assert_unnamed_in(&of(&lines, magic), &exe, "build_id_mismatch");
    let notice = lines
        .iter()
        .find(|l| l["what"] == "modules_not_found")
        .expect("a notice of the module not found");
    let message = notice["message"].as_str().unwrap();
    assert!(
        message.contains(exe.to_str().unwrap()) && message.contains(&id),
        "{message}"
    );
    assert!(
        message.contains(empty.to_str().unwrap()),
        "where: {message}"
    );

    // In perf's build-id cache.
    let cache = dir.path().join("cache");
    let in_cache = cache.join(".build-id").join(&id[..2]).join(&id[2..]);
    std::fs::create_dir_all(&in_cache).unwrap();
    std::fs::copy(&original, in_cache.join("elf")).unwrap();
    let lines = decode_with_cache(&raw, &cache, &[]);
    super::stacks_raw::assert_chain_named(&of(&lines, magic), &exe, &source);
    // (Other programs' setpgid calls may be in the file, gone since: not ours.)
    let ours = |l: &&Value| {
        l["what"] == "modules_not_found"
            && l["message"]
                .as_str()
                .unwrap()
                .contains(exe.to_str().unwrap())
    };
    assert!(!lines.iter().any(|l| ours(&l)), "found");

    // In a debug directory's `.build-id` tree (the binary, not a `.debug` file).
    let debug = dir.path().join("debug");
    let in_debug = debug.join(".build-id").join(&id[..2]);
    std::fs::create_dir_all(&in_debug).unwrap();
    std::fs::copy(&original, in_debug.join(&id[2..])).unwrap();
    let lines = decode_with_cache(&raw, &empty, &["--debug-dir", debug.to_str().unwrap()]);
    super::stacks_raw::assert_chain_named(&of(&lines, magic), &exe, &source);

    // From a debuginfod server on 127.0.0.1 (`URL/buildid/ID/executable`), neither
    // perf's cache nor a debug directory holding it.
    let served = dir.path().join("srv").join("buildid").join(&id);
    std::fs::create_dir_all(&served).unwrap();
    std::fs::copy(&original, served.join("executable")).unwrap();
    let (url, _) = super::stack_namespaces::file_server(&dir.path().join("srv"));
    let env = [
        ("PERF_BUILDID_DIR", empty.as_path()),
        ("DEBUGINFOD_URLS", Path::new(&url)),
        ("DEBUGINFOD_CACHE_PATH", &dir.path().join("debuginfod")),
    ];
    let lines = decode_lines(&raw, &["--debug-dir", empty.to_str().unwrap()], &env);
    super::stacks_raw::assert_chain_named(&of(&lines, magic), &exe, &source);
}

/// `perf --buildid-dir CACHE record -g --buildid-all` of the chain (its MMAP2 records
/// carry no build ids; `HEADER_BUILD_ID` lists every module, and perf keeps each
/// binary in CACHE; perf 6.1 lists only the kernel and `[vdso]` without
/// `--buildid-all`: its samples' IPs), then the chain replaced at its path: `uevrec
/// decode` takes the build ids perf listed, so without perf's cache the program's frames
/// say `build_id_mismatch` (before: the new file's names), and with it
/// (`PERF_BUILDID_DIR=CACHE`) they are named from the build perf kept.
#[test]
fn decode_takes_the_build_ids_perf_listed() {
    if let Some(why) = crate::common::perf_skip_reason() {
        require!(Tier::Host, Err::<(), _>(why));
    }
    let magic: u64 = 424_242_153;
    let dir = tempfile::tempdir().unwrap();
    let exe = require!(Tier::Host, build_chain(dir.path()));
    let source = dir.path().join("chain.c");
    let (cache, empty) = (dir.path().join("cache"), dir.path().join("empty"));
    std::fs::create_dir(&cache).unwrap();
    std::fs::create_dir(&empty).unwrap();
    let file = dir.path().join("perf.data");
    let perf_args = ["--buildid-dir", cache.to_str().unwrap()];
    perf_record_with(&file, &perf_args, &["-g", "--buildid-all"], &exe, magic);
    rebuild(&exe, &source);
    let lines = decode_with_cache(&file, &empty, &["--debug-dir", empty.to_str().unwrap()]);
    assert_unnamed_in(&of(&lines, magic), &exe, "build_id_mismatch");
    let lines = decode_with_cache(&file, &cache, &[]);
    super::stacks_raw::assert_chain_named(&of(&lines, magic), &exe, &source);
}
