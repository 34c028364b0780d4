//! Dynamic locations: where the data of a `__data_loc` / `__rel_loc` field lives.
//!
//! The field itself holds a `u32`: `length = value >> 16`, `offset = value & 0xffff`.
//! - `__data_loc`: the offset counts from the start of the record (the trace entry,
//!   common fields included);
//! - `__rel_loc`: the offset counts from the END of the location field
//!   (`field offset + field size`);
//! - legacy `__data_loc` fields of size 2 hold only an offset (from the record start); the
//!   data runs to the end of the record.
//!
//! [`resolve`] is the one place that applies these rules and bounds-checks the result
//! against the record. The kernel checks `start + length <= entry end` when a user_events
//! producer writes, but records read from perf.data files or other kernels are not
//! trusted, so every range is checked here with checked arithmetic.
//!
//! A range that starts inside the fixed part of the record (even inside the location field
//! itself) is accepted: it is in bounds, the kernel does not forbid it, and decoding
//! those bytes is harmless.

use std::ops::Range;

use super::error::DecodeError;
use crate::schema::LocKind;

/// The byte range of the data a dynamic location field points at.
///
/// - `field_offset`, `field_size`: where the location field sits in the record (from the
///   schema); `field_size` must be 4, or 2 for the legacy offset-only `__data_loc` form
///   (a size-2 `__rel_loc` is read the same way, offset-only, counted from its end);
/// - `raw_value`: the location field's value, already read with the record's endianness
///   (for size 2, the `u16` widened);
/// - `record_len`: length of the whole record in bytes.
///
/// An empty range (length 0) is valid, also at the very end of the record.
///
/// ```
/// use uevrec_parsers::resolve_location as resolve;
/// use uevrec_parsers::LocKind;
/// // 5 bytes at offset 12 of a 20-byte record.
/// assert_eq!(resolve(LocKind::DataLoc, 8, 4, (5 << 16) | 12, 20), Ok(12..17));
/// // __rel_loc: offset 2 from the end of the field at 8..12 → starts at 14.
/// assert_eq!(resolve(LocKind::RelLoc, 8, 4, (5 << 16) | 2, 20), Ok(14..19));
/// assert!(resolve(LocKind::RelLoc, 8, 4, (5 << 16) | 4, 20).is_err());
/// ```
pub fn resolve(
    loc: LocKind,
    field_offset: usize,
    field_size: usize,
    raw_value: u32,
    record_len: usize,
) -> Result<Range<usize>, DecodeError> {
    let (rel_offset, len) = match field_size {
        4 => (
            (raw_value & 0xffff) as usize,
            Some((raw_value >> 16) as usize),
        ),
        2 => ((raw_value & 0xffff) as usize, None),
        _ => {
            return Err(DecodeError::LocationSize {
                loc,
                size: field_size,
            });
        }
    };
    let base = match loc {
        LocKind::DataLoc => Some(0),
        LocKind::RelLoc => field_offset.checked_add(field_size),
    };
    let start = base.and_then(|b| b.checked_add(rel_offset));
    let out_of_bounds = |start: Option<usize>, len: usize| DecodeError::LocationOutOfBounds {
        loc,
        start: start.unwrap_or(usize::MAX),
        len,
        record_len,
    };
    let Some(start) = start else {
        return Err(out_of_bounds(None, len.unwrap_or(0)));
    };
    // Legacy offset-only form: the data runs to the end of the record.
    let len = match len {
        Some(len) => len,
        None => record_len
            .checked_sub(start)
            .ok_or(out_of_bounds(Some(start), 0))?,
    };
    match start.checked_add(len) {
        Some(end) if end <= record_len => Ok(start..end),
        _ => Err(out_of_bounds(Some(start), len)),
    }
}

