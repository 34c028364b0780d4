//! trace.dat records → the JSON lines live recording writes: the whole of `uevrec decode`
//! for a trace.dat but the I/O.

use super::{DecodeOptions, DecodeStats, SchemaOnce, hex};
use crate::{
    ContextTracker, ContextUpdate, Endian, Judged, LineOptions, OutputFormat, OutputWriter,
    PreparedFormat, RecordJudge, RecordSink, RecordStamp, RecordWriter, split_multi_format,
};

use crate::callchain::Callchain;
use crate::ftrace_page::losses::Losses;
use crate::ftrace_page::stacks::{
    CHAIN_ENDIAN, Offered, StackEvents, StackFields, StackKind, StackTie, Tie, Untied,
};
use crate::output::{StackNamer, add_stack};
use crate::trace_dat::{ErrorKind, Item, Record, Records, TraceDat, TraceDatError};

/// What the `stacks` notice of a trace.dat with stack records says, then
/// [`KALLSYMS_OF_FILE`] or [`KALLSYMS_OF_HOST`].
pub const STACKS_NOTE: &str = "the stacks come from the file's ftrace kernel_stack and \
    user_stack records, each tied to the record it follows on its CPU: user frames are \
    addresses only (unsymbolized: no_mapping), since a trace.dat carries no mappings of the \
    processes; ";

/// The end of the `stacks` notice when the file holds a kallsyms section.
pub const KALLSYMS_OF_FILE: &str =
    "kernel frames are named from the file's kallsyms (the recording machine's)";

/// The end of the `stacks` notice when the file holds no kallsyms.
pub const KALLSYMS_OF_HOST: &str = "kernel frames are named from this machine's \
    /proc/kallsyms (the file holds none: recorded without -g, by a tool that left it out, \
    or where kptr_restrict hid the addresses), so decode it on the machine that recorded it";

/// Bytes of lines gathered before they go to `flush`.
const BATCH: usize = 256 << 10;
/// Problems kept in words (the rest are counted).
const MAX_KEPT: usize = 20;

/// What [`decode_lines`] did.
#[derive(Debug, Clone, Default)]
pub struct Decoded {
    /// Lines written, lost counts, records of no known event; `error_count` counts the
    /// problems (bad pages or chunks the reader went past).
    pub stats: DecodeStats,
    /// The first problems, in words: formats that did not parse, bad pages or chunks.
    pub problems: Vec<String>,
    /// The problems `stats.error_count` counts that `problems` does not list (past the
    /// first 20): for "and N more".
    pub unlisted: u64,
    /// The file is cut short (a truncated copy, an unfinished recording): for each CPU
    /// whose data runs past its end, what is missing and what was read
    /// ([`crate::trace_dat::ErrorKind::CutShort`]). Every record before the cut was written.
    /// One line for a reader: [`Decoded::truncation_summary`]; all of it, for the
    /// `truncated` notice: [`Decoded::truncation_details`].
    pub truncated: Vec<String>,
    /// The same cuts, as the reader said them (for the summary's counts).
    cuts: Vec<TraceDatError>,
}

/// CPUs named in a truncation summary before "and N more".
const CPUS_NAMED: usize = 8;

impl Decoded {
    /// The cut in one line, for stderr (`None` when the file is whole): one CPU's cut as
    /// the reader says it; for more, how many CPUs, the bytes of theirs missing, the
    /// lowest-numbered few of them and "and N more" ([`Decoded::truncation_details`] has each CPU's).
    pub fn truncation_summary(&self) -> Option<String> {
        if self.truncated.len() <= 1 {
            return self.truncated.first().cloned();
        }
        let (mut cpus, mut declared, mut present) = (Vec::new(), 0u128, 0u128);
        for e in &self.cuts {
            if let ErrorKind::CutShort {
                cpu,
                declared: d,
                present: p,
                ..
            } = &e.kind
            {
                cpus.push(*cpu);
                // Sizes the file claims, each up to u64::MAX: summed wide.
                declared = declared.saturating_add(u128::from(*d));
                present = present.saturating_add(u128::from(*p));
            }
        }
        cpus.sort_unstable();
        let named: Vec<String> = cpus.iter().take(CPUS_NAMED).map(u32::to_string).collect();
        let more = match cpus.len().saturating_sub(CPUS_NAMED) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        Some(format!(
            "the file ends inside the trace data of {} CPUs (cut short: a truncated copy or an \
             unfinished recording): {} of the {declared} bytes they declare are missing \
             (CPUs {}{more}); what is present of each was read",
            self.truncated.len(),
            declared.saturating_sub(present),
            named.join(", "),
        ))
    }

    /// The cut with every CPU's details, for the `truncated` notice in-band (`None` when
    /// the file is whole): the summary, then what is missing and what was read of each CPU.
    pub fn truncation_details(&self) -> Option<String> {
        let summary = self.truncation_summary()?;
        if self.truncated.len() <= 1 {
            return Some(summary);
        }
        Some(format!("{summary}: {}", self.truncated.join("; ")))
    }
}

