//! The stack records of an ftrace instance (`options/stacktrace`: `ftrace:kernel_stack`,
//! `options/userstacktrace`: `ftrace:user_stack`) → the record each follows, as a
//! perf-style callchain (`PERF_CONTEXT_KERNEL`, kernel frames, `PERF_CONTEXT_USER`, user
//! frames), so that the stacks of both backends are named and written by the same code.
//!
//! The kernel writes them right after the event they belong to, on the same CPU
//! (kernel/trace/trace.c: `ftrace_trace_stack`, then `ftrace_trace_userstack`):
//! `kernel_stack` is `int size` and `size` addresses; `user_stack` is `unsigned int tgid`
//! and 8 addresses, zero-padded (frame pointers only, none from NMI). Another event may
//! come in between (an interrupt), and the entries may lie on the next page. [`StackTie`]
//! ties each entry to the record it follows, or counts it with the reason it cannot be
//! tied ([`Untied`]): never dropped silently, never attached to another record.

use crate::bytes::Endian;
use crate::callchain::{PERF_CONTEXT_KERNEL, PERF_CONTEXT_USER};
use crate::schema::EventFormat;

/// Which kind of stack record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackKind {
    /// `ftrace:kernel_stack`.
    Kernel,
    /// `ftrace:user_stack`.
    User,
}

/// Where the fields of one stack record lie (from its tracefs format).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackFields {
    /// The event's tracefs ID (`common_type`).
    pub id: u16,
    /// Offset of the 4-byte count (`kernel_stack`'s `size`) or process id (`user_stack`'s
    /// `tgid`).
    pub head: usize,
    /// Offset of `caller[]`.
    pub caller: usize,
    /// Bytes per address (the kernel's `unsigned long`: 8 or 4).
    pub word: usize,
}

impl StackFields {
    /// The fields of `format` (`kernel_stack`: `size`, `user_stack`: `tgid`; both
    /// `caller`); `None` when it lacks them or their sizes make no sense.
    pub fn from_format(format: &EventFormat, kind: StackKind) -> Option<StackFields> {
        let head = format.field(match kind {
            StackKind::Kernel => "size",
            StackKind::User => "tgid",
        })?;
        let caller = format.field("caller")?;
        // `unsigned long caller[8]`: the size says the word (64 or 32 bytes).
        let word = match caller.size {
            64 => 8,
            32 => 4,
            _ => return None,
        };
        Some(StackFields {
            id: u16::try_from(format.id).ok()?,
            head: usize::try_from(head.offset).ok()?,
            caller: usize::try_from(caller.offset).ok()?,
            word,
        })
    }
}

/// The stack records of an instance: which IDs they have and how they are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StackEvents {
    /// `kernel_stack`, when the instance writes it.
    pub kernel: Option<StackFields>,
    /// `user_stack`, when the instance writes it.
    pub user: Option<StackFields>,
}

/// Why a stack record does not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StackEntryError {
    /// The record ends before its fixed fields.
    #[error("the {0} record is shorter than its fields")]
    Short(&'static str),
    /// `kernel_stack`'s count is negative or its addresses run past the record.
    #[error("the kernel_stack record says {count} addresses, more than its {bytes} bytes hold")]
    BadCount {
        /// The count.
        count: i64,
        /// The record's bytes after its fixed fields.
        bytes: usize,
    },
}

/// One stack record, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackEntry<'a> {
    /// Kernel or user.
    pub kind: StackKind,
    /// The thread that was running (`common_pid`).
    pub tid: u32,
    /// Of a user stack: its process (`tgid`).
    pub tgid: Option<u32>,
    words: &'a [u8],
    word: usize,
    endian: Endian,
}

impl StackEvents {
    /// Whether the instance writes any stack record.
    pub fn any(&self) -> bool {
        self.kernel.is_some() || self.user.is_some()
    }

    /// `raw` (a trace entry, common fields first) read as a stack record: `None` when it
    /// is another event's record; an error when it is a stack record that does not read.
    pub fn read<'a>(
        &self,
        raw: &'a [u8],
        endian: Endian,
    ) -> Option<Result<StackEntry<'a>, StackEntryError>> {
        let id = raw.get(..2)?.try_into().ok().map(|b| {
            if endian.is_big() {
                u16::from_be_bytes(b)
            } else {
                u16::from_le_bytes(b)
            }
        })?;
        let (kind, fields) = match (self.kernel, self.user) {
            (Some(k), _) if k.id == id => (StackKind::Kernel, k),
            (_, Some(u)) if u.id == id => (StackKind::User, u),
            _ => return None,
        };
        Some(read_entry(kind, &fields, raw, endian))
    }
}

