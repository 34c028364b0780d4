//! Every one of the 2,751 real format files in `formats0.zip` parses, and the parse agrees
//! with an independent line-level reading of the same text (plain string splitting, not
//! the parser under test).
//!
//! Corpus: `$UEVREC_CORPUS_DIR`, else `<project root>/../shared/corpus`. Without it the
//! test prints why and returns.

use std::io::Read;
use std::path::PathBuf;

use uevrec_parsers::parse_format;
use uevrec_parsers::{Element, EventFormat, FieldKind, LocKind};

/// The number of entries in `formats0.zip` (see shared/corpus/README.md).
const CORPUS_FILES: usize = 2751;
/// Entries whose text uses `__data_loc` (README).
const DATA_LOC_FILES: usize = 438;

/// The one "this test needs X" helper, shared with the root crate's tests.
#[path = "../../tests/common/tier.rs"]
mod tier;
use tier::Tier;

/// The schema-line reader the host and VM tiers use too.
#[path = "../../tests/common/schema_line.rs"]
mod schema_line;

/// All `(entry name, text)` pairs of the corpus, or `None` (with the reason printed).
fn corpus() -> Option<Vec<(String, String)>> {
    let dir = std::env::var_os("UEVREC_CORPUS_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"),
        PathBuf::from,
    );
    let path = dir.join("formats0.zip");
    let Ok(file) = std::fs::File::open(&path) else {
        tier::skip(
            Tier::Pure,
            &format!(
                "corpus not found at {} (set UEVREC_CORPUS_DIR)",
                path.display()
            ),
        );
        return None;
    };
    let mut zip = zip::ZipArchive::new(file).expect("formats0.zip is a readable zip");
    let mut entries = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).expect("zip entry");
        let mut text = String::new();
        entry
            .read_to_string(&mut text)
            .expect("zip entry is UTF-8 text");
        entries.push((entry.name().to_string(), text));
    }
    Some(entries)
}

/// What the text says about one field line, read with plain string splitting.
#[derive(Debug, PartialEq)]
struct LineField {
    name: String,
    offset: u32,
    size: u32,
    signed: Option<bool>,
}

/// What the text says, read independently of the parser.
#[derive(Debug, Default)]
struct LineFacts {
    name: String,
    id: u32,
    common: Vec<LineField>,
    fields: Vec<LineField>,
    /// The declaration text of every field line, in order.
    decls: Vec<String>,
    print_fmt: String,
}

fn line_facts(text: &str) -> LineFacts {
    let mut facts = LineFacts::default();
    let mut after_blank = false;
    for line in text.split('\n') {
        if let Some(v) = line.strip_prefix("name: ") {
            facts.name = v.to_string();
        } else if let Some(v) = line.strip_prefix("ID: ") {
            facts.id = v.parse().expect("ID number");
        } else if let Some(v) = line.strip_prefix("print fmt: ") {
            facts.print_fmt = v.to_string();
        } else if line.trim().is_empty() {
            after_blank = true;
        } else if let Some(field) = line.trim().strip_prefix("field:") {
            let parts: Vec<&str> = field.split(';').map(str::trim).collect();
            let value = |key: &str| parts.iter().find_map(|p| p.strip_prefix(key));
            // Name: the last word of the declaration, brackets and `*` removed.
            let decl = parts[0];
            facts.decls.push(decl.to_string());
            let decl = decl
                .strip_suffix(']')
                .map_or(decl, |d| &d[..d.rfind('[').unwrap()]);
            let name = decl
                .split_whitespace()
                .last()
                .unwrap()
                .trim_start_matches('*');
            let parsed = LineField {
                name: name.to_string(),
                offset: value("offset:").unwrap().parse().unwrap(),
                size: value("size:").unwrap().parse().unwrap(),
                signed: value("signed:").map(|s| s == "1"),
            };
            if after_blank {
                &mut facts.fields
            } else {
                &mut facts.common
            }
            .push(parsed);
        }
    }
    facts
}

/// The kind a declaration must resolve to, when its text alone decides it.
fn kind_from_text(decl: &str, size: u32) -> Option<FieldKind> {
    if decl.starts_with("__data_loc ") {
        return Some(FieldKind::Dynamic {
            loc: LocKind::DataLoc,
            elem: element_from_text(decl)?,
        });
    }
    if decl.starts_with("__rel_loc ") {
        return Some(FieldKind::Dynamic {
            loc: LocKind::RelLoc,
            elem: element_from_text(decl)?,
        });
    }
    if decl.contains('*') && !decl.contains('[') {
        return Some(FieldKind::Integer {
            size: size as u8,
            signed: false,
        });
    }
    if decl.ends_with(']') && size > 0 {
        let elem = element_from_text(decl)?;
        return Some(FieldKind::FixedArray {
            elem,
            count: size / elem.size(),
        });
    }
    None
}