/// Write every record of `file`'s top buffer, merged across CPUs in time order (the
/// reader holds one page per CPU), as `record` writes it, for the events `select`
/// (system, event name) takes. `time` is the record's stamp plus the file's
/// [`TraceDat::wall_clock_offset_ns`] when it has one (as the files of `record
/// --raw-format trace-dat` do), else `null`: raw trace-clock stamps with no wall-clock
/// anchor. The kernel's drops are `lost` lines, or a notice when it did not store how
/// many (with the rings' final `stats` in the file, its CPUSTAT options, the counts add up
/// to the kernel's: [`crate::ftrace_page::losses`]). When the `lost` lines add up to more
/// than a counter holds, a `lost` notice after them says so
/// ([`DecodeStats::lost_overflow`]). Lines go to `flush` in runs of about
/// 256 KiB; it returns whether to go on. Stops after `opts.max_records` event lines.
///
/// `tid` is the entry's `common_pid` (the kernel's thread id); `pid` is its process id
/// from the file's saved tgids ([`TraceDat::tgid`]: the files of `record --raw-format
/// trace-dat`), else the thread id too (trace-cmd's files hold no thread-group ids).
/// With `opts.context` (JSON lines), `comm` is the name the
/// file's saved cmdlines give that thread id ([`context_of`]): a snapshot the kernel took
/// while tracing (its `saved_cmdlines`, written by trace-cmd when the recording ends), one
/// name per thread id and no time, so every record of a thread shows the last name saved
/// for it, also records written before an exec or rename; a thread whose name the kernel
/// did not keep (its table holds `saved_cmdlines_size` entries, 128 by default) has no
/// `comm`, where `trace-cmd report` shows `<...>`.
pub fn decode_lines(
    file: &TraceDat<'_>,
    opts: &DecodeOptions,
    select: &dyn Fn(&str, &str) -> bool,
    flush: &mut dyn FnMut(&[u8]) -> bool,
) -> Result<Decoded, TraceDatError> {
    decode_into(file, opts, select, flush, None)
}

/// [`decode_lines`], the records handed to `sink` instead of written when there is one
/// ([`RecordSink`]: the lines `flush` is given then hold nothing).
pub fn decode_into(
    file: &TraceDat<'_>,
    opts: &DecodeOptions,
    select: &dyn Fn(&str, &str) -> bool,
    flush: &mut dyn FnMut(&[u8]) -> bool,
    sink: Option<&mut dyn RecordSink>,
) -> Result<Decoded, TraceDatError> {
    decode_with(&FileDecoder::new(file, opts, select), flush, sink)
}

/// [`decode_into`] with the decoder made ([`FileDecoder::new`], and
/// [`FileDecoder::with_judge`] where records are judged).
pub fn decode_with(
    d: &FileDecoder<'_>,
    flush: &mut dyn FnMut(&[u8]) -> bool,
    sink: Option<&mut dyn RecordSink>,
) -> Result<Decoded, TraceDatError> {
    decode_all(d, flush, sink, None)
}

/// [`decode_lines`], the frames of the stacks the file's stack records give
/// ([`FileDecoder::ties_stacks`]) named by `namer`.
pub fn decode_named<'d>(
    d: &'d FileDecoder<'_>,
    flush: &mut dyn FnMut(&[u8]) -> bool,
    namer: Box<dyn StackNamer + 'd>,
) -> Result<Decoded, TraceDatError> {
    decode_all(d, flush, None, Some(namer))
}

/// [`decode_into`] with a namer of the stacks' frames.
fn decode_all<'d>(
    d: &'d FileDecoder<'_>,
    flush: &mut dyn FnMut(&[u8]) -> bool,
    sink: Option<&mut dyn RecordSink>,
    namer: Option<Box<dyn StackNamer + 'd>>,
) -> Result<Decoded, TraceDatError> {
    let file = d.file;
    let mut records = file.records()?;
    let mut run = Run::new(d, CpuLosses::of(file), false);
    run.namer = namer;
    let mut sink = sink;
    run.read(
        &mut records,
        &mut |lines: &mut Vec<u8>, _: &[SchemaSpan]| flush(lines.as_slice()),
        &mut sink,
    );
    // What no page counted (overwritten after the last page read, counts that did not
    // fit in their page) the rings' final stats know.
    if run.open {
        let mut losses = std::mem::replace(&mut run.losses, CpuLosses(Vec::new()));
        run.settle(&mut losses, &mut sink);
    }
    run.say_lost_overflow(&mut sink);
    run.say_untied(&mut sink);
    run.writer.end_lines(&mut run.lines);
    if !run.lines.is_empty() {
        flush(&run.lines);
    }
    let mut problems = d.problems.clone();
    let mut listed = 0u64;
    for p in run.problems {
        if problems.len() < MAX_KEPT {
            problems.push(p);
            listed = listed.saturating_add(1);
        }
    }
    Ok(Decoded {
        unlisted: run.stats.error_count.saturating_sub(listed),
        stats: run.stats,
        problems,
        truncated: run.truncated.iter().map(TraceDatError::to_string).collect(),
        cuts: run.truncated,
    })
}

/// What decoding a file's records needs, made once for the file (and shared by the
/// windows of [`plan_windows`]).
pub struct FileDecoder<'f> {
    file: &'f TraceDat<'f>,
    opts: DecodeOptions,
    /// The selected events' formats, by event index.
    prepared: Vec<Option<PreparedFormat>>,
    /// The formats that did not parse: (id, system, name, selected).
    unknown: Vec<(u32, String, String, bool)>,
    context: Option<ContextTracker>,
    wall: Option<i64>,
    /// The file's own problems: formats and cmdlines that did not parse.
    problems: Vec<String>,
    /// With stacks ([`DecodeOptions::stacks`], JSON lines): the file's stack records
    /// (`ftrace:kernel_stack`, `ftrace:user_stack`), tied to the records they follow.
    stacks: Option<StackEvents>,
    /// Which records are written ([`FileDecoder::with_judge`]): each reading forks its
    /// own.
    judge: Option<Box<dyn RecordJudge>>,
}

