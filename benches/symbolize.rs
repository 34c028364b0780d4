//! Symbolization of user frames (issue 38, docs/stacks.md): 1000 distinct return
//! addresses in this machine's libc (file offsets 64 bytes apart through its text) named
//! by a fresh symbolizer (`cold`: the ELF symbol tables and DWARF lines parsed, then each
//! address looked up once) and by a warm one (`cached`: the formatter's cache hit), and
//! by a warm one on the run's symbolizer thread (`shared`: each look-up a round trip to
//! it, as a writer's frame that another writer named first).
//! `cargo bench --bench symbolize`; frames/s from criterion's throughput.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use uevrec::pipeline::stacks::shared_symbols::{Naming, SharedSymbols};
use uevrec::pipeline::stacks::symbols::Symbols;

const FRAMES: u64 = 1000;

fn libc() -> Arc<str> {
    for p in [
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib64/libc.so.6",
        "/usr/lib/aarch64-linux-gnu/libc.so.6",
    ] {
        if std::path::Path::new(p).exists() {
            return p.into();
        }
    }
    panic!("no libc.so.6 found to symbolize")
}

/// File offsets inside libc's text (it starts past 0x20000 in every glibc build seen).
fn offsets() -> Vec<u64> {
    (0..FRAMES).map(|i| 0x28000 + i * 64).collect()
}

fn bench(c: &mut Criterion) {
    let path = libc();
    let offsets = offsets();
    let mut g = c.benchmark_group("symbolize");
    g.throughput(Throughput::Elements(FRAMES));
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.bench_function("cold", |b| {
        b.iter(|| {
            let mut s = Symbols::new();
            for &o in &offsets {
                black_box(s.user(&path, &[], o));
            }
            assert_eq!(s.behind, 0, "the budget covers a fresh symbolizer");
        })
    });
    let mut warm = Symbols::new();
    for &o in &offsets {
        warm.user(&path, &[], o);
    }
    g.sample_size(50).measurement_time(Duration::from_secs(5));
    g.bench_function("cached", |b| {
        b.iter(|| {
            for &o in &offsets {
                black_box(warm.user(&path, &[], o));
            }
        })
    });
    let shared = SharedSymbols::thread();
    let naming = Naming::default();
    for &o in &offsets {
        shared.user(&naming, &path, &[], o);
    }
    g.bench_function("shared", |b| {
        b.iter(|| {
            for &o in &offsets {
                black_box(shared.user(&naming, &path, &[], o));
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
