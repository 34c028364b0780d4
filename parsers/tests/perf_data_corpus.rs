//! The two real perf.data files of the shared corpus (`perf-data/`, from another machine:
//! 24 CPUs, kernel 6.x, 2024; see shared/corpus/README.md) decode fully: no error, every
//! sample of a known event written, time order, wall-clock times; the pipe-mode file
//! decodes the same fed in pieces as whole; and its sched_switch values equal what
//! `perf script` prints for it (perf 6.1 refuses the file-mode one).
//!
//! Corpus: `$UEVREC_CORPUS_DIR`, else `<project root>/../shared/corpus`; without it the
//! tests skip (tier `pure`). The `perf script` comparison skips (tier `host`) where perf
//! is not installed; [`PERF_SCRIPT_PIPE_HEAD`] keeps its first lines for the pure tier.

use std::path::PathBuf;

use serde_json::Value;
use uevrec_parsers::perf_data::PerfData;
use uevrec_parsers::to_lines::perf_data::{FeedControl, RangePlanner, StreamDecoder};
use uevrec_parsers::to_lines::{DecodeOptions, DecodeStats};

/// The one "this test needs X" helper, shared with the root crate's tests.
#[path = "../../tests/common/tier.rs"]
mod tier;
use tier::Tier;

/// One decoder against ranges (shared with perf_data_writer.rs).
#[path = "common/ranges.rs"]
mod ranges;

/// perf script as the reference (shared with tests/host/decode.rs).
#[path = "../../tests/common/perf_script.rs"]
mod perf_script;

const FILE_MODE: &str = "LinuxTracepoints-perf.data";
const PIPE_MODE: &str = "LinuxTracepoints-pipe.data";

/// The first two sched_switch lines of
/// `TZ=UTC perf script -F pid,tid,cpu,tod,event,trace --ns -i - < LinuxTracepoints-pipe.data`
/// (perf 6.1.187, Debian), white space squeezed ([`perf_script::normalise`]).
const PERF_SCRIPT_PIPE_HEAD: [&str; 2] = [
    "2006/2006 [000] 2024-03-28 00:45:29.388148684 sched:sched_switch: prev_comm=perf prev_pid=2388 prev_prio=120 prev_state=D ==> next_comm=migration/0 next_pid=17 next_prio=0",
    "0/0 [000] 2024-03-28 00:45:29.388170049 sched:sched_switch: prev_comm=migration/0 prev_pid=17 prev_prio=0 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120",
];

fn corpus_file(name: &str) -> Option<(PathBuf, Vec<u8>)> {
    let dir = std::env::var_os("UEVREC_CORPUS_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"),
        PathBuf::from,
    );
    let path = dir.join("perf-data").join(name);
    match std::fs::read(&path) {
        Ok(bytes) => Some((path, bytes)),
        Err(e) => {
            tier::skip(
                Tier::Pure,
                &format!(
                    "corpus file {} not readable ({e}; set UEVREC_CORPUS_DIR)",
                    path.display()
                ),
            );
            None
        }
    }
}

/// Decode a whole file (either mode) with [`PerfData::open`], records held by offset.
fn decode_whole(bytes: &[u8]) -> (String, DecodeStats) {
    decode_whole_with(bytes, DecodeOptions::default())
}

/// [`decode_whole`] with these options.
fn decode_whole_with(bytes: &[u8], opts: DecodeOptions) -> (String, DecodeStats) {
    let (out, stats) = ranges::decode_whole(bytes, opts);
    (String::from_utf8(out).expect("UTF-8 lines"), stats)
}

/// Decode a pipe-mode stream fed `chunk` bytes at a time.
fn decode_stream(bytes: &[u8], chunk: usize) -> (String, DecodeStats) {
    let mut out = Vec::new();
    let mut sink = |b: &[u8]| {
        out.extend_from_slice(b);
        true
    };
    let mut dec = StreamDecoder::new(DecodeOptions::default(), |_, _| true);
    for piece in bytes.chunks(chunk) {
        dec.feed(piece);
        assert_eq!(dec.process(&mut sink), Ok(FeedControl::Continue));
    }
    assert_eq!(dec.finish(&mut sink), Ok(FeedControl::Continue));
    let stats = dec.decoder().expect("header read").stats().clone();
    (String::from_utf8(out).expect("UTF-8 lines"), stats)
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// No problem of any kind, and the lines are in time order with wall-clock times.
fn assert_clean(name: &str, text: &str, stats: &DecodeStats) -> Vec<Value> {
    assert_eq!(stats.error_count, 0, "{name}: {:?}", stats.errors);
    assert_eq!(stats.unknown_event, 0, "{name}");
    assert!(stats.skipped.is_empty(), "{name}: {:?}", stats.skipped);
    assert_eq!(
        (stats.late, stats.lost, stats.time_unknown),
        (0, 0, 0),
        "{name}"
    );
    let lines = json_lines(text);
    assert_eq!(lines.len() as u64, stats.records, "{name}");
    let times: Vec<&str> = lines
        .iter()
        .map(|v| v["time"].as_str().expect("time"))
        .collect();
    // RFC 3339 with 9 digits compares as text.
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "{name}: not in time order"
    );
    lines
}

