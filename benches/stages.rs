//! The stages that stay single-threaded at any `--threads`, each alone on one core, in
//! records/s (issue 41: each ≥ 40 M records/s, so that none is the ceiling of a 16-CPU
//! machine's 20 M/s):
//!
//! - `session_perf`, `session_ftrace`: the session thread's own work per record (ring
//!   record → staged chunk) on `raw_syscalls:sys_enter` records as the kernel writes them
//!   (a 68-byte payload): a perf ring over anonymous memory filled before each timed read
//!   (`Ring::publish`), parsed by the perf backend's `arrival`; and `trace_pipe_raw` pages
//!   in a tmpfs file read by the ftrace backend's `CpuReader`. The consumer is the sample
//!   arm of the session's stager (`src/capture/session/stager.rs`, `Stager::take`: key →
//!   slot and self-exclusion, written out here because the stager is private; then the
//!   session's own `stage_sample`: wall-clock stamp, `push_record_stacked`; a full chunk
//!   sent through the real `StageSender`).
//! - `reorder`: the reorder stage (`uevrec-order`, `formatter::merge`: `Reorder` push/pop,
//!   a credit back, the batch on to the writer) on parts of a full batch each, from 4
//!   workers in a shuffled order.
//! - `writer`: `write_batches` (`uevrec-write`) into a `RotatingFile` on `/dev/null` and
//!   on a tmpfs file, batches of real JSON lines of `BATCH_BYTES`; `write_floor_tmpfs`
//!   writes the same bytes with bare `write(2)` calls (the kernel's share of the cost).
//! - `otlp`: the thread that builds OTLP requests (`--format otlp`) and export frames
//!   (`--otlp`): the formatter with `--threads 1` (`formatter::run`), and with 2 workers;
//!   a writer thread gives the buffers back.
//!
//! Every stage is timed by the CPU time of the thread that runs it
//! (`CLOCK_THREAD_CPUTIME_ID`: its work alone on one core, whatever else the machine runs;
//! the untimed set-up aside), except `otlp_*/N`, timed by the wall clock (1 vs 2 workers).
//!
//! Run: `cargo bench --bench stages -- --warm-up-time 1 --measurement-time 2`.

use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread;
use std::time::Duration;

/// The CPU time this thread has used.
fn cpu_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use crossbeam_channel::{Receiver, Sender};

use uevrec::capture::backend::Arrival;
use uevrec::capture::clock::WallClock;
use uevrec::capture::ftrace::CpuReader;
use uevrec::capture::perf::Ring;
use uevrec::capture::perf::backend::arrival;
use uevrec::capture::session::{KeySlots, stage_sample};
use uevrec::capture::staging::{
    FormatSource, STAGE_BYTES, STAGE_CAPACITY, StageSender, Staged, StagedChunk, touched_buffers,
};
use uevrec::outputs::sink::file::{FileOptions, RotatingFile};
use uevrec::outputs::sink::write_batches;
use uevrec::pipeline::formatter::{FormatterOptions, run_parallel};
use uevrec::pipeline::{BATCH_BYTES, BATCH_CAPACITY, Batch, Reorder, batch_pool};
use uevrec_parsers::ftrace_page::PageLayout;
use uevrec_parsers::otlp::OtlpEncoding;
use uevrec_parsers::perf_data::writer::{Stamp, push_sample};
use uevrec_parsers::perf_sample::{SampleFormat, sample_type};
use uevrec_parsers::{
    ContextTracker, Endian, LineOptions, OutputFormat, PreparedFormat, RecordStamp,
};
use uevrec_samples::register::format_file_text;

/// The sample id of the one attached event.
const KEY: u64 = 4711;
/// The tracefs id of `raw_syscalls:sys_enter` here.
const TYPE: u16 = 22;

/// A `raw_syscalls:sys_enter` trace entry (x86_64: common fields, id, six arguments) of
/// thread `tid`, argument 1 = `seq`: 64 bytes (68 staged, as the kernel pads it).
fn sys_enter_entry(tid: u32, seq: u64) -> Vec<u8> {
    let mut raw = TYPE.to_ne_bytes().to_vec();
    raw.extend_from_slice(&[0, 0]);
    raw.extend_from_slice(&(tid as i32).to_ne_bytes());
    raw.extend_from_slice(&110i64.to_ne_bytes());
    for a in [424_242, seq, 0, 0, 0, 0u64] {
        raw.extend_from_slice(&a.to_ne_bytes());
    }
    raw
}

