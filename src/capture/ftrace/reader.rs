//! One CPU's `trace_pipe_raw`: whole ring-buffer pages read into a reused buffer, parsed
//! in place ([`PageReader`]) into [`Arrival`]s, with the CPU's loss accounting.
//!
//! `read(2)` rather than `splice(2)`: each read hands over one page (the kernel swaps a
//! full page out of the ring and copies it, or copies the committed records of the page
//! the writer is still on, so the records written before a stop all come out); splice
//! moves only full pages and would still need a pipe and a read to see them, with the
//! same single copy. See BENCHMARKS.md for the measured difference.

use std::fs::{File, OpenOptions};
use std::io::{self, Read as _};
use std::ops::ControlFlow;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use uevrec_parsers::Endian;
use uevrec_parsers::callchain::Callchain;
use uevrec_parsers::ftrace_page::stacks::{
    CHAIN_ENDIAN, HeldRecord, Offered, StackEvents, StackTie, Tie, Untied,
};
use uevrec_parsers::ftrace_page::{Item, PageLayout, PageReader};

use super::journal::{Journal, Skip};
use crate::capture::backend::Arrival;
use uevrec_parsers::ftrace_page::losses::{Losses, stats_total};

/// One CPU's reader.
#[derive(Debug)]
pub struct CpuReader {
    /// The CPU number.
    pub cpu: u32,
    /// `per_cpu/cpuN/trace_pipe_raw`, non-blocking.
    pub file: File,
    stats: PathBuf,
    /// The page being parsed (`len` bytes of it are valid).
    page: Vec<u8>,
    len: usize,
    cursor: Option<PageReader>,
    losses: Losses,
    /// The final settlement was made (see [`CpuReader::read`]).
    settled: bool,
    /// Of a named instance: the file that keeps the losses reported so far (for a
    /// later run that adopts it), and that tally ([`CpuReader::keep_losses`]).
    ledger: Option<(File, u64)>,
    /// Of a named instance whose lines the writer marks: the page journal the pages are
    /// read into ([`CpuReader::keep_pages`]).
    journal: Option<Journal>,
    /// Where the page being parsed lies.
    source: Source,
    /// While replaying a killed run's journal: what it wrote (left out).
    skip: Option<Skip>,
    /// The time of the last record handed on from the page being parsed (0: none).
    page_last: u64,
    /// The last read stopped because the journal's next slot was not written yet.
    waiting: bool,
    /// With call stacks (`-g`): the stack records' layout, and the record held until
    /// they come ([`CpuReader::tie_stacks`]).
    stacks: Option<(StackEvents, Box<StackTie>)>,
}

/// What a reader asks about the threads of its records.
pub trait Procs {
    /// The process of thread `tid`, if known.
    fn pid_of(&mut self, tid: u32) -> Option<u32>;

    /// At a record of process `pid` written at `time` with stack `chain`: the mappings to
    /// stage ahead of it, if any (stacks.rs, [`super::stacks::Sight::sight`]). The
    /// default: never.
    fn sight(
        &mut self,
        pid: u32,
        time: u64,
        chain: &Callchain<'_>,
    ) -> Option<super::stacks::Sighted> {
        let _ = (pid, time, chain);
        None
    }
}

impl<F: FnMut(u32) -> Option<u32>> Procs for F {
    fn pid_of(&mut self, tid: u32) -> Option<u32> {
        self(tid)
    }
}

/// How long a record whose stack records have not all come yet is held once its ring is
/// empty (they are written right after it, so they are committed by then or never).
const HOLD_NS: u64 = 2_000_000;

/// Where the page being parsed lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The reader's own buffer (no journal, or a stop that did not wait for one).
    Own,
    /// A slot of the journal, read just now.
    Slot(usize),
    /// A slot of the journal a killed run read and did not write.
    Replay(usize),
}

/// What [`CpuReader::next_page`] found.
enum Next {
    Page,
    Empty,
    /// The journal's next slot holds records not yet written: the ring keeps its pages
    /// until the writer catches up.
    Waiting,
}

