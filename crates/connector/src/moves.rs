//! Requests that move money on a charge the acquirer holds (a refund, a
//! capture, a void) and the reading of their answers. A refusal is definite
//! (nothing moved) only when its status and code are a row of the move's
//! table below; every other answer is classified as any answer is
//! ([`classify_status`]).
//!
//! | move | definite refusals (status, code) |
//! |---|---|
//! | refund | 404 `not_found`, 409 `charge_declined`, 422 `refund_exceeds_charge` |
//! | capture | 404 `not_found`, 409 `charge_not_capturable`, `authorization_voided`, `authorization_closed`, 422 `capture_exceeds_authorization` |
//! | void | 404 `not_found`, 409 `charge_not_capturable`, `authorization_voided`, `nothing_to_void` |
//!
//! A 2xx is trusted only as far as it proves: the refund, capture or void
//! it carries must be of the charge and the amount asked for, else the
//! outcome is unknown.

use chargeonce_core::{
    AcquirerCapture, AcquirerError, CaptureRequest, CaptureSettlement, RefundRequest,
    RefundSettlement, VoidRequest, VoidSettlement,
};
use reqwest::StatusCode;

use crate::answers::{CaptureJson, CaptureListJson, RefundJson, VoidJson, unreadable};
use crate::client::{HttpAcquirer, classify_status, classify_transport};
use crate::protocol::{
    AUTHORIZATION_CLOSED, AUTHORIZATION_VOIDED, CAPTURE_EXCEEDS_AUTHORIZATION,
    CHARGE_NOT_CAPTURABLE, IDEMPOTENCY_KEY, NOTHING_TO_VOID, REFUND_CHARGE_DECLINED,
    REFUND_EXCEEDS_CHARGE, REFUND_NO_SUCH_CHARGE,
};

/// A definite refusal: the status, the code the acquirer sends, the code
/// the engine is given.
type Refusal = (u16, &'static str, &'static str);

/// The definite refusals of a refund.
const REFUND_REFUSALS: &[Refusal] = &[
    (404, "not_found", REFUND_NO_SUCH_CHARGE),
    (409, "charge_declined", REFUND_CHARGE_DECLINED),
    (422, REFUND_EXCEEDS_CHARGE, REFUND_EXCEEDS_CHARGE),
];

/// The definite refusals of a capture.
const CAPTURE_REFUSALS: &[Refusal] = &[
    (404, "not_found", REFUND_NO_SUCH_CHARGE),
    (409, CHARGE_NOT_CAPTURABLE, CHARGE_NOT_CAPTURABLE),
    (409, AUTHORIZATION_VOIDED, AUTHORIZATION_VOIDED),
    (409, AUTHORIZATION_CLOSED, AUTHORIZATION_CLOSED),
    (
        422,
        CAPTURE_EXCEEDS_AUTHORIZATION,
        CAPTURE_EXCEEDS_AUTHORIZATION,
    ),
];

/// The definite refusals of a void.
const VOID_REFUSALS: &[Refusal] = &[
    (404, "not_found", REFUND_NO_SUCH_CHARGE),
    (409, CHARGE_NOT_CAPTURABLE, CHARGE_NOT_CAPTURABLE),
    (409, AUTHORIZATION_VOIDED, AUTHORIZATION_VOIDED),
    (409, NOTHING_TO_VOID, NOTHING_TO_VOID),
];

/// What a move's request came back with.
enum Answer {
    /// A 2xx and its body.
    Done(Vec<u8>),
    /// A definite refusal: the engine's code for it.
    Refused(&'static str),
}

/// The engine's code of a definite refusal in `table`, if the answer is one.
fn definite(status: StatusCode, body: &[u8], table: &[Refusal]) -> Option<&'static str> {
    let code = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["code"].as_str().map(str::to_owned))?;
    table
        .iter()
        .find(|(s, sent, _)| *s == status.as_u16() && *sent == code)
        .map(|(_, _, ours)| *ours)
}

impl HttpAcquirer {
    /// Posts a move under `key`: its 2xx body, a definite refusal of
    /// `table`, or the classified error.
    async fn send_move(
        &self,
        path: &str,
        key: &str,
        body: serde_json::Value,
        table: &[Refusal],
    ) -> Result<Answer, AcquirerError> {
        let call = self
            .http
            .post(self.url(path)?)
            .header(IDEMPOTENCY_KEY, key)
            .json(&body);
        let response = call.send().await.map_err(|e| classify_transport(&e))?;
        let status = response.status();
        let answer = response.bytes().await.map_err(|e| {
            AcquirerError::Unknown(format!("acquirer answer broke off ({status}): {e}"))
        })?;
        if status.is_success() {
            return Ok(Answer::Done(answer.to_vec()));
        }
        match definite(status, &answer, table) {
            Some(code) => Ok(Answer::Refused(code)),
            None => Err(classify_status(status, &String::from_utf8_lossy(&answer))),
        }
    }

