//! Compiled plans: the JSON writer's fast path for metadata seen before.
//!
//! A producer writes the same metadata block for every instance of an event, so the
//! walk over the metadata (field records, key texts, duplicate renaming, tag paths) can
//! be done once per distinct block. A [`Plan`] holds what the metadata alone decides:
//! the `,"name":…,"event_attributes":{…}` text, every field's prefix (comma, key
//! renamed as the streaming writer renames it, `:` and `{` or `[`), the
//! `,"field_tags":{…}` text, and a flat list of `Op`s saying how to read and write
//! each value. What comes from each event (header level, opcode, id, version, tag,
//! activity ids, the payload) is written per event.
//!
//! Plans live in a [`PlanCache`] keyed by the metadata bytes (found by a quick hash,
//! compared in full) and the byte order: [`PLAN_CACHE_ENTRIES`] entries and
//! [`PLAN_CACHE_BYTES`] bytes at most (metadata copies, texts, ops; the oldest entries go
//! first), each for metadata of at most [`MAX_PLAN_METADATA`] bytes. (The corpus of
//! `EventHeaderInterceptorLE64.dat` has 258 distinct blocks of at most 127 bytes; its
//! plans take about 110 KiB.) Metadata that does not compile
//! (a bad record, over the field or depth limits, a tag inside an array of structs,
//! whose tag paths depend on the payload) gets an entry without a plan: its events
//! always take the streaming writer. Nothing is allocated once an event's metadata is
//! in the cache.
//!
//! A plan's walk stops at the first problem (payload too short, over the item budget);
//! the caller then throws its output away and runs the streaming writer, which writes
//! the errors. So a plan only ever writes lines the streaming writer writes too, byte
//! for byte (`tests/eventheader_json.rs` checks it on generated and mutated events).

use crate::bytes::Endian;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicU32, Ordering};

use super::keys::{Keys, Open, close, member, note_tag, write_field_tags, write_name};
use super::values::{is_value_format, uint_of};
use crate::eventheader::enumerator::{MAX_FIELDS, MAX_STRUCT_DEPTH, read_value, zstring};
use crate::eventheader::enums::{Encoding, Format};
use crate::eventheader::header::read_u16;
use crate::eventheader::metadata::{ArrayKind, FieldMeta, read_field};
use crate::json::{Span, Texts, write_int, write_text};

/// The number of metadata blocks a [`PlanCache`] remembers.
pub const PLAN_CACHE_ENTRIES: usize = 512;
/// The bytes a [`PlanCache`] may hold (metadata copies, texts and ops); the oldest
/// entries go first when a new one would pass it.
pub const PLAN_CACHE_BYTES: usize = 1 << 20;
/// Metadata blocks longer than this are not cached (their events take the streaming
/// writer).
pub const MAX_PLAN_METADATA: usize = 4096;

/// How many elements an array has.
#[derive(Debug, Clone, Copy)]
enum Count {
    /// Constant (from the metadata).
    Const(u16),
    /// A `u16` in the payload before the elements.
    Var,
}

/// How a value's bytes become JSON.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Value8..Value64 of this many bytes shown as an unsigned number (the default).
    Unsigned(u8),
    /// Value8..Value64 of this many bytes shown as a signed number.
    Signed(u8),
    /// Value8..Value64 of this many bytes as a hex number
    /// ([`super::values::write_hash_x`]).
    Hex(u8),
    /// Value8..Value64 of this many bytes in another format
    /// ([`super::values::write_int_value`]).
    Int(Format, u8),
    /// A Length16 string of UTF-8 text ([`write_text`]).
    Text,
    /// A zero-terminated string of UTF-8 text ([`write_text`]).
    ZText,
    /// Another string of `unit`-byte code units, in a string format
    /// ([`super::values::write_string`]).
    Str(Format, u8),
    /// Anything else ([`super::values::write_value_as`]).
    Other(Format),
}

/// One step of a plan: the constant text since the step before (commas, keys, the
/// braces of structs, which take no payload), then what the payload gives.
#[derive(Debug, Clone, Copy)]
struct Op {
    text: Span,
    /// The [`Enumerator`](crate::eventheader::Enumerator)'s items the text and the step stand for (struct begins
    /// and ends, the value or the array's begin and end; not the elements).
    items: u32,
    what: What,
}