// Tests compute with the values they pick.
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    fn loc(len: u32, off: u32) -> u32 {
        (len << 16) | off
    }

    #[test]
    fn data_loc_counts_from_record_start() {
        assert_eq!(resolve(LocKind::DataLoc, 8, 4, loc(4, 12), 16), Ok(12..16));
        assert_eq!(resolve(LocKind::DataLoc, 20, 4, loc(3, 0), 16), Ok(0..3));
    }

    #[test]
    fn rel_loc_counts_from_field_end() {
        // Field at 8..12; offset 0 means "right after the field".
        assert_eq!(resolve(LocKind::RelLoc, 8, 4, loc(4, 0), 16), Ok(12..16));
        assert_eq!(resolve(LocKind::RelLoc, 8, 4, loc(2, 2), 16), Ok(14..16));
    }

    #[test]
    fn exactly_at_end_is_fine_one_past_is_not() {
        assert_eq!(resolve(LocKind::DataLoc, 8, 4, loc(4, 12), 16), Ok(12..16));
        assert_eq!(
            resolve(LocKind::DataLoc, 8, 4, loc(5, 12), 16),
            Err(DecodeError::LocationOutOfBounds {
                loc: LocKind::DataLoc,
                start: 12,
                len: 5,
                record_len: 16
            })
        );
        assert_eq!(
            resolve(LocKind::DataLoc, 8, 4, loc(4, 13), 16),
            Err(DecodeError::LocationOutOfBounds {
                loc: LocKind::DataLoc,
                start: 13,
                len: 4,
                record_len: 16
            })
        );
        assert_eq!(resolve(LocKind::RelLoc, 8, 4, loc(4, 0), 16), Ok(12..16));
        assert_eq!(
            resolve(LocKind::RelLoc, 8, 4, loc(4, 1), 16),
            Err(DecodeError::LocationOutOfBounds {
                loc: LocKind::RelLoc,
                start: 13,
                len: 4,
                record_len: 16
            })
        );
        assert_eq!(
            resolve(LocKind::RelLoc, 8, 4, loc(5, 0), 16),
            Err(DecodeError::LocationOutOfBounds {
                loc: LocKind::RelLoc,
                start: 12,
                len: 5,
                record_len: 16
            })
        );
    }

    #[test]
    fn zero_length() {
        assert_eq!(resolve(LocKind::DataLoc, 8, 4, loc(0, 16), 16), Ok(16..16));
        assert_eq!(resolve(LocKind::RelLoc, 8, 4, loc(0, 4), 16), Ok(16..16));
        assert!(resolve(LocKind::DataLoc, 8, 4, loc(0, 17), 16).is_err());
        assert!(resolve(LocKind::RelLoc, 8, 4, loc(0, 5), 16).is_err());
    }

    #[test]
    fn offset_inside_the_field_itself_is_in_bounds() {
        // A __data_loc pointing at its own 4 bytes: odd but in bounds, so it resolves.
        assert_eq!(resolve(LocKind::DataLoc, 8, 4, loc(4, 8), 16), Ok(8..12));
        assert_eq!(resolve(LocKind::DataLoc, 8, 4, loc(2, 10), 16), Ok(10..12));
    }

    #[test]
    fn maximal_values_do_not_overflow() {
        let r = resolve(LocKind::RelLoc, usize::MAX - 2, 4, u32::MAX, 16);
        assert!(matches!(r, Err(DecodeError::LocationOutOfBounds { .. })));
        let r = resolve(LocKind::DataLoc, 8, 4, u32::MAX, usize::MAX);
        assert_eq!(r, Ok(0xffff..0xffff + 0xffff));
        let r = resolve(LocKind::DataLoc, 8, 4, u32::MAX, 100);
        assert!(matches!(
            r,
            Err(DecodeError::LocationOutOfBounds {
                start: 0xffff,
                len: 0xffff,
                ..
            })
        ));
    }

    #[test]
    fn legacy_offset_only_runs_to_record_end() {
        assert_eq!(resolve(LocKind::DataLoc, 8, 2, 12, 20), Ok(12..20));
        assert_eq!(resolve(LocKind::DataLoc, 8, 2, 20, 20), Ok(20..20));
        assert_eq!(
            resolve(LocKind::DataLoc, 8, 2, 21, 20),
            Err(DecodeError::LocationOutOfBounds {
                loc: LocKind::DataLoc,
                start: 21,
                len: 0,
                record_len: 20
            })
        );
        assert_eq!(resolve(LocKind::RelLoc, 8, 2, 2, 20), Ok(12..20));
    }

    #[test]
    fn bad_location_sizes() {
        for size in [0, 1, 3, 8] {
            assert_eq!(
                resolve(LocKind::DataLoc, 8, size, 0, 20),
                Err(DecodeError::LocationSize {
                    loc: LocKind::DataLoc,
                    size
                })
            );
        }
    }
}
