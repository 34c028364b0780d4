//! The start of every line, `{"time":"…"`: RFC 3339 UTC with 9 fractional digits, the
//! date-time part cached per second.

use std::time::{Duration, SystemTime};

use super::line_buf::LineOut;
use super::numbers::eight_digits;

/// The start of every line, `{"time":"YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ"`, with the
/// date-time part of the last second seen.
///
/// The civil-date conversion is humantime's (`format_rfc3339_seconds`, no allocation; it
/// takes a `SystemTime`, which `UNIX_EPOCH + Duration` builds without a clock read). It
/// runs once per distinct second; per record, [`nine_digits`] writes the nanosecond digits
/// into the cached text, which is then appended as one fixed-size copy.
#[derive(Debug)]
pub(crate) struct TimeCache {
    /// The second `line` is for, if any.
    secs: Option<u64>,
    /// `{"time":"YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ"`.
    line: [u8; TIME_LINE],
}

/// Length of `{"time":"YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ"`.
const TIME_LINE: usize = 40;
/// Where the date-time starts in [`TimeCache::line`] (after `{"time":"`).
const TIME_AT: usize = 9;

impl Default for TimeCache {
    fn default() -> Self {
        let mut line = [b'0'; TIME_LINE];
        line[..TIME_AT].copy_from_slice(b"{\"time\":\"");
        line[TIME_LINE - 2..].copy_from_slice(b"Z\"");
        TimeCache { secs: None, line }
    }
}

impl TimeCache {
    /// Write `{"time":"…Z"` for `time_unix_ns`, or `{"time":null` (always in line: a
    /// call's register saves were a sixth of its cost).
    #[inline(always)]
    pub(crate) fn write(&mut self, out: &mut impl LineOut, time_unix_ns: Option<u64>) {
        let Some(ns) = time_unix_ns else {
            out.put_all(b"{\"time\":null");
            return;
        };
        let (secs, nanos) = (ns / 1_000_000_000, ns % 1_000_000_000);
        if self.secs != Some(secs) && !self.refresh(secs) {
            out.put_all(b"{\"time\":null");
            return;
        }
        self.line[TIME_AT + 20..TIME_AT + 29].copy_from_slice(&nine_digits(nanos as u32));
        out.put_all(&self.line);
    }

    /// Format the prefix for `secs`; `false` if humantime refuses (past year 9999, which
    /// a `u64` of nanoseconds cannot reach: it ends in 2554). Out of line: once per
    /// second of records.
    #[cold]
    #[inline(never)]
    pub(crate) fn refresh(&mut self, secs: u64) -> bool {
        let Some(time) = SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(secs)) else {
            return false;
        };
        let mut buf = [0u8; 32];
        let mut cursor = &mut buf[..];
        let stamp = humantime::format_rfc3339_seconds(time);
        if std::io::Write::write_fmt(&mut cursor, format_args!("{stamp}")).is_err() {
            return false;
        }
        let written = 32 - cursor.len();
        // `YYYY-MM-DDTHH:MM:SSZ`: keep all but the `Z`, add the decimal point.
        if written != 20 || buf[19] != b'Z' {
            return false;
        }
        self.line[TIME_AT..TIME_AT + 19].copy_from_slice(&buf[..19]);
        self.line[TIME_AT + 19] = b'.';
        self.secs = Some(secs);
        true
    }
}

/// `n` (below 10^9) as exactly 9 decimal digits, zero-padded: the first digit, then the
/// other 8 in one word ([`eight_digits`]).
#[inline]
fn nine_digits(n: u32) -> [u8; 9] {
    let mut out = [b'0'; 9];
    out[0] += (n / 100_000_000) as u8;
    out[1..].copy_from_slice(&eight_digits(n % 100_000_000).to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(ns: Option<u64>) -> String {
        let mut out = Vec::new();
        TimeCache::default().write(&mut out, ns);
        let line = String::from_utf8(out).unwrap();
        line.strip_prefix("{\"time\":").unwrap().to_string()
    }

    #[test]
    fn time_format() {
        assert_eq!(time(None), "null");
        assert_eq!(time(Some(0)), "\"1970-01-01T00:00:00.000000000Z\"");
        assert_eq!(
            time(Some(1_795_345_200_123_456_789)),
            "\"2026-11-22T11:00:00.123456789Z\""
        );
        assert_eq!(
            time(Some(951_825_600_000_000_001)),
            "\"2000-02-29T12:00:00.000000001Z\""
        );
        assert_eq!(time(Some(u64::MAX)), "\"2554-07-21T23:34:33.709551615Z\"");
    }

    #[test]
    fn nine_digits_as_format_writes_them() {
        let mut n = 0u32;
        let mut check = |n: u32| {
            assert_eq!(nine_digits(n), *format!("{n:09}").as_bytes(), "{n}");
        };
        // Every value below 10^5 and around each power of ten, then a stride through
        // the rest (coprime with 10, so every digit takes every value in every place).
        (0..100_000).for_each(&mut check);
        for p in 0..9 {
            let base = 10u32.pow(p);
            (base.saturating_sub(3)..base + 3).for_each(&mut check);
        }
        while n < 1_000_000_000 {
            check(n);
            n += 9_973;
        }
        check(999_999_999);
    }

    #[test]
    fn time_cache_follows_the_second() {
        let mut cache = TimeCache::default();
        let mut out = Vec::new();
        for ns in [
            1_999_999_999u64,
            2_000_000_000,
            1_000_000_000,
            2_000_000_005,
        ] {
            cache.write(&mut out, Some(ns));
            out.push(b' ');
        }
        assert_eq!(
            String::from_utf8(out).unwrap().replace("{\"time\":", ""),
            "\"1970-01-01T00:00:01.999999999Z\" \"1970-01-01T00:00:02.000000000Z\" \
             \"1970-01-01T00:00:01.000000000Z\" \"1970-01-01T00:00:02.000000005Z\" "
        );
    }
}
