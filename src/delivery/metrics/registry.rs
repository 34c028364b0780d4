//! [`Metrics`]: every counter and gauge, registered once in a `prometheus-client` registry,
//! updated through typed methods.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabel, EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use super::process::ProcessCollector;
use super::{DropReason, ExportOutcome, RetryReason, Signal, SignalLabel};

/// Upper bounds (seconds) of `uevrec_export_duration_seconds`' buckets: 1 ms to 30 s, about
/// ×2.5 apart (a request on the loopback takes ~1 ms; the OTLP default timeout is 10 s).
pub(super) const DURATION_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// A hook run before each scrape (see [`Metrics::on_scrape`]).
pub type ScrapeHook = Box<dyn Fn(&Metrics) + Send + Sync>;

/// A Kubernetes pod as the labels `k8s_namespace` and `k8s_pod`.
type Pod = Arc<(Box<str>, Box<str>)>;

/// The pod label values of records of pods over the cap ([`Metrics::set_max_pods`]).
pub const OTHER_PODS: &str = "(other)";

/// Distinct pods over the cap remembered (and counted) at most.
const MAX_FOLDED: usize = 10_000;

/// `tracepoint`, then `k8s_namespace` and `k8s_pod` when the records came from a pod.
fn encode_tracepoint(
    tracepoint: &str,
    pod: Option<&Pod>,
    encoder: &mut LabelSetEncoder,
) -> Result<(), std::fmt::Error> {
    ("tracepoint", tracepoint).encode(encoder.encode_label())?;
    if let Some(pod) = pod {
        ("k8s_namespace", &*pod.0).encode(encoder.encode_label())?;
        ("k8s_pod", &*pod.1).encode(encoder.encode_label())?;
    }
    Ok(())
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct TracepointLabels {
    tracepoint: Arc<str>,
    pod: Option<Pod>,
}

impl EncodeLabelSet for TracepointLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        encode_tracepoint(&self.tracepoint, self.pod.as_ref(), encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct ExportedLabels {
    tracepoint: Arc<str>,
    pod: Option<Pod>,
    signal: SignalLabel,
}

impl EncodeLabelSet for ExportedLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        encode_tracepoint(&self.tracepoint, self.pod.as_ref(), encoder)?;
        ("signal", self.signal).encode(encoder.encode_label())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct DroppedLabels {
    tracepoint: Arc<str>,
    pod: Option<Pod>,
    reason: DropReason,
}

impl EncodeLabelSet for DroppedLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        encode_tracepoint(&self.tracepoint, self.pod.as_ref(), encoder)?;
        ("reason", self.reason).encode(encoder.encode_label())
    }
}

