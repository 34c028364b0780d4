//! What each process had mapped, executable, while it ran: from the trackers'
//! `PERF_RECORD_MMAP2`, exec, fork and exit records (staged as context entries, so every
//! formatter worker sees all of them; the session stages those of the processes running at
//! its start the same way), or from `/proc/PID/maps` at first sight for a process that
//! neither told. A process that exits before its records are formatted keeps its
//! mappings here; a process id reused by another program starts from its fork (its
//! parent's mappings) or its exec (none), never from the old program's.

use std::collections::VecDeque;
use std::sync::Arc;

use uevrec_parsers::ContextUpdate;

use super::module_files::{self, Mapped, ModuleFile, Namespace};
use super::vdso;
pub use crate::system::proc_maps::MAX_MAPPINGS;
use crate::system::proc_maps::{self, ProcMapping};

/// Processes whose mappings are kept at most (the oldest exited ones go first).
pub const MAX_PROCESSES: usize = 4096;
/// Program runs kept per process id: each fork and exec starts one, so a sample staged
/// after an exec, or after its process id was reused, but written before, finds the
/// program that wrote it.
const MAX_GENERATIONS: usize = 4;

/// One executable mapping of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Offset in the file of `start`.
    pub pgoff: u64,
    /// The file (`[vdso]`, `//anon` … for no file).
    pub path: Arc<str>,
    /// The GNU build id, if the kernel gave it.
    pub build_id: Arc<[u8]>,
    /// Device and inode of the file (from `/proc/PID/maps`; the kernel's records give a
    /// build id instead).
    pub inode: Option<(u64, u64)>,
    /// Which file names its frames ([`module_files`]: ours at the path, one held open
    /// for a process of another mount namespace, or none).
    pub file: ModuleFile,
}

impl Mapping {
    /// Whether `address` lies in it.
    pub fn contains(&self, address: u64) -> bool {
        self.start <= address && address < self.end
    }

    /// The offset in the file of `address` (inside the mapping).
    pub fn file_offset(&self, address: u64) -> u64 {
        // start <= address < end: no overflow below; pgoff + a mapping's length fits.
        address
            .saturating_sub(self.start)
            .saturating_add(self.pgoff)
    }

    /// A line of `/proc/PID/maps`, its file not looked for yet.
    fn of_proc(m: ProcMapping) -> Self {
        Mapping {
            start: m.start,
            end: m.end,
            pgoff: m.pgoff,
            path: m.path,
            build_id: m.build_id,
            inode: m.inode,
            file: ModuleFile::AtPath,
        }
    }
}

/// The mappings of one program run (from an exec, or from the recording's start).
#[derive(Debug, Default, Clone)]
struct Generation {
    /// When it began (Unix ns; None: before every record).
    since: Option<u64>,
    mappings: Vec<Mapping>,
    /// Mappings added since it began (what the unwinder built from them checks).
    changes: u32,
    /// Its process's mount namespace, looked at with its first mapping.
    namespace: Option<Namespace>,
    /// Its mappings as they are now, among every program run's of this [`ProcessMaps`]:
    /// a new one at its start and at each mapping added ([`ProcessMaps::run_id`]).
    id: u64,
}

/// The mappings of one program run of a process, for building its unwinder
/// ([`super::unwind`]).
#[derive(Debug, Clone, Copy)]
pub struct ProgramRun<'a> {
    /// The run's key: the process and when the run began (Unix ns; `None`: before the
    /// recording), and how many mappings it was told of (a new one changes it).
    pub key: (u32, Option<u64>, u32),
    /// Its executable mappings.
    pub mappings: &'a [Mapping],
}

/// One process's program runs, oldest first.
#[derive(Debug, Default, Clone)]
struct Process {
    generations: VecDeque<Generation>,
    exited: bool,
}

impl Process {
    /// The program run at `time`: the last to begin by then (the first when all began
    /// later; the last when the time is unknown).
    fn generation_at(&self, time: Option<u64>) -> Option<&Generation> {
        self.generations
            .iter()
            .rev()
            .find(|g| g.since.zip(time).is_none_or(|(since, t)| since <= t))
            .or(self.generations.front())
    }

    /// [`Process::generation_at`], to change.
    fn generation_at_mut(&mut self, time: Option<u64>) -> Option<&mut Generation> {
        let at = self
            .generations
            .iter()
            .rposition(|g| g.since.zip(time).is_none_or(|(since, t)| since <= t))
            .unwrap_or(0);
        self.generations.get_mut(at)
    }

