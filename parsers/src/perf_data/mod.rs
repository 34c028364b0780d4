//! perf.data reading, file mode and pipe mode, without I/O: the caller hands in the
//! bytes (a whole mapped file, or a stream fed piece by piece).
//!
//! - [`header`]: the file header, feature sections (`HEADER_EVENT_DESC`, `HEADER_ARCH`,
//!   `HEADER_CLOCK_DATA`, …);
//! - [`attr`]: `perf_event_attr` and sample ids (attrs section, `HEADER_ATTR` records);
//! - [`tracing_data`]: the embedded format files (`HEADER_TRACING_DATA`);
//! - [`records`]: framing of the data section / pipe stream;
//! - [`order`]: time order by `FINISHED_ROUND` windows, bounded;
//! - [`writer`]: the bytes of a file-mode perf.data (`uevrec record --raw`);
//! - (records → JSON lines is not here: [`crate::to_lines::perf_data`], a layer above);
//! - [`PerfData`] (here): the state that turns framed records into [`Item`]s: which event
//!   a sample belongs to (`PERF_SAMPLE_IDENTIFIER` / `PERF_SAMPLE_ID` and the attr ids,
//!   as perf's `evlist__event2evsel`), its layout ([`crate::perf_sample::SampleFormat`] of
//!   the event's `sample_type`, in the file's byte order), and its format (the tracing
//!   data's format whose `ID:` is the attr's `config`).
//!
//! Errors ([`PerfDataError`]) say where (absolute byte offset) and why.
//!
//! Layers, lowest first: `cursor`, `event_attr`, `header`, `attr`, `records`,
//! `tracing_data`, `writer`, `index`, `order`.
//! `event_attr` is the attr alone, below the header (whose event descriptions hold attrs)
//! and `attr` (attrs with their ids, read through the header); a module imports only from
//! modules before it (`parsers/tests/layers.rs`), this file from all of them.

pub mod attr;
mod cursor;
mod event_attr;
pub mod header;
pub mod index;
pub mod order;
pub mod records;
pub mod tracing_data;
// Writes what its caller holds (records it made, lengths of its buffers and files, far
// below u64::MAX), not what a file claims.
#[allow(clippy::arithmetic_side_effects)]
pub mod writer;

use std::cell::Cell;

use crate::bytes::{Endian, ShownBytes, u64_at};
use attr::{AttrEntry, EventAttr, PERF_TYPE_TRACEPOINT, parse_attr_record, parse_attrs_section};
use cursor::Cursor;
use header::{FILE_HEADER_SIZE, FileHeader, PIPE_HEADER_SIZE, feature};
use records::{RawRecord, Records, kind};
use tracing_data::{ParsedFormat, TracingData};

pub use header::{ClockData, Features};

use crate::perf_sample::{
    PERF_RECORD_LOST, PERF_RECORD_LOST_SAMPLES, PERF_RECORD_SAMPLE, PerfSampleError, Record,
    RecordHeader, Sample, SampleFormat, SampleId, sample_type,
};

