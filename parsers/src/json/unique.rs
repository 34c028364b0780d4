//! THE rule for unique keys, shared by JSON lines' EventHeader keys and OTLP's attribute
//! and kvlist keys (both must be unique in their object): a key equal to one already
//! written in the same object is renamed `key#2`, `key#3`, … (the first suffix not taken;
//! a key that already ends in `#2` just gets another suffix: `k#2#2`).

use super::numbers::write_int;

/// The key just written at `buf[start..]` (a JSON string when `quoted`, else its bare
/// text), renamed in place while it equals one of `keys` (each `range` of `buf`, written
/// the same way); returns its range.
#[inline]
pub(crate) fn unique_key<K: Copy>(
    buf: &mut Vec<u8>,
    keys: &[K],
    range: impl Fn(K) -> (usize, usize),
    start: usize,
    quoted: bool,
) -> (usize, usize) {
    let taken = |buf: &[u8]| {
        let new = buf.get(start..);
        keys.iter().any(|&k| {
            let (a, b) = range(k);
            buf.get(a..b) == new
        })
    };
    if !taken(buf) {
        return (start, buf.len());
    }
    // The key without its closing quote; each candidate is it, `#n` and the quote.
    let base = buf.len().saturating_sub(usize::from(quoted)).max(start);
    for n in 2u32.. {
        buf.truncate(base);
        buf.push(b'#');
        write_int(buf, n);
        if quoted {
            buf.push(b'"');
        }
        if !taken(buf) {
            break;
        }
    }
    (start, buf.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_until_free() {
        let mut buf = b"\"k\"\"k\"\"k#2\"".to_vec();
        let keys = [(0, 3), (6, 11)];
        // "k" (at 3) is taken by the first; "k#2" by the third: "k#3".
        buf.truncate(6);
        let r = unique_key(&mut buf, &keys[..1], |k| k, 3, true);
        assert_eq!(&buf[r.0..r.1], b"\"k#2\"");
        let mut buf = b"k|k|k#2|".to_vec();
        buf.truncate(4);
        buf.extend_from_slice(b"k");
        let r = unique_key(&mut buf, &[(0, 1), (2, 3)], |k| k, 4, false);
        assert_eq!(&buf[r.0..r.1], b"k#2");
        let mut buf = b"ab".to_vec();
        assert_eq!(unique_key(&mut buf, &[(0, 1)], |k| k, 1, false), (1, 2));
    }
}
