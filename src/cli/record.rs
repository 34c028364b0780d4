//! `uevrec record` and `uevrec tail`: flags → a validated [`Config`] and a sink, the
//! [`Recorder`] runs them, then the summary and the exit status.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use super::output::Format;
use super::{
    EXIT_ERROR, EXIT_OK, EXIT_OUTPUT_CLOSED, RawFormat, RecordArgs, RecordingArgs, TailArgs,
};
use crate::capture::backend::BackendKind;
use crate::capture::ftrace::SpoolPlan;
use crate::capture::selector::default_selectors;
use crate::capture::session::{SessionConfig, Summary};
use crate::capture::tracefs::TracefsError;
use crate::messages;
use crate::outputs::flight::FlightSummary;
use crate::outputs::raw::dat::DatOutput;
use crate::outputs::raw::file::PerfDataFile;
use crate::outputs::raw::host::HostInfo;
use crate::outputs::raw::{Raw, RawError, RawOutput, RawSummary};
use crate::outputs::sink::SinkError;
use crate::outputs::sink::stdout::StdoutSink;
use crate::pipeline::filter::{DropReason, Filter};
use crate::recorder::{Config, Outputs, PipelineOptions, Recorder};
use crate::system::signals::SignalFlags;

/// `uevrec record`: pre-registered events (`--register`) live exactly as long as this
/// call, whatever the exit path.
pub fn record(args: RecordArgs) -> i32 {
    with_registered(args, |a| &a.rec, record_run)
}

/// `run(args)` between creating the pre-registered events of `args`' recording flags
/// (`rec`) and deleting the ones this call created: the exit status is the worse of the
/// run's and the deletes'.
fn with_registered<A>(
    args: A,
    rec: impl Fn(&A) -> &RecordingArgs,
    run: impl FnOnce(A) -> i32,
) -> i32 {
    let flags = rec(&args);
    let mut registered = match flags
        .register
        .prepare(flags.session.events.tracefs.as_deref(), flags.quiet)
    {
        Ok(r) => r,
        Err(e) => {
            messages::error(&e);
            return EXIT_ERROR;
        }
    };
    let status = run(args);
    status.max(super::register::finish(&mut registered))
}