/// The thread of record `i`: one thread per CPU, as a busy ring holds.
fn tid_of(i: u64) -> u32 {
    4000 + (i / 4096) as u32 % 4
}

/// The consumer the session's stager is (`Stager::take`, its sample arm), on one event.
struct Taker<'a> {
    by_key: KeySlots,
    clock: WallClock,
    self_pid: u32,
    records: Vec<u64>,
    chunk: StagedChunk,
    out: &'a StageSender<'a>,
}

impl Taker<'_> {
    // In line, as the stager's sample arm is.
    #[inline(always)]
    fn take(&mut self, cpu: u32, a: Arrival<'_>) -> ControlFlow<()> {
        if let Arrival::Sample { key, pid, .. } = a {
            let Some(slot) = key.and_then(|k| self.by_key.get(k)) else {
                return ControlFlow::Continue(());
            };
            if pid == Some(self.self_pid) {
                return ControlFlow::Continue(());
            }
            stage_sample(&mut self.chunk, &self.clock, slot as u32, cpu, &a);
            self.records[slot] += 1;
        }
        if self.chunk.len() >= STAGE_BYTES {
            self.out
                .flush(&mut self.chunk)
                .expect("the pool has chunks");
        }
        ControlFlow::Continue(())
    }
}

/// The staging channel with its pool, emptied by the bench between reads.
struct Staging {
    stage_rx: Receiver<Staged>,
    pool_tx: Sender<Vec<u8>>,
}

fn staging() -> (Staging, Sender<Staged>, Receiver<Vec<u8>>) {
    let (stage_tx, stage_rx) = crossbeam_channel::bounded(64);
    let (pool_tx, pool_rx) = crossbeam_channel::bounded(64);
    for b in touched_buffers(16, STAGE_CAPACITY) {
        let _ = pool_tx.send(b);
    }
    (Staging { stage_rx, pool_tx }, stage_tx, pool_rx)
}

impl Staging {
    /// What the formatter does with the chunks, untimed: give them back.
    fn recycle(&self) {
        for m in self.stage_rx.try_iter() {
            if let Staged::Chunk(c) = m {
                let _ = self.pool_tx.send(c.into_buffer());
            }
        }
    }
}

fn taker<'a>(out: &'a StageSender<'a>, chunk: StagedChunk) -> Taker<'a> {
    let mut by_key = KeySlots::default();
    by_key.insert(KEY, 0);
    Taker {
        by_key,
        clock: WallClock::new(Duration::from_secs(1)),
        self_pid: std::process::id(),
        records: vec![0],
        chunk,
        out,
    }
}

/// Ring data pages: the default ring (512 KiB with 4 KiB pages).
const RING_PAGES: usize = 128;

/// The perf session: publish a ring's worth, then time the read of it.
fn session_perf(c: &mut Criterion) {
    let layout = SampleFormat::new(sample_type::UEVREC | sample_type::CGROUP, true)
        .expect("uevrec's sample_type");
    let ring = Ring::anonymous(RING_PAGES).expect("anonymous ring");
    let mut image = Vec::new();
    let mut n = 0u64;
    // Leave a record's room so the image always fits the free space.
    while image.len() + 256 < RING_PAGES * 4096 {
        let tid = tid_of(n);
        let stamp = Stamp {
            id: KEY,
            pid: tid,
            tid,
            time: 1_000_000_000 + n * 50,
            cpu: 3,
        };
        push_sample(&mut image, &stamp, &sys_enter_entry(tid, n), Some(7)).expect("a small sample");
        n += 1;
    }
    let records = n;
    let (staging, stage_tx, pool_rx) = staging();
    let gone = AtomicBool::new(false);
    let out = StageSender::new(stage_tx, pool_rx, &gone);
    let mut t = taker(&out, out.fresh_chunk().expect("a chunk"));
    let mut ring = ring;
    let mut g = c.benchmark_group("stages");
    g.throughput(Throughput::Elements(records));
    g.sample_size(20);
    // The floor: the same bytes copied once (one `memcpy` of the ring's records into a
    // staging-sized buffer), what any reader that stages them must do at least.
    let mut copy = vec![0u8; image.len()];
    g.bench_function("session_perf_floor", |b| {
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                let start = cpu_now();
                copy.copy_from_slice(std::hint::black_box(&image));
                std::hint::black_box(&mut copy);
                took += cpu_now() - start;
            }
            took
        })
    });
    g.bench_function("session_perf", |b| {
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                assert!(ring.publish(&image));
                let start = cpu_now();
                let got = ring.read(|rec| t.take(3, arrival(&layout, None, rec)));
                took += cpu_now() - start;
                assert_eq!(got, records);
                staging.recycle();
            }
            took
        })
    });
    g.finish();
}

