//! The session's tracking instance (`instances/uevrec-<pid>-t`): the tracking events
//! (tracking.rs) in rings of their own, so that who-is-who can be read ahead of the
//! records. [`super::FtraceBackend`] drains every CPU's tracking ring at the start of each
//! pass over the rings and reads records only up to the time the last drain began
//! ([`ContextInstance::drain`]). Created by its `start_tracking` (with `--no-context`:
//! `task_newtask` alone, for process ids), removed on every way out like the session's
//! instance (its [`Drop`]; a killed run's is removed as stale by the next start).
//!
//! Of a named instance (`--instance`), the companion `NAME-t` is adopted with it, and its
//! pages are read into journals (journal.rs, with no writer's mark), and the names the
//! run's start-up scan of `/proc` found are kept beside them (`NAME.names`,
//! [`ContextInstance::keep_names`]): the run that adopts hands on first what the killed
//! run had learnt ([`ContextInstance::recall`]), so that the records it writes for that run
//! (written while none ran, or in flight at the kill) get the names of threads gone
//! since. Why: docs/restarts.md, "Who is who across a kill".

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use uevrec_parsers::ftrace_page::{Item, PageLayout};

use super::instance::{Instance, SetupError};
use super::journal::{Journal, MIN_SLOTS};
use super::reader::CpuReader;
use super::tgid::Tgids;
use super::tracking::Tracking;
use super::{FtraceOptions, configure, open_readers};
use crate::capture::backend::time_merge::TimeMerge;
use crate::capture::backend::{Arrival, FtraceError};

/// Ring bytes per CPU of the tracking instance: 128 KiB, as perf's tracker rings
/// (~2,500 records between two reads).
pub const TRACKING_BUFFER_BYTES: u64 = 128 * 1024;

/// The tracking instance and its readers.
#[derive(Debug)]
pub(super) struct ContextInstance {
    // Field order is drop order: the readers close trace_pipe_raw before the instance is
    // removed.
    cpus: Vec<CpuReader>,
    tracking: Tracking,
    merge: TimeMerge,
    max_pages: usize,
    /// Only new tasks, for process ids (`--no-context`): no arrivals but a lost count.
    tasks_only: bool,
    /// Of a named instance: where this run's start-up names are kept.
    names: Option<PathBuf>,
    /// Of an adopted one: the names the killed run's start-up scan found, to recall.
    recalled_names: Vec<(u32, Vec<u8>)>,
    /// Held for its [`Drop`], which removes it.
    _instance: Instance,
}

impl ContextInstance {
    /// Create the tracking instance beside `main` ([`TRACKING_BUFFER_BYTES`] per CPU, no
    /// thread filters; the same clock and overwrite mode as `main`), with the tracking
    /// events enabled and readers on `cpus`. Also returns what cannot be tracked (events
    /// this kernel lacks).
    pub(super) fn open(
        main: &Instance,
        layout: &PageLayout,
        cpus: &[u32],
        tasks_only: bool,
    ) -> Result<(ContextInstance, Vec<String>), SetupError> {
        let instance = main.sibling("t")?;
        // No thread filters: they hook sched_switch once more per instance, and the
        // tracking records of uevrec's own threads (or, with --pid, of other processes)
        // are few and harmless.
        let opts = FtraceOptions {
            buffer_bytes: TRACKING_BUFFER_BYTES,
            only_threads: None,
            exclude_threads: Vec::new(),
            named: None,
            written: None,
            // Never stacks here: the tracking records are not the user's.
            stacks: None,
        };
        // An adopted companion keeps its settings (as its main instance, mod.rs).
        let kb = if instance.adopted() {
            super::ring_kb(layout, &opts)
        } else {
            configure(&instance, layout, &opts)?
        };
        let mut readers = open_readers(&instance, layout, cpus)?;
        let (tracking, missing) = Tracking::enable(instance.dir(), tasks_only);
        let ring_pages = (kb * 1024).div_ceil(layout.page_size() as u64) as usize;
        let mut merge = TimeMerge::default();
        keep_pages(&instance, layout, &mut readers, &mut merge)?;
        let names = instance.names().filter(|_| !tasks_only);
        let recalled_names = match &names {
            Some(path) if instance.adopted() => read_names(path),
            _ => Vec::new(),
        };
        Ok((
            ContextInstance {
                cpus: readers,
                tracking,
                merge,
                tasks_only,
                names,
                recalled_names,
                max_pages: ring_pages + 2,
                _instance: instance,
            },
            missing,
        ))
    }

