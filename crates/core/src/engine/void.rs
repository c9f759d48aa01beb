//! Voids: the claim of a void key (which moves its payment's hold to
//! releasing, so no capture is accepted while the void is in flight), then
//! the acquirer's void call under the authorization's void key (one release
//! per authorization: [`AcquirerKey::for_void`](crate::AcquirerKey::for_void))
//! and the fenced finish that releases the hold, or opens it again when the
//! acquirer refused.
//!
//! The acquirer lists no voids to look one up by: a void is sent again
//! under its key, and the one refusal a resend makes ambiguous
//! (`authorization_voided`: the attempt resumed may be what voided it) is
//! unknown, never a failure that would open the hold again.

use std::time::Duration;

use super::send::Movement;
use super::{Engine, EngineError, Holder, Outcome, Rendered};
use crate::acquirer::{AUTHORIZATION_VOIDED, REJECTED};
use crate::authorization::{Hold, ReleaseReason};
use crate::history::AcquirerAttempt;
use crate::observe::{AcquirerCall, AcquirerOutcomeKind};
use crate::{
    Acquirer, AcquirerError, AcquirerKey, ClaimRequest, FinishOutcome, Lease, Payment, PaymentId,
    ReleaseClaim, ShopId, StoreError, StoredResponse, VoidRequest, VoidSettlement,
};

impl Engine {
    /// Voids what is left of an authorized payment under an idempotency
    /// key, or answers as the key's first request did.
    pub async fn void(
        &self,
        claim: ClaimRequest,
        payment_id: PaymentId,
    ) -> Result<Outcome, EngineError> {
        let result = self.void_inner(claim, payment_id).await;
        self.observe_error(&result, "void");
        result
    }

    async fn void_inner(
        &self,
        claim: ClaimRequest,
        payment_id: PaymentId,
    ) -> Result<Outcome, EngineError> {
        match self
            .store
            .claim_void(&claim, &payment_id, self.config.timing)
            .await?
        {
            ReleaseClaim::Acquired(acquired) => {
                tracing::debug!(key = %acquired.lease.key, payment = %acquired.payment.id, "void key claimed");
                self.observer.claimed();
                self.drive(acquired, Holder::Claimant).await
            }
            ReleaseClaim::Exists(record) => Ok(self
                .on_existing(&claim, record, None)
                .await?
                .unwrap_or_else(|| self.in_progress())),
            ReleaseClaim::Refused(reason) => Ok(Outcome::VoidRefused(reason)),
        }
    }

    /// Phases 2 and 3 of a held void key. A hold no longer releasing for
    /// the void was settled by an earlier holder of the key whose answer
    /// was not stored: answered from the payment as stored.
    pub(super) async fn drive_void(
        &self,
        lease: Lease,
        payment: Payment,
        holder: Holder,
    ) -> Result<Outcome, EngineError> {
        let releasing = payment
            .authorization()
            .is_some_and(|hold| hold.hold() == Hold::Releasing(ReleaseReason::Void));
        if !releasing {
            let response = self.render_void(&payment, None);
            return self.finish_void(&lease, None, response, &[]).await;
        }
        let voiding = Voiding::of(payment)?;
        self.send_and_finish(voiding, &lease, holder, None).await
    }

    /// Phase 3 of a void key (`settled`: the payment as the void's answer
    /// leaves it, and the answer, if this request got one).
    async fn finish_void(
        &self,
        lease: &Lease,
        settled: Option<(&Payment, &VoidSettlement)>,
        response: StoredResponse,
        attempts: &[AcquirerAttempt],
    ) -> Result<Outcome, EngineError> {
        let ttl = self.config.timing.ttl;
        let settlement = settled.map(|(payment, settlement)| (&payment.id, settlement));
        let finished = self
            .store
            .finish_void(lease, settlement, &response, ttl, attempts)
            .await?;
        if finished != FinishOutcome::PaymentAlreadySettled {
            return Ok(self
                .stored_or_lost(lease, finished, response, attempts)
                .await);
        }
        let Some((payment, _)) = settled else {
            return Err(super::finish::settled_without_settlement(lease, "void"));
        };
        let stored = self.store.payment(&payment.shop_id, &payment.id).await?;
        let stored = stored.ok_or_else(|| super::finish::vanished("payment", &payment.id))?;
        tracing::error!(key = %lease.key, payment = %payment.id, "the void's hold was no longer releasing at its finish; answering from the stored payment");
        let response = self.render_void(&stored, None);
        let finished = self
            .store
            .finish_void(lease, None, &response, ttl, attempts)
            .await?;
        Ok(self
            .stored_or_lost(lease, finished, response, attempts)
            .await)
    }

    /// A void key's answer from its payment: released by the void, or
    /// (`failure`: the acquirer's refusal) open again.
    fn render_void(&self, payment: &Payment, failure: Option<&str>) -> StoredResponse {
        let released = payment
            .authorization()
            .is_some_and(|hold| hold.hold() == Hold::Released(ReleaseReason::Void));
        match failure {
            Some(code) => self.render.render(Rendered::VoidFailed(payment, code)),
            None if released => self.render.render(Rendered::Voided(payment)),
            // Not released by this void and no refusal of ours: the hold
            // moved otherwise (which the claim excludes); say what stands.
            None => self
                .render
                .render(Rendered::VoidFailed(payment, "authorization_changed")),
        }
    }
}

/// The acquirer call of a void in flight.
struct Voiding {
    payment: Payment,
    request: VoidRequest,
}

