//! Payments: the claim of a payment key (phase 1), and what a held key calls
//! for from its recovery point, a charge being the usual one.
//!
//! A key may also only link to its order's payment (the order already had a
//! live payment under another key): it answers with that payment and charges
//! nothing, or, if that payment is still pending, says so and stores nothing.
//! A linked payment that was then declined frees the order: the key is
//! deleted and claimed afresh, so the request gets an attempt with its own
//! card, never the other payment's decline (see `existing`).

use std::time::Duration;

use super::send::{Movement, rejected_look_up};
use super::{Engine, EngineError, Holder, Outcome, Rendered};
use crate::acquirer::look_up;
use crate::history::AcquirerAttempt;
use crate::observe::{AcquirerCall, AcquirerOutcomeKind};
use crate::{
    Acquired, Acquirer, AcquirerError, ChargeRequest, ChargeResult, Claim, ClaimRequest, Lease,
    NewPayment, Payment, PaymentId, PaymentRequest, PaymentStatus, RecoveryPoint, Settlement,
    ShopId, StoreError,
};

impl Engine {
    /// Creates a payment under an idempotency key, or answers as the key's first
    /// request did.
    pub async fn pay(
        &self,
        claim: ClaimRequest,
        request: PaymentRequest,
    ) -> Result<Outcome, EngineError> {
        let result = self.pay_inner(claim, request).await;
        self.observe_error(&result, "pay");
        result
    }

    async fn pay_inner(
        &self,
        claim: ClaimRequest,
        request: PaymentRequest,
    ) -> Result<Outcome, EngineError> {
        let new = NewPayment::new(claim.shop_id.clone(), claim.key.clone(), request)
            .with_authorization_ttl(self.config.authorization_ttl);
        // Twice at most: a key that only linked to its order's payment, which
        // was then declined, is deleted, and the request claims the order
        // (free again) afresh, with its own card: never the other's decline.
        for _ in 0..2 {
            match self
                .store
                .claim_payment(&claim, &new, self.config.timing)
                .await?
            {
                Claim::Acquired(acquired) => {
                    tracing::debug!(key = %acquired.lease.key, payment = %acquired.payment.id, "key claimed");
                    self.observer.claimed();
                    if let Some(outcome) = self.paid_otherwise(&acquired, &new.request).await? {
                        return Ok(outcome);
                    }
                    return self.drive(acquired, Holder::Claimant).await;
                }
                Claim::Exists(record) => {
                    if let Some(outcome) =
                        self.on_existing(&claim, record, Some(&new.request)).await?
                    {
                        return Ok(outcome);
                    }
                }
            }
        }
        Ok(self.in_progress())
    }

    /// A key linked to its order's live payment of another amount or
    /// currency: the order is paid (or being paid) otherwise, and this
    /// request is not that payment. The key is deleted (it charges nothing,
    /// and its next request judges afresh) and the request answered 409
    /// `order_already_paid`, never "paid" with the other amount.
    pub(super) async fn paid_otherwise(
        &self,
        acquired: &Acquired,
        requested: &PaymentRequest,
    ) -> Result<Option<Outcome>, EngineError> {
        let payment = &acquired.payment;
        if acquired.recovery_point != RecoveryPoint::OrderAlreadyPaid
            || payment.amount == requested.amount
        {
            return Ok(None);
        }
        tracing::info!(key = %acquired.lease.key, payment = %payment.id, "the order already has a payment of another amount; nothing charged");
        self.abandon(&acquired.lease).await?;
        Ok(Some(Outcome::OrderPaidOtherwise {
            payment: payment.clone(),
        }))
    }

    /// Phases 2 and 3, from the recovery point phase 1 (or a take-over) left.
    pub(super) async fn drive(
        &self,
        acquired: Acquired,
        holder: Holder,
    ) -> Result<Outcome, EngineError> {
        let Acquired {
            lease,
            recovery_point,
            payment,
            refund,
            capture,
        } = acquired;
        match recovery_point {
            RecoveryPoint::CaptureCreated => {
                let capture = capture.ok_or_else(|| {
                    StoreError::corrupt(format!("capture key {} has no capture", lease.key))
                })?;
                self.drive_capture(lease, payment, *capture, holder).await
            }
            RecoveryPoint::VoidRequested => self.drive_void(lease, payment, holder).await,
            RecoveryPoint::RefundCreated => {
                let refund = refund.ok_or_else(|| {
                    StoreError::corrupt(format!("refund key {} has no refund", lease.key))
                })?;
                self.drive_refund(lease, payment, *refund, holder).await
            }
            RecoveryPoint::OrderAlreadyPaid if payment.status == PaymentStatus::Pending => {
                // The order's payment has no definite answer yet: say so, store
                // nothing, and let a retry look again.
                self.release(&lease, &[]).await;
                Ok(Outcome::Pending {
                    payment,
                    retry_after: self.config.retry_after,
                })
            }
            RecoveryPoint::OrderAlreadyPaid => {
                let response = self.render.render(Rendered::AlreadyExists(&payment));
                self.finish(&lease, None, response, &[]).await
            }
            RecoveryPoint::Finished => Err(StoreError::corrupt(format!(
                "key {} acquired while finished",
                lease.key
            ))
            .into()),
            RecoveryPoint::PaymentCreated if payment.status.is_final() => {
                // Settled meanwhile (a webhook, the reconciler): answer from it.
                self.finish_from_stored(&lease, payment).await
            }
            RecoveryPoint::PaymentCreated if holder == Holder::Resumer => {
                // A cancel recorded: the charge is only looked up, never sent.
                let history = self
                    .store
                    .payment_history(Some(&payment.shop_id), &payment.id)
                    .await?;
                if crate::history::cancel_requested(&history) {
                    return self.conclude_canceled(payment, &lease, &history).await;
                }
                let charge = Charge::of(payment);
                self.send_and_finish(charge, &lease, holder, Some(&history))
                    .await
            }
            RecoveryPoint::PaymentCreated => {
                let charge = Charge::of(payment);
                self.send_and_finish(charge, &lease, holder, None).await
            }
            RecoveryPoint::CancelRequested => self.drive_cancel(lease, payment).await,
        }
    }
}

