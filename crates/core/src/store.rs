//! The store: where keys and payments live, and the final arbiter of races.
//!
//! Each method is one atomic step of the engine. Implementations live in the
//! `chargeonce-store` crate (PostgreSQL and SQLite); the engine only sees this trait.

use std::time::Duration;

use async_trait::async_trait;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::events::{AttemptOutcome, DueEvent, Event, EventId, EventQuery, WebhookEndpoint};
use crate::webhook::EventKind;
use crate::{
    AcquirerKey, Fingerprint, IdempotencyKey, NewPayment, NewRefund, Payment, PaymentId, Reference,
    Refund, RefundId, RefundRefusal, RefundSettlement, SecretHash, Settlement, ShopId,
};

/// An error of a store's database driver, boxed: core knows no driver.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a store call failed.
///
/// The variants that come from the database keep the driver's error as
/// their [`source`](std::error::Error::source); their messages include it
/// too, so a log line of the error alone says what happened.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached or did not answer in time. Nothing may
    /// be executed on the strength of a call that failed this way.
    #[error("store unavailable: {source}")]
    Unavailable {
        /// What the driver said.
        source: BoxError,
    },
    /// The store is too busy to take new work now (its queue is full); the
    /// call did nothing. Only calls that start work (a claim, a take-over)
    /// are refused this way; retry later.
    #[error("store overloaded: {source}")]
    Overloaded {
        /// What the store's queue said.
        source: BoxError,
    },
    /// A row could not be read back into a domain value (a bug or a manual edit).
    #[error("corrupt row: {what}")]
    Corrupt {
        /// What is wrong with the row.
        what: String,
        /// The error that found it, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// `add_shop` for a shop id that exists.
    #[error("shop `{0}` already exists")]
    ShopExists(String),
    /// Any other database error.
    #[error("store error: {0}")]
    Other(#[source] BoxError),
}

impl StoreError {
    /// [`StoreError::Unavailable`] because of `source`.
    pub fn unavailable(source: impl Into<BoxError>) -> Self {
        Self::Unavailable {
            source: source.into(),
        }
    }

    /// [`StoreError::Overloaded`] because of `source`.
    pub fn overloaded(source: impl Into<BoxError>) -> Self {
        Self::Overloaded {
            source: source.into(),
        }
    }

    /// [`StoreError::Corrupt`], saying what is wrong.
    pub fn corrupt(what: impl Into<String>) -> Self {
        Self::Corrupt {
            what: what.into(),
            source: None,
        }
    }

    /// [`StoreError::Corrupt`] found by `source`, which says what is wrong.
    pub fn corrupt_by(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Corrupt {
            what: source.to_string(),
            source: Some(Box::new(source)),
        }
    }

    /// [`StoreError::Other`] because of `source` (an error, or a message).
    pub fn other(source: impl Into<BoxError>) -> Self {
        Self::Other(source.into())
    }
}

/// The fencing token of a lease: whoever holds it may finish the operation;
/// a worker whose lease was taken over can no longer write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseToken(Uuid);

impl LeaseToken {
    /// A fresh random token.
    pub fn generate() -> Self {
        Self(Uuid::new_v4())
    }

    /// Wraps a stored token.
    pub fn from_uuid(uuid: Uuid) -> Self {
        Self(uuid)
    }

    /// The token as a UUID, for storage.
    pub fn as_uuid(&self) -> Uuid {
        self.0
    }
}

/// The right to drive one key's operation, until the store's clock passes its deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The shop.
    pub shop_id: ShopId,
    /// The key.
    pub key: IdempotencyKey,
    /// The fencing token.
    pub token: LeaseToken,
}

/// How far an operation got. Saved atomically with the state it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecoveryPoint {
    /// Phase 1 committed: the key row and the payment row it created exist.
    /// Resume at the acquirer call.
    PaymentCreated,
    /// Phase 1 committed: the order already had a pending or succeeded payment
    /// (made under another key, or under this key before it expired); the key
    /// answers with that payment and charges nothing.
    OrderAlreadyPaid,
    /// Phase 1 of a refund committed: the key row, the refund row and the
    /// reservation of its amount on the payment exist. Resume at the
    /// acquirer's refund call.
    RefundCreated,
    /// Phase 3 committed: the response is stored and is the answer forever.
    Finished,
}

