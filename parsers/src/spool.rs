//! The export spool's on-disk records, pure (no I/O, no `unsafe`): batch frames in the segment
//! logs and acknowledgement records in the ack files, their encoding and a parser that
//! takes any bytes (the fuzzed and property-tested reader). The frame's layout is at
//! [`encode_header`], the ack record's at [`encode_ack`].

/// The first four bytes of every frame.
pub const MAGIC: [u8; 4] = *b"uSp1";
/// Bytes of a frame header.
pub const HEADER_LEN: usize = 40;
/// Bytes of an ack record.
pub const ACK_LEN: usize = 16;
/// The largest payload (meta + body) one frame can hold (`len` is a u32).
pub const MAX_PAYLOAD: u64 = u32::MAX as u64;

/// A frame header that passed its checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Batch id.
    pub id: u64,
    /// Telemetry records in the body.
    pub records: u64,
    /// Payload bytes (meta + body).
    pub len: u32,
    /// Meta bytes (the payload's first `meta_len`).
    pub meta_len: u32,
    /// CRC-32C of the payload.
    pub payload_crc: u32,
}

impl Header {
    /// Header and payload bytes.
    #[allow(clippy::arithmetic_side_effects)] // 40 + a u32: a u64 holds it.
    pub fn frame_len(&self) -> u64 {
        HEADER_LEN as u64 + u64::from(self.len)
    }
}

/// The header of a frame holding `meta` and `body`, or `None` when the payload is over
/// [`MAX_PAYLOAD`].
///
/// A frame (little endian; [`HEADER_LEN`] = 40 bytes of header, then the payload):
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 4 | magic `uSp1` ([`MAGIC`]) |
/// | 4 | 4 | header CRC-32C of bytes 8..40 |
/// | 8 | 4 | `len`: payload bytes (meta + body) |
/// | 12 | 4 | `meta_len` (≤ `len`) |
/// | 16 | 8 | batch id |
/// | 24 | 8 | records in the body |
/// | 32 | 4 | payload CRC-32C (meta then body) |
/// | 36 | 4 | reserved, 0 |
/// | 40 | len | meta, then body |
///
/// Two checksums instead of one: a frame whose header is intact but whose payload is not
/// still tells its id, its record count (so the loss is counted in records, not only in
/// batches) and its exact length (the reader skips it without searching). A frame whose
/// header is damaged is skipped by searching for the next magic followed by a header that
/// passes its checksum ([`scan`]).
pub fn encode_header(id: u64, records: u64, meta: &[u8], body: &[u8]) -> Option<[u8; HEADER_LEN]> {
    let len = u32::try_from(meta.len().checked_add(body.len())?).ok()?;
    let meta_len = u32::try_from(meta.len()).ok()?;
    let payload_crc = crc32c::crc32c_append(crc32c::crc32c(meta), body);
    let mut h = [0u8; HEADER_LEN];
    h[0..4].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&len.to_le_bytes());
    h[12..16].copy_from_slice(&meta_len.to_le_bytes());
    h[16..24].copy_from_slice(&id.to_le_bytes());
    h[24..32].copy_from_slice(&records.to_le_bytes());
    h[32..36].copy_from_slice(&payload_crc.to_le_bytes());
    let crc = crc32c::crc32c(&h[8..]);
    h[4..8].copy_from_slice(&crc.to_le_bytes());
    Some(h)
}

/// A whole frame (header, meta, body) in one buffer; `None` as for [`encode_header`].
pub fn encode(id: u64, records: u64, meta: &[u8], body: &[u8]) -> Option<Vec<u8>> {
    let h = encode_header(id, records, meta, body)?;
    // A hint: `encode_header` checked that the payload's length fits a u32.
    let mut v = Vec::with_capacity(
        HEADER_LEN
            .saturating_add(meta.len())
            .saturating_add(body.len()),
    );
    v.extend_from_slice(&h);
    v.extend_from_slice(meta);
    v.extend_from_slice(body);
    Some(v)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..][..4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..][..8]);
    u64::from_le_bytes(a)
}

/// Why a header is not one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadHeader {
    /// Fewer than [`HEADER_LEN`] bytes.
    #[error("shorter than a frame header")]
    Short,
    /// The first four bytes are not [`MAGIC`].
    #[error("no frame magic")]
    NoMagic,
    /// The header checksum does not match.
    #[error("its checksum does not match")]
    Checksum,
    /// The checksum matches but the fields contradict each other (`meta_len` > `len`,
    /// reserved bytes not 0): not written by uevrec.
    #[error("its fields contradict each other (not written by uevrec)")]
    Inconsistent,
}

