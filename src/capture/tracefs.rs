//! Finding tracefs and reading what it says about events.
//!
//! Discovery order: an explicit path (`--tracefs` / `UEVREC_TRACEFS`) wins; else the
//! `tracefs` entry of `/proc/self/mounts` (works in containers that mount it elsewhere);
//! else `/sys/kernel/tracing`, else `/sys/kernel/debug/tracing`. A directory counts as
//! tracefs when it has an `events` directory.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use uevrec_parsers::EventFormat;
use uevrec_parsers::{FormatError, parse_format};

/// A tracefs mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracefs {
    root: PathBuf,
}

/// Why tracefs or one of its files could not be used; the message says the fix.
#[derive(Debug, thiserror::Error)]
pub enum TracefsError {
    /// No tracefs found anywhere.
    #[error(
        "tracefs is not mounted (looked in /proc/self/mounts, /sys/kernel/tracing, \
         /sys/kernel/debug/tracing); mount it with `mount -t tracefs nodev /sys/kernel/tracing` \
         or pass its path with --tracefs"
    )]
    NotMounted,
    /// The explicit path is not a tracefs directory.
    #[error(
        "{0} is not a tracefs mount (no `events` directory in it); mount tracefs there with \
         `mount -t tracefs nodev {0}`, or pass the directory where tracefs is mounted"
    )]
    NotTracefs(PathBuf),
    /// Access refused.
    #[error("permission denied reading {0}: tracefs needs root (run uevrec as root, or with sudo)")]
    Permission(PathBuf),
    /// The kernel has no user_events.
    #[error(
        "this kernel has no user_events ({0} is missing): it needs CONFIG_USER_EVENTS=y \
         (Linux 6.4+); other tracepoint systems can still be recorded with -e SYSTEM:EVENT"
    )]
    NoUserEvents(PathBuf),
    /// The event does not exist (or vanished).
    #[error("no such event {system}:{event} ({path} is missing)")]
    NoSuchEvent {
        /// System.
        system: String,
        /// Event.
        event: String,
        /// The format file looked for.
        path: PathBuf,
    },
    /// A format file that does not parse.
    #[error("cannot parse {path}: {source}")]
    Format {
        /// The format file.
        path: PathBuf,
        /// What was wrong.
        source: FormatError,
    },
    /// Any other I/O error.
    #[error("reading {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

impl TracefsError {
    pub(crate) fn io(path: &Path, source: io::Error) -> Self {
        match source.kind() {
            io::ErrorKind::PermissionDenied => TracefsError::Permission(path.to_path_buf()),
            _ => TracefsError::Io {
                path: path.to_path_buf(),
                source,
            },
        }
    }
}