impl<'f> FileDecoder<'f> {
    /// Prepare the decoding of `file` with `opts`, for the events `select` (system, event
    /// name) takes.
    pub fn new(
        file: &'f TraceDat<'f>,
        opts: &DecodeOptions,
        select: &dyn Fn(&str, &str) -> bool,
    ) -> Self {
        let prepared = file
            .events()
            .iter()
            .map(|e| {
                let name = e.format.name.as_str();
                select(&e.system, name).then(|| {
                    let (event, id) =
                        split_multi_format(name).map_or((name, None), |(b, i)| (b, Some(i)));
                    PreparedFormat::new(&e.format, &e.system, event, id)
                })
            })
            .collect();
        // Records of events whose format did not parse count as of no known event.
        let mut problems: Vec<String> = file
            .format_errors()
            .iter()
            .map(|f| {
                format!(
                    "a format of system {} does not parse: {}",
                    f.system, f.error
                )
            })
            .collect();
        problems.extend(file.cmdline_error().map(|e| e.to_string()));
        let unknown = unknown_formats(file)
            .into_iter()
            .map(|(id, system, name)| {
                let selected = select(&system, &name);
                (id, system, name, selected)
            })
            .collect();
        FileDecoder {
            file,
            opts: *opts,
            prepared,
            unknown,
            context: (opts.context && opts.format.carries_context()).then(|| context_of(file)),
            wall: file.wall_clock_offset_ns(),
            problems,
            stacks: (opts.stacks && opts.format == OutputFormat::JsonLines)
                .then(|| stack_events(file))
                .filter(|e| holds_stack_records(file, e)),
            judge: None,
        }
    }

    /// Write (or hand to the sink) only the records `judge` keeps ([`RecordJudge`]; each
    /// reading, the whole file's or a window's, asks a fork of it).
    pub fn with_judge(mut self, judge: Option<Box<dyn RecordJudge>>) -> Self {
        self.judge = judge;
        self
    }

    /// Whether the file's stack records are tied to their records (which then keep their
    /// CPU's order, not always the time order across CPUs: a record goes out once its
    /// stack records came).
    pub fn ties_stacks(&self) -> bool {
        self.stacks.is_some()
    }

    /// The file's own problems: formats and cmdlines that did not parse.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// `t` as Unix time, when the file anchors its clock.
    fn unix(&self, t: u64) -> Option<u64> {
        self.wall.and_then(|o| t.checked_add_signed(o))
    }

    fn writer(&self) -> OutputWriter {
        let mut writer = OutputWriter::new(
            self.opts.format,
            LineOptions {
                include_common: self.opts.include_common,
                endian: self.file.endian(),
            },
        );
        if let Some(host) = self.file.host_name() {
            writer.set_host_name(host);
        }
        writer
    }
}

/// The stack records `file` has formats for.
fn stack_events(file: &TraceDat<'_>) -> StackEvents {
    let find = |name: &str, kind: StackKind| -> Option<StackFields> {
        let e = (file.events().iter()).find(|e| e.system == "ftrace" && e.format.name == name)?;
        StackFields::from_format(&e.format, kind)
    };
    StackEvents {
        kernel: find("kernel_stack", StackKind::Kernel),
        user: find("user_stack", StackKind::User),
    }
}

/// Records looked at for stack records ([`holds_stack_records`]).
const STACK_PEEK: usize = 256;

/// Whether `file` was recorded with stacks: one of its first [`STACK_PEEK`] records is a
/// stack record of `events` (every ftrace instance's file has their formats; with `-g`
/// nearly every record is followed by them). A file without them is decoded as before:
/// in time order across CPUs, in windows with `--threads`.
fn holds_stack_records(file: &TraceDat<'_>, events: &StackEvents) -> bool {
    if !events.any() {
        return false;
    }
    let Ok(mut records) = file.records() else {
        return false;
    };
    for _ in 0..STACK_PEEK {
        match records.next_item() {
            Ok(Some(Item::Record(r))) if events.read(r.raw, file.endian()).is_some() => {
                return true;
            }
            Ok(None) => return false,
            _ => {}
        }
    }
    false
}

/// A schema line a window wrote ([`decode_window`]): bytes `start..end` of the lines it
/// was flushed with, describing event `event`. The line is the window's first record of
/// that event's; the whole file's decoding writes it only when no window before wrote one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaSpan {
    /// Where the line starts in the flushed lines.
    pub start: usize,
    /// Where it ends (after its newline).
    pub end: usize,
    /// The event it describes (index in [`TraceDat::events`]).
    pub event: usize,
}

/// One reading of records (the whole file's, or a window's): its writer, loss
/// accounting, schema lines and what it saw.
struct Run<'d, 'f> {
    d: &'d FileDecoder<'f>,
    writer: OutputWriter,
    described: SchemaOnce,
    losses: CpuLosses,
    stats: DecodeStats,
    problems: Vec<String>,
    /// The cuts ([`ErrorKind::CutShort`]) met.
    truncated: Vec<TraceDatError>,
    last_time: Option<u64>,
    lines: Vec<u8>,
    /// A window's: where its schema lines are in `lines`.
    spans: Option<Vec<SchemaSpan>>,
    /// A window's: the CPUs it takes to have lost nothing, and whether one did.
    lossless: Vec<u32>,
    doubted: bool,
    open: bool,
    /// With stacks: each CPU's record held for its stack records (and its event).
    ties: Vec<(u32, Option<usize>, StackTie)>,
    /// Names the frames of the lines' stacks (none: the sink's records carry them).
    namer: Option<Box<dyn StackNamer + 'd>>,
    /// This reading's fork of the decoder's judge.
    judge: Option<Box<dyn RecordJudge>>,
}

