//! The session under test in-process (`recorder::stage_and_format` on its own thread):
//! shared by the host tier's session tests (tests/host/session.rs) and the VM tier's
//! (tests/vm/session.rs).

use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use serde_json::Value;
use uevrec::capture::backend::BackendKind::{self, Perf};
use uevrec::capture::perf::RingPages;
use uevrec::capture::selector::Selector;
use uevrec::capture::session::{LiveStats, SessionConfig, Summary};
use uevrec::capture::tracefs::Tracefs;
use uevrec::pipeline::Batch;
use uevrec::recorder;

/// The tracefs root when the host can run these tests, else why not.
pub fn host() -> Result<Tracefs, String> {
    // SAFETY: geteuid has no memory effects.
    if unsafe { libc::geteuid() } != 0 {
        return Err("tier-2 session tests need root (perf_event_open on tracepoints)".into());
    }
    Tracefs::discover(None).map_err(|e| e.to_string())
}

pub fn config(selectors: &[&str]) -> SessionConfig {
    config_on(Perf, selectors)
}

/// [`config`] on backend `backend`.
pub fn config_on(backend: BackendKind, selectors: &[&str]) -> SessionConfig {
    SessionConfig {
        backend,
        selectors: selectors
            .iter()
            .map(|s| s.parse::<Selector>().unwrap())
            .collect(),
        buffer_pages: RingPages::round_up(64).unwrap(),
        rescan_interval: Duration::from_secs(1),
        ..SessionConfig::default()
    }
}

/// Split a batch into JSON values, asserting every line is valid JSON.
pub fn parse_batch(batch: &Batch, into: &mut Vec<Value>) {
    let text = std::str::from_utf8(&batch.lines).expect("batch is UTF-8");
    assert!(
        batch.lines.is_empty() || text.ends_with('\n'),
        "batch ends mid-line"
    );
    for line in text.lines() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("invalid JSON line {line:?}: {e}"));
        into.push(v);
    }
}

/// Sessions share it (read); a test that measures every `uevrec-*` thread of the process
/// takes it alone (write), so the other tests' sessions are not counted.
pub static THREADS: RwLock<()> = RwLock::new(());

/// A turn to run a session beside the other tests' sessions.
pub fn shared_turn() -> RwLockReadGuard<'static, ()> {
    THREADS.read().unwrap_or_else(|e| e.into_inner())
}

/// A session on its own thread; batches are collected by a second thread unless
/// `manual` (then the test receives from `rx` itself).
pub struct Running {
    pub stop: Arc<AtomicBool>,
    pub stats: Arc<LiveStats>,
    pub lines: Arc<Mutex<Vec<Value>>>,
    pub session: Option<JoinHandle<(Result<Summary, String>, Duration)>>,
    pub collector: Option<JoinHandle<()>>,
    pub rx: Option<Receiver<Batch>>,
    pub recycle_tx: Sender<Vec<u8>>,
    /// The [`THREADS`] turn (None for the test that holds it alone).
    pub _turn: Option<RwLockReadGuard<'static, ()>>,
}

