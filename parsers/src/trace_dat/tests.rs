//! Synthetic files for what the real ones (tests/trace_dat.rs) do not show: big-endian
//! files, zlib, the BUFFER option without a page size (trace-cmd < 3.1), DATE/OFFSET
//! options, a v6 trace_clock, option-section loops, unsupported compression.

use super::text::parse_c_int;
use super::*;
use crate::ftrace_page;

pub(super) const FORMAT: &str = "name: ev\nID: 7\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:u32 v;\toffset:8;\tsize:4;\tsigned:0;\n\nprint fmt: \"v=%u\", REC->v\n";

pub(super) const HEADER_PAGE: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";

pub(super) const HEADER_EVENT: &str = "# compressed entry header\n\ttype_len    :    5 bits\n\
\ttime_delta  :   27 bits\n\tarray       :   32 bits\n\n\tpadding     : type == 29\n\
\ttime_extend : type == 30\n\ttime_stamp : type == 31\n\tdata max type_len  == 28\n";

/// Bytes in one byte order.
struct W {
    endian: Endian,
    b: Vec<u8>,
}

impl W {
    fn new(endian: Endian) -> Self {
        W {
            endian,
            b: Vec::new(),
        }
    }
    fn n(&mut self, v: u64, size: usize) -> &mut Self {
        let le = v.to_le_bytes();
        let bytes = &le[..size];
        if self.endian.is_big() {
            self.b.extend(bytes.iter().rev());
        } else {
            self.b.extend_from_slice(bytes);
        }
        self
    }
    fn s(&mut self, s: &[u8]) -> &mut Self {
        self.b.extend_from_slice(s);
        self
    }
    fn sized(&mut self, size_len: usize, s: &[u8]) -> &mut Self {
        self.n(s.len() as u64, size_len).s(s)
    }
}

/// One page holding records of event 7 with `v` = 1, 2, 3 at times 1001, 1003, 1006, and
/// a missed count of 9.
pub(super) fn page(endian: Endian) -> Vec<u8> {
    let mut data = W::new(endian);
    for (delta, v) in [(1u32, 1u32), (2, 2), (3, 3)] {
        let head = if endian.is_big() {
            (3 << 27) | delta
        } else {
            3 | (delta << 5)
        };
        data.n(u64::from(head), 4);
        data.n(7, 2).n(0, 2).n(42, 4).n(u64::from(v), 4);
    }
    let mut p = W::new(endian);
    let commit = data.b.len() as u64 | ftrace_page::MISSED_EVENTS | ftrace_page::MISSED_STORED;
    p.n(1000, 8).n(commit, 8).s(&data.b).n(9, 8);
    p.b.resize(4096, 0);
    p.b
}

fn header_info(endian: Endian) -> Vec<u8> {
    let mut w = W::new(endian);
    w.s(b"header_page\0").sized(8, HEADER_PAGE.as_bytes());
    w.s(b"header_event\0").sized(8, HEADER_EVENT.as_bytes());
    w.b
}

fn formats(endian: Endian) -> Vec<u8> {
    let mut w = W::new(endian);
    w.n(1, 4).s(b"test\0").n(1, 4).sized(8, FORMAT.as_bytes());
    w.b
}

/// A v6 file with the TRACECLOCK option and a DATE option.
fn v6(endian: Endian) -> Vec<u8> {
    v6_with_cmdlines(endian, b"1 init\n42 worker\n")
}

/// [`v6`] with `cmdlines` as its saved cmdlines text.
fn v6_with_cmdlines(endian: Endian, cmdlines: &[u8]) -> Vec<u8> {
    let mut w = W::new(endian);
    w.s(MAGIC)
        .s(b"6\0")
        .s(&[u8::from(endian.is_big()), 8])
        .n(4096, 4);
    let hi = header_info(endian);
    w.s(&hi);
    w.n(0, 4); // no ftrace formats
    let f = formats(endian);
    w.s(&f);
    w.sized(4, b"").sized(4, b"").sized(8, cmdlines);
    w.n(1, 4); // cpus
    w.s(b"options  \0");
    w.n(u64::from(id::DATE), 2).sized(4, b"0x10\0");
    w.n(u64::from(id::TRACECLOCK), 2).sized(4, b"");
    w.n(0, 2);
    w.s(b"flyrecord\0");
    let table = w.b.len();
    w.n(0, 8).n(4096, 8);
    w.sized(8, b"local [global] counter\n");
    let at = w.b.len().next_multiple_of(4096);
    w.b.resize(at, 0);
    let p = page(endian);
    w.s(&p);
    let mut fix = W::new(endian);
    fix.n(at as u64, 8);
    w.b[table..table + 8].copy_from_slice(&fix.b);
    w.b
}

