//! Recording with ftrace (`--backend ftrace`): a private tracefs instance per session and
//! its per-CPU `trace_pipe_raw` pages. The kernel writes an event into an ftrace ring
//! faster than into a perf ring (BENCHMARKS.md §8), so the traced programs run faster;
//! and the instance needs no descriptor per event.
//!
//! A record names its event by `common_type` (the tracefs ID, the event's key) and its
//! thread by `common_pid`; the process id comes from `tgid.rs`, who is who from a second,
//! tracking instance (`context_instance.rs`, `tracking.rs`) drained ahead of the records.
//! The instances' files and settings, and the drain threads' order: docs/architecture.md.
//!
//! Layers, lowest first: `named`, `instance`, `journal`, `tgid`, `stacks`, `reader`,
//! `tracking`, `context_instance`, `spool`.

mod context_instance;
mod instance;
pub mod journal;
pub mod named;
#[deny(clippy::arithmetic_side_effects)]
mod reader;
#[deny(clippy::arithmetic_side_effects)]
pub mod spool;
pub mod stacks;
mod tgid;
mod tracking;

use std::io;
use std::ops::ControlFlow;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::system::epoll::Epoll;

use uevrec_parsers::Endian;
use uevrec_parsers::callchain::Callchain;
use uevrec_parsers::ftrace_page::PageLayout;

use context_instance::ContextInstance;
pub use instance::{
    FtraceError, Instance, SetupError, instance_pid, name_prefix, release_for_recover, remove_stale,
};
use instance::{read_file, write_file};
pub use reader::CpuReader;
use reader::Procs;
pub use spool::{CpuSpool, SpoolBackend, SpoolPlan, SpoolReport, spool_path};
use stacks::Sight;
use tgid::Tgids;

use crate::capture::backend::{
    Arrival, AttachError, Backend, BackendError, DrainFailed, DrainPool, EventRef,
};

/// The ring fill (percent) at which a reader waiting in poll is woken.
pub const BUFFER_PERCENT: u32 = 25;

/// How an ftrace session is set up.
#[derive(Debug, Clone, Default)]
pub struct FtraceOptions {
    /// Ring bytes per CPU.
    pub buffer_bytes: u64,
    /// Record only these threads (`set_event_pid`); None: all.
    pub only_threads: Option<Vec<u32>>,
    /// Never record these threads (`set_event_notrace_pid`).
    pub exclude_threads: Vec<u32>,
    /// A named instance (`--instance`) and what it is made with (its `ring_kb` is filled
    /// in here, from `buffer_bytes`); None: a per-process one.
    pub named: Option<(named::NamedInstance, named::Recipe)>,
    /// Of a named instance whose lines are written by a writer that marks how far it got
    /// (crate::capture::staging::written): the pages are read into a journal, so that a
    /// kill loses none of those not written (journal.rs). None: read as before.
    pub written: Option<std::sync::Arc<crate::capture::staging::written::Written>>,
    /// Call stacks (`-g`): the instance's stack options (stacks.rs). None: none.
    pub stacks: Option<crate::capture::stacks::StackRequest>,
}

/// The session's [`Backend`] on a tracefs instance.
#[derive(Debug)]
pub struct FtraceBackend {
    // Field order is drop order: the readers close trace_pipe_raw before the instance is
    // removed (an open file keeps it busy).
    cpus: Vec<CpuReader>,
    epoll: Epoll,
    layout: PageLayout,
    tgids: Tgids,
    /// Settle each CPU's losses when its ring is empty (see [`Backend::set_markers`]).
    settle: bool,
    /// Pages taken from one ring per [`Backend::read`] call.
    max_pages: usize,
    /// The tracking instance ([`Backend::start_tracking`]), none before (dropped before
    /// `instance`, like the readers).
    context: Option<ContextInstance>,
    /// When the last drain of the tracking instance began (records written later wait
    /// for the next one).
    drained_until: Option<u64>,
    /// The adopted instance's notice ([`Backend::adoption`]).
    adoption: Option<String>,
    /// With call stacks: whose mappings were read (stacks.rs).
    sight: Option<Mutex<Sight>>,
    instance: Instance,
}

/// One attached event: its directory in the instance. The session disables an event
/// before it lets it go ([`Backend::disable`]); on any other way out, removing the
/// instance disables every event in it.
#[derive(Debug)]
pub struct FtraceEvent {
    dir: PathBuf,
    keys: [u64; 1],
}