/// Why (part of) a perf.data could not be read; every variant but
/// [`PerfDataError::FileModeStream`] carries the absolute byte offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PerfDataError {
    /// The bytes end before a field.
    #[error("truncated at byte {at}: {what} needs {need} bytes, {have} left")]
    Truncated {
        /// The field.
        what: &'static str,
        /// Where it starts.
        at: u64,
        /// Bytes it needs.
        need: u64,
        /// Bytes there are.
        have: u64,
    },
    /// Not `PERFILE2` in either byte order.
    #[error(
        "not a perf.data file: magic {} at byte 0 (expected \"PERFILE2\")",
        ShownBytes(.found)
    )]
    BadMagic {
        /// The first 8 bytes.
        found: [u8; 8],
    },
    /// The header size is neither 104 (file mode) nor 16 (pipe mode).
    #[error("at byte 8: header size {size} (expected 104 for file mode, 16 for pipe mode)")]
    BadHeaderSize {
        /// The size found.
        size: u64,
    },
    /// A section lies outside the file.
    #[error("{what} at byte {offset} ({size} bytes) lies outside the file ({file_len} bytes)")]
    BadSection {
        /// The section.
        what: &'static str,
        /// Its offset.
        offset: u64,
        /// Its size.
        size: u64,
        /// The file's size.
        file_len: u64,
    },
    /// A record whose size is below its header.
    #[error(
        "at byte {at}: record of type {kind} says it has {size} bytes, less than its 8-byte header"
    )]
    BadRecord {
        /// Where the record starts.
        at: u64,
        /// Its type.
        kind: u32,
        /// Its size field.
        size: u16,
    },
    /// The tracing data block is malformed.
    #[error("at byte {at}: tracing data: {why}")]
    BadTracingData {
        /// Where.
        at: u64,
        /// What is wrong.
        why: String,
    },
    /// A sample or lost record's body does not fit its event's layout.
    #[error("at byte {at}: {source}")]
    Sample {
        /// Where the record starts.
        at: u64,
        /// The layout error.
        source: PerfSampleError,
    },
    /// Something valid that this reader does not handle.
    #[error("at byte {at}: not supported: {what}")]
    Unsupported {
        /// Where.
        at: u64,
        /// What.
        what: String,
    },
    /// A file-mode header on a stream: the caller must read the whole input and use
    /// [`PerfData::open`] (file mode needs to seek).
    #[error("a file-mode perf.data on a stream (needs the whole input)")]
    FileModeStream,
}

impl PerfDataError {
    /// The absolute byte offset the error is about.
    pub fn offset(&self) -> Option<u64> {
        match *self {
            PerfDataError::Truncated { at, .. }
            | PerfDataError::BadRecord { at, .. }
            | PerfDataError::BadTracingData { at, .. }
            | PerfDataError::Sample { at, .. }
            | PerfDataError::Unsupported { at, .. } => Some(at),
            PerfDataError::BadMagic { .. } => Some(0),
            PerfDataError::BadHeaderSize { .. } => Some(8),
            PerfDataError::BadSection { offset, .. } => Some(offset),
            PerfDataError::FileModeStream => None,
        }
    }
}

/// One event (attr) of the file.
#[derive(Debug, Clone)]
pub struct Event {
    /// The attr.
    pub attr: EventAttr,
    /// Its sample ids.
    pub ids: Vec<u64>,
    /// How its records are laid out, or why they cannot be parsed.
    pub layout: Result<SampleFormat, PerfSampleError>,
    /// Where the time is in its samples (from the record start), if they have one.
    pub time_at: Option<usize>,
}

/// What a record means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'a> {
    /// A sample of event `event` (an index into [`PerfData::events`]).
    Sample {
        /// The event.
        event: usize,
        /// The sample.
        sample: Sample<'a>,
    },
    /// A sample whose event is unknown (no id, or an id no attr has).
    UnknownSample,
    /// A sample of an event whose `sample_type` this reader cannot lay out.
    Unparsable {
        /// The event.
        event: usize,
    },
    /// `PERF_RECORD_LOST` or `PERF_RECORD_LOST_SAMPLES` (parsed with `event`'s layout).
    Lost {
        /// The event whose layout the record was parsed with.
        event: usize,
        /// Records lost.
        lost: u64,
        /// The record's `sample_id` trailer.
        sample_id: SampleId,
    },
    /// `PERF_RECORD_FINISHED_ROUND`.
    FinishedRound,
    /// An attr was added (pipe mode): [`PerfData::events`] grew.
    NewEvent,
    /// The tracing data arrived (pipe mode): formats are known now.
    TracingData,
    /// A header feature arrived (pipe mode).
    Feature(u32),
    /// Any other record.
    Other(RecordHeader),
}

/// Where the event id is, for records of every event alike (perf's `id_pos` / `is_pos`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct IdPos {
    /// Byte offset of the id in a sample's body.
    sample: Option<usize>,
    /// Bytes from the end of a non-sample record to its id.
    trailer: Option<usize>,
}