/// An ftrace page (64-bit kernel, 4096 bytes) of sys_enter records from `first` on, as
/// many as fit; and their count.
fn ftrace_page(first: u64) -> (Vec<u8>, u64) {
    let mut data = Vec::new();
    let mut n = 0;
    // A data record: type_len = length / 4 (≤ 28), time delta 50 ns.
    while 16 + data.len() + 4 + 64 <= 4096 {
        let raw = sys_enter_entry(tid_of(first + n), first + n);
        let head: u32 = (raw.len() as u32 / 4) | (50 << 5);
        data.extend_from_slice(&head.to_le_bytes());
        data.extend_from_slice(&raw);
        n += 1;
    }
    let mut page = (1_000_000_000 + first * 50).to_le_bytes().to_vec();
    page.extend_from_slice(&(data.len() as u64).to_le_bytes());
    page.extend_from_slice(&data);
    page.resize(4096, 0);
    (page, n)
}

/// The ftrace session: a `trace_pipe_raw` of 128 pages (a tmpfs file), read page by page.
fn session_ftrace(c: &mut Criterion) {
    let dir = tempfile::tempdir_in("/dev/shm").expect("a tmpfs directory");
    let per_cpu = dir.path().join("per_cpu/cpu3");
    std::fs::create_dir_all(&per_cpu).expect("per_cpu");
    let mut file = std::fs::File::create(per_cpu.join("trace_pipe_raw")).expect("file");
    let mut records = 0;
    for _ in 0..RING_PAGES {
        let (page, n) = ftrace_page(records);
        file.write_all(&page).expect("page");
        records += n;
    }
    drop(file);
    let layout = PageLayout::standard(8, Endian::Little);
    let mut reader = CpuReader::open(dir.path(), 3, 4096).expect("reader");
    let (staging, stage_tx, pool_rx) = staging();
    let gone = AtomicBool::new(false);
    let out = StageSender::new(stage_tx, pool_rx, &gone);
    let mut t = taker(&out, out.fresh_chunk().expect("a chunk"));
    t.by_key.insert(u64::from(TYPE), 0);
    let mut g = c.benchmark_group("stages");
    g.throughput(Throughput::Elements(records));
    g.sample_size(20);
    // The floor: the same pages read with bare `read(2)` calls of a page each (the
    // kernel's share: the system call and its copy), nothing parsed or staged.
    let mut page = vec![0u8; 4096];
    g.bench_function("session_ftrace_floor", |b| {
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                (&reader.file).seek(SeekFrom::Start(0)).expect("seek");
                let start = cpu_now();
                while (&reader.file).read(&mut page).expect("read") > 0 {}
                took += cpu_now() - start;
            }
            took
        })
    });
    g.bench_function("session_ftrace", |b| {
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                (&reader.file).seek(SeekFrom::Start(0)).expect("seek");
                let before = t.records[0];
                let start = cpu_now();
                reader.read(
                    &layout,
                    // The thread → process cache's hit (the thread of the record
                    // before, src/capture/ftrace/tgid.rs) is one compare: left out.
                    Some,
                    false,
                    usize::MAX,
                    None,
                    |a| t.take(3, a),
                );
                took += cpu_now() - start;
                assert_eq!(t.records[0] - before, records);
                staging.recycle();
            }
            took
        })
    });
    g.finish();
}

/// Stage sys_enter record `n` as the session does (slot 0, CPU 3, 50 ns apart).
fn stage_record(chunk: &mut StagedChunk, n: u64) {
    let stamp = RecordStamp {
        time_unix_ns: Some(1_795_345_200_000_000_000 + n * 50),
        cpu: 3,
        pid: tid_of(n),
        tid: tid_of(n),
    };
    chunk.push_record(0, &stamp, &sys_enter_entry(tid_of(n), n));
}

/// Formatted sys_enter lines (as `record` writes them), in full batches.
fn json_batches(batches: usize) -> (Vec<Vec<u8>>, u64) {
    let (prepared, source) = sys_enter_format();
    let mut chunks = vec![Staged::Format {
        slot: 0,
        prepared,
        source,
    }];
    let mut n = 0;
    let mut chunk = StagedChunk::default();
    // About 2800 lines of ≈ 95 bytes per batch: stage a bit more than needed.
    while (n as usize) < batches * BATCH_BYTES / 90 {
        stage_record(&mut chunk, n);
        n += 1;
        if chunk.len() >= STAGE_BYTES {
            chunks.push(Staged::Chunk(std::mem::take(&mut chunk)));
        }
    }
    chunks.push(Staged::Chunk(chunk));
    let lines = format_all(chunks, OutputFormat::JsonLines, 1, true);
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut records = 0;
    for b in lines.into_iter().filter(|b| b.lines.len() >= BATCH_BYTES) {
        records += b.records;
        out.push(b.lines);
        if out.len() == batches {
            break;
        }
    }
    assert_eq!(out.len(), batches);
    (out, records)
}

