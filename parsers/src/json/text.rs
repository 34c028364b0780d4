//! Prepared text appended with fixed-size copies: a copy of a length known at compile
//! time is a few vector moves, where a short copy of a length known only at run time is
//! a call to `memcpy` (with the capacity check, several times the moves for the 5 to 40
//! byte pieces a line is made of; BENCHMARKS.md, "Instruction counts moved out of the code"). So a prepared text is copied as a whole window of a
//! fixed size and the output cut back to the text's end: [`Text`] keeps a text in an
//! array of the window's size; [`Texts`] keeps many texts in one buffer with a window's
//! worth of slack after the last.

use super::line_buf::LineOut;

/// Prepared text to append, kept in a fixed-size array when it fits so that appending it
/// is one fixed-size copy (a few vector moves, no `memcpy` call) and a truncation.
#[derive(Debug, Clone)]
pub(crate) struct Text<const N: usize> {
    /// The text followed by zeros, when it fits.
    inline: [u8; N],
    /// Its length.
    len: usize,
    /// The text, when it does not fit (empty otherwise).
    long: Box<[u8]>,
}

impl<const N: usize> Text<N> {
    pub(crate) fn new(text: Vec<u8>) -> Self {
        let mut inline = [0; N];
        let len = text.len();
        match inline.get_mut(..len) {
            Some(head) => {
                head.copy_from_slice(&text);
                Text {
                    inline,
                    len,
                    long: Box::default(),
                }
            }
            None => Text {
                inline,
                len,
                long: text.into_boxed_slice(),
            },
        }
    }

    /// Append the text to `out`.
    #[inline(always)]
    pub(crate) fn write(&self, out: &mut impl LineOut) {
        if self.len <= N {
            out.put(&self.inline, self.len);
        } else {
            out.extend(&self.long);
        }
    }
}

/// The window [`Texts`] copies: pieces up to this long take one fixed-size copy.
pub(crate) const WINDOW: usize = 32;

/// A byte range of a [`Texts`] buffer.
pub(crate) type Span = (u32, u32);

/// Many prepared texts in one buffer followed by [`WINDOW`] bytes of slack, so that any
/// piece of at most [`WINDOW`] bytes is appended as one fixed-size copy and a truncation.
#[derive(Debug, Clone, Default)]
pub(crate) struct Texts(Box<[u8]>);

impl Texts {
    /// The texts of `buffer` (spans into it stay valid).
    pub(crate) fn new(mut buffer: Vec<u8>) -> Self {
        buffer.resize(buffer.len() + WINDOW, 0);
        Texts(buffer.into_boxed_slice())
    }

    /// The bytes held (for memory accounting).
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Append the piece `span` (nothing for a span out of range).
    #[inline(always)]
    pub(crate) fn write(&self, out: &mut Vec<u8>, (a, b): Span) {
        let (a, b) = (a as usize, b as usize);
        let window = self.0.get(a..).and_then(<[u8]>::first_chunk::<WINDOW>);
        match window {
            Some(window) if b.wrapping_sub(a) <= WINDOW => out.put(window, b - a),
            _ => out.extend_from_slice(self.0.get(a..b).unwrap_or_default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_come_out_whole() {
        let buffer: Vec<u8> = (0..100u8).collect();
        let texts = Texts::new(buffer.clone());
        for a in 0..=100u32 {
            for b in a..=100u32 {
                let mut out = b"x".to_vec();
                texts.write(&mut out, (a, b));
                assert_eq!(out[1..], buffer[a as usize..b as usize]);
            }
        }
        let mut out = Vec::new();
        texts.write(&mut out, (5, 3));
        texts.write(&mut out, (90, 200));
        assert!(out.is_empty());
        for len in [0, 1, 31, 32, 33, 100] {
            let text: Vec<u8> = (0..len).collect();
            let mut out = b"x".to_vec();
            Text::<32>::new(text.clone()).write(&mut out);
            assert_eq!(out[1..], text);
        }
    }
}
