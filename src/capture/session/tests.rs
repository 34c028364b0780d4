//! The session's state machine against a fake backend and a fake tracefs (a temp dir of
//! `events/<sys>/<ev>/{format,id}`): no root, no perf.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::fs;
use std::ops::ControlFlow;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crossbeam_channel::Receiver;
use uevrec_parsers::ContextUpdate;
use uevrec_samples::register::format_file_text;

use super::attach::{Attacher, Halt, Scan};
use super::stager::Stager;
use super::*;
use crate::capture::backend::{Arrival, AttachError, Backend, BackendError, EventRef};
use crate::capture::perf::PerfError;
use crate::capture::staging::{Staged, StagedChunk, StagedEntry};

/// How the fake fails to attach or enable a tracepoint id.
#[derive(Debug, Clone, Copy)]
enum Fail {
    Vanished,
    Filter,
    Denied,
    NoFds,
    Enable,
}

fn perf_err(step: &'static str, errno: i32) -> BackendError {
    BackendError::Perf(PerfError {
        step,
        cpu: 1,
        source: std::io::Error::from_raw_os_error(errno),
    })
}

/// One queued arrival: (key, pid, raw) for a sample, or a loss.
enum Pending {
    Sample(u64, u32, Vec<u8>),
    Lost(u64),
    Malformed,
}

/// A backend of `cpus` CPUs that records what it is asked and hands out `pending`.
struct Fake {
    cpus: usize,
    next_key: u64,
    fail: HashMap<u32, Fail>,
    /// `attach` calls: tracepoint id and filter.
    attaches: Vec<(u32, Option<String>)>,
    disabled: Vec<u32>,
    closed: Rc<RefCell<Vec<u32>>>,
    /// The ids of each batch handed to `release`.
    released: Vec<Vec<u32>>,
    pending: VecDeque<Pending>,
}

struct FakeEvent {
    id: u32,
    keys: Vec<u64>,
    closed: Rc<RefCell<Vec<u32>>>,
}

impl Drop for FakeEvent {
    fn drop(&mut self) {
        self.closed.borrow_mut().push(self.id);
    }
}

impl Fake {
    fn new() -> Fake {
        Fake {
            cpus: 2,
            next_key: 1000,
            fail: HashMap::new(),
            attaches: Vec::new(),
            disabled: Vec::new(),
            closed: Rc::default(),
            released: Vec::new(),
            pending: VecDeque::new(),
        }
    }

    fn attach_count(&self, id: u32) -> usize {
        self.attaches.iter().filter(|(i, _)| *i == id).count()
    }
}

impl Backend for Fake {
    type Event = FakeEvent;

    fn cpus(&self) -> usize {
        self.cpus
    }

    fn attach(
        &mut self,
        event: EventRef<'_>,
        filter: Option<&str>,
    ) -> Result<FakeEvent, AttachError> {
        let id = event.id;
        self.attaches.push((id, filter.map(str::to_string)));
        match self.fail.get(&id) {
            Some(Fail::Vanished) => return Err(AttachError::Vanished),
            Some(Fail::Filter) => {
                let e = perf_err("PERF_EVENT_IOC_SET_FILTER", libc::EINVAL);
                return Err(AttachError::FilterRefused(e));
            }
            Some(Fail::Denied) => {
                return Err(AttachError::Denied(perf_err(
                    "perf_event_open",
                    libc::EACCES,
                )));
            }
            Some(Fail::NoFds) => {
                return Err(AttachError::Failed(perf_err(
                    "perf_event_open",
                    libc::EMFILE,
                )));
            }
            Some(Fail::Enable) | None => {}
        }
        let keys = (0..self.cpus as u64).map(|c| self.next_key + c).collect();
        self.next_key += 100;
        Ok(FakeEvent {
            id,
            keys,
            closed: Rc::clone(&self.closed),
        })
    }

    fn enable(&mut self, event: &FakeEvent) -> Result<(), BackendError> {
        match self.fail.get(&event.id) {
            Some(Fail::Enable) => Err(perf_err("PERF_EVENT_IOC_ENABLE", libc::EIO)),
            _ => Ok(()),
        }
    }

    fn disable(&mut self, event: &FakeEvent) {
        self.disabled.push(event.id);
    }

    fn keys(event: &FakeEvent) -> &[u64] {
        &event.keys
    }