/// The kallsyms text of [`v7`].
const KALLSYMS: &[u8] = b"ffffffff81000000 T _stext\nffffffff81000100 t made_up\n";

/// A v7 file compressed with zlib; `page_size_in_buffer` writes trace-cmd 3.1's BUFFER
/// option.
fn v7(endian: Endian, page_size_in_buffer: bool) -> Vec<u8> {
    let mut w = W::new(endian);
    w.s(MAGIC)
        .s(b"7\0")
        .s(&[u8::from(endian.is_big()), 8])
        .n(4096, 4);
    w.s(b"zlib\0").s(b"1.2.13\0");
    let options_at_pos = w.b.len();
    w.n(0, 8);
    let section = |w: &mut W, sid: u16, body: &[u8]| -> u64 {
        let at = w.b.len() as u64;
        let z = miniz_oxide::deflate::compress_to_vec_zlib(body, 6);
        w.n(u64::from(sid), 2)
            .n(1, 2)
            .n(0, 4)
            .n(8 + z.len() as u64, 8);
        w.n(z.len() as u64, 4).n(body.len() as u64, 4).s(&z);
        at
    };
    let hi = section(&mut w, id::HEADER_INFO, &header_info(endian));
    let ev = section(&mut w, id::EVENT_FORMATS, &formats(endian));
    let mut cl = W::new(endian);
    cl.sized(8, b"42 worker\n");
    let cmd = section(&mut w, id::CMDLINES, &cl.b);
    // The kallsyms section: compressed, or (with trace-cmd 3.1's BUFFER option) not.
    let mut ks = W::new(endian);
    ks.sized(4, KALLSYMS);
    let kallsyms = if page_size_in_buffer {
        let at = w.b.len() as u64;
        w.n(u64::from(id::KALLSYMS), 2).n(0, 2).n(0, 4);
        w.n(ks.b.len() as u64, 8).s(&ks.b);
        at
    } else {
        section(&mut w, id::KALLSYMS, &ks.b)
    };
    // The flyrecord section: header, then the CPU data (count, one chunk).
    let fly = w.b.len() as u64;
    w.n(u64::from(id::BUFFER), 2).n(1, 2).n(0, 4).n(0, 8);
    let cpu_at = w.b.len() as u64;
    let z = miniz_oxide::deflate::compress_to_vec_zlib(&page(endian), 6);
    w.n(1, 4).n(z.len() as u64, 4).n(4096, 4).s(&z);
    let cpu_size = 8 + z.len() as u64;
    // The options section, uncompressed.
    let mut o = W::new(endian);
    for (sid, at) in [
        (id::HEADER_INFO, hi),
        (id::EVENT_FORMATS, ev),
        (id::CMDLINES, cmd),
        (id::KALLSYMS, kallsyms),
    ] {
        o.n(u64::from(sid), 2).n(8, 4).n(at, 8);
    }
    o.n(u64::from(id::OFFSET), 2).sized(4, b"-5\0");
    let mut buffer = W::new(endian);
    buffer.n(fly, 8).s(b"\0mono\0");
    if page_size_in_buffer {
        buffer.n(4096, 4);
    }
    buffer.n(1, 4).n(3, 4).n(cpu_at, 8).n(cpu_size, 8);
    o.n(u64::from(id::BUFFER), 2).sized(4, &buffer.b);
    o.n(u64::from(id::DONE), 2).n(8, 4).n(0, 8);
    let opts = w.b.len() as u64;
    w.n(0, 2).n(0, 2).n(0, 4).n(o.b.len() as u64, 8).s(&o.b);
    let mut fix = W::new(endian);
    fix.n(opts, 8);
    w.b[options_at_pos..options_at_pos + 8].copy_from_slice(&fix.b);
    w.b
}

/// (cpu, time, v) of a record.
type Rec = (u32, u64, u32);
/// (cpu, count) of a lost marker.
type Lost = (u32, Option<u64>);

