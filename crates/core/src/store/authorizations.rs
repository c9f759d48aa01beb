//! The authorizations role: a capture's phases under its own key, a void's
//! under its own, the expiry of holds nobody captured, and reading
//! captures.

use std::time::Duration;

use async_trait::async_trait;

use super::{
    Acquired, ClaimRequest, FinishOutcome, KeyRecord, KeyTiming, Lease, Page, PageRequest,
    StoreError, StoredResponse,
};
use crate::history::AcquirerAttempt;
use crate::{
    Capture, CaptureClaimRefusal, CaptureId, CaptureSettlement, NewCapture, Payment, PaymentId,
    ReleaseClaimRefusal, ShopId, VoidSettlement,
};

/// The result of phase 1 of a capture.
#[derive(Debug, Clone)]
pub enum CaptureClaim {
    /// The key was new (or expired and finished): the key row, the capture
    /// row and the reservation on the payment's hold are committed, and this
    /// caller holds the lease (recovery point
    /// [`RecoveryPoint::CaptureCreated`](super::RecoveryPoint::CaptureCreated)).
    Acquired(Acquired),
    /// The key exists; nothing was written. Checked before any rule about the
    /// payment, so the retry of the capture that closed the hold still gets
    /// that capture.
    Exists(KeyRecord),
    /// The key was new, but the capture is refused before anything
    /// executed; nothing was written, not even the key.
    Refused(CaptureClaimRefusal),
}

/// The result of a void key's claim.
#[derive(Debug, Clone)]
pub enum ReleaseClaim {
    /// The key was new (or expired and finished): the key row (recovery
    /// point [`RecoveryPoint::VoidRequested`](super::RecoveryPoint::VoidRequested),
    /// naming the payment) and the hold's move to releasing are committed,
    /// and this caller holds the lease.
    Acquired(Acquired),
    /// The key exists; nothing was written.
    Exists(KeyRecord),
    /// The key was new, but the release is refused before anything
    /// executed; nothing was written, not even the key.
    Refused(ReleaseClaimRefusal),
}

/// Authorizations: a capture's phase 1 (claim and reservation on the hold)
/// and phase 3 (the answer), a void's, the expiry of holds, reads.
#[async_trait]
pub trait Authorizations: Send + Sync + 'static {
    /// Phase 1 of a capture, one transaction: inserts the key row with a
    /// fresh lease, reserves the capture on its payment's hold (the payment
    /// locked, judged by [`crate::capture::reservation`], the hold written
    /// back), and inserts the capture row. When the key exists and is not an
    /// expired finished key, nothing is written and the key is returned
    /// (checked first); when the reservation is refused, nothing is written.
    async fn claim_capture(
        &self,
        claim: &ClaimRequest,
        capture: &NewCapture,
        timing: KeyTiming,
    ) -> Result<CaptureClaim, StoreError>;

    /// Phase 3 of a capture, one transaction, fenced by the lease token:
    /// applies the acquirer's answer to the capture, which must still be
    /// pending, and to its payment's hold
    /// ([`Authorization::capture_settled`](crate::authorization::Authorization::capture_settled):
    /// success takes the amount, a refusal gives the reservation back), and
    /// stores the final response. [`FinishOutcome::PaymentAlreadySettled`]
    /// when the capture is no longer pending. When the capture moved, its
    /// merchant event and history entries are written in the same
    /// transaction. The capture given with the answer is the one its claim
    /// created (pending or with the answer applied: only its ids, amount
    /// and finality are read, which never change), so that a store can
    /// build its event without reading it back.
    async fn finish_capture(
        &self,
        lease: &Lease,
        settlement: Option<(&Capture, &CaptureSettlement)>,
        response: &StoredResponse,
        ttl: Duration,
        attempts: &[AcquirerAttempt],
    ) -> Result<FinishOutcome, StoreError>;

    /// A void key's claim, one transaction: inserts the key row with a
    /// fresh lease, and moves the payment's hold to releasing (the payment
    /// locked, judged by [`crate::capture::release`]: nothing in flight, not
    /// closed). When the key exists and is not an expired finished key,
    /// nothing is written and the key is returned; when the release is
    /// refused, nothing is written.
    async fn claim_void(
        &self,
        claim: &ClaimRequest,
        payment_id: &PaymentId,
        timing: KeyTiming,
    ) -> Result<ReleaseClaim, StoreError>;

    /// The end of a void key, one transaction, fenced by the lease token:
    /// when the acquirer answered, the payment's hold, still releasing for
    /// the void, is released (or, refused, open again:
    /// [`Authorization::release_settled`](crate::authorization::Authorization::release_settled)),
    /// with the `payment.voided` event when released; and the final
    /// response is stored. [`FinishOutcome::PaymentAlreadySettled`] when
    /// the hold is no longer releasing.
    async fn finish_void(
        &self,
        lease: &Lease,
        settlement: Option<(&PaymentId, &VoidSettlement)>,
        response: &StoredResponse,
        ttl: Duration,
        attempts: &[AcquirerAttempt],
    ) -> Result<FinishOutcome, StoreError>;

    /// Up to `limit` authorizations whose hold expired by the store's
    /// clock and is still open, or whose release by expiry was begun and
    /// has not ended (to resume), soonest expired first.
    async fn expired_authorizations(&self, limit: u32) -> Result<Vec<Payment>, StoreError>;

    /// Begins the release of an expired hold: moves it to releasing for
    /// the expiry when it is open, expired by the store's clock and has no
    /// capture in flight; a hold already releasing for the expiry is
    /// returned as it is (to resume). `None` when neither (captured, voided,
    /// a capture in flight, not expired yet).
    async fn begin_expiry(
        &self,
        shop_id: &ShopId,
        payment_id: &PaymentId,
    ) -> Result<Option<Payment>, StoreError>;

    /// Ends the release of an expired hold with the acquirer's answer, in
    /// one transaction: released (with the `payment.expired` event) or,
    /// refused, open again, with the acquirer calls made (`attempts`) in
    /// the payment's history. `None` when the hold was no longer releasing
    /// for the expiry (nothing written); else the payment as it ended.
    async fn end_expiry(
        &self,
        shop_id: &ShopId,
        payment_id: &PaymentId,
        released: bool,
        attempts: &[AcquirerAttempt],
    ) -> Result<Option<Payment>, StoreError>;

    /// One capture of one shop.
    async fn capture(
        &self,
        shop_id: &ShopId,
        id: &CaptureId,
    ) -> Result<Option<Capture>, StoreError>;

    /// One page of a payment's captures, newest first by `(created_at, id)`
    /// (keyset pagination). The cursor must be one of the payment's
    /// captures, else [`StoreError::UnknownCursor`]. A payment that is not
    /// the shop's lists nothing.
    async fn list_captures(
        &self,
        shop_id: &ShopId,
        payment_id: &PaymentId,
        page: &PageRequest<CaptureId>,
    ) -> Result<Page<Capture>, StoreError>;
}