#[derive(Debug, Clone, Copy)]
enum What {
    /// Nothing more (the text that ends a body).
    Text,
    /// A value.
    Value { encoding: Encoding, kind: Kind },
    /// An array of values: the text ends with `[`; the elements, `]`.
    Values {
        count: Count,
        encoding: Encoding,
        kind: Kind,
    },
    /// An array of structs: the text ends with `[`; each element as `{`, the `body` ops
    /// that follow this one, `}`; then `]`.
    Structs { count: Count, body: u32 },
}

/// What one metadata block compiles to.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The prefixes the ops point into, then `head` and `tags`.
    text: Texts,
    /// `,"name":…` and `,"event_attributes":{…}` when the name has attributes.
    head: Span,
    /// `,"field_tags":{…}`, or empty.
    tags: Span,
    ops: Box<[Op]>,
    /// Whether its walk can run out of the item budget (see [`counted`]); else the walk
    /// does not count.
    counted: bool,
}
/// One cached metadata block.
#[derive(Debug, Clone)]
struct Cached {
    hash: u64,
    endian: Endian,
    meta: Box<[u8]>,
    plan: Option<Plan>,
    /// The bytes it holds, counted against [`PLAN_CACHE_BYTES`].
    bytes: usize,
}

impl Cached {
    fn is(&self, hash: u64, meta: &[u8], endian: Endian) -> bool {
        self.hash == hash && self.endian == endian && *self.meta == *meta
    }
}

/// Plans by metadata block (see the module documentation for the bounds): a ring of
/// entries in the order they came (the oldest replaced first) and an index by hash.
#[derive(Debug, Clone, Default)]
pub struct PlanCache {
    slots: Vec<Option<Cached>>,
    /// Slot by metadata hash.
    index: HashMap<u64, u32, BuildHasherDefault<HashIsKey>>,
    /// The slot the next new entry takes (the oldest entry, once the ring is full).
    next: usize,
    /// The slot the last lookup found (events of one kind often come in runs).
    last: usize,
    /// Slot by [`fingerprint`] of the metadata (a guess, checked against the metadata
    /// before use; [`NO_SLOT`] when empty): the usual lookup, a few loads and one
    /// compare instead of hashing the whole block and probing `index`. Two blocks with
    /// the same fingerprint only take turns here; `index` still finds both.
    front: Box<[u16]>,
    /// The bytes held.
    bytes: usize,
    /// The slot of the block compiled last, until [`PlanCache::take_learnt`] takes it
    /// (a block is compiled when first seen: the schema line's cue, off the hot path).
    learnt: Option<usize>,
}

impl PlanCache {
    /// The plan for `meta` (values in byte order `endian`), compiling it the first
    /// time; `None` when the metadata does not compile or is too long to cache.
    ///
    /// `hint` (one per tracepoint) remembers the slot its events found last: when that
    /// slot holds the same metadata, the plan is found without hashing it (events of one
    /// tracepoint mostly carry the same block); else the front table by a fingerprint of
    /// the block (a few of its words), and then the index by the full hash, are searched. Without a hint, the slot the
    /// cache found last is tried first.
    pub fn get(&mut self, meta: &[u8], endian: Endian, hint: Option<&PlanHint>) -> Option<&Plan> {
        let holds = |slot: usize| {
            self.slots
                .get(slot)
                .and_then(Option::as_ref)
                .is_some_and(|c| c.endian == endian && *c.meta == *meta)
        };
        let hinted = hint.map(PlanHint::get);
        let guess = hinted.unwrap_or(self.last);
        let slot = if holds(guess) {
            guess
        } else {
            let print = fingerprint(meta, endian);
            match self.front.get(print).map(|&slot| usize::from(slot)) {
                Some(slot) if holds(slot) => slot,
                _ => {
                    let slot = self.find(meta, endian)?;
                    if self.front.is_empty() {
                        self.front = vec![NO_SLOT; FRONT_ENTRIES].into_boxed_slice();
                    }
                    if let (Some(entry), Ok(slot)) =
                        (self.front.get_mut(print), u16::try_from(slot))
                    {
                        *entry = slot;
                    }
                    slot
                }
            }
        };
        self.last = slot;
        if let Some(hint) = hint.filter(|_| hinted != Some(slot)) {
            hint.set(slot);
        }
        self.slots.get(slot)?.as_ref()?.plan.as_ref()
    }

