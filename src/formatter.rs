//! The formatter thread: staged entries ([`crate::pipeline::StagedChunk`]: records, lost
//! counts, notices) → JSON lines ([`Batch`]es for the writer). It writes every line of
//! the output; the session writes none.
//!
//! Decoding and JSON writing are the costly part of recording (hundreds of ns per
//! record, tens of µs under emulation); doing them here rather than on the thread that
//! drains the rings lets the rings drain at memcpy speed, so a burst the formatter
//! cannot follow at once waits in the staging channel instead of overflowing a ring.

use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use uevrec_parsers::{
    ContextTracker, LineOptions, OutputFormat, OutputWriter, PreparedFormat, RecordWriter,
    SessionInfo,
};

use crate::describe::Described;

use crate::pipeline::{BATCH_BYTES, BATCH_CAPACITY, Batch, Closed, Staged, StagedEntry};

/// Turns staged chunks into batches of JSON lines.
struct Formatter<'a> {
    out: &'a Sender<Batch>,
    recycle: &'a Receiver<Vec<u8>>,
    /// Event slot → its format (from [`Staged::Format`]).
    formats: Vec<Option<Arc<PreparedFormat>>>,
    writer: OutputWriter,
    /// Who is who (`comm`, `cgroup` …), when context is on.
    context: Option<ContextTracker>,
    batch: Batch,
    /// The formats described so far; `None` with `--no-schema`.
    described: Option<Described>,
}

impl Formatter<'_> {
    fn fresh_buffer(&self) -> Vec<u8> {
        match self.recycle.try_recv() {
            Ok(mut v) => {
                v.clear();
                v
            }
            // The caller gave no (free) buffer: make one.
            Err(_) => Vec::with_capacity(BATCH_CAPACITY),
        }
    }

    /// Send the batch if it has anything, leaving a fresh one in its place.
    fn flush(&mut self) -> Result<(), Closed> {
        if self.batch.lines.is_empty() {
            return Ok(());
        }
        // Sent before a fresh buffer is taken, so the writer can have returned one.
        let full = std::mem::take(&mut self.batch);
        self.out.send(full).map_err(|_| Closed)?;
        self.batch.lines = self.fresh_buffer();
        Ok(())
    }

    fn take(&mut self, msg: Staged, chunk_recycle: &Sender<Vec<u8>>) -> Result<(), Closed> {
        let chunk = match msg {
            Staged::Format {
                slot,
                prepared,
                source,
            } => {
                if let Some(described) = &mut self.described
                    && described.first_time(&source)
                {
                    let now = Some(crate::clock::now_unix_ns());
                    self.writer
                        .write_format_schema(&mut self.batch.lines, now, &prepared);
                }
                let slot = slot as usize;
                if self.formats.len() <= slot {
                    self.formats.resize(slot + 1, None);
                }
                self.formats[slot] = Some(prepared);
                return Ok(());
            }
            Staged::Drained(_) => return Ok(()),
            Staged::Chunk(chunk) => chunk,
        };
        for entry in chunk.entries() {
            match entry {
                StagedEntry::Lost {
                    time_unix_ns,
                    cpu,
                    lost,
                } => self
                    .writer
                    .write_lost(&mut self.batch.lines, time_unix_ns, cpu, lost),
                StagedEntry::Notice {
                    time_unix_ns,
                    what,
                    event,
                    message,
                } => self.writer.write_notice(
                    &mut self.batch.lines,
                    time_unix_ns,
                    what,
                    event,
                    message,
                ),
                StagedEntry::Context {
                    time_unix_ns,
                    update,
                } => {
                    if let Some(c) = &mut self.context {
                        c.apply(time_unix_ns, update);
                    }
                }
                StagedEntry::Record {
                    slot,
                    stamp,
                    cgroup,
                    raw,
                } => {
                    match self.formats.get(slot as usize).and_then(Option::as_ref) {
                        Some(prepared) => {
                            let start = self.batch.lines.len();
                            if let Some(c) = &self.context {
                                self.writer.set_context(c, &stamp, cgroup);
                            }
                            self.writer.write_prepared(
                                &mut self.batch.lines,
                                &stamp,
                                prepared,
                                raw,
                            );
                            if self.described.is_some() {
                                let (out, t) = (&mut self.batch.lines, stamp.time_unix_ns);
                                self.writer.announce_learnt(out, start, t, prepared);
                            }
                            self.batch.records += 1;
                        }
                        // The session sends a slot's format before its records; should
                        // that ever fail, say so rather than drop the record silently.
                        None => self.writer.write_notice(
                            &mut self.batch.lines,
                            stamp.time_unix_ns,
                            "internal_error",
                            None,
                            &format!("record of unknown event slot {slot} not decoded"),
                        ),
                    }
                }
            }
            if self.batch.lines.len() >= BATCH_BYTES {
                self.flush()?;
            }
        }
        // The pool channel holds every chunk, so this never waits.
        let _ = chunk_recycle.send(chunk.into_buffer());
        Ok(())
    }
}

