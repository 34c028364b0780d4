//! The lowest layer: the one byte-order type ([`Endian`]) and the one bounds-checked
//! [`Cursor`] every file reader (perf.data, trace.dat) reads through.
//!
//! The cursor's failure is a small [`Short`] (what was read, where, how many bytes it
//! needed and had); each reader maps it into its own error type, adding what only it
//! knows (the absolute file offset, the compressed section).

/// Byte order of the record's integers (and of dynamic location values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Endian {
    /// Little-endian (x86, arm64 …): the default.
    #[default]
    Little,
    /// Big-endian (s390x, some perf.data files from other machines).
    Big,
}

impl Endian {
    /// The byte order of the machine this runs on (that of the live kernel's records).
    pub const NATIVE: Endian = if cfg!(target_endian = "big") {
        Endian::Big
    } else {
        Endian::Little
    };

    /// `Big` when `big` is true, else `Little` (for headers that store a flag).
    #[inline]
    pub const fn from_big(big: bool) -> Endian {
        if big { Endian::Big } else { Endian::Little }
    }

    /// Whether this is [`Endian::Big`].
    #[inline]
    pub const fn is_big(self) -> bool {
        matches!(self, Endian::Big)
    }
}

/// A read that ran past the end of the cursor's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Short {
    /// What was being read (for the message).
    pub(crate) what: &'static str,
    /// Position (in the cursor's bytes) where the read began.
    pub(crate) at: usize,
    /// Bytes the read needed.
    pub(crate) need: u64,
    /// Bytes that were left.
    pub(crate) have: u64,
}

/// A position in a byte slice; every read is bounds-checked, integers come in the
/// cursor's byte order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    endian: Endian,
}

/// `fn u16/u32/u64(&mut self, what)`: one integer in the cursor's byte order.
macro_rules! int_readers {
    ($($t:ident),*) => {$(
        #[doc = concat!("One `", stringify!($t), "` in the cursor's byte order.")]
        #[inline]
        pub(crate) fn $t(&mut self, what: &'static str) -> Result<$t, Short> {
            let mut a = [0u8; std::mem::size_of::<$t>()];
            a.copy_from_slice(self.take(std::mem::size_of::<$t>() as u64, what)?);
            Ok(match self.endian {
                Endian::Big => $t::from_be_bytes(a),
                Endian::Little => $t::from_le_bytes(a),
            })
        }
    )*};
}

impl<'a> Cursor<'a> {
    /// A cursor over `bytes` at position `pos`.
    pub(crate) fn new(bytes: &'a [u8], pos: usize, endian: Endian) -> Self {
        Cursor { bytes, pos, endian }
    }

    /// The position of the next byte.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Moves to position `pos` (past the end is allowed: reads there fail).
    pub(crate) fn seek(&mut self, pos: usize) {
        self.pos = pos;
    }

    /// Reads the integers that follow in byte order `endian`.
    pub(crate) fn set_endian(&mut self, endian: Endian) {
        self.endian = endian;
    }

    /// The byte order of the integers read.
    pub(crate) fn endian(&self) -> Endian {
        self.endian
    }

    /// All bytes of the cursor (read or not).
    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    /// The bytes not read yet (without consuming them).
    pub(crate) fn rest(&self) -> &'a [u8] {
        self.bytes.get(self.pos..).unwrap_or_default()
    }

    /// The failure of a read of `need` bytes here.
    fn short(&self, what: &'static str, need: u64) -> Short {
        Short {
            what,
            at: self.pos,
            need,
            have: self.remaining() as u64,
        }
    }

    /// The next `n` bytes (`n` may come from the file, so it is a u64).
    #[inline]
    pub(crate) fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8], Short> {
        let have = self.remaining();
        if n > have as u64 {
            return Err(self.short(what, n));
        }
        // n <= have, so it fits a usize, and pos + n <= len.
        let start = self.pos;
        #[allow(clippy::arithmetic_side_effects)]
        let end = start + n as usize;
        self.pos = end;
        Ok(&self.bytes[start..end])
    }

    /// One byte.
    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, Short> {
        Ok(self.take(1, what)?[0])
    }

    int_readers!(u16, u32, u64);

    /// An unsigned integer of `size` bytes (at most 8) in the cursor's byte order.
    pub(crate) fn uint(&mut self, size: usize, what: &'static str) -> Result<u64, Short> {
        let b = self.take(size as u64, what)?;
        let mut v = 0u64;
        match self.endian {
            Endian::Little => b.iter().rev().for_each(|&x| v = (v << 8) | u64::from(x)),
            Endian::Big => b.iter().for_each(|&x| v = (v << 8) | u64::from(x)),
        }
        Ok(v)
    }

    /// Bytes up to a NUL (consumed with it); the bytes without the NUL.
    pub(crate) fn c_string(&mut self, what: &'static str) -> Result<&'a [u8], Short> {
        let rest = self.rest();
        match memchr::memchr(0, rest) {
            Some(end) => {
                // The NUL is inside the bytes: pos + end + 1 <= len.
                #[allow(clippy::arithmetic_side_effects)]
                let after = self.pos + end + 1;
                self.pos = after;
                Ok(&rest[..end])
            }
            None => Err(self.short(what, (rest.len() as u64).saturating_add(1))),
        }
    }
}

