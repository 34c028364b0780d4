//! perf.data writing (file mode), without I/O: the bytes of the records, the header and
//! the trailer (feature sections and attrs) that `uevrec record --raw` writes, and that
//! `perf script`, `perf report` and `uevrec decode` read. Everything is in the byte order
//! of the machine running the writer (perf's own convention; the magic tells readers).
//!
//! Layout of a file written with these pieces:
//!
//! ```text
//! [file header, 104 bytes]   written last (a placeholder until then): says where the rest is
//! [data section]             PERF_RECORD_SAMPLE / LOST / FINISHED_ROUND records, and with
//!                            context COMM / FORK / EXIT / CGROUP records, appended
//! [feature section table]    { offset, size } per feature bit set, right after the data
//! [feature sections]         tracing data, build ids, hostname, osrelease, version, arch,
//!                            nrcpus, cmdline, event_desc, sample_time, clockid, clock_data
//! [attrs section]            per event: perf_event_attr (ATTR_SIZE bytes) + { offset, size }
//! [ids]                      each event's one sample id
//! ```
//!
//! Every event is a `PERF_TYPE_TRACEPOINT` attr (`config` = the tracepoint id) with
//! `sample_type` = IDENTIFIER|TID|TIME|CPU|RAW (|CGROUP with context, [`sample_type()`]) and
//! `sample_id_all`, and one sample id of its own; samples carry that id first, `LOST`
//! records in their `sample_id` trailer. With context ([`FileMeta::tracking`]), one more
//! attr, a software dummy event with `comm`, `comm_exec`, `task`, `cgroup` and
//! `sample_id_all` (what `perf record` opens to track tasks), names the COMM, FORK, EXIT
//! and CGROUP records in their trailers. With call stacks ([`EventSpec::callchain`]) the
//! samples carry `IP` and `CALLCHAIN` too ([`push_stacked_sample`]), and the tracking
//! attr (`mmap`, `mmap2`, `build_id`) names the `PERF_RECORD_MMAP2` records
//! ([`push_mmap2`]) that tell which file each address lies in, and the kernel map
//! ([`push_kernel_mmap`]) that tells perf to name kernel addresses from kallsyms.

use super::attr::{PERF_TYPE_TRACEPOINT, flag};
use super::header::{FILE_HEADER_SIZE, MAGIC, Section, feature};
use super::records::kind;
use super::tracing_data::TRACING_MAGIC;
use crate::callchain::{Callchain, PERF_CONTEXT_KERNEL, PERF_CONTEXT_MAX, PERF_CONTEXT_USER};
use crate::perf_sample::{
    PERF_RECORD_CGROUP, PERF_RECORD_COMM, PERF_RECORD_EXIT, PERF_RECORD_FORK, PERF_RECORD_LOST,
    PERF_RECORD_MISC_COMM_EXEC, PERF_RECORD_MISC_FORK_EXEC, PERF_RECORD_MISC_KERNEL,
    PERF_RECORD_MISC_MMAP_BUILD_ID, PERF_RECORD_MISC_USER, PERF_RECORD_MMAP, PERF_RECORD_MMAP2,
    PERF_RECORD_SAMPLE, sample_type,
};
use crate::user_stack::{REGS_ABI_NONE, UserStack};

/// Bytes of each `perf_event_attr` written (`PERF_ATTR_SIZE_VER7`, what perf 5.13–6.2
/// writes; newer perfs read it, older ones read the first 120 bytes they know).
pub const ATTR_SIZE: usize = 128;
/// Bytes per attrs-section entry: the attr and its ids `{ offset, size }`.
pub const FILE_ATTR_SIZE: usize = ATTR_SIZE + 16;
/// The `sample_type` of every event written without context.
pub const SAMPLE_TYPE: u64 = sample_type::IDENTIFIER
    | sample_type::TID
    | sample_type::TIME
    | sample_type::CPU
    | sample_type::RAW;

/// The `sample_type` of the events of a file whose samples carry a cgroup id
/// (`PERF_SAMPLE_CGROUP`, after the raw data) or not.
pub const fn sample_type(cgroup: bool) -> u64 {
    if cgroup {
        SAMPLE_TYPE | sample_type::CGROUP
    } else {
        SAMPLE_TYPE
    }
}

/// The `sample_type` bits the samples of an event with call stacks add
/// ([`EventSpec::callchain`]): `IP` (perf script prints its `ip` and `sym` fields from
/// it) and `CALLCHAIN`.
pub const STACK_SAMPLE_TYPE: u64 = sample_type::IP | sample_type::CALLCHAIN;

/// The `sample_type` bits the samples of an event with user stack copies add
/// ([`EventSpec::user_stack`]): `REGS_USER` and `STACK_USER`, after the raw data.
pub const USER_STACK_SAMPLE_TYPE: u64 = sample_type::REGS_USER | sample_type::STACK_USER;

/// The `sample_type` of the tracking attr: what its records' `sample_id` trailers hold.
const TRACKING_SAMPLE_TYPE: u64 =
    sample_type::IDENTIFIER | sample_type::TID | sample_type::TIME | sample_type::CPU;
/// `PERF_TYPE_SOFTWARE`.
const PERF_TYPE_SOFTWARE: u32 = 1;
/// `PERF_COUNT_SW_DUMMY`.
const PERF_COUNT_SW_DUMMY: u64 = 9;
/// Bytes of a sample before its raw data: header, identifier, pid/tid, time, cpu/res,
/// raw size.
const SAMPLE_HEAD: usize = 8 + 8 + 8 + 8 + 8 + 4;
/// The largest raw trace entry a sample can carry (a record's size is a u16 and a
/// multiple of 8; room is kept for a cgroup id).
pub const MAX_RAW: usize = (u16::MAX as usize & !7) - SAMPLE_HEAD - 8;
/// Bytes of the `sample_id` trailer: pid/tid, time, cpu/res, identifier.
const SAMPLE_ID: usize = 8 + 8 + 8 + 8;
/// Bytes of a `PERF_RECORD_LOST`: header, id, lost, then the `sample_id` trailer.
const LOST_SIZE: usize = 8 + 8 + 8 + SAMPLE_ID;
/// Bytes of a `PERF_RECORD_FORK`/`EXIT`: header, pid, ppid, tid, ptid, time, trailer.
const TASK_SIZE: usize = 8 + 16 + 8 + SAMPLE_ID;
/// The longest name or path a COMM or CGROUP record carries (longer ones are cut).
pub const MAX_NAME: usize = 4096;
/// perf's alignment of header strings (`NAME_ALIGN`).
const NAME_ALIGN: usize = 64;

/// What a sample or a loss says besides its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The sample id of the event (its attr's id).
    pub id: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Time on the attr's clock.
    pub time: u64,
    /// CPU.
    pub cpu: u32,
}

/// A trace entry too large for a perf record (over [`MAX_RAW`] bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a {len}-byte trace entry does not fit a perf record (at most {MAX_RAW} bytes)")]
pub struct TooLarge {
    /// The entry's length.
    pub len: usize,
}

