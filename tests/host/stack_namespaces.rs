//! Call stacks of programs whose files uevrec cannot open by their path
//! (docs/stacks.md, "Programs in containers" and "Separate debug files"):
//!
//! - a program run from a tmpfs mounted in its own mount namespace (`unshare -m`): from
//!   uevrec's namespace its path does not exist, or holds another file; its frames are
//!   named from its own file, reached through `/proc/PID/root` while it lives, with
//!   frame pointers and with `--call-graph dwarf` (the unwind information too);
//! - stripped programs named through their separate debug file, found by build id and
//!   by `.gnu_debuglink` in a `--debug-dir` of the test's own (never /usr/lib/debug).
//!
//! The programs wait on their standard input after their calls, so they live until
//! uevrec has written every record (the files of another namespace are reached through
//! the living process).

use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use super::stacks::{Recorder, build_chain, call_line, record_setpgid};
use crate::common::stack_frames::{holds_in_a_row, user_symbols};
use crate::common::tier::Tier;
use crate::common::{PATIENCE, complete_lines, wait_for};

/// Calls per program.
const CALLS: u64 = 50;

/// The records of `magic` in `out`, once all [`CALLS`] are there.
fn records_of(out: &Path, magic: u64) -> Vec<Value> {
    let mine = || -> Vec<Value> {
        complete_lines(out)
            .into_iter()
            .filter(|v| v["fields"]["args"][0] == magic)
            .collect()
    };
    wait_for("every record of the program", PATIENCE, || {
        mine().len() as u64 >= CALLS
    });
    mine()
}

/// Run `exe MAGIC CALLS [wait]` from `ns_dir/chain` in a new mount namespace, `ns_dir`
/// being a tmpfs mounted there only.
fn run_in_own_namespace(exe: &Path, ns_dir: &Path, magic: u64, wait: bool) -> Child {
    Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(
            "mount -t tmpfs uevrec-test \"$1\" && cp \"$2\" \"$1/chain\" && \
             shift 2 && exec \"$0/chain\" \"$@\"",
        )
        .arg(ns_dir)
        .arg(ns_dir)
        .arg(exe)
        .arg(magic.to_string())
        .arg(CALLS.to_string())
        .args(wait.then_some("wait"))
        .stdin(Stdio::piped())
        .spawn()
        .expect("unshare (util-linux) runs the program in its own mount namespace")
}

/// SIGSTOP or SIGCONT to uevrec.
fn signal(rec: &Recorder, sig: i32) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(rec.0.id() as i32, sig) };
}

/// Record the program of `magic` run in its own namespace from `ns_dir/chain` with
/// `args`; its records, all written after it exited. `seen_alive`: uevrec has seen the
/// program (its mappings, then its first call) before it is stopped; otherwise it is
/// stopped before the program starts, and sees it only once it is gone.
fn record_in_namespace(
    exe: &Path,
    ns_dir: &Path,
    magic: u64,
    args: &[&str],
    seen_alive: bool,
) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let rec = record_setpgid(&out, args);
    if !seen_alive {
        signal(&rec, libc::SIGSTOP);
    }
    let mut child = run_in_own_namespace(exe, ns_dir, magic, seen_alive);
    if seen_alive {
        // Its first call (MAGIC + 1) written: its mappings were taken before it.
        wait_for("the program's first call", PATIENCE, || {
            complete_lines(&out)
                .iter()
                .any(|v| v["fields"]["args"][0] == magic + 1)
        });
        signal(&rec, libc::SIGSTOP);
    }
    drop(child.stdin.take());
    let status = child.wait().unwrap();
    assert!(status.success(), "the program in its namespace: {status}");
    signal(&rec, libc::SIGCONT);
    let records = records_of(&out, magic);
    drop(rec);
    records
}

