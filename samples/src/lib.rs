//! Emitting Linux **user_events** from Rust, with nothing but `libc`.
//!
//! user_events (Linux 6.4+, `CONFIG_USER_EVENTS`) let a process define tracepoints at run
//! time and write records into the kernel's trace buffers, where perf, ftrace or uevrec
//! pick them up. The whole protocol is four steps on one file,
//! `<tracefs>/user_events_data`:
//!
//! 1. **register**: `ioctl(fd, DIAG_IOCSREG, &user_reg)` with a register command such as
//!    `my_event u32 count; __rel_loc char[] msg` and the address of an *enable word* in
//!    this process. The kernel answers with a `write_index`.
//! 2. **check**: the kernel sets one bit of the enable word while anyone records the
//!    event, and clears it when they stop. Test the bit before doing any work.
//! 3. **write**: `writev(fd, [write_index as u32, payload...])`. The payload is the
//!    event's fields packed without padding; `__data_loc`/`__rel_loc` fields hold
//!    `len << 16 | offset` and their data goes after the fixed part. Writing while nobody
//!    records fails with `EBADF`.
//! 4. **unregister**: `ioctl(fd, DIAG_IOCSUNREG, &user_unreg)` before the enable word's
//!    memory goes away; the event itself is deleted when its last user is gone.
//!
//! This crate wraps exactly that: [`UserEvents`] is the open data file, [`Event`] one
//! registration (it owns a heap-pinned enable word and unregisters on drop). Register
//! commands are built and checked with [`RegisterCommand`] and payloads with
//! [`encode`], the same code uevrec uses to understand them. The producers in
//! `src/bin/` are runnable examples and the workload of uevrec's VM test tier.
//!
//! ```no_run
//! use uevrec_samples::{encode, Flags, PayloadValue, RegisterCommand, UserEvents, Written};
//!
//! let cmd = RegisterCommand::parse("hello_rust u32 count; __rel_loc char[] msg")?;
//! let events = UserEvents::open()?;                 // <tracefs>/user_events_data
//! let hello = events.register(&cmd, Flags::NONE)?;  // DIAG_IOCSREG
//! for count in 0..3u32 {
//!     if hello.is_enabled() {                       // somebody is recording
//!         let payload = encode(&cmd, &[PayloadValue::Uint(count.into()), PayloadValue::Str("hi")])?;
//!         match hello.write(&payload)? {
//!             Written::Yes => {}
//!             Written::Disabled => {} // the recorder left between the check and the write
//!         }
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Permissions: `user_events_data` is root-only by default (`chmod` it, or run as root);
//! [`Flags::PERSIST`] needs CAP_PERFMON.
//!
//! Running the producers needs a kernel with user_events; without one, the project's test
//! VM has it (`cargo build -p uevrec-samples`, then for example
//! `vm/run.sh 'target/debug/every_type --name demo & sleep 1; target/debug/uevrec record -e user_events:demo --duration 5s'`).
//! Each prints JSON lines saying what it registered and wrote.
#![warn(missing_docs)]

pub mod abi;
pub mod eh;

use std::ffi::CString;
use std::fs::OpenOptions;
use std::io::{self, IoSlice, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use uevrec_parsers::{Element, FieldKind};

pub mod payload;
pub mod register;

pub use abi::Flags;
pub use payload::{PayloadError, PayloadValue, encode, encode_into};
pub use register::{RegisterCommand, RegisterError};

/// Where tracefs is normally mounted.
pub const DEFAULT_TRACEFS: &str = "/sys/kernel/tracing";

/// The tracefs root: `$UEVREC_TRACEFS` when set, else [`DEFAULT_TRACEFS`].
pub fn tracefs_root() -> PathBuf {
    std::env::var_os("UEVREC_TRACEFS").map_or_else(|| PathBuf::from(DEFAULT_TRACEFS), PathBuf::from)
}

/// An open `<tracefs>/user_events_data`: the handle every registration and write goes
/// through. One per process is enough; it may be shared between threads.
#[derive(Debug)]
pub struct UserEvents {
    fd: OwnedFd,
    tracefs: PathBuf,
}

/// The outcome of a write the kernel did not refuse for a real error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The record went into the trace buffers of every recorder of the event.
    Yes,
    /// Nobody records the event right now (`EBADF`): the record was not kept. Normal
    /// when a recorder stops between [`Event::is_enabled`] and the write.
    Disabled,
}

