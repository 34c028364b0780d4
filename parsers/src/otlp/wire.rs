//! The protobuf wire format, written straight into the output: field keys and varints
//! through `prost::encoding`, length-delimited fields opened with a one-byte length and
//! closed by filling it in ([`open`], [`close`]: a field of 128 bytes or more moves its
//! contents up by the extra length bytes, one `memmove` per nested message that long),
//! strings from the field tree's JSON text ([`unescape`]), and `AnyValue` scalars. The
//! pieces under every protobuf writer: the field tree (`fields.rs`), attribute lists
//! (`enc.rs`), records (`proto.rs`), compiled plans (`fast.rs`), export frames (`batch.rs`).
//!
//! Proto3 rules kept: scalar fields at their default (0, empty) are left out, `oneof`
//! members (`AnyValue`'s) are always written.

use std::fmt;

use prost::encoding::{WireType, encoded_len_varint};

/// Field numbers of the OTLP messages written here.
pub(crate) mod field {
    /// `AnyValue`.
    pub const STRING_VALUE: u32 = 1;
    pub const BOOL_VALUE: u32 = 2;
    pub const INT_VALUE: u32 = 3;
    pub const DOUBLE_VALUE: u32 = 4;
    pub const ARRAY_VALUE: u32 = 5;
    pub const KVLIST_VALUE: u32 = 6;
    /// `KeyValue`, and `ArrayValue.values` / `KeyValueList.values` (both 1).
    pub const KEY: u32 = 1;
    pub const VALUE: u32 = 2;
    pub const VALUES: u32 = 1;
    /// `Export*ServiceRequest.resource_*`, `Resource.attributes`, `Scope*.scope`,
    /// `InstrumentationScope.name` (all 1).
    pub const FIRST: u32 = 1;
    /// `Resource*.scope_*`, `Scope*.log_records` / `.spans` (all 2).
    pub const SECOND: u32 = 2;
}

/// A varint. (prost's `encode_varint` goes through `BufMut`, a capacity check per byte:
/// it cost 530 instructions per record in the benchmark record, most varints here being
/// one-byte keys and lengths.)
#[inline]
pub(crate) fn encode_varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A field's key.
#[inline]
pub(crate) fn key(out: &mut Vec<u8>, field: u32, wire: WireType) {
    encode_varint(u64::from(field << 3 | wire as u32), out);
}

/// A varint field (left out when 0).
#[inline]
pub(crate) fn varint(out: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        key(out, field, WireType::Varint);
        encode_varint(v, out);
    }
}

/// A `fixed64` field (left out when 0).
#[inline]
pub(crate) fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        key(out, field, WireType::SixtyFourBit);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// A `bytes` or `string` field (left out when empty).
#[inline]
pub(crate) fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    if !b.is_empty() {
        key(out, field, WireType::LengthDelimited);
        encode_varint(b.len() as u64, out);
        out.extend_from_slice(b);
    }
}

/// Open a length-delimited field: its key and a one-byte length to fill in; returns
/// where that byte is, for [`close`].
#[inline]
pub(crate) fn open(out: &mut Vec<u8>, field: u32) -> usize {
    key(out, field, WireType::LengthDelimited);
    out.push(0);
    out.len() - 1
}

/// Close the field opened at `mark` (its contents are what follows): fill in its length;
/// returns the bytes the contents moved up (0 under 128 bytes).
#[inline]
pub(crate) fn close(out: &mut Vec<u8>, mark: usize) -> usize {
    let len = out.len() - mark - 1;
    if len < 128 {
        out[mark] = len as u8;
        return 0;
    }
    close_long(out, mark, len)
}

#[inline(never)]
fn close_long(out: &mut Vec<u8>, mark: usize, len: usize) -> usize {
    let n = encoded_len_varint(len as u64);
    let mut prefix = [0u8; 10];
    let mut v = len as u64;
    for b in prefix.iter_mut().take(n) {
        *b = v as u8 | 0x80;
        v >>= 7;
    }
    prefix[n - 1] &= 0x7f;
    let extra = n - 1;
    let end = out.len();
    out.resize(end + extra, 0);
    out.copy_within(mark + 1..end, mark + n);
    out[mark..mark + n].copy_from_slice(&prefix[..n]);
    extra
}

/// Close the field opened at `mark`, or take it away when its contents are empty (a
/// string field at its default).
#[inline]
pub(crate) fn close_or_drop(out: &mut Vec<u8>, mark: usize, key_len: usize) {
    if out.len() == mark + 1 {
        out.truncate(mark - key_len);
    } else {
        close(out, mark);
    }
}

