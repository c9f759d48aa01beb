//! The RFC 9457 problem document (`application/problem+json`) of every
//! error answer.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ProblemCode;

/// The media type of every error answer.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// What every problem `type` URI starts with; the code follows.
pub const PROBLEM_TYPE_PREFIX: &str = "urn:chargeonce:problem:";

/// One error answer: RFC 9457 members, the stable `code`, and extension
/// members of the code (`payment`, `refund`, `decline_code`, `field`, ...).
///
/// The server sends its members sorted by name (it builds the document as a
/// `serde_json::Value`, whose maps are sorted); the order carries no meaning.
/// A reader takes members it does not know into [`Self::extensions`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(example = json!({
        "type": "urn:chargeonce:problem:idempotency_key_reused",
        "title": "This Idempotency-Key was used for a different request",
        "status": 422,
        "detail": "this key was first used with another method, path or body; nothing was executed. Use a new key for a new operation",
        "code": "idempotency_key_reused"
    }))
)]
pub struct Problem {
    /// The problem type URI: `urn:chargeonce:problem:<code>`.
    #[serde(rename = "type", default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub problem_type: String,
    /// A short summary, the same for every occurrence of the code.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub title: String,
    /// The HTTP status of the answer.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true, example = 422))]
    pub status: u16,
    /// What happened this time, for a human.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub detail: String,
    /// The stable code to switch on ([`ProblemCode`]; read it with
    /// [`Problem::known_code`]). Clients must expect codes they do not know.
    #[cfg_attr(feature = "openapi", schema(value_type = ProblemCode))]
    pub code: String,
    /// The id of the request, for support, when the server gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The code's extension members (`payment` and `decline_code` of
    /// `payment_declined`, `refund` and `failure_code` of `refund_failed`,
    /// `field` of a validation problem, `available_minor`, ...).
    #[serde(flatten)]
    pub extensions: Map<String, Value>,
}

impl Problem {
    /// The document of `code` answered with its own status, with a detail
    /// sentence for this occurrence and no extensions.
    pub fn new(code: ProblemCode, detail: impl Into<String>) -> Self {
        Self::with_status(code, code.status(), detail)
    }

    /// The document of `code` answered with `status` (another than its own
    /// only for [`ProblemCode::HttpError`] and the HTTP stack's refusals).
    pub fn with_status(code: ProblemCode, status: u16, detail: impl Into<String>) -> Self {
        Self {
            problem_type: code.type_uri(),
            title: code.title().to_owned(),
            status,
            detail: detail.into(),
            code: code.as_str().to_owned(),
            request_id: None,
            extensions: Map::new(),
        }
    }

    /// The code, when this version knows it.
    pub fn known_code(&self) -> Option<ProblemCode> {
        ProblemCode::parse(&self.code, self.status)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_a_document_with_extensions() {
        let body = r#"{"type":"urn:chargeonce:problem:payment_declined","title":"The payment was declined","status":402,"detail":"D","code":"payment_declined","decline_code":"card_declined"}"#;
        let problem: Problem = serde_json::from_str(body).unwrap();
        assert_eq!(problem.known_code(), Some(ProblemCode::PaymentDeclined));
        assert_eq!(problem.extensions["decline_code"], "card_declined");
        assert_eq!(problem.request_id, None);
        assert_eq!(serde_json::to_string(&problem).unwrap(), body);

        let mut made = Problem::new(ProblemCode::PaymentDeclined, "D");
        made.extensions
            .insert("decline_code".into(), "card_declined".into());
        assert_eq!(made, problem);
        made.request_id = Some("req_1".into());
        let value = serde_json::to_value(&made).unwrap();
        assert_eq!(value["request_id"], "req_1");
    }

    #[test]
    fn an_unknown_code_is_kept() {
        let problem: Problem =
            serde_json::from_str(r#"{"status":418,"code":"brand_new"}"#).unwrap();
        assert_eq!(problem.known_code(), None);
        assert_eq!(problem.code, "brand_new");
        assert!(serde_json::from_str::<Problem>(r#"{"error":"x"}"#).is_err());
    }
}
