//! `record --raw FILE --raw-format trace-dat` (with `--backend ftrace`): a trace-cmd
//! trace.dat (v6) that `uevrec decode` and `trace-cmd report` read.
//!
//! ```text
//!  spool threads (crate::ftrace::spool): ring pages ──splice──▶ .FILE.cpuN.uevrec-spool
//!  session ──staging channel──▶ this thread (`uevrec-raw`, [`run`]): keeps each attached
//!    event's format (late ones too, as read when it attached), prints the notices,
//!    returns the chunks
//!  at the end (the session has stopped and the spools are complete):
//!    FILE = header (uevrec_parsers::trace_dat::write) + each spool at its page-aligned
//!    offset (copy_file_range: no copy through user space); then the spools are removed
//! ```
//!
//! Times: the pages carry the instance's `mono` stamps; the file's OFFSET option is
//! `REALTIME - MONOTONIC` sampled when the rings started, which `uevrec decode` and
//! `trace-cmd report` add to every stamp: decoded times are Unix time, as live.
//!
//! A file that cannot be assembled (a full disk …) is reported with the spools kept
//! (never removed then): nothing recorded is lost silently.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, Read as _, Seek as _, SeekFrom};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use crossbeam_channel::Receiver;
use uevrec_parsers::Endian;
use uevrec_parsers::trace_dat::write::{DatMeta, header};

use super::host::{HostInfo, Uname};
use super::{Next, Notices, RawError, RawSummary};
use crate::ftrace::{SpoolPlan, SpoolReport};
use crate::pipeline::{Staged, StagedEntry};
use crate::sink::SinkError;

/// What a trace.dat holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DatStats {
    /// Ring pages in it (all CPUs).
    pub pages: u64,
    /// CPUs.
    pub cpus: usize,
}

/// A trace.dat output, created and ready.
#[derive(Debug)]
pub struct DatOutput {
    path: PathBuf,
    file: File,
    host: HostInfo,
    plan: SpoolPlan,
    /// Print the session's notices on standard error.
    notices: bool,
}

impl DatOutput {
    /// An output into `path` (created now, mode `mode`, never over an existing file)
    /// describing `host`, assembled from what the spooling of `plan` reports.
    pub fn create(
        path: &Path,
        mode: u32,
        host: HostInfo,
        plan: SpoolPlan,
        notices: bool,
    ) -> Result<Self, SinkError> {
        let file = super::file::create_new(path, mode)?;
        Ok(DatOutput {
            path: path.to_owned(),
            file,
            host,
            plan,
            notices,
        })
    }
}

/// The attached events' formats: by system in first-seen order, one per tracepoint id
/// (the first; a trace.dat names a format by id).
#[derive(Debug, Default)]
struct Formats {
    ids: BTreeSet<u32>,
    systems: Vec<(String, Vec<String>)>,
}

impl Formats {
    fn add(&mut self, id: u32, system: &str, text: &str) {
        if !self.ids.insert(id) {
            return;
        }
        match self.systems.iter_mut().find(|(s, _)| s == system) {
            Some((_, texts)) => texts.push(text.to_owned()),
            None => self
                .systems
                .push((system.to_owned(), vec![text.to_owned()])),
        }
    }
}

/// Keep the formats from `staged` until the session closes it, passing the chunks on to
/// `next`; then assemble the trace.dat from the spools.
pub fn run(out: DatOutput, staged: Receiver<Staged>, next: Next) -> Result<RawSummary, RawError> {
    let mut formats = Formats::default();
    let mut notices = out.notices.then(Notices::new);
    for msg in staged.iter() {
        match &msg {
            Staged::Format {
                prepared, source, ..
            } => formats.add(prepared.format().id, &source.system, &source.text),
            Staged::Chunk(chunk) => {
                if let Some(n) = &mut notices {
                    for entry in chunk.entries() {
                        if let StagedEntry::Notice {
                            time_unix_ns,
                            what,
                            event,
                            message,
                        } = entry
                        {
                            n.notice(time_unix_ns, what, event, message);
                        }
                    }
                    n.flush();
                }
            }
            Staged::Drained(_) => {}
        }
        if !next.pass(msg) {
            break;
        }
    }
    drop(staged);
    drop(next);
    assemble(out, &formats)
}