/// The header at the start of `buf`.
pub fn parse_header(buf: &[u8]) -> Result<Header, BadHeader> {
    if buf.len() < HEADER_LEN {
        return Err(BadHeader::Short);
    }
    let h = &buf[..HEADER_LEN];
    if h[0..4] != MAGIC {
        return Err(BadHeader::NoMagic);
    }
    if crc32c::crc32c(&h[8..]) != u32_at(h, 4) {
        return Err(BadHeader::Checksum);
    }
    let header = Header {
        len: u32_at(h, 8),
        meta_len: u32_at(h, 12),
        id: u64_at(h, 16),
        records: u64_at(h, 24),
        payload_crc: u32_at(h, 32),
    };
    if header.meta_len > header.len || u32_at(h, 36) != 0 {
        return Err(BadHeader::Inconsistent);
    }
    Ok(header)
}

/// Whether `payload` (meta then body, in pieces) matches the header's payload checksum.
pub fn payload_ok(header: &Header, pieces: &[&[u8]]) -> bool {
    let mut crc = 0;
    let mut len = 0u64;
    for p in pieces {
        crc = crc32c::crc32c_append(crc, p);
        // Stopped at u64::MAX it still differs from a u32 `len`.
        len = len.saturating_add(p.len() as u64);
    }
    len == u64::from(header.len) && crc == header.payload_crc
}

/// What the bytes at the start of a buffer are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// An intact frame.
    Frame {
        /// Its header.
        header: Header,
        /// Its meta bytes.
        meta: &'a [u8],
        /// Its body.
        body: &'a [u8],
    },
    /// The header is intact, the payload fails its checksum.
    PayloadCorrupt(Header),
    /// The header is intact, the payload goes past the end of the buffer.
    Truncated(Header),
    /// No header.
    BadHeader(BadHeader),
}

/// The frame at the start of `buf`.
pub fn parse(buf: &[u8]) -> Parsed<'_> {
    let header = match parse_header(buf) {
        Ok(h) => h,
        Err(e) => return Parsed::BadHeader(e),
    };
    // 40 + a u32 may not fit a 32-bit usize: such a frame is past any buffer's end.
    let Some(end) = usize::try_from(header.frame_len())
        .ok()
        .filter(|end| *end <= buf.len())
    else {
        return Parsed::Truncated(header);
    };
    // `parse_header` checked `meta_len` ≤ `len`, the payload's length.
    let (meta, body) = buf[HEADER_LEN..end].split_at(header.meta_len as usize);
    if !payload_ok(&header, &[meta, body]) {
        return Parsed::PayloadCorrupt(header);
    }
    Parsed::Frame { header, meta, body }
}

/// Why a region of a segment is not an intact frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// The header is intact (id and records known), the payload fails its checksum.
    PayloadChecksum,
    /// The header is intact, the file ends inside the payload (a torn write).
    Truncated,
    /// No valid header: bytes skipped up to the next valid header or the end (records
    /// unknown).
    Unreadable(BadHeader),
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::PayloadChecksum => f.write_str("payload checksum mismatch"),
            Why::Truncated => f.write_str("the file ends inside the frame (torn write)"),
            Why::Unreadable(BadHeader::Short) => f.write_str("fewer bytes than a frame header"),
            Why::Unreadable(BadHeader::NoMagic) => f.write_str("no frame magic"),
            Why::Unreadable(BadHeader::Checksum) => f.write_str("header checksum mismatch"),
            Why::Unreadable(BadHeader::Inconsistent) => f.write_str("header fields inconsistent"),
        }
    }
}

/// A region of a segment that is not an intact frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Damage {
    /// Where it starts in the buffer.
    pub offset: u64,
    /// How many bytes it spans.
    pub bytes: u64,
    /// The batch id and record count, when the header was intact.
    pub header: Option<Header>,
    /// Why.
    pub why: Why,
    /// Whether it runs to the end of the buffer (nothing valid after it).
    pub tail: bool,
}

/// One item of a [`scan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'a> {
    /// An intact frame at `offset`.
    Frame {
        /// Where it starts.
        offset: u64,
        /// Its header.
        header: Header,
        /// Its meta bytes.
        meta: &'a [u8],
        /// Its body.
        body: &'a [u8],
    },
    /// A damaged region.
    Damage(Damage),
}

/// The frames and damaged regions of a segment's bytes, in order; together they cover
/// every byte of `buf` exactly once.
pub fn scan(buf: &[u8]) -> Scan<'_> {
    Scan { buf, pos: 0 }
}

/// The iterator of [`scan`].
#[derive(Debug, Clone)]
pub struct Scan<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Scan<'_> {
    /// The next offset after `from` where a valid header starts.
    fn resync(&self, from: usize) -> Option<usize> {
        let mut at = from;
        while self.buf.len().checked_sub(at)? >= HEADER_LEN {
            let rel = self.buf[at..].windows(4).position(|w| w == MAGIC)?;
            at = at.checked_add(rel)?;
            if parse_header(&self.buf[at..]).is_ok() {
                return Some(at);
            }
            at = at.checked_add(1)?;
        }
        None
    }

    /// The end of the frame at `pos` whose header is `h`, which [`parse`] found inside the
    /// buffer (not [`Parsed::Truncated`]).
    fn past(&self, pos: usize, h: Header) -> usize {
        usize::try_from(h.frame_len())
            .ok()
            .and_then(|len| pos.checked_add(len))
            .map_or(self.buf.len(), |end| end.min(self.buf.len()))
    }

    /// Where the next valid header after `pos` starts, or the end.
    fn resync_after(&self, pos: usize) -> usize {
        pos.checked_add(1)
            .and_then(|from| self.resync(from))
            .unwrap_or(self.buf.len())
    }
}

