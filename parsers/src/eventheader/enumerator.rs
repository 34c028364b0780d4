//! A streaming, allocation-free walk over an event's metadata and payload.
//!
//! [`Enumerator`] yields [`Item`]s in payload order: struct begin/end, array
//! begin/end, and values (scalars and array elements) with their field record (name,
//! encoding, format, tag) and their bytes. It knows nothing of JSON: the JSON writer
//! ([`crate::eventheader_json`]) and other consumers (tests, future exporters) share it.
//!
//! Rules (those of `eventheader.h` and the reference decoder `tracepoint_decode`):
//! - a struct's field count says how many records follow it; metadata may end before
//!   that count is reached (legal); structs nest at most [`MAX_STRUCT_DEPTH`] deep;
//! - arrays of structs re-read the struct's child records for every element, and a
//!   zero-length array of structs still skips its child records;
//! - variable-length arrays have a `u16` count in the payload, constant-length ones in
//!   the metadata; arrays of fixed-size values must fit the payload as a whole;
//! - zero-terminated strings without a terminator run to the end of the event;
//! - bytes after the last field (perf's padding of raw data) are left alone.
//!
//! Guards against hostile metadata: at most [`MAX_FIELDS`] field records per event, and
//! at most `4096 + 32 × payload length` items.
//!
//! Nothing is allocated: the open structs and arrays live in a fixed-size stack.

use crate::bytes::Endian;
use std::fmt;

use super::enums::Encoding;
use super::header::read_u16;
use super::metadata::{ArrayKind, FieldMeta, MetaError, read_field};

/// Structs nest at most this deep (deeper is an error), as in the reference decoder.
pub const MAX_STRUCT_DEPTH: usize = 8;
/// At most this many field records per event (more is an error).
pub const MAX_FIELDS: usize = 128;
/// Stack entries: the top level, then an owner (struct or array) and a body per struct
/// level, and one more array of values.
const STACK: usize = 2 + 2 * (MAX_STRUCT_DEPTH + 1);

/// One step of the walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'a> {
    /// A struct starts (a field, or an element of an array of structs).
    StructBegin {
        /// The struct's field record.
        field: FieldMeta<'a>,
        /// Whether it is an array element (else a named field).
        element: bool,
    },
    /// The struct begun last ends.
    StructEnd {
        /// The struct's field record.
        field: FieldMeta<'a>,
        /// Whether it is an array element.
        element: bool,
    },
    /// An array field starts; `count` elements follow (values or structs).
    ArrayBegin {
        /// The array's field record.
        field: FieldMeta<'a>,
        /// The number of elements.
        count: u16,
    },
    /// The array begun last ends.
    ArrayEnd {
        /// The array's field record.
        field: FieldMeta<'a>,
    },
    /// A value: a scalar field or an array element.
    Value {
        /// The field record.
        field: FieldMeta<'a>,
        /// The value's bytes: the N bytes of a ValueN; a string's code units without
        /// its terminator or length; a binary field's bytes without the length.
        bytes: &'a [u8],
        /// Whether it is an array element (else a named field).
        element: bool,
    },
}

/// Why the walk stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A field record could not be read.
    Metadata(MetaError),
    /// The payload ends before the value (or array count) does.
    PayloadTruncated {
        /// Bytes the value needs.
        need: usize,
        /// Bytes left in the payload.
        have: usize,
    },
    /// Structs nested more than [`MAX_STRUCT_DEPTH`] deep.
    TooDeep,
    /// More than [`MAX_FIELDS`] field records.
    TooManyFields,
    /// More items than the per-event budget (hostile nesting of empty structs).
    TooManyItems,
}

/// Where and why the walk stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeError<'a> {
    /// Why.
    pub kind: ErrorKind,
    /// The field being decoded, when its record was read and it is not an element
    /// of the array being walked (the path of open structs and arrays says the rest).
    pub field: Option<&'a [u8]>,
    /// The payload byte where the failing value starts; the payload from here on was
    /// not decoded.
    pub payload_pos: usize,
}