/// `char …[` is a string, `u8`/`__u8`/`unsigned char …[` bytes; others undecided here.
fn element_from_text(decl: &str) -> Option<Element> {
    let words: Vec<&str> = decl
        .split(|c: char| c.is_whitespace() || c == '[')
        .collect();
    let words: Vec<&str> = words
        .into_iter()
        .filter(|w| !w.is_empty() && !w.starts_with("__") || *w == "__u8")
        .collect();
    match words.as_slice() {
        ["char", ..] => Some(Element::Char),
        ["u8" | "__u8", ..] | ["unsigned", "char", ..] => Some(Element::Byte),
        _ => None,
    }
}

fn disagreements(entry: &str, facts: &LineFacts, parsed: &EventFormat) -> Vec<String> {
    let mut out = Vec::new();
    if (facts.name.as_str(), facts.id) != (parsed.name.as_str(), parsed.id) {
        out.push(format!(
            "{entry}: name/id {:?} vs {:?}",
            (&facts.name, facts.id),
            (&parsed.name, parsed.id)
        ));
    }
    if facts.print_fmt != parsed.print_fmt {
        out.push(format!("{entry}: print fmt differs"));
    }
    for (what, want, got) in [
        ("common", &facts.common, &parsed.common_fields),
        ("event", &facts.fields, &parsed.fields),
    ] {
        let got: Vec<LineField> = got
            .iter()
            .map(|f| LineField {
                name: f.name.clone(),
                offset: f.offset,
                size: f.size,
                signed: f.signed,
            })
            .collect();
        if *want != got {
            out.push(format!(
                "{entry}: {what} fields\n  text:   {want:?}\n  parsed: {got:?}"
            ));
        }
    }
    let all = parsed.common_fields.iter().chain(&parsed.fields);
    for (decl, field) in facts.decls.iter().zip(all) {
        if let Some(kind) = kind_from_text(decl, field.size) {
            if field.kind != kind {
                out.push(format!(
                    "{entry}: `{decl}` is {:?}, text says {kind:?}",
                    field.kind
                ));
            }
        }
    }
    out
}

#[test]
fn every_corpus_file_parses_and_agrees_with_the_text() {
    let Some(entries) = corpus() else { return };
    assert_eq!(entries.len(), CORPUS_FILES, "formats0.zip entry count");
    let mut failures = Vec::new();
    let (mut fields, mut unknown, mut data_loc_files, mut data_loc_text_files) = (0, 0, 0, 0);
    for (entry, text) in &entries {
        let (_, event) = entry
            .split_once(' ')
            .expect("entry named `<system> <event>`");
        match parse_format(text) {
            Err(e) => failures.push(format!("{entry}: {e}")),
            Ok(parsed) => {
                failures.extend(disagreements(entry, &line_facts(text), &parsed));
                if parsed.name != event {
                    failures.push(format!(
                        "{entry}: name {} is not the entry's event",
                        parsed.name
                    ));
                }
                if parsed.common_field("common_type").is_none() {
                    failures.push(format!("{entry}: no common_type"));
                }
                fields += parsed.fields.len();
                unknown += parsed
                    .fields
                    .iter()
                    .filter(|f| f.kind == FieldKind::Unknown)
                    .count();
                let data_loc = |k: &FieldKind| {
                    matches!(
                        k,
                        FieldKind::Dynamic {
                            loc: LocKind::DataLoc,
                            ..
                        }
                    )
                };
                data_loc_files += usize::from(parsed.fields.iter().any(|f| data_loc(&f.kind)));
                data_loc_text_files += usize::from(text.contains("__data_loc"));
            }
        }
    }
    println!(
        "{} files, {fields} event fields, {unknown} of kind Unknown",
        entries.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures, first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
    assert_eq!(unknown, 0, "fields of kind Unknown");
    assert_eq!(data_loc_text_files, DATA_LOC_FILES);
    assert_eq!(
        data_loc_files, DATA_LOC_FILES,
        "files with a __data_loc field"
    );
}

#[test]
fn corpus_user_events_resolve_to_sensible_kinds() {
    let Some(entries) = corpus() else { return };
    let parse = |name: &str| {
        let (_, text) = entries
            .iter()
            .find(|(e, _)| e == name)
            .unwrap_or_else(|| panic!("no entry {name}"));
        parse_format(text).unwrap()
    };
    let int = |size, signed| FieldKind::Integer { size, signed };
    let kinds = |f: &EventFormat| {
        f.fields
            .iter()
            .map(|f| (f.name.clone(), f.kind.clone()))
            .collect::<Vec<_>>()
    };
    let named = |v: &[(&str, FieldKind)]| {
        v.iter()
            .map(|(n, k)| (n.to_string(), k.clone()))
            .collect::<Vec<_>>()
    };

    let simple = parse("user_events simple_tracepoint");
    assert_eq!(kinds(&simple), named(&[("field1", int(4, false))]));
    assert_eq!(simple.field("field1").unwrap().offset, 8);

    let complex = parse("user_events complex_tracepoint");
    assert_eq!(
        kinds(&complex),
        named(&[
            ("field1", int(4, false)),
            (
                "str",
                FieldKind::FixedArray {
                    elem: Element::Char,
                    count: 4
                }
            ),
        ])
    );

    let eventheader = named(&[
        ("eventheader_flags", int(1, false)),
        ("version", int(1, false)),
        ("id", int(2, false)),
        ("tag", int(2, false)),
        ("opcode", int(1, false)),
        ("level", int(1, false)),
    ]);
    for name in [
        "user_events MyProviderName_L4K1",
        "user_events OtherProviderName_L5K23Gmygroup",
    ] {
        let f = parse(name);
        assert_eq!(kinds(&f), eventheader, "{name}");
        assert_eq!(f.common_fields.len(), 4, "{name}");
    }
}

/// A record of `format` (`seed` picks the bytes): every fixed byte pseudo-random, every
/// dynamic field locating data of its element type after the fixed part (a string with
/// its NUL, or whole elements), so both the values and the errors of a decoder show.
fn record_of(format: &EventFormat, seed: u64) -> Vec<u8> {
    let fields = || format.common_fields.iter().chain(&format.fields);
    let fixed = fields().map(|f| f.offset + f.size).max().unwrap_or(0) as usize;
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as u8
    };
    let mut raw: Vec<u8> = (0..fixed).map(|_| next()).collect();
    for f in fields() {
        let FieldKind::Dynamic { loc, elem } = f.kind else {
            continue;
        };
        let data: Vec<u8> = match elem {
            Element::Char => b"text\0".to_vec(),
            _ => (0..elem.size() * 3).map(|_| next()).collect(),
        };
        let at = raw.len();
        raw.extend_from_slice(&data);
        let off = match loc {
            LocKind::DataLoc => at,
            LocKind::RelLoc => at - (f.offset + f.size) as usize,
        };
        let (start, size) = (f.offset as usize, f.size as usize);
        let word = ((data.len() as u32) << 16) | off as u32;
        match size {
            4 => raw[start..start + 4].copy_from_slice(&word.to_le_bytes()),
            2 => raw[start..start + 2].copy_from_slice(&(off as u16).to_le_bytes()),
            _ => {}
        }
    }
    // A tail for rest-of-record fields.
    raw.extend((0..8).map(|_| next()));
    raw
}

