//! What several benches stage: `raw_syscalls:sys_enter` records as the session stages them.

use uevrec::capture::staging::StagedChunk;
use uevrec_parsers::RecordStamp;

/// A time in 2026 (Unix ns).
const T0: u64 = 1_795_345_200_000_000_000;

/// A chunk of `batch` sys_enter entries (common header, syscall id 110, six arguments:
/// 64 bytes), from `pids` processes in turn (4242, 4243, …), on two CPUs, 250 ns apart.
pub fn sys_enter_chunk(batch: u64, pids: u32) -> StagedChunk {
    let mut chunk = StagedChunk::default();
    for i in 0..batch {
        let pid = 4242 + (i % u64::from(pids)) as u32;
        let mut raw = Vec::with_capacity(64);
        raw.extend_from_slice(&443u16.to_ne_bytes());
        raw.extend_from_slice(&[0, 0]);
        raw.extend_from_slice(&(pid as i32).to_ne_bytes());
        raw.extend_from_slice(&110i64.to_ne_bytes());
        for a in 0..6u64 {
            raw.extend_from_slice(&(i * 7 + a).to_ne_bytes());
        }
        let stamp = RecordStamp {
            time_unix_ns: Some(T0 + i * 250),
            cpu: (i % 2) as u32,
            pid,
            tid: pid,
        };
        chunk.push_record(0, &stamp, &raw);
    }
    chunk
}
