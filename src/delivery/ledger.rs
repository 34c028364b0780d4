//! The delivery accounting: for every tracepoint and in total,
//!
//! ```text
//! recorded (this run) + from_spool (left by an earlier run)
//!     = exported (acknowledged) + dropped (by reason) + pending (still queued)
//! ```
//!
//! Updated once per batch (never per record), read by the summary and by `/metrics`. A
//! batch's records per series ([`series_key`]: a tracepoint, and its Kubernetes pod) come
//! from its frame's metadata ([`uevrec_parsers::otlp::FrameMeta`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::delivery::metrics::{Metrics, Signal, TracepointMetrics};

/// Why records were dropped instead of exported (the metrics' `reason` label).
pub use crate::delivery::metrics::DropReason;

/// The counts of one tracepoint, or of all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Records handed to the exporter by this run.
    pub recorded: u64,
    /// Records found in the spool at start (left by an earlier run).
    pub from_spool: u64,
    /// Records the collector acknowledged.
    pub exported: u64,
    /// Records dropped, per [`DropReason`] (indexed as [`DropReason::ALL`]).
    pub dropped: [u64; DropReason::ALL.len()],
    /// Records still queued (in the spool, or in memory).
    pub pending: u64,
}

impl Counts {
    /// Records dropped for any reason.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }

    /// Records dropped for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped[reason.index()]
    }

    /// Whether `recorded + from_spool = exported + dropped + pending` holds.
    pub fn balances(&self) -> bool {
        self.recorded + self.from_spool == self.exported + self.dropped_total() + self.pending
    }
}

/// Records of a batch, per series: `(series key, count)` ([`series_key`]).
pub type PerTracepoint<'a> = &'a [(String, u64)];

/// What separates a series key's tracepoint from its pod (no tracepoint name holds it).
const POD_SEPARATOR: char = '\0';

/// The series key of `tracepoint`'s records from `pod` (an export frame's pod column:
/// `namespace/pod`, `/UID` while the pod's names are unknown, or empty outside pods):
/// the tracepoint alone outside pods. The ledger's own counts are per tracepoint (pods
/// summed); `/metrics` gets the pod as the labels `k8s_namespace` and `k8s_pod`
/// ([`crate::delivery::metrics::Metrics::tracepoint_in_pod`]).
pub fn series_key(mut tracepoint: String, pod: &str) -> String {
    if !pod.is_empty() {
        tracepoint.push(POD_SEPARATOR);
        tracepoint.push_str(pod);
    }
    tracepoint
}

/// The tracepoint of a series key and its pod as `(namespace, pod)` (the namespace
/// empty, the pod its UID, while the pod's names are unknown).
pub fn split_key(key: &str) -> (&str, Option<(&str, &str)>) {
    match key.split_once(POD_SEPARATOR) {
        Some((tp, pod)) => (tp, Some(pod.split_once('/').unwrap_or(("", pod)))),
        None => (key, None),
    }
}

/// The tracepoint name for records whose batch metadata was unreadable.
pub const UNKNOWN: &str = crate::delivery::metrics::UNKNOWN_TRACEPOINT;

/// The tracepoint under which batches left in the spool by an earlier run are counted
/// (their per-tracepoint counts are in the spool, not read at start).
pub const EARLIER_RUN: &str = "(earlier run)";

/// The accounting of one run. uevrec's own records (lost counts, notices) count under
/// the tracepoint `uevrec`, records of batches whose metadata was unreadable (a corrupt
/// spool) under [`UNKNOWN`].
#[derive(Default)]
pub struct Ledger {
    inner: Mutex<Inner>,
    /// Mirrored into `/metrics` as it changes.
    metrics: Option<Arc<Metrics>>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("inner", &self.inner)
            .finish()
    }
}

#[derive(Debug, Default)]
struct Inner {
    per: BTreeMap<String, Counts>,
    total: Counts,
    /// OTLP items (log records, spans, data points) rejected by partial successes.
    rejected_items: u64,
}

/// A copy of the ledger at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LedgerSnapshot {
    /// Per tracepoint (`system:event`, `uevrec`, `(unknown)`).
    pub per_tracepoint: BTreeMap<String, Counts>,
    /// All of them.
    pub total: Counts,
    /// OTLP items rejected by partial successes (the collector's unit: log records,
    /// spans, metric data points).
    pub rejected_items: u64,
}

