//! Pre-registration: persistent user_events created before their producers start, so a
//! recorder is attached when a producer registers and its very first record is kept. A
//! `u:NAME FIELDS` line written to tracefs `dynamic_events` creates a persistent event that
//! a producer registering the same name and fields shares (same ID, its enable bit set at
//! once when a recorder has the event open); what the kernel does in each case (checked
//! on a 6.12 kernel, tests/vm/register.rs) is in docs/register.md, and each rule this
//! module relies on is at [`Registrar::create`] and [`Registrar::delete`].

pub mod eventheader;

use crate::messages;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use uevrec_parsers::EventFormat;
use uevrec_samples::register::strip_bracket_contents;
use uevrec_samples::{Flags, RegisterCommand, UserEvents};

use crate::capture::selector::Selector;

/// The single-format user_events system.
pub const SYSTEM: &str = "user_events";
/// The multi-format user_events system.
pub const MULTI_SYSTEM: &str = "user_events_multi";

/// How long a delete retries while the kernel answers EBUSY (a recorder's perf
/// descriptors are closed in the background after it stops).
pub const DELETE_RETRY: Duration = Duration::from_secs(10);

/// One event to pre-register.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// The command (name and fields), validated as the kernel would.
    pub cmd: RegisterCommand,
    /// A multi-format version (`user_events_multi:NAME.<hex>`).
    pub multi_format: bool,
}

impl Wanted {
    /// Parse `NAME FIELDS` (the `DIAG_IOCSREG` form: at most 511 bytes, because a
    /// producer must be able to register the same command).
    pub fn parse(text: &str, multi_format: bool) -> Result<Wanted, RegError> {
        let text = text.trim();
        if text.starts_with("u:") || text.starts_with("-:") {
            return Err(RegError::Usage(format!(
                "`{text}`: give the event as `NAME FIELDS` without the dynamic_events prefix"
            )));
        }
        let cmd = RegisterCommand::parse(text).map_err(|e| RegError::Refused {
            command: text.to_string(),
            why: e.to_string(),
        })?;
        Ok(Wanted { cmd, multi_format })
    }

    /// The command text (canonical: one space after each `;`).
    pub fn text(&self) -> String {
        self.cmd.to_string()
    }

    /// A selector that matches this event's tracepoint(s).
    pub fn selector(&self) -> Selector {
        let text = if self.multi_format {
            format!("{MULTI_SYSTEM}:{}.*", glob_escape(&self.cmd.name))
        } else {
            format!("{SYSTEM}:{}", glob_escape(&self.cmd.name))
        };
        text.parse().unwrap_or_else(|_| {
            // A name the selector grammar cannot hold: every user event (still attaches it).
            format!("{SYSTEM}:*").parse().expect("a valid selector")
        })
    }
}

/// `name` with glob metacharacters escaped (`[*]`), as a selector matches it literally.
fn glob_escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '*' | '?' | '[' | ']' => {
                out.push('[');
                out.push(c);
                out.push(']');
            }
            _ => out.push(c),
        }
    }
    out
}

