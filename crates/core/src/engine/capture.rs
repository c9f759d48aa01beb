//! Captures: the claim of a capture key (phase 1, which reserves the
//! capture's amount on its payment's hold), then the acquirer's capture call
//! under the capture's own acquirer key and the fenced finish, the same way
//! as a refund.
//!
//! The key is looked up before any rule about the payment: the retry of the
//! capture that used the authorization up gets that capture, never
//! "exceeds capturable". Two refusals are a capture's own ambiguity (see
//! `Capturing::refused_on_resend`).

use std::time::Duration;

use super::send::{Movement, rejected_look_up};
use super::{Engine, EngineError, Holder, Outcome, Rendered};
use crate::acquirer::{AUTHORIZATION_CLOSED, CAPTURE_EXCEEDS_AUTHORIZATION, REJECTED};

/// The capture refusals a resend alone makes ambiguous (see
/// [`Capturing::refused_on_resend`]).
const AMBIGUOUS_ON_RESEND: [&str; 2] = [CAPTURE_EXCEEDS_AUTHORIZATION, AUTHORIZATION_CLOSED];
use crate::history::AcquirerAttempt;
use crate::observe::{AcquirerCall, AcquirerOutcomeKind};
use crate::{
    Acquirer, AcquirerError, Capture, CaptureClaim, CaptureRequest, CaptureSettlement,
    CaptureStatus, ClaimRequest, FinishOutcome, Lease, NewCapture, Payment, PaymentId, ShopId,
    StoreError, StoredResponse,
};

impl Engine {
    /// Captures (part of) an authorized payment under an idempotency key,
    /// or answers as the key's first request did.
    pub async fn capture(
        &self,
        claim: ClaimRequest,
        capture: NewCapture,
    ) -> Result<Outcome, EngineError> {
        let result = self.capture_inner(claim, capture).await;
        self.observe_error(&result, "capture");
        result
    }

    async fn capture_inner(
        &self,
        claim: ClaimRequest,
        capture: NewCapture,
    ) -> Result<Outcome, EngineError> {
        match self
            .store
            .claim_capture(&claim, &capture, self.config.timing)
            .await?
        {
            CaptureClaim::Acquired(acquired) => {
                tracing::debug!(key = %acquired.lease.key, payment = %acquired.payment.id, "capture key claimed");
                self.observer.claimed();
                self.drive(acquired, Holder::Claimant).await
            }
            CaptureClaim::Exists(record) => Ok(self
                .on_existing(&claim, record, None)
                .await?
                .unwrap_or_else(|| self.in_progress())),
            CaptureClaim::Refused(reason) => Ok(Outcome::CaptureRefused(reason)),
        }
    }

    /// Phases 2 and 3 of a held capture key.
    pub(super) async fn drive_capture(
        &self,
        lease: Lease,
        payment: Payment,
        capture: Capture,
        holder: Holder,
    ) -> Result<Outcome, EngineError> {
        if capture.status.is_final() {
            let response = self.render_capture(&capture);
            return self.finish_capture(&lease, None, response, &[]).await;
        }
        let capturing = Capturing::of(&payment, capture)?;
        self.send_and_finish(capturing, &lease, holder, None).await
    }

    /// Phase 3 of a capture key (`settled`: the capture's settlement, if
    /// this request got one from the acquirer). Nobody but the capture's
    /// key settles it, so one found settled was settled by an earlier
    /// holder whose finish was cut: answered from as stored.
    async fn finish_capture(
        &self,
        lease: &Lease,
        settled: Option<(&Capture, &CaptureSettlement)>,
        response: StoredResponse,
        attempts: &[AcquirerAttempt],
    ) -> Result<Outcome, EngineError> {
        let ttl = self.config.timing.ttl;
        let finished = self
            .store
            .finish_capture(lease, settled, &response, ttl, attempts)
            .await?;
        if finished != FinishOutcome::PaymentAlreadySettled {
            return Ok(self
                .stored_or_lost(lease, finished, response, attempts)
                .await);
        }
        let Some((capture, _)) = settled else {
            return Err(super::finish::settled_without_settlement(lease, "capture"));
        };
        let stored = self.store.capture(&capture.shop_id, &capture.id).await?;
        let stored = stored.ok_or_else(|| super::finish::vanished("capture", &capture.id))?;
        let response = self.render_capture(&stored);
        let finished = self
            .store
            .finish_capture(lease, None, &response, ttl, attempts)
            .await?;
        Ok(self
            .stored_or_lost(lease, finished, response, attempts)
            .await)
    }

    /// The answer of this key's own settled capture.
    fn render_capture(&self, capture: &Capture) -> StoredResponse {
        match capture.status {
            CaptureStatus::Failed => self.render.render(Rendered::CaptureFailed(capture)),
            _ => self.render.render(Rendered::Captured(capture)),
        }
    }
}

/// The acquirer call of a pending capture.
struct Capturing {
    capture: Capture,
    request: CaptureRequest,
}

impl Capturing {
    fn of(payment: &Payment, capture: Capture) -> Result<Self, StoreError> {
        let charge_id = payment.provider_payment_id.clone().ok_or_else(|| {
            StoreError::corrupt(format!(
                "capture {} of payment {} without an authorization id",
                capture.id, payment.id
            ))
        })?;
        let request = CaptureRequest {
            acquirer_key: capture.acquirer_key.clone(),
            shop_id: capture.shop_id.clone(),
            payment_id: capture.payment_id.clone(),
            capture_id: capture.id.clone(),
            charge_id,
            amount: capture.amount,
            last: capture.last,
            token: payment.token.clone(),
        };
        Ok(Self { capture, request })
    }
}

