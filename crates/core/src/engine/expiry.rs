//! The expiry of authorizations nobody captured in time: the hold moves to
//! releasing (a store transaction that refuses while a capture is in
//! flight), the acquirer is asked to void what is left under the
//! authorization's one void key, and the answer ends the release.
//!
//! No idempotency key is involved (nobody asked): the hold's state is the
//! record. A release whose answer is not known stays releasing, and the
//! next pass resumes it under the same acquirer key, so the acquirer voids
//! once however often it is asked.

use super::{Engine, EngineError};
use crate::acquirer::AUTHORIZATION_VOIDED;
use crate::history::AcquirerAttempt;
use crate::observe::{AcquirerCall, AcquirerOutcomeKind};
use crate::{AcquirerError, AcquirerKey, Payment, VoidRequest, VoidSettlement};

/// What one expiry attempt did.
#[derive(Debug, Clone, PartialEq)]
pub enum Expiry {
    /// The hold was released: the payment as it ended (`expired`, or
    /// `succeeded` when part was captured).
    Released(Payment),
    /// The acquirer refused the void; the hold is open again (logged as an
    /// error: the books and the acquirer disagree).
    Refused {
        /// The payment as it ended.
        payment: Payment,
        /// The acquirer's code.
        code: String,
    },
    /// The acquirer's answer is not known (or nothing reached it); the
    /// hold stays releasing, and the next pass resumes it.
    Unresolved,
    /// Nothing to release: captured, voided, a capture in flight, or not
    /// expired yet.
    Skipped,
}

impl Engine {
    /// Releases `payment`'s authorization if it expired (by the store's
    /// clock) and is still open, or resumes its release by expiry.
    pub async fn expire(&self, payment: &Payment) -> Result<Expiry, EngineError> {
        let result = self.expire_inner(payment).await;
        self.observe_error(&result, "expiry");
        result
    }

    async fn expire_inner(&self, payment: &Payment) -> Result<Expiry, EngineError> {
        let Some(payment) = self
            .store
            .begin_expiry(&payment.shop_id, &payment.id)
            .await?
        else {
            return Ok(Expiry::Skipped);
        };
        let Some(charge_id) = payment.provider_payment_id.clone() else {
            return Err(crate::StoreError::corrupt(format!(
                "authorization {} without an authorization id",
                payment.id
            ))
            .into());
        };
        let request = VoidRequest {
            acquirer_key: AcquirerKey::for_void(&payment.id),
            shop_id: payment.shop_id.clone(),
            payment_id: payment.id.clone(),
            charge_id,
            token: payment.token.clone(),
        };
        let (answer, attempt) = self.send_void(&request).await;
        let attempts = [attempt];
        let released = match answer {
            Ok(VoidSettlement::Succeeded { .. }) => true,
            // Voided at the acquirer already (its own expiry, or an earlier
            // attempt of this release whose answer was lost): nothing is
            // held there, which is what releasing means.
            Ok(VoidSettlement::Failed { code }) if code == AUTHORIZATION_VOIDED => true,
            Ok(VoidSettlement::Failed { code }) | Err(AcquirerError::Rejected(code)) => {
                tracing::error!(payment = %payment.id, %code, "the acquirer refused to release an expired authorization; it stays open, and the next pass asks again");
                let ended = self.end_expiry(&payment, false, &attempts).await?;
                return Ok(
                    ended.map_or(Expiry::Skipped, |payment| Expiry::Refused { payment, code })
                );
            }
            Err(error) => {
                tracing::warn!(payment = %payment.id, %error, "the release of an expired authorization has no answer yet; resumed by the next pass");
                return Ok(Expiry::Unresolved);
            }
        };
        let ended = self.end_expiry(&payment, released, &attempts).await?;
        Ok(ended.map_or(Expiry::Skipped, Expiry::Released))
    }

    /// The acquirer's void, timed and observed as every acquirer call.
    async fn send_void(
        &self,
        request: &VoidRequest,
    ) -> (Result<VoidSettlement, AcquirerError>, AcquirerAttempt) {
        let kind = |answer: &VoidSettlement| match answer {
            VoidSettlement::Succeeded { .. } => AcquirerOutcomeKind::Succeeded,
            VoidSettlement::Failed { .. } => AcquirerOutcomeKind::Declined,
        };
        let call = (AcquirerCall::Void, request.acquirer_key.as_str());
        let mode = request.shop_id.mode();
        self.timed_call(
            mode,
            call,
            self.acquirer(&request.shop_id).void(request),
            kind,
        )
        .await
    }

    async fn end_expiry(
        &self,
        payment: &Payment,
        released: bool,
        attempts: &[AcquirerAttempt],
    ) -> Result<Option<Payment>, EngineError> {
        Ok(self
            .store
            .end_expiry(&payment.shop_id, &payment.id, released, attempts)
            .await?)
    }
}