    /// A program run (a fork's or an exec's) begins at `time` with `mappings`, known
    /// as `id`.
    fn begin(&mut self, time: Option<u64>, mappings: Vec<Mapping>, id: u64) {
        self.generations.push_back(Generation {
            since: time,
            mappings,
            id,
            ..Generation::default()
        });
        while self.generations.len() > MAX_GENERATIONS {
            self.generations.pop_front();
        }
        self.exited = false;
    }
}

/// The mappings of every process seen, bounded ([`MAX_PROCESSES`], [`MAX_MAPPINGS`]).
#[derive(Debug, Default, Clone)]
pub struct ProcessMaps {
    /// Read `/proc/PID/maps` of a process never seen, and find each mapped file for the
    /// process that mapped it ([`module_files`]; off for a recorded file: its process
    /// ids are not this machine's processes now).
    read_proc: bool,
    /// By process id (foldhash: ids the kernel gave, not chosen by an attacker; a look-up
    /// per user frame).
    processes: foldhash::HashMap<u32, Arc<Process>>,
    /// Exited processes, in exit order (the first to forget).
    exited: VecDeque<u32>,
    /// Process ids looked up in `/proc` already (found or not): never read twice.
    scanned: foldhash::HashSet<u32>,
    /// The last program run id given ([`ProcessMaps::run_id`]; 0: none yet).
    last_id: u64,
}

impl ProcessMaps {
    /// No process yet; `read_proc`: a process never seen is read from `/proc/PID/maps`,
    /// and each mapped file is found as its process sees it (a live recording).
    pub fn new(read_proc: bool) -> Self {
        ProcessMaps {
            read_proc,
            ..ProcessMaps::default()
        }
    }

    /// Take one context change (those that are not about mappings are ignored).
    pub fn apply(&mut self, time: Option<u64>, update: &ContextUpdate<'_>) {
        match *update {
            ContextUpdate::Mmap {
                pid,
                addr,
                len,
                pgoff,
                build_id,
                path,
            } => {
                let mut mapping = Mapping {
                    start: addr,
                    end: addr.saturating_add(len),
                    pgoff,
                    path: String::from_utf8_lossy(path).into(),
                    build_id: build_id.into(),
                    inode: None,
                    file: ModuleFile::AtPath,
                };
                let locate = self.read_proc;
                let id = self.new_id();
                let p = Arc::make_mut(self.processes.entry(pid).or_default());
                if p.generations.is_empty() {
                    p.generations.push_back(Generation {
                        id,
                        ..Generation::default()
                    });
                }
                if let Some(g) = p.generation_at_mut(time)
                    && g.mappings.len() < MAX_MAPPINGS
                {
                    if locate {
                        // First sight of the mapping: its file is found now, while the
                        // process most likely lives.
                        let ns = *g
                            .namespace
                            .get_or_insert_with(|| module_files::namespace(pid));
                        mapping.file = locate_file(pid, &mapping, ns);
                    }
                    // A new mapping over old addresses replaces them (munmap is not told).
                    g.mappings
                        .retain(|m| m.end <= mapping.start || m.start >= mapping.end);
                    g.mappings.push(mapping);
                    g.changes = g.changes.wrapping_add(1);
                    g.id = id;
                }
                self.scanned.insert(pid);
            }
            ContextUpdate::Exec { pid, .. } => {
                let id = self.new_id();
                let p = Arc::make_mut(self.processes.entry(pid).or_default());
                p.begin(time, Vec::new(), id);
                self.scanned.insert(pid);
            }
            ContextUpdate::Fork { tid, parent_tid } => {
                // A new process (or thread) starts with its parent's mappings (none when
                // the parent is unknown); an earlier owner of the id keeps its own for
                // the samples it wrote before. A parent from before the recording: its
                // mappings are read now, once.
                self.scan(parent_tid);
                let inherited = self
                    .processes
                    .get(&parent_tid)
                    .and_then(|parent| parent.generation_at(time))
                    .map(|g| g.mappings.clone())
                    .unwrap_or_default();
                let id = self.new_id();
                let p = Arc::make_mut(self.processes.entry(tid).or_default());
                p.begin(time, inherited, id);
                self.scanned.insert(tid);
            }
            ContextUpdate::Exit { tid } => {
                if let Some(p) = self.processes.get_mut(&tid)
                    && !p.exited
                {
                    Arc::make_mut(p).exited = true;
                    self.exited.push_back(tid);
                }
            }
            _ => {}
        }
        self.bound();
    }

