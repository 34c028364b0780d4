//! What a cgroup v2 path says about who owns it: a container id (Docker, containerd/CRI,
//! CRI-O, podman, Kubernetes pods under the cgroupfs driver) or else the systemd unit
//! (`*.service`, `*.scope`). One function per rule; [`classify`] applies them to the
//! path's components from the innermost outward, so the innermost match wins (a
//! container started inside another container shows its own id). The rules are listed
//! in `docs/json-lines.md` ("Context").

/// Who owns a cgroup, as far as its path says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupOwner<'a> {
    /// The container id (lowercase hex, 12 to 64 digits) when a component names one.
    pub container: Option<&'a str>,
    /// The innermost systemd unit (`cron.service`, `session-3.scope`) when no container
    /// is named.
    pub unit: Option<&'a str>,
}

/// A container id: 12 to 64 lowercase hex digits (runtimes write the full 64; shorter
/// ones are accepted for hand-made paths, shorter than 12 is too likely a word).
fn is_id(s: &str) -> bool {
    (12..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The systemd-driver rules: `<prefix><id>.scope` for Docker (`docker-`), containerd's
/// CRI plugin (`cri-containerd-`), CRI-O (`crio-`) and podman (`libpod-`). The runtimes'
/// monitor scopes (`crio-conmon-<id>.scope`, `libpod-conmon-<id>.scope`) are not the
/// container: their id does not pass [`is_id`] (it starts with `conmon-`).
fn scope_id(component: &str) -> Option<&str> {
    const PREFIXES: [&str; 4] = ["docker-", "cri-containerd-", "crio-", "libpod-"];
    let stem = component.strip_suffix(".scope")?;
    PREFIXES
        .iter()
        .find_map(|p| stem.strip_prefix(p))
        .filter(|id| is_id(id))
}

/// The cgroupfs-driver rule: a bare id directly under `docker`, `libpod_parent`, or a
/// Kubernetes pod directory (`pod<uid>` under `kubepods…`).
fn cgroupfs_id<'a>(parent: Option<&str>, component: &'a str) -> Option<&'a str> {
    let parent = parent?;
    let under_runtime = matches!(parent, "docker" | "libpod_parent") || parent.starts_with("pod");
    (under_runtime && is_id(component)).then_some(component)
}

/// A systemd unit name: ends with `.service` or `.scope` and has a name before it.
fn unit_name(component: &str) -> Option<&str> {
    [".service", ".scope"]
        .iter()
        .any(|s| component.len() > s.len() && component.ends_with(s))
        .then_some(component)
}

/// Who owns the cgroup at `path` (`/system.slice/docker-<id>.scope`, `/docker/<id>` …).
pub fn classify(path: &str) -> CgroupOwner<'_> {
    let parts: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    let mut unit = None;
    for (i, &c) in parts.iter().enumerate().rev() {
        let parent = i.checked_sub(1).map(|p| parts[p]);
        if let Some(id) = scope_id(c).or_else(|| cgroupfs_id(parent, c)) {
            return CgroupOwner {
                container: Some(id),
                unit: None,
            };
        }
        if unit.is_none() {
            unit = unit_name(c);
        }
    }
    CgroupOwner {
        container: None,
        unit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f4a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8";

    fn container(path: &str) -> Option<&str> {
        classify(path).container
    }

    #[test]
    fn docker_systemd_driver() {
        let p = format!("/system.slice/docker-{ID}.scope");
        assert_eq!(container(&p), Some(ID));
    }

    #[test]
    fn docker_cgroupfs_driver() {
        assert_eq!(container(&format!("/docker/{ID}")), Some(ID));
        // A hex name under another parent is not a container.
        assert_eq!(container(&format!("/other/{ID}")), None);
    }

    #[test]
    fn containerd_cri() {
        let p = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_5678.slice/cri-containerd-{ID}.scope"
        );
        assert_eq!(container(&p), Some(ID));
    }

    #[test]
    fn crio_and_its_monitor() {
        let p = format!("/kubepods.slice/kubepods-pod1.slice/crio-{ID}.scope");
        assert_eq!(container(&p), Some(ID));
        let conmon = format!("/kubepods.slice/kubepods-pod1.slice/crio-conmon-{ID}.scope");
        assert_eq!(container(&conmon), None);
        assert_eq!(classify(&conmon).unit, conmon.rsplit('/').next());
    }

    #[test]
    fn podman() {
        let p =
            format!("/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope");
        assert_eq!(container(&p), Some(ID));
        assert_eq!(
            container(&format!("/machine.slice/libpod-conmon-{ID}.scope")),
            None
        );
        assert_eq!(container(&format!("/libpod_parent/{ID}")), Some(ID));
    }

    #[test]
    fn kubepods_cgroupfs_driver() {
        let p = format!("/kubepods/burstable/pod0f1e2d3c-aaaa-bbbb-cccc-001122334455/{ID}");
        assert_eq!(container(&p), Some(ID));
    }

    #[test]
    fn innermost_container_wins() {
        let inner = "0123456789abcdef0123";
        let p = format!("/system.slice/docker-{ID}.scope/docker/{inner}");
        assert_eq!(container(&p), Some(inner));
    }

    #[test]
    fn systemd_units_when_no_container() {
        let o = classify("/system.slice/cron.service");
        assert_eq!(
            o,
            CgroupOwner {
                container: None,
                unit: Some("cron.service")
            }
        );
        assert_eq!(
            classify("/user.slice/user-1000.slice/session-3.scope").unit,
            Some("session-3.scope")
        );
        // The innermost unit: a service's own sub-cgroup.
        assert_eq!(
            classify("/system.slice/containerd.service/sub").unit,
            Some("containerd.service")
        );
        assert_eq!(
            classify("/user.slice/user-1000.slice/user@1000.service/app.slice/app-foo.scope").unit,
            Some("app-foo.scope")
        );
        assert_eq!(classify(".scope").unit, None);
    }

    #[test]
    fn nothing_for_plain_paths() {
        for p in ["/", "", "/user.slice", "/docker", "/docker/notanid"] {
            assert_eq!(classify(p), CgroupOwner::default(), "{p}");
        }
        // Upper-case hex and ids too short or too long are not ids.
        assert_eq!(container(&format!("/docker/{}", ID.to_uppercase())), None);
        assert_eq!(container("/docker/0123456789a"), None);
        assert_eq!(container(&format!("/docker/{ID}0")), None);
        // A runtime prefix with no id is only a unit.
        assert_eq!(
            classify("/x/docker-abc.scope"),
            CgroupOwner {
                container: None,
                unit: Some("docker-abc.scope")
            }
        );
    }
}
