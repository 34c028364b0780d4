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
//! lines, the trace clock, the buffers and the options it understands. kallsyms and the
//! printk formats are skipped (in v7 not even decompressed).
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
mod records;
pub mod write;

use std::collections::HashMap;

pub use compress::Compression;
pub use records::{Item, Record, Records};

use crate::bytes::{self, Endian};
use crate::field_type::WordSize;
use crate::format_file::{FormatError, parse_format_for};
use crate::ftrace_page::{LayoutError, PageError, PageLayout};
use crate::schema::EventFormat;
use cursor::{Cursor, option_text};

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
    pub const CMDLINES: u16 = 21;
    pub const BUFFER_TEXT: u16 = 22;
    /// uevrec's own: [`super::UEVREC_SAVED_TGIDS`].
    pub const UEVREC_SAVED_TGIDS: u16 = 0x7f75;
}

/// The option id under which `record --raw-format trace-dat` stores the kernel's
/// `saved_tgids` (`TID TGID` lines): not one of trace-cmd's (which skips options it does
/// not know; theirs count up from 0 and stand below 32).
pub const UEVREC_SAVED_TGIDS: u16 = id::UEVREC_SAVED_TGIDS;

/// A trace.dat file that cannot be read, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("trace.dat {}: {kind}", place(*.offset, *.inner))]
pub struct TraceDatError {
    /// File offset of the problem, or of the compressed section or chunk it is in.
    pub offset: u64,
    /// For data inside a compressed section or chunk: the offset in its decompressed bytes.
    pub inner: Option<u64>,
    /// What is wrong.
    pub kind: ErrorKind,
}

fn place(offset: u64, inner: Option<u64>) -> String {
    match inner {
        None => format!("byte {offset}"),
        Some(inner) => format!("byte {inner} of the data decompressed from byte {offset}"),
    }
}

/// The kinds of [`TraceDatError`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    /// The file does not start with [`MAGIC`].
    #[error("not a trace.dat file (no \\x17\\x08\\x44tracing magic)")]
    NotTraceDat,
    /// A version other than 6 or 7.
    #[error("file version `{0}` is not supported (6 and 7 are)")]
    UnsupportedVersion(String),
    /// The data ends before something it declares.
    #[error("{what}: needs {needed} bytes, {available} left")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Bytes needed.
        needed: u64,
        /// Bytes left.
        available: u64,
    },
    /// A fixed tag or value is not what the format requires.
    #[error("{what}: found `{found}`")]
    Unexpected {
        /// What was expected.
        what: &'static str,
        /// What is there.
        found: String,
    },
    /// The header_page / header_event texts describe no page layout this reader knows.
    #[error("{0}")]
    Layout(#[from] LayoutError),
    /// The file's compression algorithm is not supported.
    #[error("compression `{0}` is not supported (zstd, zlib and none are)")]
    UnsupportedCompression(String),
    /// A compressed section or chunk does not decompress.
    #[error("decompression failed: {0}")]
    Decompress(String),
    /// A declared size is over this reader's limit.
    #[error("{what} of {size} bytes is over the limit of {limit}")]
    TooLarge {
        /// What.
        what: &'static str,
        /// Its declared size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A ring-buffer page of this CPU is malformed.
    #[error("cpu {cpu}: {error}")]
    Page {
        /// The CPU whose data it is.
        cpu: u32,
        /// The page error (offset within the page).
        error: PageError,
    },
    /// The file ends inside the trace data of a CPU: a truncated copy, or a recording
    /// that was never finished. What lies before the cut was read ([`Records`]: whole
    /// pages, and the events wholly present of the page the cut goes through); this is the
    /// last item of that CPU's stream.
    #[error(
        "cpu {cpu}: the file ends {present} bytes into the {declared} bytes of trace data it \
         declares for this CPU (cut short: a truncated copy or an unfinished recording); {read}"
    )]
    CutShort {
        /// The CPU.
        cpu: u32,
        /// Bytes of its data the file declares.
        declared: u64,
        /// Bytes of it present.
        present: u64,
        /// What of it was read.
        read: String,
    },
    /// Something the file holds that this reader does not read.
    #[error("not supported: {0}")]
    Unsupported(String),
    /// Lines of the saved command lines that are not `PID COMM` (the others are kept).
    #[error(
        "{count} saved cmdline line(s) are not `PID COMM` (first: `{first}`): the records of \
         those pids get no `comm`"
    )]
    Cmdlines {
        /// How many lines.
        count: usize,
        /// The first of them (at most [`MAX_SHOWN`] characters).
        first: String,
    },
}

