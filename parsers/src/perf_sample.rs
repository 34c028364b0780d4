//! Perf ring-buffer records → typed values (pure parsing, never panics on any bytes).
//!
//! A record is `struct perf_event_header { u32 type; u16 misc; u16 size; }` followed by a
//! body whose layout depends on the record type and on the event's `sample_type`
//! (`include/uapi/linux/perf_event.h`):
//! - `PERF_RECORD_SAMPLE` (9): the fields selected by `sample_type`, in bit order
//!   (identifier, ip, pid/tid, time, addr, id, stream_id, cpu/res, period, callchain,
//!   raw, regs_user, stack_user, cgroup); `callchain` is `u64 nr` + `nr` u64s
//!   ([`Callchain`]); `raw` is `u32 size` + `size` bytes (the trace entry, starting with
//!   `common_type`); `regs_user` and `stack_user` are read as [`crate::user_stack`] says.
//! - `PERF_RECORD_LOST` (2): `u64 id; u64 lost;` then the `sample_id` trailer.
//! - `PERF_RECORD_LOST_SAMPLES` (13): `u64 lost;` then the `sample_id` trailer.
//! - With `sample_id_all`, every non-sample record ends with a `sample_id` trailer:
//!   pid/tid, time, id, stream_id, cpu/res, identifier (each only when its bit is set).
//!
//! Records come from the kernel's ring (native byte order) or from files written on
//! other machines, so every length is bounds-checked and errors are values.

use crate::bytes::{Cursor, Endian, Short};
use crate::callchain::Callchain;
use crate::context::ContextUpdate;
use crate::user_stack::{StackCopy, UserRegs, UserStack, regs_len};

/// `PERF_RECORD_LOST`: the kernel dropped records because the ring was full.
pub const PERF_RECORD_LOST: u32 = 2;
/// `PERF_RECORD_SAMPLE`: one sample of an event.
pub const PERF_RECORD_SAMPLE: u32 = 9;
/// `PERF_RECORD_LOST_SAMPLES`: samples dropped before they reached the ring.
pub const PERF_RECORD_LOST_SAMPLES: u32 = 13;
/// `PERF_RECORD_COMM`: a thread's name changed (exec, `prctl(PR_SET_NAME)`).
pub const PERF_RECORD_COMM: u32 = 3;
/// `PERF_RECORD_EXIT`: a thread exited.
pub const PERF_RECORD_EXIT: u32 = 4;
/// `PERF_RECORD_FORK`: a thread was created.
pub const PERF_RECORD_FORK: u32 = 7;
/// `PERF_RECORD_CGROUP`: a cgroup was created (id and path).
pub const PERF_RECORD_CGROUP: u32 = 19;
/// `PERF_RECORD_MMAP`: a mapping without device, inode or protection (perf writes the
/// kernel's text as one, `[kernel.kallsyms]_text`; the readers keep it as an other record).
pub const PERF_RECORD_MMAP: u32 = 1;
/// `PERF_RECORD_MISC_KERNEL`: the record is of the kernel (its map, its samples).
pub const PERF_RECORD_MISC_KERNEL: u16 = 1;
/// `PERF_RECORD_MISC_USER`: a sample's IP is in user space.
pub const PERF_RECORD_MISC_USER: u16 = 2;
/// `PERF_RECORD_MMAP2`: a process mapped a file (executable mappings unless `mmap_data`).
pub const PERF_RECORD_MMAP2: u32 = 10;
/// `PROT_EXEC` in an MMAP2 record's `prot`: the mapping holds code.
const PROT_EXEC: u32 = 0x4;
/// `PERF_RECORD_MISC_MMAP_BUILD_ID`: an MMAP2 record carries a build id, not the inode.
pub const PERF_RECORD_MISC_MMAP_BUILD_ID: u16 = 1 << 14;
/// `PERF_RECORD_MISC_FORK_EXEC` (perf's own use of the bit on FORK records): the thread
/// starts anew, without a copy of its parent's mappings.
pub const PERF_RECORD_MISC_FORK_EXEC: u16 = 1 << 13;
/// `PERF_RECORD_MISC_COMM_EXEC`: the COMM record comes from an exec.
pub const PERF_RECORD_MISC_COMM_EXEC: u16 = 1 << 13;

/// Bits of `perf_event_attr.sample_type` (`enum perf_event_sample_format`).
pub mod sample_type {
    /// `PERF_SAMPLE_IP`.
    pub const IP: u64 = 1 << 0;
    /// `PERF_SAMPLE_TID`: `u32 pid, u32 tid`.
    pub const TID: u64 = 1 << 1;
    /// `PERF_SAMPLE_TIME`: `u64` nanoseconds of the event's clock.
    pub const TIME: u64 = 1 << 2;
    /// `PERF_SAMPLE_ADDR`.
    pub const ADDR: u64 = 1 << 3;
    /// `PERF_SAMPLE_READ` (not supported by this parser).
    pub const READ: u64 = 1 << 4;
    /// `PERF_SAMPLE_CALLCHAIN`: `u64 nr` + `nr` addresses and markers, before `raw`.
    pub const CALLCHAIN: u64 = 1 << 5;
    /// `PERF_SAMPLE_ID`.
    pub const ID: u64 = 1 << 6;
    /// `PERF_SAMPLE_CPU`: `u32 cpu, u32 res`.
    pub const CPU: u64 = 1 << 7;
    /// `PERF_SAMPLE_PERIOD`.
    pub const PERIOD: u64 = 1 << 8;
    /// `PERF_SAMPLE_STREAM_ID`.
    pub const STREAM_ID: u64 = 1 << 9;
    /// `PERF_SAMPLE_RAW`: `u32 size` + bytes (the tracepoint's trace entry).
    pub const RAW: u64 = 1 << 10;
    /// `PERF_SAMPLE_REGS_USER`: `u64 abi` + one u64 per bit of `sample_regs_user`
    /// ([`super::SampleFormat::with_user_regs`]), after `raw`.
    pub const REGS_USER: u64 = 1 << 12;
    /// `PERF_SAMPLE_STACK_USER`: `u64 size` + `size` bytes + `u64 dyn_size` (nothing
    /// after a size of 0), after the registers.
    pub const STACK_USER: u64 = 1 << 13;
    /// `PERF_SAMPLE_WEIGHT`: a `u64` after the user stack (read past).
    pub const WEIGHT: u64 = 1 << 14;
    /// `PERF_SAMPLE_DATA_SRC`: a `u64` after the weight (read past; `perf record
    /// --call-graph dwarf` asks for it).
    pub const DATA_SRC: u64 = 1 << 15;
    /// `PERF_SAMPLE_IDENTIFIER`: the event id, first in samples and last in trailers.
    pub const IDENTIFIER: u64 = 1 << 16;
    /// `PERF_SAMPLE_TRANSACTION`: a `u64` after the data source (read past).
    pub const TRANSACTION: u64 = 1 << 17;
    /// `PERF_SAMPLE_PHYS_ADDR`: a `u64` after the transaction (read past).
    pub const PHYS_ADDR: u64 = 1 << 19;
    /// `PERF_SAMPLE_CGROUP` (Linux 5.7): the `u64` cgroup id of the task, after `raw`.
    pub const CGROUP: u64 = 1 << 21;
    /// `PERF_SAMPLE_DATA_PAGE_SIZE`: a `u64` after the cgroup (read past).
    pub const DATA_PAGE_SIZE: u64 = 1 << 22;
    /// `PERF_SAMPLE_CODE_PAGE_SIZE`: a `u64` after the data page size (read past).
    pub const CODE_PAGE_SIZE: u64 = 1 << 23;
    /// `PERF_SAMPLE_WEIGHT_STRUCT`: the weight's place, as a struct (read past).
    pub const WEIGHT_STRUCT: u64 = 1 << 24;
    /// The `u64` fields between the user stack and the cgroup id, read past.
    pub const BEFORE_CGROUP: [u64; 4] = [WEIGHT | WEIGHT_STRUCT, DATA_SRC, TRANSACTION, PHYS_ADDR];
    /// The bits [`super::SampleFormat`] understands.
    pub const SUPPORTED: u64 = IP
        | TID
        | TIME
        | ADDR
        | ID
        | CPU
        | PERIOD
        | STREAM_ID
        | CALLCHAIN
        | RAW
        | REGS_USER
        | STACK_USER
        | WEIGHT
        | DATA_SRC
        | IDENTIFIER
        | TRANSACTION
        | PHYS_ADDR
        | CGROUP
        | DATA_PAGE_SIZE
        | CODE_PAGE_SIZE
        | WEIGHT_STRUCT;
    /// What uevrec asks the kernel for on tracepoints.
    pub const UEVREC: u64 = IDENTIFIER | TID | TIME | CPU | RAW;
}

/// Size of `struct perf_event_header`.
pub const HEADER_SIZE: usize = 8;

/// Why a record could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PerfSampleError {
    /// The bytes end before a field.
    #[error("perf record truncated: {what} needs {need} bytes at offset {at}, record has {have}")]
    Truncated {
        /// The field being read.
        what: &'static str,
        /// Bytes the field needs.
        need: usize,
        /// Where it starts.
        at: usize,
        /// Bytes available in the record.
        have: usize,
    },
    /// The header's size is below the header itself or beyond the bytes given.
    #[error("perf record header says {size} bytes, but {have} bytes are available")]
    BadSize {
        /// The header's size field.
        size: u16,
        /// Bytes given.
        have: usize,
    },
    /// `sample_type` has bits this parser cannot lay out.
    #[error(
        "unsupported perf sample_type bits {0:#x} (supported: IP TID TIME ADDR ID CPU PERIOD STREAM_ID CALLCHAIN RAW REGS_USER STACK_USER IDENTIFIER CGROUP)"
    )]
    Unsupported(u64),
    /// A user stack copy that says it holds more bytes than it has room for.
    #[error(
        "perf sample's user stack says {dyn_size} bytes were copied into a copy of {size} bytes"
    )]
    StackDynSize {
        /// The bytes the record says were copied.
        dyn_size: u64,
        /// The room for them.
        size: u64,
    },
}