impl RecoveryPoint {
    /// As stored.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::PaymentCreated => "payment_created",
            Self::OrderAlreadyPaid => "order_already_paid",
            Self::RefundCreated => "refund_created",
            Self::Finished => "finished",
        }
    }

    /// Parses a stored value.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "payment_created" => Some(Self::PaymentCreated),
            "order_already_paid" => Some(Self::OrderAlreadyPaid),
            "refund_created" => Some(Self::RefundCreated),
            "finished" => Some(Self::Finished),
            _ => None,
        }
    }
}

/// A response as the first request got it, replayed byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// The HTTP status code (the engine treats it as an opaque number).
    pub status: u16,
    /// Response headers that are part of the answer (`content-type`, `location`).
    pub headers: Vec<(String, String)>,
    /// The body, exactly as first sent.
    pub body: Vec<u8>,
}

/// What the first request with a key was, to tell a retry from a misuse.
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    /// The authenticated shop.
    pub shop_id: ShopId,
    /// The key.
    pub key: IdempotencyKey,
    /// Fingerprint of method, path and canonical body.
    pub fingerprint: Fingerprint,
    /// The method, kept for introspection.
    pub method: String,
    /// The path, kept for introspection.
    pub path: String,
}

/// How long leases and keys live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyTiming {
    /// How long a lease lasts without renewal.
    pub lease: Duration,
    /// How long a finished key is kept and replayed (the published retention).
    pub ttl: Duration,
}

/// A stored key, as read back.
#[derive(Debug, Clone)]
pub struct KeyRecord {
    /// The shop.
    pub shop_id: ShopId,
    /// The key.
    pub key: IdempotencyKey,
    /// The first request's fingerprint.
    pub fingerprint: Fingerprint,
    /// The first request's method.
    pub method: String,
    /// The first request's path.
    pub path: String,
    /// How far it got.
    pub recovery_point: RecoveryPoint,
    /// The payment it answers with (for a refund key: the refunded payment).
    pub payment_id: Option<PaymentId>,
    /// The refund it created, for a refund key.
    pub refund_id: Option<RefundId>,
    /// The final response, once finished.
    pub response: Option<StoredResponse>,
    /// Whether a lease is held and unexpired, judged by the store's clock.
    pub lease_active: bool,
    /// How much longer the key is parked (see [`Store::park_lease`]): no
    /// request holds it, but it may not be taken over yet because the
    /// outcome of a call to an acquirer that ignores keys may still appear.
    /// `None` when it is not parked (or the parking ran out).
    pub settling: Option<Duration>,
    /// Unix milliseconds of creation.
    pub created_at_ms: i64,
    /// Unix milliseconds after which a finished key counts as new.
    pub expires_at_ms: i64,
    /// How many requests came with this key after its first one (replays,
    /// 409s, 422s, resumed retries). Many point at client timeouts or double
    /// submits.
    pub replays: u64,
}

/// An unfinished operation this caller now drives: after a fresh claim, or
/// after taking over an expired lease.
#[derive(Debug, Clone)]
pub struct Acquired {
    /// The lease this caller holds.
    pub lease: Lease,
    /// Where to resume: [`RecoveryPoint::PaymentCreated`],
    /// [`RecoveryPoint::OrderAlreadyPaid`] or [`RecoveryPoint::RefundCreated`].
    pub recovery_point: RecoveryPoint,
    /// The key's payment (for a refund key: the refunded payment).
    pub payment: Payment,
    /// The key's refund, for a refund key (boxed: most keys are payments').
    pub refund: Option<Box<Refund>>,
}

