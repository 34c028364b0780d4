//! Arbitrary text → `parse_format`: never panics; an accepted format satisfies the schema
//! invariants ([`uevrec_parsers_fuzz::check_format`]).
#![no_main]

use libfuzzer_sys::fuzz_target;
use uevrec_parsers::parse_format;

fuzz_target!(|data: &[u8]| {
    // Non-UTF-8 bytes become U+FFFD, so every input exercises the parser.
    let text = String::from_utf8_lossy(data);
    if let Ok(format) = parse_format(&text) {
        uevrec_parsers_fuzz::check_format(&format);
    }
});