/// `struct perf_event_header`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// Record type (`PERF_RECORD_*`).
    pub kind: u32,
    /// `misc` flags.
    pub misc: u16,
    /// Total record size including the header.
    pub size: u16,
}

impl RecordHeader {
    /// The header in these 8 bytes, in the given byte order.
    #[inline]
    pub fn read(h: &[u8; HEADER_SIZE], endian: Endian) -> Self {
        let (kind, misc, size) = ([h[0], h[1], h[2], h[3]], [h[4], h[5]], [h[6], h[7]]);
        if endian == Endian::Big {
            RecordHeader {
                kind: u32::from_be_bytes(kind),
                misc: u16::from_be_bytes(misc),
                size: u16::from_be_bytes(size),
            }
        } else {
            RecordHeader {
                kind: u32::from_le_bytes(kind),
                misc: u16::from_le_bytes(misc),
                size: u16::from_le_bytes(size),
            }
        }
    }
}

/// The header at the start of `bytes` (None when fewer than 8 bytes), native byte order.
#[inline]
pub fn parse_header(bytes: &[u8]) -> Option<RecordHeader> {
    let h = bytes.first_chunk::<HEADER_SIZE>()?;
    Some(RecordHeader::read(h, Endian::NATIVE))
}

/// Fields of a `PERF_RECORD_SAMPLE` (each `None` when its bit is not in `sample_type`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sample<'a> {
    /// The event id (`PERF_SAMPLE_IDENTIFIER`, else `PERF_SAMPLE_ID`).
    pub id: Option<u64>,
    /// Instruction pointer.
    pub ip: Option<u64>,
    /// Process id.
    pub pid: Option<u32>,
    /// Thread id.
    pub tid: Option<u32>,
    /// Time in nanoseconds of the event's clock.
    pub time: Option<u64>,
    /// Address.
    pub addr: Option<u64>,
    /// Stream id.
    pub stream_id: Option<u64>,
    /// CPU.
    pub cpu: Option<u32>,
    /// Period.
    pub period: Option<u64>,
    /// The call stack (`PERF_SAMPLE_CALLCHAIN`).
    pub callchain: Option<Callchain<'a>>,
    /// The raw trace entry (common fields first).
    pub raw: Option<&'a [u8]>,
    /// The user registers (`PERF_SAMPLE_REGS_USER`).
    pub user_regs: Option<UserRegs<'a>>,
    /// The copy of the user stack (`PERF_SAMPLE_STACK_USER`).
    pub user_stack: Option<StackCopy<'a>>,
    /// The cgroup id of the task (`PERF_SAMPLE_CGROUP`).
    pub cgroup: Option<u64>,
}

/// A sample's parts that are not at fixed places ([`SampleFormat::fixed_parts`]).
struct FixedParts<'a> {
    /// The fixed part (up to [`SampleOffsets::end`]).
    fixed: &'a [u8],
    callchain: Option<Callchain<'a>>,
    raw: Option<&'a [u8]>,
    user_regs: Option<UserRegs<'a>>,
    user_stack: Option<StackCopy<'a>>,
    cgroup: Option<u64>,
}

/// The u64 at `at` of `bytes`, big-endian if `BIG` (`None` for place 0 or past the end).
#[inline(always)]
fn u64_in<const BIG: bool>(bytes: &[u8], at: u8) -> Option<u64> {
    if at == 0 {
        return None;
    }
    u64_at_pos::<BIG>(bytes, usize::from(at))
}

/// The u32 at `at` of `bytes`, big-endian if `BIG` (`None` for place 0 or past the end).
#[inline(always)]
fn u32_in<const BIG: bool>(bytes: &[u8], at: u8) -> Option<u32> {
    if at == 0 {
        return None;
    }
    u32_at_pos::<BIG>(bytes, usize::from(at))
}

/// The u64 at byte `at` of `bytes`, big-endian if `BIG` (`None` past the end).
#[inline(always)]
fn u64_at_pos<const BIG: bool>(bytes: &[u8], at: usize) -> Option<u64> {
    let a = *bytes.get(at..)?.first_chunk::<8>()?;
    Some(if BIG {
        u64::from_be_bytes(a)
    } else {
        u64::from_le_bytes(a)
    })
}

/// The u32 at byte `at` of `bytes`, big-endian if `BIG` (`None` past the end).
#[inline(always)]
fn u32_at_pos<const BIG: bool>(bytes: &[u8], at: usize) -> Option<u32> {
    let a = *bytes.get(at..)?.first_chunk::<4>()?;
    Some(if BIG {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    })
}

/// Bytes of a record read as one array by [`SampleFormat::line_fields`] when its fixed
/// part fits (the fields of a line are then read without bounds checks).
const WINDOW: usize = 64;

/// The u32 at `at` (4-aligned, below [`WINDOW`]` - 4`: every u32 of the fixed part) of
/// `w`, big-endian if `BIG` (`None` for place 0). The mask keeps `at` as it is and shows
/// the compiler that the read is inside `w`.
#[inline(always)]
fn window_u32<const BIG: bool>(w: &[u8; WINDOW], at: u8) -> Option<u32> {
    if at == 0 {
        return None;
    }
    let i = usize::from(at & 0x3c);
    let a = [w[i], w[i + 1], w[i + 2], w[i + 3]];
    Some(if BIG {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    })
}

/// The u64 at `at` (8-aligned, below [`WINDOW`]` - 8`: every u64 of the fixed part) of
/// `w`, as [`window_u32`].
#[inline(always)]
fn window_u64<const BIG: bool>(w: &[u8; WINDOW], at: u8) -> Option<u64> {
    if at == 0 {
        return None;
    }
    let i = usize::from(at & 0x38);
    let mut a = [0; 8];
    a.copy_from_slice(&w[i..i + 8]);
    Some(if BIG {
        u64::from_be_bytes(a)
    } else {
        u64::from_le_bytes(a)
    })
}

/// The fields of a sample that its JSON line needs ([`SampleFormat::line_fields`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineFields<'a> {
    /// The event id (`PERF_SAMPLE_IDENTIFIER`, else `PERF_SAMPLE_ID`).
    pub id: Option<u64>,
    /// Time in nanoseconds of the event's clock.
    pub time: Option<u64>,
    /// Process id.
    pub pid: Option<u32>,
    /// Thread id.
    pub tid: Option<u32>,
    /// CPU.
    pub cpu: Option<u32>,
    /// The raw trace entry (empty without `PERF_SAMPLE_RAW`).
    pub raw: &'a [u8],
    /// The cgroup id of the task (`PERF_SAMPLE_CGROUP`).
    pub cgroup: Option<u64>,
    /// The call stack (`PERF_SAMPLE_CALLCHAIN`).
    pub callchain: Option<Callchain<'a>>,
    /// The user registers and stack copy (`PERF_SAMPLE_REGS_USER | STACK_USER`, both).
    pub user_stack: Option<UserStack<'a>>,
}

impl<'a> From<Sample<'a>> for LineFields<'a> {
    /// The fields of a line of a sample read whole ([`SampleFormat::parse`]).
    fn from(s: Sample<'a>) -> Self {
        LineFields {
            id: s.id,
            time: s.time,
            pid: s.pid,
            tid: s.tid,
            cpu: s.cpu,
            raw: s.raw.unwrap_or_default(),
            cgroup: s.cgroup,
            callchain: s.callchain,
            user_stack: s
                .user_regs
                .zip(s.user_stack)
                .map(|(regs, stack)| UserStack { regs, stack }),
        }
    }
}

/// The `sample_id` trailer of non-sample records (`sample_id_all`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleId {
    /// Process id.
    pub pid: Option<u32>,
    /// Thread id.
    pub tid: Option<u32>,
    /// Time in nanoseconds of the event's clock.
    pub time: Option<u64>,
    /// Event id (`PERF_SAMPLE_IDENTIFIER` or `PERF_SAMPLE_ID`).
    pub id: Option<u64>,
    /// Stream id.
    pub stream_id: Option<u64>,
    /// CPU.
    pub cpu: Option<u32>,
}

