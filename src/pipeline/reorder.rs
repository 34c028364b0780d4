//! The reorder stage of the parallel formatter.

#[cfg(doc)]
use super::PARTS_IN_FLIGHT;

/// The reorder stage: items numbered `(seq, part)` taken in any order, let out in the
/// order of their numbers (`seq` 0, 1, 2 …; within a `seq`, parts 0, 1 … up to the one
/// marked last). Holds only what arrived early; the caller bounds that (each formatter
/// worker has a fixed number of parts in flight, [`PARTS_IN_FLIGHT`]).
#[derive(Debug)]
pub struct Reorder<T> {
    next: (u64, u32),
    held: std::collections::BTreeMap<(u64, u32), (bool, T)>,
}

impl<T> Default for Reorder<T> {
    fn default() -> Self {
        Reorder {
            next: (0, 0),
            held: std::collections::BTreeMap::new(),
        }
    }
}

impl<T> Reorder<T> {
    /// Take part `part` of item `seq` (`last`: the item has no more parts). A number
    /// taken twice, or one already let out, is a caller's bug: the item is kept until
    /// dropped with the stage, never let out twice.
    pub fn push(&mut self, seq: u64, part: u32, last: bool, item: T) {
        self.held.insert((seq, part), (last, item));
    }

    /// The next item in order, if it has arrived.
    pub fn pop(&mut self) -> Option<T> {
        let (last, item) = self.held.remove(&self.next)?;
        self.next = if last {
            (self.next.0 + 1, 0)
        } else {
            (self.next.0, self.next.1 + 1)
        };
        Some(item)
    }

    /// Items that arrived early and wait for those before them.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The item let out next: `(seq, part)`.
    pub fn next(&self) -> (u64, u32) {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::Reorder;
    use proptest::prelude::*;

    proptest! {
        /// Items with 1 to 4 parts each, spread over 1 to 6 workers (each worker's
        /// parts arrive in its own order, as over a channel), the workers' streams
        /// interleaved at random: the stage lets out every part once, in order.
        #[test]
        fn any_arrival_order_comes_out_in_order(
            parts in proptest::collection::vec(1u32..5, 0..60),
            owners in proptest::collection::vec(0usize..6, 60),
            workers in 1usize..7,
            picks in proptest::collection::vec(0usize..1000, 0..400),
        ) {
            let mut streams: Vec<std::collections::VecDeque<(u64, u32, bool)>> =
                vec![Default::default(); workers];
            let mut expected = Vec::new();
            for (seq, &n) in parts.iter().enumerate() {
                let w = owners[seq] % workers;
                for p in 0..n {
                    streams[w].push_back((seq as u64, p, p + 1 == n));
                    expected.push((seq as u64, p));
                }
            }
            let mut stage = Reorder::default();
            let mut got = Vec::new();
            let mut picks = picks.into_iter();
            loop {
                let ready: Vec<usize> =
                    (0..workers).filter(|&w| !streams[w].is_empty()).collect();
                if ready.is_empty() {
                    break;
                }
                let w = ready[picks.next().unwrap_or(0) % ready.len()];
                let (seq, part, last) = streams[w].pop_front().unwrap();
                stage.push(seq, part, last, (seq, part));
                while let Some(item) = stage.pop() {
                    got.push(item);
                }
            }
            prop_assert_eq!(stage.held(), 0);
            prop_assert_eq!(got, expected);
        }
    }
}
