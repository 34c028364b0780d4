//! The attach/detach/rescan state machine: keep the attached events in line with the
//! tracefs events the selectors match (late registration, vanished events, changed IDs,
//! events skipped and when to retry them), over any [`Backend`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::sync::Arc;

use uevrec_parsers::PreparedFormat;
use uevrec_parsers::split_multi_format;

use super::error::{SessionError, backend_error};
use super::stager::{Event, Stager};
use super::{LiveStats, SessionConfig, filter};
use crate::capture::backend::{AttachError, Backend, EventRef};
use crate::capture::selector::Selector;
use crate::capture::staging::{Closed, FormatSource, StageSender};
use crate::capture::tracefs::{Tracefs, TracefsError};
use crate::system::fd_limit::{self, Nofile};

/// Why a rescan ended early.
#[derive(Debug)]
pub(super) enum Halt {
    /// The formatter went away: the session ends.
    Closed,
    /// Privileges or setup problems that will not go away.
    Fatal(SessionError),
}

impl From<Closed> for Halt {
    fn from(_: Closed) -> Self {
        Halt::Closed
    }
}

/// What a rescan found (for the startup checks).
#[derive(Debug, Default)]
pub(super) struct Scan {
    /// The first filter refusal.
    pub(super) refused: Option<SessionError>,
    /// The `(system, event)` pairs the selectors matched.
    pub(super) events: Vec<(String, String)>,
}

/// The session's attach/detach bookkeeping.
pub(super) struct Attacher<'a> {
    pub(super) tracefs: Tracefs,
    pub(super) selectors: Vec<Selector>,
    config: &'a SessionConfig,
    /// `(system, event)` → slot in `Stager::events`.
    pub(super) attached: HashMap<(String, String), usize>,
    /// Events skipped (retried when the ID changes, or see [`Skip::fds`]).
    skipped: HashMap<(String, String), Skip>,
    /// Filter refusals explained so far (see [`MAX_COMPLAINTS`]).
    complaints: usize,
    /// The open-file limit, raised as events come (None when getrlimit failed).
    pub(super) nofile: Option<Nofile>,
    /// Events skipped during the current scan, by cause (reported on stderr after it).
    unattached: BTreeMap<String, usize>,
}

/// Why an event was skipped, for deciding when to try it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Skip {
    /// Its ID then.
    id: Option<u32>,
    /// For a lack of descriptors (EMFILE): the soft limit and the number of attached
    /// events then; retried once the limit is higher or fewer events are attached.
    fds: Option<(u64, usize)>,
}

/// How many filter refusals are explained with the kernel's parse error.
const MAX_COMPLAINTS: usize = 4;

/// Why one event could not be attached.
enum AttachFailure {
    /// The event vanished between listing and opening (not worth a notice).
    Vanished,
    /// Skipped with this message (a notice is written) and cause (for standard error).
    Skipped { msg: String, cause: Cause },
    /// The kernel refused the filter.
    Filter { expr: String, complaint: String },
    /// Privileges or setup problems that will not go away.
    Fatal(SessionError),
}

/// What made an attachment fail, as reported on standard error.
enum Cause {
    /// Not enough descriptors (EMFILE): the message names the limit.
    NoFds,
    /// Anything else, in words without the event's name.
    Other(String),
}

/// The cause of an OS error while attaching, for standard error.
fn os_cause(what: &str, e: &io::Error) -> Cause {
    match e.raw_os_error() {
        Some(libc::EMFILE) => Cause::NoFds,
        Some(libc::ENFILE) => Cause::Other(
            "the system's open-file table is full (ENFILE; see /proc/sys/fs/file-max)".into(),
        ),
        _ => Cause::Other(format!("{what}: {e}")),
    }
}