    /// The slot of `meta` by its full hash, compiling it into a new one when it is not
    /// cached (`None` when it is too long to cache). Out of line: the usual lookup
    /// stops at the hint or the front table.
    #[inline(never)]
    fn find(&mut self, meta: &[u8], endian: Endian) -> Option<usize> {
        let hash = hash(meta, endian);
        let found = self.index.get(&hash).map(|&slot| slot as usize);
        let cached = |slot: usize| self.slots.get(slot).and_then(Option::as_ref);
        match found {
            Some(slot) if cached(slot).is_some_and(|c| c.is(hash, meta, endian)) => Some(slot),
            _ if meta.len() > MAX_PLAN_METADATA => None,
            _ => Some(self.insert(hash, meta, endian)),
        }
    }

    /// Compile and cache `meta`, evicting the oldest entries as the bounds require.
    #[inline(never)]
    // Bytes of blocks and plans held in memory (at most PLAN_CACHE_BYTES and one more
    // block); slots below PLAN_CACHE_ENTRIES, plus one, modulo it.
    #[allow(clippy::arithmetic_side_effects)]
    fn insert(&mut self, hash: u64, meta: &[u8], endian: Endian) -> usize {
        let plan = compile(meta, endian);
        let bytes = meta.len() + plan.as_ref().map_or(0, Plan::bytes);
        if self.index.capacity() == 0 {
            self.index.reserve(PLAN_CACHE_ENTRIES);
            self.slots.reserve_exact(PLAN_CACHE_ENTRIES);
        }
        let slot = self.next;
        self.next = (slot + 1) % PLAN_CACHE_ENTRIES;
        self.evict(slot);
        let mut oldest = self.next;
        while self.bytes + bytes > PLAN_CACHE_BYTES && oldest != slot {
            self.evict(oldest);
            oldest = (oldest + 1) % PLAN_CACHE_ENTRIES;
        }
        let entry = Some(Cached {
            hash,
            endian,
            meta: meta.into(),
            plan,
            bytes,
        });
        match self.slots.get_mut(slot) {
            Some(s) => *s = entry,
            None => self.slots.push(entry),
        }
        self.bytes += bytes;
        self.index.insert(hash, slot as u32);
        self.learnt = Some(slot);
        slot
    }

    /// Whether a block was first seen since the last [`PlanCache::take_learnt`] (the
    /// per-record check, inlined).
    #[inline]
    pub fn has_learnt(&self) -> bool {
        self.learnt.is_some()
    }

    /// The metadata block (and its byte order) first seen since the last call, if
    /// any: at most one per event, so whoever writes schema lines calls this after each
    /// event (a block evicted and seen again is new again).
    pub fn take_learnt(&mut self) -> Option<(&[u8], Endian)> {
        let slot = self.learnt.take()?;
        let cached = self.slots.get(slot)?.as_ref()?;
        Some((&cached.meta, cached.endian))
    }

    fn evict(&mut self, slot: usize) {
        let Some(old) = self.slots.get_mut(slot).and_then(Option::take) else {
            return;
        };
        // Its bytes were added when it was cached.
        self.bytes = self.bytes.saturating_sub(old.bytes);
        if self.index.get(&old.hash) == Some(&(slot as u32)) {
            self.index.remove(&old.hash);
        }
    }

    /// The number of cached metadata blocks (with or without a plan).
    pub fn len(&self) -> usize {
        self.slots.iter().flatten().count()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The [`PlanCache`] slot a tracepoint's events found last (a guess, checked against
/// the metadata before use; shared between threads, so an atomic, read and written
/// relaxed). Keep one per tracepoint beside its prepared name.
#[derive(Debug, Default)]
pub struct PlanHint(AtomicU32);

impl PlanHint {
    fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed) as usize
    }

    fn set(&self, slot: usize) {
        self.0.store(slot as u32, Ordering::Relaxed);
    }
}

impl Clone for PlanHint {
    fn clone(&self) -> Self {
        PlanHint(AtomicU32::new(self.0.load(Ordering::Relaxed)))
    }
}

/// A [`std::hash::Hasher`] for keys that are hashes already.
#[derive(Debug, Clone, Copy, Default)]
struct HashIsKey(u64);