fn record_run(args: RecordArgs) -> i32 {
    crate::system::durable::set_policy(args.fsync);
    if let Some(why) = super::stacks::unsupported_output(
        &args.rec.session.stacks,
        args.rec.format == Some(Format::Text),
        // A perf.data carries stacks with its process records (not without context); a
        // trace.dat its pages' stack records (frame pointers: no dwarf stack copies).
        args.raw.is_some()
            && if args.raw_format == RawFormat::TraceDat {
                let request = args.rec.session.stacks.request();
                request.is_some_and(|r| r.dwarf.is_some())
            } else {
                args.rec.no_context
            },
    ) {
        messages::error(&why);
        return EXIT_ERROR;
    }
    let json_lines = !args.export.enabled()
        && args.rec.format.unwrap_or_default() == Format::Json
        && (args.raw.is_none() || args.output.output.is_some());
    let stacks = &args.rec.session.stacks;
    if let Some(why) =
        super::stacks::stack_ids_refused(stacks, json_lines, args.flight.flight.is_some())
    {
        messages::error(&why);
        return EXIT_ERROR;
    }
    if args.export.enabled() {
        return export(&args);
    }
    if let Some(size) = args.flight.flight {
        return flight(&args, size);
    }
    if let Err(e) = check_raw_format(&args) {
        messages::error(&e);
        return EXIT_ERROR;
    }
    // With --raw, JSON lines only when -o asks for them.
    let sink = if args.raw.is_none() || args.output.output.is_some() {
        match args.output.open(false, stacks.stack_ids) {
            Ok(s) => Some(s),
            Err(e) => {
                messages::error(&e);
                return EXIT_ERROR;
            }
        }
    } else {
        None
    };
    let thins = !(args.rec.where_rules.is_empty()
        && args.rec.sample.is_empty()
        && args.rec.rate_limit.is_empty());
    if sink.is_none() && thins {
        messages::error(
            &"--where, --sample and --rate-limit choose which lines are written: --raw \
              FILE without -o writes none (the perf.data keeps every record); add -o",
        );
        return super::EXIT_USAGE;
    }
    let status_line = (args.output.file().is_some() || args.raw.is_some())
        && !args.rec.quiet
        && std::io::stderr().is_terminal();
    let mut config = match config(&args.rec, status_line) {
        Ok(c) => c,
        Err(e) => {
            messages::error(&e);
            return e.exit_status();
        }
    };
    if args.output.file().is_none() && args.raw.is_none() {
        // Lines to standard output (a terminal, a pipe): live, as `tail`.
        config.session.poll_timeout = crate::capture::session::LIVE_POLL_TIMEOUT;
    }
    if args.output.file().is_none() && super::output::stdout_is_terminal() {
        // Lines on a terminal: --format text in colors (unless NO_COLOR).
        config.pipeline.format = args.rec.format.unwrap_or_default().output_format(true);
    }
    let trace_dat = args.raw.is_some() && args.raw_format == RawFormat::TraceDat;
    if trace_dat {
        // Nothing of who is who is staged: the trace.dat's names are the kernel's saved
        // cmdlines.
        config.session.context = false;
    } else if args.raw.is_some() {
        // The perf.data carries the context whatever the lines' format (its COMM, FORK,
        // EXIT and CGROUP records, as perf record writes them).
        config.session.context = !args.rec.no_context;
    }
    let raw = match &args.raw {
        Some(path) => match raw_output(path, &args, &mut config, sink.is_none()) {
            Ok(r) => Some(r),
            Err(e) => {
                messages::error(&e);
                return EXIT_ERROR;
            }
        },
        None => None,
    };
    let recorder = match (raw, sink) {
        (Some(raw), Some(sink)) => Recorder::new(
            config,
            Outputs::Lines {
                sink,
                raw: Some(raw),
            },
        ),
        (Some(raw), None) => Recorder::new(config, Outputs::Raw(raw)),
        // Without --raw the sink is always opened; standard output otherwise.
        (None, sink) => Recorder::new(
            config,
            Outputs::lines(sink.unwrap_or_else(|| Box::new(StdoutSink::new(false)))),
        ),
    };
    run(recorder, &args.rec, status_line && !trace_dat)
}

/// `uevrec record --otlp`: the records go to a collector (crate::delivery), with a
/// perf.data too when --raw asks.
fn export(args: &RecordArgs) -> i32 {
    let refused = if args.output.output.is_some() {
        Some(
            "--otlp sends the records to a collector instead of -o: drop -o (or run a \
             second uevrec for JSON lines; --raw FILE works beside --otlp)",
        )
    } else if args.flight.flight.is_some() {
        Some("--otlp and --flight do not go together: the flight recorder keeps records in memory")
    } else if args.raw.is_some() && args.raw_format == RawFormat::TraceDat {
        Some(
            "--otlp reads the records while recording: --raw-format trace-dat does not (use perf-data)",
        )
    } else {
        None
    };
    if let Some(why) = refused {
        messages::error(&why);
        return EXIT_ERROR;
    }
    let mut config = match config(&args.rec, false) {
        Ok(c) => c,
        Err(e) => {
            messages::error(&e);
            return e.exit_status();
        }
    };
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty());
    let opened = match args.export.open(args.rec.quiet, host) {
        Ok(r) => r,
        Err(e) => {
            messages::error(&e);
            return EXIT_ERROR;
        }
    };
    let super::export::ExportRun {
        mut sink,
        shared,
        encoding,
        stats,
        server,
        health,
        queue: _,
        spool_dir,
    } = opened;
    config.pipeline.format = uevrec_parsers::OutputFormat::OtlpExport(encoding);
    if let (Some(filter), Some(metrics)) = (&config.pipeline.filter, shared.ledger.metrics()) {
        let filter = std::sync::Arc::clone(filter);
        metrics.on_scrape(Box::new(move |m| {
            for (tracepoint, counted) in filter.counted() {
                for reason in DropReason::ALL {
                    m.records_not_kept(&tracepoint, reason.as_str(), counted.dropped(reason));
                }
            }
        }));
    }
    config.pipeline.stats = Some(stats);
    // OTLP records carry the Kubernetes identity as resource attributes (docs/otlp.md).
    config.session.context = !args.rec.no_context;
    let raw = match &args.raw {
        Some(path) => match raw_output(path, args, &mut config, false) {
            Ok(raw) => Some(raw),
            Err(e) => {
                messages::error(&e);
                return EXIT_ERROR;
            }
        },
        None => None,
    };
    let flags = match SignalFlags::install() {
        Ok(f) => f,
        Err(e) => {
            messages::error(&format_args!("installing signal handlers: {e}"));
            return EXIT_ERROR;
        }
    };
    // Once stopping, a writer waiting for room in a full spool waits --drain-timeout more.
    sink.stop_waiting_after(flags.stop.clone(), args.export.drain_timeout);
    let sink = Box::new(sink);
    let recorder = Recorder::new(config, Outputs::Lines { sink, raw });
    let status = run_with(recorder, &args.rec, false, &flags);
    if let Some(h) = &health {
        h.set_stopping();
    }
    if !args.rec.quiet {
        let snap = shared.ledger.snapshot();
        messages::print(format_args!(
            "{}",
            super::export::summary_text(&snap, spool_dir.as_deref())
        ));
    }
    if let Some(s) = server {
        s.shutdown();
    }
    status
}

