//! A raw HTTP answer, how one is fetched, and what a transport failure was.

use std::time::{Duration, SystemTime};

use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER};

use super::{IDEMPOTENT_REPLAYED, PREFERENCE_APPLIED};
use crate::outcome::{AttemptAnswer, FailureKind};
use crate::retry::parse_retry_after;
use crate::{Payment, Problem};

/// How many bytes of an unexpected body an error keeps.
const BODY_EXCERPT: usize = 300;

/// A raw HTTP answer.
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) headers: HeaderMap,
    pub(super) body: Vec<u8>,
}

impl Answer {
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub(super) fn retry_after(&self) -> Option<Duration> {
        self.headers
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, SystemTime::now()))
    }

    pub(super) fn problem(&self) -> Option<Problem> {
        let is_problem = self
            .header(CONTENT_TYPE.as_str())
            .is_some_and(|t| t.contains("json"));
        is_problem
            .then(|| Problem::from_body(self.status, &self.body))
            .flatten()
    }

    pub(super) fn excerpt(&self) -> String {
        String::from_utf8_lossy(&self.body)
            .chars()
            .take(BODY_EXCERPT)
            .collect()
    }

    /// What an attempt saw, for the log.
    pub(super) fn seen(
        &self,
        payment: Option<&Payment>,
        problem: Option<&Problem>,
    ) -> AttemptAnswer {
        AttemptAnswer::Http {
            status: self.status,
            replayed: self.header(IDEMPOTENT_REPLAYED) == Some("true"),
            waited: self
                .header(PREFERENCE_APPLIED)
                .is_some_and(|v| v.trim_start().starts_with("wait")),
            problem: problem.map(|p| p.code.clone()),
            payment_status: payment.map(|p| p.status.as_str()),
        }
    }
}

/// Whether a status is worth another attempt with the same request.
pub(super) fn transient(status: u16) -> bool {
    matches!(status, 408 | 409 | 425 | 429) || (500..=599).contains(&status)
}

/// The innermost cause of a transport error: the readable part.
fn root_cause(error: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

pub(super) fn failure(error: &reqwest::Error) -> AttemptAnswer {
    let kind = if error.is_connect() {
        FailureKind::Connect
    } else if error.is_timeout() {
        FailureKind::Timeout
    } else {
        FailureKind::Lost
    };
    AttemptAnswer::Failed {
        kind,
        message: root_cause(error),
    }
}

/// Sends one request and reads its whole answer.
pub(super) async fn send(builder: reqwest::RequestBuilder) -> Result<Answer, reqwest::Error> {
    let response = builder.send().await?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.bytes().await?.to_vec();
    Ok(Answer {
        status,
        headers,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_statuses() {
        for status in [408, 409, 425, 429, 500, 502, 503, 504] {
            assert!(transient(status), "{status}");
        }
        for status in [200, 201, 202, 400, 401, 402, 404, 413, 415, 422] {
            assert!(!transient(status), "{status}");
        }
    }
}
