//! `--where` (issue 40): nanoseconds per record to judge a `raw_syscalls:sys_enter`
//! record with a one-clause and a five-clause CEL condition and one on `comm`
//! (`FormatFilter::keep`, counted as while recording), beside writing that record's JSON
//! line (`LineWriter::write_prepared`, the work a kept record costs anyway) and the
//! loop's own cost (`floor`). The record is the one of benches/decode.rs (d). Figures: BENCHMARKS.md,
//! "Issue 40".

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use uevrec::pipeline::filter::{Filter, WhereRule, Who};
use uevrec_parsers::{
    ContextTracker, ContextUpdate, Endian, LineOptions, LineWriter, PreparedFormat, RecordStamp,
    parse_format,
};
use uevrec_samples::register::format_file_text;

/// sys_enter's format and one record: `read(1, …)`-like arguments, SEQ 3 in args[1]'s
/// place of the host test (a multiple of 3: the conditions hold, every clause runs).
fn sys_enter() -> (PreparedFormat, Vec<u8>) {
    let text = format_file_text(
        "sys_enter",
        22,
        &[
            ("long id", 8, 8, true),
            ("unsigned long args[6]", 16, 48, false),
        ],
        "\"NR %ld\", REC->id",
    );
    let format = parse_format(&text).unwrap();
    let mut raw = 22u16.to_le_bytes().to_vec();
    raw.extend_from_slice(&[0, 0]);
    raw.extend_from_slice(&4242i32.to_le_bytes());
    raw.extend_from_slice(&110i64.to_le_bytes());
    for arg in [424_242u64, 3, 140_722_793_657_184, 4096, 0, 0] {
        raw.extend_from_slice(&arg.to_le_bytes());
    }
    raw.extend_from_slice(&[0; 4]);
    let prepared = PreparedFormat::new(&format, "raw_syscalls", "sys_enter", None);
    (prepared, raw)
}

const ONE: &str = "fields.args[1] % 3 == 0";
const COMM: &str = "comm == 'where-load'";
const FIVE: &str = "fields.id == 110 && fields.args[0] == 424242 && pid > 0 && \
                    system == 'raw_syscalls' && fields.args[1] % 3 == 0";

fn bench(c: &mut Criterion) {
    let (prepared, raw) = sys_enter();
    let stamp = RecordStamp {
        time_unix_ns: Some(1_795_345_200_000_000_000),
        cpu: 1,
        pid: 4242,
        tid: 4242,
    };
    let mut g = c.benchmark_group("where/sys_enter");
    g.throughput(Throughput::Elements(1));
    let mut writer = LineWriter::new(LineOptions::default());
    let mut out = Vec::with_capacity(1 << 16);
    g.bench_function("json_line", |b| {
        b.iter(|| {
            out.clear();
            writer.write_prepared(&mut out, black_box(&stamp), &prepared, black_box(&raw));
            black_box(out.len())
        })
    });
    // What the loop costs with no judging at all: the same arguments through black_box,
    // the raw byte the one-clause condition reads compared (read the other rows less
    // this one for the judging alone).
    g.bench_function("floor", |b| {
        b.iter(|| {
            let (stamp, raw) = (black_box(&stamp), black_box(&raw));
            stamp.pid > 0 && raw.get(24) == Some(&3)
        })
    });
    // Who wrote it, for the condition on `comm` (the tracker as the recorder keeps it).
    let mut tracker = ContextTracker::new();
    tracker.apply(
        None,
        ContextUpdate::Comm {
            tid: 4242,
            comm: b"where-load",
        },
    );
    let who = Some(Who {
        tracker: &tracker,
        cgroup: None,
    });
    for (name, condition) in [("one_clause", ONE), ("five_clauses", FIVE), ("comm", COMM)] {
        let rule: WhereRule = condition.parse().unwrap();
        let filter: Arc<Filter> = Filter::new(vec![rule], vec![], vec![]).unwrap();
        let mut judge = filter.for_format(&prepared).unwrap();
        assert!(judge.keep(&prepared, &stamp, &raw, Endian::Little, who));
        g.bench_function(name, |b| {
            b.iter(|| {
                judge.keep(
                    &prepared,
                    black_box(&stamp),
                    black_box(&raw),
                    Endian::Little,
                    who,
                )
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
