//! `uevrec top -g` on the host kernel (issue 38): the C chain of the stack tests (`main →
//! outer → middle → inner → syscall(SYS_setpgid, MAGIC, SEQ)`, frame pointers, built here)
//! counted in plain mode on `raw_syscalls:sys_enter`, its records told from the other
//! tests' by `--where` on MAGIC: the busiest call path names middle, outer and main in
//! that order (innermost first; `inner` too with `--call-graph dwarf`), with every call
//! counted on it, on the perf backend and on the ftrace backend. `--stack-ids` and `--no-symbolize` are refused with their reasons.

use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::{PATIENCE, bin};
use crate::stacks::{NR_SETPGID, build_chain, built_here};

/// Calls the chain makes.
const CALLS: u64 = 250;

#[test]
fn top_g_counts_the_chain_on_its_call_path() {
    top_counts_the_chain(424_242_061, &["-g"], &["middle", "outer", "main"], false);
}

/// On the ftrace backend (its `kernel_stack` and `user_stack` records tied to each
/// record): the program waits after its calls, as the ftrace backend reads its mappings
/// from `/proc` at its first stack.
#[test]
fn top_g_on_the_ftrace_backend_counts_the_chain_on_its_call_path() {
    top_counts_the_chain(
        424_242_063,
        &["-g", "--backend", "ftrace"],
        &["middle", "outer", "main"],
        true,
    );
}

#[test]
fn top_dwarf_counts_the_chain_with_inner() {
    // 8 KiB of stack a record: rings that hold the whole burst.
    top_counts_the_chain(
        424_242_062,
        &["--call-graph", "dwarf", "-m", "4M"],
        &["inner", "middle", "outer", "main"],
        false,
    );
}

/// `uevrec top --plain ARGS` while the chain calls `CALLS` times with `magic`: the final
/// line of the event has the chain's path first, naming `chain` in order, with every
/// call; nothing else was counted. `waits`: the program of the ftrace tests, which waits
/// on its standard input after its calls (closed once they are counted).
fn top_counts_the_chain(magic: u64, args: &[&str], chain: &[&str], waits: bool) {
    let built = match waits {
        true => built_here(|dir| Ok(crate::stacks_ftrace::build(dir))),
        false => built_here(build_chain),
    };
    let Some((_dir, exe)) = built else {
        return;
    };
    let mut top = Command::new(bin())
        .args(["top", "--plain", "--interval", "200ms"])
        .args(args)
        .args(["-e", "raw_syscalls:sys_enter", "--filter"])
        .arg(format!("id == {NR_SETPGID}"))
        .arg("--where")
        .arg(format!("fields.args[0] == {magic}"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, reader) = crate::top::line_reader(top.stdout.take().unwrap());
    let next = |what: &str| -> Value {
        let line = lines
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|_| panic!("no line within {PATIENCE:?} while waiting for {what}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line:?}: {e}"))
    };
    while !next("the attached notice")["notice"]
        .as_str()
        .is_some_and(|n| n.starts_with("attached "))
    {}
    let mut program = Command::new(&exe)
        .args([magic.to_string(), CALLS.to_string()])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    // Until every call is counted (lines come every interval: a deadline of our own).
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let v = next("the chain's records");
        if v["uevrec"] == "top" && v["records"] == CALLS {
            break;
        }
        assert!(
            v["lost"].as_u64().unwrap_or(0) == 0,
            "the kernel lost records: {v}"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "not every call counted within {PATIENCE:?}: {v}"
        );
    }
    // The waiting program goes on; the other may be gone already (then EPIPE).
    let _ = program.stdin.take().unwrap().write_all(b"x");
    assert!(program.wait().unwrap().success());
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(top.id() as i32, libc::SIGINT) }, 0);
    let status = crate::common::wait_exit(&mut top, PATIENCE).expect("uevrec top exits");
    reader.join().unwrap();
    assert!(status.success(), "{status:?}");
    let rest: Vec<Value> = lines
        .try_iter()
        .map(|l| serde_json::from_str(&l).unwrap())
        .collect();
    let last = rest
        .iter()
        .rfind(|v| v["uevrec"] == "top" && v["final"] == true)
        .unwrap_or_else(|| panic!("a final event line in {rest:#?}"));
    assert_eq!(last["records"], CALLS, "{last}");
    let sites = last["call_sites"].as_array().expect("call_sites with -g");
    let first = &sites[0];
    let frames: Vec<&str> = first["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    let at: Vec<Option<usize>> = chain
        .iter()
        .map(|name| frames.iter().position(|f| f == name))
        .collect();
    assert!(
        at.iter().all(Option::is_some) && at.is_sorted(),
        "{chain:?} in order (innermost first) in {frames:?}: {last}"
    );
    if !chain.contains(&"inner") {
        assert!(
            !frames.contains(&"inner"),
            "a frame-pointer walk skips inner (glibc's syscall() keeps no frame pointer): {frames:?}"
        );
    }
    assert_eq!(
        first["records"], CALLS,
        "every call on the chain's path: {last}"
    );
    assert_eq!(sites.len(), 1, "one path: {last}");
    assert_eq!(last["other_call_sites"], 0, "{last}");
}

/// `--stack-ids` makes no sense for top (no stack lines), `--no-symbolize` leaves it no
/// names to count by: both refused at once with the reason, exit status 2.
#[test]
fn top_refuses_stack_ids_and_no_symbolize() {
    for (flags, says) in [
        (&["-g", "--stack-ids"][..], "drop --stack-ids"),
        (&["--stack-ids"][..], "drop --stack-ids"),
        (&["-g", "--no-symbolize"][..], "drop --no-symbolize"),
    ] {
        let out = Command::new(bin())
            .args(["top", "--plain", "--duration", "1s"])
            .args(flags)
            .args(["-e", "raw_syscalls:sys_enter"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        assert!(err.contains(says), "{flags:?}: {err}");
        assert!(out.stdout.is_empty(), "{flags:?}");
    }
}
