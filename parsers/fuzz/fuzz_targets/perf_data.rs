//! Arbitrary bytes as a perf.data (file or pipe mode) → `PerfData::open` + `LineDecoder`
//! over every record, and, for pipe mode, `StreamDecoder` fed in pieces:
//! - never panics, never loops (every step consumes input);
//! - every line written is one JSON object ending in one `\n`, with a `time` that is
//!   `null` or RFC 3339;
//! - every error names a byte offset inside the input (section offsets read from the
//!   file aside: they say where the file claims a section is);
//! - pipe mode: the stream fed `chunk` bytes at a time writes exactly the lines of the
//!   whole-input decoder and stops at the same offset for the same reason;
//! - `--count`: never more event lines than asked;
//! - the `lost` total is the sum of the `lost` lines, or, past what a u64 holds,
//!   `u64::MAX` with the notice that says so (`totals::check_lost_total`).
//!
//! Input layout: byte 0 → chunk size (1..=256), byte 1 → order buffer bound (256 bytes ×
//! (1..=256): small bounds exercise the half flush), byte 2 → `--count` (0 = none), then
//! the file. Seeds: `parsers/fuzz/seed-corpus.sh` (cut-down corpus files).
#![no_main]

use libfuzzer_sys::fuzz_target;
use uevrec_parsers::perf_data::{PerfData, PerfDataError};
use uevrec_parsers::to_lines::DecodeOptions;
use uevrec_parsers::to_lines::perf_data::{FeedControl, LineDecoder, StreamDecoder};
use uevrec_parsers_fuzz::json::one_object_line;
use uevrec_parsers_fuzz::totals::check_lost_total;

fn check_error(e: &PerfDataError, len: usize) {
    if let PerfDataError::BadSection { .. } = e {
        return;
    }
    if let Some(at) = e.offset() {
        assert!(
            at <= len as u64,
            "error offset {at} past the input ({len}): {e}"
        );
    }
    assert!(!e.to_string().is_empty());
}

fn check_lines(out: &[u8], max_records: Option<u64>) {
    let mut events = 0u64;
    for line in out.split_inclusive(|&b| b == b'\n') {
        let obj = one_object_line(line);
        match obj.get("time") {
            Some(serde_json::Value::Null) => {}
            Some(serde_json::Value::String(t)) => {
                assert!(t.len() == 30 && t.ends_with('Z'), "time {t}")
            }
            other => panic!("time {other:?}"),
        }
        if !obj.contains_key("uevrec") {
            events += 1;
        }
    }
    if let Some(max) = max_records {
        assert!(events <= max, "{events} event lines for --count {max}");
    }
}

fuzz_target!(|input: &[u8]| {
    let [chunk, order, count, file @ ..] = input else {
        return;
    };
    let chunk = usize::from(*chunk) + 1;
    let opts = DecodeOptions {
        include_common: count & 1 == 1,
        order_bytes: 256 * (usize::from(*order) + 1),
        max_records: (*count != 0).then_some(u64::from(*count)),
        ..DecodeOptions::default()
    };
    let len = file.len();

    // The whole input.
    let mut whole = Vec::new();
    let mut whole_stop = None;
    let mut pipe = false;
    match PerfData::open(file) {
        Ok((data, records)) => {
            pipe = data.pipe;
            let mut dec = LineDecoder::new(data, opts, |_, _| true);
            let mut sink = |b: &[u8]| {
                whole.extend_from_slice(b);
                true
            };
            for rec in records {
                match rec {
                    Ok(rec) => {
                        assert!(rec.offset < len as u64 && rec.bytes.len() >= 8);
                        if dec.record_in(&rec, file, &mut sink) == FeedControl::Stop {
                            break;
                        }
                    }
                    Err(e) => {
                        check_error(&e, len);
                        whole_stop = Some(e);
                    }
                }
            }
            dec.finish_in(file, &mut sink);
            for e in &dec.stats().errors {
                check_error(e, len);
            }
            check_lost_total(dec.stats(), &whole);
        }
        Err(e) => check_error(&e, len),
    }
    check_lines(&whole, opts.max_records);

    if !pipe {
        return;
    }
    // The same stream fed in pieces.
    let mut pieces = Vec::new();
    let mut sink = |b: &[u8]| {
        pieces.extend_from_slice(b);
        true
    };
    let mut dec = StreamDecoder::new(opts, |_, _| true);
    let mut stream_stop = None;
    let mut stopped = false;
    for piece in file.chunks(chunk) {
        dec.feed(piece);
        match dec.process(&mut sink) {
            Ok(FeedControl::Continue) => {}
            Ok(FeedControl::Stop) => {
                stopped = true;
                break;
            }
            Err(e) => {
                stream_stop = Some(e);
                break;
            }
        }
    }
    if stream_stop.is_some() || stopped {
        if let Some(d) = dec.decoder() {
            let _ = d.stats();
        }
        // Let the held lines out as the whole-input decoder did at its end.
        let _ = dec.finish(&mut sink);
    } else if let Err(e) = dec.finish(&mut sink) {
        stream_stop = Some(e);
    }
    if let Some(e) = &stream_stop {
        check_error(e, len);
    }
    assert_eq!(
        whole_stop.as_ref().and_then(PerfDataError::offset),
        stream_stop.as_ref().and_then(PerfDataError::offset),
        "whole {whole_stop:?} vs stream {stream_stop:?}"
    );
    assert!(
        pieces == whole,
        "stream fed {chunk} bytes at a time wrote other lines"
    );
});
