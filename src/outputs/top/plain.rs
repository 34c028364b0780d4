//! `uevrec top` when standard output is not a terminal (or with `--plain`): every
//! interval, one JSON line per event and one line of totals, for pipelines (`jq`, a
//! metrics agent, a log). The last set, after the session stopped, has `"final":true`
//! and counts every record the session staged. With `-g` each event line carries its
//! busiest call paths (`call_sites`). Real lines and every key: docs/top.md
//! ("Not a terminal: JSON lines").

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::comm::CommCache;
use super::counter::lock;
use super::model::{Snapshot, sort_rows};
use super::pods::GroupBy;
use super::{Clock, Shared, TopOptions};
use crate::pipeline::stacks::call_path::frames;

/// How often the printer looks at `stop` and `done` between intervals.
const POLL: Duration = Duration::from_millis(50);

/// One process of an event line.
#[derive(Serialize)]
struct Process<'a> {
    pid: u32,
    comm: &'a str,
    records: u64,
}

/// One event's line.
#[derive(Serialize)]
struct EventLine<'a> {
    time: &'a str,
    uevrec: &'static str,
    /// `system:event`, or with `--by pod` None (the row is `pod`).
    #[serde(skip_serializing_if = "Option::is_none")]
    event: Option<&'a str>,
    /// With `--by pod`: `namespace/pod`, the UID while unnamed, `-` outside pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pod: Option<&'a str>,
    attached: bool,
    interval_s: f64,
    records_per_s: f64,
    records: u64,
    bytes_per_s: f64,
    bytes: u64,
    top: Vec<Process<'a>>,
    #[serde(skip_serializing_if = "is_zero")]
    other_pids: u64,
    /// With `-g`: the busiest call paths.
    #[serde(skip_serializing_if = "Option::is_none")]
    call_sites: Option<Vec<CallSite<'a>>>,
    /// With `-g`: the records since the start of call paths not in `call_sites`' table.
    #[serde(skip_serializing_if = "Option::is_none")]
    other_call_sites: Option<u64>,
    #[serde(skip_serializing_if = "is_false")]
    r#final: bool,
}

/// One call path of an event line (`-g`).
#[derive(Serialize)]
struct CallSite<'a> {
    /// Its functions, innermost first.
    frames: Vec<&'a str>,
    records_per_s: f64,
    /// Its share of the event's records in the interval.
    share: f64,
    /// Since it was first counted.
    records: u64,
}

/// The totals line.
#[derive(Serialize)]
struct TotalLine<'a> {
    time: &'a str,
    uevrec: &'static str,
    interval_s: f64,
    events: usize,
    records_per_s: f64,
    records: u64,
    lost_per_s: f64,
    lost: u64,
    #[serde(skip_serializing_if = "is_zero")]
    unattributed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    notice: Option<&'a str>,
    /// With `--where` / `--sample` / `--rate-limit`: the records left out since the start.
    #[serde(skip_serializing_if = "Option::is_none")]
    not_kept: Option<u64>,
    #[serde(skip_serializing_if = "is_false")]
    r#final: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// `part` of `all` (0 when there is nothing).
pub fn share(part: u64, all: u64) -> f64 {
    if all == 0 {
        0.0
    } else {
        part as f64 / all as f64
    }
}

/// A rate with 3 decimals (what a reader needs; no `333.33333333333`).
fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// The lines of one interval (events in the order of `opts.sort`), written to `out`.
/// `notice`: the session's latest notice when it changed since the last interval.
pub fn write_interval(
    out: &mut impl Write,
    snapshot: &Snapshot,
    time: SystemTime,
    notice: Option<&str>,
    last: bool,
    opts: &TopOptions,
    comms: &mut CommCache,
) -> io::Result<()> {
    let time = humantime::format_rfc3339_nanos(time).to_string();
    let interval_s = round3(snapshot.interval.as_secs_f64());
    let mut rows = snapshot.rows.clone();
    sort_rows(&mut rows, opts.sort);
    let mut text = Vec::with_capacity(256 * (rows.len() + 1));
    for r in &rows {
        // Names first: the cache lends them one at a time.
        let names: Vec<String> = r.top.iter().map(|t| comms.name(t.0).to_owned()).collect();
        let line = EventLine {
            time: &time,
            uevrec: "top",
            event: (opts.by == GroupBy::Event).then_some(r.event.as_str()),
            pod: (opts.by == GroupBy::Pod).then_some(r.event.as_str()),
            attached: r.attached,
            interval_s,
            records_per_s: round3(r.records_per_s),
            records: r.records,
            bytes_per_s: round3(r.bytes_per_s),
            bytes: r.bytes,
            top: r
                .top
                .iter()
                .zip(&names)
                .map(|(&(pid, records), comm)| Process { pid, comm, records })
                .collect(),
            other_pids: r.other_pids,
            call_sites: opts.stacks.is_some().then(|| {
                r.sites
                    .top
                    .iter()
                    .map(|site| CallSite {
                        frames: frames(&site.path).collect(),
                        records_per_s: round3(site.records_per_s),
                        share: round3(share(site.interval_records, r.interval_records)),
                        records: site.records,
                    })
                    .collect()
            }),
            other_call_sites: opts.stacks.is_some().then_some(r.sites.other_records),
            r#final: last,
        };
        serde_json::to_writer(&mut text, &line)?;
        text.push(b'\n');
    }
    let total = TotalLine {
        time: &time,
        uevrec: "top_total",
        interval_s,
        events: rows.len(),
        records_per_s: round3(snapshot.records_per_s),
        records: snapshot.records,
        lost_per_s: round3(snapshot.lost_per_s),
        lost: snapshot.lost,
        unattributed: snapshot.unattributed,
        notice,
        not_kept: snapshot.not_kept,
        r#final: last,
    };
    serde_json::to_writer(&mut text, &total)?;
    text.push(b'\n');
    out.write_all(&text)?;
    out.flush()
}