    /// [`chargeonce_core::Acquirer::refund_payment`] over HTTP.
    pub(crate) async fn refund_move(
        &self,
        request: &RefundRequest,
    ) -> Result<RefundSettlement, AcquirerError> {
        let body = serde_json::json!({
            "amount_minor": request.amount.minor_units(),
            "token": request.token.as_str(),
            "reference": request.refund_id.as_str(),
        });
        let path = format!("v1/charges/{}/refunds", request.charge_id);
        let key = request.acquirer_key.as_str();
        let refund: RefundJson = match self.send_move(&path, key, body, REFUND_REFUSALS).await? {
            Answer::Refused(code) => return Ok(RefundSettlement::Failed { code: code.into() }),
            Answer::Done(answer) => serde_json::from_slice(&answer).map_err(unreadable)?,
        };
        if refund.amount_minor != request.amount.minor_units() {
            return Err(unreadable("the refund answered is not the one asked for"));
        }
        Ok(RefundSettlement::Succeeded {
            provider_refund_id: refund.id,
        })
    }

    /// [`chargeonce_core::Acquirer::capture`] over HTTP.
    pub(crate) async fn capture_move(
        &self,
        request: &CaptureRequest,
    ) -> Result<CaptureSettlement, AcquirerError> {
        let body = serde_json::json!({
            "amount_minor": request.amount.minor_units(),
            "final": request.last,
            "token": request.token.as_str(),
            "reference": request.capture_id.as_str(),
        });
        let path = format!("v1/charges/{}/captures", request.charge_id);
        let key = request.acquirer_key.as_str();
        let capture: CaptureJson = match self.send_move(&path, key, body, CAPTURE_REFUSALS).await? {
            Answer::Refused(code) => return Ok(CaptureSettlement::Failed { code: code.into() }),
            Answer::Done(answer) => serde_json::from_slice(&answer).map_err(unreadable)?,
        };
        let capture = capture.into_capture()?;
        if capture.charge_id != request.charge_id || capture.amount != request.amount {
            return Err(unreadable("the capture answered is not the one asked for"));
        }
        Ok(CaptureSettlement::Succeeded {
            provider_capture_id: capture.id,
        })
    }

    /// [`chargeonce_core::Acquirer::void`] over HTTP.
    pub(crate) async fn void_move(
        &self,
        request: &VoidRequest,
    ) -> Result<VoidSettlement, AcquirerError> {
        let body = serde_json::json!({ "token": request.token.as_str() });
        let path = format!("v1/charges/{}/void", request.charge_id);
        let key = request.acquirer_key.as_str();
        let void: VoidJson = match self.send_move(&path, key, body, VOID_REFUSALS).await? {
            Answer::Refused(code) => return Ok(VoidSettlement::Failed { code: code.into() }),
            Answer::Done(answer) => serde_json::from_slice(&answer).map_err(unreadable)?,
        };
        if void.charge_id != request.charge_id {
            return Err(unreadable(
                "the void answered is not of the charge asked for",
            ));
        }
        Ok(VoidSettlement::Succeeded {
            released: void.released()?,
            provider_void_id: void.id,
        })
    }

    /// [`chargeonce_core::Acquirer::captures_for_capture`] over HTTP.
    pub(crate) async fn captures_of(
        &self,
        request: &CaptureRequest,
    ) -> Result<Vec<AcquirerCapture>, AcquirerError> {
        let mut url = self.url(&format!("v1/charges/{}/captures", request.charge_id))?;
        url.query_pairs_mut()
            .append_pair("reference", request.capture_id.as_str());
        let body = self.send(self.http.get(url)).await?;
        let list: CaptureListJson = serde_json::from_slice(&body).map_err(unreadable)?;
        list.data
            .into_iter()
            .map(CaptureJson::into_capture)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(status: u16, body: &str, table: &[Refusal]) -> Option<&'static str> {
        definite(
            StatusCode::from_u16(status).unwrap_or(StatusCode::IM_A_TEAPOT),
            body.as_bytes(),
            table,
        )
    }

    #[test]
    fn only_a_listed_status_and_code_is_a_definite_refusal() {
        let closed = format!(r#"{{"code":"{AUTHORIZATION_CLOSED}"}}"#);
        assert_eq!(
            refused(409, &closed, CAPTURE_REFUSALS),
            Some(AUTHORIZATION_CLOSED)
        );
        // The same code under another status, or for another move, proves
        // nothing: a void is not refused as `authorization_closed`.
        assert_eq!(refused(500, &closed, CAPTURE_REFUSALS), None);
        assert_eq!(refused(409, &closed, VOID_REFUSALS), None);
        assert_eq!(
            refused(404, r#"{"code":"not_found"}"#, VOID_REFUSALS),
            Some(REFUND_NO_SUCH_CHARGE)
        );
        // A 404 without the acquirer's code may be our URL: not definite.
        assert_eq!(refused(404, "", CAPTURE_REFUSALS), None);
        assert_eq!(
            refused(409, r#"{"code":"request_in_progress"}"#, CAPTURE_REFUSALS),
            None
        );
        let over = format!(r#"{{"code":"{CAPTURE_EXCEEDS_AUTHORIZATION}"}}"#);
        assert_eq!(
            refused(422, &over, CAPTURE_REFUSALS),
            Some(CAPTURE_EXCEEDS_AUTHORIZATION)
        );
        assert_eq!(refused(422, &over, REFUND_REFUSALS), None);
    }
}
