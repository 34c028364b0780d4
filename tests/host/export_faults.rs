//! `record --otlp` under faults on the host kernel (host tier: root, tracefs), as
//! tests/host/export.rs: a perl child calls `syscall(getppid, 424242, SEQ)`, uevrec records
//! `raw_syscalls:sys_enter` of that child and exports to the real receivers of
//! tests/common/otlp_receiver.rs on 127.0.0.1. Here the faults of issue 24:
//!
//! - the spool full during an outage, with `--spool-full block` (the pipeline pushes back,
//!   the kernel counts what it lost) and `drop-oldest` (the oldest batches dropped,
//!   counted as `spool_full`);
//! - spool files truncated and corrupted between two runs (the intact batches arrive, the
//!   damaged ones are reported and counted, none is sent twice);
//! - the spool's filesystem full (a 512 KiB tmpfs: `spool_io` drops, said on stderr);
//! - `/metrics` read by a real Prometheus text parser equal to the end-of-run summary;
//! - `/readyz` flipping when the collector goes away and comes back.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::common::NR_GETPPID;
use crate::common::PATIENCE;
use crate::common::bin;
use crate::common::export::*;
use crate::common::otlp_receiver::{Kind, Mode, Receiver};
use crate::common::tier::{self, Tier};
use crate::common::wait_for;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use prost::Message;

macro_rules! require_host {
    () => {
        if !crate::common::raw_syscalls_here() {
            return;
        }
    };
}

/// A running `uevrec record --otlp-endpoint EP --otlp-protocol grpc --metrics-listen ADDR`
/// of the producer's calls, with its metrics address.
struct Rec {
    child: Child,
    addr: String,
}

/// Start uevrec and wait until its `/metrics` says the tracepoint is attached (on
/// failure: its stderr).
fn uevrec(producer: &Producer, endpoint: &str, extra: &[&str]) -> Rec {
    let addr = format!("127.0.0.1:{}", free_port());
    let mut child = Command::new(bin())
        .args(["record", "--otlp-endpoint", endpoint])
        .args(["--otlp-protocol", "grpc"])
        .args(["--pid", &producer.pid().to_string()])
        .args(["--filter", &format!("id == {NR_GETPPID}")])
        .args(["-e", TP])
        .args(["--metrics-listen", &addr])
        .args(extra)
        // The environment must not choose for the test.
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
        .env_remove("OTEL_EXPORTER_OTLP_HEADERS")
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning uevrec");
    let start = Instant::now();
    loop {
        let attached = http_get(&addr, "/metrics")
            .is_some_and(|(_, body)| body.lines().any(|l| l == "uevrec_attached_events 1"));
        if attached {
            return Rec { child, addr };
        }
        if start.elapsed() > PATIENCE || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let _ = child.wait();
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            panic!("uevrec did not attach; it said:\n{err}");
        }
        sleep(Duration::from_millis(50));
    }
}

impl Rec {
    /// The sum of the `/metrics` samples named `name` whose label text contains `label`
    /// (0 when there is none).
    fn metric(&self, name: &str, label: &str) -> u64 {
        let (_, body) = http_get(&self.addr, "/metrics").expect("/metrics answers");
        sample_sum(&body, name, label)
    }

    /// SIGINT, then the exit status and stderr.
    fn stop(mut self) -> (ExitStatus, String) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let status =
            crate::common::wait_exit(&mut self.child, PATIENCE).expect("uevrec did not stop");
        (status, self.stderr())
    }

    /// SIGKILL, then its stderr.
    fn kill(mut self) -> String {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.stderr()
    }

    fn stderr(&mut self) -> String {
        let mut err = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        err
    }
}

