//! GNU build ids of the kernel and its modules, read from the ELF notes sysfs shows
//! (`/sys/kernel/notes`, `/sys/module/NAME/notes/.note.gnu.build-id`): what a perf.data
//! records so that perf and `uevrec decode` take kernel symbols only from the kernel
//! that ran (perf reads the same files: `sysfs__read_build_id`).

/// Where the running kernel's notes are.
pub const KERNEL_NOTES: &str = "/sys/kernel/notes";
/// `NT_GNU_BUILD_ID`.
const NT_GNU_BUILD_ID: u32 = 3;

/// The running kernel's build id (`None`: sysfs does not show its notes, or they hold
/// none).
pub fn kernel() -> Option<Vec<u8>> {
    of_notes(&std::fs::read(KERNEL_NOTES).ok()?).map(<[u8]>::to_vec)
}

/// The build id of the loaded module `name` (`None`: not shown, or none).
pub fn module(name: &str) -> Option<Vec<u8>> {
    let path = format!("/sys/module/{name}/notes/.note.gnu.build-id");
    of_notes(&std::fs::read(path).ok()?).map(<[u8]>::to_vec)
}

/// The `NT_GNU_BUILD_ID` note named `GNU` among the ELF notes `notes` (each `u32 namesz,
/// u32 descsz, u32 type`, the name and the descriptor each padded to 4 bytes, in the
/// machine's byte order), if any; a note cut short ends the search.
pub fn of_notes(notes: &[u8]) -> Option<&[u8]> {
    let word = |at: usize| -> Option<u32> {
        let b = notes.get(at..at.checked_add(4)?)?;
        Some(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    let padded = |n: u32| usize::try_from(n).ok()?.checked_next_multiple_of(4);
    let mut at = 0usize;
    while at < notes.len() {
        let (namesz, descsz, kind) = (word(at)?, word(at + 4)?, word(at + 8)?);
        let name_at = at.checked_add(12)?;
        let desc_at = name_at.checked_add(padded(namesz)?)?;
        let end = desc_at.checked_add(padded(descsz)?)?;
        let name = notes.get(name_at..name_at.checked_add(namesz as usize)?)?;
        if kind == NT_GNU_BUILD_ID && name == b"GNU\0" {
            return notes.get(desc_at..desc_at.checked_add(descsz as usize)?);
        }
        at = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(name: &[u8], kind: u32, desc: &[u8]) -> Vec<u8> {
        let mut n = Vec::new();
        n.extend_from_slice(&(name.len() as u32).to_ne_bytes());
        n.extend_from_slice(&(desc.len() as u32).to_ne_bytes());
        n.extend_from_slice(&kind.to_ne_bytes());
        n.extend_from_slice(name);
        n.resize(n.len().next_multiple_of(4), 0);
        n.extend_from_slice(desc);
        n.resize(n.len().next_multiple_of(4), 0);
        n
    }

    #[test]
    fn the_gnu_build_id_note_among_others() {
        let id: Vec<u8> = (1..=20).collect();
        let notes = [
            note(b"Xen\0", 3, &[9; 6]),
            note(b"GNU\0", 1, &[7; 16]),
            note(b"GNU\0", NT_GNU_BUILD_ID, &id),
            note(b"Linux\0", 1, &[1]),
        ]
        .concat();
        assert_eq!(of_notes(&notes), Some(&id[..]));
        assert_eq!(of_notes(&notes[..notes.len() - 40]), None, "cut in the id");
        assert_eq!(of_notes(&note(b"GNU\0", 1, &[1; 4])), None);
        assert_eq!(of_notes(&[0xff; 12]), None, "sizes past the end");
        assert_eq!(of_notes(&[]), None);
    }

    #[test]
    fn the_running_kernel_shows_one_when_sysfs_does() {
        if std::path::Path::new(KERNEL_NOTES).exists() {
            let id = kernel().expect("the kernel's notes hold a build id");
            assert!((16..=20).contains(&id.len()), "{id:?}");
        }
    }
}
