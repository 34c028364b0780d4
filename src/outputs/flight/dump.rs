//! The dump thread: each [`Request`] (a snapshot of the flight buffer) becomes a new
//! file `FILE.<UTC time>`: a `flight_dump` notice line (why, and the counts), the
//! snapshot's entries decoded and written by the ordinary formatter (crate::pipeline::formatter,
//! so a dump's lines are the lines `record -o` writes, JSON or OTLP), then a
//! `flight_end` notice line (a dump without it was cut short).
//!
//! A dump is written under a hidden temporary name (`.NAME.uevrec-tmp`) and renamed to
//! its final name when complete ([`crate::system::durable::Publish`]; synced first as `--fsync`
//! asks): a crash never leaves a half-written dump under a final name.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, UNIX_EPOCH};

use crossbeam_channel::{Receiver, Sender};
use uevrec_parsers::{ContextTracker, OutputWriter, RecordWriter};

use super::buffer::Snapshot;
use super::{FlightOptions, FlightSummary, Reason, Request};
use crate::capture::clock::now_unix_ns;
use crate::capture::staging::{Closed, STAGE_BYTES, STAGE_CAPACITY, Staged, StagedChunk};
use crate::messages::print as say;
use crate::pipeline::formatter::{self, FormatterOptions};
use crate::pipeline::stacks::maps::ProcessMaps;

/// What feeds a dump's formatter: the snapshot's entries sent as staged chunks, in
/// buffers taken from the pool it is given.
pub type Feed<'a> =
    Box<dyn FnOnce(&Sender<Staged>, &Receiver<Vec<u8>>) -> Result<(), Closed> + Send + 'a>;

/// Formats what a [`Feed`] stages with the ordinary formatter on threads of its own, each
/// batch of lines passed to the writer; returns the records written. The recorder owns
/// every thread, so it hands this in (crate::recorder::format_fed).
pub type FormatFed =
    fn(FormatterOptions<'_>, Feed<'_>, &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<u64>;

/// Write every request received until the flight thread closes `requests`, each
/// snapshot formatted by `format`.
pub fn run(requests: Receiver<Request>, opts: &FlightOptions, format: FormatFed) -> FlightSummary {
    let mut summary = FlightSummary::default();
    for request in requests {
        match write_dump(&request, opts, format) {
            Ok(done) => {
                if !opts.quiet {
                    say(format_args!(
                        "uevrec: flight dump {}: {} records, {} overwritten, {} lost ({}) in {:.3} s\n",
                        done.path.display(),
                        done.records,
                        request.snapshot.counts.overwritten,
                        request.snapshot.counts.lost,
                        reason_text(&request.reason),
                        done.took.as_secs_f64()
                    ));
                }
                summary.dumps.push(done.path);
            }
            Err(e) => {
                summary.failed += 1;
                say(format_args!("uevrec: error: flight dump failed: {e}\n"));
            }
        }
    }
    summary
}

/// A dump written.
struct Done {
    path: PathBuf,
    records: u64,
    took: Duration,
}

/// `signal`, `trigger`, `exit`.
fn reason_text(reason: &Reason) -> &'static str {
    match reason {
        Reason::Signal => "signal",
        Reason::Trigger(_) => "trigger",
        Reason::Exit => "exit",
    }
}

/// The `flight_dump` line's message: `key=value` words a reader can split.
pub fn header_message(request: &Request, size: usize) -> String {
    let s = &request.snapshot;
    format!(
        "reason={} records={} overwritten={} lost={} other_overwritten={} held_bytes={} \
         size={} skipped_dumps={}",
        reason_text(&request.reason),
        s.records,
        s.counts.overwritten,
        s.counts.lost,
        s.counts.other_overwritten,
        s.bytes,
        size,
        request.skipped
    )
}

