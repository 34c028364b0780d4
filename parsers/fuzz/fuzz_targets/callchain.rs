//! Arbitrary callchain words (as `PERF_SAMPLE_CALLCHAIN` gives them) → `Callchain::frames`:
//! - never panics, in either byte order;
//! - the frames are the entries below `PERF_CONTEXT_MAX`, in order, each after a known
//!   marker, up to the first error, which ends the walk;
//! - the error names an entry that is a marker (unknown or out of order) or an address
//!   before any marker.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uevrec_parsers::Endian;
use uevrec_parsers::callchain::{Callchain, CallchainError, FrameContext, PERF_CONTEXT_MAX};

fuzz_target!(|input: (bool, &[u8])| {
    let (big, bytes) = input;
    let chain = Callchain::new(bytes, Endian::from_big(big));
    assert_eq!(chain.len(), bytes.len() / 8);
    let entries: Vec<u64> = chain.entries().collect();
    let mut at = 0;
    for frame in chain.frames() {
        match frame {
            Ok(frame) => {
                // The next non-marker entry.
                while entries[at] >= PERF_CONTEXT_MAX {
                    at += 1;
                }
                assert_eq!(frame.address, entries[at]);
                at += 1;
            }
            Err(CallchainError::UnknownMarker { index, value }) => {
                assert_eq!(entries[index], value);
                assert!(value >= PERF_CONTEXT_MAX && FrameContext::of_marker(value).is_none());
                return;
            }
            Err(CallchainError::MarkerOutOfOrder { index, .. }) => {
                assert!(FrameContext::of_marker(entries[index]).is_some());
                return;
            }
            Err(CallchainError::NoContext { index }) => {
                assert!(entries[..=index].iter().all(|&e| e < PERF_CONTEXT_MAX));
                return;
            }
        }
    }
});