/// The charge of a pending payment.
pub(super) struct Charge {
    payment: Payment,
    request: ChargeRequest,
}

impl Charge {
    pub(super) fn of(payment: Payment) -> Self {
        let request = ChargeRequest {
            acquirer_key: payment.acquirer_key.clone(),
            shop_id: payment.shop_id.clone(),
            payment_id: payment.id.clone(),
            reference: payment.reference.clone(),
            amount: payment.amount,
            token: payment.token.clone(),
            capture_method: payment.capture.method(),
        };
        Self { payment, request }
    }
}

impl Movement for Charge {
    type Answer = ChargeResult;
    type Settlement = Settlement;
    const CALL: AcquirerCall = AcquirerCall::Charge;
    const RESUMED: &'static str = "a resent charge";

    fn acquirer_key(&self) -> &str {
        self.request.acquirer_key.as_str()
    }

    fn payment(&self) -> (&ShopId, &PaymentId) {
        (&self.request.shop_id, &self.request.payment_id)
    }

    async fn send(&self, acquirer: &dyn Acquirer) -> Result<ChargeResult, AcquirerError> {
        acquirer.charge(&self.request).await
    }

    /// The payment's charge, by our reference.
    async fn look_up(
        &self,
        acquirer: &dyn Acquirer,
    ) -> Result<Option<ChargeResult>, AcquirerError> {
        let request = &self.request;
        let found = look_up(
            acquirer,
            &request.shop_id,
            &request.payment_id,
            &request.acquirer_key,
        )
        .await
        .map_err(rejected_look_up)?;
        match found {
            Some(charge) if charge.amount != request.amount => {
                tracing::error!(
                    payment = %request.payment_id,
                    charge = charge.id(),
                    ours = %request.amount.to_decimal_string(),
                    theirs = %charge.amount.to_decimal_string(),
                    "the acquirer's charge for this payment is for another amount; not applied"
                );
                Err(AcquirerError::Unknown(
                    "the charge found has another amount or currency".to_owned(),
                ))
            }
            found => Ok(found.map(|charge| charge.outcome)),
        }
    }

    fn kind(answer: &ChargeResult) -> AcquirerOutcomeKind {
        match answer {
            ChargeResult::Succeeded { .. } => AcquirerOutcomeKind::Succeeded,
            ChargeResult::Declined { .. } => AcquirerOutcomeKind::Declined,
        }
    }

    fn settlement(answer: ChargeResult) -> Settlement {
        answer.settlement()
    }

    fn rejected(_refusal: &str) -> Settlement {
        Settlement::rejected()
    }

    fn log_found(&self, lease: &Lease, found: &ChargeResult) {
        tracing::info!(key = %lease.key, payment = %self.payment.id, charge = found.provider_payment_id(), "charge found by reference; not sent again");
    }

    fn log_refused(&self, lease: &Lease, _holder: Holder, reason: &str) {
        tracing::warn!(key = %lease.key, payment = %self.request.payment_id, %reason, "the acquirer refused the charge");
    }

    fn log_not_sent(&self, lease: &Lease, reason: &str) {
        tracing::warn!(key = %lease.key, payment = %self.payment.id, %reason, "acquirer unreachable; nothing sent");
    }

    fn log_unknown(&self, lease: &Lease, reason: &str) {
        tracing::warn!(key = %lease.key, payment = %self.payment.id, %reason, "acquirer outcome unknown; payment stays pending");
    }

    async fn finish(
        self,
        engine: &Engine,
        lease: &Lease,
        settlement: Settlement,
        attempts: &[AcquirerAttempt],
    ) -> Result<Outcome, EngineError> {
        let settled = self.payment.settled(&settlement);
        let response = engine.render_payment(&settled);
        engine
            .finish(lease, Some((&settled, &settlement)), response, attempts)
            .await
    }

    fn unavailable(self, retry_after: Duration, resumed: bool) -> Outcome {
        Outcome::AcquirerUnavailable {
            payment: self.payment,
            retry_after,
            resumed,
        }
    }

    fn pending(self, retry_after: Duration) -> Outcome {
        Outcome::Pending {
            payment: self.payment,
            retry_after,
        }
    }
}