/// The pods with series of their own, and those folded into [`OTHER_PODS`].
#[derive(Debug, Default)]
struct PodSeries {
    /// Series key (tracepoint, NUL, namespace, `/`, pod) → its handle.
    handles: HashMap<Box<str>, TracepointMetrics>,
    /// The pods with series of their own (at most the cap).
    admitted: HashSet<Pod>,
    /// Pods folded (at most [`MAX_FOLDED`] remembered).
    folded: HashSet<Pod>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NotKeptLabels {
    tracepoint: String,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CpuLabels {
    cpu: u32,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SignalLabels {
    signal: SignalLabel,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    signal: SignalLabel,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RetryLabels {
    reason: RetryReason,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabels {
    version: &'static str,
}

type HistogramFamily<S> = Family<S, Histogram, fn() -> Histogram>;

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

/// An unsigned gauge (sizes, counts of things present).
type UGauge = Gauge<u64, AtomicU64>;

/// uevrec's metrics: `Send + Sync`, shared through an `Arc` by the threads that update
/// them and the server that renders them. Updates are atomic adds or stores (one per
/// batch, not per record); series are created on first use.
pub struct Metrics {
    registry: Registry,
    hooks: RwLock<Vec<ScrapeHook>>,
    tracepoints: RwLock<HashMap<Arc<str>, TracepointMetrics>>,
    pods: RwLock<PodSeries>,
    max_pods: AtomicUsize,
    pods_folded: Counter,
    lost_cpus: RwLock<BTreeMap<u32, Counter>>,

    recorded: Family<TracepointLabels, Counter>,
    lost: Family<CpuLabels, Counter>,
    exported: Family<ExportedLabels, Counter>,
    dropped: Family<DroppedLabels, Counter>,
    spooled: Family<TracepointLabels, Gauge>,
    not_kept: Family<NotKeptLabels, Counter>,
    spool_bytes: UGauge,
    spool_capacity_bytes: UGauge,
    spool_batches: UGauge,
    spool_corrupt_bytes: Counter,
    export_requests: Family<RequestLabels, Counter>,
    export_retries: Family<RetryLabels, Counter>,
    export_duration: HistogramFamily<SignalLabels>,
    export_sent_bytes: Family<SignalLabels, Counter>,
    stage_chunks_in_use: UGauge,
    stage_chunks: UGauge,
    pub(super) attached_events: UGauge,
    pub(super) collector_up: Gauge,
    pub(super) collector_unreachable_seconds: Gauge<f64, AtomicU64>,
    pub(super) ready: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every metric registered, all at zero; `process_*` metrics read from `/proc/self`
    /// at each scrape; `uevrec_build_info{version}` set to this crate's version.
    pub fn new() -> Metrics {
        let mut r = Registry::default();
        let m = Metrics {
            registry: Registry::default(),
            hooks: RwLock::new(Vec::new()),
            tracepoints: RwLock::new(HashMap::new()),
            pods: RwLock::default(),
            max_pods: AtomicUsize::new(Self::DEFAULT_MAX_PODS),
            pods_folded: Counter::default(),
            lost_cpus: RwLock::new(BTreeMap::new()),
            recorded: Family::default(),
            lost: Family::default(),
            exported: Family::default(),
            dropped: Family::default(),
            spooled: Family::default(),
            not_kept: Family::default(),
            spool_bytes: UGauge::default(),
            spool_capacity_bytes: UGauge::default(),
            spool_batches: UGauge::default(),
            spool_corrupt_bytes: Counter::default(),
            export_requests: Family::default(),
            export_retries: Family::default(),
            export_duration: Family::new_with_constructor(duration_histogram),
            export_sent_bytes: Family::default(),
            stage_chunks_in_use: UGauge::default(),
            stage_chunks: UGauge::default(),
            attached_events: UGauge::default(),
            collector_up: Gauge::default(),
            collector_unreachable_seconds: Gauge::default(),
            ready: Gauge::default(),
        };
        // Counters are registered without `_total`: the encoder appends it.
        r.register(
            "uevrec_records_recorded",
            "Records handed to the output (the collector, a file), per tracepoint",
            m.recorded.clone(),
        );
        r.register(
            "uevrec_k8s_pods_folded",
            "Kubernetes pods whose records count under k8s_pod=\"(other)\" because \
             --metrics-max-pods pods had series already (distinct pods, up to 10,000)",
            m.pods_folded.clone(),
        );
        r.register(
            "uevrec_records_lost",
            "Records the kernel lost (its ring was full), per CPU ring",
            m.lost.clone(),
        );
        r.register(
            "uevrec_records_exported",
            "Records the collector acknowledged, per tracepoint and OTLP signal",
            m.exported.clone(),
        );
        r.register(
            "uevrec_records_dropped",
            "Records dropped after they were recorded, per tracepoint and reason",
            m.dropped.clone(),
        );
        r.register(
            "uevrec_records_spooled",
            "Records recorded and not yet acknowledged nor dropped, per tracepoint",
            m.spooled.clone(),
        );
        r.register(
            "uevrec_records_not_kept",
            "Records captured and not handed to the output, per tracepoint and reason \
             (--where: filtered, filter_error)",
            m.not_kept.clone(),
        );
        r.register(
            "uevrec_spool_bytes",
            "Bytes the spool holds",
            m.spool_bytes.clone(),
        );
        r.register(
            "uevrec_spool_capacity_bytes",
            "The spool's size limit in bytes (--spool-size; 0 without a spool)",
            m.spool_capacity_bytes.clone(),
        );
        r.register(
            "uevrec_spool_batches",
            "Batches the spool holds",
            m.spool_batches.clone(),
        );
        r.register(
            "uevrec_spool_corrupt_bytes",
            "Spool bytes skipped because they failed their checksum or could not be read",
            m.spool_corrupt_bytes.clone(),
        );
        r.register(
            "uevrec_export_requests",
            "Export requests sent, per OTLP signal and outcome (accepted, retry, failed)",
            m.export_requests.clone(),
        );
        r.register(
            "uevrec_export_retries",
            "Export requests that failed in a retryable way, per reason",
            m.export_retries.clone(),
        );
        r.register(
            "uevrec_export_duration_seconds",
            "Time from sending an export request to its answer (or its failure), per OTLP signal",
            m.export_duration.clone(),
        );
        r.register(
            "uevrec_export_sent_bytes",
            "Bytes of export request bodies sent (compressed when compressing; retries included)",
            m.export_sent_bytes.clone(),
        );
        r.register(
            "uevrec_stage_chunks_in_use",
            "Stage chunks holding records on their way from the rings to the output",
            m.stage_chunks_in_use.clone(),
        );
        r.register(
            "uevrec_stage_chunks",
            "Stage chunks in all (the pipeline's capacity between the rings and the output)",
            m.stage_chunks.clone(),
        );
        r.register(
            "uevrec_attached_events",
            "Tracepoints attached now",
            m.attached_events.clone(),
        );
        r.register(
            "uevrec_collector_up",
            "1 while the collector answers, 0 while it is unreachable or not yet tried",
            m.collector_up.clone(),
        );
        r.register(
            "uevrec_collector_unreachable_seconds",
            "Seconds since the collector stopped answering (0 while it answers)",
            m.collector_unreachable_seconds.clone(),
        );
        r.register(
            "uevrec_ready",
            "1 when /readyz answers ready, else 0",
            m.ready.clone(),
        );
        r.register(
            "uevrec_build",
            "uevrec's version",
            Info::new(VersionLabels {
                version: env!("CARGO_PKG_VERSION"),
            }),
        );
        r.register_collector(Box::new(ProcessCollector::new()));
        Metrics { registry: r, ..m }
    }

    /// The handle of `tracepoint`'s series (created at zero on first use). Updates through
    /// the handle take no lock; keep it where the tracepoint's batches are handled.
    pub fn tracepoint(&self, tracepoint: &str) -> TracepointMetrics {
        if let Some(t) = read(&self.tracepoints).get(tracepoint) {
            return t.clone();
        }
        let mut map = self
            .tracepoints
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(t) = map.get(tracepoint) {
            return t.clone();
        }
        let name: Arc<str> = Arc::from(tracepoint);
        let t = self.new_series(name.clone(), None);
        map.insert(name, t.clone());
        t
    }

    /// A new handle of the series of `tracepoint` (and `pod`).
    fn new_series(&self, tracepoint: Arc<str>, pod: Option<Pod>) -> TracepointMetrics {
        let labels = TracepointLabels {
            tracepoint: tracepoint.clone(),
            pod: pod.clone(),
        };
        TracepointMetrics(Arc::new(TracepointInner {
            recorded: self.recorded.get_or_create_owned(&labels),
            spooled: self.spooled.get_or_create_owned(&labels),
            exported: Default::default(),
            dropped: Default::default(),
            exported_family: self.exported.clone(),
            dropped_family: self.dropped.clone(),
            name: tracepoint,
            pod,
        }))
    }

    /// The default of [`Metrics::set_max_pods`].
    pub const DEFAULT_MAX_PODS: usize = 1000;

    /// At most `n` distinct Kubernetes pods get series of their own (labels
    /// `k8s_namespace`, `k8s_pod`); the records of later pods count under the pod
    /// `(other)` (both labels), and each such pod in `uevrec_k8s_pods_folded_total`.
    /// Pods admitted already keep their series.
    pub fn set_max_pods(&self, n: usize) {
        self.max_pods.store(n, Ordering::Relaxed);
    }

    /// The handle of `tracepoint`'s series of the records from the Kubernetes pod
    /// `namespace`/`pod` (the namespace empty and the pod its UID while its names are
    /// unknown), or of the pod `(other)` once [`Metrics::set_max_pods`] pods have series.
    pub fn tracepoint_in_pod(
        &self,
        tracepoint: &str,
        namespace: &str,
        pod: &str,
    ) -> TracepointMetrics {
        let key = format!("{tracepoint}\0{namespace}/{pod}");
        if let Some(t) = read(&self.pods).handles.get(key.as_str()) {
            return t.clone();
        }
        let mut series = write(&self.pods);
        if let Some(t) = series.handles.get(key.as_str()) {
            return t.clone();
        }
        let id: Pod = Arc::new((namespace.into(), pod.into()));
        let admitted = series.admitted.contains(&id)
            || (series.admitted.len() < self.max_pods.load(Ordering::Relaxed)
                && series.admitted.insert(id.clone()));
        if admitted {
            let t = self.new_series(Arc::from(tracepoint), Some(id));
            series.handles.insert(key.into(), t.clone());
            return t;
        }
        let room = series.folded.len() < MAX_FOLDED;
        if room && series.folded.insert(id) {
            self.pods_folded.inc();
        }
        // One handle per tracepoint for every folded pod (its exported and dropped
        // series are made once).
        let other = format!("{tracepoint}\0{OTHER_PODS}/{OTHER_PODS}");
        let t = match series.handles.get(other.as_str()) {
            Some(t) => t.clone(),
            None => {
                let labels = Arc::new((OTHER_PODS.into(), OTHER_PODS.into()));
                let t = self.new_series(Arc::from(tracepoint), Some(labels));
                series.handles.insert(other.into(), t.clone());
                t
            }
        };
        if room {
            series.handles.insert(key.into(), t.clone());
        }
        t
    }

    /// `n` records of `tracepoint` handed to the output.
    pub fn records_recorded(&self, tracepoint: &str, n: u64) {
        self.tracepoint(tracepoint).recorded(n);
    }

    /// `n` records of `tracepoint` acknowledged by the collector as `signal`.
    pub fn records_exported(&self, tracepoint: &str, signal: Signal, n: u64) {
        self.tracepoint(tracepoint).exported(signal, n);
    }

    /// `n` records of `tracepoint` dropped for `reason`.
    pub fn records_dropped(&self, tracepoint: &str, reason: DropReason, n: u64) {
        self.tracepoint(tracepoint).dropped(reason, n);
    }

    /// `total` records of `tracepoint` not kept for `reason` so far (`--where`; the
    /// counter is raised to it, never lowered).
    pub fn records_not_kept(&self, tracepoint: &str, reason: &'static str, total: u64) {
        let labels = NotKeptLabels {
            tracepoint: tracepoint.to_string(),
            reason,
        };
        let counter = self.not_kept.get_or_create(&labels);
        let was = counter.get();
        if total > was {
            counter.inc_by(total - was);
        }
    }

    /// `n` records of `tracepoint` wait in the spool (or in flight) now.
    pub fn set_records_spooled(&self, tracepoint: &str, n: u64) {
        self.tracepoint(tracepoint).set_spooled(n);
    }

    /// The kernel lost `n` records in `cpu`'s ring.
    pub fn records_lost(&self, cpu: u32, n: u64) {
        if let Some(c) = read(&self.lost_cpus).get(&cpu) {
            c.inc_by(n);
            return;
        }
        let c = self.lost.get_or_create_owned(&CpuLabels { cpu });
        write(&self.lost_cpus).insert(cpu, c.clone());
        c.inc_by(n);
    }

    /// Create the `uevrec_records_lost_total{cpu}` series of these CPUs at 0 (call once
    /// the rings exist): a series that first appears with a count above 0 has its first
    /// increase missed by PromQL's `increase()`.
    pub fn init_cpus(&self, cpus: impl IntoIterator<Item = u32>) {
        for cpu in cpus {
            self.records_lost(cpu, 0);
        }
    }

    /// The spool's state now: `bytes` held of `capacity_bytes` (0: no spool), in `batches`.
    pub fn set_spool(&self, bytes: u64, capacity_bytes: u64, batches: u64) {
        self.spool_bytes.set(bytes);
        self.spool_capacity_bytes.set(capacity_bytes);
        self.spool_batches.set(batches);
    }

    /// `n` spool bytes were skipped as corrupt (their records, when their count is known,
    /// are counted with [`DropReason::SpoolCorrupt`]).
    pub fn spool_corrupt_bytes(&self, n: u64) {
        self.spool_corrupt_bytes.inc_by(n);
    }

    /// The spool's `(bytes, capacity_bytes)` as last set.
    pub fn spool_fill(&self) -> (u64, u64) {
        (self.spool_bytes.get(), self.spool_capacity_bytes.get())
    }

    /// One export request of `signal` ended with `outcome` after `took`, having sent
    /// `bytes` of body. A [`ExportOutcome::Retry`] also counts in
    /// `uevrec_export_retries_total{reason}`.
    pub fn export_attempt(
        &self,
        signal: Signal,
        outcome: ExportOutcome,
        took: Duration,
        bytes: u64,
    ) {
        self.export_requests
            .get_or_create(&RequestLabels {
                signal: SignalLabel(signal),
                outcome: outcome.as_str(),
            })
            .inc();
        if let ExportOutcome::Retry(reason) = outcome {
            self.export_retries
                .get_or_create(&RetryLabels { reason })
                .inc();
        }
        let labels = SignalLabels {
            signal: SignalLabel(signal),
        };
        self.export_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        self.export_sent_bytes.get_or_create(&labels).inc_by(bytes);
    }

    /// The stage's occupancy now: `in_use` chunks hold records, of `total`.
    pub fn set_stage_chunks(&self, in_use: u64, total: u64) {
        self.stage_chunks_in_use.set(in_use);
        self.stage_chunks.set(total);
    }

    /// Run `hook` before every scrape (each [`Metrics::render`] and each `/metrics` or
    /// `/readyz` request), to set gauges from state owned elsewhere (the spool's size, the
    /// stage's occupancy). Hooks run in the order added, on the server's thread; they
    /// must be quick and must not call `on_scrape` themselves (that would deadlock).
    pub fn on_scrape(&self, hook: ScrapeHook) {
        write(&self.hooks).push(hook);
    }

    /// Run the scrape hooks.
    pub(super) fn run_hooks(&self) {
        for hook in read(&self.hooks).iter() {
            hook(self);
        }
    }

    /// The scrape hooks run, then every metric in the Prometheus text format 0.0.4
    /// (`Content-Type: text/plain; version=0.0.4`). The gauges [`super::Health`] owns
    /// (`uevrec_attached_events`, `uevrec_collector_*`, `uevrec_ready`) are as last
    /// published ([`super::Health::publish`]; the server publishes before each scrape).
    pub fn render(&self) -> String {
        self.run_hooks();
        self.encode(false)
    }

    /// As [`Metrics::render`], in OpenMetrics 1.0 text (ends with `# EOF`).
    pub fn render_openmetrics(&self) -> String {
        self.run_hooks();
        self.encode(true)
    }

    /// The registry encoded, without running the hooks.
    pub(super) fn encode(&self, openmetrics: bool) -> String {
        let mut out = String::with_capacity(8192);
        // Writing into a String cannot fail, nor can encoding our label sets: an error
        // here would be a bug in the encoder, reported in the output rather than a panic.
        let done = if openmetrics {
            prometheus_client::encoding::text::encode(&mut out, &self.registry)
        } else {
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
        };
        if done.is_err() {
            out.push_str("\n# uevrec: encoding the metrics failed; the output is incomplete\n");
        }
        out
    }

    /// Every tracepoint's accounting, sorted by name (for the end-of-run summary: the
    /// same numbers `/metrics` shows).
    /// The series of pods are summed into their tracepoint's.
    pub fn accounts(&self) -> Vec<TracepointAccount> {
        let mut by_name: BTreeMap<String, TracepointAccount> = BTreeMap::new();
        let pods = read(&self.pods);
        // Each handle once: the folded pods of a tracepoint share one.
        let mut seen = HashSet::new();
        let pod_series = pods
            .handles
            .values()
            .filter(|t| seen.insert(Arc::as_ptr(&t.0)));
        for t in read(&self.tracepoints).values().chain(pod_series) {
            let a = t.account();
            match by_name.get_mut(&a.tracepoint) {
                Some(sum) => sum.add(&a),
                None => {
                    by_name.insert(a.tracepoint.clone(), a);
                }
            }
        }
        by_name.into_values().collect()
    }

    /// The kernel's losses per CPU ring, by CPU (only CPUs that lost records).
    pub fn lost_by_cpu(&self) -> Vec<(u32, u64)> {
        read(&self.lost_cpus)
            .iter()
            .map(|(cpu, c)| (*cpu, c.get()))
            .collect()
    }
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

/// One tracepoint's series ([`Metrics::tracepoint`]): cheap to clone, updates are atomic
/// adds without a lock. The `exported` and `dropped` series appear on their first update
/// (creating every signal × reason at 0 would multiply the series by 11); `recorded` and
/// `spooled` are created at 0 with the handle.
#[derive(Clone)]
pub struct TracepointMetrics(Arc<TracepointInner>);

struct TracepointInner {
    name: Arc<str>,
    pod: Option<Pod>,
    recorded: Counter,
    spooled: Gauge,
    exported: [OnceLock<Counter>; Signal::ALL.len()],
    dropped: [OnceLock<Counter>; DropReason::ALL.len()],
    exported_family: Family<ExportedLabels, Counter>,
    dropped_family: Family<DroppedLabels, Counter>,
}

impl std::fmt::Debug for TracepointMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("TracepointMetrics")
            .field(&self.0.name)
            .finish()
    }
}

impl TracepointMetrics {
    /// The tracepoint (`system:event`).
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// `n` records handed to the output.
    pub fn recorded(&self, n: u64) {
        self.0.recorded.inc_by(n);
    }

    /// `n` records acknowledged by the collector as `signal`.
    pub fn exported(&self, signal: Signal, n: u64) {
        let t = &self.0;
        t.exported[signal.index()]
            .get_or_init(|| {
                t.exported_family.get_or_create_owned(&ExportedLabels {
                    tracepoint: t.name.clone(),
                    pod: t.pod.clone(),
                    signal: SignalLabel(signal),
                })
            })
            .inc_by(n);
    }

    /// `n` records dropped for `reason`.
    pub fn dropped(&self, reason: DropReason, n: u64) {
        let t = &self.0;
        t.dropped[reason.index()]
            .get_or_init(|| {
                t.dropped_family.get_or_create_owned(&DroppedLabels {
                    tracepoint: t.name.clone(),
                    pod: t.pod.clone(),
                    reason,
                })
            })
            .inc_by(n);
    }

    /// `n` records wait in the spool (or in flight) now.
    pub fn set_spooled(&self, n: u64) {
        self.0.spooled.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// `n` more records wait.
    pub fn spooled_add(&self, n: u64) {
        self.0.spooled.inc_by(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// `n` fewer records wait (acknowledged or dropped).
    pub fn spooled_sub(&self, n: u64) {
        self.0.spooled.dec_by(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// The counts now.
    pub fn account(&self) -> TracepointAccount {
        let t = &self.0;
        let get = |c: &OnceLock<Counter>| c.get().map_or(0, Counter::get);
        TracepointAccount {
            tracepoint: t.name.to_string(),
            recorded: t.recorded.get(),
            exported: std::array::from_fn(|i| get(&t.exported[i])),
            dropped: std::array::from_fn(|i| get(&t.dropped[i])),
            spooled: t.spooled.get(),
        }
    }
}

/// One tracepoint's counts ([`Metrics::accounts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracepointAccount {
    /// The tracepoint (`system:event`, or [`super::UNKNOWN_TRACEPOINT`]).
    pub tracepoint: String,
    /// Records handed to the output.
    pub recorded: u64,
    /// Records acknowledged, by [`Signal::index`].
    pub exported: [u64; Signal::ALL.len()],
    /// Records dropped, by [`DropReason::index`].
    pub dropped: [u64; DropReason::ALL.len()],
    /// Records waiting (a gauge: may be set by its owner at any time).
    pub spooled: i64,
}

impl TracepointAccount {
    /// Add `other`'s counts (another series of the same tracepoint).
    fn add(&mut self, other: &TracepointAccount) {
        self.recorded += other.recorded;
        for (a, b) in self.exported.iter_mut().zip(other.exported) {
            *a += b;
        }
        for (a, b) in self.dropped.iter_mut().zip(other.dropped) {
            *a += b;
        }
        self.spooled += other.spooled;
    }

    /// Records acknowledged, all signals.
    pub fn exported_total(&self) -> u64 {
        self.exported.iter().sum()
    }

    /// Records dropped, all reasons.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }

    /// recorded − (exported + dropped + spooled): 0 when every recorded record is
    /// accounted for; positive: records missing from the accounting; negative: counted
    /// twice.
    pub fn unaccounted(&self) -> i128 {
        i128::from(self.recorded)
            - i128::from(self.exported_total())
            - i128::from(self.dropped_total())
            - i128::from(self.spooled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample lines (not comments) of `text` whose name starts with `prefix`.
    fn samples<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
        text.lines()
            .filter(|l| !l.starts_with('#') && l.starts_with(prefix))
            .collect()
    }

    #[test]
    fn tracepoint_series_and_accounts() {
        let m = Metrics::new();
        let t = m.tracepoint("user_events:a");
        t.recorded(10);
        t.exported(Signal::Logs, 6);
        t.dropped(DropReason::PartialSuccess, 1);
        t.set_spooled(3);
        m.records_recorded("user_events:a", 2);
        m.records_dropped("user_events:a", DropReason::Rejected, 2);
        m.records_recorded("raw_syscalls:sys_enter", 5);
        let text = m.render();
        let mut recorded = samples(&text, "uevrec_records_recorded_total");
        recorded.sort_unstable();
        assert_eq!(
            recorded,
            [
                "uevrec_records_recorded_total{tracepoint=\"raw_syscalls:sys_enter\"} 5",
                "uevrec_records_recorded_total{tracepoint=\"user_events:a\"} 12",
            ],
            "{text}"
        );
        assert!(text.contains(
            "uevrec_records_exported_total{tracepoint=\"user_events:a\",signal=\"logs\"} 6"
        ));
        assert!(text.contains(
            "uevrec_records_dropped_total{tracepoint=\"user_events:a\",reason=\"rejected\"} 2"
        ));
        assert!(text.contains("uevrec_records_spooled{tracepoint=\"user_events:a\"} 3"));
        // Series of signals and reasons never used do not appear.
        assert!(!text.contains("signal=\"traces\""), "{text}");
        assert!(!text.contains("reason=\"spool_full\""), "{text}");

        let accounts = m.accounts();
        assert_eq!(accounts.len(), 2);
        assert_eq!(accounts[0].tracepoint, "raw_syscalls:sys_enter");
        assert_eq!(accounts[0].unaccounted(), 5);
        let a = &accounts[1];
        assert_eq!(a.recorded, 12);
        assert_eq!(a.exported_total(), 6);
        assert_eq!(a.dropped[DropReason::Rejected.index()], 2);
        assert_eq!(a.dropped_total(), 3);
        assert_eq!(a.unaccounted(), 0);
    }

    #[test]
    fn pods_over_the_cap_fold_into_other() {
        let m = Metrics::new();
        m.set_max_pods(1);
        m.tracepoint_in_pod("s:e", "shop", "cart-0").recorded(3);
        // The admitted pod keeps its series on another tracepoint too.
        m.tracepoint_in_pod("s:f", "shop", "cart-0").recorded(1);
        m.tracepoint_in_pod("s:e", "shop", "cart-1").recorded(2);
        m.tracepoint_in_pod("s:e", "web", "front").recorded(4);
        m.tracepoint_in_pod("s:e", "web", "front")
            .exported(Signal::Logs, 4);
        m.tracepoint("s:e").recorded(5);
        let text = m.render();
        for line in [
            "uevrec_records_recorded_total{tracepoint=\"s:e\",k8s_namespace=\"shop\",k8s_pod=\"cart-0\"} 3",
            "uevrec_records_recorded_total{tracepoint=\"s:f\",k8s_namespace=\"shop\",k8s_pod=\"cart-0\"} 1",
            "uevrec_records_recorded_total{tracepoint=\"s:e\",k8s_namespace=\"(other)\",k8s_pod=\"(other)\"} 6",
            "uevrec_records_exported_total{tracepoint=\"s:e\",k8s_namespace=\"(other)\",k8s_pod=\"(other)\",signal=\"logs\"} 4",
            "uevrec_records_recorded_total{tracepoint=\"s:e\"} 5",
            "uevrec_k8s_pods_folded_total 2",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
        assert!(!text.contains("cart-1"), "{text}");
        let a = m.accounts();
        assert_eq!(a.len(), 2);
        assert_eq!((a[0].tracepoint.as_str(), a[0].recorded), ("s:e", 14));
        assert_eq!(a[0].exported_total(), 4);
        assert_eq!((a[1].tracepoint.as_str(), a[1].recorded), ("s:f", 1));
    }

    #[test]
    fn handles_share_series() {
        let m = Metrics::new();
        let a = m.tracepoint("s:e");
        let b = m.tracepoint("s:e");
        a.exported(Signal::Traces, 1);
        b.exported(Signal::Traces, 2);
        a.spooled_add(5);
        b.spooled_sub(2);
        assert_eq!(m.accounts()[0].exported[Signal::Traces.index()], 3);
        assert_eq!(m.accounts()[0].spooled, 3);
    }

    #[test]
    fn lost_per_cpu_and_export_attempts() {
        let m = Metrics::new();
        m.records_lost(3, 7);
        m.records_lost(0, 1);
        m.records_lost(3, 1);
        assert_eq!(m.lost_by_cpu(), vec![(0, 1), (3, 8)]);
        m.export_attempt(
            Signal::Logs,
            ExportOutcome::Retry(RetryReason::Throttled),
            Duration::from_millis(3),
            100,
        );
        m.export_attempt(
            Signal::Logs,
            ExportOutcome::Accepted,
            Duration::from_millis(20),
            50,
        );
        let text = m.render();
        assert!(
            text.contains("uevrec_records_lost_total{cpu=\"3\"} 8"),
            "{text}"
        );
        assert!(text.contains("uevrec_export_requests_total{signal=\"logs\",outcome=\"retry\"} 1"));
        assert!(text.contains("uevrec_export_retries_total{reason=\"throttled\"} 1"));
        assert!(text.contains("uevrec_export_sent_bytes_total{signal=\"logs\"} 150"));
        assert!(
            text.contains("uevrec_export_duration_seconds_bucket{signal=\"logs\",le=\"0.005\"} 1")
        );
        assert!(
            text.contains("uevrec_export_duration_seconds_bucket{signal=\"logs\",le=\"0.025\"} 2")
        );
        assert!(text.contains("uevrec_export_duration_seconds_count{signal=\"logs\"} 2"));
        assert!(text.contains(&format!(
            "uevrec_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        )));
    }

    #[test]
    fn hooks_run_before_each_render() {
        let m = Metrics::new();
        let calls = Arc::new(AtomicU64::new(0));
        let c = calls.clone();
        m.on_scrape(Box::new(move |m| {
            let n = c.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            m.set_spool(n * 100, 1000, n);
        }));
        assert!(m.render().contains("uevrec_spool_bytes 100\n"));
        let om = m.render_openmetrics();
        assert!(om.contains("uevrec_spool_bytes 200\n"));
        assert!(om.ends_with("# EOF\n"));
        assert_eq!(m.spool_fill(), (200, 1000));
    }

    #[test]
    fn prometheus_text_shows_families_with_series_only() {
        let m = Metrics::new();
        let empty = m.render();
        // A family without series is left out entirely.
        assert!(!empty.contains("uevrec_records_recorded"), "{empty}");
        m.init_cpus([0, 1]);
        m.records_recorded("s:e", 1);
        m.export_attempt(Signal::Logs, ExportOutcome::Failed, Duration::ZERO, 0);
        let text = m.render();
        assert!(
            text.contains("uevrec_records_lost_total{cpu=\"1\"} 0\n"),
            "{text}"
        );
        assert!(!text.contains("# EOF"));
        assert!(text.contains("# TYPE uevrec_records_recorded_total counter"));
        assert!(text.contains("# TYPE uevrec_export_duration_seconds histogram"));
    }
}
