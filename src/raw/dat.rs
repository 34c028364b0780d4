//! `record --raw FILE --raw-format trace-dat` (with `--backend ftrace`): a trace-cmd
//! trace.dat (v6) that `uevrec decode` and `trace-cmd report` read.
//!
//! ```text
//!  spool threads (crate::ftrace::spool): ring pages ──splice──▶ .FILE.cpuN.uevrec-spool
//!  session ──staging channel──▶ this thread (`uevrec-raw`, [`run`]): keeps each attached
//!    event's format (late ones too, as read when it attached), prints the notices,
//!    returns the chunks
//!  at the end (the session has stopped and the spools are complete):
//!    .FILE.uevrec-tmp = header (uevrec_parsers::trace_dat::writer) + each spool at its
//!    page-aligned offset (copy_file_range: no copy through user space); synced as
//!    --fsync asks, renamed to FILE (never over a file); then the spools are removed
//! ```
//!
//! FILE appears whole or not at all. Until then `.FILE.uevrec-meta` (crate::ftrace::spool::
//! MetaLine) holds what the header needs: the host's line is written by
//! [`DatOutput::create`], so a run killed at any point leaves the metadata and spools
//! that [`recover`] (`uevrec recover FILE`) assembles into FILE.
//!
//! Times: the pages carry the instance's `mono` stamps; the file's OFFSET option is
//! `REALTIME - MONOTONIC` sampled when the rings started, which `uevrec decode` and
//! `trace-cmd report` add to every stamp: decoded times are Unix time, as live.
//!
//! A file that cannot be assembled (a full disk …) is reported with the spools kept
//! (never removed then): nothing recorded is lost silently.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{self, Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::FileExt as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use crossbeam_channel::Receiver;
use uevrec_parsers::Endian;
use uevrec_parsers::trace_dat::writer::{DatMeta, header};

use super::host::{HostInfo, Uname};
use super::{Next, Notices, RawError, RawSummary};
use crate::durable::{FsyncPolicy, Publish};
use crate::ftrace::spool::{MetaLine, meta_path, parse_meta};
use crate::ftrace::{SpoolPlan, SpoolReport, spool_path};
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
    mode: u32,
    host: HostInfo,
    plan: SpoolPlan,
    /// Print the session's notices on standard error.
    notices: bool,
}

impl DatOutput {
    /// An output into `path` (mode `mode`, never over an existing file) describing
    /// `host`, assembled from what the spooling of `plan` reports. `path` itself appears
    /// at the end, whole; its metadata file (with the host's line) is created now.
    pub fn create(
        path: &Path,
        mode: u32,
        host: HostInfo,
        plan: SpoolPlan,
        notices: bool,
    ) -> Result<Self, SinkError> {
        let exists = || {
            io::Error::other(
                "it exists; record --raw never overwrites or appends: remove it or give \
                 another name",
            )
        };
        if path.symlink_metadata().is_ok() {
            return Err(SinkError::io("creating", path, exists()));
        }
        let meta = meta_path(path);
        let created = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC)
            .open(&meta);
        let mut file = created.map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                SinkError::io(
                    "creating",
                    &meta,
                    io::Error::other(format!(
                        "a uevrec run killed before it assembled {} left it: run `uevrec \
                         recover {}` to assemble what it recorded, or give another --raw name",
                        path.display(),
                        path.display()
                    )),
                )
            } else {
                SinkError::io("creating", &meta, e)
            }
        })?;
        let _ = file.set_permissions(std::fs::Permissions::from_mode(0o600));
        let line = MetaLine::Host {
            long_size: host.long_size,
            header_page: host.header_page.clone(),
            header_event: host.header_event.clone(),
            uname: uname_text(),
            boot_id: boot_id(),
            mode,
            pid: Some(std::process::id()),
        };
        let mut text = serde_json::to_vec(&line)
            .map_err(|e| SinkError::io("writing", &meta, io::Error::other(e)))?;
        text.push(b'\n');
        file.write_all(&text)
            .and_then(|()| {
                if crate::durable::policy().syncs() {
                    file.sync_data()?;
                    crate::durable::sync_dir_of(&meta)?;
                }
                Ok(())
            })
            .map_err(|e| SinkError::io("writing", &meta, e))?;
        Ok(DatOutput {
            path: path.to_owned(),
            mode,
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

/// `Linux NODE RELEASE VERSION MACHINE` of this machine.
fn uname_text() -> String {
    let u = Uname::now();
    format!(
        "Linux {} {} {} {}",
        u.nodename, u.release, u.version, u.machine
    )
}

/// This boot's id, when readable.
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_owned())
}

