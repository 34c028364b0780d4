//! Reading one perf mmap ring, exactly per the ABI (`include/uapi/linux/perf_event.h`).
//!
//! The mapping is 1 metadata page + 2^n data pages. The kernel advances `data_head`
//! (offset 1024) as it writes; the reader load-acquires it, reads the records between
//! its tail and the head, then store-releases `data_tail` (offset 1032) so the kernel
//! may reuse the space. Records may wrap past the end of the data area; those are copied
//! into a scratch buffer so the caller always sees one contiguous record.

use std::io;
use std::ops::ControlFlow;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::{MmapOptions, MmapRaw};
use uevrec_parsers::perf_sample::{HEADER_SIZE, parse_header};

use super::sys::PerfFd;

const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;
const DATA_OFFSET: usize = 1040;
const DATA_SIZE: usize = 1048;

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

/// Data pages of one per-CPU ring: a power of two from 1 to [`RingPages::MAX`]. The one
/// place that says what a valid ring size is (the CLI parses into it, the session and
/// the rings take it as given).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingPages(usize);

impl RingPages {
    /// The largest ring: 65536 pages (256 MiB per CPU with 4 KiB pages).
    pub const MAX: usize = 1 << 16;
    /// The default ring: 128 pages (512 KiB per CPU with 4 KiB pages).
    pub const DEFAULT: RingPages = RingPages(128);

    /// `pages` rounded up to a power of two; an error (the message for the user) when it
    /// is 0 or more than [`RingPages::MAX`].
    pub fn round_up(pages: u64) -> Result<RingPages, String> {
        match pages {
            0 => Err("the ring must hold at least one page".into()),
            p if p > Self::MAX as u64 => Err(format!(
                "{p} pages per CPU is too large (at most {} pages, {} MiB with {} KiB pages)",
                Self::MAX,
                Self::MAX.saturating_mul(page_size()) >> 20,
                page_size() >> 10
            )),
            p => Ok(RingPages(p.next_power_of_two() as usize)),
        }
    }

    /// The number of data pages (a power of two).
    pub fn get(self) -> usize {
        self.0
    }
}