/// What the formatter writes and how (see [`run`]).
#[derive(Debug, Default)]
pub struct Lines<'a> {
    /// How records are written.
    pub opts: LineOptions,
    /// JSON lines or OTLP.
    pub format: OutputFormat,
    /// The session line to start with, and schema lines (`None`: `--no-schema`).
    pub session: Option<&'a SessionInfo>,
    /// Who is who (`None`: `--no-context`).
    pub context: Option<ContextTracker>,
}

/// Receive staged messages until the session closes `staged`, writing batches to `out`
/// (taking empty buffers back from `recycle`) and returning chunk buffers on
/// `chunk_recycle`. A batch is sent when full and whenever the staging channel runs
/// empty, so lines reach the writer as soon as the formatter has caught up. Returns
/// `Err(Closed)` as soon as the writer is gone; dropping `staged` then tells the session.
///
/// With `session` (not `--no-schema`) the first line is its `{"uevrec":"session"}` line,
/// each event format gets a `{"uevrec":"schema"}` line before its first record, and so
/// does each EventHeader metadata block when first seen (`crate::describe`).
///
/// With `context` (a tracker, fresh or as a flight snapshot left it), event lines carry
/// the `comm`/`cgroup` keys the staged context entries tell.
pub fn run(
    staged: Receiver<Staged>,
    chunk_recycle: Sender<Vec<u8>>,
    out: &Sender<Batch>,
    recycle: &Receiver<Vec<u8>>,
    lines: Lines<'_>,
) -> Result<(), Closed> {
    let Lines {
        opts,
        format,
        session,
        context,
    } = lines;
    let mut writer = OutputWriter::new(format, opts);
    if let Some(host) = host_name() {
        writer.set_host_name(&host);
    }
    let mut f = Formatter {
        out,
        recycle,
        formats: Vec::new(),
        writer,
        context,
        batch: Batch::default(),
        described: session.map(|_| Described::default()),
    };
    f.batch.lines = f.fresh_buffer();
    if let Some(info) = session {
        let start = Some(info.clock.realtime_ns);
        f.writer.write_session(&mut f.batch.lines, start, info);
    }
    loop {
        let msg = match staged.try_recv() {
            Ok(msg) => msg,
            Err(TryRecvError::Empty) => {
                // Caught up: OTLP records waiting for a fuller line go out now.
                f.writer.end_lines(&mut f.batch.lines);
                f.flush()?;
                match staged.recv() {
                    Ok(msg) => msg,
                    Err(_) => break,
                }
            }
            Err(TryRecvError::Disconnected) => break,
        };
        f.take(msg, &chunk_recycle)?;
    }
    f.writer.end_lines(&mut f.batch.lines);
    f.flush()
}

