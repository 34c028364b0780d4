//! trace.dat records → the JSON lines live recording writes: the whole of `uevrec decode`
//! for a trace.dat but the I/O.

use super::{DecodeOptions, DecodeStats, SchemaOnce};
use crate::{
    ContextTracker, ContextUpdate, Endian, LineOptions, OutputFormat, OutputWriter, PreparedFormat,
    RecordSink, RecordStamp, RecordWriter, split_multi_format,
};

use crate::ftrace_page::losses::Losses;
use crate::trace_dat::{ErrorKind, Item, Record, TraceDat, TraceDatError};

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
    /// The file is cut short (a truncated copy, an unfinished recording): for each CPU
    /// whose data runs past its end, what is missing and what was read
    /// ([`crate::trace_dat::ErrorKind::CutShort`]). Every record before the cut was written.
    pub truncated: Vec<String>,
}

/// Write every record of `file`'s top buffer, merged across CPUs in time order (the
/// reader holds one page per CPU), as `record` writes it, for the events `select`
/// (system, event name) takes. `time` is the record's stamp plus the file's
/// [`TraceDat::wall_clock_offset_ns`] when it has one (as the files of `record
/// --raw-format trace-dat` do), else `null`: raw trace-clock stamps with no wall-clock
/// anchor. The kernel's drops are `lost` lines, or a notice when it did not store how
/// many (with the rings' final `stats` in the file, its CPUSTAT options, the counts add up
/// to the kernel's: [`crate::ftrace_page::losses`]). Lines go to `flush` in runs of about
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
    mut sink: Option<&mut dyn RecordSink>,
) -> Result<Decoded, TraceDatError> {
    let endian = file.endian();
    let mut writer = OutputWriter::new(
        opts.format,
        LineOptions {
            include_common: opts.include_common,
            endian,
        },
    );
    if let Some(host) = file.host_name() {
        writer.set_host_name(host);
    }
    let prepared: Vec<Option<PreparedFormat>> = file
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
    let context =
        (opts.context && opts.format == OutputFormat::JsonLines).then(|| context_of(file));
    let wall = file.wall_clock_offset_ns();
    let unix = |t: u64| wall.and_then(|o| u64::try_from(i128::from(t) + i128::from(o)).ok());
    let mut stats = DecodeStats::default();
    let mut described = SchemaOnce::new(opts.schema);
    let mut losses = CpuLosses::of(file);
    let mut last_time = None;
    let mut records = file.records()?;
    let mut lines = Vec::with_capacity(BATCH + (64 << 10));
    let mut open = true;
    let mut truncated = Vec::new();
    let unknown = unknown_formats(file);
    while open {
        match records.next_item() {
            Ok(None) => break,
            Ok(Some(Item::Record(r))) => {
                last_time = Some(r.time);
                let Some(p) = r.event.and_then(|i| prepared.get(i)) else {
                    stats.unknown_event += 1;
                    let (event, message) = undecoded(file, &unknown, &r);
                    let selected = event.as_ref().is_none_or(|(s, n)| select(s, n));
                    if selected {
                        let name = event.map(|(s, n)| format!("{s}:{n}"));
                        let t = unix(r.time);
                        match sink.as_deref_mut() {
                            Some(s) => open &= s.notice(t, "undecoded", name.as_deref(), &message),
                            None => writer.write_notice(
                                &mut lines,
                                t,
                                "undecoded",
                                name.as_deref(),
                                &message,
                            ),
                        }
                    }
                    continue;
                };
                let Some(p) = p else {
                    continue; // not selected
                };
                let pid = r
                    .raw
                    .get(4..8)
                    .and_then(|b| <[u8; 4]>::try_from(b).ok())
                    .map_or(0, |b| match endian {
                        Endian::Big => u32::from_be_bytes(b),
                        Endian::Little => u32::from_le_bytes(b),
                    });
                let time_unix_ns = unix(r.time);
                let stamp = RecordStamp {
                    time_unix_ns,
                    cpu: r.cpu,
                    pid: file.tgid(pid).unwrap_or(pid),
                    tid: pid,
                };
                let event = r.event.unwrap_or(0);
                if let Some(sink) = sink.as_deref_mut() {
                    let first = described.first(event);
                    open &= sink.record(event, p, first, &stamp, None, r.raw);
                } else {
                    if let Some(c) = &context {
                        writer.set_context(c, &stamp, None);
                    }
                    described.write_record(&mut writer, &mut lines, event, &stamp, p, r.raw);
                }
                stats.records += 1;
                stats.time_unknown += u64::from(time_unix_ns.is_none());
                if opts.max_records.is_some_and(|max| stats.records >= max) {
                    open = false;
                }
            }
            Ok(Some(Item::Lost { cpu, count, time })) => match (count, losses.get_mut(cpu)) {
                (_, Some((total, l))) => {
                    let total = *total;
                    let n = l.missed(count, || Some(total));
                    if n > 0 {
                        lost_line(&mut sink, &mut writer, &mut lines, unix(time), cpu, n);
                        stats.lost += n;
                    }
                }
                (Some(n), None) => {
                    lost_line(&mut sink, &mut writer, &mut lines, unix(time), cpu, n);
                    stats.lost += n;
                }
                (None, None) => {
                    let msg = format!(
                        "the kernel lost events on CPU {cpu} here; it did not store how many"
                    );
                    match sink.as_deref_mut() {
                        Some(s) => open &= s.notice(unix(time), "lost", None, &msg),
                        None => writer.write_notice(&mut lines, unix(time), "lost", None, &msg),
                    }
                }
            },
            // The file ends inside a CPU's data: what was there has been read.
            Err(e) if matches!(e.kind, ErrorKind::CutShort { .. }) => {
                truncated.push(e.to_string());
            }
            // A bad page or chunk: reported, and the reader goes on with the next one.
            Err(e) => {
                stats.error_count += 1;
                if problems.len() < MAX_KEPT {
                    problems.push(e.to_string());
                }
            }
        }
        if lines.len() >= BATCH {
            open &= flush(&lines);
            lines.clear();
        }
    }
    // What no page counted (overwritten after the last page read, counts that did not
    // fit in their page) the rings' final stats know.
    if open {
        for (cpu, total, l) in losses.iter_mut() {
            let n = l.settle(total);
            if n > 0 {
                let t = last_time.and_then(unix);
                lost_line(&mut sink, &mut writer, &mut lines, t, cpu, n);
                stats.lost += n;
            }
        }
    }
    writer.end_lines(&mut lines);
    if !lines.is_empty() {
        flush(&lines);
    }
    Ok(Decoded {
        stats,
        problems,
        truncated,
    })
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

/// The event (system, name) of a record with no usable format, if known, and the
/// message of its `undecoded` notice: why, and the whole entry in hex.
fn undecoded(
    file: &TraceDat<'_>,
    unknown: &[(u32, String, String)],
    r: &Record<'_>,
) -> (Option<(String, String)>, String) {
    let id = file.common_type_of(r.raw);
    let known = id.and_then(|id| unknown.iter().find(|(i, ..)| *i == id));
    let why = match (id, known) {
        (Some(id), Some((_, s, n))) => format!("the format of {s}:{n} (id {id}) does not parse"),
        (Some(id), None) => format!("the file has no format for event id {id}"),
        (None, _) => "the entry is too short for its common_type".to_string(),
    };
    let message = format!(
        "not decoded: {why}; the trace entry on CPU {} ({} bytes, hex): {}",
        r.cpu,
        r.raw.len(),
        hex(r.raw)
    );
    (known.map(|(_, s, n)| (s.clone(), n.clone())), message)
}

/// `bytes` as lowercase hex.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(2 * bytes.len());
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
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

/// Each CPU's loss accounting, for the CPUs whose final `stats` the file holds
/// ([`TraceDat::cpu_lost_total`]): the pages' counts as they come; from the first page
/// whose count the kernel could not store, what the stats say beyond the counts so far
/// (at that page); at the end the rest ([`Losses`]). Records kept + lost = records
/// produced.
struct CpuLosses(Vec<(u32, u64, Losses)>);

impl CpuLosses {
    fn of(file: &TraceDat<'_>) -> Self {
        let cpus = file
            .buffers()
            .iter()
            .find(|b| b.name.is_empty() && !b.latency)
            .map(|b| b.cpus.as_slice())
            .unwrap_or_default();
        CpuLosses(
            cpus.iter()
                .filter_map(|c| Some((c.cpu, file.cpu_lost_total(c.cpu)?, Losses::default())))
                .collect(),
        )
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