/// How many lines were not read, and the first of them.
pub type BadLines = (usize, String);

/// At most this many characters of a bad line are shown in an error.
pub const MAX_SHOWN: usize = 80;

/// The `TID TGID` pairs of a saved tgids text (the kernel's `saved_tgids` file, read live
/// by the ftrace backend and kept in the files of `record --raw-format trace-dat`): lines
/// that are not two numbers are skipped, and so are those with a tgid of 0 (they say
/// nothing).
pub fn parse_saved_tgids(text: &str) -> impl Iterator<Item = (u32, u32)> + '_ {
    text.lines().filter_map(|l| {
        let mut it = l.split_whitespace();
        let tid = it.next()?.parse().ok()?;
        let tgid: u32 = it.next()?.parse().ok()?;
        (tgid != 0).then_some((tid, tgid))
    })
}

/// The `PID COMM` lines of a saved cmdlines text (the kernel's `saved_cmdlines` file,
/// `"%d %s\n"` per entry) as (pid, comm) sorted by pid, one per pid (a later line wins, as
/// libtraceevent's registration does), and the count and first of the lines that are not
/// of that form (empty lines are not counted).
pub fn parse_cmdlines(text: &str) -> (Vec<(u32, String)>, Option<BadLines>) {
    let mut bad: Option<BadLines> = None;
    let mut cmdlines: Vec<(u32, String)> = text
        .lines()
        .filter(|line| !line.is_empty())
        .filter_map(|line| {
            let parsed = line
                .trim_start()
                .split_once(' ')
                .and_then(|(pid, comm)| Some((pid.parse().ok()?, comm.to_string())));
            if parsed.is_none() {
                match &mut bad {
                    Some((n, _)) => *n += 1,
                    None => bad = Some((1, line.chars().take(MAX_SHOWN).collect())),
                }
            }
            parsed
        })
        .collect();
    // Later lines win: reversed, a stable sort keeps the last line of a pid first.
    cmdlines.reverse();
    cmdlines.sort_by_key(|&(pid, _)| pid);
    cmdlines.dedup_by_key(|&mut (pid, _)| pid);
    (cmdlines, bad)
}

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

/// The body of a v7 section: the file itself (uncompressed; positions are file offsets)
/// or its decompressed data.
struct SectionBody<'a> {
    bytes: std::borrow::Cow<'a, [u8]>,
    start: usize,
    base: Option<u64>,
}

impl SectionBody<'_> {
    fn cursor(&self, endian: Endian) -> Cursor<'_> {
        Cursor::new(&self.bytes, self.start, endian, self.base)
    }
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
    by_id: HashMap<u32, usize>,
    format_errors: Vec<FormatFailure>,
    cmdlines: Vec<(u32, String)>,
    cmdline_error: Option<TraceDatError>,
    trace_clock: Option<String>,
    buffers: Vec<BufferInfo>,
    uname: Option<String>,
    tracer_version: Option<String>,
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

/// What the options say (v6 and v7).
#[derive(Debug, Default)]
struct Options {
    sections: HashMap<u16, u64>,
    buffers: Vec<BufferInfo>,
    /// Per BUFFER option of v6 (offset, name): instances this reader does not follow.
    v6_instances: Vec<String>,
    trace_clock_option: bool,
    uname: Option<String>,
    version: Option<String>,
    cpu_count: Option<u32>,
    time_offset_ns: i64,
    anchored: bool,
    cpu_stats: Vec<(u32, String)>,
    tgids: Vec<(u32, u32)>,
    tsc2nsec: Option<Tsc2Nsec>,
}