/// `bytes` as text: up to the first NUL, invalid UTF-8 replaced (the files' strings are
/// NUL-padded C strings).
pub(crate) fn text(bytes: &[u8]) -> String {
    let end = memchr::memchr(0, bytes).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// The u16 at `at` in `bytes` in the given byte order, if it is there.
#[inline]
pub(crate) fn u16_at(bytes: &[u8], at: usize, endian: Endian) -> Option<u16> {
    let b = *bytes.get(at..)?.first_chunk::<2>()?;
    Some(match endian {
        Endian::Big => u16::from_be_bytes(b),
        Endian::Little => u16::from_le_bytes(b),
    })
}

/// The u64 at `at` in `bytes` in the given byte order, if it is there (the hot paths'
/// read: no error value to build).
#[inline]
pub(crate) fn u64_at(bytes: &[u8], at: usize, endian: Endian) -> Option<u64> {
    let b = *bytes.get(at..)?.first_chunk::<8>()?;
    Some(match endian {
        Endian::Big => u64::from_be_bytes(b),
        Endian::Little => u64::from_le_bytes(b),
    })
}

/// Bytes as a user reads them in an error: as text (printable ASCII kept, the rest
/// escaped as `\xNN`) and as spaced hex, e.g. `"PERFILE3" (50 45 52 46 49 4c 45 33)`.
pub(crate) struct ShownBytes<'a>(pub &'a [u8]);

impl std::fmt::Display for ShownBytes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "\"{}\" (", self.0.escape_ascii())?;
        for (i, b) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            write!(f, "{sep}{b:02x}")?;
        }
        f.write_str(")")
    }
}

// Tests compute with the values they pick.
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_byte_orders_and_reports_where_it_ran_short() {
        let bytes = [1, 2, 3, 4, 5, 6, 7, 8, b'h', b'i', 0, 9];
        let mut le = Cursor::new(&bytes, 0, Endian::Little);
        assert_eq!(le.u16("a"), Ok(0x0201));
        assert_eq!(le.u8("b"), Ok(3));
        assert_eq!(le.uint(3, "c"), Ok(0x060504));
        let mut be = Cursor::new(&bytes, 0, Endian::Big);
        assert_eq!(be.u32("d"), Ok(0x0102_0304));
        assert_eq!(be.take(4, "f"), Ok(&bytes[4..8]));
        assert_eq!(be.c_string("g"), Ok(&b"hi"[..]));
        assert_eq!(be.pos(), 11);
        assert_eq!(
            be.c_string("h"),
            Err(Short {
                what: "h",
                at: 11,
                need: 2,
                have: 1
            })
        );
        assert_eq!(
            be.u64("e"),
            Err(Short {
                what: "e",
                at: 11,
                need: 8,
                have: 1
            })
        );
        assert_eq!(be.take(u64::MAX, "i").unwrap_err().need, u64::MAX);
        assert_eq!(u64_at(&bytes, 0, Endian::Big), Some(0x0102_0304_0506_0708));
        assert_eq!(u64_at(&bytes, 5, Endian::Little), None);
        assert_eq!(u16_at(&bytes, 10, Endian::Little), Some(0x0900));
        assert_eq!(u16_at(&bytes, 11, Endian::Big), None);
        assert_eq!(text(b"ab\0cd"), "ab");
    }

    #[test]
    fn shown_bytes_are_text_and_hex() {
        let junk = [0xea, 0x57, 0x96, 0x25, 0, b'"', b'\\', 0x7f];
        assert_eq!(
            ShownBytes(&junk).to_string(),
            r#""\xeaW\x96%\x00\"\\\x7f" (ea 57 96 25 00 22 5c 7f)"#
        );
        assert_eq!(ShownBytes(b"").to_string(), r#""" ()"#);
    }
}