/// Each record's user frames name the chain (`chain`, one after the other) from the
/// container's file at `module`, with the source line of each call.
fn assert_named_from(records: &[Value], chain: &[&str], module: &Path, source: &Path) {
    assert_eq!(records.len() as u64, CALLS);
    for r in records {
        let names = user_symbols(r);
        assert!(holds_in_a_row(&names, chain), "{chain:?} in {names:?}: {r}");
        let stack = r["stack"].as_array().unwrap();
        // The shared chain's `main` is `chain_main` here (its call line marked `main`).
        for (name, mark) in [
            ("middle", "middle"),
            ("outer", "outer"),
            ("chain_main", "main"),
        ] {
            let f = stack.iter().find(|f| f["symbol"] == name).unwrap();
            assert_eq!(f["module"], module.to_str().unwrap(), "{f}");
            assert_eq!(f["file"], source.to_str().unwrap(), "{f}");
            assert_eq!(f["line"], call_line(mark), "{name}'s call line: {f}");
        }
    }
}

/// A chain built here that, given a third argument, first calls `setpgid(MAGIC + 1, 0)`
/// and waits for its standard input to close (so that uevrec sees it alive): the shared
/// chain's source with `main` renamed and a `main` around it.
fn build_waiting_chain(dir: &Path) -> Result<std::path::PathBuf, String> {
    // The chain's own build: its source, lines and names are the other tests'.
    let exe = build_chain(dir)?;
    let source = std::fs::read_to_string(dir.join("chain.c")).unwrap();
    let source = source.replacen("int main(int argc", "int chain_main(int argc", 1)
        + "int main(int argc, char **argv) {\n    if (argc > 3) {\n        \
           syscall(SYS_setpgid, atol(argv[1]) + 1, 0L);\n        char c;\n        \
           while (read(0, &c, 1) > 0) {}\n    }\n    return (int)chain_main(3, argv);\n}\n";
    std::fs::write(dir.join("chain.c"), source).unwrap();
    let status = Command::new("gcc")
        .args(["-O1", "-g", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(dir.join("chain.c"))
        .status()
        .map_err(|e| format!("gcc is needed to build the traced program: {e}"))?;
    assert!(status.success(), "gcc failed on the test program");
    Ok(exe)
}

/// The frames of `module` in every record: none named, each saying `why`; the program's
/// other frames (glibc, the same file here and there) still named.
fn assert_refused(records: &[Value], module: &Path, why: &str) {
    assert_eq!(records.len() as u64, CALLS);
    for r in records {
        let stack = r["stack"].as_array().unwrap();
        let ours: Vec<&Value> = stack
            .iter()
            .filter(|f| f["module"] == module.to_str().unwrap())
            .collect();
        assert!(ours.len() >= 3, "the chain's frames: {r}");
        for f in ours {
            assert!(f.get("symbol").is_none(), "no name: {f}");
            assert_eq!(f["unsymbolized"], why, "{f}");
        }
        assert!(
            stack.iter().any(|f| f["symbol"] == "syscall"),
            "glibc's frame named: {r}"
        );
    }
}

/// A waiting chain built in a temporary directory, to run from its `container/chain`
/// in a namespace of its own.
struct Container {
    dir: tempfile::TempDir,
    exe: std::path::PathBuf,
}

impl Container {
    fn new() -> Result<Container, String> {
        let dir = tempfile::tempdir().unwrap();
        let exe = build_waiting_chain(dir.path())?;
        std::fs::create_dir(dir.path().join("container")).unwrap();
        Ok(Container { dir, exe })
    }

    /// The directory mounted over in the program's namespace.
    fn ns_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("container")
    }

    /// The program's path there.
    fn module(&self) -> std::path::PathBuf {
        self.ns_dir().join("chain")
    }

    /// [`record_in_namespace`] of this program.
    fn record(&self, magic: u64, args: &[&str], seen_alive: bool) -> Vec<Value> {
        record_in_namespace(&self.exe, &self.ns_dir(), magic, args, seen_alive)
    }

    /// Recorded seen alive with `-g` (magic `magic`) and `--call-graph dwarf` (`magic +
    /// 10`): every record names the chain from the program's own file; the records.
    fn named_both_ways(&self, magic: u64) -> Vec<Value> {
        let source = self.dir.path().join("chain.c");
        // glibc's syscall() keeps no frame pointer: a frame-pointer walk skips `inner`.
        let fp = self.record(magic, &["-g"], true);
        let chain = ["middle", "outer", "chain_main", "main"];
        assert_named_from(&fp, &chain, &self.module(), &source);
        let dwarf = self.record(magic + 10, &["--call-graph", "dwarf", "-m", "4M"], true);
        let chain = ["inner", "middle", "outer", "chain_main", "main"];
        assert_named_from(&dwarf, &chain, &self.module(), &source);
        [fp, dwarf].concat()
    }
}

/// The program's binary exists only in its own mount namespace: seen alive (its file
/// then held open), `-g` and `--call-graph dwarf` name its chain from its file, though
/// every record is named after it exited; not seen before it exited, its frames say
/// `gone` (no such file here).
#[test]
fn a_program_only_in_its_own_namespace_is_named() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let container = require!(Tier::Host, Container::new());
    container.named_both_ways(424_242_380);
    assert!(
        !container.module().exists(),
        "the path exists in the program's namespace only"
    );
    let unseen = container.record(424_242_400, &["-g"], false);
    assert_refused(&unseen, &container.module(), "gone");
}

