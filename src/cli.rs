//! Command line (in progress).

/// Run the command line; returns the exit status.
pub fn main() -> i32 {
    0
}
