//! Inputs the cargo-fuzz targets (`parsers/fuzz/`, docs/fuzzing.md) found failing, kept
//! as ordinary tests so CI holds the fixes. The crash files themselves are under
//! `tests/fuzz-regressions/`, named `<target>-<what>`; the `register` target's (register
//! commands are the producer side) are tested in `samples/tests/fuzz_regressions.rs`.

use uevrec_parsers::parse_format;
use uevrec_parsers::to_lines::trace_dat::{Decoded, decode_lines};
use uevrec_parsers::to_lines::{DecodeOptions, LOST_OVERFLOW};
use uevrec_parsers::trace_dat::TraceDat;

/// The bytes of `tests/fuzz-regressions/NAME`.
fn input(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz-regressions")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `uevrec decode` of the trace.dat `bytes` (no I/O): what it saw, and its lines, each
/// checked to be one JSON object.
fn decode_dat(bytes: &[u8]) -> (Decoded, Vec<serde_json::Value>) {
    let file = TraceDat::parse(bytes).expect("the header parses");
    let mut out = Vec::new();
    let decoded = decode_lines(&file, &DecodeOptions::default(), &|_, _| true, &mut |b| {
        out.extend_from_slice(b);
        true
    })
    .expect("its records are there");
    let lines = (out.split_inclusive(|&b| b == b'\n'))
        .map(|l| {
            assert_eq!(l.last(), Some(&b'\n'));
            serde_json::from_slice(l).unwrap_or_else(|e| panic!("{e}: {l:?}"))
        })
        .collect();
    (decoded, lines)
}

/// The rule for a total read from the input: the decoder's `lost` is the sum of its `lost`
/// lines, or, when that sum is more than a u64 holds, `u64::MAX` with `lost_overflow` and
/// one notice after every `lost` line saying so. Returns the sum.
fn check_lost_total(decoded: &Decoded, lines: &[serde_json::Value]) -> u128 {
    let sum: u128 = (lines.iter())
        .filter(|l| l["uevrec"] == "lost")
        .map(|l| u128::from(l["lost"].as_u64().expect("a lost count")))
        .sum();
    let notices: Vec<usize> = (lines.iter().enumerate())
        .filter(|(_, l)| l["uevrec"] == "notice" && l["message"] == LOST_OVERFLOW)
        .map(|(i, _)| i)
        .collect();
    let s = &decoded.stats;
    if sum <= u128::from(u64::MAX) {
        assert_eq!(u128::from(s.lost), sum);
        assert!(!s.lost_overflow);
        assert!(notices.is_empty());
        assert_eq!(s.lost_words(), sum.to_string());
    } else {
        assert_eq!(s.lost, u64::MAX);
        assert!(s.lost_overflow);
        assert_eq!(s.lost_notice(), Some(LOST_OVERFLOW));
        assert_eq!(s.lost_words(), "more than 18446744073709551615");
        let last_lost = lines.iter().rposition(|l| l["uevrec"] == "lost");
        assert_eq!(notices.len(), 1, "one notice");
        assert!(
            last_lost < Some(notices[0]),
            "the notice after every lost line"
        );
        assert_eq!(lines[notices[0]]["what"], "lost");
    }
    sum
}

/// `trace_dat` target (2026-12-01): three pages of CPU 0 claim 8.3, 7.3 and 8.3 × 10^18
/// lost records before them, stored counts: the per-CPU tally in
/// `ftrace_page/losses.rs` overflowed (a panic in a debug build, a wrong total in a
/// release one). Now each page's count is a `lost` line as the file says it, the tally
/// stops at `u64::MAX` (nothing more settled from the stats: the pages alone claim more
/// than any stats total), and the decoding ends with the notice that the total cannot be
/// represented.
#[test]
fn trace_dat_losses_overflow() {
    let (decoded, lines) = decode_dat(&input("trace_dat-losses-overflow.bin"));
    assert_eq!(decoded.stats.records, 84);
    let sum = check_lost_total(&decoded, &lines);
    assert!(sum > u128::from(u64::MAX));
}

/// `trace_dat` target, the same campaign run with `-fork`: 41 CPUs whose data is cut
/// short, seven of them losing 7.3 × 10^18 records each: their sum (`stats.lost` in
/// `to_lines/trace_dat.rs`) overflowed. Now it stops at `u64::MAX`, said by the notice;
/// and the 36 CPUs cut short are summed up in one line ([`Decoded::truncation_notice`]).
#[test]
fn trace_dat_lost_total_overflow() {
    let (decoded, lines) = decode_dat(&input("trace_dat-lost-total-overflow.bin"));
    let sum = check_lost_total(&decoded, &lines);
    assert!(sum > u128::from(u64::MAX));
    // The cut: 36 CPUs, each said in full in-band, summed up in one short line.
    assert_eq!(decoded.truncated.len(), 36);
    let summary = decoded.truncation_summary().expect("cut short");
    let details = decoded.truncation_details().expect("cut short");
    assert!(summary.len() < 400 && !summary.contains('\n'), "{summary}");
    assert!(
        summary.starts_with("the file ends inside the trace data of 36 CPUs (cut short"),
        "{summary}"
    );
    assert!(summary.contains(" and 28 more);"), "{summary}");
    assert!(details.starts_with(&summary), "{details}");
    for cpu in &decoded.truncated {
        assert!(details.contains(cpu.as_str()), "{cpu}");
    }
}

/// The same rule at the format-file level: non-ASCII white space belongs to the name,
/// ASCII white space (spaces, tabs, a CR) around it does not.
#[test]
fn format_name_keeps_non_ascii_white_space() {
    let body = "ID: 5\nformat:\n\tfield:int common_pid;\toffset:0;\tsize:4;\tsigned:1;\n\n";
    for (line, name) in [
        ("name: ev\u{A0}\n", "ev\u{A0}"),
        ("name: \u{2003}ev\u{3000}\n", "\u{2003}ev\u{3000}"),
        ("name:\t ev \t\r\n", "ev"),
    ] {
        let format = parse_format(&format!("{line}{body}")).expect(line);
        assert_eq!(format.name, name, "{line:?}");
    }
}

/// `perf_data` target, first run: a file-mode header whose data section claims to run
/// past the end of the file put the feature section table there too, and reading it
/// reported a truncation at an offset past the input. Now the table is a section like
/// the others: outside the file it is a `BadSection` problem saying where the file
/// claims it is, and the records that are there still decode.
#[test]
fn perf_data_feature_table_past_the_end() {
    use uevrec_parsers::perf_data::{PerfData, PerfDataError};
    let mut file = b"PERFILE2".to_vec();
    for v in [104u64, 152, 104, 0, 104, 100_000, 0, 0, 1 << 1, 0, 0, 0] {
        file.extend_from_slice(&v.to_le_bytes());
    }
    let (data, records) = PerfData::open(&file).expect("header and (empty) attrs read");
    assert_eq!(records.count(), 0);
    let table = data
        .problems
        .iter()
        .find(|e| e.to_string().contains("feature section table"));
    assert!(
        matches!(
            table,
            Some(PerfDataError::BadSection {
                offset: 100_104,
                ..
            })
        ),
        "{:?}",
        data.problems
    );
    assert!(data.problems.iter().any(|e| matches!(
        e,
        PerfDataError::BadSection {
            what: "data section",
            ..
        }
    )));
}
