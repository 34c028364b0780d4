//! Who wrote a record, as `--where` variables: `comm`, `cgroup`, `container`, `unit` and
//! the `k8s_*` keys, exactly as the record's JSON line shows them. The context tracker
//! keeps them as ready-made JSON text (`,"comm":"…","cgroup":"…"`), which is what every
//! line copies; a condition that names one reads that short text once per record
//! (serde, borrowed where nothing is escaped), only when it names one. What the
//! tracker does not know (no cgroup yet, a record outside any pod, `--no-context`) is
//! the empty string, so `k8s_namespace == "prod"` is false there, not an error.

use std::borrow::Cow;
use std::sync::OnceLock;

use serde::Deserialize;

use super::condition::CONTEXT_VARIABLES;
use uevrec_parsers::{ContextTracker, RecordStamp};

/// What the formatter knows of who wrote a record: its context tracker and the
/// sample's own cgroup id, if it carried one.
#[derive(Debug, Clone, Copy)]
pub struct Who<'a> {
    /// The tracker, as it stands at this record.
    pub tracker: &'a ContextTracker,
    /// The cgroup id the sample carried (`PERF_SAMPLE_CGROUP`).
    pub cgroup: Option<u64>,
}

impl Who<'_> {
    /// The UID of the pod the record's cgroup is in (the record's own cgroup, else its
    /// process's or thread's), when known.
    pub fn pod_uid(&self, stamp: &RecordStamp) -> Option<String> {
        let id = self
            .cgroup
            .or_else(|| self.tracker.cgroup_of(stamp.pid, stamp.tid))?;
        Some(self.tracker.pod_identity(id)?.uid)
    }
}

/// The context keys of one record's line, read from their JSON text.
#[derive(Debug, Default, Deserialize)]
struct Keys<'a> {
    #[serde(borrow, default)]
    comm: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    cgroup: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    container: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    unit: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    k8s_pod_uid: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    k8s_qos: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    k8s_namespace: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    k8s_pod: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    k8s_container: Option<Cow<'a, str>>,
}

/// A record's context, read when a condition first names a context variable.
#[derive(Debug)]
pub struct RecordContext<'a> {
    who: Option<Who<'a>>,
    stamp: &'a RecordStamp,
    /// `{` and the keys' JSON text and `}`, once written.
    text: OnceLock<Vec<u8>>,
}

impl<'a> RecordContext<'a> {
    /// The context of the record at `stamp` (`who`: `None` without a tracker).
    pub fn new(who: Option<Who<'a>>, stamp: &'a RecordStamp) -> Self {
        RecordContext {
            who,
            stamp,
            text: OnceLock::new(),
        }
    }

    /// Whether `comm` is `k` (as `comm() == k`, without making the string).
    #[inline]
    pub fn comm_is(&self, k: &str) -> bool {
        match self.comm_json() {
            None => k.is_empty(),
            Some((_, Some(plain))) => plain == k.as_bytes(),
            Some(_) => self.comm() == k,
        }
    }

    /// The tracker's JSON string of `comm` (quotes included), and its text when it has
    /// no escapes; `None` when not known.
    #[inline]
    fn comm_json(&self) -> Option<(&'a [u8], Option<&'a [u8]>)> {
        let text = self
            .who
            .and_then(|w| w.tracker.comm_text(self.stamp.tid, self.stamp.time_unix_ns))?;
        let quoted = text.strip_prefix(b",\"comm\":").unwrap_or(text);
        let plain = quoted
            .strip_prefix(b"\"")
            .and_then(|q| q.strip_suffix(b"\""))
            .filter(|plain| !plain.contains(&b'\\'));
        Some((quoted, plain))
    }

    /// `comm` ("" when not known), borrowed from the tracker unless it has escapes.
    pub fn comm(&self) -> Cow<'a, str> {
        let Some((quoted, plain)) = self.comm_json() else {
            return Cow::Borrowed("");
        };
        match plain {
            Some(plain) => {
                // The tracker writes valid JSON strings: a failure here is a bug, shown
                // as "".
                Cow::Borrowed(std::str::from_utf8(plain).unwrap_or_default())
            }
            _ => serde_json::from_slice::<String>(quoted)
                .map(Cow::Owned)
                .unwrap_or_default(),
        }
    }

    /// The value of context variable `name` ("" when not known); `None` for a name
    /// that is not one.
    pub fn value(&self, name: &str) -> Option<String> {
        if !CONTEXT_VARIABLES.contains(&name) {
            return None;
        }
        if name == "comm" {
            return Some(self.comm().into_owned());
        }
        let text = self.text.get_or_init(|| {
            let mut text = b"{\"_\":0".to_vec();
            if let Some(who) = &self.who {
                let s = self.stamp;
                who.tracker
                    .write(&mut text, s.pid, s.tid, s.time_unix_ns, who.cgroup);
            }
            text.push(b'}');
            text
        });
        // The tracker writes valid JSON strings: a failure here is a bug, shown as "".
        let keys: Keys<'_> = serde_json::from_slice(text).unwrap_or_default();
        let value = match name {
            "comm" => keys.comm,
            "cgroup" => keys.cgroup,
            "container" => keys.container,
            "unit" => keys.unit,
            "k8s_pod_uid" => keys.k8s_pod_uid,
            "k8s_qos" => keys.k8s_qos,
            "k8s_namespace" => keys.k8s_namespace,
            "k8s_pod" => keys.k8s_pod,
            _ => keys.k8s_container,
        };
        Some(value.map(Cow::into_owned).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uevrec_parsers::ContextUpdate;

    #[test]
    fn the_variables_are_what_the_line_shows() {
        let mut tracker = ContextTracker::new();
        tracker.apply(
            None,
            ContextUpdate::Comm {
                tid: 7,
                comm: b"we\"b",
            },
        );
        let path = b"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f0e0d0c_0b0a_0908_0706_050403020100.slice/cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope";
        tracker.apply(None, ContextUpdate::Cgroup { id: 5, path });
        tracker.apply(
            None,
            ContextUpdate::Pod {
                uid: b"0f0e0d0c-0b0a-0908-0706-050403020100",
                namespace: b"prod",
                name: b"web-1",
            },
        );
        let stamp = RecordStamp {
            time_unix_ns: Some(1),
            cpu: 0,
            pid: 7,
            tid: 7,
        };
        let who = Who {
            tracker: &tracker,
            cgroup: Some(5),
        };
        let c = RecordContext::new(Some(who), &stamp);
        assert_eq!(c.value("comm").unwrap(), "we\"b");
        assert_eq!(c.comm(), "we\"b");
        assert_eq!(c.value("k8s_namespace").unwrap(), "prod");
        assert_eq!(c.value("k8s_pod").unwrap(), "web-1");
        assert_eq!(c.value("k8s_qos").unwrap(), "Burstable");
        assert_eq!(
            c.value("container").unwrap(),
            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
        );
        assert_eq!(c.value("k8s_container").unwrap(), "");
        assert!(c.value("cgroup").unwrap().starts_with("/kubepods.slice/"));
        assert_eq!(c.value("nope"), None);
        assert_eq!(
            who.pod_uid(&stamp).as_deref(),
            Some("0f0e0d0c-0b0a-0908-0706-050403020100")
        );
        let none = RecordContext::new(None, &stamp);
        assert_eq!(none.value("comm").unwrap(), "");
        assert_eq!(none.comm(), "");
    }
}
