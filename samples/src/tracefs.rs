//! Where tracefs is, and persistent events through its `dynamic_events` file.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::RegisterCommand;

/// Where tracefs is normally mounted.
pub const DEFAULT_TRACEFS: &str = "/sys/kernel/tracing";

/// The tracefs root: `$UEVREC_TRACEFS` when set, else [`DEFAULT_TRACEFS`].
pub fn tracefs_root() -> PathBuf {
    std::env::var_os("UEVREC_TRACEFS").map_or_else(|| PathBuf::from(DEFAULT_TRACEFS), PathBuf::from)
}

/// Create a persistent event by writing `u:<cmd>` to `<tracefs>/dynamic_events`.
/// It exists until [`remove_persistent`] (or DIAG_IOCSDEL); producers then register the
/// same command to get a write index.
pub fn add_persistent(tracefs: &Path, cmd: &RegisterCommand) -> io::Result<()> {
    write_dynamic_events(tracefs, &format!("u:{cmd}"))
}

/// Delete a persistent event with `-:<cmd>` on `dynamic_events`. The kernel wants the
/// full field list here (`-:name` alone, or `!u:name`, fails with ENOENT).
pub fn remove_persistent(tracefs: &Path, cmd: &RegisterCommand) -> io::Result<()> {
    write_dynamic_events(tracefs, &format!("-:{cmd}"))
}

fn write_dynamic_events(tracefs: &Path, line: &str) -> io::Result<()> {
    let path = tracefs.join("dynamic_events");
    let mut f = OpenOptions::new().append(true).open(&path)?;
    // One write() per command: the kernel parses each write on its own.
    f.write_all(format!("{line}\n").as_bytes()).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("writing `{line}` to {}: {e}", path.display()),
        )
    })
}

/// Whether `<tracefs>/events/<system>/<event>` exists (the event is registered).
pub fn event_exists(tracefs: &Path, system: &str, event: &str) -> bool {
    tracefs.join("events").join(system).join(event).is_dir()
}