impl FtraceEvent {
    /// Start recording it.
    fn enable(&self) -> Result<(), FtraceError> {
        write_file(&self.dir.join("enable"), "1")
    }

    /// Stop recording it (what it wrote stays in the ring).
    fn disable(&self) {
        let _ = write_file(&self.dir.join("enable"), "0");
    }
}

/// The page layout of this kernel's rings, from `events/header_page` and `header_event`.
fn page_layout(root: &Path) -> Result<PageLayout, SetupError> {
    let page = read_file(&root.join("events/header_page")).map_err(SetupError::from_step)?;
    let event = read_file(&root.join("events/header_event")).map_err(SetupError::from_step)?;
    PageLayout::from_header_texts(&page, &event, Endian::NATIVE).map_err(|e| {
        SetupError::Layout(format!(
            "{}/events/header_page: the ring-buffer pages are laid out in a way uevrec does \
             not read ({e})",
            root.display()
        ))
    })
}

/// The largest trace entry (common fields and payload) the kernel writes into an
/// ftrace ring of 4 KiB pages: the page's data (4,080 bytes) less the 8-byte event
/// header. Larger entries are dropped by the kernel without a count (perf takes up to
/// about 8 KiB). Measured in the VM (6.12): 4,067 bytes kept, 4,077 dropped; setting the
/// instance's `buffer_subbuf_size_kb` larger does not raise this on that kernel.
pub const MAX_ENTRY: usize = 4072;

/// Join thread ids for a pid file.
fn pid_list(tids: &[u32]) -> String {
    let v: Vec<String> = tids.iter().map(u32::to_string).collect();
    v.join(" ")
}

impl FtraceBackend {
    /// Create and configure the instance under tracefs `root` and open the readers of
    /// `cpus`. Also returns notes for standard error (stale instances found).
    pub fn open(
        root: &Path,
        cpus: &[u32],
        opts: &FtraceOptions,
    ) -> Result<(FtraceBackend, Vec<String>), SetupError> {
        let EventInstance {
            layout,
            instance,
            notes,
            kb,
            record_tgid,
            adoption,
            stack_events,
        } = EventInstance::create(root, opts)?;
        let step = SetupError::from_step;
        let epoll = Epoll::new().map_err(|source| {
            step(FtraceError {
                step: "epoll_create1".into(),
                source,
            })
        })?;
        let mut readers = open_readers(&instance, &layout, cpus)?;
        if let (Some(events), Some(request)) = (stack_events, &opts.stacks) {
            let max_frames = match request.max_stack {
                0 => crate::capture::stacks::max_stack_sysctl().unwrap_or(127),
                n => n,
            };
            for r in &mut readers {
                r.tie_stacks(events, usize::from(max_frames));
            }
        }
        keep_losses(&instance, &mut readers)?;
        let ring_pages = (kb * 1024).div_ceil(layout.page_size() as u64) as usize;
        if let Some(written) = &opts.written {
            keep_pages(&instance, &layout, ring_pages, written, &mut readers)?;
        }
        for (i, r) in readers.iter().enumerate() {
            epoll.add(r.file.as_fd(), i as u64).map_err(|source| {
                step(FtraceError {
                    step: format!("epoll_ctl on CPU {}'s trace_pipe_raw", r.cpu),
                    source,
                })
            })?;
        }
        let saved = record_tgid.then(|| root.join("saved_tgids"));
        let backend = FtraceBackend {
            cpus: readers,
            epoll,
            layout,
            tgids: Tgids::new(saved),
            settle: false,
            max_pages: ring_pages + 2,
            context: None,
            drained_until: None,
            adoption,
            sight: stack_events.map(|_| Mutex::new(Sight::default())),
            instance,
        };
        Ok((backend, notes))
    }

    /// The instance's directory.
    pub fn instance_dir(&self) -> &Path {
        self.instance.dir()
    }
}

/// The instance the events are recorded in, as both ftrace backends (this one and
/// [`SpoolBackend`]) set it up.
struct EventInstance {
    /// The rings' page layout (tracefs `events/header_page`, `header_event`).
    layout: PageLayout,
    instance: Instance,
    /// For standard error: stale instances found (and removed).
    notes: Vec<String>,
    /// KiB per CPU.
    kb: u64,
    /// The instance records thread → process ids (`saved_tgids`).
    record_tgid: bool,
    /// An adopted named instance: the notice that says so (named.rs).
    adoption: Option<String>,
    /// With call stacks: the stack records the instance writes (stacks.rs).
    stack_events: Option<uevrec_parsers::ftrace_page::stacks::StackEvents>,
}

