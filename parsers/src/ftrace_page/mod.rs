//! ftrace ring-buffer pages (what `per_cpu/cpuN/trace_pipe_raw` hands out and what
//! trace-cmd copies into a trace.dat file) → records with their timestamps, plus
//! "missed events" markers.
//!
//! The layout comes from two tracefs texts, [`PageLayout::from_header_texts`]:
//!
//! ```text
//! events/header_page:                                     events/header_event:
//!   field: u64 timestamp; offset:0; size:8; signed:0;       # compressed entry header
//!   field: local_t commit; offset:8; size:8; signed:1;        type_len    :    5 bits
//!   field: int overwrite; offset:8; size:1; signed:1;         time_delta  :   27 bits
//!   field: char data; offset:16; size:4080; signed:0;         array       :   32 bits
//!                                                             padding     : type == 29
//!                                                             time_extend : type == 30
//!                                                             time_stamp : type == 31
//!                                                             data max type_len  == 28
//! ```
//!
//! A page (kernel/trace/ring_buffer.c, `struct buffer_data_page`) is a u64 timestamp, a
//! `local_t commit` (4 or 8 bytes: the kernel's `long`) and the data. The low 27 bits of
//! `commit` are the bytes of data written; bit 31 says events were lost before this page
//! and bit 30 that their count is stored as a `long` right after the data (at
//! `data[commit]`). The data is a run of events, each a u32 header (`type_len`: 5 bits,
//! `time_delta`: 27 bits; on a little-endian machine `type_len` is the low 5 bits, on a
//! big-endian one the high 5 bits) and a body:
//!
//! | `type_len` | meaning | body |
//! |---|---|---|
//! | 1–28 | a record of `type_len × 4` bytes | the record |
//! | 0 | a record whose length is in `array[0]` (bytes of body + 4) | `array[0]`, then the record, padded to 4 bytes |
//! | 29 | padding: a discarded event (`time_delta` ≠ 0; `array[0]` bytes follow the header) or the rest of the page (`time_delta` = 0) | — |
//! | 30 | time extend: add `array[0] << 27 \| time_delta` to the time | `array[0]` |
//! | 31 | absolute time stamp: the time is `array[0] << 27 \| time_delta` (its 5 high bits are those of the page time, as the kernel's `rb_fix_abs_ts` does) | `array[0]` |
//!
//! Time: the page timestamp plus every delta up to and including the event's own (the
//! padding's too, as libtraceevent's kbuffer adds them), in the units of the trace clock
//! (nanoseconds for `local`, `global`, `mono`, …; cycles for `x86-tsc`, a count for
//! `counter`).
//!
//! Nothing is allocated per page or record: [`PageReader`] is a cursor of plain offsets
//! that a caller owning the page bytes (a reused buffer) drives with
//! [`PageReader::next_item`], and [`PageLayout::parse_page`] wraps it as an [`Iterator`]
//! over a borrowed page. A malformed page gives one [`PageError`] (with its byte offset in
//! the page) and then ends; the records before it are still returned.

pub mod losses;
pub mod stacks;

use crate::bytes::Endian;

/// Bit of `commit`: events were lost between the previous page and this one.
pub const MISSED_EVENTS: u64 = 1 << 31;
/// Bit of `commit`: the number of lost events is stored right after the data.
pub const MISSED_STORED: u64 = 1 << 30;
/// The bits of `commit` that hold the length of the data.
pub const COMMIT_MASK: u64 = (1 << 27) - 1;
/// `type_len` of padding (a discarded event, or the rest of the page).
pub const TYPE_PADDING: u32 = 29;
/// `type_len` of a time extend.
pub const TYPE_TIME_EXTEND: u32 = 30;
/// `type_len` of an absolute time stamp.
pub const TYPE_TIME_STAMP: u32 = 31;
/// Number of bits of `time_delta` (the shift of a time extend's `array[0]`).
pub const TS_SHIFT: u32 = 27;
/// The 5 high bits of a time that an absolute time stamp does not hold.
const TS_MSB: u64 = 0xf8 << 56;
/// The largest data capacity of a page: what 27 bits of `commit` can count.
const MAX_DATA_SIZE: usize = 1 << 27;
/// The farthest a page's data may start (16 on every kernel): with [`MAX_DATA_SIZE`],
/// a [`PageLayout`]'s offsets and sizes add up to far less than `usize::MAX`.
const MAX_DATA_OFFSET: usize = 1 << 16;