/// The 4 bytes at `at` of `raw`.
fn u32_at(raw: &[u8], at: usize, endian: Endian) -> Option<u32> {
    let end = at.checked_add(4)?;
    raw.get(at..end)?.try_into().ok().map(|b| word32(b, endian))
}

/// A u32 in `endian`.
fn word32(b: [u8; 4], endian: Endian) -> u32 {
    if endian.is_big() {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    }
}

/// A u64 in `endian`.
fn word64(b: [u8; 8], endian: Endian) -> u64 {
    if endian.is_big() {
        u64::from_be_bytes(b)
    } else {
        u64::from_le_bytes(b)
    }
}

fn read_entry<'a>(
    kind: StackKind,
    fields: &StackFields,
    raw: &'a [u8],
    endian: Endian,
) -> Result<StackEntry<'a>, StackEntryError> {
    let name = match kind {
        StackKind::Kernel => "kernel_stack",
        StackKind::User => "user_stack",
    };
    let short = StackEntryError::Short(name);
    let tid = u32_at(raw, 4, endian).ok_or(short)?;
    let head = u32_at(raw, fields.head, endian).ok_or(short)?;
    let rest = raw.get(fields.caller..).ok_or(short)?;
    let (words, tgid) = match kind {
        StackKind::Kernel => {
            let count = head as i32;
            let bad = StackEntryError::BadCount {
                count: i64::from(count),
                bytes: rest.len(),
            };
            let len = usize::try_from(count)
                .ok()
                .and_then(|n| n.checked_mul(fields.word))
                .ok_or(bad)?;
            (rest.get(..len).ok_or(bad)?, None)
        }
        StackKind::User => {
            // `caller[8]`, zero-padded.
            let len = fields.word.checked_mul(8).ok_or(short)?;
            (rest.get(..len).ok_or(short)?, Some(head))
        }
    };
    Ok(StackEntry {
        kind,
        tid,
        tgid,
        words,
        word: fields.word,
        endian,
    })
}

impl StackEntry<'_> {
    /// The addresses, innermost first: of a user stack up to the first 0 (the padding)
    /// or all-ones (the end mark of older kernels).
    pub fn addresses(&self) -> impl Iterator<Item = u64> + '_ {
        let (word, endian, user) = (self.word, self.endian, self.kind == StackKind::User);
        let all_ones = if word == 4 {
            u64::from(u32::MAX)
        } else {
            u64::MAX
        };
        self.words
            .chunks_exact(word)
            .map(move |c| match c.try_into() {
                Ok(b) => word64(b, endian),
                Err(_) => c
                    .try_into()
                    .map(|b| u64::from(word32(b, endian)))
                    .unwrap_or(0),
            })
            .take_while(move |&a| !(user && (a == 0 || a == all_ones)))
    }
}

/// Why a stack record was not tied to a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UntiedReason {
    /// No record before it on its CPU waits for one (the record went out before: the
    /// page it was on was read without it, or it came first on this ring).
    NoRecord,
    /// The record before it was written by another thread.
    OtherThread,
    /// A user stack whose `tgid` is not the record's process.
    OtherProcess,
    /// The record has a stack of that kind already (or its user part came first).
    Repeated,
    /// The stack record does not read ([`StackEntryError`]).
    Malformed,
}

/// Stack records not tied, by reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Untied {
    /// [`UntiedReason::NoRecord`].
    pub no_record: u64,
    /// [`UntiedReason::OtherThread`].
    pub other_thread: u64,
    /// [`UntiedReason::OtherProcess`].
    pub other_process: u64,
    /// [`UntiedReason::Repeated`].
    pub repeated: u64,
    /// [`UntiedReason::Malformed`].
    pub malformed: u64,
    /// Records handed on without every part of the stack asked for (its stack records
    /// never came: not written from NMI, overwritten, or not tied).
    pub incomplete: u64,
}

