//! The counting thread of `uevrec top`: takes the session's staged chunks (where
//! `record` has its formatter), counts each entry into the [`Model`] and returns the
//! chunk to the pool. No decoding and no JSON: per record only its slot, pid and length
//! are read, under one lock per chunk. A process's name is looked up when it first shows
//! in an interval (a cache hit after the first time), so a short-lived process is still
//! named after it exited.
//!
//! With `-g` each record's stack is named as a call path ([`CallPaths`]) before the model
//! is locked, a chunk at a time, by the naming of `record -g` (its caches and its time
//! budget on cold look-ups), so the display never waits on a symbol look-up.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crossbeam_channel::{Receiver, Sender};

use super::Shared;
use super::keep::TopFilter;
use super::model::Model;
use super::pods::{GroupBy, PodRows};
use uevrec_parsers::RecordStamp;

use super::sites::NO_STACK;
use crate::capture::staging::{Staged, StagedChunk, StagedEntry};
use crate::pipeline::filter::Filter;
use crate::pipeline::stacks::call_path::CallPaths;
use crate::pipeline::stacks::{StackOptions, StackWriter};

/// Count everything staged on `staged` into `shared` until the session closes it,
/// returning every chunk buffer on `pool`; a row per event, or per pod (`by`); with
/// `filter`, only the records it keeps (the others in the model's `not_kept`); with
/// `stacks`, each record's call path too.
pub fn run(
    staged: &Receiver<Staged>,
    pool: &Sender<Vec<u8>>,
    shared: &Shared,
    by: GroupBy,
    filter: Option<Arc<Filter>>,
    stacks: Option<StackOptions>,
) {
    let mut paths = stacks.map(Paths::new);
    // Processes new in this interval, named once the model is unlocked.
    let mut fresh: Vec<u32> = Vec::new();
    let mut pods = (by == GroupBy::Pod).then(PodRows::default);
    let mut keep = filter.map(TopFilter::new);
    if keep.is_some() {
        lock(&shared.model).filtering();
    }
    for msg in staged {
        if let (Staged::Format { slot, prepared, .. }, Some(k)) = (&msg, &mut keep) {
            k.format(*slot, prepared);
        }
        let chunk = match msg {
            Staged::Format { .. } if pods.is_some() => continue,
            Staged::Format { slot, source, .. } => {
                let name = format!("{}:{}", source.system, source.name);
                lock(&shared.model).attach(slot, &name);
                continue;
            }
            Staged::Drained(_) => continue,
            Staged::Chunk(chunk) => chunk,
        };
        let keep = keep.as_mut();
        // Named before the model is locked (a cold look-up takes its time).
        let sites = match &mut paths {
            Some(p) => p.of_chunk(&chunk),
            None => &[],
        };
        match &mut pods {
            Some(rows) => count_by_pod(
                &mut lock(&shared.model),
                rows,
                &chunk,
                &mut fresh,
                keep,
                sites,
            ),
            None => count_chunk(&mut lock(&shared.model), &chunk, &mut fresh, keep, sites),
        }
        // The pool channel holds every chunk, so this never waits.
        let _ = pool.send(chunk.into_buffer());
        if !fresh.is_empty() {
            let mut comms = lock(&shared.comms);
            for pid in fresh.drain(..) {
                comms.name(pid);
            }
        }
    }
}

/// The call paths of the records of a chunk, named by one stack writer.
struct Paths {
    writer: StackWriter,
    names: CallPaths,
    /// The records' paths, in order (reused).
    of_records: Vec<Arc<str>>,
    no_stack: Arc<str>,
}

impl Paths {
    fn new(options: StackOptions) -> Self {
        let mut writer = StackWriter::new(options);
        // What nearly every stack needs named, loaded before the first record, as a
        // formatter worker does.
        writer.warm();
        Paths {
            writer,
            names: CallPaths::default(),
            of_records: Vec::new(),
            no_stack: Arc::from(NO_STACK),
        }
    }