impl UserEvents {
    /// Open `user_events_data` under [`tracefs_root`].
    pub fn open() -> io::Result<UserEvents> {
        UserEvents::open_in(&tracefs_root())
    }

    /// Open `user_events_data` under the tracefs mounted at `tracefs`.
    ///
    /// Errors say what to do: a missing file means the kernel lacks
    /// `CONFIG_USER_EVENTS` (or tracefs is not mounted there); `EACCES` means the file's
    /// permissions (root-only by default).
    pub fn open_in(tracefs: &Path) -> io::Result<UserEvents> {
        let path = tracefs.join("user_events_data");
        let file = OpenOptions::new().read(true).write(true).open(&path).map_err(|e| {
            let hint = match e.kind() {
                io::ErrorKind::NotFound => {
                    "the kernel needs CONFIG_USER_EVENTS=y and tracefs mounted there \
                     (mount -t tracefs nodev /sys/kernel/tracing)"
                }
                io::ErrorKind::PermissionDenied => {
                    "run as root, or let this user in (chmod the tracefs directory and user_events_data)"
                }
                _ => "check that tracefs is mounted",
            };
            io::Error::new(e.kind(), format!("opening {}: {e}; {hint}", path.display()))
        })?;
        Ok(UserEvents {
            fd: file.into(),
            tracefs: tracefs.to_path_buf(),
        })
    }

    /// The tracefs root this handle was opened in.
    pub fn tracefs(&self) -> &Path {
        &self.tracefs
    }

    /// Register `cmd` with `flags`, enable bit 0. See [`UserEvents::register_bit`].
    pub fn register(&self, cmd: &RegisterCommand, flags: Flags) -> io::Result<Event<'_>> {
        self.register_bit(cmd, flags, 0)
    }

    /// Register `cmd` (DIAG_IOCSREG) with `flags`; the kernel will keep bit `enable_bit`
    /// (0..=31) of the returned event's enable word set while the event is recorded.
    ///
    /// Kernel errors: `EADDRINUSE` — the name exists with other fields (use
    /// [`Flags::MULTI_FORMAT`]); `EINVAL` — a bad command or a flag this kernel does not
    /// know; `EPERM` — [`Flags::PERSIST`] without CAP_PERFMON; `EMFILE` — too many events
    /// (`/proc/sys/kernel/user_events_max`).
    pub fn register_bit(
        &self,
        cmd: &RegisterCommand,
        flags: Flags,
        enable_bit: u8,
    ) -> io::Result<Event<'_>> {
        if enable_bit > 31 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "enable_bit must be 0..=31 for a 4-byte enable word",
            ));
        }
        let text = cmd.to_string();
        let name_args = CString::new(text.as_str()).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "register command contains a NUL byte",
            )
        })?;
        // The kernel writes into this word for as long as the registration lives, so it
        // must not move: a Box keeps it at one heap address until Event::drop unregisters.
        let enabled = Box::new(AtomicU32::new(0));
        let mut reg = abi::UserReg {
            size: size_of::<abi::UserReg>() as u32,
            enable_bit,
            enable_size: 4,
            flags: flags.0,
            enable_addr: enabled.as_ptr() as u64,
            name_args: name_args.as_ptr() as u64,
            write_index: 0,
        };
        // SAFETY: `reg` is a valid, packed `struct user_reg` that outlives the call;
        // `name_args` points at a NUL-terminated string alive for the call; `enable_addr`
        // is a 4-byte aligned word that stays valid until `Event::drop` unregisters it.
        let rc = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                abi::DIAG_IOCSREG as libc::Ioctl,
                &mut reg,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("registering `{text}`: {e}"),
            ));
        }
        Ok(Event {
            events: self,
            enabled,
            enable_bit,
            write_index: reg.write_index,
            command: cmd.clone(),
            registered: true,
        })
    }

    /// Delete the event called `name` (DIAG_IOCSDEL). Fails with `EBUSY` while anyone
    /// (a producer or a recorder) still uses it.
    pub fn delete(&self, name: &str) -> io::Result<()> {
        let c = CString::new(name).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "event name contains a NUL byte",
            )
        })?;
        // SAFETY: the kernel reads a NUL-terminated string from `c`, alive for the call.
        let rc = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                abi::DIAG_IOCSDEL as libc::Ioctl,
                c.as_ptr(),
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("deleting `{name}`: {e}")));
        }
        Ok(())
    }
}