/// `--raw-format trace-dat` with what it cannot go with: the error, which says the fix.
fn check_raw_format(args: &RecordArgs) -> Result<(), String> {
    if args.raw_format != RawFormat::TraceDat {
        return Ok(());
    }
    let why = if args.raw.is_none() {
        "--raw-format trace-dat is the format of --raw FILE: add --raw FILE"
    } else if args.rec.instance.instance.is_some() {
        "--instance does not go with --raw-format trace-dat yet (a killed trace-dat run is \
         recovered with `uevrec recover FILE`): drop --instance, or record JSON lines"
    } else if args.rec.session.backend != BackendKind::Ftrace {
        "--raw-format trace-dat moves the pages of ftrace rings: add --backend ftrace (or \
         use --raw-format perf-data)"
    } else if args.output.output.is_some() {
        "--raw-format trace-dat writes no JSON lines while recording (the records are not \
         read then): drop -o and run `uevrec decode FILE` afterwards (or use --raw-format \
         perf-data)"
    } else if args.rec.count.is_some() {
        "--raw-format trace-dat does not count records while recording: use --duration \
         instead of --count (or --raw-format perf-data)"
    } else {
        return Ok(());
    };
    Err(why.into())
}

/// `uevrec record --flight SIZE`: no sink, the flight recorder's dumps.
fn flight(args: &RecordArgs, size: u64) -> i32 {
    let out = args.output.file();
    let prepared = args
        .flight
        .options(size, out, args.output.file_mode, args.rec.quiet)
        .and_then(|f| Ok((f, config(&args.rec, false).map_err(|e| e.to_string())?)));
    let (flight, mut config) = match prepared {
        Ok(p) => p,
        Err(e) => {
            messages::error(&e);
            return EXIT_ERROR;
        }
    };
    let session = &mut config.session;
    if session.selectors.is_empty() && !flight.triggers.is_empty() {
        session.selectors = default_selectors();
    }
    session.selectors.extend(flight.triggers.iter().cloned());
    session.triggers = flight.triggers.clone();
    session.trigger_filter = args.flight.trigger_filter.clone();
    run(
        Recorder::new(config, Outputs::Flight(Box::new(flight))),
        &args.rec,
        false,
    )
}

/// The file of `--raw PATH`: created now (so a bad path fails before recording). For a
/// trace.dat, `config` gets the spool plan its backend fills.
fn raw_output(
    path: &std::path::Path,
    args: &RecordArgs,
    config: &mut Config,
    notices: bool,
) -> Result<Raw, String> {
    if path == std::path::Path::new("-") {
        return Err(
            "--raw needs a file, not standard output: a file-mode perf.data gets its \
                    header written at the end (perf's pipe mode is not written)"
                .into(),
        );
    }
    let tracefs = config
        .session
        .tracefs
        .as_ref()
        .expect("config() finds tracefs");
    let host = HostInfo::read(tracefs).map_err(|e| e.to_string())?;
    let notices = notices && !args.rec.quiet;
    if args.raw_format == RawFormat::TraceDat {
        let plan = SpoolPlan::new(path);
        let out = DatOutput::create(path, args.output.file_mode, host, plan.clone(), notices)
            .map_err(|e| e.to_string())?
            .with_stacks(config.session.stacks.is_some());
        config.session.spool = Some(plan);
        return Ok(Raw::TraceDat(out));
    }
    let file = PerfDataFile::create(path, args.output.file_mode).map_err(|e| e.to_string())?;
    let cmdline = std::env::args().collect();
    Ok(Raw::PerfData(
        RawOutput::new(file, host, cmdline, notices, config.session.context)
            .with_stacks(config.session.stacks),
    ))
}