/// How the ring-buffer pages of one machine are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLayout {
    endian: Endian,
    /// Offset and size (4 or 8) of `commit`.
    commit_offset: usize,
    commit_size: usize,
    /// Offset and capacity of `data`.
    data_offset: usize,
    data_size: usize,
}

/// `header_page` or `header_event` text that does not describe a page layout this parser
/// knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// A field `header_page` must have (`timestamp`, `commit`, `data`) is missing, or a
    /// field line does not parse.
    #[error("header_page: {0}")]
    HeaderPage(String),
    /// `header_event` does not describe the 5-bit `type_len` / 27-bit `time_delta` header
    /// with types 29, 30, 31 (kernels since 2.6.31).
    #[error("header_event: {0}")]
    HeaderEvent(String),
}

/// What is wrong with one page; `offset` is the byte offset in the page.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("page byte {offset}: {kind}")]
pub struct PageError {
    /// Byte offset from the start of the page.
    pub offset: usize,
    /// What is wrong there.
    pub kind: PageErrorKind,
}

/// The kinds of [`PageError`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageErrorKind {
    /// The page is shorter than its header.
    #[error("page of {len} bytes is shorter than its {header}-byte header")]
    ShortPage {
        /// Bytes given.
        len: usize,
        /// Bytes the header needs.
        header: usize,
    },
    /// `commit` says more data than the page holds.
    #[error("commit {commit} is larger than the {capacity} bytes of data the page holds")]
    CommitTooLarge {
        /// The data length from `commit`.
        commit: u64,
        /// Bytes of data the page holds.
        capacity: usize,
    },
    /// An event runs past the committed data.
    #[error("event of type_len {type_len} needs {needed} bytes, {available} left")]
    EventTruncated {
        /// The event's `type_len`.
        type_len: u32,
        /// Bytes it needs (header included).
        needed: u64,
        /// Bytes left in the committed data.
        available: usize,
    },
    /// A `type_len` 0 event whose length word is below 4 (it counts itself).
    #[error("event length word {0} is below 4")]
    BadLength(u32),
}

/// One thing found on a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'p> {
    /// Events were lost before this page. Comes first, before the page's records.
    Missed {
        /// How many, when the kernel stored the count (`RB_MISSED_STORED`).
        count: Option<u64>,
        /// The page's timestamp.
        time: u64,
    },
    /// One trace entry.
    Record {
        /// Its time, in the units of the trace clock.
        time: u64,
        /// The entry's bytes, common fields first (for `type_len` 0 records padded to a
        /// multiple of 4 bytes).
        raw: &'p [u8],
        /// Offset of `raw` in the page.
        offset: usize,
    },
}

/// The header of one page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageHeader {
    /// The page timestamp (time of its first event, before that event's delta).
    pub timestamp: u64,
    /// Bytes of data written (commit & [`COMMIT_MASK`]).
    pub data_len: usize,
    /// Events were lost before this page: `Some(Some(n))` with the stored count,
    /// `Some(None)` without one, `None` when nothing was lost.
    pub missed: Option<Option<u64>>,
}

