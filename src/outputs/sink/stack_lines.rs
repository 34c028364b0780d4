//! `--stack-ids` in an output file that rotates or is reopened: each new file starts with
//! the stack lines its records may name, so every file stands alone. A record names a
//! stack by the id of a line a formatter worker wrote before it
//! ([`crate::pipeline::stacks::ids`]); the id tells the place of the stack in that
//! worker's cache, and a worker names only the stack a place holds now: so the latest
//! line of each place, kept here as the lines pass, is all a new file needs. Bounded as
//! the workers' caches are (a line a place; their bytes counted there).

use memchr::memmem::Finder;

use crate::pipeline::stacks::ids;

/// The latest stack line of each place, from the lines written.
#[derive(Debug)]
pub struct StackLines {
    /// A stack line's place ([`ids::place_of`]) → the line, `\n` included.
    by_place: foldhash::HashMap<u32, Box<[u8]>>,
    /// Bytes of the lines kept.
    bytes: usize,
    finder: Finder<'static>,
}

impl Default for StackLines {
    fn default() -> Self {
        StackLines {
            by_place: foldhash::HashMap::default(),
            bytes: 0,
            finder: Finder::new(ids::KEY),
        }
    }
}

impl StackLines {
    /// Keep the stack lines among `lines` (whole lines, as written).
    pub fn pass(&mut self, lines: &[u8]) {
        for at in self.finder.find_iter(lines) {
            // The line's start; it is a stack line when the key follows its time at once
            // (inside a string of a record the quotes would be escaped).
            let start = memchr::memrchr(b'\n', &lines[..at]).map_or(0, |end| end + 1);
            let rest = &lines[start..];
            let line = &rest[..memchr::memchr(b'\n', rest).map_or(rest.len(), |end| end + 1)];
            if ids::time_of(line).is_none_or(|time| start + time.len() != at) {
                continue;
            }
            if let Some(id) = ids::line_id(line) {
                let old = self.by_place.insert(ids::place_of(id), line.into());
                self.bytes = self.bytes + line.len() - old.map_or(0, |o| o.len());
            }
        }
    }

    /// The lines a new file starts with: every stack a record after them may name
    /// (ordered by place, so the same for the same stacks).
    pub fn preamble(&self) -> Vec<u8> {
        let mut places: Vec<_> = self.by_place.iter().collect();
        places.sort_unstable_by_key(|(place, _)| **place);
        let mut out = Vec::with_capacity(self.bytes);
        for (_, line) in places {
            out.extend_from_slice(line);
        }
        out
    }

    /// Bytes of the lines kept.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: u64, frames: &str) -> Vec<u8> {
        let mut out = Vec::new();
        ids::write_line(&mut out, Some(b"{\"time\":null"), id, frames.as_bytes());
        out
    }

    #[test]
    fn keeps_the_latest_line_of_each_place() {
        let mut s = StackLines::default();
        let (a, b) = (ids::stack_id(0, 0, 1), ids::stack_id(1, 0, 2));
        let mut lines = line(a, "[1]");
        lines.extend_from_slice(
            // The key, but not right after the time: not a stack line.
            b"{\"time\":1,\"x\":2,\"uevrec\":\"stack\",\"id\":9,\"stack_id\":0}\n",
        );
        lines.extend_from_slice(&line(b, "[2]"));
        lines.extend_from_slice(b"{\"time\":2,\"stack_id\":1}\n");
        s.pass(&lines);
        assert_eq!(s.preamble(), [line(a, "[1]"), line(b, "[2]")].concat());
        // Place 1 filled again (its stack left the cache): the old line goes.
        let a2 = ids::stack_id(2, 0, 1);
        let c = ids::stack_id(3, 1, 1);
        s.pass(&[line(a2, "[3]"), line(c, "[4]")].concat());
        assert_eq!(
            s.preamble(),
            [line(a2, "[3]"), line(b, "[2]"), line(c, "[4]")].concat()
        );
        assert_eq!(s.bytes(), s.preamble().len());
    }
}