impl<'a> Attacher<'a> {
    /// Nothing attached yet; events are those of `tracefs` that `selectors` match.
    pub(super) fn new(
        tracefs: Tracefs,
        selectors: Vec<Selector>,
        config: &'a SessionConfig,
    ) -> Self {
        Attacher {
            tracefs,
            selectors,
            config,
            attached: HashMap::new(),
            skipped: HashMap::new(),
            complaints: 0,
            nofile: None,
            unattached: BTreeMap::new(),
        }
    }

    fn try_attach<B: Backend>(
        &mut self,
        backend: &mut B,
        system: &str,
        name: &str,
    ) -> Result<Event<B::Event>, AttachFailure> {
        let (format, text) = match self.tracefs.read_format_text(system, name) {
            Ok(f) => f,
            Err(TracefsError::NoSuchEvent { .. }) => return Err(AttachFailure::Vanished),
            Err(e @ TracefsError::Permission(_)) => return Err(AttachFailure::Fatal(e.into())),
            Err(e) => {
                let cause = match &e {
                    TracefsError::Io { source, .. } => os_cause("reading the format file", source),
                    _ => Cause::Other("the format file does not parse".into()),
                };
                let msg = e.to_string();
                return Err(AttachFailure::Skipped { msg, cause });
            }
        };
        let expr = filter::expression(
            self.config,
            system,
            name,
            &format,
            !backend.filters_threads(),
        );
        let event = EventRef {
            system,
            name,
            id: format.id,
        };
        let handle = backend
            .attach(event, expr.as_deref())
            .map_err(|e| match e {
                AttachError::Vanished => AttachFailure::Vanished,
                AttachError::Denied(e) => {
                    AttachFailure::Fatal(backend_error(e, self.config.buffer_pages.get()))
                }
                AttachError::FilterRefused(_) => {
                    let full = expr.as_deref().unwrap_or_default();
                    let user = filter::user_expression(self.config, system, name);
                    // Each complaint costs a tracefs instance; a few tell the story.
                    let n = self.complaints;
                    self.complaints += 1;
                    let (expr, complaint) = if n < MAX_COMPLAINTS {
                        filter::complaint(&self.tracefs, system, name, user, full)
                    } else {
                        let complaint = filter::complaint_fallback(&self.tracefs, system, name);
                        (user.unwrap_or(full).to_string(), complaint)
                    };
                    AttachFailure::Filter { expr, complaint }
                }
                AttachError::Failed(e) => AttachFailure::Skipped {
                    cause: os_cause(e.step(), e.os_error()),
                    msg: e.to_string(),
                },
            })?;
        let (base, format_id) = match split_multi_format(name) {
            // Multi-format versions live outside the single-format `user_events` system
            // (today in `user_events_multi`; the kernel may rename it, so any other system
            // counts). Kernel tracepoint names have no dots.
            Some((b, id)) if system != "user_events" => (b.to_string(), Some(id.to_string())),
            _ => (name.to_string(), None),
        };
        Ok(Event {
            system: system.into(),
            name: name.into(),
            prepared: Arc::new(PreparedFormat::new(
                &format,
                system,
                &base,
                format_id.as_deref(),
            )),
            source: Arc::new(FormatSource {
                system: system.into(),
                name: name.into(),
                text,
            }),
            key: format!("{system}:{name}"),
            handle,
            records: 0,
        })
    }