/// Why a registration, deletion or emit failed; every message says the fix.
#[derive(Debug, thiserror::Error)]
pub enum RegError {
    /// A bad argument.
    #[error("{0}")]
    Usage(String),
    /// The command breaks a kernel rule (checked before it is sent).
    #[error("the kernel refuses `{command}`: {why}")]
    Refused {
        /// The command text.
        command: String,
        /// The rule and the offending field.
        why: String,
    },
    /// The name exists with other fields.
    #[error(
        "event `{name}` already exists with other fields: existing `{existing}`, requested \
         `{requested}`. A producer registering one of them gets EADDRINUSE. Use the existing \
         fields, another name, or --multi-format (a separate version per format); delete the \
         old one with `uevrec unregister '{name} {existing}'` once nothing uses it"
    )]
    OtherFormat {
        /// The event name.
        name: String,
        /// The fields it exists with.
        existing: String,
        /// The fields asked for.
        requested: String,
    },
    /// No privileges.
    #[error(
        "{what}: {source}; persistent user_events need root or CAP_PERFMON plus write access \
         to tracefs (run as root, or `setcap cap_perfmon+ep` and make {path} writable)"
    )]
    Permission {
        /// What was being done.
        what: String,
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// Still in use at delete.
    #[error(
        "cannot delete `{command}`: it is still in use (EBUSY) by a producer or a recorder \
         (tried for {secs} s). Stop them (see user_events_status), then run `uevrec \
         unregister '{command}'`"
    )]
    Busy {
        /// The command.
        command: String,
        /// How long it was retried.
        secs: u64,
    },
    /// No event with exactly these fields.
    #[error(
        "no event `{command}` to delete: dynamic_events deletes an event only with its exact \
         fields; the user_events now: {listed}"
    )]
    NotFound {
        /// The command.
        command: String,
        /// What dynamic_events lists for that name.
        listed: String,
    },
    /// The kernel has no user_events.
    #[error(
        "this kernel has no user_events ({0} is missing): pre-registration needs \
         CONFIG_USER_EVENTS=y (Linux 6.4+; persistent events 6.5+, multi-format 6.10+)"
    )]
    NoUserEvents(PathBuf),
    /// Any other kernel error.
    #[error("{what}: {source}")]
    Kernel {
        /// What was being done.
        what: String,
        /// The error.
        source: io::Error,
    },
}

/// Whether this run created an event or found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Created now: this run owns it and deletes it at the end.
    Created,
    /// Existed already with the same fields: never deleted by this run.
    Existed,
}

/// Creates and deletes persistent user_events under one tracefs.
#[derive(Debug, Clone)]
pub struct Registrar {
    root: PathBuf,
}

impl Registrar {
    /// For the tracefs mounted at `root`; fails when the kernel has no user_events.
    pub fn new(root: &Path) -> Result<Registrar, RegError> {
        let data = root.join("user_events_data");
        if !data.exists() {
            return Err(RegError::NoUserEvents(data));
        }
        Ok(Registrar {
            root: root.to_path_buf(),
        })
    }

    /// The tracefs root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The existing tracepoints of `w`'s name in its system, with their formats:
    /// `NAME` for single-format, every `NAME.<hex>` for multi-format.
    pub fn existing(&self, w: &Wanted) -> Vec<(String, EventFormat)> {
        let system = if w.multi_format { MULTI_SYSTEM } else { SYSTEM };
        let dir = self.root.join("events").join(system);
        let mut names: Vec<String> = Vec::new();
        if w.multi_format {
            let prefix = format!("{}.", w.cmd.name);
            if let Ok(entries) = std::fs::read_dir(&dir) {
                for e in entries.flatten() {
                    let n = e.file_name().to_string_lossy().into_owned();
                    if let Some(hex) = n.strip_prefix(&prefix)
                        && !hex.is_empty()
                        && hex.bytes().all(|b| b.is_ascii_hexdigit())
                    {
                        names.push(n);
                    }
                }
            }
        } else if dir.join(&w.cmd.name).is_dir() {
            names.push(w.cmd.name.clone());
        }
        names.sort();
        names
            .into_iter()
            .filter_map(|n| {
                let text = std::fs::read_to_string(dir.join(&n).join("format")).ok()?;
                let f = uevrec_parsers::parse_format(&text).ok()?;
                Some((n, f))
            })
            .collect()
    }

