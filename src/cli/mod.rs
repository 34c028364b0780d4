//! The command line: `uevrec record`, `uevrec tail`, `uevrec list`, `uevrec decode`,
//! `uevrec top`.
//!
//! Exit statuses (also in `--help` and docs/overview.md):
//! [`EXIT_OK`] 0 success (also after SIGINT/SIGTERM, `--duration`, `--count`);
//! [`EXIT_ERROR`] 1 an error (tracefs, privileges, output file), printed with its fix;
//! [`EXIT_USAGE`] 2 bad command line; [`EXIT_OUTPUT_CLOSED`] 141 the reader of standard
//! output went away (EPIPE; like a shell's status for SIGPIPE), nothing printed;
//! [`crate::system::signals::FORCED_EXIT_STATUS`] 130 a second SIGINT/SIGTERM cut the shutdown short.
//!
//! Layers, lowest first: `values`, `instance`, `stacks`, `output`, `export`, `register`,
//! `record`, `decode`, `flamegraph`, `flight`, `list`, `recover`, `top`, `docs`.

pub mod decode;
pub mod docs;
pub mod export;
pub mod flamegraph;
pub mod flight;
pub mod instance;
mod list;
pub mod output;
mod record;
pub mod recover;
pub mod register;
pub mod stacks;
pub mod top;
pub mod values;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::capture::selector::Selector;
use crate::capture::tracefs::{Tracefs, TracefsError};

/// Success.
pub const EXIT_OK: i32 = 0;
/// A runtime or setup error.
pub const EXIT_ERROR: i32 = 1;
/// A bad command line (clap's status).
pub const EXIT_USAGE: i32 = 2;
/// Standard output was closed by its reader (EPIPE).
pub const EXIT_OUTPUT_CLOSED: i32 = 141;

const AFTER_HELP: &str = "\
Selectors are SYSTEM:EVENT with shell globs in both parts (e.g. 'user_events:*',
'sched:sched_process_*'); without any, all user_events and user_events_multi events.

Exit status: 0 success (also when stopped by SIGINT/SIGTERM, --duration or --count),
1 error (the message says the fix), 2 bad command line, 141 standard output closed by
its reader (e.g. `uevrec tail | head -1`), 130 a second SIGINT during the shutdown.";

/// Record Linux user_events and other tracepoints as JSON lines.
#[derive(Debug, Parser)]
#[command(name = "uevrec", version, about, after_help = AFTER_HELP)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
// Parsed once per run: the size of `record`'s flags does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Record events as JSON lines into a file (-o) or standard output.
    Record(RecordArgs),
    /// Print events on standard output as they happen: readable lines on a terminal
    /// (--format text), JSON lines in a pipe or a file.
    Tail(TailArgs),
    /// List the matching events with their fields.
    List(ListArgs),
    /// Decode a perf.data file (or pipe-mode stream on stdin) into the same JSON lines.
    Decode(decode::DecodeArgs),
    /// Draw a flame graph (SVG, or --folded stacks) of where the records of a recording
    /// made with -g come from (JSON lines, perf.data or trace.dat).
    Flamegraph(flamegraph::FlamegraphArgs),
    /// Live view of the busiest events and processes, and with -g their busiest call
    /// paths (JSON lines when stdout is not a terminal).
    Top(top::TopArgs),
    /// Create a persistent user_event (`NAME FIELDS`) before its producers start.
    Register(register::RegisterArgs),
    /// Delete a persistent user_event (`NAME [FIELDS]`).
    Unregister(register::UnregisterArgs),
    /// Write one user_event record from the shell (`NAME [FIELD=VALUE ...]`).
    Emit(register::EmitArgs),
    /// Assemble the trace.dat of a killed `record --raw FILE --raw-format trace-dat` from
    /// the spools it left beside FILE.
    Recover(recover::RecoverArgs),
    /// Print a shell completion script (bash, zsh, fish …), e.g.
    /// `uevrec completions bash > /etc/bash_completion.d/uevrec`.
    Completions(docs::CompletionsArgs),
    /// Write the man pages (uevrec.1, uevrec-COMMAND.1) into a folder.
    Man(docs::ManArgs),
}