impl Drop for Rec {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A gRPC receiver that answers every export with UNAVAILABLE (the collector is down).
fn receiver_down() -> Receiver {
    let rx = Receiver::start(Kind::Grpc);
    rx.set_mode(Mode::Unavailable);
    rx
}

/// [`uevrec`] exporting to `rx` through a 256 KiB spool at `spool` that, when full, does
/// what `full` says (`--spool-full`), with `extra` arguments.
fn uevrec_spooling(
    producer: &Producer,
    rx: &Receiver,
    spool: &Path,
    full: &str,
    extra: &[&str],
) -> Rec {
    let spool = spool.to_str().unwrap();
    let mut args = vec![
        "--spool",
        spool,
        "--spool-size",
        "256K",
        "--spool-full",
        full,
    ];
    args.extend_from_slice(extra);
    uevrec(producer, &rx.endpoint(), &args)
}

/// What the receiver got: every SEQ with how often.
fn got(rx: &Receiver) -> BTreeMap<u64, u32> {
    seqs_of(&rx.logs())
}

/// Wait until uevrec has caught up: every call made is recorded or counted lost by the
/// kernel, and nothing waits for the collector. The kernel reports a ring's loss only
/// with the next record written to it: once the queue is empty (the pipeline reads the
/// rings again) a few more calls are made (they fit an emptied one-page ring; the
/// producer must be pinned to one CPU, [`Producer::pin`], for them to reach the ring that
/// lost), again while the counts do not add up.
fn settle(p: &mut Producer, rec: &mut Rec) {
    let start = Instant::now();
    let mut last = String::new();
    while start.elapsed() < PATIENCE {
        let (_, page) = http_get(&rec.addr, "/metrics").expect("/metrics answers");
        let recorded = sample_sum(&page, "uevrec_records_recorded_total", TP);
        let lost = sample_sum(&page, "uevrec_records_lost_total", "");
        let spooled = sample_sum(&page, "uevrec_records_spooled", "");
        let batches = sample_sum(&page, "uevrec_spool_batches", "");
        last = format!(
            "produced {}, recorded {recorded}, lost {lost}, {spooled} records in {batches} \
             batches queued",
            p.next
        );
        if spooled > 0 || batches > 0 {
            sleep(Duration::from_millis(50));
            continue;
        }
        if recorded + lost == p.next {
            return;
        }
        sleep(Duration::from_millis(300));
        p.emit(10);
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            let (_, page) = http_get(&rec.addr, "/metrics").expect("/metrics answers");
            if sample_sum(&page, "uevrec_records_recorded_total", TP)
                + sample_sum(&page, "uevrec_records_lost_total", "")
                == p.next
                && sample_sum(&page, "uevrec_records_spooled", "") == 0
                && sample_sum(&page, "uevrec_spool_batches", "") == 0
            {
                return;
            }
            sleep(Duration::from_millis(50));
        }
    }
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(rec.child.id() as i32, libc::SIGINT) };
    let _ = crate::common::wait_exit(&mut rec.child, PATIENCE);
    panic!(
        "waited {PATIENCE:?} for uevrec to catch up: {last}; uevrec said:\n{}",
        rec.stderr()
    );
}

// ---------------------------------------------------------------------------------------
// 1. The spool full during an outage.

