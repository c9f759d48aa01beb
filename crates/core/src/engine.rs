//! The idempotency engine: claim, call the acquirer, finish — each an atomic phase.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::task::AbortOnDropHandle;

use crate::acquirer::look_up;
use crate::observe::{AcquirerCall, AcquirerOutcomeKind, NoObserver, Observer};
use crate::{
    Acquired, Acquirer, AcquirerError, AcquirerRefund, ChargeRequest, ChargeResult, Claim,
    ClaimRequest, FinishOutcome, KeyRecord, KeyTiming, Lease, NewPayment, NewRefund, Payment,
    PaymentRequest, PaymentStatus, RecoveryPoint, Refund, RefundClaim, RefundRefusal,
    RefundRequest, RefundSettlement, RefundStatus, Settlement, StalledKey, Store, StoreError,
    StoredResponse,
};

/// What a final answer is about; the caller's [`Render`] turns it into bytes.
#[derive(Debug, Clone, Copy)]
pub enum Rendered<'a> {
    /// The payment was charged by this key's operation.
    Charged(&'a Payment),
    /// The acquirer declined this key's payment.
    Declined(&'a Payment),
    /// The order already had a pending or succeeded payment under another key;
    /// this key answers with that payment and charged nothing.
    AlreadyExists(&'a Payment),
    /// The acquirer gave this key's refund back to the payer.
    Refunded(&'a Refund),
    /// The acquirer definitively refused this key's refund; its reservation
    /// was given back.
    RefundFailed(&'a Refund),
}

/// Turns a final answer into the response stored against the key and replayed
/// byte for byte. The HTTP layer implements it; the engine never looks inside.
pub trait Render: Send + Sync + 'static {
    /// Renders one final answer.
    fn render(&self, what: Rendered<'_>) -> StoredResponse;
}

/// What happened to a request, for the HTTP layer to answer.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// This request ran the operation to a final answer, now stored.
    Executed(StoredResponse),
    /// A finished key with the same fingerprint: the stored first answer.
    Replayed(StoredResponse),
    /// No definite answer yet, and none is stored: the acquirer's answer is not
    /// known (timeout, lost answer), or the key answers with its order's payment
    /// and that payment is still pending. A retry with the same key resumes.
    Pending {
        /// The pending payment.
        payment: Payment,
        /// When to try again.
        retry_after: Duration,
    },
    /// Another request holds the key's lease right now.
    InProgress {
        /// When to try again.
        retry_after: Duration,
    },
    /// The key was first used for another request (body, path or method).
    Mismatch,
    /// A refund whose acquirer answer is not known yet; nothing is stored
    /// and a retry with the same key resumes.
    RefundPending {
        /// The pending refund.
        refund: Refund,
        /// When to try again.
        retry_after: Duration,
    },
    /// The acquirer could not be reached for a refund and certainly got
    /// nothing; the refund stays pending and a retry with the same key sends it.
    RefundAcquirerUnavailable {
        /// The pending refund.
        refund: Refund,
        /// When to try again.
        retry_after: Duration,
    },
    /// The refund was refused before anything executed; nothing is stored
    /// against the key.
    RefundRefused(RefundRefusal),
    /// The acquirer could not be reached and certainly got nothing; the payment
    /// stays pending and a retry with the same key sends it.
    AcquirerUnavailable {
        /// The pending payment.
        payment: Payment,
        /// When to try again.
        retry_after: Duration,
    },
}

/// Why the engine could not give an answer.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The store failed before anything was executed: nothing happened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The acquirer answered, but the answer could not be recorded. The key
    /// keeps its recovery point; a retry with the same key gets the same
    /// acquirer answer (it is idempotent on its key) and records it.
    #[error("the acquirer's answer could not be recorded: {0}")]
    Unrecorded(StoreError),
}

/// Settings that cannot work together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A zero lease would let every request take over every other.
    #[error("the lease must be longer than zero")]
    ZeroLease,
    /// A zero acquirer timeout would give up on every call before sending it.
    #[error("the acquirer timeout must be longer than zero")]
    ZeroAcquirerTimeout,
    /// A settle window shorter than the acquirer timeout would look a charge
    /// up (and send it again) while the first attempt may still be running.
    #[error("the settle window must be at least the acquirer timeout")]
    SettleWindowTooShort,
}

/// Engine settings.
#[derive(Debug, Clone, Copy)]
pub struct EngineConfig {
    /// Lease length and key retention.
    pub timing: KeyTiming,
    /// The longest an acquirer call may take before its outcome counts as
    /// unknown. It may exceed the lease: the lease is renewed during the call.
    pub acquirer_timeout: Duration,
    /// What to tell a client that should come back later.
    pub retry_after: Duration,
    /// A key repeated this many times after its first request is logged as a
    /// warning (again at every doubling): repeats point at client timeouts or
    /// double submits.
    pub repeat_warning: u64,
    /// For an acquirer that ignores keys ([`Acquirer::is_idempotent`] is
    /// `false`): how long after an attempt was sent nobody looks it up or
    /// sends it again. An attempt whose answer was lost may still be in
    /// flight at the provider and be recorded late; a look-up before it
    /// appears would find nothing and charge twice. Keep it well above the
    /// acquirer timeout and the provider's own processing time.
    pub settle_window: Duration,
}

impl EngineConfig {
    /// Checks that the settings can work together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let lease = self.timing.lease;
        if lease.is_zero() {
            return Err(ConfigError::ZeroLease);
        }
        if self.acquirer_timeout.is_zero() {
            return Err(ConfigError::ZeroAcquirerTimeout);
        }
        if self.settle_window < self.acquirer_timeout {
            return Err(ConfigError::SettleWindowTooShort);
        }
        Ok(())
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            timing: KeyTiming {
                lease: Duration::from_secs(30),
                ttl: Duration::from_secs(24 * 60 * 60),
            },
            acquirer_timeout: Duration::from_secs(10),
            retry_after: Duration::from_secs(1),
            repeat_warning: 10,
            settle_window: DEFAULT_SETTLE_WINDOW,
        }
    }
}

