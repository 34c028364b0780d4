//! `uevrec recover FILE`: the trace.dat of a killed `record --raw FILE --raw-format
//! trace-dat`, assembled from the metadata and per-CPU spools it left beside FILE
//! (crate::offline::recover).

use std::path::PathBuf;

use clap::Args;

use super::{EXIT_ERROR, EXIT_OK};
use crate::messages;
use crate::system::durable::FsyncPolicy;

/// `uevrec recover`.
#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// The trace.dat a killed `uevrec record --raw FILE --raw-format trace-dat` was
    /// writing (its hidden `.FILE.uevrec-meta` and `.FILE.cpuN.uevrec-spool` files are
    /// beside it). FILE must not exist; it appears whole when done, and the hidden files
    /// are removed.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Where tracefs is mounted (default: found in /proc/self/mounts): the kernel's
    /// process names and ids are read there when the machine was not restarted since.
    #[arg(long, env = "UEVREC_TRACEFS", value_name = "PATH")]
    pub tracefs: Option<PathBuf>,
    /// When FILE is synced to disk: batch (before it is renamed into place, the default),
    /// never, or an interval (the same as batch here: one file written once).
    #[arg(long, value_name = "never|batch|INTERVAL", default_value = "batch")]
    pub fsync: FsyncPolicy,
    /// No summary on standard error (errors are still printed).
    #[arg(short, long)]
    pub quiet: bool,
}

/// Run `uevrec recover`; the exit status.
pub fn recover(args: &RecoverArgs) -> i32 {
    crate::system::durable::set_policy(args.fsync);
    let tracefs = crate::capture::tracefs::Tracefs::discover(args.tracefs.as_deref())
        .ok()
        .map(|t| t.root().to_owned());
    match crate::offline::recover::recover(&args.file, tracefs.as_deref()) {
        Ok(r) => {
            if !args.quiet {
                for n in &r.notes {
                    messages::print(format_args!("uevrec: note: {n}\n"));
                }
                messages::print(format_args!(
                    "uevrec: recovered {}: {} ring pages of {} CPUs, {} event formats \
                     (`uevrec decode {}` reads its records and losses)\n",
                    r.path.display(),
                    r.pages,
                    r.cpus,
                    r.formats,
                    r.path.display()
                ));
            }
            EXIT_OK
        }
        Err(e) => {
            messages::error(&e);
            EXIT_ERROR
        }
    }
}
