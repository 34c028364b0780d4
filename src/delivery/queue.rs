//! Where batches wait between the formatter and the collector: the durable spool
//! ([`crate::delivery::spool::Spool`], `--spool DIR`) or, without one, a small queue in memory
//! ([`MemoryQueue`]). Both are bounded and have the same full policy.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What to do when a batch does not fit (`--spool-full`): the spool's policy, for the
/// memory queue too.
pub use crate::delivery::spool::FullPolicy;

/// One batch as it waits: its id, how many records it holds, its metadata
/// ([`uevrec_parsers::otlp::FrameMeta`], encoded) and the export request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// Increasing, never reused.
    pub id: u64,
    /// Records it holds.
    pub records: u64,
    /// The frame's metadata, encoded.
    pub meta: Vec<u8>,
    /// The export request as sent.
    pub body: Vec<u8>,
}

/// A batch dropped to make room (`drop-oldest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evicted {
    /// Records it held.
    pub records: u64,
    /// Its metadata, encoded.
    pub meta: Vec<u8>,
}

/// How full a queue is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Occupancy {
    /// Batches waiting (handed out ones included until acknowledged).
    pub batches: u64,
    /// Records in them.
    pub records: u64,
    /// Bytes they take.
    pub bytes: u64,
    /// The most bytes allowed.
    pub capacity: u64,
}

/// Why a batch could not be queued.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// Stopped while waiting for room (`block`).
    #[error("stopped while waiting for room in the spool")]
    Stopped,
    /// The batch alone is larger than the queue.
    #[error(
        "an export batch of {bytes} bytes does not fit in a spool of {capacity} bytes \
         (raise --spool-size)"
    )]
    TooLarge {
        /// The batch's size.
        bytes: u64,
        /// The queue's.
        capacity: u64,
    },
    /// The durable spool failed (disk full, I/O error, corruption while writing).
    #[error("{0}")]
    Spool(String),
}

/// A bounded queue of batches shared by the appending thread (the writer) and the
/// sending thread.
pub trait Queue: Send + Sync {
    /// Add a batch; durable (for the spool) before it returns. Under `block` it waits
    /// while full until room is made or `stop` is set; under `drop-oldest` it returns
    /// the batches evicted.
    fn append(
        &self,
        records: u64,
        meta: &[u8],
        body: &[u8],
        stop: &AtomicBool,
    ) -> Result<Vec<Evicted>, QueueError>;
    /// The oldest batch not handed out yet, waiting up to `timeout` for one.
    fn next(&self, timeout: Duration) -> Option<Queued>;
    /// The batch `id` is done with (acknowledged, or dropped with its reason counted):
    /// it is never handed out again.
    fn ack(&self, id: u64) -> Result<(), QueueError>;
    /// How full it is now.
    fn occupancy(&self) -> Occupancy;
    /// Hand out again, oldest first, every batch not acknowledged (after the sender
    /// has ended).
    fn rewind(&self);
}

/// The queue without `--spool`: up to `capacity` bytes in memory, lost with the
/// process (counted as `shutdown` when uevrec stops with batches still waiting).
#[derive(Debug)]
pub struct MemoryQueue {
    state: Mutex<MemState>,
    changed: Condvar,
    capacity: u64,
    policy: FullPolicy,
}

#[derive(Debug, Default)]
struct MemState {
    /// Waiting batches, oldest first; `handed` of them (from the front) handed out.
    waiting: VecDeque<Queued>,
    handed: usize,
    bytes: u64,
    records: u64,
    next_id: u64,
}

impl MemoryQueue {
    /// A queue of at most `capacity` bytes.
    pub fn new(capacity: u64, policy: FullPolicy) -> Self {
        MemoryQueue {
            state: Mutex::new(MemState {
                next_id: 1,
                ..MemState::default()
            }),
            changed: Condvar::new(),
            capacity,
            policy,
        }
    }

