//! trace-cmd's `trace.dat` files, versions 6 and 7 → event formats, saved command lines and
//! the per-CPU ring-buffer pages merged into one time-ordered stream of records and
//! lost-event markers.
//!
//! The file format is trace-cmd's `trace-cmd.dat.v6(5)` and `trace-cmd.dat.v7(5)`
//! (`Documentation/trace-cmd/`), as libtracecmd's `trace-input.c` reads it:
//!
//! ```text
//! "\x17\x08\x44tracing" "6\0"|"7\0" endian:u8 long_size:u8 page_size:u32
//! v6: header_page, header_event, ftrace formats, event formats, kallsyms, printk formats,
//!     cmdlines, cpus:u32, ["options  \0" options… 0:u16], "flyrecord\0" (offset,size)×cpus,
//!     [trace_clock text when the TRACECLOCK option is present]
//! v7: "compression\0version\0" first_options_offset:u64, then sections anywhere in the
//!     file, each `id:u16 flags:u16 string_id:u32 size:u64 body` (flags & 1: compressed:
//!     `csize:u32 usize:u32 data`); options sections (id 0) chain through their DONE option
//!     and point at the others (header info, formats, cmdlines, one BUFFER per instance)
//! ```
//!
//! The reader is pure: it takes the whole file as a byte slice ([`TraceDat::parse`]) and
//! borrows it; the page data of uncompressed files is never copied. What it keeps: the
//! page layout ([`crate::ftrace_page`]), every event format (parsed with
//! [`crate::format_file::parse_format_for`] for the file's word size), the saved command
//! lines, the trace clock, the buffers and the options it understands. The kallsyms text
//! is kept as it lies ([`TraceDat::kallsyms`]: borrowed, copied only out of a compressed
//! v7 section); the printk formats are skipped.
//!
//! Records: [`TraceDat::records`] merges the top instance's per-CPU page streams by time
//! (k-way; ties go to the lower CPU, as trace-cmd does) and yields [`Item`]s. Memory: one
//! cursor per CPU over the borrowed file, plus, for compressed files, one decompressed
//! chunk per CPU (a chunk is what trace-cmd compressed at once: a few pages; at most
//! [`MAX_CHUNK`] bytes). Nothing is allocated per record.
//!
//! Errors ([`TraceDatError`]) say where (the file offset, and for data inside a
//! compressed section or chunk the offset in its decompressed bytes) and why. Bad event
//! formats do not stop parsing: they are listed in [`TraceDat::format_errors`] and their
//! records come with no format. A bad page or chunk is one error from
//! [`Records::next_item`]; calling it again goes on with the next page or chunk.

mod compress;
mod cursor;
mod error;
mod header;
mod records;
mod text;
// Lays out what its caller holds (the lengths of its buffers and files, far below
// u64::MAX), not what a file claims.
#[allow(clippy::arithmetic_side_effects)]
pub mod writer;

use std::collections::BTreeMap;

pub use compress::Compression;
pub use error::{ErrorKind, TraceDatError};
pub use records::{CpuPages, Item, Record, Records};
pub use text::{BadLines, MAX_SHOWN, parse_cmdlines, parse_saved_tgids};

use crate::bytes::{self, Endian};
use crate::format_file::FormatError;
use crate::ftrace_page::{PageHeader, PageLayout};
use crate::schema::EventFormat;
use cursor::Cursor;

/// The magic bytes a trace.dat file starts with.
pub const MAGIC: &[u8; 10] = b"\x17\x08\x44tracing";

/// At most this many bytes of decompressed metadata section (event formats, command
/// lines) are accepted.
pub const MAX_SECTION: usize = 256 << 20;

/// At most this many bytes of decompressed trace data chunk are accepted.
pub const MAX_CHUNK: usize = 64 << 20;

/// At most this many options sections are followed (they chain; a loop is an error).
const MAX_OPTION_SECTIONS: usize = 4096;

