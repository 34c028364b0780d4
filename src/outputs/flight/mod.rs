//! `record --flight SIZE -o FILE`: a flight recorder. Records go into memory only, the
//! oldest overwritten; the newest SIZE of them are decoded and written to a new file
//! `FILE.<UTC time>` when SIGUSR1 arrives, when a trigger event (`--trigger`) is
//! recorded, and (with `--flight-on-exit`) when the recording ends.
//!
//! The flight thread ([`run`]) only copies each staged entry into the [`buffer`] (no
//! decoding, no JSON: decoding happens only for the records that are dumped) and never
//! waits for a dump; the dump thread ([`dump`]) formats the snapshots. The threads, what
//! SIZE counts, the memory bound and why raw entries, not lines: docs/flight-recorder.md.
//!
//! Layers, lowest first: `buffer`, `dump`.

pub mod buffer;
pub mod dump;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use std::collections::VecDeque;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use uevrec_parsers::{ContextTracker, LineOptions, LineWriter, OutputFormat};

use crate::capture::clock::now_unix_ns;
use crate::capture::selector::Selector;
use crate::capture::staging::{Staged, StagedEntry};
use crate::pipeline::stacks::StackOptions;
use crate::pipeline::stacks::maps::ProcessMaps;
use buffer::FlightBuffer;

/// How long the flight thread waits for staged entries before it looks at the SIGUSR1
/// flag again: bounds the delay of a signalled dump.
const POLL: Duration = Duration::from_millis(20);

/// A dump at time T is cut once the session has read every buffer in a pass that began
/// this much after T (a record is stamped a little before it is committed to its ring).
const COMMIT_SLACK_NS: u64 = 1_000_000;

/// Dumps waiting for their cut; one asked for while this many wait is merged into the
/// last (counted as skipped: its records go into that one).
const MAX_PENDING: usize = 4;

/// What `--flight` asks for (validated by the CLI).
#[derive(Debug, Clone)]
pub struct FlightOptions {
    /// Bytes of staged entries kept: per record its raw trace entry (as the kernel wrote
    /// it, common fields included) plus a 32-byte stamp; lost counts and notices take room
    /// too. Not the size of the dump file (docs/flight-recorder.md, "What SIZE counts").
    pub size: usize,
    /// Events whose every record triggers a dump (after the record is kept).
    pub triggers: Vec<Selector>,
    /// Dump when the recording ends.
    pub on_exit: bool,
    /// The dumps are `<output>.<UTC time>`.
    pub output: PathBuf,
    /// Permission bits of the dump files.
    pub file_mode: u32,
    /// What the lines are (set by crate::recorder from the recording's `--format`).
    pub format: OutputFormat,
    /// How records are written (set by crate::recorder from the recording's options).
    pub line_options: LineOptions,
    /// No notices and dump reports on standard error (errors are still printed).
    pub quiet: bool,
    /// The session line each dump starts with, its events' schema lines following
    /// (`None` with `--no-schema`; set by crate::recorder): a dump describes itself.
    pub session: Option<uevrec_parsers::SessionInfo>,
    /// Track who wrote each record (set by crate::recorder from `--no-context`).
    pub context: bool,
    /// Call stacks on the dumps' lines (`-g`; set by crate::recorder): the records keep
    /// their callchains in the buffer, and what the processes mapped is kept beside it.
    pub stacks: Option<StackOptions>,
    /// `--where`, `--sample`, `--rate-limit` (set by crate::recorder): the ring keeps
    /// every record; each dump writes those they keep, counted afresh per dump.
    pub filter: Option<std::sync::Arc<crate::pipeline::filter::Filter>>,
}

/// Why a dump was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// SIGUSR1.
    Signal,
    /// A record of this trigger event (`system:event`), the last record of the dump.
    Trigger(String),
    /// The recording ended (`--flight-on-exit`).
    Exit,
}

impl std::fmt::Display for Reason {
    /// `signal`, `trigger user_events:x`, `exit`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Signal => f.write_str("signal"),
            Reason::Trigger(event) => write!(f, "trigger {event}"),
            Reason::Exit => f.write_str("exit"),
        }
    }
}

