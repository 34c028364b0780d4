//! JSON strings: escaping (RFC 8259), the `String::from_utf8_lossy` rule for bytes that
//! should be UTF-8, `char` data up to its NUL, hex strings; and THE word-at-a-time
//! scanner ([`first_flagged`]) that lets clean strings be copied after one pass.

use std::fmt;

use super::line_buf::LineOut;

/// `char` data as a JSON string: up to its first NUL (all of it without one), as
/// [`decode_field`] reads it, then as [`write_text`] writes it. One pass finds the first
/// byte that is not plain printable ASCII; when that is the NUL (or there is none), the
/// string before it is copied as it is.
#[inline]
pub(crate) fn write_c_string(out: &mut Vec<u8>, data: &[u8]) {
    let clean = match first_special(data) {
        None => data,
        Some(at) => match data.split_at_checked(at) {
            Some((clean, [0, ..])) => clean,
            _ => {
                let end = memchr::memchr(0, data).unwrap_or(data.len());
                return write_text(out, data.get(..end).unwrap_or_default());
            }
        },
    };
    out.push(b'"');
    out.extend_from_slice(clean);
    out.push(b'"');
}

/// [`write_c_string`] of the `char` area `start..end` of `raw`; `false`, with nothing
/// written, when `raw` does not hold it. Areas of at most 16 bytes (`comm` and other
/// short names) with 16 bytes of `raw` from `start` are scanned as two words and copied,
/// quotes included, as one fixed-size window ([`LineOut::put`]) instead of a `memcpy`
/// call.
#[inline]
pub(crate) fn write_c_string_at(
    out: &mut impl LineOut,
    raw: &[u8],
    start: usize,
    end: usize,
) -> bool {
    let Some(area) = raw.get(start..end) else {
        return false;
    };
    let window = raw.get(start..).and_then(<[u8]>::first_chunk::<16>);
    let Some(window) = window.filter(|_| area.len() <= 16) else {
        write_c_string(out.vec(), area);
        return true;
    };
    let (low, high) = window.split_at(8);
    let word = |half: &[u8]| u64::from_le_bytes(half.try_into().unwrap_or_default());
    let (low, high) = (special_mask(word(low)), special_mask(word(high)));
    // The lowest flag of a word is exact, and the high word counts only when the low
    // one has none.
    let first = if low != 0 {
        (low.trailing_zeros() / 8) as usize
    } else {
        8 + (high.trailing_zeros() / 8) as usize
    };
    let len = match window.get(first) {
        None => area.len(),
        Some(_) if first >= area.len() => area.len(),
        Some(0) => first,
        Some(_) => {
            write_c_string(out.vec(), area);
            return true;
        }
    };
    let mut quoted = [b'"'; 18];
    quoted[1..17].copy_from_slice(window);
    quoted[1 + len] = b'"';
    out.put(&quoted, len + 2);
    true
}

/// The index of the first byte of `bytes` that is below 0x20 (NUL included), `"`, `\`
/// or above 0x7f ([`special_mask`]), 8 bytes at a time.
#[inline]
pub(crate) fn first_special(bytes: &[u8]) -> Option<usize> {
    first_flagged(bytes, special_mask)
}