/// One registration of a user event: its enable word and write index.
///
/// Dropping it unregisters the enable word (the kernel then stops writing to it); the
/// event disappears once no producer and no recorder uses it, unless persistent.
#[derive(Debug)]
pub struct Event<'a> {
    events: &'a UserEvents,
    enabled: Box<AtomicU32>,
    enable_bit: u8,
    write_index: u32,
    command: RegisterCommand,
    registered: bool,
}

impl Event<'_> {
    /// Whether anyone records this event now (the kernel keeps the enable bit current).
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed) & (1 << self.enable_bit) != 0
    }

    /// Poll [`Event::is_enabled`] every millisecond until it is true or `timeout` passes;
    /// returns the final state.
    pub fn wait_enabled(&self, timeout: Duration) -> bool {
        wait_until(timeout, || self.is_enabled())
    }

    /// The index the kernel gave this registration (first `u32` of every write).
    pub fn write_index(&self) -> u32 {
        self.write_index
    }

    /// The register command this event was registered with.
    pub fn command(&self) -> &RegisterCommand {
        &self.command
    }

    /// Write one record whose payload (the fields, packed) is `payload`.
    pub fn write(&self, payload: &[u8]) -> io::Result<Written> {
        self.write_vectored(&[IoSlice::new(payload)])
    }

    /// Write one record whose payload is the concatenation of `parts` (no copying: the
    /// kernel gathers them, like C producers do with `struct iovec`).
    pub fn write_vectored(&self, parts: &[IoSlice<'_>]) -> io::Result<Written> {
        const MAX_PARTS: usize = 15;
        if parts.len() > MAX_PARTS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "at most 15 payload parts",
            ));
        }
        let index = self.write_index.to_ne_bytes();
        let mut iov = [IoSlice::new(&[]); MAX_PARTS + 1];
        iov[0] = IoSlice::new(&index);
        iov[1..=parts.len()].copy_from_slice(parts);
        let iov = &iov[..=parts.len()];
        // SAFETY: `IoSlice` is ABI-compatible with `struct iovec`; every slice is alive
        // for the call and the count matches the array.
        let rc = unsafe {
            libc::writev(
                self.events.fd.as_raw_fd(),
                iov.as_ptr().cast::<libc::iovec>(),
                iov.len() as libc::c_int,
            )
        };
        if rc >= 0 {
            return Ok(Written::Yes);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EBADF) => Ok(Written::Disabled),
            _ => Err(io::Error::new(
                e.kind(),
                format!(
                    "writing `{}`: {e} (EINVAL: payload shorter than the fixed fields; EFAULT: bad dynamic location)",
                    self.command.name
                ),
            )),
        }
    }

    /// Encode `values` for this event's command and write them.
    pub fn emit(&self, values: &[PayloadValue<'_>]) -> Result<Written, EmitError> {
        let payload = encode(&self.command, values)?;
        Ok(self.write(&payload)?)
    }

    /// Unregister now (DIAG_IOCSUNREG), reporting errors that `drop` would swallow.
    pub fn unregister(mut self) -> io::Result<()> {
        self.unregister_inner()
    }

    fn unregister_inner(&mut self) -> io::Result<()> {
        if !self.registered {
            return Ok(());
        }
        let mut unreg = abi::UserUnreg {
            size: size_of::<abi::UserUnreg>() as u32,
            disable_bit: self.enable_bit,
            reserved: 0,
            reserved2: 0,
            disable_addr: self.enabled.as_ptr() as u64,
        };
        // SAFETY: `unreg` is a valid packed `struct user_unreg` alive for the call.
        let rc = unsafe {
            libc::ioctl(
                self.events.fd.as_raw_fd(),
                abi::DIAG_IOCSUNREG as libc::Ioctl,
                &mut unreg,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        self.registered = false;
        Ok(())
    }
}

impl Drop for Event<'_> {
    fn drop(&mut self) {
        if self.unregister_inner().is_err() {
            // The kernel may still write to the enable word: never free it.
            let word = std::mem::replace(&mut self.enabled, Box::new(AtomicU32::new(0)));
            std::mem::forget(word);
        }
    }
}

/// Encoding or writing failed.
#[derive(Debug)]
pub enum EmitError {
    /// The values do not fit the command.
    Payload(PayloadError),
    /// The kernel refused the write.
    Io(io::Error),
}

impl std::fmt::Display for EmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EmitError::Payload(e) => write!(f, "encoding the payload: {e}"),
            EmitError::Io(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for EmitError {}

impl From<PayloadError> for EmitError {
    fn from(e: PayloadError) -> Self {
        EmitError::Payload(e)
    }
}

impl From<io::Error> for EmitError {
    fn from(e: io::Error) -> Self {
        EmitError::Io(e)
    }
}

/// Create a persistent event by writing `u:<cmd>` to `<tracefs>/dynamic_events`.
/// It exists until [`remove_persistent`] (or DIAG_IOCSDEL); producers then register the
/// same command to get a write index.
pub fn add_persistent(tracefs: &Path, cmd: &RegisterCommand) -> io::Result<()> {
    write_dynamic_events(tracefs, &format!("u:{cmd}"))
}

/// Delete a persistent event with `-:<cmd>` on `dynamic_events`. The kernel wants the
/// full field list here (`-:name` alone, or `!u:name`, fails with ENOENT).
pub fn remove_persistent(tracefs: &Path, cmd: &RegisterCommand) -> io::Result<()> {
    write_dynamic_events(tracefs, &format!("-:{cmd}"))
}

fn write_dynamic_events(tracefs: &Path, line: &str) -> io::Result<()> {
    let path = tracefs.join("dynamic_events");
    let mut f = OpenOptions::new().append(true).open(&path)?;
    // One write() per command: the kernel parses each write on its own.
    f.write_all(format!("{line}\n").as_bytes()).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("writing `{line}` to {}: {e}", path.display()),
        )
    })
}

