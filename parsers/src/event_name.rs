//! Tracepoint names: `system:event`, and the multi-format `name.<hexid>` versions that
//! user_events registers under `user_events_multi` (kernel docs: `^name\.[0-9a-fA-F]+$`).

/// The base name and format id of a multi-format event name `name.<hex>`.
///
/// Returns `None` when `event` has no `.<hex digits>` suffix.
///
/// ```
/// use uevrec_parsers::split_multi_format;
/// assert_eq!(split_multi_format("uevc_multi.1a"), Some(("uevc_multi", "1a")));
/// assert_eq!(split_multi_format("plain"), None);
/// assert_eq!(split_multi_format("a.b.zz"), None);
/// ```
pub fn split_multi_format(event: &str) -> Option<(&str, &str)> {
    let dot = event.rfind('.')?;
    // `dot` is the place of a `.` in `event`: the sum fits.
    let (base, id) = (&event[..dot], &event[dot.saturating_add(1)..]);
    if base.is_empty() || id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some((base, id))
}

/// Whether `event` is a multi-format version of `base` (`base.<hex>`).
pub fn is_version_of(event: &str, base: &str) -> bool {
    split_multi_format(event).is_some_and(|(b, _)| b == base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(split_multi_format("x.0"), Some(("x", "0")));
        assert_eq!(split_multi_format("a.b.FF"), Some(("a.b", "FF")));
        assert_eq!(split_multi_format(".1"), None);
        assert_eq!(split_multi_format("x."), None);
        assert!(is_version_of("uevc_multi.1", "uevc_multi"));
        assert!(!is_version_of("uevc_multi2.1", "uevc_multi"));
        assert!(!is_version_of("uevc_multi", "uevc_multi"));
    }
}