/// v7 option and section ids (trace-cmd's `enum tracecmd_file_options`).
mod id {
    pub const DONE: u16 = 0;
    pub const DATE: u16 = 1;
    pub const CPUSTAT: u16 = 2;
    pub const BUFFER: u16 = 3;
    pub const TRACECLOCK: u16 = 4;
    pub const UNAME: u16 = 5;
    pub const OFFSET: u16 = 7;
    pub const CPUCOUNT: u16 = 8;
    pub const VERSION: u16 = 9;
    pub const TSC2NSEC: u16 = 14;
    pub const HEADER_INFO: u16 = 16;
    pub const FTRACE_EVENTS: u16 = 17;
    pub const EVENT_FORMATS: u16 = 18;
    pub const KALLSYMS: u16 = 19;
    pub const CMDLINES: u16 = 21;
    pub const BUFFER_TEXT: u16 = 22;
    /// uevrec's own: [`super::UEVREC_SAVED_TGIDS`].
    pub const UEVREC_SAVED_TGIDS: u16 = 0x7f75;
}

/// The option id under which `record --raw-format trace-dat` stores the kernel's
/// `saved_tgids` (`TID TGID` lines): not one of trace-cmd's (which skips options it does
/// not know; theirs count up from 0 and stand below 32).
pub const UEVREC_SAVED_TGIDS: u16 = id::UEVREC_SAVED_TGIDS;

/// One event format of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventEntry {
    /// The system (`sched`, `ftrace`, `user_events`, …).
    pub system: String,
    /// The parsed format.
    pub format: EventFormat,
}

/// An event format that did not parse (its records come with no format).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatFailure {
    /// The system it belongs to.
    pub system: String,
    /// The format text.
    pub text: String,
    /// Why it did not parse.
    pub error: FormatError,
}

/// One CPU's trace data in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuData {
    /// The CPU number.
    pub cpu: u32,
    /// File offset of its data.
    pub offset: u64,
    /// Bytes of data in the file (compressed size when compressed).
    pub size: u64,
}

/// One trace instance's data (the top instance is named "").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferInfo {
    /// The instance name ("" for the top instance).
    pub name: String,
    /// Its trace clock, when the file says.
    pub clock: Option<String>,
    /// Its page size (v7 files of trace-cmd ≥ 3.1 say; else the file's page size).
    pub page_size: u32,
    /// The CPUs with data.
    pub cpus: Vec<CpuData>,
    /// Whether its data is compressed in chunks.
    pub compressed: bool,
    /// A latency (text) buffer, which this reader does not read.
    pub latency: bool,
    /// v7: the file offset of its flyrecord (or latency) section; 0 in v6.
    pub section_offset: u64,
}

/// trace-cmd's TSC2NSEC option: how `x86-tsc` cycles convert to nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tsc2Nsec {
    /// Multiplier.
    pub mult: u32,
    /// Shift.
    pub shift: u32,
    /// Offset.
    pub offset: u64,
}

/// A parsed trace.dat file, borrowing its bytes.
#[derive(Debug, Clone)]
pub struct TraceDat<'a> {
    data: &'a [u8],
    version: u32,
    endian: Endian,
    long_size: u8,
    page_size: u32,
    compression: Compression,
    compression_version: String,
    layout: PageLayout,
    header_page: String,
    header_event: String,
    events: Vec<EventEntry>,
    /// Tracepoint id → index in `events`, looked up for every record: a B-tree (a few
    /// comparisons for the handful of events a file holds) rather than a SipHash map.
    by_id: BTreeMap<u32, usize>,
    format_errors: Vec<FormatFailure>,
    cmdlines: Vec<(u32, String)>,
    cmdline_error: Option<TraceDatError>,
    trace_clock: Option<String>,
    buffers: Vec<BufferInfo>,
    uname: Option<String>,
    tracer_version: Option<String>,
    /// The kallsyms section's text (empty when the file holds none).
    kallsyms: std::borrow::Cow<'a, [u8]>,
    cpu_count: Option<u32>,
    time_offset_ns: i64,
    /// The file has a DATE or OFFSET option.
    anchored: bool,
    /// The CPUSTAT options: (cpu, the ring's `stats` text).
    cpu_stats: Vec<(u32, String)>,
    /// (thread id, process id), by thread id ([`UEVREC_SAVED_TGIDS`]).
    tgids: Vec<(u32, u32)>,
    tsc2nsec: Option<Tsc2Nsec>,
    /// Offset and size of `common_type` in a record.
    common_type: (usize, usize),
}

