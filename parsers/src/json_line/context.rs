//! The context keys of an event line (`comm`, `cgroup`, `container`, `unit`; see
//! [`crate::context`]), rendered once per name or cgroup so each record only copies
//! them, and the [`LineWriter`] hook that places them after `"tid"`.

use super::line_buf::LineOut;
use super::text::WINDOW;
use super::{LineWriter, RecordStamp};
use crate::context::ContextTracker;

impl LineWriter {
    /// Set the context keys the next event lines carry after `"tid"` (`,"comm":"…",…`):
    /// what `tracker` knows of the thread and process of `stamp` at its time, with the
    /// sample's `cgroup` ([`ContextTracker::write`]). Called per record, before
    /// [`LineWriter::write_prepared`] or [`LineWriter::write_record`]; the one way the
    /// live formatter, `decode` and the benchmarks fill them.
    ///
    /// The keys of the last record are kept when this one is of the same thread, process
    /// and cgroup and the tracker took no update since ([`ContextTracker::version`]):
    /// records come in runs of one thread, and looking the thread up again and copying
    /// its keys cost about a third of what formatting a `raw_syscalls:sys_enter` record
    /// costs (BENCHMARKS.md, section 8). That check is in line (a call cost as much
    /// as the check); the rest (`LineWriter::set_other_context`) is not.
    #[inline(always)]
    pub fn set_context(
        &mut self,
        tracker: &ContextTracker,
        stamp: &RecordStamp,
        cgroup: Option<u64>,
    ) {
        let key = ContextKey {
            version: tracker.version(),
            pid: stamp.pid,
            tid: stamp.tid,
            cgroup,
        };
        if !key.holds(self.context_of, stamp.time_unix_ns) {
            self.set_other_context(tracker, stamp, key);
        }
    }

    /// [`LineWriter::set_context`] for a record the last keys do not hold for (`key`):
    /// the keys before become the current ones (those of the other thread of a pair),
    /// or the place the new ones are written; the current ones are kept as the keys
    /// before either way. Small, the rest ([`LineWriter::set_more_context`]) apart: in
    /// one function, this part (half the lines of the mixed file) paid the register
    /// saves of the whole (measured: BENCHMARKS.md, "Instruction counts moved out of the code").
    #[inline(never)]
    fn set_other_context(
        &mut self,
        tracker: &ContextTracker,
        stamp: &RecordStamp,
        key: ContextKey,
    ) {
        std::mem::swap(&mut self.context, &mut self.context_before);
        std::mem::swap(&mut self.context_of, &mut self.context_before_of);
        if !key.holds(self.context_of, stamp.time_unix_ns) {
            self.set_more_context(tracker, stamp, key);
        }
    }

    /// [`LineWriter::set_other_context`] when neither the last keys nor those before
    /// hold for `key` (those before are in place of the current ones).
    #[inline(never)]
    fn set_more_context(&mut self, tracker: &ContextTracker, stamp: &RecordStamp, key: ContextKey) {
        let cgroup = key.cgroup;
        let holds = |of| key.holds(of, stamp.time_unix_ns);
        // Then the keys kept besides (four threads in turn: with `sched_switch`, a
        // pipe's two threads and the idle task of each of two CPUs), which take the
        // place of the ones before; else the place of the oldest of them is where the
        // new ones are written.
        let kept = self.context_others.iter().position(|(of, _)| holds(*of));
        let slot = kept.unwrap_or(self.context_next % CONTEXT_OTHERS);
        let (other_of, other) = &mut self.context_others[slot];
        std::mem::swap(&mut self.context, other);
        std::mem::swap(&mut self.context_of, other_of);
        if kept.is_some() {
            return;
        }
        self.context_next = slot + 1;
        let valid_from = self
            .context
            .fill(|text| tracker.write(text, stamp.pid, stamp.tid, stamp.time_unix_ns, cgroup));
        self.context_of = valid_from.map(|v| (key, v));
    }
}

/// How many context keys [`LineWriter`] keeps besides the current ones and those
/// before ([`LineWriter::set_context`]).
pub(crate) const CONTEXT_OTHERS: usize = 2;

/// The context keys of a thread ([`LineWriter::set_context`]) followed by [`WINDOW`]
/// bytes of slack, so that keys of at most [`WINDOW`] bytes (`,"comm":"…"` of a thread
/// name of up to 16 bytes is at most 26) are appended as one fixed-size copy instead of
/// a `memcpy` call (with the filling in line; BENCHMARKS.md, "Instruction counts moved out of the code").
#[derive(Debug, Default)]
pub(crate) struct ContextText {
    /// The keys, then the slack.
    bytes: Vec<u8>,
    /// The length of the keys.
    len: usize,
}