/// Our namespace has another program at the same path: the frames are named from the
/// program's own file, never from ours; not seen alive, they say `build_id_mismatch`.
#[test]
fn another_file_at_the_same_path_here_lends_no_names() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let container = require!(Tier::Host, Container::new());
    // Ours: another build (other names at other places), same path.
    let other_src = container.dir.path().join("other.c");
    std::fs::write(
        &other_src,
        "int decoy_a(int x) { return x * 3; }\nint decoy_b(int x) { return decoy_a(x) + 1; }\n\
         int main(int argc, char **argv) { (void)argv; return decoy_b(argc); }\n",
    )
    .unwrap();
    let status = Command::new("gcc")
        .args(["-O0", "-g", "-o"])
        .arg(container.module())
        .arg(&other_src)
        .status()
        .unwrap();
    assert!(status.success());
    let no_decoys = |records: &[Value]| {
        for r in records {
            assert!(
                !r.to_string().contains("decoy_"),
                "no name from our file at the same path: {r}"
            );
        }
    };
    no_decoys(&container.named_both_ways(424_242_410));
    let unseen = container.record(424_242_430, &["-g"], false);
    assert_refused(&unseen, &container.module(), "build_id_mismatch");
    no_decoys(&unseen);
}

/// The flight recorder finds each mapped file as the live path does: a dump taken after
/// the program exited names its chain from the program's own file, never from the other
/// file at its path here.
#[test]
fn a_flight_dump_names_a_container_program_from_its_own_file() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let container = require!(Tier::Host, Container::new());
    let decoy = container.dir.path().join("decoy.c");
    std::fs::write(
        &decoy,
        "int decoy_middle(int x) { return x * 3; }\nint decoy_outer(int x) { return decoy_middle(x) + 1; }\n\
         int main(int argc, char **argv) { (void)argv; return decoy_outer(argc); }\n",
    )
    .unwrap();
    let status = Command::new("gcc")
        .args(["-O0", "-g", "-o"])
        .arg(container.module())
        .arg(&decoy)
        .status()
        .unwrap();
    assert!(status.success());
    const MAGIC: u64 = 424_242_480;
    let dir = tempfile::tempdir().unwrap();
    let flight = super::stack_outputs::flight_of_setpgid(&dir.path().join("flight"));
    let mut child = run_in_own_namespace(&container.exe, &container.ns_dir(), MAGIC, true);
    // It waits on its standard input after its first call: the flight thread takes its
    // mappings meanwhile (the session drains every few milliseconds; a dump is the only
    // view into the buffer, so a generous wait).
    std::thread::sleep(std::time::Duration::from_millis(1500));
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    // The records reach the buffer once the session drained them (as the flight tests).
    std::thread::sleep(std::time::Duration::from_millis(500));
    flight.signal(libc::SIGUSR1);
    let dump = flight.wait_dumps(1);
    flight.stop();
    let records: Vec<Value> = std::fs::read_to_string(&dump)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &Value| v["fields"]["args"][0] == MAGIC)
        .collect();
    let source = container.dir.path().join("chain.c");
    let chain = ["middle", "outer", "chain_main", "main"];
    assert_named_from(&records, &chain, &container.module(), &source);
}