    fn buffers(&self) -> usize {
        1
    }

    fn read(&mut self, _buffer: usize, mut f: impl FnMut(u32, Arrival<'_>) -> ControlFlow<()>) {
        while let Some(p) = self.pending.pop_front() {
            let arrival = match &p {
                Pending::Sample(key, pid, raw) => Arrival::Sample {
                    key: Some(*key),
                    time: None,
                    cpu: None,
                    pid: Some(*pid),
                    tid: Some(*pid),
                    cgroup: None,
                    raw,
                    callchain: None,
                    user_stack: None,
                },
                Pending::Lost(n) => Arrival::Lost {
                    lost: *n,
                    time: None,
                },
                Pending::Malformed => Arrival::Malformed,
            };
            if f(3, arrival).is_break() {
                return;
            }
        }
    }

    fn wait(&self, _timeout: Duration) -> std::io::Result<()> {
        Ok(())
    }

    fn marker_cpus(&self) -> Vec<u32> {
        Vec::new()
    }

    fn set_markers(&mut self, _on: bool) {}

    fn release(&mut self, events: Vec<FakeEvent>) {
        self.released.push(events.iter().map(|e| e.id).collect());
    }
}

/// The formatter never goes away in these tests.
static GONE: AtomicBool = AtomicBool::new(false);

/// A fake tracefs, a staging channel and what was staged.
struct Bench {
    dir: tempfile::TempDir,
    out: StageSender<'static>,
    staged: Receiver<Staged>,
    stats: LiveStats,
}

/// What the session staged, in order.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// `Staged::Format`: slot and tracepoint id.
    Format(u32, u32),
    /// A record of a slot.
    Record(u32),
    /// A lost count.
    Lost(u64),
    /// A notice: what, event, message.
    Notice(String, Option<String>, String),
}

impl Bench {
    fn new() -> Bench {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("events")).unwrap();
        let (stage_tx, staged) = crossbeam_channel::unbounded();
        let (pool_tx, pool) = crossbeam_channel::unbounded();
        for _ in 0..1000 {
            pool_tx.send(Vec::new()).unwrap();
        }
        Bench {
            dir,
            out: StageSender::new(stage_tx, pool, &GONE),
            staged,
            stats: LiveStats::default(),
        }
    }

    fn tracefs(&self) -> Tracefs {
        Tracefs::discover(Some(self.dir.path())).unwrap()
    }

    /// Create (or change) `system:event` with tracepoint id `id`.
    fn event(&self, system: &str, event: &str, id: u32) {
        let d = self.tracefs().event_dir(system, event);
        fs::create_dir_all(&d).unwrap();
        let text = format_file_text(event, id, &[("u32 n", 8, 4, false)], "\"\"");
        fs::write(d.join("format"), text).unwrap();
        fs::write(d.join("id"), format!("{id}\n")).unwrap();
    }

    fn remove(&self, system: &str, event: &str) {
        fs::remove_dir_all(self.tracefs().event_dir(system, event)).unwrap();
    }

    /// Everything staged so far (after sending `st`'s chunk).
    fn seen<E>(&self, st: &mut Stager<E>) -> Vec<Seen> {
        self.out.flush(&mut st.chunk).unwrap();
        let mut seen = Vec::new();
        for msg in self.staged.try_iter() {
            match msg {
                Staged::Format { slot, prepared, .. } => {
                    seen.push(Seen::Format(slot, prepared.format().id));
                }
                Staged::Drained(_) => {}
                Staged::Chunk(chunk) => seen.extend(chunk.entries().filter_map(|e| {
                    Some(match e {
                        StagedEntry::Record { slot, .. } => Seen::Record(slot),
                        StagedEntry::Lost { lost, .. } => Seen::Lost(lost),
                        StagedEntry::Notice {
                            what,
                            event,
                            message,
                            ..
                        } => Seen::Notice(what.into(), event.map(Into::into), message.into()),
                        // The context scan's entries (its own test: crate::capture::context).
                        StagedEntry::Context { .. } => return None,
                        // The session stages none (the decoders of files do).
                        StagedEntry::Schema { .. } => return None,
                    })
                })),
            }
        }
        seen
    }
}

fn notice(what: &str, event: Option<&str>, message: &str) -> Seen {
    Seen::Notice(what.into(), event.map(Into::into), message.into())
}

