//! Messages to standard error, from one place: every module that says something on
//! stderr while recording (the session's notes, the ftrace instance's, delivery's, the
//! flight recorder's, the CLI's) calls [`print()`]. A leaf: it imports nothing of the crate.

use std::io::Write;

/// Write to stderr, ignoring failure (unlike `eprintln!`, which panics on a closed
/// stderr).
pub fn print(args: std::fmt::Arguments<'_>) {
    let _ = std::io::stderr().write_fmt(args);
}
