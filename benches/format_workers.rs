//! Formatter scaling (`record --threads N`, crate::pipeline::formatter::run_parallel): staged
//! `raw_syscalls:sys_enter` records (as on x86_64: a 68-byte trace entry, cpu/pid/tid
//! varying, context on) formatted into JSON lines by 1, 2 … workers, the batches taken by
//! a writer thread that only gives the buffers back. Target (issue 25): 2 workers ≥ 1.8×
//! the records/s of one on a 2-CPU machine.

use std::sync::Arc;
use std::thread;

use crossbeam_channel::{Receiver, Sender};

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use uevrec::capture::staging::{FormatSource, STAGE_BYTES, Staged, StagedChunk, touched_buffers};
use uevrec::pipeline::formatter::{FormatterOptions, run_parallel};
use uevrec::pipeline::{BATCH_CAPACITY, Batch, batch_pool};
use uevrec_parsers::{ContextTracker, LineOptions, OutputFormat, PreparedFormat, RecordStamp};
use uevrec_samples::register::format_file_text;

/// Records per run: 64 chunks of STAGE_BYTES (≈ 2000 records each).
const CHUNKS: usize = 64;

fn sys_enter() -> (Arc<PreparedFormat>, Arc<FormatSource>, Vec<u8>) {
    let fields = [
        ("long id", 8, 8, true),
        ("unsigned long args[6]", 16, 48, false),
    ];
    let text = format_file_text("sys_enter", 22, &fields, "\"NR %ld\", REC->id");
    let format = uevrec_parsers::parse_format(&text).expect("format parses");
    let prepared = PreparedFormat::new(&format, "raw_syscalls", "sys_enter", None);
    let source = FormatSource {
        system: "raw_syscalls".into(),
        name: "sys_enter".into(),
        text,
    };
    let mut raw = vec![22, 0, 0, 0, 0x92, 0x10, 0, 0];
    let args = [110u64, 424_242, 1, 140_722_793_657_184, 4096, 0, 0];
    raw.extend(args.iter().flat_map(|a| a.to_le_bytes()));
    raw.extend_from_slice(&[0; 4]);
    (Arc::new(prepared), Arc::new(source), raw)
}

/// The staged stream: the format, then full chunks; and its record count.
fn stream() -> (Vec<Staged>, u64) {
    let (prepared, source, mut raw) = sys_enter();
    let mut out = vec![Staged::Format {
        slot: 0,
        prepared,
        source,
    }];
    let mut n = 0u64;
    for _ in 0..CHUNKS {
        let mut chunk = StagedChunk::default();
        while chunk.len() < STAGE_BYTES {
            n += 1;
            raw[24..32].copy_from_slice(&n.to_le_bytes());
            let stamp = RecordStamp {
                time_unix_ns: Some(1_764_000_000_000_000_000 + n * 37),
                cpu: (n % 16) as u32,
                pid: 4000 + (n % 7) as u32,
                tid: 4000 + (n % 7) as u32,
            };
            chunk.push_record(0, &stamp, &raw);
        }
        out.push(Staged::Chunk(chunk));
    }
    (out, n)
}

/// What one run takes, made before it is timed: the staged stream in its channel and the
/// line buffers (touched) in theirs.
struct Input {
    stage_rx: Receiver<Staged>,
    rec_tx: Sender<Vec<u8>>,
    rec_rx: Receiver<Vec<u8>>,
}

fn input(workers: usize) -> Input {
    let (staged, _) = stream();
    let pool = batch_pool(workers);
    let (stage_tx, stage_rx) = crossbeam_channel::bounded(staged.len());
    for m in staged {
        let _ = stage_tx.send(m);
    }
    let (rec_tx, rec_rx) = crossbeam_channel::bounded(pool);
    for b in touched_buffers(pool, BATCH_CAPACITY) {
        let _ = rec_tx.send(b);
    }
    Input {
        stage_rx,
        rec_tx,
        rec_rx,
    }
}

/// Format the stream of `input` with `workers`; the bytes written.
fn format(input: Input, workers: usize) -> u64 {
    let Input {
        stage_rx,
        rec_tx,
        rec_rx,
    } = input;
    let (chunk_tx, _chunk_rx) = crossbeam_channel::unbounded();
    let (out_tx, out_rx) = crossbeam_channel::bounded::<Batch>(8);
    thread::scope(|s| {
        let writer = s.spawn(move || {
            let mut bytes = 0u64;
            for mut b in out_rx.iter() {
                bytes += b.lines.len() as u64;
                b.lines.clear();
                let _ = rec_tx.try_send(b.lines);
            }
            bytes
        });
        let lines = FormatterOptions {
            opts: LineOptions::default(),
            format: OutputFormat::JsonLines,
            session: None,
            context: Some(ContextTracker::new()),
            schema: false,
            filter: None,
            stacks: None,
            stack_maps: None,
            progress: None,
        };
        run_parallel(stage_rx, chunk_tx, &out_tx, &rec_rx, lines, workers, || {})
            .expect("the writer takes every batch");
        drop(out_tx);
        writer.join().expect("writer thread")
    })
}

fn bench(c: &mut Criterion) {
    let (_, records) = stream();
    let mut g = c.benchmark_group("format_workers");
    g.throughput(Throughput::Elements(records));
    g.sample_size(10);
    let max = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2);
    for workers in (1..=max).filter(|w| *w <= 2 || w.is_power_of_two()) {
        g.bench_function(format!("{workers}"), |b| {
            b.iter_batched(
                || input(workers),
                |s| format(s, workers),
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
