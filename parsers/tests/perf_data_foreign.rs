//! A pipe-mode perf.data from a big-endian 32-bit machine, built byte by byte: the
//! reader honours the file's byte order (header, attr and its bitfield, tracing data,
//! samples, raw trace entries) and the traced machine's `long` size (`unsigned long
//! args[2]` is two 4-byte elements in 8 bytes), and derives wall-clock time from
//! HEADER_CLOCK_DATA.

use uevrec_parsers::to_lines::DecodeOptions;
use uevrec_parsers::to_lines::perf_data::{FeedControl, StreamDecoder};

fn be16(v: u16) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}
fn be32(v: u32) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}
fn be64(v: u64) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

/// A record: big-endian header, then `body`.
fn record(kind: u32, body: &[u8]) -> Vec<u8> {
    [
        be32(kind),
        be16(0),
        be16(8 + body.len() as u16),
        body.to_vec(),
    ]
    .concat()
}

const FORMAT: &str = "name: ev\nID: 7\nformat:\n\
    \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
    \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
    \tfield:unsigned long args[2];\toffset:8;\tsize:8;\tsigned:0;\n\
    \tfield:u16 small;\toffset:16;\tsize:2;\tsigned:0;\n\n\
    print fmt: \"\"\n";

fn big_endian_32_bit_stream() -> Vec<u8> {
    let mut s = b"2ELIFREP".to_vec(); // PERFILE2 as a big-endian u64
    s.extend(be64(16));
    // The attr (96 bytes: up to clockid): tracepoint 7, TID|TIME|CPU|RAW, sample_id_all
    // and use_clockid (flags 18 and 25: bits 63-18 and 63-25 on a big-endian machine),
    // clockid 1; then its one id.
    let sample_type = (1 << 1) | (1 << 2) | (1 << 7) | (1 << 10);
    let flags = (1u64 << (63 - 18)) | (1u64 << (63 - 25));
    let mut attr = [
        be32(2),
        be32(96),
        be64(7),
        be64(1),
        be64(sample_type),
        be64(0),
        be64(flags),
    ]
    .concat();
    attr.resize(92, 0);
    attr.extend(be32(1));
    attr.extend(be64(99));
    s.extend(record(64, &attr));
    // Tracing data: big-endian, long size 4.
    let mut td = b"\x17\x08\x44tracing0.6\0".to_vec();
    td.extend([1, 4]);
    td.extend(be32(4096));
    td.extend(b"header_page\0");
    td.extend(be64(0));
    td.extend(b"header_event\0");
    td.extend(be64(0));
    td.extend(be32(0)); // ftrace formats
    td.extend(be32(1)); // systems
    td.extend(b"test\0");
    td.extend(be32(1));
    td.extend(be64(FORMAT.len() as u64));
    td.extend(FORMAT.as_bytes());
    td.extend(be32(0)); // kallsyms
    td.extend(be32(0)); // printk
    td.extend(be64(0)); // saved cmdlines
    td.resize(td.len().next_multiple_of(8), 0);
    s.extend(record(66, &be32(td.len() as u32)));
    s.extend(td);
    // HEADER_CLOCK_DATA: CLOCK_MONOTONIC 500 ns was 1,000 s after the epoch.
    let clock = [
        be64(29),
        be32(1),
        be32(1),
        be64(1_000_000_000_000),
        be64(500),
    ]
    .concat();
    s.extend(record(80, &clock));
    // One sample: pid 10, tid 11, time 1500, cpu 3, raw entry of 20 bytes.
    let raw = [
        be16(7),
        vec![0, 0],
        be32(10),
        be32(0x1122_3344),
        be32(5),
        be16(0x0102),
        vec![0, 0],
    ]
    .concat();
    let body = [
        be32(10),
        be32(11),
        be64(1500),
        be32(3),
        be32(0),
        be32(raw.len() as u32),
        raw,
    ]
    .concat();
    s.extend(record(9, &body));
    s.extend(record(68, &[]));
    s
}

#[test]
fn big_endian_32_bit_machine() {
    let bytes = big_endian_32_bit_stream();
    let mut out = Vec::new();
    let mut sink = |b: &[u8]| {
        out.extend_from_slice(b);
        true
    };
    let mut dec = StreamDecoder::new(DecodeOptions::default(), |_, _| true);
    dec.feed(&bytes);
    assert_eq!(dec.process(&mut sink), Ok(FeedControl::Continue));
    assert_eq!(dec.finish(&mut sink), Ok(FeedControl::Continue));
    let d = dec.decoder().unwrap();
    assert_eq!(d.stats().error_count, 0, "{:?}", d.stats().errors);
    let tracing = d.data().tracing_data().unwrap();
    assert_eq!(
        (tracing.endian, tracing.long_size),
        (uevrec_parsers::Endian::Big, 4)
    );
    assert_eq!(d.data().events()[0].attr.use_clockid(), Some(1));
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "{\"time\":\"1970-01-01T00:16:40.000001000Z\",\"system\":\"test\",\"event\":\"ev\",\
         \"cpu\":3,\"pid\":10,\"tid\":11,\"fields\":{\"args\":[287454020,5],\"small\":258}}\n"
    );
}
