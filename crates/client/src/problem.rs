//! The API's errors: RFC 9457 problem documents, typed by their stable `code`.

use std::fmt;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::Payment;

pub use chargeonce_wire::ProblemCode;

/// The `code` of a problem: one this version of the client knows (a
/// [`ProblemCode`], defined once in `chargeonce-wire`), or a code it does not
/// know yet. It compares equal to the [`ProblemCode`] it holds:
/// `problem.code == ProblemCode::NotFound`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Code {
    /// A code this client knows.
    Known(ProblemCode),
    /// A code this client does not know (a newer server's, or a proxy's).
    Unknown(String),
}

impl Code {
    /// Reads a `code` string with the status it came with (the status tells
    /// apart the 409 and the 422 of `payment_not_refundable`).
    pub fn parse(code: &str, status: u16) -> Self {
        match ProblemCode::parse(code, status) {
            Some(known) => Self::Known(known),
            None => Self::Unknown(code.to_owned()),
        }
    }

    /// The code, when this client knows it.
    pub fn known(&self) -> Option<ProblemCode> {
        match self {
            Self::Known(code) => Some(*code),
            Self::Unknown(_) => None,
        }
    }

    /// The code string, as sent.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Known(code) => code.as_str(),
            Self::Unknown(code) => code,
        }
    }
}

impl From<ProblemCode> for Code {
    fn from(code: ProblemCode) -> Self {
        Self::Known(code)
    }
}

impl PartialEq<ProblemCode> for Code {
    fn eq(&self, other: &ProblemCode) -> bool {
        self.known() == Some(*other)
    }
}

impl PartialEq<Code> for ProblemCode {
    fn eq(&self, other: &Code) -> bool {
        other == self
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `application/problem+json` answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// The stable code (a known [`ProblemCode`], or one this client does not know).
    pub code: Code,
    /// The HTTP status.
    pub status: u16,
    /// The problem type URI (`urn:chargeonce:problem:<code>`).
    pub problem_type: String,
    /// The short summary, the same for every occurrence of the code.
    pub title: String,
    /// What happened this time.
    pub detail: String,
    /// `payment_declined` and `acquirer_unavailable` carry the payment.
    pub payment: Option<Payment>,
    /// `payment_declined`: the acquirer's reason.
    pub decline_code: Option<String>,
    /// The field a validation problem is about, when it names one.
    pub field: Option<String>,
    /// Every member of the document, as sent.
    pub raw: Map<String, Value>,
}

impl Problem {
    /// Reads a problem document; `None` when the body is not a JSON object with
    /// a `code` (an answer from something other than the API, such as a proxy).
    pub fn from_body(http_status: u16, body: &[u8]) -> Option<Self> {
        let raw: Map<String, Value> = serde_json::from_slice(body).ok()?;
        let document = chargeonce_wire::Problem::deserialize(Value::Object(raw.clone())).ok()?;
        // A document without a status stands for the answer's.
        let status = match document.status {
            0 => http_status,
            status => status,
        };
        let text = |name: &str| {
            document
                .extensions
                .get(name)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        Some(Self {
            code: Code::parse(&document.code, status),
            status,
            payment: document
                .extensions
                .get("payment")
                .and_then(|p| Payment::deserialize(p).ok()),
            decline_code: text("decline_code"),
            field: text("field"),
            problem_type: document.problem_type,
            title: document.title,
            detail: document.detail,
            raw,
        })
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.status, self.code, self.title)?;
        if !self.detail.is_empty() {
            write!(f, " ({})", self.detail)?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips() {
        for &known in ProblemCode::ALL {
            let code = Code::parse(known.as_str(), known.status());
            assert_eq!(code, known);
            assert_eq!(code.as_str(), known.as_str());
        }
        assert_eq!(
            Code::parse("too_many_requests", 429),
            ProblemCode::TooManyRequests
        );
        assert_eq!(
            Code::parse("brand_new", 400),
            Code::Unknown("brand_new".into())
        );
        assert_ne!(Code::parse("brand_new", 400), ProblemCode::NotFound);
    }

    #[test]
    fn reads_a_problem_document() {
        let body = br#"{"type":"urn:chargeonce:problem:idempotency_key_reused","title":"T","status":422,"detail":"D","code":"idempotency_key_reused"}"#;
        let problem = Problem::from_body(422, body).unwrap();
        assert_eq!(problem.code, ProblemCode::IdempotencyKeyReused);
        assert_eq!(problem.status, 422);
        assert_eq!(problem.detail, "D");
        assert!(problem.payment.is_none());
        let pending = br#"{"status":409,"code":"payment_not_refundable","detail":"D"}"#;
        let pending = Problem::from_body(409, pending).unwrap();
        assert_eq!(pending.code, ProblemCode::PaymentNotYetRefundable);
        let odd = Problem::from_body(418, br#"{"code":"brand_new"}"#).unwrap();
        assert_eq!(odd.code, Code::Unknown("brand_new".into()));
        assert_eq!(odd.status, 418);
        assert!(Problem::from_body(502, b"<html>bad gateway</html>").is_none());
        assert!(Problem::from_body(404, br#"{"error":"x"}"#).is_none());
    }
}