    /// Of an adopted companion: hand `f` what the killed run had learnt, before this
    /// run's start-up scan of `/proc` (which then says what live threads are called
    /// now): the names its own scan found (as of before every record), then what its
    /// journals kept (in time order, as [`ContextInstance::drain`] does); else nothing.
    /// Without this call, the first drain hands the journals' records on.
    pub(super) fn recall(
        &mut self,
        tgids: &mut Tgids,
        mut f: impl FnMut(u32, Arrival<'_>) -> ControlFlow<()>,
    ) {
        for (tid, comm) in std::mem::take(&mut self.recalled_names) {
            let update = uevrec_parsers::ContextUpdate::Comm { tid, comm: &comm };
            let _ = f(0, Arrival::Context { time: None, update });
        }
        let _ = self.hand_merged(tgids, f);
    }

    /// Of a named instance: keep `names` (this run's start-up scan: thread id, name)
    /// for a run that adopts the instance after a kill. Not kept (a write error): that
    /// run's records of threads named before this run and gone since have no `comm`.
    pub(super) fn keep_names(&self, names: &[(u32, Vec<u8>)]) {
        if let Some(path) = &self.names {
            write_names(path, names);
        }
    }

    /// Hand what every tracking ring holds to `f`, as [`Arrival::Context`] in time order
    /// across CPUs ([`TimeMerge`], as the perf backend does with its tracker rings;
    /// [`Arrival::ContextLost`] for what a ring lost): all of it (it is consumed); breaks
    /// when `f` broke. New tasks also go to `tgids` (their process ids are known from
    /// their creation on, see tgid.rs). Also returns when the drain began: the traced
    /// rings' records written after that stay in their pages for a later read (their
    /// thread's fork, rename or move may have reached a tracking ring after that drain),
    /// and a ring that holds such a record is read again after another drain.
    pub(super) fn drain(
        &mut self,
        layout: &PageLayout,
        tgids: &mut Tgids,
        mut f: impl FnMut(u32, Arrival<'_>) -> ControlFlow<()>,
    ) -> (ControlFlow<()>, u64) {
        let began = crate::capture::clock::monotonic_ns();
        let mut flow = ControlFlow::Continue(());
        let tasks_only = self.tasks_only;
        for c in &mut self.cpus {
            let (cpu, merge) = (c.cpu, &mut self.merge);
            c.read(
                layout,
                |_| None,
                false,
                self.max_pages,
                None,
                |a| {
                    let handed = match a {
                        Arrival::Sample {
                            time: Some(time),
                            raw,
                            ..
                        } => {
                            merge.push(time, cpu, raw);
                            ControlFlow::Continue(())
                        }
                        Arrival::Lost { lost, .. } if !tasks_only => {
                            f(cpu, Arrival::ContextLost { lost })
                        }
                        Arrival::Malformed => f(cpu, Arrival::Malformed),
                        // The reader gives every record a time; no markers without settling.
                        _ => ControlFlow::Continue(()),
                    };
                    if handed.is_break() {
                        flow = ControlFlow::Break(());
                    }
                    ControlFlow::Continue(())
                },
            );
        }
        if self.hand_merged(tgids, &mut f).is_break() {
            flow = ControlFlow::Break(());
        }
        (flow, began)
    }

    /// Hand the tracking records merged so far to `f` (new tasks to `tgids` too),
    /// oldest first.
    fn hand_merged(
        &mut self,
        tgids: &mut Tgids,
        mut f: impl FnMut(u32, Arrival<'_>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let tracking = &self.tracking;
        self.merge.drain(|time, cpu, raw| {
            let key = raw
                .get(..2)
                .map(|k| u64::from(u16::from_ne_bytes([k[0], k[1]])));
            if let Some((child, parent, thread)) = key.and_then(|k| tracking.new_task(k, raw)) {
                tgids.learn_fork(child, parent, thread);
            }
            let mut flow = ControlFlow::Continue(());
            for a in key
                .into_iter()
                .flat_map(|key| tracking.arrivals(key, Some(time), raw))
            {
                if f(cpu, a).is_break() {
                    flow = ControlFlow::Break(());
                }
            }
            flow
        })
    }
}

/// Write `names` to `path` whole (a temporary file renamed over it): per thread its id
/// (u32, native order), its name's length (one byte) and the name.
fn write_names(path: &Path, names: &[(u32, Vec<u8>)]) {
    let mut bytes = Vec::with_capacity(names.len() * 20);
    for (tid, comm) in names {
        let comm = &comm[..comm.len().min(usize::from(u8::MAX))];
        bytes.extend_from_slice(&tid.to_ne_bytes());
        bytes.push(comm.len() as u8);
        bytes.extend_from_slice(comm);
    }
    let tmp = path.with_extension("names.tmp");
    if std::fs::write(&tmp, bytes).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

/// The names [`write_names`] kept at `path` (none when missing; a cut entry ends them).
fn read_names(path: &Path) -> Vec<(u32, Vec<u8>)> {
    let bytes = std::fs::read(path).unwrap_or_default();
    let mut names = Vec::new();
    let mut rest = &bytes[..];
    while let [a, b, c, d, len, tail @ ..] = rest {
        let len = usize::from(*len);
        let Some(comm) = tail.get(..len) else {
            break;
        };
        names.push((u32::from_ne_bytes([*a, *b, *c, *d]), comm.to_vec()));
        rest = &tail[len..];
    }
    names
}

/// Of a named instance's companion: each reader reads its pages into the CPU's tracking
/// journal ([`MIN_SLOTS`] pages). An adopted companion's journals are recalled into
/// `merge`: their records since every journal is complete (one whose oldest pages were
/// read into again holds nothing before its oldest record, so a rename it lost cannot be
/// told from one that never was: what comes before is left to the `/proc` scan).
fn keep_pages(
    instance: &Instance,
    layout: &PageLayout,
    readers: &mut [CpuReader],
    merge: &mut TimeMerge,
) -> Result<(), SetupError> {
    let mut journals = Vec::new();
    for r in readers.iter() {
        let Some(path) = instance.tracking_journal(r.cpu) else {
            return Ok(());
        };
        let (journal, _) = Journal::open(&path, layout, MIN_SLOTS, None, r.cpu, instance.adopted())
            .map_err(|source| {
                SetupError::from_step(FtraceError {
                    step: format!("open {}", path.display()),
                    source,
                })
            })?;
        journals.push(journal);
    }
    let since = journals.iter().map(Journal::complete_since).max();
    for (r, mut journal) in readers.iter_mut().zip(journals) {
        while let Some(slot) = journal.replay_next() {
            for item in layout.parse_page(journal.slot(slot)) {
                match item {
                    Ok(Item::Record { time, raw, .. }) if Some(time) >= since => {
                        merge.push(time, r.cpu, raw);
                    }
                    _ => {}
                }
            }
        }
        r.keep_pages(journal, None);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_a_cut_entry_ends_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n.names");
        assert!(read_names(&path).is_empty(), "none kept");
        let names = vec![
            (1, b"systemd".to_vec()),
            (4242, b"a b\nc".to_vec()),
            (7, Vec::new()),
        ];
        write_names(&path, &names);
        assert_eq!(read_names(&path), names);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 6]).unwrap();
        assert_eq!(read_names(&path), names[..1]);
    }
}
