//! The keys role: an idempotency key's claim, its lease and its finish, and
//! the types they speak in.

use std::time::Duration;

use async_trait::async_trait;
use time::OffsetDateTime;
use uuid::Uuid;

use super::StoreError;
use crate::history::{AcquirerAttempt, RepeatCounts};
use crate::{Capture, CaptureId};
use crate::{
    Fingerprint, IdempotencyKey, NewPayment, Payment, PaymentId, Refund, RefundId, Settlement,
    ShopId,
};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
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
    /// A cancel key's claim committed: the key names the payment to cancel,
    /// and the cancellation is recorded in the payment's history. Resume by
    /// driving the payment's own key to an end (looking the charge up,
    /// never sending it), then answer with the payment.
    CancelRequested,
    /// Phase 1 of a capture committed: the key row, the capture row and its
    /// reservation on the payment's hold exist. Resume at the acquirer's
    /// capture call.
    CaptureCreated,
    /// A void key's claim committed: the key names the payment, whose hold
    /// is being released. Resume at the acquirer's void call.
    VoidRequested,
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
            Self::CancelRequested => "cancel_requested",
            Self::CaptureCreated => "capture_created",
            Self::VoidRequested => "void_requested",
            Self::Finished => "finished",
        }
    }

    /// Parses a stored value.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "payment_created" => Some(Self::PaymentCreated),
            "order_already_paid" => Some(Self::OrderAlreadyPaid),
            "refund_created" => Some(Self::RefundCreated),
            "cancel_requested" => Some(Self::CancelRequested),
            "capture_created" => Some(Self::CaptureCreated),
            "void_requested" => Some(Self::VoidRequested),
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
    /// The capture it created, for a capture key.
    pub capture_id: Option<CaptureId>,
    /// The final response, once finished.
    pub response: Option<StoredResponse>,
    /// Whether a lease is held and unexpired, judged by the store's clock.
    pub lease_active: bool,
    /// How much longer the key is parked (see [`Keys::park_lease`]): no
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

/// Who holds an unfinished key's lease, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLease {
    /// The instance that holds it (its configured name, by default
    /// `hostname:pid`), as it wrote it at its claim or take-over. Never the
    /// lease token, which is the fencing secret.
    pub holder: Option<String>,
    /// When it runs out, by the store's clock (in the past: it ran out and
    /// the key may be taken over).
    pub until: OffsetDateTime,
}

/// A key as introspection shows it: its state, its first request and its
/// repeats, without the stored response's headers and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyInfo {
    /// The key.
    pub key: IdempotencyKey,
    /// How far it got ([`RecoveryPoint::Finished`]: finished, else in progress).
    pub recovery_point: RecoveryPoint,
    /// The first request's method.
    pub method: String,
    /// The first request's path.
    pub path: String,
    /// The first request's fingerprint.
    pub fingerprint: Fingerprint,
    /// When the first request came (the key was claimed).
    pub created_at: OffsetDateTime,
    /// When the last repeat reached the store, if any did.
    pub last_repeat_at: Option<OffsetDateTime>,
    /// How many requests with this key reached the store after the first
    /// ([`KeyRecord::replays`]; repeats an instance answered from its own
    /// cache are not counted).
    pub repeats: u64,
    /// When a finished key stops being replayed (counts as new).
    pub expires_at: OffsetDateTime,
    /// The lease, while it is in progress and held (`None` when finished,
    /// or parked: nobody holds it).
    pub lease: Option<KeyLease>,
    /// Until when a parked key may not be taken over
    /// ([`Keys::park_lease`]), while it is parked.
    pub parked_until: Option<OffsetDateTime>,
    /// The stored response's status code, once finished.
    pub status: Option<u16>,
    /// The payment it answers with (for a refund key: the refunded payment).
    pub payment_id: Option<PaymentId>,
    /// The refund it created, for a refund key.
    pub refund_id: Option<RefundId>,
    /// The capture it created, for a capture key.
    pub capture_id: Option<CaptureId>,
    /// Its repeats by answer (replays, 409s, 422s), with when each was last.
    pub repeats_by: RepeatCounts,
}

impl KeyInfo {
    /// Whether the key is finished (its response is the answer forever).
    pub fn is_finished(&self) -> bool {
        self.recovery_point == RecoveryPoint::Finished
    }
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
    /// The key's capture, for a capture key (boxed, as the refund).
    pub capture: Option<Box<Capture>>,
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

/// The result of a cancel key's claim.
#[derive(Debug, Clone)]
pub enum CancelClaim {
    /// The key was new: its row is committed (recovery point
    /// [`RecoveryPoint::CancelRequested`], naming the payment), the payment's
    /// history records the request, and this caller holds the lease.
    Acquired(Acquired),
    /// The key exists; nothing was written.
    Exists(KeyRecord),
    /// The shop has no such payment; nothing was written.
    NoPayment,
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

/// The idempotency keys and their leases: phase 1 of a payment, take-overs,
/// the lease's renewals and ends, phase 3, reading a key, and the keys the
/// sweeper deletes and the completer drives.
#[async_trait]
pub trait Keys: Send + Sync + 'static {
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

