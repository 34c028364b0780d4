//! The trace.dat reader on real files written by trace-cmd 3.1.6 (tests/data/trace-dat/,
//! made as its README says), checked value by value against `trace-cmd report -R -t` on
//! the same files (the `.report` files beside them): every record's CPU, time (to the
//! nanosecond), event name, pid, comm (from the saved command lines) and every field
//! value, every lost-events line, in the same order. Each record also goes through
//! `LineWriter::write_record` into exactly one valid JSON line, the way `uevrec decode`
//! will use the reader.

use std::path::PathBuf;

use uevrec_parsers::ftrace_page::PageLayout;
use uevrec_parsers::trace_dat::{Compression, ErrorKind, Item, TraceDat};
use uevrec_parsers::{LineOptions, LineWriter, RecordMeta};

/// The one "this test needs X" helper, shared with the root crate's tests.
#[path = "../../tests/common/tier.rs"]
mod tier;
use tier::Tier;

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/trace-dat")
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(data_dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// One line of `trace-cmd report -R -t`.
#[derive(Debug, PartialEq)]
enum ReportLine {
    Event {
        comm: String,
        pid: u32,
        cpu: u32,
        time: u64,
        event: String,
        fields: String,
    },
    Dropped {
        cpu: u32,
        count: Option<u64>,
    },
}

fn parse_report(text: &str) -> Vec<ReportLine> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("cpus=") || line.trim().is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("CPU:") {
            // `CPU:0 [32955 EVENTS DROPPED]` or `CPU:0 [EVENTS DROPPED]`.
            let (cpu, rest) = rest.split_once(' ').unwrap();
            let count = rest
                .trim_start_matches('[')
                .split_whitespace()
                .next()
                .and_then(|w| w.parse().ok());
            out.push(ReportLine::Dropped {
                cpu: cpu.parse().unwrap(),
                count,
            });
            continue;
        }
        // `<comm>-<pid> [<cpu>] <sec>.<ns>: <event>: <fields>`
        let (head, tail) = line.split_once(" [").unwrap();
        let (comm, pid) = head.trim().rsplit_once('-').unwrap();
        let (cpu, tail) = tail.split_once(']').unwrap();
        let (time, tail) = tail.trim_start().split_once(": ").unwrap();
        let (sec, ns) = time.split_once('.').unwrap();
        assert_eq!(ns.len(), 9, "{line}");
        let (event, fields) = tail.trim_start().split_once(':').unwrap();
        out.push(ReportLine::Event {
            comm: comm.to_string(),
            pid: pid.parse().unwrap(),
            cpu: cpu.parse().unwrap(),
            time: sec.parse::<u64>().unwrap() * 1_000_000_000 + ns.parse::<u64>().unwrap(),
            event: event.to_string(),
            fields: fields.trim().to_string(),
        });
    }
    out
}

/// A JSON field value as `trace-cmd report -R` prints it, compared with `report`'s text:
/// strings as they are, numbers by value, in hex when report printed hex (pointers).
fn same_value(json: &serde_json::Value, report: &str) -> bool {
    match json {
        serde_json::Value::String(s) => s == report,
        // report pads some numbers (`target_cpu=001`): compare values.
        serde_json::Value::Number(n) => match report.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok() == n.as_u64(),
            None => report.parse::<i128>().ok() == n.to_string().parse::<i128>().ok(),
        },
        other => *other == serde_json::Value::String(report.to_string()),
    }
}