impl Untied {
    /// Count one.
    pub fn count(&mut self, why: UntiedReason) {
        let n = match why {
            UntiedReason::NoRecord => &mut self.no_record,
            UntiedReason::OtherThread => &mut self.other_thread,
            UntiedReason::OtherProcess => &mut self.other_process,
            UntiedReason::Repeated => &mut self.repeated,
            UntiedReason::Malformed => &mut self.malformed,
        };
        *n = n.saturating_add(1);
    }

    /// Add `other`'s counts.
    pub fn add(&mut self, other: &Untied) {
        self.no_record = self.no_record.saturating_add(other.no_record);
        self.other_thread = self.other_thread.saturating_add(other.other_thread);
        self.other_process = self.other_process.saturating_add(other.other_process);
        self.repeated = self.repeated.saturating_add(other.repeated);
        self.malformed = self.malformed.saturating_add(other.malformed);
        self.incomplete = self.incomplete.saturating_add(other.incomplete);
    }

    /// All stack records not tied.
    pub fn total(&self) -> u64 {
        [
            self.no_record,
            self.other_thread,
            self.other_process,
            self.repeated,
            self.malformed,
        ]
        .iter()
        .fold(0u64, |a, n| a.saturating_add(*n))
    }

    /// The counts in words (`None`: nothing to say).
    pub fn describe(&self) -> Option<String> {
        let parts: Vec<String> = [
            (
                self.no_record,
                "with no record before it on its CPU waiting for one",
            ),
            (self.other_thread, "after a record of another thread"),
            (
                self.other_process,
                "a user stack of another process than the record's",
            ),
            (
                self.repeated,
                "a second stack of the same kind for one record",
            ),
            (self.malformed, "not readable"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, why)| format!("{n} {why}"))
        .collect();
        let untied = (!parts.is_empty()).then(|| {
            format!(
                "{} stack records (ftrace kernel_stack, user_stack) were not tied to a record \
                 and were left out: {}",
                self.total(),
                parts.join(", ")
            )
        });
        let incomplete = (self.incomplete > 0).then(|| {
            format!(
                "{} records went out without part of their stack (its stack record never \
                 followed: the kernel writes none from NMI, a full ring overwrote it, or it \
                 was not tied)",
                self.incomplete
            )
        });
        match (untied, incomplete) {
            (None, None) => None,
            (Some(a), None) | (None, Some(a)) => Some(a),
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        }
    }
}

/// What [`StackTie::stack`] did with a stack record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tie {
    /// Added to the held record; `complete`: it has every part asked for now.
    Attached {
        /// Every part asked for is there.
        complete: bool,
    },
    /// Not tied (counted in [`StackTie::untied`]).
    Untied(UntiedReason),
    /// Of a record left out on purpose ([`StackTie::discard`]): consumed, not counted.
    Discarded,
}

/// What [`StackTie::offer`] made of a trace entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offered {
    /// A stack record, tied or not.
    Stack(Tie),
    /// Another event's record.
    Record,
}

/// The record held until its stack records come, and its callchain so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldRecord<'a> {
    /// The trace entry.
    pub raw: &'a [u8],
    /// Its time.
    pub time: u64,
    /// Its thread.
    pub tid: u32,
    /// Its process, if known.
    pub pid: Option<u32>,
    /// The callchain (native byte order): empty when no stack record was tied to it.
    pub chain: &'a [u8],
    /// Frames were cut at the most asked for (`max_frames`).
    pub cut: bool,
}

/// One CPU's record waiting for its stack records (see the module's documentation).
/// Buffers are reused: nothing is allocated once they reached a record's size.
#[derive(Debug, Clone, Default)]
pub struct StackTie {
    kernel: bool,
    user: bool,
    max_frames: usize,
    raw: Vec<u8>,
    chain: Vec<u8>,
    time: u64,
    tid: u32,
    pid: Option<u32>,
    held: bool,
    has_kernel: bool,
    has_user: bool,
    frames: usize,
    cut: bool,
    discarding: bool,
    /// The stack records not tied, by reason.
    pub untied: Untied,
}

impl StackTie {
    /// A tie for an instance that writes kernel stacks (`kernel`), user stacks (`user`),
    /// each cut to `max_frames` frames in all (0: no limit).
    pub fn new(kernel: bool, user: bool, max_frames: usize) -> StackTie {
        StackTie {
            kernel,
            user,
            max_frames: if max_frames == 0 {
                usize::MAX
            } else {
                max_frames
            },
            ..StackTie::default()
        }
    }

