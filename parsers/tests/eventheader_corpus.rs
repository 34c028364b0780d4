//! Every record of `EventHeaderInterceptorLE64.dat` (374 EventHeader events from
//! microsoft/LinuxTracepoints) decodes with no error, and every value equals what the
//! reference decoder `tracepoint_decode` makes of it (its JSON text for each item,
//! parsed and normalised; the differences the JSON spec asks for are listed in
//! [`justified`]).
//!
//! Corpus: `$UEVREC_CORPUS_DIR`, else `<project root>/../shared/corpus`. Without it the
//! test prints `SKIP: …` and passes, unless `UEVREC_REQUIRE_TIERS` contains `pure`.

use std::path::PathBuf;

use serde_json::{Map, Value};
use tracepoint_decode::{
    EventHeaderEnumeratorContext, EventHeaderEnumeratorState, PerfConvertOptions,
};
use uevrec_parsers::eventheader::tracepoint_format;
use uevrec_parsers::{LineOptions, LineWriter, PreparedFormat, RecordMeta, RecordStamp};

/// Records in the file (shared/corpus/README.md).
const RECORDS: usize = 374;

/// `(tracepoint name, payload after the 8 common bytes)` for each record, or `None`
/// (with the reason printed) when the corpus is absent.
fn records() -> Option<Vec<(String, Vec<u8>)>> {
    let dir = std::env::var_os("UEVREC_CORPUS_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"),
        PathBuf::from,
    );
    let path = dir.join("EventHeaderInterceptorLE64.dat");
    let Ok(bytes) = std::fs::read(&path) else {
        let reason = format!(
            "corpus file not found at {} (set UEVREC_CORPUS_DIR)",
            path.display()
        );
        if std::env::var("UEVREC_REQUIRE_TIERS").is_ok_and(|t| t.contains("pure")) {
            panic!("UEVREC_REQUIRE_TIERS has pure: {reason}");
        }
        println!("SKIP: {reason}");
        return None;
    };
    let mut out = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let size = u32::from_le_bytes(rest[..4].try_into().unwrap()) as usize;
        let (record, next) = rest.split_at(size);
        let body = &record[4..];
        let nul = body
            .iter()
            .position(|&b| b == 0)
            .expect("NUL after the name");
        let name = std::str::from_utf8(&body[..nul]).expect("UTF-8 name");
        out.push((name.to_string(), body[nul + 1..].to_vec()));
        rest = next;
    }
    Some(out)
}

/// Our line for `payload`, via write_prepared and write_record (which must agree).
fn our_line(name: &str, payload: &[u8]) -> Value {
    let mut raw = vec![0u8; 8];
    raw.extend_from_slice(payload);
    let format = tracepoint_format(name, 1);
    let mut writer = LineWriter::new(LineOptions::default());
    let prepared = PreparedFormat::new(&format, "user_events", name, None);
    assert!(prepared.eventheader().is_some(), "{name} is EventHeader");
    let mut a = Vec::new();
    let stamp = RecordStamp {
        time_unix_ns: Some(1),
        cpu: 0,
        pid: 1,
        tid: 1,
    };
    writer.write_prepared(&mut a, &stamp, &prepared, &raw);
    let mut b = Vec::new();
    let meta = RecordMeta {
        time_unix_ns: Some(1),
        cpu: 0,
        pid: 1,
        tid: 1,
        system: "user_events",
        event: name,
        format_id: None,
    };
    writer.write_record(&mut b, &meta, &format, &raw);
    assert_eq!(a, b, "write_prepared and write_record differ");
    assert_eq!(a.iter().filter(|&&c| c == b'\n').count(), 1);
    serde_json::from_slice(&a).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&a)))
}

fn options() -> PerfConvertOptions {
    PerfConvertOptions::None
        .or(PerfConvertOptions::StringControlCharsJsonEscape)
        .or(PerfConvertOptions::FloatNonFiniteAsString)
        .or(PerfConvertOptions::IntHexAsString)
        .or(PerfConvertOptions::UnixTimeWithinRangeAsString)
}

/// Add `value` to the innermost container, renaming duplicate keys as the spec does.
fn add(stack: &mut [(Value, Option<String>)], name: Option<String>, value: Value) {
    match &mut stack.last_mut().unwrap().0 {
        Value::Array(a) => a.push(value),
        Value::Object(o) => {
            let name = name.unwrap();
            let mut key = name.clone();
            let mut n = 2;
            while o.contains_key(&key) {
                key = format!("{name}#{n}");
                n += 1;
            }
            o.insert(key, value);
        }
        _ => unreachable!(),
    }
}