/// Stripped programs: one whose debug file lies by build id under
/// `DIR/.build-id/xx/rest.debug` (fully stripped: no names of its own), one that points
/// at its debug file by `.gnu_debuglink` (its symbol table kept). With `--debug-dir DIR`
/// both get file and line; without, the first gets a reason and the second names only.
#[test]
fn stripped_programs_are_named_through_their_debug_files() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = require!(Tier::Host, build_waiting_chain(dir.path()));
    let source = dir.path().join("chain.c");
    let debug_dir = dir.path().join("debug");
    let tool = |cmd: &str, args: &[&std::ffi::OsStr]| {
        let status = Command::new(cmd).args(args).status().unwrap();
        assert!(status.success(), "{cmd} {args:?}");
    };
    let debug = dir.path().join("chain.debug");
    tool(
        "objcopy",
        &[
            "--only-keep-debug".as_ref(),
            exe.as_os_str(),
            debug.as_os_str(),
        ],
    );
    // By build id: stripped of everything, no debug link.
    let by_id = dir.path().join("by_id");
    tool(
        "strip",
        &["-o".as_ref(), by_id.as_os_str(), exe.as_os_str()],
    );
    let id = blazesym::helper::read_elf_build_id(&by_id)
        .unwrap()
        .expect("gcc gives a build id");
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let id_dir = debug_dir.join(".build-id").join(&hex[..2]);
    std::fs::create_dir_all(&id_dir).unwrap();
    std::fs::copy(&debug, id_dir.join(format!("{}.debug", &hex[2..]))).unwrap();
    // By debug link: its symbols kept, its debug information out; the linked file in
    // the debug directory only (blazesym also looks beside the program).
    let linked = dir.path().join("linked");
    let link_name = dir.path().join("chain-linked.debug");
    std::fs::copy(&debug, &link_name).unwrap();
    tool(
        "strip",
        &[
            "--strip-debug".as_ref(),
            "-o".as_ref(),
            linked.as_os_str(),
            exe.as_os_str(),
        ],
    );
    let add_link = format!("--add-gnu-debuglink={}", link_name.display());
    tool("objcopy", &[add_link.as_ref(), linked.as_os_str()]);
    std::fs::rename(&link_name, debug_dir.join("chain-linked.debug")).unwrap();

    let record = |args: &[&str], magics: [u64; 2]| -> [Vec<Value>; 2] {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out.jsonl");
        let rec: Recorder = record_setpgid(&out, args);
        for (program, magic) in [&by_id, &linked].into_iter().zip(magics) {
            let mut child = Command::new(program)
                .args([magic.to_string(), CALLS.to_string()])
                .stdin(Stdio::null())
                .spawn()
                .unwrap();
            assert!(child.wait().unwrap().success());
        }
        let got = magics.map(|m| records_of(&out, m));
        drop(rec);
        got
    };
    let debug_arg = debug_dir.to_str().unwrap();
    let [id_named, link_named] = record(
        &["-g", "--debug-dir", debug_arg],
        [424_242_440, 424_242_450],
    );
    assert_named_from(
        &id_named,
        &["middle", "outer", "chain_main", "main"],
        &by_id,
        &source,
    );
    assert_named_from(
        &link_named,
        &["middle", "outer", "chain_main", "main"],
        &linked,
        &source,
    );
    let [id_bare, link_bare] = record(&["-g"], [424_242_460, 424_242_470]);
    for r in &id_bare {
        let frames = r["stack"].as_array().unwrap();
        let ours: Vec<&Value> = frames
            .iter()
            .filter(|f| f["module"] == by_id.to_str().unwrap())
            .collect();
        assert!(ours.len() >= 3, "the chain's frames: {r}");
        for f in ours {
            assert!(
                f.get("symbol").is_none(),
                "no names in a stripped file: {f}"
            );
            assert!(f["unsymbolized"].is_string(), "a reason: {f}");
        }
    }
    for r in &link_bare {
        assert!(
            holds_in_a_row(&user_symbols(r), &["middle", "outer", "chain_main", "main"]),
            "its own symbol table: {r}"
        );
        for f in r["stack"].as_array().unwrap() {
            if f["module"] == linked.to_str().unwrap() {
                assert!(f.get("file").is_none(), "no debug file found, no line: {f}");
            }
        }
    }
}

