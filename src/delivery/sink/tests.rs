//! The sender and the sink over fakes: a scripted link, no delays.

use std::sync::atomic::AtomicUsize;

use super::*;
use crate::delivery::link::BatchInfo;
use crate::delivery::queue::{FullPolicy, MemoryQueue};

/// Test frames are lines `TRACEPOINT RECORDS BODY`; the metadata is `TRACEPOINT RECORDS`.
fn split() -> Box<FrameSplit> {
    Box::new(|bytes, out| {
        let mut at = 0;
        for line in bytes.split_inclusive(|b| *b == b'\n') {
            let text = std::str::from_utf8(line).map_err(|e| e.to_string())?;
            let mut words = text.trim_end().split(' ');
            let (tp, n) = (words.next().unwrap(), words.next().ok_or("no count")?);
            let records: u64 = n.parse().map_err(|_| "bad count")?;
            out.push((
                records,
                format!("{tp} {n}").into_bytes(),
                at..at + line.len(),
            ));
            at += line.len();
        }
        Ok(())
    })
}

fn meta() -> Arc<MetaReader> {
    Arc::new(|m: &[u8]| {
        let t = std::str::from_utf8(m).ok()?;
        let (tp, n) = t.split_once(' ')?;
        let n: u64 = n.parse().ok()?;
        Some(BatchInfo {
            signal: 0,
            items: n,
            tracepoints: vec![(tp.to_string(), n)],
        })
    })
}

/// Answers from a script, then Accepted; records the bodies it accepted.
struct Scripted {
    script: Vec<Attempt>,
    accepted: Arc<Mutex<Vec<Vec<u8>>>>,
    calls: Arc<AtomicUsize>,
}

impl Link for Scripted {
    fn send(&mut self, _signal: u8, body: &[u8]) -> Attempt {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let a = if self.script.is_empty() {
            Attempt::Accepted {
                rejected: 0,
                message: None,
            }
        } else {
            self.script.remove(0)
        };
        if matches!(a, Attempt::Accepted { .. }) {
            self.accepted.lock().unwrap().push(body.to_vec());
        }
        a
    }
}

struct NoWait;
impl Pacing for NoWait {
    fn next_delay(&mut self, _hint: Option<Duration>) -> Duration {
        Duration::from_millis(1)
    }
    fn reset(&mut self) {}
}

/// The bodies the scripted link accepted, in order.
type Accepted = Arc<Mutex<Vec<Vec<u8>>>>;

/// A sink over a memory queue and a scripted link; also what the link accepted and how
/// often it was called.
fn sink(
    script: Vec<Attempt>,
    cap: u64,
    policy: FullPolicy,
) -> (DeliverySink, Accepted, Arc<AtomicUsize>) {
    let accepted = Arc::new(Mutex::new(Vec::new()));
    let calls = Arc::new(AtomicUsize::new(0));
    let parts = Parts {
        queue: Arc::new(MemoryQueue::new(cap, policy)),
        link: Box::new(Scripted {
            script,
            accepted: accepted.clone(),
            calls: calls.clone(),
        }),
        pacing: Box::new(NoWait),
        meta: meta(),
        notices: None,
        durable: false,
        drain: Duration::from_secs(5),
        quiet: true,
        observe: None,
        tick: None,
        first_new_id: 0,
    };
    let s = DeliverySink::start(parts, Arc::new(Shared::default()), split()).unwrap();
    (s, accepted, calls)
}