/// The reference decoder's fields as a JSON value (objects, arrays, its JSON text for
/// each value), plus (field path, encoding, format) per value for the report.
fn reference(name: &str, payload: &[u8]) -> Value {
    let mut ctx = EventHeaderEnumeratorContext::new();
    let mut e = ctx
        .enumerate_with_name_and_data(name, payload, u32::MAX)
        .unwrap_or_else(|err| panic!("reference rejects {name}: {err}"));
    let mut stack: Vec<(Value, Option<String>)> = vec![(Value::Object(Map::new()), None)];
    let text = |f: &dyn Fn(&mut String) -> std::fmt::Result| {
        let mut s = String::new();
        f(&mut s).unwrap();
        serde_json::from_str::<Value>(&s).unwrap_or_else(|err| panic!("{err}: {s}"))
    };
    let mut moved = e.move_next();
    while moved {
        let info = e.item_info();
        let meta = info.metadata();
        let key =
            (!meta.is_element()).then(|| String::from_utf8_lossy(info.name_bytes()).into_owned());
        match e.state() {
            EventHeaderEnumeratorState::Value => {
                let v = text(&|s| info.value().write_json_scalar_to(s, options()));
                add(&mut stack, key, v);
            }
            EventHeaderEnumeratorState::ArrayBegin if meta.type_size() != 0 => {
                let v = text(&|s| info.value().write_json_simple_array_to(s, options()));
                add(&mut stack, key, v);
                moved = e.move_next_sibling();
                continue;
            }
            EventHeaderEnumeratorState::ArrayBegin => stack.push((Value::Array(vec![]), key)),
            EventHeaderEnumeratorState::StructBegin => stack.push((Value::Object(Map::new()), key)),
            EventHeaderEnumeratorState::ArrayEnd | EventHeaderEnumeratorState::StructEnd => {
                let (v, key) = stack.pop().unwrap();
                add(&mut stack, key, v);
            }
            s => panic!("unexpected state {s}"),
        }
        moved = e.move_next();
    }
    assert_eq!(
        e.state(),
        EventHeaderEnumeratorState::AfterLastItem,
        "reference stops with {}",
        e.last_error()
    );
    assert_eq!(stack.len(), 1);
    stack.pop().unwrap().0
}

/// Differences the JSON spec asks for (see docs/eventheader.md): returns a label when
/// `ours` and `theirs` differ only that way. `key` is the field's name.
fn justified(key: &str, ours: &Value, theirs: &Value) -> Option<&'static str> {
    // TestProviderDyn's `s<N>one`/`s<N>big` (StringLength16Char8) and `b<N>…`
    // (BinaryLength16Char8) fields carry value formats (errno, pid, time, float, bool,
    // port, IP, UUID …) on N-byte values. The spec reads them as the ValueN of that
    // length with that format; the reference does so only for the (format, length)
    // pairs it lists and shows the bytes (string or hex) otherwise.
    let length16 = key
        .strip_prefix(['s', 'b'])
        .and_then(|k| k.strip_suffix("one").or_else(|| k.strip_suffix("big")))
        .is_some_and(|n| matches!(n, "1" | "2" | "4" | "8" | "16"));
    if let (Value::String(a), Value::String(b)) = (ours, theirs) {
        // Invalid UTF-8: U+FFFD per maximal invalid sequence (the spec), where the
        // reference falls back to Latin-1.
        if a.chars().count() == b.chars().count()
            && a.chars()
                .zip(b.chars())
                .all(|(x, y)| x == y || (x == '\u{FFFD}' && ('\u{80}'..='\u{ff}').contains(&y)))
        {
            return Some("invalid UTF-8: U+FFFD, not Latin-1");
        }
    }
    if length16 {
        let value_like = match ours {
            Value::Number(_) | Value::Bool(_) | Value::Null => true,
            Value::String(s) => s.len() == 32 && s.bytes().all(|c| c.is_ascii_hexdigit()),
            _ => false,
        };
        if value_like {
            return Some("Length16 with a value format: the ValueN of its length");
        }
    }
    match (ours, theirs) {
        (Value::String(a), Value::String(b)) if a == "-Infinity" && b == "-inf" => {
            Some("non-finite float text: -Infinity, not -inf")
        }
        (Value::Number(a), Value::String(b))
            if a.as_i64()
                .is_some_and(|n| !(-62_167_219_200..=253_402_300_799).contains(&n))
                && b.ends_with('Z') =>
        {
            Some("time beyond year 9999: the number (RFC 3339 has 4-digit years)")
        }
        (Value::String(a), Value::String(b)) => {
            // Hex bytes: `0aff` vs `0A FF`; hex ints: `0x1f` vs `0x1F`.
            let b2: String = b.chars().filter(|&c| c != ' ').collect();
            if *a == b2.to_lowercase() {
                return Some("hex text: lowercase, no spaces");
            }
            None
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {
            Some("same number, other text")
        }
        (Value::Bool(a), Value::Number(b)) if b.as_u64() == Some(u64::from(*a)) => {
            Some("boolean format on Value64: true/false")
        }
        _ => None,
    }
}

