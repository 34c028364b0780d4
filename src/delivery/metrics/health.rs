//! [`Health`]: what `/healthz` (alive) and `/readyz` (ready) answer, decided by the pure
//! functions [`liveness`] and [`readiness`], which state the rules.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::Metrics;

/// The limits [`Health`] decides with.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthConfig {
    /// Not ready once the collector has been unreachable for longer than this.
    pub unready_after: Duration,
    /// Not ready while the spool holds at least this fraction of its capacity (0 < r ≤ 1).
    pub spool_full_ratio: f64,
    /// Not alive once a thread's heartbeat is older than this.
    pub stale_after: Duration,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            unready_after: Duration::from_secs(30),
            spool_full_ratio: 0.9,
            stale_after: Duration::from_secs(30),
        }
    }
}

/// What readiness is decided on ([`readiness`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadinessInputs {
    /// Whether the attach pass has reported at least once ([`Health::set_attached`]).
    pub attach_reported: bool,
    /// Tracepoints attached now.
    pub attached_events: u64,
    /// Whether selectors wait for events that do not exist yet.
    pub waiting_for_events: bool,
    /// Whether the recorder is shutting down.
    pub stopping: bool,
    /// How long the collector has been unreachable (None: it answers, or was not tried).
    pub collector_unreachable_for: Option<Duration>,
    /// Bytes the spool holds.
    pub spool_bytes: u64,
    /// The spool's capacity in bytes (0: no spool).
    pub spool_capacity_bytes: u64,
}

/// Why the recorder is not ready: one line of `/readyz`'s 503 body each.
#[derive(Debug, Clone, PartialEq)]
pub enum NotReady {
    /// The attach pass has not reported yet.
    Starting,
    /// Nothing attached and nothing waited for.
    NoEvents,
    /// The collector has been unreachable for `down`, longer than `limit`.
    CollectorUnreachable {
        /// How long.
        down: Duration,
        /// [`HealthConfig::unready_after`].
        limit: Duration,
    },
    /// The spool is nearly full.
    SpoolNearlyFull {
        /// Bytes held.
        bytes: u64,
        /// Capacity.
        capacity: u64,
        /// [`HealthConfig::spool_full_ratio`].
        limit: f64,
    },
    /// The recorder is shutting down.
    Stopping,
}

impl fmt::Display for NotReady {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotReady::Starting => f.write_str("starting: no events attached yet"),
            NotReady::NoEvents => f.write_str("no events attached, and none waited for"),
            NotReady::CollectorUnreachable { down, limit } => write!(
                f,
                "collector unreachable for {:.1} s (more than {:.1} s)",
                down.as_secs_f64(),
                limit.as_secs_f64()
            ),
            NotReady::SpoolNearlyFull {
                bytes,
                capacity,
                limit,
            } => write!(
                f,
                "spool nearly full: {bytes} of {capacity} bytes ({:.1} %, limit {:.1} %)",
                *bytes as f64 * 100.0 / *capacity as f64,
                limit * 100.0
            ),
            NotReady::Stopping => f.write_str("stopping"),
        }
    }
}

/// Whether a recorder in state `i` is ready under `config`: `Err` lists every reason it is
/// not (each a line of the 503 body). Ready when all of these hold:
///
/// - **events**: at least one tracepoint attached, *or* the recorder is waiting for events
///   its selectors name but that do not exist yet (user_events appear only while their
///   producers run). A recorder waiting that way is doing its job: in a DaemonSet, calling
///   it unready would hold a rolling update on every node where the traced application has
///   not started yet, and the `uevrec_attached_events` gauge already tells who attached
///   nothing. Before the first attach pass has reported, it is not ready ("starting").
/// - **collector**: not unreachable for longer than [`HealthConfig::unready_after`]
///   (default 30 s), counted from the first failed attempt after the last answer. Before
///   any attempt, and without an exporter, this holds.
/// - **spool**: below [`HealthConfig::spool_full_ratio`] of its capacity (default 90 %);
///   holds without a spool (capacity 0).
/// - not stopping ([`Health::set_stopping`]).
pub fn readiness(i: &ReadinessInputs, config: &HealthConfig) -> Result<(), Vec<NotReady>> {
    let mut why = Vec::new();
    if i.stopping {
        why.push(NotReady::Stopping);
    }
    if !i.attach_reported {
        why.push(NotReady::Starting);
    } else if i.attached_events == 0 && !i.waiting_for_events {
        why.push(NotReady::NoEvents);
    }
    if let Some(down) = i.collector_unreachable_for {
        if down > config.unready_after {
            why.push(NotReady::CollectorUnreachable {
                down,
                limit: config.unready_after,
            });
        }
    }
    if i.spool_capacity_bytes > 0
        && i.spool_bytes as f64 >= config.spool_full_ratio * i.spool_capacity_bytes as f64
    {
        why.push(NotReady::SpoolNearlyFull {
            bytes: i.spool_bytes,
            capacity: i.spool_capacity_bytes,
            limit: config.spool_full_ratio,
        });
    }
    if why.is_empty() { Ok(()) } else { Err(why) }
}