/// The places tracefs is looked for when /proc/self/mounts names none.
const FALLBACKS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The mount point of the first `tracefs` entry in a mounts table (`/proc/self/mounts`
/// text); octal escapes such as `\040` are decoded.
pub fn tracefs_from_mounts(mounts: &str) -> Option<PathBuf> {
    mount_of(mounts, "tracefs")
}

/// The mount point of the first entry of file system type `fs` in a mounts table
/// (`/proc/self/mounts` text); octal escapes such as `\040` are decoded.
pub fn mount_of(mounts: &str, fs: &str) -> Option<PathBuf> {
    mounts.lines().find_map(|line| {
        let mut it = line.split_whitespace();
        let (_dev, dir, fstype) = (it.next()?, it.next()?, it.next()?);
        (fstype == fs).then(|| PathBuf::from(unescape_mount(dir)))
    })
}

fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let oct = b
            .get(i + 1..i + 4)
            .filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match oct.and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok()) {
            Some(c) => {
                out.push(c);
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Tracefs {
    /// The explicit path, or the discovered mount (see the module docs).
    pub fn discover(explicit: Option<&Path>) -> Result<Tracefs, TracefsError> {
        if let Some(p) = explicit {
            return Self::check(p)?.ok_or_else(|| TracefsError::NotTracefs(p.to_path_buf()));
        }
        let from_mounts = fs::read_to_string("/proc/self/mounts")
            .ok()
            .and_then(|m| tracefs_from_mounts(&m));
        for p in from_mounts
            .into_iter()
            .chain(FALLBACKS.iter().map(PathBuf::from))
        {
            if let Some(t) = Self::check(&p)? {
                return Ok(t);
            }
        }
        Err(TracefsError::NotMounted)
    }

    /// `Some` when `p/events` is a directory; a permission error is reported as such.
    fn check(p: &Path) -> Result<Option<Tracefs>, TracefsError> {
        let events = p.join("events");
        match fs::metadata(&events) {
            Ok(m) if m.is_dir() => Ok(Some(Tracefs {
                root: p.to_path_buf(),
            })),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                Err(TracefsError::Permission(events))
            }
            Err(_) => Ok(None),
        }
    }

    /// The mount point.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether the kernel has user_events (`user_events_data` exists).
    pub fn has_user_events(&self) -> bool {
        self.root.join("user_events_data").exists()
    }

    /// `events/<system>/<event>`.
    pub fn event_dir(&self, system: &str, event: &str) -> PathBuf {
        self.root.join("events").join(system).join(event)
    }

    /// Every system directory under `events/`.
    pub fn list_systems(&self) -> Result<Vec<String>, TracefsError> {
        let mut out = list_dirs(&self.root.join("events"))?;
        out.sort();
        Ok(out)
    }

    /// Every event of `system` (empty when the system vanished).
    pub fn list_system_events(&self, system: &str) -> Result<Vec<String>, TracefsError> {
        let dir = self.root.join("events").join(system);
        match list_dirs(&dir) {
            Err(TracefsError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                Ok(Vec::new())
            }
            r => r.map(|mut v| {
                v.sort();
                v
            }),
        }
    }

    /// Every `(system, event)` pair, sorted.
    pub fn list_events(&self) -> Result<Vec<(String, String)>, TracefsError> {
        let mut out = Vec::new();
        for system in self.list_systems()? {
            for event in self.list_system_events(&system)? {
                out.push((system.clone(), event));
            }
        }
        Ok(out)
    }

    /// The event's `id` file (cheaper than its whole format file); None when it is gone.
    pub fn read_id(&self, system: &str, event: &str) -> Option<u32> {
        fs::read_to_string(self.event_dir(system, event).join("id"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Read and parse `events/<system>/<event>/format`.
    pub fn read_format(&self, system: &str, event: &str) -> Result<EventFormat, TracefsError> {
        self.read_format_text(system, event)
            .map(|(format, _)| format)
    }

    /// Read and parse `events/<system>/<event>/format`; the format with the text it was
    /// parsed from.
    pub fn read_format_text(
        &self,
        system: &str,
        event: &str,
    ) -> Result<(EventFormat, String), TracefsError> {
        let path = self.event_dir(system, event).join("format");
        let text = fs::read_to_string(&path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => TracefsError::NoSuchEvent {
                system: system.into(),
                event: event.into(),
                path: path.clone(),
            },
            _ => TracefsError::io(&path, e),
        })?;
        match parse_format(&text) {
            Ok(format) => Ok((format, text)),
            Err(source) => Err(TracefsError::Format { path, source }),
        }
    }

    /// The raw text of `user_events_status`.
    pub fn user_events_status(&self) -> Result<String, TracefsError> {
        let path = self.root.join("user_events_status");
        fs::read_to_string(&path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => TracefsError::NoUserEvents(path),
            _ => TracefsError::io(&path, e),
        })
    }
}

/// Names of the subdirectories of `dir`.
/// Read a tracefs file that answers only the first `read(2)` (the `filter` files and
/// `events/header_page` return nothing at a non-zero offset), with one large read.
pub fn read_once(path: &Path) -> io::Result<String> {
    use std::io::Read as _;
    let mut buf = vec![0u8; 64 * 1024];
    let n = fs::File::open(path)?.read(&mut buf)?;
    buf.truncate(n);
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

fn list_dirs(dir: &Path) -> Result<Vec<String>, TracefsError> {
    let rd = fs::read_dir(dir).map_err(|e| TracefsError::io(dir, e))?;
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| TracefsError::io(dir, e))?;
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            if let Ok(name) = entry.file_name().into_string() {
                out.push(name);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_table() {
        let m = "sysfs /sys sysfs rw 0 0\nnodev /my\\040trace tracefs rw,relatime 0 0\n";
        assert_eq!(tracefs_from_mounts(m), Some(PathBuf::from("/my trace")));
        assert_eq!(tracefs_from_mounts("proc /proc proc rw 0 0\n"), None);
        assert_eq!(tracefs_from_mounts("garbage\n\n x"), None);
    }

    #[test]
    fn explicit_path_must_be_tracefs() {
        let dir = tempfile::tempdir().unwrap();
        let err = Tracefs::discover(Some(dir.path())).unwrap_err();
        assert!(err.to_string().contains("not a tracefs mount"), "{err}");
        fs::create_dir_all(dir.path().join("events/sys1/ev1")).unwrap();
        fs::create_dir_all(dir.path().join("events/sys1/ev0")).unwrap();
        fs::write(dir.path().join("events/enable"), "0").unwrap();
        let t = Tracefs::discover(Some(dir.path())).unwrap();
        assert_eq!(t.root(), dir.path());
        assert!(!t.has_user_events());
        assert_eq!(
            t.list_events().unwrap(),
            vec![("sys1".into(), "ev0".into()), ("sys1".into(), "ev1".into())]
        );
        assert!(t.list_system_events("gone").unwrap().is_empty());
        let e = t.user_events_status().unwrap_err();
        assert!(e.to_string().contains("CONFIG_USER_EVENTS"), "{e}");
        let e = t.read_format("sys1", "nope").unwrap_err();
        assert!(matches!(e, TracefsError::NoSuchEvent { .. }), "{e}");
        assert_eq!(t.read_id("sys1", "ev1"), None);
        fs::write(dir.path().join("events/sys1/ev1/id"), "42\n").unwrap();
        assert_eq!(t.read_id("sys1", "ev1"), Some(42));
    }
}
