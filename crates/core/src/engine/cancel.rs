//! Cancel: ending a pending payment so that the customer is not charged.
//!
//! A cancel is a request of its own, under its own idempotency key, that
//! names a payment. Its claim records the request in the payment's history
//! ([`HistoryEvent::CancelRequested`]); from then on **whoever drives the
//! payment's own key** (this request, a retry of the payment, the completer)
//! never sends the charge again: once the settle window has passed since
//! the charge was last sent (or could have been), it looks the charge up.
//!
//! - found, succeeded: the payment settles `succeeded`, and the cancel
//!   refunds it in full under a refund whose key is derived from the payment
//!   ([`cancel_refund_key`]): one refund however often, and under however
//!   many keys, cancel is called;
//! - found, declined: the payment settles `declined` (nothing was charged);
//! - nothing found: the payment settles `canceled`, and its order is free.
//!   A charge that lands later anyway is refunded by the reconciler.
//!
//! The cancel's own answer is stored once the payment is final and its
//! refund (if any) has ended: 200 with the payment. A payment already final
//! when the cancel came (succeeded or declined without a cancel) answers 409
//! `payment_not_cancelable`, stored too. Until then the cancel answers 202
//! and is resumed by a retry with its key, or by the completer.
//!
//! The completer takes the same path for a payment still pending past its
//! give-up time ([`Engine::complete_or_give_up`]): so every payment ends,
//! even one whose acquirer keeps answering with errors that prove nothing.

use std::time::Duration;

use time::OffsetDateTime;

use super::lease::Trail;
use super::{Engine, EngineError, Holder, Outcome, Rendered};
use crate::history::{HistoryEntry, HistoryEvent};
use crate::observe::AcquirerCall;
use crate::store::CancelClaim;
use crate::{
    AcquirerError, ClaimRequest, Fingerprint, IdempotencyKey, Lease, NewRefund, Payment, PaymentId,
    PaymentStatus, Settlement, StalledKey, StoreError,
};

/// What a cancel calls for, judged from its payment as it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The payment is pending: drive its key to an end first.
    DrivePayment,
    /// The charge was found succeeded after the cancel: refund it in full.
    Refund,
    /// The payment is final and nothing is left to do: answer with it.
    Answer,
    /// The payment was final before the cancel came: 409.
    NotCancelable,
}

/// The step a cancel takes next (`requested`: the payment's history records
/// a cancel request, so it was pending when one came).
fn step(payment: &Payment, requested: bool) -> Step {
    match payment.status {
        PaymentStatus::Pending => Step::DrivePayment,
        PaymentStatus::Canceled => Step::Answer,
        _ if !requested => Step::NotCancelable,
        PaymentStatus::Succeeded => Step::Refund,
        PaymentStatus::Declined => Step::Answer,
    }
}

/// How long a canceled payment's charge must still be left alone before
/// it is looked up (`None`: look now). The charge may have been sent at its
/// claim, at any take-over before the cancel was requested (a holder that
/// died after sending recorded nothing), or at any recorded send; a
/// look-up before the settle window has passed since the last of them could
/// miss a charge still in flight. Take-overs after the request do not
/// count: nobody sends after it.
fn wait_before_look_up(
    payment: &Payment,
    history: &[HistoryEntry],
    now: OffsetDateTime,
    window: Duration,
) -> Option<Duration> {
    let pay_key = payment.idempotency_key.as_str();
    let acquirer_key = payment.acquirer_key.as_str();
    let mut requested = false;
    let mut last = payment.created_at;
    for entry in history {
        let sent = match &entry.event {
            HistoryEvent::CancelRequested { .. } => {
                requested = true;
                false
            }
            HistoryEvent::TakenOver { key, .. } => !requested && key == pay_key,
            HistoryEvent::AcquirerCall {
                call: AcquirerCall::Charge,
                acquirer_key: key,
                ..
            } => key == acquirer_key,
            _ => false,
        };
        if sent {
            last = last.max(entry.at);
        }
    }
    let ready = last + window;
    (ready > now).then(|| (ready - now).unsigned_abs())
}

/// The idempotency key of the refund a cancel makes when it finds the
/// charge succeeded: derived from the payment, so every cancel of it (under
/// any key, on any instance) makes the same refund, once.
pub fn cancel_refund_key(payment_id: &PaymentId) -> IdempotencyKey {
    // `cancel-` and a payment id are visible ASCII, well under 255.
    IdempotencyKey::new(format!("cancel-{payment_id}"))
        .unwrap_or_else(|_| unreachable!("a payment id makes a valid key"))
}

