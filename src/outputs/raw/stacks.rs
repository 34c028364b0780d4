//! `record -g --raw`: the mappings of the processes whose samples the file holds. The
//! trackers report every executable mapping made while recording (`PERF_RECORD_MMAP2`,
//! with the build id where the kernel has it) and every fork and exec; a process that
//! ran before the recording started has mapped its files before that, so at its first
//! sample (or its first fork: the child starts with its mappings) its `/proc/PID/maps`
//! is read, as `perf record` synthesizes it, and written as `PERF_RECORD_MMAP2` records
//! just before that record, one nanosecond older than it. A mapping without a build id
//! (`/proc` gives none) gets its file's, read from the file the process mapped
//! ([`Modules::read_build_id`]), as `perf record --buildid-mmap` synthesizes them. With
//! `--call-graph dwarf` each executable mapping of a file comes with its file's other
//! segments ([`Segments`]), which perf's own unwinding reads. What the samples touch is
//! kept for the file's `HEADER_BUILD_ID` ([`Modules`]).

use std::collections::HashSet;

use uevrec_parsers::ContextUpdate;
use uevrec_parsers::callchain::Callchain;
use uevrec_parsers::perf_data::writer::{self, Mmap2, Stamp};

use super::build_ids::Modules;
use super::segments::Segments;
use crate::pipeline::stacks::maps::{MAX_PROCESSES, read_proc_maps};

/// Which processes the file has mappings for (or had none to give).
#[derive(Debug)]
pub struct Mapped {
    /// Process ids whose mappings are in the file (from the trackers or `/proc`), or
    /// that were looked up in `/proc` already (found or gone). Bounded: forgotten at
    /// `4 ×` [`MAX_PROCESSES`] (a process then seen again is read again: its mappings
    /// written twice, never missing).
    known: HashSet<u32>,
    /// With `--call-graph dwarf`: the loaded segments of the files mapped.
    segments: Option<Segments>,
    /// The modules the samples touch (for `HEADER_BUILD_ID`).
    modules: Modules,
}

impl Mapped {
    /// No process known yet; with `dwarf`, the files' other segments written with their
    /// executable mappings.
    pub fn new(dwarf: bool) -> Self {
        Mapped {
            known: HashSet::new(),
            segments: dwarf.then(Segments::default),
            modules: Modules::new(),
        }
    }

    /// Whether the files' other segments are written (`--call-graph dwarf`): perf
    /// unwinds the stack copies itself.
    pub fn unwound_by_perf(&self) -> bool {
        self.segments.is_some()
    }

    /// Write the executable mapping `m` (`stamp`: its record's trailer), with its file's
    /// build id when the kernel gave none, and with `--call-graph dwarf` its file's other
    /// segments.
    pub fn push(&mut self, out: &mut Vec<u8>, stamp: &Stamp, m: &Mmap2<'_>) {
        let end = m.addr.saturating_add(m.len);
        let read = match m.build_id.is_empty() {
            true => self.modules.read_build_id(m.pid, m.addr, end, m.path),
            false => None,
        };
        let m = &Mmap2 {
            build_id: read.as_deref().unwrap_or(m.build_id),
            ..*m
        };
        writer::push_mmap2(out, stamp, m);
        if let Some(segments) = &mut self.segments {
            segments.push_beside(out, stamp, m);
        }
        let update = ContextUpdate::Mmap {
            pid: m.pid,
            addr: m.addr,
            len: m.len,
            pgoff: m.pgoff,
            build_id: m.build_id,
            path: m.path,
        };
        self.modules.apply(Some(stamp.time), &update);
    }

    /// A process's program changed (an exec, a fork, an exit at `time`): what names its
    /// samples' frames from then on.
    pub fn track(&mut self, time: Option<u64>, update: &ContextUpdate<'_>) {
        self.modules.apply(time, update);
    }

    /// A sample of `pid` at `time` with `chain` (`unwound`: and a user stack copy): the
    /// modules it touches are listed in `HEADER_BUILD_ID`.
    pub fn sample(&mut self, pid: u32, time: Option<u64>, chain: &Callchain<'_>, unwound: bool) {
        self.modules.sample(pid, time, chain, unwound);
    }

    /// The file maps the loaded kernel modules `modules` (`(start, end, name)`): the
    /// kernel frames in them touch them.
    pub fn kernel_modules(&mut self, modules: Vec<(u64, u64, std::sync::Arc<str>)>) {
        self.modules.kernel_modules(modules);
    }

    /// The file's `HEADER_BUILD_ID` section ([`Modules::section`]).
    pub fn build_id_section(&self, kernel_mapped: bool) -> Vec<u8> {
        self.modules.section(kernel_mapped)
    }

    /// Modules touched but not listed (past [`super::build_ids::MAX_MODULES`]).
    pub fn build_ids_left_out(&self) -> u64 {
        self.modules.left_out()
    }

    /// The file tells `pid`'s mappings from now on (a fork, an exec, an MMAP2 record).
    pub fn seen(&mut self, pid: u32) {
        if self.known.len() >= 4 * MAX_PROCESSES {
            self.known.clear();
        }
        self.known.insert(pid);
    }

    /// Before the first sample or fork (at `time`) of a process the file has no mappings of:
    /// its executable mappings from `/proc/PID/maps`, as `PERF_RECORD_MMAP2` records of
    /// the tracking attr `tracking` (nothing when it is gone, or for pid 0, the idle
    /// task, which has none).
    pub fn synthesize(&mut self, out: &mut Vec<u8>, tracking: u64, pid: u32, time: u64) {
        if pid == 0 || self.known.contains(&pid) {
            return;
        }
        self.seen(pid);
        let Some(mappings) = read_proc_maps(pid) else {
            return;
        };
        let stamp = Stamp {
            id: tracking,
            pid,
            tid: pid,
            time: time.saturating_sub(1),
            cpu: 0,
        };
        for m in &mappings {
            let record = Mmap2 {
                pid,
                tid: pid,
                addr: m.start,
                len: m.end.saturating_sub(m.start),
                pgoff: m.pgoff,
                build_id: &m.build_id,
                path: m.path.as_bytes(),
            };
            self.push(out, &stamp, &record);
        }
    }
}