/// The records and the lost markers.
fn items(file: &TraceDat<'_>) -> (Vec<Rec>, Vec<Lost>) {
    let mut records = file.records().unwrap();
    let (mut recs, mut lost) = (Vec::new(), Vec::new());
    while let Some(item) = records.next_item().unwrap() {
        match item {
            Item::Record(r) => {
                assert_eq!(r.event, Some(0));
                let v = r.raw[8..12].try_into().unwrap();
                let v = if file.endian() == Endian::Big {
                    u32::from_be_bytes(v)
                } else {
                    u32::from_le_bytes(v)
                };
                recs.push((r.cpu, r.time, v));
            }
            Item::Lost { cpu, count, .. } => lost.push((cpu, count)),
        }
    }
    (recs, lost)
}

#[test]
fn v6_both_byte_orders() {
    for endian in [Endian::Little, Endian::Big] {
        let bytes = v6(endian);
        let file = TraceDat::parse(&bytes).unwrap();
        assert_eq!(file.version(), 6);
        assert_eq!(file.trace_clock(), Some("global"));
        assert_eq!(file.time_offset_ns(), 16_000);
        assert_eq!(file.comm(42), Some("worker"));
        assert_eq!(file.comm(1), Some("init"));
        assert_eq!(file.comm(2), None);
        assert_eq!(file.events()[0].system, "test");
        let (recs, lost) = items(&file);
        assert_eq!(
            recs,
            vec![(0, 1001, 1), (0, 1003, 2), (0, 1006, 3)],
            "{endian:?}"
        );
        assert_eq!(lost, vec![(0, Some(9))]);
    }
}

#[test]
fn v7_zlib_both_byte_orders_both_buffer_options() {
    for endian in [Endian::Little, Endian::Big] {
        for with_page_size in [false, true] {
            let bytes = v7(endian, with_page_size);
            let file = TraceDat::parse(&bytes).unwrap();
            assert_eq!(file.compression().0, Compression::Zlib);
            assert_eq!(file.trace_clock(), Some("mono"));
            assert_eq!(file.time_offset_ns(), -5);
            assert_eq!(file.comm(42), Some("worker"));
            assert_eq!(file.kallsyms(), KALLSYMS);
            let borrowed = bytes.as_ptr_range().contains(&file.kallsyms().as_ptr());
            assert_eq!(borrowed, with_page_size, "borrowed unless compressed");
            let top = &file.buffers()[0];
            assert!(top.compressed);
            assert_eq!(
                top.cpus,
                vec![CpuData {
                    cpu: 3,
                    offset: top.cpus[0].offset,
                    size: top.cpus[0].size
                }]
            );
            let (recs, lost) = items(&file);
            assert_eq!(recs, vec![(3, 1001, 1), (3, 1003, 2), (3, 1006, 3)]);
            assert_eq!(lost, vec![(3, Some(9))]);
        }
    }
}

#[test]
fn errors_say_where_and_why() {
    let e = TraceDat::parse(b"\x17\x08\x44tracinX").unwrap_err();
    assert_eq!((e.offset, e.kind), (0, ErrorKind::NotTraceDat));
    // Unsupported compression, at the name.
    let mut bytes = v7(Endian::Little, true);
    let at = MAGIC.len() + 2 + 2 + 4;
    bytes[at..at + 4].copy_from_slice(b"lz4\0");
    let e = TraceDat::parse(&bytes).unwrap_err();
    assert_eq!(e.offset, at as u64);
    assert_eq!(e.kind, ErrorKind::UnsupportedCompression("lz4".into()));
    // Options sections chained in a loop.
    let mut bytes = v7(Endian::Little, true);
    let first = u64::from_le_bytes(bytes[at + 12..at + 20].try_into().unwrap()) as usize;
    let done = bytes.len() - 8;
    bytes[done..].copy_from_slice(&(first as u64).to_le_bytes());
    let e = TraceDat::parse(&bytes).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::TooLarge { .. }), "{e}");
    // A corrupt compressed section: the error names the section's offset.
    let good = v7(Endian::Little, true);
    let mut bytes = good.clone();
    let z = at + 20 + 16 + 8; // inside the first section's zlib data
    bytes[z + 2] ^= 0xff;
    bytes[z + 3] ^= 0xff;
    let e = TraceDat::parse(&bytes).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Decompress(_)), "{e}");
    assert_eq!(e.offset, (at + 20 + 16) as u64);
    // A bad page inside a compressed chunk: reported with the chunk's offset and the
    // offset in its decompressed data, then the reading goes on.
    let e = TraceDatError {
        offset: 100,
        inner: Some(8),
        kind: ErrorKind::NotTraceDat,
    };
    assert!(
        e.to_string()
            .starts_with("trace.dat byte 8 of the data decompressed from byte 100")
    );
}

