//! Phase 3: the finish, one store transaction fenced by the lease token, that
//! records the settlement and the final response together.
//!
//! A finish that lost its lease wrote nothing: the new owner completes, and
//! this request answers as a repeat would (409); the acquirer calls it made
//! are still recorded in the payment's history. A payment settled by someone
//! else meanwhile (a webhook, the reconciler) is never overwritten: the
//! answer stored is rendered from the payment as stored, which never leaves
//! a final state. Nobody but a refund's key settles a refund, so a refund
//! found settled was settled by an earlier holder of the key whose finish
//! was cut; it is answered from as stored too.

use super::{Engine, EngineError, Outcome, Rendered};
use crate::history::AcquirerAttempt;
use crate::{
    FinishOutcome, Lease, Payment, PaymentStatus, Refund, RefundAnswer, RefundStatus, Settlement,
    StoreError, StoredResponse,
};

impl Engine {
    /// Phase 3 of a payment key (`settled`: the payment's settlement, if
    /// this request got one from the acquirer; `attempts`: the acquirer
    /// calls it made, for the history).
    pub(super) async fn finish(
        &self,
        lease: &Lease,
        settled: Option<(&Payment, &Settlement)>,
        response: StoredResponse,
        attempts: &[AcquirerAttempt],
    ) -> Result<Outcome, EngineError> {
        let ttl = self.config.timing.ttl;
        let finished = self
            .store
            .finish(lease, settled, &response, ttl, attempts)
            .await?;
        if finished != FinishOutcome::PaymentAlreadySettled {
            return Ok(self
                .stored_or_lost(lease, finished, response, attempts)
                .await);
        }
        let Some((payment, _)) = settled else {
            return Err(settled_without_settlement(lease, "payment"));
        };
        let stored = self.store.payment(&payment.shop_id, &payment.id).await?;
        let stored = stored.ok_or_else(|| vanished("payment", &payment.id))?;
        if stored.status != payment.status
            || stored.provider_payment_id != payment.provider_payment_id
        {
            tracing::error!(
                key = %lease.key,
                payment = %payment.id,
                ours = payment.status.as_str(),
                stored = stored.status.as_str(),
                "the acquirer's answer disagrees with the payment's settled state; answering from the stored state"
            );
        }
        let response = self.render_payment(&stored);
        // The first finish wrote nothing: this one records the calls.
        let finished = self
            .store
            .finish(lease, None, &response, ttl, attempts)
            .await?;
        Ok(self
            .stored_or_lost(lease, finished, response, attempts)
            .await)
    }

    /// Phase 3 of a refund key (`answer`: the refund's settlement, if this
    /// request got one from the acquirer).
    pub(super) async fn finish_refund(
        &self,
        lease: &Lease,
        answer: Option<RefundAnswer<'_>>,
        response: StoredResponse,
        attempts: &[AcquirerAttempt],
    ) -> Result<Outcome, EngineError> {
        let ttl = self.config.timing.ttl;
        let finished = self
            .store
            .finish_refund(lease, answer, &response, ttl, attempts)
            .await?;
        if finished != FinishOutcome::PaymentAlreadySettled {
            return Ok(self
                .stored_or_lost(lease, finished, response, attempts)
                .await);
        }
        let Some(RefundAnswer { refund, .. }) = answer else {
            return Err(settled_without_settlement(lease, "refund"));
        };
        let stored = self.store.refund(&refund.shop_id, &refund.id).await?;
        let stored = stored.ok_or_else(|| vanished("refund", &refund.id))?;
        let response = self.render_refund(&stored);
        let finished = self
            .store
            .finish_refund(lease, None, &response, ttl, attempts)
            .await?;
        Ok(self
            .stored_or_lost(lease, finished, response, attempts)
            .await)
    }

    /// Stores the answer a settled payment calls for.
    pub(super) async fn finish_from_stored(
        &self,
        lease: &Lease,
        payment: Payment,
    ) -> Result<Outcome, EngineError> {
        let response = self.render_payment(&payment);
        self.finish(lease, None, response, &[]).await
    }

    /// The answer of a finish that did not find its operation settled; a
    /// finish that lost its lease still records the calls made under it.
    pub(super) async fn stored_or_lost(
        &self,
        lease: &Lease,
        finished: FinishOutcome,
        response: StoredResponse,
        attempts: &[AcquirerAttempt],
    ) -> Outcome {
        if finished == FinishOutcome::LeaseLost {
            tracing::warn!(key = %lease.key, "lease lost before finish; the new owner completes");
            self.record_lost_lease_calls(lease, attempts).await;
        }
        self.stored_or_in_progress(finished, response)
    }

    /// The stored response, or "in progress" when nothing was stored.
    fn stored_or_in_progress(&self, finished: FinishOutcome, response: StoredResponse) -> Outcome {
        match finished {
            FinishOutcome::Stored => Outcome::Executed(response),
            _ => self.in_progress(),
        }
    }

    /// The answer of this key's own settled payment.
    pub(super) fn render_payment(&self, payment: &Payment) -> StoredResponse {
        match payment.status {
            PaymentStatus::Declined => self.render.render(Rendered::Declined(payment)),
            PaymentStatus::Canceled => self.render.render(Rendered::Canceled(payment)),
            _ => self.render.render(Rendered::Charged(payment)),
        }
    }

    /// The answer of this key's own settled refund.
    pub(super) fn render_refund(&self, refund: &Refund) -> StoredResponse {
        match refund.status {
            RefundStatus::Failed => self.render.render(Rendered::RefundFailed(refund)),
            _ => self.render.render(Rendered::Refunded(refund)),
        }
    }
}

/// A store that says "settled meanwhile" to a finish that settled nothing.
pub(super) fn settled_without_settlement(lease: &Lease, what: &str) -> EngineError {
    StoreError::corrupt(format!(
        "key {}: {what} settled without a settlement",
        lease.key
    ))
    .into()
}

/// A payment or refund the key names is gone.
pub(super) fn vanished(what: &str, id: &dyn std::fmt::Display) -> StoreError {
    StoreError::corrupt(format!("{what} {id} vanished"))
}
