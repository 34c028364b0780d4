//! Helpers of the export tests (tests/host/export.rs, tests/host/export_faults.rs): the
//! producer of `syscall(getppid, 424242, SEQ)` calls, what a receiver got, the end-of-run
//! summary, `/metrics`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};

use std::time::Duration;

use crate::common::NR_GETPPID;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};

/// The first argument of every call of the child: tells its records from any other.
pub const MARK: i64 = 424_242;
/// The tracepoint the child's records come from.
pub const TP: &str = "raw_syscalls:sys_enter";

/// A child that, for each number N it reads on stdin, makes the next N calls
/// `syscall(getppid, MARK, SEQ)` (SEQ counting from 0), then prints `done SEQ`.
pub struct Producer {
    /// The perl child.
    pub child: Child,
    /// The SEQ of its next call (= calls made so far).
    pub next: u64,
}

impl Producer {
    pub fn start() -> Producer {
        let child = Command::new("perl")
            .args([
                "-e",
                &format!(
                    "$| = 1; my $i = 0; while (my $n = <STDIN>) {{ \
                     syscall({NR_GETPPID}, {MARK}, $i++) for 1 .. $n; print \"done $i\\n\" }}"
                ),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("perl is needed for the producer");
        Producer { child, next: 0 }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Keep the child on one CPU: the kernel reports a ring's loss only with the next
    /// record written to that ring, so the calls that end a test must reach the ring that
    /// lost (see [`settle`]).
    pub fn pin(&self) {
        let cpu = crate::common::allowed_cpus(self.pid())[0];
        crate::common::pin_to(self.pid(), cpu);
    }

    /// Make `n` more calls and wait until they are made.
    pub fn emit(&mut self, n: u64) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{n}").unwrap();
        stdin.flush().unwrap();
        let out = self.child.stdout.as_mut().unwrap();
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while out.read(&mut b).unwrap() == 1 && b[0] != b'\n' {
            line.push(b[0]);
        }
        self.next += n;
        assert_eq!(
            String::from_utf8_lossy(&line),
            format!("done {}", self.next)
        );
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free port on 127.0.0.1 (nothing listens on it once this returns).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The sum of the samples of `name` (exactly: `name{…} v` or `name v`) in a Prometheus
/// text page whose label text contains `label`.
pub fn sample_sum(body: &str, name: &str, label: &str) -> u64 {
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, labels) = match series.split_once('{') {
                Some((n, rest)) => (n, rest),
                None => (series, ""),
            };
            (n == name && labels.contains(label)).then(|| value.parse::<f64>().ok())?
        })
        .map(|v| v as u64)
        .sum()
}

/// A GET over HTTP/1.0: (status, body), or None when nothing answers.
pub fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((code, body))
}

pub fn attr<'a>(
    r: &'a opentelemetry_proto::tonic::logs::v1::LogRecord,
    key: &str,
) -> Option<&'a AnyValue> {
    r.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
}

/// Every SEQ with how often it is in `reqs`.
pub fn seqs_of<'a>(
    reqs: impl IntoIterator<Item = &'a ExportLogsServiceRequest>,
) -> BTreeMap<u64, u32> {
    let mut seqs = BTreeMap::new();
    for req in reqs {
        for rl in &req.resource_logs {
            for sl in &rl.scope_logs {
                for r in &sl.log_records {
                    let Some(any_value::Value::ArrayValue(args)) =
                        attr(r, "args").and_then(|v| v.value.as_ref())
                    else {
                        continue;
                    };
                    let int = |i: usize| match args.values.get(i).and_then(|v| v.value.as_ref()) {
                        Some(any_value::Value::IntValue(n)) => Some(*n),
                        _ => None,
                    };
                    if int(0) == Some(MARK) {
                        *seqs.entry(int(1).unwrap() as u64).or_default() += 1;
                    }
                }
            }
        }
    }
    seqs
}

/// The `uevrec.notice.what` of every notice in `reqs`, in order.
pub fn notices(reqs: &[ExportLogsServiceRequest]) -> Vec<String> {
    let mut out = Vec::new();
    for req in reqs {
        for rl in &req.resource_logs {
            for sl in &rl.scope_logs {
                for r in &sl.log_records {
                    if let Some(Some(any_value::Value::StringValue(w))) =
                        attr(r, "uevrec.notice.what").map(|v| &v.value)
                    {
                        out.push(w.clone());
                    }
                }
            }
        }
    }
    out
}

