//! Pure tier: a crash-safe `record --raw` perf.data (pipe-mode start, attrs and formats
//! in-band before the samples: [`writer::unfinished_header`]) and the same file finished
//! (trailer, file-mode header, in-band records passed over: [`writer::passed_over`]),
//! cut at EVERY offset: opening and decoding never panic, and every sample wholly
//! before the cut is decoded, with its value (the SEQ in its payload).

use uevrec_parsers::perf_data::PerfData;
use uevrec_parsers::perf_data::writer::{self, Stamp};
use uevrec_parsers::to_lines::DecodeOptions;
use uevrec_parsers::to_lines::perf_data::LineDecoder;

#[path = "common/perf_data.rs"]
mod perf_data;
#[path = "common/trace_dat.rs"]
mod trace_dat;
use perf_data::{SEQ, SeqFile, decode_until_cut, finish, seq_raw};

const SAMPLES: u64 = 12;

/// The unfinished file (what a SIGKILL leaves), the finished one, and where each
/// sample ends in both (the data section is the same bytes).
fn files() -> (Vec<u8>, Vec<u8>, Vec<usize>) {
    let seq_file = SeqFile::new(7, false);
    let meta = seq_file.meta("6.12", Some((1, SAMPLES)), None);
    let ev = &seq_file.events[0];
    let mut file = writer::unfinished_header().to_vec();
    let mut inband = Vec::new();
    let mut described = Vec::new();
    writer::push_header_features(&mut described, &meta);
    let headers = [(ev, "test", SEQ.as_str())];
    writer::push_event_headers(&mut described, &headers, false, &meta.tracing);
    for (start, len, kind) in writer::record_spans(&described) {
        inband.push((file.len() + start, len, kind));
    }
    file.extend_from_slice(&described);
    let mut ends = Vec::new();
    for seq in 1..=SAMPLES {
        let s = Stamp {
            id: 7,
            pid: 1,
            tid: 1,
            time: seq,
            cpu: 0,
        };
        writer::push_sample(&mut file, &s, &seq_raw(seq), None).unwrap();
        ends.push(file.len());
        if seq % 4 == 0 {
            writer::push_finished_round(&mut file);
        }
    }
    let unfinished = file.clone();
    finish(&mut file, &meta);
    for (at, len, kind) in inband {
        let h = writer::passed_over(len, kind).unwrap();
        file[at..at + 8].copy_from_slice(&h);
    }
    (unfinished, file, ends)
}

/// The SEQ values decoded from `bytes` (`None`: it does not open).
fn seqs(bytes: &[u8]) -> Option<Vec<u64>> {
    let (data, records) = PerfData::open(bytes).ok()?;
    let mut dec = LineDecoder::new(data, DecodeOptions::default(), |_, _| true);
    let out = decode_until_cut(&mut dec, records, bytes);
    let text = String::from_utf8(out).unwrap();
    Some(
        text.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter_map(|v| v["fields"]["seq"].as_u64())
            .collect(),
    )
}

fn check_every_cut(file: &[u8], ends: &[usize], what: &str) {
    assert_eq!(
        seqs(file).unwrap(),
        (1..=SAMPLES).collect::<Vec<_>>(),
        "{what}: whole"
    );
    for cut in 0..file.len() {
        let whole = ends.iter().filter(|&&e| e <= cut).count() as u64;
        let got = seqs(&file[..cut]);
        if whole == 0 {
            continue;
        }
        let got = got.unwrap_or_else(|| panic!("{what} cut at {cut}: does not open"));
        assert_eq!(got, (1..=whole).collect::<Vec<_>>(), "{what} cut at {cut}");
    }
}

#[test]
fn an_unfinished_file_cut_anywhere_keeps_every_whole_sample() {
    let (unfinished, _, ends) = files();
    assert!(writer::is_unfinished(&unfinished));
    check_every_cut(&unfinished, &ends, "unfinished (pipe mode)");
}

#[test]
fn a_finished_file_cut_anywhere_keeps_every_whole_sample() {
    let (_, finished, ends) = files();
    assert!(!writer::is_unfinished(&finished));
    check_every_cut(&finished, &ends, "finished (file mode)");
}

/// The fuzz seeds made from these files (`parsers/fuzz/seeds/perf_data/`, copied into the
/// corpus by `parsers/fuzz/seed-corpus.sh`): the unfinished file whole and cut inside a
/// sample, the finished one cut inside its trailer and whole, each after the `perf_data`
/// target's three parameter bytes. They are the bytes these builders make
/// (`UEVREC_WRITE_FUZZ_SEEDS=1` writes them anew).
#[test]
fn fuzz_seeds_are_the_files_of_this_test() {
    let (unfinished, finished, ends) = files();
    let params = b"\x07\x03\x00";
    let seeds = [
        ("unfinished", &unfinished[..]),
        ("unfinished-cut", &unfinished[..ends[5] - 3]),
        ("finished-cut", &finished[..finished.len() - 100]),
        ("finished", &finished[..]),
    ];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/perf_data");
    for (name, bytes) in seeds {
        let seed = [&params[..], bytes].concat();
        let path = dir.join(name);
        if std::env::var_os("UEVREC_WRITE_FUZZ_SEEDS").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &seed).unwrap();
        }
        let have = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (UEVREC_WRITE_FUZZ_SEEDS=1 writes it)",
                path.display()
            )
        });
        assert!(
            have == seed,
            "{} is not what this test makes",
            path.display()
        );
    }
}
