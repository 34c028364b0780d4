//! The Common Schema exporters' texts that the mapping (`common_schema.rs`) parses: a
//! span's `links` list, RFC 3339 times and hex ids. Below the encoders, which read a
//! span's links when they write it.

use std::borrow::Cow;

use serde::de::{SeqAccess, Visitor};

/// Each link of the exporter's `links` text
/// (`[{"toTraceId":"<32 hex>","toSpanId":"<16 hex>"},…]`) to `each`, in order; `false`
/// when the text is not such a list (`each` may then have seen the links before the
/// problem). Parsed in place by serde_json (no allocation unless an id is escaped).
pub(crate) fn for_each_link(text: &str, each: impl FnMut([u8; 16], [u8; 8])) -> bool {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct CsLink<'a> {
        #[serde(borrow)]
        to_trace_id: Cow<'a, str>,
        #[serde(borrow)]
        to_span_id: Cow<'a, str>,
    }
    struct Links<F>(F);
    impl<'de, F: FnMut([u8; 16], [u8; 8])> Visitor<'de> for Links<F> {
        type Value = bool;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of links")
        }
        fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<bool, A::Error> {
            let mut ok = true;
            while let Some(link) = seq.next_element::<CsLink<'de>>()? {
                let ids = (link.to_trace_id.as_bytes(), link.to_span_id.as_bytes());
                match (hex_id(ids.0), hex_id(ids.1)) {
                    (Some(t), Some(s)) if ok => (self.0)(t, s),
                    _ => ok = false,
                }
            }
            Ok(ok)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    serde::Deserializer::deserialize_seq(&mut de, Links(each)).is_ok_and(|ok| ok)
        && de.end().is_ok()
}

/// An RFC 3339 time (`…Z`, up to 9 fractional digits) as nanoseconds since the epoch.
pub(crate) fn parse_time(text: &str) -> Option<u64> {
    let t = humantime::parse_rfc3339(text).ok()?;
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    u64::try_from(d.as_nanos()).ok()
}

/// `N` bytes from `2N` hex digits (either case).
pub(crate) fn hex_id<const N: usize>(text: &[u8]) -> Option<[u8; N]> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    if text.len() != 2 * N {
        return None;
    }
    let mut id = [0u8; N];
    for (b, pair) in id.iter_mut().zip(text.chunks_exact(2)) {
        *b = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(id)
}

// Tests compute with the values they pick.
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    #[test]
    fn links_parse_whole_or_not_at_all() {
        let mut seen = Vec::new();
        let text =
            r#"[{"toTraceId":"0af7651916cd43dd8448eb211c80319c","toSpanId":"00f067aa0ba902b7"}]"#;
        assert!(for_each_link(text, |t, s| seen.push((t, s))));
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].1, [0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
        for bad in [
            "[{\"toTraceId\":\"00\",\"toSpanId\":\"00f067aa0ba902b7\"}]",
            "{}",
            "[] x",
            "null",
        ] {
            assert!(!for_each_link(bad, |_, _| {}), "{bad}");
        }
        assert!(for_each_link(" [ ] ", |_, _| {}));
    }

    #[test]
    fn ids_and_times() {
        assert_eq!(hex_id::<2>(b"0aFF"), Some([10, 255]));
        assert_eq!(hex_id::<2>(b"0aF"), None);
        assert_eq!(hex_id::<1>(b"zz"), None);
        assert_eq!(hex_id::<1>(b"+f"), None);
        assert_eq!(
            parse_time("2024-03-28T00:45:12.3Z"),
            Some(1_711_586_712_300_000_000)
        );
        assert_eq!(parse_time("yesterday"), None);
    }
}
