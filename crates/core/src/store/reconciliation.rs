//! The reconciliation role: what settles payments outside their own
//! request (the reconciler, the acquirer's webhooks) and what it reads.

use std::time::Duration;

use async_trait::async_trait;
use time::OffsetDateTime;

use super::StoreError;
use crate::api_key::Mode;
use crate::webhook::EventKind;
use crate::{AcquirerKey, Payment, PaymentId, Settlement, ShopId};

/// How a conditional settlement (`pending` -> final) ended.
#[derive(Debug, Clone, PartialEq)]
pub enum SettleOutcome {
    /// The payment was pending and now is settled.
    Settled(Payment),
    /// The payment was already final; nothing changed. Final states never change.
    AlreadyFinal(Payment),
    /// No such payment.
    NotFound,
}

/// An authentic acquirer event, as the store records it.
#[derive(Debug, Clone)]
pub struct InboundEvent {
    /// The acquirer's event id: the same on every delivery.
    pub event_id: String,
    /// What happened.
    pub kind: EventKind,
    /// The acquirer key of the payment it is about.
    pub acquirer_key: AcquirerKey,
    /// The shop the acquirer says it belongs to.
    pub shop_id: ShopId,
    /// The definite outcome it reports, if any (not for `payment.processing`).
    pub settlement: Option<Settlement>,
}

/// What recording an acquirer event did.
#[derive(Debug, Clone, PartialEq)]
pub enum EventRecorded {
    /// The event id was recorded before: nothing changed.
    Duplicate,
    /// The event settled the pending payment.
    Settled(Payment),
    /// The event was recorded and the payment did not move: it was already
    /// final, or the event carries no outcome.
    Unchanged(Payment),
    /// The event was recorded, but no payment of that shop has its acquirer key.
    UnknownPayment,
}

/// Payments against the acquirer's word: the reads the reconciler compares
/// with the acquirer's ledger, and the conditional settlements by the
/// reconciler and by the acquirer's webhooks.
#[async_trait]
pub trait Reconciliation: Send + Sync + 'static {
    /// Up to `limit` pending payments of any shop created at least
    /// `older_than` ago, oldest first.
    async fn pending_payments(
        &self,
        older_than: Duration,
        limit: u32,
    ) -> Result<Vec<Payment>, StoreError> {
        self.pending_payments_of(None, older_than, limit).await
    }

    /// Up to `limit` pending payments of the shops' `mode` (every mode with
    /// `None`) created at least `older_than` ago, oldest first: what the
    /// reconciler of a mode asks its acquirer about (one mode's backlog
    /// never fills the other's batch).
    async fn pending_payments_of(
        &self,
        mode: Option<Mode>,
        older_than: Duration,
        limit: u32,
    ) -> Result<Vec<Payment>, StoreError>;

    /// Up to `limit` payments of any shop created in `[from, to)`, ordered by
    /// id, after the id `after` (keyset pagination): what the reconciler
    /// compares with the acquirer's ledger.
    async fn payments_created_between(
        &self,
        from: OffsetDateTime,
        to: OffsetDateTime,
        after: Option<&PaymentId>,
        limit: u32,
    ) -> Result<Vec<Payment>, StoreError>;

    /// The payment that carries an acquirer key (they are unique).
    async fn payment_by_acquirer_key(
        &self,
        key: &AcquirerKey,
    ) -> Result<Option<Payment>, StoreError>;

    /// Settles a pending payment with a definite acquirer answer learnt
    /// outside the payment's own request (reconciler): a conditional
    /// transition `pending` -> final. Its key, if unfinished, is left to its
    /// next retry or the completer, which answer from the settled payment.
    /// When the payment moved, its merchant event is inserted in the same
    /// transaction (settling twice writes one event).
    async fn settle_payment(
        &self,
        shop_id: &ShopId,
        id: &PaymentId,
        settlement: &Settlement,
    ) -> Result<SettleOutcome, StoreError>;

    /// One transaction: records an acquirer event id (unique: a repeat
    /// changes nothing) and applies its settlement, if any, to the pending
    /// payment with its acquirer key and shop, with the merchant event of
    /// that transition when it settled the payment.
    async fn record_event(&self, event: &InboundEvent) -> Result<EventRecorded, StoreError>;
}
