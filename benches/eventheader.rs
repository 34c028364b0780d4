//! EventHeader decode + JSON line throughput (events/s): uevrec's `LineWriter` beside the
//! reference decoder `tracepoint_decode` (its enumerator and its own JSON writer) on the
//! same event data.
//!
//! (a) the 374 records of `../shared/corpus/EventHeaderInterceptorLE64.dat` (skipped
//! when the corpus is absent; `UEVREC_CORPUS_DIR` overrides), one pass per iteration;
//! (b) an OpenTelemetry-style log record (Common Schema 4.0: `__csver__`, PartA {time},
//! PartC {4 attributes}, PartB {_typeName, body, severityNumber, severityText, eventId,
//! name}), 1000 per iteration.
//!
//! uevrec writes each record with its tracepoint's prepared format (one per tracepoint, as
//! the recorder has); `…/tracepoint_decode` writes the fields and its `meta` object (the
//! EventHeader keys uevrec's line has too), `…/tracepoint_decode_no_meta` the fields only.
//!
//! Run: `cargo bench --bench eventheader -- --warm-up-time 1 --measurement-time 3`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group};
use tracepoint_decode::{EventHeaderEnumeratorContext, PerfConvertOptions};
use uevrec_parsers::eventheader::{trace_entry, tracepoint_format};
use uevrec_parsers::{LineOptions, LineWriter, PreparedFormat, RecordStamp};

const T0: u64 = 1_795_345_200_000_000_000;

/// `(tracepoint name, raw trace entry)` per corpus record.
fn corpus() -> Option<Vec<(String, Vec<u8>)>> {
    let dir = std::env::var_os("UEVREC_CORPUS_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"),
        PathBuf::from,
    );
    let bytes = std::fs::read(dir.join("EventHeaderInterceptorLE64.dat")).ok()?;
    let mut out = Vec::new();
    let mut rest = &bytes[..];
    while rest.len() >= 4 {
        let size = u32::from_le_bytes(rest[..4].try_into().ok()?) as usize;
        let (record, next) = rest.split_at(size.min(rest.len()));
        let body = record.get(4..)?;
        let nul = body.iter().position(|&b| b == 0)?;
        let mut raw = vec![0u8; 8];
        raw.extend_from_slice(&body[nul + 1..]);
        out.push((String::from_utf8_lossy(&body[..nul]).into_owned(), raw));
        rest = next;
    }
    Some(out)
}

/// The prepared format of each record's tracepoint: one per distinct tracepoint name,
/// shared by its records, as the recorder prepares one per attached tracepoint (the
/// corpus has 10 tracepoints; 3 of them carry 365 of the 374 records).
fn prepare(records: &[(String, Vec<u8>)]) -> Vec<Arc<PreparedFormat>> {
    let mut by_name: HashMap<&str, Arc<PreparedFormat>> = HashMap::new();
    records
        .iter()
        .map(|(n, _)| {
            let p = by_name.entry(n).or_insert_with(|| {
                let format = tracepoint_format(n, 1);
                Arc::new(PreparedFormat::new(&format, "user_events", n, None))
            });
            Arc::clone(p)
        })
        .collect()
}