/// Where the records' ids are: `common_type` (u16 at 0) and `common_pid` (i32 at 4), the
/// same on every kernel (RT kernels add common fields after them).
const COMMON_LEN: usize = 8;

impl CpuReader {
    /// Open `per_cpu/cpu<cpu>` of the instance at `dir`, for pages of `page_size` bytes.
    pub fn open(dir: &Path, cpu: u32, page_size: usize) -> io::Result<CpuReader> {
        let per_cpu = dir.join(format!("per_cpu/cpu{cpu}"));
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(per_cpu.join("trace_pipe_raw"))?;
        Ok(CpuReader {
            cpu,
            file,
            stats: per_cpu.join("stats"),
            page: vec![0; page_size],
            len: 0,
            cursor: None,
            losses: Losses::default(),
            settled: false,
            ledger: None,
            journal: None,
            source: Source::Own,
            skip: None,
            page_last: 0,
            waiting: false,
            stacks: None,
        })
    }

    /// Tie the stack records `events` to the records they follow (`-g`), each stack cut
    /// at `max_frames` frames (0: all).
    pub fn tie_stacks(&mut self, events: StackEvents, max_frames: usize) {
        let tie = StackTie::new(events.kernel.is_some(), events.user.is_some(), max_frames);
        self.stacks = Some((events, Box::new(tie)));
    }

    /// The stack records not tied so far, by reason (none without `-g`).
    pub fn untied(&self) -> Untied {
        self.stacks
            .as_ref()
            .map(|(_, t)| t.untied)
            .unwrap_or_default()
    }

    /// Whether the last read stopped because the journal's next slot holds records the
    /// writer has not written yet (the ring keeps its pages meanwhile).
    pub fn waits_for_writer(&self) -> bool {
        self.waiting
    }

    /// Whether pages are read into a journal ([`CpuReader::keep_pages`]).
    pub fn keeps_pages(&self) -> bool {
        self.journal.is_some()
    }

    /// Read the pages into `journal` (a named instance's, journal.rs) so that a kill
    /// loses none of those the writer did not write; `skip`: of an adopted instance,
    /// what the killed run wrote of the pages its journal kept.
    pub fn keep_pages(&mut self, journal: Journal, skip: Option<Skip>) {
        // The losses said so far are those whose lines were written (the writer's marks
        // keep them), not those the killed run's reader took.
        self.losses = Losses::default();
        let said = journal.lost_written();
        self.losses.settle(said);
        if let Some((file, total)) = &mut self.ledger {
            *total = said;
            write_ledger(file, said);
        }
        self.journal = Some(journal);
        self.skip = skip;
    }