    /// Attach `system:name`; stages the notice. Returns Err only for fatal problems;
    /// `filter_refused` receives the first filter refusal.
    fn attach<B: Backend>(
        &mut self,
        backend: &mut B,
        st: &mut Stager<B::Event>,
        out: &StageSender<'_>,
        system: &str,
        name: &str,
        filter_refused: &mut Option<SessionError>,
    ) -> Result<bool, SessionError> {
        let key = format!("{system}:{name}");
        match self.try_attach(backend, system, name) {
            Ok(ev) => {
                if let Err(e) = backend.enable(&ev.handle) {
                    let cause = os_cause("cannot enable", e.os_error());
                    self.skip(st, system, name, &format!("cannot enable: {e}"), cause);
                    return Ok(false);
                }
                let keys = B::keys(&ev.handle);
                let msg = format!("id {}, {} CPUs", ev.prepared.format().id, backend.cpus());
                let slot = st
                    .events
                    .iter()
                    .position(Option::is_none)
                    .unwrap_or(st.events.len());
                for &k in keys {
                    st.by_key.insert(k, slot);
                }
                // A closed channel shows at the next flush, which ends the session.
                let _ = out.format(
                    &mut st.chunk,
                    slot,
                    Arc::clone(&ev.prepared),
                    Arc::clone(&ev.source),
                );
                st.summary
                    .records_per_event
                    .entry(ev.key.clone())
                    .or_default();
                if slot == st.events.len() {
                    st.events.push(Some(ev));
                } else {
                    st.events[slot] = Some(ev);
                }
                self.attached.insert((system.into(), name.into()), slot);
                self.skipped.remove(&(system.to_string(), name.to_string()));
                st.notice("attached", Some(&key), &msg);
                Ok(true)
            }
            Err(AttachFailure::Vanished) => Ok(false),
            Err(AttachFailure::Skipped { msg, cause }) => {
                self.skip(st, system, name, &msg, cause);
                Ok(false)
            }
            Err(AttachFailure::Filter { expr, complaint }) => {
                let msg = format!("the kernel refused the filter `{expr}`: {complaint}");
                let cause = Cause::Other(format!("the kernel refused the filter `{expr}`"));
                self.skip(st, system, name, &msg, cause);
                if filter_refused.is_none() {
                    *filter_refused = Some(SessionError::Filter {
                        expr,
                        event: key,
                        complaint,
                    });
                }
                Ok(false)
            }
            Err(AttachFailure::Fatal(e)) => Err(e),
        }
    }

    fn skip<E>(&mut self, st: &mut Stager<E>, system: &str, name: &str, msg: &str, cause: Cause) {
        let id = self.tracefs.read_id(system, name);
        let (fds, cause) = match cause {
            Cause::NoFds => {
                let soft = self.nofile.as_ref().map_or(0, |n| n.limits.soft);
                let cause = self.nofile.as_ref().map_or_else(
                    || "too many open files (raise the limit with ulimit -n)".to_string(),
                    Nofile::shortage,
                );
                (Some((soft, self.attached.len())), cause)
            }
            Cause::Other(c) => (None, c),
        };
        self.skipped
            .insert((system.into(), name.into()), Skip { id, fds });
        *self.unattached.entry(cause).or_default() += 1;
        st.notice("skipped", Some(&format!("{system}:{name}")), msg);
    }

    /// Whether an event skipped for lack of descriptors may fit now.
    fn fds_freed(&self, skip: &Skip) -> bool {
        let soft = self.nofile.as_ref().map_or(0, |n| n.limits.soft);
        skip.fds
            .is_some_and(|(was, attached)| soft > was || self.attached.len() < attached)
    }

    /// Make room for the descriptors of `events` events (see crate::system::fd_limit); a notice
    /// says when the limit went up.
    fn make_room<E>(&mut self, st: &mut Stager<E>, events: usize, cpus: usize) {
        let Some(nofile) = self.nofile.as_mut() else {
            return;
        };
        if let Some(r) = nofile.ensure(fd_limit::needed(events, cpus)) {
            let msg = format!(
                "open-file limit raised from {}/{} to {}/{} (soft/hard) for {events} events on \
                 {cpus} CPUs",
                r.from.soft, r.from.hard, r.to.soft, r.to.hard
            );
            st.notice("fd_limit", None, &msg);
        }
    }

    /// Say on standard error how many events this scan could not attach, once per cause
    /// (the `skipped` notices in the output name them).
    fn report_unattached(&mut self) {
        for (cause, n) in std::mem::take(&mut self.unattached) {
            let s = if n == 1 { "" } else { "s" };
            crate::messages::print(format_args!("uevrec: {n} event{s} not attached: {cause}\n"));
        }
    }

