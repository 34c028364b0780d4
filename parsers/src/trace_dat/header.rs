//! Reading a trace.dat's headers: the v6 layout and the v7 sections and options, the
//! header page/event texts, the event formats and the saved command lines
//! ([`TraceDat::parse`]).

use std::collections::{BTreeMap, HashMap};

use super::cursor::{Cursor, option_text};
use super::text::{parse_c_int, parse_cmdlines, parse_saved_tgids};
use super::*;
use crate::bytes::Endian;
use crate::field_type::WordSize;
use crate::format_file::parse_format_for;
use crate::ftrace_page::PageLayout;

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
                // The byte just read (pos >= 1).
                return Err(c.error_at(
                    c.pos().saturating_sub(1),
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
                c.pos().saturating_sub(1),
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
            by_id: BTreeMap::new(),
            format_errors: Vec::new(),
            cmdlines: Vec::new(),
            cmdline_error: None,
            trace_clock: None,
            buffers: Vec::new(),
            uname: None,
            tracer_version: None,
            kallsyms: std::borrow::Cow::Borrowed(&[]),
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
        self.kallsyms = std::borrow::Cow::Borrowed(read_kallsyms(&mut c)?);
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
        let mut seen = 0usize;
        while next != 0 {
            // Bounded by the check below.
            seen = seen.saturating_add(1);
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
        if let Some(body) = section(self, id::KALLSYMS, "kallsyms section")? {
            let mut kc = body.cursor(self.endian);
            let text = read_kallsyms(&mut kc)?;
            self.kallsyms = match &body.bytes {
                // Uncompressed: the text lies in the file (no copy).
                std::borrow::Cow::Borrowed(_) => {
                    let at = kc.pos().saturating_sub(text.len());
                    std::borrow::Cow::Borrowed(self.data.get(at..kc.pos()).unwrap_or_default())
                }
                std::borrow::Cow::Owned(_) => std::borrow::Cow::Owned(text.to_vec()),
            };
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
        c.seek((at as usize).saturating_add(16));
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
                    // 4 + 20 × a u32 fits a u64.
                    #[allow(clippy::arithmetic_side_effects)]
                    let without = 4 + 20 * u64::from(first);
                    let cpus = if (rest as u64) == without {
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
            id::HEADER_INFO
            | id::FTRACE_EVENTS
            | id::EVENT_FORMATS
            | id::KALLSYMS
            | id::CMDLINES
                if v7 =>
            {
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
}

/// The kallsyms block at `c`: `size:u32 text` (v6 in place, v7 a section's body).
fn read_kallsyms<'b>(c: &mut Cursor<'b>) -> Result<&'b [u8], TraceDatError> {
    let len = c.u32("kallsyms size")?;
    c.take(u64::from(len), "kallsyms")
}