fn put_u16(out: &mut [u8], at: usize, v: u16) {
    out[at..at + 2].copy_from_slice(&v.to_ne_bytes());
}

fn put_u32(out: &mut [u8], at: usize, v: u32) {
    out[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

fn put_u64(out: &mut [u8], at: usize, v: u64) {
    out[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}

/// `struct perf_event_header` at the start of `out`.
fn put_header(out: &mut [u8], kind: u32, size: usize) {
    put_u32(out, 0, kind);
    put_u16(out, 4, 0);
    // Callers keep sizes below 64 KiB.
    put_u16(out, 6, size as u16);
}

/// Append a `PERF_RECORD_SAMPLE` of `raw` (a trace entry, common fields first), padded
/// with zeros to a multiple of 8 bytes as the kernel does, then `cgroup` when the file's
/// samples carry one (`Some` exactly when its attrs have [`sample_type(true)`](sample_type())).
pub fn push_sample(
    out: &mut Vec<u8>,
    stamp: &Stamp,
    raw: &[u8],
    cgroup: Option<u64>,
) -> Result<(), TooLarge> {
    push_sample_parts(out, stamp, None, raw, cgroup)
}

/// [`push_sample`] for an event with call stacks ([`EventSpec::callchain`]): after the
/// identifier the `IP` (the chain's innermost address, 0 for an empty chain: a
/// tracepoint's own IP is where the kernel fired it, which the chain starts with), and
/// before the raw data the chain (`u64 nr`, then its entries, markers included), in the
/// writer's byte order; after the raw data the user registers and stack copy of an event
/// with [`EventSpec::user_stack`] ([`UserCopy`]).
pub fn push_stacked_sample(
    out: &mut Vec<u8>,
    stamp: &Stamp,
    chain: Callchain<'_>,
    user: UserCopy<'_>,
    raw: &[u8],
    cgroup: Option<u64>,
) -> Result<(), TooLarge> {
    push_sample_parts(out, stamp, Some((chain, user)), raw, cgroup)
}

/// The chain's innermost address and the `misc` of a sample whose IP it is: kernel or
/// user as the marker before it says (perf's report names the IP in that space); 0 and
/// no mode for an empty chain.
fn innermost(chain: Callchain<'_>) -> (u64, u16) {
    let mut mode = 0;
    for e in chain.entries() {
        match e {
            PERF_CONTEXT_KERNEL => mode = PERF_RECORD_MISC_KERNEL,
            PERF_CONTEXT_USER => mode = PERF_RECORD_MISC_USER,
            e if e >= PERF_CONTEXT_MAX => mode = 0,
            ip => return (ip, mode),
        }
    }
    (0, 0)
}

/// The user registers and stack copy of a sample ([`push_stacked_sample`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserCopy<'a> {
    /// Its event asks for none ([`EventSpec::user_stack`] is `None`: frame pointers).
    NotAsked,
    /// Its event asks for them, and the kernel gave these: `None` when it gave none (no
    /// user context: ABI 0 and size 0 are written, as the kernel writes them).
    Taken(Option<UserStack<'a>>),
}

/// The largest record: its size is a u16, a multiple of 8.
const MAX_RECORD: usize = u16::MAX as usize & !7;

/// What [`UserCopy`] adds to a sample with `room` bytes left in its record: the bytes of
/// the registers (ABI word included), the stack copy's size and how many of its bytes
/// hold the copy (at most the size). A copy that does not fit is cut to fit, as the
/// kernel cuts it (`perf_sample_ustack_size`): the unwinding stops earlier, nothing else.
fn user_copy_sizes(user: &UserCopy<'_>, room: usize) -> (usize, usize, usize) {
    let UserCopy::Taken(Some(u)) = user else {
        // ABI word and size word, or nothing.
        return match user {
            UserCopy::NotAsked => (0, 0, 0),
            _ => (8, 0, 0),
        };
    };
    let regs = 8 + if u.regs.abi() == REGS_ABI_NONE {
        0
    } else {
        u.regs.bytes().len()
    };
    // The size word, and with a copy its bytes and the dyn_size word.
    let asked = usize::try_from(u.stack.size).unwrap_or(usize::MAX);
    let fits = room.saturating_sub(regs + 16) & !7;
    let size = asked.min(fits);
    (regs, size, u.stack.bytes.len().min(size))
}

/// A sample with or without a call stack.
fn push_sample_parts(
    out: &mut Vec<u8>,
    stamp: &Stamp,
    stacked: Option<(Callchain<'_>, UserCopy<'_>)>,
    raw: &[u8],
    cgroup: Option<u64>,
) -> Result<(), TooLarge> {
    let chain = stacked.map(|(c, _)| c);
    let user = stacked.map_or(UserCopy::NotAsked, |(_, u)| u);
    // IP and the chain's count, then its entries.
    let chain_bytes = chain.map_or(0, |c| 16 + 8 * c.len());
    if raw.len() + chain_bytes > MAX_RAW {
        return Err(TooLarge {
            len: raw.len() + chain_bytes,
        });
    }
    let padded = (SAMPLE_HEAD + raw.len()).next_multiple_of(8);
    let cgroup_bytes = if cgroup.is_some() { 8 } else { 0 };
    let room = MAX_RECORD.saturating_sub(padded + chain_bytes + cgroup_bytes);
    let (regs_bytes, stack_size, copied) = user_copy_sizes(&user, room);
    let stack_bytes = match user {
        UserCopy::NotAsked => 0,
        _ if stack_size == 0 => 8,
        _ => 16 + stack_size,
    };
    let size = padded + chain_bytes + regs_bytes + stack_bytes + cgroup_bytes;
    // Every byte of the header is written below, so the zeroing is optimised away.
    let mut head = [0u8; SAMPLE_HEAD];
    put_header(&mut head, PERF_RECORD_SAMPLE, size);
    put_u64(&mut head, 8, stamp.id);
    put_u32(&mut head, 16, stamp.pid);
    put_u32(&mut head, 20, stamp.tid);
    put_u64(&mut head, 24, stamp.time);
    put_u32(&mut head, 32, stamp.cpu);
    put_u32(&mut head, 36, 0);
    // The raw size counts the padding (the u32 and the data end on 8 bytes).
    put_u32(&mut head, 40, (padded - SAMPLE_HEAD) as u32);
    out.reserve(size);
    match chain {
        None => out.extend_from_slice(&head),
        Some(chain) => {
            // header, identifier | IP | pid/tid, time, cpu | nr, ips | raw size.
            let (ip, misc) = innermost(chain);
            put_u16(&mut head, 4, misc);
            out.extend_from_slice(&head[..16]);
            out.extend_from_slice(&ip.to_ne_bytes());
            out.extend_from_slice(&head[16..40]);
            out.extend_from_slice(&(chain.len() as u64).to_ne_bytes());
            if chain.endian().is_big() == cfg!(target_endian = "big") {
                out.extend_from_slice(chain.bytes());
            } else {
                chain
                    .entries()
                    .for_each(|e| out.extend_from_slice(&e.to_ne_bytes()));
            }
            out.extend_from_slice(&head[40..]);
        }
    }
    out.extend_from_slice(raw);
    out.extend_from_slice(&[0; 8][..padded - SAMPLE_HEAD - raw.len()]);
    if let UserCopy::Taken(taken) = user {
        push_user_copy(out, taken, stack_size, copied);
    }
    if let Some(id) = cgroup {
        out.extend_from_slice(&id.to_ne_bytes());
    }
    Ok(())
}

/// The user registers (`u64 abi`, its words) and the stack copy (`u64 size`, then
/// `size` bytes and `u64 dyn_size` when `size` is not 0) of `taken`, its copy cut to
/// `size` bytes of which `copied` are the kernel's ([`user_copy_sizes`]).
fn push_user_copy(out: &mut Vec<u8>, taken: Option<UserStack<'_>>, size: usize, copied: usize) {
    let Some(u) = taken else {
        out.extend_from_slice(&[0; 16]);
        return;
    };
    // The words as the kernel gave them; the reader's byte order is this machine's.
    let (abi, words) = (u.regs.abi(), u.regs.bytes());
    out.extend_from_slice(&abi.to_ne_bytes());
    if abi != REGS_ABI_NONE {
        if u.regs.endian().is_big() == cfg!(target_endian = "big") {
            out.extend_from_slice(words);
        } else {
            words
                .chunks_exact(8)
                .for_each(|w| out.extend(w.iter().rev()));
        }
    }
    out.extend_from_slice(&(size as u64).to_ne_bytes());
    if size > 0 {
        out.extend_from_slice(&u.stack.bytes[..copied]);
        out.resize(out.len() + size - copied, 0);
        out.extend_from_slice(&(copied as u64).to_ne_bytes());
    }
}

/// The `sample_id` trailer of `stamp` at `at` in `rec`.
fn put_sample_id(rec: &mut [u8], at: usize, stamp: &Stamp) {
    put_u32(rec, at, stamp.pid);
    put_u32(rec, at + 4, stamp.tid);
    put_u64(rec, at + 8, stamp.time);
    put_u32(rec, at + 16, stamp.cpu);
    put_u32(rec, at + 20, 0);
    put_u64(rec, at + 24, stamp.id);
}

/// Append a record of `kind` whose body is `head` (u64 words), then `text` with a NUL,
/// zero-padded to 8 bytes (at most [`MAX_NAME`] bytes of it), then `stamp`'s trailer.
fn push_text_record(
    out: &mut Vec<u8>,
    kind: u32,
    misc: u16,
    head: &[u8],
    text: &[u8],
    stamp: &Stamp,
) {
    let text = &text[..text.len().min(MAX_NAME)];
    let text = &text[..text.iter().position(|&b| b == 0).unwrap_or(text.len())];
    let padded = (text.len() + 1).next_multiple_of(8);
    let size = 8 + head.len() + padded + SAMPLE_ID;
    let mut h = [0u8; 8];
    put_header(&mut h, kind, size);
    put_u16(&mut h, 4, misc);
    out.reserve(size);
    out.extend_from_slice(&h);
    out.extend_from_slice(head);
    out.extend_from_slice(text);
    out.resize(out.len() + padded - text.len(), 0);
    let mut trailer = [0u8; SAMPLE_ID];
    put_sample_id(&mut trailer, 0, stamp);
    out.extend_from_slice(&trailer);
}

/// Append a `PERF_RECORD_COMM`: thread `tid` of process `pid` is now called `comm` (up
/// to its first NUL), by an exec when `exec`; `stamp` is the trailer (the tracking
/// attr's id).
pub fn push_comm(out: &mut Vec<u8>, stamp: &Stamp, pid: u32, tid: u32, comm: &[u8], exec: bool) {
    let mut head = [0u8; 8];
    put_u32(&mut head, 0, pid);
    put_u32(&mut head, 4, tid);
    let misc = if exec { PERF_RECORD_MISC_COMM_EXEC } else { 0 };
    push_text_record(out, PERF_RECORD_COMM, misc, &head, comm, stamp);
}

/// Append a `PERF_RECORD_CGROUP`: cgroup `id` has the path `path`.
pub fn push_cgroup(out: &mut Vec<u8>, stamp: &Stamp, id: u64, path: &[u8]) {
    push_text_record(out, PERF_RECORD_CGROUP, 0, &id.to_ne_bytes(), path, stamp);
}

/// A `PERF_RECORD_FORK` or `PERF_RECORD_EXIT`: which, and the thread ids it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    /// A fork (else an exit).
    pub fork: bool,
    /// The thread's process.
    pub pid: u32,
    /// The parent's process.
    pub ppid: u32,
    /// The thread.
    pub tid: u32,
    /// The parent thread.
    pub ptid: u32,
}

/// Append a `PERF_RECORD_FORK` or `PERF_RECORD_EXIT` (its time is `stamp.time`).
pub fn push_task(out: &mut Vec<u8>, stamp: &Stamp, task: &Task) {
    let mut rec = [0u8; TASK_SIZE];
    let kind = if task.fork {
        PERF_RECORD_FORK
    } else {
        PERF_RECORD_EXIT
    };
    put_header(&mut rec, kind, TASK_SIZE);
    put_u32(&mut rec, 8, task.pid);
    put_u32(&mut rec, 12, task.ppid);
    put_u32(&mut rec, 16, task.tid);
    put_u32(&mut rec, 20, task.ptid);
    put_u64(&mut rec, 24, stamp.time);
    put_sample_id(&mut rec, 32, stamp);
    out.extend_from_slice(&rec);
}

/// Append a `PERF_RECORD_FORK` of process `pid` from itself with
/// `PERF_RECORD_MISC_FORK_EXEC` (as perf synthesizes the FORK of a running process): perf
/// starts the thread anew, without the mappings it had. Written before an exec's COMM:
/// perf keeps a thread's mappings across an exec (it has no record of the old ones
/// going), and its DWARF unwinder takes a module's lowest mapping in the thread as the
/// module's base, so a parent's mapping of the same library below the program's own
/// would send it to the wrong `.eh_frame_hdr`.
pub fn push_exec_fork(out: &mut Vec<u8>, stamp: &Stamp, pid: u32) {
    let start = out.len();
    let task = Task {
        fork: true,
        pid,
        ppid: pid,
        tid: pid,
        ptid: pid,
    };
    push_task(out, stamp, &task);
    put_u16(&mut out[start..], 4, PERF_RECORD_MISC_FORK_EXEC);
}

/// Where a process mapped a file, for [`push_mmap2`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mmap2<'a> {
    /// The process.
    pub pid: u32,
    /// The thread that mapped it (the process itself for mappings read from `/proc`).
    pub tid: u32,
    /// First address.
    pub addr: u64,
    /// Bytes mapped.
    pub len: u64,
    /// The file offset of `addr`.
    pub pgoff: u64,
    /// The GNU build id (at most 20 bytes; empty: none, the record says no build id).
    pub build_id: &'a [u8],
    /// The file (`//anon`, `[vdso]` … for memory without one).
    pub path: &'a [u8],
}

/// `PROT_READ`.
const PROT_READ: u32 = 0x1;
/// `PROT_READ | PROT_EXEC`: perf makes a mapping without `PROT_EXEC` a data mapping,
/// whose addresses it does not name as code.
const PROT_READ_EXEC: u32 = PROT_READ | 0x4;
/// `MAP_PRIVATE`.
const MAP_PRIVATE: u32 = 0x2;

/// Append a `PERF_RECORD_MMAP2` of an executable mapping (`stamp` is the trailer, the
/// tracking attr's id): with `PERF_RECORD_MISC_MMAP_BUILD_ID` and the build id when
/// there is one (as the kernel writes it with the attr's `build_id`), else with zero
/// device and inode numbers.
pub fn push_mmap2(out: &mut Vec<u8>, stamp: &Stamp, m: &Mmap2<'_>) {
    push_mmap2_prot(out, stamp, m, PROT_READ_EXEC);
}

/// [`push_mmap2`] of a read-only mapping of a file (`PROT_READ`): a module's segment
/// that holds no code but what an unwinder reads, such as `.eh_frame_hdr` (perf's DWARF
/// unwinding of `--call-graph dwarf` samples reads it at its address in the process).
pub fn push_data_mmap2(out: &mut Vec<u8>, stamp: &Stamp, m: &Mmap2<'_>) {
    push_mmap2_prot(out, stamp, m, PROT_READ);
}

fn push_mmap2_prot(out: &mut Vec<u8>, stamp: &Stamp, m: &Mmap2<'_>, prot: u32) {
    let mut head = [0u8; 8 + 24 + 24 + 8];
    put_u32(&mut head, 0, m.pid);
    put_u32(&mut head, 4, m.tid);
    put_u64(&mut head, 8, m.addr);
    put_u64(&mut head, 16, m.len);
    put_u64(&mut head, 24, m.pgoff);
    let build_id = &m.build_id[..m.build_id.len().min(20)];
    if !build_id.is_empty() {
        // Its length fits the byte (at most 20).
        head[32] = build_id.len() as u8;
        head[36..36 + build_id.len()].copy_from_slice(build_id);
    }
    put_u32(&mut head, 56, prot);
    put_u32(&mut head, 60, MAP_PRIVATE);
    let misc = if build_id.is_empty() {
        0
    } else {
        PERF_RECORD_MISC_MMAP_BUILD_ID
    };
    push_text_record(out, PERF_RECORD_MMAP2, misc, &head, m.path, stamp);
}

/// The kernel's text as `perf record` maps it ([`push_kernel_mmap`]): from the address
/// of its relocation symbol (`_text`, else `_stext`, in `/proc/kallsyms`) to `_etext`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelMap<'a> {
    /// The symbol's address: the first address of the map and its file offset.
    pub start: u64,
    /// The end of the kernel's text (past its last byte).
    pub end: u64,
    /// The symbol (`_text` or `_stext`): perf checks it against the kallsyms it reads.
    pub symbol: &'a str,
}