/// Compare, collecting unjustified differences and counting justified ones.
fn compare(
    path: &str,
    ours: &Value,
    theirs: &Value,
    bad: &mut Vec<String>,
    seen: &mut std::collections::BTreeMap<&'static str, usize>,
) {
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            if a.len() != b.len() || a.keys().any(|k| !b.contains_key(k)) {
                bad.push(format!("{path}: keys {:?} vs {:?}", a.keys(), b.keys()));
                return;
            }
            for (k, v) in a {
                compare(&format!("{path}.{k}"), v, &b[k], bad, seen);
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                bad.push(format!("{path}: {} elements vs {}", a.len(), b.len()));
                return;
            }
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                compare(&format!("{path}[{i}]"), x, y, bad, seen);
            }
        }
        (a, b) if a == b => {}
        (a, b) => match justified(path.rsplit('.').next().unwrap_or(path), a, b) {
            Some(why) => *seen.entry(why).or_default() += 1,
            None => bad.push(format!("{path}: ours {a} vs reference {b}")),
        },
    }
}

#[test]
fn corpus_decodes_like_the_reference() {
    let Some(records) = records() else { return };
    assert_eq!(records.len(), RECORDS);
    let mut bad = Vec::new();
    let mut seen = std::collections::BTreeMap::new();
    let mut values = 0usize;
    for (i, (name, payload)) in records.iter().enumerate() {
        let line = our_line(name, payload);
        assert!(
            line.get("errors").is_none() && line.get("undecoded").is_none(),
            "record {i} {name}: {line}"
        );
        let fields = &line["fields"];
        let theirs = reference(name, payload);
        values += count(&theirs);
        let before = bad.len();
        compare(
            &format!("#{i} {name}"),
            fields,
            &theirs,
            &mut bad,
            &mut seen,
        );
        if bad.len() > before && std::env::var_os("EH_DUMP").is_some() {
            println!("ours:   {fields}\ntheirs: {theirs}");
        }
    }
    println!(
        "{} records, {values} values compared; justified differences: {seen:?}",
        records.len()
    );
    assert!(
        bad.is_empty(),
        "{} differences:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

fn count(v: &Value) -> usize {
    match v {
        Value::Object(o) => o.values().map(count).sum(),
        Value::Array(a) => a.iter().map(count).sum(),
        _ => 1,
    }
}

/// Every corpus record takes a compiled plan (one scratch for the whole file, as a
/// recorder's writer has), and the plan writes what the streaming writer writes.
#[test]
fn corpus_plans_write_what_the_streaming_writer_writes() {
    use uevrec_parsers::eventheader::TracepointName;
    use uevrec_parsers::eventheader_json::{
        Scratch, write_event, write_event_planned, write_event_streaming,
    };
    let Some(records) = records() else { return };
    let (mut s, mut t) = (Scratch::default(), Scratch::default());
    let mut planned = 0;
    for (name, payload) in &records {
        let tp = TracepointName::parse(name).expect("EventHeader name");
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        write_event(&mut a, &mut s, &tp, payload);
        write_event_streaming(&mut b, &mut t, &tp, payload);
        assert_eq!(
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b),
            "{name}"
        );
        if write_event_planned(&mut c, &mut s, &tp, payload) {
            assert_eq!(c, b, "{name}");
            planned += 1;
        }
    }
    println!("{planned} of {} records planned", records.len());
    assert_eq!(planned, RECORDS);
}

/// The field records of a metadata block after its event name, flattened in order as
/// `(name, encoding byte's low 5 bits, format, tag, array kind, count)`, read by the
/// metadata reader; the schema line's fields, flattened the same way, must equal them.
fn metadata_fields(meta: &[u8]) -> Vec<(String, String, String, u64, String, u64)> {
    use uevrec_parsers::eventheader::metadata::read_field;
    use uevrec_parsers::eventheader::{ArrayKind, Encoding};
    let mut pos = meta.iter().position(|&b| b == 0).unwrap() + 1;
    let mut out = Vec::new();
    while pos < meta.len() {
        let f = read_field(meta, pos, uevrec_parsers::Endian::Little).unwrap();
        pos = f.next;
        let (array, count) = match f.array {
            ArrayKind::Scalar => ("", 0),
            ArrayKind::Constant(n) => ("constant", u64::from(n)),
            ArrayKind::Variable => ("variable", 0),
        };
        // A struct's count may promise more fields than the block holds (the corpus
        // has one): the schema line lists those there are, nested.
        let format = if f.encoding == Encoding::Struct {
            "struct".to_string()
        } else {
            format!("{:?}", f.format())
        };
        out.push((
            String::from_utf8_lossy(f.name).into_owned(),
            format!("{:?}", f.encoding),
            format,
            u64::from(f.tag),
            array.to_string(),
            count,
        ));
    }
    out
}

/// The schema line's fields flattened as [`metadata_fields`] does, mapping its names
/// back to the enums' (`value8` → `Value8`, `hex_int` → `HexInt`).
fn schema_fields(fields: &Value, out: &mut Vec<(String, String, String, u64, String, u64)>) {
    let camel = |s: &str| -> String {
        s.split('_')
            .map(|w| {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_uppercase().chain(c).collect::<String>())
                    .unwrap_or_default()
            })
            .collect()
    };
    for f in fields.as_array().expect("fields is an array") {
        let encoding = match f["encoding"].as_str().unwrap() {
            "zstring_char8" => "ZStringChar8".to_string(),
            "zstring_char16" => "ZStringChar16".to_string(),
            "zstring_char32" => "ZStringChar32".to_string(),
            e => camel(e),
        };
        let inner = f.get("fields");
        let format = match inner {
            Some(_) => "struct".to_string(),
            None => match f["format"].as_str().unwrap() {
                "string8" => "String8".to_string(),
                other => camel(other),
            },
        };
        out.push((
            f["name"].as_str().unwrap().to_string(),
            encoding,
            format,
            f["tag"].as_u64().unwrap_or(0),
            f["array"].as_str().unwrap_or("").to_string(),
            f["count"].as_u64().unwrap_or(0),
        ));
        if let Some(inner) = inner {
            schema_fields(inner, out);
        }
    }
}

