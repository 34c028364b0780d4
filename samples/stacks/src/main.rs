//! A plain user_event and an EventHeader event written from a known call chain, for
//! uevrec's call stacks (`record -g`, `--call-graph dwarf`) on real user_events.
//!
//! ```text
//! stack_chain NAME COUNT START_FILE [HOLD_FILE]
//! ```
//! Registers the plain event `<NAME>_plain u32 seq` and the EventHeader event
//! `<NAME>_L4K1` (provider NAME, event `Chain`, one field `seq`: Value32), waits (at most
//! 60 s) until both are enabled and START_FILE exists, then writes each COUNT times
//! (seq 0..COUNT, plain first) through `write_through_chain` → `outer` → `middle` →
//! `inner` → `syscall(SYS_writev)`, then with HOLD_FILE waits (at most 60 s) until it
//! exists before exiting (a recorder that reads mappings from `/proc` then finds them:
//! the ftrace backend's `-g`). The three C functions are in `src/chain.c`, built
//! with frame pointers (build.rs); `write_through_chain` is Rust, without them.
//!
//! Report lines: `{"registered":TRACEPOINT}` per event, `{"wrote":TRACEPOINT,"seq":N}`
//! per record the kernel took, `{"done":"stack_chain","written":N}`.
//!
//! Small on purpose: only std and libc, and the samples' ABI file by path, not the crate
//! (with clap, serde_json and the samples' parsers linked in, their debug information
//! was most of the binary's 12 MB, and uevrec reads it to name frames: about 30 s more
//! per recording in the emulated test VM).

use std::ffi::{CString, c_int, c_long};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

#[path = "../../src/abi.rs"]
#[allow(dead_code)] // the ABI file also spells out what this producer does not use
mod abi;

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
fn write_through_chain(data: &File, event: &Registered, parts: &[&[u8]]) -> bool {
    let index = event.write_index.to_ne_bytes();
    let iov: Vec<libc::iovec> = std::iter::once(&index[..])
        .chain(parts.iter().copied())
        .map(|p| libc::iovec {
            iov_base: p.as_ptr() as *mut libc::c_void,
            iov_len: p.len(),
        })
        .collect();
    // SAFETY: every iovec points into a slice that outlives the call (`index`, `parts`),
    // and the kernel only reads them; the fd is the open user_events_data.
    let rc = unsafe { outer(data.as_raw_fd(), iov.as_ptr(), iov.len() as c_int) };
    if rc >= 0 {
        return true;
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EBADF) {
        return false;
    }
    fail(format!("writev through the chain: {err}"))
}

/// How long to wait for a recorder (enable bits, start file).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// One registered event: its enable word (bit 0) and the index that starts its writes.
struct Registered {
    name: String,
    enabled: &'static AtomicU32,
    write_index: u32,
}

/// Exit with status 1 after printing `msg` to stderr.
fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(1)
}

/// Register `command` on `data` (DIAG_IOCSREG, enable bit 0 of a word that lives as long
/// as the process: the kernel drops the registration at exit).
fn register(data: &File, command: &str) -> Registered {
    let text = CString::new(command).expect("no NUL in a register command");
    let enabled: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
    let mut reg = abi::UserReg {
        size: size_of::<abi::UserReg>() as u32,
        enable_size: 4,
        enable_addr: enabled.as_ptr() as u64,
        name_args: text.as_ptr() as u64,
        ..abi::UserReg::default()
    };
    // SAFETY: `reg` is a valid packed `struct user_reg` alive for the call, `name_args` a
    // NUL-terminated string alive for the call, `enable_addr` an aligned word that lives
    // as long as the process.
    let rc = unsafe { libc::ioctl(data.as_raw_fd(), abi::DIAG_IOCSREG as libc::Ioctl, &mut reg) };
    if rc < 0 {
        fail(format!(
            "registering `{command}`: {}",
            std::io::Error::last_os_error()
        ));
    }
    let name = command.split(' ').next().unwrap_or_default().to_string();
    println!(r#"{{"registered":"{name}"}}"#);
    Registered {
        name,
        enabled,
        write_index: reg.write_index,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (name, count, start, hold) = match &args[..] {
        [name, count, start] => (name, count, start, None),
        [name, count, start, hold] => (name, count, start, Some(hold)),
        _ => fail("usage: stack_chain NAME COUNT START_FILE [HOLD_FILE]"),
    };
    let count: u32 = count
        .parse()
        .unwrap_or_else(|_| fail(format!("COUNT `{count}` is not a number")));
    let path = "/sys/kernel/tracing/user_events_data";
    let data = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| fail(format!("{path}: {e} (needs CONFIG_USER_EVENTS and root)")));
    let plain = register(&data, &format!("{name}_plain u32 seq"));
    let eh = register(
        &data,
        &format!(
            "{name}_L4K1 u8 eventheader_flags; u8 version; u16 id; u16 tag; u8 opcode; u8 level"
        ),
    );
    let ready = || {
        [&plain, &eh]
            .iter()
            .all(|e| e.enabled.load(Ordering::Relaxed) & 1 != 0)
            && Path::new(start).exists()
    };
    let give_up = Instant::now() + START_TIMEOUT;
    while !ready() {
        if Instant::now() > give_up {
            fail("no recorder enabled the events and made the start file within 60 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }

    let prefix = eventheader_prefix();
    let mut written = 0u64;
    for seq in 0..count {
        let value = seq.to_le_bytes();
        for (event, parts) in [(&plain, vec![&value[..]]), (&eh, vec![&prefix, &value])] {
            if write_through_chain(&data, event, &parts) {
                println!(r#"{{"wrote":"{}","seq":{seq}}}"#, event.name);
                written += 1;
            }
        }
    }
    println!(r#"{{"done":"stack_chain","written":{written}}}"#);
    if let Some(hold) = hold {
        let give_up = Instant::now() + START_TIMEOUT;
        while !Path::new(hold).exists() {
            if Instant::now() > give_up {
                fail("the hold file was not made within 60 s");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
