//! Writing a trace-cmd `trace.dat` v6 header (`record --raw-format trace-dat`): pure, no
//! I/O. The caller has each CPU's ring-buffer pages (spliced from `trace_pipe_raw`) and
//! puts them after the header, each CPU's at the offset [`header`] returns.
//!
//! The layout is the one trace-cmd's `trace-output.c` writes and `trace-cmd.dat.v6(5)`
//! describes (and [`super::TraceDat::parse`] reads):
//!
//! ```text
//! "\x17\x08\x44tracing" "6\0" endian:u8 long_size:u8 page_size:u32
//! "header_page\0" size:u64 text   "header_event\0" size:u64 text
//! ftrace formats: count:u32 (size:u64 text)×count
//! event formats: systems:u32 (name\0 count:u32 (size:u64 text)×count)×systems
//! kallsyms: size:u32 text (/proc/kallsyms with stacks, else empty)
//! printk formats: size:u32 (0)
//! cmdlines: size:u64 text
//! cpus:u32
//! "options  \0" (id:u16 size:u32 data)… 0:u16
//! "flyrecord\0" (offset:u64 size:u64)×cpus
//! trace_clock: size:u64 text (because the TRACECLOCK option is there)
//! … each CPU's pages, page-aligned
//! ```
//!
//! Options written: CPUSTAT (each ring's `stats` at the end: the losses no page
//! counted), TRACECLOCK (its data the clock's text, which also follows the flyrecord
//! offsets), OFFSET
//! (nanoseconds trace-cmd report and [`super::TraceDat::time_offset_ns`] add to every
//! record's time: `REALTIME - MONOTONIC` for a `mono` clock, so times come out as Unix
//! time), CPUCOUNT, UNAME and VERSION when given, and uevrec's own
//! [`super::UEVREC_SAVED_TGIDS`] (thread → process ids).

use crate::bytes::Endian;

use super::MAGIC;

/// trace-cmd option ids written here.
mod opt {
    pub const CPUSTAT: u16 = 2;
    pub const TRACECLOCK: u16 = 4;
    pub const UNAME: u16 = 5;
    pub const OFFSET: u16 = 7;
    pub const CPUCOUNT: u16 = 8;
    pub const VERSION: u16 = 9;
    pub const SAVED_TGIDS: u16 = super::super::id::UEVREC_SAVED_TGIDS;
}

/// What a trace.dat header says, borrowed from the caller.
#[derive(Debug, Clone)]
pub struct DatMeta<'a> {
    /// Byte order of the traced machine.
    pub endian: Endian,
    /// The traced machine's `sizeof(long)`.
    pub long_size: u8,
    /// Ring-buffer page size (each CPU's data is whole pages of it).
    pub page_size: u32,
    /// tracefs `events/header_page`.
    pub header_page: &'a str,
    /// tracefs `events/header_event`.
    pub header_event: &'a str,
    /// The `ftrace` system's format texts.
    pub ftrace_formats: &'a [String],
    /// The other systems' format texts, by system (in file order).
    pub systems: &'a [(String, Vec<String>)],
    /// The kernel's `saved_cmdlines` text (`PID COMM` lines).
    pub cmdlines: &'a str,
    /// The trace clock's name (`mono`, `local`, …).
    pub trace_clock: &'a str,
    /// Nanoseconds to add to every record's time (the OFFSET option), if any.
    pub offset_ns: Option<i64>,
    /// Each CPU's ring `stats` text when the recording ended (CPUSTAT options): (cpu,
    /// text). The losses no page could count come from them.
    pub cpu_stats: &'a [(u32, String)],
    /// The kernel's `saved_tgids` text (`TID TGID` lines), if any: the option
    /// [`super::UEVREC_SAVED_TGIDS`] (trace-cmd skips options it does not know), from
    /// which `uevrec decode` gives each record its process id, as live recording does.
    pub tgids: Option<&'a str>,
    /// The traced machine's `uname -a`-like text (UNAME option), if any.
    pub uname: Option<&'a str>,
    /// The writer's version (VERSION option), if any.
    pub version: Option<&'a str>,
    /// The traced machine's `/proc/kallsyms` text (the kallsyms section), which names
    /// the kernel frames of stack records; empty when none (a text past 4 GiB is left
    /// out: the section's size is a u32).
    pub kallsyms: &'a [u8],
}