/// Which events, and where tracefs is.
#[derive(Debug, Args)]
pub struct EventArgs {
    /// Events to record, SYSTEM:EVENT with globs (default: all user_events).
    #[arg(value_name = "SELECTOR")]
    pub selectors: Vec<Selector>,
    /// An event selector (repeatable; same as a positional SELECTOR).
    #[arg(short = 'e', long = "event", value_name = "SELECTOR")]
    pub events: Vec<Selector>,
    /// Where tracefs is mounted (default: found in /proc/self/mounts).
    #[arg(long, env = "UEVREC_TRACEFS", value_name = "PATH")]
    pub tracefs: Option<PathBuf>,
}

impl EventArgs {
    /// Positional and `-e` selectors together.
    pub fn all_selectors(&self) -> Vec<Selector> {
        self.selectors.iter().chain(&self.events).cloned().collect()
    }

    /// Find tracefs; without selectors (all user_events) a kernel without user_events is
    /// an error, since none can ever appear (CONFIG_USER_EVENTS is not a module).
    pub fn tracefs(&self) -> Result<Tracefs, TracefsError> {
        let tracefs = Tracefs::discover(self.tracefs.as_deref())?;
        if self.selectors.is_empty() && self.events.is_empty() && !tracefs.has_user_events() {
            return Err(TracefsError::NoUserEvents(
                tracefs.root().join("user_events_data"),
            ));
        }
        Ok(tracefs)
    }
}

/// What a session records and how: the options `record`, `tail` and `top` share.
#[derive(Debug, Args)]
pub struct SessionArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub events: EventArgs,
    /// Ring size per CPU: pages (a plain number), or a size such as 512k or 4M; rounded up
    /// to a power of two pages.
    #[arg(short = 'm', long, value_name = "PAGES|SIZE", default_value = "128",
          value_parser = values::parse_buffer_pages)]
    pub buffer_size: crate::capture::perf::RingPages,
    /// How events reach uevrec: perf rings (one descriptor per event and CPU), or a
    /// private tracefs instance read page by page (cheaper for the traced programs, no
    /// descriptor per event; needs root).
    #[arg(long, value_enum, value_name = "BACKEND", default_value = "perf")]
    pub backend: crate::capture::backend::BackendKind,
    /// Kernel-side filter applied to every event (ftrace syntax, e.g. 'pid > 100').
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<String>,
    /// Record only events of this process.
    #[arg(long, value_name = "PID")]
    pub pid: Option<i32>,
    /// Also record events written by uevrec itself.
    #[arg(long)]
    pub include_self: bool,
    /// How often to look for new events matching the selectors.
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = values::parse_positive_duration)]
    pub rescan_interval: Duration,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub stacks: stacks::StackArgs,
}

impl SessionArgs {
    /// The session these flags ask for (no common fields, no record limit, no schema
    /// lines, messages on standard error, no triggers); tracefs is
    /// found (and checked) here, and `--debug-dir` made the symbolizers' (process-wide).
    pub fn session_config(&self) -> Result<crate::capture::session::SessionConfig, TracefsError> {
        self.stacks.debug_dirs.apply();
        Ok(crate::capture::session::SessionConfig {
            tracefs: Some(self.events.tracefs()?),
            selectors: self.events.all_selectors(),
            backend: self.backend,
            buffer_pages: self.buffer_size,
            filter: self.filter.clone(),
            pid: self.pid,
            include_self: self.include_self,
            rescan_interval: self.rescan_interval,
            stacks: self.stacks.request(),
            symbolize: !self.stacks.no_symbolize,
            stack_ids: self.stacks.stack_ids,
            ..Default::default()
        })
    }
}

