//! What a request gets when its key exists already, and the completer's
//! take-over of a stalled key.
//!
//! The fingerprint is checked first, on every path: a key reused for another
//! request is refused whatever state it is in. Then: a finished key replays
//! its stored answer; a live lease means someone is working on it (409); a
//! parked key (see [`Store::park_lease`](crate::Store::park_lease)) answers
//! with its pending payment or refund, since nobody may look at the acquirer
//! before the parking runs out, unless its payment was settled meanwhile:
//! then it is taken over and its answer stored, like any other; anything
//! else is an expired lease, taken over by compare-and-set and resumed from
//! its recovery point, exactly as the completer does with a key nobody
//! retries.

use std::time::Duration;

use super::repeats::RepeatSource;
use super::{Engine, EngineError, Holder, Outcome};
use crate::{
    Acquired, ClaimRequest, Fingerprint, IdempotencyKey, KeyRecord, Lease, PaymentRequest,
    RecoveryPoint, ShopId, StalledKey, StoreError,
};

impl Engine {
    /// Drives a stalled key (unfinished, lease run out, nobody retrying) to an
    /// end from its recovery point, exactly as a client retry would: take the
    /// lease over, then resume. `Ok(None)` when someone else holds the key
    /// (a retry came first, or another instance's completer).
    pub async fn complete(&self, stalled: &StalledKey) -> Result<Option<Outcome>, EngineError> {
        let result = self.complete_inner(stalled).await;
        self.observe_error(&result, "complete");
        result
    }

    async fn complete_inner(&self, stalled: &StalledKey) -> Result<Option<Outcome>, EngineError> {
        let taken = self
            .take_over(&stalled.shop_id, &stalled.key, &stalled.fingerprint)
            .await?;
        let Some(acquired) = taken else {
            return Ok(None);
        };
        tracing::info!(key = %acquired.lease.key, payment = %acquired.payment.id, "completer took over a stalled key");
        // A freed order: its client's next request gets an attempt of its own.
        self.resume(acquired, None).await
    }

    /// Decides what a request gets when its key already exists; `None` when
    /// the key only linked to its order's payment, which was declined: it
    /// was deleted, and the request claims the order afresh.
    /// `requested`: the payment the request asks for (`None` for a refund
    /// key's request).
    pub(super) async fn on_existing(
        &self,
        claim: &ClaimRequest,
        record: KeyRecord,
        requested: Option<&PaymentRequest>,
    ) -> Result<Option<Outcome>, EngineError> {
        self.repeat_policy().note(
            self.observer.as_ref(),
            &record.shop_id,
            &record.key,
            record.replays,
            RepeatSource::Store,
        );
        if record.fingerprint != claim.fingerprint {
            tracing::info!(key = %claim.key, "key reused with another request");
            self.observer.mismatch();
            return Ok(Some(Outcome::Mismatch));
        }
        if record.recovery_point == RecoveryPoint::Finished {
            let response = record.response.ok_or_else(|| {
                StoreError::corrupt(format!("finished key {} has no response", claim.key))
            })?;
            self.observer.replayed();
            return Ok(Some(Outcome::Replayed(response)));
        }
        if record.lease_active {
            self.observer.in_progress();
            return Ok(Some(self.in_progress()));
        }
        if let Some(remaining) = record.settling {
            return self.settling(&record, remaining).await.map(Some);
        }
        let taken = self
            .take_over(&claim.shop_id, &claim.key, &claim.fingerprint)
            .await?;
        let Some(acquired) = taken else {
            self.observer.in_progress();
            return Ok(Some(self.in_progress()));
        };
        tracing::info!(key = %acquired.lease.key, payment = %acquired.payment.id, "expired lease taken over");
        self.resume(acquired, requested).await
    }

    /// Takes a key's expired lease over (compare-and-set: `None` when
    /// someone else holds it now).
    async fn take_over(
        &self,
        shop: &ShopId,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
    ) -> Result<Option<Acquired>, EngineError> {
        let lease = self.config.timing.lease;
        Ok(self.store.take_over(shop, key, fingerprint, lease).await?)
    }