/// Decode `name`.dat and compare it with `name`.report; returns (records, lost markers).
fn check_against_report(name: &str) -> (usize, usize) {
    let bytes = read(&format!("{name}.dat"));
    let file = TraceDat::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(
        file.format_errors().is_empty(),
        "{:?}",
        file.format_errors()
    );
    let report =
        parse_report(&std::fs::read_to_string(data_dir().join(format!("{name}.report"))).unwrap());
    let mut writer = LineWriter::new(LineOptions {
        include_common: true,
        endian: uevrec_parsers::Endian::Little,
    });
    let mut line = Vec::new();
    let mut records = file.records().unwrap();
    let mut expected = report.iter();
    let (mut n_records, mut n_lost) = (0, 0);
    while let Some(item) = records
        .next_item()
        .unwrap_or_else(|e| panic!("{name}: {e}"))
    {
        let want = expected
            .next()
            .unwrap_or_else(|| panic!("{name}: more items than report"));
        match item {
            Item::Lost { cpu, count, .. } => {
                n_lost += 1;
                assert_eq!(want, &ReportLine::Dropped { cpu, count }, "{name}");
            }
            Item::Record(r) => {
                n_records += 1;
                let ReportLine::Event {
                    comm,
                    pid,
                    cpu,
                    time,
                    event,
                    fields,
                } = want
                else {
                    panic!("{name}: record {r:?} where report has {want:?}");
                };
                let entry = &file.events()[r.event.expect("known event")];
                assert_eq!((r.cpu, r.time), (*cpu, *time), "{name} {want:?}");
                assert_eq!(&entry.format.name, event);
                // The JSON line, as `uevrec decode` writes it.
                line.clear();
                let meta = RecordMeta {
                    time_unix_ns: None,
                    cpu: r.cpu,
                    pid: *pid,
                    tid: *pid,
                    system: &entry.system,
                    event: &entry.format.name,
                    format_id: None,
                };
                writer.write_record(&mut line, &meta, &entry.format, r.raw);
                assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
                assert_eq!(line.last(), Some(&b'\n'));
                let json: serde_json::Value = serde_json::from_slice(&line).unwrap();
                assert!(json.get("errors").is_none(), "{json}");
                assert_eq!(json["common"]["common_pid"], *pid, "{name} {want:?}");
                let saved = match *pid {
                    0 => Some("<idle>"),
                    p => file.comm(p),
                };
                assert_eq!(saved.unwrap_or("<...>"), comm, "{name} pid {pid}");
                // Every field, in format order: `name=value ...`, values split at the next
                // field's ` name=`.
                let mut rest = fields.as_str();
                let names: Vec<&str> = entry
                    .format
                    .fields
                    .iter()
                    .map(|f| f.name.as_str())
                    .collect();
                for (i, field) in names.iter().enumerate() {
                    rest = rest
                        .strip_prefix(&format!("{field}="))
                        .unwrap_or_else(|| panic!("{name}: `{fields}` lacks {field}"));
                    let end = match names.get(i + 1) {
                        Some(next) => rest.find(&format!(" {next}=")).unwrap(),
                        None => rest.len(),
                    };
                    let value = &rest[..end];
                    assert!(
                        same_value(&json["fields"][field], value),
                        "{name} {event}.{field}: json {} vs report {value}",
                        json["fields"][field]
                    );
                    rest = rest[end..].trim_start();
                }
            }
        }
    }
    assert!(expected.next().is_none(), "{name}: report has more lines");
    (n_records, n_lost)
}

#[test]
fn v6_matches_trace_cmd_report() {
    let (records, lost) = check_against_report("v6");
    assert_eq!((records, lost), (981, 0));
}

#[test]
fn v7_uncompressed_matches_trace_cmd_report() {
    let (records, lost) = check_against_report("v7-none");
    assert_eq!((records, lost), (818, 0));
}

#[test]
fn v7_zstd_matches_trace_cmd_report() {
    let (records, lost) = check_against_report("v7-zstd");
    assert_eq!((records, lost), (884, 0));
}

#[test]
fn v7_overwritten_buffer_has_the_lost_counts_of_trace_cmd_report() {
    // 66 event systems, irq/timer/sched events, one lost marker per CPU.
    let (records, lost) = check_against_report("v7-lost");
    assert_eq!((records, lost), (603, 2));
}

#[test]
fn metadata_of_the_real_files() {
    for (name, version, compression) in [
        ("v6", 6, Compression::None),
        ("v7-none", 7, Compression::None),
        ("v7-zstd", 7, Compression::Zstd),
        ("v7-lost", 7, Compression::Zstd),
    ] {
        let bytes = read(&format!("{name}.dat"));
        let file = TraceDat::parse(&bytes).unwrap();
        assert_eq!(file.version(), version, "{name}");
        assert_eq!(file.compression().0, compression, "{name}");
        assert_eq!(file.page_size(), 4096);
        assert_eq!(file.long_size(), 8);
        assert_eq!(file.trace_clock(), Some("local"), "{name}");
        assert_eq!(*file.layout(), PageLayout::standard(8, file.endian()));
        assert_eq!(file.time_offset_ns(), 0);
        let top = &file.buffers()[0];
        assert_eq!((top.name.as_str(), top.cpus.len()), ("", 2), "{name}");
        assert_eq!(top.compressed, compression == Compression::Zstd, "{name}");
        // The ftrace plugin formats and the recorded events' formats.
        assert!(
            file.events()
                .iter()
                .filter(|e| e.system == "ftrace")
                .count()
                >= 18
        );
        let switch = file
            .events()
            .iter()
            .position(|e| e.system == "sched" && e.format.name == "sched_switch")
            .unwrap();
        assert_eq!(
            file.event_index(file.events()[switch].format.id),
            Some(switch)
        );
        assert!(!file.cmdlines().is_empty());
        if version == 7 {
            assert_eq!(
                file.uname().map(|u| u.starts_with("Linux uevrec-vm 6.12")),
                Some(true)
            );
            assert_eq!(
                file.tracer_version().map(|v| v.starts_with("3.1.6")),
                Some(true)
            );
            assert_eq!(file.cpu_count(), Some(2));
        }
    }
}