/// CPU time used by the calling thread.
pub fn thread_cpu() -> Duration {
    let mut ru: libc::rusage = unsafe_zeroed_rusage();
    // SAFETY: `ru` is a valid, writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// The names of this process's `uevrec-*` threads (the session and every thread it
/// starts) and the CPU time they have used, from `/proc/self/task/*/stat`.
pub fn uevrec_threads_cpu() -> (Vec<String>, Duration) {
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let mut names = Vec::new();
    let mut ticks = 0u64;
    for task in fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .flatten()
    {
        let Ok(stat) = fs::read_to_string(task.path().join("stat")) else {
            continue; // the thread has gone
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        if !comm.starts_with("uevrec") {
            continue;
        }
        // After the comm: state is field 3; utime and stime are fields 14 and 15.
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let field = |n: usize| {
            rest.get(n - 3)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        ticks += field(14) + field(15);
        names.push(comm.to_string());
    }
    names.sort();
    (names, Duration::from_millis(ticks * 1000 / hz))
}

pub fn unsafe_zeroed_rusage() -> libc::rusage {
    // SAFETY: rusage is plain old data; all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

pub fn start(cfg: SessionConfig, channel_cap: usize, manual: bool) -> Running {
    let turn = shared_turn();
    let mut run = start_alone(cfg, channel_cap, manual);
    run._turn = Some(turn);
    run
}

/// [`start`] without taking a [`THREADS`] turn (the caller holds it).
pub fn start_alone(cfg: SessionConfig, channel_cap: usize, manual: bool) -> Running {
    let (tx, rx) = crossbeam_channel::bounded::<Batch>(channel_cap);
    let (recycle_tx, recycle_rx) = crossbeam_channel::unbounded::<Vec<u8>>();
    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(LiveStats::default());
    let (s2, st2) = (stop.clone(), stats.clone());
    let session = std::thread::Builder::new()
        .name("uevrec-session".into())
        .spawn(move || {
            let r = recorder::stage_and_format(&cfg, &tx, &recycle_rx, &s2, &st2)
                .map_err(|e| e.to_string());
            (r, thread_cpu())
        })
        .expect("spawning the session thread");
    let lines = Arc::new(Mutex::new(Vec::new()));
    let (collector, rx) = if manual {
        (None, Some(rx))
    } else {
        let (l2, rtx) = (lines.clone(), recycle_tx.clone());
        let h = std::thread::spawn(move || {
            for batch in rx {
                let mut v = Vec::new();
                parse_batch(&batch, &mut v);
                l2.lock().unwrap().extend(v);
                let _ = rtx.send(batch.lines);
            }
        });
        (Some(h), None)
    };
    Running {
        stop,
        stats,
        lines,
        session: Some(session),
        collector,
        rx,
        recycle_tx,
        _turn: None,
    }
}

impl Running {
    /// Wait (up to `limit`) until some collected line satisfies `pred`.
    pub fn wait_for(&self, limit: Duration, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        let t0 = Instant::now();
        loop {
            if let Some(v) = self.lines.lock().unwrap().iter().find(|v| pred(v)) {
                return Some(v.clone());
            }
            if t0.elapsed() > limit {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn lines(&self) -> Vec<Value> {
        self.lines.lock().unwrap().clone()
    }

    /// Set stop and wait for the session; returns its summary and thread CPU time.
    pub fn finish(&mut self) -> (Summary, Duration) {
        self.stop.store(true, Ordering::Relaxed);
        let (r, cpu) = self
            .session
            .take()
            .unwrap()
            .join()
            .expect("session thread panicked");
        if let Some(c) = self.collector.take() {
            c.join().expect("collector panicked");
        }
        (r.expect("session failed"), cpu)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        drop(self.rx.take());
    }
}

/// Run a session that must fail during setup; its error message.
pub fn setup_error(cfg: &SessionConfig) -> String {
    let _turn = shared_turn();
    let (tx, _rx) = crossbeam_channel::bounded(16);
    let (_rtx, rrx) = crossbeam_channel::bounded(1);
    let stop = AtomicBool::new(false);
    match recorder::stage_and_format(cfg, &tx, &rrx, &stop, &LiveStats::default()) {
        Ok(s) => panic!("session started: {s:?}"),
        Err(e) => e.to_string(),
    }
}

pub fn is_notice(v: &Value, what: &str, event: &str) -> bool {
    v["uevrec"] == "notice" && v["what"] == what && v["event"] == event
}

pub fn records<'a>(lines: &'a [Value], system: &str, event: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|v| v["system"] == system && v["event"] == event)
        .collect()
}

/// The sum of the `lost` lines' counts (records the kernel dropped).
pub fn lost_total(lines: &[Value]) -> u64 {
    lines
        .iter()
        .filter(|v| v["uevrec"] == "lost")
        .map(|v| v["lost"].as_u64().unwrap())
        .sum()
}
