//! The simulator as the core sees it: `impl Acquirer` (charges, refunds,
//! lookups) and `impl AcquirerLedger` (the books the reconciler reads).

use std::time::Duration;

use async_trait::async_trait;
use chargeonce_core::{
    Acquirer, AcquirerCapture, AcquirerCharge, AcquirerError, AcquirerKey, AcquirerLedger,
    AcquirerRefund, CaptureRequest, CaptureSettlement, ChargeRequest, ChargeResult, LedgerCursor,
    PaymentId, Reference, RefundRequest, RefundSettlement, ShopId, VoidRequest, VoidSettlement,
};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{
    Behaviour, DO_NOT_HONOR, IN_FLIGHT_DUPLICATE, InFlightDuplicate, InFlightGuard, KEY_REUSED,
    LOST_ANSWER, RefundRecord, Simulator,
};
use super::{refund_of, refund_settlement};
use crate::entry::now_millis;
use crate::{LedgerEntry, SimulatorError};

impl Simulator {
    /// Marks a request's key (a charge's or a refund's) in flight until it
    /// is recorded. A duplicate of a key in flight is answered as the fault
    /// says ([`InFlightDuplicate`]), or, with `wait`, runs as a request of
    /// its own (whichever records first, the other answers with its
    /// result). An acquirer without idempotency does not tell duplicates.
    fn enter_in_flight(
        &self,
        key: &AcquirerKey,
        payment_id: &PaymentId,
    ) -> Result<Option<InFlightGuard>, AcquirerError> {
        match self.in_flight_entry(key.as_str()) {
            Ok(guard) => Ok(guard),
            Err(mode) => {
                let answer = mode.error().unwrap_or_else(|| {
                    AcquirerError::Unknown(format!("{IN_FLIGHT_DUPLICATE}: in progress"))
                });
                tracing::info!(%payment_id, ?answer, "a duplicate of a request in flight, answered as the fault says");
                Err(answer)
            }
        }
    }

    /// [`Simulator::enter_in_flight`] for the HTTP API: `Err` is how the
    /// fault says a duplicate is answered.
    pub(crate) fn in_flight_entry(
        &self,
        key: &str,
    ) -> Result<Option<InFlightGuard>, InFlightDuplicate> {
        // Without idempotency nothing tells a duplicate; with `wait` (the
        // default) a duplicate runs as its own request: no bookkeeping.
        if !self.idempotent || self.in_flight_duplicates() == InFlightDuplicate::Wait {
            return Ok(None);
        }
        let guard = self.in_flight.enter(key);
        if guard.is_some() {
            return Ok(guard);
        }
        match self.faults().in_flight_duplicate {
            InFlightDuplicate::Wait => Ok(None),
            mode => Err(mode),
        }
    }

    /// How long a refund of `token` takes to be recorded (the HTTP API's
    /// refunds): `tok_late`'s slow time, or the late-record fault's.
    pub(crate) fn refund_delay(&self, token: Option<&str>) -> Duration {
        if token == Some(crate::tokens::LATE) {
            self.config.slow
        } else {
            self.roll(|f, rng| f.record_delay(rng))
        }
    }

    /// How long the acquirer takes before it records what `behaviour` does:
    /// `tok_late`'s slow time, the late-record fault's time
    /// ([`Faults::late_rate`](crate::Faults::late_rate)), or nothing.
    fn delay_of(&self, behaviour: Behaviour) -> Duration {
        match behaviour {
            Behaviour::Late => self.config.slow,
            // The common case draws nothing: no clone of the faults, no rng lock.
            _ if !self.late_records() => Duration::ZERO,
            _ => self.roll(|f, rng| f.record_delay(rng)),
        }
    }

    /// Runs the acquirer's side of a request. A late one (`delay` above
    /// zero) runs in a task of its own, so it completes even when the caller
    /// stops waiting.
    async fn at_acquirer<T: Send + 'static>(
        &self,
        delay: Duration,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, AcquirerError> {
        if delay.is_zero() {
            return Ok(work.await);
        }
        tokio::spawn(work)
            .await
            .map_err(|e| AcquirerError::Unknown(format!("acquirer task failed: {e}")))
    }

    /// Whether the request's key has a charge recorded already. Read before
    /// anything is written: a failed read means nothing was done.
    async fn recorded(&self, request: &ChargeRequest) -> Result<bool, AcquirerError> {
        self.ledger
            .find(request.acquirer_key.as_str())
            .await
            .map(|found| found.is_some())
            .map_err(|e| AcquirerError::NotSent(format!("acquirer ledger unavailable: {e}")))
    }