impl Engine {
    /// Cancels a pending payment under an idempotency key, or answers as the
    /// key's first request did. See the module documentation.
    pub async fn cancel(
        &self,
        claim: ClaimRequest,
        payment_id: PaymentId,
    ) -> Result<Outcome, EngineError> {
        let result = self.cancel_inner(claim, payment_id).await;
        self.observe_error(&result, "cancel");
        result
    }

    async fn cancel_inner(
        &self,
        claim: ClaimRequest,
        payment_id: PaymentId,
    ) -> Result<Outcome, EngineError> {
        match self
            .store
            .claim_cancel(&claim, &payment_id, self.config.timing)
            .await?
        {
            CancelClaim::Acquired(acquired) => {
                tracing::info!(key = %acquired.lease.key, payment = %payment_id, "cancel requested");
                self.observer.claimed();
                self.drive_cancel(acquired.lease, acquired.payment).await
            }
            CancelClaim::Exists(record) => Ok(self
                .on_existing(&claim, record, None)
                .await?
                .unwrap_or_else(|| self.in_progress())),
            CancelClaim::NoPayment => Ok(Outcome::NoSuchPayment),
        }
    }

    /// Drives a held cancel key: the payment's key to an end, the refund if
    /// the charge was found, then the answer.
    pub(super) async fn drive_cancel(
        &self,
        lease: Lease,
        payment: Payment,
    ) -> Result<Outcome, EngineError> {
        let mut payment = payment;
        let mut hint = None;
        let mut history = self.history_of(&payment).await?;
        if payment.status == PaymentStatus::Pending {
            if !crate::history::cancel_requested(&history) {
                // The claim wrote it with the key row, so it is there; the
                // guard only keeps the rule true whatever wrote the key.
                self.store
                    .request_cancel(&payment.shop_id, &payment.id, Some(&lease.key))
                    .await?;
            }
            hint = self.drive_payment_key(&payment).await?;
            payment = self.reread(&payment).await?;
            history = self.history_of(&payment).await?;
        }
        match step(&payment, crate::history::cancel_requested(&history)) {
            Step::DrivePayment => self.cancel_later(&lease, payment, hint).await,
            Step::NotCancelable => {
                let response = self.render.render(Rendered::NotCancelable(&payment));
                self.finish(&lease, None, response, &[]).await
            }
            Step::Answer => self.answer_cancel(&lease, &payment).await,
            Step::Refund => match self.refund_canceled(&payment).await? {
                true => {
                    let payment = self.reread(&payment).await?;
                    self.answer_cancel(&lease, &payment).await
                }
                false => self.cancel_later(&lease, payment, None).await,
            },
        }
    }

    /// The cancel's stored answer: the payment as it ended.
    async fn answer_cancel(
        &self,
        lease: &Lease,
        payment: &Payment,
    ) -> Result<Outcome, EngineError> {
        let response = self.render.render(Rendered::CancelAnswered(payment));
        self.finish(lease, None, response, &[]).await
    }

    /// Not done yet: the cancel key is released (a retry or the completer
    /// resumes it) and the client told to come back (`hint`: when the
    /// payment's key said to).
    async fn cancel_later(
        &self,
        lease: &Lease,
        payment: Payment,
        hint: Option<Duration>,
    ) -> Result<Outcome, EngineError> {
        self.release(lease, &[]).await;
        Ok(Outcome::CancelPending {
            payment,
            retry_after: hint.unwrap_or(self.config.retry_after),
        })
    }

    /// Takes the payment's own key over, if nobody holds it, and drives it:
    /// with the cancel recorded, that only looks the charge up. Returns when
    /// to look again, if the payment is still pending.
    async fn drive_payment_key(&self, payment: &Payment) -> Result<Option<Duration>, EngineError> {
        let (shop, key) = (&payment.shop_id, &payment.idempotency_key);
        let Some(record) = self.store.key(shop, key).await? else {
            return Ok(None);
        };
        if record.payment_id.as_ref() != Some(&payment.id) {
            return Ok(None);
        }
        if let Some(parked) = record.settling {
            return Ok(Some(parked));
        }
        let Some(acquired) = self
            .store
            .take_over(shop, key, &record.fingerprint, self.config.timing.lease)
            .await?
        else {
            // Held (a charge being sent, or a look-up), parked, or finished.
            return Ok(None);
        };
        self.observer.taken_over();
        // Boxed: driving a key may drive a cancel, which drives this.
        let driven = Box::pin(self.drive(acquired, Holder::Resumer)).await?;
        Ok(match driven {
            Outcome::Pending { retry_after, .. }
            | Outcome::AcquirerUnavailable { retry_after, .. } => Some(retry_after),
            _ => None,
        })
    }

