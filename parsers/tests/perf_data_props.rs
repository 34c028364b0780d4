//! Property tests of the perf.data reader on damaged input: arbitrary bytes, and the
//! shared corpus files cut at any point or with bytes overwritten. Decoding never
//! panics; every line written is one JSON object; an error names a byte offset inside
//! the input (section offsets the file claims aside); a pipe-mode input fed in pieces
//! writes the same lines and stops at the same byte as the whole input.

use std::path::PathBuf;

use proptest::prelude::*;
use uevrec_parsers::perf_data::{PerfData, PerfDataError};
use uevrec_parsers::to_lines::DecodeOptions;
use uevrec_parsers::to_lines::perf_data::{LineDecoder, StreamDecoder};

#[path = "../../tests/common/tier.rs"]
mod tier;

fn corpus(name: &str) -> Option<Vec<u8>> {
    let dir = std::env::var_os("UEVREC_CORPUS_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"),
        PathBuf::from,
    );
    let path = dir.join("perf-data").join(name);
    let bytes = std::fs::read(&path);
    if bytes.is_err() {
        tier::skip(
            tier::Tier::Pure,
            &format!("{} not readable (set UEVREC_CORPUS_DIR)", path.display()),
        );
    }
    bytes.ok()
}

/// Lines, where decoding stopped, and whether the input was pipe mode.
fn whole(bytes: &[u8]) -> (Vec<u8>, Option<PerfDataError>, bool) {
    let mut out = Vec::new();
    let Ok((data, records)) = PerfData::open(bytes).map_err(|e| check_error(&e, bytes.len()))
    else {
        return (out, None, false);
    };
    let pipe = data.pipe;
    let opts = DecodeOptions {
        order_bytes: 4096,
        ..DecodeOptions::default()
    };
    let mut dec = LineDecoder::new(data, opts, |_, _| true);
    let mut sink = |b: &[u8]| {
        out.extend_from_slice(b);
        true
    };
    let mut stop = None;
    for rec in records {
        match rec {
            Ok(rec) => {
                dec.record_in(&rec, bytes, &mut sink);
            }
            Err(e) => stop = Some(e),
        }
    }
    dec.finish_in(bytes, &mut sink);
    for e in &dec.stats().errors {
        check_error(e, bytes.len());
    }
    if let Some(e) = &stop {
        check_error(e, bytes.len());
    }
    (out, stop, pipe)
}

fn stream(bytes: &[u8], chunk: usize) -> (Vec<u8>, Option<PerfDataError>) {
    let mut out = Vec::new();
    let mut sink = |b: &[u8]| {
        out.extend_from_slice(b);
        true
    };
    let opts = DecodeOptions {
        order_bytes: 4096,
        ..DecodeOptions::default()
    };
    let mut dec = StreamDecoder::new(opts, |_, _| true);
    let mut stop = None;
    for piece in bytes.chunks(chunk) {
        dec.feed(piece);
        if let Err(e) = dec.process(&mut sink) {
            stop = Some(e);
            break;
        }
    }
    match dec.finish(&mut sink) {
        Err(e) if stop.is_none() => stop = Some(e),
        _ => {}
    }
    (out, stop)
}

fn check_error(e: &PerfDataError, len: usize) {
    if !matches!(e, PerfDataError::BadSection { .. }) {
        let at = e.offset().expect("errors on bytes say where");
        assert!(at <= len as u64, "offset {at} past the input ({len}): {e}");
    }
    assert!(
        e.to_string().contains("byte") || matches!(e, PerfDataError::FileModeStream),
        "{e}"
    );
}

fn check(bytes: &[u8], chunk: usize) {
    let (out, stop, pipe) = whole(bytes);
    for line in out.split_inclusive(|&b| b == b'\n') {
        assert!(line.ends_with(b"\n"));
        let v: serde_json::Value = serde_json::from_slice(line).expect("a JSON line");
        assert!(v.is_object());
    }
    if pipe {
        let (piecewise, stream_stop) = stream(bytes, chunk);
        assert!(piecewise == out, "fed {chunk} at a time: other lines");
        assert_eq!(
            stop.as_ref().and_then(PerfDataError::offset),
            stream_stop.as_ref().and_then(PerfDataError::offset)
        );
    }
}

/// A pipe header, so that arbitrary bytes reach the record framing.
const PIPE_HEADER: &[u8] = b"PERFILE2\x10\0\0\0\0\0\0\0";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..600), pipe in any::<bool>(), chunk in 1usize..64) {
        let input = if pipe { [PIPE_HEADER, &bytes].concat() } else { bytes };
        check(&input, chunk);
    }

    #[test]
    fn corpus_cut_anywhere(cut in 0.0f64..1.0, file_mode in any::<bool>(), chunk in 1usize..5000) {
        let name = if file_mode { "LinuxTracepoints-perf.data" } else { "LinuxTracepoints-pipe.data" };
        let Some(bytes) = corpus(name) else { return Ok(()) };
        let cut = (bytes.len() as f64 * cut) as usize;
        let (_, stop, pipe) = whole(&bytes[..cut]);
        check(&bytes[..cut], chunk);
        if pipe && cut > 16 {
            // A pipe stream cut inside a record says so (cuts on a record boundary are
            // a shorter valid stream).
            if let Some(e) = stop {
                prop_assert!(e.offset().unwrap() < cut as u64);
            }
        }
    }

    #[test]
    fn corpus_bytes_overwritten(edits in proptest::collection::vec((0.0f64..1.0, any::<u8>()), 1..8), file_mode in any::<bool>(), chunk in 1usize..5000) {
        let name = if file_mode { "LinuxTracepoints-perf.data" } else { "LinuxTracepoints-pipe.data" };
        let Some(mut bytes) = corpus(name) else { return Ok(()) };
        let len = bytes.len();
        for (at, b) in edits {
            bytes[((len as f64 * at) as usize).min(len - 1)] = b;
        }
        check(&bytes, chunk);
    }
}
