//! A plain user_event and an EventHeader event written from a known call chain, for
//! uevrec's call stacks (`record -g`, `--call-graph dwarf`) on real user_events.
//!
//! ```text
//! stack_chain [--name NAME] [--count N] [START OPTIONS]
//! ```
//! Registers the plain event `<NAME>_plain u32 seq` and the EventHeader event
//! `<NAME>_L4K1` (provider NAME, event `Chain`, one field `seq`: Value32), then writes
//! each N times (seq 0..N, plain first) through `write_through_chain` → `outer` →
//! `middle` → `inner` → `syscall(SYS_writev)`. The three C functions are in
//! `src/chain.c`, built with frame pointers (build.rs); `write_through_chain` is Rust,
//! without them, so a frame-pointer walk ends after it.
//!
//! Report lines: `{"registered":TRACEPOINT}` per event, `{"wrote":TRACEPOINT,"seq":N}`
//! per record the kernel took, `{"done":"stack_chain","written":N}`.

use std::ffi::{c_int, c_long};
use std::os::fd::{AsFd, AsRawFd};

use clap::Parser;
use serde_json::json;
use uevrec_samples::{Event, Flags, StartArgs, UserEvents, announce, command, fail, report};

#[derive(Parser)]
#[command(about = "Write a plain and an EventHeader user_event from a known call chain")]
struct Args {
    /// The EventHeader provider; the plain event is `<NAME>_plain`.
    #[arg(long, default_value = "UevrecStacks")]
    name: String,
    /// Records of each event.
    #[arg(long, default_value_t = 3)]
    count: u32,
    #[command(flatten)]
    start: StartArgs,
}

unsafe extern "C" {
    /// `src/chain.c`: `middle` → `inner` → `syscall(SYS_writev, fd, iov, count)`; the
    /// system call's result (-1 with errno set on failure).
    fn outer(fd: c_int, iov: *const libc::iovec, count: c_int) -> c_long;
}

/// The EventHeader event's bytes before its field: the header (flags 0x07: 64-bit
/// pointers, little-endian, an extension follows; version, id, tag, opcode 0; level 4),
/// then one metadata extension block: the event name `Chain` and the field `seq`
/// (encoding 4, Value32, default format: unsigned).
fn eventheader_prefix() -> Vec<u8> {
    let meta = b"Chain\0seq\0\x04";
    let mut bytes = vec![0x07, 0, 0, 0, 0, 0, 0, 4];
    bytes.extend_from_slice(&(meta.len() as u16).to_le_bytes());
    bytes.extend_from_slice(&1u16.to_le_bytes()); // kind 1: metadata, nothing chained
    bytes.extend_from_slice(meta);
    bytes
}

/// Write `[write_index, parts…]` to `event` through the C chain; whether the kernel
/// took the record (`false`: nobody records it, EBADF).
#[inline(never)]
fn write_through_chain(events: &UserEvents, event: &Event<'_>, parts: &[&[u8]]) -> bool {
    let index = event.write_index().to_ne_bytes();
    let iov: Vec<libc::iovec> = std::iter::once(&index[..])
        .chain(parts.iter().copied())
        .map(|p| libc::iovec {
            iov_base: p.as_ptr() as *mut libc::c_void,
            iov_len: p.len(),
        })
        .collect();
    // SAFETY: every iovec points into a slice that outlives the call (`index`, `parts`),
    // and the kernel only reads them; the fd is the open user_events_data.
    let rc = unsafe { outer(events.as_fd().as_raw_fd(), iov.as_ptr(), iov.len() as c_int) };
    if rc >= 0 {
        return true;
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EBADF) {
        return false;
    }
    fail(format!("writev through the chain: {err}"))
}

fn main() {
    let args = Args::parse();
    let events = UserEvents::open().unwrap_or_else(|e| fail(e));
    let plain_cmd = command(&format!("{}_plain u32 seq", args.name));
    let eh_cmd = command(&format!(
        "{}_L4K1 u8 eventheader_flags; u8 version; u16 id; u16 tag; u8 opcode; u8 level",
        args.name
    ));
    let register = |cmd| {
        let event = events
            .register(cmd, Flags::NONE)
            .unwrap_or_else(|e| fail(format!("registering {cmd}: {e}")));
        announce(&event, Flags::NONE);
        event
    };
    let plain = register(&plain_cmd);
    let eh = register(&eh_cmd);
    args.start.wait("stack_chain", &[&plain, &eh]);

    let prefix = eventheader_prefix();
    let mut written = 0u64;
    for seq in 0..args.count {
        let value = seq.to_le_bytes();
        for (event, parts) in [(&plain, vec![&value[..]]), (&eh, vec![&prefix, &value])] {
            if write_through_chain(&events, event, &parts) {
                report(&json!({"wrote": event.command().name, "seq": seq}));
                written += 1;
            }
        }
    }
    report(&json!({"done": "stack_chain", "written": written}));
}