    /// The stored answer for a key that another execution recorded first.
    async fn replay(&self, request: &ChargeRequest) -> Result<ChargeResult, AcquirerError> {
        let stored = self
            .ledger
            .find(request.acquirer_key.as_str())
            .await
            .map_err(|e| AcquirerError::Unknown(format!("acquirer ledger read failed: {e}")))?
            .ok_or_else(|| {
                // Rows are never deleted, so this means the ledger was tampered with.
                AcquirerError::Unknown("acquirer ledger lost a recorded charge".to_owned())
            })?;
        if let Some(field) = mismatch(&stored, request) {
            tracing::warn!(
                payment_id = %request.payment_id,
                charge_id = %stored.id,
                field,
                "acquirer key reused with different parameters; refused"
            );
            return Err(AcquirerError::Unknown(format!(
                "{KEY_REUSED}: the acquirer key was first used with other parameters"
            )));
        }
        tracing::debug!(
            payment_id = %request.payment_id,
            charge_id = %stored.id,
            "acquirer replayed a recorded charge"
        );
        Ok(stored.result())
    }
}

/// The first parameter in which a repeat differs from the recorded attempt.
fn mismatch(stored: &LedgerEntry, request: &ChargeRequest) -> Option<&'static str> {
    if stored.shop_id != request.shop_id {
        Some("shop_id")
    } else if stored.payment_id != request.payment_id {
        Some("payment_id")
    } else if stored.reference != request.reference {
        Some("reference")
    } else if stored.amount.currency() != request.amount.currency() {
        Some("currency")
    } else if stored.amount != request.amount {
        Some("amount")
    } else {
        None
    }
}

/// A ledger write failed: nothing is known, unless the statement never ran.
fn write_failed(error: SimulatorError) -> AcquirerError {
    match error {
        // The writer never ran the INSERT (closed, or the file's lock was
        // held past the busy timeout): certainly not charged.
        SimulatorError::Unavailable(failure) if !failure.ran() => {
            AcquirerError::NotSent(format!("acquirer ledger unavailable: {failure}"))
        }
        _ => AcquirerError::Unknown(format!("acquirer ledger write failed: {error}")),
    }
}

impl Simulator {
    /// A charge, recording the trace of the request that asked for it
    /// (`trace_id`, from its `traceparent`) on the charge.
    pub async fn charge_traced(
        &self,
        request: &ChargeRequest,
        trace_id: Option<String>,
    ) -> Result<ChargeResult, AcquirerError> {
        let in_flight = self.enter_in_flight(&request.acquirer_key, &request.payment_id)?;
        let mut behaviour = Behaviour::of(&request.token);
        if behaviour == Behaviour::Succeed && self.roll(|f, rng| f.declines(rng)) {
            behaviour = Behaviour::Decline(DO_NOT_HONOR);
        }
        let (status, decline_code) = behaviour.outcome();
        let entry = LedgerEntry {
            id: format!("ch_{}", Uuid::now_v7().simple()),
            acquirer_key: request.acquirer_key.clone(),
            shop_id: request.shop_id.clone(),
            payment_id: request.payment_id.clone(),
            reference: request.reference.clone(),
            amount: request.amount,
            status,
            decline_code,
            created_at: now_millis(),
            refunded_minor: 0,
            capture_method: request.capture_method,
            captured_minor: 0,
            closed: false,
            voided: false,
            trace_id,
        };
        let events = self.events_for(&entry);
        let delay = self.delay_of(behaviour);
        if !delay.is_zero() && self.idempotent && self.recorded(request).await? {
            // A key already recorded is answered at once, however slow its
            // first execution was (a charge without delay finds it on insert).
            return self.replay(request).await;
        }
        let insert = {
            let (ledger, entry, deduplicated) =
                (self.ledger.clone(), entry.clone(), self.idempotent);
            async move {
                tokio::time::sleep(delay).await;
                let inserted = ledger.insert(&entry, deduplicated, &events).await;
                // Recorded (or given up): no longer in flight.
                drop(in_flight);
                inserted
            }
        };
        if !self
            .at_acquirer(delay, insert)
            .await?
            .map_err(write_failed)?
        {
            return self.replay(request).await;
        }
        tracing::info!(
            payment_id = %request.payment_id,
            charge_id = %entry.id,
            status = status.as_str(),
            ?behaviour,
            "acquirer recorded a charge"
        );
        match behaviour {
            Behaviour::LoseAnswer => return Err(AcquirerError::Unknown(LOST_ANSWER.to_owned())),
            Behaviour::Slow => tokio::time::sleep(self.config.slow).await,
            Behaviour::Succeed | Behaviour::Decline(_) | Behaviour::Late => {}
        }
        Ok(entry.result())
    }
}

#[async_trait]
impl Acquirer for Simulator {
    /// In process, the trace is the caller's current one (the engine's
    /// acquirer span), when traces are on.
    async fn charge(&self, request: &ChargeRequest) -> Result<ChargeResult, AcquirerError> {
        let trace_id = chargeonce_telemetry::context::trace_id(&tracing::Span::current());
        self.charge_traced(request, trace_id).await
    }