    /// The call path of every record of `chunk`, in order (the mappings it reports taken
    /// on the way).
    fn of_chunk(&mut self, chunk: &StagedChunk) -> &[Arc<str>] {
        self.of_records.clear();
        for entry in chunk.entries() {
            match entry {
                StagedEntry::Context {
                    time_unix_ns,
                    update,
                } => self.writer.apply(time_unix_ns, &update),
                StagedEntry::Record {
                    stamp,
                    stack,
                    user_stack,
                    ..
                } => {
                    let path = match stack {
                        Some(stack) => self.names.path(&mut self.writer, &stamp, stack, user_stack),
                        None => Arc::clone(&self.no_stack),
                    };
                    self.of_records.push(path);
                }
                _ => {}
            }
        }
        &self.of_records
    }
}

/// Count every entry of `chunk` into `model` (with `keep`, the records it keeps); the
/// pids new in this interval are added to `fresh` (to be named). `sites`: with `-g`, the
/// call path of each record of the chunk, in order (empty without).
pub fn count_chunk(
    model: &mut Model,
    chunk: &StagedChunk,
    fresh: &mut Vec<u32>,
    mut keep: Option<&mut TopFilter>,
    sites: &[Arc<str>],
) {
    let mut sites = sites.iter();
    for entry in chunk.entries() {
        match entry {
            StagedEntry::Record {
                slot,
                stamp,
                cgroup,
                raw,
                ..
            } => {
                let site = sites.next();
                if !counted(keep.as_deref_mut(), model, slot, &stamp, cgroup, raw) {
                    continue;
                }
                if model.record(slot, stamp.pid, raw.len()) {
                    fresh.push(stamp.pid);
                }
                if let Some(path) = site {
                    model.call_site(slot, path);
                }
            }
            StagedEntry::Lost { lost, .. } => model.lost(lost),
            StagedEntry::Notice {
                what,
                event,
                message,
                ..
            } => {
                if what == "detached"
                    && let Some(event) = event
                {
                    model.detach(event);
                }
                model.notice(what, event, message);
            }
            // Names come from /proc; who is who only for conditions on it.
            StagedEntry::Context {
                time_unix_ns,
                update,
            } => {
                if let Some(k) = keep.as_deref_mut() {
                    k.context(time_unix_ns, update);
                }
            }
            StagedEntry::Schema { .. } => {}
        }
    }
}

/// [`count_chunk`] with a row per pod: context entries go to the tracker of `rows`,
/// each record counts in its pod's row (and its call path, from `sites`, there).
pub fn count_by_pod(
    model: &mut Model,
    rows: &mut PodRows,
    chunk: &StagedChunk,
    fresh: &mut Vec<u32>,
    mut keep: Option<&mut TopFilter>,
    sites: &[Arc<str>],
) {
    let mut sites = sites.iter();
    for entry in chunk.entries() {
        match entry {
            StagedEntry::Record {
                slot,
                stamp,
                cgroup,
                raw,
                ..
            } => {
                let site = sites.next();
                if !counted(keep.as_deref_mut(), model, slot, &stamp, cgroup, raw) {
                    continue;
                }
                let slot = rows.slot(model, stamp.pid, stamp.tid, cgroup);
                if model.record(slot, stamp.pid, raw.len()) {
                    fresh.push(stamp.pid);
                }
                if let Some(path) = site {
                    model.call_site(slot, path);
                }
            }
            StagedEntry::Context {
                time_unix_ns,
                update,
            } => {
                if let Some(k) = keep.as_deref_mut() {
                    k.context(time_unix_ns, update);
                }
                rows.tracker.apply(time_unix_ns, update);
            }
            StagedEntry::Lost { lost, .. } => model.lost(lost),
            StagedEntry::Notice {
                what,
                event,
                message,
                ..
            } => model.notice(what, event, message),
            StagedEntry::Schema { .. } => {}
        }
    }
}

/// Whether the record `raw` of `slot` counts in a row: always without `keep`, else
/// when it keeps it (a record it leaves out counts in the model's `not_kept`).
fn counted(
    keep: Option<&mut TopFilter>,
    model: &mut Model,
    slot: u32,
    stamp: &RecordStamp,
    cgroup: Option<u64>,
    raw: &[u8],
) -> bool {
    let kept = keep.is_none_or(|k| k.keeps(slot, stamp, cgroup, raw));
    if !kept {
        model.not_kept();
    }
    kept
}