#[test]
fn spool_full_with_block_pushes_back_and_loses_only_in_the_kernel() {
    require_host!();
    const CHUNKS: u64 = 10;
    const CHUNK: u64 = 3_000;
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    let rx = receiver_down();
    let mut p = Producer::start();
    p.pin();
    let mut rec = uevrec_spooling(
        &p,
        &rx,
        &spool,
        "block",
        &[
            // One page per CPU ring: pushed back, the ring overflows at once.
            "-m", "1",
        ],
    );
    for _ in 0..CHUNKS {
        p.emit(CHUNK);
    }
    // The pipeline pushes back: the spool is (nearly) full, the kernel loses.
    let capacity = rec.metric("uevrec_spool_capacity_bytes", "");
    assert_eq!(capacity, 256 << 10);
    wait_for(
        "a (nearly) full spool and the kernel's lost count",
        PATIENCE,
        || {
            rec.metric("uevrec_spool_bytes", "") * 2 > capacity
                && rec.metric("uevrec_records_lost_total", "") > 0
        },
    );
    // Pushed back: while the spool stays full nothing more is handed over, whatever the
    // child does.
    sleep(Duration::from_millis(300));
    let before = rec.metric("uevrec_records_recorded_total", TP);
    p.emit(CHUNK);
    sleep(Duration::from_millis(500));
    assert_eq!(
        rec.metric("uevrec_records_recorded_total", TP),
        before,
        "records handed over while the spool was full"
    );
    assert!(before < CHUNKS * CHUNK);
    assert_eq!(rec.metric("uevrec_records_dropped_total", ""), 0);

    // The collector answers: the spool empties.
    rx.set_mode(Mode::Ok);
    settle(&mut p, &mut rec);
    let produced = p.next;
    let (status, err) = rec.stop();
    assert_clean_exit(status, &err);
    let s = summary(&err);
    let g = got(&rx);
    assert_no_duplicates(&g);
    assert!(s.lost > 0, "{err}");
    assert_eq!(s.recorded + s.lost, produced, "{err}");
    assert_eq!(
        g.len() as u64,
        s.recorded,
        "every recorded SEQ arrives\n{err}"
    );
    assert!(g.contains_key(&(produced - 1)), "the last SEQ arrives");
    assert_eq!((s.dropped, s.pending), (0, 0), "{err}");
    assert_eq!(
        s.tracepoints[TP],
        TpLine {
            recorded: s.recorded,
            exported: s.recorded,
            dropped: 0,
            queued: 0
        },
        "{err}"
    );
}

#[test]
fn spool_full_with_drop_oldest_drops_the_oldest_and_counts_them() {
    require_host!();
    const CHUNKS: u64 = 40;
    const CHUNK: u64 = 500;
    const FIRST: u64 = 10;
    const N: u64 = FIRST + CHUNKS * CHUNK;
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    let rx = receiver_down();
    let mut p = Producer::start();
    // "Oldest" is the order uevrec read the records in. A child moving between CPUs
    // leaves some SEQs in another CPU's ring, read after later ones (seen: 261 SEQs
    // batched about 1,500 SEQs late): on one CPU, batch order is SEQ order.
    p.pin();
    let rec = uevrec_spooling(&p, &rx, &spool, "drop-oldest", &["-m", "4M"]);
    // A first small batch: the oldest of the child's, it may be the one the sender holds
    // (retrying) when the spool fills, which is sent, not dropped. (The sender may hold an
    // in-band notice instead: then this batch is dropped with the rest.)
    p.emit(FIRST);
    wait_for("the first batch", PATIENCE, || {
        rec.metric("uevrec_records_recorded_total", TP) == FIRST
    });
    sleep(Duration::from_millis(200));
    for _ in 0..CHUNKS {
        p.emit(CHUNK);
        sleep(Duration::from_millis(20));
    }
    wait_for("every record handed over", PATIENCE, || {
        rec.metric("uevrec_records_recorded_total", TP)
            + rec.metric("uevrec_records_lost_total", "")
            >= N
    });
    assert!(
        rec.metric("uevrec_records_dropped_total", "reason=\"spool_full\"") > 0,
        "nothing dropped: the spool never filled"
    );
    rx.set_mode(Mode::Ok);
    wait_for("the spool to empty", PATIENCE, || {
        rec.metric("uevrec_spool_batches", "") == 0 && rec.metric("uevrec_records_spooled", TP) == 0
    });
    let (status, err) = rec.stop();
    assert_clean_exit(status, &err);
    let s = summary(&err);
    assert_eq!(
        (s.recorded, s.lost),
        (N, 0),
        "the kernel lost records: the order check below needs all of them\n{err}"
    );
    let tp = s.tracepoints[TP];
    assert_eq!(tp.queued, 0, "{err}");
    assert_eq!(
        s.reasons.keys().collect::<Vec<_>>(),
        ["spool_full"],
        "{err}"
    );
    assert!(tp.dropped > 0, "{err}");
    assert_eq!(tp.recorded, N, "{err}");
    assert_eq!(tp.exported + tp.dropped, N, "{err}");

    let g = got(&rx);
    assert_no_duplicates(&g);
    assert_eq!(g.len() as u64, tp.exported, "received = exported\n{err}");
    let missing: Vec<u64> = (0..N).filter(|s| !g.contains_key(s)).collect();
    assert_eq!(missing.len() as u64, tp.dropped, "missing = dropped\n{err}");
    // The dropped ones are the oldest: one run of SEQs, with nothing received inside it;
    // before it at most the first small batch (the one the sender may hold when the spool
    // fills: sent on return), after it the newest, up to the last.
    let (first, last) = (missing[0], *missing.last().unwrap());
    assert_eq!(
        last - first + 1,
        missing.len() as u64,
        "the dropped SEQs are not one run: {first}..={last} holds {} of them",
        missing.len()
    );
    assert!(
        first <= FIRST,
        "{first} SEQs older than every dropped one arrived: more than the batch in flight"
    );
    assert!(g.contains_key(&(N - 1)), "the newest SEQ must arrive");
}

