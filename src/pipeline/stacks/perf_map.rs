//! JIT code named by its runtime in `/tmp/perf-PID.map` (`START SIZE name` a line, hex;
//! .NET with `DOTNET_PerfMapEnabled=1`, Node with `--perf-basic-prof`, Java agents).
//! Read here, not through blazesym: blazesym reads perf maps only for a live process
//! (`Source::Process`), and a JIT's records are often named after it exited; the file
//! stays in /tmp.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

/// Processes whose perf map is kept at most (all forgotten at once past it).
pub const MAX_MAPS: usize = 256;
/// Entries read per perf map at most.
pub const MAX_ENTRIES: usize = 1 << 18;

/// One named range of JIT code.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    start: u64,
    end: u64,
    name: Arc<str>,
}

/// A process's perf map as last read.
#[derive(Debug, Default)]
struct PerfMap {
    /// Sorted by `start`.
    entries: Vec<Entry>,
    modified: Option<SystemTime>,
}

/// The perf maps of the processes seen.
#[derive(Debug, Default)]
pub struct PerfMaps {
    maps: HashMap<u32, PerfMap>,
}

impl PerfMaps {
    /// The name of the JIT code at `address` in process `pid` and the bytes into it (the
    /// file is read again when it changed since, as a JIT appends to it).
    pub fn find(&mut self, pid: u32, address: u64) -> Option<(Arc<str>, u64)> {
        let path = format!("/tmp/perf-{pid}.map");
        let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
        let stale = self
            .maps
            .get(&pid)
            .is_none_or(|m| modified.is_some() && m.modified != modified);
        if stale {
            if self.maps.len() >= MAX_MAPS {
                self.maps.clear();
            }
            let entries = std::fs::read_to_string(&path)
                .map(|t| parse(&t))
                .unwrap_or_default();
            self.maps.insert(pid, PerfMap { entries, modified });
        }
        let map = self.maps.get(&pid)?;
        let at = map.entries.partition_point(|e| e.start <= address);
        let e = map.entries.get(at.checked_sub(1)?)?;
        (address < e.end).then(|| (e.name.clone(), address - e.start))
    }
}

/// The entries of a perf map's text, sorted; malformed lines are left out.
fn parse(text: &str) -> Vec<Entry> {
    let mut entries: Vec<Entry> = text
        .lines()
        .filter_map(|line| {
            let mut parts = line.trim().splitn(3, ' ');
            let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
            let start = hex(parts.next()?)?;
            let size = hex(parts.next()?)?;
            let name = parts.next()?.trim();
            (!name.is_empty()).then(|| Entry {
                start,
                end: start.saturating_add(size),
                name: name.into(),
            })
        })
        .take(MAX_ENTRIES)
        .collect();
    entries.sort_by_key(|e| e.start);
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_finds() {
        let e = parse("1000 20 jit_stub\nzz 1 bad\n2000 0x10 [tier0] Foo::Bar(int)\n3000 10\n");
        assert_eq!(e.len(), 2);
        assert_eq!(&*e[1].name, "[tier0] Foo::Bar(int)");
        let mut m = PerfMaps::default();
        m.maps.insert(
            7,
            PerfMap {
                entries: e,
                modified: None,
            },
        );
        assert_eq!(
            m.find(7, 0x1010).map(|(n, o)| (n.to_string(), o)),
            Some(("jit_stub".into(), 0x10))
        );
        assert_eq!(m.find(7, 0x1020), None);
        assert_eq!(m.find(7, 0x0fff), None);
    }
}
