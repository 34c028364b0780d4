//! Which export answers are worth another try, and how long to wait before it (pure: no
//! I/O, no clock of its own; the caller passes "now" where an HTTP date needs one). The
//! classification is the OTLP specification's
//! (<https://opentelemetry.io/docs/specs/otlp/#failures>): [`grpc()`] and [`http()`]; the
//! waits between tries are [`Backoff`]'s. Every answer and what uevrec does with it:
//! docs/export.md ("Retries").

use std::time::{Duration, SystemTime};

use tonic::Code;

/// What to do with a batch after one answer (or failure to get one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Try again later; `after` is the server's hint, if it gave one.
    Retry {
        /// How long the server asked to wait (`Retry-After`, `RetryInfo.retry_delay`).
        after: Option<Duration>,
    },
    /// Do not send this batch again: the server will never accept it.
    Fail,
}

/// The verdict for a gRPC status `code` returned by the server. `retry_delay` is the
/// `RetryInfo.retry_delay` from the status details, `Some` when the status carried a
/// `RetryInfo` at all (a `RetryInfo` without a delay: `Some(Duration::ZERO)`).
///
/// `CANCELLED`, `DEADLINE_EXCEEDED`, `ABORTED`, `OUT_OF_RANGE`, `UNAVAILABLE` and
/// `DATA_LOSS` are retryable; `RESOURCE_EXHAUSTED` only when the status carries a
/// `google.rpc.RetryInfo` (then after its `retry_delay`); every other code is not.
pub fn grpc(code: Code, retry_delay: Option<Duration>) -> Verdict {
    match code {
        Code::Cancelled
        | Code::DeadlineExceeded
        | Code::Aborted
        | Code::OutOfRange
        | Code::Unavailable
        | Code::DataLoss => Verdict::Retry {
            after: retry_delay.filter(|d| !d.is_zero()),
        },
        Code::ResourceExhausted => match retry_delay {
            Some(d) => Verdict::Retry {
                after: Some(d).filter(|d| !d.is_zero()),
            },
            None => Verdict::Fail,
        },
        _ => Verdict::Fail,
    }
}

/// The verdict for an HTTP response status `status` (not 2xx), with the `Retry-After`
/// header's value if there was one, read against the wall clock `now`: 429, 502, 503 and
/// 504 are retryable, honouring `Retry-After` (delay-seconds or an HTTP-date); every other
/// 4xx/5xx is not.
pub fn http(status: u16, retry_after: Option<&str>, now: SystemTime) -> Verdict {
    match status {
        429 | 502 | 503 | 504 => Verdict::Retry {
            after: retry_after.and_then(|v| parse_retry_after(v, now)),
        },
        _ => Verdict::Fail,
    }
}

/// A `Retry-After` value (RFC 9110 §10.2.3): a number of seconds, or an HTTP-date (then
/// the time from `now` until it; zero when it has passed). `None` when it is neither.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // More digits than a u64 holds: "a very long time", which the hint cap shortens.
        let secs = value.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(secs));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The schedule of waits between tries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffPolicy {
    /// The first wait (before jitter).
    pub initial: Duration,
    /// The longest wait the schedule reaches (jitter never exceeds it).
    pub max: Duration,
    /// How much each wait may differ from the schedule, as a fraction (0.2: ±20 %).
    pub jitter: f64,
    /// The longest wait a server's hint may ask for; longer hints are shortened to it.
    pub max_hint: Duration,
}

impl Default for BackoffPolicy {
    /// 1 s doubling to 30 s, ±20 %, server hints up to 5 min (what the OpenTelemetry
    /// SDKs and Collector use, within a factor of a few).
    fn default() -> Self {
        BackoffPolicy {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(30),
            jitter: 0.2,
            max_hint: Duration::from_secs(300),
        }
    }
}

/// Exponential backoff with jitter and a cap; a server's hint takes precedence. Each wait
/// is doubled from [`BackoffPolicy::initial`] up to [`BackoffPolicy::max`] and scattered by
/// ±[`BackoffPolicy::jitter`], so that many recorders cut off by the same outage do not
/// come back in the same instant. A server's own hint (`Retry-After`, `RetryInfo`) is
/// capped at [`BackoffPolicy::max_hint`]: a collector asking for an hour is asked again
/// sooner, as the spool keeps filling meanwhile.
#[derive(Debug, Clone)]
pub struct Backoff {
    policy: BackoffPolicy,
    /// The next scheduled wait before jitter.
    next: Duration,
    /// Waits handed out since the last [`Backoff::reset`].
    tries: u32,
    rng: fastrand::Rng,
}

