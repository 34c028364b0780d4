//! Call stacks on the ftrace backend (`-g`): the instance's `options/stacktrace` (kernel
//! frames) and `options/userstacktrace` (user frames: the kernel walks at most 8 frame
//! pointers), whose `kernel_stack` and `user_stack` records the readers tie to the record
//! they follow (`uevrec_parsers::ftrace_page::stacks`), and each process's mappings read
//! from `/proc/PID/maps` at its first stack, and again for a user frame in none of them
//! (a library loaded since) or a second later (a library mapped over an unmapped one's
//! addresses; [`Sight`]): tracefs has no `PERF_RECORD_MMAP2`.
//! docs/stacks.md, "On the ftrace backend".

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use uevrec_parsers::ContextUpdate;
use uevrec_parsers::callchain::{Callchain, FrameContext};
use uevrec_parsers::ftrace_page::stacks::{StackEvents, StackFields, StackKind};
use uevrec_parsers::parse_format;

use super::instance::{FtraceError, Instance, SetupError, read_file};
use crate::capture::stacks::StackRequest;
use crate::system::proc_maps::{ProcMapping, read_proc_maps};

/// The user frames the kernel writes at most (`FTRACE_STACK_ENTRIES`, `user_stack`'s
/// `caller[8]`).
pub const USER_FRAMES: usize = 8;

/// Processes whose first sight is remembered at most (past it the memory starts again:
/// a process is then read again at its next stack, which costs only the read).
pub const MAX_SEEN: usize = 1 << 16;

/// The stack records `request` asks of the instance at tracefs `root`, as this kernel
/// lays them out (`events/ftrace/{kernel_stack,user_stack}/format`).
pub fn stack_events(root: &Path, request: &StackRequest) -> Result<StackEvents, SetupError> {
    let read = |kind: StackKind, name: &str| -> Result<StackFields, SetupError> {
        let path = root.join(format!("events/ftrace/{name}/format"));
        let text = read_file(&path).map_err(SetupError::from_step)?;
        parse_format(&text)
            .ok()
            .and_then(|f| StackFields::from_format(&f, kind))
            .ok_or_else(|| {
                SetupError::Layout(format!(
                    "{}: the ftrace {name} record is laid out in a way uevrec does not read; \
                     record call stacks with --backend perf",
                    path.display()
                ))
            })
    };
    Ok(StackEvents {
        kernel: if request.kernel {
            Some(read(StackKind::Kernel, "kernel_stack")?)
        } else {
            None
        },
        user: Some(read(StackKind::User, "user_stack")?),
    })
}

/// Turn the stack options of `instance` on or off as `events` says (uevrec's own event
/// instance only: never the tracking instance, never tracefs's top level).
pub fn enable(instance: &Instance, events: &StackEvents) -> Result<(), SetupError> {
    let set = |option: &str, on: bool| {
        instance
            .write(&format!("options/{option}"), if on { "1" } else { "0" })
            .map_err(|e: FtraceError| SetupError::from_step(e))
    };
    set("stacktrace", events.kernel.is_some())?;
    set("userstacktrace", events.user.is_some())
}

/// What a process mapped, read at its first stack: staged as context ahead of its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sighted {
    /// When its updates take effect: at a first read, when the program run it belongs to
    /// began (the rename of its exec, seen by the tracking instance; None: before the
    /// recording, or at a fork); at a read again, the record's time.
    pub since: Option<u64>,
    /// Of a run begun while recording: the name it took (an exec starts the run).
    pub exec_comm: Option<Vec<u8>>,
    /// Its executable mappings (empty when the process was gone: its frames then say
    /// `no_mapping`, never the names of the program it was forked from).
    pub mappings: Vec<ProcMapping>,
}

impl Sighted {
    /// The context updates that tell the formatter's maps (an exec, then one mapping
    /// each), for `pid`, in order.
    pub fn updates(&self, pid: u32) -> impl Iterator<Item = ContextUpdate<'_>> {
        let exec = self
            .exec_comm
            .as_deref()
            .map(|comm| ContextUpdate::Exec { pid, comm });
        exec.into_iter()
            .chain(self.mappings.iter().map(move |m| ContextUpdate::Mmap {
                pid,
                addr: m.start,
                len: m.end.saturating_sub(m.start),
                pgoff: m.pgoff,
                build_id: &[],
                path: m.path.as_bytes(),
            }))
    }
}