/// One parsed record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    /// `PERF_RECORD_SAMPLE`.
    Sample(Sample<'a>),
    /// `PERF_RECORD_LOST`: `lost` records of event `id` were dropped.
    Lost {
        /// Id of the event whose write found the ring full.
        id: u64,
        /// How many records were dropped.
        lost: u64,
        /// The trailer (default when `sample_id_all` is off).
        sample_id: SampleId,
    },
    /// `PERF_RECORD_LOST_SAMPLES`.
    LostSamples {
        /// How many samples were dropped.
        lost: u64,
        /// The trailer (default when `sample_id_all` is off).
        sample_id: SampleId,
    },
    /// `PERF_RECORD_COMM`: thread `tid` of process `pid` is now called `comm`.
    Comm {
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
        /// The name, up to its NUL.
        comm: &'a [u8],
        /// The rename comes from an exec (`PERF_RECORD_MISC_COMM_EXEC`).
        exec: bool,
        /// The trailer (default when `sample_id_all` is off).
        sample_id: SampleId,
    },
    /// `PERF_RECORD_FORK` or `PERF_RECORD_EXIT`.
    Task {
        /// FORK (a new thread) rather than EXIT.
        fork: bool,
        /// Process id.
        pid: u32,
        /// Parent process id.
        ppid: u32,
        /// Thread id.
        tid: u32,
        /// Parent (creating) thread id.
        ptid: u32,
        /// The trailer (default when `sample_id_all` is off).
        sample_id: SampleId,
    },
    /// `PERF_RECORD_MMAP2`: process `pid` mapped `len` bytes of `filename` at `addr`.
    Mmap {
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
        /// Start of the mapping.
        addr: u64,
        /// Its length.
        len: u64,
        /// Its offset in the file.
        pgoff: u64,
        /// The build id (`PERF_RECORD_MISC_MMAP_BUILD_ID`; empty without it).
        build_id: &'a [u8],
        /// It maps code (`PROT_EXEC`): a mapping without it (an attr with `mmap_data`,
        /// perf's for `--call-graph dwarf`) holds no frames.
        exec: bool,
        /// The file, up to its NUL.
        filename: &'a [u8],
        /// The trailer (default when `sample_id_all` is off).
        sample_id: SampleId,
    },
    /// `PERF_RECORD_CGROUP`: cgroup `id` has the path `path`.
    Cgroup {
        /// The cgroup id.
        id: u64,
        /// Its path from the cgroup root, up to its NUL.
        path: &'a [u8],
        /// The trailer (default when `sample_id_all` is off).
        sample_id: SampleId,
    },
    /// Any other record type (kept as its header).
    Other(RecordHeader),
}

impl<'a> Record<'a> {
    /// A COMM, FORK, EXIT or CGROUP record, or an MMAP2 record of code, as the change
    /// of who is who it tells, with its time (the event's clock; `None` without
    /// `sample_id_all`'s time); `None` for every other record. The one place a perf record becomes a [`ContextUpdate`]: the
    /// live recorder's trackers and `uevrec decode` both use it.
    pub fn context_update(&self) -> Option<(Option<u64>, ContextUpdate<'a>)> {
        match *self {
            Record::Comm {
                pid,
                tid,
                comm,
                exec,
                sample_id,
            } => Some((
                sample_id.time,
                if exec && pid == tid {
                    ContextUpdate::Exec { pid, comm }
                } else {
                    ContextUpdate::Comm { tid, comm }
                },
            )),
            Record::Mmap {
                pid,
                addr,
                len,
                pgoff,
                build_id,
                filename,
                sample_id,
                exec: true,
                ..
            } => Some((
                sample_id.time,
                ContextUpdate::Mmap {
                    pid,
                    addr,
                    len,
                    pgoff,
                    build_id,
                    path: filename,
                },
            )),
            Record::Task {
                fork,
                tid,
                ptid,
                sample_id,
                ..
            } => Some((
                sample_id.time,
                if fork {
                    ContextUpdate::Fork {
                        tid,
                        parent_tid: ptid,
                    }
                } else {
                    ContextUpdate::Exit { tid }
                },
            )),
            Record::Cgroup {
                id,
                path,
                sample_id,
            } => Some((sample_id.time, ContextUpdate::Cgroup { id, path })),
            _ => None,
        }
    }
}

/// `bytes` up to the first NUL (all of them without one).
fn until_nul(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

/// How records of one event (or of a ring whose events share one attr) are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleFormat {
    sample_type: u64,
    sample_id_all: bool,
    /// `sample_regs_user`: which registers `PERF_SAMPLE_REGS_USER` holds.
    regs_user: u64,
    endian: Endian,
    at: SampleOffsets,
}

/// Where each field of a `PERF_RECORD_SAMPLE` is, in bytes from the record start (0: the
/// field is not in `sample_type`; 0 is the header, never a field). Every supported field
/// before `raw` has a fixed size, so the places follow from `sample_type` alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct SampleOffsets {
    identifier: u8,
    ip: u8,
    tid: u8,
    time: u8,
    addr: u8,
    id: u8,
    stream_id: u8,
    cpu: u8,
    period: u8,
    /// The `u32` size of the raw data (0 with a callchain: it then follows the chain).
    raw: u8,
    /// `PERF_SAMPLE_CALLCHAIN` is set: its `u64 nr` is at `end`, the raw data after it.
    callchain: bool,
    /// `PERF_SAMPLE_CGROUP` is set: its u64 follows the raw data (which is padded to 8
    /// bytes with its size word), or `end` without raw data.
    cgroup: bool,
    /// Where the fixed part ends (after the raw size, if any).
    end: u8,
}

impl SampleOffsets {
    /// The fields of a line, read with `read4` (a u32) and `read8` (a u64) at their places
    /// in the fixed part.
    #[inline(always)]
    // `at` is a place of SampleOffsets::of (at most 84): plus 4 fits a u8.
    #[allow(clippy::arithmetic_side_effects)]
    fn line_fields<'a>(
        &self,
        read4: impl Fn(u8) -> Option<u32>,
        read8: impl Fn(u8) -> Option<u64>,
        raw: &'a [u8],
        cgroup: Option<u64>,
        callchain: Option<Callchain<'a>>,
        user_stack: Option<UserStack<'a>>,
    ) -> LineFields<'a> {
        let (pid, tid) = match self.tid {
            0 => (None, None),
            at => (read4(at), read4(at + 4)),
        };
        LineFields {
            id: read8(self.identifier).or_else(|| read8(self.id)),
            time: read8(self.time),
            pid,
            tid,
            cpu: read4(self.cpu),
            raw,
            cgroup,
            callchain,
            user_stack,
        }
    }

    /// The places for `sample_type` (supported bits only), in the kernel's order.
    // The header and the supported fields' sizes: 8 + 9 × 8 + 4 = 84 at most, in a u8.
    #[allow(clippy::arithmetic_side_effects)]
    fn of(st: u64) -> Self {
        use sample_type::*;
        let mut pos = HEADER_SIZE as u8;
        let mut place = |bit: u64, size: u8| {
            if st & bit == 0 {
                return 0;
            }
            let at = pos;
            pos += size;
            at
        };
        let mut o = SampleOffsets {
            identifier: place(IDENTIFIER, 8),
            ip: place(IP, 8),
            tid: place(TID, 8),
            time: place(TIME, 8),
            addr: place(ADDR, 8),
            id: place(ID, 8),
            stream_id: place(STREAM_ID, 8),
            cpu: place(CPU, 8),
            period: place(PERIOD, 8),
            // After the variable-length callchain the raw size has no fixed place.
            raw: if st & CALLCHAIN == 0 {
                place(RAW, 4)
            } else {
                0
            },
            callchain: st & CALLCHAIN != 0,
            cgroup: st & CGROUP != 0,
            end: 0,
        };
        o.end = pos;
        o
    }
}

impl SampleFormat {
    /// The layout for this `sample_type` and `sample_id_all`, native byte order.
    pub fn new(sample_type: u64, sample_id_all: bool) -> Result<Self, PerfSampleError> {
        let extra = sample_type & !sample_type::SUPPORTED;
        if extra != 0 {
            return Err(PerfSampleError::Unsupported(extra));
        }
        Ok(SampleFormat {
            sample_type,
            sample_id_all,
            regs_user: 0,
            endian: Endian::NATIVE,
            at: SampleOffsets::of(sample_type),
        })
    }

    /// The same layout read in the given byte order (records from another machine).
    pub fn with_endian(self, endian: Endian) -> Self {
        SampleFormat { endian, ..self }
    }

    /// The same layout with the user registers of `mask` (the event's
    /// `sample_regs_user`: one u64 per bit after the abi, when `PERF_SAMPLE_REGS_USER` is
    /// set; no registers without this).
    pub fn with_user_regs(self, mask: u64) -> Self {
        SampleFormat {
            regs_user: mask,
            ..self
        }
    }

    /// The `sample_regs_user` mask ([`SampleFormat::with_user_regs`]).
    pub fn user_regs_mask(&self) -> u64 {
        self.regs_user
    }

    /// The `sample_type` bits.
    pub fn sample_type(&self) -> u64 {
        self.sample_type
    }

    fn has(&self, bit: u64) -> bool {
        self.sample_type & bit != 0
    }

    /// How many of the `u64` fields read past ([`sample_type::BEFORE_CGROUP`]) lie
    /// between the user stack and the cgroup id.
    #[inline]
    fn words_before_cgroup(&self) -> usize {
        sample_type::BEFORE_CGROUP
            .iter()
            .filter(|&&bits| self.sample_type & bits != 0)
            .count()
    }

    /// Bytes of the `sample_id` trailer (0 without `sample_id_all`).
    pub fn trailer_size(&self) -> usize {
        if !self.sample_id_all {
            return 0;
        }
        use sample_type::*;
        [
            (TID, 8),
            (TIME, 8),
            (ID, 8),
            (STREAM_ID, 8),
            (CPU, 8),
            (IDENTIFIER, 8),
        ]
        .iter()
        .filter(|(bit, _)| self.has(*bit))
        .map(|(_, n)| n)
        .sum()
    }

    /// The header at the start of `bytes` in this layout's byte order (None when fewer
    /// than 8 bytes).
    #[inline]
    pub fn header(&self, bytes: &[u8]) -> Option<RecordHeader> {
        let h = bytes.first_chunk::<HEADER_SIZE>()?;
        Some(RecordHeader::read(h, self.endian))
    }