    /// Disable, drain, and forget the event in `slot`; its handle waits in
    /// `st.retired` for the end of the scan.
    fn detach<B: Backend>(
        &mut self,
        backend: &mut B,
        st: &mut Stager<B::Event>,
        out: &StageSender<'_>,
        stats: &LiveStats,
        slot: usize,
        reason: &str,
    ) -> Result<(), Closed> {
        let Some(ev) = st.events.get(slot).and_then(Option::as_ref) else {
            return Ok(());
        };
        backend.disable(&ev.handle);
        // Its records still in the buffers are staged with its slot before it goes.
        st.drain(backend, out, stats)?;
        let Some(ev) = st.events.get_mut(slot).and_then(Option::take) else {
            return Ok(());
        };
        for k in B::keys(&ev.handle) {
            st.by_key.remove(*k);
        }
        self.attached.remove(&(ev.system.clone(), ev.name.clone()));
        *st.summary
            .records_per_event
            .entry(ev.key.clone())
            .or_default() += ev.records;
        let msg = format!("{reason}; {} records", ev.records);
        st.notice("detached", Some(&ev.key), &msg);
        st.retired.push(ev.handle);
        Ok(())
    }

    /// The `(system, event)` pairs in tracefs that some selector matches.
    fn matching(&self) -> Result<Vec<(String, String)>, TracefsError> {
        let mut out = Vec::new();
        for system in self.tracefs.list_systems()? {
            if !self.selectors.iter().any(|s| s.matches_system(&system)) {
                continue;
            }
            for event in self.tracefs.list_system_events(&system)? {
                if self.selectors.iter().any(|s| s.matches(&system, &event)) {
                    out.push((system.clone(), event));
                }
            }
        }
        Ok(out)
    }

    /// Bring the attachments in line with tracefs: detach vanished events, re-attach
    /// those whose ID changed, attach new ones and retry skipped ones when that may help.
    pub(super) fn rescan<B: Backend>(
        &mut self,
        backend: &mut B,
        st: &mut Stager<B::Event>,
        out: &StageSender<'_>,
        stats: &LiveStats,
    ) -> Result<Scan, Halt> {
        let matching = match self.matching() {
            Ok(m) => m,
            Err(e @ TracefsError::Permission(_)) => return Err(Halt::Fatal(e.into())),
            Err(e) => {
                st.notice("rescan_failed", None, &e.to_string());
                return Ok(Scan::default());
            }
        };
        let mut refused = None;
        self.make_room(st, matching.len(), backend.cpus());
        let present: HashSet<&(String, String)> = matching.iter().collect();
        // Vanished events.
        let gone: Vec<usize> = self
            .attached
            .iter()
            .filter(|(k, _)| !present.contains(k))
            .map(|(_, &slot)| slot)
            .collect();
        for slot in gone {
            self.detach(backend, st, out, stats, slot, "event disappeared")?;
        }
        // Their descriptors go before new ones are opened.
        st.release_retired(backend);
        for key @ (system, name) in &matching {
            if let Some(&slot) = self.attached.get(key) {
                let now = self.tracefs.read_id(system, name);
                let was = st.events[slot].as_ref().map(|e| e.prepared.format().id);
                if now.is_some() && now != was {
                    let why = "ID changed; re-attaching with the new format";
                    self.detach(backend, st, out, stats, slot, why)?;
                } else {
                    continue;
                }
            } else if let Some(skip) = self.skipped.get(key) {
                if skip.id == self.tracefs.read_id(system, name) && !self.fds_freed(skip) {
                    continue;
                }
            }
            if let Err(e) = self.attach(backend, st, out, system, name, &mut refused) {
                self.report_unattached();
                return Err(Halt::Fatal(e));
            }
        }
        self.report_unattached();
        st.release_retired(backend);
        self.skipped.retain(|k, _| present.contains(k));
        drop(present);
        Ok(Scan {
            refused,
            events: matching,
        })
    }
}