/// Bytes in one byte order.
struct Out {
    endian: Endian,
    b: Vec<u8>,
}

impl Out {
    fn u16(&mut self, v: u16) {
        self.b.extend_from_slice(&match self.endian {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        });
    }
    fn u32(&mut self, v: u32) {
        self.b.extend_from_slice(&self.u32_bytes(v));
    }
    /// The bytes of `v` in this byte order.
    fn u32_bytes(&self, v: u32) -> [u8; 4] {
        match self.endian {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }
    fn u64(&mut self, v: u64) {
        self.b.extend_from_slice(&match self.endian {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        });
    }
    /// `size:u64 text`.
    fn sized(&mut self, text: &str) {
        self.u64(text.len() as u64);
        self.b.extend_from_slice(text.as_bytes());
    }
    /// A NUL-terminated text.
    fn cstr(&mut self, text: &str) {
        self.b.extend_from_slice(text.as_bytes());
        self.b.push(0);
    }
    /// `id:u16 size:u32 data`.
    fn option(&mut self, id: u16, data: &[u8]) {
        self.u16(id);
        self.u32(data.len() as u32);
        self.b.extend_from_slice(data);
    }
}

/// A text option's data: the text and its NUL (as trace-cmd writes them).
fn text_option(text: &str) -> Vec<u8> {
    let mut v = text.as_bytes().to_vec();
    v.push(0);
    v
}

/// `at` rounded up to a multiple of `page` (at least 1).
fn align_up(at: u64, page: u32) -> u64 {
    let page = u64::from(page.max(1));
    at.div_ceil(page) * page
}

/// The header of a trace.dat v6 file with `cpu_sizes[i]` bytes of pages for CPU `i`
/// (of `cpu_sizes.len()` CPUs), and the file offset (page-aligned) where each CPU's data
/// goes. The header is shorter than the first offset: the gap is zeros (a hole).
pub fn header(meta: &DatMeta<'_>, cpu_sizes: &[u64]) -> (Vec<u8>, Vec<u64>) {
    let mut o = Out {
        endian: meta.endian,
        b: Vec::with_capacity(64 << 10),
    };
    o.b.extend_from_slice(MAGIC);
    o.cstr("6");
    o.b.push(match meta.endian {
        Endian::Little => 0,
        Endian::Big => 1,
    });
    o.b.push(meta.long_size);
    o.u32(meta.page_size);
    o.cstr("header_page");
    o.sized(meta.header_page);
    o.cstr("header_event");
    o.sized(meta.header_event);
    o.u32(meta.ftrace_formats.len() as u32);
    for f in meta.ftrace_formats {
        o.sized(f);
    }
    o.u32(meta.systems.len() as u32);
    for (system, formats) in meta.systems {
        o.cstr(system);
        o.u32(formats.len() as u32);
        for f in formats {
            o.sized(f);
        }
    }
    match u32::try_from(meta.kallsyms.len()) {
        Ok(len) => {
            o.u32(len);
            o.b.extend_from_slice(meta.kallsyms);
        }
        Err(_) => o.u32(0),
    }
    o.u32(0); // printk formats
    o.sized(meta.cmdlines);
    o.u32(cpu_sizes.len() as u32);
    o.b.extend_from_slice(b"options  \0");
    // The clock's text goes after the flyrecord offsets (where v6 readers look), and into
    // the option too: trace-cmd 3.x parses the option's bytes as that text, so an empty
    // option had it read `malloc(0)`'s leftovers, and a stray `[` there printed every
    // time as a raw count (a flaky `trace-cmd report`, seen in CI).
    let clock = format!("[{}]\n", meta.trace_clock);
    o.option(opt::TRACECLOCK, &text_option(&clock));
    for (cpu, stats) in meta.cpu_stats {
        o.option(opt::CPUSTAT, &text_option(&format!("CPU: {cpu}\n{stats}")));
    }
    if let Some(ns) = meta.offset_ns {
        o.option(opt::OFFSET, &text_option(&ns.to_string()));
    }
    let count = o.u32_bytes(cpu_sizes.len() as u32);
    o.option(opt::CPUCOUNT, &count);
    if let Some(tgids) = meta.tgids {
        o.option(opt::SAVED_TGIDS, &text_option(tgids));
    }
    if let Some(uname) = meta.uname {
        o.option(opt::UNAME, &text_option(uname));
    }
    if let Some(version) = meta.version {
        o.option(opt::VERSION, &text_option(version));
    }
    o.u16(0); // DONE
    o.b.extend_from_slice(b"flyrecord\0");
    // The clock text after the offsets, as the kernel's trace_clock file shows it.
    let end = o.b.len() as u64 + 16 * cpu_sizes.len() as u64 + 8 + clock.len() as u64;
    let mut offsets = Vec::with_capacity(cpu_sizes.len());
    let mut at = align_up(end, meta.page_size);
    for &size in cpu_sizes {
        offsets.push(at);
        o.u64(at);
        o.u64(size);
        at = align_up(at + size, meta.page_size);
    }
    o.sized(&clock);
    debug_assert_eq!(o.b.len() as u64, end);
    (o.b, offsets)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{FORMAT, HEADER_EVENT, HEADER_PAGE, page as page_bytes};
    use super::super::{Item, TraceDat};
    use super::*;

    fn meta<'a>(
        endian: Endian,
        ftrace: &'a [String],
        systems: &'a [(String, Vec<String>)],
    ) -> DatMeta<'a> {
        DatMeta {
            endian,
            long_size: 8,
            page_size: 4096,
            header_page: HEADER_PAGE,
            header_event: HEADER_EVENT,
            ftrace_formats: ftrace,
            systems,
            cmdlines: "12 gen\n34 other\n",
            trace_clock: "mono",
            offset_ns: Some(1_700_000_000_000_000_000),
            cpu_stats: &[],
            tgids: Some("12 10\n34 34\n"),
            uname: Some("Linux host 6.18 #1 x86_64"),
            version: Some("uevrec 0"),
            kallsyms: &[],
        }
    }

    /// The header, then each CPU's pages at its offset.
    fn file(meta: &DatMeta<'_>, cpus: &[Vec<u8>]) -> Vec<u8> {
        let sizes: Vec<u64> = cpus.iter().map(|c| c.len() as u64).collect();
        let (mut bytes, offsets) = header(meta, &sizes);
        for (data, at) in cpus.iter().zip(offsets) {
            assert_eq!(at % 4096, 0, "page-aligned");
            assert!(at as usize >= bytes.len());
            bytes.resize(at as usize, 0);
            bytes.extend_from_slice(data);
        }
        bytes
    }

    /// trace-cmd 3.x reads the TRACECLOCK option's bytes as the clock text: they must be
    /// the text, NUL-terminated (an empty option had it read uninitialised memory).
    #[test]
    fn the_clock_option_holds_the_clock_text() {
        for endian in [Endian::Little, Endian::Big] {
            let m = meta(endian, &[], &[]);
            let (bytes, _) = header(&m, &[0]);
            let at = bytes.windows(10).position(|w| w == b"options  \0").unwrap() + 10;
            let (id, size) = match endian {
                Endian::Little => (
                    u16::from_le_bytes([bytes[at], bytes[at + 1]]),
                    u32::from_le_bytes(bytes[at + 2..at + 6].try_into().unwrap()),
                ),
                Endian::Big => (
                    u16::from_be_bytes([bytes[at], bytes[at + 1]]),
                    u32::from_be_bytes(bytes[at + 2..at + 6].try_into().unwrap()),
                ),
            };
            assert_eq!(id, opt::TRACECLOCK, "the first option");
            let size = size as usize;
            assert_eq!(&bytes[at + 6..at + 6 + size], b"[mono]\n\0");
        }
    }

    #[test]
    fn the_kallsyms_text_round_trips_borrowed() {
        let text = b"ffffffff81000000 T _stext\nffffffff81000100 t made_up_fn\n";
        for endian in [Endian::Little, Endian::Big] {
            let mut m = meta(endian, &[], &[]);
            assert!(
                TraceDat::parse(&file(&m, &[]))
                    .unwrap()
                    .kallsyms()
                    .is_empty()
            );
            m.kallsyms = text;
            let bytes = file(&m, &[]);
            let dat = TraceDat::parse(&bytes).unwrap();
            assert_eq!(dat.kallsyms(), text);
            let inside = bytes.as_ptr_range();
            assert!(inside.contains(&dat.kallsyms().as_ptr()), "not copied");
            assert_eq!(dat.cmdlines().len(), 2, "what follows is read in place");
        }
    }

    #[test]
    fn round_trips_through_the_reader() {
        for endian in [Endian::Little, Endian::Big] {
            let systems = vec![("test".to_string(), vec![FORMAT.to_string()])];
            let m = meta(endian, &[], &systems);
            let bytes = file(&m, &[page_bytes(endian), Vec::new(), page_bytes(endian)]);
            let f = TraceDat::parse(&bytes).unwrap();
            assert_eq!(f.version(), 6);
            assert_eq!(f.endian(), endian);
            assert_eq!(f.long_size(), 8);
            assert_eq!(f.page_size(), 4096);
            assert_eq!(f.header_texts(), (HEADER_PAGE, HEADER_EVENT));
            assert_eq!(f.events().len(), 1);
            assert_eq!(f.events()[0].system, "test");
            assert_eq!(f.events()[0].format.id, 7);
            assert_eq!(f.comm(12), Some("gen"));
            assert_eq!(f.comm(34), Some("other"));
            assert_eq!(
                (f.tgid(12), f.tgid(34), f.tgid(56)),
                (Some(10), Some(34), None)
            );
            assert_eq!(f.trace_clock(), Some("mono"));
            assert_eq!(f.time_offset_ns(), 1_700_000_000_000_000_000);
            assert_eq!(f.wall_clock_offset_ns(), Some(1_700_000_000_000_000_000));
            assert_eq!(f.cpu_count(), Some(3));
            assert_eq!(f.host_name(), Some("host"));
            assert_eq!(f.tracer_version(), Some("uevrec 0"));
            let cpus = &f.buffers()[0].cpus;
            assert_eq!(cpus.len(), 3);
            assert_eq!(cpus[1].size, 0);
            let mut records = f.records().unwrap();
            let mut seen = Vec::new();
            while let Some(item) = records.next_item().unwrap() {
                match item {
                    Item::Record(r) => {
                        seen.push((r.cpu, r.time, r.raw[if endian.is_big() { 11 } else { 8 }]))
                    }
                    Item::Lost { cpu, count, .. } => seen.push((cpu, count.unwrap(), 0xff)),
                }
            }
            // Each CPU's page: a missed count of 9, then v = 1, 2, 3 at 1001, 1003, 1006
            // (ties go to the lower CPU).
            let want: Vec<(u32, u64, u8)> = vec![
                (0, 9, 0xff),
                (2, 9, 0xff),
                (0, 1001, 1),
                (2, 1001, 1),
                (0, 1003, 2),
                (2, 1003, 2),
                (0, 1006, 3),
                (2, 1006, 3),
            ];
            assert_eq!(seen, want);
        }
    }

    /// `uevrec decode`'s lines of `bytes`.
    fn lines_of(bytes: &[u8]) -> Vec<String> {
        let f = TraceDat::parse(bytes).unwrap();
        let (out, _) = super::super::tests::decoded_lines(&f, false);
        out.lines().map(str::to_string).collect()
    }

    #[test]
    fn decoded_times_are_the_stamps_plus_the_offset_and_pids_the_tgids() {
        let systems = vec![("test".to_string(), vec![FORMAT.to_string()])];
        let mut m = meta(Endian::Little, &[], &systems);
        // 1970-01-01T00:00:01Z, minus the page's first stamp (1001).
        m.offset_ns = Some(1_000_000_000 - 1001);
        m.tgids = Some("42 40\n");
        let lines = lines_of(&file(&m, &[page_bytes(Endian::Little)]));
        let records: Vec<&String> = lines.iter().filter(|l| l.contains("\"v\":")).collect();
        assert_eq!(records.len(), 3, "{lines:?}");
        assert!(
            records[0].starts_with("{\"time\":\"1970-01-01T00:00:01.000000000Z\""),
            "{}",
            records[0]
        );
        assert!(records[2].contains("00:00:01.000000005Z"), "{}", records[2]);
        assert!(
            records[0].contains("\"pid\":40,\"tid\":42"),
            "{}",
            records[0]
        );
    }

    #[test]
    fn the_cpu_stats_complete_the_loss_counts() {
        let systems = vec![("test".to_string(), vec![FORMAT.to_string()])];
        // The page stores 9; the ring's stats say 20 were lost in all (11 after the
        // last page read, or on pages without room for their count).
        let stats = vec![(
            0,
            "entries: 0\noverrun: 18\ncommit overrun: 0\ndropped events: 2\n".to_string(),
        )];
        let mut m = meta(Endian::Little, &[], &systems);
        m.cpu_stats = &stats;
        let lines = lines_of(&file(&m, &[page_bytes(Endian::Little)]));
        let lost: Vec<&String> = lines.iter().filter(|l| l.contains("\"lost\"")).collect();
        assert_eq!(lost.len(), 2, "{lines:?}");
        assert!(lost[0].contains("\"lost\":9}"), "{}", lost[0]);
        assert!(lost[1].contains("\"lost\":11}"), "{}", lost[1]);
        // Without stats: the page's count only.
        m.cpu_stats = &[];
        let lines = lines_of(&file(&m, &[page_bytes(Endian::Little)]));
        let lost: Vec<&String> = lines.iter().filter(|l| l.contains("\"lost\"")).collect();
        assert_eq!(lost.len(), 1, "{lines:?}");
    }

    #[test]
    fn no_offset_means_no_wall_clock() {
        let systems = vec![("test".to_string(), vec![FORMAT.to_string()])];
        let mut m = meta(Endian::Little, &[], &systems);
        m.offset_ns = None;
        let bytes = file(&m, &[page_bytes(Endian::Little)]);
        let f = TraceDat::parse(&bytes).unwrap();
        assert_eq!(f.time_offset_ns(), 0);
        assert_eq!(f.wall_clock_offset_ns(), None);
    }

    #[test]
    fn formats_of_several_systems_and_ftrace() {
        let ftrace = vec![FORMAT.replace("name: ev\nID: 7", "name: fx\nID: 1")];
        let systems = vec![
            ("a".to_string(), vec![FORMAT.to_string()]),
            (
                "b".to_string(),
                vec![
                    FORMAT.replace("name: ev\nID: 7", "name: e2\nID: 8"),
                    FORMAT.replace("name: ev\nID: 7", "name: e3\nID: 9"),
                ],
            ),
        ];
        let m = meta(Endian::Little, &ftrace, &systems);
        let bytes = file(&m, &[]);
        let f = TraceDat::parse(&bytes).unwrap();
        let names: Vec<(&str, &str, u32)> = f
            .events()
            .iter()
            .map(|e| (e.system.as_str(), e.format.name.as_str(), e.format.id))
            .collect();
        assert_eq!(
            names,
            [
                ("ftrace", "fx", 1),
                ("a", "ev", 7),
                ("b", "e2", 8),
                ("b", "e3", 9)
            ]
        );
    }

    #[test]
    fn offsets_are_page_aligned_and_in_order() {
        let systems = Vec::new();
        let m = meta(Endian::Little, &[], &systems);
        let (bytes, offsets) = header(&m, &[8192, 0, 4096]);
        assert_eq!(offsets[0], align_up(bytes.len() as u64, 4096));
        assert_eq!(offsets[1], offsets[0] + 8192);
        assert_eq!(offsets[2], offsets[1]);
    }
}
