//! Which events to record: `system:event` selectors with shell globs on both sides.
//!
//! A selector whose event part names a multi-format base name (`user_events_multi:foo`)
//! also matches every version `foo.<hex>` of it ([`uevrec_parsers::split_multi_format`]).

use std::fmt;
use std::str::FromStr;

use glob::Pattern;
use uevrec_parsers::split_multi_format;

/// One `system:event` selector.
#[derive(Debug, Clone)]
pub struct Selector {
    text: String,
    system: Pattern,
    event: Pattern,
}

/// A selector that could not be parsed; the message shows the expected form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// No `:` or an empty side.
    #[error(
        "bad event selector `{0}`: expected SYSTEM:EVENT, e.g. `user_events:*` or `sched:sched_process_*`"
    )]
    Form(String),
    /// A side is not a valid glob.
    #[error("bad glob in event selector `{text}`: {message}")]
    Glob {
        /// The selector.
        text: String,
        /// The glob error.
        message: String,
    },
}

impl FromStr for Selector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (system, event) = s
            .split_once(':')
            .ok_or_else(|| SelectorError::Form(s.into()))?;
        if system.is_empty() || event.is_empty() {
            return Err(SelectorError::Form(s.into()));
        }
        let glob = |p: &str| {
            Pattern::new(p).map_err(|e| SelectorError::Glob {
                text: s.into(),
                message: e.to_string(),
            })
        };
        Ok(Selector {
            text: s.into(),
            system: glob(system)?,
            event: glob(event)?,
        })
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The selectors used when none are given: every user event, single- and multi-format.
pub fn default_selectors() -> Vec<Selector> {
    ["user_events:*", "user_events_multi:*"]
        .iter()
        .filter_map(|s| s.parse().ok())
        .collect()
}

impl Selector {
    /// Whether this selector's system glob matches `system`.
    pub fn matches_system(&self, system: &str) -> bool {
        self.system.matches(system)
    }

    /// Whether `system:event` is selected (a multi-format `name.<hex>` also matches via
    /// its base name).
    pub fn matches(&self, system: &str, event: &str) -> bool {
        self.matches_system(system)
            && (self.event.matches(event)
                || split_multi_format(event).is_some_and(|(base, _)| self.event.matches(base)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_both_sides() {
        let s: Selector = "sched:sched_process_*".parse().unwrap();
        assert!(s.matches("sched", "sched_process_exec"));
        assert!(!s.matches("sched", "sched_switch"));
        assert!(!s.matches("schedx", "sched_process_exec"));
        let s: Selector = "*:foo".parse().unwrap();
        assert!(s.matches("anything", "foo"));
        assert_eq!(s.to_string(), "*:foo");
    }

    #[test]
    fn multi_format_versions() {
        let s: Selector = "user_events_multi:uevc_multi".parse().unwrap();
        assert!(s.matches("user_events_multi", "uevc_multi.0"));
        assert!(s.matches("user_events_multi", "uevc_multi.1a"));
        assert!(s.matches("user_events_multi", "uevc_multi"));
        assert!(!s.matches("user_events_multi", "uevc_multi2.1"));
        assert!(!s.matches("user_events_multi", "uevc_multi.zz"));
    }

    #[test]
    fn defaults() {
        let d = default_selectors();
        assert_eq!(d.len(), 2);
        assert!(d.iter().any(|s| s.matches("user_events", "x")));
        assert!(d.iter().any(|s| s.matches("user_events_multi", "x.1")));
        assert!(!d.iter().any(|s| s.matches("sched", "sched_switch")));
    }

    #[test]
    fn errors() {
        for bad in ["nocolon", ":x", "x:", ""] {
            let e = bad.parse::<Selector>().unwrap_err();
            assert!(e.to_string().contains("SYSTEM:EVENT"), "{e}");
        }
        assert!(matches!(
            "a:[".parse::<Selector>(),
            Err(SelectorError::Glob { .. })
        ));
    }
}