/// The name of the kernel map before its symbol (perf's `machine->mmap_name` of the host).
pub const KERNEL_MAP_NAME: &str = "[kernel.kallsyms]";

/// Append the kernel map as `perf record` synthesizes it
/// (`perf_event__synthesize_kernel_mmap`): a `PERF_RECORD_MMAP` with
/// `PERF_RECORD_MISC_KERNEL`, pid -1, tid 0, `start`, its length, `start` as the offset,
/// and the file `[kernel.kallsyms]SYMBOL`; perf names the kernel frames in it from
/// `/proc/kallsyms` (or a vmlinux). `stamp` is the trailer (the tracking attr's id).
pub fn push_kernel_mmap(out: &mut Vec<u8>, stamp: &Stamp, k: &KernelMap<'_>) {
    let name = [KERNEL_MAP_NAME.as_bytes(), k.symbol.as_bytes()].concat();
    let len = k.end.saturating_sub(k.start);
    push_kernel_space_mmap(out, stamp, (k.start, len, k.start), &name);
}

/// Append the map of a loaded kernel module as `perf record` synthesizes it
/// (`perf_event__synthesize_modules`): a `PERF_RECORD_MMAP` with
/// `PERF_RECORD_MISC_KERNEL`, pid -1, tid 0, the module's address and size, offset 0,
/// and the file `[NAME]` (perf's name of a module whose `.ko` it did not look for); perf
/// names the frames in it from the module's symbols in kallsyms (or its `.ko`).
pub fn push_module_mmap(out: &mut Vec<u8>, stamp: &Stamp, start: u64, len: u64, name: &str) {
    let file = format!("[{name}]");
    push_kernel_space_mmap(out, stamp, (start, len, 0), file.as_bytes());
}

