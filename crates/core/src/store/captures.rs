//! The captures role: a capture's phases under its own key, and reading
//! them.

use std::time::Duration;

use async_trait::async_trait;

use super::{
    Acquired, ClaimRequest, FinishOutcome, KeyRecord, KeyTiming, Lease, Page, PageRequest,
    StoreError, StoredResponse,
};
use crate::history::AcquirerAttempt;
use crate::{
    Capture, CaptureClaimRefusal, CaptureId, CaptureSettlement, NewCapture, PaymentId, ShopId,
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

/// Captures: phase 1 (claim and reservation on the hold), phase 3 (the
/// answer), reads.
#[async_trait]
pub trait Captures: Send + Sync + 'static {
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
    /// transaction.
    async fn finish_capture(
        &self,
        lease: &Lease,
        settlement: Option<(&CaptureId, &CaptureSettlement)>,
        response: &StoredResponse,
        ttl: Duration,
        attempts: &[AcquirerAttempt],
    ) -> Result<FinishOutcome, StoreError>;

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
