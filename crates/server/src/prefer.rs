//! `Prefer: wait=N` (RFC 7240 §4.3) on `POST /v1/payments`: a repeat that
//! arrives while the key's first request is still running waits up to N
//! seconds for that request's result instead of getting 409 at once.
//!
//! The wait is a transport convenience, so it lives here and not in the engine:
//! it only reads the key through [`Store::key`](chargeonce_core::Store::key)
//! and asks the engine again once the key changed. The engine's answers and
//! guarantees are the same with or without it; a client that sends no `Prefer`
//! (or a malformed one) gets exactly the old behaviour.
//!
//! Waiters are capped per instance and per shop ([`crate::limits::Waiters`]):
//! a request over a cap does not wait and gets the plain 409 at once.
//!
//! While the key's lease is held the waiter only polls (a read, every
//! [`POLL_INTERVAL`]). When the key is finished, or its lease is no longer
//! held (the first request ended without a final answer, e.g. `202` pending,
//! or its process died), the waiter runs the engine again, exactly as the
//! client's own retry would: it gets the replay, resumes, or takes over.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use chargeonce_core::{ClaimRequest, Outcome, PaymentRequest, RecoveryPoint};
use tokio::time::Instant;

use crate::AppState;
use crate::problem::{Problem, ProblemCode};

/// The longest wait a client may ask for; longer requests are cut to this.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// How often a waiting request looks at the key.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// The longest pause between two reads of a waited-for key.
const MAX_POLL_INTERVAL: Duration = Duration::from_millis(500);

/// The response header that says the preference was honoured.
pub const PREFERENCE_APPLIED: &str = "preference-applied";

/// The `wait` preference of a request, capped at [`MAX_WAIT`]; `None` when
/// there is none, it is zero, or the first `wait` preference is malformed.
///
/// Follows RFC 7240: preferences are comma-separated, each `name[=value]`
/// with optional `;` parameters; names are case-insensitive; the value may be
/// a token or a quoted string; the first occurrence of a preference wins;
/// several `Prefer` headers are one list.
///
/// ```
/// use axum::http::{HeaderMap, HeaderValue};
/// use chargeonce_server::prefer::wait_preference;
/// use std::time::Duration;
///
/// let mut headers = HeaderMap::new();
/// headers.insert("prefer", HeaderValue::from_static("respond-async, wait=10"));
/// assert_eq!(wait_preference(&headers), Some(Duration::from_secs(10)));
/// headers.insert("prefer", HeaderValue::from_static("wait=ten"));
/// assert_eq!(wait_preference(&headers), None);
/// ```
pub fn wait_preference(headers: &HeaderMap) -> Option<Duration> {
    for value in headers.get_all("prefer") {
        let Ok(value) = value.to_str() else {
            continue;
        };
        for preference in split_outside_quotes(value, ',') {
            let head = split_outside_quotes(preference, ';')
                .next()
                .unwrap_or_default();
            let (name, raw) = match head.split_once('=') {
                Some((name, raw)) => (name.trim(), Some(raw.trim())),
                None => (head.trim(), None),
            };
            if !name.eq_ignore_ascii_case("wait") {
                continue;
            }
            // The first `wait` decides, even when it is malformed (then: none).
            let raw = raw?;
            let raw = match raw.strip_prefix('"') {
                Some(inner) => inner.strip_suffix('"')?,
                None => raw,
            };
            if raw.is_empty() || raw.len() > 10 || !raw.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let seconds: u64 = raw.parse().ok()?;
            if seconds == 0 {
                return None;
            }
            return Some(Duration::from_secs(seconds).min(MAX_WAIT));
        }
    }
    None
}

/// Splits on `separator` where it is not inside a quoted string.
fn split_outside_quotes(text: &str, separator: char) -> impl Iterator<Item = &str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if quoted && c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        } else if c == separator && !quoted {
            parts.push(&text[start..i]);
            start = i + c.len_utf8();
        }
    }
    parts.push(&text[start..]);
    parts.into_iter().filter(|p| !p.trim().is_empty())
}

/// The value of `Preference-Applied` for an honoured wait.
pub fn applied_value(wait: Duration) -> (HeaderName, HeaderValue) {
    (
        HeaderName::from_static(PREFERENCE_APPLIED),
        HeaderValue::from_str(&format!("wait={}", wait.as_secs()))
            .unwrap_or_else(|_| HeaderValue::from_static("wait")),
    )
}