/// A thread whose heartbeat is stale: one line of `/healthz`'s 503 body.
#[derive(Debug, Clone, PartialEq)]
pub struct Stale {
    /// The name given to [`Health::heartbeat`].
    pub thread: String,
    /// Time since its last beat.
    pub silent_for: Duration,
    /// [`HealthConfig::stale_after`].
    pub limit: Duration,
}

impl fmt::Display for Stale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "thread {}: no heartbeat for {:.1} s (more than {:.1} s)",
            self.thread,
            self.silent_for.as_secs_f64(),
            self.limit.as_secs_f64()
        )
    }
}

/// Whether threads whose last heartbeats were `ages` ago (name, age) are all alive:
/// `Err` lists those silent for longer than `stale_after` ([`HealthConfig::stale_after`],
/// default 30 s). A thread that ends normally calls [`Heartbeat::retire`]; one that dies
/// (a panic) drops its heartbeat without retiring it, so it goes stale and `/healthz`
/// answers 503 naming it. A thread that waits (for events, for the spool to drain) must
/// wake and beat at least that often.
pub fn liveness(ages: &[(&str, Duration)], stale_after: Duration) -> Result<(), Vec<Stale>> {
    let stale: Vec<Stale> = ages
        .iter()
        .filter(|(_, age)| *age > stale_after)
        .map(|(name, age)| Stale {
            thread: (*name).to_string(),
            silent_for: *age,
            limit: stale_after,
        })
        .collect();
    if stale.is_empty() { Ok(()) } else { Err(stale) }
}

/// The collector's reachability as reported by the exporter.
#[derive(Debug, Clone, Copy)]
enum Collector {
    /// No attempt has ended yet (or there is no exporter).
    Unknown,
    /// The last attempt got an answer.
    Up,
    /// Attempts have failed since this instant (the first failure after the last answer).
    Down(Instant),
}

/// The recorder's health: set by its threads, read by the server. `Send + Sync`, shared
/// through an `Arc`.
#[derive(Debug)]
pub struct Health {
    config: HealthConfig,
    origin: Instant,
    attach_reported: AtomicBool,
    attached: AtomicU64,
    waiting: AtomicBool,
    stopping: AtomicBool,
    collector: Mutex<Collector>,
    beats: Mutex<Vec<Arc<Beat>>>,
}

#[derive(Debug)]
struct Beat {
    name: String,
    /// Milliseconds from [`Health::origin`] to the last beat.
    last_ms: AtomicU64,
    /// The thread ended normally: no longer counted.
    retired: AtomicBool,
}

/// One thread's heartbeat ([`Health::heartbeat`]): [`Heartbeat::beat`] at least every
/// [`HealthConfig::stale_after`], [`Heartbeat::retire`] when the thread ends normally.
#[derive(Debug)]
pub struct Heartbeat {
    beat: Arc<Beat>,
    origin: Instant,
}

impl Heartbeat {
    /// The thread is alive now.
    pub fn beat(&self) {
        self.beat
            .last_ms
            .store(millis(self.origin.elapsed()), Ordering::Relaxed);
    }

