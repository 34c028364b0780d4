//! Inputs the cargo-fuzz targets (`parsers/fuzz/`, docs/fuzzing.md) found failing, kept
//! as ordinary tests so CI holds the fixes. The crash files themselves are under
//! `tests/fuzz-regressions/`, named `<target>-<what>`; the `register` target's (register
//! commands are the producer side) are tested in `samples/tests/fuzz_regressions.rs`.

use uevrec_parsers::parse_format;

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