impl IdPos {
    fn of(attr: &EventAttr) -> Self {
        use sample_type::*;
        let st = attr.sample_type;
        let has = |bit| st & bit != 0;
        if has(IDENTIFIER) {
            return IdPos {
                sample: Some(0),
                trailer: attr.sample_id_all().then_some(8),
            };
        }
        if !has(ID) {
            return IdPos::default();
        }
        let before = [IP, TID, TIME, ADDR].iter().filter(|&&b| has(b)).count();
        let after = [STREAM_ID, CPU].iter().filter(|&&b| has(b)).count();
        // Counts of at most 4 bits: the products are small.
        #[allow(clippy::arithmetic_side_effects)]
        let (sample, trailer) = (8 * before, 8 * (after + 1));
        IdPos {
            sample: Some(sample),
            trailer: attr.sample_id_all().then_some(trailer),
        }
    }
}

/// The state of a perf.data being read: events, formats, features.
#[derive(Debug, Clone)]
pub struct PerfData {
    /// The file's numbers are big-endian.
    pub endian: Endian,
    /// Pipe mode.
    pub pipe: bool,
    events: Vec<Event>,
    /// `(id, event index)`, sorted by id.
    ids: Vec<(u64, usize)>,
    /// The last id looked up in `ids` and its event: consecutive samples mostly come
    /// from the same ring and event, and the binary search costs on every sample with
    /// several ids (BENCHMARKS.md, "Instruction counts moved out of the code").
    last_id: Cell<Option<(u64, usize)>>,
    id_pos: IdPos,
    /// The header features read so far.
    pub features: Features,
    tracing: Option<TracingData>,
    /// The tracing data's formats, sorted by tracepoint id.
    formats: Vec<ParsedFormat>,
    /// Problems that did not stop the reading (a feature section that did not parse).
    pub problems: Vec<PerfDataError>,
    /// The formats come from in-band records of a finished `record --raw` file (its
    /// tracing data feature is missing): each such record adds to them.
    inband_tracing: bool,
}

impl PerfData {
    fn empty(endian: Endian, pipe: bool) -> Self {
        PerfData {
            endian,
            pipe,
            events: Vec::new(),
            ids: Vec::new(),
            last_id: Cell::new(None),
            id_pos: IdPos::default(),
            features: Features::default(),
            tracing: None,
            formats: Vec::new(),
            problems: Vec::new(),
            inband_tracing: false,
        }
    }

    /// State for a pipe-mode stream of this byte order (from
    /// [`records::StreamReader::header`]).
    pub fn pipe(endian: Endian) -> Self {
        Self::empty(endian, true)
    }

    /// Read the header, attrs and features of a whole perf.data (file mode, or a
    /// pipe-mode stream saved to a file) and return the state with the data records.
    ///
    /// A data section running past the end of the file is cut to what is there (the
    /// cut is in [`PerfData::problems`], the last record is then reported truncated);
    /// features that do not parse are in `problems` too.
    pub fn open(file: &[u8]) -> Result<(Self, Records<'_>), PerfDataError> {
        let header = FileHeader::parse(file)?;
        if header.pipe {
            let data = &file[PIPE_HEADER_SIZE as usize..];
            let state = Self::pipe(header.endian);
            return Ok((state, Records::new(data, PIPE_HEADER_SIZE, header.endian)));
        }
        if header.attrs.size == 0 && header.data.size == 0 && file.len() as u64 > FILE_HEADER_SIZE {
            // The placeholder `record --raw` (and perf record) write first: the run ended
            // before its header was written.
            return Err(PerfDataError::Unsupported {
                at: 24,
                what: format!(
                    "an unfinished file: its header names no events and no data, yet {} bytes \
                     follow it (the recording was killed before writing its header; a \
                     recorder stopped by SIGINT/SIGTERM writes it)",
                    // file.len() > FILE_HEADER_SIZE, checked above.
                    (file.len() as u64).saturating_sub(FILE_HEADER_SIZE)
                ),
            });
        }
        let mut state = Self::empty(header.endian, false);
        match parse_attrs_section(file, &header) {
            Ok(entries) => {
                for entry in entries {
                    state.add_event(entry);
                }
            }
            // A cut file whose attrs were written at the end (`record --raw` writes them
            // in the data section too, before their samples: read from there).
            Err(e @ PerfDataError::BadSection { .. }) => state.problems.push(e),
            Err(e) => return Err(e),
        }
        match header.feature_sections(file) {
            Ok(sections) => {
                for (bit, section) in sections {
                    let read = section
                        .slice(file, "feature section")
                        .and_then(|bytes| state.feature(bit, bytes, section.offset));
                    if let Err(e) = read {
                        state.problems.push(e);
                    }
                }
            }
            Err(e) => state.problems.push(e),
        }
        let data = match header.data.slice(file, "data section") {
            Ok(data) => data,
            Err(e) => {
                state.problems.push(e);
                let start = usize::try_from(header.data.offset).unwrap_or(usize::MAX);
                file.get(start..).unwrap_or_default()
            }
        };
        Ok((state, Records::new(data, header.data.offset, header.endian)))
    }

