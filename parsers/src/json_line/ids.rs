//! The `"cpu"`, `"pid"` and `"tid"` values of a line, cached: a thread's records come in
//! runs (one thread writes many events on one CPU), so the text of the last three ids is
//! kept and appended again as one fixed-size copy while they stay the same; so is the
//! text of the ids before them (two threads taking turns: a pipe's ends, a thread and
//! the one it wakes), and of a few more (with `sched_switch`, each CPU's lines
//! alternate between a thread and the idle task: a pipe's two threads on two CPUs are
//! four ids in turn).

use super::line_buf::LineOut;
use super::numbers::{eight_digits, short_digits};

/// The longest text (three 10-digit numbers, `,"pid":` and `,"tid":`: 44 bytes) and
/// room for the 8-byte stores that make it ([`put_word`]).
const IDS_TEXT: usize = 48;

/// The text `cpu,"pid":pid,"tid":tid` of some ids (the `"cpu":` key is the caller's).
#[derive(Debug, Clone)]
struct IdsText {
    /// The ids `text` is for, if any.
    ids: Option<(u32, u32, u32)>,
    text: [u8; IDS_TEXT],
    len: usize,
}

impl Default for IdsText {
    fn default() -> Self {
        IdsText {
            ids: None,
            text: [0; IDS_TEXT],
            len: 0,
        }
    }
}

/// How many ids' texts are kept besides the last two. Without them, most of the switch
/// file's lines (each CPU alternates between a thread and idle) made their ids' text
/// again (BENCHMARKS.md, "Instruction counts moved out of the code").
const OTHERS: usize = 2;

/// The texts of the last ids written, of those before them and of [`OTHERS`] more.
#[derive(Debug, Clone, Default)]
pub(crate) struct IdsCache {
    last: IdsText,
    before: IdsText,
    /// Checked out of line ([`IdsCache::write_other`]).
    others: [IdsText; OTHERS],
    /// The one of `others` to replace next (in turn).
    next: usize,
}

impl IdsCache {
    /// Append `cpu,"pid":pid,"tid":tid`: the cached text when the ids are the last ones
    /// or those before (which then become the last), else [`IdsCache::write_other`].
    #[inline(always)]
    pub(crate) fn write(&mut self, out: &mut impl LineOut, cpu: u32, pid: u32, tid: u32) {
        let ids = Some((cpu, pid, tid));
        if self.last.ids != ids {
            if self.before.ids == ids {
                std::mem::swap(&mut self.last, &mut self.before);
            } else {
                self.write_other(out, cpu, pid, tid);
                return;
            }
        }
        out.put(&self.last.text, self.last.len);
    }

    /// Ids other than the last two: the text in `others` when it holds them, else their
    /// text made in place of the one of `others` next in turn (8-byte stores into the
    /// fixed array: no `Vec` bookkeeping per piece, no `memcpy` call to keep it); it
    /// becomes the last, the last those before, and those before take its place.
    #[inline(never)]
    fn write_other(&mut self, out: &mut impl LineOut, cpu: u32, pid: u32, tid: u32) {
        let ids = Some((cpu, pid, tid));
        let kept = self.others.iter().position(|t| t.ids == ids);
        let slot = kept.unwrap_or(self.next % OTHERS);
        std::mem::swap(&mut self.last, &mut self.before);
        std::mem::swap(&mut self.last, &mut self.others[slot]);
        let t = &mut self.last;
        if kept.is_none() {
            self.next = slot + 1;
            let mut at = put_u32(&mut t.text, 0, cpu);
            at = put_word(&mut t.text, at, PID_KEY, PID_KEY_LEN);
            at = put_u32(&mut t.text, at, pid);
            at = put_word(&mut t.text, at, TID_KEY, TID_KEY_LEN);
            t.len = put_u32(&mut t.text, at, tid);
            t.ids = ids;
        }
        out.put(&t.text, t.len);
    }
}

/// `,"pid":` as the first 7 bytes of a word (little-endian).
const PID_KEY: u64 = u64::from_le_bytes(*b",\"pid\":\0");
/// `,"tid":` likewise.
const TID_KEY: u64 = u64::from_le_bytes(*b",\"tid\":\0");
/// Their length.
const PID_KEY_LEN: usize = 7;
/// Their length.
const TID_KEY_LEN: usize = 7;

/// Store `word` (little-endian) at `text[at..at + 8]` and return `at + len`: the first
/// `len` bytes count, the rest is overwritten by what follows. The largest text (three
/// 10-digit ids) ends 4 bytes before the array's end, so every store fits;
/// `at` past that (impossible) stores nothing.
#[inline(always)]
fn put_word(text: &mut [u8; IDS_TEXT], at: usize, word: u64, len: usize) -> usize {
    if let Some(slot) = text.get_mut(at..).and_then(<[u8]>::first_chunk_mut::<8>) {
        *slot = word.to_le_bytes();
    }
    at + len
}

/// The decimal digits of `v` at `text[at..]` ([`put_word`]); the position after them.
#[inline(always)]
fn put_u32(text: &mut [u8; IDS_TEXT], at: usize, v: u32) -> usize {
    const E8: u32 = 100_000_000;
    if v < E8 {
        let (word, len) = short_digits(v);
        put_word(text, at, word, len)
    } else {
        let (word, len) = short_digits(v / E8);
        let at = put_word(text, at, word, len);
        put_word(text, at, eight_digits(v % E8), 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_text_is_the_written_text() {
        let mut cache = IdsCache::default();
        for (cpu, pid, tid) in [
            (1, 42, 42),
            (1, 42, 42),
            (0, 42, 43),
            (u32::MAX, u32::MAX, u32::MAX),
            (u32::MAX, u32::MAX, u32::MAX),
            (0, 0, 0),
            (1, 42, 42),
            (99_999_999, 100_000_000, 4_000_000_000),
            (9, 10, 12_345_678),
            (1, 42, 42),
            (9, 10, 12_345_678),
            (1, 42, 42),
            (0, 42, 43),
            (9, 10, 12_345_678),
            // Four in turn, twice (the last, those before and both others).
            (0, 0, 0),
            (0, 7, 7),
            (1, 8, 8),
            (1, 0, 0),
            (0, 0, 0),
            (0, 7, 7),
            (1, 8, 8),
            (1, 0, 0),
            (5, 5, 5),
            (1, 0, 0),
        ] {
            let mut out = b"x".to_vec();
            cache.write(&mut out, cpu, pid, tid);
            assert_eq!(
                out,
                format!("x{cpu},\"pid\":{pid},\"tid\":{tid}").into_bytes()
            );
        }
    }
}
