//! TEMPORARY compile-only stand-in for the recorder helper's tracefs/selector/session API
//! (the contract in briefs/api-live.md). It records nothing: `session::run` fails. It is
//! replaced by `use crate::{selector, session, tracefs}` once those modules land on main.
#![allow(missing_docs, dead_code)]

pub mod tracefs {
    use std::path::{Path, PathBuf};
    use uevrec_parsers::schema::EventFormat;

    #[derive(Debug, thiserror::Error)]
    pub enum TracefsError {
        #[error(
            "{0} is not a tracefs mount; mount it with `mount -t tracefs nodev /sys/kernel/tracing`"
        )]
        NotTracefs(PathBuf),
        #[error(
            "this kernel has no user_events ({0} is missing): it needs CONFIG_USER_EVENTS=y; other systems with -e SYSTEM:EVENT"
        )]
        NoUserEvents(PathBuf),
        #[error("stand-in: not implemented")]
        Other,
    }

    #[derive(Debug)]
    pub struct Tracefs {
        root: PathBuf,
    }

    impl Tracefs {
        pub fn discover(explicit: Option<&Path>) -> Result<Tracefs, TracefsError> {
            let root = explicit
                .unwrap_or(Path::new("/sys/kernel/tracing"))
                .to_path_buf();
            if root.join("events").is_dir() {
                Ok(Tracefs { root })
            } else {
                Err(TracefsError::NotTracefs(root))
            }
        }
        pub fn root(&self) -> &Path {
            &self.root
        }
        pub fn has_user_events(&self) -> bool {
            self.root.join("user_events_data").exists()
        }
        pub fn list_events(&self) -> Result<Vec<(String, String)>, TracefsError> {
            Err(TracefsError::Other)
        }
        pub fn read_format(
            &self,
            _system: &str,
            _event: &str,
        ) -> Result<EventFormat, TracefsError> {
            Err(TracefsError::Other)
        }
        pub fn user_events_status(&self) -> Result<String, TracefsError> {
            Err(TracefsError::Other)
        }
    }
}

pub mod selector {
    use std::str::FromStr;

    #[derive(Debug, Clone)]
    pub struct Selector {
        system: String,
        event: String,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("bad selector {0:?}: expected SYSTEM:EVENT")]
    pub struct SelectorError(String);

    impl FromStr for Selector {
        type Err = SelectorError;
        fn from_str(s: &str) -> Result<Self, SelectorError> {
            match s.split_once(':') {
                Some((a, b)) if !a.is_empty() && !b.is_empty() => Ok(Selector {
                    system: a.into(),
                    event: b.into(),
                }),
                _ => Err(SelectorError(s.into())),
            }
        }
    }

    pub fn default_selectors() -> Vec<Selector> {
        vec![
            "user_events:*".parse().unwrap(),
            "user_events_multi:*".parse().unwrap(),
        ]
    }

    impl Selector {
        pub fn matches(&self, system: &str, event: &str) -> bool {
            (self.system == "*" || self.system == system)
                && (self.event == "*" || self.event == event)
        }
    }
}

pub mod session {
    use super::selector::Selector;
    use crate::pipeline::Batch;
    use std::collections::BTreeMap;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicBool, AtomicU64};
    use std::time::Duration;

    pub struct SessionConfig {
        pub tracefs: Option<PathBuf>,
        pub selectors: Vec<Selector>,
        pub buffer_pages: usize,
        pub filter: Option<String>,
        pub pid: Option<i32>,
        pub include_self: bool,
        pub rescan_interval: Duration,
        pub include_common: bool,
        pub max_records: Option<u64>,
    }

    #[derive(Default)]
    pub struct LiveStats {
        pub records: AtomicU64,
        pub lost: AtomicU64,
    }

    #[derive(Debug, Default)]
    pub struct Summary {
        pub records_per_event: BTreeMap<String, u64>,
        pub lost_per_cpu: BTreeMap<u32, u64>,
        pub records: u64,
        pub lost: u64,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("the recorder is not merged yet (stand-in); needs root or CAP_PERFMON anyway")]
    pub struct SessionError;

    pub fn run(
        _config: &SessionConfig,
        _out: &crossbeam_channel::Sender<Batch>,
        _recycle: &crossbeam_channel::Receiver<Vec<u8>>,
        _stop: &AtomicBool,
        _stats: &LiveStats,
    ) -> Result<Summary, SessionError> {
        Err(SessionError)
    }
}
