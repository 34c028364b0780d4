//! `uevrec decode [FILE|-]`: a perf.data (file mode, or pipe mode from `perf record -o -`)
//! or a trace.dat → the JSON lines `uevrec record` writes, through the same sinks. The
//! flags, the summary and the exit status are here (`report` says which status when);
//! the engine (input, mapping, threads) is [`crate::offline::decode`].

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use uevrec_parsers::to_lines::{DEFAULT_ORDER_BYTES, DecodeOptions};

use super::output::OutputArgs;
use super::{EXIT_ERROR, EXIT_OK, EXIT_OUTPUT_CLOSED, values};
use crate::capture::selector::Selector;
use crate::messages;
use crate::offline::decode::Outcome;
use crate::offline::decode::pick::{Pick, check_fields};
use crate::outputs::sink::SinkError;
use crate::pipeline::filter::Filter;

/// The error when the output file is the input file (emptying it first, or appending
/// to it while reading it, would lose or loop on the input).
fn same_file(input: Option<&Path>, output: Option<&Path>) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let input = input.filter(|p| *p != Path::new("-"))?;
    let (a, b) = (
        std::fs::metadata(input).ok()?,
        std::fs::metadata(output?).ok()?,
    );
    (a.dev() == b.dev() && a.ino() == b.ino()).then(|| {
        format!(
            "-o {} is the input file: name another output file",
            output.map_or_else(String::new, |p| p.display().to_string())
        )
    })
}

/// `uevrec decode`.
#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// The perf.data file (file or pipe mode); standard input if absent or "-". A
    /// truncated or never-finished (killed) perf.data or trace.dat is salvaged: every whole record, then a
    /// {"uevrec":"notice","what":"truncated"} line, and exit status 3.
    #[arg(value_name = "FILE|-")]
    pub input: Option<PathBuf>,
    /// Events to decode, SYSTEM:EVENT with globs (repeatable; default: every event).
    #[arg(short = 'e', long = "event", value_name = "SELECTOR")]
    pub events: Vec<Selector>,
    /// Add the common fields (common_type, common_flags …) as "common":{…} (with
    /// --format otlp: the attribute `linux.tracepoint.common`).
    #[arg(long)]
    pub common: bool,
    /// No schema lines: without it each event's {"uevrec":"schema"} line (its format
    /// from the file) comes before its first record, and each EventHeader metadata
    /// block's when first seen.
    #[arg(long)]
    pub no_schema: bool,
    /// Leave out who wrote each record: no "comm", "cgroup", "container" or "unit"
    /// keys (otherwise taken from the perf.data's COMM, FORK, EXIT and CGROUP records and
    /// the samples' cgroup ids, where the file has them; docs/json-lines.md, "Context").
    #[arg(long)]
    pub no_context: bool,
    /// No "stack" key: without it the lines of samples that carry a call stack
    /// (`record -g --raw`, `perf record -g`) get one, named from this machine's files as
    /// the file's PERF_RECORD_MMAP2 records place them (JSON lines; docs/stacks.md).
    #[arg(long, help_heading = "Call stacks")]
    pub no_stacks: bool,
    /// Addresses only: each user frame with its module, file offset and build id (for
    /// symbolizing elsewhere); kernel frames with their address.
    #[arg(long, help_heading = "Call stacks")]
    pub no_symbolize: bool,
    /// Each distinct stack once, on a line of its own before the first record that
    /// names it ({"uevrec":"stack","id":N,"stack":[…]}); records carry "stack_id":N
    /// instead of "stack" (as `record --stack-ids`; JSON lines; each -o file of a
    /// rotation starts with the stack lines its records may name).
    #[arg(long, help_heading = "Call stacks", conflicts_with = "no_stacks")]
    pub stack_ids: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub debug_dirs: super::stacks::DebugDirArgs,
    /// Output format: json (uevrec's JSON lines), otlp (OTLP/JSON requests) or text (one
    /// readable line per record).
    #[arg(long, value_enum, default_value_t = super::output::Format::Json)]
    pub format: super::output::Format,
    /// Stop after this many records.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Records held to put the CPUs' records in time order (e.g. 64M); past it the
    /// older half is written at once.
    #[arg(long, value_name = "SIZE", default_value_t = DEFAULT_ORDER_BYTES as u64,
          value_parser = values::parse_positive_size)]
    pub order_buffer: u64,
    /// No summary on standard error (errors and notes on the input are still printed).
    #[arg(short, long)]
    pub quiet: bool,
    /// Threads: with N ≥ 2 this thread reads and orders the records, N formatter workers
    /// write the lines (JSON lines; --format otlp on one) and a thread of their own writes
    /// them out; a finished `record --raw` perf.data is cut where its range index says,
    /// and a trace.dat into windows of time, that N workers decode each on their own (JSON
    /// lines; not with --count, EventHeader events with schema lines, or a compressed or
    /// cut-short file; for the index, not with -e leaving out events of the file). Each
    /// piece is checked to start where the one before ended; else the rest is decoded
    /// again by one thread. The output is the same, byte for byte, whatever N; the summary
    /// says how the work was shared. Default: half the online CPUs, at least 1, at most 8.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
    /// With --threads N ≥ 2, the bytes of records a range holds (e.g. 16M): a finished
    /// `record --raw` perf.data is cut at the range index's cuts that many bytes apart
    /// (default: an eighth of a worker's share, 4M to 16M); any other whole perf.data is cut
    /// at its FINISHED_ROUNDs by this thread reading the record headers ahead of the
    /// workers (for many CPUs: on 2 it measured slower than the staged default,
    /// BENCHMARKS.md §30). At most N + 2 ranges' lines wait in memory (about 1.7 × SIZE
    /// each). For a trace.dat: the pages each window of time holds (default 1M, and 128K
    /// a CPU past 8).
    #[arg(long, value_name = "SIZE", value_parser = values::parse_positive_size)]
    pub range_size: Option<u64>,
    /// Write only the records for which the CEL condition EXPR holds over their decoded
    /// values, as `record --where` (docs/filtering.md); `SYSTEM:EVENT=EXPR` for the events
    /// a selector names. Repeatable: every condition that applies must hold. The others
    /// are counted by reason: in the summary and in {"uevrec":"dropped"} lines after the
    /// last record. The same lines whatever --threads.
    #[arg(long = "where", value_name = "EXPR", value_parser = values::parse_where,
          help_heading = "Keeping records")]
    pub where_rules: Vec<crate::pipeline::filter::WhereRule>,
    /// Keep about RATIO of the records of the events SELECTOR names (after --where), as
    /// `record --sample`: chosen by a hash of each record (its bytes, time and thread;
    /// by=pid|tid|trace as there), so the same records in every run and with any
    /// --threads. The others are counted as sampled.
    #[arg(
        long,
        value_name = "SELECTOR=RATIO[,by=KEY]",
        help_heading = "Keeping records"
    )]
    pub sample: Vec<crate::pipeline::filter::SampleRule>,
    /// At most N records a second of the events SELECTOR names (after --where and
    /// --sample), as `record --rate-limit`, by the records' own time stamps (their
    /// trace clock's where the file has no wall-clock time). The records are then judged
    /// one after another in time order (not in ranges or windows of time). The others
    /// are counted as throttled.
    #[arg(
        long,
        value_name = "SELECTOR=N/s[,BURST][,by=pid|pod]",
        help_heading = "Keeping records"
    )]
    pub rate_limit: Vec<crate::pipeline::filter::RateRule>,
    /// Append to the -o file if it exists (by default decode replaces it, as perf's -o
    /// does, so that decoding again gives the same file).
    #[arg(long, requires = "output")]
    pub append: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub output: OutputArgs,
}