/// One CPU's spool to put in a trace.dat.
#[derive(Debug, Clone)]
struct SpoolPart {
    path: PathBuf,
    /// Whole pages of it to copy, in bytes.
    size: u64,
}

/// Write the trace.dat `target` (mode `mode`) whole: `head` then each spool at its
/// offset, under a temporary name renamed at the end (see [`Publish`]).
fn write_dat(
    target: &Path,
    mode: u32,
    head: &[u8],
    parts: &[SpoolPart],
    offsets: &[u64],
    policy: FsyncPolicy,
) -> io::Result<()> {
    let mut out = Publish::create(target, mode)?;
    let file = out.file();
    file.write_all_at(head, 0)?;
    let mut end = head.len() as u64;
    for (part, &at) in parts.iter().zip(offsets) {
        if part.size == 0 {
            // Nothing to copy (a CPU without pages, or a spool a kill left uncreated).
            continue;
        }
        let src = File::open(&part.path)?;
        file.seek(SeekFrom::Start(at))?;
        // File to file: std's copy uses copy_file_range (no copy through user space).
        let n = io::copy(&mut src.take(part.size), file)?;
        if n != part.size {
            return Err(io::Error::other(format!(
                "{} ended after {n} of {} bytes",
                part.path.display(),
                part.size
            )));
        }
        end = end.max(at + part.size);
    }
    file.set_len(end)?;
    out.commit(policy)?;
    Ok(())
}

