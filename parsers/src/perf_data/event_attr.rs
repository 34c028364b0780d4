//! `struct perf_event_attr` as perf.data stores it (include/uapi/linux/perf_event.h): the
//! parts a reader of tracepoint samples needs ([`EventAttr`]) and the flag bits. Below the
//! file header, whose `HEADER_EVENT_DESC` holds attrs too, and `attr.rs` (attrs with their
//! sample ids), which re-exports it all.
//!
//! Offsets used: `type` 0, `size` 4, `config` 8, `sample_type` 24, `read_format` 32, the
//! flag bitfield 40, `sample_regs_user` 80 (from `PERF_ATTR_SIZE_VER3`), `clockid` 92 (present from `PERF_ATTR_SIZE_VER3`, 96 bytes). The
//! bitfield is in the writer's order: on a big-endian machine the first flag is the
//! most significant bit of the u64 (C bitfield allocation), so flag n is bit 63 − n.

use super::PerfDataError;
use super::cursor::Cursor;
use crate::bytes::Endian;
use crate::perf_sample::{PerfSampleError, SampleFormat};

/// `PERF_TYPE_TRACEPOINT`: `config` is the tracepoint id (the format file's `ID:`).
pub const PERF_TYPE_TRACEPOINT: u32 = 2;
/// The smallest attr (`PERF_ATTR_SIZE_VER0`).
pub const ATTR_SIZE_VER0: usize = 64;

/// Flag bit numbers in the attr's bitfield word.
pub mod flag {
    /// `mmap`: `PERF_RECORD_MMAP` of executable mappings.
    pub const MMAP: u32 = 8;
    /// `comm`: `PERF_RECORD_COMM` on exec and renames.
    pub const COMM: u32 = 9;
    /// `task`: `PERF_RECORD_FORK` and `PERF_RECORD_EXIT`.
    pub const TASK: u32 = 13;
    /// `sample_id_all`: non-sample records end with a `sample_id` trailer.
    pub const SAMPLE_ID_ALL: u32 = 18;
    /// `mmap2`: mappings as `PERF_RECORD_MMAP2` (with `mmap`).
    pub const MMAP2: u32 = 23;
    /// `comm_exec`: `PERF_RECORD_COMM` of an exec says so in its misc bits.
    pub const COMM_EXEC: u32 = 24;
    /// `use_clockid`: sample times are on `clockid`, not perf's local clock.
    pub const USE_CLOCKID: u32 = 25;
    /// `cgroup`: `PERF_RECORD_CGROUP` when a cgroup is made.
    pub const CGROUP: u32 = 32;
    /// `build_id`: `PERF_RECORD_MMAP2` carries the build id instead of the inode.
    pub const BUILD_ID: u32 = 34;
}

/// The parts of a `perf_event_attr` a reader of tracepoint samples needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventAttr {
    /// `type` (`PERF_TYPE_*`).
    pub kind: u32,
    /// `size` as the attr says it.
    pub size: u32,
    /// `config`: the tracepoint id for [`PERF_TYPE_TRACEPOINT`].
    pub config: u64,
    /// `sample_type` bits.
    pub sample_type: u64,
    /// `read_format` bits.
    pub read_format: u64,
    /// The flag bitfield, normalised so that flag n is bit n.
    pub flags: u64,
    /// `clockid` when the attr is large enough to hold it.
    pub clockid: Option<i32>,
    /// `sample_regs_user` (0 when the attr is too small to hold it).
    pub regs_user: u64,
}

impl EventAttr {
    /// Parse an attr from `bytes` (at least [`ATTR_SIZE_VER0`] long), which start at
    /// absolute offset `at`.
    pub fn parse(bytes: &[u8], at: u64, endian: Endian) -> Result<Self, PerfDataError> {
        let mut c = Cursor::new(bytes, at, endian);
        if bytes.len() < ATTR_SIZE_VER0 {
            return Err(PerfDataError::Truncated {
                what: "perf_event_attr",
                at,
                need: ATTR_SIZE_VER0 as u64,
                have: bytes.len() as u64,
            });
        }
        let kind = c.u32("attr type")?;
        let size = c.u32("attr size")?;
        let config = c.u64("attr config")?;
        c.u64("attr sample_period")?;
        let sample_type = c.u64("attr sample_type")?;
        let read_format = c.u64("attr read_format")?;
        let raw_flags = c.u64("attr flags")?;
        let flags = if endian.is_big() {
            raw_flags.reverse_bits()
        } else {
            raw_flags
        };
        let clockid = if bytes.len() >= 96 && size >= 96 {
            // A place in the input: far below u64::MAX (saturating all the same).
            let mut c = Cursor::new(&bytes[92..96], at.saturating_add(92), endian);
            Some(c.u32("attr clockid")? as i32)
        } else {
            None
        };
        let regs_user = if bytes.len() >= 96 && size >= 96 {
            // A place in the input: far below u64::MAX (saturating all the same).
            let mut c = Cursor::new(&bytes[80..88], at.saturating_add(80), endian);
            c.u64("attr sample_regs_user")?
        } else {
            0
        };
        Ok(EventAttr {
            regs_user,
            kind,
            size,
            config,
            sample_type,
            read_format,
            flags,
            clockid,
        })
    }

    /// Whether flag `bit` (see [`flag`]) is set.
    pub fn flag(&self, bit: u32) -> bool {
        bit < 64 && self.flags >> bit & 1 == 1
    }

    /// Whether non-sample records carry the `sample_id` trailer.
    pub fn sample_id_all(&self) -> bool {
        self.flag(flag::SAMPLE_ID_ALL)
    }

    /// The clock of the sample times when `use_clockid` is set.
    pub fn use_clockid(&self) -> Option<i32> {
        if self.flag(flag::USE_CLOCKID) {
            self.clockid
        } else {
            None
        }
    }

    /// How this event's records are laid out, in the file's byte order.
    pub fn sample_format(&self, endian: Endian) -> Result<SampleFormat, PerfSampleError> {
        SampleFormat::new(self.sample_type, self.sample_id_all())
            .map(|f| f.with_endian(endian).with_user_regs(self.regs_user))
    }
}