impl Backoff {
    /// A schedule following `policy`, with jitter from a randomly seeded generator.
    pub fn new(policy: BackoffPolicy) -> Self {
        Self::with_rng(policy, fastrand::Rng::new())
    }

    /// The same with a fixed seed (tests: the same waits every run).
    pub fn with_seed(policy: BackoffPolicy, seed: u64) -> Self {
        Self::with_rng(policy, fastrand::Rng::with_seed(seed))
    }

    fn with_rng(policy: BackoffPolicy, rng: fastrand::Rng) -> Self {
        let jitter = if policy.jitter.is_finite() {
            policy.jitter.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let policy = BackoffPolicy {
            jitter,
            max: policy.max.max(policy.initial),
            ..policy
        };
        Backoff {
            policy,
            next: policy.initial,
            tries: 0,
            rng,
        }
    }

    /// The wait before the next try. `hint` is the server's (`Outcome::Retry::after`):
    /// when given it is the wait, up to [`BackoffPolicy::max_hint`]; the schedule still
    /// advances, so a server that stops giving hints does not restart it from the bottom.
    pub fn next_delay(&mut self, hint: Option<Duration>) -> Duration {
        let base = self.next;
        self.next = base.saturating_mul(2).min(self.policy.max);
        self.tries = self.tries.saturating_add(1);
        if let Some(hint) = hint {
            return hint.min(self.policy.max_hint);
        }
        let factor = 1.0 - self.policy.jitter + 2.0 * self.policy.jitter * self.rng.f64();
        base.mul_f64(factor).min(self.policy.max)
    }

    /// Back to the first wait (after a success).
    pub fn reset(&mut self) {
        self.next = self.policy.initial;
        self.tries = 0;
    }

    /// How many waits were handed out since the last reset.
    pub fn tries(&self) -> u32 {
        self.tries
    }

    /// The policy in use (jitter clamped to 0..=1, `max` at least `initial`).
    pub fn policy(&self) -> &BackoffPolicy {
        &self.policy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RETRYABLE: [Code; 6] = [
        Code::Cancelled,
        Code::DeadlineExceeded,
        Code::Aborted,
        Code::OutOfRange,
        Code::Unavailable,
        Code::DataLoss,
    ];

    #[test]
    fn grpc_codes_follow_the_spec() {
        for code in RETRYABLE {
            assert_eq!(grpc(code, None), Verdict::Retry { after: None }, "{code:?}");
        }
        let not_retryable = [
            Code::Ok,
            Code::Unknown,
            Code::InvalidArgument,
            Code::NotFound,
            Code::AlreadyExists,
            Code::PermissionDenied,
            Code::FailedPrecondition,
            Code::Unimplemented,
            Code::Internal,
            Code::Unauthenticated,
        ];
        for code in not_retryable {
            assert_eq!(grpc(code, None), Verdict::Fail, "{code:?}");
            // A RetryInfo does not make a non-retryable code retryable.
            assert_eq!(grpc(code, Some(Duration::from_secs(1))), Verdict::Fail);
        }
        // Every code is covered by one of the two lists or RESOURCE_EXHAUSTED.
        assert_eq!(RETRYABLE.len() + not_retryable.len() + 1, 17);
    }

    #[test]
    fn resource_exhausted_needs_retry_info() {
        assert_eq!(grpc(Code::ResourceExhausted, None), Verdict::Fail);
        assert_eq!(
            grpc(Code::ResourceExhausted, Some(Duration::from_millis(1500))),
            Verdict::Retry {
                after: Some(Duration::from_millis(1500))
            }
        );
        // RetryInfo with no delay: retry on the schedule.
        assert_eq!(
            grpc(Code::ResourceExhausted, Some(Duration::ZERO)),
            Verdict::Retry { after: None }
        );
        assert_eq!(
            grpc(Code::Unavailable, Some(Duration::from_secs(2))),
            Verdict::Retry {
                after: Some(Duration::from_secs(2))
            }
        );
    }

    #[test]
    fn http_statuses_follow_the_spec() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        for status in [429, 502, 503, 504] {
            assert_eq!(http(status, None, now), Verdict::Retry { after: None });
            assert_eq!(
                http(status, Some("7"), now),
                Verdict::Retry {
                    after: Some(Duration::from_secs(7))
                }
            );
        }
        for status in [
            300, 301, 400, 401, 403, 404, 405, 408, 413, 415, 500, 501, 505,
        ] {
            assert_eq!(http(status, Some("7"), now), Verdict::Fail, "{status}");
        }
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after("0", now), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after(" 120 ", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after("99999999999999999999999", now),
            Some(Duration::from_secs(u64::MAX))
        );
        let later = now + Duration::from_secs(42);
        let date = httpdate::fmt_http_date(later);
        assert_eq!(parse_retry_after(&date, now), Some(Duration::from_secs(42)));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(42));
        assert_eq!(parse_retry_after(&earlier, now), Some(Duration::ZERO));
        for bad in ["", "-1", "1.5", "soon", "Mon, 99 Foo 2024 00:00:00 GMT"] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_within_jitter() {
        let policy = BackoffPolicy::default();
        let mut b = Backoff::with_seed(policy, 7);
        let mut scheduled = 1.0f64;
        for _ in 0..12 {
            let d = b.next_delay(None).as_secs_f64();
            assert!(
                d >= scheduled * 0.8 - 1e-9 && d <= (scheduled * 1.2).min(30.0) + 1e-9,
                "{d} outside ±20 % of {scheduled}"
            );
            scheduled = (scheduled * 2.0).min(30.0);
        }
        assert_eq!(b.tries(), 12);
        b.reset();
        assert_eq!(b.tries(), 0);
        let d = b.next_delay(None).as_secs_f64();
        assert!((0.8..=1.2).contains(&d), "{d} after reset");
    }

    #[test]
    fn backoff_jitter_varies_and_zero_jitter_is_exact() {
        let policy = BackoffPolicy {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(80),
            jitter: 0.0,
            max_hint: Duration::from_secs(1),
        };
        let mut b = Backoff::with_seed(policy, 1);
        let waits: Vec<u64> = (0..6)
            .map(|_| b.next_delay(None).as_millis() as u64)
            .collect();
        assert_eq!(waits, [10, 20, 40, 80, 80, 80]);

        let mut b = Backoff::with_seed(
            BackoffPolicy {
                jitter: 0.5,
                ..policy
            },
            3,
        );
        let firsts: Vec<Duration> = (0..20)
            .map(|_| {
                b.reset();
                b.next_delay(None)
            })
            .collect();
        assert!(
            firsts.iter().any(|d| *d != firsts[0]),
            "jitter never varied"
        );
        assert!(
            firsts
                .iter()
                .all(|d| *d >= Duration::from_millis(5) && *d <= Duration::from_millis(15))
        );
    }

    #[test]
    fn server_hint_wins_but_is_capped() {
        let policy = BackoffPolicy {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(100),
            jitter: 0.0,
            max_hint: Duration::from_secs(2),
        };
        let mut b = Backoff::with_seed(policy, 1);
        assert_eq!(
            b.next_delay(Some(Duration::from_millis(1500))),
            Duration::from_millis(1500)
        );
        assert_eq!(
            b.next_delay(Some(Duration::from_secs(3600))),
            Duration::from_secs(2)
        );
        // The schedule advanced underneath: 10, 20 were used up, 40 is next.
        assert_eq!(b.next_delay(None), Duration::from_millis(40));
    }

    #[test]
    fn odd_policies_are_tamed() {
        let mut b = Backoff::with_seed(
            BackoffPolicy {
                initial: Duration::from_secs(5),
                max: Duration::from_secs(1),
                jitter: f64::NAN,
                max_hint: Duration::from_secs(1),
            },
            1,
        );
        assert_eq!(b.policy().max, Duration::from_secs(5));
        assert_eq!(b.policy().jitter, 0.0);
        assert_eq!(b.next_delay(None), Duration::from_secs(5));
        assert_eq!(b.next_delay(None), Duration::from_secs(5));
    }
}