/// Exit status of `decode` when the input was cut short (truncated, or a recording that
/// was never finished: killed, crashed, a full disk) and every whole record it holds was
/// decoded: the output ends with a `{"uevrec":"notice","what":"truncated",…}` line and
/// standard error says what is missing and where.
pub const EXIT_SALVAGED: i32 = 3;

/// The default of `decode --threads`: that of `record` ([`crate::recorder::default_threads`]).
fn default_threads() -> usize {
    crate::recorder::default_threads()
}

/// `uevrec decode`.
pub fn decode(args: DecodeArgs) -> i32 {
    if let Some(e) = same_file(args.input.as_deref(), args.output.file()) {
        messages::error(&e);
        return EXIT_ERROR;
    }
    // A condition on a field no event of the file has: refused before the output is
    // opened (standard input is not checked: it is read once).
    if let Some(path) = args.input.as_deref().filter(|p| *p != Path::new("-"))
        && let Err(e) = check_fields(path, &args.where_rules)
    {
        messages::error(&e);
        return super::EXIT_USAGE;
    }
    if args.stack_ids && args.format != super::output::Format::Json {
        messages::error(
            &"--stack-ids writes the stacks of JSON lines once each; OTLP and text lines \
             carry no stacks: drop --stack-ids, or write JSON lines (--format json)",
        );
        return super::EXIT_USAGE;
    }
    let sink = match args.output.open(!args.append, args.stack_ids) {
        Ok(s) => s,
        Err(e) => {
            messages::error(&e);
            return EXIT_ERROR;
        }
    };
    let selectors = &args.events;
    let select = |system: &str, event: &str| {
        selectors.is_empty() || selectors.iter().any(|s| s.matches(system, event))
    };
    args.debug_dirs.apply();
    let opts = DecodeOptions {
        include_common: args.common,
        order_bytes: usize::try_from(args.order_buffer).unwrap_or(usize::MAX),
        max_records: args.count,
        format: args
            .format
            .output_format(args.output.file().is_none() && super::output::stdout_is_terminal()),
        schema: !args.no_schema,
        context: !args.no_context,
        stacks: !args.no_stacks,
        symbolize_stacks: !args.no_symbolize,
        stack_ids: args.stack_ids,
    };
    let input = args.input.as_deref().filter(|p| *p != Path::new("-"));
    let name = input.map_or_else(|| "<stdin>".to_string(), |p| p.display().to_string());
    let started = Instant::now();
    let threads = args.threads.map_or_else(default_threads, usize::from);
    let range = args
        .range_size
        .map(|r| usize::try_from(r).unwrap_or(usize::MAX));
    let filter = Filter::new(
        args.where_rules.clone(),
        args.sample.clone(),
        args.rate_limit.clone(),
    );
    let pick = Pick {
        select: &select,
        filter: filter.as_ref(),
    };
    let (outcome, output_error) =
        crate::offline::decode::run(input, opts, &pick, sink, threads, range);
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            messages::error(&format_args!("{name}: {e}"));
            return EXIT_ERROR;
        }
    };
    match output_error {
        Some(SinkError::Closed) => return EXIT_OUTPUT_CLOSED,
        Some(e) => {
            messages::error(&e);
            return EXIT_ERROR;
        }
        None => {}
    }
    let status = report(&name, &outcome, args.quiet, started);
    if let Some(filter) = filter.filter(|_| !args.quiet) {
        for (event, counted) in filter.counted() {
            messages::print(format_args!(
                "  {:>12}  {event}: {}\n",
                counted.seen(),
                counted.words()
            ));
        }
    }
    status
}