/// Runs the engine for a payment in a task of its own (a client that hangs up
/// does not cut it), and with `wait`, keeps answering `InProgress` with a
/// wait for the key instead, until the deadline. Returns the outcome and
/// whether the request waited.
pub async fn pay(
    state: &AppState,
    claim: ClaimRequest,
    request: PaymentRequest,
    wait: Option<Duration>,
) -> Result<(Outcome, bool), Problem> {
    let deadline = wait.map(|wait| Instant::now() + wait);
    let mut waited = false;
    // Held while this request waits; freed however the wait ends.
    let mut slot = None;
    loop {
        let outcome = run_engine(state, claim.clone(), request.clone()).await?;
        let Some(deadline) = deadline else {
            return Ok((outcome, waited));
        };
        if !matches!(outcome, Outcome::InProgress { .. }) {
            return Ok((outcome, waited));
        }
        if slot.is_none() {
            match state.waiters.enter(&claim.shop_id) {
                Ok(entered) => slot = Some(entered),
                Err(refused) => {
                    // Over a cap: the plain 409 with Retry-After, at once.
                    tracing::debug!(key = %claim.key, cap = refused.reason(), "too many waiters");
                    state.metrics.refused(refused.reason());
                    return Ok((outcome, waited));
                }
            }
        }
        waited = true;
        if !key_changed_by(state, &claim, deadline).await {
            return Ok((outcome, waited));
        }
    }
}

/// One run of the engine, in a task the shutdown waits for.
async fn run_engine(
    state: &AppState,
    claim: ClaimRequest,
    request: PaymentRequest,
) -> Result<Outcome, Problem> {
    let engine = state.engine.clone();
    state
        .operations
        .spawn(async move { engine.pay(claim, request).await })
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "payment task failed");
            Problem::new(ProblemCode::Internal, "internal error")
        })?
        .map_err(crate::respond::engine_problem)
}

/// Polls the key until it is finished or its lease is no longer held (then
/// `true`: ask the engine again), or until the deadline (`false`). A store
/// error also returns `true`: the engine's next answer reports it properly.
///
/// The pause between reads starts at [`POLL_INTERVAL`] and doubles up to
/// [`MAX_POLL_INTERVAL`], so many waiting duplicates of a long operation do
/// not take the connections the operation itself needs.
async fn key_changed_by(state: &AppState, claim: &ClaimRequest, deadline: Instant) -> bool {
    let mut pause = POLL_INTERVAL;
    loop {
        if Instant::now() >= deadline {
            return false;
        }
        let next = (Instant::now() + pause).min(deadline);
        pause = (pause * 2).min(MAX_POLL_INTERVAL);
        tokio::time::sleep_until(next).await;
        match state.store.key(&claim.shop_id, &claim.key).await {
            Ok(Some(record))
                if record.recovery_point != RecoveryPoint::Finished && record.lease_active => {}
            Ok(_) => return true,
            Err(error) => {
                tracing::warn!(key = %claim.key, %error, "reading the key while waiting failed");
                return true;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn wait_of(values: &[&str]) -> Option<Duration> {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append("prefer", HeaderValue::from_str(value).unwrap());
        }
        wait_preference(&headers)
    }

    #[test]
    fn parses_rfc_7240_wait() {
        let secs = |s| Some(Duration::from_secs(s));
        assert_eq!(wait_of(&["wait=5"]), secs(5));
        assert_eq!(wait_of(&["WAIT=5"]), secs(5));
        assert_eq!(wait_of(&[" wait = 5 "]), secs(5));
        assert_eq!(wait_of(&["wait=\"7\""]), secs(7));
        assert_eq!(wait_of(&["respond-async, wait=3"]), secs(3));
        assert_eq!(wait_of(&["return=minimal; foo=\"a,b\", wait=4"]), secs(4));
        assert_eq!(wait_of(&["handling=lenient", "wait=2"]), secs(2));
        assert_eq!(wait_of(&["wait=2;x=y"]), secs(2));
        assert_eq!(wait_of(&["wait=1, wait=9"]), secs(1), "the first one wins");
        assert_eq!(wait_of(&["wait=3600"]), Some(MAX_WAIT), "capped");
    }

    #[test]
    fn ignores_what_is_not_a_valid_wait() {
        for bad in [
            "",
            "wait",
            "wait=",
            "wait=0",
            "wait=-1",
            "wait=1.5",
            "wait=abc",
            "wait=\"5",
            "wait=99999999999999999999",
            "respond-async",
            "waiting=5",
            "x=\"wait=5\"",
        ] {
            assert_eq!(wait_of(&[bad]), None, "{bad:?}");
        }
        assert_eq!(wait_of(&["wait=x, wait=5"]), None, "the first one decides");
    }

    #[test]
    fn applied_header_names_the_wait() {
        let (name, value) = applied_value(Duration::from_secs(10));
        assert_eq!(name, "preference-applied");
        assert_eq!(value, "wait=10");
    }
}