    /// Keep the losses this ring reported in `path` (a named instance's, named.rs), so
    /// that a run adopting the instance after a kill reports only what was not: when
    /// `adopted`, the tally there is taken as reported already (a page's missed count
    /// then adds what was overwritten since; a settlement from `stats` what is beyond).
    pub fn keep_losses(&mut self, path: &Path, adopted: bool) -> io::Result<()> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let mut text = String::new();
        let before = if adopted {
            file.read_to_string(&mut text)?;
            text.trim().parse().unwrap_or(0)
        } else {
            0
        };
        self.losses.settle(before);
        write_ledger(&file, before);
        self.ledger = Some((file, before));
        Ok(())
    }

    /// Take the next page: a killed run's unwritten one, or one read from the ring into
    /// the journal's next slot (into the own buffer without a journal, or at a stop,
    /// `stopping`, when the slot is not free). `Err` for a page that does not parse.
    fn next_page(&mut self, layout: &PageLayout, stopping: bool) -> Result<Next, ()> {
        let (source, page) = match &mut self.journal {
            Some(j) => match j.replay_next() {
                Some(slot) => {
                    self.len = j.slot(slot).len();
                    return self.parse(layout, Source::Replay(slot));
                }
                None => match j.free_slot() {
                    Some(slot) => (Source::Slot(slot), j.slot_mut(slot)),
                    None if stopping => (Source::Own, &mut self.page[..]),
                    None => return Ok(Next::Waiting),
                },
            },
            None => (Source::Own, &mut self.page[..]),
        };
        loop {
            match self.file.read(page) {
                Ok(0) => return Ok(Next::Empty),
                Ok(n) => {
                    self.len = n;
                    if let (Source::Slot(slot), Some(j)) = (source, &mut self.journal) {
                        j.filled(slot);
                    }
                    return self.parse(layout, source);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // EAGAIN: empty. Anything else: nothing to read now either.
                Err(_) => return Ok(Next::Empty),
            }
        }
    }

    /// Start parsing the page at `source` (`len` bytes).
    fn parse(&mut self, layout: &PageLayout, source: Source) -> Result<Next, ()> {
        self.source = source;
        self.page_last = 0;
        match PageReader::new(
            layout,
            page_at(&self.page, self.journal.as_ref(), source, self.len),
        ) {
            Ok(r) => {
                self.cursor = Some(r);
                Ok(Next::Page)
            }
            Err(_) => Err(()),
        }
    }

    /// The page at hand was handed on whole: its journal slot may be read into again
    /// once the writer's mark reaches its last record.
    fn page_done(&mut self) {
        self.cursor = None;
        if let (Source::Slot(slot) | Source::Replay(slot), Some(j)) =
            (self.source, &mut self.journal)
        {
            j.handed(slot, self.page_last);
        }
    }

    /// Hand what the ring holds to `f`, oldest first, until it is empty, `f` breaks, or
    /// `max_pages` pages were taken. When `settle` is set and the ring is empty, report the
    /// losses no page told of ([`Losses::settle`]) and then [`Arrival::Marker`], once.
    /// A record written after `hold_after` (and all after it) stays for the next read:
    /// returns true when one did.
    /// Samples get their process id from `procs` (thread id → process id; None: no
    /// process id). With call stacks, a record is handed on once its stack records came
    /// (or did not come within 2 ms of an empty ring, or at a stop).
    pub fn read(
        &mut self,
        layout: &PageLayout,
        mut procs: impl Procs,
        settle: bool,
        max_pages: usize,
        hold_after: Option<u64>,
        mut f: impl FnMut(Arrival<'_>) -> ControlFlow<()>,
    ) -> bool {
        let mut pages = 0;
        loop {
            let Some(cursor) = self.cursor.as_mut() else {
                if pages >= max_pages {
                    return false;
                }
                match self.next_page(layout, settle) {
                    Ok(Next::Page) => {
                        self.waiting = false;
                        pages = pages.saturating_add(1);
                    }
                    Ok(Next::Waiting) => {
                        self.waiting = true;
                        return false;
                    }
                    Ok(Next::Empty) => {
                        self.waiting = false;
                        if let Some((_, tie)) = &mut self.stacks
                            && tie.time().is_some_and(|t| {
                                settle
                                    || crate::capture::clock::monotonic_ns().saturating_sub(t)
                                        > HOLD_NS
                            })
                            && let Some(held) = tie.take()
                            && hand_held(held, self.cpu, &mut procs, &mut f).is_break()
                        {
                            return false;
                        }
                        if settle && !self.settled {
                            self.settled = true;
                            if let Some(total) = lost_total(&self.stats) {
                                let lost = self.losses.settle(total);
                                add_to_ledger(&mut self.ledger, lost);
                                let time = Some(crate::capture::clock::monotonic_ns());
                                if lost > 0 && f(Arrival::Lost { lost, time }).is_break() {
                                    // The marker follows at the next read.
                                    self.settled = false;
                                    return false;
                                }
                            }
                            let _ = f(Arrival::Marker);
                        }
                        return false;
                    }
                    Err(()) => {
                        pages = pages.saturating_add(1);
                        if f(Arrival::Malformed).is_break() {
                            return false;
                        }
                    }
                }
                continue;
            };
            let page = page_at(&self.page, self.journal.as_ref(), self.source, self.len);
            // A page's records with nothing to tie or leave out (no stacks, no replay) in
            // a loop of their own: the session's cost per record (BENCHMARKS.md, issue
            // 41). Anything else (a loss, an error, the end) is read again below.
            if self.stacks.is_none() && self.skip.is_none() {
                loop {
                    let before = *cursor;
                    let Some(Ok(Item::Record { time, raw, .. })) = cursor.next_item(layout, page)
                    else {
                        *cursor = before;
                        break;
                    };
                    if hold_after.is_some_and(|h| time > h) {
                        *cursor = before;
                        return true;
                    }
                    self.page_last = time;
                    if f(sample(raw, time, self.cpu, |tid| procs.pid_of(tid))).is_break() {
                        return false;
                    }
                }
            }
            let before = *cursor;
            let arrival = match cursor.next_item(layout, page) {
                None => {
                    self.page_done();
                    continue;
                }
                Some(Err(_)) => {
                    self.page_done();
                    Arrival::Malformed
                }
                // A killed run's page: its loss was said with its records, if any of
                // them was written (the lost line goes out before them).
                Some(Ok(Item::Missed { .. }))
                    if matches!(self.source, Source::Replay(_))
                        && first_record_written(cursor, layout, page, self.skip.as_ref()) =>
                {
                    continue;
                }
                Some(Ok(Item::Missed { count, time })) => {
                    // The records before the loss go first.
                    if let Some((_, tie)) = &mut self.stacks
                        && let Some(held) = tie.take()
                        && hand_held(held, self.cpu, &mut procs, &mut f).is_break()
                    {
                        *cursor = before;
                        return false;
                    }
                    let stats = &self.stats;
                    let lost = self.losses.missed(count, || lost_total(stats));
                    add_to_ledger(&mut self.ledger, lost);
                    match lost {
                        0 => continue,
                        lost => Arrival::Lost {
                            lost,
                            time: Some(time),
                        },
                    }
                }
                // A stack record: tied to the record held (which goes on once complete).
                Some(Ok(Item::Record { raw, .. }))
                    if let Some((events, tie)) = &mut self.stacks
                        && let Offered::Stack(tied) = tie.offer(events, raw, Endian::NATIVE) =>
                {
                    if tied == (Tie::Attached { complete: true })
                        && let Some(held) = tie.take()
                        && hand_held(held, self.cpu, &mut procs, &mut f).is_break()
                    {
                        return false;
                    }
                    continue;
                }
                Some(Ok(Item::Record { time, .. })) if hold_after.is_some_and(|h| time > h) => {
                    *cursor = before;
                    return true;
                }
                Some(Ok(Item::Record { time, raw, .. })) => {
                    // With stacks, the record held goes first (its stack records were
                    // due before this one).
                    if let Some((_, tie)) = &mut self.stacks
                        && let Some(held) = tie.take()
                        && hand_held(held, self.cpu, &mut procs, &mut f).is_break()
                    {
                        *cursor = before;
                        return false;
                    }
                    self.page_last = time;
                    if let Some(skip) = &mut self.skip {
                        if skip.written(time) {
                            if let Some((_, tie)) = &mut self.stacks {
                                tie.discard();
                            }
                            continue;
                        }
                        self.skip = None;
                    }
                    if let Some((_, tie)) = &mut self.stacks {
                        let tid = thread_of(raw);
                        tie.hold(raw, time, tid, procs.pid_of(tid));
                        continue;
                    }
                    sample(raw, time, self.cpu, |tid| procs.pid_of(tid))
                }
            };
            if f(arrival).is_break() {
                return false;
            }
        }
    }

    /// Make the next empty read settle again (see [`CpuReader::read`]).
    pub fn unsettle(&mut self) {
        self.settled = false;
    }
}

/// Whether the first record after `cursor` on `page` is one a killed run wrote (`skip`
/// says what it wrote; none: nothing more).
fn first_record_written(
    cursor: &PageReader,
    layout: &PageLayout,
    page: &[u8],
    skip: Option<&Skip>,
) -> bool {
    let mut peek = *cursor;
    loop {
        match peek.next_item(layout, page) {
            Some(Ok(Item::Record { time, .. })) => return skip.is_some_and(|s| s.covers(time)),
            Some(Ok(Item::Missed { .. })) => {}
            _ => return false,
        }
    }
}

/// The `len` bytes of the page at `source`: in `own`, or a slot of `journal`.
fn page_at<'p>(
    own: &'p [u8],
    journal: Option<&'p Journal>,
    source: Source,
    len: usize,
) -> &'p [u8] {
    let page = match (source, journal) {
        (Source::Slot(slot) | Source::Replay(slot), Some(j)) => j.slot(slot),
        _ => own,
    };
    page.get(..len).unwrap_or(page)
}

