//! The vDSO's own names and unwind information: the kernel maps one image into every
//! process of one ABI, the same on one boot, with no file behind it (`[vdso]` in
//! `/proc/PID/maps`). uevrec's own (64-bit) image is read once, from its own memory,
//! and kept in a memory file (`memfd_create`), so that the symbolizer and the unwinder
//! read it as any other file (`/proc/self/fd/N`), placed at each process's `[vdso]`.
//!
//! A process's `[vdso]` is taken for this image only when it is as long and, where the
//! process can still be read, begins with the same ELF header (a 32-bit process maps
//! another image); one that differs keeps `no_file`.

use std::io::Write as _;
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::os::unix::fs::FileExt as _;
use std::sync::{Arc, OnceLock};

use crate::system::proc_maps::read_proc_maps;

/// The bytes of the image's ELF header compared with a process's `[vdso]`.
const HEADER: usize = 64;

/// uevrec's own vDSO image, kept in a memory file.
#[derive(Debug)]
pub struct Image {
    /// Its length (the `[vdso]` mapping's).
    len: u64,
    /// Its ELF header.
    header: [u8; HEADER],
    /// The path to read it by (`/proc/self/fd/N`, never closed).
    path: Arc<str>,
    /// The memory file (kept open for the life of uevrec).
    _file: std::fs::File,
}

impl Image {
    /// The path the image is read by (`/proc/self/fd/N`).
    pub fn path(&self) -> &Arc<str> {
        &self.path
    }
}

/// uevrec's own vDSO image, read at the first call (`None`: no vDSO, or it could not
/// be read or kept).
pub fn image() -> Option<&'static Image> {
    static IMAGE: OnceLock<Option<Image>> = OnceLock::new();
    IMAGE.get_or_init(read_own).as_ref()
}

/// Read uevrec's own `[vdso]` (where `getauxval(AT_SYSINFO_EHDR)` says it begins, as
/// long as `/proc/self/maps` shows it) into a memory file.
fn read_own() -> Option<Image> {
    // SAFETY: getauxval reads the auxiliary vector; no memory is handed over.
    let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
    let mapping = read_proc_maps(std::process::id())?
        .into_iter()
        .find(|m| &*m.path == "[vdso]" && m.start == base && base != 0)?;
    let len = mapping.end.checked_sub(mapping.start)?;
    let mut bytes = vec![0; usize::try_from(len).ok()?];
    // Through /proc/self/mem: a read that fails is an error, never a fault.
    std::fs::File::open("/proc/self/mem")
        .ok()?
        .read_exact_at(&mut bytes, base)
        .ok()?;
    let header: [u8; HEADER] = bytes.get(..HEADER)?.try_into().ok()?;
    if !header.starts_with(b"\x7fELF") {
        return None;
    }
    // SAFETY: memfd_create with a NUL-terminated name; the descriptor it returns is
    // owned by the OwnedFd made from it right after.
    let fd = unsafe { libc::memfd_create(c"uevrec-vdso".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just returned by memfd_create, open, and owned by nothing else.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    file.write_all(&bytes).ok()?;
    Some(Image {
        len,
        header,
        path: format!("/proc/self/fd/{fd}").into(),
        _file: file,
    })
}

/// The image that names and unwinds the frames of process `pid`'s `[vdso]` mapping
/// from `start` to `end` at file offset `pgoff`, if it is uevrec's own: as long, and
/// (where `pid` can still be read) with the same ELF header.
pub fn matching(pid: u32, start: u64, end: u64, pgoff: u64) -> Option<&'static Image> {
    let image = image()?;
    if end.checked_sub(start) != Some(image.len) || pgoff != 0 {
        return None;
    }
    let mut header = [0; HEADER];
    let read = std::fs::File::open(format!("/proc/{pid}/mem"))
        .and_then(|mem| mem.read_exact_at(&mut header, start));
    match read {
        Ok(()) if header != image.header => None,
        // The same header; or the process is gone (or cannot be read): by its length.
        _ => Some(image),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::{Object as _, ObjectSymbol as _};

    /// uevrec's own vDSO is read, as an ELF file with unwind information and the
    /// `clock_gettime` entry; this process's `[vdso]` matches it, a mapping of another
    /// length does not.
    #[test]
    fn the_own_vdso_is_read_and_matched() {
        let image = image().expect("a vDSO on x86_64 and aarch64 Linux");
        let bytes = std::fs::read(&**image.path()).unwrap();
        assert_eq!(bytes.len() as u64, image.len);
        let elf = object::File::parse(&bytes[..]).unwrap();
        assert!(elf.section_by_name(".eh_frame").is_some());
        assert!(
            elf.dynamic_symbols()
                .any(|s| s.name() == Ok("__vdso_clock_gettime")
                    || s.name() == Ok("__kernel_clock_gettime"))
        );
        // SAFETY: getauxval reads the auxiliary vector.
        let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
        let pid = std::process::id();
        assert!(matching(pid, base, base + image.len, 0).is_some());
        assert!(matching(pid, base, base + image.len + 4096, 0).is_none());
        assert!(matching(pid, base, base + image.len, 4096).is_none());
        // Another header at the address (our own stack's bytes are not a vDSO's).
        let here = &bytes as *const _ as u64;
        assert!(matching(pid, here, here + image.len, 0).is_none());
    }
}
