//! The thread ids of a process, from `/proc` (for the pid and self-exclusion filters).

use std::fs;

/// The thread ids of process `proc` (`self` or a pid) from `/proc/<proc>/task`, sorted.
pub(super) fn threads(proc: &str) -> Option<Vec<u32>> {
    let rd = fs::read_dir(format!("/proc/{proc}/task")).ok()?;
    let mut v: Vec<u32> = rd
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    v.sort_unstable();
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_this_thread() {
        let own = threads("self").unwrap();
        assert!(own.contains(&std::process::id()), "{own:?}");
        assert!(own.is_sorted());
        assert_eq!(threads("no-such-process"), None);
    }
}