#[test]
fn c_integers() {
    assert_eq!(parse_c_int("0x10"), Some(16));
    assert_eq!(parse_c_int("-5"), Some(-5));
    assert_eq!(parse_c_int("010"), Some(8));
    assert_eq!(parse_c_int("0"), Some(0));
    assert_eq!(parse_c_int("x"), None);
}

#[test]
fn saved_cmdlines_lines() {
    let (lines, bad) = parse_cmdlines("  7 a b\n42 old\n\n42 new\n3 \n");
    // Spaces inside a name are kept; a later line of a pid wins; an empty name is a name.
    let want = [(3, ""), (7, "a b"), (42, "new")];
    let want: Vec<(u32, String)> = want.iter().map(|&(p, c)| (p, c.to_string())).collect();
    assert_eq!(lines, want);
    assert_eq!(bad, None);
    let (lines, bad) = parse_cmdlines("x y\n-1 neg\nnospace\n5 ok\n");
    assert_eq!(lines, vec![(5, "ok".to_string())]);
    assert_eq!(bad, Some((3, "x y".to_string())));
    let long = format!("{}\n", "z".repeat(500));
    let (_, bad) = parse_cmdlines(&long);
    assert_eq!(bad.map(|(n, l)| (n, l.len())), Some((1, MAX_SHOWN)));
}

#[test]
fn malformed_cmdlines_are_an_error_of_their_own_not_of_the_file() {
    let bytes = v6_with_cmdlines(Endian::Little, b"42 worker\ngarbage\n\xff\xfe\n");
    let file = TraceDat::parse(&bytes).unwrap();
    assert_eq!(file.comm(42), Some("worker"));
    let e = file.cmdline_error().unwrap();
    assert!(
        matches!(&e.kind, ErrorKind::Cmdlines { count: 2, first } if first == "garbage"),
        "{e}"
    );
    assert!(e.to_string().contains("get no `comm`"), "{e}");
    // Still decodes, with the problem reported and the good names used.
    let (out, decoded) = decoded_lines(&file, true);
    assert_eq!(decoded.problems, vec![e.to_string()]);
    let mut events = out.lines().filter(|l| l.contains(r#""event""#)).peekable();
    assert!(events.peek().is_some(), "{out}");
    assert!(events.all(|l| l.contains(r#""comm":"worker""#)), "{out}");
    // A cmdlines size past the end of the file is a truncation, not a panic.
    let good = v6(Endian::Little);
    let at = find(&good, b"1 init") - 8;
    let mut bytes = good.clone();
    bytes[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    let e = TraceDat::parse(&bytes).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Truncated { .. }), "{e}");
    // Where the names would start.
    assert_eq!(e.offset, at as u64 + 8);
}

#[test]
fn records_get_the_saved_name_of_their_pid() {
    for bytes in [v6(Endian::Little), v7(Endian::Big, true)] {
        let file = TraceDat::parse(&bytes).unwrap();
        let (out, decoded) = decoded_lines(&file, true);
        assert!(decoded.problems.is_empty(), "{:?}", decoded.problems);
        let events: Vec<&str> = out.lines().filter(|l| l.contains(r#""event""#)).collect();
        assert_eq!(events.len(), 3, "{out}");
        for l in events {
            assert!(
                l.contains(r#""pid":42,"tid":42,"comm":"worker","fields""#),
                "{l}"
            );
        }
        // --no-context: no key.
        let (out, _) = decoded_lines(&file, false);
        assert!(!out.contains("comm"), "{out}");
    }
    // A pid with no saved name gets no key (never a guess).
    let bytes = v6_with_cmdlines(Endian::Little, b"1 init\n");
    let file = TraceDat::parse(&bytes).unwrap();
    let (out, _) = decoded_lines(&file, true);
    assert!(out.contains(r#""tid":42,"fields""#), "{out}");
}

/// The JSON lines of `file` with context on or off.
pub(super) fn decoded_lines(
    file: &TraceDat<'_>,
    context: bool,
) -> (String, crate::to_lines::trace_dat::Decoded) {
    let opts = crate::to_lines::DecodeOptions {
        context,
        ..Default::default()
    };
    let mut out = Vec::new();
    let decoded = crate::to_lines::trace_dat::decode_lines(file, &opts, &|_, _| true, &mut |b| {
        out.extend_from_slice(b);
        true
    })
    .unwrap();
    (String::from_utf8(out).unwrap(), decoded)
}

fn find(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).position(|w| w == needle).unwrap()
}