/// Notes, problems and the summary on stderr; the exit status.
///
/// Time: `HEADER_CLOCK_DATA` (written by `perf record -k CLOCK_MONOTONIC`) gives the
/// wall-clock time of each sample; without it `time` is `null` and stderr says so once.
///
/// Exit status: 0; 3 ([`EXIT_SALVAGED`]) when the input is cut short (truncated, or a
/// `record --raw` perf.data that was never finished: killed, crashed; or a trace.dat that
/// ends inside its CPU data: whole pages, and a cut page's complete events, are read) and
/// every whole record before the cut was decoded (the output ends with a
/// `{"uevrec":"notice","what":"truncated",…}` line, stderr says what is missing and
/// where); 1 when the input is corrupt (everything before the problem is written; stderr
/// says at which byte and why), or the output failed; 141 when standard output was closed
/// by its reader.
pub(crate) fn report(name: &str, o: &Outcome, quiet: bool, started: Instant) -> i32 {
    let s = &o.stats;
    for e in &s.errors {
        messages::error(&format_args!("{name}: {e}"));
    }
    for e in &o.problems {
        messages::error(&format_args!("{name}: {e}"));
    }
    if o.unlisted > 0 {
        messages::error(&format_args!("{name}: … and {} more problems", o.unlisted));
    }
    if let Some(e) = &o.stopped {
        messages::error(&format_args!("{name}: decoding stopped: {e}"));
    }
    if let Some(msg) = o.truncated_summary.as_ref().or(o.truncated.as_ref()) {
        messages::print(format_args!(
            "uevrec: {name}: truncated input salvaged: {msg}\n"
        ));
    }
    if s.time_unknown > 0 {
        let why = if let Some(note) = &o.time_note {
            note.as_str()
        } else if o.clock_data {
            "their events' clock is not the clock of the file's HEADER_CLOCK_DATA"
        } else {
            "the file has no HEADER_CLOCK_DATA (`perf record -k CLOCK_MONOTONIC` writes one)"
        };
        messages::print(format_args!(
            "uevrec: {name}: \"time\" is null in {} lines: {why}\n",
            s.time_unknown
        ));
    }
    for (event, n) in &s.skipped {
        messages::print(format_args!(
            "uevrec: {name}: {n} samples of {event} not decoded (written as \"undecoded\" \
             notices with their bytes in hex)\n"
        ));
    }
    if s.unknown_event > 0 {
        messages::print(format_args!(
            "uevrec: {name}: {} records of no known event (no event the file describes has their id)\n",
            s.unknown_event
        ));
    }
    if s.late > 0 {
        let why = if s.order_buffer_full > 0 {
            "--order-buffer was full; a larger one may help"
        } else {
            "they came after a FINISHED_ROUND that should have followed them; perf script \
             counts them as out of order events too"
        };
        messages::print(format_args!(
            "uevrec: {name}: {} records written out of time order ({why})\n",
            s.late
        ));
    }
    if !quiet {
        let shared = o.shared.as_ref().map(|how| format!(" ({how})"));
        messages::print(format_args!(
            "uevrec: {} records, {} lost, from {name} in {:.1} s{}\n",
            s.records,
            s.lost_words(),
            started.elapsed().as_secs_f64(),
            shared.unwrap_or_default()
        ));
    }
    if o.stopped.is_some() || s.error_count > 0 || !o.problems.is_empty() {
        EXIT_ERROR
    } else if o.truncated.is_some() {
        EXIT_SALVAGED
    } else {
        EXIT_OK
    }
}
