//! Kubernetes identity of a record: which pod (UID, QoS class) and container a cgroup v2
//! path belongs to ([`classify_pod`], both kubelet cgroup drivers, containerd, CRI-O and
//! Docker scope names, kubepods nested under another slice as kind and k3s put it), and
//! the names the kubelet gives them on the node itself ([`parse_pod_log_dir`]:
//! `/var/log/pods/<namespace>_<pod>_<uid>`, [`parse_container_log`]:
//! `/var/log/containers/<pod>_<namespace>_<container>-<id>.log`), kept by pod UID and
//! container id ([`K8sNames`]): a pod replaced by another of the same name has another
//! UID, so a name is never shown for the wrong pod. Until the names of a pod are known its
//! records carry the UID alone. The keys are listed in `docs/json-lines.md`
//! ("Kubernetes").

use crate::json::write_text;

type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Pods whose names are kept (a node runs at most a few hundred; more are forgotten one
/// per new one).
pub const MAX_PODS: usize = 16_384;
/// Container ids whose names are kept.
pub const MAX_CONTAINERS: usize = 65_536;

/// A pod's quality-of-service class (the kubelet's cgroup level it is under).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Qos {
    /// Directly under `kubepods`.
    Guaranteed,
    /// Under `kubepods/burstable`.
    Burstable,
    /// Under `kubepods/besteffort`.
    BestEffort,
}

impl Qos {
    /// The class as Kubernetes spells it (`Guaranteed`, `Burstable`, `BestEffort`).
    pub fn as_str(self) -> &'static str {
        match self {
            Qos::Guaranteed => "Guaranteed",
            Qos::Burstable => "Burstable",
            Qos::BestEffort => "BestEffort",
        }
    }

    /// The class of a kubelet cgroup level name (`burstable`, `besteffort`).
    fn of_level(level: &str) -> Option<Qos> {
        match level {
            "burstable" => Some(Qos::Burstable),
            "besteffort" => Some(Qos::BestEffort),
            _ => None,
        }
    }
}

/// What a cgroup path says about the pod it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodCgroup<'a> {
    /// The pod UID as the API server spells it (dashes restored from the systemd
    /// driver's underscores).
    pub uid: String,
    /// Its QoS class.
    pub qos: Qos,
    /// The container id when the path is a container's (or below one); `None` for the
    /// pod's own cgroup and the runtime's monitor scopes (`crio-conmon-<id>.scope`).
    pub container: Option<&'a str>,
}

/// A pod UID: 1 to 64 lowercase hex digits and dashes (API-server pods have UUIDs, static
/// pods the 32-digit hash of their manifest), with at least one digit.
fn is_uid(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b) || b == b'-')
        && s.bytes().any(|b| b != b'-')
}