impl ContextText {
    /// Replace the keys by what `write` appends to an empty `Vec`; returns what it returns.
    #[inline(always)]
    fn fill<R>(&mut self, write: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        self.bytes.clear();
        let result = write(&mut self.bytes);
        self.len = self.bytes.len();
        // A fixed-size append (two vector stores), not `resize` (a `memset` call).
        self.bytes.extend_from_slice(&[0; WINDOW]);
        result
    }

    /// The keys.
    pub(crate) fn text(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }

    /// Append the keys to `out`.
    #[inline(always)]
    pub(crate) fn write(&self, out: &mut impl LineOut) {
        match self.bytes.first_chunk::<WINDOW>() {
            Some(window) if self.len <= WINDOW => out.put(window, self.len),
            _ => out.extend(self.text()),
        }
    }
}

/// What the context keys a [`LineWriter`] holds were written for: the tracker's version
/// and the record's thread, process and cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ContextKey {
    version: u64,
    pid: u32,
    tid: u32,
    cgroup: Option<u64>,
}

impl ContextKey {
    /// Whether keys written for `of` (a key and the earliest time they hold for) are
    /// those of a record with this key at `time`.
    #[inline(always)]
    fn holds(&self, of: Option<(ContextKey, u64)>, time: Option<u64>) -> bool {
        of.is_some_and(|(last, valid_from)| last == *self && time.is_none_or(|t| t >= valid_from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::ContextUpdate;

    /// The keys a fresh writer sets for `stamp` (nothing kept from earlier records).
    fn fresh(tracker: &ContextTracker, stamp: &RecordStamp, cgroup: Option<u64>) -> Vec<u8> {
        let mut w = LineWriter::default();
        w.set_context(tracker, stamp, cgroup);
        w.context.text().to_vec()
    }

    #[test]
    fn kept_keys_are_those_a_fresh_lookup_gives() {
        let mut t = ContextTracker::new();
        let comm = |tid, comm: &'static [u8]| ContextUpdate::Comm { tid, comm };
        t.apply(None, comm(7, b"sh"));
        t.apply(None, comm(8, b"worker"));
        t.apply(None, ContextUpdate::Cgroup { id: 5, path: b"/a" });
        t.apply(None, ContextUpdate::ThreadCgroup { tid: 7, id: 5 });
        let stamp = |tid, time| RecordStamp {
            time_unix_ns: time,
            cpu: 0,
            pid: 7,
            tid,
        };
        let mut w = LineWriter::default();
        // The keys `w` sets, checked against a fresh lookup.
        let mut check = |t: &ContextTracker, s: RecordStamp, cgroup| {
            w.set_context(t, &s, cgroup);
            let kept = String::from_utf8_lossy(w.context.text()).into_owned();
            assert_eq!(
                kept,
                String::from_utf8_lossy(&fresh(t, &s, cgroup)),
                "{s:?} {cgroup:?}"
            );
            kept
        };
        // Runs of one thread, another thread, two taking turns, another cgroup, no time.
        for s in [stamp(7, Some(10)), stamp(7, Some(11)), stamp(8, Some(12))] {
            check(&t, s, None);
        }
        for at in 12..20 {
            check(&t, stamp(7 + at % 2, Some(u64::from(at))), None);
        }
        // Four threads in turn (the current keys, those before and both others), then
        // a fifth.
        for at in 20..40 {
            check(&t, stamp(7 + at % 4, Some(u64::from(at))), None);
        }
        check(&t, stamp(20, Some(40)), None);
        check(&t, stamp(8, Some(12)), Some(5));
        check(&t, stamp(8, None), Some(5));
        // A rename at 100: records before it keep the old name, also after a record
        // with the new one, and a record without a time shows the new one.
        t.apply(Some(100), comm(7, b"renamed"));
        let names: Vec<String> = [Some(150), Some(99), Some(99), Some(100), None, Some(50)]
            .into_iter()
            .map(|at| check(&t, stamp(7, at), None))
            .collect();
        let renamed = |s: &String| s.contains("renamed");
        assert_eq!(
            names.iter().map(renamed).collect::<Vec<_>>(),
            [true, false, false, true, true, false]
        );
        // Any update is seen by the next record of the same thread.
        t.apply(None, ContextUpdate::Cgroup { id: 5, path: b"/b" });
        assert!(check(&t, stamp(7, Some(300)), None).contains("\"/b\""));
        t.apply(None, ContextUpdate::Exit { tid: 7 });
        t.apply(
            None,
            ContextUpdate::Fork {
                tid: 7,
                parent_tid: 8,
            },
        );
        assert!(check(&t, stamp(7, Some(300)), None).contains("worker"));
        // Another tracker (a flight snapshot's clone that went on) is not mistaken for
        // this one.
        let mut other = t.clone();
        other.apply(None, comm(7, b"other"));
        check(&other, stamp(7, Some(300)), None);
        check(&t, stamp(7, Some(300)), None);
    }
}
