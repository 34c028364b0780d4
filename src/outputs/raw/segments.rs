//! `record --call-graph dwarf --raw`: perf unwinds the user stacks of the file itself
//! (libunwind or libdw), and reads each module's `.eh_frame_hdr` at its address in the
//! process, which lies in a read-only segment of the module, not in the executable one
//! the trackers report (perf's own recording asks the kernel for every mapping,
//! `mmap_data`). So with each executable mapping of a file written, the file's other
//! loaded segments (its `PT_LOAD` program headers) are written as read-only
//! `PERF_RECORD_MMAP2` records at the addresses its load bias puts them. The program
//! headers are read once per path (a few KiB at the start of the file; [`MAX_PATHS`]
//! kept); a file that cannot be read or is no 64-bit ELF gets none: perf's unwinding
//! stops at its frames, nothing else changes.

use std::collections::HashMap;
use std::io::Read as _;
use std::sync::Arc;

use object::elf::{FileHeader64, PF_X, PT_LOAD};
use object::read::elf::{FileHeader as _, ProgramHeader as _};
use uevrec_parsers::perf_data::writer::{self, Mmap2, Stamp};

/// Paths whose segments are kept at most (all forgotten when full: read again).
pub const MAX_PATHS: usize = 4096;
/// Bytes read from the start of a file for its program headers.
const HEAD_BYTES: u64 = 64 * 1024;
/// The page size mappings are aligned to.
const PAGE: u64 = 4096;

/// One `PT_LOAD` program header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Load {
    offset: u64,
    vaddr: u64,
    filesz: u64,
    exec: bool,
}

/// The loaded segments of the files seen, by path.
#[derive(Debug, Default)]
pub struct Segments {
    by_path: HashMap<Vec<u8>, Option<Arc<[Load]>>>,
}

impl Segments {
    /// After the executable mapping `m` is written: the read-only mappings of its
    /// file's other segments (`stamp`: the trailer of `m`'s record).
    pub fn push_beside(&mut self, out: &mut Vec<u8>, stamp: &Stamp, m: &Mmap2<'_>) {
        if !m.path.starts_with(b"/") {
            // [vdso], //anon, memfd: …: no file to read here.
            return;
        }
        if self.by_path.len() >= MAX_PATHS {
            self.by_path.clear();
        }
        let loads = self
            .by_path
            .entry(m.path.to_vec())
            .or_insert_with(|| read_loads(m.pid, m.path).map(Arc::from))
            .clone();
        let Some(loads) = loads else {
            return;
        };
        for data in beside(&loads, m) {
            let record = Mmap2 {
                addr: data.0,
                len: data.1,
                pgoff: data.2,
                ..*m
            };
            writer::push_data_mmap2(out, stamp, &record);
        }
    }
}

/// `(start, length, file offset)` of each non-executable segment of a file whose
/// executable segment is mapped as `m` (none when `m` is no segment of `loads`).
fn beside(loads: &[Load], m: &Mmap2<'_>) -> Vec<(u64, u64, u64)> {
    let down = |v: u64| v & !(PAGE - 1);
    let up = |v: u64| v.saturating_add(PAGE - 1) & !(PAGE - 1);
    let Some(text) = loads.iter().find(|l| l.exec && down(l.offset) == m.pgoff) else {
        return Vec::new();
    };
    // The load bias: where the file's address 0 is in the process.
    let bias = m.addr.wrapping_sub(down(text.vaddr));
    loads
        .iter()
        .filter(|l| !l.exec && l.filesz > 0)
        .map(|l| {
            let start = down(bias.wrapping_add(l.vaddr));
            let end = up(bias.wrapping_add(l.vaddr).wrapping_add(l.filesz));
            (start, end.wrapping_sub(start), down(l.offset))
        })
        .collect()
}

/// The `PT_LOAD` headers of `path` as process `pid` sees it (through its root, for a
/// process of another mount namespace, while it lives), or `None`.
fn read_loads(pid: u32, path: &[u8]) -> Option<Vec<Load>> {
    use std::os::unix::ffi::OsStrExt as _;
    let path = std::ffi::OsStr::from_bytes(path);
    let through_root = std::path::Path::new(&format!("/proc/{pid}/root")).join(
        std::path::Path::new(path)
            .strip_prefix("/")
            .unwrap_or(path.as_ref()),
    );
    let file = std::fs::File::open(through_root)
        .or_else(|_| std::fs::File::open(path))
        .ok()?;
    let mut head = Vec::new();
    file.take(HEAD_BYTES).read_to_end(&mut head).ok()?;
    loads_of(&head)
}

/// The `PT_LOAD` headers of the 64-bit ELF file starting with `head`.
fn loads_of(head: &[u8]) -> Option<Vec<Load>> {
    let header = FileHeader64::<object::Endianness>::parse(head).ok()?;
    let endian = header.endian().ok()?;
    let headers = header.program_headers(endian, head).ok()?;
    Some(
        headers
            .iter()
            .filter(|p| p.p_type(endian) == PT_LOAD)
            .map(|p| Load {
                offset: p.p_offset(endian),
                vaddr: p.p_vaddr(endian),
                filesz: p.p_filesz(endian),
                exec: p.p_flags(endian).0 & PF_X.0 != 0,
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mmap2(addr: u64, pgoff: u64) -> Mmap2<'static> {
        Mmap2 {
            pid: 1,
            tid: 1,
            addr,
            len: 0x1000,
            pgoff,
            build_id: &[],
            path: b"/lib/x.so",
        }
    }

    /// libc's layout: R, RX, R (with `.eh_frame_hdr`), RW.
    const LIBC: [Load; 4] = [
        Load {
            offset: 0,
            vaddr: 0,
            filesz: 0x26000,
            exec: false,
        },
        Load {
            offset: 0x26000,
            vaddr: 0x26000,
            filesz: 0x17a000,
            exec: true,
        },
        Load {
            offset: 0x1a0000,
            vaddr: 0x1a0000,
            filesz: 0x55000,
            exec: false,
        },
        Load {
            offset: 0x1f5f80,
            vaddr: 0x1f6f80,
            filesz: 0x5000,
            exec: false,
        },
    ];

    #[test]
    fn the_other_segments_at_the_load_bias() {
        let base = 0x7f00_0000_0000;
        let got = beside(&LIBC, &mmap2(base + 0x26000, 0x26000));
        assert_eq!(
            got,
            [
                (base, 0x26000, 0),
                (base + 0x1a0000, 0x55000, 0x1a0000),
                // Not page-aligned: the pages around it.
                (base + 0x1f6000, 0x6000, 0x1f5000),
            ]
        );
        // A mapping of no executable segment: nothing.
        assert!(beside(&LIBC, &mmap2(base, 0)).is_empty());
    }

    #[test]
    fn this_test_binary_has_segments_beside_its_text() {
        let exe = std::env::current_exe().unwrap();
        let mut head = Vec::new();
        std::fs::File::open(&exe)
            .unwrap()
            .take(HEAD_BYTES)
            .read_to_end(&mut head)
            .unwrap();
        let loads = loads_of(&head).expect("an ELF file");
        assert!(loads.iter().any(|l| l.exec), "{loads:?}");
        assert!(loads.iter().any(|l| !l.exec), "{loads:?}");
        assert_eq!(loads_of(b"not an ELF file"), None);
    }
}