impl<'d, 'f> Run<'d, 'f> {
    fn new(d: &'d FileDecoder<'f>, losses: CpuLosses, spans: bool) -> Self {
        Run {
            d,
            writer: d.writer(),
            described: SchemaOnce::new(d.opts.schema),
            losses,
            stats: DecodeStats::default(),
            problems: Vec::new(),
            truncated: Vec::new(),
            last_time: None,
            lines: Vec::with_capacity(BATCH + (64 << 10)),
            spans: spans.then(Vec::new),
            lossless: Vec::new(),
            doubted: false,
            open: true,
            ties: Vec::new(),
            namer: None,
            judge: d.judge.as_ref().map(|j| j.fork()),
        }
    }

    /// Hand on the lines gathered (and the schema lines among them).
    fn flush(&mut self, flush: &mut dyn FnMut(&mut Vec<u8>, &[SchemaSpan]) -> bool) {
        self.open &= hand_on(&mut self.lines, &mut self.spans, flush);
    }

    /// Write every item of `records` (to `sink` when there is one), `flush`ed in runs of
    /// about [`BATCH`] bytes; the last run stays in `lines`. A window's reading stops at
    /// its first problem (it is then decoded again whole).
    fn read(
        &mut self,
        records: &mut Records<'_>,
        flush: &mut dyn FnMut(&mut Vec<u8>, &[SchemaSpan]) -> bool,
        sink: &mut Option<&mut dyn RecordSink>,
    ) {
        let d = self.d;
        while self.open {
            match records.next_item() {
                Ok(None) => break,
                Ok(Some(Item::Record(r))) => {
                    self.last_time = Some(r.time);
                    if d.stacks.is_some() && self.tie(&r, sink) {
                        continue;
                    }
                    self.emit(r.event, r.raw, r.time, r.cpu, None, sink);
                }
                Ok(Some(Item::Lost { cpu, count, time })) => {
                    // The record held for its stack goes before the loss.
                    self.untie(Some(cpu), sink);
                    let (writer, lines, stats) =
                        (&mut self.writer, &mut self.lines, &mut self.stats);
                    self.doubted |= self.lossless.contains(&cpu);
                    match (count, self.losses.get_mut(cpu)) {
                        (_, Some((total, l))) => {
                            let total = *total;
                            let n = l.missed(count, || Some(total));
                            if n > 0 {
                                lost_line(sink, writer, lines, d.unix(time), cpu, n);
                                stats.add_lost(n);
                            }
                        }
                        (Some(n), None) => {
                            lost_line(sink, writer, lines, d.unix(time), cpu, n);
                            stats.add_lost(n);
                        }
                        (None, None) => {
                            let msg = format!(
                                "the kernel lost events on CPU {cpu} here; it did not store how many"
                            );
                            let t = d.unix(time);
                            self.open &= notice_line(sink, writer, lines, t, ("lost", None), &msg);
                        }
                    }
                }
                // The file ends inside a CPU's data: what was there has been read.
                Err(e) if matches!(e.kind, ErrorKind::CutShort { .. }) => {
                    self.truncated.push(e);
                }
                // A bad page or chunk: reported, and the reader goes on with the next one.
                Err(e) => {
                    let stats = &mut self.stats;
                    stats.error_count = stats.error_count.saturating_add(1);
                    if self.problems.len() < MAX_KEPT {
                        self.problems.push(e.to_string());
                    }
                    if self.spans.is_some() {
                        return;
                    }
                }
            }
            if self.lines.len() >= BATCH {
                self.open &= hand_on(&mut self.lines, &mut self.spans, flush);
            }
        }
        // The end of what is read: the records still held for their stacks go out.
        self.untie(None, sink);
    }

