//! What `uevrec top` saves by counting instead of formatting: 1000 staged
//! `raw_syscalls:sys_enter` records (64-byte trace entries from 16 processes, as
//! `benches/raw_encode.rs` stages them) either counted into `top`'s model as its counting
//! thread does (`count`: slot, pid and length per record) or written as JSON lines as
//! `record`'s formatter does (`json_line`: decode + JSON, into a reused buffer). Run both
//! in one `cargo bench --bench top_count` and compare them as a ratio.

use std::hint::black_box;
use std::time::Duration;

mod common;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use uevrec::capture::staging::{StagedChunk, StagedEntry};
use uevrec::outputs::top::counter::count_chunk;
use uevrec::outputs::top::model::Model;
use uevrec_parsers::{LineOptions, LineWriter, PreparedFormat, parse_format};

const BATCH: u64 = 1000;

/// `raw_syscalls:sys_enter` as an x86_64 kernel describes it.
const SYS_ENTER: &str = "name: sys_enter
ID: 443
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;
\tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;

print fmt: \"NR %ld\", REC->id
";

/// Every record as a JSON line, as the formatter writes it.
#[inline(never)]
fn json_batch(
    chunk: &StagedChunk,
    w: &mut LineWriter,
    prepared: &PreparedFormat,
    out: &mut Vec<u8>,
) -> usize {
    out.clear();
    for e in chunk.entries() {
        if let StagedEntry::Record { stamp, raw, .. } = e {
            w.write_prepared(out, &stamp, prepared, raw);
        }
    }
    out.len()
}

/// Every record counted, as `top`'s counting thread does; an interval closes every
/// 100 batches (as once a second would at 100 k records/s).
#[inline(never)]
fn count_batch(chunk: &StagedChunk, model: &mut Model, fresh: &mut Vec<u32>, n: &mut u32) {
    count_chunk(model, chunk, fresh, None, &[]);
    fresh.clear();
    *n += 1;
    if *n % 100 == 0 {
        model.tick(Duration::from_secs(1));
    }
}

fn bench(c: &mut Criterion) {
    let chunk = common::sys_enter_chunk(BATCH, 16);
    let format = parse_format(SYS_ENTER).expect("the format parses");
    let prepared = PreparedFormat::new(&format, "raw_syscalls", "sys_enter", None);
    let mut writer = LineWriter::new(LineOptions::default());
    let mut out: Vec<u8> = Vec::with_capacity(512 * 1024);
    let mut model = Model::new();
    model.attach(0, "raw_syscalls:sys_enter");
    let (mut fresh, mut n) = (Vec::new(), 0);
    let mut g = c.benchmark_group("top_count");
    g.throughput(Throughput::Elements(BATCH));
    g.bench_function("count", |b| {
        b.iter(|| count_batch(black_box(&chunk), &mut model, &mut fresh, &mut n))
    });
    g.bench_function("json_line", |b| {
        b.iter(|| {
            black_box(json_batch(
                black_box(&chunk),
                &mut writer,
                &prepared,
                &mut out,
            ))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
