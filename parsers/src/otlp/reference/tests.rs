//! The direct writer ([`crate::otlp::OtlpWriter`]) against the message-type path it
//! replaced ([`super::OtlpWriter`]): the same records (with lost counts and notices
//! between them, over enough time for lines to end by age) give the same lines, equal
//! as JSON values (key order aside), on
//! - the 374 EventHeader events of `EventHeaderInterceptorLE64.dat`, whole and cut short
//!   at every few bytes (the streaming fallback and its errors);
//! - the 2,751 plain event formats of `formats0.zip`, each with record bytes that fit and
//!   with random ones (fields that fail, `uevrec.errors`);
//! - generated Common Schema logs and spans (valid and invalid special fields, repeated
//!   names, parts in any order, fields outside the parts) and arbitrary EventHeader
//!   bytes (proptest).
//!
//! The same events go through the export-frame writers too ([`assert_same_protobuf`]):
//! each protobuf frame, decoded with `opentelemetry-proto`'s prost types, equals the
//! JSON frame of the same request read by its serde types, counts and all.
//!
//! Corpus: `$UEVREC_CORPUS_DIR`, else `<project root>/../shared/corpus`; without it the
//! corpus tests say `SKIP` and pass, unless `UEVREC_REQUIRE_TIERS` has `pure`.

use std::io::Read;
use std::path::PathBuf;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use proptest::prelude::*;
use prost::Message;
use serde_json::Value;

use crate::eventheader::{trace_entry, tracepoint_format};
use crate::json_line::RecordWriter;
use crate::json_line::{LineOptions, PreparedFormat, RecordStamp};
use crate::otlp::tests::{Eh, eh_prepared, metrics_format, metrics_raw};
use crate::otlp::{ExportSignal, Frame, OtlpEncoding, OtlpWriter, read_frames};
use crate::parse_format;

#[path = "../../../../tests/common/tier.rs"]
mod tier;

const T0: u64 = 1_795_345_200_000_000_000;

/// Feed `w` `events` as [`assert_same`] does.
fn feed(w: &mut OtlpWriter, events: &[(PreparedFormat, Vec<u8>)], host: Option<&str>) -> Vec<u8> {
    if let Some(host) = host {
        w.set_host_name(host);
    }
    let mut out = Vec::new();
    for (n, (prepared, raw)) in events.iter().enumerate() {
        let n = n as u64;
        let stamp = RecordStamp {
            time_unix_ns: (n % 23 != 5).then_some(T0 + n * 7_000_000),
            cpu: (n % 3) as u32,
            pid: 1000 + n as u32,
            tid: 2000 + n as u32,
        };
        w.write_prepared(&mut out, &stamp, prepared, raw);
        if n % 17 == 16 {
            w.write_lost(&mut out, stamp.time_unix_ns, 2, u64::MAX - n);
            w.write_notice(&mut out, None, "attached", Some("s:\"e\""), "id 7\n");
        }
    }
    w.end_lines(&mut out);
    out
}

/// The export frames of `events` with protobuf bodies against those with JSON bodies:
/// the same frames (signal, counts), and the same requests (the protobuf decoded by
/// prost, the JSON read by serde, compared as `opentelemetry-proto` messages).
fn assert_same_protobuf(
    events: &[(PreparedFormat, Vec<u8>)],
    opts: LineOptions,
    host: Option<&str>,
) {
    let json = feed(
        &mut OtlpWriter::export(opts, OtlpEncoding::Json),
        events,
        host,
    );
    let proto = feed(
        &mut OtlpWriter::export(opts, OtlpEncoding::Protobuf),
        events,
        host,
    );
    let frames = |buf| -> Vec<Frame<'_>> {
        read_frames(buf)
            .collect::<Result<_, _>>()
            .expect("frames read back")
    };
    // The compiled protobuf plans (`fast.rs`) write what the general path writes.
    let mut general = OtlpWriter::export(opts, OtlpEncoding::Protobuf);
    general.general_only = true;
    let general = feed(&mut general, events, host);
    assert!(
        proto == general,
        "the protobuf fast paths and the general path differ"
    );
    let (json, proto) = (frames(&json), frames(&proto));
    assert_eq!(json.len(), proto.len(), "frame counts");
    assert!(!json.is_empty(), "no frames");
    for (j, p) in json.iter().zip(&proto) {
        assert_eq!(
            (j.encoding, p.encoding),
            (OtlpEncoding::Json, OtlpEncoding::Protobuf)
        );
        assert_eq!(
            (j.signal, j.records, j.items),
            (p.signal, p.records, p.items)
        );
        assert!(j.tracepoints.iter().eq(p.tracepoints.iter()));
        match j.signal {
            ExportSignal::Logs => {
                let want: ExportLogsServiceRequest = serde_json::from_slice(j.body).unwrap();
                let got = ExportLogsServiceRequest::decode(p.body).expect("protobuf");
                let items: usize = got
                    .resource_logs
                    .iter()
                    .flat_map(|r| &r.scope_logs)
                    .map(|s| s.log_records.len())
                    .sum();
                assert_eq!(items, p.items as usize);
                assert_eq!(got, want);
            }
            ExportSignal::Traces => {
                let want: ExportTraceServiceRequest = serde_json::from_slice(j.body).unwrap();
                let got = ExportTraceServiceRequest::decode(p.body).expect("protobuf");
                assert_eq!(got, want);
            }
            ExportSignal::Metrics => {
                let want: ExportMetricsServiceRequest = serde_json::from_slice(j.body).unwrap();
                let got = ExportMetricsServiceRequest::decode(p.body).expect("protobuf");
                assert_eq!(got, want);
            }
        }
    }
}

