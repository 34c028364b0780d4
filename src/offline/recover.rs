//! `uevrec recover FILE`: the trace.dat of a killed `record --raw FILE --raw-format
//! trace-dat`, assembled from the metadata and per-CPU spools it left beside FILE
//! (crate::outputs::raw::dat writes them), which are then removed.

#[cfg(test)]
use std::fs::OpenOptions;
use std::io;
#[cfg(test)]
use std::io::Write as _;
use std::path::{Path, PathBuf};

use uevrec_parsers::Endian;
use uevrec_parsers::trace_dat::writer::{DatMeta, header};

use crate::capture::ftrace::spool::{MetaLine, meta_path, parse_meta};
use crate::capture::ftrace::spool_path;
use crate::outputs::raw::dat::{Formats, SpoolPart, boot_id, write_dat};

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
    // The killed run's instance kept recording since the kill: what its rings hold goes
    // into the spools too, up to now, and the instance is removed.
    let instance = pid
        .filter(|_| same_boot)
        .zip(tracefs)
        .map(|(pid, t)| (pid, t.join(format!("instances/uevrec-{pid}"))))
        .filter(|(_, dir)| dir.is_dir());
    let mut cpu_stats = Vec::new();
    if let Some((pid, dir)) = instance {
        if Path::new(&format!("/proc/{pid}")).exists() {
            notes.push(format!(
                "process {pid}, whose tracefs instance {} this is, still runs: its rings \
                 were left alone",
                dir.display()
            ));
        } else {
            let drained = drain_instance(&dir, &mut parts, cpus, page)?;
            cpu_stats = drained.stats;
            notes.push(drained.note);
            crate::capture::ftrace::release_for_recover(&format!("uevrec-{pid}"));
        }
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
        cpu_stats: &cpu_stats,
        tgids: tgids.as_deref(),
        uname: Some(uname),
        version: Some(version),
        // Not kept beside the spools: a recovered file's kernel frames are named from the
        // decoding machine's kallsyms (its `stacks` notice says so).
        kallsyms: &[],
    };
    let (head, offsets) = header(&meta, &sizes);
    write_dat(
        target,
        *mode,
        &head,
        &parts,
        &offsets,
        crate::system::durable::policy(),
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

/// What [`drain_instance`] did.
struct Drained {
    /// Each CPU's `per_cpu/cpuN/stats` after its ring was emptied.
    stats: Vec<(u32, String)>,
    /// For the notes.
    note: String,
}

/// Stop the killed run's instance `dir` (`tracing_on` = 0: nothing written after this
/// moment goes in), move every page its rings hold to the end of each CPU's spool in
/// `parts` (cut to whole pages first; `parts[i]` is CPU `cpus[i]`), read the rings'
/// stats (the losses the pages do not tell) and remove the instance.
fn drain_instance(
    dir: &Path,
    parts: &mut [SpoolPart],
    cpus: &[u32],
    page: u64,
) -> Result<Drained, String> {
    use std::io::{Read as _, Write as _};
    use std::os::unix::fs::OpenOptionsExt as _;
    let stopped_ns = crate::capture::clock::monotonic_ns();
    let _ = std::fs::write(dir.join("tracing_on"), "0");
    let mut stats = Vec::new();
    let mut pages = 0u64;
    let mut buf = vec![0u8; page as usize];
    for (part, &cpu) in parts.iter_mut().zip(cpus) {
        let per_cpu = dir.join(format!("per_cpu/cpu{cpu}"));
        let Ok(mut ring) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(per_cpu.join("trace_pipe_raw"))
        else {
            continue;
        };
        let err = |e: io::Error| {
            format!(
                "appending the killed run's ring pages to {}: {e} (nothing is lost yet: \
                 the instance {} is kept; free space and run recover again)",
                part.path.display(),
                dir.display()
            )
        };
        let spool = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&part.path)
            .map_err(err)?;
        // A page the kill cut short is left out (said above): the pages go after the
        // whole ones.
        spool.set_len(part.size).map_err(err)?;
        let mut spool = io::BufWriter::new(spool);
        std::io::Seek::seek(&mut spool, io::SeekFrom::Start(part.size)).map_err(err)?;
        loop {
            match ring.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    // A page the writer was still on comes shorter: the rest is zeros
                    // (its header's commit says how much is data).
                    buf[n..].fill(0);
                    spool.write_all(&buf).map_err(err)?;
                    part.size += page;
                    pages += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        spool.flush().map_err(err)?;
        if let Ok(text) = std::fs::read_to_string(per_cpu.join("stats")) {
            stats.push((cpu, text));
        }
    }
    let mut companion = dir.as_os_str().to_owned();
    companion.push("-t");
    let _ = std::fs::remove_dir(PathBuf::from(companion));
    let removed = match std::fs::remove_dir(dir) {
        Ok(()) => "and removed it".to_string(),
        Err(e) => format!("but cannot remove it ({e}): `rmdir {}`", dir.display()),
    };
    Ok(Drained {
        stats,
        note: format!(
            "the killed run's tracefs instance {} had gone on recording: its {pages} ring \
             pages are in the file, up to the recovery (stopped at monotonic {}.{:09} s), {removed}",
            dir.display(),
            stopped_ns / 1_000_000_000,
            stopped_ns % 1_000_000_000
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::ftrace::spool::append_meta;

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
