//! The perf.data file header (`struct perf_file_header`, or the 16-byte
//! `struct perf_pipe_file_header` of pipe mode) and the feature sections it points to
//! (tools/perf/util/header.c, tools/perf/Documentation/perf.data-file-format.txt).
//!
//! File mode: `magic, size (104), attr_size, attrs {offset, size}, data {offset, size},
//! event_types {offset, size}, adds_features (256-bit bitmap)`; after the data section,
//! one `{offset, size}` per feature bit set, in bit order. Pipe mode: `magic, size (16)`;
//! the features come as `PERF_RECORD_HEADER_FEATURE` records (`u64 feat_id` + the same
//! bytes as the file-mode section).
//!
//! The magic `PERFILE2` read as a little-endian u64 tells the byte order: the bytes in
//! reverse order mean a big-endian file. Every number after it is in that order.

use std::collections::BTreeMap;

use super::PerfDataError;
use super::cursor::Cursor;
use super::event_attr::EventAttr;
use crate::bytes::{Endian, text};

/// `PERFILE2`, the magic of current perf.data files.
pub const MAGIC: [u8; 8] = *b"PERFILE2";
/// Size of the file-mode header.
pub const FILE_HEADER_SIZE: u64 = 104;
/// Size of the pipe-mode header.
pub const PIPE_HEADER_SIZE: u64 = 16;

/// Feature bits (`enum HEADER_*` in tools/perf/util/header.h) that this reader uses or names.
pub mod feature {
    /// The tracing data block (format files of the recorded tracepoints).
    pub const TRACING_DATA: u32 = 1;
    /// The build ids of the modules the samples name (`struct perf_record_header_build_id`
    /// after one another).
    pub const BUILD_ID: u32 = 2;
    /// `uname -n` of the traced machine.
    pub const HOSTNAME: u32 = 3;
    /// `uname -r` of the traced machine.
    pub const OSRELEASE: u32 = 4;
    /// The perf version that wrote the file.
    pub const VERSION: u32 = 5;
    /// `uname -m` of the traced machine.
    pub const ARCH: u32 = 6;
    /// CPUs online and available.
    pub const NRCPUS: u32 = 7;
    /// Attributes with their names and ids.
    pub const EVENT_DESC: u32 = 12;
    /// Time of the first and the last sample.
    pub const SAMPLE_TIME: u32 = 21;
    /// Resolution of the clock (`perf record -k`), in ns.
    pub const CLOCKID: u32 = 23;
    /// zstd-compressed records (`perf record -z`).
    pub const COMPRESSED: u32 = 27;
    /// Wall-clock reference: `(clockid, wall ns, clockid ns)` taken together.
    pub const CLOCK_DATA: u32 = 29;
    /// Bits in the feature bitmap.
    pub const BITS: u32 = 256;
}

/// `struct perf_file_section`: where a part of the file is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Section {
    /// Offset from the start of the file.
    pub offset: u64,
    /// Length in bytes.
    pub size: u64,
}

impl Section {
    fn read(c: &mut Cursor<'_>, what: &'static str) -> Result<Self, PerfDataError> {
        Ok(Section {
            offset: c.u64(what)?,
            size: c.u64(what)?,
        })
    }

    /// The section's bytes in `file`, or an error naming it when it lies outside.
    pub fn slice<'a>(&self, file: &'a [u8], what: &'static str) -> Result<&'a [u8], PerfDataError> {
        let end = self.offset.checked_add(self.size);
        match end {
            Some(end) if end <= file.len() as u64 => Ok(&file[self.offset as usize..end as usize]),
            _ => Err(PerfDataError::BadSection {
                what,
                offset: self.offset,
                size: self.size,
                file_len: file.len() as u64,
            }),
        }
    }
}

