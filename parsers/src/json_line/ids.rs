//! The `"cpu"`, `"pid"` and `"tid"` values of a line, cached: a thread's records come in
//! runs (one thread writes many events on one CPU), so the text of the last three ids is
//! kept and appended again as one fixed-size copy while they stay the same.

use super::numbers::{push_prefix, write_u64};

/// The longest text: three 10-digit numbers, `,"pid":` and `,"tid":`.
const IDS_TEXT: usize = 48;

/// The text `cpu,"pid":pid,"tid":tid` of the last ids written (the `"cpu":` key is the
/// caller's).
#[derive(Debug, Clone)]
pub(crate) struct IdsCache {
    /// The ids `text` is for, if any.
    ids: Option<(u32, u32, u32)>,
    text: [u8; IDS_TEXT],
    len: usize,
}

impl Default for IdsCache {
    fn default() -> Self {
        IdsCache {
            ids: None,
            text: [0; IDS_TEXT],
            len: 0,
        }
    }
}

impl IdsCache {
    /// Append `cpu,"pid":pid,"tid":tid`: the cached text when the ids are the last ones,
    /// else written (and then kept).
    #[inline(always)]
    pub(crate) fn write(&mut self, out: &mut Vec<u8>, cpu: u32, pid: u32, tid: u32) {
        if self.ids == Some((cpu, pid, tid)) {
            push_prefix(out, &self.text, self.len);
        } else {
            self.write_new(out, cpu, pid, tid);
        }
    }

    /// The text for new ids, written out and kept.
    #[inline(never)]
    fn write_new(&mut self, out: &mut Vec<u8>, cpu: u32, pid: u32, tid: u32) {
        let start = out.len();
        write_u64(out, u64::from(cpu));
        out.extend_from_slice(b",\"pid\":");
        write_u64(out, u64::from(pid));
        out.extend_from_slice(b",\"tid\":");
        write_u64(out, u64::from(tid));
        let text = out.get(start..).unwrap_or_default();
        if let Some(head) = self.text.get_mut(..text.len()) {
            head.copy_from_slice(text);
            self.len = text.len();
            self.ids = Some((cpu, pid, tid));
        }
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