/// Write the header and every spool into `out`'s file; remove the spools and the
/// metadata when it is complete.
fn assemble(out: DatOutput, formats: &Formats) -> Result<RawSummary, RawError> {
    let report = report_of(&out.plan);
    let page = u64::from(report.page_size.max(1));
    // Whole pages only (a spool cut by a failed write ends in part of one).
    let parts: Vec<SpoolPart> = report
        .cpus
        .iter()
        .map(|c| SpoolPart {
            path: c.path.clone(),
            size: c.bytes / page * page,
        })
        .collect();
    let sizes: Vec<u64> = parts.iter().map(|p| p.size).collect();
    let uname = uname_text();
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
    let written = write_dat(
        &out.path,
        out.mode,
        &head,
        &parts,
        &offsets,
        crate::durable::policy(),
    );
    if let Err(e) = written {
        return Err(RawError {
            error: SinkError::io("assembling the trace.dat", &out.path, e),
            finished: None,
            summary: Box::new(summary),
            note: Some(format!(
                "the recorded ring pages are kept in {} with {} (whole pages, as \
                 trace-cmd's flyrecord holds them): free space and run `uevrec recover {}`",
                parts
                    .iter()
                    .map(|c| c.path.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                meta_path(&out.path).display(),
                out.path.display()
            )),
        });
    }
    for c in &parts {
        let _ = std::fs::remove_file(&c.path);
    }
    let _ = std::fs::remove_file(meta_path(&out.path));
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

/// What [`recover`] assembled.
#[derive(Debug, Clone, Default)]
pub struct Recovered {
    /// The trace.dat written.
    pub path: PathBuf,
    /// Ring pages in it (all CPUs).
    pub pages: u64,
    /// CPUs.
    pub cpus: usize,
    /// Event formats in it.
    pub formats: usize,
    /// What could not be kept, and why (a page cut by the kill, a spool missing …).
    pub notes: Vec<String>,
}

/// Whether a killed run left the spools of the trace.dat `target` (its metadata file).
pub fn has_leftovers(target: &Path) -> bool {
    meta_path(target).exists()
}

/// Assemble the trace.dat `target` from what a killed `record --raw target --raw-format
/// trace-dat` left beside it (metadata and spools), then remove those. `tracefs`: where
/// to read the kernel's saved cmdlines and tgids when this is still the recording's boot.
pub fn recover(target: &Path, tracefs: Option<&Path>) -> Result<Recovered, String> {
    let meta_file = meta_path(target);
    if target.symlink_metadata().is_ok() {
        return Err(format!(
            "{} exists: recover writes it and never replaces a file (move it away first)",
            target.display()
        ));
    }
    let text = match std::fs::read(&meta_file) {
        Ok(t) => String::from_utf8_lossy(&t).into_owned(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(format!(
                "nothing to recover for {}: no {} beside it (a killed `uevrec record --raw \
                 {} --raw-format trace-dat` leaves it with its spools)",
                target.display(),
                meta_file.display(),
                target.display()
            ));
        }
        Err(e) => return Err(format!("reading {}: {e}", meta_file.display())),
    };
    let (lines, torn) = parse_meta(&text);
    let mut notes: Vec<String> = torn
        .map(|t| {
            format!(
                "{}: a torn last line left out ({t}; the run was killed while writing it)",
                meta_file.display()
            )
        })
        .into_iter()
        .collect();
    let mut host = None;
    let mut spool = None;
    let mut formats = Formats::default();
    for line in &lines {
        match line {
            MetaLine::Host { .. } => host = Some(line),
            MetaLine::Spool { .. } => spool = Some(line),
            MetaLine::Format { id, system, text } => formats.add(*id, system, text),
        }
    }
    let Some(MetaLine::Host {
        long_size,
        header_page,
        header_event,
        uname,
        boot_id: rec_boot,
        mode,
        pid,
    }) = host
    else {
        return Err(format!(
            "{} does not start with the host's line: it was not written by uevrec record \
             (or was cut before its first line was written, when nothing was recorded yet: \
             remove it)",
            meta_file.display()
        ));
    };
    let Some(MetaLine::Spool {
        page_size,
        trace_clock,
        offset_ns,
        ftrace_formats,
        cpus,
    }) = spool
    else {
        return Err(format!(
            "{} names no spools: the run was killed before its rings started, so nothing \
             was recorded; remove it",
            meta_file.display()
        ));
    };
    let page = u64::from((*page_size).max(1));
    let mut parts = Vec::new();
    for &cpu in cpus {
        let path = spool_path(target, cpu);
        let len = match std::fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                notes.push(format!(
                    "{} is missing (killed before it was created): CPU {cpu} has no pages",
                    path.display()
                ));
                0
            }
            Err(e) => return Err(format!("reading {}: {e}", path.display())),
        };
        let size = len / page * page;
        if size != len {
            notes.push(format!(
                "{}: the last {} bytes are part of a page the kill cut short, left out",
                path.display(),
                len - size
            ));
        }
        parts.push(SpoolPart { path, size });
    }
    // The kernel's tables of names and process ids, if this boot still has them.
    let same_boot = rec_boot.is_some() && *rec_boot == boot_id();
    let table = |name: &str| {
        same_boot
            .then(|| tracefs.and_then(|t| std::fs::read_to_string(t.join(name)).ok()))
            .flatten()
    };
    let cmdlines = table("saved_cmdlines").unwrap_or_default();
    let tgids = table("saved_tgids");
    // The killed run's instance keeps its events enabled until removed.
    let instance = pid
        .filter(|_| same_boot)
        .zip(tracefs)
        .map(|(pid, t)| t.join(format!("instances/uevrec-{pid}")))
        .filter(|dir| dir.is_dir());
    if let Some(dir) = instance {
        notes.push(format!(
            "the killed run's tracefs instance {} still records (its events stay enabled): \
             the next uevrec run removes it, or `rmdir {}`",
            dir.display(),
            dir.display()
        ));
    }
    if !same_boot {
        notes.push(
            "the machine was restarted since the recording: no process names (comm) in \
             the file"
                .into(),
        );
    }
    let sizes: Vec<u64> = parts.iter().map(|p| p.size).collect();
    let version = concat!("uevrec ", env!("CARGO_PKG_VERSION"), " (recovered)");
    let meta = DatMeta {
        endian: Endian::NATIVE,
        long_size: *long_size,
        page_size: *page_size,
        header_page,
        header_event,
        ftrace_formats,
        systems: &formats.systems,
        cmdlines: &cmdlines,
        trace_clock,
        offset_ns: *offset_ns,
        cpu_stats: &[],
        tgids: tgids.as_deref(),
        uname: Some(uname),
        version: Some(version),
    };
    let (head, offsets) = header(&meta, &sizes);
    write_dat(
        target,
        *mode,
        &head,
        &parts,
        &offsets,
        crate::durable::policy(),
    )
    .map_err(|e| {
        format!(
            "writing {}: {e} (the spools and {} are kept: free space and run recover again)",
            target.display(),
            meta_file.display()
        )
    })?;
    for p in &parts {
        let _ = std::fs::remove_file(&p.path);
    }
    let _ = std::fs::remove_file(&meta_file);
    Ok(Recovered {
        path: target.to_owned(),
        pages: sizes.iter().sum::<u64>() / page,
        cpus: parts.len(),
        formats: formats.ids.len(),
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftrace::spool::append_meta;

    /// tracefs `events/header_page` and `header_event` of a 6.18 x86_64 kernel.
    const HEADER_PAGE: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;
";
    const HEADER_EVENT: &str = "# compressed entry header
\ttype_len    :    5 bits
\ttime_delta  :   27 bits
\tarray       :   32 bits

\tpadding     : type == 29
\ttime_extend : type == 30
\ttime_stamp : type == 31
\tdata max type_len  == 28
";

    fn host_line() -> MetaLine {
        MetaLine::Host {
            long_size: 8,
            header_page: HEADER_PAGE.into(),
            header_event: HEADER_EVENT.into(),
            uname: "Linux h 6.18 #1 x86_64".into(),
            boot_id: None,
            mode: 0o640,
            pid: None,
        }
    }

    #[test]
    fn recover_says_what_is_missing_and_never_replaces_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let dat = dir.path().join("k.dat");
        let e = recover(&dat, None).unwrap_err();
        assert!(
            e.contains("nothing to recover") && e.contains(".k.dat.uevrec-meta"),
            "{e}"
        );
        // Killed before its rings started: only the host's line.
        std::fs::write(meta_path(&dat), "").unwrap();
        append_meta(&dat, &host_line()).unwrap();
        let e = recover(&dat, None).unwrap_err();
        assert!(e.contains("nothing was recorded"), "{e}");
        std::fs::write(&dat, "x").unwrap();
        let e = recover(&dat, None).unwrap_err();
        assert!(e.contains("never replaces"), "{e}");
        assert_eq!(std::fs::read_to_string(&dat).unwrap(), "x");
    }

    #[test]
    fn recover_keeps_whole_pages_and_skips_a_torn_meta_line() {
        let dir = tempfile::tempdir().unwrap();
        let dat = dir.path().join("k.dat");
        std::fs::write(meta_path(&dat), "").unwrap();
        append_meta(&dat, &host_line()).unwrap();
        let spool = MetaLine::Spool {
            page_size: 4096,
            trace_clock: "mono".into(),
            offset_ns: Some(5),
            ftrace_formats: Vec::new(),
            cpus: vec![0, 1],
        };
        append_meta(&dat, &spool).unwrap();
        // CPU 0: two empty pages and part of a third; CPU 1's spool is missing; the
        // metadata ends in a torn line.
        std::fs::write(spool_path(&dat, 0), vec![0u8; 2 * 4096 + 100]).unwrap();
        let mut f = OpenOptions::new()
            .append(true)
            .open(meta_path(&dat))
            .unwrap();
        f.write_all(b"{\"format\":{\"id\":1,").unwrap();
        let r = recover(&dat, None).unwrap();
        assert_eq!((r.pages, r.cpus, r.formats), (2, 2, 0));
        let notes = r.notes.join("\n");
        assert!(notes.contains("torn last line"), "{notes}");
        assert!(notes.contains("last 100 bytes"), "{notes}");
        assert!(notes.contains("cpu1.uevrec-spool is missing"), "{notes}");
        // Whole: the reader takes it, with both CPUs and the offset.
        let bytes = std::fs::read(&dat).unwrap();
        let file = uevrec_parsers::trace_dat::TraceDat::parse(&bytes).unwrap();
        assert_eq!(file.cpu_count(), Some(2));
        assert_eq!(file.time_offset_ns(), 5);
        assert!(!meta_path(&dat).exists() && !spool_path(&dat, 0).exists());
    }
}