#[test]
fn stopping_with_a_full_spool_and_the_collector_down_ends_within_the_drain_timeout() {
    require_host!();
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    let rx = receiver_down();
    let mut p = Producer::start();
    let mut rec = uevrec_spooling(&p, &rx, &spool, "block", &["--drain-timeout", "2s"]);
    let capacity = rec.metric("uevrec_spool_capacity_bytes", "");
    while rec.metric("uevrec_spool_bytes", "") * 2 <= capacity {
        assert!(p.next < 200_000, "the spool does not fill");
        p.emit(2_000);
    }
    // More than fits: the writer waits for room.
    p.emit(20_000);
    sleep(Duration::from_millis(500));
    let stopping = Instant::now();
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(rec.child.id() as i32, libc::SIGINT) };
    let status = crate::common::wait_exit(&mut rec.child, Duration::from_secs(20));
    let took = stopping.elapsed();
    let err = rec.stderr();
    let status = status.unwrap_or_else(|s| {
        panic!("still running 20 s after SIGINT (killed: {s:?}); it said:\n{err}")
    });
    assert_clean_exit(status, &err);
    assert!(
        took < Duration::from_secs(10),
        "stopping took {took:?}\n{err}"
    );
    let s = summary(&err);
    // Nothing reached the collector; what is in the spool waits for the next run, what
    // did not fit is counted.
    assert_eq!(s.exported, 0, "{err}");
    assert!(s.pending > 0, "{err}");
    let tp = s.tracepoints[TP];
    assert_eq!(tp.recorded, tp.exported + tp.dropped + tp.queued, "{err}");
    assert!(tp.queued > 0, "{err}");
    assert!(
        err.contains("stopped while waiting for room in the spool"),
        "{err}"
    );
    assert!(
        s.reasons.keys().all(|r| r == "shutdown") && s.reasons.contains_key("shutdown"),
        "the batches that found no room are dropped as shutdown\n{err}"
    );
    assert_eq!(s.recorded + s.lost, p.next, "{err}");
}

// ---------------------------------------------------------------------------------------
// 2. Spool files truncated and corrupted.

/// A batch frame in a spool segment log (tests read the format of parsers/src/spool.rs:
/// 40-byte header `uSp1`, crc, len, meta_len, id, records, payload crc, 0; meta; body).
#[derive(Debug, Clone)]
struct Frame {
    file: PathBuf,
    offset: u64,
    len: u64,
    meta_len: u64,
    id: u64,
    records: u64,
    /// SEQs in its body.
    seqs: BTreeSet<u64>,
}

