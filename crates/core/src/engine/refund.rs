//! Refunds: the claim of a refund key (phase 1), then the acquirer's refund
//! call under the refund's own acquirer key (the acquirer is idempotent on
//! it, so a resumed call never refunds twice) and the fenced finish.
//!
//! The key is looked up before any rule about the payment: the retry of a
//! refund that used the payment up gets that refund, never "exceeds amount".
//! One refusal is a refund's own ambiguity (see `Refunding::refused_on_resend`).

use std::time::Duration;

use super::send::{Movement, rejected_look_up};
use super::{Engine, EngineError, Holder, Outcome};
use crate::acquirer::{REFUND_EXCEEDS_CHARGE, REJECTED};
use crate::history::AcquirerAttempt;
use crate::observe::{AcquirerCall, AcquirerOutcomeKind};
use crate::{
    Acquirer, AcquirerError, ClaimRequest, Lease, NewRefund, Payment, PaymentId, Refund,
    RefundAnswer, RefundClaim, RefundRequest, RefundSettlement, ShopId, StoreError,
};

impl Engine {
    /// Refunds (part of) a payment under an idempotency key, or answers as
    /// the key's first request did. The key is looked up before any rule
    /// about the payment: the retry of a refund that used the payment up gets
    /// that refund, never "exceeds amount".
    pub async fn refund(
        &self,
        claim: ClaimRequest,
        refund: NewRefund,
    ) -> Result<Outcome, EngineError> {
        let result = self.refund_inner(claim, refund).await;
        self.observe_error(&result, "refund");
        result
    }

    async fn refund_inner(
        &self,
        claim: ClaimRequest,
        refund: NewRefund,
    ) -> Result<Outcome, EngineError> {
        match self
            .store
            .claim_refund(&claim, &refund, self.config.timing)
            .await?
        {
            RefundClaim::Acquired(acquired) => {
                tracing::debug!(key = %acquired.lease.key, payment = %acquired.payment.id, "refund key claimed");
                self.observer.claimed();
                self.drive(acquired, Holder::Claimant).await
            }
            // `None`: only payment keys link to an order's payment, so this
            // does not happen; answered as a key in use.
            RefundClaim::Exists(record) => Ok(self
                .on_existing(&claim, record, None)
                .await?
                .unwrap_or_else(|| self.in_progress())),
            RefundClaim::Refused(reason) => Ok(Outcome::RefundRefused(reason)),
        }
    }

    /// Phases 2 and 3 of a held refund key.
    pub(super) async fn drive_refund(
        &self,
        lease: Lease,
        payment: Payment,
        refund: Refund,
        holder: Holder,
    ) -> Result<Outcome, EngineError> {
        if refund.status.is_final() {
            let response = self.render_refund(&refund);
            return self.finish_refund(&lease, None, response, &[]).await;
        }
        let refunding = Refunding::of(&payment, refund)?;
        self.send_and_finish(refunding, &lease, holder, None).await
    }
}

/// The acquirer call of a pending refund.
struct Refunding {
    refund: Refund,
    request: RefundRequest,
    /// The payment's order, for the refund's merchant event.
    reference: String,
}

impl Refunding {
    fn of(payment: &Payment, refund: Refund) -> Result<Self, StoreError> {
        let charge_id = payment.provider_payment_id.clone().ok_or_else(|| {
            StoreError::corrupt(format!(
                "refund {} of payment {} without a charge id",
                refund.id, payment.id
            ))
        })?;
        let request = RefundRequest {
            acquirer_key: refund.acquirer_key.clone(),
            shop_id: refund.shop_id.clone(),
            payment_id: refund.payment_id.clone(),
            refund_id: refund.id.clone(),
            charge_id,
            amount: refund.amount,
            token: payment.token.clone(),
        };
        Ok(Self {
            refund,
            request,
            reference: payment.reference.as_str().to_owned(),
        })
    }
}

impl Movement for Refunding {
    type Answer = RefundSettlement;
    type Settlement = RefundSettlement;
    const CALL: AcquirerCall = AcquirerCall::Refund;
    const RESUMED: &'static str = "a resumed refund";

    fn acquirer_key(&self) -> &str {
        self.request.acquirer_key.as_str()
    }

    fn payment(&self) -> (&ShopId, &PaymentId) {
        (&self.request.shop_id, &self.request.payment_id)
    }

    async fn send(&self, acquirer: &dyn Acquirer) -> Result<RefundSettlement, AcquirerError> {
        acquirer.refund_payment(&self.request).await
    }