    /// Refunds a charge found after a cancel, in full, under the key derived
    /// from the payment. `true` once that refund has ended (succeeded, or
    /// refused for good), or there is nothing left to refund.
    async fn refund_canceled(&self, payment: &Payment) -> Result<bool, EngineError> {
        let key = cancel_refund_key(&payment.id);
        let path = format!("/v1/payments/{}/refunds", payment.id);
        let fingerprint = Fingerprint::compute("POST", &path, &serde_json::json!({}))
            .map_err(|error| StoreError::other(format!("cancel refund fingerprint: {error}")))?;
        let claim = ClaimRequest {
            shop_id: payment.shop_id.clone(),
            key: key.clone(),
            fingerprint,
            method: "POST".to_owned(),
            path,
        };
        let refund = NewRefund::new(payment.shop_id.clone(), payment.id.clone(), key, None);
        // Boxed: a refund's key may be resumed, and resuming drives keys.
        let refunded = Box::pin(self.refund(claim, refund)).await?;
        Ok(match refunded {
            Outcome::Executed(_) | Outcome::Replayed(_) | Outcome::RefundRefused(_) => true,
            Outcome::Mismatch => {
                tracing::error!(payment = %payment.id, "the cancel's refund key was used for another request; the payment is not refunded by the cancel");
                true
            }
            _ => false,
        })
    }

    async fn history_of(&self, payment: &Payment) -> Result<Vec<HistoryEntry>, EngineError> {
        Ok(self
            .store
            .payment_history(Some(&payment.shop_id), &payment.id)
            .await?)
    }

    async fn reread(&self, payment: &Payment) -> Result<Payment, EngineError> {
        Ok(self
            .store
            .payment(&payment.shop_id, &payment.id)
            .await?
            .ok_or_else(|| StoreError::corrupt(format!("payment {} vanished", payment.id)))?)
    }

    /// The payment's key, held, with a cancel recorded: the charge is looked
    /// up once the settle window has passed, and never sent. Found: its
    /// answer settles the payment; nothing: the payment is canceled.
    pub(super) async fn conclude_canceled(
        &self,
        payment: Payment,
        lease: &Lease,
        history: &[HistoryEntry],
    ) -> Result<Outcome, EngineError> {
        let now = OffsetDateTime::now_utc();
        let window = self.config.settle_window;
        if let Some(wait) = wait_before_look_up(&payment, history, now, window) {
            tracing::info!(key = %lease.key, payment = %payment.id, wait_ms = wait.as_millis() as u64, "cancel requested; the charge is looked up once the settle window has passed");
            self.park_for(lease, wait).await;
            return Ok(Outcome::Pending {
                payment,
                retry_after: wait.max(self.config.retry_after),
            });
        }
        let charge = super::pay::Charge::of(payment);
        let trail = Trail::default();
        let judged = match self.found(&charge, lease, &trail).await {
            Ok(Some(answer)) => Ok(answer.settlement()),
            Ok(None) => Ok(Settlement::canceled()),
            Err(AcquirerError::Rejected(reason)) => Err(AcquirerError::Unknown(reason)),
            Err(error) => Err(error),
        };
        self.conclude(charge, lease, Holder::Resumer, judged, &trail.take())
            .await
    }

