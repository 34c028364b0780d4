//! A lock held for the life of the process: an exclusive `flock` on a file, which the
//! kernel releases however the process ends (a SIGKILL frees it at once), holding the
//! holder's pid so that a refused second process can name it.

use std::fs::{File, OpenOptions};
use std::io::{self, Read as _};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt as _;
use std::path::Path;

/// Why [`take`] did not lock.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds it (its pid, when the file says).
    Held(Option<u32>),
    /// Opening or locking failed (the step, and the error).
    Io(&'static str, io::Error),
}

/// Lock `path` (created if missing) for as long as the returned file is open, and write
/// this process's pid into it.
pub fn take(path: &Path) -> Result<File, LockError> {
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| LockError::Io("open the lock file", e))?;
    // SAFETY: flock on a descriptor this function owns (`f` outlives the call); no memory
    // is passed to the kernel.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            let mut s = String::new();
            let _ = f.read_to_string(&mut s);
            return Err(LockError::Held(s.trim().parse().ok()));
        }
        return Err(LockError::Io("lock", e));
    }
    // Who holds it, for a second process's message (not needed for correctness).
    let _ = f
        .set_len(0)
        .and_then(|()| f.write_all_at(format!("{}\n", std::process::id()).as_bytes(), 0));
    Ok(f)
}
