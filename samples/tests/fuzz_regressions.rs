//! Inputs the `register` cargo-fuzz target (`parsers/fuzz/`, docs/fuzzing.md) found
//! failing, kept as ordinary tests so CI holds the fixes. The crash files are under
//! `parsers/tests/fuzz-regressions/` with the other targets', named `<target>-<what>`.

use uevrec_parsers::EventFormat;
use uevrec_parsers::parse_format;
use uevrec_samples::register::{RegisterCommand, strip_bracket_contents};

/// The crash file `name` as the fuzz target saw it (bytes → lossy UTF-8).
fn crash_input(name: &str) -> String {
    let path = format!(
        "{}/../parsers/tests/fuzz-regressions/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    String::from_utf8_lossy(&bytes).into_owned()
}

fn without_bracket_contents(mut format: EventFormat) -> EventFormat {
    for field in format.common_fields.iter_mut().chain(&mut format.fields) {
        field.type_text = strip_bracket_contents(&field.type_text);
    }
    format
}

/// Fuzz target `register`, 2026-11-22: the command `"\u{FFFD}\u{FFFD}\u{FFFD}\u{A0}"`
/// (bytes `9e 9e e6 a0 c2 a0`) is a valid event name (the kernel cuts names at the ASCII
/// space only), but `parse_format` read `name: …\u{A0}` back without the U+00A0 because
/// it trimmed the name with `str::trim` (Unicode white space). Fixed: ASCII white space
/// only.
#[test]
fn register_name_ending_in_nbsp_survives_its_format_file() {
    let text = crash_input("register-name-nbsp");
    assert_eq!(text, "\u{FFFD}\u{FFFD}\u{FFFD}\u{A0}");
    let cmd = RegisterCommand::parse(&text).expect("a valid command");
    assert_eq!(cmd.name, text);
    let file = cmd.expected_format_file(1117);
    let parsed = parse_format(&file).expect("the computed format file parses");
    assert_eq!(parsed.name, text);
    assert_eq!(
        without_bracket_contents(parsed),
        without_bracket_contents(cmd.event_format(1117))
    );
}
