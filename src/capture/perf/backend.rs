//! [`PerfBackend`]: the session's [`Backend`] on perf rings (one per CPU) and tracepoint
//! descriptors redirected into them.

use std::io;
use std::ops::ControlFlow;
use std::time::Duration;

use uevrec_parsers::perf_sample::{LineFields, PERF_RECORD_SAMPLE, Record, SampleFormat};

use super::reaper::{ReaperPipe, close_in_background};
use super::{EventFds, PerfError, Rings};
use crate::capture::backend::time_merge::TimeMerge;
use crate::capture::backend::{
    Arrival, AttachError, Backend, BackendError, DrainFailed, DrainPool, EventRef,
};

/// The rings and the layout of their samples.
#[derive(Debug)]
pub struct PerfBackend {
    rings: Rings,
    layout: SampleFormat,
    /// Made at the start, for a release when no descriptor is left to make a pipe with
    /// (see [`super::reaper`]).
    spare_pipe: Option<ReaperPipe>,
    /// The trackers' records of one read, to be handed on in time order across CPUs
    /// (bounded by the trackers' ring sizes; reused).
    tracked: TimeMerge,
}

impl PerfBackend {
    /// A backend on `rings` (opened by [`Rings::open`]).
    pub fn new(rings: Rings) -> Self {
        PerfBackend {
            layout: SampleFormat::new(rings.tracking().sample_type(), true)
                .expect("uevrec's own sample_type is supported")
                .with_user_regs(crate::capture::stacks::USER_REGS_MASK),
            rings,
            spare_pipe: ReaperPipe::new().ok(),
            tracked: TimeMerge::default(),
        }
    }
}

/// What one ring record is, for the session (`marker`: the sample id of the ring's
/// marker event, if it has one). In line, a sample read at its fixed places
/// ([`SampleFormat::line_fields`]: no
/// [`Sample`](uevrec_parsers::perf_sample::Sample) built and copied): the session's cost
/// per record (BENCHMARKS.md, issue 41). Every other record out of line.
#[inline(always)]
pub fn arrival<'a>(layout: &SampleFormat, marker: Option<u64>, bytes: &'a [u8]) -> Arrival<'a> {
    match layout.line_fields(bytes) {
        Some(s) => sample_arrival(s, marker),
        None => parsed_arrival(layout, marker, bytes),
    }
}

/// The arrival of sample `s`: the marker's (`marker`: its id), or a record's.
#[inline(always)]
fn sample_arrival(s: LineFields<'_>, marker: Option<u64>) -> Arrival<'_> {
    // Marker ids are perf ids like the events', so never an event's.
    if s.id.is_some() && s.id == marker {
        return Arrival::Marker;
    }
    Arrival::Sample {
        key: s.id,
        time: s.time,
        cpu: s.cpu,
        pid: s.pid,
        tid: s.tid,
        cgroup: s.cgroup,
        raw: s.raw,
        callchain: s.callchain,
        user_stack: s.user_stack,
    }
}

/// [`arrival`] of a record that is not a whole sample at its fixed places: the other
/// records, and samples that the field-by-field reading takes or names the fault of.
#[inline(never)]
fn parsed_arrival<'a>(layout: &SampleFormat, marker: Option<u64>, bytes: &'a [u8]) -> Arrival<'a> {
    match layout.parse(bytes) {
        Ok(Record::Sample(s)) => sample_arrival(s.into(), marker),
        Ok(
            rec @ (Record::Comm { .. }
            | Record::Task { .. }
            | Record::Cgroup { .. }
            | Record::Mmap { .. }),
        ) => match rec.context_update() {
            Some((time, update)) => Arrival::Context { time, update },
            None => Arrival::Other,
        },
        Ok(
            Record::Lost {
                lost, sample_id, ..
            }
            | Record::LostSamples { lost, sample_id },
        ) => Arrival::Lost {
            lost,
            time: sample_id.time,
        },
        Ok(Record::Other(_)) => Arrival::Other,
        Err(_) => Arrival::Malformed,
    }
}

impl Backend for PerfBackend {
    type Event = EventFds;

    fn cpus(&self) -> usize {
        self.rings.len()
    }