/// The report of the spooling, once it ended.
fn report_of(plan: &SpoolPlan) -> SpoolReport {
    plan.report
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// Write the header and every spool into `out`'s file; remove the spools when it is
/// complete.
fn assemble(mut out: DatOutput, formats: &Formats) -> Result<RawSummary, RawError> {
    let report = report_of(&out.plan);
    let page = u64::from(report.page_size.max(1));
    // Whole pages only (a spool cut by a failed write ends in part of one).
    let sizes: Vec<u64> = report.cpus.iter().map(|c| c.bytes / page * page).collect();
    let uname = Uname::now();
    let uname = format!(
        "Linux {} {} {} {}",
        uname.nodename, uname.release, uname.version, uname.machine
    );
    let version = concat!("uevrec ", env!("CARGO_PKG_VERSION"));
    let cpu_stats: Vec<(u32, String)> = report
        .cpus
        .iter()
        .filter_map(|c| Some((c.cpu, c.stats.clone()?)))
        .collect();
    let meta = DatMeta {
        endian: Endian::NATIVE,
        long_size: out.host.long_size,
        page_size: report.page_size,
        header_page: &out.host.header_page,
        header_event: &out.host.header_event,
        ftrace_formats: &report.ftrace_formats,
        systems: &formats.systems,
        cmdlines: &report.cmdlines,
        trace_clock: &report.trace_clock,
        offset_ns: report.offset_ns,
        cpu_stats: &cpu_stats,
        tgids: report.tgids.as_deref(),
        uname: Some(&uname),
        version: Some(version),
    };
    let (head, offsets) = header(&meta, &sizes);
    let stats = DatStats {
        pages: sizes.iter().sum::<u64>() / page,
        cpus: sizes.len(),
    };
    let summary = RawSummary {
        path: out.path.clone(),
        events: formats.ids.len(),
        trace_dat: Some(stats),
        ..RawSummary::default()
    };
    let written = (|| {
        out.file.write_all_at(&head, 0)?;
        let mut end = head.len() as u64;
        for ((cpu, &size), &at) in report.cpus.iter().zip(&sizes).zip(&offsets) {
            let src = File::open(&cpu.path)?;
            out.file.seek(SeekFrom::Start(at))?;
            // File to file: std's copy uses copy_file_range (no copy through user space).
            let n = io::copy(&mut src.take(size), &mut out.file)?;
            if n != size {
                return Err(io::Error::other(format!(
                    "{} ended after {n} of {size} bytes",
                    cpu.path.display()
                )));
            }
            end = end.max(at + size);
        }
        out.file.set_len(end)?;
        out.file.sync_data()
    })();
    let spools: Vec<String> = report
        .cpus
        .iter()
        .map(|c| c.path.display().to_string())
        .collect();
    if let Err(e) = written {
        return Err(RawError {
            error: SinkError::io("assembling the trace.dat", &out.path, e),
            finished: None,
            summary: Box::new(summary),
            note: Some(format!(
                "the recorded ring pages are kept in {} (whole pages, as trace-cmd's \
                 flyrecord holds them); free space and keep them, {} is incomplete",
                spools.join(", "),
                out.path.display()
            )),
        });
    }
    for c in &report.cpus {
        let _ = std::fs::remove_file(&c.path);
    }
    let failed: Vec<String> = report
        .cpus
        .iter()
        .filter_map(|c| Some(format!("CPU {}: {}", c.cpu, c.error.as_ref()?)))
        .collect();
    if failed.is_empty() {
        return Ok(summary);
    }
    Err(RawError {
        error: SinkError::io(
            "spooling the rings for",
            &out.path,
            io::Error::other(failed.join("; ")),
        ),
        finished: None,
        summary: Box::new(summary),
        note: Some(format!(
            "{} holds the pages moved before that; later ones were lost",
            out.path.display()
        )),
    })
}
