//! A bounds-checked reader over part of a perf.data file that knows its absolute offset
//! (for errors): the crate's one cursor ([`crate::bytes::Cursor`]), its short reads
//! mapped into [`PerfDataError::Truncated`].

use super::PerfDataError;
use crate::bytes::{self, Endian, Short};

/// Reads integers and strings in the file's byte order; every read is bounds-checked and
/// a failure names the field and the absolute byte offset.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cursor<'a> {
    inner: bytes::Cursor<'a>,
    /// Absolute file (or stream) offset of the bytes' first byte.
    base: u64,
}

/// `fn u8/u32/u64(&mut self, what)`: the shared cursor's read, its error mapped.
macro_rules! int_readers {
    ($($t:ident),*) => {$(
        pub(crate) fn $t(&mut self, what: &'static str) -> Result<$t, PerfDataError> {
            self.inner.$t(what).map_err(|e| self.short(e))
        }
    )*};
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `bytes`, which start at absolute offset `base`.
    pub(crate) fn new(bytes: &'a [u8], base: u64, endian: Endian) -> Self {
        Cursor {
            inner: bytes::Cursor::new(bytes, 0, endian),
            base,
        }
    }

    /// The shared cursor's short read as this file's error.
    fn short(&self, e: Short) -> PerfDataError {
        PerfDataError::Truncated {
            what: e.what,
            at: self.base.saturating_add(e.at as u64),
            need: e.need,
            have: e.have,
        }
    }

    /// The absolute offset of the next byte.
    pub(crate) fn at(&self) -> u64 {
        // A place in the input: far below u64::MAX (saturating all the same).
        self.base.saturating_add(self.inner.pos() as u64)
    }

    /// The bytes not read yet (without consuming them).
    pub(crate) fn rest(&self) -> &'a [u8] {
        self.inner.rest()
    }

    /// The next `n` bytes.
    pub(crate) fn take(&mut self, what: &'static str, n: usize) -> Result<&'a [u8], PerfDataError> {
        self.take_u64(what, n as u64)
    }

    /// The next `n` bytes, `n` given as a u64 read from the file.
    pub(crate) fn take_u64(
        &mut self,
        what: &'static str,
        n: u64,
    ) -> Result<&'a [u8], PerfDataError> {
        self.inner.take(n, what).map_err(|e| self.short(e))
    }

    /// Bytes up to a NUL (consumed with it); the text without the NUL.
    pub(crate) fn c_string(&mut self, what: &'static str) -> Result<&'a [u8], PerfDataError> {
        self.inner.c_string(what).map_err(|e| self.short(e))
    }

    int_readers!(u8, u16, u32, u64);
}
