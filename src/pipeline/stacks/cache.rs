//! A cache per distinct stack: most records of a program come from a few call paths, so a
//! stack seen before is written as one hash of its addresses and one copy of its rendered
//! JSON array (or `code.stacktrace` text, or `top`'s call path), not a walk naming each
//! frame.
//!
//! Keyed by what decides the frames' names: the program run of the record's process
//! ([`super::maps::ProcessMaps::run_id`], new at each exec, fork, reused process id and
//! mapping added), the kernel's callchain bytes, and the user frames unwound from a stack
//! copy (`--call-graph dwarf`) with why the walk ended. The full key is compared, never
//! the hash alone. The writer keeps out stacks whose names may change with the same key
//! (JIT code named from a perf map that grows, a frame put off by the look-up budget).
//! Bounded by count and bytes ([`MAX_STACKS`], [`MAX_STACK_BYTES`]), the least recently
//! used of a sweep going first (a clock).
//!
//! With `--stack-ids` it keeps, instead of the renderings, the id of the stack's line
//! ([`super::ids`]) and that line's length (counted against the bound: the writer keeps
//! the line for the next output file).

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use super::ids;
use super::unwind::Truncated;

/// Distinct stacks kept per formatter worker.
pub const MAX_STACKS: usize = 4096;
/// Bytes of keys and rendered stacks kept per formatter worker at most.
pub const MAX_STACK_BYTES: usize = 8 << 20;
/// A stack larger than this is never kept (it would push out too many others).
const MAX_ONE_STACK: usize = MAX_STACK_BYTES / 64;

/// What decides a record's frames and their names.
#[derive(Debug, Clone, Copy)]
pub struct StackKey<'a> {
    /// The program run of the record's process ([`super::maps::ProcessMaps::run_id`]);
    /// 0 for a stack without user frames (the same in every process).
    pub run: u64,
    /// The kernel's callchain, as the record carries it.
    pub chain: &'a [u8],
    /// The user frames unwound from the record's stack copy (none without one).
    pub unwound: &'a [u64],
    /// Why that walk ended early, if it did.
    pub truncated: Option<Truncated>,
}

/// Whether two slices hold the same values, an empty pair told apart before any compare:
/// glibc's AVX-512 `memcmp` reads at an empty slice's dangling address with a masked load,
/// and that load of an unmapped page takes a slow fault-suppression assist (most of the
/// look-up's cost: BENCHMARKS.md, "empty slices compared").
fn same<T: PartialEq>(a: &[T], b: &[T]) -> bool {
    a.len() == b.len() && (a.is_empty() || a == b)
}

/// One kept stack: its key and its renderings.
#[derive(Debug, Default)]
struct Kept {
    hash: u64,
    run: u64,
    chain: Box<[u8]>,
    unwound: Box<[u64]>,
    truncated: Option<Truncated>,
    /// The JSON array of the `stack` key (`[…]`), once written.
    json: Option<Box<[u8]>>,
    /// The `code.stacktrace` text, once written.
    text: Option<Box<str>>,
    /// `top`'s call path ([`super::call_path`]), once made.
    path: Option<Arc<str>>,
    /// `--stack-ids`: the id of its stack line, once written, and the line's length.
    id: Option<u64>,
    line: usize,
    /// Read since the clock hand last passed (kept one more sweep).
    used: bool,
    /// Holds a stack (not a free place).
    occupied: bool,
}

impl Kept {
    fn matches(&self, hash: u64, key: &StackKey<'_>) -> bool {
        self.hash == hash
            && self.run == key.run
            && self.truncated == key.truncated
            && same(&self.chain, key.chain)
            && same(&self.unwound, key.unwound)
    }

    /// Bytes it holds (counted against [`MAX_STACK_BYTES`]).
    fn bytes(&self) -> usize {
        std::mem::size_of::<Kept>()
            + self.chain.len()
            + self.unwound.len() * 8
            + self.json.as_ref().map_or(0, |j| j.len())
            + self.text.as_ref().map_or(0, |t| t.len())
            + self.path.as_ref().map_or(0, |p| p.len())
            + self.line
    }
}