/// The size of a length-delimited field of `len` bytes with a one-byte key.
#[inline]
pub(crate) fn field_len(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

/// A length-delimited field's key (one byte: fields 1 to 15) and length.
#[inline]
pub(crate) fn head(out: &mut Vec<u8>, field: u32, len: usize) {
    key(out, field, WireType::LengthDelimited);
    encode_varint(len as u64, out);
}

/// The text of the JSON string `json` (quotes included, as the JSON writers write them:
/// valid UTF-8, `\"`, `\\`, `\n`, … and `\u00XX` escapes) on `out`.
#[inline]
pub(crate) fn unescape(out: &mut Vec<u8>, json: &[u8]) {
    let inner = json
        .get(1..json.len().saturating_sub(1))
        .unwrap_or_default();
    if !inner.contains(&b'\\') {
        out.extend_from_slice(inner);
    } else {
        unescape_slow(out, inner);
    }
}

#[inline(never)]
fn unescape_slow(out: &mut Vec<u8>, mut s: &[u8]) {
    while let Some(at) = s.iter().position(|&b| b == b'\\') {
        out.extend_from_slice(&s[..at]);
        let Some(&e) = s.get(at + 1) else {
            return;
        };
        let mut next = at + 2;
        match e {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'u' => {
                let hex = |s: &[u8], at: usize| {
                    let digits = std::str::from_utf8(s.get(at..at + 4)?).ok()?;
                    u32::from_str_radix(digits, 16).ok()
                };
                let mut c = hex(s, at + 2).unwrap_or(0xfffd);
                next = at + 6;
                if (0xd800..0xdc00).contains(&c) && s.get(next..next + 2) == Some(b"\\u") {
                    if let Some(low) = hex(s, next + 2).filter(|l| (0xdc00..0xe000).contains(l)) {
                        c = 0x10000 + ((c - 0xd800) << 10) + (low - 0xdc00);
                        next += 6;
                    }
                }
                let c = char::from_u32(c).unwrap_or('\u{fffd}');
                out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
            }
            other => out.push(other),
        }
        s = s.get(next..).unwrap_or_default();
    }
    out.extend_from_slice(s);
}

/// `bytes` as UTF-8, each maximal invalid sequence as U+FFFD (what `write_text` writes in
/// JSON).
#[inline]
pub(crate) fn lossy(out: &mut Vec<u8>, bytes: &[u8]) {
    // (ASCII, the common case, is checked a word at a time without a call.)
    if bytes.is_ascii() || std::str::from_utf8(bytes).is_ok() {
        out.extend_from_slice(bytes);
        return;
    }
    for chunk in bytes.utf8_chunks() {
        out.extend_from_slice(chunk.valid().as_bytes());
        if !chunk.invalid().is_empty() {
            out.extend_from_slice("\u{FFFD}".as_bytes());
        }
    }
}

/// A `fmt::Write` appending to a byte buffer as is.
pub(crate) struct Raw<'a>(pub &'a mut Vec<u8>);

impl fmt::Write for Raw<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// `AnyValue` contents: `int_value`.
#[inline]
pub(crate) fn int_any(out: &mut Vec<u8>, v: i64) {
    key(out, field::INT_VALUE, WireType::Varint);
    encode_varint(v as u64, out);
}

/// `AnyValue` contents: `int_value` when `v` fits `int64`, else `string_value` of its
/// digits (as in JSON).
pub(crate) fn unsigned_any(out: &mut Vec<u8>, v: u64) {
    match i64::try_from(v) {
        Ok(i) => int_any(out, i),
        Err(_) => {
            let mark = open(out, field::STRING_VALUE);
            crate::json::write_int(out, v);
            close(out, mark);
        }
    }
}

/// `AnyValue` contents: `string_value` of a `Display` text.
pub(crate) fn message_any(out: &mut Vec<u8>, message: &dyn fmt::Display) {
    let mark = open(out, field::STRING_VALUE);
    // `Raw` never fails.
    let _ = fmt::Write::write_fmt(&mut Raw(out), format_args!("{message}"));
    close(out, mark);
}

// Tests compute with the values they pick.
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    #[test]
    fn long_fields_move_up_and_decode() {
        for len in [0usize, 1, 127, 128, 300, 16_383, 16_384, 70_000] {
            let mut out = vec![9];
            let mark = open(&mut out, 1);
            out.extend(std::iter::repeat_n(b'x', len));
            let moved = close(&mut out, mark);
            assert_eq!(moved, encoded_len_varint(len as u64) - 1);
            assert_eq!(out.len(), 1 + field_len(len));
            // prost reads it back as a string field.
            let mut buf = &out[2..];
            assert_eq!(
                prost::encoding::decode_varint(&mut buf).unwrap(),
                len as u64
            );
            assert_eq!(buf.len(), len);
        }
    }

    #[test]
    fn json_strings_unescape_as_serde_json_reads_them() {
        for s in [
            "plain",
            "",
            "q\"b\\s/\n\r\t\u{8}\u{c}\u{1}\u{1f}",
            "é\u{2028}😀",
            "end\\",
        ] {
            let json = serde_json::to_vec(s).unwrap();
            let mut out = Vec::new();
            unescape(&mut out, &json);
            assert_eq!(out, s.as_bytes(), "{s:?}");
        }
        let mut out = Vec::new();
        unescape(&mut out, br#""\ud83d\ude00 \u00e9""#);
        assert_eq!(out, "😀 é".as_bytes());
        let mut out = Vec::new();
        lossy(&mut out, b"a\xffb");
        assert_eq!(out, "a\u{fffd}b".as_bytes());
    }
}