fn count(lines: &[Value], system: &str, event: Option<&str>) -> usize {
    lines
        .iter()
        .filter(|v| v["system"] == system && event.is_none_or(|e| v["event"] == e))
        .count()
}

#[test]
fn file_mode_decodes_fully() {
    let Some((_, bytes)) = corpus_file(FILE_MODE) else {
        return;
    };
    let (data, _) = PerfData::open(&bytes).unwrap();
    assert!(data.problems.is_empty(), "{:?}", data.problems);
    assert_eq!(
        data.events().len(),
        11,
        "10 tracepoints and perf's dummy event"
    );
    assert_eq!(data.features.arch.as_deref(), Some("x86_64"));
    assert_eq!(data.features.nr_cpus, Some((24, 24)));
    let tracing = data.tracing_data().expect("HEADER_TRACING_DATA");
    assert_eq!(
        (tracing.long_size, tracing.endian),
        (8, uevrec_parsers::Endian::Little)
    );
    let clock = data.clock_data().expect("HEADER_CLOCK_DATA");
    assert_eq!(clock.clockid, 1, "CLOCK_MONOTONIC");
    for event in 0..10 {
        assert!(
            data.format(event).is_some_and(|f| f.format.is_ok()),
            "event {event}"
        );
    }
    let (text, stats) = decode_whole(&bytes);
    let lines = assert_clean(FILE_MODE, &text, &stats);
    assert_eq!(
        count(&lines, "sched", Some("sched_switch")),
        285,
        "README: 285 sched_switch"
    );
    assert_eq!(count(&lines, "user_events", None), 254);
    assert_eq!(lines.len(), 539);
    assert_eq!(
        text.lines().next().unwrap(),
        r#"{"time":"2024-03-28T00:45:12.640913120Z","system":"sched","event":"sched_switch","cpu":0,"pid":2002,"tid":2002,"fields":{"prev_comm":"perf","prev_pid":2384,"prev_prio":120,"prev_state":2,"next_comm":"migration/0","next_pid":17,"next_prio":0}}"#
    );
    let cpus: std::collections::BTreeSet<u64> =
        lines.iter().map(|v| v["cpu"].as_u64().unwrap()).collect();
    assert!(cpus.len() >= 4, "{cpus:?}");
}

#[test]
fn pipe_mode_decodes_fully_whole_and_in_pieces() {
    let Some((_, bytes)) = corpus_file(PIPE_MODE) else {
        return;
    };
    let (text, stats) = decode_whole(&bytes);
    let lines = assert_clean(PIPE_MODE, &text, &stats);
    assert_eq!(lines.len(), 551, "perf script prints 551 lines");
    assert_eq!(count(&lines, "sched", Some("sched_switch")), 297);
    assert_eq!(count(&lines, "user_events", None), 254);
    for chunk in [1, 7, 4096, 65536] {
        let (piecewise, stats) = decode_stream(&bytes, chunk);
        assert_eq!(stats.error_count, 0, "{:?}", stats.errors);
        assert!(
            piecewise == text,
            "fed {chunk} bytes at a time: other lines"
        );
    }
    let head: Vec<String> = lines
        .iter()
        .filter_map(perf_script::as_perf_line)
        .take(PERF_SCRIPT_PIPE_HEAD.len())
        .collect();
    assert_eq!(head, PERF_SCRIPT_PIPE_HEAD);
}

/// Every sched_switch of the pipe-mode file, value by value (time to the nanosecond,
/// pid, tid, cpu and all seven fields), against `perf script` on the same file.
#[test]
fn pipe_mode_sched_switch_equals_perf_script() {
    let Some((path, bytes)) = corpus_file(PIPE_MODE) else {
        return;
    };
    let perf = match perf_script::perf_script(&path, true) {
        Ok(out) => out,
        Err(why) => return tier::skip(Tier::Host, &why),
    };
    let expected: Vec<String> = perf
        .lines()
        .filter(|l| l.contains("sched:sched_switch:"))
        .map(perf_script::normalise)
        .collect();
    let (text, _) = decode_whole(&bytes);
    let got: Vec<String> = json_lines(&text)
        .iter()
        .filter(|v| v["event"] == "sched_switch")
        .filter_map(perf_script::as_perf_line)
        .collect();
    assert_eq!(got.len(), 297);
    assert_eq!(expected.len(), got.len());
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(g, e, "sched_switch #{i}");
    }
}