/// Print every interval until `done` (the session ended: then one last set, `final`);
/// `--duration` sets `stop`. A failed write (the reader went away) sets `stop` and
/// returns the error.
pub fn run(
    shared: &Shared,
    opts: &TopOptions,
    stop: &AtomicBool,
    done: &AtomicBool,
    out: &mut impl Write,
) -> io::Result<()> {
    let mut clock = Clock::new(opts.interval, opts.duration);
    let mut last_notice: Option<String> = None;
    let mut interval = |elapsed: Duration, last: bool, out: &mut dyn Write| {
        let snapshot = {
            let mut m = lock(&shared.model);
            m.tick(elapsed);
            m.snapshot()
        };
        let notice = snapshot
            .notice
            .clone()
            .filter(|n| last_notice.as_ref() != Some(n));
        if notice.is_some() {
            last_notice.clone_from(&notice);
        }
        let mut out = out;
        write_interval(
            &mut out,
            &snapshot,
            SystemTime::now(),
            notice.as_deref(),
            last,
            opts,
            &mut lock(&shared.comms),
        )
    };
    let result = (|| {
        while !done.load(Ordering::Acquire) {
            if clock.expired() {
                stop.store(true, Ordering::Release);
            }
            if let Some(elapsed) = clock.tick_due() {
                interval(elapsed, false, out)?;
            }
            std::thread::sleep(clock.until_tick().min(POLL));
        }
        interval(clock.tick_now(), true, out)
    })();
    if result.is_err() {
        stop.store(true, Ordering::Release);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outputs::top::model::Model;
    use serde_json::Value;

    #[test]
    fn one_line_per_event_then_the_totals() {
        let mut m = Model::new();
        m.attach(0, "sched:sched_switch");
        m.attach(1, "raw_syscalls:sys_enter");
        for _ in 0..3 {
            m.record(1, 0, 10);
        }
        m.record(0, 0, 64);
        m.lost(2);
        m.notice("attached", Some("a:b"), "id 5");
        m.tick(Duration::from_millis(500));
        let mut out = Vec::new();
        let opts = TopOptions::default();
        write_interval(
            &mut out,
            &m.snapshot(),
            SystemTime::UNIX_EPOCH + Duration::from_secs(1),
            Some("attached a:b: id 5"),
            true,
            &opts,
            &mut CommCache::default(),
        )
        .unwrap();
        let lines: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[0],
            serde_json::json!({
                "time": "1970-01-01T00:00:01.000000000Z", "uevrec": "top",
                "event": "raw_syscalls:sys_enter", "attached": true, "interval_s": 0.5,
                "records_per_s": 6.0, "records": 3, "bytes_per_s": 60.0, "bytes": 30,
                "top": [{"pid": 0, "comm": "swapper", "records": 3}], "final": true
            })
        );
        assert_eq!(lines[1]["event"], "sched:sched_switch");
        assert_eq!(
            lines[2],
            serde_json::json!({
                "time": "1970-01-01T00:00:01.000000000Z", "uevrec": "top_total",
                "interval_s": 0.5, "events": 2, "records_per_s": 8.0, "records": 4,
                "lost_per_s": 4.0, "lost": 2, "notice": "attached a:b: id 5", "final": true
            })
        );
    }

    #[test]
    fn with_stacks_each_event_line_has_its_busiest_call_paths() {
        let mut m = Model::new();
        m.attach(0, "raw_syscalls:sys_enter");
        let chain: std::sync::Arc<str> = "syscall\nmiddle\nouter\nmain".into();
        let other: std::sync::Arc<str> = "write\nmain".into();
        for (path, n) in [(&other, 1), (&chain, 3)] {
            for _ in 0..n {
                m.record(0, 0, 10);
                m.call_site(0, path);
            }
        }
        m.tick(Duration::from_secs(2));
        let first_line = |opts: &TopOptions| -> Value {
            let mut out = Vec::new();
            let time = SystemTime::UNIX_EPOCH;
            let mut comms = CommCache::default();
            write_interval(&mut out, &m.snapshot(), time, None, false, opts, &mut comms).unwrap();
            let text = String::from_utf8(out).unwrap();
            serde_json::from_str(text.lines().next().unwrap()).unwrap()
        };
        let line = first_line(&TopOptions {
            stacks: Some(crate::pipeline::stacks::StackOptions::default()),
            ..TopOptions::default()
        });
        assert_eq!(
            line["call_sites"],
            serde_json::json!([
                {"frames": ["syscall", "middle", "outer", "main"], "records_per_s": 1.5, "share": 0.75, "records": 3},
                {"frames": ["write", "main"], "records_per_s": 0.5, "share": 0.25, "records": 1}
            ])
        );
        assert_eq!(line["other_call_sites"], 0);
        // Without -g neither key.
        let line = first_line(&TopOptions::default());
        let text = line.to_string();
        assert!(!text.contains("call_sites"), "{text}");
    }

    #[test]
    fn ends_with_a_final_set_once_the_session_is_done() {
        let shared = Shared::default();
        lock(&shared.model).attach(0, "a:b");
        lock(&shared.model).record(0, 1, 1);
        let (stop, done) = (AtomicBool::new(false), AtomicBool::new(true));
        let mut out = Vec::new();
        run(&shared, &TopOptions::default(), &stop, &done, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0]["records"], 1);
        assert_eq!(lines[1]["final"], true);
        assert!(!stop.load(Ordering::Acquire));
    }
}
