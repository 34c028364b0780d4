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

/// The kernel's text as `perf record` maps it: `(symbol, start, end)` from the addresses
/// of `_text` (else `_stext`) and `_etext` (none: to the end of the address space, as
/// perf's map then reaches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelText {
    /// `_text` or `_stext`.
    pub symbol: &'static str,
    /// Its address.
    pub start: u64,
    /// `_etext`'s address, or `u64::MAX`.
    pub end: u64,
}

/// Why the kernel's text has no map: `/proc/kallsyms` shows zero addresses.
pub const TEXT_HIDDEN: &str = "/proc/kallsyms shows zero addresses (kptr_restrict): the \
    perf.data holds no kernel map, so perf script prints kernel frames as [unknown]; \
    `uevrec decode` names them from the decoding machine's /proc/kallsyms when it shows \
    them (as root, or with kernel.kptr_restrict=0)";

/// The kernel's text from `/proc/kallsyms`, or why not (in words).
pub fn kernel_text() -> Result<KernelText, String> {
    match std::fs::read(PATH) {
        Ok(text) => text_of(&text).ok_or_else(|| TEXT_HIDDEN.to_string()),
        Err(e) => Err(format!(
            "{PATH} could not be read ({e}): the perf.data holds no kernel map, so perf \
             script prints kernel frames as [unknown]"
        )),
    }
}

/// [`KernelText`] of a kallsyms text; `None` when it names neither `_text` nor `_stext`
/// or shows it at address 0 (hidden).
fn text_of(kallsyms: &[u8]) -> Option<KernelText> {
    let (mut text, mut stext, mut etext) = (None, None, None);
    for line in kallsyms.split(|&b| b == b'\n') {
        let mut parts = line.split(|&b| b == b' ');
        let (Some(addr), Some(_kind), Some(name), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            // Module symbols carry a fourth part (`[module]`).
            continue;
        };
        let slot = match name {
            b"_text" => &mut text,
            b"_stext" => &mut stext,
            b"_etext" => &mut etext,
            _ => continue,
        };
        let addr = std::str::from_utf8(addr).ok();
        *slot = addr.and_then(|a| u64::from_str_radix(a, 16).ok());
        if text.is_some() && etext.is_some() {
            break;
        }
    }
    let (symbol, start) = match (text, stext) {
        (Some(a), _) if a != 0 => ("_text", a),
        (_, Some(a)) if a != 0 => ("_stext", a),
        _ => return None,
    };
    let end = etext.filter(|&e| e > start).unwrap_or(u64::MAX);
    Some(KernelText { symbol, start, end })
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
    fn kernel_text_from_text_or_stext_to_etext() {
        let k = b"0000000000000000 A fixed_percpu_data\nffffffff81000000 T _stext\n\
            ffffffff81000000 T _text\nffffffff81000010 t helper [mod]\n\
            ffffffff82259b00 T _etext\n";
        let want = KernelText {
            symbol: "_text",
            start: 0xffff_ffff_8100_0000,
            end: 0xffff_ffff_8225_9b00,
        };
        assert_eq!(text_of(k), Some(want));
        let stext = b"ffffffff81000000 T _stext\n";
        let open_ended = KernelText {
            symbol: "_stext",
            end: u64::MAX,
            ..want
        };
        assert_eq!(text_of(stext), Some(open_ended));
        let hidden = b"0000000000000000 T _stext\n0000000000000000 T _text\n";
        assert_eq!(text_of(hidden), None);
        assert_eq!(text_of(b""), None);
    }

    #[test]
    fn zeros_are_hidden_addresses() {
        assert!(shows_addresses(b"ffffffff81000000 T _stext\n"));
        assert!(!shows_addresses(b"0000000000000000 T _stext\n"));
        assert!(!shows_addresses(b""));
    }
}
