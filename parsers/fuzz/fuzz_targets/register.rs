//! Arbitrary text → `RegisterCommand::parse` / `parse_syntax`: never panics; an accepted
//! command prints (`Display`) as text that parses back to an equal command; its
//! `event_format` is a consistent schema; and `parse_format` reads its
//! `expected_format_file` as that same schema (array bracket contents aside: the kernel
//! prints garbage there).
#![no_main]

use libfuzzer_sys::fuzz_target;
use uevrec_parsers::EventFormat;
use uevrec_parsers::parse_format;
use uevrec_samples::register::{RegisterCommand, strip_bracket_contents};

const ID: u32 = 1117;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(cmd) = RegisterCommand::parse(&text) {
        let printed = cmd.to_string();
        let again = RegisterCommand::parse(&printed)
            .unwrap_or_else(|e| panic!("Display output {printed:?} does not parse: {e}"));
        assert_eq!(again, cmd, "{text:?} → {printed:?}");

        let format = cmd.event_format(ID);
        uevrec_parsers_fuzz::check_format(&format);
        let file = cmd.expected_format_file(ID);
        let parsed = parse_format(&file)
            .unwrap_or_else(|e| panic!("expected_format_file of {printed:?} does not parse: {e}"));
        assert_eq!(
            without_bracket_contents(parsed),
            without_bracket_contents(format),
            "{printed:?}"
        );
    }
    if let Ok(cmd) = RegisterCommand::parse_syntax(&text) {
        let printed = cmd.to_string();
        let again = RegisterCommand::parse_syntax(&printed)
            .unwrap_or_else(|e| panic!("Display output {printed:?} does not parse: {e}"));
        assert_eq!(again, cmd, "{text:?} → {printed:?}");
    }
});

fn without_bracket_contents(mut format: EventFormat) -> EventFormat {
    for field in format.common_fields.iter_mut().chain(&mut format.fields) {
        field.type_text = strip_bracket_contents(&field.type_text);
    }
    format
}
