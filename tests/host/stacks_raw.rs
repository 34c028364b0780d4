//! Call stacks in perf.data, end to end on the host kernel, with the C chain of
//! `stacks.rs` (`main → outer → middle → inner → syscall(SYS_setpgid, MAGIC, SEQ)`):
//!
//! - one `record -g --raw FILE -o LINES` run: `uevrec decode FILE` gives every record of
//!   the program with the same stack as the live line (the names from the file's own
//!   MMAP2 records: the program has exited by then), with `--threads 2` the same bytes,
//!   with `--no-symbolize` the module, file offset and build id; `perf script` names the
//!   same functions in every sample, kernel ones too (the file's kernel map); after the program is rebuilt at its path, its
//!   frames say `build_id_mismatch` instead of the new file's names;
//! - `record --call-graph dwarf --raw` of the program built without frame pointers:
//!   `perf script` unwinds the file's stack copies itself (`inner` included) and names
//!   the frames `uevrec decode` names, whose lines are the live ones;
//! - a `perf record -g` file of the same program: `uevrec decode` names middle, outer and
//!   main with their lines.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::stacks::{NR_SETPGID, Recorder, build_chain, call_line, kallsyms_readable};
use crate::common::chain::build_chain_with;
use crate::common::stack_frames::{holds_in_a_row, user_symbols};
use crate::common::tier::Tier;
use crate::common::{PATIENCE, bin, complete_lines, wait_for};

/// Records of the program, by SEQ.
pub(crate) const N: u64 = 100;

/// `uevrec decode ARGS FILE`'s event lines (the command must succeed).
pub(crate) fn decode(file: &Path, args: &[&str]) -> Vec<Value> {
    (decode_lines(file, args, &[]).into_iter())
        .filter(|v: &Value| v["system"].is_string() && v["uevrec"].is_null())
        .collect()
}

/// `uevrec decode ARGS FILE` with the environment `env` added: every line, uevrec's own
/// included (the command must succeed).
pub(crate) fn decode_lines(file: &Path, args: &[&str], env: &[(&str, &Path)]) -> Vec<Value> {
    let out = Command::new(bin())
        .envs(env.iter().copied())
        .arg("decode")
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "decode: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The lines whose setpgid call was `magic`'s.
pub(crate) fn of(lines: &[Value], magic: u64) -> Vec<Value> {
    lines
        .iter()
        .filter(|v| v["fields"]["args"][0] == magic)
        .cloned()
        .collect()
}

/// `uevrec record STACK_ARGS --raw DIR/rec.data -o DIR/live.jsonl` of the setpgid calls
/// while `exe MAGIC N` runs: the perf.data and the program's live lines.
pub(crate) fn record_raw(
    dir: &Path,
    exe: &Path,
    magic: u64,
    stack_args: &[&str],
) -> (PathBuf, Vec<Value>) {
    record_raw_while(dir, magic, stack_args, || {
        let program = Command::new(exe)
            .args([magic.to_string(), N.to_string()])
            .output()
            .unwrap();
        assert!(program.status.success());
    })
}

/// [`record_raw`] while `run` makes the `N` calls with `magic` (once uevrec has
/// attached).
pub(crate) fn record_raw_while(
    dir: &Path,
    magic: u64,
    stack_args: &[&str],
    run: impl FnOnce(),
) -> (PathBuf, Vec<Value>) {
    let (raw, live) = (dir.join("rec.data"), dir.join("live.jsonl"));
    let mut rec = Recorder(
        Command::new(bin())
            .args(["record", "--quiet"])
            .args(stack_args)
            .args(["-e", "raw_syscalls:sys_enter", "--filter"])
            .arg(format!("id == {NR_SETPGID}"))
            .arg("--raw")
            .arg(&raw)
            .arg("-o")
            .arg(&live)
            .spawn()
            .unwrap(),
    );
    crate::common::wait_attached_notices(&live, 1);
    run();
    wait_for("every record of the program", PATIENCE, || {
        of(&complete_lines(&live), magic).len() as u64 >= N
    });
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(rec.0.id() as i32, libc::SIGINT) };
    assert!(crate::common::wait_exit(&mut rec.0, PATIENCE).is_ok_and(|s| s.success()));
    (raw, of(&complete_lines(&live), magic))
}

