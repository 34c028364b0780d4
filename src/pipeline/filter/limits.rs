//! `--sample 'SELECTOR=RATIO[,by=KEY]'` and `--rate-limit 'SELECTOR=N/s[,BURST][,by=pid]'`:
//! which records of a tracepoint are kept after `--where`, decided by a hash (sampling:
//! deterministic, the same record kept by every run and worker) or by a token bucket
//! filled at N per second of the records' own time stamps (rate limits: the same
//! records kept whatever the machine's speed, per tracepoint or per process).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::str::FromStr;
use std::sync::Mutex;

use uevrec_parsers::RecordStamp;

use crate::capture::selector::Selector;

/// What a sampling hash is taken over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleBy {
    /// The record itself (its bytes, time and thread): each record on its own.
    Record,
    /// The process id: a process's records are kept or dropped together.
    Pid,
    /// The thread id.
    Tid,
    /// The trace id, by OpenTelemetry's rule (spans and logs of a trace kept or left out
    /// together); records without one as [`SampleBy::Record`].
    Trace,
}

/// One `--sample` flag.
#[derive(Debug, Clone)]
pub struct SampleRule {
    /// The flag's text.
    pub text: String,
    /// The events it is for.
    pub selector: Selector,
    /// Kept when the hash is below this (`RATIO × 2^64`).
    threshold: u64,
    /// Kept by trace id when its 56 low bits are at least this (`(1 - RATIO) × 2^56`).
    trace_threshold: u64,
    /// The ratio as given.
    pub ratio: f64,
    /// What the hash is over.
    pub by: SampleBy,
}

/// The form of both flags, said in their errors.
const SAMPLE_FORM: &str = "--sample takes SYSTEM:EVENT=RATIO[,by=record|pid|tid|trace], RATIO a number above 0 and at most 1 (e.g. 'user_events:*=0.1')";
const RATE_FORM: &str = "--rate-limit takes SYSTEM:EVENT=N/s[,BURST][,by=pid|pod], N and BURST whole numbers from 1 (e.g. 'raw_syscalls:*=1000/s,2000,by=pid')";