impl<'a> TraceDat<'a> {
    /// Parse the headers, formats and options of the trace.dat file `data` (the whole
    /// file). The trace data itself is read lazily by [`TraceDat::records`].
    pub fn parse(data: &'a [u8]) -> Result<Self, TraceDatError> {
        let mut c = Cursor::new(data, 0, Endian::Little, None);
        if data.get(..MAGIC.len()) != Some(&MAGIC[..]) {
            return Err(c.error(ErrorKind::NotTraceDat));
        }
        c.seek(MAGIC.len());
        let version_text = c.cstr("file version")?;
        let version = match version_text.as_str() {
            "6" => 6,
            "7" => 7,
            _ => return Err(c.error_at(10, ErrorKind::UnsupportedVersion(version_text))),
        };
        let endian = match c.u8("endianness")? {
            0 => Endian::Little,
            1 => Endian::Big,
            other => {
                return Err(c.error_at(
                    c.pos() - 1,
                    ErrorKind::Unexpected {
                        what: "endianness 0 or 1",
                        found: other.to_string(),
                    },
                ));
            }
        };
        c.set_endian(endian);
        let long_size = c.u8("long size")?;
        if long_size != 4 && long_size != 8 {
            return Err(c.error_at(
                c.pos() - 1,
                ErrorKind::Unexpected {
                    what: "long size 4 or 8",
                    found: long_size.to_string(),
                },
            ));
        }
        let page_size = c.u32("page size")?;
        let mut file = TraceDat {
            data,
            version,
            endian,
            long_size,
            page_size,
            compression: Compression::None,
            compression_version: String::new(),
            layout: PageLayout::standard(long_size, endian),
            header_page: String::new(),
            header_event: String::new(),
            events: Vec::new(),
            by_id: HashMap::new(),
            format_errors: Vec::new(),
            cmdlines: Vec::new(),
            cmdline_error: None,
            trace_clock: None,
            buffers: Vec::new(),
            uname: None,
            tracer_version: None,
            cpu_count: None,
            time_offset_ns: 0,
            anchored: false,
            cpu_stats: Vec::new(),
            tgids: Vec::new(),
            tsc2nsec: None,
            common_type: (0, 2),
        };
        if version == 6 {
            file.parse_v6(c)?;
        } else {
            file.parse_v7(c)?;
        }
        file.index_events();
        Ok(file)
    }

    fn parse_v6(&mut self, mut c: Cursor<'a>) -> Result<(), TraceDatError> {
        self.read_header_info(&mut c)?;
        self.read_ftrace_formats(&mut c)?;
        self.read_event_formats(&mut c)?;
        c.skip_sized(4, "kallsyms")?;
        c.skip_sized(4, "printk formats")?;
        self.read_cmdlines(&mut c)?;
        let cpus = c.u32("cpu count")?;
        let mut options = Options::default();
        let mut kind_at = c.pos();
        let mut kind = c.take(10, "options/flyrecord/latency tag")?;
        if kind == b"options  \0" {
            loop {
                let option = c.u16("option id")?;
                if option == id::DONE {
                    break;
                }
                let size = c.u32("option size")?;
                let oc = c.sub(u64::from(size), "option data")?;
                self.read_option(&mut options, option, oc, false)?;
            }
            kind_at = c.pos();
            kind = c.take(10, "flyrecord/latency tag")?;
        }
        if kind == b"latency  \0" {
            return Err(c.error_at(
                kind_at,
                ErrorKind::Unsupported("a latency trace (text, no ring-buffer pages)".into()),
            ));
        }
        if kind != b"flyrecord\0" {
            return Err(c.error_at(
                kind_at,
                ErrorKind::Unexpected {
                    what: "`options  `, `flyrecord` or `latency  ` tag",
                    found: String::from_utf8_lossy(kind).into_owned(),
                },
            ));
        }
        let mut top = self.v6_buffer(String::new());
        for cpu in 0..cpus {
            let offset = c.u64("cpu data offset")?;
            let size = c.u64("cpu data size")?;
            top.cpus.push(CpuData { cpu, offset, size });
        }
        if options.trace_clock_option {
            // The trace_clock file's text, `[local] global counter …`; the bracketed name is
            // the clock in use.
            let text = c.sized_text(8, "trace_clock")?;
            top.clock = text
                .split_whitespace()
                .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
                .map(str::to_string);
        }
        self.trace_clock = top.clock.clone();
        self.buffers.push(top);
        for name in &options.v6_instances {
            self.buffers.push(self.v6_buffer(name.clone()));
        }
        self.apply_options(options);
        Ok(())
    }

    /// A v6 buffer called `name`, with no CPUs yet.
    fn v6_buffer(&self, name: String) -> BufferInfo {
        BufferInfo {
            name,
            clock: None,
            page_size: self.page_size,
            cpus: Vec::new(),
            compressed: false,
            latency: false,
            section_offset: 0,
        }
    }