fn write_dump(request: &Request, opts: &FlightOptions, format: FormatFed) -> Result<Done, String> {
    let started = Instant::now();
    let now = now_unix_ns();
    let (path, mut publish) = create_unique(&opts.output, opts.file_mode, now)?;
    let io_err = |e: io::Error| format!("writing {}: {e}", publish_name(&path));
    let file = publish.file();
    let mut writer = OutputWriter::new(opts.format, opts.line_options);
    if let Some(host) = formatter::host_name() {
        writer.set_host_name(&host);
    }
    let event = match &request.reason {
        Reason::Trigger(event) => Some(event.as_str()),
        _ => None,
    };
    let mut line = Vec::new();
    let message = header_message(request, opts.size);
    writer.write_notice(&mut line, Some(now), "flight_dump", event, &message);
    writer.end_lines(&mut line);
    file.write_all(&line).map_err(io_err)?;
    let records = format_snapshot(
        &request.snapshot,
        opts,
        request.context.clone(),
        request.stack_maps.clone(),
        format,
        |bytes| file.write_all(bytes),
    )
    .map_err(io_err)?;
    line.clear();
    let end = format!("records={records} (the dump is complete)");
    writer.write_notice(&mut line, Some(now_unix_ns()), "flight_end", event, &end);
    writer.end_lines(&mut line);
    file.write_all(&line).map_err(io_err)?;
    let path = publish
        .commit(crate::system::durable::policy())
        .map_err(|e| format!("renaming {} into place: {e}", publish_name(&path)))?;
    Ok(Done {
        path,
        records,
        took: started.elapsed(),
    })
}

/// `base.<UTC time>` (basic ISO 8601, nanoseconds: `out.json.20261123T064146.123456789Z`),
/// with `-N` after it for the `n`-th try.
pub fn dump_path(base: &Path, unix_ns: u64, n: u32) -> PathBuf {
    let time = UNIX_EPOCH + Duration::from_nanos(unix_ns);
    let stamp = humantime::format_rfc3339_nanos(time)
        .to_string()
        .replace(['-', ':'], "");
    let mut name = base.as_os_str().to_owned();
    name.push(".");
    name.push(stamp);
    if n > 0 {
        name.push(format!("-{n}"));
    }
    PathBuf::from(name)
}

/// The temporary name a dump for `path` is written under, for messages.
fn publish_name(path: &Path) -> String {
    crate::system::durable::hidden_beside(path, crate::system::durable::TMP_SUFFIX)
        .display()
        .to_string()
}

/// A new dump (never over an existing file, nor through a symbolic link) named for
/// `unix_ns`, written under a temporary name until it is complete.
fn create_unique(
    base: &Path,
    mode: u32,
    unix_ns: u64,
) -> Result<(PathBuf, crate::system::durable::Publish), String> {
    for n in 0..1000 {
        let path = dump_path(base, unix_ns, n);
        if path.symlink_metadata().is_ok() {
            continue;
        }
        match crate::system::durable::Publish::create(&path, mode) {
            Ok(p) => return Ok((path, p)),
            Err(e) => {
                return Err(format!(
                    "creating {}: {e} (check that the directory of -o exists and is writable)",
                    publish_name(&path)
                ));
            }
        }
    }
    Err(format!(
        "creating {}: 1000 names taken",
        dump_path(base, unix_ns, 0).display()
    ))
}