impl<'a> Iterator for Scan<'a> {
    type Item = Item<'a>;

    fn next(&mut self) -> Option<Item<'a>> {
        let buf = self.buf;
        let pos = self.pos;
        if pos >= buf.len() {
            return None;
        }
        let damage = |end: usize, header, why| Damage {
            offset: pos as u64,
            bytes: buf[pos..end].len() as u64,
            header,
            why,
            tail: end == buf.len(),
        };
        let item = match parse(&buf[pos..]) {
            Parsed::Frame { header, meta, body } => {
                self.pos = self.past(pos, header);
                return Some(Item::Frame {
                    offset: pos as u64,
                    header,
                    meta,
                    body,
                });
            }
            Parsed::PayloadCorrupt(h) => {
                let end = self.past(pos, h);
                self.pos = end;
                damage(end, Some(h), Why::PayloadChecksum)
            }
            Parsed::Truncated(h) => {
                let end = self.resync_after(pos);
                self.pos = end;
                damage(end, Some(h), Why::Truncated)
            }
            Parsed::BadHeader(e) => {
                let end = self.resync_after(pos);
                self.pos = end;
                damage(end, None, Why::Unreadable(e))
            }
        };
        Some(Item::Damage(item))
    }
}

/// What an ack record says of its batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckKind {
    /// The collector acknowledged it.
    Acked = 1,
    /// The sender gave it up (the collector rejected it for good).
    Discarded = 2,
    /// It failed its checksum when read for sending (counted corrupt).
    Corrupt = 3,
}

/// An ack record: 16 bytes ([`ACK_LEN`]), id (u64), kind (u32, [`AckKind`]), CRC-32C of
/// the first 12, little endian.
pub fn encode_ack(id: u64, kind: AckKind) -> [u8; ACK_LEN] {
    let mut r = [0u8; ACK_LEN];
    r[0..8].copy_from_slice(&id.to_le_bytes());
    r[8..12].copy_from_slice(&(kind as u32).to_le_bytes());
    let crc = crc32c::crc32c(&r[..12]);
    r[12..16].copy_from_slice(&crc.to_le_bytes());
    r
}

/// The id and kind of an ack record, or `None` when it fails its checksum or is not one.
pub fn parse_ack(rec: &[u8]) -> Option<(u64, AckKind)> {
    if rec.len() != ACK_LEN || crc32c::crc32c(&rec[..12]) != u32_at(rec, 12) {
        return None;
    }
    let kind = match u32_at(rec, 8) {
        1 => AckKind::Acked,
        2 => AckKind::Discarded,
        3 => AckKind::Corrupt,
        _ => return None,
    };
    Some((u64_at(rec, 0), kind))
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let f = encode(7, 3, b"m", b"body").unwrap();
        match parse(&f) {
            Parsed::Frame { header, meta, body } => {
                assert_eq!((header.id, header.records), (7, 3));
                assert_eq!((meta, body), (&b"m"[..], &b"body"[..]));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_flipped_bit_is_caught() {
        let f = encode(9, 2, b"meta", b"some body bytes").unwrap();
        for byte in 0..f.len() {
            for bit in 0..8 {
                let mut g = f.clone();
                g[byte] ^= 1 << bit;
                assert!(
                    !matches!(parse(&g), Parsed::Frame { .. }),
                    "flip at {byte}.{bit} not detected"
                );
            }
        }
    }

    #[test]
    fn ack_round_trip_and_rejects() {
        let r = encode_ack(u64::MAX - 1, AckKind::Discarded);
        assert_eq!(parse_ack(&r), Some((u64::MAX - 1, AckKind::Discarded)));
        assert_eq!(parse_ack(&[0; ACK_LEN]), None);
        let mut bad = r;
        bad[3] ^= 0x10;
        assert_eq!(parse_ack(&bad), None);
    }

    #[test]
    fn scan_skips_garbage_between_frames() {
        let mut buf = encode(1, 1, b"", b"a").unwrap();
        buf.extend_from_slice(b"garbage!");
        buf.extend(encode(2, 1, b"", b"b").unwrap());
        let items: Vec<_> = scan(&buf).collect();
        assert_eq!(items.len(), 3);
        assert!(matches!(
            items[1],
            Item::Damage(Damage {
                bytes: 8,
                tail: false,
                ..
            })
        ));
        assert!(matches!(
            items[2],
            Item::Frame {
                header: Header { id: 2, .. },
                ..
            }
        ));
    }
}