/// Feed both writers `events` (with a lost count and a notice every 17 records, 7 ms of
/// record time apart) and compare their lines.
fn assert_same(events: &[(PreparedFormat, Vec<u8>)], opts: LineOptions, host: Option<&str>) {
    let mut new = OtlpWriter::new(opts);
    let mut old = super::OtlpWriter::new(opts);
    if let Some(host) = host {
        new.set_host_name(host);
        old.set_host_name(host);
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for (n, (prepared, raw)) in events.iter().enumerate() {
        let n = n as u64;
        let stamp = RecordStamp {
            time_unix_ns: (n % 23 != 5).then_some(T0 + n * 7_000_000),
            cpu: (n % 3) as u32,
            pid: 1000 + n as u32,
            tid: 2000 + n as u32,
        };
        new.write_prepared(&mut a, &stamp, prepared, raw);
        old.write_prepared(&mut b, &stamp, prepared, raw);
        if n % 17 == 16 {
            new.write_lost(&mut a, stamp.time_unix_ns, 2, u64::MAX - n);
            old.write_lost(&mut b, stamp.time_unix_ns, 2, u64::MAX - n);
            new.write_notice(&mut a, None, "attached", Some("s:\"e\""), "id 7\n");
            old.write_notice(&mut b, None, "attached", Some("s:\"e\""), "id 7\n");
        }
    }
    new.end_lines(&mut a);
    old.end_lines(&mut b);
    let lines = |out: &[u8]| -> Vec<Value> {
        std::str::from_utf8(out)
            .expect("UTF-8")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    };
    let (a, b) = (lines(&a), lines(&b));
    assert_eq!(a.len(), b.len(), "line counts");
    for (x, y) in a.iter().zip(&b) {
        if x != y {
            panic!("{}", first_difference(x, y, "$"));
        }
    }
    assert_same_protobuf(events, opts, host);
}

/// Where two JSON values first differ (a path and both sides), for the failure message.
fn first_difference(x: &Value, y: &Value, path: &str) -> String {
    match (x, y) {
        (Value::Object(p), Value::Object(q)) => {
            for (k, v) in p {
                match q.get(k) {
                    Some(w) if v != w => return first_difference(v, w, &format!("{path}.{k}")),
                    None => return format!("{path}.{k}: only in the new output: {v}"),
                    _ => {}
                }
            }
            let extra: Vec<&String> = q.keys().filter(|k| !p.contains_key(*k)).collect();
            format!("{path}: keys only in the reference: {extra:?}")
        }
        (Value::Array(p), Value::Array(q)) if p.len() == q.len() => p
            .iter()
            .zip(q)
            .enumerate()
            .find(|(_, (v, w))| v != w)
            .map(|(i, (v, w))| first_difference(v, w, &format!("{path}[{i}]")))
            .unwrap_or_default(),
        _ => format!("{path}:\n new       {x}\n reference {y}"),
    }
}

fn corpus_dir() -> PathBuf {
    std::env::var_os("UEVREC_CORPUS_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"),
        PathBuf::from,
    )
}