impl fmt::Display for DecodeError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = self.payload_pos;
        match self.kind {
            ErrorKind::Metadata(e) => write!(f, "bad metadata: {e} (payload byte {at})"),
            ErrorKind::PayloadTruncated { need, have } => write!(
                f,
                "payload ends early: {need} bytes needed at payload byte {at}, {have} left"
            ),
            ErrorKind::TooDeep => write!(
                f,
                "structs nested deeper than {MAX_STRUCT_DEPTH} (payload byte {at})"
            ),
            ErrorKind::TooManyFields => {
                write!(f, "more than {MAX_FIELDS} fields (payload byte {at})")
            }
            ErrorKind::TooManyItems => write!(f, "too many items (payload byte {at})"),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Entry<'a> {
    /// Reading field records: the next at `next`, `remaining` more at most.
    Body { next: usize, remaining: u32 },
    /// A (non-array) struct whose body is above this entry.
    Struct { field: FieldMeta<'a> },
    /// An array; for arrays of structs, `children_end` is where the child records end
    /// (known once an element has been read).
    Array {
        field: FieldMeta<'a>,
        count: u16,
        index: u16,
        children_end: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Running,
    Done,
    Failed,
}

/// The streaming walk; an [`Iterator`] of [`Item`]s. When it returns `None`,
/// [`Enumerator::error`] tells whether it finished or stopped early.
#[derive(Debug, Clone)]
pub struct Enumerator<'a> {
    meta: &'a [u8],
    payload: &'a [u8],
    endian: Endian,
    name: &'a [u8],
    pos: usize,
    stack: [Entry<'a>; STACK],
    len: usize,
    bodies: usize,
    fields: usize,
    seen_until: usize,
    budget: usize,
    state: State,
    current: Option<&'a [u8]>,
    error: Option<DecodeError<'a>>,
}

// The walk's counters and places move by one or by what was just read: each is bounded by
// the stack (STACK), MAX_STRUCT_DEPTH, MAX_FIELDS, the budget or the payload's length,
// checked where it moves; the saturating forms leave the bounds to those checks.
impl<'a> Enumerator<'a> {
    /// A walk over `payload` as `metadata` (the metadata block's data) describes it;
    /// `endian` from the header. Fails when the event name has no NUL.
    pub fn new(metadata: &'a [u8], payload: &'a [u8], endian: Endian) -> Result<Self, MetaError> {
        let name_len = memchr::memchr(0, metadata).ok_or(MetaError::Truncated { offset: 0 })?;
        // The NUL is inside the metadata: the sum fits.
        let first = name_len.saturating_add(1);
        Ok(Enumerator {
            meta: metadata,
            payload,
            endian,
            name: &metadata[..name_len],
            pos: 0,
            stack: [Entry::Body {
                next: first,
                remaining: u32::MAX,
            }; STACK],
            len: 1,
            bodies: 1,
            fields: 0,
            seen_until: first,
            budget: payload.len().saturating_mul(32).saturating_add(4096),
            state: State::Running,
            current: None,
            error: None,
        })
    }

    /// The event name as stored (may carry `;attr=value` text; see
    /// [`super::metadata::split_event_name`]).
    pub fn event_name(&self) -> &'a [u8] {
        self.name
    }

    /// The byte order of the values.
    pub fn endian(&self) -> Endian {
        self.endian
    }

    /// Why the walk stopped early, once it has.
    pub fn error(&self) -> Option<&DecodeError<'a>> {
        self.error.as_ref()
    }

    /// The payload position: after the last value read (after a successful walk, the
    /// bytes from here on are trailing bytes, e.g. perf's padding).
    pub fn payload_position(&self) -> usize {
        self.pos
    }

    /// The payload.
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }

    fn fail(&mut self, kind: ErrorKind) -> Option<Item<'a>> {
        self.state = State::Failed;
        self.error = Some(DecodeError {
            kind,
            field: self.current,
            payload_pos: self.pos,
        });
        None
    }

    fn push(&mut self, entry: Entry<'a>) -> Result<(), ErrorKind> {
        let slot = self.stack.get_mut(self.len).ok_or(ErrorKind::TooDeep)?;
        *slot = entry;
        self.len = self.len.saturating_add(1);
        Ok(())
    }

    /// Open a struct body (checking the depth) reading records from `next`.
    fn push_body(&mut self, next: usize, remaining: u8) -> Result<(), ErrorKind> {
        if self.bodies > MAX_STRUCT_DEPTH {
            return Err(ErrorKind::TooDeep);
        }
        self.push(Entry::Body {
            next,
            remaining: u32::from(remaining),
        })?;
        self.bodies = self.bodies.saturating_add(1);
        Ok(())
    }

    /// Read the field record at `offset`, counting first visits against [`MAX_FIELDS`].
    fn field_at(&mut self, offset: usize) -> Result<FieldMeta<'a>, ErrorKind> {
        let field = read_field(self.meta, offset, self.endian).map_err(ErrorKind::Metadata)?;
        if offset >= self.seen_until {
            self.seen_until = field.next;
            self.fields = self.fields.saturating_add(1);
            if self.fields > MAX_FIELDS {
                return Err(ErrorKind::TooManyFields);
            }
        }
        Ok(field)
    }

    /// Set the `next` of the body below the top entry (after a struct or array ends).
    fn set_enclosing_next(&mut self, next: usize) {
        if let Some(Entry::Body { next: n, .. }) =
            self.len.checked_sub(1).and_then(|i| self.stack.get_mut(i))
        {
            *n = next;
        }
    }

    /// Skip the child records of a struct array with no elements; returns where they end.
    fn skip_children(&mut self, field: FieldMeta<'a>) -> Result<usize, ErrorKind> {
        let mut remaining = u32::from(field.format_byte);
        let mut pos = field.next;
        while remaining != 0 && pos < self.meta.len() {
            let child = self.field_at(pos)?;
            if child.encoding == Encoding::Struct {
                remaining = remaining.saturating_add(u32::from(child.format_byte));
            }
            pos = child.next;
            remaining = remaining.saturating_sub(1);
        }
        Ok(pos)
    }

    /// Read the value of `field` at the payload position and move past it.
    fn value(&mut self, field: &FieldMeta<'a>) -> Result<&'a [u8], ErrorKind> {
        let (value, used) = read_value(self.payload, self.pos, field.encoding, self.endian)?;
        self.pos = self.pos.saturating_add(used);
        Ok(value)
    }

    fn step(&mut self) -> Result<Option<Item<'a>>, ErrorKind> {
        self.budget = self.budget.checked_sub(1).ok_or(ErrorKind::TooManyItems)?;
        let top = self.len.checked_sub(1);
        let Some(&entry) = top.and_then(|i| self.stack.get(i)) else {
            return Ok(None);
        };
        match entry {
            Entry::Body { next, remaining } => {
                if remaining == 0 || next >= self.meta.len() {
                    // The body ends: a struct (or the event).
                    self.len = self.len.saturating_sub(1);
                    self.bodies = self.bodies.saturating_sub(1);
                    let Some(owner) = self.len.checked_sub(1).and_then(|i| self.stack.get_mut(i))
                    else {
                        return Ok(None);
                    };
                    return Ok(Some(match owner {
                        Entry::Array {
                            field,
                            index,
                            children_end,
                            ..
                        } => {
                            *children_end = next;
                            *index = index.saturating_add(1);
                            Item::StructEnd {
                                field: *field,
                                element: true,
                            }
                        }
                        Entry::Struct { field } => {
                            let field = *field;
                            self.len = self.len.saturating_sub(1);
                            self.set_enclosing_next(next);
                            Item::StructEnd {
                                field,
                                element: false,
                            }
                        }
                        Entry::Body { .. } => return Ok(None),
                    }));
                }
                self.current = None;
                let field = self.field_at(next)?;
                self.current = Some(field.name);
                if let Some(Entry::Body { next, remaining }) =
                    top.and_then(|i| self.stack.get_mut(i))
                {
                    *next = field.next;
                    *remaining = remaining.saturating_sub(1);
                }
                let count = match field.array {
                    ArrayKind::Scalar if field.encoding == Encoding::Struct => {
                        self.push(Entry::Struct { field })?;
                        self.push_body(field.next, field.format_byte)?;
                        return Ok(Some(Item::StructBegin {
                            field,
                            element: false,
                        }));
                    }
                    ArrayKind::Scalar => {
                        let bytes = self.value(&field)?;
                        return Ok(Some(Item::Value {
                            field,
                            bytes,
                            element: false,
                        }));
                    }
                    ArrayKind::Constant(n) => n,
                    ArrayKind::Variable => {
                        let rest = self.payload.get(self.pos..).unwrap_or_default();
                        let n =
                            read_u16(rest, 0, self.endian).ok_or(ErrorKind::PayloadTruncated {
                                need: 2,
                                have: rest.len(),
                            })?;
                        self.pos = self.pos.saturating_add(2);
                        n
                    }
                };
                if let Some(size) = field.encoding.fixed_size() {
                    let need = usize::from(count).saturating_mul(size);
                    let have = self.payload.len().saturating_sub(self.pos);
                    if need > have {
                        return Err(ErrorKind::PayloadTruncated { need, have });
                    }
                }
                self.push(Entry::Array {
                    field,
                    count,
                    index: 0,
                    children_end: field.next,
                })?;
                Ok(Some(Item::ArrayBegin { field, count }))
            }
            Entry::Array {
                field,
                count,
                index,
                children_end,
            } => {
                // The array's key is on the consumer's path already.
                self.current = None;
                if index >= count {
                    self.len = self.len.saturating_sub(1);
                    let end = if field.encoding != Encoding::Struct {
                        field.next
                    } else if count == 0 {
                        self.skip_children(field)?
                    } else {
                        children_end
                    };
                    self.set_enclosing_next(end);
                    return Ok(Some(Item::ArrayEnd { field }));
                }
                if field.encoding == Encoding::Struct {
                    self.push_body(field.next, field.format_byte)?;
                    return Ok(Some(Item::StructBegin {
                        field,
                        element: true,
                    }));
                }
                let bytes = self.value(&field)?;
                if let Some(Entry::Array { index, .. }) = top.and_then(|i| self.stack.get_mut(i)) {
                    *index = index.saturating_add(1);
                }
                Ok(Some(Item::Value {
                    field,
                    bytes,
                    element: true,
                }))
            }
            // A struct entry always has its body above it.
            Entry::Struct { .. } => Ok(None),
        }
    }
}