/// Reads the first `N` bytes of `bytes` at `at` as an integer in `endian` order.
fn read_uint(bytes: &[u8], at: usize, size: usize, endian: Endian) -> Option<u64> {
    let b = bytes.get(at..at.checked_add(size)?)?;
    let mut v: u64 = 0;
    match endian {
        Endian::Little => {
            for &x in b.iter().rev() {
                v = (v << 8) | u64::from(x);
            }
        }
        Endian::Big => {
            for &x in b {
                v = (v << 8) | u64::from(x);
            }
        }
    }
    Some(v)
}

/// The u32 at `at` (one load: [`PageReader::next_item`] reads every record's header
/// word with it, in the caller's crate).
#[inline]
fn read_u32(bytes: &[u8], at: usize, endian: Endian) -> Option<u32> {
    let b = *bytes.get(at..)?.first_chunk::<4>()?;
    Some(match endian {
        Endian::Little => u32::from_le_bytes(b),
        Endian::Big => u32::from_be_bytes(b),
    })
}

/// One `field: <decl>; offset:N; size:N;` line of `header_page`: (name, offset, size).
fn header_page_field(line: &str) -> Option<(&str, usize, usize)> {
    let rest = line.trim().strip_prefix("field")?.trim_start();
    let rest = rest.strip_prefix(':')?;
    let mut parts = rest.split(';').map(str::trim);
    let decl = parts.next()?;
    let name = decl.rsplit([' ', '\t', '*']).next()?.trim();
    let mut offset = None;
    let mut size = None;
    for part in parts {
        if let Some(v) = part.strip_prefix("offset:") {
            offset = v.trim().parse().ok();
        } else if let Some(v) = part.strip_prefix("size:") {
            size = v.trim().parse().ok();
        }
    }
    Some((name, offset?, size?))
}

impl PageLayout {
    /// The layout described by the texts of `events/header_page` and
    /// `events/header_event`, for pages written in `endian` byte order (the texts do not
    /// say; a live machine is [`Endian`] of the host, a trace.dat file says in its
    /// header).
    pub fn from_header_texts(
        header_page: &str,
        header_event: &str,
        endian: Endian,
    ) -> Result<Self, LayoutError> {
        let mut timestamp = None;
        let mut commit = None;
        let mut data = None;
        for line in header_page.lines().filter(|l| !l.trim().is_empty()) {
            let (name, offset, size) = header_page_field(line)
                .ok_or_else(|| LayoutError::HeaderPage(format!("bad field line `{line}`")))?;
            match name {
                "timestamp" => timestamp = Some((offset, size)),
                "commit" => commit = Some((offset, size)),
                "data" => data = Some((offset, size)),
                _ => {}
            }
        }
        let missing = |what| LayoutError::HeaderPage(format!("no `{what}` field"));
        let timestamp = timestamp.ok_or_else(|| missing("timestamp"))?;
        let (commit_offset, commit_size) = commit.ok_or_else(|| missing("commit"))?;
        let (data_offset, data_size) = data.ok_or_else(|| missing("data"))?;
        if timestamp != (0, 8) {
            return Err(LayoutError::HeaderPage(format!(
                "timestamp at offset {} size {}, expected offset 0 size 8",
                timestamp.0, timestamp.1
            )));
        }
        if commit_size != 4 && commit_size != 8 {
            return Err(LayoutError::HeaderPage(format!(
                "commit size {commit_size}, expected 4 or 8"
            )));
        }
        // Offsets and sizes are the text's, any usize: the sum is checked (saturated, it
        // is past every data offset), and the data's place and size bounded, so that every
        // sum of the layout's fields below (page size, data end) fits.
        if commit_offset < 8 || data_offset < commit_offset.saturating_add(commit_size) {
            return Err(LayoutError::HeaderPage(format!(
                "fields overlap: commit at {commit_offset}, data at {data_offset}"
            )));
        }
        if data_offset > MAX_DATA_OFFSET {
            return Err(LayoutError::HeaderPage(format!(
                "data offset {data_offset} out of range (at most {MAX_DATA_OFFSET})"
            )));
        }
        if data_size > MAX_DATA_SIZE || data_size == 0 {
            return Err(LayoutError::HeaderPage(format!(
                "data size {data_size} out of range"
            )));
        }
        check_header_event(header_event)?;
        Ok(PageLayout {
            endian,
            commit_offset,
            commit_size,
            data_offset,
            data_size,
        })
    }

