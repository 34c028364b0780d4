//! The engine of `uevrec decode` (its flags are `crate::cli::decode`): one input, a
//! perf.data (file mode, or pipe mode from `perf record -o -`) or a trace.dat, → the JSON
//! lines (or OTLP) `uevrec record` writes, through the same sinks. The decoding is
//! `uevrec_parsers::to_lines` (pure); this module does the I/O. One job per file: `input`
//! (where the bytes come from: a file mapped and read in place, or a pipe read in
//! pieces), [`mapped`] (a mapped input's pages, let go behind the reader so that memory
//! does not grow with the file), `perf_data` and `trace_dat` (the two formats),
//! `parallel` (`--threads` ≥ 2: the records staged, by where they lie, for formatter
//! workers), `ranges` and `windows` (a whole file cut for the workers), [`pick`] (which
//! records are written: `-e`, and `--where`/`--sample`/`--rate-limit` judged on every
//! path alike).
//!
//! Layers, lowest first: `mapped`, `pick`, `parallel`, `windows`, `ranges`, `trace_dat`,
//! `perf_data`, `input`.

use std::path::Path;

use uevrec_parsers::to_lines::{DecodeOptions, DecodeStats};
use uevrec_parsers::{LineOptions, OutputFormat, RecordWriter};

use pick::Pick;

use crate::outputs::sink::{Sink, SinkError};

mod input;
pub mod mapped;
mod parallel;
mod perf_data;
pub mod pick;
mod ranges;
mod trace_dat;
mod windows;

/// Bytes read at a time from standard input, into the stream decoder (records waiting
/// for their time order are copied; a file-mode perf.data or a trace.dat on standard
/// input is read whole first: that layout needs its end before its data).
pub const READ_CHUNK: usize = 1 << 20;

/// How the input ended.
pub struct Outcome {
    /// What was decoded, skipped and lost.
    pub stats: DecodeStats,
    /// Where and why decoding stopped early.
    pub stopped: Option<String>,
    /// Problems that did not stop decoding, besides those in `stats` (trace.dat).
    pub problems: Vec<String>,
    /// Problems `stats.error_count` counts that neither `stats.errors` nor `problems`
    /// lists: stderr says "and N more".
    pub unlisted: u64,
    /// Why `time` is null, when the input says (trace.dat: no wall-clock anchor).
    pub time_note: Option<String>,
    /// The file has `HEADER_CLOCK_DATA`.
    pub clock_data: bool,
    /// The input is cut short or was never finished: what is missing and where (every
    /// whole record before was decoded): the `truncated` notice, exit status
    /// [`crate::cli::decode::EXIT_SALVAGED`].
    pub truncated: Option<String>,
    /// `truncated` in one line for stderr, where it is long (a trace.dat cut through many
    /// CPUs: how many, the bytes missing, the first CPUs and "and N more"); `None`: stderr
    /// says `truncated` itself.
    pub truncated_summary: Option<String>,
    /// With `--threads` ≥ 2 on a whole perf.data: how the work was shared (in ranges, or
    /// why not), for the summary line.
    pub shared: Option<String>,
}

/// The sink behind a `FnMut(&[u8]) -> bool`, keeping its first error.
pub(crate) struct Output {
    sink: Box<dyn Sink + Send>,
    error: Option<SinkError>,
}

impl Output {
    fn write(&mut self, lines: &[u8]) -> bool {
        if self.error.is_some() {
            return false;
        }
        match self.sink.write_lines(lines) {
            Ok(()) => true,
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }
}

/// Where decoded lines go: a `FnMut(&[u8]) -> bool` (false: stop, the output failed).
pub type Flush<'a> = dyn FnMut(&[u8]) -> bool + 'a;

/// Decode `input` (a file; standard input if `None`) with `opts`, the events and records
/// `pick` keeps (after the last record, a `{"uevrec":"dropped"}` line per tracepoint and
/// reason with records not kept, `time` null: the same lines in every run), onto `sink` with `threads` threads (≥ 2: a writer thread and, for JSON lines,
/// formatter workers, or with `range_bytes` workers on ranges of a whole perf.data;
/// the same bytes whatever the number). Returns how the input ended
/// (or why it could not be read) and the first error of the output, if any.
///
/// A file (named, or regular on standard input) is mapped (memmap2, `MADV_SEQUENTIAL`)
/// and read in place: records waiting for their time order are held as offsets into the
/// mapping, not copied, and the pages before the oldest record still held are let go
/// ([`mapped::MapWindow`]). With workers, a page thread maps the input ahead of the reader
/// and lets it go [`mapped::PAGE_LAG`] behind (BENCHMARKS.md §20). Lines go to the sink in
/// runs of [`uevrec_parsers::to_lines::FLUSH_BYTES`].
pub fn run(
    input: Option<&Path>,
    opts: DecodeOptions,
    pick: &Pick<'_>,
    sink: Box<dyn Sink + Send>,
    threads: usize,
    range_bytes: Option<usize>,
) -> (Result<Outcome, String>, Option<SinkError>) {
    let mut output = Output { sink, error: None };
    let outcome = parallel::with_output(&mut output, threads, range_bytes, |flush, par| {
        // OTLP requests batch records across the whole input: formatted on one thread.
        let par = par.filter(|_| opts.format == OutputFormat::JsonLines);
        let outcome = match input {
            Some(path) => input::decode_file(path, opts, pick, flush, par),
            None => input::decode_stdin(opts, pick, flush, par),
        };
        if let (Some(filter), Ok(_)) = (pick.filter, &outcome) {
            let mut writer = uevrec_parsers::OutputWriter::new(opts.format, LineOptions::default());
            let mut lines = Vec::new();
            filter.write_dropped(&mut writer, &mut lines, None);
            writer.end_lines(&mut lines);
            if !lines.is_empty() {
                flush(&lines);
            }
        }
        // The notice after every record (JSON lines; stderr says it in any format).
        if let Ok(Outcome {
            truncated: Some(msg),
            ..
        }) = &outcome
            && opts.format == OutputFormat::JsonLines
        {
            flush(&notice_line("truncated", msg));
        }
        // The modules whose recorded build was found nowhere (stacks named offline).
        if outcome.is_ok()
            && let Some(msg) = crate::pipeline::stacks::build_ids::take_notice()
        {
            if opts.format == OutputFormat::JsonLines {
                flush(&notice_line("modules_not_found", &msg));
            } else {
                crate::messages::print(format_args!("uevrec: notice: {msg}\n"));
            }
        }
        outcome
    });
    (outcome, output.error)
}

/// A `{"uevrec":"notice"}` line of `what`, untimed, saying `message`.
fn notice_line(what: &str, message: &str) -> Vec<u8> {
    let mut line = Vec::new();
    uevrec_parsers::LineWriter::new(LineOptions::default())
        .write_notice(&mut line, None, what, None, message);
    line
}