/// A dump to write: the snapshot and why.
#[derive(Debug)]
pub struct Request {
    /// What the buffer held.
    pub snapshot: buffer::Snapshot,
    /// Why.
    pub reason: Reason,
    /// Dumps skipped since the previous one (asked for while 4 waited).
    pub skipped: u64,
    /// Who was who when the snapshot was taken (`None` without context): the dump's
    /// lines get their `comm`/`cgroup` keys from it.
    pub context: Option<ContextTracker>,
    /// What the processes had mapped when the snapshot was taken (`None` without
    /// stacks): the dump's stacks are named from it.
    pub stack_maps: Option<ProcessMaps>,
}

/// What the flight recorder did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlightSummary {
    /// The dump files written, in order.
    pub dumps: Vec<PathBuf>,
    /// Dumps that failed (each reported on stderr when it happened).
    pub failed: u64,
    /// Dumps skipped because 4 others waited.
    pub skipped: u64,
    /// Records in memory at the end that no dump wrote (without `--flight-on-exit`).
    pub discarded: u64,
}

/// The channel from the flight thread ([`run`]) to the dump thread ([`dump::run`]):
/// one request waits at most (crate::recorder builds it and starts both threads).
pub fn request_channel() -> (Sender<Request>, Receiver<Request>) {
    crossbeam_channel::bounded::<Request>(1)
}