impl Default for RingPages {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// One mmap'ed perf ring.
#[derive(Debug)]
pub struct Ring {
    map: MmapRaw,
    data_offset: usize,
    data_size: u64,
    scratch: Vec<u8>,
    /// Records whose header was impossible (size < 8 or past the head); the rest of the
    /// ring was skipped when one was seen.
    pub corrupt: u64,
}

impl Ring {
    /// Map `data_pages` (a power of two) data pages of `fd`'s ring.
    pub fn map(fd: &PerfFd, data_pages: usize) -> io::Result<Ring> {
        if !data_pages.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "ring pages must be a power of two",
            ));
        }
        let page = page_size();
        let len = data_pages
            .checked_add(1)
            .and_then(|n| n.checked_mul(page))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "ring too large"))?;
        let map = MmapOptions::new().len(len).map_raw(fd.as_raw_fd())?;
        let mut ring = Ring {
            map,
            data_offset: page,
            // `len` is (data_pages + 1) pages.
            data_size: len.saturating_sub(page) as u64,
            scratch: Vec::new(),
            corrupt: 0,
        };
        // Kernels since 4.1 publish the data area's place; older ones use page 1 onward.
        let (off, size) = (
            ring.meta(DATA_OFFSET).load(Ordering::Relaxed),
            ring.meta(DATA_SIZE).load(Ordering::Relaxed),
        );
        if size != 0
            && (off as usize) >= page
            && off.checked_add(size).is_some_and(|end| end <= len as u64)
        {
            ring.data_offset = off as usize;
            ring.data_size = size;
        }
        ring.scratch = vec![0; usize::from(u16::MAX)];
        Ok(ring)
    }

    /// A ring over anonymous memory, written with [`Ring::publish`] instead of by the
    /// kernel: for tests, and for benches of the session's work per record
    /// (benches/stages.rs).
    pub fn anonymous(data_pages: usize) -> io::Result<Ring> {
        let page = page_size();
        let len = data_pages
            .checked_add(1)
            .and_then(|n| n.checked_mul(page))
            .filter(|_| data_pages.is_power_of_two())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bad ring size"))?;
        let map = MmapOptions::new().len(len).map_anon()?;
        Ok(Ring {
            map: MmapRaw::from(map),
            data_offset: page,
            data_size: len.saturating_sub(page) as u64,
            scratch: vec![0; usize::from(u16::MAX)],
            corrupt: 0,
        })
    }

    /// Play the kernel on a ring of [`Ring::anonymous`]: write `records` at the head
    /// (wrapping) and publish the new head. False (nothing written) when they do not fit
    /// in the free space.
    pub fn publish(&self, records: &[u8]) -> bool {
        let head = self.meta(DATA_HEAD).load(Ordering::Relaxed);
        let free = self.data_size.saturating_sub(self.pending());
        if records.len() as u64 > free {
            return false;
        }
        let size = self.data_size as usize;
        let start = self.place(head);
        let first = records.len().min(size.saturating_sub(start));
        let rest = records.len().saturating_sub(first);
        // SAFETY: [start, start+first) and [0, rest) lie inside the data area (the
        // records fit in its free space, checked above), which this process alone writes.
        unsafe {
            let base = self.map.as_mut_ptr().add(self.data_offset);
            std::ptr::copy_nonoverlapping(records.as_ptr(), base.add(start), first);
            std::ptr::copy_nonoverlapping(records.as_ptr().add(first), base, rest);
        }
        self.meta(DATA_HEAD)
            .store(head.wrapping_add(records.len() as u64), Ordering::Release);
        true
    }

    /// The u64 of the metadata page at `offset`.
    fn meta(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: offsets 1024..1056 lie in the first (metadata) page of a mapping at
        // least one page long, 8-aligned (the mapping is page-aligned); the kernel
        // accesses these words atomically, so viewing them as AtomicU64 is sound.
        unsafe { &*(self.map.as_ptr().add(offset) as *const AtomicU64) }
    }

    /// Where ring position `pos` lies in the data area. The kernel's data areas are 2^n
    /// pages: a mask, not a division (a 64-bit `%` per call showed in the session's
    /// profile, BENCHMARKS.md issue 41).
    #[allow(clippy::arithmetic_side_effects)] // data_size is never 0: at least one page.
    #[inline]
    fn place(&self, pos: u64) -> usize {
        if self.data_size.is_power_of_two() {
            (pos & (self.data_size - 1)) as usize
        } else {
            (pos % self.data_size) as usize
        }
    }

    /// The header of the record at ring position `pos` (the caller checked that 8 bytes
    /// are there): read in place, or copied out when it wraps past the end.
    #[inline]
    fn header_at(&self, pos: u64) -> [u8; HEADER_SIZE] {
        let mut hb = [0u8; HEADER_SIZE];
        let start = self.place(pos);
        if start
            .checked_add(HEADER_SIZE)
            .is_some_and(|end| end as u64 <= self.data_size)
        {
            // SAFETY: the 8 bytes lie inside the data area and between tail and head,
            // which the kernel leaves alone until data_tail passes them.
            unsafe {
                let at = self
                    .map
                    .as_ptr()
                    .add(self.data_offset.saturating_add(start));
                std::ptr::copy_nonoverlapping(at, hb.as_mut_ptr(), HEADER_SIZE);
            }
        } else {
            self.copy_out(pos, &mut hb);
        }
        hb
    }

    /// Bytes the kernel has written that are not yet consumed.
    pub fn pending(&self) -> u64 {
        let head = self.meta(DATA_HEAD).load(Ordering::Acquire);
        head.wrapping_sub(self.meta(DATA_TAIL).load(Ordering::Relaxed))
    }

    /// Copy `len` bytes starting at ring position `pos` (modulo the data size) into `dst`.
    fn copy_out(&self, pos: u64, dst: &mut [u8]) {
        let size = self.data_size as usize;
        let start = self.place(pos);
        let first = dst.len().min(size.saturating_sub(start));
        // SAFETY: [start, start+first) and [0, len-first) lie inside the data area
        // (len ≤ 65535 ≤ data size is checked by the caller); the kernel does not write
        // the bytes between tail and head until data_tail moves past them.
        unsafe {
            let base = self.map.as_ptr().add(self.data_offset);
            std::ptr::copy_nonoverlapping(base.add(start), dst.as_mut_ptr(), first);
            let rest = dst.len().saturating_sub(first);
            std::ptr::copy_nonoverlapping(base, dst.as_mut_ptr().add(first), rest);
        }
    }

    /// Hand every complete record (header included) to `f`, oldest first, until the ring
    /// is empty or `f` breaks; consumed space is released to the kernel as it goes.
    /// Returns the number of records handed over.
    pub fn read(&mut self, f: impl FnMut(&[u8]) -> ControlFlow<()>) -> u64 {
        self.read_until(|_| false, f)
    }

    /// [`Ring::read`], stopping before the first record for which `stop_before` is true
    /// (that record and the ones after it stay in the ring for the next read).
    pub fn read_until(
        &mut self,
        mut stop_before: impl FnMut(&[u8]) -> bool,
        mut f: impl FnMut(&[u8]) -> ControlFlow<()>,
    ) -> u64 {
        let head = self.meta(DATA_HEAD).load(Ordering::Acquire);
        let mut tail = self.meta(DATA_TAIL).load(Ordering::Relaxed);
        let release_every = (self.data_size / 4).max(1);
        let mut unreleased = 0u64;
        let mut n = 0u64;
        while head.wrapping_sub(tail) >= HEADER_SIZE as u64 {
            let hb = self.header_at(tail);
            let size = parse_header(&hb).map_or(0, |h| u64::from(h.size));
            if size < HEADER_SIZE as u64 || size > head.wrapping_sub(tail) || size > self.data_size
            {
                // Cannot happen with a sane kernel; skip what is there rather than loop.
                self.corrupt = self.corrupt.saturating_add(1);
                tail = head;
                break;
            }
            let start = self.place(tail);
            let flow = if (start as u64)
                .checked_add(size)
                .is_some_and(|end| end <= self.data_size)
            {
                // SAFETY: the record lies inside the data area and between tail and
                // head, which the kernel leaves alone until data_tail passes it.
                let rec = unsafe {
                    std::slice::from_raw_parts(
                        self.map
                            .as_ptr()
                            .add(self.data_offset.saturating_add(start)),
                        size as usize,
                    )
                };
                if stop_before(rec) {
                    break;
                }
                f(rec)
            } else {
                let mut scratch = std::mem::take(&mut self.scratch);
                self.copy_out(tail, &mut scratch[..size as usize]);
                let rec = &scratch[..size as usize];
                let flow = if stop_before(rec) { None } else { Some(f(rec)) };
                self.scratch = scratch;
                match flow {
                    Some(flow) => flow,
                    None => break,
                }
            };
            n = n.saturating_add(1);
            tail = tail.wrapping_add(size);
            unreleased = unreleased.saturating_add(size);
            if unreleased >= release_every {
                self.meta(DATA_TAIL).store(tail, Ordering::Release);
                unreleased = 0;
            }
            if flow.is_break() {
                break;
            }
        }
        self.meta(DATA_TAIL).store(tail, Ordering::Release);
        n
    }
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    #[test]
    fn ring_pages_are_powers_of_two_within_the_one_limit() {
        assert_eq!(RingPages::round_up(3).map(RingPages::get), Ok(4));
        assert_eq!(RingPages::round_up(1).map(RingPages::get), Ok(1));
        let max = RingPages::MAX as u64;
        assert_eq!(
            RingPages::round_up(max).map(RingPages::get),
            Ok(RingPages::MAX)
        );
        assert!(RingPages::round_up(0).is_err());
        assert!(
            RingPages::round_up(max + 1)
                .unwrap_err()
                .contains("at most 65536 pages")
        );
        assert_eq!(RingPages::default().get(), 128);
    }

    fn anon(data_pages: usize) -> Ring {
        Ring::anonymous(data_pages).unwrap()
    }

    fn push(ring: &Ring, rec: &[u8]) {
        assert!(ring.publish(rec));
    }

    fn record(kind: u32, size: u16, fill: u8) -> Vec<u8> {
        let mut v = kind.to_ne_bytes().to_vec();
        v.extend_from_slice(&0u16.to_ne_bytes());
        v.extend_from_slice(&size.to_ne_bytes());
        v.resize(usize::from(size), fill);
        v
    }

    fn collect(ring: &mut Ring, stop_after: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        ring.read(|r| {
            out.push(r.to_vec());
            if out.len() == stop_after {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        out
    }

    #[test]
    fn reads_records_in_order_and_releases_the_tail() {
        let mut ring = anon(1);
        let (a, b) = (record(9, 24, 0xaa), record(2, 40, 0xbb));
        push(&ring, &a);
        push(&ring, &b);
        assert_eq!(ring.pending(), 64);
        assert_eq!(collect(&mut ring, usize::MAX), vec![a, b]);
        assert_eq!(ring.meta(DATA_TAIL).load(Ordering::Relaxed), 64);
        assert_eq!(ring.pending(), 0);
        assert!(collect(&mut ring, usize::MAX).is_empty());
    }

    #[test]
    fn wrapped_records_arrive_whole() {
        let mut ring = anon(1);
        let size = ring.data_size;
        // Fill up to 16 bytes before the end, consume, then write a record across it.
        let filler = record(9, (size - 16) as u16, 1);
        push(&ring, &filler);
        assert_eq!(collect(&mut ring, usize::MAX).len(), 1);
        let wrapped = record(9, 48, 7);
        let mut wrapped = wrapped;
        wrapped[40..].copy_from_slice(b"endbytes");
        push(&ring, &wrapped);
        let got = collect(&mut ring, usize::MAX);
        assert_eq!(got, vec![wrapped]);
        assert_eq!(ring.meta(DATA_TAIL).load(Ordering::Relaxed), size - 16 + 48);
    }

    #[test]
    fn break_stops_after_the_record_and_resumes() {
        let mut ring = anon(1);
        let recs: Vec<_> = (0..5).map(|i| record(9, 16, i)).collect();
        for r in &recs {
            push(&ring, r);
        }
        assert_eq!(collect(&mut ring, 2), recs[..2].to_vec());
        assert_eq!(ring.meta(DATA_TAIL).load(Ordering::Relaxed), 32);
        assert_eq!(collect(&mut ring, usize::MAX), recs[2..].to_vec());
    }

    #[test]
    fn read_until_leaves_the_record_it_stops_before() {
        let mut ring = anon(1);
        let recs: Vec<_> = (0..4).map(|i| record(9, 16, i)).collect();
        for r in &recs {
            push(&ring, r);
        }
        let mut got = Vec::new();
        ring.read_until(
            |r| r[8] == 2,
            |r| {
                got.push(r.to_vec());
                ControlFlow::Continue(())
            },
        );
        assert_eq!(got, recs[..2].to_vec());
        assert_eq!(ring.pending(), 32);
        assert_eq!(collect(&mut ring, usize::MAX), recs[2..].to_vec());
    }

    #[test]
    fn impossible_header_skips_to_the_head() {
        let mut ring = anon(1);
        push(&ring, &record(9, 16, 0));
        let mut bad = record(9, 16, 0);
        bad[6..8].copy_from_slice(&4u16.to_ne_bytes());
        push(&ring, &bad);
        assert_eq!(collect(&mut ring, usize::MAX).len(), 1);
        assert_eq!(ring.corrupt, 1);
        assert_eq!(ring.pending(), 0);
    }
}