    /// Write the record `raw` of event `event` (index in the file's events) at `time` on
    /// `cpu`, with its call stack `stack` (tied from the file's stack records).
    fn emit(
        &mut self,
        event: Option<usize>,
        raw: &[u8],
        time: u64,
        cpu: u32,
        stack: Option<Callchain<'_>>,
        sink: &mut Option<&mut dyn RecordSink>,
    ) {
        let d = self.d;
        let (file, opts, endian) = (d.file, &d.opts, d.file.endian());
        let (writer, lines, stats) = (&mut self.writer, &mut self.lines, &mut self.stats);
        let Some(p) = event.and_then(|i| d.prepared.get(i)) else {
            stats.unknown_event = stats.unknown_event.saturating_add(1);
            let (event, message, selected) = undecoded(file, &d.unknown, cpu, raw);
            if selected {
                let name = event.map(|(s, n)| format!("{s}:{n}"));
                let t = d.unix(time);
                let what = ("undecoded", name.as_deref());
                self.open &= notice_line(sink, writer, lines, t, what, &message);
            }
            return;
        };
        let Some(p) = p else {
            return; // not selected
        };
        let pid = raw
            .get(4..8)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map_or(0, |b| match endian {
                Endian::Big => u32::from_be_bytes(b),
                Endian::Little => u32::from_le_bytes(b),
            });
        let time_unix_ns = d.unix(time);
        let stamp = RecordStamp {
            time_unix_ns,
            cpu,
            pid: file.tgid(pid).unwrap_or(pid),
            tid: pid,
        };
        let event = event.unwrap_or(0);
        if let Some(judge) = self.judge.as_deref_mut() {
            let record = Judged {
                event,
                prepared: p,
                stamp: &stamp,
                clock_ns: Some(time),
                raw,
                endian,
                context: d.context.as_ref(),
                cgroup: None,
            };
            if !judge.keep(&record) {
                return;
            }
        }
        if let Some(sink) = sink.as_deref_mut() {
            let first = self.described.first(event);
            self.open &= sink.record(event, p, first, &stamp, None, raw, stack, None);
        } else {
            if let Some(c) = &d.context {
                writer.set_context(c, &stamp, None);
            }
            let before = lines.len();
            let (start, first) = (lines.len(), self.described.is_new(event));
            (self.described).write_record(writer, lines, event, &stamp, p, raw, |_| {});
            if let (Some(spans), true) = (&mut self.spans, first) {
                let end =
                    lines[start..]
                        .iter()
                        .position(|&b| b == b'\n')
                        .map_or(lines.len(), |n| {
                            // A place in `lines`: the sum fits.
                            start.saturating_add(n).saturating_add(1)
                        });
                spans.push(SchemaSpan { start, end, event });
            }
            if let (Some(stack), Some(namer)) = (stack, &mut self.namer) {
                let mut line = lines.split_off(before);
                // The schema line, if any, stays before the record's.
                let cut = line[..line.len().saturating_sub(1)]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |n| n.saturating_add(1));
                lines.extend_from_slice(&line[..cut]);
                let mut record = line.split_off(cut);
                // The ftrace backend's stacks: frame-pointer walks, no stack copies.
                add_stack(&mut record, namer.as_mut(), &stamp, stack, None);
                lines.extend_from_slice(&record);
                drop(line);
            }
        }
        stats.records = stats.records.saturating_add(1);
        let unknown = u64::from(time_unix_ns.is_none());
        stats.time_unknown = stats.time_unknown.saturating_add(unknown);
        if opts.max_records.is_some_and(|max| stats.records >= max) {
            self.open = false;
        }
    }

    /// With stacks: tie `r` if it is a stack record (to the record held on its CPU, which
    /// goes out once complete), or hold it for its stack records if it is a selected
    /// event's; whether it was taken (else it is written as it is).
    fn tie(&mut self, r: &Record<'_>, sink: &mut Option<&mut dyn RecordSink>) -> bool {
        let Some(events) = self.d.stacks else {
            return false;
        };
        let endian = self.d.file.endian();
        let at = match self.ties.iter().position(|t| t.0 == r.cpu) {
            Some(at) => at,
            None => {
                let tie = StackTie::new(events.kernel.is_some(), events.user.is_some(), 0);
                self.ties.push((r.cpu, None, tie));
                self.ties.len().saturating_sub(1)
            }
        };
        let Some((_, _, tie)) = self.ties.get_mut(at) else {
            return false;
        };
        match tie.offer(&events, r.raw, endian) {
            Offered::Stack(Tie::Attached { complete: true }) => {
                self.untie(Some(r.cpu), sink);
                true
            }
            Offered::Stack(_) => true,
            Offered::Record => {
                self.untie(Some(r.cpu), sink);
                let selected = r
                    .event
                    .and_then(|i| self.d.prepared.get(i))
                    .is_some_and(Option::is_some);
                if !selected {
                    return false;
                }
                let tid = r
                    .raw
                    .get(4..8)
                    .and_then(|b| <[u8; 4]>::try_from(b).ok())
                    .map_or(0, |b| match endian {
                        Endian::Big => u32::from_be_bytes(b),
                        Endian::Little => u32::from_le_bytes(b),
                    });
                let pid = self.d.file.tgid(tid);
                if let Some((_, event, tie)) = self.ties.get_mut(at) {
                    tie.hold(r.raw, r.time, tid, pid);
                    *event = r.event;
                }
                true
            }
        }
    }

    /// Write the record held on `cpu` (every CPU's: `None`), with the stack tied to it.
    fn untie(&mut self, cpu: Option<u32>, sink: &mut Option<&mut dyn RecordSink>) {
        for at in 0..self.ties.len() {
            let Some((c, event, tie)) = self.ties.get_mut(at) else {
                continue;
            };
            if cpu.is_some_and(|cpu| cpu != *c) {
                continue;
            }
            let (c, event) = (*c, *event);
            let mut tie = std::mem::take(tie);
            if let Some(held) = tie.take() {
                let stack =
                    (!held.chain.is_empty()).then(|| Callchain::new(held.chain, CHAIN_ENDIAN));
                self.emit(event, held.raw, held.time, c, stack, sink);
            }
            if let Some(slot) = self.ties.get_mut(at) {
                slot.2 = tie;
            }
        }
    }

    /// The losses `losses` (each CPU's accounting at the end) reports beyond what was
    /// counted, as `lost` lines at the last record's time.
    fn settle(&mut self, losses: &mut CpuLosses, sink: &mut Option<&mut dyn RecordSink>) {
        for (cpu, total, l) in losses.iter_mut() {
            let n = l.settle(total);
            if n > 0 {
                let t = self.last_time.and_then(|t| self.d.unix(t));
                lost_line(sink, &mut self.writer, &mut self.lines, t, cpu, n);
                self.stats.add_lost(n);
            }
        }
    }
}

impl Run<'_, '_> {
    /// With stacks: the stack records not tied to a record, and the records that went
    /// out without part of their stack, in a `stacks_untied` notice.
    fn say_untied(&mut self, sink: &mut Option<&mut dyn RecordSink>) {
        if self.ties.is_empty() {
            return;
        }
        let (writer, lines) = (&mut self.writer, &mut self.lines);
        let kallsyms = match self.d.file.kallsyms().is_empty() {
            true => KALLSYMS_OF_HOST,
            false => KALLSYMS_OF_FILE,
        };
        let note = format!("{STACKS_NOTE}{kallsyms}");
        self.open &= notice_line(sink, writer, lines, None, ("stacks", None), &note);
        let mut untied = Untied::default();
        for (_, _, tie) in &self.ties {
            untied.add(&tie.untied);
        }
        if let Some(msg) = untied.describe() {
            let (writer, lines) = (&mut self.writer, &mut self.lines);
            let what = ("stacks_untied", None);
            self.open &= notice_line(sink, writer, lines, None, what, &msg);
        }
    }

