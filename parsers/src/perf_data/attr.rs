//! Attrs with their sample ids, as perf.data stores them: the attrs section of file mode
//! (`attr_size`-byte entries: the attr, then a `{offset, size}` section of u64 ids) and
//! `PERF_RECORD_HEADER_ATTR` records of pipe mode (the attr, then the ids up to the end of
//! the record). The attr itself (`struct perf_event_attr`: [`EventAttr`], its offsets and
//! flag bits) is `event_attr.rs`'s, re-exported here: it sits below the file header, which
//! this reads the attrs section through.

use super::PerfDataError;
use super::cursor::Cursor;
pub use super::event_attr::{ATTR_SIZE_VER0, EventAttr, PERF_TYPE_TRACEPOINT, flag};
use super::header::{FileHeader, Section};
use crate::bytes::Endian;

/// An attr with the sample ids of its event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttrEntry {
    /// The attr.
    pub attr: EventAttr,
    /// The ids samples of this event carry (`PERF_SAMPLE_ID` / `IDENTIFIER`).
    pub ids: Vec<u64>,
}

/// `n` u64 ids from `bytes` (at absolute offset `at`).
fn read_ids(bytes: &[u8], at: u64, endian: Endian) -> Result<Vec<u64>, PerfDataError> {
    let mut c = Cursor::new(bytes, at, endian);
    (0..bytes.len() / 8).map(|_| c.u64("sample id")).collect()
}

/// The attrs section of a file-mode perf.data.
pub fn parse_attrs_section(
    file: &[u8],
    header: &FileHeader,
) -> Result<Vec<AttrEntry>, PerfDataError> {
    /// An attr of the first version and its ids section.
    const MIN_ENTRY: u64 = ATTR_SIZE_VER0 as u64 + 16;
    let section = header.attrs.slice(file, "attrs section")?;
    if header.attr_size < MIN_ENTRY {
        return Err(PerfDataError::Unsupported {
            at: 16,
            what: format!("attr_size {} (at least {MIN_ENTRY})", header.attr_size,),
        });
    }
    let entry = header.attr_size as usize;
    section
        .chunks(entry)
        .enumerate()
        .map(|(i, bytes)| {
            // A place in the section, which is inside the file: the sums fit.
            let at = (header.attrs.offset).saturating_add(i.saturating_mul(entry) as u64);
            if bytes.len() < entry {
                return Err(PerfDataError::Truncated {
                    what: "attrs section entry",
                    at,
                    need: entry as u64,
                    have: bytes.len() as u64,
                });
            }
            // entry >= MIN_ENTRY, checked above.
            let attr_size = entry.saturating_sub(16);
            let (attr_bytes, ids) = bytes.split_at(attr_size);
            let attr = EventAttr::parse(attr_bytes, at, header.endian)?;
            let ids_at = at.saturating_add(attr_size as u64);
            let mut c = Cursor::new(ids, ids_at, header.endian);
            let ids = Section {
                offset: c.u64("ids offset")?,
                size: c.u64("ids size")?,
            };
            let ids_bytes = ids.slice(file, "attr ids")?;
            Ok(AttrEntry {
                attr,
                ids: read_ids(ids_bytes, ids.offset, header.endian)?,
            })
        })
        .collect()
}

/// The body of a `PERF_RECORD_HEADER_ATTR` record (after its 8-byte header, at absolute
/// offset `at`): the attr (`attr.size` bytes), then the ids.
pub fn parse_attr_record(body: &[u8], at: u64, endian: Endian) -> Result<AttrEntry, PerfDataError> {
    let attr = EventAttr::parse(body, at, endian)?;
    let size = (attr.size as usize).max(ATTR_SIZE_VER0);
    let Some(ids) = body.get(size..) else {
        return Err(PerfDataError::Truncated {
            what: "attr record (attr.size)",
            at,
            need: size as u64,
            have: body.len() as u64,
        });
    };
    let attr = EventAttr::parse(&body[..size], at, endian)?;
    Ok(AttrEntry {
        attr,
        // A place in the input: far below u64::MAX (saturating all the same).
        ids: read_ids(ids, at.saturating_add(size as u64), endian)?,
    })
}
