//! The idempotency engine: claim, call the acquirer, finish — each an atomic phase.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::acquirer::look_up;
use crate::observe::{AcquirerCall, AcquirerOutcomeKind, NoObserver, Observer};
use crate::{
    Acquired, Acquirer, AcquirerError, ChargeRequest, ChargeResult, Claim, ClaimRequest,
    FinishOutcome, KeyRecord, KeyTiming, Lease, NewPayment, NewRefund, Payment, PaymentRequest,
    PaymentStatus, RecoveryPoint, Refund, RefundClaim, RefundRefusal, RefundRequest,
    RefundSettlement, RefundStatus, Settlement, StalledKey, Store, StoreError, StoredResponse,
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
        }
    }
}

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
        match self
            .store
            .claim_payment(&claim, &new, self.config.timing)
            .await?
        {
            Claim::Acquired(acquired) => {
                tracing::debug!(key = %acquired.lease.key, payment = %acquired.payment.id, "key claimed");
                self.observer.claimed();
                self.drive(acquired, Holder::Claimant).await
            }
            Claim::Exists(record) => self.on_existing(&claim, record).await,
        }
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
                RefundClaim::Exists(record) => self.on_existing(&claim, record).await,
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
    ) -> Result<Outcome, EngineError> {
        self.note_repeats(&record);
        if record.fingerprint != claim.fingerprint {
            tracing::info!(key = %claim.key, "key reused with another request");
            self.observer.mismatch();
            return Ok(Outcome::Mismatch);
        }
        if record.recovery_point == RecoveryPoint::Finished {
            let response = record.response.ok_or_else(|| {
                StoreError::Corrupt(format!("finished key {} has no response", claim.key))
            })?;
            self.observer.replayed();
            return Ok(Outcome::Replayed(response));
        }
        if record.lease_active {
            self.observer.in_progress();
            return Ok(self.in_progress());
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
                self.drive(acquired, Holder::Resumer).await
            }
            None => {
                self.observer.in_progress();
                Ok(self.in_progress())
            }
        }
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
                    StoreError::Corrupt(format!("refund key {} has no refund", lease.key))
                })?;
                return self.drive_refund(lease, payment, *refund).await;
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
                return Err(StoreError::Corrupt(format!(
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
            // have been charged by the attempt we resume. Ask before sending.
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
        match answer {
            Ok(result) => {
                let settlement = result.settlement();
                let settled = payment.settled(&settlement);
                let response = match settled.status {
                    PaymentStatus::Declined => self.render.render(Rendered::Declined(&settled)),
                    _ => self.render.render(Rendered::Charged(&settled)),
                };
                self.finish(&lease, Some((&settled, &settlement)), response)
                    .await
                    .map_err(|error| match error {
                        EngineError::Store(error) => EngineError::Unrecorded(error),
                        other => other,
                    })
            }
            Err(AcquirerError::Unknown(reason)) => {
                tracing::warn!(key = %lease.key, payment = %payment.id, %reason, "acquirer outcome unknown; payment stays pending");
                self.release(&lease).await;
                Ok(self.pending(payment))
            }
            Err(AcquirerError::NotSent(reason)) => {
                tracing::warn!(key = %lease.key, payment = %payment.id, %reason, "acquirer unreachable; nothing sent");
                self.release(&lease).await;
                Ok(Outcome::AcquirerUnavailable {
                    payment,
                    retry_after: self.config.retry_after,
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
    ) -> Result<Outcome, EngineError> {
        if refund.status.is_final() {
            let response = self.render_refund(&refund);
            return self.finish_refund(&lease, None, response).await;
        }
        let charge_id = payment.provider_payment_id.clone().ok_or_else(|| {
            StoreError::Corrupt(format!(
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
        match self.refund_holding_lease(&lease, &request).await {
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
            Err(AcquirerError::Unknown(reason)) => {
                tracing::warn!(key = %lease.key, refund = %refund.id, %reason, "acquirer refund outcome unknown; refund stays pending");
                self.release(&lease).await;
                Ok(Outcome::RefundPending {
                    refund,
                    retry_after: self.config.retry_after,
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
                    return Err(StoreError::Corrupt(format!(
                        "key {}: refund settled without a settlement",
                        lease.key
                    ))
                    .into());
                };
                let stored = self
                    .store
                    .refund(&refund.shop_id, &refund.id)
                    .await?
                    .ok_or_else(|| StoreError::Corrupt(format!("refund {} vanished", refund.id)))?;
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
        let response = match payment.status {
            PaymentStatus::Declined => self.render.render(Rendered::Declined(&payment)),
            _ => self.render.render(Rendered::Charged(&payment)),
        };
        self.finish(lease, None, response).await
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
        let heartbeat = tokio::spawn(renew_lease(
            self.store.clone(),
            lease.clone(),
            self.config.timing.lease,
        ));
        let timeout = self.config.acquirer_timeout;
        let started = Instant::now();
        let result = tokio::time::timeout(timeout, request)
            .await
            .unwrap_or_else(|_| {
                Err(AcquirerError::Unknown(format!(
                    "no answer within {timeout:?}"
                )))
            });
        heartbeat.abort();
        let kind = match &result {
            Ok(answer) => outcome_kind(answer),
            Err(AcquirerError::Unknown(_)) => AcquirerOutcomeKind::Unknown,
            Err(AcquirerError::NotSent(_)) => AcquirerOutcomeKind::NotSent,
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
            .map(|found| found.map(|charge| charge.outcome))
        };
        let kind = |found: &Option<ChargeResult>| {
            found
                .as_ref()
                .map_or(AcquirerOutcomeKind::NotFound, charge_kind)
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
                    return Err(StoreError::Corrupt(format!(
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
                        StoreError::Corrupt(format!("payment {} vanished", payment.id))
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
                let response = match stored.status {
                    PaymentStatus::Declined => self.render.render(Rendered::Declined(&stored)),
                    _ => self.render.render(Rendered::Charged(&stored)),
                };
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