    /// Create `w` as a persistent event unless it exists with the same fields (then it is
    /// left alone: [`Outcome::Existed`]). An existing event of that name with other fields
    /// is [`RegError::OtherFormat`] (single-format only: multi-format adds a version).
    ///
    /// Writing `u:` for an event that already exists with the same fields succeeds and
    /// creates nothing, so whether *this* run created an event is decided by looking
    /// first. A producer that later registers the same name with other fields gets
    /// EADDRINUSE. Multi-format versions (`user_events_multi:NAME.<hex>`) are created with
    /// DIAG_IOCSREG and `USER_EVENT_REG_PERSIST | USER_EVENT_REG_MULTI_FORMAT`
    /// (`dynamic_events` has no multi-format form).
    pub fn create(&self, w: &Wanted) -> Result<Outcome, RegError> {
        let existing = self.existing(w);
        if existing.iter().any(|(_, f)| same_fields(&w.cmd, f)) {
            return Ok(Outcome::Existed);
        }
        if !w.multi_format
            && let Some((_, f)) = existing.first()
        {
            return Err(RegError::OtherFormat {
                name: w.cmd.name.clone(),
                existing: fields_text(f),
                requested: fields_of(&w.cmd),
            });
        }
        if w.multi_format {
            self.create_multi(w)?;
        } else {
            self.write_dynamic_events(&format!("u:{}", w.text()))
                .map_err(|e| self.classify(e, w, "creating"))?;
        }
        if self.existing(w).iter().any(|(_, f)| same_fields(&w.cmd, f)) {
            Ok(Outcome::Created)
        } else {
            Err(RegError::Kernel {
                what: format!("creating `{}`", w.text()),
                source: io::Error::other(
                    "the kernel accepted the command but no tracepoint with these fields appeared",
                ),
            })
        }
    }

    /// A multi-format version: DIAG_IOCSREG with PERSIST | MULTI_FORMAT, then unregister
    /// the enable word (the event stays: it is persistent).
    fn create_multi(&self, w: &Wanted) -> Result<(), RegError> {
        let events = UserEvents::open_in(&self.root).map_err(|e| self.classify(e, w, "opening"))?;
        let ev = events
            .register(&w.cmd, Flags::PERSIST.union(Flags::MULTI_FORMAT))
            .map_err(|e| self.classify(e, w, "registering"))?;
        ev.unregister().map_err(|source| RegError::Kernel {
            what: format!("unregistering the enable word of `{}`", w.text()),
            source,
        })
    }

    /// Delete `w` (its exact fields; for multi-format that one version) with `-:` on
    /// `dynamic_events`, retrying for `retry` while the kernel answers EBUSY.
    ///
    /// `-:NAME FIELDS` deletes exactly that event (the fields must match; `-:NAME` alone is
    /// ENOENT), EBUSY while a producer or recorder still uses it. One multi-format version
    /// is deleted this way too, as the kernel's user_events documentation says
    /// (DIAG_IOCSDEL by name would try every version).
    pub fn delete(&self, w: &Wanted, retry: Duration) -> Result<(), RegError> {
        let line = format!("-:{}", w.text());
        // A retry past what an Instant holds never ends.
        let end = Instant::now().checked_add(retry);
        loop {
            match self.write_dynamic_events(&line) {
                Ok(()) => return Ok(()),
                Err(e)
                    if e.raw_os_error() == Some(libc::EBUSY)
                        && end.is_none_or(|end| Instant::now() < end) =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => {
                    return Err(match e.raw_os_error() {
                        Some(libc::EBUSY) => RegError::Busy {
                            command: w.text(),
                            secs: retry.as_secs(),
                        },
                        Some(libc::ENOENT) => RegError::NotFound {
                            command: w.text(),
                            listed: self.listed(&w.cmd.name),
                        },
                        _ => self.classify(e, w, "deleting"),
                    });
                }
            }
        }
    }