impl Movement for Capturing {
    type Answer = CaptureSettlement;
    type Settlement = CaptureSettlement;
    const CALL: AcquirerCall = AcquirerCall::Capture;
    const RESUMED: &'static str = "a resumed capture";

    fn acquirer_key(&self) -> &str {
        self.request.acquirer_key.as_str()
    }

    fn payment(&self) -> (&ShopId, &PaymentId) {
        (&self.request.shop_id, &self.request.payment_id)
    }

    async fn send(&self, acquirer: &dyn Acquirer) -> Result<CaptureSettlement, AcquirerError> {
        acquirer.capture(&self.request).await
    }

    /// Our capture, by its reference (the capture id).
    async fn look_up(
        &self,
        acquirer: &dyn Acquirer,
    ) -> Result<Option<CaptureSettlement>, AcquirerError> {
        let request = &self.request;
        let found = acquirer
            .captures_for_capture(request)
            .await
            .map_err(rejected_look_up)?;
        match found.into_iter().next() {
            Some(capture) if capture.amount != request.amount => {
                tracing::error!(capture = %request.capture_id, provider_capture = %capture.id, "the acquirer's capture for this capture is for another amount; not applied");
                Err(AcquirerError::Unknown(
                    "the capture found has another amount".to_owned(),
                ))
            }
            found => Ok(found.map(|capture| CaptureSettlement::Succeeded {
                provider_capture_id: capture.id,
            })),
        }
    }

    fn kind(answer: &CaptureSettlement) -> AcquirerOutcomeKind {
        match answer {
            CaptureSettlement::Succeeded { .. } => AcquirerOutcomeKind::Succeeded,
            CaptureSettlement::Failed { .. } => AcquirerOutcomeKind::Declined,
        }
    }

    fn settlement(answer: CaptureSettlement) -> CaptureSettlement {
        answer
    }

    /// A refusal confirmed: failed with the refusal's code when it is one
    /// of [`Capturing::refused_on_resend`]'s, `rejected` otherwise.
    fn rejected(refusal: &str) -> CaptureSettlement {
        let code = if AMBIGUOUS_ON_RESEND.contains(&refusal) {
            refusal
        } else {
            REJECTED
        };
        CaptureSettlement::Failed {
            code: code.to_owned(),
        }
    }

    /// "Exceeds the authorization" or "closed" for a capture sent again to
    /// an acquirer that ignores keys: the attempt resumed may be what used
    /// the authorization up, though the look-up did not show it. Confirmed
    /// by the resend rule (a look-up after the settle window) before the
    /// capture fails and gives its reservation back; other refusals are
    /// definite.
    fn refused_on_resend(answer: &CaptureSettlement) -> Option<&str> {
        match answer {
            CaptureSettlement::Failed { code } if AMBIGUOUS_ON_RESEND.contains(&code.as_str()) => {
                Some(code)
            }
            _ => None,
        }
    }

    fn log_found(&self, lease: &Lease, found: &CaptureSettlement) {
        if let CaptureSettlement::Succeeded {
            provider_capture_id,
        } = found
        {
            tracing::info!(key = %lease.key, capture = %self.capture.id, provider_capture = %provider_capture_id, "capture found by reference; not sent again");
        }
    }

    fn log_refused(&self, lease: &Lease, holder: Holder, reason: &str) {
        match holder {
            Holder::Claimant => tracing::warn!(%reason, "the acquirer refused the capture"),
            Holder::Resumer => {
                tracing::warn!(key = %lease.key, capture = %self.capture.id, %reason, "the acquirer refused a resumed capture");
            }
        }
    }

    fn log_not_sent(&self, lease: &Lease, reason: &str) {
        tracing::warn!(key = %lease.key, capture = %self.capture.id, %reason, "acquirer unreachable; capture not sent");
    }

    fn log_unknown(&self, lease: &Lease, reason: &str) {
        tracing::warn!(key = %lease.key, capture = %self.capture.id, %reason, "acquirer capture outcome unknown; capture stays pending");
    }

    async fn finish(
        self,
        engine: &Engine,
        lease: &Lease,
        settlement: CaptureSettlement,
        attempts: &[AcquirerAttempt],
    ) -> Result<Outcome, EngineError> {
        let settled = self.capture.settled(&settlement);
        let response = engine.render_capture(&settled);
        engine
            .finish_capture(lease, Some((&settled, &settlement)), response, attempts)
            .await
    }

    fn unavailable(self, retry_after: Duration, resumed: bool) -> Outcome {
        Outcome::CaptureAcquirerUnavailable {
            capture: self.capture,
            retry_after,
            resumed,
        }
    }

    fn pending(self, retry_after: Duration) -> Outcome {
        Outcome::CapturePending {
            capture: self.capture,
            retry_after,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(code: &str) -> CaptureSettlement {
        CaptureSettlement::Failed {
            code: code.to_owned(),
        }
    }

    #[test]
    fn using_the_authorization_up_is_a_refusal_to_confirm_on_a_resend() {
        for code in [CAPTURE_EXCEEDS_AUTHORIZATION, AUTHORIZATION_CLOSED] {
            assert_eq!(Capturing::refused_on_resend(&failed(code)), Some(code));
            assert_eq!(
                Capturing::rejected(code),
                failed(code),
                "confirmed: its code"
            );
        }
        let voided = failed(crate::acquirer::AUTHORIZATION_VOIDED);
        assert_eq!(Capturing::refused_on_resend(&voided), None);
        let done = CaptureSettlement::Succeeded {
            provider_capture_id: "cp_1".to_owned(),
        };
        assert_eq!(Capturing::refused_on_resend(&done), None);
        assert_eq!(
            Capturing::rejected("400 Bad Request: amount"),
            failed(REJECTED),
            "a refusal's text is not a code"
        );
    }
}