    /// The usual layout of a 64-bit (`long_size` 8) or 32-bit (4) kernel with 4096-byte
    /// pages, for tests and for data whose header texts are missing.
    pub fn standard(long_size: u8, endian: Endian) -> Self {
        let (commit_size, data_offset, data_size) = if long_size == 4 {
            (4, 12, 4084)
        } else {
            (8, 16, 4080)
        };
        PageLayout {
            endian,
            commit_offset: 8,
            commit_size,
            data_offset,
            data_size,
        }
    }

    /// The byte order of the pages.
    pub fn endian(&self) -> Endian {
        self.endian
    }

    /// Size of `commit` and of the stored missed-events count: the kernel's `long`.
    pub fn long_size(&self) -> usize {
        self.commit_size
    }

    /// Offset of the data in a page.
    pub fn data_offset(&self) -> usize {
        self.data_offset
    }

    /// The page size: header plus data capacity.
    pub fn page_size(&self) -> usize {
        // Both bounded (MAX_DATA_OFFSET, MAX_DATA_SIZE) when the layout was made.
        #[allow(clippy::arithmetic_side_effects)]
        let size = self.data_offset + self.data_size;
        size
    }

    /// Read the header of `page`, the start of a page cut short (a file that ends inside
    /// it): as [`PageLayout::page_header`], but the committed length is checked against a
    /// whole page's capacity and then limited to the bytes present (the events wholly
    /// inside them can be read; the one the cut goes through is not). The second value
    /// says whether the committed data was cut. The missed-events count after the data
    /// is read only when the data is whole.
    pub fn page_header_cut(&self, page: &[u8]) -> Result<(PageHeader, bool), PageError> {
        let header = self.data_offset;
        let short = PageError {
            offset: 0,
            kind: PageErrorKind::ShortPage {
                len: page.len(),
                header,
            },
        };
        let Some(present) = page.len().checked_sub(header) else {
            return Err(short);
        };
        let mut whole = page.to_vec();
        whole.resize(self.page_size().max(page.len()), 0);
        let mut h = self.page_header(&whole)?;
        let cut = h.data_len > present;
        if cut {
            h.data_len = present;
            if let Some(count) = &mut h.missed {
                *count = None;
            }
        } else if let Some(Some(_)) = h.missed {
            // The count lies after the data: read it from the bytes present only.
            let commit = read_uint(page, self.commit_offset, self.commit_size, self.endian);
            let stored = commit.is_some_and(|c| c & MISSED_STORED != 0);
            // Not cut: header + data_len <= page.len().
            let after = header.saturating_add(h.data_len);
            h.missed = Some(
                stored
                    .then(|| read_uint(page, after, self.commit_size, self.endian))
                    .flatten(),
            );
        }
        Ok((h, cut))
    }

    /// Read the header of `page`, checking that the committed data fits in it.
    pub fn page_header(&self, page: &[u8]) -> Result<PageHeader, PageError> {
        let header = self.data_offset;
        let short = || PageError {
            offset: 0,
            kind: PageErrorKind::ShortPage {
                len: page.len(),
                header,
            },
        };
        let timestamp = read_uint(page, 0, 8, self.endian).ok_or_else(short)?;
        let commit =
            read_uint(page, self.commit_offset, self.commit_size, self.endian).ok_or_else(short)?;
        let Some(room) = page.len().checked_sub(header) else {
            return Err(short());
        };
        let data_len = commit & COMMIT_MASK;
        let capacity = self.data_size.min(room);
        if data_len > capacity as u64 {
            return Err(PageError {
                offset: self.commit_offset,
                kind: PageErrorKind::CommitTooLarge {
                    commit: data_len,
                    capacity,
                },
            });
        }
        // data_len <= capacity <= usize.
        let data_len = data_len as usize;
        // header + data_len <= header + room = page.len().
        let after = header.saturating_add(data_len);
        let missed = if commit & MISSED_EVENTS != 0 {
            // The count sits right after the data, when it fit (the kernel stores it only
            // then, and sets MISSED_STORED).
            let count = if commit & MISSED_STORED != 0 {
                read_uint(page, after, self.commit_size, self.endian)
            } else {
                None
            };
            Some(count)
        } else {
            None
        };
        Ok(PageHeader {
            timestamp,
            data_len,
            missed,
        })
    }

