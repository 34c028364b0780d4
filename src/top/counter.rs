//! The counting thread of `uevrec top`: takes the session's staged chunks (where
//! `record` has its formatter), counts each entry into the [`Model`] and returns the
//! chunk to the pool. No decoding and no JSON: per record only its slot, pid and length
//! are read, under one lock per chunk.

use std::sync::Mutex;

use crossbeam_channel::{Receiver, Sender};

use super::model::Model;
use crate::pipeline::{Staged, StagedEntry};

/// Count everything staged on `staged` into `model` until the session closes it,
/// returning every chunk buffer on `pool`.
pub fn run(staged: &Receiver<Staged>, pool: &Sender<Vec<u8>>, model: &Mutex<Model>) {
    for msg in staged {
        let chunk = match msg {
            Staged::Format { slot, source, .. } => {
                let name = format!("{}:{}", source.system, source.name);
                lock(model).attach(slot, &name);
                continue;
            }
            Staged::Chunk(chunk) => chunk,
        };
        {
            let mut m = lock(model);
            for entry in chunk.entries() {
                match entry {
                    StagedEntry::Record { slot, stamp, raw } => {
                        m.record(slot, stamp.pid, raw.len());
                    }
                    StagedEntry::Lost { lost, .. } => m.lost(lost),
                    StagedEntry::Notice {
                        what,
                        event,
                        message,
                        ..
                    } => {
                        if what == "detached"
                            && let Some(event) = event
                        {
                            m.detach(event);
                        }
                        m.notice(what, message);
                    }
                }
            }
        }
        // The pool channel holds every chunk, so this never waits.
        let _ = pool.send(chunk.into_buffer());
    }
}

/// The model, also when a thread panicked while holding it (its counts are still
/// counts: better shown than lost).
pub fn lock(model: &Mutex<Model>) -> std::sync::MutexGuard<'_, Model> {
    model
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{FormatSource, StagedChunk};
    use std::sync::Arc;
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
    fn counts_records_losses_and_detaches_and_returns_chunks() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let (pool_tx, pool_rx) = crossbeam_channel::unbounded();
        let stamp = |pid| RecordStamp {
            time_unix_ns: Some(1),
            cpu: 0,
            pid,
            tid: pid,
        };
        tx.send(format(0, "sched", "sched_switch")).unwrap();
        let mut chunk = StagedChunk::default();
        chunk.push_notice(None, "attached", Some("sched:sched_switch"), "id 7");
        chunk.push_record(0, &stamp(5), &[0; 40]);
        chunk.push_record(0, &stamp(5), &[0; 40]);
        chunk.push_record(0, &stamp(6), &[0; 24]);
        chunk.push_lost(None, 1, 9);
        chunk.push_notice(None, "detached", Some("sched:sched_switch"), "gone");
        tx.send(Staged::Chunk(chunk)).unwrap();
        drop(tx);
        let model = Mutex::new(Model::new());
        run(&rx, &pool_tx, &model);
        assert_eq!(
            pool_rx.try_iter().count(),
            1,
            "the chunk went back to the pool"
        );
        let mut m = lock(&model);
        m.tick(Duration::from_secs(1));
        let s = m.snapshot();
        assert_eq!(s.rows.len(), 1);
        let r = &s.rows[0];
        assert_eq!(r.event, "sched:sched_switch");
        assert_eq!((r.records, r.bytes, r.attached), (3, 104, false));
        assert_eq!(r.top, vec![(5, 2), (6, 1)]);
        assert_eq!(s.lost, 9);
        assert_eq!(s.notice.as_deref(), Some("detached: gone"));
    }
}