#[test]
fn corpus_metadata_blocks_are_described_once_before_their_first_event() {
    use std::collections::HashSet;
    use uevrec_parsers::eventheader::parse_event;
    let Some(records) = records() else { return };
    let mut writer = LineWriter::new(LineOptions::default());
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    let (mut described, mut events) = (0, 0);
    for (name, payload) in &records {
        let mut raw = vec![0u8; 8];
        raw.extend_from_slice(payload);
        let format = tracepoint_format(name, 1);
        let prepared = PreparedFormat::new(&format, "user_events", name, None);
        let stamp = RecordStamp {
            time_unix_ns: Some(1),
            cpu: 0,
            pid: 1,
            tid: 1,
        };
        let mut out = b"{\"before\":1}\n".to_vec();
        let start = out.len();
        writer.write_prepared(&mut out, &stamp, &prepared, &raw);
        let event_line = out[start..].to_vec();
        writer.announce_learnt(&mut out, start, Some(1), &prepared);
        let text = std::str::from_utf8(&out).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        assert_eq!(lines[0]["before"], 1, "lines before stay first");
        assert!(
            out.ends_with(&event_line),
            "the event line comes last, whole"
        );
        events += 1;
        let meta = parse_event(payload).unwrap().metadata.map(<[u8]>::to_vec);
        let new = meta.as_ref().is_some_and(|m| seen.insert(m.clone()));
        if !new {
            assert_eq!(
                lines.len(),
                2,
                "{name}: no schema line for a block seen before"
            );
            continue;
        }
        let meta = meta.unwrap();
        assert_eq!(
            lines.len(),
            3,
            "{name}: a schema line for a new block: {text}"
        );
        let schema = &lines[1];
        described += 1;
        assert_eq!(schema["uevrec"], "schema");
        assert_eq!(schema["source"], "eventheader");
        assert_eq!(schema["event"], format!("user_events:{name}"));
        assert_eq!(schema["tracepoint"]["event"], name.as_str());
        let eh = &schema["eventheader"];
        assert_eq!(eh["provider"], lines[2]["provider"]);
        assert_eq!(eh["name"], lines[2]["name"], "{name}");
        assert_eq!(eh["byte_order"], "little");
        assert!(eh.get("error").is_none(), "{schema}");
        let hex: String = meta.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(eh["metadata"], hex.as_str());
        let mut listed = Vec::new();
        schema_fields(&eh["fields"], &mut listed);
        assert_eq!(listed, metadata_fields(&meta), "{name}: {schema}");
    }
    println!("{events} events, {described} metadata blocks described");
    assert_eq!(described, seen.len());
    assert_eq!(described, 258, "the corpus has 258 distinct blocks");
}
