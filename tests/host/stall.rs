//! A slow sink pushes back to the rings and shows as LOST, never as unbounded memory.
//!
//! `uevrec tail` records `raw_syscalls:sys_enter` of a child calling getppid flat out for
//! `UEVREC_STALL_SECS` seconds (default 60), while the reader of uevrec's stdout stalls
//! for that whole time. uevrec's RSS is sampled twice a second and must stay under
//! [`RSS_BOUND_KIB`] (docs/overview.md: "Memory"); afterwards the stream is read and
//! `recorded + lost == produced` must hold exactly.
//! Needs root and tracefs (prints why it is skipped otherwise).

use std::io::{BufReader, Read, Write};
use std::thread;
use std::time::{Duration, Instant};

/// The documented bound on uevrec's resident memory with 16-page rings: binary + heap +
/// the two fixed buffer pools (≈ 11.2 MiB, see `src/pipeline/pool.rs`).
const RSS_BOUND_KIB: u64 = 32 * 1024;

fn vm_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
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

    let mut max_rss = 0;
    let stall_end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < stall_end {
        if let Some(kib) = vm_rss_kib(rec.id()) {
            max_rss = max_rss.max(kib);
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
         LOST lines, max RSS {max_rss} KiB (bound {RSS_BOUND_KIB} KiB)"
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
    assert!(max_rss > 0, "RSS was never sampled");
    assert!(max_rss < RSS_BOUND_KIB, "RSS {max_rss} KiB over the bound");
}
