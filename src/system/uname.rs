//! `uname(2)`: the machine's name, kernel release and version, and architecture.

use std::ffi::CStr;

/// `uname(2)`'s texts (empty when it fails).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Uname {
    /// `uname -n`.
    pub nodename: String,
    /// `uname -r`.
    pub release: String,
    /// `uname -v`.
    pub version: String,
    /// `uname -m`.
    pub machine: String,
}

impl Uname {
    /// Ask the kernel now.
    pub fn now() -> Self {
        // SAFETY: an all-zero utsname is a valid value for uname to fill in.
        let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
        // SAFETY: `uts` is a valid, writable utsname; on failure it stays zeroed (empty texts).
        let _ = unsafe { libc::uname(&mut uts) };
        Uname {
            nodename: field(&uts.nodename),
            release: field(&uts.release),
            version: field(&uts.version),
            machine: field(&uts.machine),
        }
    }
}

/// A `uname` field as text.
fn field(chars: &[libc::c_char]) -> String {
    // The kernel NUL-terminates every field; a missing NUL gives an empty text.
    let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).collect();
    CStr::from_bytes_until_nul(&bytes)
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default()
}
