//! Arbitrary bytes (seeded with the real files of tests/data/trace-dat/) → `TraceDat::parse`
//! and the merged records:
//! - never panics, never loops: every call to `next_item` consumes a record, a page or a
//!   chunk, so the walk ends (capped here anyway);
//! - an error's file offset is inside the file (or it names a decompressed section/chunk),
//!   the saved cmdlines' error too; every saved name is one thread's name;
//! - a record's format index is one of the file's formats, and the record goes through
//!   `LineWriter::write_record` into exactly one JSON line;
//! - a file cut short (seeds: `parsers/fuzz/seeds/trace_dat/`, truncated inside a page
//!   and inside a page header): the cut (`CutShort`) is said at the end of the file, and
//!   `decode_lines` (what `uevrec decode` runs) writes only whole JSON object lines, its
//!   `undecoded` notices and the cut included;
//! - the decoding's `lost` total is the sum of its `lost` lines, or, past what a u64
//!   holds, `u64::MAX` with the notice that says so (`totals::check_lost_total`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use uevrec_parsers::to_lines::DecodeOptions;
use uevrec_parsers::trace_dat::{ErrorKind, Item, TraceDat, TraceDatError};
use uevrec_parsers::{LineOptions, LineWriter, RecordMeta};
use uevrec_parsers_fuzz::totals::check_lost_total;

/// At most this many items (records, lost markers, errors) per input.
const MAX_ITEMS: usize = 100_000;

fn check_error(e: &TraceDatError, len: usize) {
    assert!(
        e.inner.is_some() || e.offset <= len as u64,
        "error offset {} past the end {len}: {e}",
        e.offset
    );
    assert!(!e.to_string().is_empty());
}

fuzz_target!(|data: &[u8]| {
    let file = match TraceDat::parse(data) {
        Ok(file) => file,
        Err(e) => return check_error(&e, data.len()),
    };
    // Bad saved cmdlines are an error of their own, with a place in the file; the good
    // lines become names.
    if let Some(e) = file.cmdline_error() {
        check_error(e, data.len());
    }
    let names = uevrec_parsers::to_lines::trace_dat::context_of(&file);
    assert_eq!(names.threads(), file.cmdlines().len());
    let mut records = match file.records() {
        Ok(r) => r,
        Err(e) => return check_error(&e, data.len()),
    };
    let mut writer = LineWriter::new(LineOptions {
        include_common: true,
        endian: file.endian(),
    });
    let mut line = Vec::new();
    for _ in 0..MAX_ITEMS {
        match records.next_item() {
            Ok(None) => break,
            Ok(Some(Item::Record(r))) => {
                if let Some(i) = r.event {
                    let entry = &file.events()[i];
                    line.clear();
                    let meta = RecordMeta {
                        time_unix_ns: None,
                        cpu: r.cpu,
                        pid: 0,
                        tid: 0,
                        system: &entry.system,
                        event: &entry.format.name,
                        format_id: None,
                    };
                    writer.write_record(&mut line, &meta, &entry.format, r.raw);
                    assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
                }
            }
            Ok(Some(Item::Lost { .. })) => {}
            // The cut: where the file ends.
            Err(e) if matches!(e.kind, ErrorKind::CutShort { .. }) => {
                assert_eq!(e.offset, data.len() as u64, "{e}");
            }
            // Not the end: the walk goes on after a bad page or chunk.
            Err(e) => check_error(&e, data.len()),
        }
    }
    drop(records);
    let opts = DecodeOptions {
        max_records: Some(MAX_ITEMS as u64),
        ..DecodeOptions::default()
    };
    let mut out = Vec::new();
    let decoded =
        uevrec_parsers::to_lines::trace_dat::decode_lines(&file, &opts, &|_, _| true, &mut |b| {
            out.extend_from_slice(b);
            true
        })
        .expect("records() succeeded above");
    check_lost_total(&decoded.stats, &out);
    for cut in &decoded.truncated {
        assert!(cut.contains("cut short"), "{cut}");
    }
});