    /// Iterate over the items of `page`: a [`Item::Missed`] first when events were lost,
    /// then the records in order. A bad header or event gives one error, then the
    /// iterator ends.
    pub fn parse_page<'p>(&self, page: &'p [u8]) -> PageIter<'p> {
        let state = match PageReader::new(self, page) {
            Ok(reader) => Ok(reader),
            Err(e) => Err(Some(e)),
        };
        PageIter {
            layout: *self,
            page,
            state,
        }
    }
}

/// Check that `header_event` describes the event header this parser reads.
fn check_header_event(text: &str) -> Result<(), LayoutError> {
    let mut type_len = None;
    let mut time_delta = None;
    let mut types = [None; 3];
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim();
        let value = value.trim();
        let bits = || {
            value
                .strip_suffix("bits")
                .and_then(|v| v.trim().parse::<u32>().ok())
        };
        let type_eq = || {
            value
                .strip_prefix("type")
                .map(str::trim_start)
                .and_then(|v| v.strip_prefix("=="))
                .and_then(|v| v.trim().parse::<u32>().ok())
        };
        match key {
            "type_len" => type_len = bits(),
            "time_delta" => time_delta = bits(),
            "padding" => types[0] = type_eq(),
            "time_extend" => types[1] = type_eq(),
            "time_stamp" => types[2] = type_eq(),
            _ => {}
        }
    }
    if type_len != Some(5) || time_delta != Some(TS_SHIFT) {
        let found = |name: &str, bits: Option<u32>| {
            bits.map_or_else(|| format!("no {name}"), |b| format!("`{name} : {b} bits`"))
        };
        return Err(LayoutError::HeaderEvent(format!(
            "expected `type_len : 5 bits` and `time_delta : 27 bits`, found {} and {}",
            found("type_len", type_len),
            found("time_delta", time_delta)
        )));
    }
    // Kernels before 5.x print no time_stamp line; its value has always been 31.
    let expected = [TYPE_PADDING, TYPE_TIME_EXTEND, TYPE_TIME_STAMP];
    for (name, (found, want)) in ["padding", "time_extend", "time_stamp"]
        .iter()
        .zip(types.iter().zip(expected))
    {
        match found {
            Some(found) if *found != want => {
                return Err(LayoutError::HeaderEvent(format!(
                    "{name} is type {found}, expected {want}"
                )));
            }
            _ => {}
        }
    }
    if types[0].is_none() || types[1].is_none() {
        return Err(LayoutError::HeaderEvent(
            "no `padding` or `time_extend` line".to_string(),
        ));
    }
    Ok(())
}

/// A cursor over one page that does not borrow it: the caller passes the same page bytes
/// to every [`PageReader::next_item`] call (so the bytes can live in a buffer the caller
/// reuses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageReader {
    header: PageHeader,
    /// Next event's offset in the page.
    pos: usize,
    /// End of the committed data in the page.
    end: usize,
    /// Time of the last event read.
    time: u64,
    /// The missed marker is still to be returned.
    missed_pending: bool,
    /// An error was returned or the data ended.
    done: bool,
    /// The page is cut short inside its committed data ([`PageReader::new_cut`]).
    cut: bool,
}