/// Every whole frame in the spool's segment logs, oldest first (a frame still being
/// written ends a file's list).
fn frames(spool: &Path) -> Vec<Frame> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(spool)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("seg-") && n.ends_with(".log")
        })
        .collect();
    logs.sort();
    let mut out = Vec::new();
    for log in logs {
        let bytes = std::fs::read(&log).unwrap();
        let mut at = 0usize;
        while at + 40 <= bytes.len() && &bytes[at..at + 4] == b"uSp1" {
            let u32_at =
                |o: usize| u32::from_le_bytes(bytes[at + o..at + o + 4].try_into().unwrap());
            let u64_at =
                |o: usize| u64::from_le_bytes(bytes[at + o..at + o + 8].try_into().unwrap());
            let (len, meta_len) = (u32_at(8) as usize, u32_at(12) as usize);
            let end = at + 40 + len;
            if end > bytes.len() {
                break;
            }
            let Ok(req) = ExportLogsServiceRequest::decode(&bytes[at + 40 + meta_len..end]) else {
                break;
            };
            out.push(Frame {
                file: log.clone(),
                offset: at as u64,
                len: len as u64,
                meta_len: meta_len as u64,
                id: u64_at(16),
                records: u64_at(24),
                seqs: seqs_of([&req]).into_keys().collect(),
            });
            at = end;
        }
    }
    out
}

/// Ids named by the spool's ack files (batches that left it).
fn acked(spool: &Path) -> BTreeSet<u64> {
    let mut ids = BTreeSet::new();
    for e in std::fs::read_dir(spool).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "ack") {
            for r in std::fs::read(&p).unwrap().chunks_exact(16) {
                ids.insert(u64::from_le_bytes(r[..8].try_into().unwrap()));
            }
        }
    }
    ids
}

fn flip_byte(file: &Path, at: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .unwrap();
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x5a], at).unwrap();
}