/// The result of phase 1.
#[derive(Debug, Clone)]
pub enum Claim {
    /// The key was new (or expired and finished): the key row and the payment
    /// row are committed, and this caller holds the lease. When the order
    /// already had a pending or succeeded payment, the recovery point is
    /// [`RecoveryPoint::OrderAlreadyPaid`], the payment is that one, and no new
    /// payment was inserted.
    Acquired(Acquired),
    /// The key exists; nothing was written.
    Exists(KeyRecord),
}

/// The result of phase 1 of a refund.
#[derive(Debug, Clone)]
pub enum RefundClaim {
    /// The key was new (or expired and finished): the key row, the refund row
    /// and the reservation are committed, and this caller holds the lease
    /// (recovery point [`RecoveryPoint::RefundCreated`]).
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

/// How phase 3 ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishOutcome {
    /// The response is stored and the key finished (and the payment settled,
    /// when a settlement was given).
    Stored,
    /// The lease was taken over: nothing was written.
    LeaseLost,
    /// A settlement was given, but the payment is no longer pending (a webhook
    /// or the reconciler settled it first): nothing was written. Re-read the
    /// payment and store a response that agrees with it.
    PaymentAlreadySettled,
}

/// An unfinished key whose lease ran out and that nobody drives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StalledKey {
    /// The shop.
    pub shop_id: ShopId,
    /// The key.
    pub key: IdempotencyKey,
    /// Its first request's fingerprint (a take-over must present it).
    pub fingerprint: Fingerprint,
}

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