/// What is known of one process id.
#[derive(Debug, Clone, Default)]
struct Seen {
    /// Its last rename (time, name): an exec, or `prctl(PR_SET_NAME)`.
    renamed: Option<(Option<u64>, Vec<u8>)>,
    /// Its mappings were read since.
    read: bool,
    /// The executable mappings of its last read, sorted: a user frame in none of them
    /// makes the process be read again ([`Sight::sight`]).
    ranges: Vec<Known>,
    /// The time of the record its last read was made for: a read once a record is
    /// [`CHECK_INTERVAL`] later sees a library mapped over an unmapped one's addresses.
    read_at: Option<u64>,
    /// The lowest mapping of its first read since the rename (start, file): a read
    /// without it is another program's (an exec the tracking instance has not told yet),
    /// never staged as this run's.
    anchor: Option<(u64, Arc<str>)>,
    /// The pages of user frames a read again did not find, latest last (at most
    /// [`MAX_TRIED`]): not read again for.
    tried: Vec<u64>,
    /// When it was last read again, and how long it waits for the next read again:
    /// [`REREAD_INTERVAL`], doubled after each that did not find its frame's mapping (to
    /// [`MAX_REREAD_WAIT`]: a program whose stale frame pointers give new addresses at
    /// every record).
    reread_at: Option<(Instant, Duration)>,
    /// Its maps could not be read (the process is gone): never read again.
    gone: bool,
}

/// One executable mapping of a read: its range and which file at which offset fills it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Known {
    start: u64,
    end: u64,
    /// A hash of the file (path, device and inode) and its offset: another library mapped
    /// over the same addresses differs here.
    file: u64,
}

impl Known {
    fn of(m: &ProcMapping) -> Known {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&*m.path, m.inode, m.pgoff).hash(&mut h);
        Known {
            start: m.start,
            end: m.end,
            file: h.finish(),
        }
    }
}

impl Seen {
    /// Whether `address` lies in a range of the last read.
    fn covers(&self, address: u64) -> bool {
        let at = self.ranges.partition_point(|k| k.start <= address);
        at.checked_sub(1)
            .and_then(|i| self.ranges.get(i))
            .is_some_and(|k| address < k.end)
    }

    /// A read again did not find the mapping of the frame at `address`: its page is not
    /// read again for, and the next read again waits twice as long.
    fn not_found(&mut self, address: u64) {
        if self.tried.len() >= MAX_TRIED {
            self.tried.remove(0);
        }
        self.tried.push(page(address));
        if let Some((_, wait)) = &mut self.reread_at {
            *wait = wait.saturating_mul(2).min(MAX_REREAD_WAIT);
        }
    }

    /// Remember `known` (a read's mappings, [`Known::of`]) as the last read, made for a
    /// record at `time`.
    fn remember(&mut self, mut known: Vec<Known>, time: u64) {
        known.sort_unstable();
        self.ranges = known;
        self.read_at = Some(time);
    }

    /// Whether a record at `time` is due for a read that checks the mappings of the last.
    fn due(&self, time: u64) -> bool {
        let interval = CHECK_INTERVAL.as_nanos() as u64;
        self.read_at
            .is_some_and(|at| time.saturating_sub(at) >= interval)
    }
}

/// How often a process with stacks is read again when every frame lies in a mapping
/// known, in the records' time: munmap is not told on tracefs, so a library mapped over
/// an unmapped one's addresses is seen only so (its frames keep the old names until then).
pub const CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// How often a process is read again at most, for user frames in no mapping known.
pub const REREAD_INTERVAL: Duration = Duration::from_millis(10);
/// How long a process whose reads again found nothing waits at most for the next.
pub const MAX_REREAD_WAIT: Duration = Duration::from_secs(1);
/// Pages a process was read again for in vain, remembered per process at most.
pub const MAX_TRIED: usize = 16;
/// Reads again at most, all processes together, per second.
pub const MAX_REREADS_PER_SECOND: u32 = 1000;
/// Executable ranges remembered at most, all processes together (24 bytes each: 24
/// MiB; past it the memory starts again, as past [`MAX_SEEN`]).
pub const MAX_RANGES: usize = 1 << 20;