impl Voiding {
    fn of(payment: Payment) -> Result<Self, StoreError> {
        let charge_id = payment.provider_payment_id.clone().ok_or_else(|| {
            StoreError::corrupt(format!(
                "void of payment {} without an authorization id",
                payment.id
            ))
        })?;
        let request = VoidRequest {
            acquirer_key: AcquirerKey::for_void(&payment.id),
            shop_id: payment.shop_id.clone(),
            payment_id: payment.id.clone(),
            charge_id,
            token: payment.token.clone(),
        };
        Ok(Self { payment, request })
    }

    /// The payment as the acquirer's answer leaves it.
    fn settled(&self, settlement: &VoidSettlement) -> Payment {
        let succeeded = matches!(settlement, VoidSettlement::Succeeded { .. });
        match self.payment.authorization() {
            Some(hold) => {
                let hold = hold.release_settled(succeeded);
                self.payment.clone().with_hold(hold)
            }
            None => self.payment.clone(),
        }
    }
}

impl Movement for Voiding {
    type Answer = VoidSettlement;
    type Settlement = VoidSettlement;
    const CALL: AcquirerCall = AcquirerCall::Void;
    const RESUMED: &'static str = "a resumed void";

    fn acquirer_key(&self) -> &str {
        self.request.acquirer_key.as_str()
    }

    fn payment(&self) -> (&ShopId, &PaymentId) {
        (&self.request.shop_id, &self.request.payment_id)
    }

    async fn send(&self, acquirer: &dyn Acquirer) -> Result<VoidSettlement, AcquirerError> {
        acquirer.void(&self.request).await
    }

    /// The acquirer lists no voids: nothing to look up, so a resumed void
    /// is sent again under its key (see [`Voiding::judge`]).
    async fn look_up(
        &self,
        _acquirer: &dyn Acquirer,
    ) -> Result<Option<VoidSettlement>, AcquirerError> {
        Ok(None)
    }

    fn kind(answer: &VoidSettlement) -> AcquirerOutcomeKind {
        match answer {
            VoidSettlement::Succeeded { .. } => AcquirerOutcomeKind::Succeeded,
            VoidSettlement::Failed { .. } => AcquirerOutcomeKind::Declined,
        }
    }

    fn settlement(answer: VoidSettlement) -> VoidSettlement {
        answer
    }

    fn rejected(_refusal: &str) -> VoidSettlement {
        VoidSettlement::Failed {
            code: REJECTED.to_owned(),
        }
    }

    /// "Already voided" for a void sent again to an acquirer that ignores
    /// keys may be the answer to the attempt resumed: unknown, logged as an
    /// error for a person to look at, never a refusal that would open the
    /// hold for captures the acquirer would refuse.
    fn judge(settlement: VoidSettlement, resend: bool) -> Result<VoidSettlement, AcquirerError> {
        match settlement {
            VoidSettlement::Failed { code } if resend && code == AUTHORIZATION_VOIDED => {
                tracing::error!(%code, "a resent void was refused as already voided: left releasing");
                Err(AcquirerError::Unknown(format!(
                    "a resent void was refused ({code}); the attempt resumed may have voided it"
                )))
            }
            other => Ok(other),
        }
    }

    fn log_found(&self, _lease: &Lease, _found: &VoidSettlement) {}

    fn log_refused(&self, lease: &Lease, _holder: Holder, reason: &str) {
        tracing::warn!(key = %lease.key, payment = %self.payment.id, %reason, "the acquirer refused the void");
    }

    fn log_not_sent(&self, lease: &Lease, reason: &str) {
        tracing::warn!(key = %lease.key, payment = %self.payment.id, %reason, "acquirer unreachable; void not sent");
    }

    fn log_unknown(&self, lease: &Lease, reason: &str) {
        tracing::warn!(key = %lease.key, payment = %self.payment.id, %reason, "acquirer void outcome unknown; the authorization stays releasing");
    }

    async fn finish(
        self,
        engine: &Engine,
        lease: &Lease,
        settlement: VoidSettlement,
        attempts: &[AcquirerAttempt],
    ) -> Result<Outcome, EngineError> {
        let settled = self.settled(&settlement);
        let failure = match &settlement {
            VoidSettlement::Failed { code } => Some(code.as_str()),
            VoidSettlement::Succeeded { .. } => None,
        };
        let response = engine.render_void(&settled, failure);
        engine
            .finish_void(lease, Some((&settled, &settlement)), response, attempts)
            .await
    }

    fn unavailable(self, retry_after: Duration, resumed: bool) -> Outcome {
        Outcome::VoidAcquirerUnavailable {
            payment: self.payment,
            retry_after,
            resumed,
        }
    }

    fn pending(self, retry_after: Duration) -> Outcome {
        Outcome::VoidPending {
            payment: self.payment,
            retry_after,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(code: &str) -> VoidSettlement {
        VoidSettlement::Failed {
            code: code.to_owned(),
        }
    }

    #[test]
    fn already_voided_is_unknown_only_for_a_resend() {
        let judged = Voiding::judge(failed(AUTHORIZATION_VOIDED), true);
        assert!(matches!(judged, Err(AcquirerError::Unknown(_))));
        assert_eq!(
            Voiding::judge(failed(AUTHORIZATION_VOIDED), false),
            Ok(failed(AUTHORIZATION_VOIDED))
        );
        let nothing = failed(crate::acquirer::NOTHING_TO_VOID);
        assert_eq!(Voiding::judge(nothing.clone(), true), Ok(nothing));
    }
}