    /// The `u:` lines of `dynamic_events` for `name` (every user event, persistent or not,
    /// as registered), joined for messages.
    pub fn listed(&self, name: &str) -> String {
        let lines = self.dynamic_events_lines(name);
        if lines.is_empty() {
            format!("none named `{name}`")
        } else {
            lines
                .iter()
                .map(|l| format!("`{l}`"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    }

    /// The commands `dynamic_events` lists for `name` (without the `u:`).
    pub fn dynamic_events_lines(&self, name: &str) -> Vec<String> {
        let text = std::fs::read_to_string(self.root.join("dynamic_events")).unwrap_or_default();
        text.lines()
            .filter_map(|l| l.strip_prefix("u:"))
            .filter(|l| l.split(' ').next() == Some(name))
            .map(str::to_string)
            .collect()
    }

    fn write_dynamic_events(&self, line: &str) -> io::Result<()> {
        let path = self.root.join("dynamic_events");
        let mut f = OpenOptions::new().append(true).open(&path)?;
        // One write() per command: the kernel parses each write on its own.
        f.write_all(format!("{line}\n").as_bytes())
    }

    /// A kernel error while `what`-ing `w`, with its fix.
    fn classify(&self, e: io::Error, w: &Wanted, what: &str) -> RegError {
        let what = format!("{what} `{}`", w.text());
        match e.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => RegError::Permission {
                what,
                path: self.root.join("dynamic_events"),
                source: e,
            },
            Some(libc::EADDRINUSE) => RegError::OtherFormat {
                name: w.cmd.name.clone(),
                existing: self.listed(&w.cmd.name),
                requested: fields_of(&w.cmd),
            },
            Some(libc::EINVAL) => RegError::Refused {
                command: w.text(),
                why: format!(
                    "EINVAL ({e}); uevrec found no broken rule, so this kernel is stricter \
                     (multi-format needs Linux 6.10+, persistent events 6.5+)"
                ),
            },
            _ => RegError::Kernel { what, source: e },
        }
    }
}

/// Whether the format file `f` has exactly `cmd`'s fields (names, types without the
/// kernel's garbage array lengths, offsets, sizes).
pub fn same_fields(cmd: &RegisterCommand, f: &EventFormat) -> bool {
    let want = cmd.event_format(f.id);
    want.fields.len() == f.fields.len()
        && want.fields.iter().zip(&f.fields).all(|(a, b)| {
            a.name == b.name
                && a.offset == b.offset
                && a.size == b.size
                && strip_bracket_contents(&a.type_text) == strip_bracket_contents(&b.type_text)
        })
}

/// The fields of `cmd` as text (`u32 a; char[8] b`).
pub fn fields_of(cmd: &RegisterCommand) -> String {
    let text = cmd.to_string();
    text.split_once(' ')
        .map_or(String::new(), |(_, f)| f.to_string())
}

/// The fields of a format file as register-command text (`u32 a; char[8] b`): the
/// array length from `size:`, a struct's size appended.
pub fn fields_text(f: &EventFormat) -> String {
    f.fields
        .iter()
        .map(field_decl)
        .collect::<Vec<_>>()
        .join("; ")
}

/// One format-file field as a register-command field.
pub fn field_decl(field: &uevrec_parsers::Field) -> String {
    use uevrec_parsers::FieldKind;
    let t = strip_bracket_contents(&field.type_text);
    match &field.kind {
        FieldKind::FixedArray { elem, count } => {
            let base = t.trim_end_matches("[]");
            let _ = elem;
            format!("{base}[{count}] {}", field.name)
        }
        FieldKind::Struct { .. } => format!("{t} {} {}", field.name, field.size),
        _ => format!("{t} {}", field.name),
    }
}

/// The events one run pre-registered; at the end (or when dropped, whatever the exit
/// path) it deletes exactly those it created, unless kept.
#[derive(Debug)]
pub struct Registered {
    registrar: Option<Registrar>,
    created: Vec<Wanted>,
    keep: bool,
    quiet: bool,
}

impl Registered {
    /// Nothing registered.
    pub fn none() -> Registered {
        Registered {
            registrar: None,
            created: Vec::new(),
            keep: false,
            quiet: true,
        }
    }

    /// Create every event of `wanted` (in order). On an error the ones created so far are
    /// deleted again (unless `keep`) before the error is returned.
    pub fn create_all(
        registrar: Registrar,
        wanted: &[Wanted],
        keep: bool,
        quiet: bool,
    ) -> Result<Registered, RegError> {
        let mut out = Registered {
            registrar: Some(registrar),
            created: Vec::new(),
            keep,
            quiet,
        };
        for w in wanted {
            let reg = out.registrar.as_ref().expect("set above");
            match reg.create(w)? {
                Outcome::Created => {
                    out.note(&format!("registered `{}`", w.text()));
                    out.created.push(w.clone());
                }
                Outcome::Existed => out.note(&format!(
                    "`{}` exists already: attached, and left in place at the end",
                    w.text()
                )),
            }
        }
        Ok(out)
    }

    /// The events this run created.
    pub fn created(&self) -> &[Wanted] {
        &self.created
    }

    /// Delete what this run created (unless kept); the errors, each with its fix.
    pub fn finish(&mut self) -> Vec<RegError> {
        let Some(reg) = self.registrar.take() else {
            return Vec::new();
        };
        let created = std::mem::take(&mut self.created);
        if self.keep {
            for w in &created {
                self.note(&format!(
                    "kept `{}` (--keep-registered; `uevrec unregister '{}'` deletes it)",
                    w.text(),
                    w.text()
                ));
            }
            return Vec::new();
        }
        let mut errors = Vec::new();
        for w in created.iter().rev() {
            match reg.delete(w, DELETE_RETRY) {
                Ok(()) => self.note(&format!("unregistered `{}`", w.text())),
                Err(e) => errors.push(e),
            }
        }
        errors
    }

    fn note(&self, text: &str) {
        if !self.quiet {
            messages::print(format_args!("uevrec: {text}\n"));
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        for e in self.finish() {
            messages::print(format_args!("uevrec: error: {e}\n"));
        }
    }
}

/// Read a `--register-file`: one `NAME FIELDS` per line; blank lines and lines starting
/// with `#` are skipped. Errors name the file and line.
pub fn read_register_file(path: &Path, multi_format: bool) -> Result<Vec<Wanted>, RegError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        RegError::Usage(format!(
            "--register-file {}: {e}; give a readable file with one `NAME FIELDS` per line",
            path.display()
        ))
    })?;
    let mut out = Vec::new();
    for (i, line) in (1u64..).zip(text.lines()) {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let w = Wanted::parse(line, multi_format)
            .map_err(|e| RegError::Usage(format!("{} line {i}: {e}", path.display())))?;
        out.push(w);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wanted_parse_checks_kernel_rules_and_length() {
        let w = Wanted::parse("ev u32 a;char[8] b", false).unwrap();
        assert_eq!(w.text(), "ev u32 a; char[8] b");
        assert_eq!(w.selector().to_string(), "user_events:ev");
        let e = Wanted::parse("ev long x", false).unwrap_err().to_string();
        assert!(e.contains("`long`") && e.contains("s64"), "{e}");
        let long = format!("{} u32 a", "n".repeat(600));
        let e = Wanted::parse(&long, false).unwrap_err().to_string();
        assert!(e.contains("at most 511"), "{e}");
        assert!(Wanted::parse("u:ev u32 a", false).is_err());
        let m = Wanted::parse("ev u32 a", true).unwrap();
        assert_eq!(m.selector().to_string(), "user_events_multi:ev.*");
    }

    #[test]
    fn format_file_fields_round_trip_to_commands() {
        let cmd = RegisterCommand::parse(
            "ev u32 a; char[8] b; unsigned char[3] c; __data_loc char[] d; __rel_loc u8[] e; struct foo f 12; s64 g",
        )
        .unwrap();
        // What the kernel prints: garbage inside the brackets of fixed arrays.
        let text = cmd
            .expected_format_file(5)
            .replace("char b[]", "char b[1055984226]");
        let f = uevrec_parsers::parse_format(&text).unwrap();
        assert!(same_fields(&cmd, &f));
        assert_eq!(fields_text(&f), fields_of(&cmd));
        let other = RegisterCommand::parse("ev u32 a; char[9] b").unwrap();
        assert!(!same_fields(&other, &f));
    }

    #[test]
    fn register_file_skips_comments_and_names_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("events");
        std::fs::write(&p, "# comment\n\nev1 u32 a\n  ev2 u64 b  \n").unwrap();
        let got = read_register_file(&p, false).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].text(), "ev2 u64 b");
        std::fs::write(&p, "ev1 u32 a\nev2 long b\n").unwrap();
        let e = read_register_file(&p, false).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("long"), "{e}");
    }
}