    async fn refunds_for_refund(
        &self,
        request: &RefundRequest,
    ) -> Result<Vec<AcquirerRefund>, AcquirerError> {
        let rows = self
            .ledger
            .refunds_for_reference(&request.charge_id, request.refund_id.as_str())
            .await
            .map_err(|e| AcquirerError::Unknown(format!("acquirer ledger read failed: {e}")))?;
        rows.into_iter()
            .map(|row| refund_of(RefundRecord::from(row)))
            .collect()
    }

    async fn status(&self, key: &AcquirerKey) -> Result<Option<AcquirerCharge>, AcquirerError> {
        self.find(key)
            .await
            .map(|found| found.map(|entry| entry.to_charge()))
            .map_err(|e| AcquirerError::Unknown(format!("acquirer ledger read failed: {e}")))
    }

    async fn charges_for_payment(
        &self,
        shop_id: &ShopId,
        payment_id: &PaymentId,
    ) -> Result<Vec<AcquirerCharge>, AcquirerError> {
        self.find_for_payment(shop_id, payment_id)
            .await
            .map(|found| found.iter().map(LedgerEntry::to_charge).collect())
            .map_err(|e| AcquirerError::Unknown(format!("acquirer ledger read failed: {e}")))
    }

    /// Refunds are idempotent on the refund's acquirer key unless the
    /// simulator runs without idempotency, then each call is a new refund.
    /// A refund of a payment made with `tok_timeout` loses the answer of its
    /// first execution (the refund is recorded), like the charge did; one of
    /// a `tok_late` payment is recorded late, like the charge was.
    async fn refund_payment(
        &self,
        request: &RefundRequest,
    ) -> Result<RefundSettlement, AcquirerError> {
        let in_flight = self.enter_in_flight(&request.acquirer_key, &request.payment_id)?;
        let behaviour = Behaviour::of(&request.token);
        let delay = self.delay_of(behaviour);
        let refund = {
            let this = self.refunder(self.idempotent);
            let request = request.clone();
            async move {
                tokio::time::sleep(delay).await;
                let answer = this
                    .refund(
                        &request.charge_id,
                        request.acquirer_key.as_str(),
                        Some(request.amount.minor_units()),
                        Some(request.refund_id.as_str()),
                    )
                    .await;
                drop(in_flight);
                answer
            }
        };
        let answer = self.at_acquirer(delay, refund).await?;
        refund_settlement(answer, behaviour == Behaviour::LoseAnswer)
    }

    async fn capture(&self, request: &CaptureRequest) -> Result<CaptureSettlement, AcquirerError> {
        self.capture_for(request).await
    }

    async fn void(&self, request: &VoidRequest) -> Result<VoidSettlement, AcquirerError> {
        self.void_for(request).await
    }

    async fn captures_for_capture(
        &self,
        request: &CaptureRequest,
    ) -> Result<Vec<AcquirerCapture>, AcquirerError> {
        self.captures_for(request).await
    }

    fn is_idempotent(&self) -> bool {
        self.idempotent
    }
}

#[async_trait]
impl AcquirerLedger for Simulator {
    async fn charges_between(
        &self,
        from: OffsetDateTime,
        to: OffsetDateTime,
    ) -> Result<Vec<AcquirerCharge>, AcquirerError> {
        self.between(from, to)
            .await
            .map(|found| found.iter().map(LedgerEntry::to_charge).collect())
            .map_err(|e| AcquirerError::Unknown(format!("acquirer ledger read failed: {e}")))
    }

    async fn charges_page(
        &self,
        from: OffsetDateTime,
        to: OffsetDateTime,
        after: Option<&LedgerCursor>,
        limit: u32,
    ) -> Result<Vec<AcquirerCharge>, AcquirerError> {
        self.page(from, to, after, limit)
            .await
            .map(|found| found.iter().map(LedgerEntry::to_charge).collect())
            .map_err(|e| AcquirerError::Unknown(format!("acquirer ledger read failed: {e}")))
    }

    async fn charges_for_reference(
        &self,
        shop_id: &ShopId,
        reference: &Reference,
    ) -> Result<Vec<AcquirerCharge>, AcquirerError> {
        self.find_for_reference(shop_id, reference)
            .await
            .map(|found| found.iter().map(LedgerEntry::to_charge).collect())
            .map_err(|e| AcquirerError::Unknown(format!("acquirer ledger read failed: {e}")))
    }

    async fn refund(&self, charge_id: &str) -> Result<AcquirerRefund, AcquirerError> {
        let record = self
            .refund_charge(charge_id)
            .await
            .map_err(|e| AcquirerError::Unknown(format!("refund refused: {e}")))?;
        refund_of(record)
    }
}
