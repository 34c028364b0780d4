//! Opening the backend a session asks for (perf rings, a tracefs instance, or the
//! instance's page spool of `--raw-format trace-dat`) and running the session on it.
//! Here, outside crate::capture::session, so the backends and the session never import each
//! other: the backends implement [`crate::capture::backend::Backend`], the session drives one
//! ([`session::run_with`]), and this module is the only one that knows both.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::capture::backend::BackendKind;
use crate::capture::ftrace::named::{self, Recipe};
use crate::capture::ftrace::{FtraceBackend, FtraceOptions, SpoolBackend};
use crate::capture::perf::{self, PerfBackend, Rings};
use crate::capture::session::filter::ThreadFilter;
use crate::capture::session::{self, LiveStats, SessionConfig, SessionError, Summary};
use crate::capture::staging::StageSender;
use crate::capture::staging::written::{Settled, Written};
use crate::capture::tracefs::Tracefs;
use crate::system::fd_limit::{self, Nofile};

/// Open `config`'s backend, then attach and record until `stop` (as
/// [`session::run_with`] says). Setup errors (before the first attach) return `Err`.
/// `written`: the writer's marks, when it keeps them (a named instance's page journal,
/// crate::capture::ftrace::journal).
pub fn run_session(
    config: &SessionConfig,
    out: &StageSender<'_>,
    stop: &AtomicBool,
    stats: &LiveStats,
    written: Option<Arc<Written>>,
) -> Result<Summary, SessionError> {
    let tracefs = match &config.tracefs {
        Some(t) => t.clone(),
        None => Tracefs::discover(None)?,
    };
    if let (Some(why), BackendKind::Ftrace) = (ftrace_refuses(config), config.backend) {
        return Err(SessionError::Stacks(why));
    }
    let cpus = perf::online_cpus().map_err(SessionError::Cpus)?;
    if let (BackendKind::Ftrace, Some(plan)) = (config.backend, &config.spool) {
        let root = tracefs.root().to_owned();
        let opts = ftrace_options(config, None);
        let (mut backend, notes) = SpoolBackend::open(&root, &cpus, &opts, plan)?;
        print_notes(notes);
        return session::run_with(&mut backend, tracefs, None, config, out, stop, stats);
    }
    if config.backend == BackendKind::Ftrace {
        let opts = ftrace_options(config, written);
        let (mut backend, notes) = FtraceBackend::open(tracefs.root(), &cpus, &opts)?;
        print_notes(notes);
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

/// The writer's marks of `config`'s named instance (`--backend ftrace --instance`, not
/// `--raw-format trace-dat`'s spool), so that its reader keeps a page journal: None
/// without one, or when the marks file cannot be made (said on standard error: a kill
/// then loses the records in flight, as without a journal).
pub fn writer_marks(config: &SessionConfig) -> Option<Arc<Written>> {
    let spec = config.instance.as_ref()?;
    if config.backend != BackendKind::Ftrace || config.spool.is_some() {
        return None;
    }
    let cpus = perf::online_cpus()
        .ok()
        .and_then(|c| c.iter().max().map(|&m| m as usize + 1))
        .unwrap_or(1);
    let path = named::written(&spec.name);
    let opened =
        std::fs::create_dir_all(named::STATE_DIR).and_then(|()| Written::open(&path, cpus));
    match opened {
        Ok(w) => {
            settle(config, spec, &w);
            Some(Arc::new(w))
        }
        Err(e) => {
            crate::messages::print(format_args!(
                "uevrec: {}: {e}; without it the records in flight when uevrec is killed are \
                 lost (docs/restarts.md)\n",
                path.display()
            ));
            None
        }
    }
}

/// Settle the batch a killed run of `spec` was writing ([`named::settle_written`]) and
/// say what was done to its file.
fn settle(config: &SessionConfig, spec: &named::NamedInstance, written: &Written) {
    let root = match &config.tracefs {
        Some(t) => t.root().to_owned(),
        None => match Tracefs::discover(None) {
            Ok(t) => t.root().to_owned(),
            // The session says what is wrong with tracefs.
            Err(_) => return,
        },
    };
    match named::settle_written(&root, spec, written) {
        Settled::Nothing | Settled::Landed => {}
        Settled::Cut { path, bytes } => crate::messages::print(format_args!(
            "uevrec: the run of instance {} killed while writing left {bytes} bytes of its \
             last batch in {}: cut off, and those records are written again here\n",
            spec.name,
            path.display()
        )),
        Settled::Unsettled { path, why } => crate::messages::print(format_args!(
            "uevrec: the run of instance {} was killed while writing to {} ({why}): the \
             records of that last batch are written again here, and some may be there \
             already\n",
            spec.name,
            path.display()
        )),
    }
}

/// The instance options of a session of `config`: its ring size, thread filters and
/// named instance (with the writer's marks `written`, its page journal).
fn ftrace_options(config: &SessionConfig, written: Option<Arc<Written>>) -> FtraceOptions {
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
        written: written.filter(|_| named.is_some()),
        named,
        stacks: config.stacks,
    }
}

/// Why the ftrace backend cannot take `config`'s call stacks (`None`: it can): the kernel
/// walks frame pointers only there (`dwarf` needs the perf backend's stack copies).
pub fn ftrace_refuses(config: &SessionConfig) -> Option<&'static str> {
    config.stacks?.dwarf.map(|_| {
        "--call-graph dwarf needs --backend perf: the ftrace backend's user stacks are the \
         kernel's frame-pointer walk (8 frames at most), with no stack copy to unwind; use \
         --backend perf for dwarf, or -g (--call-graph fp) with --backend ftrace"
    })
}

/// Print an instance's setup notes (stale instances found) on standard error.
fn print_notes(notes: Vec<String>) {
    for msg in notes {
        crate::messages::print(format_args!("uevrec: {msg}\n"));
    }
}
