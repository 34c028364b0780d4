//! The open `<tracefs>/user_events_data`: registrations, the enable word, writes.

use std::ffi::CString;
use std::fs::OpenOptions;
use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::abi;
use crate::{Flags, PayloadError, PayloadValue, RegisterCommand, encode, tracefs_root, wait_until};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tracefs_says_what_to_do() {
        let err = UserEvents::open_in(Path::new("/nonexistent-tracefs")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(err.to_string().contains("CONFIG_USER_EVENTS"), "{err}");
    }
}
