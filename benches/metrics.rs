//! What the metrics cost their callers and their scraper: one batch's update through a
//! tracepoint handle (`handle`: lock-free atomic adds), the same by name
//! (`by_name`: a read-locked map lookup first), one export attempt (`export_attempt`:
//! request counter, histogram, bytes), and one scrape of a recorder with 1000 tracepoints
//! (`render_1000`: every series encoded as Prometheus text). `cargo bench --bench metrics`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use uevrec::delivery::metrics::{DropReason, ExportOutcome, Metrics, Signal};

fn updates(c: &mut Criterion) {
    let m = Metrics::new();
    let names: Vec<String> = (0..1000)
        .map(|i| format!("user_events:event_{i}"))
        .collect();
    for n in &names {
        let t = m.tracepoint(n);
        t.recorded(1);
        t.exported(Signal::Logs, 1);
        t.dropped(DropReason::SpoolFull, 1);
    }
    let h = m.tracepoint(&names[500]);
    let mut g = c.benchmark_group("metrics");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    g.bench_function("handle", |b| {
        b.iter(|| {
            h.recorded(black_box(100));
            h.exported(Signal::Logs, black_box(100));
        })
    });
    g.bench_function("by_name", |b| {
        b.iter(|| {
            m.records_recorded(black_box(&names[500]), 100);
            m.records_exported(black_box(&names[500]), Signal::Logs, 100);
        })
    });
    g.bench_function("export_attempt", |b| {
        b.iter(|| {
            m.export_attempt(
                Signal::Logs,
                ExportOutcome::Accepted,
                black_box(Duration::from_millis(3)),
                4096,
            )
        })
    });
    g.sample_size(20);
    g.bench_function("render_1000", |b| b.iter(|| black_box(m.render().len())));
    g.finish();
    eprintln!("render_1000: {} bytes", m.render().len());
}

criterion_group!(benches, updates);
criterion_main!(benches);
