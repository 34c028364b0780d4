//! The per-record cost of `record --raw` against a plain copy: 1000 staged
//! `raw_syscalls:sys_enter` records (64-byte trace entries, what a syscall recording
//! stages most) read back from a `StagedChunk` as the raw thread does, then either
//! copied into an output buffer (`copy`: the least any writer does) or encoded as
//! `PERF_RECORD_SAMPLE`s (`perf_sample`: the raw thread's work per record). The output
//! buffer is reused, as in the raw thread: no allocation per record.

use std::hint::black_box;

mod common;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use uevrec::pipeline::{StagedChunk, StagedEntry};
use uevrec_parsers::perf_data::writer::{self, Stamp};

const BATCH: u64 = 1000;

/// The plain copy of every record's trace entry.
#[inline(never)]
fn copy_batch(chunk: &StagedChunk, out: &mut Vec<u8>) -> usize {
    out.clear();
    for e in chunk.entries() {
        if let StagedEntry::Record { raw, .. } = e {
            out.extend_from_slice(raw);
        }
    }
    out.len()
}

/// Every record as a `PERF_RECORD_SAMPLE`, as the raw thread writes it.
#[inline(never)]
fn encode_batch(chunk: &StagedChunk, out: &mut Vec<u8>) -> usize {
    out.clear();
    for e in chunk.entries() {
        if let StagedEntry::Record { stamp, raw, .. } = e {
            let s = Stamp {
                id: 1,
                pid: stamp.pid,
                tid: stamp.tid,
                time: stamp.time_unix_ns.unwrap_or(0),
                cpu: stamp.cpu,
            };
            let _ = writer::push_sample(out, &s, raw, None);
        }
    }
    out.len()
}

fn bench(c: &mut Criterion) {
    let chunk = common::sys_enter_chunk(BATCH, 1);
    let mut out: Vec<u8> = Vec::with_capacity(256 * 1024);
    // Under callgrind: `UEVREC_RAW_ENCODE_RUNS=100 valgrind --tool=callgrind
    // --toggle-collect='*copy_batch*' (or '*encode_batch*') <bench binary>` counts the
    // instructions of 100 batches of each, without criterion's own.
    if let Some(runs) = std::env::var("UEVREC_RAW_ENCODE_RUNS")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
    {
        for _ in 0..runs {
            black_box(copy_batch(black_box(&chunk), &mut out));
            black_box(encode_batch(black_box(&chunk), &mut out));
        }
        return;
    }
    let mut g = c.benchmark_group("raw_encode");
    g.throughput(Throughput::Elements(BATCH));
    g.bench_function("copy", |b| {
        b.iter(|| black_box(copy_batch(&chunk, &mut out)))
    });
    g.bench_function("perf_sample", |b| {
        b.iter(|| black_box(encode_batch(&chunk, &mut out)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
