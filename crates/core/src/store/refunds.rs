//! The refunds role: a refund's own three phases under its own key.

use std::time::Duration;

use async_trait::async_trait;

use super::{
    Acquired, ClaimRequest, FinishOutcome, KeyRecord, KeyTiming, Lease, Page, PageRequest,
    StoreError, StoredResponse,
};
use crate::history::AcquirerAttempt;
use crate::{NewRefund, PaymentId, Refund, RefundId, RefundRefusal, RefundSettlement, ShopId};

/// A refund's definite answer, as the finish of its request applies it.
///
/// It carries what the refund's merchant event says besides the answer (the
/// refund and its payment's order), so that a store can build the event
/// before the statement that settles the refund, as it does a payment's:
/// neither the refund's amount nor its payment's order ever changes.
#[derive(Debug, Clone, Copy)]
pub struct RefundAnswer<'a> {
    /// The refund as its claim created it (pending).
    pub refund: &'a Refund,
    /// Its payment's order reference.
    pub reference: &'a str,
    /// What the acquirer answered.
    pub settlement: &'a RefundSettlement,
}

impl RefundAnswer<'_> {
    /// The refund's id.
    pub fn id(&self) -> &RefundId {
        &self.refund.id
    }

    /// The refund as the answer leaves it.
    pub fn settled(&self) -> Refund {
        self.refund.clone().settled(self.settlement)
    }
}

/// The result of phase 1 of a refund.
#[derive(Debug, Clone)]
pub enum RefundClaim {
    /// The key was new (or expired and finished): the key row, the refund row
    /// and the reservation are committed, and this caller holds the lease
    /// (recovery point [`RecoveryPoint::RefundCreated`](super::RecoveryPoint::RefundCreated)).
    Acquired(Acquired),
    /// The key exists; nothing was written. Checked before any rule about the
    /// payment, so the retry of a refund that used up the payment still gets
    /// that refund.
    Exists(KeyRecord),
    /// The key was new, but the refund is refused before anything executed;
    /// nothing was written, not even the key, so the client may retry with it
    /// once the cause is gone.
    Refused(RefundRefusal),
}

/// Refunds: phase 1 (claim and reservation), phase 3 (the answer), reads.
#[async_trait]
pub trait Refunds: Send + Sync + 'static {
    /// Phase 1 of a refund, one transaction: inserts the key row with a fresh
    /// lease, reserves the refund's amount on the payment with a conditional
    /// update (the payment must belong to the shop, be `succeeded`, be in the
    /// same currency, and keep its reserved refunds within its amount), and
    /// inserts the refund row. When the key exists and is not an expired
    /// finished key, nothing is written and the key is returned (checked
    /// first); when the reservation is refused, nothing is written.
    async fn claim_refund(
        &self,
        claim: &ClaimRequest,
        refund: &NewRefund,
        timing: KeyTiming,
    ) -> Result<RefundClaim, StoreError>;

    /// Phase 3 of a refund, one transaction, fenced by the lease token:
    /// applies the acquirer's answer to the refund, which must still be
    /// pending (success adds its amount to the payment's refunded amount; a
    /// refusal gives its reservation back), and stores the final response.
    /// [`FinishOutcome::PaymentAlreadySettled`] when the refund is no longer
    /// pending. When the refund moved, its merchant event is inserted in the
    /// same transaction, and so are the history entries, as
    /// [`Keys::finish`](super::Keys::finish) writes them.
    async fn finish_refund(
        &self,
        lease: &Lease,
        settlement: Option<RefundAnswer<'_>>,
        response: &StoredResponse,
        ttl: Duration,
        attempts: &[AcquirerAttempt],
    ) -> Result<FinishOutcome, StoreError>;

    /// One refund of one shop.
    async fn refund(&self, shop_id: &ShopId, id: &RefundId) -> Result<Option<Refund>, StoreError>;

    /// One page of a shop's refunds (of one payment, when `payment_id` is
    /// given), newest first by `(created_at, id)` (keyset pagination). The
    /// cursor must be one of the listed refunds' ids (of the shop, and of
    /// the payment when given), else [`StoreError::UnknownCursor`]. A
    /// payment that is not the shop's lists nothing.
    async fn list_refunds(
        &self,
        shop_id: &ShopId,
        payment_id: Option<&PaymentId>,
        page: &PageRequest<RefundId>,
    ) -> Result<Page<Refund>, StoreError>;
}