/// `(tracepoint name, raw trace entry)` of each record of the EventHeader corpus.
fn eventheader_corpus() -> Option<Vec<(String, Vec<u8>)>> {
    let path = corpus_dir().join("EventHeaderInterceptorLE64.dat");
    let Ok(bytes) = std::fs::read(&path) else {
        tier::skip(tier::Tier::Pure, &format!("{} not found", path.display()));
        return None;
    };
    let mut out = Vec::new();
    let mut rest = &bytes[..];
    while rest.len() >= 4 {
        let size = u32::from_le_bytes(rest[..4].try_into().unwrap()) as usize;
        let (record, next) = rest.split_at(size.min(rest.len()));
        let body = &record[4..];
        let nul = body.iter().position(|&b| b == 0).unwrap();
        let mut raw = vec![0u8; 8];
        raw.extend_from_slice(&body[nul + 1..]);
        out.push((String::from_utf8_lossy(&body[..nul]).into_owned(), raw));
        rest = next;
    }
    Some(out)
}

#[test]
fn eventheader_corpus_whole_and_cut_short() {
    let Some(records) = eventheader_corpus() else {
        return;
    };
    assert_eq!(records.len(), 374);
    let mut events = Vec::new();
    for (name, raw) in &records {
        let prepared = PreparedFormat::new(&tracepoint_format(name, 1), "user_events", name, None);
        assert!(prepared.eventheader().is_some(), "{name}");
        events.push((prepared.clone(), raw.clone()));
        for cut in (8..raw.len()).step_by(7) {
            events.push((prepared.clone(), raw[..cut].to_vec()));
        }
    }
    assert_same(&events, LineOptions::default(), Some("h"));
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[test]
fn plain_formats_of_the_corpus() {
    let path = corpus_dir().join("formats0.zip");
    let Ok(file) = std::fs::File::open(&path) else {
        tier::skip(tier::Tier::Pure, &format!("{} not found", path.display()));
        return;
    };
    let mut zip = zip::ZipArchive::new(file).expect("formats0.zip");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut events = Vec::new();
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).unwrap();
        let mut text = String::new();
        entry.read_to_string(&mut text).unwrap();
        let (system, _) = entry.name().split_once(' ').unwrap_or(("s", ""));
        let Ok(format) = parse_format(&text) else {
            continue;
        };
        let size = format
            .fields
            .iter()
            .map(|f| (f.offset + f.size) as usize)
            .max()
            .unwrap_or(8);
        let prepared = PreparedFormat::new(&format, system, &format.name, None);
        // Zeros (every location empty), random bytes of the right size (locations
        // mostly out of bounds), and a short record.
        events.push((prepared.clone(), vec![0; size + 16]));
        events.push((prepared.clone(), rng.bytes(size + 16)));
        events.push((prepared, rng.bytes(size / 2)));
    }
    assert!(events.len() > 8000, "{}", events.len());
    assert_same(&events, LineOptions::default(), None);
    assert_same(
        &events,
        LineOptions {
            endian: crate::Endian::Big,
            ..Default::default()
        },
        Some("h"),
    );
}

#[test]
fn metrics_events_and_their_errors() {
    let format = metrics_format("otlp_metrics");
    let prepared = PreparedFormat::new(&format, "user_events", "otlp_metrics", None);
    let events = vec![
        (prepared.clone(), metrics_raw(&[0xff, 0xff])),
        (prepared.clone(), metrics_raw(&[])),
        (prepared, metrics_raw(b"\x0a\x00")),
    ];
    assert_same(&events, LineOptions::default(), Some("h"));
}

/// A value of a generated field.
#[derive(Debug, Clone)]
enum Val {
    Str(String),
    I64(i64),
    U32(u32),
    F64(f64),
    Bool(bool),
}

impl Val {
    fn add(self, eh: Eh, name: &str) -> Eh {
        match self {
            Val::Str(s) => eh.str(name, &s),
            Val::I64(v) => eh.i64(name, v),
            Val::U32(v) => eh.u32(name, v),
            Val::F64(v) => eh.f64(name, v),
            Val::Bool(v) => eh.bool(name, v),
        }
    }
}

fn hex(n: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(any::<u8>(), n)
        .prop_map(|b| b.iter().map(|b| format!("{b:02X}")).collect())
}