/// `mine` (the program's decoded lines) in time order, and beside each the frames
/// `perf script` prints for the same sample of `raw` (it shows every one).
fn perf_beside(raw: &Path, mine: &[Value]) -> (Vec<Value>, Vec<Vec<String>>) {
    let pid = mine[0]["pid"].as_u64().unwrap() as u32;
    let perf: Vec<Vec<String>> = perf_stacks(raw)
        .into_iter()
        .filter(|(p, _)| *p == pid)
        .map(|(_, frames)| frames)
        .collect();
    assert_eq!(perf.len() as u64, N, "perf script shows every sample");
    let mut in_time = mine.to_vec();
    in_time.sort_by_key(|l| l["time"].as_str().map(str::to_string));
    (in_time, perf)
}

/// `lines` ordered by SEQ.
fn by_seq(lines: &[Value]) -> Vec<Value> {
    let mut v = lines.to_vec();
    v.sort_by_key(|l| l["fields"]["args"][1].as_u64());
    v
}

/// Every record of `records` (SEQ 0..N once each) names middle, outer and main in that
/// order, in `exe` at their call lines of `source`.
pub(crate) fn assert_chain_named(records: &[Value], exe: &Path, source: &Path) {
    let mut seqs: Vec<u64> = records
        .iter()
        .map(|v| v["fields"]["args"][1].as_u64().unwrap())
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..N).collect::<Vec<_>>(), "each SEQ exactly once");
    for r in records {
        let names = user_symbols(r);
        let at = |name: &str| names.iter().position(|n| n == name);
        let (middle, outer, main) = (at("middle"), at("outer"), at("main"));
        assert!(
            middle.is_some() && middle < outer && outer < main,
            "middle, outer, main in order in {names:?}: {r}"
        );
        let stack = r["stack"].as_array().unwrap();
        for name in ["middle", "outer", "main"] {
            let f = stack.iter().find(|f| f["symbol"] == name).unwrap();
            assert_eq!(f["module"], exe.to_str().unwrap(), "{f}");
            assert_eq!(f["file"], source.to_str().unwrap(), "{f}");
            assert_eq!(f["line"], call_line(name), "{name}'s call line: {f}");
        }
    }
}

/// Every frame's symbol of a record, kernel frames first, innermost first (`[unknown]`,
/// perf's word, for a frame without one).
fn all_symbols(r: &Value) -> Vec<String> {
    r["stack"]
        .as_array()
        .expect("a stack on every record")
        .iter()
        .map(|f| f["symbol"].as_str().unwrap_or("[unknown]").to_string())
        .collect()
}

/// `perf script -F comm,pid,ip,sym -i FILE`: each sample's pid and its frames' symbols,
/// innermost first.
fn perf_stacks(file: &Path) -> Vec<(u32, Vec<String>)> {
    let out = Command::new("perf")
        .args(["script", "-F", "comm,pid,ip,sym", "-i"])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "perf script: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut samples: Vec<(u32, Vec<String>)> = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if line.trim().is_empty() {
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            // `\t    ADDR SYMBOL`
            let sym = line.split_whitespace().nth(1).unwrap_or("?").to_string();
            if let Some(last) = samples.last_mut() {
                last.1.push(sym);
            }
        } else {
            let pid = line.split_whitespace().last().unwrap().parse().unwrap();
            samples.push((pid, Vec::new()));
        }
    }
    samples
}

