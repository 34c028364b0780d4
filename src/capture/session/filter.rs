//! Kernel filters: the expression set on every attachment ([`expression`]), and the
//! kernel's own words when it refuses one ([`complaint`]). The kernel applies filters
//! (`PERF_EVENT_IOC_SET_FILTER`) before a record reaches the ring.

use std::fs;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::SessionConfig;
use super::procfs::threads;
use crate::capture::tracefs::{Tracefs, read_once};

/// The filter expression for a new attachment of `system:event` (of `format`); None for
/// none. It is the `&&` of: the user's `--filter` (for the trigger events of a flight
/// recording, `--trigger-filter` instead), the `--where` terms pushed down for it
/// ([`crate::capture::pushdown`]), then `common_pid == PID` for `--pid` (the thread id, as
/// the kernel's `common_pid` is), else (unless `include_self`) `common_pid != TID` for each
/// of uevrec's threads at attach time. Threads started later are caught by a second check
/// in the stager: samples whose process id is uevrec's are not staged. Without
/// `thread_terms` (a backend that filters threads itself: ftrace's `set_event_pid`,
/// `set_event_notrace_pid`, given the same thread lists, [`ThreadFilter`]) only the user's
/// `--filter` (or `--trigger-filter`).
pub(super) fn expression(
    config: &SessionConfig,
    system: &str,
    event: &str,
    format: &uevrec_parsers::EventFormat,
    thread_terms: bool,
) -> Option<String> {
    let mut terms = Vec::new();
    if let Some(f) = user_expression(config, system, event) {
        terms.push(format!("({f})"));
    }
    // A flight recording's trigger events take only `--trigger-filter`.
    if !config.triggers.iter().any(|t| t.matches(system, event)) {
        terms.extend(
            config
                .pushed
                .iter()
                .filter_map(|t| t.for_event(system, event, format)),
        );
    }
    if thread_terms {
        match ThreadFilter::of(config) {
            ThreadFilter::Only(tids) => {
                let alts: Vec<String> = tids.iter().map(|t| format!("common_pid == {t}")).collect();
                terms.push(if alts.len() == 1 {
                    alts[0].clone()
                } else {
                    format!("({})", alts.join(" || "))
                });
            }
            ThreadFilter::Exclude(own) => {
                terms.extend(own.iter().map(|tid| format!("common_pid != {tid}")));
            }
            ThreadFilter::All => {}
        }
    }
    (!terms.is_empty()).then(|| terms.join(" && "))
}

/// The user's own part of [`expression`] for `system:event`: `--filter`, or
/// `--trigger-filter` for the trigger events of a flight recording; None when empty.
pub(super) fn user_expression<'c>(
    config: &'c SessionConfig,
    system: &str,
    event: &str,
) -> Option<&'c str> {
    let trigger = config.triggers.iter().any(|t| t.matches(system, event));
    let user = if trigger {
        &config.trigger_filter
    } else {
        &config.filter
    };
    user.as_deref().map(str::trim).filter(|f| !f.is_empty())
}

/// Which threads a session records, by thread id (the kernel's `common_pid`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ThreadFilter {
    /// `--pid`: the process's threads now (or the number itself when it has none).
    Only(Vec<u32>),
    /// Everything but uevrec's own threads now.
    Exclude(Vec<u32>),
    /// Everything (`--include-self`).
    All,
}

impl ThreadFilter {
    /// The threads `config` asks for, as of now.
    pub(crate) fn of(config: &SessionConfig) -> ThreadFilter {
        if let Some(pid) = config.pid {
            let tids = threads(&pid.to_string()).unwrap_or_default();
            if tids.is_empty() {
                ThreadFilter::Only(vec![pid as u32])
            } else {
                ThreadFilter::Only(tids)
            }
        } else if !config.include_self {
            ThreadFilter::Exclude(threads("self").unwrap_or_else(|| vec![std::process::id()]))
        } else {
            ThreadFilter::All
        }
    }
}

static INSTANCE_SEQ: AtomicUsize = AtomicUsize::new(0);