    /// When the `lost` lines added up to more than a counter holds: the notice that says
    /// so, after them (with no time: the same line whether the file was decoded whole or
    /// in windows).
    fn say_lost_overflow(&mut self, sink: &mut Option<&mut dyn RecordSink>) {
        if let Some(msg) = self.stats.lost_notice() {
            let (writer, lines) = (&mut self.writer, &mut self.lines);
            self.open &= notice_line(sink, writer, lines, None, ("lost", None), msg);
        }
    }
}

/// Hand `lines` (and where the schema lines among them are, for a window) to `flush`, then
/// start both afresh; whether to go on.
fn hand_on(
    lines: &mut Vec<u8>,
    spans: &mut Option<Vec<SchemaSpan>>,
    flush: &mut dyn FnMut(&mut Vec<u8>, &[SchemaSpan]) -> bool,
) -> bool {
    let go_on = flush(lines, spans.as_deref().unwrap_or_default());
    lines.clear();
    if let Some(spans) = spans {
        spans.clear();
    }
    go_on
}

/// The windows of time a trace.dat's records are decoded in ([`plan_windows`]).
pub struct Windows {
    /// The windows, in time order.
    pub windows: Vec<Window>,
    /// Each CPU's loss accounting after its last page.
    end_losses: CpuLosses,
    /// Where each CPU's pages end (file offset).
    ends: Vec<(u32, usize)>,
}

/// One window of time of a trace.dat's records ([`decode_window`]).
pub struct Window {
    /// Its place among the windows.
    pub index: usize,
    from: u64,
    until: Option<u64>,
    /// Where each CPU's reading starts (file offset of a page).
    starts: Vec<(u32, usize)>,
    /// Each CPU's loss accounting before it.
    losses: CpuLosses,
    /// The CPUs whose final stats say they lost nothing (their pages were not all read).
    lossless: Vec<u32>,
}

/// What a window's decoding saw ([`decode_window`]).
#[derive(Debug, Clone, Default)]
pub struct WindowDone {
    /// Lines written, lost counts, records of no known event.
    pub stats: DecodeStats,
    /// Its last record's time.
    pub last_time: Option<u64>,
    /// Its lines are those of the whole file's decoding for its span of time: every CPU's
    /// items came in time order and none was bad (else the file is decoded whole again).
    pub sure: bool,
    /// Where each CPU's stream ended (see [`Records::stops`]).
    stops: Vec<(u32, Option<usize>)>,
}

/// `j × n / k` for `j < k` (a share of `n`, below it): the product is taken in u128, where
/// two usizes' fits; 0 when `k` is.
fn share(j: usize, n: usize, k: usize) -> usize {
    // usize is at most 64 bits: the product of two fits a u128.
    #[allow(clippy::arithmetic_side_effects)]
    let product = j as u128 * n as u128;
    let q = product.checked_div(k as u128).unwrap_or(0);
    usize::try_from(q).unwrap_or(n)
}

/// Page times read per window asked for, per CPU, to choose where windows start.
const SAMPLES_PER_WINDOW: usize = 16;