impl EventInstance {
    /// A new instance under tracefs `root`, set up as `opts` says ([`configure`]), whose
    /// readers waiting in poll wake at [`BUFFER_PERCENT`] of a ring, recording thread →
    /// process ids where the kernel can (not fatal without, on old kernels: exited
    /// threads may then lack a process id).
    fn create(root: &Path, opts: &FtraceOptions) -> Result<EventInstance, SetupError> {
        let layout = page_layout(root)?;
        let (instance, adopted, notes) = match &opts.named {
            Some((spec, recipe)) => {
                let recipe = named::Recipe {
                    ring_kb: ring_kb(&layout, opts),
                    ..recipe.clone()
                };
                Instance::named(root, spec, &recipe)?
            }
            None => {
                let (instance, notes) = Instance::create(root)?;
                (instance, None, notes)
            }
        };
        // An adopted instance keeps its settings: writing trace_clock would empty its
        // rings, and the recipe said they are the ones asked for. Only the thread lists
        // are set (this run's threads have new ids).
        let (kb, adoption) = match adopted {
            Some(a) => {
                set_thread_filters(&instance, opts, true)?;
                let notice = named::adoption_notice(instance.dir(), &a);
                (ring_kb(&layout, opts), Some(notice))
            }
            None => (configure(&instance, &layout, opts)?, None),
        };
        instance.mark_configured()?;
        instance
            .write("buffer_percent", &BUFFER_PERCENT.to_string())
            .map_err(SetupError::from_step)?;
        let record_tgid = instance.write("options/record-tgid", "1").is_ok();
        let stack_events = match &opts.stacks {
            Some(request) => Some(stacks::stack_events(root, request)?),
            None => None,
        };
        match &stack_events {
            Some(events) => stacks::enable(&instance, events)?,
            // Off without -g (an adopted named instance may have been left with them on);
            // a kernel without the options records no stacks anyway.
            None => drop(stacks::enable(&instance, &Default::default())),
        }
        Ok(EventInstance {
            layout,
            instance,
            notes,
            kb,
            record_tgid,
            adoption,
            stack_events,
        })
    }
}

/// The ring KiB per CPU `opts` asks for: `buffer_bytes`, at least two pages of `layout`.
fn ring_kb(layout: &PageLayout, opts: &FtraceOptions) -> u64 {
    opts.buffer_bytes
        .div_ceil(1024)
        .max(2 * layout.page_size() as u64 / 1024)
}

/// Set up `instance` as `opts` says: overwrite mode, the monotonic clock (record times
/// are perf's), `opts.buffer_bytes` per CPU (at least two pages of `layout`), the thread
/// filters. Returns the KiB per CPU set.
fn configure(
    instance: &Instance,
    layout: &PageLayout,
    opts: &FtraceOptions,
) -> Result<u64, SetupError> {
    let step = SetupError::from_step;
    instance.write("options/overwrite", "1").map_err(step)?;
    instance.write("trace_clock", "mono").map_err(step)?;
    let kb = ring_kb(layout, opts);
    instance
        .write("buffer_size_kb", &kb.to_string())
        .map_err(|e| match e.source.raw_os_error() {
            Some(libc::ENOMEM | libc::EINVAL) => SetupError::BufferSize { kb, source: e },
            _ => step(e),
        })?;
    set_thread_filters(instance, opts, false)?;
    Ok(kb)
}

/// Set the thread filters of `opts` in `instance` (`--pid`, uevrec's own threads). Of an
/// adopted instance (`adopted`), `--pid`'s threads are added to the list there (rewriting
/// `set_event_pid` empties it first, and records of the listed threads were measured
/// missing for ~15 ms after), while uevrec's own list is rewritten: the dead run's thread
/// ids must not stay in it, or a program that reuses one would go unrecorded.
fn set_thread_filters(
    instance: &Instance,
    opts: &FtraceOptions,
    adopted: bool,
) -> Result<(), SetupError> {
    let step = SetupError::from_step;
    if let Some(only) = &opts.only_threads {
        let tids = pid_list(only);
        if adopted {
            instance.append("set_event_pid", &tids)
        } else {
            instance.write("set_event_pid", &tids)
        }
        .map_err(step)?;
    }
    if !opts.exclude_threads.is_empty() || adopted {
        instance
            .write("set_event_notrace_pid", &pid_list(&opts.exclude_threads))
            .map_err(step)?;
    }
    Ok(())
}