    /// Our refund, by its reference (the refund id).
    async fn look_up(
        &self,
        acquirer: &dyn Acquirer,
    ) -> Result<Option<RefundSettlement>, AcquirerError> {
        let request = &self.request;
        let found = acquirer
            .refunds_for_refund(request)
            .await
            .map_err(rejected_look_up)?;
        match found.into_iter().next() {
            Some(refund) if refund.amount != request.amount => {
                tracing::error!(refund = %request.refund_id, provider_refund = %refund.id, "the acquirer's refund for this refund is for another amount; not applied");
                Err(AcquirerError::Unknown(
                    "the refund found has another amount".to_owned(),
                ))
            }
            found => Ok(found.map(|refund| RefundSettlement::Succeeded {
                provider_refund_id: refund.id,
            })),
        }
    }

    fn kind(answer: &RefundSettlement) -> AcquirerOutcomeKind {
        match answer {
            RefundSettlement::Succeeded { .. } => AcquirerOutcomeKind::Succeeded,
            RefundSettlement::Failed { .. } => AcquirerOutcomeKind::Declined,
        }
    }

    fn settlement(answer: RefundSettlement) -> RefundSettlement {
        answer
    }

    /// A refusal confirmed: failed with `refund_exceeds_charge` when that
    /// was the refusal, `rejected` otherwise.
    fn rejected(refusal: &str) -> RefundSettlement {
        let code = if refusal == REFUND_EXCEEDS_CHARGE {
            refusal
        } else {
            REJECTED
        };
        RefundSettlement::Failed {
            code: code.to_owned(),
        }
    }

    /// "Exceeds what is left of the charge" for a refund sent again to an
    /// acquirer that ignores keys: the attempt resumed may be what used the
    /// charge up, though the look-up did not show it. Confirmed by the
    /// resend rule (a look-up after the settle window) before the refund
    /// fails and frees its reservation; other refusals are definite.
    fn refused_on_resend(answer: &RefundSettlement) -> Option<&str> {
        match answer {
            RefundSettlement::Failed { code } if code == REFUND_EXCEEDS_CHARGE => Some(code),
            _ => None,
        }
    }

    fn log_found(&self, lease: &Lease, found: &RefundSettlement) {
        if let RefundSettlement::Succeeded { provider_refund_id } = found {
            tracing::info!(key = %lease.key, refund = %self.refund.id, provider_refund = %provider_refund_id, "refund found by reference; not sent again");
        }
    }

    fn log_refused(&self, lease: &Lease, holder: Holder, reason: &str) {
        match holder {
            Holder::Claimant => tracing::warn!(%reason, "the acquirer refused the refund"),
            Holder::Resumer => {
                tracing::warn!(key = %lease.key, refund = %self.request.refund_id, %reason, "the acquirer refused a resumed refund");
            }
        }
    }

    fn log_not_sent(&self, lease: &Lease, reason: &str) {
        tracing::warn!(key = %lease.key, refund = %self.refund.id, %reason, "acquirer unreachable; refund not sent");
    }

    fn log_unknown(&self, lease: &Lease, reason: &str) {
        tracing::warn!(key = %lease.key, refund = %self.refund.id, %reason, "acquirer refund outcome unknown; refund stays pending");
    }

    async fn finish(
        self,
        engine: &Engine,
        lease: &Lease,
        settlement: RefundSettlement,
        attempts: &[AcquirerAttempt],
    ) -> Result<Outcome, EngineError> {
        let answer = RefundAnswer {
            refund: &self.refund,
            reference: &self.reference,
            settlement: &settlement,
        };
        let response = engine.render_refund(&answer.settled());
        engine
            .finish_refund(lease, Some(answer), response, attempts)
            .await
    }

    fn unavailable(self, retry_after: Duration, resumed: bool) -> Outcome {
        Outcome::RefundAcquirerUnavailable {
            refund: self.refund,
            retry_after,
            resumed,
        }
    }

    fn pending(self, retry_after: Duration) -> Outcome {
        Outcome::RefundPending {
            refund: self.refund,
            retry_after,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(code: &str) -> RefundSettlement {
        RefundSettlement::Failed {
            code: code.to_owned(),
        }
    }

    #[test]
    fn exceeding_the_charge_is_a_refusal_to_confirm_on_a_resend() {
        let exceeds = failed(REFUND_EXCEEDS_CHARGE);
        assert_eq!(
            Refunding::refused_on_resend(&exceeds),
            Some(REFUND_EXCEEDS_CHARGE)
        );
        assert_eq!(Refunding::rejected(REFUND_EXCEEDS_CHARGE), exceeds);
        assert_eq!(Refunding::refused_on_resend(&failed(REJECTED)), None);
        assert_eq!(Refunding::rejected("422: bad amount"), failed(REJECTED));
        let done = RefundSettlement::Succeeded {
            provider_refund_id: "re_1".to_owned(),
        };
        assert_eq!(Refunding::refused_on_resend(&done), None);
    }
}