/// One tracepoint's line of the summary: `  TP: R recorded, E exported, D dropped, Q queued`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TpLine {
    pub recorded: u64,
    pub exported: u64,
    pub dropped: u64,
    pub queued: u64,
}

/// The numbers of the end-of-run summary: `uevrec: N records, M lost`, `uevrec: export:
/// A records acknowledged by the collector, D dropped, P still …`, the `N  dropped:
/// REASON` lines and the per-tracepoint lines.
#[derive(Debug, Default)]
pub struct Summary {
    pub recorded: u64,
    pub lost: u64,
    pub exported: u64,
    pub dropped: u64,
    pub pending: u64,
    pub reasons: BTreeMap<String, u64>,
    pub tracepoints: BTreeMap<String, TpLine>,
}

pub fn numbers(s: &str) -> Vec<u64> {
    s.split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .filter_map(|w| w.parse().ok())
        .collect()
}

pub fn summary(stderr: &str) -> Summary {
    let mut s = Summary::default();
    for line in stderr.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let Some(rest) = line
            .strip_prefix("uevrec: export: ")
            .filter(|r| r.contains(" records acknowledged by the collector"))
        {
            let n = numbers(rest);
            (s.exported, s.dropped, s.pending) = (n[0], n[1], n[2]);
        } else if words.len() == 3 && words[1] == "dropped:" {
            s.reasons.insert(words[2].into(), words[0].parse().unwrap());
        } else if line.starts_with("uevrec: ")
            && line.contains(" records, ")
            && line.contains(" lost")
        {
            s.recorded = words[1].parse().unwrap();
            s.lost = words[3].parse().unwrap();
        } else if line.starts_with("  ")
            && line.ends_with(" queued")
            && let Some((tp, rest)) = line.trim_start().split_once(": ")
        {
            let n = numbers(rest);
            s.tracepoints.insert(
                tp.to_string(),
                TpLine {
                    recorded: n[0],
                    exported: n[1],
                    dropped: n[2],
                    queued: n[3],
                },
            );
        }
    }
    s
}

/// `status` is success and stderr shows no panic.
pub fn assert_clean_exit(status: ExitStatus, err: &str) {
    assert!(status.success(), "{status:?}\n{err}");
    assert!(!err.contains("panicked"), "{err}");
}

pub fn assert_no_duplicates(seqs: &BTreeMap<u64, u32>) {
    let twice: Vec<(&u64, &u32)> = seqs.iter().filter(|(_, c)| **c != 1).collect();
    assert!(
        twice.is_empty(),
        "{} SEQs more than once (first {:?})",
        twice.len(),
        twice.first()
    );
}

/// One sample read by tests/metrics/parse.py.
#[derive(Debug)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// What tests/metrics/parse.py (prometheus-client's text parser, its OpenMetrics one
/// with `openmetrics`) read at `addr`/metrics: its JSON.
pub fn scrape_json(addr: &str, openmetrics: bool) -> serde_json::Value {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/metrics/parse.py");
    let mut cmd = Command::new("python3");
    cmd.arg(script).arg(format!("http://{addr}/metrics"));
    if openmetrics {
        cmd.arg("--openmetrics");
    }
    let out = cmd
        .output()
        .expect("running python3 tests/metrics/parse.py");
    assert!(
        out.status.success(),
        "parse.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("parse.py prints JSON")
}

/// What tests/metrics/parse.py (prometheus-client's text parser) read at `addr`/metrics.
pub fn scrape(addr: &str) -> Vec<Sample> {
    let page = scrape_json(addr, false);
    page["samples"]
        .as_array()
        .expect("samples")
        .iter()
        .map(|s| Sample {
            name: s["name"].as_str().unwrap().to_string(),
            labels: s["labels"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect(),
            value: s["value"].as_f64().unwrap(),
        })
        .collect()
}

/// The sum of the samples named `name` whose labels include `labels`.
pub fn parsed(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> u64 {
    samples
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).is_some_and(|x| x == v))
        })
        .map(|s| s.value as u64)
        .sum()
}