/// A `PERF_RECORD_MMAP` of kernel code: `(start, len, pgoff)` of `file`.
fn push_kernel_space_mmap(out: &mut Vec<u8>, stamp: &Stamp, range: (u64, u64, u64), file: &[u8]) {
    let mut head = [0u8; 8 + 24];
    put_u32(&mut head, 0, u32::MAX);
    put_u32(&mut head, 4, 0);
    put_u64(&mut head, 8, range.0);
    put_u64(&mut head, 16, range.1);
    put_u64(&mut head, 24, range.2);
    push_text_record(
        out,
        PERF_RECORD_MMAP,
        PERF_RECORD_MISC_KERNEL,
        &head,
        file,
        stamp,
    );
}

/// Append a `PERF_RECORD_LOST`: `stamp.cpu`'s buffer lost `lost` records (`stamp.id` is
/// the id of any event written, for readers that look the trailer's id up).
pub fn push_lost(out: &mut Vec<u8>, stamp: &Stamp, lost: u64) {
    let mut rec = [0u8; LOST_SIZE];
    put_header(&mut rec, PERF_RECORD_LOST, LOST_SIZE);
    put_u64(&mut rec, 8, stamp.id);
    put_u64(&mut rec, 16, lost);
    put_sample_id(&mut rec, 24, stamp);
    out.extend_from_slice(&rec);
}

/// Append a `PERF_RECORD_FINISHED_ROUND`: no record after it is older than the records
/// before the previous one (perf's ordering window).
pub fn push_finished_round(out: &mut Vec<u8>) {
    let mut rec = [0u8; 8];
    put_header(&mut rec, kind::FINISHED_ROUND, 8);
    out.extend_from_slice(&rec);
}

