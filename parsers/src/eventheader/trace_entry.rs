//! EventHeader trace entries from their parts, for data that does not come from the
//! kernel (tests, benchmarks, captures of payloads): the inverse of [`super::parse_event`]
//! for the common case, as [`super::tracepoint_format`] describes the tracepoint.

/// The raw trace entry of a little-endian EventHeader event of `level` whose metadata
/// block is `metadata` (the event name, NUL, the field records) and whose payload is
/// `payload`: 8 zero bytes of common fields, the header (flags: pointer-64 | little
/// endian | extension; version 0, id 0, tag 0, opcode 0, `level`), the metadata
/// extension block (kind 1, no block after it), then the payload.
pub fn trace_entry(level: u8, metadata: &[u8], payload: &[u8]) -> Vec<u8> {
    // A capacity hint: saturated, the vector grows as needed.
    let capacity = metadata
        .len()
        .saturating_add(payload.len())
        .saturating_add(20);
    let mut raw = Vec::with_capacity(capacity);
    raw.extend_from_slice(&[0; 8]);
    raw.extend_from_slice(&[0x07, 0, 0, 0, 0, 0, 0, level]);
    let len = u16::try_from(metadata.len()).unwrap_or(u16::MAX);
    raw.extend_from_slice(&len.to_le_bytes());
    raw.extend_from_slice(&1u16.to_le_bytes());
    raw.extend_from_slice(metadata);
    raw.extend_from_slice(payload);
    raw
}

// Tests compute with the values they pick.
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_back() {
        let raw = trace_entry(4, b"Ev\0f\0\x04", &7u32.to_le_bytes());
        let parts = super::super::parse_event(&raw[8..]).unwrap();
        assert_eq!(parts.header.level, 4);
        assert_eq!(parts.metadata, Some(&b"Ev\0f\0\x04"[..]));
        assert_eq!(parts.payload, 7u32.to_le_bytes());
    }
}