/// The kernel's complaint about a refused filter on `system:event`: the expression it
/// refused and its parse error (the expression with a caret under the fault). The user's
/// own expression (`user`) is tried first, so the caret points into what the user typed,
/// not into uevrec's thread terms; only when the kernel takes that alone is the whole
/// expression `full` tried. When the kernel refuses an expression the ioctl says only
/// EINVAL, so the expression is repeated into the event's `filter` file of a private
/// instance (`instances/uevrec-<pid>-<n>`, which leaves the global tracing state alone)
/// and the kernel's parse error is read from there.
pub(super) fn complaint(
    tracefs: &Tracefs,
    system: &str,
    event: &str,
    user: Option<&str>,
    full: &str,
) -> (String, String) {
    let shown = user.unwrap_or(full).to_string();
    let fallback = |expr: String| (expr, complaint_fallback(tracefs, system, event));
    let seq = INSTANCE_SEQ.fetch_add(1, Ordering::Relaxed);
    let inst = tracefs
        .root()
        .join("instances")
        .join(format!("{}-{seq}", crate::capture::ftrace::name_prefix().0));
    if fs::create_dir(&inst).is_err() {
        return fallback(shown);
    }
    let file = inst.join("events").join(system).join(event).join("filter");
    let refused = user.into_iter().chain([full]).find_map(|expr| {
        // Accepted by ftrace: not this one (or the refusal was perf-specific).
        fs::write(&file, expr).err()?;
        let text = read_once(&file).ok()?.trim_end().to_string();
        (!text.is_empty()).then(|| (expr.to_string(), format!("\n{text}")))
    });
    let _ = fs::remove_dir(&inst);
    refused.unwrap_or_else(|| fallback(shown))
}

/// What to say when the kernel's parse error is not available.
pub(super) fn complaint_fallback(tracefs: &Tracefs, system: &str, event: &str) -> String {
    let format = tracefs.event_dir(system, event).join("format");
    format!("EINVAL (see the field names in {})", format.display())
}

#[cfg(test)]
mod tests {
    use super::*;
    use uevrec_parsers::EventFormat;

    /// A format for the tests that push no `--where` terms (any will do).
    fn any_format() -> EventFormat {
        uevrec_parsers::eventheader::tracepoint_format("p_L1K1", 1)
    }

    #[test]
    fn filter_terms() {
        let mut config = SessionConfig {
            filter: Some(" id == 110 ".into()),
            pid: Some(99_999_999),
            ..Default::default()
        };
        assert_eq!(
            expression(&config, "s", "e", &any_format(), true).as_deref(),
            Some("(id == 110) && common_pid == 99999999")
        );
        assert_eq!(
            expression(&config, "s", "e", &any_format(), false).as_deref(),
            Some("(id == 110)")
        );
        // A process id covers every thread of that process (this test runs in a thread).
        config.pid = Some(std::process::id() as i32);
        let f = expression(&config, "s", "e", &any_format(), true).unwrap();
        assert!(f.starts_with("(id == 110) && (common_pid == "), "{f}");
        assert!(f.contains(" || "), "{f}");
        config.pid = None;
        let f = expression(&config, "s", "e", &any_format(), true).unwrap();
        assert!(f.starts_with("(id == 110) && common_pid != "), "{f}");
        assert!(
            f.contains(&format!("common_pid != {}", std::process::id())),
            "{f}"
        );
        config.include_self = true;
        assert_eq!(
            expression(&config, "s", "e", &any_format(), true).as_deref(),
            Some("(id == 110)")
        );
        config.filter = None;
        assert_eq!(expression(&config, "s", "e", &any_format(), true), None);
    }

    #[test]
    fn trigger_events_get_the_trigger_filter_instead() {
        let config = SessionConfig {
            filter: Some("id == 110".into()),
            triggers: vec!["sched:sched_process_*".parse().unwrap()],
            trigger_filter: Some("pid == 7".into()),
            include_self: true,
            ..Default::default()
        };
        let f = |s, e| expression(&config, s, e, &any_format(), true);
        assert_eq!(
            f("sched", "sched_process_exec").as_deref(),
            Some("(pid == 7)")
        );
        assert_eq!(
            f("raw_syscalls", "sys_enter").as_deref(),
            Some("(id == 110)")
        );
        let config = SessionConfig {
            trigger_filter: None,
            ..config
        };
        assert_eq!(
            expression(&config, "sched", "sched_process_exec", &any_format(), true),
            None
        );
    }

    #[test]
    fn without_an_instance_the_complaint_names_the_format_file() {
        // A directory that is no tracefs: no instance can be made there.
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("events")).unwrap();
        let t = Tracefs::discover(Some(dir.path())).unwrap();
        let (expr, c) = complaint(&t, "s", "e", Some("x == 1"), "(x == 1) && common_pid != 1");
        assert_eq!(expr, "x == 1");
        assert_eq!(
            c,
            format!(
                "EINVAL (see the field names in {})",
                dir.path().join("events/s/e/format").display()
            )
        );
        assert!(!dir.path().join("instances").exists());
    }
}