/// Add `lost` (just reported) to `ledger`, if one is kept ([`CpuReader::keep_losses`]):
/// one positioned write of the new tally.
fn add_to_ledger(ledger: &mut Option<(File, u64)>, lost: u64) {
    if let (Some((file, total)), 1..) = (ledger, lost) {
        *total = total.saturating_add(lost);
        write_ledger(file, *total);
    }
}

/// Write `total` over the ledger `file` (fixed width: the file never holds two numbers).
fn write_ledger(file: &File, total: u64) {
    let text = format!("{total:<20}\n");
    let _ = std::os::unix::fs::FileExt::write_all_at(file, text.as_bytes(), 0);
}

/// The records a CPU's ring lost in all, from its `stats` file, if readable.
fn lost_total(stats: &Path) -> Option<u64> {
    crate::capture::tracefs::read_once(stats)
        .ok()
        .and_then(|t| stats_total(&t))
}

/// The thread of trace entry `raw` (`common_pid`; 0 when too short: it then is a
/// malformed sample).
fn thread_of(raw: &[u8]) -> u32 {
    raw.get(4..COMMON_LEN)
        .and_then(|b| b.try_into().ok())
        .map_or(0, |b| i32::from_ne_bytes(b) as u32)
}

/// Hand on `held` (a record and the stack tied to it) to `f`: first, at its process's
/// first stack (or a user frame in no mapping read), the mappings that name its user
/// frames (as context, whatever `f` says: the record must not go without them).
fn hand_held(
    held: HeldRecord<'_>,
    cpu: u32,
    procs: &mut impl Procs,
    f: &mut impl FnMut(Arrival<'_>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    let chain = Callchain::new(held.chain, CHAIN_ENDIAN);
    if let Some(pid) = held.pid
        && let Some(sighted) = procs.sight(pid, held.time, &chain)
    {
        for update in sighted.updates(pid) {
            let _ = f(Arrival::Context {
                time: sighted.since,
                update,
            });
        }
    }
    let mut arrival = sample(held.raw, held.time, cpu, |_| held.pid);
    if let Arrival::Sample { callchain, .. } = &mut arrival
        && !held.chain.is_empty()
    {
        *callchain = Some(chain);
    }
    f(arrival)
}

/// The sample for trace entry `raw`.
fn sample(raw: &[u8], time: u64, cpu: u32, pid_of: impl FnOnce(u32) -> Option<u32>) -> Arrival<'_> {
    let Some(common) = raw.get(..COMMON_LEN) else {
        return Arrival::Malformed;
    };
    let key = u64::from(u16::from_ne_bytes([common[0], common[1]]));
    let tid = i32::from_ne_bytes([common[4], common[5], common[6], common[7]]) as u32;
    Arrival::Sample {
        key: Some(key),
        time: Some(time),
        cpu: Some(cpu),
        pid: pid_of(tid),
        tid: Some(tid),
        cgroup: None,
        raw,
        callchain: None,
        user_stack: None,
    }
}
