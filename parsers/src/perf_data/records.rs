//! Record framing: the records of a file-mode data section ([`Records`], over a slice)
//! and of a pipe-mode stream ([`StreamReader`], fed bytes as they arrive; no I/O here).
//!
//! A record is `struct perf_event_header { u32 type; u16 misc; u16 size; }` and `size − 8`
//! bytes of body. Two kinds are followed by data outside `size`, which the framing
//! hands over as [`RawRecord::payload`]: `PERF_RECORD_HEADER_TRACING_DATA` (`u32 size` at
//! body offset 0: the tracing data block, 8-byte aligned) and `PERF_RECORD_AUXTRACE`
//! (`u64 size` at body offset 0: the AUX area data).

use super::PerfDataError;
use super::cursor::Cursor;
use super::header::{FileHeader, PIPE_HEADER_SIZE, parse_magic};
use crate::bytes::Endian;
use crate::perf_sample::{HEADER_SIZE, RecordHeader};

/// Record types perf itself writes (`enum perf_user_event_type`, tools/lib/perf/include/perf/event.h).
pub mod kind {
    /// An attr and its ids (pipe mode).
    pub const HEADER_ATTR: u32 = 64;
    /// The tracing data follows the record (pipe mode).
    pub const HEADER_TRACING_DATA: u32 = 66;
    /// A build id.
    pub const HEADER_BUILD_ID: u32 = 67;
    /// No record after this one is older than the records before the previous one.
    pub const FINISHED_ROUND: u32 = 68;
    /// AUX area data follows the record.
    pub const AUXTRACE: u32 = 71;
    /// A header feature (pipe mode): `u64 feat_id` and the feature's bytes.
    pub const HEADER_FEATURE: u32 = 80;
    /// zstd-compressed records.
    pub const COMPRESSED: u32 = 81;
    /// zstd-compressed records, second layout.
    pub const COMPRESSED2: u32 = 83;
}

/// Largest data a record may carry after itself (tracing data, AUX data) that
/// [`StreamReader`] buffers: bigger announcements are treated as corrupt.
pub const MAX_PAYLOAD: u64 = 256 << 20;

/// One framed record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRecord<'a> {
    /// Absolute offset of the record in the file or stream.
    pub offset: u64,
    /// The record header.
    pub header: RecordHeader,
    /// The record, header included (`header.size` bytes).
    pub bytes: &'a [u8],
    /// Data that follows the record (tracing data, AUX data); usually empty.
    pub payload: &'a [u8],
}

/// Header and total length (record + payload) of the record at the start of `bytes`, if
/// `bytes` holds enough to say; `Ok(None)` when more bytes are needed.
fn frame(
    bytes: &[u8],
    at: u64,
    endian: Endian,
) -> Result<Option<(RecordHeader, usize, usize)>, PerfDataError> {
    let Some(h) = bytes.first_chunk::<8>() else {
        return Ok(None);
    };
    let header = RecordHeader::read(h, endian);
    let size = usize::from(header.size);
    if size < HEADER_SIZE {
        return Err(PerfDataError::BadRecord {
            at,
            kind: header.kind,
            size: header.size,
        });
    }
    // Only two kinds carry data after themselves; every other record is `size` bytes.
    let (need, what) = match header.kind {
        kind::HEADER_TRACING_DATA if size >= 12 => (12, "tracing data size"),
        kind::AUXTRACE if size >= 16 => (16, "auxtrace size"),
        _ => return Ok(Some((header, size, 0))),
    };
    if bytes.len() < need {
        return Ok(None);
    }
    let body_at = at.saturating_add(HEADER_SIZE as u64);
    let mut c = Cursor::new(&bytes[HEADER_SIZE..], body_at, endian);
    let payload = match header.kind {
        kind::HEADER_TRACING_DATA => u64::from(c.u32(what)?),
        _ => c.u64(what)?,
    };
    if payload > MAX_PAYLOAD {
        return Err(PerfDataError::Unsupported {
            at,
            what: format!(
                "record type {} announcing {payload} bytes of data after it (more than {MAX_PAYLOAD})",
                header.kind
            ),
        });
    }
    Ok(Some((header, size, payload as usize)))
}

/// The records of a file-mode data section; stops after the first error.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    data: &'a [u8],
    pos: usize,
    base: u64,
    endian: Endian,
    failed: bool,
}

impl<'a> Records<'a> {
    /// The records in `data`, which starts at absolute offset `base`.
    pub fn new(data: &'a [u8], base: u64, endian: Endian) -> Self {
        Records {
            data,
            pos: 0,
            base,
            endian,
            failed: false,
        }
    }

    /// Absolute offset of the next record.
    pub fn offset(&self) -> u64 {
        // A place in the input: far below u64::MAX (saturating all the same).
        self.base.saturating_add(self.pos as u64)
    }