/// An OTel log record as opentelemetry-user-events-logs writes it.
fn otel_log() -> Vec<u8> {
    let mut meta = b"Log\0".to_vec();
    let mut payload = Vec::new();
    let mut field = |name: &str, enc: &[u8]| {
        meta.extend_from_slice(name.as_bytes());
        meta.push(0);
        meta.extend_from_slice(enc);
    };
    field("__csver__", &[0x04]);
    field("PartA", &[0x81, 1]);
    field("time", &[0x0a]);
    field("PartC", &[0x81, 4]);
    field("http.method", &[0x0a]);
    field("http.status", &[0x85, 2]);
    field("retry", &[0x84, 7]);
    field("ratio", &[0x85, 8]);
    field("PartB", &[0x81, 6]);
    field("_typeName", &[0x0a]);
    field("body", &[0x0a]);
    field("severityNumber", &[0x83, 2]);
    field("severityText", &[0x0a]);
    field("eventId", &[0x85, 2]);
    field("name", &[0x0a]);
    let s = |p: &mut Vec<u8>, t: &str| {
        p.extend_from_slice(&(t.len() as u16).to_le_bytes());
        p.extend_from_slice(t.as_bytes());
    };
    payload.extend_from_slice(&1024u32.to_le_bytes());
    s(&mut payload, "2026-11-22T11:00:00.123456789Z");
    s(&mut payload, "GET");
    payload.extend_from_slice(&200i64.to_le_bytes());
    payload.extend_from_slice(&0u32.to_le_bytes());
    payload.extend_from_slice(&0.25f64.to_bits().to_le_bytes());
    s(&mut payload, "Log");
    s(&mut payload, "request served from cache in 3 ms");
    payload.extend_from_slice(&9i16.to_le_bytes());
    s(&mut payload, "INFO");
    payload.extend_from_slice(&42i64.to_le_bytes());
    s(&mut payload, "my-event");
    trace_entry(4, &meta, &payload)
}

/// The reference: enumerate and write its JSON for the whole event, as its own tools
/// write an event: `{"n":"provider:name",<fields>,"meta":{…}}`, where `meta` holds the
/// EventHeader keys uevrec's line has too (level, keyword, opcode, id, version, tag,
/// activity ids); without `meta` when `with_meta` is false (how this bench measured it
/// before 2026-11-23: less text than uevrec writes).
fn reference(
    ctx: &mut EventHeaderEnumeratorContext,
    out: &mut String,
    name: &str,
    data: &[u8],
    with_meta: bool,
) {
    if let Ok(mut e) = ctx.enumerate_with_name_and_data(name, data, u32::MAX) {
        out.push('{');
        let _ = write!(out, "\"n\":\"{}\"", e.event_info().json_identity_display());
        let mut comma = true;
        if e.move_next() {
            while e.state().can_move_next() {
                match e.write_json_item_and_move_next_sibling(
                    out,
                    comma,
                    PerfConvertOptions::Default,
                ) {
                    Ok(c) => comma = c,
                    Err(_) => break,
                }
            }
        }
        if with_meta {
            out.push_str(",\"meta\":{");
            let _ = e.event_info().json_meta_display(None).write_to(out);
            out.push('}');
        }
        out.push_str("}\n");
    }
}

