//! The `Prefer: wait=N` request header (RFC 7240 §4.3) and its
//! `Preference-Applied` answer: a repeat that arrives while the key's first
//! request is still running may ask to wait up to N seconds for that
//! request's result instead of getting 409 at once.
//!
//! Only the header lives here; the waiting itself is a step of the request
//! pipeline ([`crate::pipeline`]), for payments and refunds alike. A client
//! that sends no `Prefer` (or a malformed one) gets exactly the answers it
//! would get without it.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue};

/// The longest wait a client may ask for; longer requests are cut to this.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

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
