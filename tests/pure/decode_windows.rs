//! Pure tier, the binary: `uevrec decode --threads N` on a trace.dat in windows of time
//! writes the bytes `--threads 1` writes, and says so in its summary; when a CPU's items
//! go back in time across pages (so no window can vouch for the merge past there), the
//! file is decoded again whole from where the windows stopped, the same bytes again. The
//! files are built here with the parsers' trace.dat writer (two CPUs of 4 KiB pages).

use std::process::Command;

use uevrec_parsers::Endian;
use uevrec_parsers::trace_dat::writer::{DatMeta, header};

const SEQ: &str = "name: seq
ID: 2001
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:u64 seq;\toffset:8;\tsize:8;\tsigned:0;

print fmt: \"seq=%llu\", REC->seq
";

const HEADER_PAGE: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;
";

const HEADER_EVENT: &str = "# compressed entry header
\ttype_len    :    5 bits
\ttime_delta  :   27 bits
\tarray       :   32 bits

\tpadding     : type == 29
\ttime_extend : type == 30
\ttime_stamp : type == 31
\tdata max type_len  == 28
";

const PAGE: usize = 4096;
/// Records a page: 200 of 20 bytes.
const PER_PAGE: u64 = 200;

/// A page of `PER_PAGE` seq records from `time`, 10 apart.
fn page(time: u64, seq: &mut u64) -> Vec<u8> {
    let mut p = vec![0u8; 16];
    p[..8].copy_from_slice(&time.to_le_bytes());
    for i in 0..PER_PAGE {
        *seq += 1;
        let delta: u32 = if i == 0 { 0 } else { 10 };
        p.extend_from_slice(&(4u32 | (delta << 5)).to_le_bytes());
        p.extend_from_slice(&2001u16.to_le_bytes());
        p.extend_from_slice(&[0, 0]);
        p.extend_from_slice(&42i32.to_le_bytes());
        p.extend_from_slice(&seq.to_le_bytes());
    }
    let commit = (p.len() - 16) as u64;
    p[8..16].copy_from_slice(&commit.to_le_bytes());
    p.resize(PAGE, 0);
    p
}

/// A trace.dat of two CPUs whose pages start at `times[cpu]`.
fn file(times: [&[u64]; 2]) -> Vec<u8> {
    let systems = [("test".to_string(), vec![SEQ.to_string()])];
    let meta = DatMeta {
        endian: Endian::Little,
        long_size: 8,
        page_size: PAGE as u32,
        header_page: HEADER_PAGE,
        header_event: HEADER_EVENT,
        ftrace_formats: &[],
        systems: &systems,
        cmdlines: "42 producer\n",
        trace_clock: "mono",
        offset_ns: Some(1_000_000_000),
        cpu_stats: &[],
        tgids: None,
        uname: None,
        version: None,
    };
    let sizes = times.map(|t| (t.len() * PAGE) as u64);
    let (mut bytes, offsets) = header(&meta, &sizes);
    let mut seq = 0;
    for (pages, at) in times.iter().zip(offsets) {
        bytes.resize(at as usize, 0);
        for &t in *pages {
            bytes.extend_from_slice(&page(t, &mut seq));
        }
    }
    bytes
}

/// `decode --threads N` of `path` (with `extra`): its output and summary line.
fn decode(path: &std::path::Path, threads: &str, extra: &[&str]) -> (Vec<u8>, String) {
    let out = Command::new(crate::common::bin())
        .args(["decode", "--threads", threads])
        .args(extra)
        .arg(path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (out.stdout, stderr)
}

#[test]
fn a_trace_dat_in_windows_of_time_is_one_decoding_and_decoded_again_when_items_go_back() {
    let dir = tempfile::tempdir().unwrap();
    // Each page spans 1,990 ns: in order, the CPUs' pages interleave.
    let in_order: Vec<u64> = (0..8).map(|p| 1_000 + p * 2_000).collect();
    let other: Vec<u64> = (0..8).map(|p| 1_005 + p * 2_000).collect();
    // CPU 0's fifth page starts before its fourth ended.
    let mut back = in_order.clone();
    back[4] = back[3] + 500;
    for (name, times, again) in [("in-order", &in_order, false), ("back", &back, true)] {
        let path = dir.path().join(format!("{name}.dat"));
        std::fs::write(&path, file([times, &other])).unwrap();
        let (one, _) = decode(&path, "1", &[]);
        assert_eq!(
            one.split(|&b| b == b'\n')
                .filter(
                    |l| l.starts_with(b"{\"time\"") && !l.windows(9).any(|w| w == b"\"uevrec\":")
                )
                .count(),
            16 * PER_PAGE as usize,
            "{name}"
        );
        for threads in ["2", "3"] {
            // Windows of one page (4K): a cut between every two.
            let (many, summary) = decode(&path, threads, &["--range-size", "4K"]);
            assert!(many == one, "{name}: --threads {threads} wrote other bytes");
            assert!(
                summary.contains(&format!("windows of time by {threads} threads")),
                "{name}: {summary}"
            );
            assert_eq!(
                summary.contains("decoded again whole"),
                again,
                "{name}: {summary}"
            );
        }
    }
}