#[test]
fn retries_then_delivers_in_order_and_balances() {
    let retry = Attempt::Retry {
        after: None,
        reason: "down".into(),
    };
    let (mut s, accepted, calls) = sink(vec![retry.clone(), retry], 1 << 20, FullPolicy::Block);
    s.write_lines(b"a:x 3 one\na:y 2 two\n").unwrap();
    s.write_lines(b"a:x 1 three\n").unwrap();
    s.close().unwrap();
    let got = accepted.lock().unwrap().clone();
    assert_eq!(
        got,
        vec![
            b"a:x 3 one\n".to_vec(),
            b"a:y 2 two\n".to_vec(),
            b"a:x 1 three\n".to_vec()
        ]
    );
    let snap = s.shared().ledger.snapshot();
    assert_eq!(snap.total.exported, 6);
    assert_eq!(snap.per_tracepoint["a:x"].exported, 4);
    assert!(snap.total.balances());
    // Two retries, then one send per batch.
    assert_eq!(calls.load(Ordering::SeqCst), 2 + 3);
}

#[test]
fn failed_and_partial_are_dropped_with_their_reason() {
    let (mut s, _, _) = sink(
        vec![
            Attempt::Failed {
                reason: "400 bad".into(),
            },
            Attempt::Accepted {
                rejected: 2,
                message: Some("too old".into()),
            },
        ],
        1 << 20,
        FullPolicy::Block,
    );
    s.write_lines(b"a:x 3 one\na:x 5 two\n").unwrap();
    s.close().unwrap();
    let t = s.shared().ledger.snapshot().total;
    assert_eq!(t.dropped(DropReason::Rejected), 3);
    assert_eq!(t.dropped(DropReason::PartialSuccess), 2);
    assert_eq!(t.exported, 3);
    assert!(t.balances());
}

#[test]
fn without_a_spool_what_is_left_at_stop_is_counted_as_shutdown() {
    // The collector never answers well: the drain time runs out.
    let script = (0..100_000)
        .map(|_| Attempt::Retry {
            after: None,
            reason: "down".into(),
        })
        .collect();
    let (mut s, _, _) = sink(script, 1 << 20, FullPolicy::Block);
    s.drain = Duration::from_millis(100);
    s.write_lines(b"a:x 3 one\na:x 5 two\n").unwrap();
    s.close().unwrap();
    let t = s.shared().ledger.snapshot().total;
    assert_eq!(t.dropped(DropReason::Shutdown), 8);
    assert_eq!(t.pending, 0);
    assert!(t.balances());
}

#[test]
fn a_stop_ends_a_wait_for_room_after_the_drain_time() {
    let parts = Parts {
        queue: Arc::new(MemoryQueue::new(24, FullPolicy::Block)),
        // The collector never answers: nothing leaves the queue.
        link: Box::new(Scripted {
            script: (0..100_000)
                .map(|_| Attempt::Retry {
                    after: None,
                    reason: "down".into(),
                })
                .collect(),
            accepted: Arc::new(Mutex::new(Vec::new())),
            calls: Arc::new(AtomicUsize::new(0)),
        }),
        pacing: Box::new(NoWait),
        meta: meta(),
        notices: None,
        durable: true,
        drain: Duration::from_millis(300),
        quiet: true,
        observe: None,
        tick: None,
        first_new_id: 0,
    };
    let mut s = DeliverySink::start(parts, Arc::new(Shared::default()), split()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    s.stop_waiting_after(stop.clone(), Duration::from_millis(300));
    s.write_lines(b"a:x 3 first\n").unwrap();
    let t = std::thread::spawn(move || {
        // No room: waits, until the stop's drain time is up.
        s.write_lines(b"a:x 2 second\n").unwrap();
        s
    });
    std::thread::sleep(Duration::from_millis(400));
    assert!(
        !t.is_finished(),
        "must wait for room while no stop is asked"
    );
    let asked = Instant::now();
    stop.store(true, Ordering::Release);
    let mut s = t.join().unwrap();
    let took = asked.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "{took:?}"
    );
    let started = Instant::now();
    s.close().unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(250),
        "close waits again"
    );
    let t = s.shared().ledger.snapshot().total;
    assert_eq!(t.recorded, 5);
    assert_eq!(t.dropped(DropReason::Shutdown), 2);
    assert_eq!(t.pending, 3);
    assert!(t.balances());
}