    fn attach(
        &mut self,
        event: EventRef<'_>,
        filter: Option<&str>,
    ) -> Result<EventFds, AttachError> {
        EventFds::open(event.id, &self.rings, filter).map_err(|e: PerfError| {
            match (e.step, e.source.raw_os_error()) {
                ("perf_event_open", Some(libc::ENOENT | libc::ENODEV)) => AttachError::Vanished,
                (_, Some(libc::EACCES | libc::EPERM)) => AttachError::Denied(e.into()),
                ("PERF_EVENT_IOC_SET_FILTER", _) => AttachError::FilterRefused(e.into()),
                _ => AttachError::Failed(e.into()),
            }
        })
    }

    fn start_tracking(&mut self) -> Result<Vec<String>, BackendError> {
        self.rings.start_tracking()?;
        let mut missing = Vec::new();
        if !self.rings.tracking().cgroups {
            missing.push(
                "the kernel refused PERF_SAMPLE_CGROUP (Linux 5.7 with CONFIG_CGROUP_PERF \
                 needed): `cgroup` is each thread's cgroup at start or at its creation"
                    .into(),
            );
        } else if let Some(child) =
            crate::capture::context::cgroup_root().and_then(|r| first_child(&r))
            && super::sys::perf_event_active_in(&child).is_ok_and(|active| !active)
        {
            missing.push(format!(
                "the perf_event cgroup controller is not active below the cgroup v2 root \
                 (none in {}: nothing changed the root's controllers since boot, e.g. no \
                 systemd and no cgroup v1 mount), so PERF_SAMPLE_CGROUP names `/` for every \
                 task: mount and unmount a cgroup v1 perf_event hierarchy once (`mount -t \
                 cgroup -o perf_event none DIR && umount DIR`), or use --backend ftrace",
                child.display()
            ));
        }
        Ok(missing)
    }

    fn track_new_tasks(&mut self) {
        // Without context the trackers exist only for call stacks (the mappings that name
        // their frames); a failure leaves frames to say `no_mapping`.
        let _ = self.rings.start_tracking();
    }

    fn enable(&mut self, event: &EventFds) -> Result<(), BackendError> {
        Ok(event.enable()?)
    }

    fn disable(&mut self, event: &EventFds) {
        event.disable();
    }

    fn keys(event: &EventFds) -> &[u64] {
        event.ids()
    }

    fn buffers(&self) -> usize {
        self.rings.len()
    }

