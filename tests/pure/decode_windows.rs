//! Pure tier, the binary: `uevrec decode --threads N` on a trace.dat in windows of time
//! writes the bytes `--threads 1` writes, and says so in its summary; when a CPU's items
//! go back in time across pages (so no window can vouch for the merge past there), the
//! file is decoded again whole from where the windows stopped, the same bytes again. The
//! files are built with the parsers' trace.dat writer and their tests' page builder (two
//! CPUs of 4 KiB pages).

use std::process::Command;

use uevrec_parsers::trace_dat::writer::header;

/// The parsers' tests' trace.dat builder (decode_kallsyms.rs uses it too).
#[path = "../../parsers/tests/common/trace_dat.rs"]
pub(crate) mod fixture;
use fixture::{Entry, PAGE, seq_format};

/// Records a page: 200 of 20 bytes.
const PER_PAGE: u64 = 200;

/// A page of `PER_PAGE` seq records from `time`, 10 apart.
fn page(time: u64, seq: &mut u64) -> Vec<u8> {
    let entries: Vec<Entry> = (0..PER_PAGE)
        .map(|i| {
            *seq += 1;
            Entry::Record {
                ty: 2001,
                delta: if i == 0 { 0 } else { 10 },
                pid: 42,
                seq: *seq,
            }
        })
        .collect();
    fixture::page(time, None, &entries)
}

/// A trace.dat of two CPUs whose pages start at `times[cpu]`.
fn file(times: [&[u64]; 2]) -> Vec<u8> {
    let systems = [("test".to_string(), vec![seq_format("seq", 2001)])];
    let meta = fixture::meta(&systems, "42 producer\n", &[], None, None);
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