impl<'a> TraceDat<'a> {
    /// The file version (6 or 7).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The byte order of the traced machine (of every number in the file).
    pub fn endian(&self) -> Endian {
        self.endian
    }

    /// The traced machine's user-space `long` size from the file header (4 or 8); the
    /// kernel's is [`PageLayout::long_size`] of [`TraceDat::layout`].
    pub fn long_size(&self) -> u8 {
        self.long_size
    }

    /// The page size from the file header.
    pub fn page_size(&self) -> u32 {
        self.page_size
    }

    /// The compression of a v7 file ([`Compression::None`] for v6) and its version text.
    pub fn compression(&self) -> (Compression, &str) {
        (self.compression, &self.compression_version)
    }

    /// The ring-buffer page layout from the file's header_page / header_event.
    pub fn layout(&self) -> &PageLayout {
        &self.layout
    }

    /// The header_page and header_event texts.
    pub fn header_texts(&self) -> (&str, &str) {
        (&self.header_page, &self.header_event)
    }

    /// Every event format that parsed (ftrace's first, then the event systems'), in file
    /// order.
    pub fn events(&self) -> &[EventEntry] {
        &self.events
    }

    /// The index in [`TraceDat::events`] of the format with tracepoint id `id`.
    pub fn event_index(&self, id: u32) -> Option<usize> {
        self.by_id.get(&id).copied()
    }

    /// The index in [`TraceDat::events`] of the format of the trace entry `raw` (by its
    /// `common_type`).
    pub fn event_of(&self, raw: &[u8]) -> Option<usize> {
        self.event_index(self.common_type_of(raw)?)
    }

    /// The `common_type` of the trace entry `raw` (where the file's formats put it), if
    /// the entry holds it.
    pub fn common_type_of(&self, raw: &[u8]) -> Option<u32> {
        let (offset, size) = self.common_type;
        let bytes = raw.get(offset..offset.checked_add(size)?)?;
        let v = bytes::Cursor::new(bytes, 0, self.endian)
            .uint(size, "common_type")
            .ok()?;
        u32::try_from(v).ok()
    }

    /// Event formats that did not parse.
    pub fn format_errors(&self) -> &[FormatFailure] {
        &self.format_errors
    }

    /// The command name saved for `pid` (trace-cmd saves the kernel's `saved_cmdlines`).
    pub fn comm(&self, pid: u32) -> Option<&str> {
        let i = self.cmdlines.binary_search_by_key(&pid, |&(p, _)| p).ok()?;
        Some(&self.cmdlines[i].1)
    }

    /// Every saved (pid, command name), by pid: a snapshot the kernel kept (one name per
    /// thread id, no time; see [`crate::to_lines::trace_dat::decode_lines`]).
    pub fn cmdlines(&self) -> &[(u32, String)] {
        &self.cmdlines
    }

    /// Why some saved cmdline lines were not read ([`ErrorKind::Cmdlines`]), if any were not.
    pub fn cmdline_error(&self) -> Option<&TraceDatError> {
        self.cmdline_error.as_ref()
    }

    /// The top instance's trace clock (`local`, `global`, `mono`, `x86-tsc`, …), when the
    /// file says (trace-cmd assumes `local` otherwise).
    pub fn trace_clock(&self) -> Option<&str> {
        self.trace_clock.as_deref()
    }