/// A server on 127.0.0.1 of the files under `root` (`GET /PATH` → `root/PATH`, else
/// 404): its URL and the paths asked.
pub(crate) fn file_server(root: &Path) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (log, root) = (asked.clone(), root.to_owned());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
            }
            let path = line.split(' ').nth(1).unwrap_or("/").to_owned();
            log.lock().unwrap().push(path.clone());
            let body = std::fs::read(root.join(path.trim_start_matches('/')));
            let (status, body) = match body {
                Ok(b) => ("200 OK", b),
                Err(_) => ("404 Not Found", Vec::new()),
            };
            let head = format!(
                "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(head.as_bytes());
            let _ = conn.write_all(&body);
        }
    });
    (url, asked)
}

/// `uevrec decode` of a recording of a fully stripped program whose debug file is
/// nowhere here but on a debuginfod server (`DEBUGINFOD_URLS`, a server on 127.0.0.1):
/// fetched into `DEBUGINFOD_CACHE_PATH` once, the chain named with file and line;
/// without the server, unnamed.
#[test]
fn decode_names_a_stripped_program_from_debuginfod() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = require!(Tier::Host, build_waiting_chain(dir.path()));
    let source = dir.path().join("chain.c");
    let debug = dir.path().join("chain.debug");
    let stripped = dir.path().join("stripped");
    for (cmd, args) in [
        (
            "objcopy",
            [
                "--only-keep-debug",
                exe.to_str().unwrap(),
                debug.to_str().unwrap(),
            ],
        ),
        (
            "strip",
            ["-o", stripped.to_str().unwrap(), exe.to_str().unwrap()],
        ),
    ] {
        assert!(
            Command::new(cmd).args(args).status().unwrap().success(),
            "{cmd}"
        );
    }
    let id = blazesym::helper::read_elf_build_id(&stripped)
        .unwrap()
        .expect("gcc gives a build id");
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let served = dir.path().join("srv").join("buildid").join(&hex);
    std::fs::create_dir_all(&served).unwrap();
    std::fs::copy(&debug, served.join("debuginfo")).unwrap();
    let (url, asked) = file_server(&dir.path().join("srv"));

    const MAGIC: u64 = 424_242_490;
    const CHAIN: [&str; 4] = ["middle", "outer", "chain_main", "main"];
    let (raw, live) = (dir.path().join("rec.data"), dir.path().join("live.jsonl"));
    let rec = record_setpgid(&live, &["-g", "--raw", raw.to_str().unwrap()]);
    let status = Command::new(&stripped)
        .args([MAGIC.to_string(), CALLS.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    records_of(&live, MAGIC);
    drop(rec);

    let empty = dir.path().join("no-debug");
    std::fs::create_dir(&empty).unwrap();
    let cache = dir.path().join("cache");
    let decode = |urls: Option<&str>| -> Vec<Value> {
        let mut cmd = Command::new(crate::common::bin());
        cmd.args(["decode", "--debug-dir", empty.to_str().unwrap()])
            .arg(&raw)
            .env("DEBUGINFOD_CACHE_PATH", &cache)
            .env_remove("DEBUGINFOD_URLS");
        if let Some(u) = urls {
            cmd.env("DEBUGINFOD_URLS", u);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|v| v["fields"]["args"][0] == MAGIC)
            .collect()
    };
    let bare = decode(None);
    assert_eq!(bare.len() as u64, CALLS);
    for r in &bare {
        assert!(
            !holds_in_a_row(&user_symbols(r), &["middle", "outer"]),
            "a stripped file names nothing without its debug file: {r}"
        );
    }
    // A server that has nothing first: the next is asked.
    let none = tempfile::tempdir().unwrap();
    let (nothing, _) = file_server(none.path());
    let named = decode(Some(&format!("{nothing} {url}")));
    assert_named_from(&named, &CHAIN, &stripped, &source);
    assert!(cache.join(&hex).join("debuginfo").is_file());
    let mine = format!("/buildid/{hex}/debuginfo");
    let count = || asked.lock().unwrap().iter().filter(|p| **p == mine).count();
    assert_eq!(count(), 1);
    // From the cache the second time.
    assert_named_from(&decode(Some(&url)), &CHAIN, &stripped, &source);
    assert_eq!(count(), 1, "read from the cache");
}