/// A container id (as [`super::container`] takes them: 12 to 64 lowercase hex digits).
fn is_id(s: &str) -> bool {
    (12..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The systemd driver's pod slice: `[<parent>-]kubepods[-<qos>]-pod<uid>.slice` (the
/// UID's dashes written as underscores), as the UID (dashes restored) and class.
fn systemd_pod(component: &str) -> Option<(String, Qos)> {
    let stem = component.strip_suffix(".slice")?;
    // `kubepods` at the start or after a parent's `-` (kind: `kubelet-kubepods-…`).
    let at = stem
        .match_indices("kubepods-")
        .map(|(i, _)| i)
        .find(|&i| i.checked_sub(1).is_none_or(|b| stem.as_bytes()[b] == b'-'))?;
    // A match inside `stem`: its end is too.
    let rest = &stem[at.saturating_add("kubepods-".len())..];
    let (qos, rest) = match rest.split_once('-') {
        Some((level, rest)) if !level.starts_with("pod") => (Qos::of_level(level)?, rest),
        _ => (Qos::Guaranteed, rest),
    };
    let uid = rest.strip_prefix("pod")?.replace('_', "-");
    is_uid(&uid).then_some((uid, qos))
}

/// The cgroupfs driver's pod directory: `pod<uid>` under `kubepods` (Guaranteed) or
/// under `kubepods/<qos>`.
fn cgroupfs_pod(parents: &[&str], component: &str) -> Option<(String, Qos)> {
    let uid = component.strip_prefix("pod").filter(|u| is_uid(u))?;
    let qos = match parents {
        [.., "kubepods"] => Qos::Guaranteed,
        [.., "kubepods", level] => Qos::of_level(level)?,
        _ => return None,
    };
    Some((uid.to_string(), qos))
}

/// A container's cgroup right under its pod's: `cri-containerd-<id>.scope`,
/// `crio-<id>.scope`, `docker-<id>.scope` (systemd driver), `<id>` or `crio-<id>`
/// (cgroupfs driver). The monitor (`crio-conmon-<id>`) is none.
fn container_in_pod(component: &str) -> Option<&str> {
    let stem = component.strip_suffix(".scope").unwrap_or(component);
    let id = ["cri-containerd-", "crio-", "docker-"]
        .iter()
        .find_map(|p| stem.strip_prefix(p))
        .unwrap_or(stem);
    is_id(id).then_some(id)
}

/// The pod (and container) of the cgroup at `path`, `None` outside kubepods. The
/// innermost pod wins (a kubelet inside a pod's container: its own pods).
pub fn classify_pod(path: &str) -> Option<PodCgroup<'_>> {
    let parts: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    for (i, &c) in parts.iter().enumerate().rev() {
        let Some((uid, qos)) = systemd_pod(c).or_else(|| cgroupfs_pod(&parts[..i], c)) else {
            continue;
        };
        let container = (parts.get(i.saturating_add(1))).and_then(|c| container_in_pod(c));
        return Some(PodCgroup {
            uid,
            qos,
            container,
        });
    }
    None
}

/// A `/var/log/pods` directory name, `<namespace>_<pod>_<uid>`: (namespace, pod, uid).
/// Namespaces and pod names are DNS names (no `_`), so the split is exact.
pub fn parse_pod_log_dir(name: &str) -> Option<(&str, &str, &str)> {
    let mut parts = name.split('_');
    let (ns, pod, uid) = (parts.next()?, parts.next()?, parts.next()?);
    let ok = parts.next().is_none() && !ns.is_empty() && !pod.is_empty() && is_uid(uid);
    ok.then_some((ns, pod, uid))
}

/// A `/var/log/containers` file name, `<pod>_<namespace>_<container>-<id>.log`: (pod,
/// namespace, container, id).
pub fn parse_container_log(name: &str) -> Option<(&str, &str, &str, &str)> {
    let stem = name.strip_suffix(".log")?;
    let (rest, id) = stem.rsplit_once('-')?;
    let mut parts = rest.split('_');
    let (pod, ns, container) = (parts.next()?, parts.next()?, parts.next()?);
    let ok =
        parts.next().is_none() && is_id(id) && [pod, ns, container].iter().all(|s| !s.is_empty());
    ok.then_some((pod, ns, container, id))
}

/// The names learnt so far (pods by UID, containers by id) and the paths of the cgroups
/// that belong to pods, so their keys are written again when names come.
#[derive(Debug, Default, Clone)]
pub struct K8sNames {
    /// Pod UID → (namespace, pod name).
    pods: Map<Box<str>, (Box<str>, Box<str>)>,
    /// Container id → container name.
    containers: Map<Box<str>, Box<str>>,
    /// Cgroup id → path, of the cgroups in pods.
    cgroups: Map<u64, Box<str>>,
}

/// The Kubernetes identity of a cgroup in a pod ([`K8sNames::identity`]): what its path
/// says, and the names learnt for it (`None` until the kubelet's directories named it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodIdentity<'a> {
    /// The pod UID.
    pub uid: String,
    /// Its QoS class.
    pub qos: Qos,
    /// The container id, for a container's cgroup.
    pub container_id: Option<&'a str>,
    /// The pod's namespace and name, when known.
    pub names: Option<(&'a str, &'a str)>,
    /// The container's name, when known.
    pub container_name: Option<&'a str>,
}

