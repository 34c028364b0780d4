//! `uevrec record --flight` as the tests run it (tests/host/flight.rs, tests/vm/flight.rs):
//! the running recorder with its stderr, and the dump files read back with their counts.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::PATIENCE;

/// A running `uevrec record --flight … -o OUT` whose stderr is collected.
pub struct Flight {
    child: Child,
    stderr: Arc<Mutex<String>>,
    /// The `-o` path: dumps are `OUT.<time>`.
    pub out: PathBuf,
}

impl Flight {
    /// `uevrec record -o out ARGS` (ARGS include `--flight SIZE`).
    pub fn start<S: AsRef<std::ffi::OsStr>>(out: &Path, args: &[S]) -> Flight {
        let mut child = Command::new(super::bin())
            .arg("record")
            .arg("-o")
            .arg(out)
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning uevrec record --flight");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().expect("stderr is piped");
        let s = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                s.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Flight {
            child,
            stderr,
            out: out.to_path_buf(),
        }
    }

    /// What uevrec printed on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Wait until stderr shows `n` `attached` notices (the flight recorder prints them).
    pub fn wait_attached(&self, n: usize) {
        let t0 = Instant::now();
        while self.stderr().matches("\"what\":\"attached\"").count() < n {
            assert!(t0.elapsed() < PATIENCE, "not attached: {}", self.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wait until there are `n` complete dumps (never more); returns the newest.
    pub fn wait_dumps(&self, n: usize) -> PathBuf {
        let t0 = Instant::now();
        loop {
            let d = complete_dumps(&self.out);
            if d.len() >= n {
                assert_eq!(d.len(), n, "more dumps than expected: {}", self.stderr());
                return d[n - 1].clone();
            }
            assert!(t0.elapsed() < PATIENCE, "no dump {n}: {}", self.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Send `sig` to uevrec.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill has no memory effects; the pid is our child's.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
    }

    /// SIGINT, wait for a successful exit; returns stderr.
    pub fn stop(mut self) -> String {
        self.signal(libc::SIGINT);
        let status = super::wait_exit(&mut self.child, PATIENCE).expect("uevrec exits");
        // Let the reader thread take the last bytes.
        std::thread::sleep(Duration::from_millis(100));
        assert!(status.success(), "{status}: {}", self.stderr());
        self.stderr()
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The complete dumps of `-o out` (those with their `flight_end` line: JSON or OTLP), by name
/// (which sorts by time).
pub fn complete_dumps(out: &Path) -> Vec<PathBuf> {
    let dir = out.parent().unwrap();
    let prefix = format!("{}.", out.file_name().unwrap().to_str().unwrap());
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with(&prefix)
        })
        .filter(|p| fs::read_to_string(p).unwrap().contains("flight_end\""))
        .collect();
    found.sort();
    found
}

/// A dump file: the header's `key=value` counts and the lines between header and footer.
#[derive(Debug)]
pub struct Dump {
    /// The `flight_dump` line's counts.
    pub header: BTreeMap<String, String>,
    /// The lines between the `flight_dump` and `flight_end` lines.
    pub lines: Vec<Value>,
}

impl Dump {
    /// Read and check a dump of a recording with `--flight size`: valid JSON lines, header
    /// and footer, the records counted right, nothing lost, at most `size` held.
    pub fn read(path: &Path, size: u64) -> Dump {
        let text = fs::read_to_string(path).unwrap();
        let mut lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        let first = lines.remove(0);
        let last = lines.pop().unwrap();
        assert_eq!(first["what"], "flight_dump", "{first}");
        assert_eq!(last["what"], "flight_end", "{last}");
        let header = first["message"]
            .as_str()
            .unwrap()
            .split(' ')
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect();
        let records = lines.iter().filter(|v| v.get("system").is_some()).count();
        let dump = Dump { header, lines };
        assert_eq!(dump.count("records"), records as u64, "{path:?}");
        assert_eq!(
            last["message"],
            format!("records={records} (the dump is complete)")
        );
        assert_eq!(dump.count("lost"), 0, "no loss expected: {:?}", dump.header);
        assert!(dump.count("held_bytes") <= size);
        dump
    }

    /// A count of the header.
    pub fn count(&self, key: &str) -> u64 {
        self.header[key].parse().unwrap()
    }

    /// `field` of each record of `event`, in order.
    pub fn values(&self, event: &str, field: impl Fn(&Value) -> u64) -> Vec<u64> {
        self.lines
            .iter()
            .filter(|v| v["event"] == event)
            .map(field)
            .collect()
    }

    /// The last record (event records only).
    pub fn last_record(&self) -> &Value {
        self.lines
            .iter()
            .rev()
            .find(|v| v.get("system").is_some())
            .expect("the dump holds records")
    }
}

/// `numbers` is exactly `from..=to`.
pub fn assert_run(numbers: &[u64], from: u64, to: u64) {
    let expected: Vec<u64> = (from..=to).collect();
    assert_eq!(numbers, expected.as_slice());
}
