//! The context keys of a record as JSON text, rendered once per thread name or cgroup
//! (the tracker stores them; JSON lines copy them after `"tid"`): `,"comm":…` and
//! `,"cgroup":…` with `,"container":…` or `,"unit":…`.

use super::classify;
use crate::json::{write_c_string, write_text};

/// `,"comm":"…"` for a thread name (bytes up to the first NUL; invalid UTF-8 becomes
/// U+FFFD).
pub(crate) fn comm_text(comm: &[u8]) -> Box<[u8]> {
    let mut out = b",\"comm\":".to_vec();
    write_c_string(&mut out, comm);
    out.into_boxed_slice()
}

/// `,"cgroup":"…"` for a cgroup path, then `,"container":"…"` when the path names a
/// container, else `,"unit":"…"` when it names a systemd unit.
pub(crate) fn cgroup_text(path: &[u8]) -> Box<[u8]> {
    let mut out = b",\"cgroup\":".to_vec();
    write_text(&mut out, path);
    let path = String::from_utf8_lossy(path);
    let owner = classify(&path);
    if let Some(id) = owner.container {
        out.extend_from_slice(b",\"container\":");
        write_text(&mut out, id.as_bytes());
    } else if let Some(unit) = owner.unit {
        out.extend_from_slice(b",\"unit\":");
        write_text(&mut out, unit.as_bytes());
    }
    out.into_boxed_slice()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts() {
        assert_eq!(&*comm_text(b"bash"), b",\"comm\":\"bash\"");
        assert_eq!(&*comm_text(b"a\"b\0junk"), b",\"comm\":\"a\\\"b\"");
        assert_eq!(&*comm_text(b"\xff"), ",\"comm\":\"\u{FFFD}\"".as_bytes());
        assert_eq!(
            &*cgroup_text(b"/system.slice/cron.service"),
            b",\"cgroup\":\"/system.slice/cron.service\",\"unit\":\"cron.service\""
        );
        let id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let path = format!("/system.slice/docker-{id}.scope");
        assert_eq!(
            String::from_utf8(cgroup_text(path.as_bytes()).into()).unwrap(),
            format!(",\"cgroup\":\"{path}\",\"container\":\"{id}\"")
        );
        assert_eq!(&*cgroup_text(b"/"), b",\"cgroup\":\"/\"");
    }
}
