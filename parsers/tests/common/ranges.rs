//! Decoding a whole perf.data with one decoder, and in ranges ([`RangePlanner`], as
//! `uevrec decode --threads N --range-size SIZE` does), for the tests that compare them
//! (perf_data_writer.rs, perf_data_corpus.rs).

use uevrec_parsers::perf_data::PerfData;
use uevrec_parsers::perf_data::index::RangeIndex;
use uevrec_parsers::to_lines::perf_data::{
    DecodeRange, FeedControl, LineDecoder, RangeEnd, RangePlanner, RangeStart, ranges_from_index,
};
use uevrec_parsers::to_lines::{DecodeOptions, DecodeStats};
use uevrec_parsers::{LineOptions, LineWriter};

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
/// end to end, what they saw summed, how many ranges and why cutting stopped early. Each
/// range must start where the one before it ended ([`RangeEnd::joins`]: the planner's
/// cuts are exact).
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
    let (all, total, failed) = decode_each(file, ranges);
    assert_eq!(failed, None, "the planner's ranges join");
    (all, total, n, stopped)
}

/// Decode `file` (written with a range index) in the ranges its index gives for ranges
/// of at least `target` bytes, last first, each on its own: the lines of the ranges up to
/// the first that does not start where the one before ended, put end to end, what they
/// saw summed, how many ranges, and why that one does not (`None`: all joined).
pub fn decode_in_index_ranges(
    file: &[u8],
    opts: DecodeOptions,
    target: usize,
) -> Result<(Vec<u8>, DecodeStats, usize, Option<String>), String> {
    let (data, records) = PerfData::open(file).expect("the written file opens");
    let (start, end) = (records.offset() as usize, records.end() as usize);
    let index =
        RangeIndex::find(&file[start..end], start as u64, data.endian)?.ok_or("no range index")?;
    let select = |_: &str, _: &str| true;
    let ranges = ranges_from_index(&data, file, start, end, &index, opts, &select, target)?;
    let n = ranges.len();
    let (all, total, failed) = decode_each(file, ranges);
    Ok((all, total, n, failed))
}

/// Decode `ranges` of `file`, last first: the lines of those up to the first that does
/// not join the one before, what they saw, and why it does not.
fn decode_each(file: &[u8], ranges: Vec<DecodeRange>) -> (Vec<u8>, DecodeStats, Option<String>) {
    let n = ranges.len();
    // Each range's lines, how it ended, and the start it said.
    type Decoded = (Vec<u8>, RangeEnd, Option<RangeStart>);
    let mut done: Vec<Option<Decoded>> = (0..n).map(|_| None).collect();
    for r in ranges.into_iter().rev() {
        let i = r.index;
        let mut out = Vec::new();
        let mut lines = |b: &mut Vec<u8>| {
            out.extend_from_slice(b);
            b.clear();
        };
        let mut start = None;
        let end = r.decode(file, None, &mut lines, &mut |s| start = Some(s));
        assert_eq!(
            start.is_some(),
            i > 0,
            "range {i} says its start once it is not the first"
        );
        done[i] = Some((out, end, start));
    }
    let (mut all, mut total) = (Vec::new(), DecodeStats::default());
    let mut before: Option<RangeEnd> = None;
    for (i, (out, mut end, start)) in done.into_iter().map(Option::unwrap).enumerate() {
        if let (Some(before), Some(start)) = (&before, &start)
            && let Err(why) = before.joins(start)
        {
            return (all, total, Some(format!("range {i}: {why}")));
        }
        all.extend_from_slice(&out);
        total.absorb(std::mem::take(&mut end.stats));
        before = Some(end);
    }
    // As one decoder's end: the notice when the ranges' `lost` lines add up to more than a
    // counter holds (what `uevrec decode` writes after the last range).
    if let Some(msg) = total.lost_notice() {
        LineWriter::new(LineOptions::default()).write_notice(&mut all, None, "lost", None, msg);
    }
    (all, total, None)
}
