//! Reading numbers, strings and blocks out of trace.dat bytes, with errors that say where:
//! the crate's one cursor ([`crate::bytes::Cursor`]) plus the section its bytes came from.

use super::{ErrorKind, TraceDatError};
use crate::bytes::{self, Endian, Short};

/// A position in a byte slice that is either the file itself (`base` = None: positions
/// are file offsets) or data decompressed from the section at file offset `base`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cursor<'b> {
    inner: bytes::Cursor<'b>,
    /// File offset of the compressed section the bytes came from, if any.
    base: Option<u64>,
}

/// `fn u8/u16/u32/u64(&mut self, what)`: the shared cursor's read, its error mapped.
macro_rules! int_readers {
    ($($t:ident),*) => {$(
        pub(crate) fn $t(&mut self, what: &'static str) -> Result<$t, TraceDatError> {
            self.inner.$t(what).map_err(|e| self.short(e))
        }
    )*};
}

impl<'b> Cursor<'b> {
    pub(crate) fn new(bytes: &'b [u8], pos: usize, endian: Endian, base: Option<u64>) -> Self {
        Cursor {
            inner: bytes::Cursor::new(bytes, pos, endian),
            base,
        }
    }

    /// The position of the next byte.
    pub(crate) fn pos(&self) -> usize {
        self.inner.pos()
    }

    /// Moves to position `pos`.
    pub(crate) fn seek(&mut self, pos: usize) {
        self.inner.seek(pos);
    }

    /// Reads the integers that follow in byte order `endian`.
    pub(crate) fn set_endian(&mut self, endian: Endian) {
        self.inner.set_endian(endian);
    }

    /// All bytes of the cursor (read or not).
    pub(crate) fn bytes(&self) -> &'b [u8] {
        self.inner.bytes()
    }

    /// An error at the current position.
    pub(crate) fn error(&self, kind: ErrorKind) -> TraceDatError {
        self.error_at(self.pos(), kind)
    }

    /// An error at position `at` of these bytes.
    pub(crate) fn error_at(&self, at: usize, kind: ErrorKind) -> TraceDatError {
        match self.base {
            None => TraceDatError {
                offset: at as u64,
                inner: None,
                kind,
            },
            Some(base) => TraceDatError {
                offset: base,
                inner: Some(at as u64),
                kind,
            },
        }
    }

    /// The shared cursor's short read as this file's error.
    fn short(&self, e: Short) -> TraceDatError {
        self.error_at(
            e.at,
            ErrorKind::Truncated {
                what: e.what,
                needed: e.need,
                available: e.have,
            },
        )
    }

    /// A cursor over the next `len` bytes (positions and errors stay those of `self`),
    /// which this one skips.
    pub(crate) fn sub(
        &mut self,
        len: u64,
        what: &'static str,
    ) -> Result<Cursor<'b>, TraceDatError> {
        let start = self.pos();
        self.take(len, what)?;
        Ok(Cursor {
            inner: bytes::Cursor::new(&self.bytes()[..self.pos()], start, self.inner.endian()),
            base: self.base,
        })
    }

    /// The bytes left.
    pub(crate) fn rest(&self) -> &'b [u8] {
        self.inner.rest()
    }

    /// The next `len` bytes.
    pub(crate) fn take(&mut self, len: u64, what: &'static str) -> Result<&'b [u8], TraceDatError> {
        self.inner.take(len, what).map_err(|e| self.short(e))
    }

    fn uint(&mut self, size: usize, what: &'static str) -> Result<u64, TraceDatError> {
        self.inner.uint(size, what).map_err(|e| self.short(e))
    }

    int_readers!(u8, u16, u32, u64);

    /// A NUL-terminated string (without its NUL), lossy UTF-8.
    pub(crate) fn cstr(&mut self, what: &'static str) -> Result<String, TraceDatError> {
        let text = self.inner.c_string(what).map_err(|e| self.short(e))?;
        Ok(String::from_utf8_lossy(text).into_owned())
    }

    /// Exactly `text` (a fixed tag such as `header_page\0`).
    pub(crate) fn expect(
        &mut self,
        text: &'static [u8],
        what: &'static str,
    ) -> Result<(), TraceDatError> {
        let at = self.pos();
        let found = self.take(text.len() as u64, what)?;
        if found != text {
            return Err(self.error_at(
                at,
                ErrorKind::Unexpected {
                    what,
                    found: String::from_utf8_lossy(found).into_owned(),
                },
            ));
        }
        Ok(())
    }

    /// A block whose length is a `size_len`-byte number before it, as (lossy) text.
    pub(crate) fn sized_text(
        &mut self,
        size_len: usize,
        what: &'static str,
    ) -> Result<String, TraceDatError> {
        let len = self.uint(size_len, what)?;
        let bytes = self.take(len, what)?;
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }

    /// Skip a block whose length is a `size_len`-byte number before it.
    pub(crate) fn skip_sized(
        &mut self,
        size_len: usize,
        what: &'static str,
    ) -> Result<(), TraceDatError> {
        let len = self.uint(size_len, what)?;
        self.take(len, what).map(|_| ())
    }
}

/// The text of an option's data: up to its first NUL, lossy UTF-8.
pub(crate) use crate::bytes::text as option_text;