fn sys_enter_format() -> (Arc<PreparedFormat>, Arc<FormatSource>) {
    let fields = [
        ("long id", 8, 8, true),
        ("unsigned long args[6]", 16, 48, false),
    ];
    let text = format_file_text("sys_enter", TYPE.into(), &fields, "\"NR %ld\", REC->id");
    let format = uevrec_parsers::parse_format(&text).expect("format parses");
    let prepared = PreparedFormat::new(&format, "raw_syscalls", "sys_enter", None);
    let source = FormatSource {
        system: "raw_syscalls".into(),
        name: "sys_enter".into(),
        text,
    };
    (Arc::new(prepared), Arc::new(source))
}

/// Every batch `workers` formatters write for `staged` (copied when `keep`; otherwise
/// only counted), their buffers given back as the writer does.
fn format_all(staged: Vec<Staged>, format: OutputFormat, workers: usize, keep: bool) -> Vec<Batch> {
    let (in_tx, in_rx) = crossbeam_channel::unbounded();
    for m in staged {
        let _ = in_tx.send(m);
    }
    drop(in_tx);
    let (chunk_tx, _chunk_rx) = crossbeam_channel::unbounded();
    let (out_tx, out_rx) = crossbeam_channel::bounded::<Batch>(8);
    let (rec_tx, rec_rx) = crossbeam_channel::unbounded();
    for b in touched_buffers(batch_pool(workers), BATCH_CAPACITY) {
        let _ = rec_tx.send(b);
    }
    let lines = FormatterOptions {
        opts: LineOptions::default(),
        format,
        context: Some(ContextTracker::new()),
        ..Default::default()
    };
    thread::scope(|s| {
        let writer = s.spawn(move || {
            let mut kept = Vec::new();
            for mut b in out_rx.iter() {
                if keep {
                    kept.push(Batch {
                        lines: b.lines.clone(),
                        records: b.records,
                        marks: None,
                    });
                }
                b.lines.clear();
                let _ = rec_tx.send(b.lines);
            }
            kept
        });
        run_parallel(in_rx, chunk_tx, &out_tx, &rec_rx, lines, workers, || {})
            .expect("every batch taken");
        drop(out_tx);
        writer.join().expect("writer")
    })
}

/// Batches per writer run: 64 × 256 KiB = 16 MiB.
const WRITER_BATCHES: usize = 64;

fn writer(c: &mut Criterion) {
    let (batches, records) = json_batches(WRITER_BATCHES);
    let dir = tempfile::tempdir_in("/dev/shm").expect("a tmpfs directory");
    let tmpfs = dir.path().join("out.jsonl");
    let mut g = c.benchmark_group("stages");
    g.throughput(Throughput::Elements(records));
    g.sample_size(20);
    for (name, path) in [
        ("writer_devnull", std::path::PathBuf::from("/dev/null")),
        ("writer_tmpfs", tmpfs),
    ] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut took = Duration::ZERO;
                for _ in 0..iters {
                    let opts = FileOptions {
                        replace: true,
                        ..Default::default()
                    };
                    let mut sink = RotatingFile::open(&path, opts).expect("output");
                    let (tx, rx) = crossbeam_channel::bounded(WRITER_BATCHES);
                    for lines in &batches {
                        let _ = tx.send(Batch {
                            lines: lines.clone(),
                            records: 0,
                            marks: None,
                        });
                    }
                    drop(tx);
                    let (rec_tx, _rec_rx) = crossbeam_channel::bounded(WRITER_BATCHES);
                    let (stop, reopen) = (AtomicBool::new(false), AtomicBool::new(false));
                    let start = cpu_now();
                    write_batches(rx, &rec_tx, &mut sink, &stop, &reopen).expect("written");
                    took += cpu_now() - start;
                }
                took
            })
        });
    }
    // The floor: the same bytes written with `write(2)` into a fresh tmpfs file, nothing
    // else; `writer_tmpfs` against it says how much of the writer's cost is the kernel's.
    let floor = dir.path().join("floor.jsonl");
    g.bench_function("write_floor_tmpfs", |b| {
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                let mut file = std::fs::File::create(&floor).expect("floor file");
                let start = cpu_now();
                for lines in &batches {
                    file.write_all(lines).expect("written");
                }
                took += cpu_now() - start;
            }
            took
        })
    });
    g.finish();
}