/// One event of the file: a tracepoint, its name and its sample id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    /// The tracepoint id (the format's `ID:`).
    pub tracepoint: u32,
    /// perf's name of it: `system:event`.
    pub name: String,
    /// The id its samples carry.
    pub id: u64,
    /// The clock of its sample times (`clockid` with `use_clockid`).
    pub clockid: i32,
    /// Its samples carry call stacks ([`STACK_SAMPLE_TYPE`], [`push_stacked_sample`]).
    pub callchain: bool,
    /// With `callchain`, its samples carry the user registers and a copy of the user
    /// stack too (`--call-graph dwarf`: [`USER_STACK_SAMPLE_TYPE`], [`UserCopy`]).
    pub user_stack: Option<UserStackSpec>,
}

/// What an event with `--call-graph dwarf` asks the kernel for, as its attr says it:
/// `sample_regs_user` and `sample_stack_user`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserStackSpec {
    /// The user registers each sample carries (`PERF_REG_*` bits).
    pub regs: u64,
    /// Bytes of user stack copied per sample.
    pub size: u32,
}

/// The tracking attr of a file with context: its id (in the trailers of the COMM, FORK,
/// EXIT and CGROUP records) and clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackingSpec {
    /// The id its records carry.
    pub id: u64,
    /// The clock of their times.
    pub clockid: i32,
    /// It reports mappings too (`mmap`, `mmap2`, `build_id`): the file holds
    /// `PERF_RECORD_MMAP2` records ([`push_mmap2`]).
    pub mmap: bool,
}

/// The name `perf` gives the tracking attr.
pub const TRACKING_NAME: &str = "dummy";

/// The `perf_event_attr` of `ev` ([`ATTR_SIZE`] bytes); its samples carry a cgroup id
/// when `cgroup`.
pub fn attr_bytes(ev: &EventSpec, cgroup: bool) -> [u8; ATTR_SIZE] {
    let flags = 1 << flag::SAMPLE_ID_ALL | 1 << flag::USE_CLOCKID;
    let stacks = if ev.callchain { STACK_SAMPLE_TYPE } else { 0 };
    let user = ev.user_stack.filter(|_| ev.callchain);
    let users = if user.is_some() {
        USER_STACK_SAMPLE_TYPE
    } else {
        0
    };
    let mut a = attr_of(
        PERF_TYPE_TRACEPOINT,
        u64::from(ev.tracepoint),
        sample_type(cgroup) | stacks | users,
        flags,
        ev.clockid,
    );
    if let Some(u) = user {
        put_u64(&mut a, 80, u.regs);
        put_u32(&mut a, 88, u.size);
    }
    a
}

/// The `perf_event_attr` of the tracking event: a software dummy with `comm`,
/// `comm_exec`, `task`, `cgroup` and `sample_id_all` (and with [`TrackingSpec::mmap`]
/// `mmap`, `mmap2` and `build_id`), as `perf record` opens it.
pub fn tracking_attr_bytes(t: &TrackingSpec) -> [u8; ATTR_SIZE] {
    let mmap = 1 << flag::MMAP | 1 << flag::MMAP2 | 1 << flag::BUILD_ID;
    let flags = 1 << flag::SAMPLE_ID_ALL
        | 1 << flag::USE_CLOCKID
        | 1 << flag::COMM
        | 1 << flag::COMM_EXEC
        | 1 << flag::TASK
        | 1 << flag::CGROUP
        | if t.mmap { mmap } else { 0 };
    attr_of(
        PERF_TYPE_SOFTWARE,
        PERF_COUNT_SW_DUMMY,
        TRACKING_SAMPLE_TYPE,
        flags,
        t.clockid,
    )
}

fn attr_of(kind: u32, config: u64, sample_type: u64, flags: u64, clockid: i32) -> [u8; ATTR_SIZE] {
    let mut a = [0u8; ATTR_SIZE];
    put_u32(&mut a, 0, kind);
    put_u32(&mut a, 4, ATTR_SIZE as u32);
    put_u64(&mut a, 8, config);
    // sample_period 1: every event is a sample.
    put_u64(&mut a, 16, 1);
    put_u64(&mut a, 24, sample_type);
    // C bitfields start at the most significant bit on big-endian machines.
    let flags = if cfg!(target_endian = "big") {
        flags.reverse_bits()
    } else {
        flags
    };
    put_u64(&mut a, 40, flags);
    put_u32(&mut a, 92, clockid as u32);
    a
}

/// The tracing data block (`HEADER_TRACING_DATA`, version 0.6) for event format texts.
#[derive(Debug, Clone, Copy)]
pub struct TracingSpec<'a> {
    /// `sizeof(long)` of the traced kernel.
    pub long_size: u8,
    /// Its page size.
    pub page_size: u32,
    /// `events/header_page`.
    pub header_page: &'a str,
    /// `events/header_event`.
    pub header_event: &'a str,
}

fn push_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_ne_bytes());
}

fn push_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_ne_bytes());
}

fn push_sized_text(out: &mut Vec<u8>, text: &str) {
    push_u64(out, text.len() as u64);
    out.extend_from_slice(text.as_bytes());
}

/// Append the tracing data of `events` (`(system, format text)`, in the order given;
/// texts of one system are grouped under it). The ftrace formats, kallsyms, printk
/// formats and saved cmdlines are empty (tracepoint samples need none of them).
pub fn push_tracing_data(out: &mut Vec<u8>, spec: &TracingSpec<'_>, events: &[(&str, &str)]) {
    out.extend_from_slice(TRACING_MAGIC);
    out.extend_from_slice(b"0.6\0");
    out.push(u8::from(cfg!(target_endian = "big")));
    out.push(spec.long_size);
    push_u32(out, spec.page_size);
    out.extend_from_slice(b"header_page\0");
    push_sized_text(out, spec.header_page);
    out.extend_from_slice(b"header_event\0");
    push_sized_text(out, spec.header_event);
    // No ftrace formats.
    push_u32(out, 0);
    let mut systems: Vec<&str> = Vec::new();
    for (system, _) in events {
        if !systems.contains(system) {
            systems.push(system);
        }
    }
    push_u32(out, systems.len() as u32);
    for system in systems {
        out.extend_from_slice(system.as_bytes());
        out.push(0);
        let texts: Vec<&str> = events
            .iter()
            .filter(|(s, _)| *s == system)
            .map(|(_, t)| *t)
            .collect();
        push_u32(out, texts.len() as u32);
        for text in texts {
            push_sized_text(out, text);
        }
    }
    // kallsyms, printk formats (u32 sizes), saved cmdlines (u64 size): empty.
    push_u32(out, 0);
    push_u32(out, 0);
    push_u64(out, 0);
}

/// `struct perf_header_string`: `u32 len`, then the text, a NUL and zeros up to `len`
/// (a multiple of 64).
fn push_string(out: &mut Vec<u8>, s: &str) {
    let len = (s.len() + 1).next_multiple_of(NAME_ALIGN);
    push_u32(out, len as u32);
    out.extend_from_slice(s.as_bytes());
    out.resize(out.len() + len - s.len(), 0);
}