/// What the first bytes of a perf.data file say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHeader {
    /// The file's numbers are big-endian.
    pub endian: Endian,
    /// Pipe mode (`perf record -o -`): attrs, tracing data and features are records.
    pub pipe: bool,
    /// File mode: bytes per entry of the attrs section (attr + ids section).
    pub attr_size: u64,
    /// File mode: the attrs section.
    pub attrs: Section,
    /// File mode: the data section (the records).
    pub data: Section,
    /// File mode: the feature bitmap (`adds_features`), bit n of word n / 64.
    pub features: [u64; 4],
}

/// Byte order and mode from the first 16 bytes (magic and header size).
pub fn parse_magic(bytes: &[u8]) -> Result<(Endian, bool), PerfDataError> {
    let mut magic = [0u8; 8];
    match bytes.get(..8) {
        Some(b) => magic.copy_from_slice(b),
        None => {
            return Err(PerfDataError::Truncated {
                what: "file header magic",
                at: 0,
                need: 8,
                have: bytes.len() as u64,
            });
        }
    }
    let mut reversed = MAGIC;
    reversed.reverse();
    let endian = if magic == MAGIC {
        Endian::Little
    } else if magic == reversed {
        Endian::Big
    } else {
        return Err(PerfDataError::BadMagic { found: magic });
    };
    let size = Cursor::new(bytes.get(8..).unwrap_or_default(), 8, endian).u64("header size")?;
    match size {
        PIPE_HEADER_SIZE => Ok((endian, true)),
        FILE_HEADER_SIZE => Ok((endian, false)),
        _ => Err(PerfDataError::BadHeaderSize { size }),
    }
}

impl FileHeader {
    /// Parse the header at the start of `bytes` (a pipe-mode header needs 16 bytes, a
    /// file-mode one 104).
    pub fn parse(bytes: &[u8]) -> Result<Self, PerfDataError> {
        let (endian, pipe) = parse_magic(bytes)?;
        if pipe {
            return Ok(FileHeader {
                endian,
                pipe,
                attr_size: 0,
                attrs: Section::default(),
                data: Section::default(),
                features: [0; 4],
            });
        }
        let mut c = Cursor::new(bytes, 0, endian);
        c.take("file header", 16)?;
        let attr_size = c.u64("attr_size")?;
        let attrs = Section::read(&mut c, "attrs section")?;
        let data = Section::read(&mut c, "data section")?;
        Section::read(&mut c, "event_types section")?;
        let mut features = [0u64; 4];
        for word in &mut features {
            *word = c.u64("feature bitmap")?;
        }
        Ok(FileHeader {
            endian,
            pipe,
            attr_size,
            attrs,
            data,
            features,
        })
    }

    /// Whether feature bit `bit` is set.
    pub fn has_feature(&self, bit: u32) -> bool {
        bit < feature::BITS && self.features[(bit / 64) as usize] >> (bit % 64) & 1 == 1
    }

    /// `(feature bit, section)` of every feature the bitmap announces, in bit order (the
    /// section table right after the data section).
    pub fn feature_sections(&self, file: &[u8]) -> Result<Vec<(u32, Section)>, PerfDataError> {
        let bits: Vec<u32> = (1..feature::BITS)
            .filter(|&b| self.has_feature(b))
            .collect();
        let table = Section {
            offset: self.data.offset.saturating_add(self.data.size),
            // At most 255 entries of 16 bytes.
            size: (bits.len() as u64).saturating_mul(16),
        };
        let mut c = Cursor::new(
            table.slice(file, "feature section table")?,
            table.offset,
            self.endian,
        );
        bits.into_iter()
            .map(|bit| Ok((bit, Section::read(&mut c, "feature section table")?)))
            .collect()
    }
}

/// `HEADER_CLOCK_DATA`: a wall-clock time and the same instant on the samples' clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockData {
    /// The clock of the samples (`perf record -k`; 1 = CLOCK_MONOTONIC).
    pub clockid: u32,
    /// Wall-clock (gettimeofday) nanoseconds since the Unix epoch at the reference.
    pub wall_ns: u64,
    /// Nanoseconds of `clockid` at the reference.
    pub clockid_ns: u64,
}

