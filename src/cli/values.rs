//! Parsers for option values: sizes (`64k`, `10M`), ring sizes in pages or bytes (like
//! perf's `-m`), durations (`10s`, `1m`, `250ms`), octal file modes.

use std::time::Duration;

use crate::capture::perf::RingPages;

/// A byte size: a number with an optional `k`/`M`/`G`/`T` suffix (binary units, 1k = 1024;
/// `kB`, `KiB`, `MiB` … are accepted too).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let cfg = parse_size::Config::new().with_binary();
    cfg.parse_size(s.trim())
        .map_err(|e| format!("{e} (expected a size such as 4096, 64k, 10M, 1G)"))
}

/// A positive byte size (for `--rotate-size`).
pub fn parse_positive_size(s: &str) -> Result<u64, String> {
    match parse_size(s)? {
        0 => Err("the size must be greater than 0".into()),
        n => Ok(n),
    }
}

/// Ring size per CPU, perf `-m` style: a plain number is pages, a number with a unit is
/// bytes; both are rounded up to a power of two pages.
pub fn parse_buffer_pages(s: &str) -> Result<RingPages, String> {
    pages_for(s, crate::capture::perf::page_size() as u64)
}

fn pages_for(s: &str, page: u64) -> Result<RingPages, String> {
    let s = s.trim();
    let pages = if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse::<u64>().map_err(|e| format!("{e}"))?
    } else {
        parse_size(s)?.div_ceil(page)
    };
    RingPages::round_up(pages)
}

/// A duration such as `10s`, `1m`, `1h30m`, `250ms` (a bare number means seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(s)
        .map_err(|e| format!("{e} (expected a duration such as 10s, 1m, 250ms)"))
}

/// A positive duration.
pub fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        Duration::ZERO => Err("the duration must be greater than 0".into()),
        d => Ok(d),
    }
}

/// Octal permission bits such as `640` or `0o600`.
pub fn parse_mode(s: &str) -> Result<u32, String> {
    let digits = s.trim().trim_start_matches("0o");
    match u32::from_str_radix(digits, 8) {
        Ok(m) if m <= 0o7777 => Ok(m),
        _ => Err(format!("{s:?} is not an octal file mode (e.g. 640, 600)")),
    }
}

/// `--where EXPR` / `--where SYSTEM:EVENT=EXPR`: the CEL condition compiled, or what is
/// wrong with the text under a caret (clap then exits 2).
pub fn parse_where(s: &str) -> Result<crate::pipeline::filter::WhereRule, String> {
    s.parse()
        .map_err(|e: crate::pipeline::filter::WhereError| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64k"), Ok(65536));
        assert_eq!(parse_size("10M"), Ok(10 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert!(parse_size("ten").unwrap_err().contains("expected a size"));
        assert!(parse_positive_size("0").is_err());
    }

    #[test]
    fn buffer_pages() {
        let pages = |s| pages_for(s, 4096).map(RingPages::get);
        assert_eq!(pages("16"), Ok(16));
        assert_eq!(pages("17"), Ok(32));
        assert_eq!(pages("1M"), Ok(256));
        assert_eq!(pages("100k"), Ok(32));
        assert_eq!(pages("65536"), Ok(65536));
        assert!(pages("0").is_err());
        // The one limit: what the CLI accepts, the session runs.
        assert!(pages("65537").unwrap_err().contains("too large"));
        assert!(pages("131072").unwrap_err().contains("at most 65536 pages"));
        assert!(pages("1T").unwrap_err().contains("too large"));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_positive_duration("0s").is_err());
    }

    #[test]
    fn modes() {
        assert_eq!(parse_mode("640"), Ok(0o640));
        assert_eq!(parse_mode("0o600"), Ok(0o600));
        assert!(parse_mode("9").is_err());
        assert!(parse_mode("77777").is_err());
    }
}
