//! The idempotency engine: claim, call the acquirer, finish — each an atomic phase.

use std::sync::Arc;
use std::time::Duration;

use crate::{
    Acquired, Acquirer, AcquirerError, ChargeRequest, ChargeResult, Claim, ClaimRequest, KeyRecord,
    KeyTiming, Lease, NewPayment, Payment, PaymentRequest, PaymentStatus, RecoveryPoint,
    Settlement, Store, StoreError, StoredResponse,
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
    /// The acquirer's answer is not known yet (timeout, lost answer). The payment
    /// stays pending, nothing final is stored, and a retry with the same key
    /// resumes the same acquirer call.
    Pending(Payment),
    /// Another request holds the key's lease right now.
    InProgress {
        /// When to try again.
        retry_after: Duration,
    },
    /// The key was first used for another request (body, path or method).
    Mismatch,
    /// The acquirer could not be reached and certainly got nothing; the payment
    /// stays pending and a retry with the same key sends it.
    AcquirerUnavailable {
        /// The pending payment.
        payment: Payment,
        /// When to try again.
        retry_after: Duration,
    },
}

/// Why the engine could not give an answer. Nothing was executed on the
/// strength of a failed store call.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Engine settings.
#[derive(Debug, Clone, Copy)]
pub struct EngineConfig {
    /// Lease length and key retention.
    pub timing: KeyTiming,
    /// What to tell a client that should come back later.
    pub retry_after: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            timing: KeyTiming {
                lease: Duration::from_secs(30),
                ttl: Duration::from_secs(24 * 60 * 60),
            },
            retry_after: Duration::from_secs(1),
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
}

impl Engine {
    /// Wires an engine.
    pub fn new(
        store: Arc<dyn Store>,
        acquirer: Arc<dyn Acquirer>,
        render: Arc<dyn Render>,
        config: EngineConfig,
    ) -> Self {
        Self {
            store,
            acquirer,
            render,
            config,
        }
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
        let new = NewPayment::new(claim.shop_id.clone(), claim.key.clone(), request);
        match self
            .store
            .claim_payment(&claim, &new, self.config.timing)
            .await?
        {
            Claim::Acquired(acquired) => {
                tracing::debug!(key = %acquired.lease.key, payment = %acquired.payment.id, "key claimed");
                self.drive(acquired).await
            }
            Claim::Exists(record) => self.on_existing(&claim, record).await,
        }
    }

    /// Decides what a request gets when its key already exists. The fingerprint
    /// is checked first, on every path.
    async fn on_existing(
        &self,
        claim: &ClaimRequest,
        record: KeyRecord,
    ) -> Result<Outcome, EngineError> {
        if record.fingerprint != claim.fingerprint {
            tracing::info!(key = %claim.key, "key reused with another request");
            return Ok(Outcome::Mismatch);
        }
        if record.recovery_point == RecoveryPoint::Finished {
            let response = record.response.ok_or_else(|| {
                StoreError::Corrupt(format!("finished key {} has no response", claim.key))
            })?;
            return Ok(Outcome::Replayed(response));
        }
        if record.lease_active {
            return Ok(self.in_progress());
        }
        match self
            .store
            .take_over(&claim.shop_id, &claim.key, self.config.timing.lease)
            .await?
        {
            Some(acquired) => {
                tracing::info!(key = %acquired.lease.key, payment = %acquired.payment.id, "expired lease taken over");
                self.drive(acquired).await
            }
            None => Ok(self.in_progress()),
        }
    }

    fn in_progress(&self) -> Outcome {
        Outcome::InProgress {
            retry_after: self.config.retry_after,
        }
    }

    /// Phases 2 and 3, from the recovery point phase 1 (or a take-over) left.
    async fn drive(&self, acquired: Acquired) -> Result<Outcome, EngineError> {
        let Acquired {
            lease,
            recovery_point,
            payment,
        } = acquired;
        match recovery_point {
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
        match payment.status {
            PaymentStatus::Succeeded => {
                let response = self.render.render(Rendered::Charged(&payment));
                return self.finish(&lease, None, response).await;
            }
            PaymentStatus::Declined => {
                let response = self.render.render(Rendered::Declined(&payment));
                return self.finish(&lease, None, response).await;
            }
            PaymentStatus::Pending => {}
        }
        let request = ChargeRequest {
            acquirer_key: payment.acquirer_key.clone(),
            shop_id: payment.shop_id.clone(),
            payment_id: payment.id.clone(),
            reference: payment.reference.clone(),
            amount: payment.amount,
            token: payment.token.clone(),
        };
        match self.charge_holding_lease(&lease, &request).await {
            Ok(result) => {
                let settlement = match result {
                    ChargeResult::Succeeded {
                        provider_payment_id,
                    } => Settlement {
                        status: PaymentStatus::Succeeded,
                        provider_payment_id,
                        decline_code: None,
                    },
                    ChargeResult::Declined {
                        provider_payment_id,
                        code,
                    } => Settlement {
                        status: PaymentStatus::Declined,
                        provider_payment_id,
                        decline_code: Some(code),
                    },
                };
                let settled = payment.settled(&settlement);
                let response = match settled.status {
                    PaymentStatus::Declined => self.render.render(Rendered::Declined(&settled)),
                    _ => self.render.render(Rendered::Charged(&settled)),
                };
                self.finish(&lease, Some((&settled, &settlement)), response)
                    .await
            }
            Err(AcquirerError::Unknown(reason)) => {
                tracing::warn!(key = %lease.key, payment = %payment.id, %reason, "acquirer outcome unknown; payment stays pending");
                self.store.release_lease(&lease).await?;
                Ok(Outcome::Pending(payment))
            }
            Err(AcquirerError::NotSent(reason)) => {
                tracing::warn!(key = %lease.key, payment = %payment.id, %reason, "acquirer unreachable; nothing sent");
                self.store.release_lease(&lease).await?;
                Ok(Outcome::AcquirerUnavailable {
                    payment,
                    retry_after: self.config.retry_after,
                })
            }
        }
    }

    /// Calls the acquirer while renewing the lease, so a slow acquirer does not
    /// let another instance take over a live operation.
    async fn charge_holding_lease(
        &self,
        lease: &Lease,
        request: &ChargeRequest,
    ) -> Result<ChargeResult, AcquirerError> {
        let duration = self.config.timing.lease;
        let call = self.acquirer.charge(request);
        tokio::pin!(call);
        let mut heartbeat = tokio::time::interval(duration / 3);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        heartbeat.tick().await;
        loop {
            tokio::select! {
                result = &mut call => return result,
                _ = heartbeat.tick() => match self.store.renew_lease(lease, duration).await {
                    Ok(true) => {}
                    Ok(false) => tracing::warn!(key = %lease.key, "lease taken over during the acquirer call; our finish will be fenced off"),
                    Err(error) => tracing::warn!(key = %lease.key, %error, "lease renewal failed"),
                },
            }
        }
    }

    async fn finish(
        &self,
        lease: &Lease,
        settled: Option<(&Payment, &Settlement)>,
        response: StoredResponse,
    ) -> Result<Outcome, EngineError> {
        let settlement = settled.map(|(payment, settlement)| (&payment.id, settlement));
        if self.store.finish(lease, settlement, &response).await? {
            Ok(Outcome::Executed(response))
        } else {
            tracing::warn!(key = %lease.key, "lease lost before finish; the new owner completes");
            Ok(self.in_progress())
        }
    }
}