    /// Parse one whole record (header included); bytes past `header.size` are ignored.
    #[inline]
    pub fn parse<'a>(&self, bytes: &'a [u8]) -> Result<Record<'a>, PerfSampleError> {
        match self.header(bytes) {
            Some(h) if h.kind == PERF_RECORD_SAMPLE => self.parse_sample(bytes).map(Record::Sample),
            _ => self.parse_fieldwise(bytes),
        }
    }

    /// [`SampleFormat::parse`] for a record known to be a `PERF_RECORD_SAMPLE` (the
    /// header's type is not looked at again): the sample without the [`Record`] around it.
    /// Always in line, so that a caller that uses a few of the sample's fields (the
    /// perf.data reader: time, cpu, pid, tid, raw) reads only those.
    #[inline(always)]
    pub fn parse_sample<'a>(&self, bytes: &'a [u8]) -> Result<Sample<'a>, PerfSampleError> {
        if let Some(h) = self.header(bytes) {
            let size = usize::from(h.size);
            if size >= HEADER_SIZE {
                if let Some(s) = bytes.get(..size).and_then(|b| self.sample_fixed(b)) {
                    return Ok(s);
                }
            }
        }
        self.parse_sample_fieldwise(bytes)
    }

    /// [`SampleFormat::parse_sample`] field by field (out of line: a sample that does
    /// not fit its fixed places, whose error names the field cut short).
    #[inline(never)]
    fn parse_sample_fieldwise<'a>(&self, bytes: &'a [u8]) -> Result<Sample<'a>, PerfSampleError> {
        let (_, r) = self.body(bytes)?;
        self.sample(r)
    }

    /// The header of the record `bytes` and a reader over its body (`header.size` bytes).
    fn body<'a>(&self, bytes: &'a [u8]) -> Result<(RecordHeader, Reader<'a>), PerfSampleError> {
        let mut r = Reader::new(bytes, 0, self.endian);
        let header = r.header()?;
        if usize::from(header.size) < HEADER_SIZE || usize::from(header.size) > bytes.len() {
            return Err(PerfSampleError::BadSize {
                size: header.size,
                have: bytes.len(),
            });
        }
        let r = Reader::new(&bytes[..usize::from(header.size)], r.pos(), self.endian);
        Ok((header, r))
    }

    /// [`SampleFormat::parse`] one field at a time: other records, and samples that are
    /// cut short (the error names the field).
    fn parse_fieldwise<'a>(&self, bytes: &'a [u8]) -> Result<Record<'a>, PerfSampleError> {
        let (header, mut r) = self.body(bytes)?;
        match header.kind {
            PERF_RECORD_SAMPLE => self.sample(r).map(Record::Sample),
            PERF_RECORD_LOST => {
                let id = r.u64("lost id")?;
                let lost = r.u64("lost count")?;
                let sample_id = self.trailer(r)?;
                Ok(Record::Lost {
                    id,
                    lost,
                    sample_id,
                })
            }
            PERF_RECORD_LOST_SAMPLES => {
                let lost = r.u64("lost samples count")?;
                let sample_id = self.trailer(r)?;
                Ok(Record::LostSamples { lost, sample_id })
            }
            PERF_RECORD_COMM => {
                let pid = r.u32("comm pid")?;
                let tid = r.u32("comm tid")?;
                let sample_id = self.trailer(r)?;
                let comm = self.text_before_trailer(&r);
                Ok(Record::Comm {
                    pid,
                    tid,
                    comm,
                    exec: header.misc & PERF_RECORD_MISC_COMM_EXEC != 0,
                    sample_id,
                })
            }
            PERF_RECORD_FORK | PERF_RECORD_EXIT => {
                let pid = r.u32("task pid")?;
                let ppid = r.u32("task ppid")?;
                let tid = r.u32("task tid")?;
                let ptid = r.u32("task ptid")?;
                r.u64("task time")?;
                let sample_id = self.trailer(r)?;
                Ok(Record::Task {
                    fork: header.kind == PERF_RECORD_FORK,
                    pid,
                    ppid,
                    tid,
                    ptid,
                    sample_id,
                })
            }
            PERF_RECORD_MMAP2 => {
                let pid = r.u32("mmap2 pid")?;
                let tid = r.u32("mmap2 tid")?;
                let addr = r.u64("mmap2 addr")?;
                let len = r.u64("mmap2 len")?;
                let pgoff = r.u64("mmap2 pgoff")?;
                // maj, min, ino, ino_generation; or the build id's size, 3 bytes and 20.
                let ids = r.take("mmap2 file id", 24)?;
                let prot = r.u32("mmap2 prot")?;
                r.u32("mmap2 flags")?;
                let build_id = if header.misc & PERF_RECORD_MISC_MMAP_BUILD_ID != 0 {
                    let size = usize::from(ids[0]).min(20);
                    ids.get(4..4usize.saturating_add(size)).unwrap_or_default()
                } else {
                    &[]
                };
                let sample_id = self.trailer(r)?;
                let filename = self.text_before_trailer(&r);
                Ok(Record::Mmap {
                    pid,
                    tid,
                    addr,
                    len,
                    pgoff,
                    build_id,
                    exec: prot & PROT_EXEC != 0,
                    filename,
                    sample_id,
                })
            }
            PERF_RECORD_CGROUP => {
                let id = r.u64("cgroup id")?;
                let sample_id = self.trailer(r)?;
                let path = self.text_before_trailer(&r);
                Ok(Record::Cgroup {
                    id,
                    path,
                    sample_id,
                })
            }
            _ => Ok(Record::Other(header)),
        }
    }

    /// A sample (`bytes`: the whole record, `header.size` long) whose fixed part and raw
    /// data are all there, read at the places of [`SampleOffsets`]; `None` when something
    /// is missing (then [`Self::sample`] says what).
    #[inline(always)]
    fn sample_fixed<'a>(&self, bytes: &'a [u8]) -> Option<Sample<'a>> {
        let o = &self.at;
        let FixedParts {
            fixed,
            callchain,
            raw,
            user_regs,
            user_stack,
            cgroup,
        } = self.fixed_parts(bytes)?;
        // Every place is inside `fixed`: each field is `Some` exactly when its bit is set.
        let word = |at: u8| self.u64_at(fixed, at);
        // A place of SampleOffsets::of (at most 84): plus 4 fits a u8.
        #[allow(clippy::arithmetic_side_effects)]
        let pair = |at: u8| Some((self.u32_at(fixed, at)?, self.u32_at(fixed, at + 4)?));
        let tid = pair(o.tid);
        Some(Sample {
            id: word(o.identifier).or_else(|| word(o.id)),
            ip: word(o.ip),
            pid: tid.map(|t| t.0),
            tid: tid.map(|t| t.1),
            time: word(o.time),
            addr: word(o.addr),
            stream_id: word(o.stream_id),
            cpu: self.u32_at(fixed, o.cpu),
            period: word(o.period),
            callchain,
            raw,
            user_regs,
            user_stack,
            cgroup,
        })
    }

    /// The parts of a sample (`bytes`: the whole record, `header.size` long) that are
    /// not at fixed places: the fixed part itself (up to [`SampleOffsets::end`]), the raw
    /// data and the cgroup id after it; `None` when something is missing.
    #[inline(always)]
    fn fixed_parts<'a>(&self, bytes: &'a [u8]) -> Option<FixedParts<'a>> {
        if self.endian == Endian::Big {
            self.fixed_parts_in::<true>(bytes)
        } else {
            self.fixed_parts_in::<false>(bytes)
        }
    }

    /// [`Self::fixed_parts`] for records in the byte order `BIG` (known at compile time,
    /// so that each read is one load).
    #[inline(always)]
    fn fixed_parts_in<'a, const BIG: bool>(&self, bytes: &'a [u8]) -> Option<FixedParts<'a>> {
        let o = &self.at;
        let end = usize::from(o.end);
        let fixed = bytes.get(..end)?;
        let (callchain, end) = if o.callchain {
            let nr = u64_at_pos::<BIG>(bytes, end)?;
            let start = end.checked_add(8)?;
            let stop = usize::try_from(nr)
                .ok()?
                .checked_mul(8)?
                .checked_add(start)?;
            let words = bytes.get(start..stop)?;
            (Some(Callchain::new(words, Endian::from_big(BIG))), stop)
        } else {
            (None, end)
        };
        let (raw, after) = if o.callchain && self.has(sample_type::RAW) {
            let size = u32_at_pos::<BIG>(bytes, end)? as usize;
            let start = end.checked_add(4)?;
            let after = start.checked_add(size)?;
            (Some(bytes.get(start..after)?), after)
        } else if o.raw == 0 {
            (None, end)
        } else {
            let size = u32_in::<BIG>(fixed, o.raw)? as usize;
            let after = end.checked_add(size)?;
            (Some(bytes.get(end..after)?), after)
        };
        let (user_regs, after) = if self.has(sample_type::REGS_USER) {
            let abi = u64_at_pos::<BIG>(bytes, after)?;
            let start = after.checked_add(8)?;
            let stop = start.checked_add(regs_len(abi, self.regs_user))?;
            let words = bytes.get(start..stop)?;
            let regs = UserRegs::new(abi, self.regs_user, words, Endian::from_big(BIG));
            (Some(regs), stop)
        } else {
            (None, after)
        };
        let (user_stack, after) = if self.has(sample_type::STACK_USER) {
            let size = u64_at_pos::<BIG>(bytes, after)?;
            let start = after.checked_add(8)?;
            if size == 0 {
                (Some(StackCopy { bytes: &[], size }), start)
            } else {
                let copy_end = start.checked_add(usize::try_from(size).ok()?)?;
                let copy = bytes.get(start..copy_end)?;
                let dyn_size = u64_at_pos::<BIG>(bytes, copy_end)?;
                let copied = copy.get(..usize::try_from(dyn_size).ok()?)?;
                (
                    Some(StackCopy {
                        bytes: copied,
                        size,
                    }),
                    copy_end.checked_add(8)?,
                )
            }
        } else {
            (None, after)
        };
        let after = after.checked_add(self.words_before_cgroup().saturating_mul(8))?;
        // The fields read past are there (as the fieldwise reading requires).
        bytes.get(..after)?;
        let cgroup = if o.cgroup {
            let a = *bytes.get(after..)?.first_chunk::<8>()?;
            Some(if BIG {
                u64::from_be_bytes(a)
            } else {
                u64::from_le_bytes(a)
            })
        } else {
            None
        };
        Some(FixedParts {
            fixed,
            callchain,
            raw,
            user_regs,
            user_stack,
            cgroup,
        })
    }

    /// What a JSON line of the `PERF_RECORD_SAMPLE` record `bytes` (header included)
    /// needs, read at the fixed places only: `None` when `bytes` is not a whole sample of
    /// this layout ([`SampleFormat::parse`] then says what is wrong). The perf.data
    /// decoder's hot path: no [`Sample`] is built.
    #[inline(always)]
    pub fn line_fields<'a>(&self, bytes: &'a [u8]) -> Option<LineFields<'a>> {
        // The byte order chosen once per record, not per field.
        if self.endian == Endian::Big {
            self.line_fields_in::<true>(bytes)
        } else {
            self.line_fields_in::<false>(bytes)
        }
    }

    /// [`Self::line_fields`] for records in the byte order `BIG` (a `bool`: an enum such as
    /// [`Endian`] cannot be a const generic parameter on stable Rust).
    #[inline(always)]
    fn line_fields_in<'a, const BIG: bool>(&self, bytes: &'a [u8]) -> Option<LineFields<'a>> {
        let h = RecordHeader::read(bytes.first_chunk::<HEADER_SIZE>()?, Endian::from_big(BIG));
        let size = usize::from(h.size);
        if h.kind != PERF_RECORD_SAMPLE || size < HEADER_SIZE {
            return None;
        }
        let record = bytes.get(..size)?;
        let FixedParts {
            fixed,
            callchain,
            raw,
            user_regs,
            user_stack,
            cgroup,
        } = self.fixed_parts_in::<BIG>(record)?;
        let raw = raw.unwrap_or_default();
        let user = user_regs
            .zip(user_stack)
            .map(|(regs, stack)| UserStack { regs, stack });
        // The fixed part within the record's first WINDOW bytes (the usual layouts): the
        // fields read from that array at places the compiler sees inside it, without a
        // bounds check each (BENCHMARKS.md, "Instruction counts moved out of the code").
        if usize::from(self.at.end) <= WINDOW
            && let Some(w) = record.first_chunk::<WINDOW>()
        {
            let read4 = |at| window_u32::<BIG>(w, at);
            let read8 = |at| window_u64::<BIG>(w, at);
            return Some(
                self.at
                    .line_fields(read4, read8, raw, cgroup, callchain, user),
            );
        }
        let read4 = |at| u32_in::<BIG>(fixed, at);
        let read8 = |at| u64_in::<BIG>(fixed, at);
        Some(
            self.at
                .line_fields(read4, read8, raw, cgroup, callchain, user),
        )
    }

    /// The u64 at `at` of `bytes` in the layout's byte order (`None` for place 0).
    #[inline]
    fn u64_at(&self, bytes: &[u8], at: u8) -> Option<u64> {
        if self.endian == Endian::Big {
            u64_in::<true>(bytes, at)
        } else {
            u64_in::<false>(bytes, at)
        }
    }

    /// The u32 at `at` of `bytes` in the layout's byte order (`None` for place 0).
    #[inline]
    fn u32_at(&self, bytes: &[u8], at: u8) -> Option<u32> {
        if self.endian == Endian::Big {
            u32_in::<true>(bytes, at)
        } else {
            u32_in::<false>(bytes, at)
        }
    }

    /// A sample field by field (the errors name the field that is cut short).
    fn sample<'a>(&self, mut r: Reader<'a>) -> Result<Sample<'a>, PerfSampleError> {
        use sample_type::*;
        let mut s = Sample::default();
        if self.has(IDENTIFIER) {
            s.id = Some(r.u64("identifier")?);
        }
        if self.has(IP) {
            s.ip = Some(r.u64("ip")?);
        }
        if self.has(TID) {
            s.pid = Some(r.u32("pid")?);
            s.tid = Some(r.u32("tid")?);
        }
        if self.has(TIME) {
            s.time = Some(r.u64("time")?);
        }
        if self.has(ADDR) {
            s.addr = Some(r.u64("addr")?);
        }
        if self.has(ID) {
            let id = r.u64("id")?;
            s.id = s.id.or(Some(id));
        }
        if self.has(STREAM_ID) {
            s.stream_id = Some(r.u64("stream_id")?);
        }
        if self.has(CPU) {
            s.cpu = Some(r.u32("cpu")?);
            r.u32("cpu res")?;
        }
        if self.has(PERIOD) {
            s.period = Some(r.u64("period")?);
        }
        if self.has(CALLCHAIN) {
            let nr = r.u64("callchain nr")?;
            // A count past the record: the take below names it (saturated, never wrapped).
            let len = usize::try_from(nr).unwrap_or(usize::MAX).saturating_mul(8);
            s.callchain = Some(Callchain::new(r.take("callchain ips", len)?, self.endian));
        }
        if self.has(RAW) {
            let size = r.u32("raw size")? as usize;
            s.raw = Some(r.take("raw data", size)?);
        }
        if self.has(REGS_USER) {
            let abi = r.u64("regs_user abi")?;
            let words = r.take("regs_user registers", regs_len(abi, self.regs_user))?;
            s.user_regs = Some(UserRegs::new(abi, self.regs_user, words, self.endian));
        }
        if self.has(STACK_USER) {
            let size = r.u64("stack_user size")?;
            let mut copy: &[u8] = &[];
            if size != 0 {
                // A size past the record: the take names it (saturated, never wrapped).
                let room = r.take(
                    "stack_user data",
                    usize::try_from(size).unwrap_or(usize::MAX),
                )?;
                let dyn_size = r.u64("stack_user dyn_size")?;
                copy = usize::try_from(dyn_size)
                    .ok()
                    .and_then(|n| room.get(..n))
                    .ok_or(PerfSampleError::StackDynSize { dyn_size, size })?;
            }
            s.user_stack = Some(StackCopy { bytes: copy, size });
        }
        for bits in BEFORE_CGROUP {
            if self.sample_type & bits != 0 {
                r.u64("weight, data source, transaction or physical address")?;
            }
        }
        if self.has(CGROUP) {
            s.cgroup = Some(r.u64("cgroup")?);
        }
        Ok(s)
    }

    /// The text from `r`'s place to the trailer, up to its NUL (a COMM's name, an MMAP2's
    /// file, a CGROUP's path), once [`Self::trailer`] found the trailer there.
    fn text_before_trailer<'a>(&self, r: &Reader<'a>) -> &'a [u8] {
        // The trailer was there: len >= its size.
        let end = r.bytes().len().saturating_sub(self.trailer_size());
        until_nul(r.bytes().get(r.pos()..end).unwrap_or_default())
    }

    fn trailer(&self, r: Reader<'_>) -> Result<SampleId, PerfSampleError> {
        use sample_type::*;
        let mut id = SampleId::default();
        let size = self.trailer_size();
        if size == 0 {
            return Ok(id);
        }
        let have = r.bytes().len();
        // pos <= have and size <= 48: the sum fits.
        if r.pos().saturating_add(size) > have {
            return Err(PerfSampleError::Truncated {
                what: "sample_id trailer",
                need: size,
                at: r.pos(),
                have,
            });
        }
        let mut t = r;
        // size <= have - pos, checked above.
        t.0.seek(have.saturating_sub(size));
        if self.has(TID) {
            id.pid = Some(t.u32("trailer pid")?);
            id.tid = Some(t.u32("trailer tid")?);
        }
        if self.has(TIME) {
            id.time = Some(t.u64("trailer time")?);
        }
        if self.has(ID) {
            id.id = Some(t.u64("trailer id")?);
        }
        if self.has(STREAM_ID) {
            id.stream_id = Some(t.u64("trailer stream_id")?);
        }
        if self.has(CPU) {
            id.cpu = Some(t.u32("trailer cpu")?);
            t.u32("trailer cpu res")?;
        }
        if self.has(IDENTIFIER) {
            id.id = Some(t.u64("trailer identifier")?);
        }
        Ok(id)
    }
}