    /// The events (attrs) known so far.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The tracing data, once read.
    pub fn tracing_data(&self) -> Option<&TracingData> {
        self.tracing.as_ref()
    }

    /// The wall-clock reference (`HEADER_CLOCK_DATA`), if the file has one.
    pub fn clock_data(&self) -> Option<ClockData> {
        self.features.clock_data
    }

    /// The format of tracepoint event `event`: the tracing data's format whose `ID:` is
    /// the attr's `config` (`None` for other event types or when the tracing data does not
    /// have it).
    pub fn format(&self, event: usize) -> Option<&ParsedFormat> {
        let attr = &self.events.get(event)?.attr;
        if attr.kind != PERF_TYPE_TRACEPOINT {
            return None;
        }
        let at = self
            .formats
            .binary_search_by_key(&attr.config, format_id)
            .ok()?;
        self.formats.get(at)
    }

    /// perf's name of `event` (`HEADER_EVENT_DESC`), else `system:name` from its format,
    /// else `type T config C`.
    pub fn event_name(&self, event: usize) -> String {
        let Some(ev) = self.events.get(event) else {
            return format!("event {event}");
        };
        let desc = self.features.event_desc.iter().find(|d| {
            d.attr.kind == ev.attr.kind
                && d.attr.config == ev.attr.config
                && (ev.ids.is_empty() || d.ids.iter().any(|id| ev.ids.contains(id)))
        });
        if let Some(d) = desc {
            return d.name.clone();
        }
        match self.format(event) {
            Some(ParsedFormat {
                system,
                format: Ok(f),
                ..
            }) => format!("{system}:{}", f.name),
            _ => format!("type {} config {}", ev.attr.kind, ev.attr.config),
        }
    }

    fn add_event(&mut self, entry: AttrEntry) {
        let index = self.events.len();
        if index == 0 {
            self.id_pos = IdPos::of(&entry.attr);
        }
        for &id in &entry.ids {
            self.ids.push((id, index));
        }
        self.ids.sort_unstable();
        self.last_id.set(None);
        let layout = entry.attr.sample_format(self.endian);
        let st = entry.attr.sample_type;
        let time_at = (st & sample_type::TIME != 0).then(|| {
            let before = [sample_type::IDENTIFIER, sample_type::IP, sample_type::TID];
            // The header and at most 3 words before the time.
            #[allow(clippy::arithmetic_side_effects)]
            let at = HEADER_SIZE_USIZE + 8 * before.iter().filter(|&&b| st & b != 0).count();
            at
        });
        self.events.push(Event {
            attr: entry.attr,
            ids: entry.ids,
            layout,
            time_at,
        });
    }

    /// Take in feature `bit` (file-mode section or pipe-mode record).
    fn feature(&mut self, bit: u32, bytes: &[u8], base: u64) -> Result<(), PerfDataError> {
        if bit == feature::TRACING_DATA {
            self.set_tracing_data(TracingData::parse(bytes, base)?.0);
            return Ok(());
        }
        self.features.absorb(bit, bytes, base, self.endian)
    }