/// Of a named instance: each reader keeps its losses in the instance's ledger
/// ([`CpuReader::keep_losses`], read when the instance was adopted).
fn keep_losses(instance: &Instance, readers: &mut [CpuReader]) -> Result<(), SetupError> {
    for r in readers {
        if let Some(path) = instance.ledger(r.cpu) {
            r.keep_losses(&path, instance.adopted()).map_err(|source| {
                SetupError::from_step(FtraceError {
                    step: format!("open {}", path.display()),
                    source,
                })
            })?;
        }
    }
    Ok(())
}

/// Of a named instance: each reader reads its pages into the CPU's journal (journal.rs),
/// `ring_pages` slots at least. A new instance's marks are forgotten first (its records
/// start anew); an adopted one's journals are replayed past them.
fn keep_pages(
    instance: &Instance,
    layout: &PageLayout,
    ring_pages: usize,
    written: &std::sync::Arc<crate::capture::staging::written::Written>,
    readers: &mut [CpuReader],
) -> Result<(), SetupError> {
    if !instance.adopted() {
        written.clear();
    }
    let slots = ring_pages.max(journal::MIN_SLOTS);
    for r in readers {
        let Some(path) = instance.journal(r.cpu) else {
            continue;
        };
        let opened = journal::Journal::open(
            &path,
            layout,
            slots,
            Some(std::sync::Arc::clone(written)),
            r.cpu,
            instance.adopted(),
        );
        let (journal, skip) = opened.map_err(|source| {
            SetupError::from_step(FtraceError {
                step: format!("open {}", path.display()),
                source,
            })
        })?;
        r.keep_pages(journal, skip);
    }
    Ok(())
}

/// A reader of each of `cpus`' rings of `instance`.
fn open_readers(
    instance: &Instance,
    layout: &PageLayout,
    cpus: &[u32],
) -> Result<Vec<CpuReader>, SetupError> {
    cpus.iter()
        .map(|&cpu| {
            CpuReader::open(instance.dir(), cpu, layout.page_size()).map_err(|source| {
                SetupError::from_step(FtraceError {
                    step: format!(
                        "open {}/per_cpu/cpu{cpu}/trace_pipe_raw",
                        instance.dir().display()
                    ),
                    source,
                })
            })
        })
        .collect()
}

/// Attach `event` in `instance` ([`Backend::attach`] of both ftrace backends): set its
/// filter, leave it disabled.
fn attach_in(
    instance: &Instance,
    event: EventRef<'_>,
    filter: Option<&str>,
) -> Result<FtraceEvent, AttachError> {
    let dir = instance
        .dir()
        .join("events")
        .join(event.system)
        .join(event.name);
    // The session's expression is the same for every attachment, so without one no
    // filter was ever set in this instance: nothing to clear.
    if let Some(expr) = filter {
        write_file(&dir.join("filter"), expr).map_err(|e| attach_error(e, true))?;
    } else if !dir.is_dir() {
        return Err(AttachError::Vanished);
    }
    Ok(FtraceEvent {
        dir,
        keys: [u64::from(event.id)],
    })
}

/// Stop every one of `events` of `instance` ([`Backend::disable_all`] of both ftrace
/// backends). One write of `0` to the instance's `events/enable` stops every event in it
/// (the kernel walks its own list), instead of an open, write and close per event: with
/// 10,000 events that is 30,000 system calls fewer at stop. Falls back to one write per
/// event if the instance refuses.
fn disable_all_in<'e>(instance: &Instance, events: impl Iterator<Item = &'e FtraceEvent>) {
    if instance.write("events/enable", "0").is_err() {
        for ev in events {
            ev.disable();
        }
    }
}

/// What a failed write to an event's file means for [`Backend::attach`].
fn attach_error(e: FtraceError, filter: bool) -> AttachError {
    match e.source.raw_os_error() {
        Some(libc::ENOENT | libc::ENODEV) => AttachError::Vanished,
        Some(libc::EACCES | libc::EPERM) => AttachError::Denied(e.into()),
        Some(libc::EINVAL) if filter => AttachError::FilterRefused(e.into()),
        _ => AttachError::Failed(e.into()),
    }
}

impl Backend for FtraceBackend {
    type Event = FtraceEvent;

    fn cpus(&self) -> usize {
        self.cpus.len()
    }

    fn filters_threads(&self) -> bool {
        true
    }