    /// Hold `raw` (a record of thread `tid`, process `pid`, at `time`) for its stack
    /// records. The record held before must have been taken ([`StackTie::take`]) first:
    /// it is replaced.
    pub fn hold(&mut self, raw: &[u8], time: u64, tid: u32, pid: Option<u32>) {
        self.raw.clear();
        self.raw.extend_from_slice(raw);
        self.chain.clear();
        self.time = time;
        self.tid = tid;
        self.pid = pid;
        self.held = true;
        self.has_kernel = false;
        self.has_user = false;
        self.frames = 0;
        self.cut = false;
        self.discarding = false;
    }

    /// The stack records that follow belong to a record left out on purpose (one a
    /// killed run wrote already): consume them without counting, until the next
    /// [`StackTie::hold`].
    pub fn discard(&mut self) {
        self.held = false;
        self.discarding = true;
    }

    /// Whether a record is held.
    pub fn holds(&self) -> bool {
        self.held
    }

    /// Whether the held record has every part asked for.
    pub fn complete(&self) -> bool {
        self.held && self.has_kernel == self.kernel && self.has_user == self.user
    }

    /// The held record's time.
    pub fn time(&self) -> Option<u64> {
        self.held.then_some(self.time)
    }

    /// The held record, if any (it stays held).
    pub fn peek(&self) -> Option<HeldRecord<'_>> {
        self.held.then(|| self.view())
    }

    /// The record in the buffers, held or not.
    fn view(&self) -> HeldRecord<'_> {
        HeldRecord {
            raw: &self.raw,
            time: self.time,
            tid: self.tid,
            pid: self.pid,
            chain: &self.chain,
            cut: self.cut,
        }
    }

    /// The held record, no longer held (its bytes stay valid until the next
    /// [`StackTie::hold`]).
    pub fn take(&mut self) -> Option<HeldRecord<'_>> {
        let held = std::mem::replace(&mut self.held, false);
        self.discarding = false;
        if held && !(self.has_kernel == self.kernel && self.has_user == self.user) {
            self.untied.incomplete = self.untied.incomplete.saturating_add(1);
        }
        held.then(|| self.view())
    }

    /// Take trace entry `raw` of this CPU (the next after the last one offered): a stack
    /// record is tied to the held record (or counted); any other record is left to the
    /// caller ([`Offered::Record`]), who hands on the held one ([`StackTie::take`]) and
    /// then holds this one ([`StackTie::hold`]).
    pub fn offer(&mut self, events: &StackEvents, raw: &[u8], endian: Endian) -> Offered {
        match events.read(raw, endian) {
            None => Offered::Record,
            Some(Ok(entry)) => Offered::Stack(self.stack(&entry)),
            Some(Err(_)) if self.discarding => Offered::Stack(Tie::Discarded),
            Some(Err(_)) => {
                self.untied.count(UntiedReason::Malformed);
                Offered::Stack(Tie::Untied(UntiedReason::Malformed))
            }
        }
    }

    /// Tie `entry` to the held record, or say why not (counted).
    pub fn stack(&mut self, entry: &StackEntry<'_>) -> Tie {
        if self.discarding {
            return Tie::Discarded;
        }
        let why = if !self.held {
            Some(UntiedReason::NoRecord)
        } else if entry.tid != self.tid {
            Some(UntiedReason::OtherThread)
        } else {
            match entry.kind {
                StackKind::Kernel if self.has_kernel || self.has_user => {
                    Some(UntiedReason::Repeated)
                }
                StackKind::User if self.has_user => Some(UntiedReason::Repeated),
                // The thread's process unknown (its thread id not resolved): the user
                // stack's own `tgid` says it.
                StackKind::User if self.pid.is_some() && entry.tgid != self.pid => {
                    Some(UntiedReason::OtherProcess)
                }
                _ => None,
            }
        };
        if let Some(why) = why {
            self.untied.count(why);
            return Tie::Untied(why);
        }
        let marker = match entry.kind {
            StackKind::Kernel => {
                self.has_kernel = true;
                PERF_CONTEXT_KERNEL
            }
            StackKind::User => {
                self.has_user = true;
                self.pid = self.pid.or(entry.tgid);
                PERF_CONTEXT_USER
            }
        };
        let mut marked = false;
        for address in entry.addresses() {
            if self.frames >= self.max_frames {
                self.cut = true;
                break;
            }
            if !marked {
                self.chain.extend_from_slice(&marker.to_ne_bytes());
                marked = true;
            }
            self.chain.extend_from_slice(&address.to_ne_bytes());
            self.frames = self.frames.saturating_add(1);
        }
        Tie::Attached {
            complete: self.complete(),
        }
    }
}