/// Whether `<tracefs>/events/<system>/<event>` exists (the event is registered).
pub fn event_exists(tracefs: &Path, system: &str, event: &str) -> bool {
    tracefs.join("events").join(system).join(event).is_dir()
}

/// Call `cond` every millisecond until it returns true or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// How uevrec's JSON lines show `value` written into a field of `kind` (see README,
/// "JSON lines"): integers as numbers, char data as strings cut at the first NUL, bytes
/// and structs as lowercase hex, integer arrays as arrays. The producers print this so
/// that a test can compare it with what a recorder decoded.
///
/// Returns `None` for combinations the producers never write.
pub fn expected_json(kind: &FieldKind, value: &PayloadValue<'_>) -> Option<Value> {
    match (kind, value) {
        (FieldKind::Integer { .. }, PayloadValue::Int(v)) => Some(json!(v)),
        (FieldKind::Integer { .. }, PayloadValue::Uint(v)) => Some(json!(v)),
        (
            FieldKind::FixedArray {
                elem: Element::Char,
                count,
            },
            PayloadValue::Str(s),
        ) => {
            let bytes = &s.as_bytes()[..s.len().min(*count as usize)];
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            Some(Value::String(
                String::from_utf8_lossy(&bytes[..end]).into_owned(),
            ))
        }
        (
            FieldKind::Dynamic {
                elem: Element::Char,
                ..
            },
            PayloadValue::Str(s),
        ) => {
            let end = s.find('\0').unwrap_or(s.len());
            Some(Value::String(s[..end].to_string()))
        }
        (
            FieldKind::FixedArray {
                elem: Element::Byte,
                ..
            }
            | FieldKind::Dynamic {
                elem: Element::Byte,
                ..
            }
            | FieldKind::Struct { .. },
            PayloadValue::Bytes(b),
        ) => {
            let mut hex = String::with_capacity(b.len() * 2);
            for byte in *b {
                hex.push_str(&format!("{byte:02x}"));
            }
            // Fixed areas are zero-padded to their size.
            if let FieldKind::FixedArray { count, .. } = kind {
                hex.extend(std::iter::repeat_n(
                    "00",
                    (*count as usize).saturating_sub(b.len()),
                ));
            }
            Some(Value::String(hex))
        }
        (
            FieldKind::Dynamic {
                elem: Element::Integer { size: 4, .. },
                ..
            },
            PayloadValue::U32s(w),
        ) => Some(Value::Array(w.iter().map(|&x| json!(x)).collect())),
        _ => None,
    }
}

