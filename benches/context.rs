//! The cost of context per record (`comm`, `cgroup`, `container`): the formatter's work
//! for one `rate`-like user event (`u32 thread; u64 seq`) without context, and with it
//! (the tracker's lookups, then the same line with the keys), side by side in one run.
//! The tracker holds 1,000 threads in 100 cgroups named like Docker scopes; records cycle
//! through the threads, so the lookups are not all one cache line. Each iteration writes
//! a batch of 1000 records into one reused buffer, as the formatter does. The `otlp-*`
//! cases: the same records as OTLP export frames, with and without the Kubernetes
//! resource attributes.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use uevrec_parsers::otlp::OtlpEncoding;
use uevrec_parsers::{
    ContextTracker, ContextUpdate, LineOptions, LineWriter, OutputFormat, OutputWriter,
    PreparedFormat, RecordStamp, RecordWriter, parse_format,
};
use uevrec_samples::register::format_file_text;

const BATCH: u32 = 1000;
const THREADS: u32 = 1000;
const CGROUPS: u64 = 100;
const T0: u64 = 1_795_345_200_000_000_000;

fn tracker() -> ContextTracker {
    let mut t = ContextTracker::new();
    for id in 0..CGROUPS {
        let path = format!("/system.slice/docker-{id:064x}.scope");
        t.apply(
            None,
            ContextUpdate::Cgroup {
                id,
                path: path.as_bytes(),
            },
        );
    }
    for tid in 1..=THREADS {
        let comm = format!("worker-{tid}");
        t.apply(
            None,
            ContextUpdate::Comm {
                tid,
                comm: comm.as_bytes(),
            },
        );
        t.apply(
            None,
            ContextUpdate::ThreadCgroup {
                tid,
                id: u64::from(tid) % CGROUPS,
            },
        );
    }
    t
}

/// [`tracker`] with the cgroups named like pods' containers (systemd driver,
/// containerd) and every pod's and container's Kubernetes names known: the keys of
/// `with-k8s` (`k8s_pod_uid`, `k8s_qos`, `k8s_namespace`, `k8s_pod`, `k8s_container`).
fn k8s_tracker() -> ContextTracker {
    let mut t = tracker();
    for id in 0..CGROUPS {
        let uid = format!("{id:08x}-aaaa-4bbb-8ccc-{id:012x}");
        let path = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{id:064x}.scope",
            uid.replace('-', "_")
        );
        let pod = format!("web-{id}");
        let cid = format!("{id:064x}");
        t.apply(
            None,
            ContextUpdate::Cgroup {
                id,
                path: path.as_bytes(),
            },
        );
        t.apply(
            None,
            ContextUpdate::Pod {
                uid: uid.as_bytes(),
                namespace: b"shop",
                name: pod.as_bytes(),
            },
        );
        t.apply(
            None,
            ContextUpdate::ContainerName {
                id: cid.as_bytes(),
                name: b"nginx",
            },
        );
    }
    t
}

/// The stamp of record `i` of thread `tid` (a process of its own).
fn stamp(i: u32, tid: u32) -> RecordStamp {
    RecordStamp {
        time_unix_ns: Some(T0 + u64::from(i) * 1000),
        cpu: 0,
        pid: tid,
        tid,
    }
}

fn bench(c: &mut Criterion) {
    let text = format_file_text(
        "rate",
        1200,
        &[("u32 thread", 8, 4, false), ("u64 seq", 12, 8, false)],
        "",
    );
    let format = parse_format(&text).unwrap();
    let prepared = PreparedFormat::new(&format, "user_events", "rate", None);
    let mut raw = 1200u16.to_le_bytes().to_vec();
    raw.extend_from_slice(&[0, 0]);
    raw.extend_from_slice(&7i32.to_le_bytes());
    raw.extend_from_slice(&3u32.to_le_bytes());
    raw.extend_from_slice(&99u64.to_le_bytes());
    let (tracker, k8s) = (tracker(), k8s_tracker());
    let mut g = c.benchmark_group("context");
    g.throughput(Throughput::Elements(u64::from(BATCH)));
    let mut out = Vec::with_capacity(1 << 20);
    for (name, with, tracker) in [
        ("without", false, &tracker),
        ("with", true, &tracker),
        ("with-k8s", true, &k8s),
    ] {
        let mut w = LineWriter::new(LineOptions::default());
        g.bench_function(name, |b| {
            b.iter(|| {
                out.clear();
                for i in 0..BATCH {
                    let tid = 1 + i % THREADS;
                    let stamp = stamp(i, tid);
                    if with {
                        w.set_context(tracker, &stamp, Some(u64::from(tid) % CGROUPS));
                    }
                    w.write_prepared(&mut out, &stamp, &prepared, &raw);
                }
                black_box(&out);
            })
        });
    }
    // OTLP (protobuf export frames, what `record --otlp-endpoint` writes): without
    // context (as before the Kubernetes resource attributes), and with them, the records'
    // pods either changing at every record (`-cycling`: each record's resource is another
    // cgroup's, taken from the writer's per-cgroup cache (rendered once per cgroup while
    // the tracker's pod version stays; before that cache, rendered for each record), a
    // request holds 100 resources, and its frame's table 100 (tracepoint, pod) entries) or
    // in runs of 100 records of one pod (`-runs`, as a busy producer's records come).
    for (name, with, run) in [
        ("otlp-without", false, 1),
        ("otlp-k8s-cycling", true, 1),
        ("otlp-k8s-runs", true, 100),
    ] {
        let mut w = OutputWriter::new(
            OutputFormat::OtlpExport(OtlpEncoding::Protobuf),
            LineOptions::default(),
        );
        w.set_host_name("node-1");
        g.bench_function(name, |b| {
            b.iter(|| {
                out.clear();
                for i in 0..BATCH {
                    let tid = 1 + (i / run) % THREADS;
                    let stamp = stamp(i, tid);
                    if with {
                        w.set_context(&k8s, &stamp, Some(u64::from(tid) % CGROUPS));
                    }
                    w.write_prepared(&mut out, &stamp, &prepared, &raw);
                }
                w.end_lines(&mut out);
                black_box(&out);
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
