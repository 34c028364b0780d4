//! The side-band records of every CPU's buffer (who is who: thread names, new and exited
//! threads, cgroups), copied and handed on in time order across CPUs. Both backends
//! drain their trackers this way at the start of every [`super::Backend::read`]:
//! a thread renamed on one CPU may fork on another, and the records read next must find
//! the threads they were written by (perf: the tracker rings, crate::capture::perf; ftrace: the
//! tracking instance, crate::capture::ftrace).

use std::ops::ControlFlow;

/// Records of several buffers, to be handed on by time (reused between reads: bounded
/// by what the trackers' buffers hold).
#[derive(Debug, Default)]
pub struct TimeMerge {
    bytes: Vec<u8>,
    /// (time, CPU, start, end) of each record in `bytes`.
    index: Vec<(u64, u32, usize, usize)>,
}

impl TimeMerge {
    /// Keep a copy of `rec`, read from `cpu`'s buffer, which happened at `time`.
    pub fn push(&mut self, time: u64, cpu: u32, rec: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(rec);
        self.index.push((time, cpu, start, self.bytes.len()));
    }

    /// Hand every record kept to `f` (time, CPU, bytes), oldest first (records of one CPU
    /// with equal times keep their order), and forget them. All of them are handed on,
    /// whatever `f` says (they were consumed from their buffers): breaks if `f` broke
    /// at least once.
    pub fn drain(
        &mut self,
        mut f: impl FnMut(u64, u32, &[u8]) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        // Stable: records of one CPU keep their order when their times are equal.
        self.index.sort_by_key(|&(time, ..)| time);
        let mut flow = ControlFlow::Continue(());
        for &(time, cpu, start, end) in &self.index {
            if f(time, cpu, &self.bytes[start..end]).is_break() {
                flow = ControlFlow::Break(());
            }
        }
        self.index.clear();
        self.bytes.clear();
        flow
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hands_on_by_time_and_keeps_each_cpus_order_on_ties() {
        let mut m = TimeMerge::default();
        m.push(30, 0, b"a");
        m.push(30, 0, b"b");
        m.push(10, 1, b"c");
        m.push(20, 0, b"d");
        let mut got = Vec::new();
        let mut calls = 0;
        let flow = m.drain(|time, cpu, rec| {
            got.push((time, cpu, rec.to_vec()));
            calls += 1;
            // Breaking does not stop the hand-over.
            if calls == 1 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        assert!(flow.is_break());
        assert_eq!(
            got,
            vec![
                (10, 1, b"c".to_vec()),
                (20, 0, b"d".to_vec()),
                (30, 0, b"a".to_vec()),
                (30, 0, b"b".to_vec()),
            ]
        );
        assert!(m.drain(|_, _, _| ControlFlow::Break(())).is_continue());
    }
}