/// Options of every recording command.
#[derive(Debug, Args)]
pub struct RecordingArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub session: SessionArgs,
    /// Add the common fields (common_type, common_flags …) as "common":{…} (with
    /// --format otlp: the attribute `linux.tracepoint.common`).
    #[arg(long)]
    pub common: bool,
    /// No self-describing lines: without it the output starts with a
    /// {"uevrec":"session"} line and each event format (and EventHeader metadata block)
    /// gets a {"uevrec":"schema"} line before its first record.
    #[arg(long)]
    pub no_schema: bool,
    /// Leave out who wrote each record: no "comm", "cgroup", "container", "unit" or
    /// "k8s_*" keys (OTLP: no k8s.* / container.id resource attributes), no /proc scan
    /// at start and no tracking of thread names (saves a few ns per record;
    /// docs/json-lines.md, "Context").
    #[arg(long)]
    pub no_context: bool,
    /// Output format: json (uevrec's JSON lines), otlp (OTLP/JSON requests) or text (one
    /// readable line per record). Default: json; for `tail` writing to a terminal, text
    /// (json in a pipe or a file, with --pretty, or with -g: text lines carry no stacks).
    #[arg(long, value_enum)]
    pub format: Option<output::Format>,
    /// Stop after this long (e.g. 10s, 1m).
    #[arg(long, value_name = "DUR", value_parser = values::parse_positive_duration)]
    pub duration: Option<Duration>,
    /// Stop after this many records.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Formatter threads writing the JSON lines in parallel (the output is the same, in
    /// the same order, whatever N). Default: half the online CPUs, at least 1, at most 8.
    /// --format otlp too (its requests end with each staged chunk); --format text is
    /// formatted on one thread whatever N.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
    /// Threads that drain the rings (either backend) while they are busy, each a group of
    /// CPUs next to each other (records of one CPU stay in order); started once for the
    /// session (`uevrec-drain`, no more than the CPUs recorded). Default: a quarter of the
    /// online CPUs, at least 1 (1: the session thread drains every ring).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub drain_threads: Option<u16>,
    /// No status line, summary or waiting/matching messages on standard error (errors
    /// are still printed; the in-band notices stay).
    #[arg(short, long)]
    pub quiet: bool,
    /// Keep only the records for which the CEL condition EXPR holds over their decoded
    /// values: system, event, cpu, pid, tid, comm, cgroup, container, unit, k8s_*,
    /// fields.NAME (EventHeader payloads too: fields.PartB.name), and for EventHeader
    /// events provider, name, level, keyword, opcode (`fields.args[1] % 3 == 0`,
    /// `level <= 2`; docs/filtering.md);
    /// `SYSTEM:EVENT=EXPR` for the events a selector names. Repeatable: every condition
    /// that applies must hold. The others are counted by reason (summary,
    /// {"uevrec":"dropped"} lines every --dropped-every and at the end, /metrics). A perf.data of --raw keeps every
    /// record (the evidence); only the lines are filtered.
    #[arg(long = "where", value_name = "EXPR", value_parser = values::parse_where)]
    pub where_rules: Vec<crate::pipeline::filter::WhereRule>,
    /// Keep about RATIO (above 0, at most 1) of the records of the events SELECTOR names
    /// (after --where), chosen by a hash of each record (by=pid|tid: of its process or
    /// thread, kept or dropped whole; by=trace: OpenTelemetry's rule on an EventHeader
    /// span's or log's trace id, a trace kept or dropped whole): the same records in
    /// every run. Repeatable; the first that names an event applies. The others are
    /// counted as sampled.
    #[arg(long, value_name = "SELECTOR=RATIO[,by=KEY]")]
    pub sample: Vec<crate::pipeline::filter::SampleRule>,
    /// At most N records a second of the events SELECTOR names (after --where and
    /// --sample), BURST at once (default N): a token bucket filled by the records' own
    /// time, one per event, or per process with by=pid, per Kubernetes pod with by=pod.
    /// Repeatable; the first that names an event applies. The others are counted as
    /// throttled.
    #[arg(long, value_name = "SELECTOR=N/s[,BURST][,by=pid|pod]")]
    pub rate_limit: Vec<crate::pipeline::filter::RateRule>,
    /// With --where, --sample or --rate-limit: every DURATION, a {"uevrec":"dropped"}
    /// line per tracepoint and reason with records not kept since the last one (they
    /// add up to the counts); also at the end. 0: at the end only.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = values::parse_duration)]
    pub dropped_every: std::time::Duration,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub register: register::RegisterFlags,
    /// The kubelet's pod log directories (NAMESPACE_POD_UID), which name the pods
    /// whose UIDs the cgroups give (k8s_namespace, k8s_pod keys; docs/json-lines.md,
    /// "Kubernetes").
    #[arg(long, value_name = "DIR", default_value = crate::capture::kubernetes::DEFAULT_POD_LOGS)]
    pub k8s_pod_logs: std::path::PathBuf,
    /// The kubelet's container log links (POD_NAMESPACE_CONTAINER-ID.log), which
    /// name the containers (k8s_container key).
    #[arg(long, value_name = "DIR", default_value = crate::capture::kubernetes::DEFAULT_CONTAINER_LOGS)]
    pub k8s_container_logs: std::path::PathBuf,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub instance: instance::InstanceArgs,
}

