//! Pure tier: a small trace.dat (v6, as `record --raw-format trace-dat` writes it: two
//! CPUs of two pages each, one entry of an event the file has no format for) cut at
//! EVERY offset: parsing and decoding never panic; once the headers are whole, the cut is
//! reported as a truncation (never as a problem), and exactly the records wholly before
//! the cut are decoded, with their values (the SEQ in their payload), the record with
//! no format as an `undecoded` notice with its bytes in hex.

use std::collections::BTreeSet;

use uevrec_parsers::to_lines::DecodeOptions;
use uevrec_parsers::to_lines::trace_dat::{Decoded, decode_lines};
use uevrec_parsers::trace_dat::writer::header;
use uevrec_parsers::trace_dat::{ErrorKind, TraceDat};

#[path = "common/trace_dat.rs"]
mod fixture;
use fixture::{Entry, PAGE, seq_format};

const PER_PAGE: u64 = 7;
/// The event id no format in the file describes.
const NO_FORMAT: u16 = 999;

/// One ring-buffer page: the events `(common_type, seq)` 10 ns apart from `time`.
fn page(time: u64, events: &[(u16, u64)]) -> Vec<u8> {
    let entries: Vec<Entry> = (events.iter())
        .map(|&(ty, seq)| Entry::Record {
            ty,
            delta: 10,
            pid: 42,
            seq,
        })
        .collect();
    fixture::page(time, None, &entries)
}

/// What the file holds.
struct File {
    bytes: Vec<u8>,
    /// The headers' length (the file parses from here on).
    header: usize,
    /// Each seq record's value and end offset.
    ends: Vec<(u64, usize)>,
    /// End offset of the entry with no format.
    no_format_end: usize,
}

fn file() -> File {
    let systems = [("test".to_string(), vec![seq_format("seq", 2001)])];
    let meta = fixture::meta(&systems, "42 producer\n", &[], None, None);
    let (mut bytes, offsets) = header(&meta, &[2 * PAGE as u64, 2 * PAGE as u64]);
    let header_len = bytes.len();
    let mut ends = Vec::new();
    let mut no_format_end = 0;
    let mut seq = 0;
    for (cpu, &at) in offsets.iter().enumerate() {
        bytes.resize(at as usize, 0);
        for p in 0..2u64 {
            let page_at = bytes.len();
            let mut events = Vec::new();
            for i in 0..PER_PAGE {
                // The third entry of CPU 1's first page has no format.
                if cpu == 1 && p == 0 && i == 2 {
                    events.push((NO_FORMAT, 0xfeed));
                    no_format_end = page_at + 16 + 20 * (i as usize + 1);
                    continue;
                }
                seq += 1;
                events.push((2001, seq));
                ends.push((seq, page_at + 16 + 20 * (i as usize + 1)));
            }
            // The CPUs' pages interleave in time.
            bytes.extend_from_slice(&page(1000 + p * 1000 + cpu as u64 * 5, &events));
        }
    }
    File {
        bytes,
        header: header_len,
        ends,
        no_format_end,
    }
}

/// Decode `bytes`: the lines, or `None` when the headers do not parse.
fn decode(bytes: &[u8]) -> Option<(Vec<serde_json::Value>, Decoded)> {
    let file = match TraceDat::parse(bytes) {
        Ok(f) => f,
        Err(e) => {
            assert!(e.offset <= bytes.len() as u64, "{e}");
            return None;
        }
    };
    let mut out = Vec::new();
    let decoded = decode_lines(&file, &DecodeOptions::default(), &|_, _| true, &mut |b| {
        out.extend_from_slice(b);
        true
    })
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    Some((lines, decoded))
}

fn seqs(lines: &[serde_json::Value]) -> BTreeSet<u64> {
    lines
        .iter()
        .filter_map(|v| v["fields"]["seq"].as_u64())
        .collect()
}

fn undecoded(lines: &[serde_json::Value]) -> Vec<&str> {
    lines
        .iter()
        .filter(|v| v["uevrec"] == "notice" && v["what"] == "undecoded")
        .map(|v| v["message"].as_str().unwrap())
        .collect()
}

#[test]
fn the_whole_file_decodes_every_record_and_says_what_it_could_not() {
    let f = file();
    let (lines, decoded) = decode(&f.bytes).unwrap();
    let all: BTreeSet<u64> = f.ends.iter().map(|&(s, _)| s).collect();
    assert_eq!(seqs(&lines), all);
    assert!(decoded.truncated.is_empty(), "{:?}", decoded.truncated);
    assert!(decoded.problems.is_empty(), "{:?}", decoded.problems);
    let notes = undecoded(&lines);
    assert_eq!(notes.len(), 1, "{notes:?}");
    // The reason and the whole entry: common_type 999 (e7 03), pid 42, seq 0xfeed.
    assert!(
        notes[0].contains("no format for event id 999")
            && notes[0].contains("e70300002a000000edfe000000000000"),
        "{}",
        notes[0]
    );
}

