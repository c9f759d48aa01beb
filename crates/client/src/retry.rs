//! When and how long to retry: exponential backoff with full jitter, the
//! server's `Retry-After`, and a total time budget.

use std::time::{Duration, SystemTime};

use rand::Rng;

/// How the client retries. Every retry of a call sends the same
/// `Idempotency-Key` and the same body bytes; only the timing is chosen here.
///
/// The wait before attempt *n+1* is a random duration in
/// `[0, min(max_delay, base_delay * 2^(n-1))]` ("full jitter", so clients that
/// failed together do not retry together), but never shorter than the
/// server's `Retry-After`. When the next attempt could not start within the
/// budget, the call stops; a payment whose outcome is then unknown is reported
/// as [`Outcome::Uncertain`](crate::Outcome::Uncertain), never as an error.
///
/// ```
/// use std::time::Duration;
/// use chargeonce_client::RetryPolicy;
///
/// let policy = RetryPolicy::default()
///     .budget(Duration::from_secs(30))
///     .attempt_timeout(Duration::from_secs(10))
///     .prefer_wait(Some(Duration::from_secs(5)));
/// assert_eq!(policy.budget, Duration::from_secs(30));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The total time one call may take, attempts and waits included (60 s).
    pub budget: Duration,
    /// The longest one attempt may take before it counts as a lost answer
    /// (20 s: longer than the server's acquirer timeout, 10 s by default).
    pub attempt_timeout: Duration,
    /// The first backoff step (100 ms).
    pub base_delay: Duration,
    /// The largest backoff step (5 s).
    pub max_delay: Duration,
    /// The most attempts one call makes (20); 1 means no retries.
    pub max_attempts: u32,
    /// Sent as `Prefer: wait=N` on payments (10 s): a repeat that finds the
    /// first request still running waits for its result on the server
    /// instead of getting 409. Capped by the attempt timeout; `None` sends no
    /// `Prefer`.
    pub prefer_wait: Option<Duration>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            budget: Duration::from_secs(60),
            attempt_timeout: Duration::from_secs(20),
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            max_attempts: 20,
            prefer_wait: Some(Duration::from_secs(10)),
        }
    }
}

impl RetryPolicy {
    /// One attempt, no retries (what a naive client does; for demos and tests).
    pub fn no_retries() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// Sets [`RetryPolicy::budget`].
    pub fn budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }

    /// Sets [`RetryPolicy::attempt_timeout`].
    pub fn attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = timeout;
        self
    }

    /// Sets [`RetryPolicy::base_delay`] and [`RetryPolicy::max_delay`].
    pub fn backoff(mut self, base_delay: Duration, max_delay: Duration) -> Self {
        self.base_delay = base_delay;
        self.max_delay = max_delay;
        self
    }

    /// Sets [`RetryPolicy::max_attempts`] (at least 1).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// Sets [`RetryPolicy::prefer_wait`].
    pub fn prefer_wait(mut self, wait: Option<Duration>) -> Self {
        self.prefer_wait = wait;
        self
    }

    /// The backoff ceiling before attempt `failed + 1`, after `failed` failures
    /// (1-based): `min(max_delay, base_delay * 2^(failed-1))`.
    pub fn ceiling(&self, failed: u32) -> Duration {
        let exponent = failed.saturating_sub(1).min(30);
        self.base_delay
            .saturating_mul(1_u32 << exponent)
            .min(self.max_delay)
    }

    /// The wait before the next attempt: full jitter under the ceiling, but at
    /// least what the server asked for.
    pub fn delay(&self, failed: u32, retry_after: Option<Duration>) -> Duration {
        let ceiling = self.ceiling(failed);
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        let jittered = Duration::from_nanos(rand::rng().random_range(0..=nanos));
        jittered.max(retry_after.unwrap_or_default())
    }

    /// The `Prefer: wait=N` seconds for an attempt limited to `attempt`:
    /// at most the policy's wait and one second less than the attempt may
    /// take, so the server answers before the client gives up.
    pub fn prefer_seconds(&self, attempt: Duration) -> Option<u64> {
        let wanted = self.prefer_wait?.as_secs();
        let fits = attempt.as_secs().saturating_sub(1);
        Some(wanted.min(fits)).filter(|s| *s > 0)
    }
}

/// Reads `Retry-After`: delta-seconds or an HTTP date (RFC 9110 §10.2.3).
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse::<u64>().ok().map(Duration::from_secs);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or_default())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_exponentially_to_a_cap() {
        let policy =
            RetryPolicy::default().backoff(Duration::from_millis(100), Duration::from_secs(1));
        let ms = |n| policy.ceiling(n).as_millis();
        assert_eq!(
            [ms(1), ms(2), ms(3), ms(4), ms(5), ms(50)],
            [100, 200, 400, 800, 1000, 1000]
        );
    }

    #[test]
    fn full_jitter_stays_under_the_ceiling_and_honours_retry_after() {
        let policy =
            RetryPolicy::default().backoff(Duration::from_millis(100), Duration::from_secs(1));
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            let d = policy.delay(3, None);
            assert!(d <= Duration::from_millis(400));
            seen.insert(d.as_millis());
        }
        assert!(seen.len() > 10, "jitter spreads the waits: {seen:?}");
        for _ in 0..50 {
            assert!(policy.delay(1, Some(Duration::from_secs(2))) >= Duration::from_secs(2));
        }
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(7));
        assert_eq!(parse_retry_after(&later, now), Some(Duration::from_secs(7)));
        let past = httpdate::fmt_http_date(now - Duration::from_secs(7));
        assert_eq!(parse_retry_after(&past, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
    }

    #[test]
    fn prefer_wait_fits_inside_the_attempt() {
        let policy = RetryPolicy::default().prefer_wait(Some(Duration::from_secs(10)));
        assert_eq!(policy.prefer_seconds(Duration::from_secs(20)), Some(10));
        assert_eq!(policy.prefer_seconds(Duration::from_secs(4)), Some(3));
        assert_eq!(policy.prefer_seconds(Duration::from_millis(1500)), None);
        assert_eq!(
            RetryPolicy::default()
                .prefer_wait(None)
                .prefer_seconds(Duration::from_secs(20)),
            None
        );
    }
}