    /// Absolute offset of the end of the records' bytes.
    pub fn end(&self) -> u64 {
        self.base.saturating_add(self.data.len() as u64)
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<RawRecord<'a>, PerfDataError>;

    // In line into the caller's loop (another crate's: `uevrec decode`), so that the
    // record is not returned through memory.
    #[inline]
    // `pos` moves by a record checked to lie inside `data`; a record's size (a u16) plus
    // its payload (at most MAX_PAYLOAD, checked by `frame`) fits a usize.
    #[allow(clippy::arithmetic_side_effects)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.data.len() {
            return None;
        }
        let rest = &self.data[self.pos..];
        let at = self.offset();
        // Nearly every record: a whole one of a kind without data after it.
        if let Some(h) = rest.first_chunk::<HEADER_SIZE>() {
            let header = RecordHeader::read(h, self.endian);
            let size = usize::from(header.size);
            let plain = !matches!(header.kind, kind::HEADER_TRACING_DATA | kind::AUXTRACE);
            if plain && size >= HEADER_SIZE && size <= rest.len() {
                self.pos += size;
                return Some(Ok(RawRecord {
                    offset: at,
                    header,
                    bytes: &rest[..size],
                    payload: &[],
                }));
            }
        }
        let framed = frame(rest, at, self.endian).and_then(|f| {
            let (header, size, payload) = f.ok_or(PerfDataError::Truncated {
                what: "record header",
                at,
                need: HEADER_SIZE as u64,
                have: rest.len() as u64,
            })?;
            let total = size + payload;
            if total > rest.len() {
                return Err(PerfDataError::Truncated {
                    what: "record",
                    at,
                    need: total as u64,
                    have: rest.len() as u64,
                });
            }
            self.pos += total;
            Ok(RawRecord {
                offset: at,
                header,
                bytes: &rest[..size],
                payload: &rest[size..total],
            })
        });
        self.failed = framed.is_err();
        Some(framed)
    }
}

/// Pipe-mode framing over bytes fed as they arrive: holds at most one record (and its
/// payload) plus what the caller fed beyond it.
#[derive(Debug, Default)]
pub struct StreamReader {
    buf: Vec<u8>,
    /// `buf[start..end]` holds bytes not yet framed.
    start: usize,
    end: usize,
    /// Absolute offset of `buf[start]`.
    offset: u64,
    header: Option<FileHeader>,
    /// The records' byte order, once known (from the pipe header, or given).
    endian: Option<Endian>,
}

// start <= end <= buf.len() throughout (`start` moves only by what is checked to lie
// before `end`); a record's size (a u16) plus its payload (at most MAX_PAYLOAD, checked by
// `frame`) fits; `offset` counts the bytes framed. The caller's sizes (`min`, `n`) are
// added saturating.
#[allow(clippy::arithmetic_side_effects)]
impl StreamReader {
    /// A reader expecting the pipe header first.
    pub fn new() -> Self {
        Self::default()
    }

    /// The stream's header, once read.
    pub fn header(&self) -> Option<&FileHeader> {
        self.header.as_ref()
    }

    /// Absolute offset of the first byte not framed yet.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Bytes fed but not framed yet.
    pub fn pending(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Room for at least `min` more bytes, for the caller to fill (e.g. with `read`);
    /// then call [`StreamReader::filled`] with the count written.
    pub fn buffer(&mut self, min: usize) -> &mut [u8] {
        if self.buf.len() - self.end < min && self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() - self.end < min {
            self.buf.resize(self.end.saturating_add(min), 0);
        }
        &mut self.buf[self.end..]
    }

    /// `n` bytes of [`StreamReader::buffer`] were written.
    pub fn filled(&mut self, n: usize) {
        self.end = self.end.saturating_add(n).min(self.buf.len());
    }

    /// Append `bytes`.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buffer(bytes.len())[..bytes.len()].copy_from_slice(bytes);
        self.filled(bytes.len());
    }

    /// Bytes needed before [`StreamReader::next_record`] can make progress (a lower
    /// bound; at least 1).
    pub fn wanted(&self) -> usize {
        let have = self.end - self.start;
        let need = match self.endian {
            None => PIPE_HEADER_SIZE as usize,
            Some(big) => match frame(self.pending(), self.offset, big) {
                Ok(Some((_, size, payload))) => size + payload,
                _ => HEADER_SIZE,
            },
        };
        need.saturating_sub(have).max(1)
    }

    /// Read the pipe header if it is not read yet and enough bytes are there; `Ok(None)`
    /// when more are needed. A file-mode header is [`PerfDataError::FileModeStream`].
    pub fn read_header(&mut self) -> Result<Option<&FileHeader>, PerfDataError> {
        if self.endian.is_none() {
            if self.end - self.start < PIPE_HEADER_SIZE as usize {
                return Ok(None);
            }
            let (_, pipe) = parse_magic(self.pending())?;
            if !pipe {
                return Err(PerfDataError::FileModeStream);
            }
            let header = FileHeader::parse(self.pending())?;
            self.endian = Some(header.endian);
            self.header = Some(header);
            self.start += PIPE_HEADER_SIZE as usize;
            self.offset += PIPE_HEADER_SIZE;
        }
        Ok(self.header.as_ref())
    }

    /// The next whole record, `Ok(None)` when more bytes are needed. The first call reads
    /// the pipe header; a file-mode header is
    /// [`PerfDataError::FileModeStream`].
    pub fn next_record(&mut self) -> Result<Option<RawRecord<'_>>, PerfDataError> {
        if self.endian.is_none() {
            self.read_header()?;
        }
        let Some(endian) = self.endian else {
            return Ok(None);
        };
        let Some((header, size, payload)) = frame(self.pending(), self.offset, endian)? else {
            return Ok(None);
        };
        let total = size + payload;
        if self.end - self.start < total {
            return Ok(None);
        }
        let (start, offset) = (self.start, self.offset);
        self.start += total;
        self.offset += total as u64;
        Ok(Some(RawRecord {
            offset,
            header,
            bytes: &self.buf[start..start + size],
            payload: &self.buf[start + size..start + total],
        }))
    }

    /// At the end of the input: an error if a partial record (or header) is left.
    pub fn finish(&self) -> Result<(), PerfDataError> {
        let have = (self.end - self.start) as u64;
        if have == 0 && self.endian.is_some() {
            return Ok(());
        }
        let what = if self.endian.is_none() {
            "pipe header"
        } else {
            "record"
        };
        Err(PerfDataError::Truncated {
            what,
            at: self.offset,
            need: have + self.wanted() as u64,
            have,
        })
    }
}
