//! Why a field could not be decoded: [`DecodeError`], numbers only, its message built by
//! [`fmt::Display`] without allocating. A leaf: the decoder and the location rule both
//! return it.

use std::fmt;

use crate::schema::LocKind;

/// Why a field could not be decoded. Holds only numbers; the message is built by
/// [`fmt::Display`] without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// The field's bytes lie (partly) past the end of the record.
    Truncated {
        /// Field offset from the schema.
        offset: u32,
        /// Field size from the schema.
        size: u32,
        /// Length of the record.
        record_len: usize,
    },
    /// A dynamic location points (partly) outside the record.
    LocationOutOfBounds {
        /// `__data_loc` or `__rel_loc`.
        loc: LocKind,
        /// Absolute start offset of the data in the record (`usize::MAX` if it overflowed).
        start: usize,
        /// Length of the data.
        len: usize,
        /// Length of the record.
        record_len: usize,
    },
    /// A dynamic location field whose size is neither 4 nor 2.
    LocationSize {
        /// `__data_loc` or `__rel_loc`.
        loc: LocKind,
        /// The field's size.
        size: usize,
    },
    /// Array data whose length is not a multiple of its element size.
    NotMultiple {
        /// Data length in bytes.
        len: usize,
        /// Element size in bytes.
        elem_size: u8,
    },
    /// An integer (or integer element) width other than 1, 2, 4 or 8.
    IntegerWidth {
        /// The width the schema gives.
        width: u8,
    },
    /// An integer field whose `size:` differs from its integer width.
    IntegerSize {
        /// The field's size.
        size: u32,
        /// The integer width from the field kind.
        width: u8,
    },
}

/// The C keyword of a location kind, as in format files.
fn loc_keyword(loc: LocKind) -> &'static str {
    match loc {
        LocKind::DataLoc => "__data_loc",
        LocKind::RelLoc => "__rel_loc",
    }
}

const STALE_FORMAT: &str = "(truncated or corrupt record, or the format does not match the producer: re-read the format file)";

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DecodeError::Truncated {
                offset,
                size,
                record_len,
            } => write!(
                f,
                "record too short: field at offset {offset} size {size} > record length {record_len} {STALE_FORMAT}"
            ),
            DecodeError::LocationOutOfBounds {
                loc,
                start,
                len,
                record_len,
            } => write!(
                f,
                "{} out of bounds: offset {start} + length {len} > record length {record_len}",
                loc_keyword(loc)
            ),
            DecodeError::LocationSize { loc, size } => write!(
                f,
                "{} field of size {size}: expected 4 (or 2, legacy offset-only) {STALE_FORMAT}",
                loc_keyword(loc)
            ),
            DecodeError::NotMultiple { len, elem_size } => write!(
                f,
                "array data of {len} bytes is not a multiple of the element size {elem_size} {STALE_FORMAT}"
            ),
            DecodeError::IntegerWidth { width } => {
                write!(
                    f,
                    "integer width {width} is not 1, 2, 4 or 8 bytes: the schema is wrong"
                )
            }
            DecodeError::IntegerSize { size, width } => write!(
                f,
                "integer field of size {size} does not match its width {width}: the schema is wrong"
            ),
        }
    }
}

impl std::error::Error for DecodeError {}