/// The flight thread: keep what arrives on `staged` (returning the chunk buffers on
/// `chunk_back`) until the session closes the channel, handing snapshots to the dump
/// thread on `dumps` on SIGUSR1 (`dump_flag`), on trigger records and at the end
/// (`on_exit`). Returns once everything is handed over (closing `dumps`), with the
/// dumps skipped and the records discarded; the dump thread's summary has the rest.
pub fn run(
    staged: Receiver<Staged>,
    chunk_back: Sender<Vec<u8>>,
    opts: &FlightOptions,
    dump_flag: &AtomicBool,
    dumps: Sender<Request>,
) -> FlightSummary {
    let dump_tx = dumps;
    let mut keeper = FlightState {
        buffer: FlightBuffer::new(opts.size),
        trigger_slots: Vec::new(),
        dumps: &dump_tx,
        skipped: 0,
        skipped_total: 0,
        opts,
        notices: (!opts.quiet).then(|| LineWriter::new(LineOptions::default())),
        notice_buf: Vec::new(),
        context: opts.context.then(ContextTracker::new),
        // Each mapped file found as its process sees it when the mapping arrives (the
        // process most likely lives then; a dump may come long after it exited).
        stack_maps: opts.stacks.map(|_| ProcessMaps::new(true)),
        pending: VecDeque::new(),
        drained: 0,
    };
    loop {
        if dump_flag.swap(false, Ordering::AcqRel) {
            keeper.request(now_unix_ns(), Reason::Signal);
        }
        // Dumps the dump thread had no room for at the last try.
        keeper.cut_ready(keeper.drained, false);
        match staged.recv_timeout(POLL) {
            Ok(msg) => {
                if let Some(buffer) = keeper.take(msg) {
                    // The pool channel holds every chunk, so this never waits.
                    let _ = chunk_back.send(buffer);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    // Everything was staged: every dump waiting can be cut (waiting for the dump
    // thread costs no record now).
    keeper.cut_ready(u64::MAX, true);
    let mut discarded = 0;
    let snapshot = keeper.buffer.take();
    // Nothing staged at all (the session failed to start): no file.
    if opts.on_exit && snapshot.bytes > 0 {
        let skipped = keeper.skipped;
        // The end: waiting for the dump thread costs no record now.
        let _ = dump_tx.send(Request {
            snapshot,
            reason: Reason::Exit,
            skipped,
            context: keeper.context.take(),
            stack_maps: keeper.stack_maps.take(),
        });
    } else {
        discarded = snapshot.records;
    }
    let skipped = keeper.skipped_total;
    drop(keeper);
    drop(dump_tx);
    FlightSummary {
        skipped,
        discarded,
        ..FlightSummary::default()
    }
}

/// The flight thread's state.
struct FlightState<'a> {
    buffer: FlightBuffer,
    /// Slot → its event (`system:event`) when it is a trigger event.
    trigger_slots: Vec<Option<String>>,
    dumps: &'a Sender<Request>,
    /// Dumps skipped since the last one handed over.
    skipped: u64,
    skipped_total: u64,
    opts: &'a FlightOptions,
    /// Notices go to stderr (nothing else shows them while recording).
    notices: Option<LineWriter>,
    notice_buf: Vec<u8>,
    /// Who is who, kept up to date from every context entry: not held in the buffer,
    /// where the start-up scan would fall out first; each dump gets a copy.
    context: Option<ContextTracker>,
    /// What each process mapped, kept up to date like `context` (with stacks).
    stack_maps: Option<ProcessMaps>,
    /// Dumps asked for, oldest first: the time they cut at (Unix ns), why, and (for the
    /// first) what was held up to then when it was asked for, so that newer records
    /// cannot push it out; each waits until every record up to its time was staged.
    pending: VecDeque<(u64, Reason, Option<buffer::Snapshot>)>,
    /// Every record written before this (Unix ns) was staged.
    drained: u64,
}

impl FlightState<'_> {
    /// Keep a staged message; the chunk buffer to return, if it was a chunk.
    fn take(&mut self, msg: Staged) -> Option<Vec<u8>> {
        let chunk = match msg {
            Staged::Format {
                slot,
                prepared,
                source,
            } => {
                let i = slot as usize;
                if self.trigger_slots.len() <= i {
                    self.trigger_slots.resize(i + 1, None);
                }
                let trigger = self
                    .opts
                    .triggers
                    .iter()
                    .any(|t| t.matches(&source.system, &source.name));
                self.trigger_slots[i] =
                    trigger.then(|| format!("{}:{}", source.system, source.name));
                self.buffer.format(slot, prepared, source);
                return None;
            }
            Staged::Drained(before) => {
                self.cut_ready(before, false);
                return None;
            }
            Staged::Chunk(chunk) => chunk,
        };
        for entry in chunk.encoded() {
            if entry.slot.is_none() {
                if let Some(StagedEntry::Context {
                    time_unix_ns,
                    update,
                }) = entry.decode()
                {
                    if let Some(m) = &mut self.stack_maps {
                        m.apply(time_unix_ns, &update);
                    }
                    if let Some(c) = &mut self.context {
                        c.apply(time_unix_ns, update);
                    }
                    continue;
                }
            }
            self.buffer.push(entry);
            match entry.slot {
                Some(slot) => {
                    if let Some(Some(event)) = self.trigger_slots.get(slot as usize) {
                        let event = event.clone();
                        let time = entry.time().unwrap_or_else(now_unix_ns);
                        self.request(time, Reason::Trigger(event));
                    }
                }
                None => self.print_notice(entry.decode()),
            }
        }
        if !self.notice_buf.is_empty() {
            crate::messages::print(format_args!(
                "{}",
                String::from_utf8_lossy(&self.notice_buf)
            ));
            self.notice_buf.clear();
        }
        Some(chunk.into_buffer())
    }

    fn print_notice(&mut self, entry: Option<StagedEntry<'_>>) {
        if let (
            Some(w),
            Some(StagedEntry::Notice {
                time_unix_ns,
                what,
                event,
                message,
            }),
        ) = (&mut self.notices, entry)
        {
            w.write_notice(&mut self.notice_buf, time_unix_ns, what, event, message);
        }
    }

    /// Ask for a dump of the records up to `time` (Unix ns), handed over once the
    /// records up to then were all staged ([`FlightState::cut_ready`]). When no other dump
    /// waits, what is held up to then is taken now (a later one's take would also take
    /// the records staged late for the earlier one).
    fn request(&mut self, time: u64, reason: Reason) {
        if self.pending.is_empty() {
            let snapshot = self.buffer.take_until(time);
            self.pending.push_back((time, reason, Some(snapshot)));
            return;
        }
        if self.pending.len() >= MAX_PENDING {
            if let Some(last) = self.pending.back_mut() {
                self.skipped += 1;
                self.skipped_total += 1;
                crate::messages::print(format_args!(
                    "uevrec: flight dump ({}) skipped: {MAX_PENDING} dumps are waiting (for \
                     their records or for the dump thread); its records go into the next \
                     dump\n",
                    last.1
                ));
                last.0 = last.0.max(time);
                last.1 = reason;
                return;
            }
        }
        self.pending.push_back((time, reason, None));
    }

    /// Hand over the dumps waiting whose records are all staged: every record written
    /// before `drained` (Unix ns) was. Records staged late (from another CPU's buffer)
    /// join them now. While the dump thread has two dumps, the rest wait (unless `wait`:
    /// then this waits for it).
    fn cut_ready(&mut self, drained: u64, wait: bool) {
        self.drained = self.drained.max(drained);
        while let Some(&(time, ..)) = self.pending.front() {
            if time.saturating_add(COMMIT_SLACK_NS) > self.drained {
                return;
            }
            // Only this thread sends, so a channel with room takes the request at once.
            if self.dumps.is_full() && !wait {
                return;
            }
            let Some((time, reason, taken)) = self.pending.pop_front() else {
                return;
            };
            let snapshot = match taken {
                Some(mut snapshot) => {
                    snapshot.merge(self.buffer.take_late(time));
                    snapshot
                }
                None => self.buffer.take_until(time),
            };
            let request = Request {
                snapshot,
                reason,
                skipped: std::mem::take(&mut self.skipped),
                context: self.context.clone(),
                stack_maps: self.stack_maps.clone(),
            };
            let _ = self.dumps.send(request);
            // The next one waiting takes what is held up to its time now.
            if let Some((time, _, taken @ None)) = self.pending.front_mut() {
                *taken = Some(self.buffer.take_until(*time));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::staging::StagedChunk;
    use crate::outputs::flight::buffer::tests::{numbered, records};

    /// A burst of triggers: every record lands in exactly one dump, in order, whatever
    /// the dump thread's speed; dumps asked for while 4 wait are counted as skipped and
    /// their records go to the last waiting one (the last trigger takes everything, so
    /// there is no exit dump).
    #[test]
    fn a_burst_of_triggers_loses_and_repeats_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let opts = FlightOptions {
            size: 1 << 20,
            triggers: vec!["s:t".parse().unwrap()],
            on_exit: true,
            output: dir.path().join("out"),
            file_mode: 0o600,
            format: OutputFormat::JsonLines,
            line_options: LineOptions::default(),
            quiet: true,
            session: None,
            context: false,
            stacks: None,
            filter: None,
        };
        let (stage_tx, stage_rx) = crossbeam_channel::bounded(64);
        let (back_tx, _back_rx) = crossbeam_channel::bounded(64);
        let (n, t) = (numbered("n"), numbered("t"));
        stage_tx
            .send(Staged::Format {
                slot: 0,
                prepared: n.0,
                source: n.1,
            })
            .unwrap();
        stage_tx
            .send(Staged::Format {
                slot: 1,
                prepared: t.0,
                source: t.1,
            })
            .unwrap();
        // 50 rounds of 10 records of `n` and one trigger `t`, all in one chunk.
        let mut chunk = StagedChunk::default();
        for round in 0..50u64 {
            for e in records(round * 11, round * 11 + 10).encoded() {
                chunk.push_encoded(e);
            }
            let trigger = records(round * 11 + 10, round * 11 + 11);
            let mut raw = Vec::new();
            for e in trigger.encoded() {
                raw.extend_from_slice(e.bytes);
            }
            // The same record under slot 1 (the trigger event).
            raw[..4].copy_from_slice(&1u32.to_ne_bytes());
            chunk.push_encoded(crate::capture::staging::EncodedEntry::first(&raw).unwrap());
        }
        stage_tx.send(Staged::Chunk(chunk)).unwrap();
        drop(stage_tx);
        // The two threads crate::recorder starts for a flight recording.
        let (dump_tx, dump_rx) = request_channel();
        let (kept, dumped) = std::thread::scope(|s| {
            let dumper = s.spawn(|| dump::run(dump_rx, &opts, crate::recorder::format_fed));
            let kept = run(stage_rx, back_tx, &opts, &AtomicBool::new(false), dump_tx);
            (kept, dumper.join().unwrap())
        });
        let summary = FlightSummary {
            dumps: dumped.dumps,
            failed: dumped.failed,
            ..kept
        };
        assert_eq!(summary.failed, 0);
        assert_eq!(
            summary.dumps.len() as u64 + summary.skipped,
            50,
            "{summary:?}"
        );
        let mut seen = Vec::new();
        for path in &summary.dumps {
            let text = std::fs::read_to_string(path).unwrap();
            for line in text.lines().filter(|l| l.contains("\"fields\"")) {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                seen.push(v["fields"]["n"].as_u64().unwrap());
            }
        }
        assert_eq!(seen, (0..550).collect::<Vec<u64>>());
    }
}