/// The reference's lines for `records` (one pass), with or without `meta`.
fn reference_pass(
    ctx: &mut EventHeaderEnumeratorContext,
    out: &mut String,
    records: &[(String, Vec<u8>)],
    with_meta: bool,
) {
    out.clear();
    for (name, raw) in records {
        reference(ctx, out, name, black_box(&raw[8..]), with_meta);
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("eventheader");
    let stamp = |i: u64| RecordStamp {
        time_unix_ns: Some(T0 + i * 1_000),
        cpu: 1,
        pid: 42,
        tid: 42,
    };
    if let Some(records) = corpus() {
        let prepared = prepare(&records);
        group.throughput(Throughput::Elements(records.len() as u64));
        let mut writer = LineWriter::new(LineOptions::default());
        let mut out = Vec::with_capacity(1 << 20);
        group.bench_function("corpus/uevrec", |b| {
            b.iter(|| {
                out.clear();
                for (i, ((_, raw), p)) in records.iter().zip(&prepared).enumerate() {
                    writer.write_prepared(&mut out, &stamp(i as u64), p, black_box(raw));
                }
                black_box(out.len())
            })
        });
        let mut ctx = EventHeaderEnumeratorContext::new();
        let mut text = String::with_capacity(1 << 20);
        for (id, with_meta) in [
            ("corpus/tracepoint_decode", true),
            ("corpus/tracepoint_decode_no_meta", false),
        ] {
            group.bench_function(id, |b| {
                b.iter(|| {
                    reference_pass(&mut ctx, &mut text, &records, with_meta);
                    black_box(text.len())
                })
            });
        }
    } else {
        eprintln!("SKIP corpus benches: EventHeaderInterceptorLE64.dat not found");
    }
    let raw = otel_log();
    let name = "otel_L4K1";
    let prepared = PreparedFormat::new(&tracepoint_format(name, 1), "user_events", name, None);
    group.throughput(Throughput::Elements(1000));
    let mut writer = LineWriter::new(LineOptions::default());
    let mut out = Vec::with_capacity(1 << 20);
    group.bench_function("otel_log/uevrec", |b| {
        b.iter(|| {
            out.clear();
            for i in 0..1000 {
                writer.write_prepared(&mut out, &stamp(i), &prepared, black_box(&raw));
            }
            black_box(out.len())
        })
    });
    let mut ctx = EventHeaderEnumeratorContext::new();
    let mut text = String::with_capacity(1 << 20);
    let records = vec![(name.to_string(), raw.clone()); 1000];
    for (id, with_meta) in [
        ("otel_log/tracepoint_decode", true),
        ("otel_log/tracepoint_decode_no_meta", false),
    ] {
        group.bench_function(id, |b| {
            b.iter(|| {
                reference_pass(&mut ctx, &mut text, &records, with_meta);
                black_box(text.len())
            })
        });
    }
    group.finish();
    // Show one line of each, for the record.
    out.clear();
    writer.write_prepared(&mut out, &stamp(0), &prepared, &raw);
    eprint!("uevrec: {}", String::from_utf8_lossy(&out));
    text.clear();
    reference(&mut ctx, &mut text, name, &raw[8..], true);
    eprint!("tracepoint_decode: {text}");
}

/// `UEVREC_EH_PASSES=<case>:<n>`: write `n` passes of one case and exit, without
/// criterion: for `valgrind --tool=callgrind` instruction counts (BENCHMARKS.md has the
/// command). Cases: `corpus` (a pass is its 374 records) and `otel` (1000 records)
/// with uevrec; `corpus-ref`, `otel-ref` with tracepoint_decode as measured beside it
/// (with `meta`), `corpus-ref-no-meta`, `otel-ref-no-meta` without. `UEVREC_EH_DUMP=<file>`
/// also writes the last pass's lines there (to check that a change keeps the output byte
/// for byte).
fn passes(spec: &str) {
    let (case, n) = spec.split_once(':').expect("case:n");
    let n: u64 = n.parse().expect("a number of passes");
    let (records, reference) = match case.split_once("-ref") {
        Some((records, "")) => (records, Some(true)),
        Some((records, "-no-meta")) => (records, Some(false)),
        _ => (case, None),
    };
    let records = match records {
        "corpus" => corpus().expect("the corpus"),
        "otel" => vec![("otel_L4K1".to_string(), otel_log()); 1000],
        _ => panic!("unknown case {case}"),
    };
    let out = match reference {
        Some(with_meta) => {
            let mut ctx = EventHeaderEnumeratorContext::new();
            let mut text = String::with_capacity(1 << 20);
            for _ in 0..n {
                reference_pass(&mut ctx, &mut text, &records, with_meta);
            }
            text.into_bytes()
        }
        None => uevrec_passes(&records, n),
    };
    if let Some(path) = std::env::var_os("UEVREC_EH_DUMP") {
        std::fs::write(path, &out).expect("write UEVREC_EH_DUMP");
    }
    eprintln!("{case}: {n} passes of {} records", records.len());
}

/// `n` passes of `records` through uevrec's writer; the last pass's lines.
fn uevrec_passes(records: &[(String, Vec<u8>)], n: u64) -> Vec<u8> {
    let prepared = prepare(records);
    let mut writer = LineWriter::new(LineOptions::default());
    let mut out = Vec::with_capacity(1 << 20);
    for pass in 0..n {
        out.clear();
        for (i, ((_, raw), p)) in records.iter().zip(&prepared).enumerate() {
            let stamp = RecordStamp {
                time_unix_ns: Some(T0 + (pass * 1000 + i as u64) * 1_000),
                cpu: 1,
                pid: 42,
                tid: 42,
            };
            writer.write_prepared(&mut out, &stamp, p, black_box(raw));
        }
        black_box(out.len());
    }
    out
}

criterion_group!(benches, bench);

fn main() {
    if let Ok(spec) = std::env::var("UEVREC_EH_PASSES") {
        passes(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
