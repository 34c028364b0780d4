//! `uevrec top`: flags → a session and display options; [`crate::outputs::top`] runs them.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::Args;
use signal_hook::consts::{SIGINT, SIGTERM};

use super::{EXIT_ERROR, EXIT_OK, EXIT_OUTPUT_CLOSED, SessionArgs, values};
use crate::capture::backend::BackendKind;
use crate::capture::session::SessionConfig;
use crate::messages;
use crate::outputs::top::model::SortKey;
use crate::outputs::top::pods::GroupBy;
use crate::outputs::top::{Display, TopOptions};
use crate::pipeline::filter::Filter;

/// `uevrec top`.
#[derive(Debug, Args)]
pub struct TopArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub session: SessionArgs,
    /// How often the numbers are refreshed (one interval).
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = values::parse_positive_duration)]
    pub interval: Duration,
    /// Stop after this long (e.g. 10s, 1m).
    #[arg(long, value_name = "DUR", value_parser = values::parse_positive_duration)]
    pub duration: Option<Duration>,
    /// The first sort key (keys r, t, b, n and Tab change it).
    #[arg(long, value_enum, default_value_t = SortKey::Rate)]
    pub sort: SortKey,
    /// JSON lines (one per event and interval, then the totals) even when standard
    /// output is a terminal; they are the default when it is not.
    #[arg(long)]
    pub plain: bool,
    /// One row per event, or per Kubernetes pod (namespace/pod, the pod UID until the
    /// kubelet's log directories name it, "-" outside pods; docs/top.md).
    #[arg(long, value_enum, default_value_t = GroupBy::Event)]
    pub by: GroupBy,
    /// With --by pod: the kubelet's pod log directories (NAMESPACE_POD_UID).
    #[arg(long, value_name = "DIR", default_value = crate::capture::kubernetes::DEFAULT_POD_LOGS)]
    pub k8s_pod_logs: std::path::PathBuf,
    /// Count only the records for which the CEL condition EXPR holds over their decoded
    /// values, as `record --where` (docs/filtering.md; `SYSTEM:EVENT=EXPR` for the
    /// events a selector names; repeatable). The records of the events a condition
    /// applies to are decoded; those left out are counted in the header ("not kept")
    /// and the totals line's "not_kept", in no row.
    #[arg(long = "where", value_name = "EXPR", value_parser = values::parse_where)]
    pub where_rules: Vec<crate::pipeline::filter::WhereRule>,
    /// Count about RATIO of the records of the events SELECTOR names, as `record
    /// --sample` (the rest in "not kept").
    #[arg(long, value_name = "SELECTOR=RATIO[,by=KEY]")]
    pub sample: Vec<crate::pipeline::filter::SampleRule>,
    /// Count at most N records a second of the events SELECTOR names, BURST at once, as
    /// `record --rate-limit` (the rest in "not kept").
    #[arg(long, value_name = "SELECTOR=N/s[,BURST][,by=pid|pod]")]
    pub rate_limit: Vec<crate::pipeline::filter::RateRule>,
    /// With --by pod: the kubelet's container log links.
    #[arg(long, value_name = "DIR", default_value = crate::capture::kubernetes::DEFAULT_CONTAINER_LOGS)]
    pub k8s_container_logs: std::path::PathBuf,
}

/// Why `top` cannot take the call-stack flags given (`None`: it can): it counts call
/// paths by their functions' names, and writes no stack a line could name by id.
fn stacks_refused(stacks: &super::stacks::StackArgs) -> Option<&'static str> {
    if stacks.stack_ids {
        Some(
            "uevrec top counts call paths and writes no stack lines for --stack-ids to name: drop --stack-ids (docs/stacks.md)",
        )
    } else if stacks.no_symbolize && stacks.request().is_some() {
        Some(
            "uevrec top -g counts call paths by their functions' names: drop --no-symbolize (record -g --no-symbolize writes the addresses)",
        )
    } else {
        None
    }
}

/// `uevrec top`; returns the exit status.
pub fn top(args: &TopArgs) -> i32 {
    let display = if args.plain || !std::io::stdout().is_terminal() {
        Display::Lines
    } else {
        Display::Terminal
    };
    if let Some(why) = stacks_refused(&args.session.stacks) {
        messages::error(&why);
        return super::EXIT_USAGE;
    }
    let filter = Filter::new(
        args.where_rules.clone(),
        args.sample.clone(),
        args.rate_limit.clone(),
    );
    let config = match args.session.session_config() {
        // Nothing on standard error under the live view (it would scribble over the
        // screen): the session's messages show as the view's notice line.
        Ok(c) => SessionConfig {
            quiet: display == Display::Terminal,
            // Names come from /proc (crate::outputs::top); context records are tracked only for
            // the pods of --by pod and for --where (comm, cgroup, k8s_* conditions).
            context: args.by == GroupBy::Pod || filter.is_some(),
            pod_logs: crate::capture::kubernetes::PodLogDirs {
                pods: args.k8s_pod_logs.clone(),
                containers: args.k8s_container_logs.clone(),
            },
            ..c
        },
        Err(e) => {
            messages::error(&e);
            return EXIT_ERROR;
        }
    };
    if let Err(e) = super::record::check_where_fields(&args.where_rules, &config) {
        messages::error(&e);
        return super::EXIT_USAGE;
    }
    // SIGINT/SIGTERM only ask to stop: no forced exit, which would leave the terminal
    // in raw mode (in the view, Ctrl-C is a key, not a signal).
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, Arc::clone(&stop)) {
            messages::error(&format_args!("installing signal handlers: {e}"));
            return EXIT_ERROR;
        }
    }
    let opts = TopOptions {
        interval: args.interval,
        duration: args.duration,
        sort: args.sort,
        backend: match config.backend {
            BackendKind::Perf => "perf",
            BackendKind::Ftrace => "ftrace",
        },
        by: args.by,
        filter,
        stacks: crate::recorder::stack_options(&config),
    };
    let out = crate::recorder::top::run(&config, &opts, display, &stop);
    if let Err(e) = out.session {
        messages::error(&e);
        return EXIT_ERROR;
    }
    match out.display {
        Ok(()) => EXIT_OK,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => EXIT_OUTPUT_CLOSED,
        Err(e) => {
            let what = match display {
                Display::Terminal => "the terminal",
                Display::Lines => "standard output",
            };
            messages::error(&format_args!(
                "{what}: {e} (with standard output not a terminal, top prints JSON lines)"
            ));
            EXIT_ERROR
        }
    }
}