impl std::hash::Hasher for HashIsKey {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// The entries of [`PlanCache`]'s front table (a power of two; 8 KiB of `u16`: the
/// corpus's 258 blocks share an entry with another about 6 % of the time).
const FRONT_ENTRIES: usize = 4096;
/// An empty front-table entry.
const NO_SLOT: u16 = u16::MAX;
const _: () = assert!(PLAN_CACHE_ENTRIES < NO_SLOT as usize);

/// A front-table index for a metadata block: its length, byte order and three of its
/// words (first, middle, last; the event name, a field record, the last record), mixed.
/// Cheap rather than thorough: blocks that share it only take turns in the front table.
#[inline]
// len >= 8 where len / 2 - 4 is taken; the shift is 64 minus a table's bits.
#[allow(clippy::arithmetic_side_effects)]
fn fingerprint(meta: &[u8], endian: Endian) -> usize {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let word = |at: usize| {
        meta.get(at..)
            .and_then(<[u8]>::first_chunk::<8>)
            .map_or(0, |w| u64::from_le_bytes(*w))
    };
    let (len, last) = (meta.len(), meta.last_chunk::<8>());
    let (first, middle) = match last {
        Some(_) => (word(0), word(len / 2 - 4)),
        // Shorter than a word: its bytes, zero-padded.
        None => (meta.iter().rev().fold(0, |w, &b| w << 8 | u64::from(b)), 0),
    };
    let last = last.map_or(0, |w| u64::from_le_bytes(*w));
    let key = (len as u64) << 1 | u64::from(endian.is_big());
    let h = (first ^ middle.rotate_left(21) ^ last.rotate_left(42) ^ key).wrapping_mul(K);
    (h >> (64 - FRONT_ENTRIES.trailing_zeros())) as usize
}

/// A quick hash of a metadata block and its byte order, 8 bytes at a time.
fn hash(meta: &[u8], endian: Endian) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = (meta.len() as u64) << 1 | u64::from(endian.is_big());
    let mut words = meta.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        h = (h ^ u64::from_le_bytes(b)).wrapping_mul(K).rotate_left(29);
    }
    // A last partial word: the last 8 bytes (overlapping the word before), or the
    // bytes zero-padded when there are fewer than 8.
    let last = match (words.remainder(), meta.last_chunk::<8>()) {
        ([], _) => 0,
        (_, Some(last)) => u64::from_le_bytes(*last),
        (rest, None) => {
            let mut b = [0u8; 8];
            for (d, s) in b.iter_mut().zip(rest) {
                *d = *s;
            }
            u64::from_le_bytes(b)
        }
    };
    h = (h ^ last).wrapping_mul(K);
    h ^ (h >> 32)
}

/// Compile a metadata block (`None`: the streaming writer handles its events).
fn compile(meta: &[u8], endian: Endian) -> Option<Plan> {
    let name_len = memchr::memchr(0, meta)?;
    let mut c = Compiler {
        meta,
        endian,
        text: Vec::new(),
        ops: Vec::new(),
        s: Keys::default(),
        fields: 0,
        seen: 0,
        pending: 0,
        pending_items: 0,
    };
    let mut head = Vec::new();
    write_name(&mut head, &mut c.s.keys, meta.get(..name_len)?);
    c.s.keys.clear();
    c.s.open.push(Open {
        array: false,
        first: true,
        keys_from: 0,
        key: None,
    });
    // The NUL is inside the metadata: the sum fits.
    let mut pos = name_len.saturating_add(1);
    c.body(&mut pos, u32::MAX, 1, false)?;
    c.flush();
    let head_from = c.text.len();
    c.text.extend_from_slice(&head);
    let tags_from = c.text.len();
    if !c.s.tags.is_empty() {
        write_field_tags(&mut c.text, &mut c.s);
    }
    let span = |a: usize, b: usize| Some((u32::try_from(a).ok()?, u32::try_from(b).ok()?));
    Some(Plan {
        head: span(head_from, tags_from)?,
        tags: span(tags_from, c.text.len())?,
        text: Texts::new(c.text),
        counted: counted(&c.ops),
        ops: c.ops.into(),
    })
}

/// The least item budget of a walk ([`Plan::write_fields`]: this plus 32 per payload
/// byte).
const MIN_BUDGET: usize = 4096;