    fn read(&mut self, buffer: usize, mut f: impl FnMut(u32, Arrival<'_>) -> ControlFlow<()>) {
        let layout = &self.layout;
        // Samples written after this stay for the next read: their thread's fork or
        // rename may reach a tracker after the trackers were read below.
        let limit = crate::capture::clock::monotonic_ns();
        // Who-is-who of every CPU first (an empty ring costs one load), merged by time
        // across CPUs (a thread renamed on one CPU may fork on another), so the samples
        // read next find the threads they were written by; renames after a sample are
        // undone by time (uevrec_parsers::context).
        for c in self.rings.cpus_mut() {
            let cpu = c.cpu;
            let Some((_, tracker)) = &mut c.tracker else {
                continue;
            };
            let merge = &mut self.tracked;
            tracker.read(|rec| {
                let time = match layout.parse(rec) {
                    Ok(
                        Record::Comm { sample_id, .. }
                        | Record::Task { sample_id, .. }
                        | Record::Cgroup { sample_id, .. }
                        | Record::Mmap { sample_id, .. }
                        | Record::Lost { sample_id, .. }
                        | Record::LostSamples { sample_id, .. },
                    ) => sample_id.time.unwrap_or(0),
                    _ => 0,
                };
                merge.push(time, cpu, rec);
                ControlFlow::Continue(())
            });
        }
        // A full chunk ends this read after them.
        let stopped = self
            .tracked
            .drain(|_, cpu, rec| match arrival(layout, None, rec) {
                Arrival::Lost { lost, .. } => f(cpu, Arrival::ContextLost { lost }),
                a @ Arrival::Context { .. } => f(cpu, a),
                // Nothing else is written there.
                _ => ControlFlow::Continue(()),
            })
            .is_break();
        if stopped {
            return;
        }
        let Some(c) = self.rings.cpus_mut().get_mut(buffer) else {
            return;
        };
        let (cpu, marker) = (c.cpu, c.marker_id());
        if c.tracker.is_none() {
            c.ring.read(|rec| f(cpu, arrival(layout, marker, rec)));
            return;
        }
        let later = |rec: &[u8]| {
            let is_sample = layout
                .header(rec)
                .is_some_and(|h| h.kind == PERF_RECORD_SAMPLE);
            is_sample && layout.parse_sample(rec).is_ok_and(|s| s.time > Some(limit))
        };
        c.ring
            .read_until(later, |rec| f(cpu, arrival(layout, marker, rec)));
    }

    fn wait(&self, timeout: Duration) -> io::Result<()> {
        self.rings.wait(timeout).map(|_| ())
    }

    fn drains_in_parallel(&self) -> bool {
        true
    }

    fn read_trackers(&mut self, mut f: impl FnMut(u32, Arrival<'_>) -> ControlFlow<()>) -> u64 {
        let layout = &self.layout;
        let limit = crate::capture::clock::monotonic_ns();
        if !self.rings.cpus_mut().iter().any(|c| c.tracker.is_some()) {
            return u64::MAX;
        }
        for c in self.rings.cpus_mut() {
            let cpu = c.cpu;
            let Some((_, tracker)) = &mut c.tracker else {
                continue;
            };
            let merge = &mut self.tracked;
            tracker.read(|rec| {
                merge.push(tracked_time(layout, rec), cpu, rec);
                ControlFlow::Continue(())
            });
        }
        // All of them are handed on (they were consumed), whatever `f` says.
        let _ = self
            .tracked
            .drain(|_, cpu, rec| match arrival(layout, None, rec) {
                Arrival::Lost { lost, .. } => f(cpu, Arrival::ContextLost { lost }),
                a @ Arrival::Context { .. } => f(cpu, a),
                _ => ControlFlow::Continue(()),
            });
        limit
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
        let layout = &self.layout;
        // Group i on drain thread i (started once for the session, crate::capture::backend).
        pool.read_groups(self.rings.cpus_mut(), groups, |rings, f| {
            for c in rings.iter_mut() {
                let (cpu, marker) = (c.cpu, c.marker_id());
                let mut f = |rec: &[u8]| f(cpu, arrival(layout, marker, rec));
                if c.tracker.is_none() || limit == u64::MAX {
                    c.ring.read(&mut f);
                } else {
                    c.ring
                        .read_until(|rec| sample_after(layout, rec, limit), &mut f);
                }
            }
        })
    }

    fn marker_cpus(&self) -> Vec<u32> {
        self.rings.marker_cpus()
    }

    fn set_markers(&mut self, on: bool) {
        self.rings.set_markers(on);
    }

    fn release(&mut self, events: Vec<EventFds>) {
        let pipe = ReaperPipe::new().ok().or_else(|| self.spare_pipe.take());
        let fds = events.into_iter().flat_map(EventFds::into_fds).collect();
        close_in_background(fds, pipe);
    }
}

/// A cgroup directory right below the cgroup v2 root `root`, if there is one.
/// The time of a tracker's record (0 when it has none).
fn tracked_time(layout: &SampleFormat, rec: &[u8]) -> u64 {
    match layout.parse(rec) {
        Ok(
            Record::Comm { sample_id, .. }
            | Record::Task { sample_id, .. }
            | Record::Cgroup { sample_id, .. }
            | Record::Mmap { sample_id, .. }
            | Record::Lost { sample_id, .. }
            | Record::LostSamples { sample_id, .. },
        ) => sample_id.time.unwrap_or(0),
        _ => 0,
    }
}

/// Whether `rec` is a sample written after `limit` (it stays for the next read).
fn sample_after(layout: &SampleFormat, rec: &[u8], limit: u64) -> bool {
    let is_sample = layout
        .header(rec)
        .is_some_and(|h| h.kind == PERF_RECORD_SAMPLE);
    is_sample && layout.parse_sample(rec).is_ok_and(|s| s.time > Some(limit))
}

fn first_child(root: &std::path::Path) -> Option<std::path::PathBuf> {
    std::fs::read_dir(root)
        .ok()?
        .flatten()
        .find(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
}