/// The stacks one formatter worker wrote, bounded.
#[derive(Debug, Default)]
pub struct StackCache {
    /// Kept stacks, and free places.
    kept: Vec<Kept>,
    /// A key's hash → its place in `kept`.
    index: foldhash::HashMap<u64, u32>,
    /// Free places in `kept`.
    free: Vec<u32>,
    /// Bytes held by `kept`.
    bytes: usize,
    /// The clock hand: the next place looked at to evict.
    hand: usize,
    hasher: foldhash::fast::FixedState,
    /// Stacks written from the cache.
    pub hits: u64,
    /// Stacks written by walking their frames.
    pub misses: u64,
    /// `--stack-ids`: the formatter worker that owns this cache, and the stack lines it
    /// wrote.
    worker: u32,
    lines: u64,
}

impl StackCache {
    /// The cache of formatter worker `worker` (its stack ids tell it: [`ids`]).
    pub fn for_worker(worker: u32) -> Self {
        StackCache {
            worker,
            ..StackCache::default()
        }
    }

    /// `--stack-ids`: the id of the line of `key`'s stack, if this worker wrote it and
    /// keeps the stack.
    pub fn id(&mut self, key: &StackKey<'_>) -> Option<u64> {
        let at = self.find(key).filter(|&at| self.kept[at].id.is_some());
        self.count(at.is_some());
        at.and_then(|at| self.kept[at].id)
    }

    /// `--stack-ids`: a new id for a line of `key`'s stack, `line` bytes long; the stack
    /// is kept with it when `keep` and it fits, else the id is of the place of stacks
    /// not kept ([`ids::ONE_OFF`]: the next such stack takes it over).
    pub fn keep_id(&mut self, key: &StackKey<'_>, line: usize, keep: bool) -> u64 {
        let at = if keep { self.place(key, line) } else { None };
        let place = at.map_or(ids::ONE_OFF, |at| at as u32);
        let id = ids::stack_id(self.lines, self.worker, place);
        self.lines += 1;
        if let Some(at) = at {
            let kept = &mut self.kept[at];
            let old = std::mem::replace(&mut kept.line, line);
            kept.id = Some(id);
            self.bytes = self.bytes + line - old;
        }
        id
    }

    /// The JSON array of `key`'s stack, if kept.
    pub fn json(&mut self, key: &StackKey<'_>) -> Option<&[u8]> {
        let at = self.find(key).filter(|&at| self.kept[at].json.is_some());
        self.count(at.is_some());
        at.and_then(|at| self.kept[at].json.as_deref())
    }

    /// The `code.stacktrace` text of `key`'s stack, if kept.
    pub fn text(&mut self, key: &StackKey<'_>) -> Option<&str> {
        let at = self.find(key).filter(|&at| self.kept[at].text.is_some());
        self.count(at.is_some());
        at.and_then(|at| self.kept[at].text.as_deref())
    }

    /// `top`'s call path of `key`'s stack, if kept.
    pub fn path(&mut self, key: &StackKey<'_>) -> Option<&Arc<str>> {
        let at = self.find(key).filter(|&at| self.kept[at].path.is_some());
        self.count(at.is_some());
        at.and_then(|at| self.kept[at].path.as_ref())
    }

    /// Keep `path`, `top`'s call path of `key`'s stack.
    pub fn keep_path(&mut self, key: &StackKey<'_>, path: &Arc<str>) {
        if let Some(at) = self.place(key, path.len()) {
            let old = self.kept[at].path.replace(Arc::clone(path));
            self.bytes = self.bytes + path.len() - old.map_or(0, |o| o.len());
        }
    }

    /// Keep `json`, the JSON array of `key`'s stack.
    pub fn keep_json(&mut self, key: &StackKey<'_>, json: &[u8]) {
        if let Some(at) = self.place(key, json.len()) {
            let old = self.kept[at].json.replace(json.into());
            self.bytes = self.bytes + json.len() - old.map_or(0, |o| o.len());
        }
    }

    /// Keep `text`, the `code.stacktrace` text of `key`'s stack.
    pub fn keep_text(&mut self, key: &StackKey<'_>, text: &str) {
        if let Some(at) = self.place(key, text.len()) {
            let old = self.kept[at].text.replace(text.into());
            self.bytes = self.bytes + text.len() - old.map_or(0, |o| o.len());
        }
    }