/// Whether a walk over `ops` can run out of its item budget. It cannot when the ops
/// count fewer than [`MIN_BUDGET`] items (the final step included) and their only
/// repeated items are elements of arrays of fixed-size values: a walk checks that such
/// an array's bytes are in the payload before its elements, so all those elements
/// together are at most one item per payload byte, within the budget's 32 per byte.
/// Arrays of structs and of strings (whose elements may take no byte) are counted.
fn counted(ops: &[Op]) -> bool {
    // A few items per field, at most MAX_FIELDS fields: the sum is small.
    let fixed = (ops.iter().map(|op| op.items as usize)).fold(1usize, usize::saturating_add);
    fixed > MIN_BUDGET
        || ops.iter().any(|op| match op.what {
            What::Text | What::Value { .. } => false,
            What::Values { encoding, .. } => encoding.fixed_size().is_none(),
            What::Structs { .. } => true,
        })
}

/// The walk over the metadata, writing the prefixes as the streaming writer writes the
/// keys (the same [`member`], [`note_tag`] and [`close`] over the plan's text).
struct Compiler<'m> {
    meta: &'m [u8],
    endian: Endian,
    text: Vec<u8>,
    ops: Vec<Op>,
    s: Keys,
    fields: usize,
    seen: usize,
    /// Where the text not yet in an op starts, and the items it stands for.
    pending: usize,
    pending_items: u32,
}

// Counts of the fields of one metadata block (at most MAX_FIELDS, checked per field) and
// of their items (a few each), depths up to MAX_STRUCT_DEPTH + 1, places inside the
// metadata and the plan's text: no sum overflows; `remaining` is taken one from only
// while it is not 0.
#[allow(clippy::arithmetic_side_effects)]
impl Compiler<'_> {
    /// An op with the text since the last one.
    fn op(&mut self, items: u32, what: What) {
        self.ops.push(Op {
            text: (self.pending as u32, self.text.len() as u32),
            items: self.pending_items + items,
            what,
        });
        self.pending = self.text.len();
        self.pending_items = 0;
    }

    /// An op for the text left at the end of a body, if any.
    fn flush(&mut self) {
        if self.pending != self.text.len() || self.pending_items != 0 {
            self.op(0, What::Text);
        }
    }

    /// Close the innermost open container without writing its bracket.
    fn close(&mut self) {
        let mark = self.text.len();
        close(&mut self.text, &mut self.s);
        self.text.truncate(mark);
    }

    /// The records of a body (at most `remaining`, to the end of the metadata) from
    /// `pos`, which ends where the body ends; `depth` counts the open bodies.
    fn body(
        &mut self,
        pos: &mut usize,
        mut remaining: u32,
        depth: usize,
        in_struct_array: bool,
    ) -> Option<()> {
        while remaining != 0 && *pos < self.meta.len() {
            let field = read_field(self.meta, *pos, self.endian).ok()?;
            self.fields += 1;
            if self.fields > MAX_FIELDS || (field.tag != 0 && in_struct_array) {
                return None;
            }
            *pos = field.next;
            remaining -= 1;
            let key = member(&mut self.text, &mut self.s, field.name);
            note_tag(&mut self.s, &field, key, &mut self.seen);
            let count = match field.array {
                ArrayKind::Scalar if field.encoding == Encoding::Struct => {
                    if depth > MAX_STRUCT_DEPTH {
                        return None;
                    }
                    // Constant text: the braces join the text of the next op.
                    self.text.push(b'{');
                    self.open(false, key);
                    self.body(
                        pos,
                        u32::from(field.format_byte),
                        depth + 1,
                        in_struct_array,
                    )?;
                    close(&mut self.text, &mut self.s);
                    self.pending_items += 2;
                    continue;
                }
                ArrayKind::Scalar => {
                    let (encoding, kind) = (field.encoding, kind(&field));
                    self.op(1, What::Value { encoding, kind });
                    continue;
                }
                ArrayKind::Constant(n) => Count::Const(n),
                ArrayKind::Variable => Count::Var,
            };
            self.text.push(b'[');
            if field.encoding != Encoding::Struct {
                let (encoding, kind) = (field.encoding, kind(&field));
                self.op(
                    2,
                    What::Values {
                        count,
                        encoding,
                        kind,
                    },
                );
                continue;
            }
            if depth > MAX_STRUCT_DEPTH {
                return None;
            }
            let at = self.ops.len();
            self.op(2, What::Structs { count, body: 0 });
            self.open(true, key);
            self.open(false, None);
            self.body(pos, u32::from(field.format_byte), depth + 1, true)?;
            self.flush();
            self.close();
            self.close();
            // The brackets the walk writes are not constant text.
            self.pending = self.text.len();
            let len = u32::try_from(self.ops.len() - at - 1).ok()?;
            if let Some(Op {
                what: What::Structs { body, .. },
                ..
            }) = self.ops.get_mut(at)
            {
                *body = len;
            }
        }
        Some(())
    }

    fn open(&mut self, array: bool, key: Option<(usize, usize)>) {
        self.s.open.push(Open {
            array,
            first: true,
            keys_from: self.s.keys.len(),
            key,
        });
    }
}