#[test]
fn records_come_in_time_order() {
    for name in ["v6", "v7-none", "v7-zstd", "v7-lost"] {
        let bytes = read(&format!("{name}.dat"));
        let file = TraceDat::parse(&bytes).unwrap();
        let mut records = file.records().unwrap();
        let mut last = 0;
        while let Some(item) = records.next_item().unwrap() {
            let time = match item {
                Item::Record(r) => r.time,
                Item::Lost { time, .. } => time,
            };
            assert!(time >= last, "{name}");
            last = time;
        }
    }
}

#[test]
fn truncated_real_files_say_where() {
    let bytes = read("v7-zstd.dat");
    let e = TraceDat::parse(&bytes[..40]).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Truncated { .. }), "{e}");
    assert!(e.to_string().starts_with("trace.dat byte "), "{e}");
    let e = TraceDat::parse(b"\x17\x08\x44tracing9\0").unwrap_err();
    assert_eq!(
        e.to_string(),
        "trace.dat byte 10: file version `9` is not supported (6 and 7 are)"
    );
    // v6 cut inside the CPU data: the records present are read, then the truncation.
    let bytes = read("v6.dat");
    let cut = &bytes[..bytes.len() - 3000];
    let file = TraceDat::parse(cut).unwrap();
    let mut records = file.records().unwrap();
    let (mut n, mut errors) = (0, Vec::new());
    loop {
        match records.next_item() {
            Ok(Some(_)) => n += 1,
            Ok(None) => break,
            // Not the end: the reader goes on after a bad page.
            Err(e) => errors.push(e.to_string()),
        }
    }
    assert!(n > 0);
    // The partial last page gives its complete events (no error), then the cut: where
    // the file ends and what of the CPU's data was read.
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("cpu 1: the file ends") && errors[0].contains("cut short"),
        "{errors:?}"
    );
}

#[test]
fn host_header_texts_give_a_layout() {
    // Read each file in one large read: tracefs returns only the first chunk of
    // header_page to a small (32-byte) first read, as std's read_to_string does.
    use std::io::Read;
    let mut texts = Vec::new();
    for name in ["header_page", "header_event"] {
        let path = format!("/sys/kernel/tracing/events/{name}");
        let mut buf = vec![0; 65536];
        let n = match std::fs::File::open(&path).and_then(|mut f| f.read(&mut buf)) {
            Ok(n) => n,
            Err(e) => {
                tier::skip(Tier::Host, &format!("cannot read {path}: {e}"));
                return;
            }
        };
        texts.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    let layout =
        PageLayout::from_header_texts(&texts[0], &texts[1], uevrec_parsers::Endian::Little)
            .unwrap();
    assert!(layout.page_size() >= 4096, "{layout:?}");
}

/// `--format otlp`: every resource names the traced machine (`host.name`: the second word
/// of the UNAME option, `Linux uevrec-vm 6.12.117 x86_64` here).
#[test]
fn otlp_resources_name_the_traced_host() {
    let bytes = read("v6.dat");
    let file = TraceDat::parse(&bytes).unwrap();
    assert_eq!(file.host_name(), Some("uevrec-vm"));
    let opts = uevrec_parsers::to_lines::DecodeOptions {
        format: uevrec_parsers::OutputFormat::Otlp,
        ..Default::default()
    };
    let mut out = Vec::new();
    let decoded =
        uevrec_parsers::to_lines::trace_dat::decode_lines(&file, &opts, &|_, _| true, &mut |b| {
            out.extend_from_slice(b);
            true
        })
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    let mut records = 0;
    for line in text.lines() {
        let line: serde_json::Value = serde_json::from_str(line).unwrap();
        for r in line["resourceLogs"].as_array().unwrap() {
            let attrs = &r["resource"]["attributes"];
            assert_eq!(
                attrs[attrs.as_array().unwrap().len() - 1],
                serde_json::json!({"key": "host.name", "value": {"stringValue": "uevrec-vm"}})
            );
            records += r["scopeLogs"][0]["logRecords"].as_array().unwrap().len();
        }
    }
    assert!(records > 100, "{records} {:?}", decoded.stats);
}