    /// The thread ends normally: its heartbeat no longer counts. (A heartbeat dropped
    /// without this, by a thread that panicked, goes stale.)
    pub fn retire(self) {
        self.beat.retired.store(true, Ordering::Relaxed);
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Default for Health {
    fn default() -> Self {
        Health::new(HealthConfig::default())
    }
}

impl Health {
    /// Starting (not ready until [`Health::set_attached`]), collector not tried, no threads.
    pub fn new(config: HealthConfig) -> Health {
        Health {
            config,
            origin: Instant::now(),
            attach_reported: AtomicBool::new(false),
            attached: AtomicU64::new(0),
            waiting: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            collector: Mutex::new(Collector::Unknown),
            beats: Mutex::new(Vec::new()),
        }
    }

    /// The limits in force.
    pub fn config(&self) -> &HealthConfig {
        &self.config
    }

    /// `events` tracepoints are attached now (the attach pass ran).
    pub fn set_attached(&self, events: u64) {
        self.attached.store(events, Ordering::Relaxed);
        self.attach_reported.store(true, Ordering::Release);
    }

    /// Whether selectors wait for events that do not exist yet (late registration).
    pub fn set_waiting(&self, waiting: bool) {
        self.waiting.store(waiting, Ordering::Relaxed);
    }

    /// The recorder is shutting down: not ready from now on.
    pub fn set_stopping(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    /// An export attempt got an answer from the collector: success, partial success or a
    /// non-retryable refusal (the collector is there, whatever it said).
    pub fn collector_reachable(&self) {
        *lock(&self.collector) = Collector::Up;
    }

    /// An export attempt failed in a retryable way (no connection, a timeout, 429, 503, …).
    /// The unreachable time counts from the first such failure after the last answer.
    pub fn collector_unreachable(&self) {
        self.collector_unreachable_at(Instant::now());
    }

    fn collector_unreachable_at(&self, now: Instant) {
        let mut c = lock(&self.collector);
        if !matches!(*c, Collector::Down(_)) {
            *c = Collector::Down(now);
        }
    }

    /// How long the collector has been unreachable at `now` (None: it answers, or was not
    /// tried).
    pub fn collector_unreachable_for(&self, now: Instant) -> Option<Duration> {
        match *lock(&self.collector) {
            Collector::Down(since) => Some(now.saturating_duration_since(since)),
            Collector::Unknown | Collector::Up => None,
        }
    }

    /// A heartbeat for the thread `name` (beaten now).
    pub fn heartbeat(&self, name: &str) -> Heartbeat {
        let beat = Arc::new(Beat {
            name: name.to_string(),
            last_ms: AtomicU64::new(millis(self.origin.elapsed())),
            retired: AtomicBool::new(false),
        });
        let mut beats = lock(&self.beats);
        beats.retain(|b| !b.retired.load(Ordering::Relaxed));
        beats.push(beat.clone());
        Heartbeat {
            beat,
            origin: self.origin,
        }
    }

    /// The inputs of [`readiness`] now, the spool's fill read from `metrics` (as its
    /// scrape hooks or owner last set it).
    pub fn readiness_inputs(&self, metrics: &Metrics) -> ReadinessInputs {
        let (spool_bytes, spool_capacity_bytes) = metrics.spool_fill();
        ReadinessInputs {
            attach_reported: self.attach_reported.load(Ordering::Acquire),
            attached_events: self.attached.load(Ordering::Relaxed),
            waiting_for_events: self.waiting.load(Ordering::Relaxed),
            stopping: self.stopping.load(Ordering::Relaxed),
            collector_unreachable_for: self.collector_unreachable_for(Instant::now()),
            spool_bytes,
            spool_capacity_bytes,
        }
    }

    /// Whether the recorder is ready now ([`readiness`] of [`Health::readiness_inputs`]).
    pub fn ready(&self, metrics: &Metrics) -> Result<(), Vec<NotReady>> {
        readiness(&self.readiness_inputs(metrics), &self.config)
    }

    /// Whether every registered thread is alive now ([`liveness`]).
    pub fn alive(&self) -> Result<(), Vec<Stale>> {
        let now = millis(self.origin.elapsed());
        let beats = lock(&self.beats);
        let ages: Vec<(&str, Duration)> = beats
            .iter()
            .filter(|b| !b.retired.load(Ordering::Relaxed))
            .map(|b| {
                let last = b.last_ms.load(Ordering::Relaxed);
                (
                    b.name.as_str(),
                    Duration::from_millis(now.saturating_sub(last)),
                )
            })
            .collect();
        liveness(&ages, self.config.stale_after)
    }

    /// Set the gauges this state owns in `metrics`: `uevrec_attached_events`,
    /// `uevrec_collector_up`, `uevrec_collector_unreachable_seconds`, `uevrec_ready`.
    pub fn publish(&self, metrics: &Metrics) {
        metrics
            .attached_events
            .set(self.attached.load(Ordering::Relaxed));
        let (up, down) = match *lock(&self.collector) {
            Collector::Up => (1, 0.0),
            Collector::Unknown => (0, 0.0),
            Collector::Down(since) => (0, since.elapsed().as_secs_f64()),
        };
        metrics.collector_up.set(up);
        metrics.collector_unreachable_seconds.set(down);
        metrics.ready.set(i64::from(self.ready(metrics).is_ok()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attached() -> ReadinessInputs {
        ReadinessInputs {
            attach_reported: true,
            attached_events: 2,
            ..ReadinessInputs::default()
        }
    }

    #[test]
    fn ready_when_attached_and_nothing_wrong() {
        assert_eq!(readiness(&attached(), &HealthConfig::default()), Ok(()));
    }

    #[test]
    fn events_rule() {
        let c = HealthConfig::default();
        assert_eq!(
            readiness(&ReadinessInputs::default(), &c),
            Err(vec![NotReady::Starting])
        );
        let none = ReadinessInputs {
            attached_events: 0,
            ..attached()
        };
        assert_eq!(readiness(&none, &c), Err(vec![NotReady::NoEvents]));
        let waiting = ReadinessInputs {
            waiting_for_events: true,
            ..none
        };
        assert_eq!(readiness(&waiting, &c), Ok(()));
    }

    #[test]
    fn collector_rule_is_strictly_longer_than_the_limit() {
        let c = HealthConfig {
            unready_after: Duration::from_secs(30),
            ..HealthConfig::default()
        };
        let at = |s| ReadinessInputs {
            collector_unreachable_for: Some(Duration::from_secs(s)),
            ..attached()
        };
        assert_eq!(readiness(&at(0), &c), Ok(()));
        assert_eq!(readiness(&at(30), &c), Ok(()));
        assert_eq!(
            readiness(&at(31), &c),
            Err(vec![NotReady::CollectorUnreachable {
                down: Duration::from_secs(31),
                limit: Duration::from_secs(30)
            }])
        );
    }

    #[test]
    fn spool_rule() {
        let c = HealthConfig::default();
        let at = |bytes, capacity| ReadinessInputs {
            spool_bytes: bytes,
            spool_capacity_bytes: capacity,
            ..attached()
        };
        assert_eq!(readiness(&at(0, 0), &c), Ok(()), "no spool");
        assert_eq!(readiness(&at(899, 1000), &c), Ok(()));
        let full = readiness(&at(900, 1000), &c).unwrap_err();
        assert_eq!(
            full,
            vec![NotReady::SpoolNearlyFull {
                bytes: 900,
                capacity: 1000,
                limit: 0.9
            }]
        );
        assert_eq!(
            full[0].to_string(),
            "spool nearly full: 900 of 1000 bytes (90.0 %, limit 90.0 %)"
        );
    }

    #[test]
    fn every_reason_is_listed() {
        let i = ReadinessInputs {
            attach_reported: false,
            stopping: true,
            collector_unreachable_for: Some(Duration::from_secs(60)),
            spool_bytes: 10,
            spool_capacity_bytes: 10,
            ..ReadinessInputs::default()
        };
        let why = readiness(&i, &HealthConfig::default()).unwrap_err();
        assert_eq!(why.len(), 4, "{why:?}");
        assert_eq!(why[0], NotReady::Stopping);
        assert_eq!(why[1], NotReady::Starting);
    }

    #[test]
    fn liveness_names_the_stale() {
        let limit = Duration::from_secs(30);
        assert_eq!(liveness(&[], limit), Ok(()));
        let ages = [
            ("drain", Duration::from_secs(30)),
            ("export", Duration::from_secs(45)),
        ];
        let stale = liveness(&ages, limit).unwrap_err();
        assert_eq!(stale.len(), 1);
        assert_eq!(
            stale[0].to_string(),
            "thread export: no heartbeat for 45.0 s (more than 30.0 s)"
        );
    }

    #[test]
    fn collector_down_counts_from_the_first_failure() {
        let h = Health::default();
        let t0 = Instant::now();
        assert_eq!(h.collector_unreachable_for(t0), None);
        h.collector_unreachable_at(t0);
        h.collector_unreachable_at(t0 + Duration::from_secs(5));
        assert_eq!(
            h.collector_unreachable_for(t0 + Duration::from_secs(8)),
            Some(Duration::from_secs(8))
        );
        h.collector_reachable();
        assert_eq!(h.collector_unreachable_for(t0), None);
    }

    #[test]
    fn heartbeats_go_stale_unless_retired() {
        let h = Health::new(HealthConfig {
            stale_after: Duration::ZERO,
            ..HealthConfig::default()
        });
        assert_eq!(h.alive(), Ok(()));
        let a = h.heartbeat("a");
        let b = h.heartbeat("b");
        std::thread::sleep(Duration::from_millis(5));
        let stale = h.alive().unwrap_err();
        assert_eq!(stale.len(), 2);
        a.retire();
        drop(b); // as a thread that panicked: still counted
        let stale = h.alive().unwrap_err();
        assert_eq!(stale.len(), 1);
        assert_eq!(stale[0].thread, "b");
    }

    #[test]
    fn publish_sets_the_gauges() {
        let h = Health::default();
        let m = Metrics::new();
        h.set_attached(3);
        h.collector_reachable();
        h.publish(&m);
        let text = m.encode(false);
        assert!(text.contains("uevrec_attached_events 3\n"), "{text}");
        assert!(text.contains("uevrec_collector_up 1\n"));
        assert!(text.contains("uevrec_ready 1\n"));
        h.collector_unreachable();
        m.set_spool(95, 100, 1);
        h.publish(&m);
        let text = m.encode(false);
        assert!(text.contains("uevrec_collector_up 0\n"));
        assert!(text.contains("uevrec_ready 0\n"), "spool 95 % full: {text}");
    }
}