fn kind(field: &FieldMeta<'_>) -> Kind {
    let format = field.format();
    let size = field.encoding.fixed_size().unwrap_or(0) as u8;
    match field.encoding {
        Encoding::Value8 | Encoding::Value16 | Encoding::Value32 | Encoding::Value64 => {
            match format {
                Format::Default | Format::UnsignedInt => Kind::Unsigned(size),
                Format::SignedInt => Kind::Signed(size),
                Format::HexInt => Kind::Hex(size),
                _ => Kind::Int(format, size),
            }
        }
        Encoding::StringLength16Char8 if matches!(format, Format::Default | Format::StringUtf) => {
            Kind::Text
        }
        // Binary bytes shown as UTF-8 text: the same Length16 read and text.
        Encoding::BinaryLength16Char8 if format == Format::StringUtf => Kind::Text,
        Encoding::ZStringChar8 if matches!(format, Format::Default | Format::StringUtf) => {
            Kind::ZText
        }
        // What `write_value_as` does with strings: text in the format's form, but
        // Length16 bytes in a value format as a value, binary bytes by default as hex.
        Encoding::StringLength16Char8 | Encoding::BinaryLength16Char8
            if is_value_format(format)
                || (field.encoding == Encoding::BinaryLength16Char8
                    && format == Format::Default) =>
        {
            Kind::Other(format)
        }
        _ => match field.encoding.char_size() {
            Some(unit) => Kind::Str(format, unit as u8),
            None => Kind::Other(format),
        },
    }
}

/// The state of a plan's walk over one payload.
struct Walk<'p> {
    payload: &'p [u8],
    pos: usize,
    endian: Endian,
    /// Items left, as the [`Enumerator`](crate::eventheader::Enumerator) counts them (it fails on the item that
    /// finds its budget at 0, counting the final step that ends the walk).
    budget: usize,
}

// `pos` moves only past bytes got from the payload (pos <= payload.len(), a slice's
// length), by a u16 count plus 2 or by at most 16 bytes at a time: no sum overflows;
// shifts are 64 − 8 × (1, 2, 4 or 8).
#[allow(clippy::arithmetic_side_effects)]
impl Walk<'_> {
    #[inline]
    fn item(&mut self) -> Option<()> {
        self.items(1)
    }

    #[inline]
    fn items(&mut self, n: u32) -> Option<()> {
        self.budget = self.budget.checked_sub(n as usize)?;
        Some(())
    }

    /// A Value8..Value64 of `size` bytes as a zero-extended number.
    #[inline]
    fn uint(&mut self, size: u8) -> Option<u64> {
        let size = usize::from(size);
        let v = uint_of(self.payload.get(self.pos..self.pos + size)?, self.endian)?;
        self.pos += size;
        Some(v)
    }

    fn count(&mut self, count: Count) -> Option<u16> {
        match count {
            Count::Const(n) => Some(n),
            Count::Var => {
                let n = read_u16(self.payload.get(self.pos..)?, 0, self.endian)?;
                self.pos += 2;
                Some(n)
            }
        }
    }

    #[inline(always)]
    fn value(&mut self, out: &mut Vec<u8>, encoding: Encoding, kind: Kind) -> Option<()> {
        match kind {
            Kind::Unsigned(size) => write_int(out, self.uint(size)?),
            Kind::Signed(size) => {
                let shift = 64 - 8 * u32::from(size);
                write_int(out, ((self.uint(size)? << shift) as i64) >> shift)
            }
            Kind::Hex(size) => super::values::write_hash_x(out, self.uint(size)?),
            Kind::Text => {
                let rest = self.payload.get(self.pos..)?;
                let n = usize::from(read_u16(rest, 0, self.endian)?);
                write_text(out, rest.get(2..2 + n)?);
                self.pos += 2 + n;
            }
            Kind::ZText => {
                let rest = self.payload.get(self.pos..)?;
                let (text, used) = zstring(rest, 1);
                write_text(out, text);
                self.pos += used;
            }
            Kind::Int(format, size) => {
                let size = usize::from(size);
                let bytes = self.payload.get(self.pos..self.pos + size)?;
                self.pos += size;
                super::values::write_int_value(out, format, bytes, self.endian)
            }
            Kind::Str(format, unit) => {
                let (bytes, used) =
                    read_value(self.payload, self.pos, encoding, self.endian).ok()?;
                self.pos += used;
                super::values::write_string(out, format, bytes, usize::from(unit), self.endian)
            }
            Kind::Other(format) => {
                let (bytes, used) =
                    read_value(self.payload, self.pos, encoding, self.endian).ok()?;
                self.pos += used;
                super::values::write_value_as(out, encoding, format, bytes, self.endian)
            }
        }
        Some(())
    }
}