/// Print one JSON value as a line on stdout and flush (the producers' report protocol:
/// tests read these lines while the producer runs).
pub fn report(line: &Value) {
    let mut out = io::stdout().lock();
    // A closed stdout only loses the report; the producer's work is done either way.
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// Exit with status 1 after printing `msg` to stderr (for the producers' `main`).
pub fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(1)
}

/// Print the producers' first report line for a fresh registration:
/// `{"registered":NAME,"command":CMD,"write_index":N,"flags":F}`.
pub fn announce(event: &Event<'_>, flags: Flags) {
    report(&json!({
        "registered": event.command().name,
        "command": event.command().to_string(),
        "write_index": event.write_index(),
        "flags": flags.0,
    }));
}

/// `{field name: value as a recorder must show it}` for `values` written as `cmd`
/// (see [`expected_json`]; `null` where it has no rule).
pub fn expected_fields(
    cmd: &RegisterCommand,
    values: &[PayloadValue<'_>],
) -> serde_json::Map<String, Value> {
    cmd.fields
        .iter()
        .zip(values)
        .map(|(field, value)| {
            (
                field.name.clone(),
                expected_json(&field.kind, value).unwrap_or(Value::Null),
            )
        })
        .collect()
}

/// Encode and write `values`; when the kernel took the record, report it as
/// `{"event":NAME,"seq":SEQ,"fields":{...}}` (see [`expected_fields`]).
pub fn emit_and_report(
    event: &Event<'_>,
    seq: u64,
    values: &[PayloadValue<'_>],
) -> Result<Written, EmitError> {
    let written = event.emit(values)?;
    if written == Written::Yes {
        let fields = expected_fields(event.command(), values);
        report(&json!({"event": event.command().name, "seq": seq, "fields": fields}));
    }
    Ok(written)
}

/// Parse a register command written by the producers themselves (a bug if it fails).
pub fn command(text: &str) -> RegisterCommand {
    RegisterCommand::parse(text).unwrap_or_else(|e| fail(format!("register command `{text}`: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use uevrec_parsers::LocKind;

    #[test]
    fn expected_json_follows_uevrecs_value_rules() {
        let int = FieldKind::Integer {
            size: 1,
            signed: true,
        };
        assert_eq!(
            expected_json(&int, &PayloadValue::Int(-128)),
            Some(json!(-128))
        );
        assert_eq!(
            expected_json(&int, &PayloadValue::Uint(u64::MAX)),
            Some(json!(u64::MAX))
        );
        let chars = FieldKind::FixedArray {
            elem: Element::Char,
            count: 4,
        };
        assert_eq!(
            expected_json(&chars, &PayloadValue::Str("ab")),
            Some(json!("ab"))
        );
        assert_eq!(
            expected_json(&chars, &PayloadValue::Str("abcd")),
            Some(json!("abcd"))
        );
        let bytes = FieldKind::FixedArray {
            elem: Element::Byte,
            count: 3,
        };
        assert_eq!(
            expected_json(&bytes, &PayloadValue::Bytes(&[0xab])),
            Some(json!("ab0000"))
        );
        let dyn_bytes = FieldKind::Dynamic {
            loc: LocKind::RelLoc,
            elem: Element::Byte,
        };
        assert_eq!(
            expected_json(&dyn_bytes, &PayloadValue::Bytes(&[1, 0xff])),
            Some(json!("01ff"))
        );
        let dyn_str = FieldKind::Dynamic {
            loc: LocKind::DataLoc,
            elem: Element::Char,
        };
        assert_eq!(
            expected_json(&dyn_str, &PayloadValue::Str("a\"\n")),
            Some(json!("a\"\n"))
        );
        let words = FieldKind::Dynamic {
            loc: LocKind::DataLoc,
            elem: Element::Integer {
                size: 4,
                signed: false,
            },
        };
        assert_eq!(
            expected_json(&words, &PayloadValue::U32s(&[1, u32::MAX])),
            Some(json!([1, u32::MAX]))
        );
        assert_eq!(expected_json(&int, &PayloadValue::Str("x")), None);
    }

    #[test]
    fn missing_tracefs_says_what_to_do() {
        let err = UserEvents::open_in(Path::new("/nonexistent-tracefs")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(err.to_string().contains("CONFIG_USER_EVENTS"), "{err}");
    }
}

/// When a producer may start writing: the command-line options every producer shares.
///
/// The enable bit turns on when a recorder *opens* an event, which can be well before it
/// keeps records (perf first synthesizes process information; seconds under emulation).
/// A producer that must not lose its first records waits for its bits, then for a
/// recorder's "recording now" signal (`--start-file`) or a fixed pause (`--settle-ms`).
#[derive(Debug, Clone, clap::Args)]
pub struct StartArgs {
    /// How long to wait for a recorder (enable bits, start file).
    #[arg(long, default_value_t = 60)]
    pub timeout_secs: u64,
    /// Pause after the events are enabled (and the start file exists), before writing.
    #[arg(long, default_value_t = 0)]
    pub settle_ms: u64,
    /// After the events are enabled, also wait until this file exists.
    #[arg(long)]
    pub start_file: Option<PathBuf>,
}

impl StartArgs {
    /// Wait until every event in `events` is enabled, the start file (if any) exists and
    /// the settle time has passed. On timeout, report
    /// `{"done":NAME,"written":0,"error":..}` and exit with status 2.
    pub fn wait(&self, name: &str, events: &[&Event<'_>]) {
        self.wait_for(name, || events.iter().all(|e| e.is_enabled()));
    }

    /// [`StartArgs::wait`] for producers that are not [`Event`]s (the EventHeader and
    /// OpenTelemetry crates): `enabled` says whether all their tracepoints are enabled.
    pub fn wait_for(&self, name: &str, mut enabled: impl FnMut() -> bool) {
        let timeout = Duration::from_secs(self.timeout_secs);
        let give_up = |why: &str| -> ! {
            report(&json!({"done": name, "written": 0, "error": why}));
            std::process::exit(2)
        };
        if !wait_until(timeout, &mut enabled) {
            give_up("not enabled within the timeout");
        }
        if let Some(file) = &self.start_file
            && !wait_until(timeout, || file.exists())
        {
            give_up("the start file did not appear within the timeout");
        }
        std::thread::sleep(Duration::from_millis(self.settle_ms));
    }
}
