//! The per-CPU page streams of one buffer, merged in time order.

use super::cursor::Cursor;
use super::{BufferInfo, Compression, ErrorKind, MAX_CHUNK, TraceDat, TraceDatError};
use crate::ftrace_page::{self, PageError, PageLayout, PageReader};

/// One item of the merged stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'r> {
    /// A trace entry.
    Record(Record<'r>),
    /// The kernel lost events on `cpu` before the page that starts at `time`.
    Lost {
        /// The CPU.
        cpu: u32,
        /// How many, when the kernel stored the count.
        count: Option<u64>,
        /// The page's timestamp (trace clock units).
        time: u64,
    },
}

/// One trace entry of the merged stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'r> {
    /// The CPU it was written on.
    pub cpu: u32,
    /// Its time in the trace clock's units (nanoseconds for the usual clocks), without the
    /// file's [`TraceDat::time_offset_ns`].
    pub time: u64,
    /// The trace entry, common fields first (valid until the next call to
    /// [`Records::next_item`]).
    pub raw: &'r [u8],
    /// Index of its format in [`TraceDat::events`] (by `common_type`), `None` when the
    /// file has no format for it.
    pub event: Option<usize>,
}

/// A CPU's data of the top buffer, whole pages in the file ([`TraceDat::cpu_pages`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuPages {
    /// The CPU.
    pub cpu: u32,
    /// File offset of its first page.
    pub first: usize,
    /// How many pages (the last may be shorter).
    pub count: usize,
    /// Bytes of its data.
    pub len: usize,
    /// The page size.
    pub page_size: usize,
}

impl CpuPages {
    /// File offset of page `i`.
    pub fn offset(&self, i: usize) -> usize {
        // Pages inside the file for every `i` below `count`; saturating past them.
        self.first.saturating_add(i.saturating_mul(self.page_size))
    }
}

/// Where the current page's bytes are.
#[derive(Debug, Clone, Copy)]
struct PageSrc {
    /// In the decompressed chunk (else in the file).
    in_chunk: bool,
    start: usize,
    len: usize,
    /// The last page of data the file cuts short: fewer bytes than a page.
    cut: bool,
}

/// The item a CPU stream offers next (offsets into its current page).
#[derive(Debug, Clone, Copy)]
enum Head {
    Record { time: u64, start: usize, len: usize },
    Lost { count: Option<u64>, time: u64 },
}

impl Head {
    fn time(&self) -> u64 {
        match *self {
            Head::Record { time, .. } | Head::Lost { time, .. } => time,
        }
    }
}

/// One CPU's pages.
#[derive(Debug)]
struct CpuStream<'t> {
    cpu: u32,
    file: &'t [u8],
    /// Next unread file offset (next page, or next chunk header) and the end of the data
    /// present in the file.
    pos: usize,
    end: usize,
    /// The data was declared longer than the file: reported once, at the end.
    truncated: Option<TraceDatError>,
    /// Compressed: the chunks not yet read, the current one and the next page in it.
    chunked: bool,
    chunks_left: u32,
    chunk: Vec<u8>,
    chunk_at: u64,
    chunk_pos: usize,
    page: Option<(PageSrc, PageReader)>,
    head: Option<Head>,
    done: bool,
    /// A window's reading: the time of the last head (to tell entries that go back in
    /// time) and the page where the window ended this stream.
    last: u64,
    stop: Option<usize>,
}

impl<'t> CpuStream<'t> {
    fn page_bytes(&self, src: PageSrc) -> &[u8] {
        let bytes: &[u8] = if src.in_chunk { &self.chunk } else { self.file };
        bytes
            // A page inside `bytes` (next_page): the sum fits.
            .get(src.start..src.start.saturating_add(src.len))
            .unwrap_or_default()
    }

    /// The error for `error` on the page `src`.
    fn page_error(&self, src: PageSrc, error: PageError) -> TraceDatError {
        // An offset inside the page: the sum fits.
        let offset = src.start.saturating_add(error.offset);
        let kind = ErrorKind::Page {
            cpu: self.cpu,
            error,
        };
        if src.in_chunk {
            TraceDatError {
                offset: self.chunk_at,
                inner: Some(offset as u64),
                kind,
            }
        } else {
            TraceDatError {
                offset: offset as u64,
                inner: None,
                kind,
            }
        }
    }

