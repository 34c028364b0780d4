//! Messages to standard error, from one place: every layer that says something on
//! stderr (the session's notes, the ftrace instance's, delivery's, the flight
//! recorder's, the CLI's) calls [`print()`] or [`error()`]. A leaf: it imports nothing
//! of the crate.

use std::io::Write;

/// Write to stderr, ignoring failure (unlike `eprintln!`, which panics on a closed
/// stderr).
pub fn print(args: std::fmt::Arguments<'_>) {
    let _ = std::io::stderr().write_fmt(args);
}

/// `uevrec: error: MSG` on stderr.
pub fn error(msg: &dyn std::fmt::Display) {
    print(format_args!("uevrec: error: {msg}\n"));
}