    fn attach(
        &mut self,
        event: EventRef<'_>,
        filter: Option<&str>,
    ) -> Result<FtraceEvent, AttachError> {
        attach_in(&self.instance, event, filter)
    }

    fn start_tracking(&mut self) -> Result<Vec<String>, BackendError> {
        let cpus: Vec<u32> = self.cpus.iter().map(|c| c.cpu).collect();
        match ContextInstance::open(&self.instance, &self.layout, &cpus, false) {
            Ok((context, missing)) => {
                self.context = Some(context);
                Ok(missing)
            }
            Err(e) => Ok(vec![format!(
                "thread names and cgroups are not tracked: the tracking instance could not \
                 be set up: {e}"
            )]),
        }
    }

    fn recall_context(&mut self, f: impl FnMut(u32, Arrival<'_>) -> ControlFlow<()>) {
        if let Some(context) = &mut self.context {
            context.recall(&mut self.tgids, f);
        }
    }

    fn keep_names(&mut self, names: &[(u32, Vec<u8>)]) {
        if let Some(context) = &self.context {
            context.keep_names(names);
        }
    }

    fn track_new_tasks(&mut self) {
        let cpus: Vec<u32> = self.cpus.iter().map(|c| c.cpu).collect();
        // Without it, process ids fall back to a cache, /proc and saved_tgids (tgid.rs).
        if let Ok((tasks, _)) = ContextInstance::open(&self.instance, &self.layout, &cpus, true) {
            self.context = Some(tasks);
        }
    }

    fn enable(&mut self, event: &FtraceEvent) -> Result<(), BackendError> {
        Ok(event.enable()?)
    }

    fn disable(&mut self, event: &FtraceEvent) {
        event.disable();
    }

    fn disable_all<'e>(&mut self, events: impl Iterator<Item = &'e FtraceEvent>) {
        // A kept instance (--keep-instance) goes on recording for the next run.
        if !self.instance.kept() {
            disable_all_in(&self.instance, events);
        }
    }

    fn adoption(&self) -> Option<String> {
        self.adoption.clone()
    }

    fn keeps_pages(&self) -> bool {
        self.cpus.iter().any(CpuReader::keeps_pages)
    }

    fn keys(event: &FtraceEvent) -> &[u64] {
        &event.keys
    }

    fn buffers(&self) -> usize {
        self.cpus.len()
    }

