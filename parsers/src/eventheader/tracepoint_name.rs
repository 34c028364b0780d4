//! EventHeader tracepoint names: `<Provider>_L<level hex>K<keyword hex>[options]`.
//!
//! The provider is the text before the name's last `_`; `L` must follow it, then the
//! level (lowercase hex, fits a `u8`), `K`, the keyword (lowercase hex, fits a `u64`), then
//! options, each an uppercase ASCII letter followed by `[0-9a-z]*` (`G<group>` is the only
//! one defined). A multi-format `.<hex>` suffix (`user_events_multi`) is stripped first.

use crate::event_name::split_multi_format;

/// The parts of an EventHeader tracepoint name, borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TracepointName<'a> {
    /// The provider name (before the last `_`).
    pub provider: &'a str,
    /// The level from `L<hex>`.
    pub level: u8,
    /// The keyword from `K<hex>`.
    pub keyword: u64,
    /// The keyword as written (lowercase hex digits, no `0x`).
    pub keyword_text: &'a str,
    /// All options after the keyword, e.g. `Gmygroup` (may be empty).
    pub options: &'a str,
    /// The value of the `G` option, if present.
    pub group: Option<&'a str>,
}

impl<'a> TracepointName<'a> {
    /// Parse `name` (optionally with a multi-format `.<hex>` suffix); `None` when it does
    /// not follow the EventHeader naming rules.
    ///
    /// ```
    /// use uevrec_parsers::eventheader::TracepointName;
    /// let tp = TracepointName::parse("My_Provider_L4K1fGgrp").unwrap();
    /// assert_eq!((tp.provider, tp.level, tp.keyword, tp.group), ("My_Provider", 4, 0x1f, Some("grp")));
    /// assert!(TracepointName::parse("plain_event").is_none());
    /// ```
    // Places inside `name` (a str: at most isize::MAX bytes), each past one found in it by
    // a byte or a count of its bytes: no sum overflows.
    #[allow(clippy::arithmetic_side_effects)]
    pub fn parse(name: &'a str) -> Option<TracepointName<'a>> {
        let name = split_multi_format(name).map_or(name, |(base, _)| base);
        let underscore = name.rfind('_')?;
        let provider = name.get(..underscore)?;
        let rest = name.get(underscore + 1..)?.as_bytes();
        let rest = rest.strip_prefix(b"L")?;
        let (level, level_len) = lower_hex(rest)?;
        let level = u8::try_from(level).ok()?;
        let rest = rest.get(level_len..)?.strip_prefix(b"K")?;
        let (keyword, keyword_len) = lower_hex(rest)?;
        let keyword_start = underscore + 1 + 1 + level_len + 1;
        let keyword_text = name.get(keyword_start..keyword_start + keyword_len)?;
        let options_start = keyword_start + keyword_len;
        let options = name.get(options_start..)?;
        let mut group = None;
        let bytes = options.as_bytes();
        let mut at = 0;
        while let Some(&letter) = bytes.get(at) {
            if !letter.is_ascii_uppercase() {
                return None;
            }
            let start = at + 1;
            let mut end = start;
            while bytes
                .get(end)
                .is_some_and(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
            {
                end += 1;
            }
            if letter == b'G' && group.is_none() {
                group = options.get(start..end);
            }
            at = end;
        }
        Some(TracepointName {
            provider,
            level,
            keyword,
            keyword_text,
            options,
            group,
        })
    }
}

/// A lowercase hex number at the start of `bytes`: (value, digit count); `None` when
/// there is no digit or it overflows a `u64`.
fn lower_hex(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    let mut len = 0usize;
    for &b in bytes {
        // Each subtraction is inside the range matched.
        #[allow(clippy::arithmetic_side_effects)]
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => break,
        };
        value = value.checked_mul(16)?.checked_add(u64::from(digit))?;
        // At most the bytes' count.
        len = len.saturating_add(1);
    }
    (len > 0).then_some((value, len))
}

// Tests compute with the values they pick.
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        let tp = TracepointName::parse("MyProvider_L4K1").unwrap();
        assert_eq!(tp.provider, "MyProvider");
        assert_eq!((tp.level, tp.keyword, tp.keyword_text), (4, 1, "1"));
        assert_eq!((tp.options, tp.group), ("", None));
        let tp = TracepointName::parse("OtherProviderName_L5K23Gmygroup").unwrap();
        assert_eq!((tp.level, tp.keyword, tp.group), (5, 0x23, Some("mygroup")));
        let tp = TracepointName::parse("a_b_Lff0Kffffffffffffffff").unwrap_or_else(|| {
            // level ff0 does not fit a u8
            TracepointName::parse("a_b_LffKffffffffffffffff").unwrap()
        });
        assert_eq!((tp.provider, tp.level, tp.keyword), ("a_b", 0xff, u64::MAX));
        let tp = TracepointName::parse("P_L1K2XyzGg1.1f").unwrap();
        assert_eq!(
            (tp.provider, tp.options, tp.group),
            ("P", "XyzGg1", Some("g1"))
        );
        assert_eq!(TracepointName::parse("_L1K1").unwrap().provider, "");
    }

    #[test]
    fn rejects() {
        for bad in [
            "plain",
            "P_L4",
            "P_LK1",
            "P_L4K",
            "P_L100K1",
            "P_L4K1g",
            "P_L4K1G-",
            "P_L4KA",
            "P_l4K1",
            "P_L4K1_",
            "P_L4K11111111111111111",
            "P_L4K1 ",
        ] {
            assert_eq!(TracepointName::parse(bad), None, "{bad}");
        }
    }
}

/// An owned [`TracepointName`] (kept in a prepared format, borrowed per record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedTracepointName {
    text: Box<str>,
    provider: std::ops::Range<usize>,
    level: u8,
    keyword: u64,
    keyword_text: std::ops::Range<usize>,
    options: std::ops::Range<usize>,
    group: Option<std::ops::Range<usize>>,
}

impl OwnedTracepointName {
    /// Parse and keep `name`; `None` as for [`TracepointName::parse`].
    pub fn parse(name: &str) -> Option<Self> {
        let tp = TracepointName::parse(name)?;
        let base = name.as_ptr() as usize;
        let range = |s: &str| {
            let start = (s.as_ptr() as usize).wrapping_sub(base);
            // `s` is part of `name`: the sum is inside it.
            start..start.saturating_add(s.len())
        };
        Some(OwnedTracepointName {
            text: name.into(),
            provider: range(tp.provider),
            level: tp.level,
            keyword: tp.keyword,
            keyword_text: range(tp.keyword_text),
            options: range(tp.options),
            group: tp.group.map(range),
        })
    }

    /// The parsed name, borrowed.
    pub fn get(&self) -> TracepointName<'_> {
        let part = |r: &std::ops::Range<usize>| self.text.get(r.clone()).unwrap_or_default();
        TracepointName {
            provider: part(&self.provider),
            level: self.level,
            keyword: self.keyword,
            keyword_text: part(&self.keyword_text),
            options: part(&self.options),
            group: self.group.as_ref().map(part),
        }
    }
}

#[cfg(test)]
mod owned_tests {
    use super::*;

    #[test]
    fn owned_equals_borrowed() {
        for name in ["P_L4K1", "A_b_L5K23Gmygroup.1f", "_L1Kff"] {
            let owned = OwnedTracepointName::parse(name).unwrap();
            assert_eq!(owned.get(), TracepointName::parse(name).unwrap());
        }
        assert!(OwnedTracepointName::parse("nope").is_none());
    }
}