#[test]
fn truncated_and_corrupt_spool_files_send_the_intact_batches_and_count_the_rest() {
    require_host!();
    const CHUNK: u64 = 500;
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    let spool_arg = ["--spool", spool.to_str().unwrap(), "--spool-size", "2M"];
    let rx = Receiver::start(Kind::Grpc);
    let mut p = Producer::start();
    let rec = uevrec(&p, &rx.endpoint(), &spool_arg);
    // Some batches acknowledged (small: they stay in a segment with pending ones) …
    for _ in 0..3 {
        p.emit(50);
    }
    let delivered = p.next;
    wait_for("the first records", PATIENCE, || {
        got(&rx).len() as u64 == delivered
    });
    // … the rest spooled while the collector refuses, one chunk after the other (each in
    // batches of its own; the first small, in the segment of the acknowledged ones), then
    // uevrec is killed.
    rx.set_mode(Mode::Unavailable);
    for n in [50].into_iter().chain([CHUNK; 12]) {
        p.emit(n);
        let want = p.next;
        wait_for("the chunk in the spool", PATIENCE, || {
            let f = frames(&spool);
            (delivered..want).all(|s| f.iter().any(|f| f.seqs.contains(&s)))
        });
    }
    let produced = p.next;
    let _ = rec.kill();

    let acked = acked(&spool);
    let on_disk = frames(&spool);
    assert!(
        on_disk
            .iter()
            .any(|f| acked.contains(&f.id) && !f.seqs.is_empty()),
        "no acknowledged batch left on disk: a re-send could not show"
    );
    let pending: Vec<Frame> = on_disk
        .into_iter()
        .filter(|f| !acked.contains(&f.id))
        .collect();
    let with_seqs: Vec<&Frame> = pending.iter().filter(|f| !f.seqs.is_empty()).collect();
    assert!(with_seqs.len() >= 6, "{} pending batches", with_seqs.len());
    // Three are damaged: a byte flipped in a body (its header intact: records known), a
    // byte flipped in a header (records unknown), and the last one cut in the middle.
    let body_hit = with_seqs[with_seqs.len() / 2].clone();
    let head_hit = with_seqs[1].clone();
    let cut = (*with_seqs.last().unwrap()).clone();
    assert_eq!(
        cut.id,
        pending.last().unwrap().id,
        "the last batch has SEQs"
    );
    flip_byte(
        &body_hit.file,
        body_hit.offset + 40 + body_hit.meta_len + (body_hit.len - body_hit.meta_len) / 2,
    );
    flip_byte(&head_hit.file, head_hit.offset + 20);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&cut.file)
        .unwrap()
        .set_len(cut.offset + 40 + cut.len / 2)
        .unwrap();
    let damaged: BTreeSet<u64> = [body_hit.id, head_hit.id, cut.id].into();
    let intact: Vec<&Frame> = pending
        .iter()
        .filter(|f| !damaged.contains(&f.id))
        .collect();
    let lost_seqs: BTreeSet<u64> = [&body_hit, &head_hit, &cut]
        .iter()
        .flat_map(|f| f.seqs.iter().copied())
        .collect();

    // A new uevrec on the damaged spool, the collector answering.
    let before = got(&rx);
    rx.set_mode(Mode::Ok);
    let rec = uevrec(&p, &rx.endpoint(), &spool_arg);
    let want: BTreeSet<u64> = (0..produced).filter(|s| !lost_seqs.contains(s)).collect();
    wait_for("the intact batches", PATIENCE, || {
        let g = got(&rx);
        want.iter().all(|s| g.contains_key(s))
    });
    sleep(Duration::from_secs(1));
    let (status, err) = rec.stop();
    assert_clean_exit(status, &err);
    let g = got(&rx);
    assert_no_duplicates(&g);
    let arrived: BTreeSet<u64> = g.keys().copied().collect();
    assert_eq!(
        arrived, want,
        "every intact SEQ once, no damaged one\n{err}"
    );
    assert!(before.keys().all(|s| *s < delivered));

    let records: u64 = intact.iter().map(|f| f.records).sum();
    let known = body_hit.records + cut.records;
    let said = format!(
        "{} batches ({records} records) of an earlier run to send; 3 damaged batches \
         ({known} records known, 1 regions unknown,",
        intact.len()
    );
    assert!(err.contains(&said), "expected «{said}» in\n{err}");
    let s = summary(&err);
    assert_eq!(s.reasons.get("spool_corrupt"), Some(&known), "{err}");
    assert_eq!(s.pending, 0, "{err}");
    let earlier = s.tracepoints["(earlier run)"];
    assert_eq!(
        (earlier.recorded, earlier.exported, earlier.dropped),
        (records, records, 0),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------
// 3. The spool's filesystem full.

/// A tmpfs mounted on a directory, unmounted when dropped (also when the test fails).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Result<Tmpfs, String> {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        let target = CString::new(dir.as_os_str().as_bytes()).unwrap();
        let opts = CString::new(format!("size={size}")).unwrap();
        // SAFETY: mount(2) with NUL-terminated strings that outlive the call.
        let rc = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                opts.as_ptr().cast(),
            )
        };
        if rc != 0 {
            return Err(format!(
                "cannot mount a tmpfs on {}: {}",
                dir.display(),
                std::io::Error::last_os_error()
            ));
        }
        Ok(Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        let target = CString::new(self.0.as_os_str().as_bytes()).unwrap();
        // SAFETY: umount2(2) with a NUL-terminated path that outlives the call.
        if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } != 0 {
            eprintln!(
                "could not unmount {}: {}",
                self.0.display(),
                std::io::Error::last_os_error()
            );
        }
    }
}