/// Storage for keys, payments and shops. Every method is atomic; leases and
/// expiry are judged by the store's clock, never the caller's.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Phase 1, one transaction: inserts the key row with a fresh lease and the
    /// payment row (or links the order's existing pending/succeeded payment),
    /// or, when the key exists and is not an expired finished key, writes
    /// nothing and returns it, read in a statement that sees every commit
    /// made before it. The (shop, key) primary key is the arbiter of races.
    async fn claim_payment(
        &self,
        claim: &ClaimRequest,
        payment: &NewPayment,
        timing: KeyTiming,
    ) -> Result<Claim, StoreError>;

    /// Takes over an unfinished key whose lease expired: a compare-and-set that
    /// installs a new lease token. `None` when the key is finished, its lease is
    /// alive, someone else took it first, or it now belongs to a request with
    /// another fingerprint (it expired and was claimed anew meanwhile).
    async fn take_over(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> Result<Option<Acquired>, StoreError>;

    /// Extends a lease held with this token. `false` if it was taken over.
    async fn renew_lease(&self, lease: &Lease, duration: Duration) -> Result<bool, StoreError>;

    /// Ends a lease early (the outcome is unknown and the next retry should
    /// resume at once). `false` if it was taken over.
    async fn release_lease(&self, lease: &Lease) -> Result<bool, StoreError>;

    /// Ends a lease but parks the key for `hold` by the store's clock:
    /// nobody holds it ([`KeyRecord::lease_active`] is `false`,
    /// [`KeyRecord::settling`] says for how long), and nobody can take it over
    /// until `hold` has passed. Used after an unknown outcome at an acquirer
    /// that ignores keys, whose charge may still be in flight: only once it
    /// has had time to appear is it looked up, and sent again if it did not.
    /// `false` if the lease was taken over.
    async fn park_lease(&self, lease: &Lease, hold: Duration) -> Result<bool, StoreError>;

    /// Deletes an unfinished key that only links to its order's payment
    /// ([`RecoveryPoint::OrderAlreadyPaid`]), fenced by the lease: that
    /// payment was declined, so the order is free and the key's next request
    /// claims it afresh with its own payment. Nothing else refers to such a
    /// key. `false` if the lease was taken over or the key is not of that kind.
    async fn abandon_key(&self, lease: &Lease) -> Result<bool, StoreError>;

    /// Phase 3, one transaction, fenced by the lease token: applies the
    /// settlement to the payment, which must still be pending, and stores the
    /// final response on the key, to be kept at least `ttl` from now. Nothing
    /// is written if the lease was taken over or the payment was settled by
    /// someone else meanwhile (see [`FinishOutcome`]). When the settlement
    /// moved the payment, its merchant event
    /// ([`NewEvent::payment_settled`](crate::events::NewEvent::payment_settled))
    /// is inserted in the same transaction.
    ///
    /// The payment is the key's payment as the caller read it (pending, or
    /// with the settlement already applied): its id and the lease's shop
    /// select the row, and the event may be built from it with the
    /// settlement applied (a payment's order and amount never change), so a
    /// store can write it in the same statement as the settlement.
    async fn finish(
        &self,
        lease: &Lease,
        settlement: Option<(&Payment, &Settlement)>,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<FinishOutcome, StoreError>;

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
    /// same transaction.
    async fn finish_refund(
        &self,
        lease: &Lease,
        settlement: Option<(&RefundId, &RefundSettlement)>,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<FinishOutcome, StoreError>;

    /// One refund of one shop.
    async fn refund(&self, shop_id: &ShopId, id: &RefundId) -> Result<Option<Refund>, StoreError>;

    /// One payment of one shop.
    async fn payment(
        &self,
        shop_id: &ShopId,
        id: &PaymentId,
    ) -> Result<Option<Payment>, StoreError>;

    /// All payments of one shop for one order, oldest first.
    async fn payments_by_reference(
        &self,
        shop_id: &ShopId,
        reference: &Reference,
    ) -> Result<Vec<Payment>, StoreError>;

    /// One key of one shop.
    async fn key(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
    ) -> Result<Option<KeyRecord>, StoreError>;

    /// Deletes up to `batch` finished keys whose expiry has passed; returns how many.
    async fn sweep_expired_keys(&self, batch: u32) -> Result<u64, StoreError>;

    /// Up to `limit` unfinished keys whose lease ran out at least `idle` ago
    /// (or never had one), longest idle first: what the completer drives.
    async fn stalled_keys(&self, idle: Duration, limit: u32)
    -> Result<Vec<StalledKey>, StoreError>;

    /// Up to `limit` pending payments of any shop created at least
    /// `older_than` ago, oldest first: what the reconciler asks the acquirer about.
    async fn pending_payments(
        &self,
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

    /// Sets a shop's webhook endpoint (or removes it, with `None`). `false`
    /// when there is no such shop.
    async fn set_webhook(
        &self,
        shop_id: &ShopId,
        endpoint: Option<&WebhookEndpoint>,
    ) -> Result<bool, StoreError>;

    /// A shop's merchant events, newest first.
    async fn events(&self, shop_id: &ShopId, query: &EventQuery) -> Result<Vec<Event>, StoreError>;

    /// One merchant event of one shop, with its delivery log.
    async fn event(&self, shop_id: &ShopId, id: &EventId) -> Result<Option<Event>, StoreError>;

    /// Makes an event of the shop due again now, as if just written (its
    /// give-up clock restarts; its attempts are kept). `None` when the shop
    /// has no such event.
    async fn resend_event(
        &self,
        shop_id: &ShopId,
        id: &EventId,
    ) -> Result<Option<Event>, StoreError>;

    /// Claims up to `limit` events that are due, of shops with a webhook
    /// endpoint, for one delivery attempt each: a lease of `lease` keeps
    /// other relays off them meanwhile. An event is only due once every
    /// earlier event of its payment is delivered or given up (per-payment
    /// order). Oldest first.
    async fn claim_due_events(
        &self,
        limit: u32,
        lease: Duration,
    ) -> Result<Vec<DueEvent>, StoreError>;

    /// Records how a delivery attempt ended and ends its lease: delivered,
    /// or due again later, or given up once the give-up time has passed.
    async fn record_attempt(
        &self,
        id: &EventId,
        outcome: &AttemptOutcome,
    ) -> Result<(), StoreError>;

    /// Registers a shop with the hash of its secret.
    async fn add_shop(&self, shop_id: &ShopId, secret: &SecretHash) -> Result<(), StoreError>;

    /// The stored secret hash of a shop.
    async fn shop_secret(&self, shop_id: &ShopId) -> Result<Option<SecretHash>, StoreError>;

    /// Whether the store answers.
    async fn ping(&self) -> Result<(), StoreError>;
}