    /// Find the next head, unless there is one.
    fn fill(&mut self, r: &Settings) -> Result<(), TraceDatError> {
        while self.head.is_none() && !self.done {
            let Some((src, mut reader)) = self.page else {
                self.next_page(r)?;
                continue;
            };
            match reader.next_item(&r.layout, self.page_bytes(src)) {
                Some(Ok(ftrace_page::Item::Record { time, raw, offset })) => {
                    self.head = Some(Head::Record {
                        time,
                        start: offset,
                        len: raw.len(),
                    });
                    self.page = Some((src, reader));
                }
                Some(Ok(ftrace_page::Item::Missed { count, time })) => {
                    self.head = Some(Head::Lost { count, time });
                    self.page = Some((src, reader));
                }
                // The event the cut goes through ends a cut page: the stream's
                // `CutShort` error says so at its end.
                Some(Err(e))
                    if reader.is_cut()
                        && matches!(e.kind, ftrace_page::PageErrorKind::EventTruncated { .. }) =>
                {
                    self.page = None;
                }
                Some(Err(e)) => {
                    self.page = None;
                    return Err(self.page_error(src, e));
                }
                None => self.page = None,
            }
        }
        Ok(())
    }

    /// Open the next page (reading the next chunk when the current one is used up), or
    /// mark the stream done.
    fn next_page(&mut self, r: &Settings) -> Result<(), TraceDatError> {
        if self.chunked && self.chunk_pos >= self.chunk.len() {
            let Some(left) = self.chunks_left.checked_sub(1) else {
                return self.finish();
            };
            self.chunks_left = left;
            self.read_chunk(r)?;
        }
        let src = if self.chunked {
            // chunk_pos <= chunk.len(): the position only moves by what is left.
            let len = r
                .page_size
                .min(self.chunk.len().saturating_sub(self.chunk_pos));
            let src = PageSrc {
                in_chunk: true,
                start: self.chunk_pos,
                len,
                cut: false,
            };
            self.chunk_pos = self.chunk_pos.saturating_add(len);
            src
        } else {
            if self.pos >= self.end {
                return self.finish();
            }
            // pos < end, checked just above.
            let len = r.page_size.min(self.end.saturating_sub(self.pos));
            let src = PageSrc {
                in_chunk: false,
                start: self.pos,
                len,
                cut: self.truncated.is_some() && len < r.page_size,
            };
            self.pos = self.pos.saturating_add(len);
            src
        };
        let page = self.page_bytes(src);
        let reader = if src.cut {
            PageReader::new_cut(&r.layout, page)
        } else {
            PageReader::new(&r.layout, page)
        };
        match reader {
            Ok(reader) => {
                self.page = Some((src, reader));
                Ok(())
            }
            // A cut through the page header: nothing of the page can be read (the
            // stream's `CutShort` error says where the file ends).
            Err(e) if src.cut && matches!(e.kind, ftrace_page::PageErrorKind::ShortPage { .. }) => {
                Ok(())
            }
            Err(e) => Err(self.page_error(src, e)),
        }
    }