#[test]
fn spool_filesystem_full_drops_are_counted_as_spool_io_and_said() {
    require_host!();
    const CHUNK: u64 = 1_000;
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    std::fs::create_dir(&spool).unwrap();
    let _tmpfs = match Tmpfs::mount(&spool, "512k") {
        Ok(t) => t,
        Err(why) => {
            tier::skip(Tier::Host, &why);
            return;
        }
    };
    let rx = receiver_down();
    let mut p = Producer::start();
    // The spool may take 8 MiB, its filesystem has 512 KiB.
    let rec = uevrec(
        &p,
        &rx.endpoint(),
        &["--spool", spool.to_str().unwrap(), "--spool-size", "8M"],
    );
    let mut chunks = 0;
    while rec.metric("uevrec_records_dropped_total", "reason=\"spool_io\"") == 0 {
        assert!(chunks < 100, "{} records and no spool_io drop", p.next);
        p.emit(CHUNK);
        chunks += 1;
        sleep(Duration::from_millis(20));
    }
    // A few more while it is full, then the collector comes back: what was spooled goes,
    // the space comes back, and new records are spooled and sent again.
    for _ in 0..5 {
        p.emit(CHUNK);
        sleep(Duration::from_millis(20));
    }
    rx.set_mode(Mode::Ok);
    wait_for("the spool to empty", PATIENCE, || {
        rec.metric("uevrec_spool_batches", "") == 0 && rec.metric("uevrec_records_spooled", TP) == 0
    });
    let after = p.next;
    p.emit(CHUNK);
    let produced = p.next;
    wait_for("the records made after the spool emptied", PATIENCE, || {
        let g = got(&rx);
        (after..produced).all(|s| g.contains_key(&s))
    });
    let (status, err) = rec.stop();
    assert_clean_exit(status, &err);
    assert!(
        err.contains("No space left on device")
            && err.contains("free space on that filesystem or choose a smaller --spool-size"),
        "{err}"
    );
    // Said once per kind of failure, not once per segment file.
    let said = err.matches("No space left on device").count();
    assert!(said <= 2, "said {said} times:\n{err}");
    let s = summary(&err);
    let spool_io = s.reasons.get("spool_io").copied().unwrap_or(0);
    assert!(spool_io > 0, "{err}");
    assert_eq!(s.reasons.keys().collect::<Vec<_>>(), ["spool_io"], "{err}");
    // What the kernel dropped (a busy CI machine: 631 of 10,000 once) is counted as lost,
    // not exported: the export's own accounting starts at what was recorded.
    assert_eq!(s.recorded + s.lost, produced, "{err}");
    let tp = s.tracepoints[TP];
    assert_eq!(tp.queued, 0, "{err}");
    assert_eq!(tp.recorded, s.recorded, "{err}");
    assert_eq!(tp.exported + tp.dropped, s.recorded, "{err}");
    let g = got(&rx);
    assert_no_duplicates(&g);
    assert_eq!(g.len() as u64, tp.exported, "received = exported\n{err}");
}

// ---------------------------------------------------------------------------------------
// 4. /metrics read by a real Prometheus text parser, equal to the summary.