/// The page of a user frame (a frame in a page a read again did not find is not read
/// again for).
fn page(address: u64) -> u64 {
    address >> 12
}

/// What the reads again did, for the stop's notice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rereads {
    /// Processes read again (a user frame in no mapping known).
    pub reads: u64,
    /// Of them, the reads that found new executable mappings (staged).
    pub found: u64,
    /// Processes read again after [`CHECK_INTERVAL`] with every frame in a mapping known.
    pub checks: u64,
    /// Of them, the reads that found a mapping changed or new (staged).
    pub changed: u64,
    /// Reads that were another program's (an exec not told yet): not staged.
    pub other_program: u64,
}

/// Which processes had their mappings read, and when they last started a program.
#[derive(Debug, Default)]
pub struct Sight {
    seen: HashMap<u32, Seen>,
    /// The ranges remembered in `seen`, all together.
    ranges: usize,
    /// This second's reads again: (when it began, how many).
    window: Option<(Instant, u32)>,
    rereads: Rereads,
}

impl Sight {
    /// Take one update of the tracking instance: a rename (an exec) makes the process be
    /// read again at its next stack, from that time on; a new task starts afresh.
    pub fn track(&mut self, time: Option<u64>, update: &ContextUpdate<'_>) {
        let (tid, renamed) = match *update {
            ContextUpdate::Comm { tid, comm } => {
                let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
                (tid, Some((time, comm[..end].to_vec())))
            }
            ContextUpdate::Fork { tid, .. } => (tid, None),
            _ => return,
        };
        let s = self.entry(tid);
        let dropped = s.ranges.len();
        *s = Seen {
            renamed,
            ..Seen::default()
        };
        self.ranges = self.ranges.saturating_sub(dropped);
    }

    fn entry(&mut self, pid: u32) -> &mut Seen {
        if (self.seen.len() >= MAX_SEEN && !self.seen.contains_key(&pid))
            || self.ranges > MAX_RANGES
        {
            self.seen.clear();
            self.ranges = 0;
        }
        self.seen.entry(pid).or_default()
    }

    /// At a record of process `pid` written at `time` with stack `chain`: the mappings
    /// to stage ahead of it, if any. Its mappings are read at its first stack with user
    /// frames since it started its program; read again when a user frame lies in no
    /// executable mapping of the last read (a library loaded, or code mapped, since),
    /// bounded: once per [`REREAD_INTERVAL`] per process (up to [`MAX_REREAD_WAIT`] after
    /// reads that found nothing), never again for a page such a
    /// read did not find, [`MAX_REREADS_PER_SECOND`] in all; and read again at a record
    /// [`CHECK_INTERVAL`] after the last read's (within the same budget), which sees a
    /// file mapped over another's addresses. Only the mappings new or changed since the
    /// last read are staged, as the program run's the first read named.
    pub fn sight(&mut self, pid: u32, time: u64, chain: &Callchain<'_>) -> Option<Sighted> {
        let mut user = chain
            .frames()
            .filter_map(Result::ok)
            .filter(|f| f.context == FrameContext::User)
            .map(|f| f.address)
            .peekable();
        user.peek()?;
        let s = self.entry(pid);
        if !s.read {
            return self.first_sight(pid, time);
        }
        let since = s.renamed.as_ref().and_then(|(t, _)| *t);
        // A record from before its program began is not in the program's mappings.
        if s.gone || since.is_some_and(|since| time < since) {
            return None;
        }
        let unknown = user.find(|&a| !s.covers(a) && !s.tried.contains(&page(a)));
        let due = s.due(time);
        match unknown {
            Some(_) if s.reread_at.is_some_and(|(at, wait)| at.elapsed() < wait) => return None,
            None if !due => return None,
            _ => {}
        }
        if !self.may_reread() {
            return None;
        }
        let s = self.seen.get_mut(&pid)?;
        if unknown.is_some() {
            self.rereads.reads += 1;
            let wait = s.reread_at.map_or(REREAD_INTERVAL, |(_, wait)| wait);
            s.reread_at = Some((Instant::now(), wait));
        } else {
            self.rereads.checks += 1;
        }
        let Some(mappings) = read_proc_maps(pid) else {
            s.gone = true;
            return None;
        };
        let same_program = s.anchor.as_ref().is_none_or(|(start, path)| {
            mappings
                .iter()
                .any(|m| m.start == *start && m.path == *path)
        });
        if !same_program {
            self.rereads.other_program += 1;
            match unknown {
                Some(unknown) => s.not_found(unknown),
                // Checked again at the next interval, when the exec has been told.
                None => s.read_at = Some(time),
            }
            return None;
        }
        let known: Vec<Known> = mappings.iter().map(Known::of).collect();
        let new: Vec<ProcMapping> = (mappings.iter().zip(&known))
            .filter(|(_, k)| s.ranges.binary_search(k).is_err())
            .map(|(m, _)| m.clone())
            .collect();
        let before = s.ranges.len();
        s.remember(known, time);
        let after = s.ranges.len();
        match unknown {
            Some(unknown) if s.covers(unknown) => {
                s.reread_at = Some((Instant::now(), REREAD_INTERVAL));
            }
            Some(unknown) => s.not_found(unknown),
            None => {}
        }
        self.ranges = self.ranges.saturating_sub(before).saturating_add(after);
        if new.is_empty() {
            return None;
        }
        if unknown.is_some() {
            self.rereads.found += 1;
        } else {
            self.rereads.changed += 1;
        }
        // Staged at the record's time, in the run current then (the first read's: no
        // rename since). Not at the run's start: the two are made wall-clock times apart,
        // with the clock's offset sampled again in between, so the start could land a
        // little before the run began there, in the program run before it.
        Some(Sighted {
            since: Some(time),
            exec_comm: None,
            mappings: new,
        })
    }

