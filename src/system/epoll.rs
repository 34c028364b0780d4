//! An epoll set: what the ring backends (perf's ring owners, ftrace's `trace_pipe_raw`
//! files) sleep on between drains. One wrapper, so the `unsafe` calls stand once.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// An epoll descriptor watching files for input.
#[derive(Debug)]
pub struct Epoll(OwnedFd);

impl Epoll {
    /// A new, empty set (close-on-exec).
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 has no memory effects.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `ep` is a new descriptor owned by nothing else.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(ep) }))
    }

    /// Watch `fd` for input (`EPOLLIN`), reported with `token`.
    pub fn add(&self, fd: BorrowedFd<'_>, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: both descriptors are open; `ev` is a valid epoll_event read by the call.
        let rc = unsafe {
            libc::epoll_ctl(
                self.0.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd.as_raw_fd(),
                &mut ev,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Sleep until a watched file has input (or has hung up) or `timeout` ends; returns
    /// how many reported. An interrupted wait returns 0.
    pub fn wait(&self, timeout: Duration) -> io::Result<usize> {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 64];
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: `evs` is a writable array of epoll_events and we pass its length.
        let n =
            unsafe { libc::epoll_wait(self.0.as_raw_fd(), evs.as_mut_ptr(), evs.len() as i32, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(0)
            } else {
                Err(e)
            };
        }
        Ok(n as usize)
    }
}