/// The default [`EngineConfig::settle_window`]: two minutes, twelve times
/// the default acquirer timeout.
pub const DEFAULT_SETTLE_WINDOW: Duration = Duration::from_secs(120);

/// The idempotency engine. Cheap to share behind an `Arc`.
///
/// Run [`Engine::pay`] where a dropped future cannot cut it halfway (a spawned
/// task): every step is recoverable anyway, but a finished operation is better
/// than one left for a take-over.
pub struct Engine {
    store: Arc<dyn Store>,
    acquirer: Arc<dyn Acquirer>,
    render: Arc<dyn Render>,
    config: EngineConfig,
    observer: Arc<dyn Observer>,
}

/// How this caller came to hold a key's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    /// It claimed the key just now: nobody sent the payment before.
    Claimant,
    /// It took over an expired lease (a retry or the completer): the payment
    /// may have reached the acquirer already.
    Resumer,
}

impl Engine {
    /// Wires an engine, refusing settings that cannot work together.
    pub fn new(
        store: Arc<dyn Store>,
        acquirer: Arc<dyn Acquirer>,
        render: Arc<dyn Render>,
        config: EngineConfig,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self {
            store,
            acquirer,
            render,
            config,
            observer: Arc::new(NoObserver),
        })
    }

    /// Reports claims, replays, conflicts, take-overs, acquirer calls and
    /// store errors to `observer` (metrics).
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = observer;
        self
    }

    /// The observer (the workers report through it too).
    pub fn observer(&self) -> &Arc<dyn Observer> {
        &self.observer
    }

    /// The acquirer.
    pub fn acquirer(&self) -> &Arc<dyn Acquirer> {
        &self.acquirer
    }

    /// The store, for reads.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The settings.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

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
        let new = NewPayment::new(claim.shop_id.clone(), claim.key.clone(), request);
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
                    return self.drive(acquired, Holder::Claimant).await;
                }
                Claim::Exists(record) => match self.on_existing(&claim, record).await? {
                    Existing::Answered(outcome) => return Ok(outcome),
                    Existing::OrderFreed => {}
                },
            }
        }
        Ok(self.in_progress())
    }

    /// Refunds (part of) a payment under an idempotency key, or answers as
    /// the key's first request did. The key is looked up before any rule
    /// about the payment: the retry of a refund that used the payment up gets
    /// that refund, never "exceeds amount".
    pub async fn refund(
        &self,
        claim: ClaimRequest,
        refund: NewRefund,
    ) -> Result<Outcome, EngineError> {
        let result = async {
            match self
                .store
                .claim_refund(&claim, &refund, self.config.timing)
                .await?
            {
                RefundClaim::Acquired(acquired) => {
                    tracing::debug!(key = %acquired.lease.key, payment = %acquired.payment.id, "refund key claimed");
                    self.observer.claimed();
                    self.drive(acquired, Holder::Claimant).await
                }
                RefundClaim::Exists(record) => match self.on_existing(&claim, record).await? {
                    Existing::Answered(outcome) => Ok(outcome),
                    // Only payment keys link to an order's payment.
                    Existing::OrderFreed => Ok(self.in_progress()),
                },
                RefundClaim::Refused(reason) => Ok(Outcome::RefundRefused(reason)),
            }
        }
        .await;
        self.observe_error(&result, "refund");
        result
    }

    /// Drives a stalled key (unfinished, lease run out, nobody retrying) to an
    /// end from its recovery point, exactly as a client retry would: take the
    /// lease over, then resume. `Ok(None)` when someone else holds the key
    /// (a retry came first, or another instance's completer).
    pub async fn complete(&self, stalled: &StalledKey) -> Result<Option<Outcome>, EngineError> {
        let result = async {
            let taken = self
                .store
                .take_over(
                    &stalled.shop_id,
                    &stalled.key,
                    &stalled.fingerprint,
                    self.config.timing.lease,
                )
                .await?;
            let Some(acquired) = taken else {
                return Ok(None);
            };
            tracing::info!(key = %acquired.lease.key, payment = %acquired.payment.id, "completer took over a stalled key");
            self.observer.taken_over();
            if links_declined_order(&acquired) {
                // Its client's next request gets an attempt of its own.
                self.abandon(&acquired.lease).await?;
                return Ok(None);
            }
            self.drive(acquired, Holder::Resumer).await.map(Some)
        }
        .await;
        self.observe_error(&result, "complete");
        result
    }

    fn observe_error<T>(&self, result: &Result<T, EngineError>, operation: &'static str) {
        if result.is_err() {
            self.observer.store_error(operation);
        }
    }

    /// Logs (and reports) a key repeated unusually often: at the threshold
    /// and at every doubling after it, so a hot key does not flood the log.
    fn note_repeats(&self, record: &KeyRecord) {
        let threshold = self.config.repeat_warning;
        let n = record.replays;
        if threshold == 0 || n < threshold {
            return;
        }
        if n.is_multiple_of(threshold) && (n / threshold).is_power_of_two() {
            tracing::warn!(
                shop = %record.shop_id,
                key = %record.key,
                repeats = n,
                "idempotency key repeated unusually often: client timeouts or double submits?"
            );
            self.observer.repeated_key(n);
        }
    }

    /// Decides what a request gets when its key already exists. The fingerprint
    /// is checked first, on every path.
    async fn on_existing(
        &self,
        claim: &ClaimRequest,
        record: KeyRecord,
    ) -> Result<Existing, EngineError> {
        self.note_repeats(&record);
        if record.fingerprint != claim.fingerprint {
            tracing::info!(key = %claim.key, "key reused with another request");
            self.observer.mismatch();
            return Ok(Existing::Answered(Outcome::Mismatch));
        }
        if record.recovery_point == RecoveryPoint::Finished {
            let response = record.response.ok_or_else(|| {
                StoreError::corrupt(format!("finished key {} has no response", claim.key))
            })?;
            self.observer.replayed();
            return Ok(Existing::Answered(Outcome::Replayed(response)));
        }
        if record.lease_active {
            self.observer.in_progress();
            return Ok(Existing::Answered(self.in_progress()));
        }
        if let Some(remaining) = record.settling {
            return self
                .settling(&record, remaining)
                .await
                .map(Existing::Answered);
        }
        match self
            .store
            .take_over(
                &claim.shop_id,
                &claim.key,
                &claim.fingerprint,
                self.config.timing.lease,
            )
            .await?
        {
            Some(acquired) => {
                tracing::info!(key = %acquired.lease.key, payment = %acquired.payment.id, "expired lease taken over");
                self.observer.taken_over();
                if links_declined_order(&acquired) {
                    self.abandon(&acquired.lease).await?;
                    return Ok(Existing::OrderFreed);
                }
                self.drive(acquired, Holder::Resumer)
                    .await
                    .map(Existing::Answered)
            }
            None => {
                self.observer.in_progress();
                Ok(Existing::Answered(self.in_progress()))
            }
        }
    }

    /// The answer for a parked key (see [`Store::park_lease`]): its payment
    /// or refund is pending, and nobody may look at the acquirer again before
    /// the parking runs out.
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
        if payment.status.is_final() {
            // Settled meanwhile (a webhook, the reconciler): that is the
            // answer. The completer stores the same bytes once the parking
            // runs out (rendered from the same final payment).
            return Ok(Outcome::Executed(self.render_payment(&payment)));
        }
        Ok(Outcome::Pending {
            payment,
            retry_after,
        })
    }

    /// Deletes a key that only linked to a payment that was then declined.
    async fn abandon(&self, lease: &Lease) -> Result<(), EngineError> {
        if self.store.abandon_key(lease).await? {
            tracing::info!(key = %lease.key, "the order's linked payment was declined; the key claims the order afresh");
        }
        Ok(())
    }

    fn in_progress(&self) -> Outcome {
        Outcome::InProgress {
            retry_after: self.config.retry_after,
        }
    }

    /// Phases 2 and 3, from the recovery point phase 1 (or a take-over) left.
    async fn drive(&self, acquired: Acquired, holder: Holder) -> Result<Outcome, EngineError> {
        let Acquired {
            lease,
            recovery_point,
            payment,
            refund,
        } = acquired;
        match recovery_point {
            RecoveryPoint::RefundCreated => {
                let refund = refund.ok_or_else(|| {
                    StoreError::corrupt(format!("refund key {} has no refund", lease.key))
                })?;
                return self.drive_refund(lease, payment, *refund, holder).await;
            }
            RecoveryPoint::OrderAlreadyPaid if payment.status == PaymentStatus::Pending => {
                // The order's payment has no definite answer yet: say so, store
                // nothing, and let a retry look again.
                self.release(&lease).await;
                return Ok(self.pending(payment));
            }
            RecoveryPoint::OrderAlreadyPaid => {
                let response = self.render.render(Rendered::AlreadyExists(&payment));
                return self.finish(&lease, None, response).await;
            }
            RecoveryPoint::Finished => {
                return Err(StoreError::corrupt(format!(
                    "key {} acquired while finished",
                    lease.key
                ))
                .into());
            }
            RecoveryPoint::PaymentCreated => {}
        }
        if payment.status.is_final() {
            // Settled meanwhile (a webhook, the reconciler): answer from it.
            return self.finish_from_stored(&lease, payment).await;
        }
        let request = ChargeRequest {
            acquirer_key: payment.acquirer_key.clone(),
            shop_id: payment.shop_id.clone(),
            payment_id: payment.id.clone(),
            reference: payment.reference.clone(),
            amount: payment.amount,
            token: payment.token.clone(),
        };
        let answer = if holder == Holder::Resumer && !self.acquirer.is_idempotent() {
            // The acquirer does not deduplicate on our key: the payment may
            // have been charged by the attempt we resume. The key was parked
            // for the settle window after that attempt, so a charge it made
            // has had time to appear: ask before sending.
            match self.look_up_holding_lease(&lease, &request).await {
                Ok(Some(found)) => {
                    tracing::info!(key = %lease.key, payment = %payment.id, charge = found.provider_payment_id(), "charge found by reference; not sent again");
                    Ok(found)
                }
                Ok(None) => self.charge_holding_lease(&lease, &request).await,
                Err(error) => Err(error),
            }
        } else {
            self.charge_holding_lease(&lease, &request).await
        };
        let settlement = match answer {
            Ok(result) => Ok(result.settlement()),
            Err(AcquirerError::Rejected(reason)) => {
                self.confirm_rejection(&lease, &request, holder, reason)
                    .await
            }
            Err(error) => Err(error),
        };
        match settlement {
            Ok(settlement) => {
                let settled = payment.settled(&settlement);
                let response = self.render_payment(&settled);
                self.finish(&lease, Some((&settled, &settlement)), response)
                    .await
                    .map_err(|error| match error {
                        EngineError::Store(error) => EngineError::Unrecorded(error),
                        other => other,
                    })
            }
            Err(AcquirerError::NotSent(reason)) => {
                tracing::warn!(key = %lease.key, payment = %payment.id, %reason, "acquirer unreachable; nothing sent");
                self.release(&lease).await;
                Ok(Outcome::AcquirerUnavailable {
                    payment,
                    retry_after: self.config.retry_after,
                })
            }
            // A rejection was confirmed (a settlement) or made unknown above.
            Err(AcquirerError::Unknown(reason) | AcquirerError::Rejected(reason)) => {
                tracing::warn!(key = %lease.key, payment = %payment.id, %reason, "acquirer outcome unknown; payment stays pending");
                let retry_after = self.after_unknown(&lease).await;
                Ok(Outcome::Pending {
                    payment,
                    retry_after,
                })
            }
        }
    }

    /// Phases 2 and 3 of a refund: the acquirer's refund call under the
    /// refund's own acquirer key (the acquirer is idempotent on it, so a
    /// resumed call never refunds twice), then the fenced finish.
    async fn drive_refund(
        &self,
        lease: Lease,
        payment: Payment,
        refund: Refund,
        holder: Holder,
    ) -> Result<Outcome, EngineError> {
        if refund.status.is_final() {
            let response = self.render_refund(&refund);
            return self.finish_refund(&lease, None, response).await;
        }
        let charge_id = payment.provider_payment_id.clone().ok_or_else(|| {
            StoreError::corrupt(format!(
                "refund {} of payment {} without a charge id",
                refund.id, payment.id
            ))
        })?;
        let request = RefundRequest {
            acquirer_key: refund.acquirer_key.clone(),
            shop_id: refund.shop_id.clone(),
            payment_id: refund.payment_id.clone(),
            refund_id: refund.id.clone(),
            charge_id,
            amount: refund.amount,
            token: payment.token.clone(),
        };
        let resumed = holder == Holder::Resumer;
        let resend = resumed && !self.acquirer.is_idempotent();
        let answer = if resend {
            // As for charges: the refund we resume may have been made; the
            // key was parked for the settle window, so it has had time to
            // appear. Ask before sending it again.
            match self.refund_look_up_holding_lease(&lease, &request).await {
                Ok(Some(found)) => {
                    tracing::info!(key = %lease.key, refund = %refund.id, provider_refund = %found.id, "refund found by reference; not sent again");
                    Ok(RefundSettlement::Succeeded {
                        provider_refund_id: found.id,
                    })
                }
                Ok(None) => self.refund_holding_lease(&lease, &request).await,
                Err(error) => Err(error),
            }
        } else {
            self.refund_holding_lease(&lease, &request).await
        };
        let answer = match answer {
            Err(AcquirerError::Rejected(reason)) if resumed => {
                self.confirm_refund_rejection(&lease, &request, reason)
                    .await
            }
            other => other,
        };
        match judge_refund_answer(answer, resend) {
            Ok(settlement) => {
                let settled = refund.settled(&settlement);
                let response = self.render_refund(&settled);
                self.finish_refund(&lease, Some((&settled, &settlement)), response)
                    .await
                    .map_err(|error| match error {
                        EngineError::Store(error) => EngineError::Unrecorded(error),
                        other => other,
                    })
            }
            Err(AcquirerError::NotSent(reason)) => {
                tracing::warn!(key = %lease.key, refund = %refund.id, %reason, "acquirer unreachable; refund not sent");
                self.release(&lease).await;
                Ok(Outcome::RefundAcquirerUnavailable {
                    refund,
                    retry_after: self.config.retry_after,
                })
            }
            // A rejection was judged (a failure) or made unknown above.
            Err(AcquirerError::Unknown(reason) | AcquirerError::Rejected(reason)) => {
                tracing::warn!(key = %lease.key, refund = %refund.id, %reason, "acquirer refund outcome unknown; refund stays pending");
                let retry_after = self.after_unknown(&lease).await;
                Ok(Outcome::RefundPending {
                    refund,
                    retry_after,
                })
            }
        }
    }

    fn render_refund(&self, refund: &Refund) -> StoredResponse {
        match refund.status {
            RefundStatus::Failed => self.render.render(Rendered::RefundFailed(refund)),
            _ => self.render.render(Rendered::Refunded(refund)),
        }
    }

    /// Phase 3 of a refund. Nobody but the refund's key settles a refund,
    /// so a refund found final here was settled by an earlier holder of the
    /// key whose finish was cut: answer from it.
    async fn finish_refund(
        &self,
        lease: &Lease,
        settled: Option<(&Refund, &RefundSettlement)>,
        response: StoredResponse,
    ) -> Result<Outcome, EngineError> {
        let ttl = self.config.timing.ttl;
        let settlement = settled.map(|(refund, settlement)| (&refund.id, settlement));
        match self
            .store
            .finish_refund(lease, settlement, &response, ttl)
            .await?
        {
            FinishOutcome::Stored => Ok(Outcome::Executed(response)),
            FinishOutcome::LeaseLost => {
                tracing::warn!(key = %lease.key, "lease lost before finish; the new owner completes");
                Ok(self.in_progress())
            }
            FinishOutcome::PaymentAlreadySettled => {
                let Some((refund, _)) = settled else {
                    return Err(StoreError::corrupt(format!(
                        "key {}: refund settled without a settlement",
                        lease.key
                    ))
                    .into());
                };
                let stored = self
                    .store
                    .refund(&refund.shop_id, &refund.id)
                    .await?
                    .ok_or_else(|| StoreError::corrupt(format!("refund {} vanished", refund.id)))?;
                let response = self.render_refund(&stored);
                match self
                    .store
                    .finish_refund(lease, None, &response, ttl)
                    .await?
                {
                    FinishOutcome::Stored => Ok(Outcome::Executed(response)),
                    _ => Ok(self.in_progress()),
                }
            }
        }
    }

    /// Stores the answer a settled payment calls for.
    async fn finish_from_stored(
        &self,
        lease: &Lease,
        payment: Payment,
    ) -> Result<Outcome, EngineError> {
        let response = self.render_payment(&payment);
        self.finish(lease, None, response).await
    }

    /// The answer of this key's own settled payment.
    fn render_payment(&self, payment: &Payment) -> StoredResponse {
        match payment.status {
            PaymentStatus::Declined => self.render.render(Rendered::Declined(payment)),
            _ => self.render.render(Rendered::Charged(payment)),
        }
    }

    fn pending(&self, payment: Payment) -> Outcome {
        Outcome::Pending {
            payment,
            retry_after: self.config.retry_after,
        }
    }

    /// Ends our lease early so the next retry resumes at once. A failure only
    /// delays that retry until the lease runs out, so it is logged, not raised.
    async fn release(&self, lease: &Lease) {
        if let Err(error) = self.store.release_lease(lease).await {
            tracing::warn!(key = %lease.key, %error, "lease release failed; it will run out");
        }
    }

    /// After an unknown outcome: an acquirer idempotent on our key answers a
    /// resent request with the first one's result, so the lease is released
    /// for the next retry to resume at once. One that ignores keys may still
    /// record the attempt late: the key is parked for the settle window, and
    /// only then looked up (and sent again if nothing appeared). Returns when
    /// to try again. A failure to park leaves the lease as it was extended
    /// before the send, which covers the window too.
    async fn after_unknown(&self, lease: &Lease) -> Duration {
        if self.acquirer.is_idempotent() {
            self.release(lease).await;
            return self.config.retry_after;
        }
        let window = self.config.settle_window;
        if let Err(error) = self.store.park_lease(lease, window).await {
            tracing::warn!(key = %lease.key, %error, "parking the key failed; its lease covers the settle window");
        }
        window
    }

    /// How long a lease must last around a send: an acquirer that ignores
    /// keys must not see the payment again within the settle window, even
    /// when this process dies during the call.
    fn send_hold(&self) -> Duration {
        if self.acquirer.is_idempotent() {
            self.config.timing.lease
        } else {
            self.config.settle_window.max(self.config.timing.lease)
        }
    }

    /// Runs one acquirer call, bounded by the acquirer timeout (a call that
    /// takes longer is an unknown outcome), while a separate task renews the
    /// lease, so a slow acquirer does not let another instance take over a live
    /// operation and a slow store does not stall the call. Reports the call's
    /// outcome and latency to the observer.
    async fn holding_lease<T>(
        &self,
        lease: &Lease,
        call: AcquirerCall,
        request: impl Future<Output = Result<T, AcquirerError>>,
        outcome_kind: impl FnOnce(&T) -> AcquirerOutcomeKind,
    ) -> Result<T, AcquirerError> {
        let hold = match call {
            AcquirerCall::Lookup => self.config.timing.lease,
            AcquirerCall::Charge | AcquirerCall::Refund => self.send_hold(),
        };
        if hold > self.config.timing.lease {
            // Before anything reaches an acquirer that ignores keys, the
            // lease covers the settle window: if this process dies during
            // the call, nobody looks the attempt up before it could appear.
            match self.store.renew_lease(lease, hold).await {
                Ok(true) => {}
                Ok(false) => {
                    return Err(AcquirerError::NotSent(
                        "the lease was taken over before sending".to_owned(),
                    ));
                }
                Err(error) => {
                    return Err(AcquirerError::NotSent(format!(
                        "the lease could not be extended before sending: {error}"
                    )));
                }
            }
        }
        // Aborted when dropped: a caller cut halfway (a completer aborted at
        // shutdown) stops renewing, and its lease runs out as it should.
        let heartbeat = AbortOnDropHandle::new(tokio::spawn(renew_lease(
            self.store.clone(),
            lease.clone(),
            hold,
        )));
        let timeout = self.config.acquirer_timeout;
        let started = Instant::now();
        let result = tokio::time::timeout(timeout, request)
            .await
            .unwrap_or_else(|_| {
                Err(AcquirerError::Unknown(format!(
                    "no answer within {timeout:?}"
                )))
            });
        drop(heartbeat);
        let kind = match &result {
            Ok(answer) => outcome_kind(answer),
            Err(AcquirerError::Unknown(_)) => AcquirerOutcomeKind::Unknown,
            Err(AcquirerError::NotSent(_)) => AcquirerOutcomeKind::NotSent,
            Err(AcquirerError::Rejected(_)) => AcquirerOutcomeKind::Declined,
        };
        self.observer.acquirer_call(call, kind, started.elapsed());
        result
    }

    /// Charges, holding the lease.
    async fn charge_holding_lease(
        &self,
        lease: &Lease,
        request: &ChargeRequest,
    ) -> Result<ChargeResult, AcquirerError> {
        self.holding_lease(
            lease,
            AcquirerCall::Charge,
            self.acquirer.charge(request),
            charge_kind,
        )
        .await
    }

    /// Refunds, holding the lease.
    async fn refund_holding_lease(
        &self,
        lease: &Lease,
        request: &RefundRequest,
    ) -> Result<RefundSettlement, AcquirerError> {
        let kind = |settlement: &RefundSettlement| match settlement {
            RefundSettlement::Succeeded { .. } => AcquirerOutcomeKind::Succeeded,
            RefundSettlement::Failed { .. } => AcquirerOutcomeKind::Declined,
        };
        self.holding_lease(
            lease,
            AcquirerCall::Refund,
            self.acquirer.refund_payment(request),
            kind,
        )
        .await
    }

    /// Looks the payment's charge up by our reference, holding the lease.
    async fn look_up_holding_lease(
        &self,
        lease: &Lease,
        request: &ChargeRequest,
    ) -> Result<Option<ChargeResult>, AcquirerError> {
        let lookup = async {
            look_up(
                self.acquirer.as_ref(),
                &request.shop_id,
                &request.payment_id,
                &request.acquirer_key,
            )
            .await
            .map_err(rejected_look_up)
            .and_then(|found| match found {
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
            })
        };
        let kind = |found: &Option<ChargeResult>| {
            found
                .as_ref()
                .map_or(AcquirerOutcomeKind::NotFound, charge_kind)
        };
        self.holding_lease(lease, AcquirerCall::Lookup, lookup, kind)
            .await
    }

    /// A charge the acquirer refused for good. A first send proves it:
    /// nothing was sent before. A resend does not: the attempt resumed may
    /// have charged, and the refusal may be of the repeat only. It is then
    /// believed only when the acquirer has no charge for the payment;
    /// otherwise the charge found is the answer, and a failed look-up leaves
    /// the outcome unknown.
    async fn confirm_rejection(
        &self,
        lease: &Lease,
        request: &ChargeRequest,
        holder: Holder,
        reason: String,
    ) -> Result<Settlement, AcquirerError> {
        tracing::warn!(key = %lease.key, payment = %request.payment_id, %reason, "the acquirer refused the charge");
        if holder == Holder::Claimant {
            return Ok(Settlement::rejected());
        }
        match self.look_up_holding_lease(lease, request).await {
            Ok(Some(found)) => Ok(found.settlement()),
            Ok(None) => Ok(Settlement::rejected()),
            Err(error) => Err(AcquirerError::Unknown(format!(
                "a resent charge was refused ({reason}) and the look-up failed: {error}"
            ))),
        }
    }

    /// A resumed refund the acquirer refused for good: as for charges, the
    /// attempt resumed may have been made, so the refusal counts only when
    /// the acquirer holds no refund under our reference.
    async fn confirm_refund_rejection(
        &self,
        lease: &Lease,
        request: &RefundRequest,
        reason: String,
    ) -> Result<RefundSettlement, AcquirerError> {
        tracing::warn!(key = %lease.key, refund = %request.refund_id, %reason, "the acquirer refused a resumed refund");
        match self.refund_look_up_holding_lease(lease, request).await {
            Ok(Some(found)) => Ok(RefundSettlement::Succeeded {
                provider_refund_id: found.id,
            }),
            Ok(None) => Ok(RefundSettlement::Failed {
                code: crate::acquirer::REJECTED.to_owned(),
            }),
            Err(error) => Err(AcquirerError::Unknown(format!(
                "a resumed refund was refused ({reason}) and the look-up failed: {error}"
            ))),
        }
    }

    /// Looks our refund up at the acquirer by its reference (the refund
    /// id), holding the lease. A refund found for another amount is not ours
    /// to apply: unknown.
    async fn refund_look_up_holding_lease(
        &self,
        lease: &Lease,
        request: &RefundRequest,
    ) -> Result<Option<AcquirerRefund>, AcquirerError> {
        let lookup = async {
            let found = self
                .acquirer
                .refunds_for_refund(request)
                .await
                .map_err(rejected_look_up)?;
            match found.into_iter().next() {
                Some(refund) if refund.amount != request.amount => {
                    tracing::error!(refund = %request.refund_id, provider_refund = %refund.id, "the acquirer's refund for this refund is for another amount; not applied");
                    Err(AcquirerError::Unknown(
                        "the refund found has another amount".to_owned(),
                    ))
                }
                found => Ok(found),
            }
        };
        let kind = |found: &Option<AcquirerRefund>| match found {
            Some(_) => AcquirerOutcomeKind::Succeeded,
            None => AcquirerOutcomeKind::NotFound,
        };
        self.holding_lease(lease, AcquirerCall::Lookup, lookup, kind)
            .await
    }

    async fn finish(
        &self,
        lease: &Lease,
        settled: Option<(&Payment, &Settlement)>,
        response: StoredResponse,
    ) -> Result<Outcome, EngineError> {
        let ttl = self.config.timing.ttl;
        match self.store.finish(lease, settled, &response, ttl).await? {
            FinishOutcome::Stored => Ok(Outcome::Executed(response)),
            FinishOutcome::LeaseLost => {
                tracing::warn!(key = %lease.key, "lease lost before finish; the new owner completes");
                Ok(self.in_progress())
            }
            FinishOutcome::PaymentAlreadySettled => {
                // A webhook or the reconciler settled the payment while we
                // called the acquirer: the stored answer must agree with the
                // payment as stored, which never leaves a final state.
                let Some((payment, _)) = settled else {
                    return Err(StoreError::corrupt(format!(
                        "key {}: payment settled without a settlement",
                        lease.key
                    ))
                    .into());
                };
                let stored = self
                    .store
                    .payment(&payment.shop_id, &payment.id)
                    .await?
                    .ok_or_else(|| {
                        StoreError::corrupt(format!("payment {} vanished", payment.id))
                    })?;
                if stored.status != payment.status
                    || stored.provider_payment_id != payment.provider_payment_id
                {
                    tracing::error!(
                        key = %lease.key,
                        payment = %payment.id,
                        ours = payment.status.as_str(),
                        stored = stored.status.as_str(),
                        "the acquirer's answer disagrees with the payment's settled state; answering from the stored state"
                    );
                }
                let response = self.render_payment(&stored);
                match self.store.finish(lease, None, &response, ttl).await? {
                    FinishOutcome::Stored => Ok(Outcome::Executed(response)),
                    _ => Ok(self.in_progress()),
                }
            }
        }
    }
}