impl ClockData {
    /// Unix nanoseconds of a sample time on `clockid`: `wall + (time - clockid_ns)`
    /// (`None` before 1970 or past 2554).
    pub fn to_unix_ns(&self, time: u64) -> Option<u64> {
        // Three u64s in an i128: no overflow (per sample: no checks).
        #[allow(clippy::arithmetic_side_effects)]
        let ns = i128::from(self.wall_ns) + i128::from(time) - i128::from(self.clockid_ns);
        u64::try_from(ns).ok()
    }
}

/// An entry of `HEADER_EVENT_DESC`: an attr, its name (`sched:sched_switch`) and ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventDesc {
    /// The attr.
    pub attr: EventAttr,
    /// perf's name of the event.
    pub name: String,
    /// The sample ids of the event (one per CPU or thread).
    pub ids: Vec<u64>,
}

/// The features this reader keeps (the others are skipped).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Features {
    /// `HEADER_HOSTNAME`.
    pub hostname: Option<String>,
    /// `HEADER_OSRELEASE`.
    pub osrelease: Option<String>,
    /// `HEADER_VERSION` (perf's).
    pub perf_version: Option<String>,
    /// `HEADER_ARCH` (`x86_64`, `aarch64`, …).
    pub arch: Option<String>,
    /// `HEADER_NRCPUS`: `(online, available)`.
    pub nr_cpus: Option<(u32, u32)>,
    /// `HEADER_EVENT_DESC`.
    pub event_desc: Vec<EventDesc>,
    /// `HEADER_SAMPLE_TIME`: first and last sample time.
    pub sample_time: Option<(u64, u64)>,
    /// `HEADER_CLOCKID`: the clock's resolution in ns.
    pub clockid_res_ns: Option<u64>,
    /// `HEADER_CLOCK_DATA`.
    pub clock_data: Option<ClockData>,
    /// `HEADER_COMPRESSED` is present (records are zstd-compressed).
    pub compressed: bool,
    /// `HEADER_BUILD_ID`: each module's build id by its name (a user file's path,
    /// `[kernel.kallsyms]`, …), as perf listed them at the end of the recording.
    pub build_ids: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Features {
    /// Take in feature `bit` from its bytes (at absolute offset `base`). The tracing data
    /// (bit 1) is not parsed here: see [`super::tracing_data`].
    pub fn absorb(
        &mut self,
        bit: u32,
        bytes: &[u8],
        base: u64,
        endian: Endian,
    ) -> Result<(), PerfDataError> {
        let mut c = Cursor::new(bytes, base, endian);
        match bit {
            feature::HOSTNAME => self.hostname = Some(header_string(&mut c)?),
            feature::OSRELEASE => self.osrelease = Some(header_string(&mut c)?),
            feature::VERSION => self.perf_version = Some(header_string(&mut c)?),
            feature::ARCH => self.arch = Some(header_string(&mut c)?),
            feature::NRCPUS => {
                self.nr_cpus = Some((c.u32("nr_cpus online")?, c.u32("nr_cpus available")?))
            }
            feature::EVENT_DESC => self.event_desc = event_desc(&mut c, endian)?,
            feature::SAMPLE_TIME => {
                self.sample_time = Some((c.u64("first sample time")?, c.u64("last sample time")?))
            }
            feature::CLOCKID => self.clockid_res_ns = Some(c.u64("clockid resolution")?),
            feature::COMPRESSED => self.compressed = true,
            feature::BUILD_ID => self.build_ids = build_ids(&mut c)?,
            feature::CLOCK_DATA => {
                let version = c.u32("clock data version")?;
                if version != 1 {
                    return Err(PerfDataError::Unsupported {
                        at: base,
                        what: format!("clock data version {version} (known: 1)"),
                    });
                }
                self.clock_data = Some(ClockData {
                    clockid: c.u32("clock data clockid")?,
                    wall_ns: c.u64("clock data wall-clock time")?,
                    clockid_ns: c.u64("clock data clockid time")?,
                });
            }
            _ => {}
        }
        Ok(())
    }

    /// The traced machine's `long` size in bytes as `HEADER_ARCH` implies it (the
    /// tracing data's own long size takes precedence where present).
    pub fn arch_long_size(&self) -> Option<u8> {
        let arch = self.arch.as_deref()?;
        let four = [
            "i386", "i486", "i586", "i686", "x86", "arm", "armv7l", "armv6l", "mips", "ppc",
            "s390", "riscv32",
        ];
        Some(if four.contains(&arch) || arch.starts_with("armv7") {
            4
        } else {
            8
        })
    }
}