    fn read(&mut self, buffer: usize, f: impl FnMut(u32, Arrival<'_>) -> ControlFlow<()>) {
        let Some(c) = self.cpus.get_mut(buffer) else {
            return;
        };
        let cpu = c.cpu;
        let sight = self.sight.as_ref();
        let mut f = tracked(sight, f);
        // Who-is-who of every CPU first, in time order (context_instance.rs); records
        // written after that drain began stay for a later read. Drained once per pass
        // over the buffers (an empty ring still costs a read(2), ~3 µs), and again when
        // this ring holds a record written after the last drain.
        let tgids = &mut self.tgids;
        let Some(context) = &mut self.context else {
            c.read(
                &self.layout,
                BackendProcs { tgids, sight },
                self.settle,
                self.max_pages,
                None,
                |a| f(cpu, a),
            );
            return;
        };
        let mut drained = false;
        loop {
            if buffer == 0 || self.drained_until.is_none() || drained {
                let (flow, began) = context.drain(&self.layout, tgids, &mut f);
                self.drained_until = Some(began);
                if flow.is_break() {
                    return;
                }
            }
            let held = c.read(
                &self.layout,
                BackendProcs {
                    tgids: &mut *tgids,
                    sight,
                },
                self.settle,
                self.max_pages,
                self.drained_until,
                |a| f(cpu, a),
            );
            if !held || drained {
                return;
            }
            drained = true;
        }
    }

    fn wait(&self, timeout: Duration) -> io::Result<()> {
        // A ring whose journal waits for the writer stays readable: poll would return at
        // once, and the session (real-time) would spin instead of letting the writer on.
        if self.cpus.iter().any(CpuReader::waits_for_writer) {
            std::thread::sleep(timeout.min(Duration::from_millis(1)));
            return Ok(());
        }
        self.epoll.wait(timeout).map(drop)
    }

    fn drains_in_parallel(&self) -> bool {
        true
    }

    fn read_trackers(&mut self, mut f: impl FnMut(u32, Arrival<'_>) -> ControlFlow<()>) -> u64 {
        let Some(context) = &mut self.context else {
            return u64::MAX;
        };
        // As in `read`: records written after this drain began wait for the next pass.
        // The drain hands on all it read (consumed), whatever `f` says.
        let mut f = tracked(self.sight.as_ref(), &mut f);
        let (_, began) = context.drain(&self.layout, &mut self.tgids, &mut f);
        self.drained_until = Some(began);
        began
    }

    fn read_groups<G>(
        &mut self,
        limit: u64,
        pool: &DrainPool,
        groups: &mut [G],
    ) -> Result<(), DrainFailed>
    where
        G: FnMut(u32, Arrival<'_>) -> ControlFlow<()> + Send,
    {
        let (layout, settle, max_pages) = (&self.layout, self.settle, self.max_pages);
        let hold_after = (limit != u64::MAX).then_some(limit);
        // Thread → process ids: the trackers' news went in before the pass (read_trackers),
        // so within a pass an answer does not change; each thread keeps the last one (a
        // CPU runs one thread for a while) and asks the shared cache only on a change.
        let tgids = Mutex::new(&mut self.tgids);
        let sight = self.sight.as_ref();
        // Group i on drain thread i (started once for the session, crate::capture::backend).
        pool.read_groups(&mut self.cpus, groups, |readers, f| {
            let mut procs = GroupProcs {
                tgids: &tgids,
                sight,
                last: None,
            };
            for c in readers.iter_mut() {
                let cpu = c.cpu;
                c.read(layout, &mut procs, settle, max_pages, hold_after, |a| {
                    f(cpu, a)
                });
            }
        })
    }

    fn marker_cpus(&self) -> Vec<u32> {
        self.cpus.iter().map(|c| c.cpu).collect()
    }

    fn stack_notice(&self) -> Option<String> {
        let mut untied = uevrec_parsers::ftrace_page::stacks::Untied::default();
        for c in &self.cpus {
            untied.add(&c.untied());
        }
        untied.describe()
    }

    fn maps_notice(&self) -> Option<String> {
        let sight = self.sight.as_ref()?.lock();
        sight
            .unwrap_or_else(PoisonError::into_inner)
            .rereads()
            .describe()
    }

    fn set_markers(&mut self, on: bool) {
        self.settle = on;
        if on {
            for c in &mut self.cpus {
                c.unsettle();
            }
        }
    }
}

/// `f`, telling `sight` (with call stacks) of each rename and new task on its way.
fn tracked<'s, F>(
    sight: Option<&'s Mutex<Sight>>,
    mut f: F,
) -> impl FnMut(u32, Arrival<'_>) -> ControlFlow<()> + 's
where
    F: FnMut(u32, Arrival<'_>) -> ControlFlow<()> + 's,
{
    move |cpu, a| {
        if let (Some(sight), Arrival::Context { time, update }) = (sight, &a) {
            sight
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .track(*time, update);
        }
        f(cpu, a)
    }
}

/// The session thread's answers about threads: the process cache, and (with call
/// stacks) whose mappings were read.
struct BackendProcs<'a> {
    tgids: &'a mut Tgids,
    sight: Option<&'a Mutex<Sight>>,
}

impl Procs for BackendProcs<'_> {
    fn pid_of(&mut self, tid: u32) -> Option<u32> {
        self.tgids.tgid(tid)
    }

    fn sight(&mut self, pid: u32, time: u64, chain: &Callchain<'_>) -> Option<stacks::Sighted> {
        self.sight?
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .sight(pid, time, chain)
    }
}

/// A drain thread's answers about threads: the shared process cache (each thread keeps
/// the last answer: a CPU runs one thread for a while, and within a pass an answer does
/// not change), and whose mappings were read.
struct GroupProcs<'a, 't> {
    tgids: &'a Mutex<&'t mut Tgids>,
    sight: Option<&'a Mutex<Sight>>,
    last: Option<(u32, u32)>,
}

impl Procs for &mut GroupProcs<'_, '_> {
    fn pid_of(&mut self, tid: u32) -> Option<u32> {
        match self.last {
            Some((t, p)) if t == tid => Some(p),
            _ => {
                let pid = self
                    .tgids
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .tgid(tid);
                self.last = pid.map(|p| (tid, p));
                pid
            }
        }
    }

    fn sight(&mut self, pid: u32, time: u64, chain: &Callchain<'_>) -> Option<stacks::Sighted> {
        self.sight?
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .sight(pid, time, chain)
    }
}