#[test]
fn raw_stacks_decode_as_the_live_lines_and_perf_names_them() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let magic: u64 = 424_242_138;
    let dir = tempfile::tempdir().unwrap();
    let exe = require!(Tier::Host, build_chain(dir.path()));
    let source = dir.path().join("chain.c");
    let (raw, live_lines) = record_raw(dir.path(), &exe, magic, &["-g"]);

    // decode: the live lines' stacks, named from the file after the program exited.
    let decoded = decode(&raw, &[]);
    let mine = of(&decoded, magic);
    assert_chain_named(&mine, &exe, &source);
    assert_eq!(
        by_seq(&mine),
        by_seq(&live_lines),
        "decode = the live lines"
    );
    // Named on formatter workers: the same bytes.
    assert_eq!(decode(&raw, &["--threads", "2"]), decoded);
    // --no-symbolize: the module, its offset and the build id the kernel gave.
    for r in of(&decode(&raw, &["--no-symbolize"]), magic) {
        let frames = r["stack"].as_array().unwrap();
        let in_exe: Vec<&Value> = frames
            .iter()
            .filter(|f| f["module"] == exe.to_str().unwrap())
            .collect();
        assert_eq!(in_exe.len(), 3, "middle, outer, main: {r}");
        for f in in_exe {
            assert!(f["symbol"].is_null(), "{f}");
            assert!(f["file_offset"].as_str().unwrap().starts_with("0x"), "{f}");
            assert_eq!(f["build_id"].as_str().map(str::len), Some(40), "{f}");
        }
    }

    // perf script: the same user functions, innermost first, in every sample.
    if let Some(why) = crate::common::perf_skip_reason() {
        require!(Tier::Host, Err::<(), _>(why));
    }
    let (in_time, perf) = perf_beside(&raw, &mine);
    // The kernel map names the kernel frames from /proc/kallsyms, as perf's own files.
    let kernel_named = kallsyms_readable();
    for (line, perf_frames) in in_time.iter().zip(&perf) {
        if kernel_named {
            assert_eq!(
                perf_frames,
                &all_symbols(line),
                "perf script names every frame as decode does"
            );
            assert!(
                perf_frames.iter().any(|f| f == "do_syscall_64"),
                "the syscall entry named: {perf_frames:?}"
            );
        } else {
            // No kernel map (kallsyms hides addresses): the user part, perf's last frames.
            let ours = user_symbols(line);
            let tail = &perf_frames[perf_frames.len().saturating_sub(ours.len())..];
            assert_eq!(
                tail,
                &ours[..],
                "perf script's frames {perf_frames:?}: {line}"
            );
        }
    }

    // The program rebuilt at its path: not named with the new file's names.
    rebuild(&exe, &source);
    assert_unnamed_in(&of(&decode(&raw, &[]), magic), &exe, "build_id_mismatch");
}

/// Build the chain's `source` again into `exe`, a line added at its end: another build
/// at the path (the chain's lines unchanged).
pub(crate) fn rebuild(exe: &Path, source: &Path) {
    let text = std::fs::read_to_string(source).unwrap();
    std::fs::write(source, format!("{text}int rebuilt_marker = 1;\n")).unwrap();
    let status = Command::new("gcc")
        .args(["-O1", "-g", "-fno-omit-frame-pointer", "-o"])
        .arg(exe)
        .arg(source)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Every record of `records` has its three frames in `exe` (middle, outer, main)
/// without names, saying `why`.
pub(crate) fn assert_unnamed_in(records: &[Value], exe: &Path, why: &str) {
    assert!(!records.is_empty());
    for r in records {
        let frames = r["stack"].as_array().unwrap();
        let in_exe: Vec<&Value> = frames
            .iter()
            .filter(|f| f["module"] == exe.to_str().unwrap())
            .collect();
        assert_eq!(in_exe.len(), 3, "{r}");
        assert!(
            in_exe
                .iter()
                .all(|f| f["unsymbolized"] == why && f["symbol"].is_null()),
            "{r}"
        );
    }
}

/// `--call-graph dwarf` of the chain built without frame pointers: perf unwinds the
/// file's stack copies itself (the read-only segments beside each mapping give it the
/// `.eh_frame_hdr`), `inner` included, and names the same frames as `uevrec decode`,
/// whose lines are the live ones.
#[test]
fn dwarf_raw_stacks_unwind_in_perf_and_decode_as_the_live_lines() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let magic: u64 = 424_242_140;
    let dir = tempfile::tempdir().unwrap();
    let nofp = build_chain_with(dir.path(), "chain_nofp", &["-fomit-frame-pointer"]);
    let exe = require!(Tier::Host, nofp);
    let dwarf = ["--call-graph", "dwarf", "-m", "4M"];
    let (raw, live_lines) = record_raw(dir.path(), &exe, magic, &dwarf);
    let chain = ["syscall", "inner", "middle", "outer", "main"];
    assert_eq!(live_lines.len() as u64, N);
    for r in &live_lines {
        let names = user_symbols(r);
        assert!(holds_in_a_row(&names, &chain), "{names:?}: {r}");
    }
    let decoded = decode(&raw, &[]);
    let mine = of(&decoded, magic);
    assert_eq!(
        by_seq(&mine),
        by_seq(&live_lines),
        "decode = the live lines"
    );
    assert_eq!(decode(&raw, &["--threads", "2"]), decoded);

    if let Some(why) = crate::common::perf_skip_reason() {
        require!(Tier::Host, Err::<(), _>(why));
    }
    let (in_time, perf) = perf_beside(&raw, &mine);
    for (line, perf_frames) in in_time.iter().zip(&perf) {
        assert!(
            holds_in_a_row(perf_frames, &chain),
            "perf unwinds the chain: {perf_frames:?}"
        );
        if kallsyms_readable() {
            assert_eq!(perf_frames, &all_symbols(line), "the frames decode names");
        }
    }
}

