//! Arbitrary bytes as a buffer of OTLP export frames (what export mode appends to the
//! spool, read back by the exporter) → `otlp::read_frames`, `FrameMeta::decode`:
//! - never panics; after an error, nothing more;
//! - every frame read fits a frame (`FrameMeta::check`), and written again
//!   (`write_frame`) reads back as the same frame; the frames written again are the
//!   input's bytes (but for a pod column of empty pods only, which the writer leaves
//!   out, and reads back without);
//! - metadata that decodes is what `FrameMeta::encode` writes for it, byte for byte (the
//!   same exception).
//!
//! Seeds: `seed-corpus.sh` (frames of logs, traces and metrics, with and without a pod
//! column).
#![no_main]

use libfuzzer_sys::fuzz_target;
use uevrec_parsers::otlp::{FrameMeta, read_frames, write_frame};

/// A pod column whose pods are all empty: the writer writes none.
fn empty_pods(meta: &FrameMeta) -> bool {
    !meta.pods.is_empty() && meta.pods.iter().all(String::is_empty)
}

/// `meta` as the writer sees it: a column of empty pods is no column (the reader takes
/// one, the writer never writes one).
fn as_written(mut meta: FrameMeta) -> FrameMeta {
    if empty_pods(&meta) {
        meta.pods.clear();
    }
    meta
}

fuzz_target!(|data: &[u8]| {
    let mut again = Vec::new();
    let mut exact = true;
    let mut failed = false;
    for frame in read_frames(data) {
        assert!(!failed, "a frame after an error");
        let frame = match frame {
            Ok(frame) => frame,
            Err(e) => {
                assert!(!e.to_string().is_empty());
                failed = true;
                continue;
            }
        };
        let meta = frame.meta();
        meta.check().expect("a frame read fits a frame");
        exact &= !empty_pods(&meta);
        let at = again.len();
        write_frame(&mut again, &meta, frame.body).expect("a frame read is written");
        let mut back = read_frames(&again[at..]);
        let one = back
            .next()
            .expect("one frame")
            .expect("the frame written reads");
        assert!(back.next().is_none(), "more than the frame written");
        assert_eq!(one.meta(), as_written(meta));
        assert_eq!(one.body, frame.body);
    }
    if exact {
        assert!(
            data.starts_with(&again),
            "the frames written again are other bytes"
        );
    }

    if let Ok(meta) = FrameMeta::decode(data) {
        let mut out = Vec::new();
        meta.encode(&mut out).expect("decoded metadata encodes");
        if !empty_pods(&meta) {
            assert_eq!(out, data, "the metadata encodes to other bytes");
            assert_eq!(FrameMeta::decode(&out), Ok(meta));
        }
    }
});
