//! What a perf.data says about the machine that recorded it: `uname`, CPU counts, page
//! and word size, the ring-buffer header formats of tracefs, the clock's resolution.

use crate::capture::tracefs::{Tracefs, TracefsError};
use crate::system::uname::Uname;

/// The recording machine, read once when the file is created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostInfo {
    /// `uname -n`.
    pub hostname: String,
    /// `uname -r`.
    pub osrelease: String,
    /// `uname -m`.
    pub arch: String,
    /// CPUs configured and online.
    pub nr_cpus: (u32, u32),
    /// The page size.
    pub page_size: u32,
    /// `sizeof(long)`.
    pub long_size: u8,
    /// `events/header_page` of tracefs.
    pub header_page: String,
    /// `events/header_event` of tracefs.
    pub header_event: String,
    /// Resolution of `CLOCK_REALTIME` in ns.
    pub clock_res_ns: u64,
}

/// `sysconf(name)`, or `fallback` when the system does not say.
fn sysconf(name: libc::c_int, fallback: u32) -> u32 {
    // SAFETY: sysconf only reads a system value.
    let v = unsafe { libc::sysconf(name) };
    u32::try_from(v).ok().filter(|&v| v > 0).unwrap_or(fallback)
}

/// A tracefs header file in one read: `header_page` answers only a first read (a
/// second read at an offset gets end-of-file), and `read_to_string` starts with a
/// 32-byte probe read.
fn read_whole(path: &std::path::Path) -> std::io::Result<String> {
    let mut buf = Vec::with_capacity(64 * 1024);
    std::io::Read::read_to_end(&mut std::fs::File::open(path)?, &mut buf)?;
    String::from_utf8(buf).map_err(std::io::Error::other)
}

impl HostInfo {
    /// Read it now; the header formats come from `tracefs`.
    pub fn read(tracefs: &Tracefs) -> Result<Self, TracefsError> {
        let events = tracefs.root().join("events");
        let read = |name: &str| {
            let path = events.join(name);
            read_whole(&path).map_err(|e| TracefsError::io(&path, e))
        };
        let header_page = read("header_page")?;
        let header_event = read("header_event")?;
        let uts = Uname::now();
        let mut res = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `res` is a valid, writable timespec; clock_getres only writes to it.
        let rc = unsafe { libc::clock_getres(libc::CLOCK_REALTIME, &mut res) };
        let clock_res_ns = if rc == 0 {
            (res.tv_sec as u64) * 1_000_000_000 + res.tv_nsec as u64
        } else {
            1
        };
        let online = sysconf(libc::_SC_NPROCESSORS_ONLN, 1);
        Ok(HostInfo {
            hostname: uts.nodename,
            osrelease: uts.release,
            arch: uts.machine,
            nr_cpus: (sysconf(libc::_SC_NPROCESSORS_CONF, online), online),
            page_size: sysconf(libc::_SC_PAGESIZE, 4096),
            long_size: std::mem::size_of::<libc::c_long>() as u8,
            header_page,
            header_event,
            clock_res_ns,
        })
    }
}
