//! The standard `process_*` metrics (the names every Prometheus client library exports:
//! CPU time, resident memory, descriptors, start time), read from `/proc/self` at each
//! scrape. prometheus-client has no process collector on Linux, so this one is written
//! here: five small `/proc` files parsed, nothing kept between scrapes.

use std::fs;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// `process_*` metrics of this process; a file that cannot be read leaves its metrics out.
#[derive(Debug)]
pub(super) struct ProcessCollector {
    /// Clock ticks per second (the unit of /proc/self/stat's times).
    ticks: f64,
    /// The boot time, seconds since the epoch (/proc/stat `btime`).
    boot_time: Option<f64>,
}

impl ProcessCollector {
    pub(super) fn new() -> ProcessCollector {
        // SAFETY: sysconf only reads a configuration value; it has no preconditions.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let boot_time = fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| boot_time(&s));
        ProcessCollector {
            ticks: if ticks > 0 { ticks as f64 } else { 100.0 },
            boot_time,
        }
    }
}

/// `btime` of /proc/stat.
fn boot_time(stat: &str) -> Option<f64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// What /proc/self/stat tells: CPU time (ticks), start time (ticks after boot), threads.
#[derive(Debug, PartialEq)]
struct Stat {
    cpu_ticks: u64,
    threads: u64,
    start_ticks: u64,
}

/// Parse /proc/self/stat (`man 5 proc`): fields after the command name, which sits in
/// parentheses and may itself hold spaces and parentheses.
fn parse_stat(s: &str) -> Option<Stat> {
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    // f[0] is field 3 (state): field k is f[k - 3].
    let field = |k: usize| f.get(k - 3)?.parse::<u64>().ok();
    Some(Stat {
        cpu_ticks: field(14)? + field(15)?,
        threads: field(20)?,
        start_ticks: field(22)?,
    })
}

/// A `kB` line of /proc/self/status (`VmRSS:  1234 kB`), in bytes.
fn status_bytes(status: &str, key: &str) -> Option<u64> {
    let v = status.lines().find_map(|l| l.strip_prefix(key))?;
    let v = v.strip_prefix(':')?.trim().strip_suffix("kB")?.trim();
    v.parse::<u64>().ok()?.checked_mul(1024)
}

/// The soft limit on open files from /proc/self/limits (None when unlimited).
fn max_fds(limits: &str) -> Option<u64> {
    let v = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?;
    v.split_ascii_whitespace().next()?.parse().ok()
}

fn gauge(enc: &mut DescriptorEncoder, name: &str, help: &str, v: f64) -> std::fmt::Result {
    let g = ConstGauge::new(v);
    g.encode(enc.encode_descriptor(name, help, None, g.metric_type())?)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        if let Some(stat) = fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|s| parse_stat(&s))
        {
            let c = ConstCounter::new(stat.cpu_ticks as f64 / self.ticks);
            c.encode(enc.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                c.metric_type(),
            )?)?;
            gauge(
                &mut enc,
                "process_threads",
                "Number of OS threads in the process.",
                stat.threads as f64,
            )?;
            if let Some(boot) = self.boot_time {
                gauge(
                    &mut enc,
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                    boot + stat.start_ticks as f64 / self.ticks,
                )?;
            }
        }
        if let Ok(status) = fs::read_to_string("/proc/self/status") {
            if let Some(rss) = status_bytes(&status, "VmRSS") {
                gauge(
                    &mut enc,
                    "process_resident_memory_bytes",
                    "Resident memory size in bytes.",
                    rss as f64,
                )?;
            }
            if let Some(vm) = status_bytes(&status, "VmSize") {
                gauge(
                    &mut enc,
                    "process_virtual_memory_bytes",
                    "Virtual memory size in bytes.",
                    vm as f64,
                )?;
            }
        }
        if let Ok(dir) = fs::read_dir("/proc/self/fd") {
            gauge(
                &mut enc,
                "process_open_fds",
                "Number of open file descriptors.",
                dir.count() as f64,
            )?;
        }
        if let Some(max) = fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|l| max_fds(&l))
        {
            gauge(
                &mut enc,
                "process_max_fds",
                "Maximum number of open file descriptors.",
                max as f64,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_odd_command_name() {
        // Fields 3..22 after a command name holding ") (" and spaces.
        let line = "42 (a) (b c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0 12345 \
                    1000 200 18446744073709551615";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                cpu_ticks: 300,
                threads: 7,
                start_ticks: 12345
            })
        );
        assert_eq!(parse_stat("42 (x"), None);
        assert_eq!(parse_stat("42 (x) S 1"), None);
    }

    #[test]
    fn status_limits_and_btime() {
        let status = "Name:\tuevrec\nVmSize:\t  20480 kB\nVmRSS:\t    9216 kB\n";
        assert_eq!(status_bytes(status, "VmRSS"), Some(9216 * 1024));
        assert_eq!(status_bytes(status, "VmSize"), Some(20480 * 1024));
        assert_eq!(status_bytes(status, "VmSwap"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 1048576              files\n";
        assert_eq!(max_fds(limits), Some(1024));
        assert_eq!(
            max_fds("Max open files            unlimited            unlimited            files"),
            None
        );
        assert_eq!(boot_time("cpu  1 2 3\nbtime 1700000000\n"), Some(1.7e9));
    }

    #[test]
    fn this_process_is_described() {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(ProcessCollector::new()));
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &registry).unwrap();
        for name in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_open_fds ",
            "process_start_time_seconds ",
            "process_threads ",
        ] {
            assert!(
                text.lines().any(|l| l.starts_with(name)),
                "{name} in {text}"
            );
        }
    }
}