/// Renews a lease every third of its length until aborted.
async fn renew_lease(store: Arc<dyn Store>, lease: Lease, duration: Duration) {
    let mut tick = tokio::time::interval(duration / 3);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        match store.renew_lease(&lease, duration).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(key = %lease.key, "lease taken over during the acquirer call; our finish will be fenced off");
                return;
            }
            Err(error) => tracing::warn!(key = %lease.key, %error, "lease renewal failed"),
        }
    }
}

/// What the engine does with the acquirer's answer to a refund (a resumed
/// refund's rejection was confirmed before). "Exceeds what is left of the
/// charge" for a refund sent again to an acquirer that ignores keys is
/// ambiguous: the attempt resumed may be what used the charge up, though the
/// look-up did not show it. It is unknown, never a failure that would free
/// the reservation, and logged as an error for a person to look at. Other
/// refusals are definite; so is a first send's rejection.
fn judge_refund_answer(
    answer: Result<RefundSettlement, AcquirerError>,
    resend: bool,
) -> Result<RefundSettlement, AcquirerError> {
    match answer {
        Ok(RefundSettlement::Failed { code })
            if resend && code == crate::acquirer::REFUND_EXCEEDS_CHARGE =>
        {
            tracing::error!(%code, "a resent refund was refused as exceeding the charge, though no refund was found under its reference: left pending");
            Err(AcquirerError::Unknown(format!(
                "a resent refund was refused ({code}); the attempt resumed may have been made"
            )))
        }
        Err(AcquirerError::Rejected(reason)) => {
            tracing::warn!(%reason, "the acquirer refused the refund");
            Ok(RefundSettlement::Failed {
                code: crate::acquirer::REJECTED.to_owned(),
            })
        }
        other => other,
    }
}

