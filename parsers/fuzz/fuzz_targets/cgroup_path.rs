//! A cgroup v2 path and kubelet directory names → the context classifiers
//! (`context::classify`, `classify_pod`, `kubernetes::parse_pod_log_dir`,
//! `parse_container_log`) and the Kubernetes keys of a JSON line (`K8sNames`):
//! - never panics;
//! - a container id is 12 to 64 lowercase hex digits found in one component of the path,
//!   a unit is a whole component ending in `.service` or `.scope`, never both;
//! - empty components do not matter: the path with every `/` doubled and one more at each
//!   end is classified the same;
//! - a pod's UID is 1 to 64 of `0-9a-f-` (not only dashes), its container id as above;
//! - a kubelet name that parses is exactly its parts put back together;
//! - the keys written for the path are JSON members (`{` + keys + `}` is one object),
//!   with the pod's UID, the names learnt for it and its container (when learnt), and
//!   `identity` says the same.
//!
//! Input: text (lossy UTF-8), lines: the cgroup path, then kubelet names (each tried as
//! a `/var/log/pods` directory and a `/var/log/containers` file name: what parses is
//! learnt). Dictionary: `dict/cgroup_path.dict`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use uevrec_parsers::context::kubernetes::{K8sNames, parse_container_log, parse_pod_log_dir};
use uevrec_parsers::context::{classify, classify_pod};

fn is_id(s: &str) -> bool {
    (12..=64).contains(&s.len()) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn is_uid(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f' | b'-'))
        && s.bytes().any(|b| b != b'-')
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let path = lines.next().unwrap_or_default();
    let parts: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();

    let owner = classify(path);
    assert!(
        owner.container.is_none() || owner.unit.is_none(),
        "{owner:?}"
    );
    if let Some(id) = owner.container {
        assert!(
            is_id(id) && parts.iter().any(|c| c.contains(id)),
            "{id:?} in {path:?}"
        );
    }
    if let Some(unit) = owner.unit {
        assert!(parts.contains(&unit), "{unit:?} in {path:?}");
        assert!(
            unit.ends_with(".service") || unit.ends_with(".scope"),
            "{unit:?}"
        );
    }
    let doubled = format!("/{}/", path.replace('/', "//"));
    assert_eq!(classify(&doubled), owner, "{path:?}");

    let pod = classify_pod(path);
    if let Some(p) = &pod {
        assert!(is_uid(&p.uid), "uid {:?} of {path:?}", p.uid);
        if let Some(c) = p.container {
            assert!(
                is_id(c) && parts.iter().any(|part| part.contains(c)),
                "{c:?}"
            );
        }
    }
    assert_eq!(classify_pod(&doubled), pod, "{path:?}");

    // The names the kubelet's directories give, learnt as the recorder learns them.
    let mut names = K8sNames::default();
    let mut pods = Vec::new();
    let mut containers = Vec::new();
    for line in lines {
        if let Some((ns, name, uid)) = parse_pod_log_dir(line) {
            assert_eq!(format!("{ns}_{name}_{uid}"), line);
            names.learn_pod(uid.as_bytes(), ns.as_bytes(), name.as_bytes());
            pods.push((uid, ns, name));
        }
        if let Some((name, ns, container, id)) = parse_container_log(line) {
            assert_eq!(format!("{name}_{ns}_{container}-{id}.log"), line);
            assert!(is_id(id), "{id:?}");
            names.learn_container(id.as_bytes(), container.as_bytes());
            containers.push((id, container));
        }
    }
    let mut keys = b"{\"a\":0".to_vec();
    names.write_keys(7, path, false, &mut keys);
    keys.push(b'}');
    let obj = match serde_json::from_slice::<Value>(&keys) {
        Ok(Value::Object(obj)) => obj,
        other => panic!(
            "keys that are not JSON members: {other:?} {:?}",
            String::from_utf8_lossy(&keys)
        ),
    };
    let identity = names.identity(7);
    let Some(p) = pod else {
        assert_eq!(obj.len(), 1, "keys for a path in no pod: {obj:?}");
        assert!(identity.is_none());
        return;
    };
    let id = identity.expect("a pod's cgroup has an identity");
    assert_eq!(obj["k8s_pod_uid"], p.uid.as_str());
    assert_eq!(id.uid, p.uid);
    assert_eq!(obj["k8s_qos"], p.qos.as_str());
    assert_eq!(obj.get("container").and_then(Value::as_str), p.container);
    // The last names learnt for the pod and its container.
    let learnt = pods
        .iter()
        .rev()
        .find(|(uid, ..)| *uid == p.uid)
        .map(|&(_, ns, n)| (ns, n));
    assert_eq!(id.names, learnt);
    assert_eq!(
        obj.get("k8s_namespace").and_then(Value::as_str),
        learnt.map(|l| l.0)
    );
    assert_eq!(
        obj.get("k8s_pod").and_then(Value::as_str),
        learnt.map(|l| l.1)
    );
    let container = (p.container)
        .and_then(|c| containers.iter().rev().find(|(id, _)| *id == c))
        .map(|&(_, name)| name);
    assert_eq!(id.container_name, container);
    assert_eq!(obj.get("k8s_container").and_then(Value::as_str), container);
});