    fn lock(&self) -> MutexGuard<'_, MemState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Queue for MemoryQueue {
    fn append(
        &self,
        records: u64,
        meta: &[u8],
        body: &[u8],
        stop: &AtomicBool,
    ) -> Result<Vec<Evicted>, QueueError> {
        let size = (meta.len() + body.len()) as u64;
        if size > self.capacity {
            return Err(QueueError::TooLarge {
                bytes: size,
                capacity: self.capacity,
            });
        }
        let mut evicted = Vec::new();
        let mut st = self.lock();
        while st.bytes + size > self.capacity {
            match self.policy {
                FullPolicy::Block => {
                    if stop.load(Ordering::Acquire) {
                        return Err(QueueError::Stopped);
                    }
                    st = self
                        .changed
                        .wait_timeout(st, Duration::from_millis(100))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                FullPolicy::DropOldest => {
                    // The oldest not handed out (a handed-out one is being sent now).
                    let i = st.handed;
                    let Some(old) = st.waiting.remove(i) else {
                        // Everything is in flight: wait for an ack.
                        st = self
                            .changed
                            .wait_timeout(st, Duration::from_millis(100))
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                        if stop.load(Ordering::Acquire) {
                            return Err(QueueError::Stopped);
                        }
                        continue;
                    };
                    st.bytes -= (old.meta.len() + old.body.len()) as u64;
                    st.records -= old.records;
                    evicted.push(Evicted {
                        records: old.records,
                        meta: old.meta,
                    });
                }
            }
        }
        let id = st.next_id;
        st.next_id += 1;
        st.bytes += size;
        st.records += records;
        st.waiting.push_back(Queued {
            id,
            records,
            meta: meta.to_vec(),
            body: body.to_vec(),
        });
        drop(st);
        self.changed.notify_all();
        Ok(evicted)
    }

    fn next(&self, timeout: Duration) -> Option<Queued> {
        let deadline = Instant::now() + timeout;
        let mut st = self.lock();
        loop {
            if st.handed < st.waiting.len() {
                let i = st.handed;
                st.handed += 1;
                return Some(st.waiting[i].clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            st = self
                .changed
                .wait_timeout(st, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn ack(&self, id: u64) -> Result<(), QueueError> {
        let mut st = self.lock();
        if let Some(i) = st.waiting.iter().position(|q| q.id == id) {
            let q = st.waiting.remove(i).expect("position found it");
            if i < st.handed {
                st.handed -= 1;
            }
            st.bytes -= (q.meta.len() + q.body.len()) as u64;
            st.records -= q.records;
        }
        drop(st);
        self.changed.notify_all();
        Ok(())
    }

    fn occupancy(&self) -> Occupancy {
        let st = self.lock();
        Occupancy {
            batches: st.waiting.len() as u64,
            records: st.records,
            bytes: st.bytes,
            capacity: self.capacity,
        }
    }

    fn rewind(&self) {
        self.lock().handed = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn fifo_handout_and_ack() {
        let q = MemoryQueue::new(1000, FullPolicy::Block);
        let stop = AtomicBool::new(false);
        q.append(1, b"m1", b"body1", &stop).unwrap();
        q.append(2, b"m2", b"body2", &stop).unwrap();
        let a = q.next(Duration::ZERO).unwrap();
        let b = q.next(Duration::ZERO).unwrap();
        assert_eq!((a.records, b.records), (1, 2));
        assert!(a.id < b.id);
        assert!(q.next(Duration::ZERO).is_none());
        assert_eq!(q.occupancy().records, 3);
        q.ack(a.id).unwrap();
        q.ack(b.id).unwrap();
        assert_eq!(
            q.occupancy(),
            Occupancy {
                capacity: 1000,
                ..Default::default()
            }
        );
    }

    #[test]
    fn block_waits_for_an_ack_and_stop_ends_the_wait() {
        let q = Arc::new(MemoryQueue::new(10, FullPolicy::Block));
        let stop = Arc::new(AtomicBool::new(false));
        q.append(1, b"", b"12345678", &stop).unwrap();
        let first = q.next(Duration::ZERO).unwrap();
        let (q2, s2) = (q.clone(), stop.clone());
        let t = std::thread::spawn(move || q2.append(1, b"", b"abcdef", &s2));
        std::thread::sleep(Duration::from_millis(150));
        assert!(!t.is_finished(), "must wait while full");
        q.ack(first.id).unwrap();
        assert!(t.join().unwrap().unwrap().is_empty());
        let (q3, s3) = (q.clone(), stop.clone());
        let t = std::thread::spawn(move || q3.append(1, b"", b"abcdef", &s3));
        std::thread::sleep(Duration::from_millis(150));
        stop.store(true, Ordering::Release);
        assert!(matches!(t.join().unwrap(), Err(QueueError::Stopped)));
    }

    #[test]
    fn drop_oldest_evicts_waiting_batches_not_the_one_in_flight() {
        let q = MemoryQueue::new(10, FullPolicy::DropOldest);
        let stop = AtomicBool::new(false);
        q.append(1, b"a", b"1234", &stop).unwrap();
        q.append(2, b"b", b"1234", &stop).unwrap();
        let inflight = q.next(Duration::ZERO).unwrap();
        assert_eq!(inflight.meta, b"a");
        let ev = q.append(3, b"c", b"1234", &stop).unwrap();
        assert_eq!(
            ev,
            vec![Evicted {
                records: 2,
                meta: b"b".to_vec()
            }]
        );
        assert_eq!(q.next(Duration::ZERO).unwrap().meta, b"c");
        assert!(matches!(
            q.append(1, b"", &[0; 11], &stop),
            Err(QueueError::TooLarge { .. })
        ));
    }
}
