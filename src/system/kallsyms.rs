//! The kernel's symbol table, `/proc/kallsyms`: whether it shows addresses
//! (`kptr_restrict` shows zeros to whom may not see them) and its whole text, which a
//! trace.dat recorded with stacks carries to name kernel frames elsewhere.

use std::io::BufRead as _;

/// Where the kernel's symbol table is read.
pub const PATH: &str = "/proc/kallsyms";

/// What `/proc/kallsyms` gave.
#[derive(Debug)]
pub enum Kallsyms {
    /// Its text, with real addresses.
    Text(Vec<u8>),
    /// It shows zero addresses (`kptr_restrict`): nothing it names can be found.
    Hidden,
    /// It could not be read: why, in words.
    Unreadable(String),
}

/// The whole of `/proc/kallsyms` (a few MiB), or why not.
pub fn read() -> Kallsyms {
    match std::fs::read(PATH) {
        Ok(text) if shows_addresses(&text) => Kallsyms::Text(text),
        Ok(_) => Kallsyms::Hidden,
        Err(e) => Kallsyms::Unreadable(e.to_string()),
    }
}

/// Whether `/proc/kallsyms` shows real addresses (its first line's is not zero), read
/// from its first line only.
pub fn readable() -> bool {
    let Ok(file) = std::fs::File::open(PATH) else {
        return false;
    };
    let mut first = Vec::new();
    if std::io::BufReader::new(file)
        .read_until(b'\n', &mut first)
        .is_err()
    {
        return false;
    }
    shows_addresses(&first)
}

/// Whether a kallsyms text's first address is not all zeros.
fn shows_addresses(text: &[u8]) -> bool {
    let addr = text.split(|&b| b == b' ').next().unwrap_or_default();
    !addr.is_empty() && addr.iter().any(|&b| b != b'0')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeros_are_hidden_addresses() {
        assert!(shows_addresses(b"ffffffff81000000 T _stext\n"));
        assert!(!shows_addresses(b"0000000000000000 T _stext\n"));
        assert!(!shows_addresses(b""));
    }
}