/// The byte order of the callchains [`StackTie`] builds (the machine's).
pub const CHAIN_ENDIAN: Endian = Endian::NATIVE;

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;
    use crate::callchain::{Callchain, FrameContext};

    const KERNEL: StackFields = StackFields {
        id: 4,
        head: 8,
        caller: 16,
        word: 8,
    };
    const USER: StackFields = StackFields {
        id: 13,
        head: 8,
        caller: 16,
        word: 8,
    };
    const EVENTS: StackEvents = StackEvents {
        kernel: Some(KERNEL),
        user: Some(USER),
    };

    fn entry(id: u16, tid: u32, head: u32, addrs: &[u64], pad_to: usize) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&id.to_le_bytes());
        v.extend_from_slice(&[0, 0]);
        v.extend_from_slice(&tid.to_le_bytes());
        v.extend_from_slice(&head.to_le_bytes());
        v.extend_from_slice(&[0; 4]);
        for a in addrs {
            v.extend_from_slice(&a.to_le_bytes());
        }
        for _ in addrs.len()..pad_to {
            v.extend_from_slice(&0u64.to_le_bytes());
        }
        v
    }

    #[test]
    fn reads_both_kinds() {
        let k = entry(4, 7, 3, &[1, 2, 3], 0);
        let e = EVENTS.read(&k, Endian::Little).unwrap().unwrap();
        assert_eq!((e.kind, e.tid, e.tgid), (StackKind::Kernel, 7, None));
        assert_eq!(e.addresses().collect::<Vec<_>>(), [1, 2, 3]);
        let u = entry(13, 7, 9, &[5, 6], 8);
        let e = EVENTS.read(&u, Endian::Little).unwrap().unwrap();
        assert_eq!(e.tgid, Some(9));
        assert_eq!(e.addresses().collect::<Vec<_>>(), [5, 6]);
        assert!(
            EVENTS
                .read(&entry(20, 7, 0, &[], 0), Endian::Little)
                .is_none()
        );
    }

    #[test]
    fn bad_sizes_are_errors() {
        let k = entry(4, 7, 4, &[1, 2, 3], 0);
        assert!(matches!(
            EVENTS.read(&k, Endian::Little),
            Some(Err(StackEntryError::BadCount { count: 4, .. }))
        ));
        let k = entry(4, 7, u32::MAX, &[], 0);
        assert!(matches!(
            EVENTS.read(&k, Endian::Little),
            Some(Err(StackEntryError::BadCount { count: -1, .. }))
        ));
        let u = entry(13, 7, 9, &[5], 3);
        assert!(matches!(
            EVENTS.read(&u, Endian::Little),
            Some(Err(StackEntryError::Short("user_stack")))
        ));
        assert!(matches!(
            EVENTS.read(&[4, 0, 0, 0, 1], Endian::Little),
            Some(Err(StackEntryError::Short(_)))
        ));
    }

    fn frames(chain: &[u8]) -> Vec<(FrameContext, u64)> {
        Callchain::new(chain, CHAIN_ENDIAN)
            .frames()
            .map(|f| f.map(|f| (f.context, f.address)).unwrap())
            .collect()
    }

    #[test]
    fn ties_in_order_and_cuts() {
        let mut t = StackTie::new(true, true, 3);
        t.hold(b"record..", 10, 7, Some(9));
        let k = entry(4, 7, 2, &[0xf1, 0xf2], 0);
        let k = EVENTS.read(&k, Endian::Little).unwrap().unwrap();
        assert_eq!(t.stack(&k), Tie::Attached { complete: false });
        let u = entry(13, 7, 9, &[0x10, 0x20], 8);
        let u = EVENTS.read(&u, Endian::Little).unwrap().unwrap();
        assert_eq!(t.stack(&u), Tie::Attached { complete: true });
        let held = t.take().unwrap();
        assert!(held.cut);
        assert_eq!(
            frames(held.chain),
            [
                (FrameContext::Kernel, 0xf1),
                (FrameContext::Kernel, 0xf2),
                (FrameContext::User, 0x10)
            ]
        );
        assert!(t.take().is_none());
    }
}