    /// Whether this second's reads again leave room for one more (and count it).
    fn may_reread(&mut self) -> bool {
        let now = Instant::now();
        let (began, count) = self.window.get_or_insert((now, 0));
        if now.duration_since(*began) >= Duration::from_secs(1) {
            *began = now;
            *count = 0;
        }
        if *count >= MAX_REREADS_PER_SECOND {
            return false;
        }
        *count += 1;
        true
    }

    /// Its mappings, read now (its first stack with user frames since it started its
    /// program); None: nothing to stage.
    fn first_sight(&mut self, pid: u32, time: u64) -> Option<Sighted> {
        let s = self.entry(pid);
        s.read = true;
        let (since, exec_comm) = match &s.renamed {
            Some((time, comm)) => (*time, Some(comm.clone())),
            None => (None, None),
        };
        let read = read_proc_maps(pid);
        let before = s.ranges.len();
        match &read {
            Some(mappings) => {
                s.remember(mappings.iter().map(Known::of).collect(), time);
                s.anchor = mappings.first().map(|m| (m.start, m.path.clone()));
            }
            None => s.gone = true,
        }
        let after = s.ranges.len();
        self.ranges = self.ranges.saturating_sub(before).saturating_add(after);
        match (read, exec_comm) {
            (Some(mappings), exec_comm) => Some(Sighted {
                since,
                exec_comm,
                mappings,
            }),
            (None, Some(comm)) => Some(Sighted {
                since,
                exec_comm: Some(comm),
                mappings: Vec::new(),
            }),
            // Gone, and from before the recording: the formatter finds nothing either.
            (None, None) => None,
        }
    }

    /// What the reads again did so far.
    pub fn rereads(&self) -> Rereads {
        self.rereads
    }
}