/// `PERF_RECORD_MISC_BUILD_ID_SIZE`: the entry's length byte holds its build id's length.
const MISC_BUILD_ID_SIZE: u16 = 1 << 15;
/// The fixed part of a `HEADER_BUILD_ID` entry: header, pid, 20 id bytes, the length
/// byte and 3 reserved.
const BUILD_ID_HEAD: u16 = 36;

/// `HEADER_BUILD_ID`: `struct perf_record_header_build_id` after one another to the end
/// of the section (`u32 type, u16 misc, u16 size`, `pid_t pid`, 20 id bytes, `u8
/// len`, 3 reserved, the name NUL-padded to `size`); without
/// `PERF_RECORD_MISC_BUILD_ID_SIZE` in `misc` the id is 20 bytes. The name → the id.
fn build_ids(c: &mut Cursor<'_>) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, PerfDataError> {
    let mut out = BTreeMap::new();
    while !c.rest().is_empty() {
        let at = c.at();
        let kind = c.u32("build id entry type")?;
        let misc = c.u16("build id entry misc")?;
        let size = c.u16("build id entry size")?;
        let Some(name_len) = size.checked_sub(BUILD_ID_HEAD) else {
            return Err(PerfDataError::BadRecord { at, kind, size });
        };
        c.u32("build id entry pid")?;
        let id = c.take("build id", 20)?;
        let len = c.u8("build id length")?;
        c.take("build id entry reserved bytes", 3)?;
        let name = c.take("build id entry name", usize::from(name_len))?;
        let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
        let len = match misc & MISC_BUILD_ID_SIZE {
            0 => id.len(),
            _ => usize::from(len).min(id.len()),
        };
        out.insert(name.to_vec(), id[..len].to_vec());
    }
    Ok(out)
}

/// `struct perf_header_string`: `u32 len` then `len` bytes, NUL-padded.
fn header_string(c: &mut Cursor<'_>) -> Result<String, PerfDataError> {
    let len = c.u32("string length")?;
    Ok(text(c.take_u64("string", u64::from(len))?))
}

/// `HEADER_EVENT_DESC`: `u32 nr, u32 attr_size`, then per event the attr, `u32 nr_ids`,
/// the name string and the ids.
fn event_desc(c: &mut Cursor<'_>, endian: Endian) -> Result<Vec<EventDesc>, PerfDataError> {
    let nr = c.u32("event_desc count")?;
    let attr_size = c.u32("event_desc attr_size")?;
    let mut out = Vec::new();
    for _ in 0..nr {
        let at = c.at();
        let attr = EventAttr::parse(
            c.take_u64("event_desc attr", u64::from(attr_size))?,
            at,
            endian,
        )?;
        let nr_ids = c.u32("event_desc id count")?;
        let name = header_string(c)?;
        let ids_bytes = c.take_u64("event_desc ids", u64::from(nr_ids) * 8)?;
        let mut ids = Cursor::new(ids_bytes, 0, endian);
        let ids = (0..nr_ids)
            .map(|_| ids.u64("id"))
            .collect::<Result<_, _>>()?;
        out.push(EventDesc { attr, name, ids });
    }
    Ok(out)
}