/// The index of the first byte of `bytes` whose high bit `mask` flags, 8 bytes at a time
/// (`mask`'s lowest flag must be exact); a last partial word is read again overlapping
/// the one before (its first bytes were unflagged already), or padded with spaces (which
/// no mask flags) when `bytes` is shorter than 8. THE word-at-a-time scanner: strings to
/// copy ([`write_c_string`], [`write_text`]) and strings to escape ([`write_str`]) use it.
#[inline]
fn first_flagged(bytes: &[u8], mask: impl Fn(u64) -> u64) -> Option<usize> {
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let flags = mask(u64::from_le_bytes(word));
        if flags != 0 {
            return Some(at + (flags.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let rest = words.remainder();
    if rest.is_empty() {
        return None;
    }
    let (start, word) = match bytes.last_chunk::<8>() {
        Some(last) => (bytes.len() - 8, u64::from_le_bytes(*last)),
        None => {
            let mut word = [b' '; 8];
            for (w, &b) in word.iter_mut().zip(rest) {
                *w = b;
            }
            (at, u64::from_le_bytes(word))
        }
    };
    let flags = mask(word);
    (flags != 0).then(|| start + (flags.trailing_zeros() / 8) as usize)
}

/// Bytes `1` in every byte lane.
const ONES: u64 = u64::MAX / 255;
/// The high bit of every byte lane.
const HIGH: u64 = ONES * 0x80;

/// The high bit of each byte of `word` that JSON must escape: below 0x20, `"` or `\`.
/// Bytes above a flagged one may be flagged too (borrows), but the lowest flag is exact.
#[inline]
fn escape_mask(word: u64) -> u64 {
    let zero = |v: u64| v.wrapping_sub(ONES) & !v;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word;
    (below_space | zero(word ^ (ONES * u64::from(b'"'))) | zero(word ^ (ONES * u64::from(b'\\'))))
        & HIGH
}

/// [`escape_mask`] plus the bytes above 0x7f (not plain ASCII).
#[inline]
fn special_mask(word: u64) -> u64 {
    escape_mask(word) | (word & HIGH)
}

/// `"key":`
pub(crate) fn write_key(out: &mut Vec<u8>, key: &str) {
    write_str(out, key);
    out.push(b':');
}

/// A JSON string from valid UTF-8. Strings needing no escape (the usual case, found 8
/// bytes at a time) are copied; others go through serde_json's escaper (RFC 8259: `"`,
/// `\`, and the C0 controls as `\n`-style or `\u00XX` escapes).
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    if first_flagged(s.as_bytes(), escape_mask).is_some() {
        write_escaped(out, s);
    } else {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }
}

/// serde_json's escaper, out of line (inlined, it ran 30% slower in the string-heavy bench).
#[inline(never)]
fn write_escaped(out: &mut Vec<u8>, s: &str) {
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// The escaped contents of `s` without the quotes, for pieces of a string (lossy text
/// between its invalid sequences, `Display` messages, single characters): the runs
/// between bytes to escape copied, each byte to escape as [`write_escape`] writes it;
/// one table lookup per byte ([`ESCAPE`], as serde_json's escaper does). serde_json
/// writes only whole quoted strings (pieces needed their quotes cut off, a copy of the
/// text each), so whole strings go to it ([`write_str`]) and pieces come here;
/// `escapes_match_serde_json` checks every byte value against serde_json.
pub(crate) fn write_str_contents(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let code = ESCAPE[usize::from(b)];
        if code == 0 {
            continue;
        }
        if start < i {
            out.extend_from_slice(bytes.get(start..i).unwrap_or_default());
        }
        write_code(out, b, code);
        start = i + 1;
    }
    if start < bytes.len() {
        out.extend_from_slice(bytes.get(start..).unwrap_or_default());
    }
}

/// What follows the backslash when JSON escapes a byte (serde_json's rule): the letter
/// of a short escape, `u` for `\u00XX`, 0 for bytes written as they are.
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

/// One byte as JSON writes it inside a string: escaped (below 0x20, `"`, `\`) as
/// serde_json escapes it, else as it is.
#[inline]
pub(crate) fn write_escape(out: &mut Vec<u8>, b: u8) {
    write_code(out, b, ESCAPE[usize::from(b)]);
}

/// `b` with its [`ESCAPE`] code.
#[inline]
fn write_code(out: &mut Vec<u8>, b: u8, code: u8) {
    match code {
        0 => out.push(b),
        b'u' => {
            let [.., hi, lo] = hex_digits(u32::from(b));
            out.extend_from_slice(&[b'\\', b'u', b'0', b'0', hi, lo]);
        }
        short => out.extend_from_slice(&[b'\\', short]),
    }
}

/// A JSON string from bytes that should be UTF-8: each maximal invalid sequence becomes
/// U+FFFD (the `String::from_utf8_lossy` rule), without allocating. Plain ASCII needing
/// no escape is copied after one scan; other text is validated, and only invalid text
/// takes the piecewise path.
pub(crate) fn write_text(out: &mut Vec<u8>, bytes: &[u8]) {
    if write_plain(out, bytes) {
        return;
    }
    write_special_text(out, bytes);
}

/// Valid UTF-8 up to this long that needs escapes goes through the byte loop of
/// [`write_str_contents`]; longer, through serde_json's escaper ([`write_str`]), which
/// is faster on long strings but costs a chain of calls per string.
const SHORT_TEXT: usize = 64;

/// [`write_text`] for bytes that are not plain ASCII needing no escape (out of line: the
/// rarer path).
#[inline(never)]
fn write_special_text(out: &mut Vec<u8>, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(s) if s.len() > SHORT_TEXT => write_str(out, s),
        Ok(s) => {
            out.push(b'"');
            write_str_contents(out, s);
            out.push(b'"');
        }
        Err(_) => {
            out.push(b'"');
            write_lossy_contents(out, bytes);
            out.push(b'"');
        }
    }
}

/// [`write_text`] without the quotes (out of line: the rarer path of [`write_text`]).
#[inline(never)]
pub(crate) fn write_text_contents(out: &mut Vec<u8>, bytes: &[u8]) {
    if let Ok(s) = std::str::from_utf8(bytes) {
        write_str_contents(out, s);
    } else {
        write_lossy_contents(out, bytes);
    }
}

/// The contents of invalid UTF-8: its valid runs escaped, each maximal invalid sequence
/// as U+FFFD.
fn write_lossy_contents(out: &mut Vec<u8>, bytes: &[u8]) {
    for chunk in bytes.utf8_chunks() {
        let valid = chunk.valid();
        if !valid.is_empty() {
            write_str_contents(out, valid);
        }
        if !chunk.invalid().is_empty() {
            out.extend_from_slice("\u{FFFD}".as_bytes());
        }
    }
}

/// Plain printable ASCII needing no escape ([`first_special`] finds nothing) as a JSON
/// string, copied; `false` (nothing written) for other bytes.
#[inline]
pub(crate) fn write_plain(out: &mut Vec<u8>, bytes: &[u8]) -> bool {
    if first_special(bytes).is_some() {
        return false;
    }
    out.push(b'"');
    out.extend_from_slice(bytes);
    out.push(b'"');
    true
}

/// The 8 lowercase hex digits of `v`, most significant first. Word-parallel (one nibble
/// per byte lane, then `'0'` or `'a' - 10` added in every lane at once) rather than a
/// table lookup per digit: hex strings, numbers and UUIDs are built from it.
#[inline]
pub(crate) fn hex_digits(v: u32) -> [u8; 8] {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_ffff_0000_ffff;
    x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff;
    // Byte lane i now holds nibble i (least significant first).
    x = (x | (x << 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    let letters = ((x + ONES * 6) >> 4) & ONES;
    (x + ONES * u64::from(b'0') + letters * u64::from(b'a' - b'0' - 10)).to_be_bytes()
}

/// Bytes as a lowercase hex JSON string (`"0aff"`), 4 bytes at a time.
pub(crate) fn write_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len() * 2 + 2);
    out.push(b'"');
    let words = bytes.chunks_exact(4);
    let rest = words.remainder();
    for word in words {
        let mut b = [0u8; 4];
        b.copy_from_slice(word);
        out.extend_from_slice(&hex_digits(u32::from_be_bytes(b)));
    }
    for &b in rest {
        out.extend_from_slice(
            hex_digits(u32::from(b))
                .last_chunk::<2>()
                .unwrap_or(&[0; 2]),
        );
    }
    out.push(b'"');
}

/// `fmt::Write` into a JSON string body (escaping), for `Display` messages.
pub(crate) struct Escaped<'a>(pub(crate) &'a mut Vec<u8>);