impl Rereads {
    /// The stop's notice, when a process was read again.
    pub fn describe(&self) -> Option<String> {
        if self.reads == 0 && self.checks == 0 {
            return None;
        }
        let mut msg = format!(
            "the mappings of processes were read again {} times from /proc for user frames \
             in no mapping known (a library loaded, or code mapped, after the process's first \
             stack); {} found new mappings",
            self.reads, self.found
        );
        if self.checks > 0 {
            msg.push_str(&format!(
                "; read again {} times a second apart to see libraries mapped over unmapped \
                 ones' addresses; {} found a mapping changed or new",
                self.checks, self.changed
            ));
        }
        if self.other_program > 0 {
            msg.push_str(&format!(
                "; {} found another program (an exec not told yet) and were left out",
                self.other_program
            ));
        }
        Some(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::proc_maps::ExecutablePage;
    use uevrec_parsers::Endian;
    use uevrec_parsers::callchain::PERF_CONTEXT_USER;

    /// A stack of user frames at `addresses`, as the readers build it.
    fn user_chain(addresses: &[u64]) -> Vec<u8> {
        std::iter::once(PERF_CONTEXT_USER)
            .chain(addresses.iter().copied())
            .flat_map(u64::to_ne_bytes)
            .collect()
    }

    /// This process's mappings are read at its first stack; a frame in executable memory
    /// mapped since makes it be read again (the new mapping alone staged, as the same
    /// program run's), once: a frame in no mapping is not read again for, and reads
    /// again are at most one per interval.
    #[test]
    fn a_frame_in_memory_mapped_since_reads_the_process_again() {
        let _turn = SELF_MAPS.lock().unwrap_or_else(|e| e.into_inner());
        let pid = std::process::id();
        let mut sight = Sight::default();
        let known = a_frame_in_memory_mapped_since_reads_the_process_again as fn() as usize as u64;
        let words = user_chain(&[known]);
        let chain = Callchain::new(&words, Endian::NATIVE);
        let first = sight.sight(pid, 1, &chain).expect("read at first sight");
        assert!(first.mappings.iter().any(|m| m.contains(known)));
        assert_eq!(sight.sight(pid, 2, &chain), None, "known: not read again");
        assert_eq!(sight.rereads(), Rereads::default());

        let page = ExecutablePage::map();
        let jit = page.address() + 16;
        let words = user_chain(&[jit, known]);
        let chain = Callchain::new(&words, Endian::NATIVE);
        let again = sight.sight(pid, 3, &chain).expect("read again");
        assert_eq!(again.exec_comm, None);
        assert_eq!(
            again
                .mappings
                .iter()
                .map(|m| (m.start, &*m.path))
                .collect::<Vec<_>>(),
            [(page.address(), "//anon")],
            "only the new mapping"
        );
        assert_eq!(sight.sight(pid, 4, &chain), None, "known now");

        // An address in no mapping: one read again (after the interval), then never again.
        std::thread::sleep(REREAD_INTERVAL * 5);
        let nowhere = 0x10_0000u64;
        let words = user_chain(&[nowhere]);
        let chain = Callchain::new(&words, Endian::NATIVE);
        assert_eq!(sight.sight(pid, 5, &chain), None);
        std::thread::sleep(REREAD_INTERVAL * 5);
        assert_eq!(sight.sight(pid, 6, &chain), None);
        let counted = sight.rereads();
        assert_eq!((counted.reads, counted.found), (2, 1), "{counted:?}");
        assert!(counted.describe().unwrap().contains("read again 2 times"));

        // Within the wait after a read again, another new page waits for it to pass (the
        // second read that found nothing: 4 intervals).
        let words = user_chain(&[nowhere + 0x10_0000]);
        let chain = Callchain::new(&words, Endian::NATIVE);
        std::thread::sleep(REREAD_INTERVAL * 5);
        assert_eq!(sight.sight(pid, 7, &chain), None);
        let second = ExecutablePage::map();
        let words = user_chain(&[second.address()]);
        let chain = Callchain::new(&words, Endian::NATIVE);
        assert_eq!(sight.sight(pid, 8, &chain), None, "within the interval");
        assert_eq!(sight.rereads().reads, 3);
        std::thread::sleep(REREAD_INTERVAL * 5);
        let later = sight.sight(pid, 8, &chain).expect("read again after it");
        assert!(later.mappings.iter().any(|m| m.contains(second.address())));
        assert_eq!(sight.rereads().reads, 4);

        // After an exec (a rename), the next stack is a first sight again.
        sight.track(
            Some(9),
            &ContextUpdate::Comm {
                tid: pid,
                comm: b"renamed\0",
            },
        );
        let exec = sight
            .sight(pid, 10, &chain)
            .expect("read as a new program run");
        assert_eq!(exec.since, Some(9));
        assert_eq!(exec.exec_comm.as_deref(), Some(&b"renamed"[..]));
        // A record from before the rename is not the run's: no read again for it.
        std::thread::sleep(REREAD_INTERVAL * 5);
        let words = user_chain(&[nowhere + 0x20_0000]);
        let chain = Callchain::new(&words, Endian::NATIVE);
        assert_eq!(sight.sight(pid, 8, &chain), None);
        assert_eq!(sight.rereads().reads, 4);
    }

    /// The tests that map pages in this process and read its maps, one at a time.
    static SELF_MAPS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Map a page of a new memfd named `name` executable, at `at` (replacing what is
    /// there) or anywhere: its address.
    fn map_memfd(name: &std::ffi::CStr, at: Option<u64>) -> u64 {
        // SAFETY: memfd_create with a NUL-terminated name; ftruncate and mmap on the new
        // descriptor; MAP_FIXED only over a page this test mapped. The mapping keeps the
        // file once the descriptor is closed.
        unsafe {
            let fd = libc::memfd_create(name.as_ptr(), 0);
            assert!(fd >= 0, "memfd_create");
            assert_eq!(libc::ftruncate(fd, 4096), 0);
            let page = libc::mmap(
                at.unwrap_or(0) as *mut libc::c_void,
                4096,
                libc::PROT_READ | libc::PROT_EXEC,
                libc::MAP_PRIVATE | if at.is_some() { libc::MAP_FIXED } else { 0 },
                fd,
                0,
            );
            libc::close(fd);
            assert_ne!(page, libc::MAP_FAILED);
            page as u64
        }
    }

    /// A library mapped over an unmapped one's addresses leaves every frame in a range
    /// known: the process is read again once a record is a check interval later than the
    /// last read, and the changed mapping is staged then (not before).
    #[test]
    fn a_file_mapped_over_another_ones_addresses_is_seen_a_check_interval_later() {
        let _turn = SELF_MAPS.lock().unwrap_or_else(|e| e.into_inner());
        let pid = std::process::id();
        let mut sight = Sight::default();
        let page = map_memfd(c"uevrec-check-a", None);
        let words = user_chain(&[page + 16]);
        let chain = Callchain::new(&words, Endian::NATIVE);
        let first = sight.sight(pid, 1, &chain).expect("read at first sight");
        let named = |s: &Sighted, name: &str| {
            s.mappings
                .iter()
                .any(|m| m.start == page && m.path.contains(name))
        };
        assert!(named(&first, "uevrec-check-a"), "{first:?}");

        assert_eq!(map_memfd(c"uevrec-check-b", Some(page)), page);
        let interval = CHECK_INTERVAL.as_nanos() as u64;
        assert_eq!(sight.sight(pid, interval, &chain), None, "not due yet");
        let checked = (sight.sight(pid, 1 + interval, &chain)).expect("read again when due");
        assert_eq!(checked.since, Some(1 + interval));
        // Only what changed (other tests of this binary may map pages meanwhile).
        assert!(
            (checked.mappings.iter()).all(|m| m.start == page || !first.mappings.contains(m)),
            "only the changed mapping: {checked:?}"
        );
        assert!(named(&checked, "uevrec-check-b"), "{checked:?}");
        assert_eq!(sight.sight(pid, 2 + interval, &chain), None);
        assert_eq!(
            sight.sight(pid, 1 + 2 * interval, &chain),
            None,
            "unchanged"
        );
        let counted = sight.rereads();
        assert_eq!(
            (counted.reads, counted.checks, counted.changed),
            (0, 2, 1),
            "{counted:?}"
        );
        assert!(
            counted
                .describe()
                .unwrap()
                .contains("2 times a second apart")
        );
        // SAFETY: the page this test mapped.
        unsafe { libc::munmap(page as *mut libc::c_void, 4096) };
    }

    /// A process that is gone is not read again.
    #[test]
    fn a_gone_process_is_not_read_again() {
        let mut sight = Sight::default();
        let words = user_chain(&[0x40_0000]);
        let chain = Callchain::new(&words, Endian::NATIVE);
        assert_eq!(sight.sight(4_000_000_000, 1, &chain), None);
        std::thread::sleep(REREAD_INTERVAL * 5);
        assert_eq!(sight.sight(4_000_000_000, 2, &chain), None);
        assert_eq!(sight.rereads().reads, 0);
    }
}
