//! Where the text of a line goes ([`LineOut`]): the caller's `Vec<u8>`, or a [`LineBuf`], a
//! fixed-size array the prepared path writes its line into with the position in a local
//! and then appends to the `Vec` with one copy.
//!
//! Why: every piece appended to a `Vec` is a capacity check, a load of `len` and a store
//! of it, and the compiler loads `len` (and the data pointer) again after each store of
//! text, which might have changed them as far as it knows. In the line buffer, a piece is one
//! comparison of the position with a constant, the store and an add: fewer instructions
//! per piece (BENCHMARKS.md, "Instruction counts moved out of the code"), against one copy of the line (a `memcpy` call) at its
//! end.

/// The line buffer's size: the usual line fits; a piece that does not fit goes to the `Vec`
/// after what the line buffer holds ([`LineBuf::spill`]), so longer lines come out the same.
pub(crate) const LINE_BUF: usize = 1024;

/// Where line text is appended: a `Vec<u8>` or a [`LineBuf`]. The writers of the pieces
/// most lines are made of (numbers, prepared texts, time, ids, short `char` areas, integer
/// arrays) write to either; the others write to a `Vec` ([`LineOut::vec`]).
pub(crate) trait LineOut {
    /// Append the first `n` bytes of `bytes` (`n <= N`): one copy of a size known at
    /// compile time (a few vector moves, no `memcpy` call) and a cut back to `n`.
    fn put<const N: usize>(&mut self, bytes: &[u8; N], n: usize);
    /// Append all of `bytes`.
    fn put_all<const N: usize>(&mut self, bytes: &[u8; N]);
    /// Append `bytes` (of a length known at run time: a `memcpy` call).
    fn extend(&mut self, bytes: &[u8]);
    /// The `Vec` to append to after what was appended so far, for the writers that
    /// write to a `Vec` only.
    fn vec(&mut self) -> &mut Vec<u8>;
}

impl LineOut for Vec<u8> {
    #[inline(always)]
    fn put<const N: usize>(&mut self, bytes: &[u8; N], n: usize) {
        let end = self.len() + n;
        self.extend_from_slice(bytes);
        self.truncate(end);
    }

    #[inline(always)]
    fn put_all<const N: usize>(&mut self, bytes: &[u8; N]) {
        self.extend_from_slice(bytes);
    }

    #[inline(always)]
    fn extend(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }

    #[inline(always)]
    fn vec(&mut self) -> &mut Vec<u8> {
        self
    }
}

/// A [`LineBuf`] as separate values: its array, position and `Vec`.
pub(crate) type LineBufParts<'a> = (&'a mut [u8; LINE_BUF], usize, &'a mut Vec<u8>);

/// A line being written into a fixed-size array (`buf[..pos]`) before it is appended
/// to `out` ([`LineBuf::finish`]). Functions out of line take its parts as separate
/// arguments ([`LineBuf::into_parts`]): through a `&mut LineBuf` the compiler kept `pos` in
/// memory and loaded it again after every store of text.
#[derive(Debug)]
pub(crate) struct LineBuf<'a> {
    buf: &'a mut [u8; LINE_BUF],
    pos: usize,
    out: &'a mut Vec<u8>,
}

impl<'a> LineBuf<'a> {
    /// A line buffer in `buf` (from its start) for `out`.
    #[inline(always)]
    pub(crate) fn new(buf: &'a mut [u8; LINE_BUF], out: &'a mut Vec<u8>) -> Self {
        LineBuf { buf, pos: 0, out }
    }

    /// The line buffer from its parts ([`LineBuf::lend`]).
    #[inline(always)]
    pub(crate) fn from_parts((buf, pos, out): LineBufParts<'a>) -> Self {
        LineBuf { buf, pos, out }
    }

