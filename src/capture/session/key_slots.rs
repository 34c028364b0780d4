//! Sample key → event slot, the stager's lookup for every record: the last key found is
//! kept beside the map, since a buffer's records come in runs of one event, so that most
//! records cost one compare instead of a hash probe (BENCHMARKS.md, issue 41).

/// The attached events' sample keys ([`crate::capture::backend::Backend::keys`]) and
/// their slots.
#[derive(Debug, Default)]
pub struct KeySlots {
    /// foldhash: keys are kernel-assigned, not hostile, and SipHash showed in the profile.
    map: foldhash::HashMap<u64, usize>,
    /// The key last found and its slot (emptied by every change of the map).
    last: Option<(u64, usize)>,
}

impl KeySlots {
    /// Records with `key` belong to the event in `slot`.
    pub fn insert(&mut self, key: u64, slot: usize) {
        self.map.insert(key, slot);
        self.last = None;
    }

    /// Records with `key` belong to no event any more.
    pub fn remove(&mut self, key: u64) {
        self.map.remove(&key);
        self.last = None;
    }

    /// The slot of `key`'s event, remembered for the next record.
    #[inline]
    pub fn get(&mut self, key: u64) -> Option<usize> {
        if let Some((last, slot)) = self.last
            && last == key
        {
            return Some(slot);
        }
        let slot = *self.map.get(&key)?;
        self.last = Some((key, slot));
        Some(slot)
    }

    /// The slot of `key`'s event, looked up without remembering it (for readers that
    /// share the map: the drain threads).
    #[inline]
    pub fn lookup(&self, key: u64) -> Option<usize> {
        self.map.get(&key).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_map_is_never_answered_from_the_last_key() {
        let mut slots = KeySlots::default();
        slots.insert(7, 0);
        slots.insert(9, 1);
        assert_eq!(slots.get(7), Some(0));
        assert_eq!(slots.get(7), Some(0));
        slots.remove(7);
        assert_eq!(slots.get(7), None);
        assert_eq!(slots.lookup(7), None);
        assert_eq!(slots.get(9), Some(1));
        slots.insert(9, 4);
        assert_eq!(slots.get(9), Some(4));
        assert_eq!(slots.get(8), None);
        assert_eq!(slots.get(9), Some(4));
        assert_eq!(slots.lookup(9), Some(4));
    }
}