    /// The trace instances with data (the top one is named ""; v6 instances are listed
    /// with no CPUs: this reader does not follow them).
    pub fn buffers(&self) -> &[BufferInfo] {
        &self.buffers
    }

    /// The uname of the traced machine (UNAME option).
    pub fn uname(&self) -> Option<&str> {
        self.uname.as_deref()
    }

    /// The traced machine's name: the second word of its uname (trace-cmd writes
    /// `sysname nodename release …`).
    pub fn host_name(&self) -> Option<&str> {
        self.uname()?.split_whitespace().nth(1)
    }

    /// The traced machine's `/proc/kallsyms` text from the kallsyms section (`ADDRESS TYPE
    /// NAME [MODULE]` lines), which names the kernel frames of stack records; empty when
    /// the file holds none (trace-cmd writes it always; uevrec only with stacks, `-g`).
    pub fn kallsyms(&self) -> &[u8] {
        &self.kallsyms
    }

    /// The version of trace-cmd that wrote the file (VERSION option).
    pub fn tracer_version(&self) -> Option<&str> {
        self.tracer_version.as_deref()
    }

    /// The number of CPUs of the traced machine (CPUCOUNT option).
    pub fn cpu_count(&self) -> Option<u32> {
        self.cpu_count
    }

    /// What trace-cmd report adds to every timestamp (DATE option, µs → ns, plus OFFSET
    /// option); the records' times do not include it.
    pub fn time_offset_ns(&self) -> i64 {
        self.time_offset_ns
    }

    /// The offset that turns the records' times into Unix nanoseconds, when the file has
    /// one: a DATE or OFFSET option ([`TraceDat::time_offset_ns`]) on a trace clock that
    /// counts nanoseconds (`local`, `global`, `mono`, `mono_raw`, `boot`, `perf`, `tai`;
    /// not `x86-tsc` or `counter`). `record --raw-format trace-dat` writes `REALTIME -
    /// MONOTONIC` as OFFSET for its `mono` clock, so decoded times are the live ones.
    pub fn wall_clock_offset_ns(&self) -> Option<i64> {
        let clock = self.trace_clock().unwrap_or("local");
        let ns = matches!(
            clock,
            "local" | "global" | "mono" | "mono_raw" | "boot" | "perf" | "tai"
        );
        (self.anchored && ns).then_some(self.time_offset_ns)
    }

    /// The process id of thread `tid`, when the file says ([`UEVREC_SAVED_TGIDS`]).
    pub fn tgid(&self, tid: u32) -> Option<u32> {
        let i = self.tgids.binary_search_by_key(&tid, |&(t, _)| t).ok()?;
        Some(self.tgids[i].1)
    }

    /// The records CPU `cpu`'s ring lost in all, from the file's CPUSTAT option for it
    /// (its `stats` when the recording ended: `overrun + commit overrun + dropped
    /// events`), when the file has one.
    pub fn cpu_lost_total(&self, cpu: u32) -> Option<u64> {
        let (_, text) = self.cpu_stats.iter().find(|(c, _)| *c == cpu)?;
        crate::ftrace_page::losses::stats_total(text)
    }

    /// The TSC2NSEC option (not applied to the records' times).
    pub fn tsc2nsec(&self) -> Option<Tsc2Nsec> {
        self.tsc2nsec
    }