    /// Stacks kept.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Bytes held (keys, renderings and bookkeeping per stack).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// A hit or a miss, counted.
    fn count(&mut self, hit: bool) {
        if hit {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
    }

    fn hash(&self, key: &StackKey<'_>) -> u64 {
        let mut h = self.hasher.build_hasher();
        h.write_u64(key.run);
        h.write(key.chain);
        for &address in key.unwound {
            h.write_u64(address);
        }
        h.write_u8(key.truncated.map_or(0, |t| t as u8 + 1));
        h.finish()
    }

    /// Where `key`'s stack is kept, marked as used.
    fn find(&mut self, key: &StackKey<'_>) -> Option<usize> {
        let hash = self.hash(key);
        let at = *self.index.get(&hash)? as usize;
        let kept = &mut self.kept[at];
        if !kept.matches(hash, key) {
            // Another key with the same hash: not this stack.
            return None;
        }
        kept.used = true;
        Some(at)
    }

    /// Where `key`'s stack is kept, or a new place for it with room for `adding` bytes
    /// more (older stacks evicted); `None` when it is too large to keep.
    fn place(&mut self, key: &StackKey<'_>, adding: usize) -> Option<usize> {
        let hash = self.hash(key);
        let key_bytes = std::mem::size_of::<Kept>() + key.chain.len() + key.unwound.len() * 8;
        if key_bytes + adding > MAX_ONE_STACK {
            return None;
        }
        if let Some(&at) = self.index.get(&hash) {
            let at = at as usize;
            if self.kept[at].matches(hash, key) {
                self.make_room(adding, Some(at));
                return Some(at);
            }
            // A hash collision: the newer stack takes the place.
            self.evict(at);
        }
        self.make_room(key_bytes + adding, None);
        let at = match self.free.pop() {
            Some(at) => at as usize,
            None => {
                self.kept.push(Kept::default());
                self.kept.len() - 1
            }
        };
        self.kept[at] = Kept {
            hash,
            run: key.run,
            chain: key.chain.into(),
            unwound: key.unwound.into(),
            truncated: key.truncated,
            json: None,
            text: None,
            path: None,
            id: None,
            line: 0,
            // Kept past the next sweep only if read again (a stack seen once goes first).
            used: false,
            occupied: true,
        };
        self.bytes += key_bytes;
        self.index.insert(hash, at as u32);
        Some(at)
    }

    /// Evict stacks (never the one at `keep`) until `adding` bytes more fit, and a place
    /// is free or may be added when `keep` is `None`.
    fn make_room(&mut self, adding: usize, keep: Option<usize>) {
        let need_place = keep.is_none();
        // Two sweeps clear every `used` mark: then each place looked at is evicted.
        let mut looks = 2 * self.kept.len() + 1;
        while (self.bytes + adding > MAX_STACK_BYTES
            || (need_place && self.free.is_empty() && self.kept.len() >= MAX_STACKS))
            && looks > 0
        {
            looks -= 1;
            if self.kept.is_empty() {
                break;
            }
            let at = self.hand % self.kept.len();
            self.hand = at + 1;
            let kept = &mut self.kept[at];
            if Some(at) == keep || !kept.occupied {
                continue;
            }
            if kept.used {
                kept.used = false;
                continue;
            }
            self.evict(at);
        }
    }

    /// Forget the stack at `at`.
    fn evict(&mut self, at: usize) {
        let kept = std::mem::take(&mut self.kept[at]);
        if self.index.get(&kept.hash) == Some(&(at as u32)) {
            self.index.remove(&kept.hash);
        }
        self.bytes -= kept.bytes();
        self.free.push(at as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(run: u64, chain: &[u8]) -> StackKey<'_> {
        StackKey {
            run,
            chain,
            unwound: &[],
            truncated: None,
        }
    }

    /// Empty slices are equal without a compare; lengths and contents still decide.
    #[test]
    fn same_tells_slices_apart_by_length_and_contents() {
        assert!(same::<u64>(&[], &[]));
        assert!(!same(&[], &[0u64]) && !same(&[0u64], &[]));
        assert!(same(&[1u8, 2], &[1, 2]) && !same(&[1u8, 2], &[1, 3]));
    }

    #[test]
    fn keeps_each_rendering_by_the_whole_key() {
        let mut c = StackCache::default();
        let chain = [1u8; 80];
        assert!(c.json(&key(1, &chain)).is_none());
        c.keep_json(&key(1, &chain), b"[json]");
        assert_eq!(c.json(&key(1, &chain)), Some(&b"[json]"[..]));
        assert!(c.text(&key(1, &chain)).is_none(), "no text written yet");
        c.keep_text(&key(1, &chain), "text");
        assert_eq!(c.text(&key(1, &chain)), Some("text"));
        assert_eq!(c.json(&key(1, &chain)), Some(&b"[json]"[..]));
        assert_eq!(c.len(), 1);
        // Another program run, chain, unwound frames or end of the walk: another stack.
        let mut other = chain;
        other[79] = 2;
        let unwound = StackKey {
            unwound: &[5],
            ..key(1, &chain)
        };
        let truncated = StackKey {
            truncated: Some(Truncated::MaxStack),
            ..key(1, &chain)
        };
        for miss in [
            key(2, &chain),
            key(1, &other),
            key(1, &chain[..72]),
            unwound,
            truncated,
        ] {
            assert!(c.json(&miss).is_none(), "{miss:?}");
        }
        assert_eq!((c.hits, c.misses), (3, 7));
    }

    #[test]
    fn bounded_by_count_and_bytes() {
        let mut c = StackCache::default();
        for i in 0..(MAX_STACKS as u64 * 3) {
            c.keep_json(&key(1, &i.to_ne_bytes()), &[b'x'; 100]);
            assert!(c.len() <= MAX_STACKS && c.bytes() <= MAX_STACK_BYTES);
        }
        assert_eq!(c.len(), MAX_STACKS);
        let large = vec![b'y'; MAX_ONE_STACK - 1000];
        for i in 0..200u64 {
            c.keep_json(&key(2, &i.to_ne_bytes()), &large);
            assert!(c.len() <= MAX_STACKS && c.bytes() <= MAX_STACK_BYTES);
        }
        assert_eq!(c.json(&key(2, &199u64.to_ne_bytes())), Some(&large[..]));
        c.keep_json(&key(3, b"x"), &vec![0; MAX_ONE_STACK]);
        assert!(c.json(&key(3, b"x")).is_none(), "too large to keep");
        // Everything evicted is accounted for: the bytes held are those of what is kept.
        let held: usize = c.kept.iter().filter(|k| k.occupied).map(Kept::bytes).sum();
        assert_eq!(c.bytes(), held);
    }

    #[test]
    fn an_id_per_stack_kept_distinct_across_workers_and_fills() {
        let (mut w0, mut w1) = (StackCache::for_worker(0), StackCache::for_worker(1));
        let a = key(1, b"a");
        assert_eq!(w0.id(&a), None);
        let id = w0.keep_id(&a, 100, true);
        assert_eq!(w0.id(&a), Some(id), "named by the same id while kept");
        let other = w1.keep_id(&a, 100, true);
        assert_ne!(id, other, "another worker: another line, another id");
        // A stack not kept (JIT code): a new id each time, all of the one-off place.
        let jit = key(2, b"jit");
        let (j1, j2) = (w0.keep_id(&jit, 10, false), w0.keep_id(&jit, 10, false));
        assert!(j1 != j2 && w0.id(&jit).is_none());
        assert_eq!(ids::place_of(j1), ids::place_of(j2));
        assert_ne!(ids::place_of(j1), ids::place_of(id));
        // Evicted, then seen again: a new id (its old line may be gone from a new file's
        // start), its place the one the old stack left or another.
        let mut ids_seen = std::collections::HashSet::new();
        for i in 0..(MAX_STACKS as u64 * 2) {
            let bytes = i.to_ne_bytes();
            assert!(ids_seen.insert(w0.keep_id(&key(3, &bytes), 100, true)));
        }
        assert_eq!(w0.id(&a), None, "evicted");
        let again = w0.keep_id(&a, 100, true);
        assert!(again != id && ids_seen.insert(again));
        // The line's bytes are counted against the bound.
        let held: usize = w0.kept.iter().filter(|k| k.occupied).map(Kept::bytes).sum();
        assert_eq!(w0.bytes(), held);
        assert!(w0.bytes() <= MAX_STACK_BYTES);
    }

    #[test]
    fn stacks_read_again_stay() {
        let mut c = StackCache::default();
        let hot = key(7, b"hot");
        c.keep_json(&hot, b"[hot]");
        for i in 0..(MAX_STACKS as u64 * 4) {
            c.keep_json(&key(1, &i.to_ne_bytes()), b"[]");
            assert!(c.json(&hot).is_some(), "evicted after {i} others");
        }
    }
}