    /// Take in a tracing data block: its formats join those known (a format of an id
    /// already known replaces it), as perf adds each block's events to its own. A
    /// crash-safe `record --raw` file has one block per event, each before the event's
    /// first sample.
    fn set_tracing_data(&mut self, data: TracingData) {
        let mut formats = data.formats();
        if !self.formats.is_empty() {
            let new: Vec<u64> = formats.iter().map(format_id).collect();
            formats.extend(
                std::mem::take(&mut self.formats)
                    .into_iter()
                    .filter(|f| format_id(f) == u64::MAX || !new.contains(&format_id(f))),
            );
        }
        formats.sort_by_key(format_id);
        self.formats = formats;
        self.tracing = Some(data);
    }

    #[inline]
    fn event_of_id(&self, id: u64) -> Option<usize> {
        if let Some((last, event)) = self.last_id.get()
            && last == id
        {
            return Some(event);
        }
        let event = match self.ids.binary_search_by_key(&id, |&(id, _)| id) {
            Ok(at) => self.ids[at].1,
            Err(_) => return None,
        };
        self.last_id.set(Some((id, event)));
        Some(event)
    }

    /// The event of the `PERF_RECORD_SAMPLE` record `bytes` (the only event, or the one
    /// its id names), without parsing the rest.
    pub fn sample_event(&self, bytes: &[u8]) -> Option<usize> {
        self.event_of(bytes, true)
    }

    /// The time of the sample record `bytes` of `event`, read at its fixed place without
    /// parsing the rest (the record is checked when parsed in full).
    #[inline]
    pub fn sample_time(&self, event: usize, bytes: &[u8]) -> Option<u64> {
        u64_at(bytes, self.events.get(event)?.time_at?, self.endian)
    }

    /// The event a record belongs to: the only one, or the one its id names.
    /// The event whose layout parses the non-sample record `bytes` (its `sample_id`
    /// names it; the first event when it does not, as perf does).
    pub(crate) fn non_sample_event(&self, bytes: &[u8]) -> usize {
        self.event_of(bytes, false).unwrap_or(0)
    }

    fn event_of(&self, bytes: &[u8], sample: bool) -> Option<usize> {
        if self.events.len() == 1 {
            return Some(0);
        }
        let at = if sample {
            HEADER_SIZE_USIZE.checked_add(self.id_pos.sample?)?
        } else {
            bytes.len().checked_sub(self.id_pos.trailer?)?
        };
        self.event_of_id(u64_at(bytes, at, self.endian)?)
    }