/// Forget one entry of `map` when it is full and `key` is new.
fn make_room<V>(map: &mut Map<Box<str>, V>, key: &str, max: usize) {
    if map.len() >= max && !map.contains_key(key) {
        if let Some(any) = map.keys().next().cloned() {
            map.remove(&any);
        }
    }
}

impl K8sNames {
    /// Pods whose names are known.
    pub fn pods(&self) -> usize {
        self.pods.len()
    }

    /// Pod `uid` is `pod` in `namespace`; false when that was known already.
    pub fn learn_pod(&mut self, uid: &[u8], namespace: &[u8], pod: &[u8]) -> bool {
        let uid = String::from_utf8_lossy(uid);
        let names: (Box<str>, Box<str>) = (
            String::from_utf8_lossy(namespace).into(),
            String::from_utf8_lossy(pod).into(),
        );
        if self.pods.get(&*uid).is_some_and(|n| *n == names) {
            return false;
        }
        make_room(&mut self.pods, &uid, MAX_PODS);
        self.pods.insert(uid.into(), names);
        true
    }

    /// Container `id` is named `name`; false when that was known already.
    pub fn learn_container(&mut self, id: &[u8], name: &[u8]) -> bool {
        let id = String::from_utf8_lossy(id);
        let name: Box<str> = String::from_utf8_lossy(name).into();
        if self.containers.get(&*id).is_some_and(|n| *n == name) {
            return false;
        }
        make_room(&mut self.containers, &id, MAX_CONTAINERS);
        self.containers.insert(id.into(), name);
        true
    }