impl PageReader {
    /// Start reading `page` (checks its header).
    pub fn new(layout: &PageLayout, page: &[u8]) -> Result<Self, PageError> {
        let header = layout.page_header(page)?;
        Ok(PageReader {
            header,
            pos: layout.data_offset,
            // Checked against the page's length by page_header: no overflow.
            end: layout.data_offset.saturating_add(header.data_len),
            time: header.timestamp,
            missed_pending: header.missed.is_some(),
            done: false,
            cut: false,
        })
    }

    /// Start reading a page cut short (the file ends inside it:
    /// [`PageLayout::page_header_cut`]): its events wholly present are read; the one the
    /// cut goes through ends the page with [`PageErrorKind::EventTruncated`], which
    /// [`PageReader::is_cut`] tells apart from a corrupt page.
    pub fn new_cut(layout: &PageLayout, page: &[u8]) -> Result<Self, PageError> {
        let (header, cut) = layout.page_header_cut(page)?;
        Ok(PageReader {
            header,
            pos: layout.data_offset,
            // At most a whole page (page_header_cut): no overflow.
            end: layout.data_offset.saturating_add(header.data_len),
            time: header.timestamp,
            missed_pending: header.missed.is_some(),
            done: false,
            cut,
        })
    }

    /// Whether the page's committed data runs past the bytes given (a page cut short,
    /// [`PageReader::new_cut`]): an event truncated at its end is the cut, not corruption.
    pub fn is_cut(&self) -> bool {
        self.cut
    }

    /// The page's header.
    pub fn header(&self) -> &PageHeader {
        &self.header
    }