/// A value, often one that a special field accepts.
fn val() -> impl Strategy<Value = Val> {
    prop_oneof![
        Just(Val::Str("2024-03-28T00:45:12.3Z".into())),
        Just(Val::Str("Log".into())),
        Just(Val::Str("Span".into())),
        Just(Val::Str(
            r#"[{"toTraceId":"0af7651916cd43dd8448eb211c80319c","toSpanId":"00f067aa0ba902b7"}]"#
                .into()
        )),
        Just(Val::Str(
            "[{\"toTraceId\":\"0a\",\"toSpanId\":\"00\"}]".into()
        )),
        hex(16).prop_map(Val::Str),
        hex(8).prop_map(Val::Str),
        "\\PC{0,12}".prop_map(Val::Str),
        (-3i64..7).prop_map(Val::I64),
        any::<i64>().prop_map(Val::I64),
        any::<u32>().prop_map(Val::U32),
        any::<f64>().prop_map(Val::F64),
        any::<bool>().prop_map(Val::Bool),
    ]
}

const NAMES: &[&str] = &[
    "time",
    "ext_dt_traceId",
    "ext_dt_spanId",
    "ext_cloud_role",
    "ext_cloud_roleInstance",
    "_typeName",
    "body",
    "severityNumber",
    "severityText",
    "eventId",
    "name",
    "startTime",
    "success",
    "kind",
    "parentId",
    "links",
    "statusMessage",
    "dbSystem",
    "httpUrl",
    "event_id",
    "process.pid",
    "statusMessage#2",
    "x",
];

fn members() -> impl Strategy<Value = Vec<(String, Val)>> {
    prop::collection::vec(
        (
            prop_oneof![
                4 => prop::sample::select(NAMES).prop_map(String::from),
                1 => "[a-z.#]{0,6}",
            ],
            val(),
        ),
        0..8,
    )
}

/// A Common Schema event (or nearly one): `__csver__`, parts in any order, fields
/// outside them.
#[derive(Debug, Clone)]
struct Cs {
    csver: u32,
    type_name: Option<&'static str>,
    parts: Vec<(&'static str, Vec<(String, Val)>)>,
    level: u8,
}

fn cs_event() -> impl Strategy<Value = Cs> {
    (
        prop_oneof![8 => Just(1024u32), 1 => Just(1023u32)],
        prop::sample::select(vec![Some("Log"), Some("Span"), Some("Other"), None]),
        prop::collection::vec(
            (
                prop::sample::select(vec!["PartA", "PartB", "PartC", "PartB", "Other"]),
                members(),
            ),
            0..5,
        ),
        0u8..7,
    )
        .prop_map(|(csver, type_name, parts, level)| Cs {
            csver,
            type_name,
            parts,
            level,
        })
}

impl Cs {
    fn raw(&self) -> Vec<u8> {
        let mut eh = Eh::new("Ev").u32("__csver__", self.csver);
        let mut typed = false;
        for (part, members) in &self.parts {
            let type_name = (*part == "PartB" && !typed)
                .then_some(self.type_name)
                .flatten();
            typed |= type_name.is_some();
            let count = members.len() + usize::from(type_name.is_some());
            eh = eh.structure(part, count as u8);
            if let Some(t) = type_name {
                eh = eh.str("_typeName", t);
            }
            for (name, v) in members {
                eh = v.clone().add(eh, name);
            }
        }
        let Eh { meta, payload } = eh;
        trace_entry(self.level, &meta, &payload)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn generated_common_schema_events(events in prop::collection::vec(cs_event(), 1..12)) {
        let events: Vec<_> = events
            .iter()
            .map(|cs| (eh_prepared(&format!("Prov_L{}K1", cs.level.max(1))), cs.raw()))
            .collect();
        assert_same(&events, LineOptions::default(), Some("host \"1\""));
    }

    #[test]
    fn arbitrary_eventheader_bytes(
        events in prop::collection::vec(
            (prop::collection::vec(any::<u8>(), 0..24), prop::collection::vec(any::<u8>(), 0..40)),
            1..8,
        ),
        level in 0u8..7,
    ) {
        let prepared = eh_prepared("P_L4K1");
        let events: Vec<_> = events
            .iter()
            .map(|(meta, payload)| {
                let mut meta = meta.clone();
                meta.insert(0, b'E');
                meta.insert(1, 0);
                (prepared.clone(), trace_entry(level, &meta, payload))
            })
            .collect();
        assert_same(&events, LineOptions::default(), None);
    }
}
