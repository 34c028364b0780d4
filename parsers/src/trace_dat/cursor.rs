//! Reading numbers, strings and blocks out of trace.dat bytes, with errors that say where.

use super::{ErrorKind, TraceDatError};
use crate::decode::Endian;

/// A position in a byte slice that is either the file itself (`base` = None: positions
/// are file offsets) or data decompressed from the section at file offset `base`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cursor<'b> {
    pub(crate) bytes: &'b [u8],
    pub(crate) pos: usize,
    pub(crate) endian: Endian,
    /// File offset of the compressed section `bytes` came from, if any.
    pub(crate) base: Option<u64>,
}

impl<'b> Cursor<'b> {
    pub(crate) fn new(bytes: &'b [u8], pos: usize, endian: Endian, base: Option<u64>) -> Self {
        Cursor {
            bytes,
            pos,
            endian,
            base,
        }
    }

    /// An error at the current position.
    pub(crate) fn error(&self, kind: ErrorKind) -> TraceDatError {
        self.error_at(self.pos, kind)
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

    /// A cursor over the next `len` bytes (positions and errors stay those of `self`),
    /// which this one skips.
    pub(crate) fn sub(
        &mut self,
        len: u64,
        what: &'static str,
    ) -> Result<Cursor<'b>, TraceDatError> {
        let start = self.pos;
        self.take(len, what)?;
        Ok(Cursor {
            bytes: &self.bytes[..self.pos],
            pos: start,
            endian: self.endian,
            base: self.base,
        })
    }

    /// The bytes left.
    pub(crate) fn rest(&self) -> &'b [u8] {
        self.bytes.get(self.pos..).unwrap_or_default()
    }

    /// The next `len` bytes.
    pub(crate) fn take(&mut self, len: u64, what: &'static str) -> Result<&'b [u8], TraceDatError> {
        let available = self.bytes.len().saturating_sub(self.pos);
        if len > available as u64 {
            return Err(self.error(ErrorKind::Truncated {
                what,
                needed: len,
                available: available as u64,
            }));
        }
        // len <= available.
        let start = self.pos;
        self.pos += len as usize;
        Ok(&self.bytes[start..self.pos])
    }

    fn uint(&mut self, size: usize, what: &'static str) -> Result<u64, TraceDatError> {
        let b = self.take(size as u64, what)?;
        let mut v = 0u64;
        match self.endian {
            Endian::Little => b.iter().rev().for_each(|&x| v = (v << 8) | u64::from(x)),
            Endian::Big => b.iter().for_each(|&x| v = (v << 8) | u64::from(x)),
        }
        Ok(v)
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, TraceDatError> {
        // Two bytes fit.
        self.uint(2, what).map(|v| v as u16)
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, TraceDatError> {
        // Four bytes fit.
        self.uint(4, what).map(|v| v as u32)
    }

    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, TraceDatError> {
        self.uint(8, what)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, TraceDatError> {
        Ok(self.take(1, what)?[0])
    }

    /// A NUL-terminated string (without its NUL), lossy UTF-8.
    pub(crate) fn cstr(&mut self, what: &'static str) -> Result<String, TraceDatError> {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        let Some(len) = memchr::memchr(0, rest) else {
            return Err(self.error(ErrorKind::Truncated {
                what,
                needed: rest.len() as u64 + 1,
                available: rest.len() as u64,
            }));
        };
        let text = String::from_utf8_lossy(&rest[..len]).into_owned();
        self.pos += len + 1;
        Ok(text)
    }

    /// Exactly `text` (a fixed tag such as `header_page\0`).
    pub(crate) fn expect(
        &mut self,
        text: &'static [u8],
        what: &'static str,
    ) -> Result<(), TraceDatError> {
        let at = self.pos;
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
pub(crate) fn option_text(data: &[u8]) -> String {
    let end = memchr::memchr(0, data).unwrap_or(data.len());
    String::from_utf8_lossy(&data[..end]).into_owned()
}