#[test]
fn a_perf_record_g_file_decodes_with_names() {
    if let Some(why) = crate::common::perf_skip_reason() {
        require!(Tier::Host, Err::<(), _>(why));
    }
    let magic: u64 = 424_242_139;
    let dir = tempfile::tempdir().unwrap();
    let exe = require!(Tier::Host, build_chain(dir.path()));
    let file = dir.path().join("perf.data");
    perf_record(&file, &["-g"], &exe, magic);
    let records = of(&decode(&file, &[]), magic);
    assert_chain_named(&records, &exe, &dir.path().join("chain.c"));
}

/// `perf record --call-graph dwarf` of the chain built without frame pointers (its
/// samples also carry `WEIGHT` and `DATA_SRC`): `uevrec decode` unwinds its stack copies
/// and names `inner` and the rest of the chain in every record.
#[test]
fn a_perf_record_dwarf_file_decodes_with_names() {
    if let Some(why) = crate::common::perf_skip_reason() {
        require!(Tier::Host, Err::<(), _>(why));
    }
    let magic: u64 = 424_242_141;
    let dir = tempfile::tempdir().unwrap();
    let nofp = build_chain_with(dir.path(), "chain_nofp", &["-fomit-frame-pointer"]);
    let exe = require!(Tier::Host, nofp);
    let file = dir.path().join("perf.data");
    perf_record(&file, &["--call-graph", "dwarf", "-m", "4M"], &exe, magic);
    let records = of(&decode(&file, &[]), magic);
    assert_eq!(records.len() as u64, N, "every sample decoded");
    let chain = ["syscall", "inner", "middle", "outer", "main"];
    for r in &records {
        let names = user_symbols(r);
        assert!(holds_in_a_row(&names, &chain), "{names:?}: {r}");
    }
}

/// `perf record -q -B STACKS` of the chain `exe` (`N` calls with `magic`) on
/// raw_syscalls:sys_enter into `file`.
fn perf_record(file: &Path, stacks: &[&str], exe: &Path, magic: u64) {
    // -B: perf 6.1's build-id pass at the end of the recording crashed here once
    // ("assertion failed at util/build-id.c:1010"); the MMAP2 records keep theirs.
    perf_record_with(file, &[], &[&["-B"], stacks].concat(), exe, magic);
}

/// `perf PERF_ARGS record -q ARGS` of the chain `exe` (`N` calls with `magic`) on
/// raw_syscalls:sys_enter into `file`.
pub(crate) fn perf_record_with(
    file: &Path,
    perf_args: &[&str],
    args: &[&str],
    exe: &Path,
    magic: u64,
) {
    let out = Command::new("perf")
        .args(perf_args)
        .args(["record", "-q"])
        .args(args)
        .args(["-e", "raw_syscalls:sys_enter", "--filter"])
        .arg(format!("id == {NR_SETPGID}"))
        .arg("-o")
        .arg(file)
        .arg("--")
        .arg(exe)
        .args([magic.to_string(), N.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "perf record: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Stacks where the file cannot carry them are refused before anything is written.
#[test]
fn raw_stacks_without_process_records_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    // (A trace.dat carries the ftrace backend's stack records: stacks_ftrace.rs.)
    let file = dir.path().join("x.data");
    let out = Command::new(bin())
        .args(["record", "-g", "-e", "raw_syscalls:sys_enter", "--raw"])
        .arg(&file)
        .arg("--no-context")
        .output()
        .unwrap();
    assert!(!out.status.success(), "--no-context accepted");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("call stacks") && err.contains("--no-context"),
        "{err}"
    );
    assert!(!file.exists(), "nothing written");
}
