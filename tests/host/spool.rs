//! Host tier: the spool's filesystem full (`ENOSPC`, issue 24). A 1 MiB tmpfs is mounted
//! over a temporary directory and a spool allowed 64 MiB is filled until the filesystem
//! refuses: the append fails with a clear error (which file, what to do), is counted, and
//! nothing panics; the batches already spooled are all handed out intact; acknowledging
//! them gives the space back and appends work again; a reopen finds nothing damaged.
//! Needs root (to mount); says why it is skipped otherwise.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use uevrec::delivery::spool::{FullPolicy, Spool, SpoolConfig};

use crate::common::tier::Tier;

/// Unmounts on drop (before the temporary directory goes).
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Mount a tmpfs of `size` on `dir`, or say why not.
fn mount_tmpfs(dir: &Path, size: &str) -> Result<Mounted, String> {
    // SAFETY: geteuid has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root: mounting a tmpfs needs root".into());
    }
    let out = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir)
        .output()
        .map_err(|e| format!("cannot run mount: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "mount -t tmpfs failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(Mounted(dir.to_path_buf()))
}

fn body(i: u64) -> Vec<u8> {
    (0..50_000).map(|k| (i * 7 + k) as u8).collect()
}

#[test]
fn a_full_filesystem_is_a_clear_error_and_the_spool_stays_readable() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let _mounted = require!(Tier::Host, mount_tmpfs(tmp.path(), "1m"));
    let dir = tmp.path().join("spool");
    let cfg = SpoolConfig {
        dir: dir.clone(),
        max_bytes: 64 << 20,
        full: FullPolicy::Block,
    };
    let go = AtomicBool::new(false);
    let (s, _) = Spool::open(cfg.clone()).expect("open on the tmpfs");
    let mut spooled = Vec::new();
    let err = loop {
        match s.append(3, b"m", &body(spooled.len() as u64), &go) {
            Ok(o) => spooled.push(o.id),
            Err(e) => break e,
        }
        assert!(spooled.len() < 100, "a 1 MiB tmpfs took 5 MB");
    };
    assert!(err.is_no_space(), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(dir.to_str().unwrap()) && msg.contains("free space on that filesystem"),
        "{msg}"
    );
    assert!(spooled.len() >= 10, "only {} batches fitted", spooled.len());
    // Still full: a second append fails the same way (in a new segment).
    assert!(s.append(3, b"m", &body(0), &go).unwrap_err().is_no_space());
    let st = s.stats();
    assert_eq!((st.append_errors, st.batches), (2, spooled.len() as u64));

    // Everything spooled is intact, in order; acknowledging it frees the space.
    for (i, &id) in spooled.iter().enumerate() {
        let e = s.next(Duration::ZERO).expect("a spooled batch");
        assert_eq!((e.id, e.records), (id, 3));
        assert_eq!(e.body, body(i as u64), "batch {id}");
        s.ack(id).expect("ack");
    }
    assert_eq!(s.next(Duration::ZERO), None);
    let again = s
        .append(3, b"m", &body(1), &go)
        .expect("append after space came back");
    drop(s);

    let (s, rec) = Spool::open(cfg).expect("reopen");
    assert_eq!((rec.batches, rec.corrupt_batches), (1, 0), "{rec:?}");
    assert_eq!(s.next(Duration::ZERO).map(|e| e.id), Some(again.id));
}
