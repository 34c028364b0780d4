//! A bounds-checked reader over part of a perf.data file that knows its absolute offset
//! (for errors) and the file's byte order.

use super::PerfDataError;

/// Reads integers and strings in the file's byte order; every read is bounds-checked and
/// a failure names the field and the absolute byte offset.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Absolute file (or stream) offset of `bytes[0]`.
    base: u64,
    big_endian: bool,
}

/// `fn u16/u32/u64(&mut self, what)`: one integer in the cursor's byte order.
macro_rules! int_readers {
    ($($t:ident),*) => {$(
        pub(crate) fn $t(&mut self, what: &'static str) -> Result<$t, PerfDataError> {
            let mut a = [0u8; std::mem::size_of::<$t>()];
            let n = a.len();
            a.copy_from_slice(self.take(what, n)?);
            Ok(if self.big_endian { $t::from_be_bytes(a) } else { $t::from_le_bytes(a) })
        }
    )*};
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `bytes`, which start at absolute offset `base`.
    pub(crate) fn new(bytes: &'a [u8], base: u64, big_endian: bool) -> Self {
        Cursor {
            bytes,
            pos: 0,
            base,
            big_endian,
        }
    }

    /// The absolute offset of the next byte.
    pub(crate) fn at(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// The bytes not read yet (without consuming them).
    pub(crate) fn rest(&self) -> &'a [u8] {
        &self.bytes[self.pos..]
    }

    /// The next `n` bytes.
    pub(crate) fn take(&mut self, what: &'static str, n: usize) -> Result<&'a [u8], PerfDataError> {
        let have = self.remaining();
        if n > have {
            return Err(PerfDataError::Truncated {
                what,
                at: self.at(),
                need: n as u64,
                have: have as u64,
            });
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// The next `n` bytes, `n` given as a u64 read from the file.
    pub(crate) fn take_u64(
        &mut self,
        what: &'static str,
        n: u64,
    ) -> Result<&'a [u8], PerfDataError> {
        match usize::try_from(n) {
            Ok(n) => self.take(what, n),
            Err(_) => Err(PerfDataError::Truncated {
                what,
                at: self.at(),
                need: n,
                have: self.remaining() as u64,
            }),
        }
    }

    /// Bytes up to a NUL (consumed with it); the text without the NUL.
    pub(crate) fn c_string(&mut self, what: &'static str) -> Result<&'a [u8], PerfDataError> {
        let rest = self.rest();
        match memchr::memchr(0, rest) {
            Some(end) => {
                self.pos += end + 1;
                Ok(&rest[..end])
            }
            None => Err(PerfDataError::Truncated {
                what,
                at: self.at(),
                need: rest.len() as u64 + 1,
                have: rest.len() as u64,
            }),
        }
    }

    int_readers!(u32, u64);

    /// One byte.
    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, PerfDataError> {
        Ok(self.take(what, 1)?[0])
    }
}

/// `bytes` as text: up to the first NUL, invalid UTF-8 replaced (perf's strings are
/// NUL-padded C strings).
pub(crate) fn text(bytes: &[u8]) -> String {
    let end = memchr::memchr(0, bytes).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// The u64 at `at` in `bytes` in the given byte order, if it is there (the hot paths'
/// read: no error value to build).
#[inline]
pub(crate) fn u64_at(bytes: &[u8], at: usize, big_endian: bool) -> Option<u64> {
    let b = *bytes.get(at..)?.first_chunk::<8>()?;
    Some(if big_endian {
        u64::from_be_bytes(b)
    } else {
        u64::from_le_bytes(b)
    })
}
