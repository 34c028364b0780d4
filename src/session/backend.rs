//! What the session needs from a way of recording tracepoints: attach event X, detach
//! event X, drain what arrived. The perf implementation is [`crate::perf::PerfBackend`];
//! the attach/rescan state machine is tested against a fake one (no root needed), and an
//! ftrace backend (a tracefs instance and its `trace_pipe_raw` pages) can implement it
//! the same way: its events are enable files, its keys the events' tracefs IDs.

use std::io;
use std::ops::ControlFlow;
use std::time::Duration;

use crate::perf::PerfError;

/// One way of recording tracepoints into per-CPU buffers.
pub trait Backend {
    /// One attached event (for perf: its descriptor on every CPU). Dropping it detaches.
    type Event;

    /// The number of CPUs recorded (for the open-file limit and the `attached` notice).
    fn cpus(&self) -> usize;

    /// Attach tracepoint `id`, with the kernel filter `filter`, disabled until
    /// [`Backend::enable`].
    fn attach(&mut self, id: u32, filter: Option<&str>) -> Result<Self::Event, AttachError>;

    /// Start recording `event`.
    fn enable(&mut self, event: &Self::Event) -> Result<(), PerfError>;

    /// Stop recording `event`; what it recorded stays in the buffers to be drained.
    fn disable(&mut self, event: &Self::Event);

    /// The keys by which [`Arrival::Sample`]s name `event` (perf: one sample id per CPU).
    fn keys(event: &Self::Event) -> &[u64];

    /// The number of buffers [`Backend::read`] drains (perf: one ring per CPU).
    fn buffers(&self) -> usize;

    /// Hand what arrived in buffer `buffer` to `f` (with the buffer's CPU), oldest first,
    /// until the buffer is empty or `f` breaks; what was handed over is consumed.
    fn read(&mut self, buffer: usize, f: impl FnMut(u32, Arrival<'_>) -> ControlFlow<()>);

    /// Sleep until a buffer has much to read or `timeout` ends.
    fn wait(&self, timeout: Duration) -> io::Result<()>;

    /// The CPUs whose buffers can be made to report the losses the kernel still owes
    /// (see [`Backend::set_markers`]); empty when the backend has no such thing.
    fn marker_cpus(&self) -> Vec<u32>;

    /// Make each of [`Backend::marker_cpus`] produce an [`Arrival::Marker`] soon (on),
    /// or stop that (off).
    fn set_markers(&mut self, on: bool);

    /// Detach `events` (disabled and drained already). The default drops them; a backend
    /// whose detaching blocks for long (perf: RCU grace periods per tracepoint) does it
    /// off the caller's path, so that neither the drain loop nor the exit waits for it.
    fn release(&mut self, events: Vec<Self::Event>) {
        drop(events);
    }
}

/// One thing read from a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival<'a> {
    /// A record of some event.
    Sample {
        /// Names the event (see [`Backend::keys`]); None when the record has no key.
        key: Option<u64>,
        /// The kernel's time stamp (perf's sample clock), if any.
        time: Option<u64>,
        /// The CPU it was recorded on, when the record says.
        cpu: Option<u32>,
        /// Process id.
        pid: Option<u32>,
        /// Thread id.
        tid: Option<u32>,
        /// The trace entry (common fields first).
        raw: &'a [u8],
    },
    /// The kernel dropped `lost` records of this buffer (it was full).
    Lost {
        /// How many.
        lost: u64,
        /// The kernel's time stamp, if any.
        time: Option<u64>,
    },
    /// The buffer's marker (see [`Backend::set_markers`]): not a record.
    Marker,
    /// Something else the buffer holds (not a record, nothing lost).
    Other,
    /// A record that did not parse.
    Malformed,
}

/// Why [`Backend::attach`] failed.
#[derive(Debug)]
pub enum AttachError {
    /// The event vanished between listing and attaching.
    Vanished,
    /// The kernel refused the filter expression (it says no more than EINVAL).
    FilterRefused(PerfError),
    /// Not permitted (EACCES, EPERM): will not go away.
    Denied(PerfError),
    /// Another failure of one step (e.g. EMFILE).
    Failed(PerfError),
}
