//! The context keys of an event line (`comm`, `cgroup`, `container`, `unit`; see
//! [`crate::context`]), rendered once per name or cgroup so each record only copies
//! them, and the [`LineWriter`] hook that places them after `"tid"`.

use super::{LineWriter, RecordStamp, write_c_string, write_text};
use crate::context::{ContextTracker, classify};

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

impl LineWriter {
    /// Set the context keys the next event lines carry after `"tid"` (`,"comm":"…",…`):
    /// what `tracker` knows of the thread and process of `stamp` at its time, with the
    /// sample's `cgroup` ([`ContextTracker::write`]). Called per record, before
    /// [`LineWriter::write_prepared`] or [`LineWriter::write_record`]; the one way the
    /// live formatter, `decode` and the benchmarks fill them.
    #[inline]
    pub fn set_context(
        &mut self,
        tracker: &ContextTracker,
        stamp: &RecordStamp,
        cgroup: Option<u64>,
    ) {
        self.context.clear();
        tracker.write(
            &mut self.context,
            stamp.pid,
            stamp.tid,
            stamp.time_unix_ns,
            cgroup,
        );
    }
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