    /// The identity of cgroup `id` when it is a pod's (its path was seen by
    /// [`K8sNames::write_keys`]); `None` outside pods and for unknown cgroups.
    pub fn identity(&self, id: u64) -> Option<PodIdentity<'_>> {
        let pod = classify_pod(self.cgroups.get(&id)?)?;
        let names = self
            .pods
            .get(pod.uid.as_str())
            .map(|(ns, name)| (&**ns, &**name));
        let container_name = pod
            .container
            .and_then(|c| self.containers.get(c))
            .map(|n| &**n);
        Some(PodIdentity {
            uid: pod.uid,
            qos: pod.qos,
            container_id: pod.container,
            names,
            container_name,
        })
    }

    /// Cgroup `id` (path `path`) is forgotten.
    pub fn forget_cgroup(&mut self, id: u64) {
        self.cgroups.remove(&id);
    }

    /// Append the Kubernetes keys of cgroup `id` at `path` to `out` (nothing outside
    /// kubepods), remembering the path when it is a pod's: `,"k8s_pod_uid":"…",
    /// "k8s_qos":"…"`, then `,"k8s_namespace":"…","k8s_pod":"…"` when the pod's names
    /// are known and `,"k8s_container":"…"` when the container's is. `has_container`:
    /// `out` carries a `container` key already (else the pod's container id is added
    /// as one).
    pub fn write_keys(&mut self, id: u64, path: &str, has_container: bool, out: &mut Vec<u8>) {
        let Some(pod) = classify_pod(path) else {
            self.cgroups.remove(&id);
            return;
        };
        self.cgroups.insert(id, path.into());
        if let (Some(c), false) = (pod.container, has_container) {
            out.extend_from_slice(b",\"container\":");
            write_text(out, c.as_bytes());
        }
        out.extend_from_slice(b",\"k8s_pod_uid\":");
        write_text(out, pod.uid.as_bytes());
        out.extend_from_slice(b",\"k8s_qos\":");
        write_text(out, pod.qos.as_str().as_bytes());
        if let Some((namespace, name)) = self.pods.get(pod.uid.as_str()) {
            out.extend_from_slice(b",\"k8s_namespace\":");
            write_text(out, namespace.as_bytes());
            out.extend_from_slice(b",\"k8s_pod\":");
            write_text(out, name.as_bytes());
        }
        if let Some(name) = pod.container.and_then(|c| self.containers.get(c)) {
            out.extend_from_slice(b",\"k8s_container\":");
            write_text(out, name.as_bytes());
        }
    }

    /// The cgroups in pods (id, path), whose keys change when names come.
    pub fn pod_cgroups(&self) -> impl Iterator<Item = (u64, &str)> {
        self.cgroups.iter().map(|(&id, p)| (id, &**p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ID: &str = "3f4a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8";
    const UID: &str = "0f1e2d3c-aaaa-bbbb-cccc-001122334455";
    const UID_: &str = "0f1e2d3c_aaaa_bbbb_cccc_001122334455";

    /// What [`classify_pod`] finds, owned.
    type Found = Option<(String, Qos, Option<String>)>;

    fn pod(path: &str) -> Found {
        classify_pod(path).map(|p| (p.uid, p.qos, p.container.map(str::to_string)))
    }

    #[test]
    fn real_paths() {
        use Qos::*;
        let some = |q, c: Option<&str>| Some((UID.to_string(), q, c.map(str::to_string)));
        let table: Vec<(String, Found)> = vec![
            // systemd driver, containerd, each class.
            (format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/cri-containerd-{ID}.scope"), some(Burstable, Some(ID))),
            (format!("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/cri-containerd-{ID}.scope"), some(BestEffort, Some(ID))),
            (format!("/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{ID}.scope"), some(Guaranteed, Some(ID))),
            // The pod's own cgroup, and a process in a container's sub-cgroup.
            (format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice"), some(Burstable, None)),
            (format!("/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{ID}.scope/init"), some(Guaranteed, Some(ID))),
            // CRI-O and its monitor, Docker (dockershim / cri-dockerd).
            (format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/crio-{ID}.scope"), some(Burstable, Some(ID))),
            (format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/crio-conmon-{ID}.scope"), some(Burstable, None)),
            (format!("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/docker-{ID}.scope"), some(BestEffort, Some(ID))),
            // cgroupfs driver: containerd and Docker (bare id), CRI-O (crio-<id>).
            (format!("/kubepods/burstable/pod{UID}/{ID}"), some(Burstable, Some(ID))),
            (format!("/kubepods/besteffort/pod{UID}/{ID}"), some(BestEffort, Some(ID))),
            (format!("/kubepods/pod{UID}/{ID}"), some(Guaranteed, Some(ID))),
            (format!("/kubepods/burstable/pod{UID}/crio-{ID}"), some(Burstable, Some(ID))),
            (format!("/kubepods/burstable/pod{UID}"), some(Burstable, None)),
            // Nested: kind (systemd, under kubelet.slice), k3s in Docker (cgroupfs), kind
            // with cgroupfs.
            (format!("/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod{UID_}.slice/cri-containerd-{ID}.scope"), some(BestEffort, Some(ID))),
            (format!("/system.slice/docker-{ID}.scope/kubepods/burstable/pod{UID}/{ID}"), some(Burstable, Some(ID))),
            (format!("/kubelet/kubepods/besteffort/pod{UID}/{ID}"), some(BestEffort, Some(ID))),
            // Static pods: the manifest hash as UID.
            ("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod5d8f5e1c2b3a4f6e7d8c9b0a1f2e3d4c.slice".into(), Some(("5d8f5e1c2b3a4f6e7d8c9b0a1f2e3d4c".into(), Burstable, None))),
            // Not pods.
            ("/kubepods.slice".into(), None),
            ("/kubepods.slice/kubepods-burstable.slice".into(), None),
            ("/kubepods/burstable".into(), None),
            (format!("/system.slice/docker-{ID}.scope"), None),
            ("/system.slice/containerd.service".into(), None),
            (format!("/other/burstable/pod{UID}/{ID}"), None),
            (format!("/kubepods/unknown/pod{UID}/{ID}"), None),
            (format!("/kubepods.slice/kubepods-unknown-pod{UID_}.slice"), None),
            (format!("/kubepods.slice/xkubepods-pod{UID_}.slice"), None),
            ("/kubepods.slice/kubepods-podNOTHEX.slice".into(), None),
            ("/kubepods/podzz".into(), None),
            ("/".into(), None),
            ("".into(), None),
        ];
        for (path, want) in table {
            assert_eq!(pod(&path), want, "{path}");
        }
    }

    #[test]
    fn kubelet_log_names() {
        assert_eq!(
            parse_pod_log_dir(&format!("kube-system_coredns-5d78c9869d-abcde_{UID}")),
            Some(("kube-system", "coredns-5d78c9869d-abcde", UID))
        );
        for bad in ["a_b", "a_b_c_d", "_p_0a", "ns__0a", "ns_p_NOTAUID"] {
            assert_eq!(parse_pod_log_dir(bad), None, "{bad}");
        }
        assert_eq!(
            parse_container_log(&format!("web-0_shop_nginx-{ID}.log")),
            Some(("web-0", "shop", "nginx", ID))
        );
        // Dashes in the container name are its own; the id is after the last one.
        assert_eq!(
            parse_container_log(&format!("web-0_shop_log-shipper-{ID}.log")),
            Some(("web-0", "shop", "log-shipper", ID))
        );
        for bad in [
            format!("web-0_shop_nginx-{ID}"),
            format!("web-0_shop_nginx-{ID}x.log"),
            format!("web-0_nginx-{ID}.log"),
            "x.log".to_string(),
        ] {
            assert_eq!(parse_container_log(&bad), None, "{bad}");
        }
    }

    #[test]
    fn keys_follow_the_names_by_uid() {
        let mut n = K8sNames::default();
        let path = format!("/kubepods/burstable/pod{UID}/{ID}");
        let keys = |n: &mut K8sNames| {
            let mut out = Vec::new();
            n.write_keys(9, &path, true, &mut out);
            String::from_utf8(out).unwrap()
        };
        let bare = format!(",\"k8s_pod_uid\":\"{UID}\",\"k8s_qos\":\"Burstable\"");
        assert_eq!(keys(&mut n), bare);
        assert_eq!(n.pod_cgroups().collect::<Vec<_>>(), [(9, path.as_str())]);
        // Another pod's names change nothing.
        assert!(n.learn_pod(b"1234", b"ns", b"other"));
        assert_eq!(keys(&mut n), bare);
        assert!(n.learn_pod(UID.as_bytes(), b"shop", b"web-0"));
        assert!(!n.learn_pod(UID.as_bytes(), b"shop", b"web-0"));
        assert!(n.learn_container(ID.as_bytes(), b"nginx"));
        assert_eq!(
            keys(&mut n),
            format!(
                "{bare},\"k8s_namespace\":\"shop\",\"k8s_pod\":\"web-0\",\"k8s_container\":\"nginx\""
            )
        );
        // No container key yet: the pod's container id is given.
        let mut out = Vec::new();
        n.write_keys(9, &path, false, &mut out);
        assert!(
            String::from_utf8(out)
                .unwrap()
                .starts_with(&format!(",\"container\":\"{ID}\","))
        );
        // Outside kubepods: nothing, and the cgroup is no pod's any more.
        let mut out = Vec::new();
        n.write_keys(9, "/system.slice/a.service", false, &mut out);
        assert!(out.is_empty());
        assert_eq!(n.pod_cgroups().count(), 0);
    }

    #[test]
    fn names_are_bounded() {
        let mut n = K8sNames::default();
        for i in 0..MAX_PODS + 10 {
            n.learn_pod(format!("{i:x}").as_bytes(), b"ns", b"p");
        }
        assert_eq!(n.pods(), MAX_PODS);
        for i in 0..MAX_CONTAINERS + 10 {
            n.learn_container(format!("{i:012x}").as_bytes(), b"c");
        }
        assert_eq!(n.containers.len(), MAX_CONTAINERS);
    }

    proptest! {
        #[test]
        fn any_path_classifies_without_panic(path in "(/|kubepods|\\.slice|-pod|pod|_|-|[0-9a-f]{1,40}|burstable|besteffort|cri-containerd-|crio-|\\.scope|\\PC)*") {
            if let Some(p) = classify_pod(&path) {
                prop_assert!(is_uid(&p.uid));
                prop_assert!(p.container.is_none_or(is_id));
            }
        }

        #[test]
        fn any_name_parses_without_panic(name in "\\PC*") {
            let _ = parse_pod_log_dir(&name);
            let _ = parse_container_log(&name);
        }
    }
}

#[cfg(test)]
mod tracker_tests {
    use crate::context::{ContextTracker, ContextUpdate};

    const ID: &str = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00";

    fn keys(t: &ContextTracker, cgroup: u64) -> String {
        let mut out = Vec::new();
        t.write(&mut out, 1, 1, None, Some(cgroup));
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn names_come_after_the_uid_and_follow_a_replaced_pod() {
        let mut t = ContextTracker::new();
        let old = format!("/kubepods.slice/kubepods-pod1111_22.slice/cri-containerd-{ID}.scope");
        t.apply(
            None,
            ContextUpdate::Cgroup {
                id: 5,
                path: old.as_bytes(),
            },
        );
        let before = keys(&t, 5);
        assert!(
            before.ends_with(&format!(
                "\"container\":\"{ID}\",\"k8s_pod_uid\":\"1111-22\",\"k8s_qos\":\"Guaranteed\""
            )),
            "{before}"
        );
        let v = t.version();
        t.apply(
            Some(10),
            ContextUpdate::Pod {
                uid: b"1111-22",
                namespace: b"shop",
                name: b"web-0",
            },
        );
        t.apply(
            Some(10),
            ContextUpdate::ContainerName {
                id: ID.as_bytes(),
                name: b"nginx",
            },
        );
        assert_ne!(t.version(), v);
        assert_eq!(
            keys(&t, 5),
            format!(
                "{before},\"k8s_namespace\":\"shop\",\"k8s_pod\":\"web-0\",\"k8s_container\":\"nginx\""
            )
        );
        // The pod replaced: same name, another UID and container; until its names come
        // it shows its UID alone, never the old pod's names.
        let id2 = ID.replace("c0ffee", "decade");
        let new = format!("/kubepods.slice/kubepods-pod3333_44.slice/cri-containerd-{id2}.scope");
        t.apply(
            None,
            ContextUpdate::Cgroup {
                id: 6,
                path: new.as_bytes(),
            },
        );
        let fresh = keys(&t, 6);
        assert!(
            fresh.contains("\"k8s_pod_uid\":\"3333-44\"") && !fresh.contains("k8s_pod\""),
            "{fresh}"
        );
        t.apply(
            Some(20),
            ContextUpdate::Pod {
                uid: b"3333-44",
                namespace: b"shop",
                name: b"web-0",
            },
        );
        assert!(keys(&t, 6).contains("\"k8s_pod_uid\":\"3333-44\",\"k8s_qos\":\"Guaranteed\",\"k8s_namespace\":\"shop\",\"k8s_pod\":\"web-0\""));
        assert!(keys(&t, 5).contains("\"k8s_pod_uid\":\"1111-22\""));
        // A cgroup outside kubepods has no k8s keys.
        t.apply(
            None,
            ContextUpdate::Cgroup {
                id: 7,
                path: b"/system.slice/cron.service",
            },
        );
        assert!(!keys(&t, 7).contains("k8s"));
    }
}