    fn parse_v7(&mut self, mut c: Cursor<'a>) -> Result<(), TraceDatError> {
        let name_at = c.pos();
        let name = c.cstr("compression name")?;
        self.compression_version = c.cstr("compression version")?;
        self.compression = Compression::from_name(&name)
            .ok_or_else(|| c.error_at(name_at, ErrorKind::UnsupportedCompression(name)))?;
        let mut next = c.u64("first options offset")?;
        let mut options = Options::default();
        let mut seen = 0;
        while next != 0 {
            seen += 1;
            if seen > MAX_OPTION_SECTIONS {
                return Err(c.error_at(
                    c.pos(),
                    ErrorKind::TooLarge {
                        what: "chain of options sections",
                        size: seen as u64,
                        limit: MAX_OPTION_SECTIONS as u64,
                    },
                ));
            }
            let body = self.section(next, id::DONE, "options section")?;
            let mut oc = body.cursor(self.endian);
            loop {
                let option = oc.u16("option id")?;
                let size = oc.u32("option size")?;
                let mut data = oc.sub(u64::from(size), "option data")?;
                if option == id::DONE {
                    next = data.u64("next options offset")?;
                    break;
                }
                self.read_option(&mut options, option, data, true)?;
            }
        }
        let section = |file: &Self, sid: u16, what: &'static str| match options.sections.get(&sid) {
            Some(&at) => file.section(at, sid, what).map(Some),
            None => Ok(None),
        };
        let body = section(self, id::HEADER_INFO, "header info section")?.ok_or_else(|| {
            c.error_at(0, ErrorKind::Unsupported("no header info section".into()))
        })?;
        self.read_header_info(&mut body.cursor(self.endian))?;
        if let Some(body) = section(self, id::FTRACE_EVENTS, "ftrace events section")? {
            self.read_ftrace_formats(&mut body.cursor(self.endian))?;
        }
        if let Some(body) = section(self, id::EVENT_FORMATS, "event formats section")? {
            self.read_event_formats(&mut body.cursor(self.endian))?;
        }
        if let Some(body) = section(self, id::CMDLINES, "cmdlines section")? {
            self.read_cmdlines(&mut body.cursor(self.endian))?;
        }
        for buffer in &mut options.buffers {
            if buffer.latency {
                continue;
            }
            // The BUFFER option's offset is its flyrecord section: its flags say whether
            // the CPU data is compressed.
            let (_, flags, _) = self.section_header(buffer.section_offset, "buffer section")?;
            buffer.compressed = flags & 1 != 0;
        }
        self.trace_clock = options
            .buffers
            .iter()
            .find(|b| b.name.is_empty() && !b.latency)
            .and_then(|b| b.clock.clone());
        self.buffers = std::mem::take(&mut options.buffers);
        self.apply_options(options);
        Ok(())
    }

    fn apply_options(&mut self, options: Options) {
        self.uname = options.uname;
        self.tracer_version = options.version;
        self.cpu_count = options.cpu_count;
        self.time_offset_ns = options.time_offset_ns;
        self.anchored = options.anchored;
        self.cpu_stats = options.cpu_stats;
        self.tgids = options.tgids;
        self.tsc2nsec = options.tsc2nsec;
    }

    /// The header of the v7 section at `at`: (id, flags, size), and checks that its body
    /// lies in the file.
    fn section_header(
        &self,
        at: u64,
        what: &'static str,
    ) -> Result<(u16, u16, u64), TraceDatError> {
        let mut c = Cursor::new(self.data, 0, self.endian, None);
        let start = usize::try_from(at)
            .ok()
            .filter(|&s| s <= self.data.len())
            .ok_or_else(|| {
                c.error_at(
                    self.data.len(),
                    ErrorKind::Truncated {
                        what,
                        needed: at.saturating_add(16),
                        available: self.data.len() as u64,
                    },
                )
            })?;
        c.seek(start);
        let sid = c.u16(what)?;
        let flags = c.u16(what)?;
        let _description = c.u32(what)?;
        let size = c.u64(what)?;
        Ok((sid, flags, size))
    }

    /// The body of the v7 section at `at`, which must have id `want`, decompressed when
    /// compressed.
    fn section(
        &self,
        at: u64,
        want: u16,
        what: &'static str,
    ) -> Result<SectionBody<'a>, TraceDatError> {
        let (sid, flags, size) = self.section_header(at, what)?;
        let mut c = Cursor::new(self.data, 0, self.endian, None);
        if sid != want {
            return Err(c.error_at(
                at as usize,
                ErrorKind::Unexpected {
                    what,
                    found: format!("section id {sid}"),
                },
            ));
        }
        // section_header read 16 bytes at `at`.
        c.seek(at as usize + 16);
        let body_at = c.pos();
        let mut body = c.sub(size, what)?;
        if flags & 1 == 0 {
            return Ok(SectionBody {
                bytes: std::borrow::Cow::Borrowed(body.bytes()),
                start: body_at,
                base: None,
            });
        }
        let csize = body.u32(what)?;
        let usize_ = body.u32(what)?;
        if usize_ as usize > MAX_SECTION {
            return Err(c.error_at(
                body_at,
                ErrorKind::TooLarge {
                    what,
                    size: u64::from(usize_),
                    limit: MAX_SECTION as u64,
                },
            ));
        }
        let compressed = body.take(u64::from(csize), what)?;
        let mut out = Vec::new();
        self.compression
            .decompress(compressed, usize_ as usize, &mut out)
            .map_err(|m| c.error_at(body_at, ErrorKind::Decompress(m)))?;
        Ok(SectionBody {
            bytes: std::borrow::Cow::Owned(out),
            start: 0,
            base: Some(body_at as u64),
        })
    }

    fn read_option(
        &mut self,
        options: &mut Options,
        option: u16,
        mut c: Cursor<'_>,
        v7: bool,
    ) -> Result<(), TraceDatError> {
        let text = || option_text(c.rest());
        match option {
            id::DATE => {
                // Microseconds, as a C integer literal (`0x…`).
                if let Some(us) = parse_c_int(&text()) {
                    self.time_offset_add(options, us.saturating_mul(1000));
                }
            }
            id::OFFSET => {
                if let Some(ns) = parse_c_int(&text()) {
                    self.time_offset_add(options, ns);
                }
            }
            id::TRACECLOCK => options.trace_clock_option = true,
            id::UNAME => options.uname = Some(text()),
            id::VERSION => options.version = Some(text()),
            id::CPUCOUNT => options.cpu_count = Some(c.u32("CPUCOUNT option")?),
            id::TSC2NSEC => {
                options.tsc2nsec = Some(Tsc2Nsec {
                    mult: c.u32("TSC2NSEC option")?,
                    shift: c.u32("TSC2NSEC option")?,
                    offset: c.u64("TSC2NSEC option")?,
                })
            }
            id::BUFFER | id::BUFFER_TEXT => {
                let offset = c.u64("BUFFER option offset")?;
                let name = c.cstr("BUFFER option name")?;
                if !v7 {
                    options.v6_instances.push(name);
                    return Ok(());
                }
                let clock = c.cstr("BUFFER option clock")?;
                let mut buffer = BufferInfo {
                    name,
                    clock: Some(clock),
                    page_size: self.page_size,
                    cpus: Vec::new(),
                    compressed: false,
                    latency: option == id::BUFFER_TEXT,
                    section_offset: offset,
                };
                if option == id::BUFFER {
                    // trace-cmd ≥ 3.1 writes the page size before the CPU count; older ones
                    // do not. The rest is 4 + 20 × cpus bytes without it.
                    let rest = c.rest().len();
                    let first = c.u32("BUFFER option cpus")?;
                    let cpus = if (rest as u64) == 4 + 20 * u64::from(first) {
                        first
                    } else {
                        buffer.page_size = first;
                        c.u32("BUFFER option cpus")?
                    };
                    for _ in 0..cpus {
                        let cpu = c.u32("BUFFER option cpu")?;
                        let offset = c.u64("BUFFER option cpu offset")?;
                        let size = c.u64("BUFFER option cpu size")?;
                        buffer.cpus.push(CpuData { cpu, offset, size });
                    }
                }
                options.buffers.push(buffer);
            }
            id::HEADER_INFO | id::FTRACE_EVENTS | id::EVENT_FORMATS | id::CMDLINES if v7 => {
                let at = c.u64("section offset option")?;
                options.sections.insert(option, at);
            }
            id::UEVREC_SAVED_TGIDS => {
                let mut tgids: Vec<(u32, u32)> = parse_saved_tgids(&text()).collect();
                tgids.sort_unstable();
                tgids.dedup_by_key(|&mut (tid, _)| tid);
                options.tgids = tgids;
            }
            id::CPUSTAT => {
                // `CPU: N` then the ring's `stats` lines (trace-cmd starts with a newline).
                let text = text();
                let cpu = text
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("CPU:")?.trim().parse::<u32>().ok());
                if let Some(cpu) = cpu {
                    options.cpu_stats.push((cpu, text));
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn time_offset_add(&self, options: &mut Options, ns: i64) {
        options.anchored = true;
        options.time_offset_ns = options.time_offset_ns.saturating_add(ns);
    }

    fn read_header_info(&mut self, c: &mut Cursor<'_>) -> Result<(), TraceDatError> {
        c.expect(b"header_page\0", "`header_page` tag")?;
        let at = c.pos();
        self.header_page = c.sized_text(8, "header_page text")?;
        c.expect(b"header_event\0", "`header_event` tag")?;
        self.header_event = c.sized_text(8, "header_event text")?;
        self.layout =
            PageLayout::from_header_texts(&self.header_page, &self.header_event, self.endian)
                .map_err(|e| c.error_at(at, ErrorKind::Layout(e)))?;
        Ok(())
    }

    fn word_size(&self) -> WordSize {
        if self.layout.long_size() == 4 {
            WordSize::Four
        } else {
            WordSize::Eight
        }
    }

    fn add_format(&mut self, system: &str, text: String) {
        match parse_format_for(&text, self.word_size()) {
            Ok(format) => self.events.push(EventEntry {
                system: system.to_string(),
                format,
            }),
            Err(error) => self.format_errors.push(FormatFailure {
                system: system.to_string(),
                text,
                error,
            }),
        }
    }

    fn read_ftrace_formats(&mut self, c: &mut Cursor<'_>) -> Result<(), TraceDatError> {
        let count = c.u32("ftrace format count")?;
        for _ in 0..count {
            let text = c.sized_text(8, "ftrace format")?;
            self.add_format("ftrace", text);
        }
        Ok(())
    }

    fn read_event_formats(&mut self, c: &mut Cursor<'_>) -> Result<(), TraceDatError> {
        let systems = c.u32("event system count")?;
        for _ in 0..systems {
            let system = c.cstr("event system name")?;
            let count = c.u32("event format count")?;
            for _ in 0..count {
                let text = c.sized_text(8, "event format")?;
                self.add_format(&system, text);
            }
        }
        Ok(())
    }

    fn read_cmdlines(&mut self, c: &mut Cursor<'_>) -> Result<(), TraceDatError> {
        let at = c.pos();
        let text = c.sized_text(8, "cmdlines")?;
        let (cmdlines, bad) = parse_cmdlines(&text);
        self.cmdlines = cmdlines;
        self.cmdline_error =
            bad.map(|(count, first)| c.error_at(at, ErrorKind::Cmdlines { count, first }));
        Ok(())
    }

    fn index_events(&mut self) {
        for (i, e) in self.events.iter().enumerate() {
            self.by_id.entry(e.format.id).or_insert(i);
        }
        if let Some(field) = self
            .events
            .iter()
            .find_map(|e| e.format.common_field("common_type"))
        {
            self.common_type = (field.offset as usize, field.size as usize);
        }
    }

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
        let index = self
            .buffers
            .iter()
            .position(|b| b.name.is_empty() && !b.latency)
            .ok_or_else(|| {
                Cursor::new(self.data, 0, self.endian, None)
                    .error(ErrorKind::Unsupported("no top-instance trace data".into()))
            })?;
        self.buffer_records(index)
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

/// A C integer literal as `strtoll(…, 0)` reads it: decimal, `0x` hex or `0` octal, with
/// an optional sign.
fn parse_c_int(text: &str) -> Option<i64> {
    let t = text.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let v = if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()?
    } else if t.len() > 1 && t.starts_with('0') {
        u64::from_str_radix(&t[1..], 8).ok()?
    } else {
        t.parse::<u64>().ok()?
    };
    let v = i64::try_from(v).ok()?;
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests;