/// `fn u16/u32/u64(&mut self, what)`: the shared cursor's read, its error mapped.
macro_rules! int_readers {
    ($($t:ident),*) => {$(
        fn $t(&mut self, what: &'static str) -> Result<$t, PerfSampleError> {
            self.0.$t(what).map_err(truncated)
        }
    )*};
}

/// The shared cursor's short read as this module's error (`have`: the record's bytes).
fn truncated(e: Short) -> PerfSampleError {
    PerfSampleError::Truncated {
        what: e.what,
        need: usize::try_from(e.need).unwrap_or(usize::MAX),
        at: e.at,
        // A place in the record plus the bytes after it: its length.
        have: e.at.saturating_add(e.have as usize),
    }
}

/// A bounds-checked cursor over one record: the crate's one cursor
/// ([`crate::bytes::Cursor`]), its short reads mapped into [`PerfSampleError::Truncated`].
#[derive(Debug, Clone, Copy)]
struct Reader<'a>(Cursor<'a>);

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], pos: usize, endian: Endian) -> Self {
        Reader(Cursor::new(bytes, pos, endian))
    }

    fn pos(&self) -> usize {
        self.0.pos()
    }

    fn bytes(&self) -> &'a [u8] {
        self.0.bytes()
    }

    fn take(&mut self, what: &'static str, n: usize) -> Result<&'a [u8], PerfSampleError> {
        self.0.take(n as u64, what).map_err(truncated)
    }

    int_readers!(u16, u32, u64);

    fn header(&mut self) -> Result<RecordHeader, PerfSampleError> {
        let kind = self.u32("header type")?;
        let misc = self.u16("header misc")?;
        let size = self.u16("header size")?;
        Ok(RecordHeader { kind, misc, size })
    }
}