impl Ledger {
    /// A ledger whose every change also goes to `metrics` (the
    /// `uevrec_records_*{tracepoint}` series; records found in the spool at start count
    /// as recorded there).
    pub fn with_metrics(metrics: Arc<Metrics>) -> Self {
        Ledger {
            inner: Mutex::default(),
            metrics: Some(metrics),
        }
    }

    /// The metrics this ledger's changes go to, when it has them.
    pub fn metrics(&self) -> Option<&Arc<Metrics>> {
        self.metrics.as_ref()
    }

    fn mirror(&self, counts: PerTracepoint<'_>, f: impl Fn(&TracepointMetrics, u64)) {
        if let Some(m) = &self.metrics {
            for (key, n) in counts.iter().filter(|(_, n)| *n > 0) {
                f(&series(m, key), *n);
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn apply(&self, counts: PerTracepoint<'_>, f: impl Fn(&mut Counts, u64)) {
        let mut g = self.lock();
        let inner = &mut *g;
        for (key, n) in counts {
            if *n == 0 {
                continue;
            }
            let name = split_key(key).0;
            match inner.per.get_mut(name) {
                Some(c) => f(c, *n),
                None => f(inner.per.entry(name.to_string()).or_default(), *n),
            }
            f(&mut inner.total, *n);
        }
    }

    /// Records handed over by this run (now pending).
    pub fn recorded(&self, counts: PerTracepoint<'_>) {
        self.apply(counts, |c, n| {
            c.recorded += n;
            c.pending += n;
        });
        self.mirror(counts, |t, n| {
            t.recorded(n);
            t.spooled_add(n);
        });
    }

    /// Records found pending in the spool at start.
    pub fn from_spool(&self, counts: PerTracepoint<'_>) {
        self.apply(counts, |c, n| {
            c.from_spool += n;
            c.pending += n;
        });
        self.mirror(counts, |t, n| {
            t.recorded(n);
            t.spooled_add(n);
        });
    }

    /// Records found in the spool at start whose bytes were corrupt: never sent.
    pub fn corrupt_at_start(&self, records: u64) {
        let counts = [(UNKNOWN.to_string(), records)];
        self.apply(&counts, |c, n| {
            c.from_spool += n;
            c.dropped[DropReason::SpoolCorrupt.index()] += n;
        });
        self.mirror(&counts, |t, n| {
            t.recorded(n);
            t.dropped(DropReason::SpoolCorrupt, n);
        });
    }

    /// A pending batch was acknowledged; `rejected` of its items were rejected
    /// (partial success). The collector does not say which: they are attributed to
    /// the batch's tracepoints in its order (totals exact, per tracepoint a
    /// convention), and only as many records as the batch holds (for metrics a data
    /// point is not a record; then `items_are_records` is false and the records all
    /// count as exported while `rejected_items` says how many points were refused).
    pub fn exported(
        &self,
        counts: PerTracepoint<'_>,
        signal: Signal,
        rejected: u64,
        items_are_records: bool,
    ) {
        let mut left = if items_are_records { rejected } else { 0 };
        let mut g = self.lock();
        let inner = &mut *g;
        inner.rejected_items += rejected;
        for (key, n) in counts {
            let drop = left.min(*n);
            left -= drop;
            let name = split_key(key).0;
            let per = match inner.per.get_mut(name) {
                Some(c) => c,
                None => inner.per.entry(name.to_string()).or_default(),
            };
            for c in [per, &mut inner.total] {
                c.pending -= (*n).min(c.pending);
                c.exported += n - drop;
                c.dropped[DropReason::PartialSuccess.index()] += drop;
            }
            if let Some(m) = &self.metrics {
                let t = series(m, key);
                t.spooled_sub(*n);
                if n - drop > 0 {
                    t.exported(signal, n - drop);
                }
                if drop > 0 {
                    t.dropped(DropReason::PartialSuccess, drop);
                }
            }
        }
    }

    /// A pending batch was dropped.
    pub fn dropped(&self, counts: PerTracepoint<'_>, reason: DropReason) {
        self.apply(counts, |c, n| {
            c.pending -= n.min(c.pending);
            c.dropped[reason.index()] += n;
        });
        self.mirror(counts, |t, n| {
            t.spooled_sub(n);
            t.dropped(reason, n);
        });
    }

    /// The counts now.
    pub fn snapshot(&self) -> LedgerSnapshot {
        let g = self.lock();
        LedgerSnapshot {
            per_tracepoint: g.per.clone(),
            total: g.total,
            rejected_items: g.rejected_items,
        }
    }
}

/// The `/metrics` series of a series key.
fn series(m: &Metrics, key: &str) -> TracepointMetrics {
    match split_key(key) {
        (tp, Some((namespace, pod))) => m.tracepoint_in_pod(tp, namespace, pod),
        (tp, None) => m.tracepoint(tp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tp(v: &[(&str, u64)]) -> Vec<(String, u64)> {
        v.iter().map(|(s, n)| (s.to_string(), *n)).collect()
    }

    #[test]
    fn partial_success_is_attributed_in_order() {
        let l = Ledger::default();
        let b = tp(&[("a:x", 3), ("a:y", 2)]);
        l.recorded(&b);
        l.exported(&b, Signal::Logs, 4, true);
        let s = l.snapshot();
        assert_eq!(
            s.per_tracepoint["a:x"].dropped(DropReason::PartialSuccess),
            3
        );
        assert_eq!(
            s.per_tracepoint["a:y"].dropped(DropReason::PartialSuccess),
            1
        );
        assert_eq!(s.per_tracepoint["a:y"].exported, 1);
        assert_eq!(s.total.exported, 1);
        assert!(s.total.balances());
        assert_eq!(s.rejected_items, 4);
    }

    #[test]
    fn pods_sum_per_tracepoint_and_label_the_metrics() {
        let m = Arc::new(Metrics::new());
        let l = Ledger::with_metrics(m.clone());
        let key = |pod: &str| series_key("a:x".to_string(), pod);
        let b = vec![(key("shop/cart-0"), 3), (key("/9f0e-uid"), 2), (key(""), 1)];
        assert_eq!(split_key(&b[0].0), ("a:x", Some(("shop", "cart-0"))));
        assert_eq!(split_key(&b[1].0), ("a:x", Some(("", "9f0e-uid"))));
        assert_eq!(split_key(&b[2].0), ("a:x", None));
        l.recorded(&b);
        l.exported(&b[..1], Signal::Logs, 0, true);
        l.dropped(&b[1..], DropReason::Shutdown);
        let s = l.snapshot();
        assert_eq!(s.per_tracepoint.len(), 1, "{s:?}");
        assert_eq!(s.per_tracepoint["a:x"].recorded, 6);
        assert!(s.per_tracepoint["a:x"].balances());
        let text = m.render();
        for line in [
            "uevrec_records_recorded_total{tracepoint=\"a:x\",k8s_namespace=\"shop\",k8s_pod=\"cart-0\"} 3",
            "uevrec_records_exported_total{tracepoint=\"a:x\",k8s_namespace=\"shop\",k8s_pod=\"cart-0\",signal=\"logs\"} 3",
            "uevrec_records_dropped_total{tracepoint=\"a:x\",k8s_namespace=\"\",k8s_pod=\"9f0e-uid\",reason=\"shutdown\"} 2",
            "uevrec_records_recorded_total{tracepoint=\"a:x\"} 1",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
    }

    proptest! {
        /// Whatever happens to the batches, every tracepoint and the total balance.
        #[test]
        fn always_balances(ops in proptest::collection::vec((0u8..5, 0u64..50, 0u64..60), 0..60)) {
            let l = Ledger::default();
            let mut pending: Vec<Vec<(String, u64)>> = Vec::new();
            for (op, a, b) in ops {
                let batch = tp(&[("s:a", a), ("s:b", b % 7)]);
                match op {
                    0 => { l.recorded(&batch); pending.push(batch); }
                    1 => { l.from_spool(&batch); pending.push(batch); }
                    2 => if let Some(p) = pending.pop() { l.exported(&p, Signal::Logs, b, a % 2 == 0); },
                    3 => if let Some(p) = pending.pop() { l.dropped(&p, DropReason::ALL[(a % 8) as usize]); },
                    _ => l.corrupt_at_start(a),
                }
                let s = l.snapshot();
                prop_assert!(s.total.balances(), "{:?}", s.total);
                for c in s.per_tracepoint.values() { prop_assert!(c.balances(), "{:?}", c); }
            }
        }
    }
}