/// Cut the records `d` decodes into about `count` windows of time holding about as many
/// pages each, from a few page headers: for `uevrec decode --threads N`, each window
/// decoded on its own ([`decode_window`]) and their lines written in order, the same
/// bytes as one decoding when every CPU's items come in time order (which each window
/// checks: [`WindowDone::sure`], [`Windows::joins`]). Where each window starts a CPU is
/// found by bisecting its pages by time (a handful of headers); only the CPUs whose rings
/// lost records (their final `stats`) have every page header read, for the loss
/// accounting before each window. `Err`: why the file is not decoded so (in words).
pub fn plan_windows(d: &FileDecoder<'_>, count: usize) -> Result<Windows, String> {
    let opts = &d.opts;
    if opts.format != OutputFormat::JsonLines {
        return Err("only JSON lines are decoded in windows".into());
    }
    if opts.max_records.is_some() {
        return Err("--count".into());
    }
    if opts.schema
        && d.prepared
            .iter()
            .flatten()
            .any(|p| p.eventheader().is_some())
    {
        return Err("EventHeader events' metadata lines depend on what came before".into());
    }
    let file = d.file;
    let cpus = file.cpu_pages()?;
    let pages: usize = cpus.iter().map(|c| c.count).sum();
    let count = count.min(pages / 2);
    // Where the windows start: the quantiles of a sample of page times.
    let mut times: Vec<u64> = Vec::new();
    for c in &cpus {
        let k = count.saturating_mul(SAMPLES_PER_WINDOW).min(c.count);
        for j in 0..k {
            let header = file.page_header_at(c, share(j, c.count, k));
            if let Some(h) = header.filter(|h| h.data_len > 0) {
                times.push(h.timestamp);
            }
        }
    }
    times.sort_unstable();
    let mut bounds = vec![0u64];
    for j in 1..count {
        let Some(&t) = times.get(share(j, times.len(), count)) else {
            break;
        };
        if bounds.last().is_some_and(|&b| t > b) {
            bounds.push(t);
        }
    }
    if bounds.len() < 2 {
        return Err(format!("{pages} pages are too few to cut"));
    }
    // The CPUs whose rings lost records: each page's loss, in order.
    let stats = CpuLosses::of(file);
    type Marks = Vec<(u64, bool, Option<Option<u64>>)>;
    let mut lossy: Vec<(u32, Marks)> = Vec::new();
    for c in &cpus {
        if stats.total(c.cpu).is_none_or(|total| total == 0) {
            continue;
        }
        let mut marks = Vec::with_capacity(c.count);
        let mut last = 0;
        for i in 0..c.count {
            let h = file
                .page_header_at(c, i)
                .ok_or_else(|| format!("a page header of CPU {} does not parse", c.cpu))?;
            let meaningful = h.data_len > 0 || h.missed.is_some();
            if meaningful {
                if h.timestamp < last {
                    return Err(format!("CPU {}'s page times go back", c.cpu));
                }
                last = h.timestamp;
            }
            marks.push((h.timestamp, meaningful, h.missed));
        }
        lossy.push((c.cpu, marks));
    }
    // A CPU of no losses in its final stats had no page that lost any (else a window
    // that meets one does not vouch for its lines).
    let lossless: Vec<u32> = cpus
        .iter()
        .map(|c| c.cpu)
        .filter(|cpu| lossy.iter().all(|(c, _)| c != cpu))
        .filter(|&cpu| stats.total(cpu).is_some())
        .collect();
    let windows = bounds
        .iter()
        .enumerate()
        .map(|(index, &from)| {
            let mut losses = stats.clone();
            let starts = cpus
                .iter()
                .map(|c| {
                    let marks = lossy.iter().find(|(cpu, _)| *cpu == c.cpu).map(|(_, m)| m);
                    let lo = match marks {
                        // Every page read: the first that holds something at or past
                        // `from`, and the losses of those before it.
                        Some(marks) => {
                            let lo = marks
                                .iter()
                                .position(|&(time, meaningful, _)| meaningful && time >= from)
                                .unwrap_or(marks.len());
                            if let Some((total, l)) = losses.get_mut(c.cpu) {
                                let total = *total;
                                for &(_, _, missed) in &marks[..lo] {
                                    if let Some(count) = missed {
                                        l.missed(count, || Some(total));
                                    }
                                }
                            }
                            lo
                        }
                        // Bisected: the first page at or past `from` (a page whose header
                        // does not parse counts as before: starting later than need be is
                        // what the windows' checks catch).
                        None => {
                            let (mut lo, mut hi) = (0, c.count);
                            while lo < hi {
                                // lo < hi: no overflow, mid < hi.
                                #[allow(clippy::arithmetic_side_effects)]
                                let mid = lo + (hi - lo) / 2;
                                let before = file
                                    .page_header_at(c, mid)
                                    .is_none_or(|h| h.timestamp < from);
                                if before {
                                    lo = mid.saturating_add(1);
                                } else {
                                    hi = mid;
                                }
                            }
                            lo
                        }
                    };
                    // Start from the last page before it that holds something (its
                    // items may reach past `from`).
                    let mut start = lo.saturating_sub(1);
                    while start > 0
                        && file
                            .page_header_at(c, start)
                            .is_none_or(|h| h.data_len == 0 && h.missed.is_none())
                    {
                        start = start.saturating_sub(1);
                    }
                    (c.cpu, c.offset(start))
                })
                .collect();
            Window {
                index,
                from,
                until: bounds.get(index.saturating_add(1)).copied(),
                starts,
                losses,
                lossless: lossless.clone(),
            }
        })
        .collect();
    let mut end_losses = stats.clone();
    for (cpu, marks) in &lossy {
        if let Some((total, l)) = end_losses.get_mut(*cpu) {
            let total = *total;
            for &(_, _, missed) in marks {
                if let Some(count) = missed {
                    l.missed(count, || Some(total));
                }
            }
        }
    }
    // Inside the file (TraceDat::cpu_pages): the sums fit.
    let ends = (cpus.iter())
        .map(|c| (c.cpu, c.first.saturating_add(c.len)))
        .collect();
    Ok(Windows {
        windows,
        end_losses,
        ends,
    })
}

impl Windows {
    /// The bytes window `i` reads of each CPU's pages, about (from where it starts
    /// reading the CPU to 64 KiB past where the next window does; the last to the CPU's
    /// end): for mapping them in before it is decoded.
    pub fn spans(&self, i: usize) -> Vec<(usize, usize)> {
        let Some(w) = self.windows.get(i) else {
            return Vec::new();
        };
        let next = self.windows.get(i.saturating_add(1));
        (w.starts.iter())
            .filter_map(|&(cpu, start)| {
                let end = self.ends.iter().find(|(c, _)| *c == cpu)?.1;
                let until = next
                    .and_then(|n| n.starts.iter().find(|(c, _)| *c == cpu))
                    .map_or(end, |&(_, s)| s.saturating_add(1 << 16).min(end));
                Some((start, until))
            })
            .collect()
    }

    /// Whether the window before `next` (its reading `done`) read each CPU up to where
    /// `next` starts reading it: else items between were read by neither.
    pub fn joins(&self, done: &WindowDone, next: usize) -> bool {
        let Some(next) = self.windows.get(next) else {
            return true;
        };
        done.stops.iter().all(|&(cpu, stop)| {
            let start = next.starts.iter().find(|(c, _)| *c == cpu).map(|&(_, s)| s);
            match (stop, start) {
                (Some(stop), Some(start)) => stop >= start,
                _ => true,
            }
        })
    }

    /// The lines that end the file's decoding: the losses no page counted (the rings'
    /// final stats), at `last_time` (the last record's); their count is added to `stats`
    /// (the windows' stats, absorbed), and when that total is more than a counter holds,
    /// the notice that says so ([`DecodeStats::lost_notice`]), as the whole file's
    /// decoding ends.
    pub fn finish(
        &mut self,
        d: &FileDecoder<'_>,
        last_time: Option<u64>,
        stats: &mut DecodeStats,
    ) -> Vec<u8> {
        let mut run = Run::new(d, CpuLosses(Vec::new()), false);
        run.last_time = last_time;
        run.settle(&mut self.end_losses, &mut None);
        stats.add_lost(run.stats.lost);
        run.stats.lost_overflow = stats.lost_overflow;
        run.say_lost_overflow(&mut None);
        run.lines
    }
}