    /// A cancel key's claim, one transaction: inserts the key row (naming
    /// the payment, [`RecoveryPoint::CancelRequested`], with a fresh lease)
    /// and, when the payment is pending, records
    /// [`HistoryEvent::CancelRequested`](crate::history::HistoryEvent::CancelRequested)
    /// in its history; or, when the key exists and is not an expired
    /// finished key, writes nothing and returns it.
    async fn claim_cancel(
        &self,
        claim: &ClaimRequest,
        payment_id: &PaymentId,
        timing: KeyTiming,
    ) -> Result<CancelClaim, StoreError>;

    /// Records in a pending payment's history that it is to be canceled
    /// (`key`: the cancel key; `None`: the completer gave up on it), unless
    /// it is recorded already. From then on whoever drives the payment's
    /// key only looks its charge up. Returns the payment as it stands
    /// (`None`: no such payment).
    async fn request_cancel(
        &self,
        shop_id: &ShopId,
        payment_id: &PaymentId,
        key: Option<&IdempotencyKey>,
    ) -> Result<Option<Payment>, StoreError>;

    /// Takes over an unfinished key whose lease expired: a compare-and-set that
    /// installs a new lease token. `None` when the key is finished, its lease is
    /// alive, someone else took it first, or it now belongs to a request with
    /// another fingerprint (it expired and was claimed anew meanwhile).
    ///
    /// A parked payment key (see [`Keys::park_lease`]) is taken over before
    /// its hold has passed once its payment is no longer pending (a webhook
    /// or the reconciler settled it): the hold only keeps anyone from looking
    /// at the acquirer too early, and a settled payment needs no look: its
    /// answer is stored at once, so the answer a repeat is given is the one
    /// every later repeat replays. A parked refund key waits out its hold.
    async fn take_over(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> Result<Option<Acquired>, StoreError>;

    /// Extends a lease held with this token. `false` if it was taken over,
    /// released or parked.
    async fn renew_lease(&self, lease: &Lease, duration: Duration) -> Result<bool, StoreError>;

    /// Ends a lease early (the outcome is unknown and the next retry should
    /// resume at once). `false` if it was taken over. The token is cleared,
    /// so a renew already on its way (a heartbeat cut off mid-flight) that
    /// commits after the release cannot revive the lease.
    ///
    /// `attempts` are the acquirer calls made under this lease (their
    /// history entries are written in the same statement).
    async fn release_lease(
        &self,
        lease: &Lease,
        attempts: &[AcquirerAttempt],
    ) -> Result<bool, StoreError>;

    /// Ends a lease but parks the key for `hold` by the store's clock:
    /// nobody holds it ([`KeyRecord::lease_active`] is `false`,
    /// [`KeyRecord::settling`] says for how long), and nobody can take it over
    /// until `hold` has passed. Used after an unknown outcome at an acquirer
    /// that ignores keys, whose charge may still be in flight: only once it
    /// has had time to appear is it looked up, and sent again if it did not.
    /// `false` if the lease was taken over.
    /// `attempts` as for [`Keys::release_lease`].
    async fn park_lease(
        &self,
        lease: &Lease,
        hold: Duration,
        attempts: &[AcquirerAttempt],
    ) -> Result<bool, StoreError>;

    /// Writes the history entries of acquirer calls made under a lease that
    /// was then lost: a fenced write (a release, a park, a finish) found it
    /// taken over and wrote nothing. The calls happened whoever holds the
    /// key now, and one may have charged, so the key's payment (and refund)
    /// gets them, named after this instance. Nothing else is written, and
    /// nothing at all when the key is gone or points at no payment.
    async fn record_lost_lease_calls(
        &self,
        lease: &Lease,
        attempts: &[AcquirerAttempt],
    ) -> Result<(), StoreError>;

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
    ///
    /// The history entries go in the same transaction: each of `attempts`
    /// (the acquirer calls made under this lease), the answer stored, and
    /// the settlement when it moved the payment. A finish that writes
    /// nothing writes none of them.
    async fn finish(
        &self,
        lease: &Lease,
        settlement: Option<(&Payment, &Settlement)>,
        response: &StoredResponse,
        ttl: Duration,
        attempts: &[AcquirerAttempt],
    ) -> Result<FinishOutcome, StoreError>;

    /// One key of one shop.
    async fn key(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
    ) -> Result<Option<KeyRecord>, StoreError>;

    /// One key of one shop as introspection shows it; `None` when the shop
    /// has no such key (or it is a finished key whose expiry passed, which
    /// counts as new).
    async fn key_info(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
    ) -> Result<Option<KeyInfo>, StoreError>;

    /// Deletes up to `batch` finished keys whose expiry has passed; returns how many.
    async fn sweep_expired_keys(&self, batch: u32) -> Result<u64, StoreError>;

    /// Up to `limit` unfinished keys whose lease ran out at least `idle` ago
    /// (or never had one), longest idle first: what the completer drives.
    async fn stalled_keys(&self, idle: Duration, limit: u32)
    -> Result<Vec<StalledKey>, StoreError>;
}