/// The value of a field of `encoding` at `payload[pos..]`: (its bytes, as
/// [`Item::Value`] gives them; the payload bytes it takes). Shared by the [`Enumerator`]
/// and the compiled plans ([`super::plan`]).
#[inline]
pub(crate) fn read_value(
    payload: &[u8],
    pos: usize,
    encoding: Encoding,
    endian: Endian,
) -> Result<(&[u8], usize), ErrorKind> {
    let rest = payload.get(pos..).unwrap_or_default();
    let truncated = |need: usize| ErrorKind::PayloadTruncated {
        need,
        have: rest.len(),
    };
    Ok(match encoding {
        Encoding::Value8
        | Encoding::Value16
        | Encoding::Value32
        | Encoding::Value64
        | Encoding::Value128 => {
            let size = encoding.fixed_size().unwrap_or(1);
            (rest.get(..size).ok_or(truncated(size))?, size)
        }
        Encoding::ZStringChar8 | Encoding::ZStringChar16 | Encoding::ZStringChar32 => {
            zstring(rest, encoding.char_size().unwrap_or(1))
        }
        Encoding::StringLength16Char8
        | Encoding::StringLength16Char16
        | Encoding::StringLength16Char32
        | Encoding::BinaryLength16Char8 => {
            let unit = encoding.char_size().unwrap_or(1);
            let count = read_u16(rest, 0, endian).ok_or(truncated(2))?;
            // A u16 count of units of at most 4 bytes, plus 2: fits.
            #[allow(clippy::arithmetic_side_effects)]
            let end = 2 + usize::from(count) * unit;
            (rest.get(2..end).ok_or(truncated(end))?, end)
        }
        Encoding::Struct => (&[][..], 0),
    })
}

/// A zero-terminated string of `unit`-byte code units at the start of `rest`: (the
/// units before the terminator, bytes used). Without a terminator: all of `rest`.
pub(crate) fn zstring(rest: &[u8], unit: usize) -> (&[u8], usize) {
    let found = if unit == 1 {
        memchr::memchr(0, rest)
    } else {
        rest.chunks_exact(unit)
            .position(|c| c.iter().all(|&b| b == 0))
            .map(|i| i.saturating_mul(unit))
    };
    match found {
        // The terminator is inside `rest`: end + unit <= its length.
        Some(end) => (&rest[..end], end.saturating_add(unit)),
        None => (rest, rest.len()),
    }
}

impl<'a> Iterator for Enumerator<'a> {
    type Item = Item<'a>;

    fn next(&mut self) -> Option<Item<'a>> {
        if self.state != State::Running {
            return None;
        }
        match self.step() {
            Ok(Some(item)) => Some(item),
            Ok(None) => {
                self.state = State::Done;
                None
            }
            Err(kind) => self.fail(kind),
        }
    }
}