/// The wall-clock reference of `HEADER_CLOCK_DATA`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockRef {
    /// The samples' clock.
    pub clockid: u32,
    /// Unix nanoseconds at the reference.
    pub wall_ns: u64,
    /// The same instant on `clockid`.
    pub clockid_ns: u64,
    /// The clock's resolution (`HEADER_CLOCKID`).
    pub res_ns: u64,
}

/// What the header and trailer of a file say besides the records.
#[derive(Debug, Clone)]
pub struct FileMeta<'a> {
    /// The events, in the order their attrs are written.
    pub events: &'a [EventSpec],
    /// The tracing data's machine description.
    pub tracing: TracingSpec<'a>,
    /// `(system, format text)` of every event, each tracepoint once.
    pub formats: &'a [(&'a str, &'a str)],
    /// `uname -n`.
    pub hostname: &'a str,
    /// `uname -r`.
    pub osrelease: &'a str,
    /// The writer's name and version (`HEADER_VERSION`).
    pub version: &'a str,
    /// `uname -m`.
    pub arch: &'a str,
    /// CPUs `(available, online)`.
    pub nr_cpus: (u32, u32),
    /// The command line that recorded.
    pub cmdline: &'a [String],
    /// First and last sample time, when there were samples.
    pub sample_time: Option<(u64, u64)>,
    /// The wall-clock reference.
    pub clock: ClockRef,
    /// With context: the tracking attr (written after the events'), and the samples
    /// carry a cgroup id.
    pub tracking: Option<TrackingSpec>,
    /// The `HEADER_BUILD_ID` section ([`push_build_id`] of each module; empty: none
    /// written).
    pub build_ids: &'a [u8],
}

impl FileMeta<'_> {
    /// Every attr with its id and name, in file order.
    fn attrs(&self) -> Vec<([u8; ATTR_SIZE], u64, &str)> {
        let cgroup = self.tracking.is_some();
        let mut attrs: Vec<_> = (self.events.iter())
            .map(|ev| (attr_bytes(ev, cgroup), ev.id, ev.name.as_str()))
            .collect();
        if let Some(t) = &self.tracking {
            attrs.push((tracking_attr_bytes(t), t.id, TRACKING_NAME));
        }
        attrs
    }
}

/// The bytes after the data section and the file header pointing at them.
#[derive(Debug, Clone)]
pub struct Trailer {
    /// Feature table, features, attrs and ids: written right after the data section.
    pub bytes: Vec<u8>,
    /// The file header: written at offset 0 once the trailer is in place.
    pub header: [u8; FILE_HEADER_SIZE as usize],
}

/// The features written, each with its bytes.
fn features(meta: &FileMeta<'_>) -> Vec<(u32, Vec<u8>)> {
    let mut out: Vec<(u32, Vec<u8>)> = Vec::new();
    let mut tracing = Vec::new();
    push_tracing_data(&mut tracing, &meta.tracing, meta.formats);
    out.push((feature::TRACING_DATA, tracing));
    if !meta.build_ids.is_empty() {
        out.push((feature::BUILD_ID, meta.build_ids.to_vec()));
    }
    for (bit, s) in [
        (feature::HOSTNAME, meta.hostname),
        (feature::OSRELEASE, meta.osrelease),
        (feature::VERSION, meta.version),
        (feature::ARCH, meta.arch),
    ] {
        let mut b = Vec::new();
        push_string(&mut b, s);
        out.push((bit, b));
    }
    let mut b = Vec::new();
    push_u32(&mut b, meta.nr_cpus.0);
    push_u32(&mut b, meta.nr_cpus.1);
    out.push((feature::NRCPUS, b));
    let mut b = Vec::new();
    push_u32(&mut b, meta.cmdline.len() as u32);
    for arg in meta.cmdline {
        push_string(&mut b, arg);
    }
    out.push((CMDLINE, b));
    let mut b = Vec::new();
    let attrs = meta.attrs();
    push_u32(&mut b, attrs.len() as u32);
    push_u32(&mut b, ATTR_SIZE as u32);
    for (attr, id, name) in &attrs {
        b.extend_from_slice(attr);
        push_u32(&mut b, 1);
        push_string(&mut b, name);
        push_u64(&mut b, *id);
    }
    out.push((feature::EVENT_DESC, b));
    if let Some((first, last)) = meta.sample_time {
        let mut b = Vec::new();
        push_u64(&mut b, first);
        push_u64(&mut b, last);
        out.push((feature::SAMPLE_TIME, b));
    }
    let mut b = Vec::new();
    push_u64(&mut b, meta.clock.res_ns);
    out.push((feature::CLOCKID, b));
    let mut b = Vec::new();
    push_u32(&mut b, 1);
    push_u32(&mut b, meta.clock.clockid);
    push_u64(&mut b, meta.clock.wall_ns);
    push_u64(&mut b, meta.clock.clockid_ns);
    out.push((feature::CLOCK_DATA, b));
    out
}

/// `HEADER_CMDLINE`: `u32 nr`, then `nr` strings.
const CMDLINE: u32 = 11;

/// One module of the `HEADER_BUILD_ID` section ([`push_build_id`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildIdEntry<'a> {
    /// Kernel code (the kernel, a loaded module) rather than a user file.
    pub kernel: bool,
    /// The GNU build id (at most 20 bytes are written).
    pub build_id: &'a [u8],
    /// The module as perf names it: a user file's path, `[kernel.kallsyms]`, a
    /// module's `[name]` (at most [`MAX_NAME`] bytes, up to its first NUL).
    pub name: &'a [u8],
}

/// `PERF_RECORD_MISC_BUILD_ID_SIZE`: the entry's size byte says how long its build id is
/// (else perf takes 20 bytes).
const PERF_RECORD_MISC_BUILD_ID_SIZE: u16 = 1 << 15;
/// The fixed part of `struct perf_record_header_build_id`: header, `pid_t pid`, `u8
/// data[20]`, `u8 size`, 3 reserved bytes.
const BUILD_ID_HEAD: usize = 8 + 4 + 24;

/// Append one module of the `HEADER_BUILD_ID` section as perf's `write_buildid` does
/// (tools/perf/util/build-id.c): header type 0, `misc` the cpumode (kernel or user) with
/// `PERF_RECORD_MISC_BUILD_ID_SIZE`, pid -1 (the host machine), the build id
/// zero-padded to 20 bytes and its length, then the name with its NUL, zero-padded to 64
/// bytes. `perf buildid-list -i FILE` lists these; perf script and perf report find each
/// module by its id (the build-id cache, else the file at the name, checked).
pub fn push_build_id(out: &mut Vec<u8>, e: &BuildIdEntry<'_>) {
    let name = &e.name[..e.name.len().min(MAX_NAME)];
    let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
    let padded = (name.len() + 1).next_multiple_of(NAME_ALIGN);
    let mut head = [0u8; BUILD_ID_HEAD];
    // At most 36 + 4160 bytes: fits the u16 size.
    put_header(&mut head, 0, BUILD_ID_HEAD + padded);
    let mode = if e.kernel {
        PERF_RECORD_MISC_KERNEL
    } else {
        PERF_RECORD_MISC_USER
    };
    put_u16(&mut head, 4, mode | PERF_RECORD_MISC_BUILD_ID_SIZE);
    put_u32(&mut head, 8, u32::MAX);
    let id = &e.build_id[..e.build_id.len().min(20)];
    head[12..12 + id.len()].copy_from_slice(id);
    // At most 20: fits the byte.
    head[32] = id.len() as u8;
    out.extend_from_slice(&head);
    out.extend_from_slice(name);
    out.resize(out.len() + padded - name.len(), 0);
}

