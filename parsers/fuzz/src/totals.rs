//! The rule for totals read from the input (issue 43): a decoder's `lost` is the sum of
//! the `lost` lines it wrote, or, when that sum is more than a u64 holds, `u64::MAX` with
//! `lost_overflow` set and one `lost` notice, after every `lost` line, saying so. Never a
//! wrapped sum, never a panic.

use uevrec_parsers::to_lines::{DecodeStats, LOST_OVERFLOW};

use crate::json::one_object_line;

/// Panics unless `stats` (a whole decoding's) and its lines `out` keep the rule above;
/// every line must be one JSON object. Returns the sum of the `lost` lines.
pub fn check_lost_total(stats: &DecodeStats, out: &[u8]) -> u128 {
    let mut sum = 0u128;
    let mut last_lost = None;
    let mut notices = Vec::new();
    for (i, line) in out.split_inclusive(|&b| b == b'\n').enumerate() {
        let obj = one_object_line(line);
        match obj.get("uevrec").and_then(|v| v.as_str()) {
            Some("lost") => {
                let n = obj["lost"].as_u64().expect("a lost line's count is a u64");
                sum += u128::from(n);
                last_lost = Some(i);
            }
            Some("notice") if obj["message"] == LOST_OVERFLOW => notices.push(i),
            _ => {}
        }
    }
    if sum <= u128::from(u64::MAX) {
        assert_eq!(u128::from(stats.lost), sum, "lost total vs the lost lines");
        assert!(
            !stats.lost_overflow && notices.is_empty(),
            "overflow said for {sum}"
        );
    } else {
        assert!(stats.lost_overflow, "a sum of {sum} not said to overflow");
        assert_eq!(stats.lost, u64::MAX);
        assert_eq!(notices.len(), 1, "one overflow notice");
        assert!(
            last_lost < Some(notices[0]),
            "the notice after every lost line"
        );
    }
    sum
}
