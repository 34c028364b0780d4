//! Arbitrary ring-record bytes and sample layouts → `SampleFormat::parse`:
//! - never panics, on one record or on a walk over consecutive records;
//! - unsupported `sample_type` bits are an error, never a guess;
//! - a parsed sample has exactly the fields its `sample_type` selects, and its raw bytes
//!   lie inside the record, and so do its user registers and stack copy (never more
//!   than the copy's room);
//! - a parsed lost record has exactly the trailer fields `sample_id_all` selects, and the
//!   record is long enough to hold body and trailer.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use uevrec_parsers::perf_sample::{
    HEADER_SIZE, PerfSampleError, Record, SampleFormat, SampleId, parse_header, sample_type,
};

#[derive(Debug, Arbitrary)]
struct Input {
    /// Mostly supported bits (masked), sometimes anything.
    sample_type: u64,
    unmasked: bool,
    sample_id_all: bool,
    big_endian: bool,
    /// `sample_regs_user`: how many registers `PERF_SAMPLE_REGS_USER` holds.
    regs_mask: u64,
    bytes: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let bits = if input.unmasked {
        input.sample_type
    } else {
        input.sample_type & sample_type::SUPPORTED
    };
    let format = match SampleFormat::new(bits, input.sample_id_all) {
        Ok(format) => format
            .with_endian(uevrec_parsers::Endian::from_big(input.big_endian))
            .with_user_regs(input.regs_mask),
        Err(e) => {
            assert_eq!(
                e,
                PerfSampleError::Unsupported(bits & !sample_type::SUPPORTED)
            );
            assert_ne!(bits & !sample_type::SUPPORTED, 0, "supported bits refused");
            return;
        }
    };
    assert_eq!(format.sample_type(), bits);

    // Walk the bytes as a ring's worth of records.
    let mut rest: &[u8] = &input.bytes;
    while !rest.is_empty() {
        let result = format.parse(rest);
        if input.big_endian == cfg!(target_endian = "big")
            && let Ok(record) = &result
        {
            let header = parse_header(rest).expect("a parsed record has a header");
            if let Record::Other(h) = record {
                assert_eq!(*h, header);
            }
        }
        let size = match result {
            Ok(record) => check(&input, &format, bits, rest, record),
            Err(_) => return,
        };
        rest = &rest[size..];
    }
});

/// Check one parsed record; returns its size.
fn check(input: &Input, format: &SampleFormat, bits: u64, bytes: &[u8], record: Record) -> usize {
    use sample_type::*;
    // The header's size field (bytes 6..8) in the format's byte order.
    let field = [bytes[6], bytes[7]];
    let size = usize::from(if input.big_endian {
        u16::from_be_bytes(field)
    } else {
        u16::from_le_bytes(field)
    });
    assert!(
        size >= HEADER_SIZE && size <= bytes.len(),
        "accepted size {size}"
    );
    let has = |bit: u64| bits & bit != 0;
    match record {
        Record::Sample(s) => {
            assert_eq!(s.id.is_some(), has(IDENTIFIER) || has(ID));
            assert_eq!(s.ip.is_some(), has(IP));
            assert_eq!(s.pid.is_some(), has(TID));
            assert_eq!(s.tid.is_some(), has(TID));
            assert_eq!(s.time.is_some(), has(TIME));
            assert_eq!(s.addr.is_some(), has(ADDR));
            assert_eq!(s.stream_id.is_some(), has(STREAM_ID));
            assert_eq!(s.cpu.is_some(), has(CPU));
            assert_eq!(s.period.is_some(), has(PERIOD));
            assert_eq!(s.raw.is_some(), has(RAW));
            assert_eq!(s.callchain.is_some(), has(CALLCHAIN));
            if let Some(chain) = s.callchain {
                let start = chain.bytes().as_ptr() as usize - bytes.as_ptr() as usize;
                assert!(
                    start + chain.bytes().len() <= size,
                    "callchain past the record end"
                );
                // Frames until the first error, never a panic.
                for frame in chain.frames() {
                    if frame.is_err() {
                        break;
                    }
                }
            }
            if let Some(raw) = s.raw {
                let start = raw.as_ptr() as usize - bytes.as_ptr() as usize;
                assert!(start + raw.len() <= size, "raw data past the record end");
            }
            assert_eq!(s.user_regs.is_some(), has(REGS_USER));
            assert_eq!(s.user_stack.is_some(), has(STACK_USER));
            if let Some(regs) = s.user_regs {
                let words = regs.bytes();
                let start = words.as_ptr() as usize - bytes.as_ptr() as usize;
                assert!(start + words.len() <= size, "registers past the record end");
                assert_eq!(
                    words.len(),
                    uevrec_parsers::user_stack::regs_len(regs.abi(), input.regs_mask)
                );
            }
            if let Some(copy) = s.user_stack {
                assert!(
                    copy.bytes.len() as u64 <= copy.size,
                    "dyn_size past the copy"
                );
                if !copy.bytes.is_empty() {
                    let start = copy.bytes.as_ptr() as usize - bytes.as_ptr() as usize;
                    assert!(
                        start + copy.bytes.len() <= size,
                        "stack copy past the record end"
                    );
                }
            }
        }
        Record::Lost { sample_id, .. } => {
            assert!(size >= HEADER_SIZE + 16 + format.trailer_size());
            check_trailer(sample_id, bits, input.sample_id_all);
        }
        Record::LostSamples { sample_id, .. } => {
            assert!(size >= HEADER_SIZE + 8 + format.trailer_size());
            check_trailer(sample_id, bits, input.sample_id_all);
        }
        Record::Comm {
            comm, sample_id, ..
        } => {
            assert!(!comm.contains(&0), "the name runs to its NUL, not past it");
            check_trailer(sample_id, bits, input.sample_id_all);
        }
        Record::Mmap {
            filename,
            build_id,
            sample_id,
            ..
        } => {
            assert!(
                !filename.contains(&0),
                "the file name runs to its NUL, not past it"
            );
            assert!(build_id.len() <= 20, "a build id is at most 20 bytes");
            check_trailer(sample_id, bits, input.sample_id_all);
        }
        Record::Task { sample_id, .. } | Record::Cgroup { sample_id, .. } => {
            check_trailer(sample_id, bits, input.sample_id_all);
        }
        Record::Other(_) => {}
    }
    size
}

fn check_trailer(id: SampleId, bits: u64, id_all: bool) {
    use sample_type::*;
    let has = |bit: u64| id_all && bits & bit != 0;
    assert_eq!(id.pid.is_some(), has(TID));
    assert_eq!(id.tid.is_some(), has(TID));
    assert_eq!(id.time.is_some(), has(TIME));
    assert_eq!(id.id.is_some(), has(ID) || has(IDENTIFIER));
    assert_eq!(id.stream_id.is_some(), has(STREAM_ID));
    assert_eq!(id.cpu.is_some(), has(CPU));
}