/// The model or the names, also when a thread panicked while holding them (counts are
/// still counts: better shown than lost).
pub fn lock<T>(shared: &Mutex<T>) -> MutexGuard<'_, T> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::staging::FormatSource;
    use std::time::Duration;
    use uevrec_parsers::{PreparedFormat, RecordStamp};

    fn format(slot: u32, system: &str, name: &str) -> Staged {
        let text = format!(
            "name: {name}\nID: 7\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\nprint fmt: \"\"\n"
        );
        let parsed = uevrec_parsers::parse_format(&text).unwrap();
        Staged::Format {
            slot,
            prepared: Arc::new(PreparedFormat::new(&parsed, system, name, None)),
            source: Arc::new(FormatSource {
                system: system.into(),
                name: name.into(),
                text,
            }),
        }
    }

    #[test]
    fn with_a_condition_counts_only_the_records_it_keeps() {
        use crate::pipeline::filter::tests::{filter, record, sys_enter};
        let (tx, rx) = crossbeam_channel::unbounded();
        let (pool_tx, _pool_rx) = crossbeam_channel::unbounded();
        let prepared = Arc::new(sys_enter());
        tx.send(Staged::Format {
            slot: 0,
            prepared: Arc::clone(&prepared),
            source: Arc::new(FormatSource {
                system: "raw_syscalls".into(),
                name: "sys_enter".into(),
                text: String::new(),
            }),
        })
        .unwrap();
        let mut chunk = StagedChunk::default();
        let stamp = RecordStamp {
            time_unix_ns: Some(1),
            cpu: 0,
            pid: 1 << 30,
            tid: 1 << 30,
        };
        for seq in 1..=10 {
            chunk.push_record(0, &stamp, &record(110, [424242, seq, 0, 0, 0, 0]));
        }
        tx.send(Staged::Chunk(chunk)).unwrap();
        drop(tx);
        let shared = Shared::default();
        let f = filter(&["fields.args[1] % 2 == 0"]);
        run(
            &rx,
            &pool_tx,
            &shared,
            GroupBy::Event,
            Some(Arc::clone(&f)),
            None,
        );
        let mut m = lock(&shared.model);
        m.tick(Duration::from_secs(1));
        let s = m.snapshot();
        assert_eq!((s.records, s.rows[0].records), (5, 5));
        assert_eq!(s.not_kept, Some(5));
        assert_eq!(f.counted()[0].1.filtered, 5);
    }

    #[test]
    fn counts_records_losses_and_detaches_and_returns_chunks() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let (pool_tx, pool_rx) = crossbeam_channel::unbounded();
        // Pids no process has (above pid_max).
        let stamp = |pid: u32| RecordStamp {
            time_unix_ns: Some(1),
            cpu: 0,
            pid,
            tid: pid,
        };
        tx.send(format(0, "sched", "sched_switch")).unwrap();
        let mut chunk = StagedChunk::default();
        chunk.push_notice(None, "attached", Some("sched:sched_switch"), "id 7");
        chunk.push_record(0, &stamp(1 << 30), &[0; 40]);
        chunk.push_record(0, &stamp(1 << 30), &[0; 40]);
        chunk.push_record(0, &stamp((1 << 30) + 1), &[0; 24]);
        chunk.push_lost(None, 1, 9);
        chunk.push_notice(None, "detached", Some("sched:sched_switch"), "gone");
        tx.send(Staged::Chunk(chunk)).unwrap();
        drop(tx);
        let shared = Shared::default();
        run(&rx, &pool_tx, &shared, GroupBy::Event, None, None);
        assert_eq!(
            pool_rx.try_iter().count(),
            1,
            "the chunk went back to the pool"
        );
        // Both processes were looked up as they showed (no such pids: `?`).
        assert_eq!(lock(&shared.comms).len(), 2);
        let mut m = lock(&shared.model);
        m.tick(Duration::from_secs(1));
        let s = m.snapshot();
        assert_eq!(s.rows.len(), 1);
        let r = &s.rows[0];
        assert_eq!(r.event, "sched:sched_switch");
        assert_eq!((r.records, r.bytes, r.attached), (3, 104, false));
        assert_eq!(r.top, vec![(1 << 30, 2), ((1 << 30) + 1, 1)]);
        assert_eq!(s.lost, 9);
        assert_eq!(
            s.notice.as_deref(),
            Some("detached sched:sched_switch: gone")
        );
    }
}
