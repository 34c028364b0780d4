//! The session's tracking instance (`instances/uevrec-<pid>-t`): the tracking events
//! (tracking.rs) in rings of their own, so that who-is-who can be read ahead of the
//! records. [`super::FtraceBackend`] drains every CPU's tracking ring at the start of each
//! pass over the rings and reads records only up to the time the last drain began
//! ([`ContextInstance::drain`]). Created by its `start_tracking` (with `--no-context`:
//! `task_newtask` alone, for process ids), removed on every way out like the session's
//! instance (its [`Drop`]; a killed run's is removed as stale by the next start).

use std::ops::ControlFlow;

use uevrec_parsers::ftrace_page::PageLayout;

use super::instance::{Instance, SetupError};
use super::reader::CpuReader;
use super::tgid::Tgids;
use super::tracking::Tracking;
use super::{FtraceOptions, configure, open_readers};
use crate::capture::backend::Arrival;
use crate::capture::backend::time_merge::TimeMerge;

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
        let readers = open_readers(&instance, layout, cpus)?;
        let (tracking, missing) = Tracking::enable(instance.dir(), tasks_only);
        let ring_pages = (kb * 1024).div_ceil(layout.page_size() as u64) as usize;
        Ok((
            ContextInstance {
                cpus: readers,
                tracking,
                merge: TimeMerge::default(),
                tasks_only,
                max_pages: ring_pages + 2,
                _instance: instance,
            },
            missing,
        ))
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
        let tracking = &self.tracking;
        let merged = self.merge.drain(|time, cpu, raw| {
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
        });
        if merged.is_break() {
            flow = ControlFlow::Break(());
        }
        (flow, began)
    }
}
