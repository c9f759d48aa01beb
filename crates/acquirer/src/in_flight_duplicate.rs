//! [`InFlightDuplicate`]: how the acquirer answers a duplicate of a charge
//! it is still processing, the way real providers answer them (a fault
//! setting, read by the simulator and its HTTP API).

use std::str::FromStr;

use chargeonce_core::AcquirerError;
use reqwest::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The reason of an [`AcquirerError`] that is an in-flight duplicate's
/// answer: the HTTP API answers it as the fault says.
pub const IN_FLIGHT_DUPLICATE: &str = "in_flight_duplicate";

/// How the acquirer answers a charge whose key it is still processing (the
/// first request has not recorded its charge yet). Only an idempotent
/// acquirer tells a duplicate; one without idempotency charges again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum InFlightDuplicate {
    /// Runs it as a request of its own: whichever records first, the other
    /// answers with its charge (the simulator's behaviour of old).
    #[default]
    #[serde(rename = "wait")]
    Wait,
    /// 409 `request_in_progress`, as BlueSnap and PPRO answer.
    #[serde(rename = "409")]
    Conflict,
    /// 422 `unprocessable_entity` and nothing more: a front that cannot be
    /// told from a refusal (the engine's resend rule is what saves it).
    #[serde(rename = "422")]
    Unprocessable,
    /// 400 `TransactionRequestIdempotencyKeyAlreadyExists`, as Primer answers.
    #[serde(rename = "400")]
    BadRequest,
    /// 208 Already Reported with an empty body, as PicPay answers.
    #[serde(rename = "208")]
    AlreadyReported,
}

impl InFlightDuplicate {
    /// Every mode, as the flag names them.
    pub const ALL: [(&'static str, Self); 5] = [
        ("wait", Self::Wait),
        ("409", Self::Conflict),
        ("422", Self::Unprocessable),
        ("400", Self::BadRequest),
        ("208", Self::AlreadyReported),
    ];

    /// The HTTP answer (none for [`InFlightDuplicate::Wait`]).
    pub fn answer(self) -> Option<(StatusCode, Value)> {
        let problem = |status: StatusCode, code: &str, detail: &str| {
            json!({"type": format!("urn:chargeonce:acquirer:{code}"), "title": code,
                   "status": status.as_u16(), "detail": detail, "code": code})
        };
        match self {
            Self::Wait => None,
            Self::Conflict => Some((
                StatusCode::CONFLICT,
                problem(
                    StatusCode::CONFLICT,
                    "request_in_progress",
                    "a request with this key is in progress",
                ),
            )),
            Self::Unprocessable => Some((
                StatusCode::UNPROCESSABLE_ENTITY,
                problem(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "unprocessable_entity",
                    "the request cannot be processed",
                ),
            )),
            Self::BadRequest => Some((
                StatusCode::BAD_REQUEST,
                problem(
                    StatusCode::BAD_REQUEST,
                    "TransactionRequestIdempotencyKeyAlreadyExists",
                    "a transaction with this idempotency key already exists",
                ),
            )),
            Self::AlreadyReported => Some((StatusCode::ALREADY_REPORTED, json!({}))),
        }
    }

    /// What the service's adapter makes of that answer
    /// ([`chargeonce_connector::client::classify_status`], and a 2xx without a charge is
    /// unknown): the in-process simulator answers the engine with it, so
    /// both ways of running the simulator agree.
    pub fn error(self) -> Option<AcquirerError> {
        let (status, body) = self.answer()?;
        let seen = if status.is_success() {
            AcquirerError::Unknown(format!("acquirer answered {status} without a charge"))
        } else {
            chargeonce_connector::client::classify_status(status, &body.to_string())
        };
        let tagged = |reason: String| format!("{IN_FLIGHT_DUPLICATE}: {reason}");
        Some(match seen {
            AcquirerError::Rejected(reason) => AcquirerError::Rejected(tagged(reason)),
            AcquirerError::Unknown(reason) => AcquirerError::Unknown(tagged(reason)),
            AcquirerError::NotSent(reason) => AcquirerError::NotSent(tagged(reason)),
        })
    }
}

impl std::fmt::Display for InFlightDuplicate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = Self::ALL
            .iter()
            .find(|(_, mode)| mode == self)
            .map_or("wait", |(name, _)| name);
        f.write_str(name)
    }
}

impl FromStr for InFlightDuplicate {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .find(|(name, _)| *name == s)
            .map(|(_, mode)| *mode)
            .ok_or_else(|| format!("expected one of wait, 409, 422, 400, 208; got `{s}`"))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_reads_as_the_service_would_read_it() {
        let kind = |mode: InFlightDuplicate| match mode.error() {
            None => "none",
            Some(AcquirerError::Rejected(_)) => "refused",
            Some(AcquirerError::Unknown(_)) => "unknown",
            Some(AcquirerError::NotSent(_)) => "not_sent",
        };
        assert_eq!(kind(InFlightDuplicate::Wait), "none");
        assert_eq!(kind(InFlightDuplicate::Conflict), "unknown");
        assert_eq!(kind(InFlightDuplicate::BadRequest), "unknown");
        assert_eq!(kind(InFlightDuplicate::AlreadyReported), "unknown");
        assert_eq!(kind(InFlightDuplicate::Unprocessable), "refused");
        for (name, mode) in InFlightDuplicate::ALL {
            assert_eq!(name.parse::<InFlightDuplicate>(), Ok(mode));
            assert_eq!(serde_json::to_value(mode).unwrap(), json!(name));
        }
        assert!("418".parse::<InFlightDuplicate>().is_err());
    }
}