fn config(selectors: &[&str]) -> SessionConfig {
    SessionConfig {
        selectors: selectors.iter().map(|s| s.parse().unwrap()).collect(),
        filter: Some("n == 1".into()),
        include_self: true,
        // Context has its own test (a_session_with_context_stages_the_scan_first).
        context: false,
        ..SessionConfig::default()
    }
}

#[test]
fn a_session_with_context_stages_the_scan_first() {
    let b = Bench::new();
    b.event("s", "a", 10);
    let cfg = SessionConfig {
        context: true,
        ..config(&["s:a"])
    };
    let mut fake = Fake::new();
    let stop = AtomicBool::new(true);
    run_with(&mut fake, b.tracefs(), None, &cfg, &b.out, &stop, &b.stats).unwrap();
    b.out.flush(&mut stager().chunk).unwrap();
    let own = std::process::id();
    let (mut first_context, mut own_comm, mut first_format) = (None, false, None);
    for (i, msg) in b.staged.try_iter().enumerate() {
        match msg {
            Staged::Format { .. } => {
                first_format.get_or_insert(i);
            }
            Staged::Drained(_) => {}
            Staged::Chunk(chunk) => {
                for e in chunk.entries() {
                    match e {
                        StagedEntry::Context { update, .. } => {
                            first_context.get_or_insert(i);
                            own_comm |=
                                matches!(update, ContextUpdate::Comm { tid, .. } if tid == own);
                        }
                        StagedEntry::Notice {
                            what: "context",
                            message,
                            ..
                        } => {
                            // The fake backend tracks nothing, and says so.
                            assert!(message.contains("no thread names"), "{message}");
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    assert!(own_comm, "the /proc scan staged this process's name");
    assert!(
        first_context < first_format,
        "{first_context:?} {first_format:?}"
    );
}

/// An attacher of `cfg`'s selectors on `b`'s tracefs, nothing attached yet.
fn attacher<'c>(b: &Bench, cfg: &'c SessionConfig) -> Attacher<'c> {
    Attacher::new(b.tracefs(), cfg.selectors.clone(), cfg)
}

fn stager() -> Stager<FakeEvent> {
    Stager::new(StagedChunk::default(), false, None)
}

fn rescan(
    b: &Bench,
    att: &mut Attacher<'_>,
    fake: &mut Fake,
    st: &mut Stager<FakeEvent>,
) -> Result<Scan, Halt> {
    att.rescan(fake, st, &b.out, &b.stats)
}

#[test]
fn first_scan_attaches_the_matching_events_with_the_filter() {
    let b = Bench::new();
    b.event("s", "a", 10);
    b.event("s", "b", 11);
    b.event("other", "c", 12);
    let cfg = config(&["s:*"]);
    let (mut fake, mut st) = (Fake::new(), stager());
    let mut att = attacher(&b, &cfg);
    let scan = rescan(&b, &mut att, &mut fake, &mut st).unwrap();
    assert_eq!(scan.events.len(), 2);
    assert!(scan.refused.is_none());
    let filter = Some("(n == 1)".to_string());
    assert_eq!(fake.attaches, vec![(10, filter.clone()), (11, filter)]);
    assert_eq!(
        b.seen(&mut st),
        vec![
            Seen::Format(0, 10),
            notice("attached", Some("s:a"), "id 10, 2 CPUs"),
            Seen::Format(1, 11),
            notice("attached", Some("s:b"), "id 11, 2 CPUs"),
        ]
    );
    // Nothing changed: a second scan does nothing.
    rescan(&b, &mut att, &mut fake, &mut st).unwrap();
    assert_eq!(fake.attaches.len(), 2);
    assert_eq!(b.seen(&mut st), vec![]);
}

#[test]
fn a_vanished_event_is_drained_then_detached_and_closed() {
    let b = Bench::new();
    b.event("s", "a", 10);
    let cfg = config(&["s:*"]);
    let (mut fake, mut st) = (Fake::new(), stager());
    let mut att = attacher(&b, &cfg);
    rescan(&b, &mut att, &mut fake, &mut st).unwrap();
    b.seen(&mut st);
    // Two records of s:a (keys 1000 and 1001: CPUs 0 and 1) and one of no event.
    fake.pending
        .push_back(Pending::Sample(1000, 1, vec![1; 12]));
    fake.pending
        .push_back(Pending::Sample(1001, 1, vec![2; 12]));
    fake.pending.push_back(Pending::Sample(7, 1, vec![3; 12]));
    b.remove("s", "a");
    rescan(&b, &mut att, &mut fake, &mut st).unwrap();
    assert_eq!(fake.disabled, vec![10]);
    // Released (perf: closed in the background) once the scan has drained it.
    assert_eq!(fake.released, vec![vec![10]]);
    assert_eq!(*fake.closed.borrow(), vec![10]);
    assert_eq!(
        b.seen(&mut st),
        vec![
            Seen::Record(0),
            Seen::Record(0),
            notice("detached", Some("s:a"), "event disappeared; 2 records"),
        ]
    );
    assert_eq!(st.unknown, 1);
    assert!(att.attached.is_empty());
    let (summary, _) = st.into_summary();
    assert_eq!(summary.records_per_event["s:a"], 2);
    assert_eq!(summary.records, 2);
}

#[test]
fn a_changed_id_reattaches_in_the_same_slot_with_the_new_format() {
    let b = Bench::new();
    b.event("s", "a", 10);
    let cfg = config(&["s:a"]);
    let (mut fake, mut st) = (Fake::new(), stager());
    let mut att = attacher(&b, &cfg);
    rescan(&b, &mut att, &mut fake, &mut st).unwrap();
    b.seen(&mut st);
    b.event("s", "a", 20);
    rescan(&b, &mut att, &mut fake, &mut st).unwrap();
    assert_eq!(*fake.closed.borrow(), vec![10]);
    assert_eq!(
        b.seen(&mut st),
        vec![
            notice(
                "detached",
                Some("s:a"),
                "ID changed; re-attaching with the new format; 0 records"
            ),
            Seen::Format(0, 20),
            notice("attached", Some("s:a"), "id 20, 2 CPUs"),
        ]
    );
}

#[test]
fn lack_of_descriptors_skips_until_fewer_events_are_attached() {
    let b = Bench::new();
    b.event("s", "a", 10);
    b.event("s", "b", 11);
    let cfg = config(&["s:*"]);
    let (mut fake, mut st) = (Fake::new(), stager());
    fake.fail.insert(11, Fail::NoFds);
    let mut att = attacher(&b, &cfg);
    rescan(&b, &mut att, &mut fake, &mut st).unwrap();
    assert_eq!(
        b.seen(&mut st)[2..],
        [notice(
            "skipped",
            Some("s:b"),
            &format!(
                "perf_event_open on CPU 1: {}",
                std::io::Error::from_raw_os_error(libc::EMFILE)
            )
        )]
    );
    // Not retried while nothing changed.
    rescan(&b, &mut att, &mut fake, &mut st).unwrap();
    assert_eq!(fake.attach_count(11), 1);
    assert_eq!(b.seen(&mut st), vec![]);
    // s:a goes: one descriptor set freed, so s:b is tried again (and fits now).
    fake.fail.clear();
    b.remove("s", "a");
    rescan(&b, &mut att, &mut fake, &mut st).unwrap();
    assert_eq!(fake.attach_count(11), 2);
    assert_eq!(
        b.seen(&mut st),
        vec![
            notice("detached", Some("s:a"), "event disappeared; 0 records"),
            Seen::Format(0, 11),
            notice("attached", Some("s:b"), "id 11, 2 CPUs"),
        ]
    );
}

#[test]
fn an_unparsable_format_is_skipped_until_its_id_changes() {
    let b = Bench::new();
    b.event("s", "a", 10);
    let dir = b.tracefs().event_dir("s", "a");
    fs::write(dir.join("format"), "not a format file\n").unwrap();
    let cfg = config(&["s:a"]);
    let (mut fake, mut st) = (Fake::new(), stager());
    let mut att = attacher(&b, &cfg);
    let scan = rescan(&b, &mut att, &mut fake, &mut st).unwrap();
    assert_eq!(scan.events.len(), 1);
    let seen = b.seen(&mut st);
    assert!(
        matches!(&seen[..], [Seen::Notice(w, Some(e), _)] if w == "skipped" && e == "s:a"),
        "{seen:?}"
    );
    assert!(fake.attaches.is_empty());
    rescan(&b, &mut att, &mut fake, &mut st).unwrap();
    assert_eq!(b.seen(&mut st), vec![]);
    // A new registration (new ID) is tried again.
    b.event("s", "a", 11);
    rescan(&b, &mut att, &mut fake, &mut st).unwrap();
    assert_eq!(
        b.seen(&mut st),
        vec![
            Seen::Format(0, 11),
            notice("attached", Some("s:a"), "id 11, 2 CPUs")
        ]
    );
}

#[test]
fn a_refused_filter_is_skipped_and_reported_with_the_format_file() {
    let b = Bench::new();
    b.event("s", "a", 10);
    let cfg = config(&["s:a"]);
    let (mut fake, mut st) = (Fake::new(), stager());
    fake.fail.insert(10, Fail::Filter);
    let mut att = attacher(&b, &cfg);
    let scan = rescan(&b, &mut att, &mut fake, &mut st).unwrap();
    let format = b.tracefs().event_dir("s", "a").join("format");
    let complaint = format!("EINVAL (see the field names in {})", format.display());
    match scan.refused {
        Some(SessionError::Filter {
            expr,
            event,
            complaint: c,
        }) => {
            // The user's expression, as typed: not the one with uevrec's thread terms.
            assert_eq!((expr.as_str(), event.as_str()), ("n == 1", "s:a"));
            assert_eq!(c, complaint);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        b.seen(&mut st),
        vec![notice(
            "skipped",
            Some("s:a"),
            &format!("the kernel refused the filter `n == 1`: {complaint}")
        )]
    );
}

#[test]
fn denied_is_fatal_and_a_vanished_event_is_retried_silently() {
    let b = Bench::new();
    b.event("s", "a", 10);
    let cfg = config(&["s:a"]);
    let (mut fake, mut st) = (Fake::new(), stager());
    let mut att = attacher(&b, &cfg);
    fake.fail.insert(10, Fail::Vanished);
    rescan(&b, &mut att, &mut fake, &mut st).unwrap();
    rescan(&b, &mut att, &mut fake, &mut st).unwrap();
    assert_eq!(fake.attach_count(10), 2);
    assert_eq!(b.seen(&mut st), vec![]);
    fake.fail.insert(10, Fail::Denied);
    match rescan(&b, &mut att, &mut fake, &mut st) {
        Err(Halt::Fatal(SessionError::Permission { source, .. })) => {
            assert_eq!(source.step, "perf_event_open");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_event_that_cannot_be_enabled_is_skipped_and_closed() {
    let b = Bench::new();
    b.event("s", "a", 10);
    let cfg = config(&["s:a"]);
    let (mut fake, mut st) = (Fake::new(), stager());
    fake.fail.insert(10, Fail::Enable);
    let mut att = attacher(&b, &cfg);
    rescan(&b, &mut att, &mut fake, &mut st).unwrap();
    assert_eq!(*fake.closed.borrow(), vec![10]);
    let seen = b.seen(&mut st);
    assert!(
        matches!(&seen[..], [Seen::Notice(w, _, m)] if w == "skipped" && m.starts_with("cannot enable: PERF_EVENT_IOC_ENABLE")),
        "{seen:?}"
    );
}

#[test]
fn the_stager_drops_its_own_samples_counts_losses_and_stops_at_the_limit() {
    let b = Bench::new();
    b.event("s", "a", 10);
    let cfg = config(&["s:a"]);
    let mut fake = Fake::new();
    let mut st = Stager::new(StagedChunk::default(), false, Some(2));
    let mut att = attacher(&b, &cfg);
    rescan(&b, &mut att, &mut fake, &mut st).unwrap();
    b.seen(&mut st);
    let me = std::process::id();
    fake.pending.extend([
        Pending::Sample(1000, me, vec![0; 12]),
        Pending::Sample(1000, 1, vec![0; 12]),
        Pending::Lost(5),
        Pending::Malformed,
        Pending::Sample(1001, 1, vec![0; 12]),
        Pending::Sample(1001, 1, vec![0; 12]),
    ]);
    st.drain(&mut fake, &b.out, &b.stats).unwrap();
    assert_eq!(
        b.seen(&mut st),
        vec![Seen::Record(0), Seen::Lost(5), Seen::Record(0)]
    );
    assert!(st.limit_reached());
    assert_eq!((st.malformed, st.unknown), (1, 0));
    assert_eq!(b.stats.records.load(Ordering::Relaxed), 2);
    assert_eq!(b.stats.lost.load(Ordering::Relaxed), 5);
    let (summary, _) = st.into_summary();
    assert_eq!(summary.lost_per_cpu, BTreeMap::from([(3, 5)]));
}

#[test]
fn a_stopped_session_drains_and_says_detached_and_waiting() {
    let b = Bench::new();
    b.event("s", "a", 10);
    let cfg = config(&["s:a", "t:*"]);
    let mut fake = Fake::new();
    fake.pending
        .push_back(Pending::Sample(1000, 1, vec![0; 12]));
    let stop = AtomicBool::new(true);
    let summary = run_with(&mut fake, b.tracefs(), None, &cfg, &b.out, &stop, &b.stats).unwrap();
    assert_eq!(summary.records, 1);
    assert_eq!(summary.records_per_event["s:a"], 1);
    assert_eq!(fake.disabled, vec![10]);
    // Every event is released in one batch at the end, after the drain.
    assert_eq!(fake.released, vec![vec![10]]);
    assert_eq!(*fake.closed.borrow(), vec![10]);
    let seen = b.seen(&mut stager());
    assert_eq!(
        seen,
        vec![
            Seen::Format(0, 10),
            notice("attached", Some("s:a"), "id 10, 2 CPUs"),
            // Each selector that matches nothing says so, though others match.
            notice(
                "waiting",
                None,
                "waiting for t:* to appear (rescanning every 1s)"
            ),
            Seen::Record(0),
            notice("detached", Some("s:a"), "session stopped; 1 records"),
        ]
    );

    // Nothing matches: the session says it waits; a refused filter on every event is
    // a setup error.
    let cfg = config(&["t:*"]);
    run_with(&mut fake, b.tracefs(), None, &cfg, &b.out, &stop, &b.stats).unwrap();
    assert_eq!(
        b.seen(&mut stager()),
        vec![notice(
            "waiting",
            None,
            "waiting for t:* to appear (rescanning every 1s)"
        )]
    );
    fake.fail.insert(10, Fail::Filter);
    let e = run_with(
        &mut fake,
        b.tracefs(),
        None,
        &config(&["s:a"]),
        &b.out,
        &stop,
        &b.stats,
    );
    assert!(matches!(e, Err(SessionError::Filter { .. })), "{e:?}");
}

#[test]
fn a_waiting_selector_says_so_once_then_once_when_it_matches() {
    let b = Bench::new();
    b.event("s", "a", 10);
    let cfg = config(&["s:a", "late:x*", "never:*"]);
    let (mut fake, mut st) = (Fake::new(), stager());
    let mut att = attacher(&b, &cfg);
    let scan = rescan(&b, &mut att, &mut fake, &mut st).unwrap();
    let every = Duration::from_secs(1);
    let note = |s: &Selector| (s.to_string() == "never:*").then(|| "a note".to_string());
    let mut waiting = Waiting::start(&att.selectors, &scan.events, every, note, false, &mut st);
    let waits = |sel: &str, note: &str| {
        let msg = format!("waiting for {sel} to appear (rescanning every 1s){note}");
        notice("waiting", None, &msg)
    };
    assert_eq!(
        b.seen(&mut st),
        vec![
            Seen::Format(0, 10),
            notice("attached", Some("s:a"), "id 10, 2 CPUs"),
            waits("late:x*", ""),
            waits("never:*", "; note: a note"),
        ]
    );
    // Nothing new: nothing said.
    let scan = rescan(&b, &mut att, &mut fake, &mut st).unwrap();
    waiting.rescan(&att.selectors, &scan.events, &mut st);
    assert_eq!(b.seen(&mut st), vec![]);
    // The late event appears: one `matching` notice, and no more after it.
    b.event("late", "x1", 11);
    for _ in 0..2 {
        let scan = rescan(&b, &mut att, &mut fake, &mut st).unwrap();
        waiting.rescan(&att.selectors, &scan.events, &mut st);
    }
    assert_eq!(
        b.seen(&mut st),
        vec![
            Seen::Format(1, 11),
            notice("attached", Some("late:x1"), "id 11, 2 CPUs"),
            notice("matching", Some("late:x1"), "late:x* now matches late:x1"),
        ]
    );
}