/// This machine's name (`host.name` of OTLP resources), if the kernel says.
pub(crate) fn host_name() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    Some(name.trim().to_string()).filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{FormatSource, StagedChunk};
    use uevrec_parsers::RecordStamp;
    use uevrec_parsers::parse_format;
    use uevrec_samples::register::format_file_text;

    #[test]
    fn formats_records_losses_and_notices_in_order() {
        let text = format_file_text("e", 7, &[("u32 n", 8, 4, false)], "\"\"");
        let format = parse_format(&text).unwrap();
        let prepared = Arc::new(PreparedFormat::new(&format, "s", "e", None));
        let (stage_tx, stage_rx) = crossbeam_channel::bounded(8);
        let (chunk_tx, chunk_rx) = crossbeam_channel::bounded(8);
        let (out_tx, out_rx) = crossbeam_channel::bounded(8);
        let (_rec_tx, rec_rx) = crossbeam_channel::bounded(8);
        let stamp = RecordStamp {
            time_unix_ns: Some(1_000_000_000),
            cpu: 1,
            pid: 2,
            tid: 3,
        };
        let mut raw = vec![7, 0, 0, 0, 2, 0, 0, 0];
        raw.extend_from_slice(&42u32.to_le_bytes());
        let mut chunk = StagedChunk::default();
        chunk.push_notice(None, "waiting", Some("s:e"), "no \"e\"");
        chunk.push_record(0, &stamp, &raw);
        chunk.push_lost(Some(2_000_000_000), 3, 17);
        chunk.push_record(5, &stamp, &raw);
        let source = Arc::new(FormatSource {
            system: "s".into(),
            name: "e".into(),
            text: String::new(),
        });
        stage_tx
            .send(Staged::Format {
                slot: 0,
                prepared,
                source,
            })
            .unwrap();
        stage_tx.send(Staged::Chunk(chunk)).unwrap();
        drop(stage_tx);
        run(stage_rx, chunk_tx, &out_tx, &rec_rx, Lines::default()).unwrap();
        drop(out_tx);
        let text: Vec<u8> = out_rx.iter().flat_map(|b| b.lines).collect();
        let text = String::from_utf8(text).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        // Byte for byte what the session used to write itself.
        let mut w = uevrec_parsers::LineWriter::new(LineOptions::default());
        let mut expected = Vec::new();
        w.write_notice(&mut expected, None, "waiting", Some("s:e"), "no \"e\"");
        assert_eq!(format!("{}\n", lines[0]).as_bytes(), expected);
        assert_eq!(
            lines[1],
            "{\"time\":\"1970-01-01T00:00:01.000000000Z\",\"system\":\"s\",\"event\":\"e\",\
             \"cpu\":1,\"pid\":2,\"tid\":3,\"fields\":{\"n\":42}}"
        );
        expected.clear();
        w.write_lost(&mut expected, Some(2_000_000_000), 3, 17);
        assert_eq!(format!("{}\n", lines[2]).as_bytes(), expected);
        assert!(
            lines[3].contains("\"what\":\"internal_error\""),
            "{}",
            lines[3]
        );
        assert!(lines[3].contains("slot 5"), "{}", lines[3]);
        // The chunk's buffer came back.
        assert!(chunk_rx.try_recv().is_ok());
    }

    #[test]
    fn a_closed_writer_ends_it() {
        let (stage_tx, stage_rx) = crossbeam_channel::bounded(8);
        let (chunk_tx, _chunk_rx) = crossbeam_channel::bounded(8);
        let (out_tx, out_rx) = crossbeam_channel::bounded(8);
        let (_rec_tx, rec_rx) = crossbeam_channel::bounded(8);
        drop(out_rx);
        let mut chunk = StagedChunk::default();
        chunk.push_notice(None, "waiting", None, "");
        stage_tx.send(Staged::Chunk(chunk)).unwrap();
        assert!(run(stage_rx, chunk_tx, &out_tx, &rec_rx, Lines::default(),).is_err());
    }
}