    fn finish(&mut self) -> Result<(), TraceDatError> {
        self.done = true;
        match self.truncated.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// `e`, a chunk running past the end of the data present, unless the file is cut
    /// short there (its `CutShort` error says so at the end of the stream).
    fn unless_cut(&self, e: TraceDatError) -> Result<(), TraceDatError> {
        let past_end = matches!(e.kind, ErrorKind::Truncated { .. });
        if past_end && self.truncated.is_some() {
            Ok(())
        } else {
            Err(e)
        }
    }

    /// Decompress the chunk at `pos` into `chunk`; on failure the chunk is skipped.
    fn read_chunk(&mut self, r: &Settings) -> Result<(), TraceDatError> {
        self.chunk.clear();
        self.chunk_pos = 0;
        let mut c = Cursor::new(&self.file[..self.end], self.pos, r.endian(), None);
        let at = c.pos();
        self.chunk_at = at as u64;
        let header = (|| {
            let csize = c.u32("chunk compressed size")?;
            let usize_ = c.u32("chunk size")?;
            Ok::<_, TraceDatError>((csize, usize_))
        })();
        let (csize, usize_) = match header {
            Ok(h) => h,
            Err(e) => {
                // No next chunk can be found.
                self.chunks_left = 0;
                self.pos = self.end;
                return self.unless_cut(e);
            }
        };
        let data = c.take(u64::from(csize), "chunk data");
        self.pos = c.pos();
        let data = match data {
            Ok(d) => d,
            Err(e) => {
                self.chunks_left = 0;
                self.pos = self.end;
                return self.unless_cut(e);
            }
        };
        if usize_ as usize > MAX_CHUNK {
            return Err(c.error_at(
                at,
                ErrorKind::TooLarge {
                    what: "trace data chunk",
                    size: u64::from(usize_),
                    limit: MAX_CHUNK as u64,
                },
            ));
        }
        let result = r
            .compression
            .decompress(data, usize_ as usize, &mut self.chunk);
        if let Err(m) = result {
            self.chunk.clear();
            return Err(c.error_at(at, ErrorKind::Decompress(m)));
        }
        Ok(())
    }
}

/// What every stream needs to know.
#[derive(Debug, Clone, Copy)]
struct Settings {
    layout: PageLayout,
    page_size: usize,
    compression: Compression,
}

impl Settings {
    fn endian(&self) -> crate::bytes::Endian {
        self.layout.endian()
    }
}

/// The records of one buffer, merged in time order ([`TraceDat::records`]).
///
/// ```no_run
/// # fn main() -> Result<(), uevrec_parsers::trace_dat::TraceDatError> {
/// use uevrec_parsers::trace_dat::{Item, TraceDat};
/// let bytes: Vec<u8> = Vec::new(); // the whole file, read by the caller
/// let file = TraceDat::parse(&bytes)?;
/// let mut records = file.records()?;
/// while let Some(item) = records.next_item()? {
///     match item {
///         Item::Record(r) => {
///             let name = r.event.map(|i| file.events()[i].format.name.as_str());
///             println!("{} cpu{} {:?} {} bytes", r.time, r.cpu, name, r.raw.len());
///         }
///         Item::Lost { cpu, count, time } => println!("{time} cpu{cpu} lost {count:?}"),
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Records<'t> {
    file: &'t TraceDat<'t>,
    settings: Settings,
    cpus: Vec<CpuStream<'t>>,
    /// The stream whose head was returned last (consumed on the next call).
    taken: Option<usize>,
    /// A window of the stream ([`TraceDat::window_records`]): its times `from..until`.
    window: Option<(u64, Option<u64>)>,
    /// In a window: an entry came before the one ahead of it on its CPU.
    disorder: bool,
}

impl<'t> Records<'t> {
    pub(super) fn new(file: &'t TraceDat<'t>, buffer: &BufferInfo) -> Result<Self, TraceDatError> {
        let data = file.data();
        let page_size = file.page_size_of(buffer);
        let settings = Settings {
            layout: *file.layout(),
            page_size,
            compression: if buffer.compressed {
                file.compression().0
            } else {
                Compression::None
            },
        };
        let mut cpus = Vec::new();
        let mut entries = buffer.cpus.clone();
        entries.sort_by_key(|c| c.cpu);
        for entry in entries.iter().filter(|c| c.size > 0) {
            // Compressed data starts with a 4-byte chunk count that trace-cmd does not
            // count in the size.
            let count_len = if buffer.compressed { 4 } else { 0 };
            let declared_end = entry
                .offset
                .saturating_add(entry.size)
                .saturating_add(count_len);
            let len = data.len() as u64;
            let start = entry.offset.min(len) as usize;
            let end = declared_end.min(len) as usize;
            // start <= end: both the file's length or less, declared_end >= offset.
            let present = end.saturating_sub(start) as u64;
            let truncated = (declared_end > len).then(|| TraceDatError {
                offset: len,
                inner: None,
                kind: ErrorKind::CutShort {
                    cpu: entry.cpu,
                    declared: declared_end.saturating_sub(entry.offset),
                    present,
                    read: cut_detail(buffer.compressed, present, page_size as u64, start),
                },
            });
            let mut stream = CpuStream {
                cpu: entry.cpu,
                file: data,
                pos: start,
                end,
                truncated,
                chunked: buffer.compressed,
                chunks_left: 0,
                chunk: Vec::new(),
                chunk_at: 0,
                chunk_pos: 0,
                page: None,
                head: None,
                done: false,
                last: 0,
                stop: None,
            };
            if buffer.compressed {
                let mut c = Cursor::new(&data[..end], start, file.endian(), None);
                stream.chunks_left = c.u32("chunk count")?;
                stream.pos = c.pos();
            }
            cpus.push(stream);
        }
        Ok(Records {
            file,
            settings,
            cpus,
            taken: None,
            window: None,
            disorder: false,
        })
    }

