//! `--stack-ids`: each distinct stack written once, as a line of its own
//! (`{"time":…,"uevrec":"stack","id":N,"stack":[…]}`, the time of the first record that
//! has it, as uevrec's other lines), and the records naming it (`"stack_id":N`),
//! so a record's line carries a number instead of ≈ 1 KB of frames (docs/stacks.md).
//!
//! An id tells who defined it: the formatter worker and the place in that worker's
//! [`super::cache::StackCache`] (low bits), above them how many stack lines that worker
//! wrote before (so no two stack lines of a run share an id). A worker names a place's
//! id only while the place holds that stack, and fills the place again only after the
//! stack left it: the latest line of each place is all that a new output file needs
//! ([`place_of`]; the writer keeps them, `crate::outputs::sink::stack_lines`).

/// Bits of an id that hold the place in the worker's cache: its
/// [`super::cache::MAX_STACKS`] places and [`ONE_OFF`].
const PLACE_BITS: u32 = 13;
/// Bits above them that hold the worker (`--threads`: 256 at most).
const WORKER_BITS: u32 = 8;
/// The place of a stack that is not kept (JIT code, a look-up put off): its line is
/// written again before each record that has it.
pub const ONE_OFF: u32 = (1 << PLACE_BITS) - 1;

/// What follows the `time` of a stack line, up to its id.
pub const KEY: &[u8] = b",\"uevrec\":\"stack\",\"id\":";

/// How every JSON line starts (its `time` key).
const TIME: &[u8] = b"{\"time\":";

/// The id of the `serial`-th stack line of formatter worker `worker`, for the stack at
/// `place` of its cache.
pub fn stack_id(serial: u64, worker: u32, place: u32) -> u64 {
    debug_assert!(place <= ONE_OFF && worker < 1 << WORKER_BITS);
    (serial << (PLACE_BITS + WORKER_BITS))
        | (u64::from(worker & ((1 << WORKER_BITS) - 1)) << PLACE_BITS)
        | u64::from(place & ONE_OFF)
}

/// The worker and place of `id`: a later stack line of the same place replaces it.
pub fn place_of(id: u64) -> u32 {
    (id & ((1 << (PLACE_BITS + WORKER_BITS)) - 1)) as u32
}

/// The `{"time":VALUE` a JSON line starts with (`line` from its `{`), or `None`.
pub fn time_of(line: &[u8]) -> Option<&[u8]> {
    // The value (a quoted RFC 3339 time, a number or null) holds no comma.
    let end = memchr::memchr(b',', line)?;
    line.starts_with(TIME).then(|| &line[..end])
}

/// Append the line defining `id` as the stack whose JSON array is `frames`, with `time`
/// (`{"time":VALUE`, [`time_of`] a record's line; `None`: null).
pub fn write_line(out: &mut Vec<u8>, time: Option<&[u8]>, id: u64, frames: &[u8]) {
    match time {
        Some(time) => out.extend_from_slice(time),
        None => {
            out.extend_from_slice(TIME);
            out.extend_from_slice(b"null");
        }
    }
    out.extend_from_slice(KEY);
    write_u64(out, id);
    out.extend_from_slice(b",\"stack\":");
    out.extend_from_slice(frames);
    out.extend_from_slice(b"}\n");
}

/// The length of a stack line of `frames` at most (the longest id and time).
pub fn line_len(frames: &[u8]) -> usize {
    TIME.len() + 40 + KEY.len() + 20 + b",\"stack\":".len() + frames.len() + 2
}

/// Append a record's `,"stack_id":N`.
pub fn write_key(out: &mut Vec<u8>, id: u64) {
    out.extend_from_slice(b",\"stack_id\":");
    write_u64(out, id);
}

/// The id of the stack line `line` (one line, from its `{`), or `None`: not one.
pub fn line_id(line: &[u8]) -> Option<u64> {
    let time = time_of(line)?;
    let digits = line[time.len()..].strip_prefix(KEY)?;
    let end = digits.iter().position(|b| !b.is_ascii_digit())?;
    std::str::from_utf8(&digits[..end]).ok()?.parse().ok()
}

fn write_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_distinct_and_tell_their_place() {
        let mut seen = std::collections::HashSet::new();
        for serial in [0, 1, 2, 1 << 30] {
            for worker in [0, 1, 255] {
                for place in [0, 1, 4095, ONE_OFF] {
                    let id = stack_id(serial, worker, place);
                    assert!(seen.insert(id), "{serial} {worker} {place}");
                    assert_eq!(place_of(id), (worker << PLACE_BITS) | place);
                    // JSON readers that hold numbers as doubles read it exactly.
                    assert!(serial > 1 << 31 || id < 1 << 53);
                }
            }
        }
        // The same place of another worker is another place.
        assert_ne!(place_of(stack_id(0, 0, 3)), place_of(stack_id(0, 1, 3)));
        assert_eq!(place_of(stack_id(0, 1, 3)), place_of(stack_id(9, 1, 3)));
    }

    #[test]
    fn lines_read_back() {
        let record = b"{\"time\":\"2026-12-06T12:00:00.000000001Z\",\"system\":\"s\"}";
        let time = time_of(record);
        assert_eq!(
            time,
            Some(&b"{\"time\":\"2026-12-06T12:00:00.000000001Z\""[..])
        );
        let mut out = Vec::new();
        write_line(&mut out, time, 2_097_152 + 5, b"[{\"addr\":\"0x1\"}]");
        let want = "{\"time\":\"2026-12-06T12:00:00.000000001Z\",\"uevrec\":\"stack\",\
                    \"id\":2097157,\"stack\":[{\"addr\":\"0x1\"}]}\n";
        assert_eq!(String::from_utf8(out.clone()).unwrap(), want);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["id"], 2_097_157);
        assert_eq!(line_id(&out), Some(2_097_157));
        let mut untimed = Vec::new();
        write_line(&mut untimed, None, 3, b"[]");
        let want = "{\"time\":null,\"uevrec\":\"stack\",\"id\":3,\"stack\":[]}\n";
        assert_eq!(String::from_utf8(untimed.clone()).unwrap(), want);
        assert_eq!(line_id(&untimed), Some(3));
        assert_eq!(
            line_id(b"{\"time\":null,\"uevrec\":\"lost\",\"id\":1}"),
            None
        );
        assert_eq!(
            line_id(b"{\"time\":null,\"uevrec\":\"stack\",\"id\":}"),
            None
        );
        assert_eq!(line_id(b"{\"uevrec\":\"stack\",\"id\":1}"), None, "no time");
        assert_eq!(time_of(b"{\"x\":1,\"time\":2}"), None);
        let mut key = b"{\"x\":1".to_vec();
        write_key(&mut key, 0);
        assert_eq!(key, b"{\"x\":1,\"stack_id\":0");
        let mut n = Vec::new();
        write_u64(&mut n, u64::MAX);
        assert_eq!(n, u64::MAX.to_string().as_bytes());
    }
}