/// The trailer for a data section of `data_size` bytes starting at `FILE_HEADER_SIZE`,
/// and the header that points at it.
pub fn trailer(meta: &FileMeta<'_>, data_size: u64) -> Trailer {
    let data = Section {
        offset: FILE_HEADER_SIZE,
        size: data_size,
    };
    let start = data.offset + data.size;
    let feats = features(meta);
    let mut bytes = Vec::new();
    // The table first, then the sections (each starting on 8 bytes).
    let table = 16 * feats.len();
    let mut at = start + table as u64;
    let mut bodies = Vec::new();
    let mut bitmap = [0u64; 4];
    for (bit, body) in &feats {
        bitmap[(bit / 64) as usize] |= 1 << (bit % 64);
        push_u64(&mut bytes, at);
        push_u64(&mut bytes, body.len() as u64);
        bodies.extend_from_slice(body);
        let padded = body.len().next_multiple_of(8);
        bodies.resize(bodies.len() + padded - body.len(), 0);
        at += padded as u64;
    }
    bytes.extend_from_slice(&bodies);
    let list = meta.attrs();
    let attrs = Section {
        offset: at,
        size: (FILE_ATTR_SIZE * list.len()) as u64,
    };
    let ids_at = attrs.offset + attrs.size;
    for (i, (attr, _, _)) in list.iter().enumerate() {
        bytes.extend_from_slice(attr);
        push_u64(&mut bytes, ids_at + 8 * i as u64);
        push_u64(&mut bytes, 8);
    }
    for (_, id, _) in &list {
        push_u64(&mut bytes, *id);
    }
    Trailer {
        bytes,
        header: file_header(attrs, data, bitmap),
    }
}

/// A file header for `attrs` and `data` with the features of `bitmap`.
pub fn file_header(
    attrs: Section,
    data: Section,
    bitmap: [u64; 4],
) -> [u8; FILE_HEADER_SIZE as usize] {
    let mut h = [0u8; FILE_HEADER_SIZE as usize];
    // The magic as a native u64, as perf writes it: reversed bytes mean big-endian.
    put_u64(&mut h, 0, u64::from_le_bytes(MAGIC));
    put_u64(&mut h, 8, FILE_HEADER_SIZE);
    put_u64(&mut h, 16, FILE_ATTR_SIZE as u64);
    put_u64(&mut h, 24, attrs.offset);
    put_u64(&mut h, 32, attrs.size);
    put_u64(&mut h, 40, data.offset);
    put_u64(&mut h, 48, data.size);
    // event_types (unused since 2012) stays { 0, 0 }.
    for (i, word) in bitmap.iter().enumerate() {
        put_u64(&mut h, 72 + 8 * i, *word);
    }
    h
}

/// The header of a file being written: no attrs, an empty data section at its place, no
/// features. Readers refuse such a file (no events) until [`trailer`]'s header
/// replaces it.
pub fn placeholder_header() -> [u8; FILE_HEADER_SIZE as usize] {
    let data = Section {
        offset: FILE_HEADER_SIZE,
        size: 0,
    };
    file_header(Section::default(), data, [0; 4])
}

/// `PERF_RECORD_HEADER_EVENT_TYPE`: a record type perf reads past without a word (it has
/// been deprecated since 2012; pipe and file mode alike), which makes it the filler of
/// [`unfinished_header`].
pub const HEADER_EVENT_TYPE: u32 = 65;

/// The text at the start of the filler record of [`unfinished_header`]: how a reader
/// tells a recording that never finished from a perf pipe-mode stream.
pub const UNFINISHED_MARK: &[u8] = b"uevrec: unfinished recording";

/// The first [`FILE_HEADER_SIZE`] bytes of a file being written (crash-safe layout): a
/// pipe-mode header (`PERFILE2`, size 16) and one [`HEADER_EVENT_TYPE`] record of 88
/// bytes starting with [`UNFINISHED_MARK`] that fills the room the file-mode header takes
/// once the file is finished. Until then the file is a valid pipe-mode perf.data: the
/// records that describe the events ([`push_header_features`], [`push_event_headers`])
/// come before their first sample, so a file cut anywhere (SIGKILL, a crash, a full
/// disk) reads up to its last whole record.
pub fn unfinished_header() -> [u8; FILE_HEADER_SIZE as usize] {
    let mut h = [0u8; FILE_HEADER_SIZE as usize];
    put_u64(&mut h, 0, u64::from_le_bytes(MAGIC));
    put_u64(&mut h, 8, super::header::PIPE_HEADER_SIZE);
    let filler = FILE_HEADER_SIZE as usize - super::header::PIPE_HEADER_SIZE as usize;
    put_header(&mut h[16..], HEADER_EVENT_TYPE, filler);
    h[24..24 + UNFINISHED_MARK.len()].copy_from_slice(UNFINISHED_MARK);
    h
}

/// Whether `file` starts as [`unfinished_header`]: a recording by `uevrec record --raw`
/// that never finished (killed, crashed); its records are read as a pipe-mode stream.
pub fn is_unfinished(file: &[u8]) -> bool {
    file.get(16..FILE_HEADER_SIZE as usize)
        .is_some_and(|rest| rest[8..].starts_with(UNFINISHED_MARK))
        && file.get(8..16).is_some_and(|s| {
            s == super::header::PIPE_HEADER_SIZE.to_ne_bytes()
                || s == super::header::PIPE_HEADER_SIZE.to_be_bytes()
        })
}

/// Where, in the filler record of [`unfinished_header`], the finish of a recording notes
/// the end of its records ([`finishing_mark`]) before it appends the trailer.
pub const FINISHING_END_AT: u64 = FILE_HEADER_SIZE - 8;

/// The 8 bytes written at [`FINISHING_END_AT`] of an unfinished file when its finish
/// begins, before the trailer is appended: `records_end`, the file offset where its
/// records end (and the trailer starts). A file killed during the finish (trailer
/// written, the file-mode header not yet) is still read as an unfinished one up to there
/// ([`finishing_end`]), not as records running into the trailer's bytes.
pub fn finishing_mark(records_end: u64) -> [u8; 8] {
    records_end.to_ne_bytes()
}

