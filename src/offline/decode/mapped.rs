//! A mapped input read once from start to end: its pages let go behind the reader
//! ([`MapWindow`], [`MappedInput::release_before`]) and, with workers, mapped in ahead of it;
//! a SIGBUS from a file shrinking under the mapping reported, not fatal without a word.

use std::fs::File;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How often (bytes of input) the pages of a mapped input behind the reader are let go.
pub const RELEASE_STEP: usize = 4 << 20;

/// When to let the pages of a mapped input behind the reader go: every [`RELEASE_STEP`]
/// bytes of input, those before the oldest record still held for its time order
/// ([`uevrec_parsers::to_lines::perf_data::LineDecoder::release_point`]: records held from further back than the order
/// buffer's bound are copied first). The resident part of the mapping is thus what the
/// held records span (perf's last two rounds) plus [`RELEASE_STEP`], at most
/// `--order-buffer` + [`RELEASE_STEP`].
#[derive(Debug)]
pub struct MapWindow {
    next: u64,
}

impl Default for MapWindow {
    fn default() -> Self {
        MapWindow {
            next: RELEASE_STEP as u64,
        }
    }
}

impl MapWindow {
    /// With the record at `offset` read: whether it is time to let some input go, and
    /// `offset` as a `usize` if so.
    pub fn due(&mut self, offset: u64) -> Option<usize> {
        if offset < self.next {
            return None;
        }
        self.next = offset.saturating_add(RELEASE_STEP as u64);
        usize::try_from(offset).ok()
    }
}

/// Bytes of a mapped input that the page thread of `decode --threads` maps ahead of the
/// reader's point ([`MappedInput::populate`]).
pub const PAGE_AHEAD: usize = 16 << 20;

/// How far behind the reader's point the page thread of `decode --threads` lets a mapped
/// input's pages go: past the records still with the formatter workers (the staging
/// channel's chunks and the workers' queues, a few thousand records each, hold the
/// places of some 25 MB of a 120-byte-record perf.data); a page let go too early is only
/// read in again. The resident part of the mapping is then at most `--order-buffer` +
/// [`RELEASE_STEP`] + this + [`PAGE_AHEAD`].
pub const PAGE_LAG: usize = 64 << 20;

/// A file mapped read-only for one pass from start to end (`MADV_SEQUENTIAL`), whose
/// pages behind the reader are let go ([`MappedInput::release_before`]) so that its
/// resident part stays bounded: the way `uevrec decode` reads a perf.data, without a copy
/// of its bytes (the page cache's pages are mapped).
pub struct MappedInput {
    map: memmap2::Mmap,
    /// Bytes from the start already let go (a multiple of the page size).
    released: AtomicUsize,
    /// Bytes from the start already mapped in ([`MappedInput::populate`]).
    populated: AtomicUsize,
}

impl MappedInput {
    /// `file` mapped.
    pub fn open(file: &File) -> Result<Self, String> {
        let map = map_file(file)?;
        // Only a hint: reading works without it.
        let _ = map.advise(memmap2::Advice::Sequential);
        Ok(MappedInput {
            map,
            released: AtomicUsize::new(0),
            populated: AtomicUsize::new(0),
        })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Drop the pages wholly before byte `end` from this process (`MADV_DONTNEED`; the
    /// file's pages stay in the page cache, and reading them again faults them back in).
    pub fn release_before(&self, end: usize) {
        let page = crate::capture::perf::page_size();
        let end = end.min(self.map.len()) / page * page;
        let from = self.released.load(Ordering::Relaxed);
        if end <= from {
            return;
        }
        // SAFETY: a private read-only mapping of a file: MADV_DONTNEED only unmaps the
        // pages; touching them again maps the file's bytes again, unchanged (a file
        // changed underneath is the caveat of `map_file`, not of this call). `from..end`
        // lies inside the mapping.
        let dropped = unsafe {
            self.map
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, from, end - from)
        };
        if dropped.is_ok() {
            self.released.store(end, Ordering::Relaxed);
        }
    }

    /// Drop the pages wholly inside bytes `from..to` from this process (`MADV_DONTNEED`),
    /// whether or not they were let go before: for range decoding (`decode
    /// --range-size`), whose reading is not one pass from start to end.
    pub fn release_range(&self, from: usize, to: usize) {
        let page = crate::capture::perf::page_size();
        let from = from.div_ceil(page) * page;
        let to = to.min(self.map.len()) / page * page;
        if to <= from {
            return;
        }
        // SAFETY: as in `release_before`: a private read-only file mapping, `from..to`
        // inside it; the pages are read in again if touched.
        let _ = unsafe {
            self.map
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, from, to - from)
        };
    }

    /// Map in the pages of bytes `from..to` (`MADV_POPULATE_READ`; a hint, as
    /// [`MappedInput::populate`]), whatever was mapped in before: for workers that read
    /// pieces of the file in no one order (ranges, windows of time).
    pub fn populate_range(&self, from: usize, to: usize) {
        let page = crate::capture::perf::page_size();
        let from = from / page * page;
        let to = to.min(self.map.len());
        if to > from {
            let _ = self
                .map
                .advise_range(memmap2::Advice::PopulateRead, from, to - from);
        }
    }

    /// Map in the pages of bytes `from..to` not mapped in yet by an earlier call
    /// (`MADV_POPULATE_READ`, Linux 5.14+; only a hint: on failure the reader's own page
    /// faults map them), so that the thread reading them next does not take the faults.
    pub fn populate(&self, from: usize, to: usize) {
        let from = from.max(self.populated.load(Ordering::Relaxed));
        let to = to.min(self.map.len());
        if to <= from {
            return;
        }
        self.populate_range(from, to);
        self.populated.store(to, Ordering::Relaxed);
    }
}

/// `file` mapped read-only.
pub(crate) fn map_file(file: &File) -> Result<memmap2::Mmap, String> {
    truncation_guard();
    // SAFETY: a read-only private mapping of a file opened for reading; nothing here writes
    // through it. Another process truncating the file while it is mapped faults the reads
    // (SIGBUS), as with every mmap reader (perf's too): `truncation_guard` turns that into
    // a message and exit status 1; the decoder itself never trusts the bytes.
    unsafe { memmap2::Mmap::map(file) }.map_err(|e| format!("mapping: {e}"))
}

/// What `uevrec decode` says when its mapped input shrinks under it.
pub(crate) const TRUNCATED: &[u8] =
    b"uevrec decode: the input file shrank while it was being read (truncated by another \
program?); stopped. Decode a finished copy of the file, or pipe it in (uevrec decode - < FILE).\n";

/// Install (once) a SIGBUS handler that reports [`TRUNCATED`] and exits with status 1:
/// a read of a mapped page past the file's new end raises SIGBUS, which would otherwise
/// kill the process without a word.
pub(crate) fn truncation_guard() {
    extern "C" fn on_sigbus(_: libc::c_int) {
        // SAFETY: write(2) and _exit(2) are async-signal-safe; the buffer is static.
        unsafe {
            libc::write(2, TRUNCATED.as_ptr().cast(), TRUNCATED.len());
            libc::_exit(1);
        }
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: a zeroed sigaction with a plain handler (no SA_SIGINFO) and an empty
        // mask is a valid argument; the handler only calls async-signal-safe functions.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
        }
    });
}