    /// The next item of `page` (the same bytes given to [`PageReader::new`]), `None` at
    /// the end of the data or after an error.
    #[inline]
    pub fn next_item<'p>(
        &mut self,
        layout: &PageLayout,
        page: &'p [u8],
    ) -> Option<Result<Item<'p>, PageError>> {
        if self.missed_pending {
            self.missed_pending = false;
            if let Some(count) = self.header.missed {
                return Some(Ok(Item::Missed {
                    count,
                    time: self.header.timestamp,
                }));
            }
        }
        if self.done {
            return None;
        }
        let result = self.next_record(layout, page);
        if !matches!(result, Some(Ok(_))) {
            self.done = true;
        }
        result
    }

    // Offsets inside `page` (a slice: at most isize::MAX bytes) plus at most 8, or plus a
    // length checked against the bytes `available` first; a u32 length minus 4 after the
    // check that it is at least 4. None can overflow.
    #[allow(clippy::arithmetic_side_effects)]
    #[inline(always)]
    fn next_record<'p>(
        &mut self,
        layout: &PageLayout,
        page: &'p [u8],
    ) -> Option<Result<Item<'p>, PageError>> {
        let endian = layout.endian;
        // `end` <= page.len() (checked by page_header), so every read below at or before
        // `end` is in bounds; `get` keeps it so even if that changed.
        let page = page.get(..self.end)?;
        loop {
            let at = self.pos;
            let available = self.end.saturating_sub(at);
            if available == 0 {
                return None;
            }
            let truncated = |type_len: u32, needed: u64| PageError {
                offset: at,
                kind: PageErrorKind::EventTruncated {
                    type_len,
                    needed,
                    available,
                },
            };
            let Some(word) = read_u32(page, at, endian) else {
                return Some(Err(truncated(0, 4)));
            };
            let (type_len, delta) = match endian {
                Endian::Little => (word & 0x1f, word >> 5),
                Endian::Big => (word >> 27, word & ((1 << TS_SHIFT) - 1)),
            };
            let array0 = || read_u32(page, at + 4, endian);
            match type_len {
                TYPE_PADDING => {
                    if delta == 0 {
                        // The rest of the page is padding.
                        return None;
                    }
                    let Some(len) = array0() else {
                        return Some(Err(truncated(type_len, 8)));
                    };
                    let needed = 4 + u64::from(len);
                    if needed > available as u64 {
                        return Some(Err(truncated(type_len, needed)));
                    }
                    self.time = self.time.wrapping_add(u64::from(delta));
                    // needed <= available.
                    self.pos = at + needed as usize;
                }
                TYPE_TIME_EXTEND | TYPE_TIME_STAMP => {
                    let Some(high) = array0() else {
                        return Some(Err(truncated(type_len, 8)));
                    };
                    let value = (u64::from(high) << TS_SHIFT) | u64::from(delta);
                    if type_len == TYPE_TIME_EXTEND {
                        self.time = self.time.wrapping_add(value);
                    } else {
                        self.time = fix_abs_ts(value, self.time);
                    }
                    self.pos = at + 8;
                }
                0 => {
                    let Some(len) = array0() else {
                        return Some(Err(truncated(0, 8)));
                    };
                    if len < 4 {
                        return Some(Err(PageError {
                            offset: at + 4,
                            kind: PageErrorKind::BadLength(len),
                        }));
                    }
                    // Body (len - 4 bytes, padded to 4) after the header and the length.
                    let body = (u64::from(len) - 4 + 3) & !3;
                    return self.record(page, at, 8, body, delta, available);
                }
                _ => {
                    let body = 4 * u64::from(type_len);
                    return self.record(page, at, 4, body, delta, available);
                }
            }
        }
    }

    /// The record at `at` whose `body` bytes start `head` bytes in.
    // `head` (4 or 8) + `body` (at most 4 × u32::MAX) fits a u64; the offsets are checked
    // against the bytes `available` before they are added.
    #[allow(clippy::arithmetic_side_effects)]
    #[inline]
    fn record<'p>(
        &mut self,
        page: &'p [u8],
        at: usize,
        head: usize,
        body: u64,
        delta: u32,
        available: usize,
    ) -> Option<Result<Item<'p>, PageError>> {
        let needed = head as u64 + body;
        if needed > available as u64 {
            let type_len = if head == 8 { 0 } else { (body / 4) as u32 };
            return Some(Err(PageError {
                offset: at,
                kind: PageErrorKind::EventTruncated {
                    type_len,
                    needed,
                    available,
                },
            }));
        }
        self.time = self.time.wrapping_add(u64::from(delta));
        let start = at + head;
        // needed <= available.
        self.pos = at + needed as usize;
        Some(Ok(Item::Record {
            time: self.time,
            raw: page.get(start..self.pos)?,
            offset: start,
        }))
    }
}

/// An absolute time stamp holds 59 bits; its 5 high bits are those of the time before it
/// (one more if that wrapped), as the kernel's `rb_fix_abs_ts`.
fn fix_abs_ts(abs: u64, before: u64) -> u64 {
    if before & TS_MSB == 0 {
        return abs;
    }
    let fixed = abs | (before & TS_MSB);
    if fixed < before {
        fixed.wrapping_add(1 << 59)
    } else {
        fixed
    }
}

/// The items of one borrowed page ([`PageLayout::parse_page`]).
#[derive(Debug, Clone)]
pub struct PageIter<'p> {
    layout: PageLayout,
    page: &'p [u8],
    /// The cursor, or the header error still to return (`None` once returned).
    state: Result<PageReader, Option<PageError>>,
}

impl<'p> PageIter<'p> {
    /// The page's header, unless it was bad.
    pub fn header(&self) -> Option<&PageHeader> {
        self.state.as_ref().ok().map(PageReader::header)
    }
}

impl<'p> Iterator for PageIter<'p> {
    type Item = Result<Item<'p>, PageError>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.state {
            Ok(reader) => reader.next_item(&self.layout, self.page),
            Err(e) => e.take().map(Err),
        }
    }
}

// Tests compute with the values they pick.
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests;