impl Plan {
    /// The bytes it holds.
    fn bytes(&self) -> usize {
        // Sizes of what it holds in memory.
        #[allow(clippy::arithmetic_side_effects)]
        let bytes = self.text.len()
            + std::mem::size_of_val::<[Op]>(&self.ops)
            + std::mem::size_of::<Plan>();
        bytes
    }

    /// Append `,"name":…` and `,"event_attributes":{…}` when the name has attributes.
    #[inline]
    pub fn write_head(&self, out: &mut Vec<u8>) {
        self.text.write(out, self.head);
    }

    /// Append `,"field_tags":{…}` when fields have tags.
    #[inline]
    pub fn write_tags(&self, out: &mut Vec<u8>) {
        if self.tags.0 != self.tags.1 {
            self.text.write(out, self.tags);
        }
    }

    /// Write the `fields` members of an event whose payload is `payload` (without the
    /// braces); `None` (with partial output) where the streaming writer would report an
    /// error.
    pub fn write_fields(&self, out: &mut Vec<u8>, payload: &[u8], endian: Endian) -> Option<()> {
        let mut walk = Walk {
            payload,
            pos: 0,
            endian,
            budget: payload.len().saturating_mul(32).saturating_add(MIN_BUDGET),
        };
        if !self.counted {
            return self.run::<false>(out, &self.ops, &mut walk);
        }
        self.run::<true>(out, &self.ops, &mut walk)?;
        // The step that ends the walk needs a unit of budget too.
        walk.item()
    }

    /// The walk over `ops`; `COUNT`: whether it counts items against the budget (see
    /// [`counted`]; the same code without the counting when it cannot run out).
    // `i` indexes `ops`, moved by one or by a struct body's op count (both inside them);
    // a u16 count times a value's size (at most 16) fits.
    #[allow(clippy::arithmetic_side_effects)]
    fn run<const COUNT: bool>(
        &self,
        out: &mut Vec<u8>,
        ops: &[Op],
        w: &mut Walk<'_>,
    ) -> Option<()> {
        let mut i = 0;
        while let Some(&op) = ops.get(i) {
            i += 1;
            if COUNT {
                w.items(op.items)?;
            }
            self.text.write(out, op.text);
            match op.what {
                What::Text => {}
                What::Value { encoding, kind } => w.value(out, encoding, kind)?,
                What::Values {
                    count,
                    encoding,
                    kind,
                } => {
                    let n = w.count(count)?;
                    if let Some(size) = encoding.fixed_size() {
                        let have = w.payload.len().saturating_sub(w.pos);
                        if usize::from(n) * size > have {
                            return None;
                        }
                    }
                    for e in 0..n {
                        if COUNT {
                            w.item()?;
                        }
                        if e > 0 {
                            out.push(b',');
                        }
                        w.value(out, encoding, kind)?;
                    }
                    out.push(b']');
                }
                What::Structs { count, body } => {
                    let n = w.count(count)?;
                    let end = i + body as usize;
                    let body = ops.get(i..end)?;
                    i = end;
                    for e in 0..n {
                        if COUNT {
                            w.items(2)?;
                        }
                        out.extend_from_slice(if e > 0 { b",{" } else { b"{" });
                        self.run::<COUNT>(out, body, w)?;
                        out.push(b'}');
                    }
                    out.push(b']');
                }
            }
        }
        Some(())
    }
}
