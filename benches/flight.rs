//! The flight recorder's costs (`record --flight`, src/outputs/flight/): what keeping one record
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
use uevrec::capture::staging::{FormatSource, StagedChunk, StagedEntry};
use uevrec::outputs::flight::buffer::FlightBuffer;
use uevrec::outputs::flight::{FlightOptions, dump};
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

/// A flight buffer of `size`, full (in steady state: every push evicts).
fn full_buffer(
    size: usize,
    raw: &[u8],
    prepared: &Arc<PreparedFormat>,
    source: &Arc<FormatSource>,
) -> FlightBuffer {
    let mut buffer = FlightBuffer::new(size);
    buffer.format(0, prepared.clone(), source.clone());
    let c = chunk(raw, 1_795_345_200_000_000_000);
    while buffer.held_bytes() + c.len() <= size + c.len() / 2 {
        for e in c.encoded() {
            buffer.push(e);
        }
    }
    buffer
}

/// Keep every record of `staged` in `buffer` (what the flight thread does per chunk).
#[inline(never)]
fn keep_raw(buffer: &mut FlightBuffer, staged: &StagedChunk) {
    for e in staged.encoded() {
        buffer.push(e);
    }
}

/// A buffer of lines: each record written as a JSON line, copied into a byte ring.
struct LineRing {
    writer: LineWriter,
    prepared: Arc<PreparedFormat>,
    line: Vec<u8>,
    ring: Vec<u8>,
    at: usize,
}

/// Keep every record of `staged` as a line in `lines`.
#[inline(never)]
fn keep_line(lines: &mut LineRing, staged: &StagedChunk) {
    for entry in staged.entries() {
        if let StagedEntry::Record { stamp, raw, .. } = entry {
            lines.line.clear();
            let LineRing {
                writer,
                prepared,
                line,
                ring,
                at,
            } = lines;
            writer.write_prepared(line, &stamp, prepared, raw);
            if *at + line.len() > ring.len() {
                *at = 0;
            }
            ring[*at..*at + line.len()].copy_from_slice(line);
            *at += line.len();
        }
    }
}

fn keep(c: &mut Criterion) {
    let (prepared, source, raw) = sys_enter();
    let staged = chunk(&raw, 1_795_345_200_000_000_000);
    // Under callgrind: `UEVREC_FLIGHT_RUNS=100 valgrind --tool=callgrind
    // --toggle-collect='*keep_raw*' (or '*keep_line*') <bench binary>` counts the
    // instructions of 100 chunks of each, in steady state (a full 4 MiB buffer: the count
    // does not depend on the size), without criterion's own.
    let runs = std::env::var("UEVREC_FLIGHT_RUNS").ok();
    let size = if runs.is_some() { 4 << 20 } else { SIZE };
    let mut buffer = full_buffer(size, &raw, &prepared, &source);
    let mut lines = LineRing {
        writer: LineWriter::new(LineOptions::default()),
        prepared: prepared.clone(),
        line: Vec::with_capacity(1024),
        ring: vec![0xa5u8; size],
        at: 0,
    };
    if let Some(runs) = runs.and_then(|v| v.parse::<u32>().ok()) {
        for _ in 0..runs {
            keep_raw(&mut buffer, black_box(&staged));
            keep_line(&mut lines, black_box(&staged));
        }
        std::process::exit(0);
    }
    let mut group = c.benchmark_group("flight/keep_one_record");
    group.throughput(Throughput::Elements(PER_CHUNK));
    group.bench_function("raw_staged_entry", |b| {
        b.iter(|| keep_raw(&mut buffer, black_box(&staged)))
    });
    group.bench_function("json_line", |b| {
        b.iter(|| keep_line(&mut lines, black_box(&staged)))
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
        session: None,
        context: false,
        stacks: None,
        filter: None,
    };
    let snapshot = full_buffer(SIZE, &raw, &prepared, &source).take();
    eprintln!(
        "dump of {} records, {} bytes staged",
        snapshot.records, snapshot.bytes
    );
    group.throughput(Throughput::Elements(snapshot.records));
    group.bench_function("format_64MiB_sys_enter", |b| {
        b.iter(|| {
            let mut bytes = 0;
            let n = dump::format_snapshot(
                &snapshot,
                &opts,
                None,
                None,
                uevrec::recorder::format_fed,
                |b| {
                    bytes += b.len();
                    Ok(())
                },
            )
            .expect("no write fails");
            black_box((n, bytes))
        })
    });
    group.finish();
}

criterion_group!(benches, keep, dump_64m);
criterion_main!(benches);