/// `SELECTOR=REST`, split where the selector ends.
fn selector_and(text: &str, form: &str) -> Result<(Selector, Vec<String>), String> {
    let (head, rest) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}`: {form}"))?;
    let selector = head
        .parse::<Selector>()
        .map_err(|e| format!("{e}; {form}"))?;
    Ok((
        selector,
        rest.split(',').map(|p| p.trim().to_string()).collect(),
    ))
}

impl FromStr for SampleRule {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (selector, parts) = selector_and(text, SAMPLE_FORM)?;
        let bad = || format!("`{text}`: {SAMPLE_FORM}");
        let ratio: f64 = parts[0].parse().map_err(|_| bad())?;
        if !(ratio > 0.0 && ratio <= 1.0) {
            return Err(bad());
        }
        let mut by = SampleBy::Record;
        for p in &parts[1..] {
            by = match p.as_str() {
                "by=record" => SampleBy::Record,
                "by=pid" => SampleBy::Pid,
                "by=tid" => SampleBy::Tid,
                "by=trace" => SampleBy::Trace,
                _ => return Err(bad()),
            };
        }
        // ratio × 2^64, saturating at 1.0 (every record).
        let threshold = if ratio >= 1.0 {
            u64::MAX
        } else {
            (ratio * 18_446_744_073_709_551_616.0) as u64
        };
        // OpenTelemetry's rejection threshold: (1 - ratio) × 2^56, rounded.
        let trace_threshold = ((1.0 - ratio) * 72_057_594_037_927_936.0).round() as u64;
        Ok(SampleRule {
            text: text.to_string(),
            selector,
            threshold,
            trace_threshold,
            ratio,
            by,
        })
    }
}

impl SampleRule {
    /// Whether the record `raw` (with `stamp`, and `trace`, its trace id if it has one)
    /// is in the sample.
    pub fn keeps(&self, stamp: &RecordStamp, raw: &[u8], trace: Option<[u8; 16]>) -> bool {
        if let (SampleBy::Trace, Some(id)) = (self.by, trace) {
            return keeps_trace(&id, self.trace_threshold);
        }
        // SipHash with fixed keys: the same answer in every run, on every machine.
        #[allow(deprecated)]
        let mut h =
            std::hash::SipHasher::new_with_keys(0x7565_7672_6563_3430, 0x7361_6d70_6c65_0001);
        match self.by {
            SampleBy::Record | SampleBy::Trace => {
                raw.hash(&mut h);
                stamp.time_unix_ns.hash(&mut h);
                stamp.tid.hash(&mut h);
            }
            SampleBy::Pid => stamp.pid.hash(&mut h),
            SampleBy::Tid => stamp.tid.hash(&mut h),
        }
        self.threshold == u64::MAX || h.finish() < self.threshold
    }
}

/// OpenTelemetry's `TraceIdRatioBased` rule (the trace SDK specification's
/// consistent-probability form, which W3C Trace Context level 2 made the trace id's
/// randomness): the trace is sampled when the 56 low bits of its id, read big-endian,
/// are at least the rejection threshold `(1 - ratio) × 2^56`. Every span of a trace, on
/// every node and in every SDK that follows the rule, gets the same answer.
pub fn keeps_trace(id: &[u8; 16], threshold: u64) -> bool {
    let mut low = [0u8; 8];
    low[1..].copy_from_slice(&id[9..]);
    u64::from_be_bytes(low) >= threshold
}

/// What a rate limit counts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitBy {
    /// One bucket for the tracepoint.
    Tracepoint,
    /// One bucket per process.
    Pid,
    /// One bucket per Kubernetes pod (records outside pods share one).
    Pod,
}

/// One `--rate-limit` flag.
#[derive(Debug, Clone)]
pub struct RateRule {
    /// The flag's text.
    pub text: String,
    /// The events it is for.
    pub selector: Selector,
    /// Tokens added per second.
    pub per_second: u64,
    /// The bucket's size.
    pub burst: u64,
    /// One bucket for the tracepoint, or one per process.
    pub by: LimitBy,
}

impl FromStr for RateRule {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (selector, parts) = selector_and(text, RATE_FORM)?;
        let bad = || format!("`{text}`: {RATE_FORM}");
        let rate = parts[0].strip_suffix("/s").ok_or_else(bad)?;
        let per_second: u64 = rate.parse().map_err(|_| bad())?;
        let mut burst = per_second;
        let mut by = LimitBy::Tracepoint;
        for p in &parts[1..] {
            match p.as_str() {
                "by=pid" => by = LimitBy::Pid,
                "by=pod" => by = LimitBy::Pod,
                n => burst = n.parse().map_err(|_| bad())?,
            }
        }
        if per_second == 0 || burst == 0 {
            return Err(bad());
        }
        Ok(RateRule {
            text: text.to_string(),
            selector,
            per_second,
            burst,
            by,
        })
    }
}

/// Processes with a bucket of their own at most, per tracepoint; past it the buckets
/// start afresh (a process then gets a full bucket again: a bound on memory, said in
/// docs/filtering.md).
const MAX_BUCKETS: usize = 4096;

/// A token bucket, in nanotokens so that whole nanoseconds refill it exactly.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Tokens × 10^9.
    nanotokens: u128,
    /// The time of the last refill (ns); records earlier than it add nothing.
    at: u64,
}

/// The buckets of one tracepoint under a [`RateRule`], shared by every worker.
#[derive(Debug)]
pub struct RateState {
    rule: RateRule,
    buckets: Mutex<HashMap<u64, Bucket>>,
}

impl RateState {
    /// Fresh buckets for `rule`.
    pub fn new(rule: RateRule) -> Self {
        RateState {
            rule,
            buckets: Mutex::default(),
        }
    }

    /// Whether a record at `stamp` has a token (and take it). Records without a time
    /// count as at the last time seen. `pod`: the record's pod UID (asked for
    /// `by=pod` only).
    pub fn admits(&self, stamp: &RecordStamp, pod: impl FnOnce() -> Option<String>) -> bool {
        let key = match self.rule.by {
            LimitBy::Tracepoint => 0,
            LimitBy::Pid => u64::from(stamp.pid),
            LimitBy::Pod => pod().map_or(0, |uid| {
                // A fixed-key hash of the UID; 0 stays the bucket of records outside pods.
                #[allow(deprecated)]
                let mut h = std::hash::SipHasher::new_with_keys(0x706f_6473, 0);
                uid.hash(&mut h);
                h.finish().max(1)
            }),
        };
        let full = u128::from(self.rule.burst) * 1_000_000_000;
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if buckets.len() >= MAX_BUCKETS && !buckets.contains_key(&key) {
            buckets.clear();
        }
        let now = stamp.time_unix_ns;
        let b = buckets.entry(key).or_insert(Bucket {
            nanotokens: full,
            at: now.unwrap_or(0),
        });
        if let Some(now) = now
            && now > b.at
        {
            let added = u128::from(now - b.at) * u128::from(self.rule.per_second);
            b.nanotokens = (b.nanotokens + added).min(full);
            b.at = now;
        }
        if b.nanotokens >= 1_000_000_000 {
            b.nanotokens -= 1_000_000_000;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(t: u64, pid: u32) -> RecordStamp {
        RecordStamp {
            time_unix_ns: Some(t),
            cpu: 0,
            pid,
            tid: pid,
        }
    }

    #[test]
    fn bad_forms_are_refused_with_the_rule() {
        for bad in [
            "s:e=0",
            "s:e=-1",
            "s:e=1.5",
            "s:e=x",
            "s:e",
            "bad=0.5",
            "s:e=0.5,by=pod",
            "s:e=0.5,by=span",
        ] {
            let e = bad.parse::<SampleRule>().unwrap_err();
            assert!(e.contains("--sample takes"), "{bad}: {e}");
        }
        for bad in [
            "s:e=0/s",
            "s:e=-1/s",
            "s:e=10",
            "s:e=10/s,0",
            "s:e=1/m",
            "s:e=5/s,by=node",
        ] {
            let e = bad.parse::<RateRule>().unwrap_err();
            assert!(e.contains("--rate-limit takes"), "{bad}: {e}");
        }
        let r: RateRule = "s:*=1000/s,2000,by=pid".parse().unwrap();
        assert_eq!((r.per_second, r.burst, r.by), (1000, 2000, LimitBy::Pid));
    }

    /// 100,000 records at RATIO 0.1: the kept count within 5 standard deviations of
    /// the binomial mean (σ = √(n p (1-p)) ≈ 94.9); the same records kept every time.
    #[test]
    fn a_sample_keeps_the_ratio_within_binomial_bounds_and_the_same_records() {
        let rule: SampleRule = "s:e=0.1".parse().unwrap();
        let keep = |i: u64| rule.keeps(&stamp(1_000_000 * i, 7), &i.to_le_bytes(), None);
        let kept: Vec<u64> = (0..100_000).filter(|&i| keep(i)).collect();
        let (n, p) = (100_000f64, 0.1f64);
        let sigma = (n * p * (1.0 - p)).sqrt();
        assert!(
            (kept.len() as f64 - n * p).abs() < 5.0 * sigma,
            "{}",
            kept.len()
        );
        let again: Vec<u64> = (0..100_000).filter(|&i| keep(i)).collect();
        assert_eq!(kept, again);
        let all: SampleRule = "s:e=1".parse().unwrap();
        assert!((0..1000u64).all(|i| all.keeps(&stamp(i, 1), &[], None)));
    }

    #[test]
    fn by_pid_keeps_a_process_whole() {
        let rule: SampleRule = "s:e=0.5,by=pid".parse().unwrap();
        for pid in 0..200u32 {
            let first = rule.keeps(&stamp(0, pid), b"a", None);
            assert!(
                (1..50u64).all(|t| rule.keeps(&stamp(t, pid), &t.to_le_bytes(), None) == first)
            );
        }
    }

    /// 4,000 records a second for 10 s under 1000/s with a burst of 1000: the burst,
    /// then 1000 a second: 1000 + 10 × 1000 at most, and no fewer than 10 × 1000.
    #[test]
    fn a_rate_limit_holds_within_the_buckets_bound() {
        let state = RateState::new("s:e=1000/s,1000".parse().unwrap());
        let kept = (0..40_000u64)
            .filter(|i| state.admits(&stamp(1_000_000_000 + i * 250_000, 1), || None))
            .count() as u64;
        assert!((10_000..=11_000).contains(&kept), "{kept}");
    }

    #[test]
    fn by_pid_gives_each_process_its_own_bucket() {
        let state = RateState::new("s:e=1/s,2,by=pid".parse().unwrap());
        let t = 5_000_000_000;
        assert!(state.admits(&stamp(t, 1), || None) && state.admits(&stamp(t, 1), || None));
        assert!(!state.admits(&stamp(t, 1), || None));
        assert!(state.admits(&stamp(t, 2), || None));
        assert!(state.admits(&stamp(t + 1_000_000_000, 1), || None));
    }

    /// By trace id: OpenTelemetry's rule (the 56 low bits against `(1 - ratio) × 2^56`),
    /// the same answer for every record of a trace whatever else differs; over 100,000
    /// random trace ids the kept share within binomial bounds.
    #[test]
    fn by_trace_keeps_a_trace_whole_by_opentelemetrys_rule() {
        let rule: SampleRule = "s:e=0.25,by=trace".parse().unwrap();
        // Threshold 0.75 × 2^56 = 0xc0000000000000.
        let id = |low: u64| {
            let mut id = [0xabu8; 16];
            id[8..].copy_from_slice(&low.to_be_bytes());
            id
        };
        assert!(rule.keeps(&stamp(1, 1), b"x", Some(id(0x00c0_0000_0000_0000))));
        assert!(!rule.keeps(&stamp(1, 1), b"x", Some(id(0xffbf_ffff_ffff_ffff))));
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut kept = 0u32;
        for _ in 0..100_000 {
            // splitmix64: random trace ids.
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            let first = rule.keeps(&stamp(1, 1), b"a", Some(id(z)));
            let other = rule.keeps(&stamp(99, 2), b"bb", Some(id(z)));
            assert_eq!(first, other);
            kept += u32::from(first);
        }
        let sigma = (100_000f64 * 0.25 * 0.75).sqrt();
        assert!((f64::from(kept) - 25_000.0).abs() < 5.0 * sigma, "{kept}");
    }

    #[test]
    fn by_pod_gives_each_pod_its_own_bucket_and_the_rest_one() {
        let state = RateState::new("s:e=1/s,1,by=pod".parse().unwrap());
        let t = 5_000_000_000;
        let pod = |uid: &str| {
            let uid = uid.to_string();
            move || Some(uid)
        };
        assert!(state.admits(&stamp(t, 1), pod("a")));
        assert!(!state.admits(&stamp(t, 2), pod("a")));
        assert!(state.admits(&stamp(t, 1), pod("b")));
        assert!(state.admits(&stamp(t, 3), || None));
        assert!(!state.admits(&stamp(t, 4), || None));
    }
}
