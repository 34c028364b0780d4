//! The perf.data files of the perf_data_* tests (included by `#[path]`, beside
//! `common/trace_dat.rs` as `trace_dat`): one tracepoint, `test:seq` (format id 2001, a
//! u64 `seq` after the common fields), its samples' payloads, the file's metadata and
//! trailer; each test writes its own records between.

#![allow(dead_code)]

use std::sync::LazyLock;

use uevrec_parsers::perf_data::header::FILE_HEADER_SIZE;
use uevrec_parsers::perf_data::writer::{
    self, ClockRef, EventSpec, FileMeta, TracingSpec, TrackingSpec,
};

use crate::trace_dat::{HEADER_PAGE, seq_format};

/// The format text of `test:seq`.
pub static SEQ: LazyLock<String> = LazyLock::new(|| seq_format("seq", 2001));

/// What a file of `test:seq` samples describes: the event as attr `id`, its format, the
/// command line (its metadata borrows them: [`SeqFile::meta`]).
pub struct SeqFile {
    pub events: [EventSpec; 1],
    formats: [(&'static str, &'static str); 1],
    cmdline: [String; 1],
}

impl SeqFile {
    /// `test:seq` as attr `id`, its samples with a callchain or not.
    pub fn new(id: u64, callchain: bool) -> Self {
        SeqFile {
            events: [EventSpec {
                tracepoint: 2001,
                name: "test:seq".into(),
                id,
                clockid: 0,
                callchain,
                user_stack: None,
            }],
            formats: [("test", SEQ.as_str())],
            cmdline: ["uevrec".to_string()],
        }
    }

    /// The metadata of a file recorded on kernel `osrelease`, its samples' first and last
    /// times, and its tracking attr, if any.
    pub fn meta<'a>(
        &'a self,
        osrelease: &'a str,
        sample_time: Option<(u64, u64)>,
        tracking: Option<TrackingSpec>,
    ) -> FileMeta<'a> {
        FileMeta {
            events: &self.events,
            tracing: TracingSpec {
                long_size: 8,
                page_size: 4096,
                header_page: HEADER_PAGE,
                header_event: "",
            },
            formats: &self.formats,
            hostname: "h",
            osrelease,
            version: "uevrec test",
            arch: "x86_64",
            nr_cpus: (1, 1),
            cmdline: &self.cmdline,
            sample_time,
            clock: ClockRef {
                clockid: 0,
                wall_ns: 0,
                clockid_ns: 0,
                res_ns: 1,
            },
            tracking,
            build_ids: &[],
        }
    }
}

/// The payload of the `test:seq` record of `seq`.
pub fn seq_raw(seq: u64) -> Vec<u8> {
    let mut raw = vec![0u8; 8];
    raw.extend_from_slice(&seq.to_ne_bytes());
    raw
}

/// Finish `file` (its records written): the trailer of `meta`, then the file-mode header.
pub fn finish(file: &mut Vec<u8>, meta: &FileMeta<'_>) {
    let trailer = writer::trailer(meta, file.len() as u64 - FILE_HEADER_SIZE);
    file.extend_from_slice(&trailer.bytes);
    file[..FILE_HEADER_SIZE as usize].copy_from_slice(&trailer.header);
}

/// The lines `dec` writes for `records` of `bytes`, up to the first record that does not
/// read (a cut file's end), then what it holds back.
pub fn decode_until_cut(
    dec: &mut uevrec_parsers::to_lines::perf_data::LineDecoder<'_>,
    records: uevrec_parsers::perf_data::records::Records<'_>,
    bytes: &[u8],
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut sink = |b: &[u8]| {
        out.extend_from_slice(b);
        true
    };
    for rec in records {
        match rec {
            Ok(rec) => {
                dec.record_in(&rec, bytes, &mut sink);
            }
            Err(_) => break,
        }
    }
    dec.finish_in(bytes, &mut sink);
    out
}
