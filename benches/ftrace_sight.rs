//! The ftrace backend's check of each record's user frames against its process's
//! mappings (issue 38, docs/stacks.md "Libraries loaded later"): `Sight::sight` on a
//! stack of 8 user frames, all in mappings known (the path of every record after the
//! process's first stack: no read of `/proc`), for this process; and a read of its
//! mappings (`read`: a first sight, which costs what each check a second apart costs).
//! `cargo bench --bench ftrace_sight`; ns per record (or read) from criterion.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use uevrec::capture::ftrace::stacks::Sight;
use uevrec_parsers::Endian;
use uevrec_parsers::callchain::{Callchain, PERF_CONTEXT_USER};

fn bench(c: &mut Criterion) {
    let pid = std::process::id();
    // Eight return addresses in this program's text (a known mapping).
    let here = bench as fn(&mut Criterion) as usize as u64;
    let words: Vec<u8> = std::iter::once(PERF_CONTEXT_USER)
        .chain((0..8).map(|i| here + i * 16))
        .flat_map(u64::to_ne_bytes)
        .collect();
    let chain = Callchain::new(&words, Endian::NATIVE);
    let mut sight = Sight::default();
    assert!(sight.sight(pid, 1, &chain).is_some(), "read at first sight");
    c.bench_function("ftrace_sight/known_frames", |b| {
        b.iter(|| black_box(sight.sight(pid, 2, black_box(&chain))))
    });
    c.bench_function("ftrace_sight/read", |b| {
        b.iter_batched(
            Sight::default,
            |mut fresh| black_box(fresh.sight(pid, 1, black_box(&chain))),
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