/// `uevrec tail` (with its pre-registered events, as [`record`]).
pub fn tail(args: TailArgs) -> i32 {
    with_registered(args, |a| &a.rec, tail_run)
}

fn tail_run(args: TailArgs) -> i32 {
    if let Some(why) = super::stacks::unsupported_output(
        &args.rec.session.stacks,
        args.rec.format == Some(Format::Text),
        false,
    ) {
        messages::error(&why);
        return EXIT_ERROR;
    }
    if let Some(why) = super::stacks::stack_ids_refused(
        &args.rec.session.stacks,
        args.rec.format != Some(Format::Otlp),
        false,
    ) {
        messages::error(&why);
        return EXIT_ERROR;
    }
    let config = match config(&args.rec, false) {
        Ok(c) => c,
        Err(e) => {
            messages::error(&e);
            return e.exit_status();
        }
    };
    let mut config = config;
    config.session.poll_timeout = crate::capture::session::LIVE_POLL_TIMEOUT;
    match tail_format(&args) {
        Ok(format) => config.pipeline.format = format,
        Err(e) => {
            messages::error(&e);
            return EXIT_ERROR;
        }
    }
    let sink = Box::new(StdoutSink::new(args.pretty));
    run(
        Recorder::new(config, Outputs::lines(sink)),
        &args.rec,
        false,
    )
}

/// `tail`'s format: `--format`, else text on a terminal (JSON lines in a pipe or a file,
/// with `--pretty`, or with call stacks: text lines do not carry them).
fn tail_format(args: &TailArgs) -> Result<uevrec_parsers::OutputFormat, &'static str> {
    let terminal = super::output::stdout_is_terminal();
    let stacks = args.rec.session.stacks.request().is_some();
    let format = match args.rec.format {
        Some(f) => f,
        None if terminal && !args.pretty && !stacks => Format::Text,
        None => Format::Json,
    };
    if args.pretty && format != Format::Json {
        return Err("--pretty indents JSON lines: use it with --format json only");
    }
    Ok(format.output_format(terminal))
}

