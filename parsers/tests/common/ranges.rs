//! Decoding a whole perf.data with one decoder, and in ranges ([`RangePlanner`], as
//! `uevrec decode --threads N --range-size SIZE` does), for the tests that compare them
//! (perf_data_writer.rs, perf_data_corpus.rs).

use uevrec_parsers::perf_data::PerfData;
use uevrec_parsers::to_lines::perf_data::{FeedControl, LineDecoder, RangePlanner};
use uevrec_parsers::to_lines::{DecodeOptions, DecodeStats};

/// Decode `file` with one decoder from the start, as `uevrec decode --threads 1` does:
/// its bytes and what it saw.
pub fn decode_whole(file: &[u8], opts: DecodeOptions) -> (Vec<u8>, DecodeStats) {
    let (data, records) = PerfData::open(file).expect("the written file opens");
    let mut dec = LineDecoder::new(data, opts, |_, _| true);
    let mut out = Vec::new();
    let mut sink = |b: &[u8]| {
        out.extend_from_slice(b);
        true
    };
    for rec in records {
        let rec = rec.expect("every record framed");
        assert_eq!(dec.record_in(&rec, file, &mut sink), FeedControl::Continue);
    }
    dec.finish_in(file, &mut sink);
    let stats = dec.stats().clone();
    (out, stats)
}

/// Decode `file` in ranges cut at every `FINISHED_ROUND` that allows it, the ranges
/// decoded last first (each on its own, as `--threads N` workers do): their lines put
/// end to end, what they saw summed, how many ranges and why cutting stopped early.
pub fn decode_in_ranges(
    file: &[u8],
    opts: DecodeOptions,
) -> (Vec<u8>, DecodeStats, usize, Option<String>) {
    let (data, records) = PerfData::open(file).expect("the written file opens");
    let (start, end) = (records.offset() as usize, records.end() as usize);
    let select = |_: &str, _: &str| true;
    let mut planner = RangePlanner::new(&data, start, opts, &select, 1).expect("a planner");
    let mut ranges = Vec::new();
    for rec in records {
        ranges.extend(planner.take(rec.as_ref()));
    }
    let stopped = planner.stopped().map(str::to_string);
    ranges.push(planner.finish(end));
    let n = ranges.len();
    let mut done: Vec<Option<(Vec<u8>, DecodeStats)>> = vec![None; n];
    for r in ranges.into_iter().rev() {
        let i = r.index;
        let mut out = Vec::new();
        let mut lines = |b: &mut Vec<u8>| {
            out.extend_from_slice(b);
            b.clear();
        };
        let (stats, stop) = r.decode(file, &mut lines);
        assert!(stop.is_none(), "range {i}: {stop:?}");
        done[i] = Some((out, stats));
    }
    let (mut all, mut total) = (Vec::new(), DecodeStats::default());
    for (out, stats) in done.into_iter().map(Option::unwrap) {
        all.extend_from_slice(&out);
        total.absorb(stats);
    }
    (all, total, n, stopped)
}
