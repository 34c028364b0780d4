//! `--format otlp` beside JSON lines (events/s) for the same OpenTelemetry log records:
//! a Common Schema 4.0 `Log` as `opentelemetry-user-events-logs` writes it (PartA with
//! time, trace context and cloud role; PartC with 4 attributes; PartB with body,
//! severity, event id and name), 1000 per iteration, written by `LineWriter` (one JSON
//! line each) and by `OtlpWriter` (ExportLogsServiceRequest lines of up to 512 records).
//!
//! Run: `cargo bench --bench otlp -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group};
use uevrec_parsers::eventheader::{trace_entry, tracepoint_format};
use uevrec_parsers::otlp::{OtlpEncoding, OtlpWriter};
use uevrec_parsers::{
    LineOptions, LineWriter, OutputFormat, OutputWriter, PreparedFormat, RecordStamp, RecordWriter,
    parse_format,
};

/// The raw trace entry of one Common Schema log record.
fn cs_log() -> Vec<u8> {
    let mut meta = b"Log\0".to_vec();
    let mut payload = Vec::new();
    // (name, encoding bytes, payload bytes)
    let str_field = |t: &str| {
        let mut p = (t.len() as u16).to_le_bytes().to_vec();
        p.extend_from_slice(t.as_bytes());
        p
    };
    let fields: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
        ("__csver__", vec![0x04], 1024u32.to_le_bytes().to_vec()),
        ("PartA", vec![0x81, 5], vec![]),
        (
            "time",
            vec![0x0a],
            str_field("2026-11-22T11:00:00.123456789Z"),
        ),
        (
            "ext_dt_traceId",
            vec![0x0a],
            str_field("0af7651916cd43dd8448eb211c80319c"),
        ),
        ("ext_dt_spanId", vec![0x0a], str_field("b7ad6b7169203331")),
        ("ext_cloud_role", vec![0x0a], str_field("checkout")),
        ("ext_cloud_roleInstance", vec![0x0a], str_field("pod-7")),
        ("PartC", vec![0x81, 4], vec![]),
        ("user", vec![0x0a], str_field("zoë")),
        ("attempt", vec![0x85, 2], 2i64.to_le_bytes().to_vec()),
        ("latency", vec![0x85, 8], 1.5f64.to_le_bytes().to_vec()),
        ("ok", vec![0x84, 7], 1u32.to_le_bytes().to_vec()),
        ("PartB", vec![0x81, 6], vec![]),
        ("_typeName", vec![0x0a], str_field("Log")),
        (
            "body",
            vec![0x0a],
            str_field("request served from cache in 3 ms"),
        ),
        ("severityNumber", vec![0x83, 2], 9i16.to_le_bytes().to_vec()),
        ("severityText", vec![0x0a], str_field("INFO")),
        ("eventId", vec![0x85, 2], 42i64.to_le_bytes().to_vec()),
        ("name", vec![0x0a], str_field("cache-hit")),
    ];
    for (name, enc, bytes) in fields {
        meta.extend_from_slice(name.as_bytes());
        meta.push(0);
        meta.extend_from_slice(&enc);
        payload.extend_from_slice(&bytes);
    }
    trace_entry(4, &meta, &payload)
}

/// `raw_syscalls:sys_enter` (a plain tracefs event, what `tests/host/export.rs` records):
/// its format and one record (`getppid` with two arguments), for
/// `UEVREC_BENCH_EVENT=sys_enter`.
fn sys_enter() -> (PreparedFormat, Vec<u8>) {
    let text = "name: sys_enter\nID: 21\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\
\tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;\n\n\
print fmt: \"NR %ld (%lx, %lx, %lx, %lx, %lx, %lx)\", REC->id, REC->args[0], REC->args[1], REC->args[2], REC->args[3], REC->args[4], REC->args[5]\n";
    let format = parse_format(text).expect("the sys_enter format parses");
    let prepared = PreparedFormat::new(&format, "raw_syscalls", "sys_enter", None);
    let mut raw = vec![21, 0, 0, 0, 0x92, 0x10, 0, 0];
    raw.extend_from_slice(&110i64.to_le_bytes());
    for arg in [424_242u64, 7, 0, 0, 0, 0] {
        raw.extend_from_slice(&arg.to_le_bytes());
    }
    (prepared, raw)
}

