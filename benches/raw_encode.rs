//! The per-record cost of `record --raw` against a plain copy: 1000 staged
//! `raw_syscalls:sys_enter` records (64-byte trace entries, what a syscall recording
//! stages most) read back from a `StagedChunk` as the raw thread does, then either
//! copied into an output buffer (`copy`: the least any writer does) or encoded as
//! `PERF_RECORD_SAMPLE`s (`perf_sample`: the raw thread's work per record, `--no-context`).
//! With context the samples carry a cgroup id: the staged one (`perf_sample_ctx_id`, the
//! perf backend's records) or, for records without one, the writer's tracker's
//! (`perf_sample_ctx_lookup`, the ftrace backend's; 100 threads known). The output
//! buffer is reused, as in the raw thread: no allocation per record.

use std::hint::black_box;

mod common;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use uevrec::capture::staging::{StagedChunk, StagedEntry};
use uevrec::outputs::raw::sample_cgroup;
use uevrec_parsers::perf_data::writer::{self, Stamp};
use uevrec_parsers::{ContextTracker, ContextUpdate};

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

/// Every record as a `PERF_RECORD_SAMPLE`, as the raw thread writes it (with context
/// when `tracker` is given).
#[inline(never)]
fn encode_batch(chunk: &StagedChunk, out: &mut Vec<u8>, tracker: Option<&ContextTracker>) -> usize {
    out.clear();
    for e in chunk.entries() {
        if let StagedEntry::Record {
            stamp, cgroup, raw, ..
        } = e
        {
            let s = Stamp {
                id: 1,
                pid: stamp.pid,
                tid: stamp.tid,
                time: stamp.time_unix_ns.unwrap_or(0),
                cpu: stamp.cpu,
            };
            let cgroup = sample_cgroup(tracker, &stamp, cgroup);
            let _ = writer::push_sample(out, &s, raw, cgroup);
        }
    }
    out.len()
}

/// The same records as `chunk`'s, each with the cgroup id `id`.
fn with_cgroup(chunk: &StagedChunk, id: u64) -> StagedChunk {
    let mut out = StagedChunk::default();
    for e in chunk.entries() {
        if let StagedEntry::Record {
            slot, stamp, raw, ..
        } = e
        {
            out.push_record_in(slot, &stamp, Some(id), raw);
        }
    }
    out
}

/// A tracker that knows `threads` threads from 4242 on, each in cgroup 7.
fn tracker(threads: u32) -> ContextTracker {
    let mut t = ContextTracker::new();
    for tid in 4242..4242 + threads {
        t.apply(None, ContextUpdate::Comm { tid, comm: b"gen" });
        t.apply(None, ContextUpdate::ThreadCgroup { tid, id: 7 });
    }
    t.apply(None, ContextUpdate::Cgroup { id: 7, path: b"/a" });
    t
}

fn bench(c: &mut Criterion) {
    let chunk = common::sys_enter_chunk(BATCH, 1);
    let with_ids = with_cgroup(&chunk, 7);
    let known = tracker(100);
    let mut out: Vec<u8> = Vec::with_capacity(256 * 1024);
    // Under callgrind: `UEVREC_RAW_ENCODE_RUNS=100 valgrind --tool=callgrind
    // --toggle-collect='*copy_batch*' (or '*encode_batch*') <bench binary>` counts the
    // instructions of 100 batches of each, without criterion's own; the `encode_batch`
    // figure is the sum of the three variants (no context, context with ids, context by
    // lookup): `UEVREC_RAW_ENCODE_VARIANT=plain|id|lookup` runs one only.
    if let Some(runs) = std::env::var("UEVREC_RAW_ENCODE_RUNS")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
    {
        let variant = std::env::var("UEVREC_RAW_ENCODE_VARIANT").unwrap_or_default();
        for _ in 0..runs {
            black_box(copy_batch(black_box(&chunk), &mut out));
            if matches!(variant.as_str(), "" | "plain") {
                black_box(encode_batch(black_box(&chunk), &mut out, None));
            }
            if matches!(variant.as_str(), "" | "id") {
                black_box(encode_batch(black_box(&with_ids), &mut out, Some(&known)));
            }
            if matches!(variant.as_str(), "" | "lookup") {
                black_box(encode_batch(black_box(&chunk), &mut out, Some(&known)));
            }
        }
        return;
    }
    let mut g = c.benchmark_group("raw_encode");
    g.throughput(Throughput::Elements(BATCH));
    g.bench_function("copy", |b| {
        b.iter(|| black_box(copy_batch(&chunk, &mut out)))
    });
    g.bench_function("perf_sample", |b| {
        b.iter(|| black_box(encode_batch(&chunk, &mut out, None)))
    });
    g.bench_function("perf_sample_ctx_id", |b| {
        b.iter(|| black_box(encode_batch(&with_ids, &mut out, Some(&known))))
    });
    g.bench_function("perf_sample_ctx_lookup", |b| {
        b.iter(|| black_box(encode_batch(&chunk, &mut out, Some(&known))))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