/// `--format otlp`: every request's resources name the machine the file was recorded on
/// (`host.name` from `HEADER_HOSTNAME`), every line is one request, and no record is
/// lost on the way (as many log records as JSON lines).
#[test]
fn otlp_resources_name_the_recorded_host() {
    let Some((_, bytes)) = corpus_file("LinuxTracepoints-perf.data") else {
        return;
    };
    let (data, _) = PerfData::open(&bytes).unwrap();
    let host = data
        .features
        .hostname
        .clone()
        .expect("the file has HEADER_HOSTNAME");
    assert!(!host.is_empty());
    let opts = DecodeOptions {
        format: uevrec_parsers::OutputFormat::Otlp,
        ..DecodeOptions::default()
    };
    let (text, stats) = decode_whole_with(&bytes, opts);
    let (json, _) = decode_whole(&bytes);
    let mut records = 0;
    for line in json_lines(&text) {
        let resources = line["resourceLogs"].as_array().expect("log requests");
        for r in resources {
            let attrs = r["resource"]["attributes"].as_array().unwrap();
            let named = attrs.iter().find(|a| a["key"] == "host.name");
            assert_eq!(named.unwrap()["value"]["stringValue"], host.as_str(), "{r}");
            for s in r["scopeLogs"].as_array().unwrap() {
                records += s["logRecords"].as_array().unwrap().len();
            }
        }
    }
    assert_eq!(records, json.lines().count(), "{stats:?}");
}

#[test]
fn schema_lines_come_once_before_each_events_first_record_and_change_nothing_else() {
    let Some((_, bytes)) = corpus_file(FILE_MODE) else {
        return;
    };
    let (plain, _) = decode_whole(&bytes);
    let opts = DecodeOptions {
        schema: true,
        ..DecodeOptions::default()
    };
    let (text, _) = decode_whole_with(&bytes, opts);
    let lines = json_lines(&text);
    let mut described = std::collections::BTreeSet::new();
    let mut blocks = 0;
    let mut rest = String::new();
    for (line, l) in lines.iter().zip(text.lines()) {
        if line["uevrec"] == "schema" {
            if line["source"] == "eventheader" {
                blocks += 1;
                continue;
            }
            let tp = &line["tracepoint"];
            let key = (
                tp["system"].to_string(),
                tp["event"].to_string(),
                tp["format_id"].to_string(),
            );
            assert!(described.insert(key), "described twice: {line}");
            let fields = &line["format"]["fields"];
            assert!(fields.as_array().is_some_and(|f| !f.is_empty()));
            continue;
        }
        if line.get("system").is_some() {
            let key = (
                line["system"].to_string(),
                line["event"].to_string(),
                line["format_id"].to_string(),
            );
            assert!(
                described.contains(&key),
                "a record before its schema: {line}"
            );
        }
        rest.push_str(l);
        rest.push('\n');
    }
    assert_eq!(rest, plain, "without the schema lines, the same lines");
    println!(
        "{} events described, {blocks} EventHeader blocks",
        described.len()
    );
    assert!(!described.is_empty());
}

#[test]
fn both_files_decode_in_ranges_to_the_bytes_of_one_decoder() {
    // Cut at every FINISHED_ROUND that allows it (`--range-size` of one byte), context
    // and schema lines on and off: the lines put end to end are one decoder's bytes. With
    // schema lines, EventHeader events end the cutting (their metadata lines depend on
    // what the writer wrote before): the file-mode file is refused at once (its attrs
    // are in its header), the pipe-mode file is cut up to its first EventHeader attr.
    for name in [FILE_MODE, PIPE_MODE] {
        let Some((path, bytes)) = corpus_file(name) else {
            return;
        };
        let name = path.display();
        for (context, schema) in [(true, true), (true, false), (false, false)] {
            let opts = DecodeOptions {
                context,
                schema,
                ..DecodeOptions::default()
            };
            let (data, records) = PerfData::open(&bytes).expect("opens");
            let select = |_: &str, _: &str| true;
            let start = records.offset() as usize;
            if let Err(why) = RangePlanner::new(&data, start, opts, &select, 1) {
                assert!(
                    schema && name.to_string().ends_with(FILE_MODE),
                    "{name}: {why}"
                );
                assert_eq!(why, "EventHeader events with schema lines");
                continue;
            }
            // perf's files have no range index (`record --raw` writes one).
            let none = ranges::decode_in_index_ranges(&bytes, opts, 1).err();
            assert_eq!(none.as_deref(), Some("no range index"), "{name}");
            let (one, seen) = ranges::decode_whole(&bytes, opts);
            let (cut, summed, n, stopped) = ranges::decode_in_ranges(&bytes, opts);
            assert!(n >= 2 || schema, "{name}: only {n} ranges ({stopped:?})");
            assert_eq!(
                stopped.as_deref(),
                schema.then_some("EventHeader events with schema lines"),
                "{name}"
            );
            assert!(
                cut == one,
                "{name} context {context} schema {schema}: other bytes"
            );
            assert_eq!(
                (summed.records, summed.lost, summed.late, summed.error_count),
                (seen.records, seen.lost, seen.late, seen.error_count),
                "{name}"
            );
        }
    }
}