/// `uevrec record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub rec: RecordingArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub output: output::OutputArgs,
    /// Write the records to FILE as a perf.data (perf script, perf report and uevrec
    /// decode read it); JSON lines too only when -o is given. FILE must not exist.
    #[arg(long, value_name = "FILE")]
    pub raw: Option<PathBuf>,
    /// The format of --raw FILE: perf-data (the records re-encoded as perf samples), or
    /// trace-dat (trace-cmd's trace.dat: the rings' pages moved whole into the file, no
    /// per-event work while recording, the least cost for the traced programs; needs
    /// --backend ftrace).
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "perf-data")]
    pub raw_format: RawFormat,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub flight: flight::FlightArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub export: export::ExportArgs,
    /// How much a power cut may take from the files written (a kill of uevrec alone
    /// takes nothing the kernel was given): never (the kernel writes back when it likes,
    /// typically within 30 s), batch (-o: each batch of lines; --raw trace-dat: each round
    /// of ring pages moved and each event format; flight dumps and rotated files: before
    /// their rename into place; --raw perf-data: each append of records and the finish), or INTERVAL such as 1s
    /// (at a write at least INTERVAL after the last sync, -o also while idle, and at the
    /// end). Dumps, rotated files and the trace.dat appear whole under their names
    /// whatever the policy (docs/json-lines.md, docs/record-trace-dat.md).
    #[arg(long, value_name = "never|batch|INTERVAL", default_value = "never")]
    pub fsync: crate::system::durable::FsyncPolicy,
}

/// The file format of `record --raw`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RawFormat {
    /// perf.data (perf script, perf report, uevrec decode).
    PerfData,
    /// trace-cmd's trace.dat v6 (trace-cmd report, uevrec decode); --backend ftrace.
    TraceDat,
}

/// `uevrec tail`.
#[derive(Debug, Args)]
pub struct TailArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub rec: RecordingArgs,
    /// Indented JSON for humans (one record spans several lines).
    #[arg(long)]
    pub pretty: bool,
}

/// `uevrec list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub events: EventArgs,
    /// Print each event's full schema as a JSON line.
    #[arg(long)]
    pub json: bool,
}

/// Run the command line; returns the exit status.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
            // Help/version go to stdout; a closed stdout is not worth a panic.
            let _ = e.print();
            return code;
        }
    };
    match cli.command {
        Command::Record(args) => record::record(args),
        Command::Tail(args) => record::tail(args),
        Command::List(args) => list::list(&args),
        Command::Decode(args) => decode::decode(args),
        Command::Flamegraph(args) => flamegraph::flamegraph(&args),
        Command::Top(args) => top::top(&args),
        Command::Register(args) => register::register(&args),
        Command::Unregister(args) => register::unregister(&args),
        Command::Emit(args) => register::emit(&args),
        Command::Recover(args) => recover::recover(&args),
        Command::Completions(args) => docs::completions(&args),
        Command::Man(args) => docs::man(&args),
    }
}
