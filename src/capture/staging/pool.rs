//! The staging pool's sizes: chunks allocated (and touched) at start, the only knobs
//! of the session's side of the pipeline's memory.

/// `n` buffers of `capacity` bytes whose pages are all mapped now (filled with a
/// non-zero byte: zeroed memory comes from calloc as pages the kernel maps only when
/// first written), so memory use is fixed from the start.
pub fn touched_buffers(n: usize, capacity: usize) -> impl Iterator<Item = Vec<u8>> {
    (0..n).map(move |_| vec![0xa5; capacity])
}

/// Bytes of staged records a chunk collects before the session sends it on.
pub const STAGE_BYTES: usize = 192 * 1024;

/// Bytes allocated per chunk: [`STAGE_BYTES`] plus room for the one record (< 64 KiB,
/// perf's record size is a u16) and header that may pass it.
pub const STAGE_CAPACITY: usize = STAGE_BYTES + 64 * 1024 + 64;

/// Chunks in the pool: 32 × 256 KiB = 8 MiB allocated, of which the chunks fill 6 MiB
/// ([`STAGE_BYTES`] each) before they are sent: ≈ 65 k sys_enter records (96 bytes
/// staged each) absorb a burst the formatter cannot follow at once, as perf record's
/// output file does for perf.
pub const STAGE_CHUNKS: usize = 32;