    /// Forget the oldest exited processes past [`MAX_PROCESSES`] (then any, should live
    /// ones alone exceed it).
    fn bound(&mut self) {
        while self.processes.len() > MAX_PROCESSES {
            match self.exited.pop_front() {
                Some(pid) => {
                    if self.processes.get(&pid).is_some_and(|p| p.exited) {
                        self.processes.remove(&pid);
                    }
                }
                None => {
                    let Some(&any) = self.processes.keys().next() else {
                        break;
                    };
                    self.processes.remove(&any);
                }
            }
        }
        if self.scanned.len() > 4 * MAX_PROCESSES {
            self.scanned.clear();
        }
    }

    /// The mapping holding `address` in process `pid` at `time` (its program then).
    /// A process never seen is read from `/proc/PID/maps` once (one that ran before the
    /// recording started).
    pub fn find(&mut self, pid: u32, time: Option<u64>, address: u64) -> Option<&Mapping> {
        self.scan(pid);
        let g = self.processes.get(&pid)?.generation_at(time)?;
        g.mappings.iter().find(|m| m.contains(address))
    }

    /// What names the user frames of process `pid` at `time`, as a number: the same
    /// number, the same mappings (a program run's id changes at each mapping added, and
    /// no two runs of this [`ProcessMaps`] share one: an exec, a fork, a process id
    /// reused or read from `/proc` again all start a new one); 0 for a process without
    /// mappings known (no user frame of it is named). Read from `/proc` as
    /// [`ProcessMaps::find`] does for a process never seen.
    pub fn run_id(&mut self, pid: u32, time: Option<u64>) -> u64 {
        self.scan(pid);
        self.processes
            .get(&pid)
            .and_then(|p| p.generation_at(time))
            .map_or(0, |g| g.id)
    }

    /// A program run id never given before.
    fn new_id(&mut self) -> u64 {
        self.last_id = self.last_id.wrapping_add(1);
        self.last_id
    }

    /// The program run of process `pid` at `time`, with all its mappings (read from
    /// `/proc` as [`ProcessMaps::find`] does for a process never seen).
    pub fn run(&mut self, pid: u32, time: Option<u64>) -> Option<ProgramRun<'_>> {
        self.scan(pid);
        let g = self.processes.get(&pid)?.generation_at(time)?;
        Some(ProgramRun {
            key: (pid, g.since, g.changes),
            mappings: &g.mappings,
        })
    }
}

impl ProcessMaps {
    /// Read `/proc/PID/maps` of a process never seen (once).
    fn scan(&mut self, pid: u32) {
        if !self.read_proc || self.processes.contains_key(&pid) || !self.scanned.insert(pid) {
            return;
        }
        if let Some(mut mappings) = read_proc_maps(pid) {
            let ns = module_files::namespace(pid);
            for m in &mut mappings {
                m.file = locate_file(pid, m, ns);
            }
            let mut p = Process::default();
            p.generations.push_back(Generation {
                mappings,
                namespace: Some(ns),
                id: self.new_id(),
                ..Generation::default()
            });
            self.processes.insert(pid, Arc::new(p));
            self.bound();
        }
    }
}

/// Which file names the frames of `m`, a mapping of `pid`, whose namespace is `ns`
/// (anonymous memory: no file, nothing to find; `[vdso]`: uevrec's own image when it
/// is the same, [`vdso::matching`]).
fn locate_file(pid: u32, m: &Mapping, ns: Namespace) -> ModuleFile {
    if &*m.path == "[vdso]" {
        return vdso::matching(pid, m.start, m.end, m.pgoff).map_or(ModuleFile::AtPath, |image| {
            ModuleFile::Held(image.path().clone())
        });
    }
    if !m.path.starts_with('/') || m.path.starts_with("//") {
        return ModuleFile::AtPath;
    }
    module_files::locate(
        &Mapped {
            pid,
            path: &m.path,
            range: (m.start, m.end),
            build_id: &m.build_id,
            inode: m.inode,
        },
        ns,
    )
}

/// The executable file mappings of a running process (`None` when it is gone).
pub fn read_proc_maps(pid: u32) -> Option<Vec<Mapping>> {
    proc_maps::read_proc_maps(pid).map(|v| v.into_iter().map(Mapping::of_proc).collect())
}

