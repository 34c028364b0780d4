//! A slow sink pushes back to the rings and shows as LOST, never as unbounded memory.
//!
//! `uevrec tail` records `raw_syscalls:sys_enter` of a child calling getppid flat out for
//! `UEVREC_STALL_SECS` seconds (default 60), while the reader of uevrec's stdout stalls
//! for that whole time. uevrec's anonymous resident memory (heap, pools, stacks: what
//! could grow) is sampled twice a second and must stay under [`ANON_BOUND_KIB`]
//! (docs/overview.md: "Memory"); afterwards the stream is read and
//! `recorded + lost == produced` must hold exactly.
//! Needs root and tracefs (prints why it is skipped otherwise).

use std::io::{BufReader, Read, Write};
use std::thread;
use std::time::{Duration, Instant};

/// The bound on uevrec's anonymous resident memory with 16-page rings: the two fixed
/// buffer pools (≈ 11.2 MiB, see `src/pipeline/pool.rs`), the heap, the threads' stacks
/// and malloc arenas (11.8–14.1 MiB measured, debug build); a stalled output held in
/// memory instead of pushed back to the rings would pass it within a second. The
/// binary's own pages (RssFile) are left out: they grow with the code linked in (a debug
/// build's 15 MiB became 18.7 MiB with cel and blazesym), not with a stall.
const ANON_BOUND_KIB: u64 = 20 * 1024;

/// `/proc/PID/status`'s `KEY:` in KiB (`VmRSS`, `RssAnon`, …).
fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status
        .lines()
        .find(|l| l.strip_prefix(key).is_some_and(|r| r.starts_with(':')))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn stalled_reader_gives_lost_lines_and_bounded_memory() {
    if !crate::common::raw_syscalls_here() {
        return;
    }
    let secs: u64 = std::env::var("UEVREC_STALL_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);

    let mut producer = crate::common::getppid_producer(secs);

    let mut rec = crate::common::tail_getppid(producer.id(), &["-m", "16"]);
    let mut out = BufReader::new(rec.stdout.take().unwrap());

    // Read up to the attached notice, then stop reading: the stall.
    crate::common::read_to_attached(&mut out);
    producer.stdin.take().unwrap().write_all(b"go\n").unwrap();

    let (mut max_rss, mut max_anon) = (0, 0);
    let stall_end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < stall_end {
        if let Some(kib) = status_kib(rec.id(), "VmRSS") {
            max_rss = max_rss.max(kib);
        }
        if let Some(kib) = status_kib(rec.id(), "RssAnon") {
            max_anon = max_anon.max(kib);
        }
        thread::sleep(Duration::from_millis(500));
    }
    let produced = crate::common::producer_count(&mut producer);

    // Stop uevrec; it drains into the pipe as we read it now.
    // SAFETY: kill on a child we own.
    assert_eq!(unsafe { libc::kill(rec.id() as i32, libc::SIGINT) }, 0);
    let crate::common::GetppidTally {
        recorded,
        lost,
        lost_lines,
    } = crate::common::tally_getppid(out);
    let status = rec.wait().unwrap();
    let mut err = String::new();
    rec.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "uevrec failed: {status}: {err}");
    eprintln!(
        "stall {secs}s: produced {produced}, recorded {recorded}, lost {lost} in {lost_lines} \
         LOST lines, max RSS {max_rss} KiB, max RssAnon {max_anon} KiB (bound \
         {ANON_BOUND_KIB} KiB)"
    );
    assert!(
        lost_lines > 0,
        "a {secs}s stall must overflow 16-page rings"
    );
    assert_eq!(
        recorded + lost,
        produced,
        "recorded + lost must equal produced"
    );
    assert!(max_anon > 0, "RssAnon was never sampled");
    assert!(
        max_anon < ANON_BOUND_KIB,
        "RssAnon {max_anon} KiB over the bound"
    );
}
