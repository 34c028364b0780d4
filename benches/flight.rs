//! The flight recorder's costs (`record --flight`, src/flight/): what keeping one record
//! in memory costs, as the flight thread does it (a copy of the staged entry into the
//! FlightBuffer, the oldest evicted) beside what keeping it as a JSON line would cost
//! (the line written, as the formatter does, then copied into a byte ring: a lower
//! bound, no eviction bookkeeping); and how long a full 64 MiB buffer takes to decode
//! and format when dumped (the dump thread's formatter and feeder, lines discarded).
//!
//! Records: `raw_syscalls:sys_enter` as on x86_64 (a 68-byte trace entry, as perf hands it
//! over; 100 bytes staged: 671,000 fill 64 MiB), in chunks of 1000 as the session stages
//! them.

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use uevrec::flight::buffer::FlightBuffer;
use uevrec::flight::{FlightOptions, dump};
use uevrec::pipeline::{FormatSource, StagedChunk, StagedEntry};
use uevrec_parsers::{LineOptions, LineWriter, OutputFormat, PreparedFormat, RecordStamp};
use uevrec_samples::register::format_file_text;

const PER_CHUNK: u64 = 1000;
const SIZE: usize = 64 << 20;

/// sys_enter's format and one trace entry (common fields, id, six args, PERF_SAMPLE_RAW's
/// 4 bytes of padding).
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
    let args = [
        110u64,
        1,
        140_612_290_334_165,
        140_722_793_657_184,
        4096,
        0,
        0,
    ];
    raw.extend(args.iter().flat_map(|a| a.to_le_bytes()));
    raw.extend_from_slice(&[0; 4]);
    (Arc::new(prepared), Arc::new(source), raw)
}

/// A chunk of `PER_CHUNK` records 1 µs apart from `t0`.
fn chunk(raw: &[u8], t0: u64) -> StagedChunk {
    let mut chunk = StagedChunk::default();
    for i in 0..PER_CHUNK {
        let stamp = RecordStamp {
            time_unix_ns: Some(t0 + i * 1000),
            cpu: 1,
            pid: 4242,
            tid: 4242,
        };
        chunk.push_record(0, &stamp, raw);
    }
    chunk
}

/// A 64 MiB flight buffer, full (in steady state: every push evicts).
fn full_buffer(
    raw: &[u8],
    prepared: &Arc<PreparedFormat>,
    source: &Arc<FormatSource>,
) -> FlightBuffer {
    let mut buffer = FlightBuffer::new(SIZE);
    buffer.format(0, prepared.clone(), source.clone());
    let c = chunk(raw, 1_795_345_200_000_000_000);
    while buffer.held_bytes() + c.len() <= SIZE + c.len() / 2 {
        for e in c.encoded() {
            buffer.push(e);
        }
    }
    buffer
}

fn keep(c: &mut Criterion) {
    let (prepared, source, raw) = sys_enter();
    let staged = chunk(&raw, 1_795_345_200_000_000_000);
    let mut group = c.benchmark_group("flight/keep_one_record");
    group.throughput(Throughput::Elements(PER_CHUNK));
    let mut buffer = full_buffer(&raw, &prepared, &source);
    group.bench_function("raw_staged_entry", |b| {
        b.iter(|| {
            for e in black_box(&staged).encoded() {
                buffer.push(e);
            }
        })
    });
    drop(buffer);
    let mut writer = LineWriter::new(LineOptions::default());
    let mut ring = vec![0xa5u8; SIZE];
    let mut at = 0;
    let mut line = Vec::with_capacity(1024);
    group.bench_function("json_line", |b| {
        b.iter(|| {
            for entry in black_box(&staged).entries() {
                if let StagedEntry::Record { stamp, raw, .. } = entry {
                    line.clear();
                    writer.write_prepared(&mut line, &stamp, &prepared, raw);
                    if at + line.len() > ring.len() {
                        at = 0;
                    }
                    ring[at..at + line.len()].copy_from_slice(&line);
                    at += line.len();
                }
            }
        })
    });
    group.finish();
}

fn dump_64m(c: &mut Criterion) {
    let (prepared, source, raw) = sys_enter();
    let mut group = c.benchmark_group("flight/dump");
    group.sample_size(10);
    let opts = FlightOptions {
        size: SIZE,
        triggers: Vec::new(),
        on_exit: false,
        output: PathBuf::from("/dev/null"),
        file_mode: 0o600,
        format: OutputFormat::JsonLines,
        line_options: LineOptions::default(),
        quiet: true,
    };
    let snapshot = full_buffer(&raw, &prepared, &source).take();
    eprintln!(
        "dump of {} records, {} bytes staged",
        snapshot.records, snapshot.bytes
    );
    group.throughput(Throughput::Elements(snapshot.records));
    group.bench_function("format_64MiB_sys_enter", |b| {
        b.iter(|| {
            let mut bytes = 0;
            let n = dump::format_snapshot(&snapshot, &opts, |b| {
                bytes += b.len();
                Ok(())
            })
            .expect("no write fails");
            black_box((n, bytes))
        })
    });
    group.finish();
}

criterion_group!(benches, keep, dump_64m);
criterion_main!(benches);
