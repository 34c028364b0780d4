//! Inputs the cargo-fuzz targets (`parsers/fuzz/`, docs/fuzzing.md) found failing, kept
//! as ordinary tests so CI holds the fixes. The crash files themselves are under
//! `tests/fuzz-regressions/`, named `<target>-<what>`; the `register` target's (register
//! commands are the producer side) are tested in `samples/tests/fuzz_regressions.rs`.

use uevrec_parsers::format_file::parse_format;

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