    /// The array, the position and the `Vec`.
    #[inline(always)]
    pub(crate) fn into_parts(self) -> LineBufParts<'a> {
        (self.buf, self.pos, self.out)
    }

    /// Lend the line buffer's parts to `write` (a function out of line, which makes its own
    /// line buffer of them with [`LineBuf::from_parts`]), which returns the position after what
    /// it wrote and its result.
    #[inline(always)]
    pub(crate) fn lend<R>(&mut self, write: impl FnOnce(LineBufParts<'_>) -> (usize, R)) -> R {
        let (pos, result) = write((&mut *self.buf, self.pos, &mut *self.out));
        self.pos = pos;
        result
    }

    /// Append what the line buffer holds to the `Vec` and return it.
    #[inline(always)]
    pub(crate) fn finish(mut self) -> &'a mut Vec<u8> {
        self.flush();
        self.out
    }

    /// Append what the line buffer holds to the `Vec`; the line buffer is then empty.
    #[inline(always)]
    fn flush(&mut self) {
        self.out
            .extend_from_slice(self.buf.get(..self.pos).unwrap_or_default());
        self.pos = 0;
    }

    /// A piece that does not fit: after what the line buffer holds, straight to the `Vec`.
    /// Given the parts, not `&mut self`: a call with the line buffer's address kept the line buffer
    /// in memory, its position loaded and stored around every piece.
    #[inline(always)]
    fn spill(&mut self, bytes: &[u8]) {
        self.pos = spill(self.buf, self.pos, self.out, bytes);
    }
}

/// [`LineBuf::spill`] of the first `n` bytes of `bytes`.
#[cold]
#[inline(never)]
fn spill_array<const N: usize>(
    buf: &[u8; LINE_BUF],
    pos: usize,
    out: &mut Vec<u8>,
    bytes: [u8; N],
    n: usize,
) -> usize {
    spill(buf, pos, out, bytes.get(..n).unwrap_or_default())
}

/// [`LineBuf::spill`]: append `buf[..pos]` and `bytes` to `out`; the new position (0).
#[cold]
#[inline(never)]
fn spill(buf: &[u8; LINE_BUF], pos: usize, out: &mut Vec<u8>, bytes: &[u8]) -> usize {
    out.extend_from_slice(buf.get(..pos).unwrap_or_default());
    out.extend_from_slice(bytes);
    0
}

impl LineOut for LineBuf<'_> {
    #[inline(always)]
    fn put<const N: usize>(&mut self, bytes: &[u8; N], n: usize) {
        match self
            .buf
            .get_mut(self.pos..)
            .and_then(<[u8]>::first_chunk_mut::<N>)
        {
            Some(slot) => {
                *slot = *bytes;
                self.pos += n;
            }
            // The bytes by value: by reference, a piece made in registers (an integer
            // array's separator and digit) was stored on the stack first (instructions
            // per element; BENCHMARKS.md, "Instruction counts moved out of the code").
            None => self.pos = spill_array(self.buf, self.pos, self.out, *bytes, n),
        }
    }

    #[inline(always)]
    fn put_all<const N: usize>(&mut self, bytes: &[u8; N]) {
        self.put(bytes, N);
    }

    #[inline(always)]
    fn extend(&mut self, bytes: &[u8]) {
        let end = self.pos + bytes.len();
        match self.buf.get_mut(self.pos..end) {
            Some(slot) => {
                slot.copy_from_slice(bytes);
                self.pos = end;
            }
            None => self.spill(bytes),
        }
    }

    #[inline(always)]
    fn vec(&mut self) -> &mut Vec<u8> {
        self.flush();
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces that fit and pieces that do not come out in order.
    #[test]
    fn pieces_come_out_in_order() {
        let mut buf = [0u8; LINE_BUF];
        let mut out = b"x".to_vec();
        let mut expected = b"x".to_vec();
        let mut line_buf = LineBuf::new(&mut buf, &mut out);
        for i in 0..400u32 {
            let piece = i.to_le_bytes();
            line_buf.put(&piece, (i % 5) as usize);
            expected.extend_from_slice(&piece[..(i % 5) as usize]);
            let long = vec![i as u8; (i as usize * 7) % 1500];
            line_buf.extend(&long);
            expected.extend_from_slice(&long);
            if i % 50 == 0 {
                line_buf.vec().push(b'v');
                expected.push(b'v');
            }
        }
        line_buf.put_all(b"}\n");
        expected.extend_from_slice(b"}\n");
        assert_eq!(*line_buf.finish(), expected);
    }
}