#[test]
fn a_file_cut_anywhere_keeps_every_whole_record() {
    let f = file();
    for cut in 0..f.bytes.len() {
        let got = decode(&f.bytes[..cut]);
        let Some((lines, decoded)) = got else {
            assert!(cut < f.header, "cut at {cut}: the headers do not parse");
            continue;
        };
        let want: BTreeSet<u64> = (f.ends.iter())
            .filter(|&&(_, end)| end <= cut)
            .map(|&(s, _)| s)
            .collect();
        assert_eq!(seqs(&lines), want, "cut at {cut}");
        assert_eq!(
            undecoded(&lines).len(),
            usize::from(f.no_format_end <= cut),
            "cut at {cut}"
        );
        // A cut, never a problem (exit status 3, not 1).
        assert!(
            decoded.problems.is_empty(),
            "cut at {cut}: {:?}",
            decoded.problems
        );
        assert_eq!(decoded.stats.error_count, 0, "cut at {cut}");
        assert!(!decoded.truncated.is_empty(), "cut at {cut}");
        assert!(
            decoded.truncated[0].contains("cut short"),
            "{:?}",
            decoded.truncated
        );
    }
}

#[test]
fn the_cut_says_where_and_what_was_read() {
    let f = file();
    // Into CPU 0's second page, in its third event.
    let second_page = f.ends[PER_PAGE as usize].1 - 20 - 16;
    let cut = second_page + 16 + 2 * 20 + 5;
    let (lines, decoded) = decode(&f.bytes[..cut]).unwrap();
    assert_eq!(seqs(&lines), (1..=PER_PAGE + 2).collect());
    let msg = decoded.truncated.join("; ");
    assert!(
        msg.contains(&format!(
            "cpu 0: the file ends {} bytes into the {} bytes",
            PAGE + 16 + 45,
            2 * PAGE
        )) && msg.contains(&format!(
            "its 1 whole page was read, and of the page at byte {second_page} (61 of its 4096 bytes present)"
        )) && msg.contains("cpu 1: the file ends 0 bytes into"),
        "{msg}"
    );
    // Summed up in one line for a reader (both CPUs' bytes missing), all of it in-band.
    let summary = decoded.truncation_summary().unwrap();
    assert!(
        summary.starts_with("the file ends inside the trace data of 2 CPUs (cut short")
            && summary.contains("(CPUs 0, 1); what is present of each was read"),
        "{summary}"
    );
    assert_eq!(
        decoded.truncation_details().unwrap(),
        format!("{summary}: {msg}")
    );
    // The error itself is the reader's last item of that CPU: a CutShort.
    let file = TraceDat::parse(&f.bytes[..cut]).unwrap();
    let mut records = file.records().unwrap();
    let mut kinds = Vec::new();
    while let Some(r) = records.next_item().transpose() {
        if let Err(e) = r {
            kinds.push(e.kind);
        }
    }
    assert!(
        kinds
            .iter()
            .all(|k| matches!(k, ErrorKind::CutShort { .. })),
        "{kinds:?}"
    );
}

/// The fuzz seeds made from this file (`parsers/fuzz/seeds/trace_dat/`, copied into the
/// corpus by `parsers/fuzz/seed-corpus.sh`): whole, cut inside CPU 0's second page, cut
/// inside CPU 1's first page header. They are the bytes this builder makes
/// (`UEVREC_WRITE_FUZZ_SEEDS=1` writes them anew).
#[test]
fn fuzz_seeds_are_the_files_of_this_test() {
    let f = file();
    let cpu0_page1 = f.ends[PER_PAGE as usize].1 - 20 - 16;
    let cpu1 = f.bytes.len() - 2 * PAGE;
    let seeds = [
        ("whole", &f.bytes[..]),
        ("cut-mid-page", &f.bytes[..cpu0_page1 + 16 + 45]),
        ("cut-page-header", &f.bytes[..cpu1 + 9]),
    ];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/trace_dat");
    for (name, bytes) in seeds {
        let path = dir.join(name);
        if std::env::var_os("UEVREC_WRITE_FUZZ_SEEDS").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, bytes).unwrap();
        }
        let have = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (UEVREC_WRITE_FUZZ_SEEDS=1 writes it)",
                path.display()
            )
        });
        assert!(
            have == bytes,
            "{} is not what this test makes",
            path.display()
        );
    }
}