#[test]
fn every_corpus_format_has_a_schema_line_that_decodes_its_records_alone() {
    use uevrec_parsers::{LineOptions, LineWriter, PreparedFormat, RecordMeta};
    let Some(entries) = corpus() else { return };
    let opts = LineOptions {
        include_common: true,
        endian: uevrec_parsers::Endian::Little,
    };
    let mut writer = LineWriter::new(opts);
    let (mut lines, mut records, mut shapes) = (0, 0, 0);
    for (entry, text) in &entries {
        let (system, event) = entry.split_once(' ').expect("`<system> <event>`");
        let format = parse_format(text).unwrap();
        let prepared = PreparedFormat::new(&format, system, event, None);
        let mut out = Vec::new();
        writer.write_format_schema(&mut out, Some(1), &prepared);
        let text = std::str::from_utf8(&out).unwrap();
        assert!(
            text.ends_with('\n') && !text[..text.len() - 1].contains('\n'),
            "{entry}: one line: {text}"
        );
        let line: serde_json::Value = serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("{entry}: not JSON ({e}): {text}"));
        lines += 1;
        assert_eq!(line["tracepoint"]["system"], system, "{entry}");
        assert_eq!(line["tracepoint"]["event"], event, "{entry}");
        assert_eq!(line["event"], format!("{system}:{event}"), "{entry}");
        // Only the line: the reader knows neither the format text nor uevrec's rules.
        let read =
            schema_line::format_from_schema(&line).unwrap_or_else(|e| panic!("{entry}: {e}"));
        assert_eq!(read, format, "{entry}: the line holds the whole format");
        for seed in 1..=3 {
            let raw = record_of(&format, seed);
            let meta = RecordMeta {
                time_unix_ns: Some(1),
                cpu: 0,
                pid: 1,
                tid: 1,
                system,
                event,
                format_id: None,
            };
            let (mut want, mut got) = (Vec::new(), Vec::new());
            writer.write_record(&mut want, &meta, &format, &raw);
            writer.write_record(&mut got, &meta, &read, &raw);
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "{entry}"
            );
            records += 1;
            // Every decoded value has the shape the line promises.
            let event_line: serde_json::Value = serde_json::from_slice(&want).unwrap();
            for f in line["format"]["fields"].as_array().unwrap() {
                let obj = if f["common"] == true {
                    "common"
                } else {
                    "fields"
                };
                let value = &event_line[obj][f["name"].as_str().unwrap()];
                if value.is_null() {
                    continue;
                }
                let shape = f["json"].as_str().unwrap();
                assert!(
                    schema_line::has_shape(value, shape),
                    "{entry}: {} is {value}, the schema says {shape}",
                    f["name"]
                );
                shapes += 1;
            }
        }
    }
    println!("{lines} schema lines; {records} records decoded alike; {shapes} value shapes");
    assert_eq!(lines, CORPUS_FILES);
}