// Tests compute with the values they pick.
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn header(kind: u32, size: usize) -> Vec<u8> {
        let mut v = kind.to_ne_bytes().to_vec();
        v.extend_from_slice(&0u16.to_ne_bytes());
        v.extend_from_slice(&(size as u16).to_ne_bytes());
        v
    }

    /// A sample record laid out as the kernel writes it for `sample_type::UEVREC`.
    fn uevrec_sample(id: u64, pid: u32, tid: u32, time: u64, cpu: u32, raw: &[u8]) -> Vec<u8> {
        let raw_total = (4 + raw.len()).next_multiple_of(8);
        let size = 8 + 8 + 8 + 8 + 8 + raw_total;
        let mut v = header(PERF_RECORD_SAMPLE, size);
        v.extend_from_slice(&id.to_ne_bytes());
        v.extend_from_slice(&pid.to_ne_bytes());
        v.extend_from_slice(&tid.to_ne_bytes());
        v.extend_from_slice(&time.to_ne_bytes());
        v.extend_from_slice(&cpu.to_ne_bytes());
        v.extend_from_slice(&0u32.to_ne_bytes());
        v.extend_from_slice(&(raw.len() as u32).to_ne_bytes());
        v.extend_from_slice(raw);
        v.resize(size, 0);
        v
    }

    fn uevrec_trailer(pid: u32, tid: u32, time: u64, cpu: u32, id: u64) -> Vec<u8> {
        let mut v = pid.to_ne_bytes().to_vec();
        v.extend_from_slice(&tid.to_ne_bytes());
        v.extend_from_slice(&time.to_ne_bytes());
        v.extend_from_slice(&cpu.to_ne_bytes());
        v.extend_from_slice(&0u32.to_ne_bytes());
        v.extend_from_slice(&id.to_ne_bytes());
        v
    }

    /// A layout of `st` (supported bits) in the byte order `endian` and a sample record of
    /// it with `body` after the header, its raw size (if it has raw data and the body
    /// reaches it) set to `raw_size`, which often fits, so that readers get to the end.
    fn sample_of(body: &[u8], st: u64, endian: Endian, raw_size: u32) -> (SampleFormat, Vec<u8>) {
        let f = SampleFormat::new(st & sample_type::SUPPORTED, false)
            .unwrap()
            .with_endian(endian);
        let mut rec = header(PERF_RECORD_SAMPLE, 8 + body.len());
        if endian != Endian::NATIVE {
            // The header in the record's byte order too.
            rec[..4].reverse();
            rec[6..8].reverse();
        }
        rec.extend_from_slice(body);
        let at = usize::from(f.at.raw);
        if at != 0 && rec.len() >= at + 4 {
            let size = if endian.is_big() {
                raw_size.to_be_bytes()
            } else {
                raw_size.to_le_bytes()
            };
            rec[at..at + 4].copy_from_slice(&size);
        }
        (f, rec)
    }

    fn fmt() -> SampleFormat {
        SampleFormat::new(sample_type::UEVREC, true).unwrap()
    }

    #[test]
    fn sample_with_raw() {
        let raw = [1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
        let rec = uevrec_sample(77, 10, 11, 123_456, 1, &raw);
        let Record::Sample(s) = fmt().parse(&rec).unwrap() else {
            panic!("not a sample")
        };
        assert_eq!(s.id, Some(77));
        assert_eq!((s.pid, s.tid), (Some(10), Some(11)));
        assert_eq!(s.time, Some(123_456));
        assert_eq!(s.cpu, Some(1));
        assert_eq!(s.raw, Some(&raw[..]));
        assert_eq!(s.ip, None);
    }

    #[test]
    fn lost_with_trailer() {
        let mut rec = header(PERF_RECORD_LOST, 8 + 16 + 32);
        rec.extend_from_slice(&5u64.to_ne_bytes());
        rec.extend_from_slice(&17u64.to_ne_bytes());
        rec.extend(uevrec_trailer(1, 2, 999, 3, 5));
        match fmt().parse(&rec).unwrap() {
            Record::Lost {
                id,
                lost,
                sample_id,
            } => {
                assert_eq!((id, lost), (5, 17));
                assert_eq!(sample_id.cpu, Some(3));
                assert_eq!(sample_id.time, Some(999));
                assert_eq!(sample_id.id, Some(5));
                assert_eq!((sample_id.pid, sample_id.tid), (Some(1), Some(2)));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn lost_samples_with_trailer() {
        let mut rec = header(PERF_RECORD_LOST_SAMPLES, 8 + 8 + 32);
        rec.extend_from_slice(&4u64.to_ne_bytes());
        rec.extend(uevrec_trailer(1, 2, 50, 0, 9));
        match fmt().parse(&rec).unwrap() {
            Record::LostSamples { lost, sample_id } => {
                assert_eq!(lost, 4);
                assert_eq!(sample_id.cpu, Some(0));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn comm_fork_exit_and_cgroup_records() {
        // COMM from an exec: pid, tid, the name padded to 8 bytes, the trailer.
        let mut rec = header(PERF_RECORD_COMM, 8 + 8 + 8 + 32);
        rec[4..6].copy_from_slice(&PERF_RECORD_MISC_COMM_EXEC.to_ne_bytes());
        rec.extend_from_slice(&10u32.to_ne_bytes());
        rec.extend_from_slice(&11u32.to_ne_bytes());
        rec.extend_from_slice(b"true\0\0\0\0");
        rec.extend(uevrec_trailer(10, 11, 5, 1, 3));
        assert_eq!(
            fmt().parse(&rec).unwrap(),
            Record::Comm {
                pid: 10,
                tid: 11,
                comm: b"true",
                exec: true,
                sample_id: SampleId {
                    pid: Some(10),
                    tid: Some(11),
                    time: Some(5),
                    id: Some(3),
                    stream_id: None,
                    cpu: Some(1)
                }
            }
        );
        assert_eq!(
            fmt().parse(&rec).unwrap().context_update(),
            Some((
                Some(5),
                ContextUpdate::Comm {
                    tid: 11,
                    comm: b"true"
                }
            ))
        );
        for (kind, fork) in [(PERF_RECORD_FORK, true), (PERF_RECORD_EXIT, false)] {
            let mut rec = header(kind, 8 + 24 + 32);
            for v in [1u32, 2, 3, 4] {
                rec.extend_from_slice(&v.to_ne_bytes());
            }
            rec.extend_from_slice(&77u64.to_ne_bytes());
            rec.extend(uevrec_trailer(1, 3, 6, 0, 3));
            let Record::Task {
                fork: f,
                pid,
                ppid,
                tid,
                ptid,
                sample_id,
            } = fmt().parse(&rec).unwrap()
            else {
                panic!("not a task record")
            };
            assert_eq!((f, pid, ppid, tid, ptid), (fork, 1, 2, 3, 4));
            assert_eq!(sample_id.time, Some(6));
            let expected = if fork {
                ContextUpdate::Fork {
                    tid: 3,
                    parent_tid: 4,
                }
            } else {
                ContextUpdate::Exit { tid: 3 }
            };
            assert_eq!(
                fmt().parse(&rec).unwrap().context_update(),
                Some((Some(6), expected))
            );
        }
        let mut rec = header(PERF_RECORD_CGROUP, 8 + 8 + 16 + 32);
        rec.extend_from_slice(&(1u64 << 35).to_ne_bytes());
        rec.extend_from_slice(b"/a/b.scope\0\0\0\0\0\0");
        rec.extend(uevrec_trailer(1, 3, 7, 0, 3));
        let Record::Cgroup { id, path, .. } = fmt().parse(&rec).unwrap() else {
            panic!("not a cgroup record")
        };
        assert_eq!((id, path), (1 << 35, &b"/a/b.scope"[..]));
        assert_eq!(
            fmt().parse(&rec).unwrap().context_update().map(|(_, u)| u),
            Some(ContextUpdate::Cgroup {
                id: 1 << 35,
                path: b"/a/b.scope"
            })
        );
        // A name cut by the trailer's absence is an error, not a panic.
        assert!(fmt().parse(&rec[..40]).is_err());
    }

    #[test]
    fn cgroup_follows_the_padded_raw_data() {
        let f = SampleFormat::new(sample_type::UEVREC | sample_type::CGROUP, true).unwrap();
        let raw = [9u8; 5];
        let mut rec = uevrec_sample(1, 2, 3, 4, 0, &raw);
        // The kernel's raw size counts the padding that aligns the record to 8 bytes.
        rec[40..44].copy_from_slice(&12u32.to_ne_bytes());
        let padded = [9, 9, 9, 9, 9, 0, 0, 0, 0, 0, 0, 0];
        rec.extend_from_slice(&0xabcdu64.to_ne_bytes());
        let size = rec.len() as u16;
        rec[6..8].copy_from_slice(&size.to_ne_bytes());
        let Record::Sample(s) = f.parse(&rec).unwrap() else {
            panic!("not a sample")
        };
        assert_eq!((s.raw, s.cgroup), (Some(&padded[..]), Some(0xabcd)));
        // Cut before the cgroup id: the error names it.
        rec.truncate(rec.len() - 8);
        rec[6..8].copy_from_slice(&(size - 8).to_ne_bytes());
        let e = f.parse(&rec).unwrap_err();
        assert!(e.to_string().contains("cgroup"), "{e}");
    }

    /// A sample of `UEVREC | CALLCHAIN` as the kernel lays it out: the chain between the
    /// cpu word and the raw size.
    fn chain_sample(chain: &[u64], nr: u64, raw: &[u8]) -> Vec<u8> {
        let raw_total = (4 + raw.len()).next_multiple_of(8);
        let size = 8 + 32 + 8 + 8 * chain.len() + raw_total;
        let mut v = header(PERF_RECORD_SAMPLE, size);
        v.extend_from_slice(&5u64.to_ne_bytes());
        v.extend_from_slice(&10u32.to_ne_bytes());
        v.extend_from_slice(&11u32.to_ne_bytes());
        v.extend_from_slice(&99u64.to_ne_bytes());
        v.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
        v.extend_from_slice(&nr.to_ne_bytes());
        for ip in chain {
            v.extend_from_slice(&ip.to_ne_bytes());
        }
        v.extend_from_slice(&(raw.len() as u32).to_ne_bytes());
        v.extend_from_slice(raw);
        v.resize(size, 0);
        v
    }

    #[test]
    fn callchain_before_raw() {
        use crate::callchain::{ChainFrame, FrameContext, PERF_CONTEXT_KERNEL, PERF_CONTEXT_USER};
        let f = SampleFormat::new(sample_type::UEVREC | sample_type::CALLCHAIN, true).unwrap();
        let chain = [
            PERF_CONTEXT_KERNEL,
            0xffff_ffff_8100_0000,
            PERF_CONTEXT_USER,
            0x401234,
        ];
        let rec = chain_sample(&chain, 4, b"entry");
        let Record::Sample(s) = f.parse(&rec).unwrap() else {
            panic!("not a sample")
        };
        assert_eq!(
            (s.pid, s.tid, s.time, s.cpu),
            (Some(10), Some(11), Some(99), Some(1))
        );
        assert_eq!(s.raw, Some(&b"entry"[..]));
        let c = s.callchain.unwrap();
        assert_eq!(c.entries().collect::<Vec<_>>(), chain);
        let frames: Vec<_> = c.frames().map(Result::unwrap).collect();
        assert_eq!(
            frames[1],
            ChainFrame {
                address: 0x401234,
                context: FrameContext::User
            }
        );
        // The line fields read the same chain and raw entry.
        let l = f.line_fields(&rec).unwrap();
        assert_eq!((l.raw, l.callchain), (&b"entry"[..], Some(c)));
        // An empty chain (the kernel refused both parts).
        let rec = chain_sample(&[], 0, b"x");
        let Record::Sample(s) = f.parse(&rec).unwrap() else {
            panic!("not a sample")
        };
        assert_eq!(
            (s.callchain.map(|c| c.len()), s.raw),
            (Some(0), Some(&b"x"[..]))
        );
    }

    #[test]
    fn hostile_callchain_counts_are_errors() {
        let f = SampleFormat::new(sample_type::UEVREC | sample_type::CALLCHAIN, true).unwrap();
        for nr in [5, 1000, u64::MAX / 8 + 1, u64::MAX] {
            let rec = chain_sample(&[1, 2], nr, b"entry");
            let e = f.parse(&rec).unwrap_err();
            assert!(e.to_string().contains("callchain"), "{nr}: {e}");
            assert!(f.line_fields(&rec).is_none());
        }
        // Cut inside the count.
        let rec = chain_sample(&[], 0, b"");
        let mut cut = rec[..44].to_vec();
        cut[6..8].copy_from_slice(&44u16.to_ne_bytes());
        let e = f.parse(&cut).unwrap_err();
        assert!(e.to_string().contains("callchain nr"), "{e}");
    }

    #[test]
    fn lost_without_sample_id_all() {
        let f = SampleFormat::new(sample_type::UEVREC, false).unwrap();
        assert_eq!(f.trailer_size(), 0);
        let mut rec = header(PERF_RECORD_LOST, 24);
        rec.extend_from_slice(&5u64.to_ne_bytes());
        rec.extend_from_slice(&3u64.to_ne_bytes());
        assert_eq!(
            f.parse(&rec).unwrap(),
            Record::Lost {
                id: 5,
                lost: 3,
                sample_id: SampleId::default()
            }
        );
    }

    #[test]
    fn other_record_types_are_kept() {
        let rec = header(1, 16)
            .into_iter()
            .chain([0u8; 8])
            .collect::<Vec<_>>();
        assert_eq!(
            fmt().parse(&rec).unwrap(),
            Record::Other(RecordHeader {
                kind: 1,
                misc: 0,
                size: 16
            })
        );
    }

    #[test]
    fn errors_are_values() {
        // Raw size pointing past the record.
        let mut rec = uevrec_sample(1, 1, 1, 1, 0, &[0; 4]);
        let raw_size_at = 8 + 8 + 8 + 8 + 8;
        rec[raw_size_at..raw_size_at + 4].copy_from_slice(&1000u32.to_ne_bytes());
        assert!(matches!(
            fmt().parse(&rec),
            Err(PerfSampleError::Truncated {
                what: "raw data",
                ..
            })
        ));
        // Header size beyond the bytes.
        let rec = header(PERF_RECORD_SAMPLE, 64);
        assert_eq!(
            fmt().parse(&rec),
            Err(PerfSampleError::BadSize { size: 64, have: 8 })
        );
        // Header size below the header.
        let rec = header(PERF_RECORD_SAMPLE, 4);
        assert!(matches!(
            fmt().parse(&rec),
            Err(PerfSampleError::BadSize { .. })
        ));
        // Lost record too short for its trailer.
        let mut rec = header(PERF_RECORD_LOST, 24);
        rec.extend_from_slice(&[0; 16]);
        assert!(matches!(
            fmt().parse(&rec),
            Err(PerfSampleError::Truncated { .. })
        ));
        assert!(fmt().parse(&[1, 2, 3]).is_err());
        assert_eq!(
            SampleFormat::new(sample_type::UEVREC | sample_type::READ, true),
            Err(PerfSampleError::Unsupported(sample_type::READ))
        );
    }

    #[test]
    fn big_endian_records() {
        let f = SampleFormat::new(sample_type::TID | sample_type::TIME, false)
            .unwrap()
            .with_endian(Endian::Big);
        let mut rec = 9u32.to_be_bytes().to_vec();
        rec.extend_from_slice(&0u16.to_be_bytes());
        rec.extend_from_slice(&24u16.to_be_bytes());
        rec.extend_from_slice(&7u32.to_be_bytes());
        rec.extend_from_slice(&8u32.to_be_bytes());
        rec.extend_from_slice(&42u64.to_be_bytes());
        let Record::Sample(s) = f.parse(&rec).unwrap() else {
            panic!()
        };
        assert_eq!((s.pid, s.tid, s.time), (Some(7), Some(8), Some(42)));
    }

    /// A sample of `UEVREC | CALLCHAIN | REGS_USER | STACK_USER | CGROUP` (the shape of
    /// `--call-graph dwarf`): `regs` after the raw data, the stack copy (`size` bytes of
    /// room, `stack` in it, `dyn_size` said), the cgroup id last.
    fn dwarf_sample(abi: u64, regs: &[u64], size: u64, stack: &[u8], dyn_size: u64) -> Vec<u8> {
        let mut v = chain_sample(
            &[PERF_CONTEXT_KERNEL_FOR_TESTS, 0xffff_ffff_8100_0000],
            2,
            b"entry",
        );
        // The kernel's raw size counts the padding to 8 bytes: what follows is aligned.
        v[64..68].copy_from_slice(&12u32.to_ne_bytes());
        v.extend_from_slice(&abi.to_ne_bytes());
        for r in regs {
            v.extend_from_slice(&r.to_ne_bytes());
        }
        v.extend_from_slice(&size.to_ne_bytes());
        if size != 0 {
            let mut room = stack.to_vec();
            room.resize(size as usize, 0);
            v.extend_from_slice(&room);
            v.extend_from_slice(&dyn_size.to_ne_bytes());
        }
        v.extend_from_slice(&0x77u64.to_ne_bytes());
        let len = v.len() as u16;
        v[6..8].copy_from_slice(&len.to_ne_bytes());
        v
    }

    const PERF_CONTEXT_KERNEL_FOR_TESTS: u64 = crate::callchain::PERF_CONTEXT_KERNEL;

    fn dwarf_format() -> SampleFormat {
        use crate::user_stack::x86_64::{BP, IP, SP};
        use sample_type::*;
        SampleFormat::new(UEVREC | CALLCHAIN | REGS_USER | STACK_USER | CGROUP, true)
            .unwrap()
            .with_user_regs(1 << BP | 1 << SP | 1 << IP)
    }

    #[test]
    fn user_registers_and_stack_copy() {
        use crate::user_stack::x86_64::{BP, IP, SP};
        let f = dwarf_format();
        let stack: Vec<u8> = (0..40).collect();
        let rec = dwarf_sample(2, &[0xb0, 0x5000, 0x40_1000], 64, &stack, 40);
        let Record::Sample(s) = f.parse(&rec).unwrap() else {
            panic!("not a sample")
        };
        let regs = s.user_regs.unwrap();
        assert_eq!(
            (regs.abi(), regs.get(BP), regs.get(SP), regs.get(IP)),
            (2, Some(0xb0), Some(0x5000), Some(0x40_1000))
        );
        let copy = s.user_stack.unwrap();
        assert_eq!((copy.bytes, copy.size), (&stack[..], 64));
        assert_eq!(
            (s.raw, s.cgroup),
            (Some(&b"entry\0\0\0\0\0\0\0"[..]), Some(0x77))
        );
        assert_eq!(s.callchain.unwrap().len(), 2);
        // The line fields find the cgroup id after them too.
        assert_eq!(f.line_fields(&rec).unwrap().cgroup, Some(0x77));
        // No registers (a kernel thread): abi 0, no words; a stack of size 0: no dyn_size.
        let rec = dwarf_sample(0, &[], 0, &[], 0);
        let Record::Sample(s) = f.parse(&rec).unwrap() else {
            panic!("not a sample")
        };
        assert_eq!(s.user_regs.unwrap().get(SP), None);
        assert_eq!(s.user_stack.unwrap().bytes, &[] as &[u8]);
        assert_eq!(s.cgroup, Some(0x77));
    }

    /// `perf record --call-graph dwarf`'s samples add `WEIGHT` and `DATA_SRC` before the
    /// cgroup id (and may add page sizes after it): read past, on both paths.
    #[test]
    fn weight_and_data_source_are_read_past() {
        use sample_type::*;
        let f = SampleFormat::new(
            dwarf_format().sample_type() | WEIGHT | DATA_SRC | DATA_PAGE_SIZE,
            true,
        )
        .unwrap()
        .with_user_regs(dwarf_format().user_regs_mask());
        let stack: Vec<u8> = (0..40).collect();
        let mut rec = dwarf_sample(2, &[0xb0, 0x5000, 0x40_1000], 64, &stack, 40);
        let cgroup_at = rec.len() - 8;
        let mut between = 0x11u64.to_ne_bytes().to_vec();
        between.extend_from_slice(&0x22u64.to_ne_bytes());
        rec.splice(cgroup_at..cgroup_at, between);
        rec.extend_from_slice(&4096u64.to_ne_bytes());
        let len = rec.len() as u16;
        rec[6..8].copy_from_slice(&len.to_ne_bytes());
        let Record::Sample(fast) = f.parse(&rec).unwrap() else {
            panic!("not a sample")
        };
        let fieldwise = f.parse_sample_fieldwise(&rec).unwrap();
        for s in [&fast, &fieldwise] {
            assert_eq!(s.cgroup, Some(0x77));
            assert_eq!(s.user_stack.unwrap().bytes, &stack[..]);
        }
        assert_eq!(f.line_fields(&rec).unwrap().cgroup, Some(0x77));
        // Cut inside the fields read past: an error, not a wrong cgroup id.
        let mut short = rec[..cgroup_at + 4].to_vec();
        short[6..8].copy_from_slice(&((cgroup_at + 4) as u16).to_ne_bytes());
        assert!(f.parse(&short).is_err());
    }

    #[test]
    fn truncated_user_stacks_are_errors() {
        let f = dwarf_format();
        let rec = dwarf_sample(2, &[1, 2, 3], 64, &[7; 64], 64);
        // Every cut inside the registers or the copy is an error naming the field.
        let regs_at = rec.len() - 8 - 8 - 64 - 8 - 24 - 8;
        for cut in regs_at..rec.len() {
            let mut short = rec[..cut].to_vec();
            short[6..8].copy_from_slice(&(cut as u16).to_ne_bytes());
            let e = f.parse(&short).unwrap_err();
            let text = e.to_string();
            assert!(
                ["regs_user", "stack_user", "cgroup"]
                    .iter()
                    .any(|w| text.contains(w)),
                "cut at {cut}: {text}"
            );
        }
        // A size past the record.
        let mut huge = dwarf_sample(2, &[1, 2, 3], 8, &[0; 8], 8);
        let size_at = huge.len() - 8 - 8 - 8 - 8;
        huge[size_at..size_at + 8].copy_from_slice(&u64::MAX.to_ne_bytes());
        let e = f.parse(&huge).unwrap_err();
        assert!(e.to_string().contains("stack_user data"), "{e}");
        // dyn_size past the room it was copied into.
        let bad = dwarf_sample(2, &[1, 2, 3], 16, &[0; 16], 24);
        assert_eq!(
            f.parse(&bad),
            Err(PerfSampleError::StackDynSize {
                dyn_size: 24,
                size: 16
            })
        );
        assert_eq!(f.line_fields(&bad), None);
    }

    #[test]
    fn header_helper() {
        assert_eq!(parse_header(&[0; 7]), None);
        let h = parse_header(&header(2, 40)).unwrap();
        assert_eq!((h.kind, h.size), (2, 40));
    }

    proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), st in any::<u64>(), all in any::<bool>()) {
            let f = SampleFormat::new(st & sample_type::SUPPORTED, all).unwrap();
            let _ = f.parse(&bytes);
            let _ = parse_header(&bytes);
        }

        #[test]
        fn roundtrip(id in any::<u64>(), pid in any::<u32>(), tid in any::<u32>(), time in any::<u64>(), cpu in any::<u32>(),
                     raw in proptest::collection::vec(any::<u8>(), 0..300)) {
            let rec = uevrec_sample(id, pid, tid, time, cpu, &raw);
            let Record::Sample(s) = fmt().parse(&rec).unwrap() else { panic!() };
            prop_assert_eq!(s, Sample { id: Some(id), pid: Some(pid), tid: Some(tid), time: Some(time), cpu: Some(cpu), raw: Some(&raw[..]), ..Sample::default() });
        }

        /// The fixed-place reading and the field-by-field one agree on every sample body
        /// (the latter is what `parse` falls back to for its errors).
        #[test]
        fn fixed_places_match_fieldwise(body in proptest::collection::vec(any::<u8>(), 0..160),
                                        st in any::<u64>(), endian in prop_oneof![Just(Endian::Little), Just(Endian::Big)], raw_size in 0u32..120) {
            let (f, rec) = sample_of(&body, st, endian, raw_size);
            let fieldwise = f.sample(Reader::new(&rec, HEADER_SIZE, endian));
            prop_assert_eq!(f.sample_fixed(&rec), fieldwise.ok());
        }

        /// With user registers and stacks too (any mask, any sizes, cut anywhere): the
        /// fixed-place reading and the fieldwise one agree, and nothing panics.
        #[test]
        fn user_stack_places_match_fieldwise(abi in 0u64..3, mask in any::<u64>(), size in 0u64..80, dyn_size in 0u64..90,
                                             words in 0usize..12, cut in 0usize..400, endian in prop_oneof![Just(Endian::Little), Just(Endian::Big)]) {
            use sample_type::*;
            let f = SampleFormat::new(REGS_USER | STACK_USER | CGROUP | TID, false).unwrap().with_endian(endian).with_user_regs(mask);
            let word = |w: u64| if endian.is_big() { w.to_be_bytes() } else { w.to_le_bytes() };
            let mut rec = header(PERF_RECORD_SAMPLE, 0);
            if endian != Endian::NATIVE {
                rec[..4].reverse();
            }
            rec.extend_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0]);
            rec.extend_from_slice(&word(abi));
            for i in 0..words as u64 {
                rec.extend_from_slice(&word(i));
            }
            rec.extend_from_slice(&word(size));
            rec.extend(std::iter::repeat_n(0xaa, size as usize));
            rec.extend_from_slice(&word(dyn_size));
            rec.extend_from_slice(&word(9));
            rec.truncate(cut.max(8));
            let len = rec.len() as u16;
            let len = if endian.is_big() { len.to_be_bytes() } else { len.to_le_bytes() };
            rec[6..8].copy_from_slice(&len);
            let fieldwise = f.sample(Reader::new(&rec, HEADER_SIZE, endian));
            prop_assert_eq!(f.sample_fixed(&rec), fieldwise.clone().ok());
            if let Ok(s) = fieldwise {
                let copy = s.user_stack.unwrap();
                prop_assert!(copy.bytes.len() as u64 <= copy.size);
                prop_assert_eq!(s.user_regs.unwrap().bytes().len(), crate::user_stack::regs_len(abi, mask));
            }
        }

        /// `line_fields` (through the 64-byte window or the slice) reads what the fixed-place
        /// reading of the whole sample does.
        #[test]
        fn line_fields_match_the_sample(body in proptest::collection::vec(any::<u8>(), 0..160),
                                        st in any::<u64>(), endian in prop_oneof![Just(Endian::Little), Just(Endian::Big)], raw_size in 0u32..120) {
            let (f, rec) = sample_of(&body, st, endian, raw_size);
            let line = f.line_fields(&rec).map(|l| (l.id, l.time, l.pid, l.tid, l.cpu, l.raw, l.cgroup));
            let sample = f.sample_fixed(&rec);
            let whole = sample.map(|s| (s.id, s.time, s.pid, s.tid, s.cpu, s.raw.unwrap_or_default(), s.cgroup));
            prop_assert_eq!(line, whole);
        }
    }
}
