//! Shared checks and input shapes for the uevrec-parsers fuzz targets.
//!
//! A failed check panics: libFuzzer reports that as a crash and saves the input.

pub mod json;
pub mod schema_input;
pub mod totals;

use uevrec_parsers::{Element, EventFormat, FieldKind};

/// Panics unless `format` (as returned by a successful parse) is self-consistent: a
/// non-empty name without ASCII white space around it,
/// scalar integers are 1/2/4/8 bytes and as wide as their field, fixed arrays fill their
/// field exactly (`count * element size == size`, `count >= 1`), element widths are
/// 1/2/4/8, and the schema serialises to JSON.
pub fn check_format(format: &EventFormat) {
    assert!(!format.name.is_empty(), "accepted an empty event name");
    assert_eq!(
        format.name,
        format.name.trim_matches(|c: char| c.is_ascii_whitespace()),
        "event name keeps the white space around it"
    );
    for field in format.common_fields.iter().chain(&format.fields) {
        match &field.kind {
            FieldKind::Integer { size, .. } => {
                assert!(
                    matches!(size, 1 | 2 | 4 | 8),
                    "integer width {size}: {field:?}"
                );
                assert_eq!(
                    u32::from(*size),
                    field.size,
                    "integer width != size: {field:?}"
                );
            }
            FieldKind::FixedArray { elem, count } => {
                check_element(*elem);
                assert!(*count >= 1, "empty fixed array: {field:?}");
                assert_eq!(
                    u64::from(*count) * u64::from(elem.size()),
                    u64::from(field.size),
                    "fixed array does not fill its field: {field:?}"
                );
            }
            FieldKind::Dynamic { elem, .. } | FieldKind::RestOfRecord { elem } => {
                check_element(*elem)
            }
            FieldKind::Struct { .. } | FieldKind::Unknown => {}
        }
    }
    serde_json::to_string(format).expect("an EventFormat always serialises");
}

fn check_element(elem: Element) {
    if let Element::Integer { size, .. } = elem {
        assert!(matches!(size, 1 | 2 | 4 | 8), "element width {size}");
    }
}
