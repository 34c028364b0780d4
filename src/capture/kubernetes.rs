//! Kubernetes names from the node alone (no API server): the kubelet's pod log
//! directories (`/var/log/pods/<namespace>_<pod>_<uid>/`) name every pod UID, and its
//! container log links (`/var/log/containers/<pod>_<namespace>_<container>-<id>.log`)
//! name every container id. [`PodLogs::poll`] hands what is new since the last look as
//! [`ContextUpdate::Pod`] and [`ContextUpdate::ContainerName`] updates, which the
//! session stages with the records (`uevrec_parsers::context::kubernetes` turns cgroup
//! paths into pod UIDs and writes the keys). Cheap when nothing changes, and bounded
//! ([`MAX_ENTRIES`]); the keys and their limits: docs/json-lines.md ("Kubernetes").

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use uevrec_parsers::ContextUpdate;
use uevrec_parsers::context::kubernetes::{parse_container_log, parse_pod_log_dir};

/// The kubelet's pod log root.
pub const DEFAULT_POD_LOGS: &str = "/var/log/pods";
/// The kubelet's container log links.
pub const DEFAULT_CONTAINER_LOGS: &str = "/var/log/containers";
/// Entries read and remembered per directory (a node runs at most a few hundred pods):
/// memory is bounded.
pub const MAX_ENTRIES: usize = 65_536;
/// A directory changed less than this before a look is read again at the next look
/// (an entry made in the same clock tick as the look does not change the time).
const SETTLE: Duration = Duration::from_secs(2);

/// Where the kubelet's logs are (`--k8s-pod-logs`, `--k8s-container-logs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodLogDirs {
    /// `/var/log/pods` or the directory given.
    pub pods: PathBuf,
    /// `/var/log/containers` or the directory given.
    pub containers: PathBuf,
}

impl Default for PodLogDirs {
    fn default() -> Self {
        PodLogDirs {
            pods: DEFAULT_POD_LOGS.into(),
            containers: DEFAULT_CONTAINER_LOGS.into(),
        }
    }
}

/// One directory watched: the names seen at the last read, and its time then.
#[derive(Debug, Default)]
struct Watched {
    dir: PathBuf,
    seen: HashSet<String>,
    mtime: Option<SystemTime>,
    /// Read again at the next look even if the time stays (it was recent at the read).
    again: bool,
}

impl Watched {
    fn new(dir: PathBuf) -> Self {
        Watched {
            dir,
            ..Watched::default()
        }
    }

    /// The names in the directory now that were not at the last read (None: not read,
    /// nothing changed or the directory is not there).
    fn new_names(&mut self) -> Option<Vec<String>> {
        let mtime = fs::metadata(&self.dir).and_then(|m| m.modified()).ok()?;
        if Some(mtime) == self.mtime && !self.again {
            return None;
        }
        let now = SystemTime::now();
        self.again = now.duration_since(mtime).map_or(true, |age| age < SETTLE);
        self.mtime = Some(mtime);
        let mut now_seen = HashSet::new();
        let mut fresh = Vec::new();
        for e in fs::read_dir(&self.dir).ok()?.flatten().take(MAX_ENTRIES) {
            let Ok(name) = e.file_name().into_string() else {
                continue;
            };
            if !self.seen.contains(&name) {
                fresh.push(name.clone());
            }
            now_seen.insert(name);
        }
        self.seen = now_seen;
        Some(fresh)
    }
}

/// The kubelet's log directories, watched for new pods and containers.
#[derive(Debug)]
pub struct PodLogs {
    pods: Watched,
    containers: Watched,
}

impl PodLogs {
    /// Watch `dirs` (nothing is read until [`PodLogs::poll`]).
    pub fn new(dirs: &PodLogDirs) -> Self {
        PodLogs {
            pods: Watched::new(dirs.pods.clone()),
            containers: Watched::new(dirs.containers.clone()),
        }
    }

    /// The directories watched.
    pub fn dirs(&self) -> (&Path, &Path) {
        (&self.pods.dir, &self.containers.dir)
    }

    /// Hand `f` the names of the pods and containers that appeared since the last call
    /// (all of them at the first). Entries whose names are not the kubelet's are
    /// skipped.
    ///
    /// Cheap when nothing changes: a look is one `stat` per directory; a directory is read
    /// only when its modification time changed (a pod or container came or went) or
    /// changed so recently that an entry made in the same clock tick could have been
    /// missed (`SETTLE`). The session looks at start and once per rescan interval (a
    /// second by default), so names come within about a second of the kubelet making the
    /// directories; records written before carry the pod UID alone.
    pub fn poll(&mut self, f: &mut dyn FnMut(ContextUpdate<'_>)) {
        for name in self.pods.new_names().unwrap_or_default() {
            if let Some((namespace, pod, uid)) = parse_pod_log_dir(&name) {
                f(ContextUpdate::Pod {
                    uid: uid.as_bytes(),
                    namespace: namespace.as_bytes(),
                    name: pod.as_bytes(),
                });
            }
        }
        for name in self.containers.new_names().unwrap_or_default() {
            if let Some((_, _, container, id)) = parse_container_log(&name) {
                f(ContextUpdate::ContainerName {
                    id: id.as_bytes(),
                    name: container.as_bytes(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "0f1e2d3c-aaaa-bbbb-cccc-001122334455";
    const ID: &str = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00";

    /// What a poll hands out, as text.
    fn poll(p: &mut PodLogs) -> Vec<String> {
        let mut got = Vec::new();
        p.poll(&mut |u| {
            got.push(match u {
                ContextUpdate::Pod {
                    uid,
                    namespace,
                    name,
                } => format!(
                    "pod {} {} {}",
                    String::from_utf8_lossy(uid),
                    String::from_utf8_lossy(namespace),
                    String::from_utf8_lossy(name)
                ),
                ContextUpdate::ContainerName { id, name } => format!(
                    "container {} {}",
                    String::from_utf8_lossy(id),
                    String::from_utf8_lossy(name)
                ),
                other => format!("{other:?}"),
            })
        });
        got.sort();
        got
    }

    #[test]
    fn new_pods_and_containers_once_each() {
        let dir = tempfile::tempdir().unwrap();
        let dirs = PodLogDirs {
            pods: dir.path().join("pods"),
            containers: dir.path().join("containers"),
        };
        let mut p = PodLogs::new(&dirs);
        // Not there (no kubelet on this node): nothing, no error.
        assert!(poll(&mut p).is_empty());
        fs::create_dir_all(dirs.pods.join(format!("shop_web-0_{UID}/nginx"))).unwrap();
        fs::create_dir_all(dirs.pods.join("not-a-pod")).unwrap();
        fs::create_dir_all(&dirs.containers).unwrap();
        let link = dirs.containers.join(format!("web-0_shop_nginx-{ID}.log"));
        std::os::unix::fs::symlink(dirs.pods.join("x"), &link).unwrap();
        assert_eq!(
            poll(&mut p),
            [
                format!("container {ID} nginx"),
                format!("pod {UID} shop web-0")
            ]
        );
        // Known already: not handed again (read again, the directories being recent).
        assert!(poll(&mut p).is_empty());
        let uid2 = UID.replace("aaaa", "9999");
        fs::create_dir_all(dirs.pods.join(format!("shop_web-0_{uid2}"))).unwrap();
        assert_eq!(poll(&mut p), [format!("pod {uid2} shop web-0")]);
    }
}
