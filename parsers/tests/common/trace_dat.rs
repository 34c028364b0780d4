//! A hand-built trace.dat for the tests that write one (trace_dat_truncation.rs,
//! trace_dat_windows.rs, and by path the binary's tests/pure/decode_windows.rs): the
//! x86_64 `header_page`/`header_event` texts, 4 KiB little-endian pages of events with one
//! `u64 seq` field, and the header [`meta`] describes.

// Each test uses some of it.
#![allow(dead_code)]

use uevrec_parsers::Endian;
use uevrec_parsers::trace_dat::writer::DatMeta;

pub const HEADER_PAGE: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;
";

pub const HEADER_EVENT: &str = "# compressed entry header
\ttype_len    :    5 bits
\ttime_delta  :   27 bits
\tarray       :   32 bits

\tpadding     : type == 29
\ttime_extend : type == 30
\ttime_stamp : type == 31
\tdata max type_len  == 28
";

/// The page size.
pub const PAGE: usize = 4096;

/// The format of event `name` (id `id`): the common fields and `u64 seq`.
pub fn seq_format(name: &str, id: u16) -> String {
    format!(
        "name: {name}
ID: {id}
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:u64 seq;\toffset:8;\tsize:8;\tsigned:0;

print fmt: \"seq=%llu\", REC->seq
"
    )
}

/// One entry of a page.
#[derive(Debug, Clone, Copy)]
pub enum Entry {
    /// An event of id `ty` written `delta` after the entry before, by `pid`, holding `seq`
    /// (20 bytes: `type_len` 4).
    Record {
        ty: u16,
        delta: u32,
        pid: i32,
        seq: u64,
    },
    /// An absolute time stamp (`type_len` 31): the time becomes this.
    Stamp(u32),
}

/// A ring-buffer page of `entries` from `time`, that lost events before it when `missed`
/// says (the count stored after the data when there is one).
pub fn page(time: u64, missed: Option<Option<u64>>, entries: &[Entry]) -> Vec<u8> {
    let mut p = vec![0u8; 16];
    p[..8].copy_from_slice(&time.to_le_bytes());
    for entry in entries {
        match *entry {
            Entry::Record {
                ty,
                delta,
                pid,
                seq,
            } => {
                p.extend_from_slice(&(4u32 | (delta << 5)).to_le_bytes());
                p.extend_from_slice(&ty.to_le_bytes());
                p.extend_from_slice(&[0, 0]);
                p.extend_from_slice(&pid.to_le_bytes());
                p.extend_from_slice(&seq.to_le_bytes());
            }
            Entry::Stamp(time) => {
                p.extend_from_slice(&(31u32 | (time << 5)).to_le_bytes());
                p.extend_from_slice(&0u32.to_le_bytes());
            }
        }
    }
    let mut commit = (p.len() - 16) as u64;
    match missed {
        Some(Some(n)) => {
            commit |= (1 << 31) | (1 << 30);
            p.extend_from_slice(&n.to_le_bytes());
        }
        Some(None) => commit |= 1 << 31,
        None => {}
    }
    p[8..16].copy_from_slice(&commit.to_le_bytes());
    p.resize(PAGE, 0);
    p
}

/// The header of a file of these pages: `systems`' formats, the saved `cmdlines`, each
/// CPU's final `cpu_stats`, the saved `tgids` and `uname` when given; the clock `mono`, one
/// second after the Unix epoch at its zero.
pub fn meta<'a>(
    systems: &'a [(String, Vec<String>)],
    cmdlines: &'a str,
    cpu_stats: &'a [(u32, String)],
    tgids: Option<&'a str>,
    uname: Option<&'a str>,
) -> DatMeta<'a> {
    DatMeta {
        endian: Endian::Little,
        long_size: 8,
        page_size: PAGE as u32,
        header_page: HEADER_PAGE,
        header_event: HEADER_EVENT,
        ftrace_formats: &[],
        systems,
        cmdlines,
        trace_clock: "mono",
        offset_ns: Some(1_000_000_000),
        cpu_stats,
        tgids,
        uname,
        version: None,
        kallsyms: &[],
    }
}