/// Decode window `w` of the file `d` decodes: its lines to `flush` in runs of about 256
/// KiB (it may take the buffer, leaving an empty one in its place), with where its schema
/// lines are (written for each event's first record in the window: the caller drops those
/// of events a window before described).
pub fn decode_window(
    d: &FileDecoder<'_>,
    w: &Window,
    flush: &mut dyn FnMut(&mut Vec<u8>, &[SchemaSpan]) -> bool,
) -> WindowDone {
    let mut records = match d.file.window_records(w.from, w.until, &w.starts) {
        Ok(r) => r,
        Err(_) => return WindowDone::default(),
    };
    let mut run = Run::new(d, w.losses.clone(), true);
    run.lossless.clone_from(&w.lossless);
    run.read(&mut records, flush, &mut None);
    if run.open && !run.lines.is_empty() {
        run.flush(flush);
    }
    WindowDone {
        sure: records.in_order()
            && run.stats.error_count == 0
            && run.truncated.is_empty()
            && !run.doubted,
        stops: records.stops(),
        last_time: run.last_time,
        stats: run.stats,
    }
}

/// The (system, name) of each format that did not parse, by its `ID:`, when its text
/// says them.
fn unknown_formats(file: &TraceDat<'_>) -> Vec<(u32, String, String)> {
    file.format_errors()
        .iter()
        .filter_map(|f| {
            let field = |key: &str| {
                f.text
                    .lines()
                    .find_map(|l| l.trim().strip_prefix(key).map(|v| v.trim().to_string()))
            };
            let id = field("ID:")?.parse().ok()?;
            Some((id, f.system.clone(), field("name:")?))
        })
        .collect()
}

/// The event (system, name) of a record with no usable format, if known, the message of
/// its `undecoded` notice (why, and the whole entry in hex), and whether it is selected
/// (an unknown event is).
fn undecoded(
    file: &TraceDat<'_>,
    unknown: &[(u32, String, String, bool)],
    cpu: u32,
    raw: &[u8],
) -> (Option<(String, String)>, String, bool) {
    let id = file.common_type_of(raw);
    let known = id.and_then(|id| unknown.iter().find(|(i, ..)| *i == id));
    let why = match (id, known) {
        (Some(id), Some((_, s, n, _))) => {
            format!("the format of {s}:{n} (id {id}) does not parse")
        }
        (Some(id), None) => format!("the file has no format for event id {id}"),
        (None, _) => "the entry is too short for its common_type".to_string(),
    };
    let message = format!(
        "not decoded: {why}; the trace entry on CPU {} ({} bytes, hex): {}",
        cpu,
        raw.len(),
        hex(raw)
    );
    let selected = known.is_none_or(|(.., selected)| *selected);
    (
        known.map(|(_, s, n, _)| (s.clone(), n.clone())),
        message,
        selected,
    )
}

/// A `lost` line: to `sink` when there is one, else written.
fn lost_line(
    sink: &mut Option<&mut dyn RecordSink>,
    writer: &mut OutputWriter,
    lines: &mut Vec<u8>,
    time: Option<u64>,
    cpu: u32,
    n: u64,
) {
    match sink.as_deref_mut() {
        // A sink that wants to stop says so at its next record.
        Some(s) => {
            let _ = s.lost(time, cpu, n);
        }
        None => writer.write_lost(lines, time, cpu, n),
    }
}

/// A notice (`what`: its kind and event): to `sink` when there is one (whether to go on),
/// else written.
fn notice_line(
    sink: &mut Option<&mut dyn RecordSink>,
    writer: &mut OutputWriter,
    lines: &mut Vec<u8>,
    time: Option<u64>,
    (what, event): (&str, Option<&str>),
    message: &str,
) -> bool {
    match sink.as_deref_mut() {
        Some(s) => s.notice(time, what, event, message),
        None => {
            writer.write_notice(lines, time, what, event, message);
            true
        }
    }
}

/// Each CPU's loss accounting, for the CPUs whose final `stats` the file holds
/// ([`TraceDat::cpu_lost_total`]): the pages' counts as they come; from the first page
/// whose count the kernel could not store, what the stats say beyond the counts so far
/// (at that page); at the end the rest ([`Losses`]). Records kept + lost = records
/// produced.
#[derive(Debug, Clone)]
struct CpuLosses(Vec<(u32, u64, Losses)>);

impl CpuLosses {
    fn of(file: &TraceDat<'_>) -> Self {
        let cpus = file
            .top_buffer()
            .map(|b| b.cpus.as_slice())
            .unwrap_or_default();
        CpuLosses(
            cpus.iter()
                .filter_map(|c| Some((c.cpu, file.cpu_lost_total(c.cpu)?, Losses::default())))
                .collect(),
        )
    }

    /// CPU `cpu`'s final total.
    fn total(&self, cpu: u32) -> Option<u64> {
        self.0
            .iter()
            .find(|(c, ..)| *c == cpu)
            .map(|&(_, total, _)| total)
    }

    /// CPU `cpu`'s final total and accounting.
    fn get_mut(&mut self, cpu: u32) -> Option<(&u64, &mut Losses)> {
        self.0
            .iter_mut()
            .find(|(c, ..)| *c == cpu)
            .map(|(_, total, l)| (&*total, l))
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = (u32, u64, &mut Losses)> {
        self.0.iter_mut().map(|(c, t, l)| (*c, *t, l))
    }
}

/// The names of `file`'s saved cmdlines as a tracker: each pid (a thread id) is called its
/// saved name, with no time (so before every record).
pub fn context_of(file: &TraceDat<'_>) -> ContextTracker {
    let mut tracker = ContextTracker::new();
    for (tid, comm) in file.cmdlines() {
        let update = ContextUpdate::Comm {
            tid: *tid,
            comm: comm.as_bytes(),
        };
        tracker.apply(None, update);
    }
    tracker
}
