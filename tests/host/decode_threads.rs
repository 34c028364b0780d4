//! Tier 2: `uevrec decode --threads N` writes the bytes `--threads 1` writes, on files
//! recorded here large enough for many staged chunks and batches (issue 25): a
//! `record --raw` perf.data read from its path (mapped: the workers read the records from
//! the mapping) and through a pipe (pipe-mode copies), a `--raw-format trace-dat`
//! trace.dat, and both cut short (the `truncated` notice, standard error's salvage note
//! and exit status 3 the same too); a whole perf.data also in ranges (`--range-size`), a
//! trace.dat in windows of time (and, cut short, staged). Needs root and tracefs (says why
//! it is skipped otherwise).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::sleep;
use std::time::Duration;

use crate::common::NR_GETPPID;
use crate::common::PATIENCE;
use crate::common::bin;
use crate::threads::{burst_child, wait_attached};

/// getppid calls of the burst: with a 120-byte perf sample each, a perf.data of about
/// 10 MB, dozens of 192 KiB staged chunks.
const N: u32 = 80_000;

/// `uevrec record` of `child`'s getppid calls with `extra` arguments, stderr to `log`.
pub(crate) fn record(child: &Child, extra: &[&str], log: &Path) -> Child {
    Command::new(bin())
        .args(["record", "--pid", &child.id().to_string()])
        .args(["--filter", &format!("id == {NR_GETPPID}")])
        .args(["-e", "raw_syscalls:sys_enter", "-m", "4M"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

/// SIGINT `rec`, which must exit 0.
pub(crate) fn stop(rec: &mut Child, log: &Path) {
    // SAFETY: kill on a child we own.
    assert_eq!(unsafe { libc::kill(rec.id() as i32, libc::SIGINT) }, 0);
    let st = crate::common::wait_exit(rec, PATIENCE).expect("uevrec exits");
    assert!(st.success(), "{st}: {}", fs::read_to_string(log).unwrap());
}

/// `uevrec decode --threads THREADS` of `input`, from its path or (`pipe`) through a
/// pipe on standard input.
fn decode(input: &Path, threads: &str, pipe: bool) -> Output {
    decode_with(input, threads, pipe, &[])
}

/// [`decode`] with `extra` arguments.
fn decode_with(input: &Path, threads: &str, pipe: bool, extra: &[&str]) -> Output {
    let mut cmd = Command::new(bin());
    cmd.args(["decode", "--threads", threads]).args(extra);
    if pipe {
        let bytes = fs::read(input).unwrap();
        let mut child = cmd
            .arg("-")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let feeder = std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
        let out = child.wait_with_output().unwrap();
        feeder.join().unwrap();
        out
    } else {
        cmd.arg(input).output().unwrap()
    }
}

/// Standard error without the summary (its seconds differ run to run).
fn stderr_notes(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| !(l.starts_with("uevrec: ") && l.contains(" lost, from ")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The summary's note on how the threads shared the work (`(in 5 ranges by 2 threads)`).
fn shared(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    let summary = err
        .lines()
        .find(|l| l.contains(" lost, from "))
        .unwrap_or_default();
    summary
        .split_once(" s (")
        .map_or("", |(_, how)| how)
        .to_string()
}

/// Checks the summary of a `--threads 2` decoding in ranges cut as `how` says (`""`: by
/// the planner's pass): every range joined the one before, or the ranges ended early for
/// a record the kernel committed after newer ones went out (its writer preempted between
/// taking its time and committing, under load), which one decoder counts late too: the
/// planner stops cutting there, and ranges cut by an index are decoded again from there.
/// That is allowed (said, and the bytes still compared by the caller); any other reason
/// fails. Returns whether the ranges ended early.
fn ranges_joined(summary: &str, how: &str) -> bool {
    let head = format!("ranges by 2 threads{how}");
    let early = [
        (", the last from where cutting stopped: ", "arrives late"),
        (
            ", then decoded again whole by one thread",
            "a record in it came late, or its order buffer filled",
        ),
    ];
    for (mark, why) in early {
        if let Some((before, after)) = summary.split_once(mark) {
            assert!(before.ends_with(&head), "{summary}");
            assert!(after.contains(why), "{summary}");
            eprintln!("the ranges ended early: {summary}");
            return true;
        }
    }
    assert!(summary.ends_with(&format!("{head})")), "{summary}");
    false
}

#[test]
fn ranges_joined_tells_early_ends_for_late_records_from_the_others() {
    let index = ", cut where the file's range index says";
    assert!(!ranges_joined(
        &format!("in 4 ranges by 2 threads{index})"),
        index
    ));
    assert!(!ranges_joined("in 4 ranges by 2 threads)", ""));
    assert!(ranges_joined(
        "in 2 ranges by 2 threads, the last from where cutting stopped: a record at byte \
         9000 arrives late)",
        ""
    ));
    assert!(ranges_joined(
        &format!(
            "in 4 ranges by 2 threads{index}, then decoded again whole by one thread from \
             where the ranges stopped (range 2 ends early: a record in it came late, or its \
             order buffer filled))"
        ),
        index
    ));
    for other in [
        "in 2 ranges by 2 threads, the last from where cutting stopped: too many context \
         records)",
        "in 4 ranges by 2 threads, then decoded again whole by one thread from where the \
         ranges stopped (range 3 does not start where range 2 ended))",
        "in 4 ranges by 2 threads)",
    ] {
        let failed = std::panic::catch_unwind(|| ranges_joined(other, index));
        assert!(failed.is_err(), "{other}");
    }
}

/// `--threads 2`, `3`, `4` and `8` write what `--threads 1` writes from `input` (from its
/// path, also in ranges of 64 KiB (many cuts) and 16 MiB (one range); and through a pipe
/// when `pipe`), with the same exit status and notes; returns `--threads 1`'s output.
fn same_as_one(input: &Path, pipe: bool) -> Output {
    let one = decode(input, "1", false);
    let name = input.display();
    let small = ["--range-size", "64K"];
    let large = ["--range-size", "16M"];
    for (threads, extra) in [
        ("2", &[][..]),
        ("3", &[]),
        ("4", &[]),
        ("8", &[]),
        ("2", &small),
        ("3", &small),
        ("8", &small),
        ("2", &large),
    ] {
        let many = decode_with(input, threads, false, extra);
        assert_eq!(
            many.status.code(),
            one.status.code(),
            "{name} --threads {threads}"
        );
        assert!(
            many.stdout == one.stdout,
            "{name}: --threads {threads} wrote other bytes ({} vs {})",
            many.stdout.len(),
            one.stdout.len()
        );
        assert_eq!(stderr_notes(&many), stderr_notes(&one), "{name}");
    }
    if pipe {
        for threads in ["1", "2"] {
            let piped = decode(input, threads, true);
            assert_eq!(piped.status.code(), one.status.code(), "{name} piped");
            assert!(
                piped.stdout == one.stdout,
                "{name}: piped in, --threads {threads} wrote other bytes"
            );
        }
    }
    one
}

/// How many ranges the summary note `how` says (`in 5 ranges by …`).
fn ranges_in(how: &str) -> usize {
    how.strip_prefix("in ")
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not in ranges: {how}"))
}

/// The data section (offset, size) of a file-mode perf.data.
fn data_section(file: &[u8]) -> (usize, usize) {
    let word = |at: usize| u64::from_le_bytes(file[at..at + 8].try_into().unwrap()) as usize;
    (word(40), word(48))
}

/// How many cuts the range index of `file` (a finished `record --raw` perf.data) notes.
fn index_cuts(file: &[u8]) -> usize {
    use uevrec_parsers::perf_data::index::RangeIndex;
    let (at, size) = data_section(file);
    let index = RangeIndex::find(
        &file[at..at + size],
        at as u64,
        uevrec_parsers::Endian::Little,
    );
    index
        .expect("a readable index")
        .expect("a range index")
        .cuts
        .len()
}

/// `file` (a finished `record --raw` perf.data) with its range index's tail mark gone.
fn without_index(file: &[u8]) -> Vec<u8> {
    use uevrec_parsers::perf_data::index::{INDEX_MAGIC, TAIL_SIZE};
    let (at, size) = data_section(file);
    let tail = at + size - TAIL_SIZE;
    assert_eq!(&file[tail + 8..tail + 16], INDEX_MAGIC, "a range index");
    let mut out = file.to_vec();
    out[tail + 8..tail + 16].copy_from_slice(b"notindex");
    out
}

/// `file` with every cut of its range index given limits 1 µs lower (those of 1 µs or
/// more: a cut before the first sample has limits of 0, the start-up scan's context
/// records' time).
fn wrong_limits(file: &[u8]) -> Vec<u8> {
    use uevrec_parsers::perf_data::index::{KIND_CUTS, TAIL_SIZE};
    let (at, size) = data_section(file);
    let end = at + size - TAIL_SIZE;
    let mut out = file.to_vec();
    let mut rec = u64::from_le_bytes(out[end + 24..end + 32].try_into().unwrap()) as usize;
    let mut cuts = 0;
    while rec < end {
        let misc = u16::from_le_bytes([out[rec + 4], out[rec + 5]]);
        let len = usize::from(u16::from_le_bytes([out[rec + 6], out[rec + 7]]));
        if misc == KIND_CUTS {
            for cut in (rec + 8..rec + len).step_by(32) {
                for limit in [cut + 16, cut + 24] {
                    let v = u64::from_le_bytes(out[limit..limit + 8].try_into().unwrap());
                    if let Some(lower) = v.checked_sub(1000) {
                        out[limit..limit + 8].copy_from_slice(&lower.to_le_bytes());
                        cuts += 1;
                    }
                }
            }
        }
        rec += len;
    }
    assert!(cuts > 0, "the index has cuts with limits to lower");
    out
}

/// The sum of the `lost` lines' counts in `out` (only those lines parsed; summed by
/// [`crate::common::session::lost_total`]).
fn lost_count(out: &Output) -> usize {
    const LOST: &[u8] = b"\"uevrec\":\"lost\"";
    let lost: Vec<serde_json::Value> = (out.stdout.split(|&b| b == b'\n'))
        .filter(|l| l.windows(LOST.len()).any(|w| w == LOST))
        .map(|l| serde_json::from_slice(l).expect("a JSON line"))
        .collect();
    crate::common::session::lost_total(&lost) as usize
}

/// Records (lines without a `uevrec` key) in `out`.
fn records(out: &Output) -> usize {
    out.stdout
        .split(|&b| b == b'\n')
        .filter(|l| l.starts_with(b"{") && !l.windows(9).any(|w| w == b"\"uevrec\":"))
        .count()
}

/// A `record --raw` perf.data and a `--raw-format trace-dat` trace.dat, in `dir`, of one
/// burst of `calls` getppid calls (the perf.data's lines in `r.json`).
pub(crate) fn record_both(dir: &Path, calls: u32) -> (PathBuf, PathBuf) {
    let (data, dat) = (dir.join("r.data"), dir.join("r.dat"));
    let (json, log_data, log_dat) = (
        dir.join("r.json"),
        dir.join("data.log"),
        dir.join("dat.log"),
    );
    let mut child = burst_child(calls);
    let raw = [
        "--raw",
        data.to_str().unwrap(),
        "-o",
        json.to_str().unwrap(),
    ];
    let mut perf = record(&child, &raw, &log_data);
    wait_attached(&json, &mut perf);
    let trace_dat = [
        "--backend",
        "ftrace",
        "--raw",
        dat.to_str().unwrap(),
        "--raw-format",
        "trace-dat",
    ];
    let mut ftrace = record(&child, &trace_dat, &log_dat);
    wait_attached(&log_dat, &mut ftrace);
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait().unwrap().success());
    sleep(Duration::from_millis(300));
    stop(&mut perf, &log_data);
    stop(&mut ftrace, &log_dat);
    (data, dat)
}

#[test]
fn decode_threads_write_the_bytes_of_one_thread() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (data, dat) = record_both(dir.path(), N);

    // The finished perf.data has a range index: cut where it says (the summary says how
    // many ranges; every one joined the one before, or it would say "decoded again").
    // A burst drained in fewer than two rounds gives an index with no cut (seen in CI: a
    // cut needs the round before it): then --range-size cuts by the planner's pass, and
    // the default is staged, saying why.
    let recorded = fs::read(&data).unwrap();
    let cuts = index_cuts(&recorded);
    let indexed = shared(&decode_with(&data, "2", false, &["--range-size", "64K"]));
    let cut = ", cut where the file's range index says";
    if cuts == 0 {
        eprintln!("the recording's index notes no cut: {indexed}");
        ranges_joined(&indexed, "");
    } else if !ranges_joined(&indexed, cut) {
        // As many as the file has rounds past 64 KiB (the burst fills the 4 MiB
        // rings a few times: a few rounds); the pure tests cut at every round.
        let n = ranges_in(&indexed);
        assert!(n >= 2, "{indexed}: a 10 MB perf.data in 64 KiB ranges");
    }
    let by_default = shared(&decode(&data, "2", false));
    if cuts == 0 {
        assert!(
            by_default.contains("its range index does not serve"),
            "{by_default}"
        );
    } else {
        assert!(
            by_default.contains("cut where the file's range index says"),
            "{by_default}"
        );
    }
    // The same file without its index (the tail's mark gone, as a file of perf's): cut by
    // a pass ahead of the workers with --range-size, staged without.
    let plain = dir.path().join("plain.data");
    fs::write(&plain, without_index(&recorded)).unwrap();
    let planned = shared(&decode_with(&plain, "2", false, &["--range-size", "64K"]));
    if !ranges_joined(&planned, "") {
        assert!(ranges_in(&planned) >= 2, "{planned}");
    }
    let staged = shared(&decode(&plain, "2", false));
    assert!(staged.starts_with("2 formatting threads"), "{staged}");
    // With an index whose time limits are wrong (lowered by 1 µs): the
    // first range that does not start where the one before ended is found, and the
    // rest decoded again by one thread (the same bytes: `same_as_one` below).
    let wrong = dir.path().join("wrong.data");
    if cuts > 0 {
        fs::write(&wrong, wrong_limits(&recorded)).unwrap();
        let again = shared(&decode_with(&wrong, "2", false, &["--range-size", "64K"]));
        assert!(
            again.contains("then decoded again whole by one thread"),
            "{again}"
        );
    } else {
        fs::copy(&data, &wrong).unwrap();
    }
    // A trace.dat, in windows of time (as many as 64 KiB of pages each make; the pure
    // tests check every cut), each of which vouched for its lines.
    let windows = shared(&decode_with(&dat, "2", false, &["--range-size", "64K"]));
    let n: usize = windows
        .strip_prefix("in ")
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not in windows: {windows}"));
    assert!(n >= 2, "{windows}: a trace.dat in 64 KiB windows");
    assert!(
        windows.ends_with("windows of time by 2 threads)"),
        "{windows}"
    );

    // Every call is a record or counted lost (a busy machine can overflow the rings: seen
    // in CI, 74,727 recorded of 80,000; the files must still decode alike).
    for (file, input, pipe) in [
        ("perf.data", &data, true),
        ("perf.data without its index", &plain, false),
        ("perf.data with a wrong index", &wrong, false),
        ("trace.dat", &dat, false),
    ] {
        let one = same_as_one(input, pipe);
        assert_eq!(one.status.code(), Some(0), "{file}");
        let (got, lost) = (records(&one), lost_count(&one));
        assert_eq!(
            got + lost,
            N as usize,
            "{file}: {got} records + {lost} lost"
        );
        assert!(got > 0, "{file}: no records");
    }

    // Cut short: every whole record, the `truncated` notice and exit status 3, whatever
    // the thread count (the trace.dat cut inside its CPU data, past its first page).
    for (file, keep) in [(&data, 0.6), (&dat, 0.7)] {
        let bytes = fs::read(file).unwrap();
        let cut = dir.path().join("cut");
        fs::write(&cut, &bytes[..(bytes.len() as f64 * keep) as usize]).unwrap();
        let one = same_as_one(&cut, file == &data);
        assert_eq!(one.status.code(), Some(3), "{}", stderr_notes(&one));
        if file == &dat {
            let how = shared(&decode(&cut, "2", false));
            assert!(how.contains("not in windows of time: CPU"), "{how}");
        }
        let n = records(&one);
        assert!(n > 1000 && n < N as usize, "{n} records of a cut file");
        assert!(
            String::from_utf8_lossy(&one.stdout).contains("\"what\":\"truncated\""),
            "a truncated notice"
        );
    }
}