/// Parts per reorder run, and the workers they come from.
const PARTS: u64 = 4096;
const WORKERS: usize = 4;

/// The reorder stage's loop (`formatter::merge`), on parts of full batches arriving
/// shuffled within a window of the workers' parts in flight.
fn reorder(c: &mut Criterion) {
    // ≈ 2760 sys_enter lines fill a batch.
    let per_part = 2760u64;
    let mut order: Vec<u64> = (0..PARTS).collect();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for w in order.chunks_mut(WORKERS * 4) {
        for i in (1..w.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.swap(i, (x % (i as u64 + 1)) as usize);
        }
    }
    let mut g = c.benchmark_group("stages");
    g.throughput(Throughput::Elements(PARTS * per_part));
    g.sample_size(20);
    g.bench_function("reorder", |b| {
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                let (tx, parts) = crossbeam_channel::bounded(PARTS as usize);
                for &seq in &order {
                    let batch = Batch {
                        lines: Vec::new(),
                        records: per_part,
                        marks: None,
                    };
                    let _ = tx.send((seq, (seq as usize) % WORKERS, batch));
                }
                drop(tx);
                let credits: Vec<_> = (0..WORKERS)
                    .map(|_| crossbeam_channel::bounded::<()>(PARTS as usize))
                    .collect();
                let (out_tx, out_rx) = crossbeam_channel::bounded::<Batch>(PARTS as usize);
                let mut stage = Reorder::default();
                let start = cpu_now();
                for (seq, worker, batch) in parts.iter() {
                    stage.push(seq, 0, true, (worker, batch));
                    while let Some((worker, batch)) = stage.pop() {
                        let _ = credits[worker].0.try_send(());
                        out_tx.send(batch).expect("taken");
                    }
                }
                took += cpu_now() - start;
                assert_eq!(out_rx.len(), PARTS as usize);
            }
            took
        })
    });
    g.finish();
}

/// The OTLP formatter: staged chunks → OTLP/JSON lines, and → protobuf export frames.
fn otlp(c: &mut Criterion) {
    let (prepared, source) = sys_enter_format();
    let mut staged = vec![Staged::Format {
        slot: 0,
        prepared,
        source,
    }];
    let mut n = 0u64;
    for _ in 0..16 {
        let mut chunk = StagedChunk::default();
        while chunk.len() < STAGE_BYTES {
            stage_record(&mut chunk, n);
            n += 1;
        }
        staged.push(Staged::Chunk(chunk));
    }
    let mut g = c.benchmark_group("stages");
    g.throughput(Throughput::Elements(n));
    g.sample_size(10);
    let max = thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(2);
    for (name, format) in [
        ("otlp_json", OutputFormat::Otlp),
        (
            "otlp_export",
            OutputFormat::OtlpExport(OtlpEncoding::Protobuf),
        ),
    ] {
        g.bench_function(format!("{name}/cpu"), |b| {
            b.iter_custom(|iters| {
                let mut took = Duration::ZERO;
                for _ in 0..iters {
                    let s = staged.iter().map(clone_staged).collect::<Vec<_>>();
                    let start = cpu_now();
                    format_all(s, format, 1, false);
                    took += cpu_now() - start;
                }
                took
            })
        });
        for workers in 1..=max {
            g.bench_function(format!("{name}/{workers}"), |b| {
                b.iter_batched(
                    || staged.iter().map(clone_staged).collect::<Vec<_>>(),
                    |s| format_all(s, format, workers, false),
                    BatchSize::PerIteration,
                )
            });
        }
    }
    g.finish();
}

fn clone_staged(m: &Staged) -> Staged {
    match m {
        Staged::Format {
            slot,
            prepared,
            source,
        } => Staged::Format {
            slot: *slot,
            prepared: prepared.clone(),
            source: source.clone(),
        },
        Staged::Chunk(c) => {
            let mut copy = StagedChunk::default();
            for e in c.encoded() {
                copy.push_encoded(e);
            }
            Staged::Chunk(copy)
        }
        Staged::Drained(t) => Staged::Drained(*t),
    }
}

criterion_group!(benches, session_perf, session_ftrace, reorder, writer, otlp);
criterion_main!(benches);