#[test]
fn metrics_read_by_a_prometheus_parser_equal_the_summary() {
    require_host!();
    require!(Tier::Host, crate::common::prometheus_client_here());
    let rx = Receiver::start(Kind::Grpc);
    let mut p = Producer::start();
    p.pin();
    let mut rec = uevrec(&p, &rx.endpoint(), &["-m", "1"]);
    // Exported, rejected (400), partially rejected, and lost in the kernel (a burst into
    // one-page rings).
    p.emit(2_000);
    settle(&mut p, &mut rec);
    rx.set_mode(Mode::BadRequest);
    p.emit(300);
    settle(&mut p, &mut rec);
    rx.set_mode(Mode::Partial { rejected: 7 });
    p.emit(300);
    settle(&mut p, &mut rec);
    rx.set_mode(Mode::Ok);
    p.emit(50_000);
    settle(&mut p, &mut rec);
    sleep(Duration::from_millis(500));
    let requests_at_scrape = rx.logs().len();
    let page = scrape(&rec.addr);
    let (status, err) = rec.stop();
    assert_clean_exit(status, &err);
    let s = summary(&err);
    assert!(s.lost > 0, "no kernel loss: the test needs some\n{err}");
    for reason in ["rejected", "partial_success"] {
        assert!(s.reasons.get(reason).is_some_and(|n| *n > 0), "{err}");
    }

    let lost = parsed(&page, "uevrec_records_lost_total", &[]);
    assert_eq!(lost, s.lost, "uevrec_records_lost_total\n{err}");
    assert_eq!(
        parsed(
            &page,
            "uevrec_records_recorded_total",
            &[("tracepoint", TP)]
        ),
        s.recorded,
        "{err}"
    );
    assert!(s.tracepoints.contains_key(TP) && s.tracepoints.contains_key("uevrec"));
    // Stopping adds uevrec's own records after the scrape (a `detached` notice per
    // tracepoint): the collector has them, and they are the only difference.
    let late = notices(&rx.logs()[requests_at_scrape..]);
    assert!(
        late.iter().all(|w| w == "detached") && late.len() == 1,
        "records after the scrape: {late:?}"
    );
    let late = late.len() as u64;
    for (tp, line) in &s.tracepoints {
        let t = [("tracepoint", tp.as_str())];
        let from_metrics = TpLine {
            recorded: parsed(&page, "uevrec_records_recorded_total", &t),
            exported: parsed(&page, "uevrec_records_exported_total", &t),
            dropped: parsed(&page, "uevrec_records_dropped_total", &t),
            queued: parsed(&page, "uevrec_records_spooled", &t),
        };
        let mut want = *line;
        if tp == "uevrec" {
            want.recorded -= late;
            want.exported -= late;
        }
        assert_eq!(
            from_metrics, want,
            "{tp}: /metrics against the summary\n{err}"
        );
    }
    for (reason, n) in &s.reasons {
        assert_eq!(
            parsed(&page, "uevrec_records_dropped_total", &[("reason", reason)]),
            *n,
            "dropped {reason}\n{err}"
        );
    }
    assert_eq!(
        parsed(&page, "uevrec_records_exported_total", &[]) + late,
        s.exported,
        "{err}"
    );
    assert_eq!(
        parsed(&page, "uevrec_records_dropped_total", &[]),
        s.dropped,
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------
// 5. /readyz flips with the collector.

#[test]
fn readyz_flips_when_the_collector_goes_away_and_comes_back() {
    require_host!();
    let rx = Receiver::start(Kind::Grpc);
    let mut p = Producer::start();
    let rec = uevrec(&p, &rx.endpoint(), &["--unready-after", "1s"]);
    let get = |path: &str| http_get(&rec.addr, path).expect("the metrics endpoint answers");
    let healthy = || assert_eq!(get("/healthz"), (200, "ok\n".to_string()));
    wait_for("/readyz 200", PATIENCE, || get("/readyz").0 == 200);
    p.emit(100);
    wait_for("the first records", PATIENCE, || got(&rx).len() == 100);
    assert_eq!(get("/readyz"), (200, "ready\n".to_string()));
    healthy();

    // The collector goes away; records keep coming (the exporter tries, and fails).
    let port = rx.stop();
    p.emit(100);
    let gone = Instant::now();
    let mut body = String::new();
    wait_for("/readyz 503", Duration::from_secs(10), || {
        healthy();
        let (status, b) = get("/readyz");
        body = b;
        status == 503
    });
    assert!(
        gone.elapsed() >= Duration::from_secs(1),
        "unready after {:?}, before --unready-after",
        gone.elapsed()
    );
    assert!(
        body.starts_with("collector unreachable for ") && body.contains("(more than 1.0 s)"),
        "{body}"
    );
    assert_eq!(rec.metric("uevrec_ready", ""), 0);

    // It comes back on the same port: ready again, and what waited arrives.
    let rx = Receiver::start_on(Kind::Grpc, port);
    wait_for("/readyz 200 again", PATIENCE, || {
        healthy();
        get("/readyz").0 == 200
    });
    assert_eq!(rec.metric("uevrec_ready", ""), 1);
    wait_for("the records made while it was away", PATIENCE, || {
        got(&rx).len() == 100
    });
    healthy();
    let (status, err) = rec.stop();
    assert_clean_exit(status, &err);
    let s = summary(&err);
    assert_eq!((s.recorded, s.dropped, s.pending), (200, 0, 0), "{err}");
}