    /// What `rec` means; header records (attrs, tracing data, features) update the state.
    pub fn record<'a>(&mut self, rec: &RawRecord<'a>) -> Result<Item<'a>, PerfDataError> {
        let at = rec.offset;
        let body = &rec.bytes[HEADER_SIZE_USIZE..];
        // Places in the input: far below u64::MAX (saturating all the same).
        let body_at = at.saturating_add(HEADER_SIZE_USIZE as u64);
        match rec.header.kind {
            PERF_RECORD_SAMPLE => {
                let Some(event) = self.event_of(rec.bytes, true) else {
                    return Ok(Item::UnknownSample);
                };
                self.sample(event, rec.bytes, at)
            }
            PERF_RECORD_LOST | PERF_RECORD_LOST_SAMPLES => {
                let event = self.event_of(rec.bytes, false).unwrap_or(0);
                let Some(Ok(layout)) = self.events.get(event).map(|e| &e.layout) else {
                    return Ok(Item::Other(rec.header));
                };
                match layout.parse(rec.bytes) {
                    Ok(
                        Record::Lost {
                            lost, sample_id, ..
                        }
                        | Record::LostSamples { lost, sample_id },
                    ) => Ok(Item::Lost {
                        event,
                        lost,
                        sample_id,
                    }),
                    Ok(_) => Ok(Item::Other(rec.header)),
                    Err(source) => Err(PerfDataError::Sample { at, source }),
                }
            }
            kind::FINISHED_ROUND => Ok(Item::FinishedRound),
            kind::HEADER_ATTR => {
                let entry = parse_attr_record(body, body_at, self.endian)?;
                // A finished crash-safe `record --raw` file keeps its in-band attrs in the
                // data section; the attrs section already has them.
                let known = !entry.ids.is_empty()
                    && entry
                        .ids
                        .iter()
                        .all(|id| self.ids.iter().any(|(k, _)| k == id));
                if known {
                    return Ok(Item::Other(rec.header));
                }
                self.add_event(entry);
                Ok(Item::NewEvent)
            }
            kind::HEADER_TRACING_DATA => {
                let base = at.saturating_add(rec.bytes.len() as u64);
                self.set_tracing_data(TracingData::parse(rec.payload, base)?.0);
                Ok(Item::TracingData)
            }
            // An in-band attr or format of a finished `record --raw` file, passed over
            // for perf ([`writer::passed_over`]): read only when the file's own attrs or
            // tracing data are missing (a finished file cut before its trailer).
            writer::HEADER_EVENT_TYPE if !self.pipe => match u32::from(rec.header.misc) {
                kind::HEADER_ATTR => {
                    let entry = parse_attr_record(body, body_at, self.endian)?;
                    let known = entry
                        .ids
                        .iter()
                        .any(|id| self.ids.iter().any(|(k, _)| k == id));
                    if known || entry.ids.is_empty() {
                        return Ok(Item::Other(rec.header));
                    }
                    self.add_event(entry);
                    Ok(Item::NewEvent)
                }
                kind::HEADER_TRACING_DATA if self.tracing.is_none() || self.inband_tracing => {
                    let data = body.get(8..).unwrap_or_default();
                    let data_at = body_at.saturating_add(8);
                    self.set_tracing_data(TracingData::parse(data, data_at)?.0);
                    self.inband_tracing = true;
                    Ok(Item::TracingData)
                }
                kind::HEADER_FEATURE if self.features.clock_data.is_none() => {
                    let mut c = Cursor::new(body, body_at, self.endian);
                    let bit = u32::try_from(c.u64("feature id")?).unwrap_or(u32::MAX);
                    if bit == feature::TRACING_DATA {
                        return Ok(Item::Other(rec.header));
                    }
                    self.feature(bit, c.rest(), c.at())?;
                    Ok(Item::Feature(bit))
                }
                _ => Ok(Item::Other(rec.header)),
            },
            kind::HEADER_FEATURE => {
                let mut c = Cursor::new(body, body_at, self.endian);
                let bit = c.u64("feature id")?;
                let bit = u32::try_from(bit).unwrap_or(u32::MAX);
                self.feature(bit, c.rest(), c.at())?;
                Ok(Item::Feature(bit))
            }
            kind::COMPRESSED | kind::COMPRESSED2 => Err(PerfDataError::Unsupported {
                at,
                what: "zstd-compressed records (perf record -z); record without -z".into(),
            }),
            _ => Ok(Item::Other(rec.header)),
        }
    }

    /// Parse the sample record `bytes` (at offset `at`) of `event`.
    pub fn sample<'a>(
        &self,
        event: usize,
        bytes: &'a [u8],
        at: u64,
    ) -> Result<Item<'a>, PerfDataError> {
        let Some(Ok(layout)) = self.events.get(event).map(|e| &e.layout) else {
            return Ok(Item::Unparsable { event });
        };
        match layout.parse(bytes) {
            Ok(Record::Sample(sample)) => Ok(Item::Sample { event, sample }),
            Ok(_) => Ok(Item::Unparsable { event }),
            Err(source) => Err(PerfDataError::Sample { at, source }),
        }
    }
}

/// The tracepoint id of a parsed format (formats that did not parse sort last, never match).
fn format_id(f: &ParsedFormat) -> u64 {
    match &f.format {
        Ok(format) => u64::from(format.id),
        Err(_) => u64::MAX,
    }
}

const HEADER_SIZE_USIZE: usize = crate::perf_sample::HEADER_SIZE;