    /// Make this (new, uncompressed) stream the window of items with times `from..until`
    /// (no end: to the end), each CPU's read from the page at file offset `starts[cpu]`
    /// (a page at or before the first item of the window).
    pub(super) fn set_window(&mut self, from: u64, until: Option<u64>, starts: &[(u32, usize)]) {
        self.window = Some((from, until));
        for stream in &mut self.cpus {
            if let Some(&(_, at)) = starts.iter().find(|(cpu, _)| *cpu == stream.cpu) {
                stream.pos = at.clamp(stream.pos, stream.end);
            }
        }
    }

    /// A window's heads: items before it passed over, the first at or past its end ends
    /// its CPU's stream there; an item older than the one before it on its CPU noted.
    fn fill_window(&mut self, from: u64, until: Option<u64>) -> Result<(), TraceDatError> {
        for stream in &mut self.cpus {
            loop {
                stream.fill(&self.settings)?;
                let Some(head) = stream.head else {
                    break;
                };
                let time = head.time();
                if time < stream.last {
                    self.disorder = true;
                }
                stream.last = time;
                if time < from {
                    stream.head = None;
                    continue;
                }
                if until.is_some_and(|until| time >= until) {
                    stream.stop = stream.page.map(|(src, _)| src.start);
                    stream.head = None;
                    stream.done = true;
                }
                break;
            }
        }
        Ok(())
    }

    /// A window's reading: false when an item came before the one ahead of it on its CPU
    /// (the window's items are then not those of the whole stream's merge).
    pub fn in_order(&self) -> bool {
        !self.disorder
    }

    /// A window's reading: for each CPU, the file offset of the page where the window
    /// ended its stream (`None`: it read the CPU's data to its end, or not yet ended).
    pub fn stops(&self) -> Vec<(u32, Option<usize>)> {
        self.cpus.iter().map(|s| (s.cpu, s.stop)).collect()
    }

    /// The next record or lost-event marker in time order, `Ok(None)` at the end.
    ///
    /// An error (a bad page or chunk) is not the end: calling again goes on after it.
    pub fn next_item(&mut self) -> Result<Option<Item<'_>>, TraceDatError> {
        if let Some(i) = self.taken.take() {
            if let Some(stream) = self.cpus.get_mut(i) {
                stream.head = None;
            }
        }
        match self.window {
            Some((from, until)) => self.fill_window(from, until)?,
            None => {
                for stream in &mut self.cpus {
                    stream.fill(&self.settings)?;
                }
            }
        }
        let mut best: Option<(usize, u64)> = None;
        for (i, stream) in self.cpus.iter().enumerate() {
            if let Some(head) = stream.head {
                if best.is_none_or(|(_, t)| head.time() < t) {
                    best = Some((i, head.time()));
                }
            }
        }
        let Some((i, _)) = best else {
            return Ok(None);
        };
        self.taken = Some(i);
        let stream = &self.cpus[i];
        let Some(head) = stream.head else {
            return Ok(None);
        };
        Ok(Some(match head {
            Head::Lost { count, time } => Item::Lost {
                cpu: stream.cpu,
                count,
                time,
            },
            Head::Record { time, start, len } => {
                let page = stream.page.map(|(src, _)| stream.page_bytes(src));
                let raw = page
                    // A record inside its page: the sum fits.
                    .and_then(|p| p.get(start..start.saturating_add(len)))
                    .unwrap_or_default();
                Item::Record(Record {
                    cpu: stream.cpu,
                    time,
                    raw,
                    event: self.file.event_of(raw),
                })
            }
        }))
    }

    /// The CPUs with data in this buffer, in the order ties are broken.
    pub fn cpus(&self) -> impl Iterator<Item = u32> + '_ {
        self.cpus.iter().map(|s| s.cpu)
    }
}

/// What of a CPU's data cut short (`present` bytes of it, from file offset `start`) is
/// read: whole pages, and the complete events of a page the cut goes through.
fn cut_detail(compressed: bool, present: u64, page_size: u64, start: usize) -> String {
    // page_size >= 1 (TraceDat::page_size_of).
    let pages = present.checked_div(page_size).unwrap_or(0);
    let rest = present.checked_rem(page_size).unwrap_or(present);
    if compressed {
        return "its chunks wholly present were read".into();
    }
    let whole = match pages {
        0 => "no whole page of it is present".to_string(),
        1 => "its 1 whole page was read".to_string(),
        n => format!("its {n} whole pages were read"),
    };
    if rest == 0 {
        return whole;
    }
    format!(
        "{whole}, and of the page at byte {} ({rest} of its {page_size} bytes present) \
         the events wholly present",
        // Inside the file: start + the bytes present of this CPU.
        (start as u64).saturating_add(pages.saturating_mul(page_size))
    )
}