/// The end of the records of an unfinished file ([`is_unfinished`]) whose finish began
/// ([`finishing_mark`]): `None` for any other file, or when the noted end does not lie
/// within it.
pub fn finishing_end(file: &[u8]) -> Option<u64> {
    if !is_unfinished(file) {
        return None;
    }
    let at = FINISHING_END_AT as usize;
    let b: [u8; 8] = file.get(at..at + 8)?.try_into().ok()?;
    [u64::from_ne_bytes(b), u64::from_ne_bytes(b).swap_bytes()]
        .into_iter()
        .find(|&end| end >= FILE_HEADER_SIZE && end <= file.len() as u64)
}

/// Append a `PERF_RECORD_HEADER_FEATURE` (pipe mode's form of a feature section):
/// `u64 feat_id`, then `body` zero-padded to 8 bytes. Bodies over 64 KiB are left out
/// (a record's size is a u16): the features written this way are small.
pub fn push_feature_record(out: &mut Vec<u8>, bit: u32, body: &[u8]) {
    let size = 16 + body.len().next_multiple_of(8);
    if size > usize::from(u16::MAX) {
        return;
    }
    let mut h = [0u8; 16];
    put_header(&mut h, kind::HEADER_FEATURE, size);
    put_u64(&mut h, 8, u64::from(bit));
    out.extend_from_slice(&h);
    out.extend_from_slice(body);
    out.resize(out.len() + size - 16 - body.len(), 0);
}

/// Append the features of `meta` that do not change while recording (hostname,
/// osrelease, version, arch, nrcpus, cmdline, clockid, clock_data) as
/// `PERF_RECORD_HEADER_FEATURE` records: the start of a crash-safe file, right after
/// [`unfinished_header`]. The tracing data and the attrs come per event
/// ([`push_event_headers`]); `HEADER_EVENT_DESC` and `HEADER_SAMPLE_TIME` only in the
/// trailer.
pub fn push_header_features(out: &mut Vec<u8>, meta: &FileMeta<'_>) {
    for (bit, body) in features(meta) {
        if matches!(
            bit,
            feature::TRACING_DATA | feature::EVENT_DESC | feature::SAMPLE_TIME
        ) {
            continue;
        }
        push_feature_record(out, bit, &body);
    }
}

/// Append a `PERF_RECORD_HEADER_ATTR`: `attr` and its one sample `id`.
pub fn push_attr_record(out: &mut Vec<u8>, attr: &[u8; ATTR_SIZE], id: u64) {
    let size = 8 + ATTR_SIZE + 8;
    let mut h = [0u8; 8];
    put_header(&mut h, kind::HEADER_ATTR, size);
    out.extend_from_slice(&h);
    out.extend_from_slice(attr);
    push_u64(out, id);
}

/// Append a `PERF_RECORD_HEADER_TRACING_DATA` (16 bytes: header, `u32 size` and 4
/// bytes of padding, as perf 6.1 writes it and needs it) and the tracing data of `events`
/// after it, zero-padded to 8 bytes, as `perf record -o -` writes it.
pub fn push_tracing_data_record(
    out: &mut Vec<u8>,
    spec: &TracingSpec<'_>,
    events: &[(&str, &str)],
) {
    let mut data = Vec::new();
    push_tracing_data(&mut data, spec, events);
    let padded = data.len().next_multiple_of(8);
    let mut h = [0u8; 16];
    put_header(&mut h, kind::HEADER_TRACING_DATA, 16);
    put_u32(&mut h, 8, padded as u32);
    out.extend_from_slice(&h);
    out.extend_from_slice(&data);
    out.resize(out.len() + padded - data.len(), 0);
}

/// Append the attr record of the tracking event (a file with context), before the first
/// COMM/FORK/EXIT/CGROUP record.
pub fn push_tracking_header(out: &mut Vec<u8>, t: &TrackingSpec) {
    push_attr_record(out, &tracking_attr_bytes(t), t.id);
}

/// The records in `bytes` (a run of whole records written by this module: the in-band
/// description of a crash-safe file), each as `(offset in bytes, length with its data,
/// type)`: what [`passed_over`] turns into records perf reads past once the file is
/// finished.
pub fn record_spans(bytes: &[u8]) -> Vec<(usize, usize, u32)> {
    let mut spans = Vec::new();
    let mut at = 0;
    while let Some(h) = bytes.get(at..at + 8) {
        let kind = u32::from_ne_bytes([h[0], h[1], h[2], h[3]]);
        let size = usize::from(u16::from_ne_bytes([h[6], h[7]]));
        let data = match (kind, bytes.get(at + 8..at + 12)) {
            (kind::HEADER_TRACING_DATA, Some(s)) => u32::from_ne_bytes([s[0], s[1], s[2], s[3]]),
            _ => 0,
        } as usize;
        if size < 8 {
            break;
        }
        spans.push((at, size + data, kind));
        at += size + data;
    }
    spans
}

/// The header that turns the `len` bytes of an in-band record of type `kind` (and its
/// data) of a finished file into one [`HEADER_EVENT_TYPE`] record that perf script and
/// perf report read past (they would add its attr twice, or stop at a second tracing
/// data block); its `misc` keeps `kind`, so that `uevrec decode` still finds the attrs
/// and formats in a finished file cut before its trailer. `None` when `len` does not fit
/// a record's size (over 64 KiB).
pub fn passed_over(len: usize, kind: u32) -> Option<[u8; 8]> {
    let size = u16::try_from(len).ok()?;
    let mut h = [0u8; 8];
    put_header(&mut h, HEADER_EVENT_TYPE, usize::from(size));
    put_u16(&mut h, 4, u16::try_from(kind).ok()?);
    Some(h)
}

/// Tracing data records longer than this are split (so that each can be passed over
/// once the file is finished, [`passed_over`]).
pub const MAX_INBAND_TRACING: usize = 60 * 1024;

/// Append the attrs of `events` (`(spec, system, format text)`; samples with a cgroup id
/// when `cgroup`) and then their formats in tracing data records of at most
/// [`MAX_INBAND_TRACING`] bytes (one unless the formats are long): what a reader needs
/// before their first sample in a crash-safe file. perf gives a tracing data record's
/// formats to the events it already has, so the attrs come first.
pub fn push_event_headers(
    out: &mut Vec<u8>,
    events: &[(&EventSpec, &str, &str)],
    cgroup: bool,
    tracing: &TracingSpec<'_>,
) {
    for (ev, _, _) in events {
        push_attr_record(out, &attr_bytes(ev, cgroup), ev.id);
    }
    let room = MAX_INBAND_TRACING - tracing.header_page.len() - tracing.header_event.len() - 128;
    let mut group: Vec<(&str, &str)> = Vec::new();
    let mut len = 0;
    for &(_, system, text) in events {
        let need = system.len() + text.len() + 16;
        if !group.is_empty() && len + need > room {
            push_tracing_data_record(out, tracing, &group);
            group.clear();
            len = 0;
        }
        group.push((system, text));
        len += need;
    }
    if !group.is_empty() {
        push_tracing_data_record(out, tracing, &group);
    }
}