    /// The records and lost-event markers of the top instance, merged in time order.
    pub fn records(&self) -> Result<Records<'_>, TraceDatError> {
        let buffer = self.top_buffer().ok_or_else(|| {
            Cursor::new(self.data, 0, self.endian, None)
                .error(ErrorKind::Unsupported("no top-instance trace data".into()))
        })?;
        Records::new(self, buffer)
    }

    /// The top instance's buffer (its ring data), if the file has one.
    pub fn top_buffer(&self) -> Option<&BufferInfo> {
        self.buffers
            .iter()
            .find(|b| b.name.is_empty() && !b.latency)
    }

    /// The size of `buffer`'s pages as read (at least one byte past the page header).
    pub(crate) fn page_size_of(&self, buffer: &BufferInfo) -> usize {
        // data_offset is bounded (ftrace_page's layout check): no overflow.
        (buffer.page_size as usize).max(self.layout.data_offset().saturating_add(1))
    }

    /// The top buffer's data, CPU by CPU, as pages in the file: where a decoding in
    /// windows of time may start each CPU ([`TraceDat::window_records`], the pages'
    /// headers read with [`TraceDat::page_header_at`]). `Err`, in words, when the data
    /// cannot be cut so: compressed, or cut short.
    pub fn cpu_pages(&self) -> Result<Vec<CpuPages>, String> {
        let buffer = self.top_buffer().ok_or("no top-instance trace data")?;
        if buffer.compressed {
            return Err("its data is compressed".into());
        }
        let page_size = self.page_size_of(buffer);
        let mut entries = buffer.cpus.clone();
        entries.sort_by_key(|c| c.cpu);
        let mut all = Vec::with_capacity(entries.len());
        for entry in entries.iter().filter(|c| c.size > 0) {
            let end = entry.offset.saturating_add(entry.size);
            if end > self.data.len() as u64 {
                return Err(format!("CPU {}'s data is cut short", entry.cpu));
            }
            // Both within the file (checked above).
            let len = entry.size as usize;
            all.push(CpuPages {
                cpu: entry.cpu,
                first: entry.offset as usize,
                count: len.div_ceil(page_size),
                len,
                page_size,
            });
        }
        Ok(all)
    }

    /// The header of page `i` of `cpu`'s data (`None`: no such page, or its header does
    /// not parse).
    pub fn page_header_at(&self, cpu: &CpuPages, i: usize) -> Option<PageHeader> {
        let at = cpu.offset(i);
        let len = cpu
            .page_size
            .min(cpu.len.checked_sub(i.checked_mul(cpu.page_size)?)?);
        let page = self.data.get(at..at.checked_add(len)?)?;
        self.layout.page_header(page).ok()
    }

    /// The top buffer's items with times in `from..until` (no end: to the end), in the
    /// order [`TraceDat::records`] gives them when every CPU's items come in time order:
    /// each CPU's read from its page at file offset `starts` names (one at or before its
    /// first item of the window, from [`TraceDat::cpu_pages`]), its items before `from`
    /// passed over, its stream ended at its first item at or past `until`. Whether the
    /// items did come in time order, and where each CPU's stream ended, the reading says
    /// at its end ([`Records::in_order`], [`Records::stops`]).
    pub fn window_records(
        &self,
        from: u64,
        until: Option<u64>,
        starts: &[(u32, usize)],
    ) -> Result<Records<'_>, TraceDatError> {
        let mut records = self.records()?;
        records.set_window(from, until, starts);
        Ok(records)
    }

    /// The records of the `index`th buffer of [`TraceDat::buffers`].
    pub fn buffer_records(&self, index: usize) -> Result<Records<'_>, TraceDatError> {
        let c = Cursor::new(self.data, 0, self.endian, None);
        let buffer = self
            .buffers
            .get(index)
            .ok_or_else(|| c.error(ErrorKind::Unsupported(format!("no buffer {index}"))))?;
        if buffer.latency {
            return Err(c.error(ErrorKind::Unsupported("a latency (text) buffer".into())));
        }
        if self.version == 6 && !buffer.name.is_empty() {
            return Err(c.error(ErrorKind::Unsupported(format!(
                "v6 buffer instance `{}`",
                buffer.name
            ))));
        }
        Records::new(self, buffer)
    }

    pub(crate) fn data(&self) -> &'a [u8] {
        self.data
    }
}

// Tests compute with the values they pick.
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests;