/// The snapshot's entries as lines (`format`: the ordinary formatter on a thread of its
/// own, fed from a second one), each batch passed to `write`; returns the records written.
pub fn format_snapshot(
    snapshot: &Snapshot,
    opts: &FlightOptions,
    context: Option<ContextTracker>,
    stack_maps: Option<ProcessMaps>,
    format: FormatFed,
    mut write: impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<u64> {
    let lines = FormatterOptions {
        opts: opts.line_options,
        format: opts.format,
        session: opts.session.as_ref(),
        context,
        schema: false,
        filter: opts.filter.as_ref().map(|f| f.fresh()),
        stacks: opts.stacks,
        stack_maps,
        progress: None,
    };
    format(
        lines,
        Box::new(|stage, pool| feed(snapshot, stage, pool)),
        &mut write,
    )
}

/// Send the snapshot's entries as chunks, in time order ([`Snapshot::in_time_order`]),
/// each record after the format its event had when it was staged.
fn feed(
    snapshot: &Snapshot,
    stage: &Sender<Staged>,
    pool: &Receiver<Vec<u8>>,
) -> Result<(), Closed> {
    let fresh = || {
        StagedChunk::with_buffer(
            pool.try_recv()
                .unwrap_or_else(|_| Vec::with_capacity(STAGE_CAPACITY)),
        )
    };
    let send = |chunk: StagedChunk| stage.send(Staged::Chunk(chunk)).map_err(|_| Closed);
    let send_format = |i: usize| {
        let change = &snapshot.formats[i];
        stage
            .send(Staged::Format {
                slot: change.slot,
                prepared: change.prepared.clone(),
                source: change.source.clone(),
            })
            .map_err(|_| Closed)
    };
    // Per slot: its changes (staged at, index in `formats`), in order; and which one the
    // formatter has.
    let mut changes: Vec<Vec<(u64, usize)>> = Vec::new();
    let mut sent: Vec<Option<usize>> = Vec::new();
    for (i, change) in snapshot.formats.iter().enumerate() {
        let slot = change.slot as usize;
        if changes.len() <= slot {
            changes.resize(slot + 1, Vec::new());
            sent.resize(slot + 1, None);
        }
        changes[slot].push((change.at, i));
        // Those holding from the first entry on, first (as the session sent them).
        if change.at <= snapshot.first_seq() {
            send_format(i)?;
            sent[slot] = Some(i);
        }
    }
    let mut chunk = fresh();
    for (seq, entry) in snapshot.in_time_order() {
        if let Some(slot) = entry.slot.map(|s| s as usize) {
            let wanted = changes.get(slot).and_then(|c| {
                let n = c.partition_point(|&(at, _)| at <= seq);
                c.get(n.checked_sub(1)?).map(|&(_, i)| i)
            });
            if let Some(i) = wanted.filter(|&i| sent[slot] != Some(i)) {
                if !chunk.is_empty() {
                    send(std::mem::replace(&mut chunk, fresh()))?;
                }
                send_format(i)?;
                sent[slot] = Some(i);
            }
        }
        chunk.push_encoded(entry);
        if chunk.len() >= STAGE_BYTES {
            send(std::mem::replace(&mut chunk, fresh()))?;
        }
    }
    if !chunk.is_empty() {
        send(chunk)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outputs::flight::buffer::FlightBuffer;
    use crate::outputs::flight::buffer::tests::{numbered, records};

    fn options() -> FlightOptions {
        FlightOptions {
            size: 1 << 20,
            triggers: Vec::new(),
            on_exit: false,
            output: PathBuf::from("/nonexistent/out"),
            file_mode: 0o600,
            format: uevrec_parsers::OutputFormat::JsonLines,
            line_options: Default::default(),
            quiet: true,
            session: None,
            context: false,
            stacks: None,
            filter: None,
        }
    }

    #[test]
    fn a_snapshot_formats_in_order_and_a_failed_write_ends_it() {
        let mut b = FlightBuffer::new(1 << 20);
        let (prepared, source) = numbered("n");
        b.format(0, prepared, source);
        for e in records(0, 20_000).encoded() {
            b.push(e);
        }
        let snapshot = b.take();
        let mut text = Vec::new();
        let n = format_snapshot(
            &snapshot,
            &options(),
            None,
            None,
            crate::recorder::format_fed,
            |bytes| {
                text.extend_from_slice(bytes);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(n, 20_000);
        let text = String::from_utf8(text).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 20_000);
        assert!(
            lines[19_999].ends_with("\"fields\":{\"n\":19999}}"),
            "{}",
            lines[19_999]
        );
        // A write error (disk full) ends the dump promptly instead of hanging it.
        let mut calls = 0;
        let err = format_snapshot(
            &snapshot,
            &options(),
            None,
            None,
            crate::recorder::format_fed,
            |_| {
                calls += 1;
                Err(io::Error::from_raw_os_error(libc::ENOSPC))
            },
        );
        assert!(err.is_err());
        assert_eq!(calls, 1);
    }

    #[test]
    fn dump_names_sort_by_time_and_differ_within_a_second() {
        let base = Path::new("/x/out.json");
        let a = dump_path(base, 1_795_000_000_123_456_789, 0);
        assert_eq!(a, Path::new("/x/out.json.20261118T110640.123456789Z"));
        let b = dump_path(base, 1_795_000_000_123_456_790, 0);
        assert!(a < b);
        assert_eq!(
            dump_path(base, 1_795_000_000_123_456_789, 2)
                .to_str()
                .unwrap(),
            format!("{}-2", a.display())
        );
    }
}
