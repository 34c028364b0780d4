//! A spool segment log and ack file, built from pieces (frames, garbage, flipped bits, a
//! torn tail) so that checksummed frames are common, → `spool::scan`, `parse`,
//! `parse_ack`:
//! - never panics, never loops;
//! - the items cover every byte of the segment exactly once, in order, none empty; a
//!   damaged region is the tail exactly when it ends the segment, and one found by
//!   searching (no header, or a torn frame) that is not is followed by a header that
//!   passes its checksum;
//! - an intact frame is what `encode` writes for its id, records, meta and body, byte for
//!   byte; a damaged region with its header known is that header's (a payload that fails
//!   its checksum spans its frame exactly);
//! - when the segment holds the magic only where a frame was written, every frame that
//!   no flipped bit or the tear touched is read back, at its place, as written;
//! - an ack record that parses is what `encode_ack` writes for its id and kind; one
//!   written parses back.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use uevrec_parsers::spool::{
    ACK_LEN, AckKind, Item, MAGIC, Parsed, Why, encode, encode_ack, parse, parse_ack, parse_header,
    scan,
};

#[derive(Arbitrary, Debug)]
enum Piece {
    Frame {
        id: u64,
        records: u64,
        meta: Vec<u8>,
        body: Vec<u8>,
    },
    Garbage(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    pieces: Vec<Piece>,
    /// Bits flipped: (byte, bit), the byte taken modulo the segment's length.
    flips: Vec<(u16, u8)>,
    /// Bytes torn off the end.
    tear: u16,
    /// An ack file.
    acks: Vec<u8>,
    ack: (u64, u8),
}

/// A frame written into the segment: where, and its bytes.
struct Written {
    at: usize,
    bytes: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let mut seg = Vec::new();
    let mut written = Vec::new();
    for piece in &input.pieces {
        match piece {
            Piece::Frame {
                id,
                records,
                meta,
                body,
            } => {
                let bytes = encode(*id, *records, meta, body).expect("a small payload fits");
                written.push(Written {
                    at: seg.len(),
                    bytes: bytes.clone(),
                });
                seg.extend_from_slice(&bytes);
            }
            Piece::Garbage(g) => seg.extend_from_slice(g),
        }
    }
    let mut touched = vec![false; seg.len()];
    if !seg.is_empty() {
        for (byte, bit) in &input.flips {
            let at = usize::from(*byte) % seg.len();
            seg[at] ^= 1 << (bit % 8);
            touched[at] = true;
        }
    }
    let kept = seg.len().saturating_sub(usize::from(input.tear));
    seg.truncate(kept);
    check_scan(&seg);

    // Magic only where frames start: each untouched frame is found as written.
    let magic_at: Vec<usize> = seg
        .windows(MAGIC.len())
        .enumerate()
        .filter(|(_, w)| *w == MAGIC)
        .map(|(at, _)| at)
        .collect();
    if magic_at
        .iter()
        .all(|at| written.iter().any(|w| w.at == *at))
    {
        let found: Vec<(u64, Vec<u8>)> = scan(&seg)
            .filter_map(|item| match item {
                Item::Frame { offset, header, .. } => {
                    let at = offset as usize;
                    Some((offset, seg[at..at + header.frame_len() as usize].to_vec()))
                }
                Item::Damage(_) => None,
            })
            .collect();
        for w in &written {
            let end = w.at + w.bytes.len();
            if end <= seg.len() && !touched[w.at..end].contains(&true) {
                assert!(
                    found.contains(&(w.at as u64, w.bytes.clone())),
                    "the intact frame at {} not read back",
                    w.at
                );
            }
        }
    }

    for rec in input.acks.chunks(ACK_LEN) {
        if let Some((id, kind)) = parse_ack(rec) {
            assert_eq!(
                &encode_ack(id, kind)[..],
                rec,
                "an ack record parsed differently"
            );
        }
    }
    let kind = match input.ack.1 % 3 {
        0 => AckKind::Acked,
        1 => AckKind::Discarded,
        _ => AckKind::Corrupt,
    };
    assert_eq!(
        parse_ack(&encode_ack(input.ack.0, kind)),
        Some((input.ack.0, kind))
    );
});

/// The rules every scan keeps, whatever the bytes.
fn check_scan(seg: &[u8]) {
    let items: Vec<Item<'_>> = scan(seg).take(seg.len() + 1).collect();
    assert!(items.len() <= seg.len(), "more items than bytes");
    let mut pos = 0usize;
    for item in &items {
        match item {
            Item::Frame {
                offset,
                header,
                meta,
                body,
            } => {
                assert_eq!(*offset, pos as u64, "a gap or overlap before a frame");
                let len = header.frame_len() as usize;
                let again = encode(header.id, header.records, meta, body).expect("it was read");
                assert_eq!(
                    &again[..],
                    &seg[pos..pos + len],
                    "a frame read is not its bytes"
                );
                assert_eq!(
                    parse(&seg[pos..]),
                    Parsed::Frame {
                        header: *header,
                        meta,
                        body
                    }
                );
                pos += len;
            }
            Item::Damage(d) => {
                assert_eq!(
                    d.offset, pos as u64,
                    "a gap or overlap before a damaged region"
                );
                assert!(d.bytes > 0, "an empty damaged region");
                let end = pos + d.bytes as usize;
                assert!(end <= seg.len(), "a damaged region past the end");
                assert_eq!(d.tail, end == seg.len(), "tail said wrong");
                match (d.why, d.header) {
                    (Why::PayloadChecksum, Some(h)) => {
                        assert_eq!(parse_header(&seg[pos..]), Ok(h));
                        assert_eq!(d.bytes, h.frame_len(), "a bad payload spans its frame");
                        assert_eq!(parse(&seg[pos..]), Parsed::PayloadCorrupt(h));
                    }
                    (Why::Truncated, Some(h)) => {
                        assert_eq!(parse(&seg[pos..]), Parsed::Truncated(h));
                    }
                    (Why::Unreadable(why), None) => {
                        assert_eq!(parse_header(&seg[pos..]), Err(why));
                    }
                    other => panic!("a damaged region said {other:?}"),
                }
                // A region found by searching ends at a valid header; a bad payload
                // ends where its header says, whatever follows.
                if !d.tail && d.why != Why::PayloadChecksum {
                    assert!(
                        parse_header(&seg[end..]).is_ok(),
                        "a damaged region not followed by a valid header"
                    );
                }
                pos = end;
            }
        }
    }
    assert_eq!(pos, seg.len(), "the items do not cover the segment");
}
