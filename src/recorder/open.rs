//! Opening the backend a session asks for (perf rings, a tracefs instance, or the
//! instance's page spool of `--raw-format trace-dat`) and running the session on it.
//! Here, outside crate::capture::session, so the backends and the session never import each
//! other: the backends implement [`crate::capture::backend::Backend`], the session drives one
//! ([`session::run_with`]), and this module is the only one that knows both.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use crate::capture::backend::BackendKind;
use crate::capture::ftrace::named::Recipe;
use crate::capture::ftrace::{FtraceBackend, FtraceOptions, SpoolBackend};
use crate::capture::perf::{self, PerfBackend, Rings};
use crate::capture::session::filter::ThreadFilter;
use crate::capture::session::{self, LiveStats, SessionConfig, SessionError, Summary};
use crate::capture::staging::StageSender;
use crate::capture::tracefs::Tracefs;
use crate::system::fd_limit::{self, Nofile};

/// Open `config`'s backend, then attach and record until `stop` (as
/// [`session::run_with`] says). Setup errors (before the first attach) return `Err`.
pub fn run_session(
    config: &SessionConfig,
    out: &StageSender<'_>,
    stop: &AtomicBool,
    stats: &LiveStats,
) -> Result<Summary, SessionError> {
    let tracefs = match &config.tracefs {
        Some(t) => t.clone(),
        None => Tracefs::discover(None)?,
    };
    if config.stacks.is_some() && config.backend == BackendKind::Ftrace {
        return Err(SessionError::Stacks(
            "call stacks (-g, --call-graph) need --backend perf: the ftrace backend's \
             stack records are not supported yet (docs/stacks.md, \"Not yet\")",
        ));
    }
    let cpus = perf::online_cpus().map_err(SessionError::Cpus)?;
    if let (BackendKind::Ftrace, Some(plan)) = (config.backend, &config.spool) {
        let root = tracefs.root().to_owned();
        let (mut backend, notes) = SpoolBackend::open(&root, &cpus, &ftrace_options(config), plan)?;
        print_notes(notes);
        return session::run_with(&mut backend, tracefs, None, config, out, stop, stats);
    }
    if config.backend == BackendKind::Ftrace {
        let mut backend = open_ftrace(tracefs.root(), &cpus, config)?;
        return session::run_with(&mut backend, tracefs, None, config, out, stop, stats);
    }
    // The soft limit goes up to the hard one now; the hard one as events come (rescan).
    let nofile = Nofile::new().ok().map(|mut n| {
        n.ensure(fd_limit::needed(0, cpus.len()));
        n
    });
    let tracking = if config.context {
        perf::Tracking {
            tasks: true,
            cgroups: true,
            stacks: config.stacks,
        }
    } else {
        perf::Tracking {
            stacks: config.stacks,
            ..perf::Tracking::NONE
        }
    };
    let rings = Rings::open(&cpus, config.buffer_pages.get(), tracking)
        .map_err(|e| session::perf_error(e, config.buffer_pages.get()))?;
    let mut backend = PerfBackend::new(rings);
    session::run_with(&mut backend, tracefs, nofile, config, out, stop, stats)
}

/// The tracefs-instance backend for a session of `config` on the `cpus` of tracefs
/// `root`; its notes (stale instances found) go to standard error.
fn open_ftrace(
    root: &Path,
    cpus: &[u32],
    config: &SessionConfig,
) -> Result<FtraceBackend, SessionError> {
    let (backend, notes) = FtraceBackend::open(root, cpus, &ftrace_options(config))?;
    print_notes(notes);
    Ok(backend)
}

/// The instance options of a session of `config`: its ring size and thread filters.
fn ftrace_options(config: &SessionConfig) -> FtraceOptions {
    let (only_threads, exclude_threads) = match ThreadFilter::of(config) {
        ThreadFilter::Only(t) => (Some(t), Vec::new()),
        ThreadFilter::Exclude(t) => (None, t),
        ThreadFilter::All => (None, Vec::new()),
    };
    let named = config.instance.clone().map(|spec| {
        let recipe = Recipe {
            events: {
                let mut e: Vec<String> = config.selectors.iter().map(ToString::to_string).collect();
                e.sort();
                e.dedup();
                e
            },
            filter: config.filter.clone(),
            pid: config.pid,
            ring_kb: 0,
            context: config.context,
        };
        (spec, recipe)
    });
    FtraceOptions {
        buffer_bytes: (config.buffer_pages.get() * perf::page_size()) as u64,
        only_threads,
        exclude_threads,
        named,
    }
}

/// Print an instance's setup notes (stale instances found) on standard error.
fn print_notes(notes: Vec<String>) {
    for msg in notes {
        crate::messages::print(format_args!("uevrec: {msg}\n"));
    }
}
