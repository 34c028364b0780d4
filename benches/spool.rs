//! The export spool's costs (src/delivery/spool/, issue 24) beside an embedded transactional store
//! (redb), per batch of 4 KiB and 256 KiB, each made durable before it returns:
//!
//! - `append`: the segment log's [`Spool::append`] (frame written, `fdatasync`) against a
//!   redb write transaction inserting the batch (committed with `Durability::Immediate`,
//!   redb's default);
//! - `ack`: [`Spool::ack`] (a 16-byte ack record, `fdatasync`; the segment deleted when its
//!   last batch left) against a redb transaction removing it.
//!
//! Only the measured operation is timed (the other one keeps the store from growing).
//! fsync costs are the disk's: the files go to `UEVREC_BENCH_DIR` (default `/var/tmp`,
//! which is on disk on most systems; a tmpfs would measure nothing).

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use redb::{Database, TableDefinition};
use uevrec::delivery::spool::{FullPolicy, Spool, SpoolConfig};

const SIZES: [usize; 2] = [4 << 10, 256 << 10];
const TABLE: TableDefinition<u64, &[u8]> = TableDefinition::new("batches");
static GO: AtomicBool = AtomicBool::new(false);

fn bench_dir() -> tempfile::TempDir {
    let base = std::env::var_os("UEVREC_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/var/tmp".into());
    tempfile::Builder::new()
        .prefix("uevrec-spool-bench")
        .tempdir_in(base)
        .expect("a directory for the bench (UEVREC_BENCH_DIR)")
}

fn spool(dir: &std::path::Path) -> Spool {
    let cfg = SpoolConfig {
        dir: dir.to_path_buf(),
        max_bytes: 1 << 30,
        full: FullPolicy::Block,
    };
    Spool::open(cfg).expect("open the spool").0
}

fn redb_put(db: &Database, id: u64, body: &[u8]) {
    let txn = db.begin_write().expect("begin");
    txn.open_table(TABLE)
        .expect("table")
        .insert(id, body)
        .expect("insert");
    txn.commit().expect("commit");
}

fn redb_del(db: &Database, id: u64) {
    let txn = db.begin_write().expect("begin");
    txn.open_table(TABLE)
        .expect("table")
        .remove(id)
        .expect("remove");
    txn.commit().expect("commit");
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("spool");
    for size in SIZES {
        let body: Vec<u8> = (0..size).map(|i| (i * 13) as u8).collect();
        g.throughput(Throughput::Bytes(size as u64));
        let label = format!("{}KiB", size >> 10);

        let d = bench_dir();
        let s = spool(d.path());
        g.bench_function(BenchmarkId::new("segment_log/append", &label), |b| {
            b.iter_custom(|n| {
                let mut t = Duration::ZERO;
                for _ in 0..n {
                    let start = Instant::now();
                    let o = s.append(100, b"meta", black_box(&body), &GO).unwrap();
                    t += start.elapsed();
                    s.ack(o.id).unwrap();
                }
                t
            })
        });
        g.bench_function(BenchmarkId::new("segment_log/ack", &label), |b| {
            b.iter_custom(|n| {
                let mut t = Duration::ZERO;
                for _ in 0..n {
                    let id = s.append(100, b"meta", &body, &GO).unwrap().id;
                    let start = Instant::now();
                    s.ack(black_box(id)).unwrap();
                    t += start.elapsed();
                }
                t
            })
        });
        drop(s);

        let d2 = bench_dir();
        let db = Database::create(d2.path().join("spool.redb")).expect("redb");
        let mut id = 0u64;
        g.bench_function(BenchmarkId::new("redb/append", &label), |b| {
            b.iter_custom(|n| {
                let mut t = Duration::ZERO;
                for _ in 0..n {
                    id += 1;
                    let start = Instant::now();
                    redb_put(&db, id, black_box(&body));
                    t += start.elapsed();
                    redb_del(&db, id);
                }
                t
            })
        });
        g.bench_function(BenchmarkId::new("redb/ack", &label), |b| {
            b.iter_custom(|n| {
                let mut t = Duration::ZERO;
                for _ in 0..n {
                    id += 1;
                    redb_put(&db, id, &body);
                    let start = Instant::now();
                    redb_del(&db, black_box(id));
                    t += start.elapsed();
                }
                t
            })
        });
    }
    g.finish();
}

criterion_group!(spool_benches, benches);
criterion_main!(spool_benches);