/// One line of `/proc/PID/maps`, if it maps executable memory.
#[cfg(test)]
fn parse_maps_line(line: &str) -> Option<Mapping> {
    proc_maps::parse_maps_line(line).map(Mapping::of_proc)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process id above any pid_max (no /proc entry to read).
    const NO_PROCESS: u32 = 4_000_000_000;

    fn mmap(pid: u32, addr: u64, path: &'static [u8]) -> ContextUpdate<'static> {
        ContextUpdate::Mmap {
            pid,
            addr,
            len: 0x1000,
            pgoff: 0x2000,
            build_id: b"",
            path,
        }
    }

    #[test]
    fn mappings_by_process_and_program() {
        let mut m = ProcessMaps::default();
        m.apply(
            Some(1),
            &ContextUpdate::Fork {
                tid: 10,
                parent_tid: NO_PROCESS,
            },
        );
        m.apply(Some(2), &mmap(10, 0x40_0000, b"/bin/a"));
        let found = m.find(10, Some(3), 0x40_0010).unwrap();
        assert_eq!(
            (&*found.path, found.file_offset(0x40_0010)),
            ("/bin/a", 0x2010)
        );
        // After an exec, the old program's mappings serve only samples before it.
        m.apply(
            Some(5),
            &ContextUpdate::Exec {
                pid: 10,
                comm: b"b",
            },
        );
        m.apply(Some(6), &mmap(10, 0x50_0000, b"/bin/b"));
        assert!(m.find(10, Some(7), 0x40_0010).is_none());
        assert_eq!(&*m.find(10, Some(4), 0x40_0010).unwrap().path, "/bin/a");
        assert_eq!(&*m.find(10, Some(7), 0x50_0000).unwrap().path, "/bin/b");
        // The process exits; its id is reused by a child of an unknown parent: no names.
        m.apply(Some(8), &ContextUpdate::Exit { tid: 10 });
        assert!(
            m.find(10, Some(8), 0x50_0000).is_some(),
            "kept after its exit"
        );
        m.apply(
            Some(9),
            &ContextUpdate::Fork {
                tid: 10,
                parent_tid: NO_PROCESS + 1,
            },
        );
        assert!(m.find(10, Some(9), 0x50_0000).is_none());
        // The old program's samples, staged after the reuse, still find it.
        assert_eq!(&*m.find(10, Some(7), 0x50_0000).unwrap().path, "/bin/b");
    }

    #[test]
    fn fork_inherits_and_maps_line() {
        let mut m = ProcessMaps::default();
        m.apply(None, &mmap(20, 0x1000, b"/lib/x.so"));
        m.apply(
            Some(1),
            &ContextUpdate::Fork {
                tid: 21,
                parent_tid: 20,
            },
        );
        assert_eq!(&*m.find(21, Some(2), 0x1800).unwrap().path, "/lib/x.so");
        let line = "7f00-7f10 r-xp 00001000 08:01 1234      /usr/lib/libc.so.6";
        let got = parse_maps_line(line).unwrap();
        assert_eq!(
            (got.start, got.end, got.pgoff, &*got.path),
            (0x7f00, 0x7f10, 0x1000, "/usr/lib/libc.so.6")
        );
        assert_eq!(got.inode, Some((libc::makedev(8, 1), 1234)));
        assert!(parse_maps_line("7f00-7f10 rw-p 00000000 00:00 0").is_none());
    }

    /// A program run's id stays while its mappings do, and changes with each mapping
    /// added, exec and reuse of the process id; an older run's records keep theirs.
    #[test]
    fn run_ids_change_with_the_mappings() {
        let mut m = ProcessMaps::default();
        assert_eq!(m.run_id(30, Some(1)), 0, "no process known");
        m.apply(Some(1), &mmap(30, 0x1000, b"/bin/a"));
        let first = m.run_id(30, Some(2));
        assert_ne!(first, 0);
        assert_eq!(m.run_id(30, Some(3)), first);
        m.apply(Some(4), &mmap(30, 0x9000, b"/lib/dl.so"));
        let dlopened = m.run_id(30, Some(5));
        assert_ne!(dlopened, first);
        m.apply(
            Some(6),
            &ContextUpdate::Exec {
                pid: 30,
                comm: b"b",
            },
        );
        let exec = m.run_id(30, Some(7));
        assert!(![0, first, dlopened].contains(&exec));
        m.apply(Some(8), &ContextUpdate::Exit { tid: 30 });
        m.apply(
            Some(9),
            &ContextUpdate::Fork {
                tid: 30,
                parent_tid: NO_PROCESS,
            },
        );
        let reused = m.run_id(30, Some(10));
        assert!(![0, first, dlopened, exec].contains(&reused));
        assert_eq!(m.run_id(30, Some(7)), exec, "the old program's records");
    }

    #[test]
    fn bounded() {
        let mut m = ProcessMaps::default();
        for pid in 0..(MAX_PROCESSES as u32 + 100) {
            m.apply(None, &mmap(pid, 0x1000, b"/bin/x"));
            m.apply(None, &ContextUpdate::Exit { tid: pid });
        }
        assert!(m.processes.len() <= MAX_PROCESSES);
    }
}