/// A look-up's own refusal proves nothing about the attempt looked for.
fn rejected_look_up(error: AcquirerError) -> AcquirerError {
    match error {
        AcquirerError::Rejected(reason) => {
            AcquirerError::Unknown(format!("the look-up was refused: {reason}"))
        }
        other => other,
    }
}

/// Whether a taken-over key only links to its order's payment and that
/// payment was declined: the order is free, and the key must get an attempt
/// of its own rather than the other payment's decline.
fn links_declined_order(acquired: &Acquired) -> bool {
    acquired.recovery_point == RecoveryPoint::OrderAlreadyPaid
        && acquired.payment.status == PaymentStatus::Declined
}

/// What a request whose key exists gets. Returned once and matched at once,
/// so the size of [`Outcome`] costs a move, not an allocation per request.
#[allow(clippy::large_enum_variant)]
enum Existing {
    /// The answer.
    Answered(Outcome),
    /// The key only linked to its order's payment, which was declined; it
    /// was deleted, and the request claims the order afresh.
    OrderFreed,
}

/// The observer's name for a definite charge answer.
fn charge_kind(result: &ChargeResult) -> AcquirerOutcomeKind {
    match result {
        ChargeResult::Succeeded { .. } => AcquirerOutcomeKind::Succeeded,
        ChargeResult::Declined { .. } => AcquirerOutcomeKind::Declined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_that_cannot_work_are_refused() {
        assert_eq!(EngineConfig::default().validate(), Ok(()));
        let mut config = EngineConfig::default();
        config.timing.lease = Duration::ZERO;
        assert_eq!(config.validate(), Err(ConfigError::ZeroLease));
        let config = EngineConfig {
            acquirer_timeout: Duration::ZERO,
            ..EngineConfig::default()
        };
        assert_eq!(config.validate(), Err(ConfigError::ZeroAcquirerTimeout));
    }
}