impl fmt::Write for Escaped<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        write_str_contents(self.0, s);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_match_serde_json() {
        for b in 0u8..=0x7f {
            let s = [b'a', b, b'z'];
            let s = std::str::from_utf8(&s).unwrap();
            let mut out = Vec::new();
            write_str(&mut out, s);
            assert_eq!(out, serde_json::to_vec(s).unwrap(), "byte {b:#x}");
        }
        let mut out = Vec::new();
        write_str(&mut out, "é\u{2028}😀");
        assert_eq!(out, serde_json::to_vec("é\u{2028}😀").unwrap());
        // The byte loop for pieces and short strings, on every byte value and on text
        // around the length where whole strings switch to serde_json.
        for b in 0u8..=0x7f {
            let s = [b'a', b, b'z'];
            let s = std::str::from_utf8(&s).unwrap();
            let mut out = vec![b'"'];
            write_str_contents(&mut out, s);
            out.push(b'"');
            assert_eq!(out, serde_json::to_vec(s).unwrap(), "byte {b:#x}");
        }
        for len in [1, SHORT_TEXT - 1, SHORT_TEXT, SHORT_TEXT + 1, 200] {
            let s: String = (0..len).map(|i| ['\u{1}', 'é', '"', 'x'][i % 4]).collect();
            let mut out = Vec::new();
            write_text(&mut out, s.as_bytes());
            assert_eq!(out, serde_json::to_vec(&s).unwrap(), "{len}");
        }
    }

    #[test]
    fn word_test_agrees_with_the_table() {
        // Every pair of byte values at every pair of adjacent positions (borrows between
        // bytes are where such bit tricks go wrong), the other bytes plain or high.
        for filler in [b'a', 0x80, 0xff] {
            for pos in 0..7 {
                for pair in 0..=u16::MAX {
                    let mut word = [filler; 8];
                    word[pos..pos + 2].copy_from_slice(&pair.to_le_bytes());
                    let expected = word
                        .iter()
                        .position(|&b| b < 0x20 || b == b'"' || b == b'\\');
                    let flags = escape_mask(u64::from_le_bytes(word));
                    let lowest = (flags != 0).then(|| (flags.trailing_zeros() / 8) as usize);
                    assert_eq!(lowest, expected, "{word:?}");
                }
            }
        }
    }

    #[test]
    fn first_special_agrees_with_a_byte_loop() {
        let special = |b: u8| b < 0x20 || b == b'"' || b == b'\\' || b >= 0x80;
        // Every length up to 3 words, every position, every byte value class.
        for len in 0..24 {
            for pos in 0..len {
                for b in [0u8, 1, 0x1f, b'"', b'\\', 0x7f, 0x80, 0xff, b' ', b'a'] {
                    for filler in [b'a', b'~', b' '] {
                        let mut bytes = vec![filler; len];
                        bytes[pos] = b;
                        if pos + 1 < len {
                            bytes[pos + 1] = 0; // something special after it, too
                        }
                        let expected = bytes.iter().position(|&b| special(b));
                        assert_eq!(first_special(&bytes), expected, "{bytes:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn c_string_at_agrees_with_c_string() {
        // Every area of up to 20 bytes at every start in records of up to 40 bytes, with
        // a NUL, an escape, a high byte or nothing special at each place.
        for special in [
            None,
            Some(0u8),
            Some(b'"'),
            Some(0x01),
            Some(0xc3),
            Some(0xff),
        ] {
            for at in 0..20 {
                let mut raw: Vec<u8> = (0..40).map(|i| b'a' + (i % 26)).collect();
                if let Some(b) = special {
                    raw[at] = b;
                }
                for len in [20, 33, 40] {
                    for start in 0..len {
                        for end in start..=(start + 20).min(len) {
                            let raw = &raw[..len];
                            let mut fast = Vec::new();
                            assert!(write_c_string_at(&mut fast, raw, start, end));
                            let mut slow = Vec::new();
                            write_c_string(&mut slow, &raw[start..end]);
                            assert_eq!(fast, slow, "{special:?} {at} {len} {start}..{end}");
                        }
                    }
                }
            }
        }
        assert!(!write_c_string_at(&mut Vec::new(), b"abc", 2, 4));
        assert!(!write_c_string_at(&mut Vec::new(), b"abc", 3, 2));
    }

    #[test]
    fn hex_as_format_writes_it() {
        let mut v = 0u32;
        for _ in 0..200_000 {
            assert_eq!(hex_digits(v), *format!("{v:08x}").as_bytes());
            v = v.wrapping_mul(2_654_435_761).wrapping_add(12_345);
        }
        for v in [0, 9, 10, 15, 16, 0x9abc_def0, u32::MAX] {
            assert_eq!(hex_digits(v), *format!("{v:08x}").as_bytes());
        }
        let bytes: Vec<u8> = (0..=255).collect();
        for len in 0..12 {
            for start in [0, 7, 250] {
                let b = &bytes[start..(start + len).min(256)];
                let mut out = Vec::new();
                write_hex(&mut out, b);
                let expected: String = b.iter().map(|b| format!("{b:02x}")).collect();
                assert_eq!(out, format!("\"{expected}\"").into_bytes());
            }
        }
    }

    #[test]
    fn lossy_rule_matches_std() {
        let cases: [&[u8]; 6] = [
            b"\xff",
            b"a\xf0\x9f\x98b",
            b"\xe2\x82",
            b"\xc0\xaf\xed\xa0\x80x",
            b"ok\xf4\x90\x80\x80",
            b"\x80\x80\x80",
        ];
        for bytes in cases {
            let mut out = Vec::new();
            write_text(&mut out, bytes);
            let expected = serde_json::to_vec(&String::from_utf8_lossy(bytes)).unwrap();
            assert_eq!(out, expected, "{bytes:?}");
        }
    }
}
