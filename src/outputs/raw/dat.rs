//! `record --raw FILE --raw-format trace-dat` (with `--backend ftrace`): a trace-cmd
//! trace.dat (v6) that `uevrec decode` and `trace-cmd report` read. While the spool
//! threads (crate::capture::ftrace::spool) move the rings' pages into spool files, this
//! thread (`uevrec-raw`, [`run`]) keeps each attached event's format (late ones too, as
//! read when it attached), prints the notices and returns the chunks; at the end it
//! assembles FILE from the header and the spools. FILE appears whole or not at all, and
//! a run killed at any point leaves what `uevrec recover FILE` assembles into it
//! (docs/record-trace-dat.md).

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{self, Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::FileExt as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use crossbeam_channel::Receiver;
use uevrec_parsers::Endian;
use uevrec_parsers::trace_dat::writer::{DatMeta, header};

use super::host::HostInfo;
use super::{Next, Notices, RawError, RawSummary};
use crate::capture::ftrace::spool::{MetaLine, meta_path};
use crate::capture::ftrace::{SpoolPlan, SpoolReport};
use crate::capture::staging::{Staged, StagedEntry};
use crate::outputs::sink::SinkError;
use crate::system::durable::{FsyncPolicy, Publish};
use crate::system::kallsyms::Kallsyms;
use crate::system::uname::Uname;

/// What a trace.dat holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DatStats {
    /// Ring pages in it (all CPUs).
    pub pages: u64,
    /// CPUs.
    pub cpus: usize,
    /// Bytes of `/proc/kallsyms` in its kallsyms section (with stacks only).
    pub kallsyms_bytes: u64,
    /// With stacks, why the kallsyms section is empty (`/proc/kallsyms` showed zero
    /// addresses, or could not be read), in words.
    pub kallsyms_missing: Option<&'static str>,
}

/// Why the kallsyms section is empty: zero addresses.
const KALLSYMS_HIDDEN: &str = "/proc/kallsyms shows zero addresses (kptr_restrict; \
    kallsyms_hidden): the file holds no kallsyms, so trace-cmd report shows kernel frames \
    as addresses and `uevrec decode` names them from the decoding machine's /proc/kallsyms; \
    record as root or with kernel.kptr_restrict=0 to keep them";

/// Why the kallsyms section is empty: unreadable.
const KALLSYMS_UNREADABLE: &str = "/proc/kallsyms could not be read: the file holds no \
    kallsyms, so `uevrec decode` names its kernel frames from the decoding machine's";

/// A trace.dat output, created and ready.
#[derive(Debug)]
pub struct DatOutput {
    path: PathBuf,
    mode: u32,
    host: HostInfo,
    plan: SpoolPlan,
    /// Print the session's notices on standard error.
    notices: bool,
    /// The records carry call stacks (`-g`): the file holds `/proc/kallsyms` to name
    /// their kernel frames.
    stacks: bool,
}

impl DatOutput {
    /// With `stacks` (`-g`), the file holds this machine's `/proc/kallsyms` (a few MiB),
    /// which names the kernel frames of its stack records wherever it is read.
    pub fn with_stacks(mut self, stacks: bool) -> Self {
        self.stacks = stacks;
        self
    }

    /// An output into `path` (mode `mode`, never over an existing file) describing
    /// `host`, assembled from what the spooling of `plan` reports. `path` itself appears
    /// at the end, whole; its metadata file `.FILE.uevrec-meta`
    /// (crate::capture::ftrace::spool's `MetaLine`) is created now with the host's line,
    /// so that a run killed at any point leaves what `uevrec recover FILE`
    /// (crate::offline::recover) needs.
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
                if crate::system::durable::policy().syncs() {
                    file.sync_data()?;
                    crate::system::durable::sync_dir_of(&meta)?;
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
            stacks: false,
        })
    }
}

/// The attached events' formats: by system in first-seen order, one per tracepoint id
/// (the first; a trace.dat names a format by id).
#[derive(Debug, Default)]
pub(crate) struct Formats {
    pub(crate) ids: BTreeSet<u32>,
    pub(crate) systems: Vec<(String, Vec<String>)>,
}

impl Formats {
    /// Keep `text`, the format of tracepoint `id` of `system`, unless `id` is known.
    pub(crate) fn add(&mut self, id: u32, system: &str, text: &str) {
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
pub(crate) struct SpoolPart {
    /// The spool file.
    pub(crate) path: PathBuf,
    /// Whole pages of it to copy, in bytes.
    pub(crate) size: u64,
}

/// Write the trace.dat `target` (mode `mode`) whole: `head` then each spool at its
/// offset, under a temporary name renamed at the end (see [`Publish`]).
pub(crate) fn write_dat(
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
/// metadata when it is complete. A file that cannot be assembled (a full disk …) is
/// reported with the spools kept (never removed then): nothing recorded is lost
/// silently.
///
/// Times: the pages carry the instance's `mono` stamps; the header's OFFSET option is
/// `REALTIME - MONOTONIC` sampled when the rings started (`offset_ns`), which `uevrec
/// decode` and `trace-cmd report` add to every stamp: decoded times are Unix time, as
/// live.
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
    let kallsyms = out.stacks.then(crate::system::kallsyms::read);
    let (kallsyms_text, kallsyms_missing): (&[u8], _) = match &kallsyms {
        None => (&[], None),
        Some(Kallsyms::Text(text)) => (text, None),
        Some(Kallsyms::Hidden) => (&[], Some(KALLSYMS_HIDDEN)),
        Some(Kallsyms::Unreadable(_)) => (&[], Some(KALLSYMS_UNREADABLE)),
    };
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
        kallsyms: kallsyms_text,
    };
    let (head, offsets) = header(&meta, &sizes);
    let stats = DatStats {
        pages: sizes.iter().sum::<u64>() / page,
        cpus: sizes.len(),
        kallsyms_bytes: kallsyms_text.len() as u64,
        kallsyms_missing,
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
        crate::system::durable::policy(),
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