    /// Resumes a key just taken over, or frees its order (`None`) when the
    /// key only linked to its order's payment and that payment was declined.
    /// A linked key is judged against `requested`, the payment its request
    /// asks for; the completer has none, and leaves a linked key to its
    /// client's next request (deleted: nothing was charged under it).
    async fn resume(
        &self,
        acquired: Acquired,
        requested: Option<&PaymentRequest>,
    ) -> Result<Option<Outcome>, EngineError> {
        self.observer.taken_over();
        let linked = acquired.recovery_point == RecoveryPoint::OrderAlreadyPaid;
        if links_declined_order(&acquired) || (linked && requested.is_none()) {
            self.abandon(&acquired.lease).await?;
            return Ok(None);
        }
        if let Some(requested) = requested
            && let Some(outcome) = self.paid_otherwise(&acquired, requested).await?
        {
            return Ok(Some(outcome));
        }
        self.drive(acquired, Holder::Resumer).await.map(Some)
    }

    /// The answer for a parked key (see [`Store::park_lease`](crate::Store::park_lease)):
    /// its payment or refund is pending, and nobody may look at the acquirer
    /// again before the parking runs out; a payment settled meanwhile is
    /// the key's answer, stored first.
    async fn settling(
        &self,
        record: &KeyRecord,
        remaining: Duration,
    ) -> Result<Outcome, EngineError> {
        let retry_after = remaining.max(self.config.retry_after);
        let missing =
            || StoreError::corrupt(format!("parked key {} lost its operation", record.key));
        if let Some(refund_id) = &record.refund_id {
            let refund = self
                .store
                .refund(&record.shop_id, refund_id)
                .await?
                .ok_or_else(missing)?;
            return Ok(Outcome::RefundPending {
                refund,
                retry_after,
            });
        }
        let payment_id = record.payment_id.as_ref().ok_or_else(missing)?;
        let payment = self
            .store
            .payment(&record.shop_id, payment_id)
            .await?
            .ok_or_else(missing)?;
        if !payment.status.is_final() {
            return Ok(Outcome::Pending {
                payment,
                retry_after,
            });
        }
        // Settled meanwhile (a webhook, the reconciler): that is the answer,
        // and it is stored before it is given. Rendered here and given
        // unstored, it was contradicted later: the key stayed parked, the
        // client refunded part of the payment, and the answer the completer
        // then stored showed the refund (chaos, issue 39). The store lets a
        // parked key go as soon as its payment is settled.
        let taken = self
            .take_over(&record.shop_id, &record.key, &record.fingerprint)
            .await?;
        let Some(acquired) = taken else {
            self.observer.in_progress();
            return Ok(self.in_progress());
        };
        if !acquired.payment.status.is_final() {
            return Err(StoreError::corrupt(format!(
                "parked key {} taken over while its payment is pending",
                record.key
            ))
            .into());
        }
        tracing::info!(key = %record.key, payment = %acquired.payment.id, "parked key's payment settled meanwhile; its answer stored");
        Ok(self
            .resume(acquired, None)
            .await?
            .unwrap_or_else(|| self.in_progress()))
    }

    /// Deletes a key that only linked to its order's payment (declined
    /// since, of another amount, or met by the completer, which has no
    /// request to judge it by): it charged nothing, and its next request
    /// claims the order afresh.
    pub(super) async fn abandon(&self, lease: &Lease) -> Result<(), EngineError> {
        if self.store.abandon_key(lease).await? {
            tracing::info!(key = %lease.key, "a key that only linked to its order's payment was deleted; its next request claims the order afresh");
        }
        Ok(())
    }
}

/// Whether a taken-over key only links to its order's payment and that
/// payment was declined: the order is free, and the key must get an attempt
/// of its own rather than the other payment's decline.
fn links_declined_order(acquired: &Acquired) -> bool {
    acquired.recovery_point == RecoveryPoint::OrderAlreadyPaid
        && acquired.payment.status.frees_order()
}