fn stamp(i: u64) -> RecordStamp {
    RecordStamp {
        time_unix_ns: Some(1_795_345_200_000_000_000 + i * 1000),
        cpu: 1,
        pid: 4242,
        tid: 4243,
    }
}

fn bench(c: &mut Criterion) {
    let raw = cs_log();
    let name = "checkout_L4K1";
    let prepared = PreparedFormat::new(&tracepoint_format(name, 1), "user_events", name, None);
    let mut group = c.benchmark_group("otel_log_1000");
    group.throughput(Throughput::Elements(1000));
    let mut out = Vec::with_capacity(4 << 20);
    let mut json = LineWriter::new(LineOptions::default());
    group.bench_function("json_lines", |b| {
        b.iter(|| {
            out.clear();
            for i in 0..1000 {
                json.write_prepared(&mut out, &stamp(i), &prepared, black_box(&raw));
            }
            black_box(out.len())
        })
    });
    let mut otlp = OtlpWriter::new(LineOptions::default());
    otlp.set_host_name("bench-host");
    group.bench_function("otlp", |b| {
        b.iter(|| {
            out.clear();
            for i in 0..1000 {
                otlp.write_prepared(&mut out, &stamp(i), &prepared, black_box(&raw));
            }
            otlp.end_lines(&mut out);
            black_box(out.len())
        })
    });
    group.finish();
    // Bytes per record of each output, for the record.
    out.clear();
    for i in 0..1000 {
        json.write_prepared(&mut out, &stamp(i), &prepared, &raw);
    }
    let json_bytes = out.len();
    out.clear();
    for i in 0..1000 {
        otlp.write_prepared(&mut out, &stamp(i), &prepared, &raw);
    }
    otlp.end_lines(&mut out);
    eprintln!(
        "bytes per record: json_lines {}, otlp {}",
        json_bytes / 1000,
        out.len() / 1000
    );
}

criterion_group!(benches, bench);

/// `UEVREC_BENCH_RECORDS=N UEVREC_BENCH_WRITER=json|otlp|proto`: write N records with one
/// writer and exit (the Common Schema log, or with `UEVREC_BENCH_EVENT=sys_enter` a plain
/// `raw_syscalls:sys_enter` record), for instruction counts (`valgrind --tool=callgrind`, two values of N:
/// the difference over the difference of N is the count per record).
fn count_only() -> bool {
    let (Some(n), Ok(writer)) = (
        std::env::var("UEVREC_BENCH_RECORDS")
            .ok()
            .and_then(|n| n.parse::<u64>().ok()),
        std::env::var("UEVREC_BENCH_WRITER"),
    ) else {
        return false;
    };
    let (prepared, raw) = match std::env::var("UEVREC_BENCH_EVENT").as_deref() {
        Ok("sys_enter") => sys_enter(),
        _ => {
            let name = "checkout_L4K1";
            let format = tracepoint_format(name, 1);
            let prepared = PreparedFormat::new(&format, "user_events", name, None);
            (prepared, cs_log())
        }
    };
    let mut out = Vec::with_capacity(4 << 20);
    let format = match writer.as_str() {
        "json" => OutputFormat::JsonLines,
        // Export frames with protobuf bodies (what the OTLP exporter sends).
        "proto" => OutputFormat::OtlpExport(OtlpEncoding::Protobuf),
        _ => OutputFormat::Otlp,
    };
    let mut w = OutputWriter::new(format, LineOptions::default());
    w.set_host_name("bench-host");
    for i in 0..n {
        if out.len() > 3 << 20 {
            out.clear();
        }
        w.write_prepared(&mut out, &stamp(i), &prepared, black_box(&raw));
    }
    w.end_lines(&mut out);
    black_box(out.len());
    true
}

fn main() {
    if count_only() {
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