    /// Drives a stalled key like [`Engine::complete`], but first gives up on
    /// a payment still pending `give_up_after` after its creation: its
    /// cancel is recorded (by nobody's key), so the key's driver looks the
    /// charge up instead of sending it, and the payment ends.
    pub async fn complete_or_give_up(
        &self,
        stalled: &StalledKey,
        give_up_after: Duration,
    ) -> Result<Option<Outcome>, EngineError> {
        if let Some(record) = self.store.key(&stalled.shop_id, &stalled.key).await?
            && record.recovery_point == crate::RecoveryPoint::PaymentCreated
            && let Some(payment_id) = &record.payment_id
            && let Some(payment) = self.store.payment(&stalled.shop_id, payment_id).await?
            && payment.status == PaymentStatus::Pending
            && payment.idempotency_key == stalled.key
            && OffsetDateTime::now_utc() - payment.created_at >= give_up_after
        {
            tracing::warn!(payment = %payment.id, "payment still pending past the completer's give-up time; canceling it");
            self.store
                .request_cancel(&stalled.shop_id, payment_id, None)
                .await?;
        }
        self.complete(stalled).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::AcquirerOutcomeKind;
    use crate::{Money, PaymentRequest, Reference, ShopId};

    fn payment(status: PaymentStatus) -> Payment {
        let request = PaymentRequest {
            amount: Money::from_minor(100, crate::Currency::from_code("RUB").unwrap()).unwrap(),
            reference: Reference::new("order-1").unwrap(),
            token: crate::CardToken::new("tok_ok").unwrap(),
            metadata: Default::default(),
            capture_method: crate::CaptureMethod::Automatic,
        };
        let mut payment = crate::NewPayment::new(
            ShopId::new("shop").unwrap(),
            IdempotencyKey::new("pay-1").unwrap(),
            request,
        )
        .to_payment();
        payment.status = status;
        payment
    }

    fn entry(at: OffsetDateTime, event: HistoryEvent) -> HistoryEntry {
        HistoryEntry {
            seq: 0,
            at,
            payment_id: PaymentId::generate(),
            refund_id: None,
            event,
        }
    }

    #[test]
    fn a_cancel_steps_by_the_payment_as_it_stands() {
        use PaymentStatus::*;
        assert_eq!(step(&payment(Pending), true), Step::DrivePayment);
        assert_eq!(step(&payment(Canceled), false), Step::Answer);
        assert_eq!(step(&payment(Succeeded), true), Step::Refund);
        assert_eq!(step(&payment(Declined), true), Step::Answer);
        assert_eq!(step(&payment(Succeeded), false), Step::NotCancelable);
        assert_eq!(step(&payment(Declined), false), Step::NotCancelable);
    }

    #[test]
    fn the_look_up_waits_a_window_after_the_last_possible_send() {
        let p = payment(PaymentStatus::Pending);
        let window = Duration::from_secs(120);
        let t0 = p.created_at;
        let secs = |s: i64| t0 + time::Duration::seconds(s);
        // Only the claim: the window runs from the payment's creation.
        assert_eq!(
            wait_before_look_up(&p, &[], secs(100), window),
            Some(Duration::from_secs(20))
        );
        assert_eq!(wait_before_look_up(&p, &[], secs(120), window), None);
        let charge = |at, key: &str| {
            entry(
                at,
                HistoryEvent::AcquirerCall {
                    call: AcquirerCall::Charge,
                    outcome: AcquirerOutcomeKind::Unknown,
                    latency_ms: 1,
                    acquirer_key: key.to_owned(),
                    instance: "a".into(),
                    reason: None,
                },
            )
        };
        let taken = |at| {
            entry(
                at,
                HistoryEvent::TakenOver {
                    key: "pay-1".into(),
                    instance: "a".into(),
                    recovery_point: crate::RecoveryPoint::PaymentCreated,
                },
            )
        };
        let requested = |at| {
            entry(
                at,
                HistoryEvent::CancelRequested {
                    key: Some("c".into()),
                    instance: "a".into(),
                },
            )
        };
        let ours = p.acquirer_key.as_str().to_owned();
        // A recorded resend, and a take-over before the request, move it.
        let history = [charge(secs(50), &ours), requested(secs(60))];
        assert_eq!(
            wait_before_look_up(&p, &history, secs(150), window),
            Some(Duration::from_secs(20))
        );
        let history = [taken(secs(70)), requested(secs(80))];
        assert_eq!(
            wait_before_look_up(&p, &history, secs(180), window),
            Some(Duration::from_secs(10))
        );
        // Take-overs after the request send nothing: they do not move it,
        // so a cancel is not postponed forever by those who look.
        let history = [requested(secs(10)), taken(secs(200)), taken(secs(300))];
        assert_eq!(wait_before_look_up(&p, &history, secs(301), window), None);
        // Another acquirer key's calls (a refund) do not count.
        let history = [charge(secs(500), "refund-key")];
        assert_eq!(wait_before_look_up(&p, &history, secs(501), window), None);
    }

    #[test]
    fn the_refund_key_is_derived_from_the_payment() {
        let id = PaymentId::generate();
        assert_eq!(cancel_refund_key(&id), cancel_refund_key(&id));
        assert!(cancel_refund_key(&id).as_str().ends_with(id.as_str()));
    }
}