/// Why the flags make no [`Config`].
#[derive(Debug, thiserror::Error)]
enum ConfigError {
    /// tracefs is not there (or not usable).
    #[error(transparent)]
    Tracefs(#[from] TracefsError),
    /// A `--where` reads a field no matching event has.
    #[error("{0}")]
    Where(crate::pipeline::filter::WhereError),
    /// `--instance` cannot be used as asked (with the perf backend, say).
    #[error("{0}")]
    Instance(String),
}

impl ConfigError {
    /// The exit status: 2 for a `--where` the user must fix, 1 otherwise.
    fn exit_status(&self) -> i32 {
        match self {
            ConfigError::Tracefs(_) | ConfigError::Instance(_) => EXIT_ERROR,
            ConfigError::Where(_) => super::EXIT_USAGE,
        }
    }
}

/// The `--where` filter of `rec` (`None` without one), its fields checked against the
/// formats of the events the session's selectors match now.
fn where_filter(
    rec: &RecordingArgs,
    session: &SessionConfig,
) -> Result<Option<std::sync::Arc<Filter>>, ConfigError> {
    if rec.where_rules.is_empty() && rec.sample.is_empty() && rec.rate_limit.is_empty() {
        return Ok(None);
    }
    check_where_fields(&rec.where_rules, session).map_err(ConfigError::Where)?;
    let filter = Filter::new(
        rec.where_rules.clone(),
        rec.sample.clone(),
        rec.rate_limit.clone(),
    );
    if let Some(f) = &filter {
        f.say_dropped_every(rec.dropped_every);
    }
    Ok(filter)
}

/// Check that every `fields.NAME` of `rules` is a field of an event the session's
/// selectors match now ([`Filter::check_fields`]; `record` and `top`).
pub(super) fn check_where_fields(
    rules: &[crate::pipeline::filter::WhereRule],
    session: &SessionConfig,
) -> Result<(), crate::pipeline::filter::WhereError> {
    if let Some(tracefs) = session.tracefs.as_ref().filter(|_| !rules.is_empty()) {
        let selectors = if session.selectors.is_empty() {
            default_selectors()
        } else {
            session.selectors.clone()
        };
        let formats: Vec<_> = tracefs
            .list_events()
            .unwrap_or_default()
            .into_iter()
            .filter(|(s, e)| selectors.iter().any(|sel| sel.matches(s, e)))
            .filter_map(|(s, e)| {
                let format = tracefs.read_format(&s, &e).ok()?;
                Some((s, e, format))
            })
            .collect();
        Filter::check_fields(rules, &formats)?;
    }
    Ok(())
}

/// The flags as a [`Config`]; tracefs is found (and checked) here, once.
fn config(rec: &RecordingArgs, status_line: bool) -> Result<Config, ConfigError> {
    let instance = rec
        .instance
        .spec(rec.session.backend)
        .map_err(ConfigError::Instance)?;
    let session = SessionConfig {
        instance,
        include_common: rec.common,
        schema: !rec.no_schema,
        quiet: rec.quiet,
        max_records: rec.count,
        // JSON lines carry every context key, OTLP the Kubernetes identity (docs/otlp.md).
        context: !rec.no_context,
        pod_logs: crate::capture::kubernetes::PodLogDirs {
            pods: rec.k8s_pod_logs.clone(),
            containers: rec.k8s_container_logs.clone(),
        },
        drain_threads: rec
            .drain_threads
            .map_or_else(crate::capture::session::default_drain_threads, usize::from),
        ..rec.session.session_config()?
    };
    let mut session = session;
    rec.register.add_selectors(&mut session.selectors);
    let filter = where_filter(rec, &session)?;
    session.pushed = Filter::pushed_terms(&rec.where_rules);
    let pipeline = PipelineOptions {
        duration: rec.duration,
        status_line,
        // `tail` chooses its own default ([`tail_format`]).
        format: rec.format.unwrap_or_default().output_format(false),
        stats: None,
        threads: rec
            .threads
            .map_or_else(crate::recorder::default_threads, usize::from),
        filter,
    };
    Ok(Config { session, pipeline })
}

fn run(recorder: Recorder, rec: &RecordingArgs, status_line: bool) -> i32 {
    let flags = match SignalFlags::install().and_then(|f| {
        if recorder.is_flight() {
            f.catch_dump()?;
        }
        Ok(f)
    }) {
        Ok(f) => f,
        Err(e) => {
            messages::error(&format_args!("installing signal handlers: {e}"));
            return EXIT_ERROR;
        }
    };
    run_with(recorder, rec, status_line, &flags)
}

/// [`run`] with the signal handlers installed already.
fn run_with(
    recorder: Recorder,
    rec: &RecordingArgs,
    status_line: bool,
    flags: &SignalFlags,
) -> i32 {
    let started = Instant::now();
    let filter = recorder.filter();
    let out = recorder.run(flags);
    if status_line {
        messages::print(format_args!("\r\x1b[K"));
    }
    let raw_status = report_raw(out.raw.as_ref(), rec.quiet);
    let flight_status = report_flight(out.flight.as_ref(), rec.quiet);
    match out.sink {
        Err(SinkError::Closed) => return EXIT_OUTPUT_CLOSED,
        Err(e) => {
            if let Ok(summary) = &out.session {
                print_summary(summary, filter.as_deref(), started.elapsed(), rec.quiet);
            }
            messages::error(&e);
            return EXIT_ERROR;
        }
        Ok(()) => {}
    }
    // A trace.dat's records are not counted while recording (its line said what it holds).
    let counted = match &out.raw {
        Some(Ok(s)) => s.trace_dat.is_none(),
        Some(Err(e)) => e.summary.trace_dat.is_none(),
        None => true,
    };
    match out.session {
        Ok(summary) => {
            let quiet = rec.quiet || !counted;
            print_summary(&summary, filter.as_deref(), started.elapsed(), quiet);
            raw_status.max(flight_status)
        }
        Err(e) => {
            messages::error(&e);
            EXIT_ERROR
        }
    }
}

/// Say what the perf.data holds, or why it is incomplete; the exit status it calls for.
fn report_raw(raw: Option<&Result<RawSummary, RawError>>, quiet: bool) -> i32 {
    match raw {
        None => EXIT_OK,
        Some(Err(e)) if matches!(e.error, SinkError::Closed) => EXIT_OK,
        Some(Err(e)) => {
            messages::error(e);
            EXIT_ERROR
        }
        Some(Ok(s)) => {
            for (why, n) in &s.unwritten {
                messages::error(&format_args!(
                    "{n} records not written to {}: {why}",
                    s.path.display()
                ));
            }
            if let (false, Some(d)) = (quiet, s.trace_dat) {
                messages::print(format_args!(
                    "uevrec: wrote {}: {} ring pages of {} CPUs, {} event formats (`uevrec \
                     decode {}` reads its records and losses)\n",
                    s.path.display(),
                    d.pages,
                    d.cpus,
                    s.events,
                    s.path.display()
                ));
                if let Some(why) = d.kallsyms_missing {
                    messages::print(format_args!("uevrec: notice: {why}\n"));
                }
            } else if !quiet {
                messages::print(format_args!(
                    "uevrec: wrote {}: {} samples of {} events, {} LOST records\n",
                    s.path.display(),
                    s.samples,
                    s.events,
                    s.lost_records
                ));
            }
            for why in [&s.kernel_map_missing, &s.module_maps_missing] {
                if let (false, Some(why)) = (quiet, why) {
                    messages::print(format_args!("uevrec: notice: {why}\n"));
                }
            }
            if !quiet && s.build_ids_left_out > 0 {
                messages::print(format_args!(
                    "uevrec: notice: {} modules the stacks touched are not listed in the \
                     file's build ids (at most {} are): perf takes their symbols from the \
                     files at their paths, unchecked\n",
                    s.build_ids_left_out,
                    crate::outputs::raw::build_ids::MAX_MODULES
                ));
            }
            if s.unwritten.is_empty() {
                EXIT_OK
            } else {
                EXIT_ERROR
            }
        }
    }
}

/// Say what the flight recorder wrote (each dump was reported as it was written); the
/// exit status it calls for (1 when a dump failed).
fn report_flight(flight: Option<&FlightSummary>, quiet: bool) -> i32 {
    let Some(f) = flight else {
        return EXIT_OK;
    };
    if !quiet {
        let mut text = format!("uevrec: flight recorder: {} dumps written", f.dumps.len());
        if f.skipped > 0 {
            text.push_str(&format!(", {} skipped (two were being written)", f.skipped));
        }
        if f.discarded > 0 {
            text.push_str(&format!(
                ", {} records in memory not written (--flight-on-exit writes them)",
                f.discarded
            ));
        }
        messages::print(format_args!("{text}\n"));
    }
    if f.failed > 0 {
        messages::error(&format_args!("{} flight dumps failed", f.failed));
        EXIT_ERROR
    } else {
        EXIT_OK
    }
}

/// The end-of-run summary on stderr; with `--where`, what became of each event's records
/// (recorded = kept + the counts by reason).
fn print_summary(summary: &Summary, filter: Option<&Filter>, elapsed: Duration, quiet: bool) {
    if quiet {
        return;
    }
    let mut text = format!(
        "uevrec: {} records, {} lost, in {:.1} s\n",
        summary.records,
        summary.lost,
        elapsed.as_secs_f64()
    );
    let counted: std::collections::BTreeMap<_, _> = filter
        .map(Filter::counted)
        .unwrap_or_default()
        .into_iter()
        .collect();
    for (event, n) in &summary.records_per_event {
        text.push_str(&format!("  {n:>12}  {event}"));
        if let Some(c) = counted.get(event) {
            text.push_str(&format!(": {}", c.words()));
        }
        text.push('\n');
    }
    for (cpu, n) in summary.lost_per_cpu.iter().filter(|(_, n)| **n > 0) {
        text.push_str(&format!("  {n:>12}  lost on CPU {cpu}\n"));
    }
    if let Some(adopted) = &summary.adopted {
        text.push_str(&format!("  {adopted}\n"));
    }
    let _ = std::io::stderr().write_all(text.as_bytes());
}
