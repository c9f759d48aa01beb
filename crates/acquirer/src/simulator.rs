//! The simulator's behaviour: which answer a charge gets, and when.

use std::path::Path;
use std::sync::{Mutex, PoisonError, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use chargeonce_core::webhook::{AcquirerEvent, EventAmount, EventCharge, EventKind};
use chargeonce_core::{
    Acquirer, AcquirerCharge, AcquirerError, AcquirerKey, AcquirerLedger, AcquirerRefund,
    CardToken, ChargeRequest, ChargeResult, Currency, LedgerCursor, Money, PaymentId, Reference,
    RefundRequest, RefundSettlement, ShopId,
};
use rand::SeedableRng;
use rand::rngs::StdRng;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::entry::now_millis;
use crate::faults::{Faults, FaultsError};
use crate::ledger::{Ledger, NewRefundRow, OutboxEvent, RefundRefused, RefundRow, unix_millis};
use crate::{ChargeStatus, LedgerEntry, LedgerReport, SimulatorError};

/// Decline code of `tok_declined`.
pub const CARD_DECLINED: &str = "card_declined";

/// Decline code of `tok_insufficient_funds`.
pub const INSUFFICIENT_FUNDS: &str = "insufficient_funds";

/// What the simulator says when an acquirer key is reused with other
/// parameters (amount, currency, shop, reference or payment id), as a real
/// provider's idempotency error. The attempt is NOT recorded, and the answer is
/// [`AcquirerError::Unknown`], never a decline: the key's first charge may well
/// have moved money, so nothing definite may be concluded from the refusal.
pub const KEY_REUSED: &str = "idempotency_key_reused";

/// Decline code of a token the simulator does not know (a typo such as
/// `tok_declinde` must not charge the card: a test meant to see a decline
/// would pass without one).
pub const UNKNOWN_TOKEN: &str = "unknown_token";

/// Decline code of charges declined by the fault injector's decline rate.
pub const DO_NOT_HONOR: &str = "do_not_honor";

/// The message of the [`AcquirerError::Unknown`] that `tok_timeout` returns on
/// the first execution of a key.
pub const LOST_ANSWER: &str = "timeout: answer lost after commit";

/// The card tokens that choose the simulator's behaviour.
pub mod tokens {
    /// Succeeds.
    pub const OK: &str = "tok_ok";
    /// Declined with `card_declined`.
    pub const DECLINED: &str = "tok_declined";
    /// Declined with `insufficient_funds`.
    pub const INSUFFICIENT_FUNDS: &str = "tok_insufficient_funds";
    /// Charged, but the first answer is lost (the caller sees a timeout).
    pub const TIMEOUT: &str = "tok_timeout";
    /// Charged, then answered after [`SimulatorConfig::slow`](crate::SimulatorConfig::slow).
    pub const SLOW: &str = "tok_slow";
    /// In flight at the acquirer: recorded only after
    /// [`SimulatorConfig::slow`](crate::SimulatorConfig::slow), whether or
    /// not the caller still waits (its refunds too), then answered.
    pub const LATE: &str = "tok_late";

    /// Every token above; any other is declined with
    /// [`UNKNOWN_TOKEN`](super::UNKNOWN_TOKEN).
    pub const ALL: [&str; 6] = [OK, DECLINED, INSUFFICIENT_FUNDS, TIMEOUT, SLOW, LATE];
}

/// How the simulator treats a charge, chosen by its card token.
///
/// | token | behaviour |
/// |---|---|
/// | `tok_ok` | [`Behaviour::Succeed`] |
/// | `tok_declined` | [`Behaviour::Decline`] with `card_declined` |
/// | `tok_insufficient_funds` | [`Behaviour::Decline`] with `insufficient_funds` |
/// | `tok_timeout` | [`Behaviour::LoseAnswer`] |
/// | `tok_slow` | [`Behaviour::Slow`] |
/// | `tok_late` | [`Behaviour::Late`] |
/// | any other token | [`Behaviour::Decline`] with `unknown_token` ([`UNKNOWN_TOKEN`]) |
///
/// The special behaviours (lost, slow) apply only to the one execution that
/// wrote the ledger row; every repeat of the key gets the stored answer at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Charges and answers `Succeeded`.
    Succeed,
    /// Records a declined attempt and answers `Declined` with this code.
    Decline(&'static str),
    /// Charges (the row is committed as succeeded), then loses the answer: the
    /// first execution returns [`AcquirerError::Unknown`] with [`LOST_ANSWER`].
    LoseAnswer,
    /// Charges, then waits [`SimulatorConfig::slow`] before answering `Succeeded`.
    Slow,
    /// Waits [`SimulatorConfig::slow`], then charges and answers `Succeeded`.
    /// The charge is made even when the caller gave up meanwhile: a
    /// provider's processing does not stop when its client's timeout fires.
    /// A refund of such a payment is recorded late the same way.
    Late,
}

impl Behaviour {
    /// The behaviour a token selects.
    pub fn of(token: &CardToken) -> Self {
        match token.as_str() {
            tokens::DECLINED => Self::Decline(CARD_DECLINED),
            tokens::INSUFFICIENT_FUNDS => Self::Decline(INSUFFICIENT_FUNDS),
            tokens::TIMEOUT => Self::LoseAnswer,
            tokens::SLOW => Self::Slow,
            tokens::LATE => Self::Late,
            tokens::OK => Self::Succeed,
            _ => Self::Decline(UNKNOWN_TOKEN),
        }
    }

    /// What the ledger records for it.
    fn outcome(&self) -> (ChargeStatus, Option<String>) {
        match self {
            Self::Decline(code) => (ChargeStatus::Declined, Some((*code).to_owned())),
            Self::Succeed | Self::LoseAnswer | Self::Slow | Self::Late => {
                (ChargeStatus::Succeeded, None)
            }
        }
    }
}

/// Settings of the simulator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimulatorConfig {
    /// How long `tok_slow` waits, after committing, before answering (3 s by default).
    pub slow: Duration,
}

impl Default for SimulatorConfig {
    fn default() -> Self {
        Self {
            slow: Duration::from_secs(3),
        }
    }
}

/// The acquirer simulator: an acquirer over its own SQLite ledger, idempotent
/// on the acquirer key unless told otherwise. See the [crate
/// documentation](crate) for its guarantees.
#[derive(Debug)]
pub struct Simulator {
    ledger: Ledger,
    config: SimulatorConfig,
    idempotent: bool,
    events: bool,
    faults: RwLock<Faults>,
    rng: Mutex<StdRng>,
}

/// A refund at the simulator, as `POST /v1/charges/{id}/refunds` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RefundRecord {
    /// The refund's id (`re_...`).
    pub id: String,
    /// The refunded charge.
    pub charge_id: String,
    /// Minor units given back.
    pub amount_minor: i64,
    /// Its currency.
    pub currency: String,
    /// Unix ms.
    pub created_at: i64,
}

impl From<RefundRow> for RefundRecord {
    fn from(row: RefundRow) -> Self {
        Self {
            id: row.id,
            charge_id: row.charge_id,
            amount_minor: row.amount_minor,
            currency: row.currency,
            created_at: row.created_at,
        }
    }
}

/// Why the simulator refused a refund.
#[derive(Debug, thiserror::Error)]
pub enum RefundError {
    /// No such charge.
    #[error("no charge `{0}`")]
    NoSuchCharge(String),
    /// The charge was declined: no money to give back.
    #[error("charge `{0}` was declined; nothing to refund")]
    Declined(String),
    /// The refund would give back more than what is left of the charge.
    #[error("refund exceeds what is left of charge `{0}`")]
    ExceedsCharge(String),
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] SimulatorError),
}

impl From<RefundRefused> for RefundError {
    fn from(refused: RefundRefused) -> Self {
        match refused {
            RefundRefused::NoSuchCharge(id) => Self::NoSuchCharge(id),
            RefundRefused::Declined(id) => Self::Declined(id),
            RefundRefused::ExceedsCharge(id) => Self::ExceedsCharge(id),
            RefundRefused::Ledger(e) => Self::Ledger(e),
        }
    }
}

impl Simulator {
    /// Opens the ledger file at `path`, creating it (and its table) if missing.
    ///
    /// The file is in WAL mode with `synchronous=FULL` (a recorded charge
    /// survives a power cut) and a busy timeout of 10 s. Other processes may
    /// open the same file at the same time and charge concurrently. The ledger
    /// keeps its migration bookkeeping in its own table
    /// (`_chargeonce_acquirer_migrations`), but should still get a file of its own.
    pub async fn open(path: &Path, config: SimulatorConfig) -> Result<Self, SimulatorError> {
        let ledger = Ledger::open(path).await?;
        Ok(Self::over(ledger, config))
    }

    /// A simulator over a private in-memory ledger, gone when it is dropped. For tests.
    pub async fn in_memory(config: SimulatorConfig) -> Result<Self, SimulatorError> {
        let ledger = Ledger::in_memory().await?;
        Ok(Self::over(ledger, config))
    }

    fn over(ledger: Ledger, config: SimulatorConfig) -> Self {
        Self {
            ledger,
            config,
            idempotent: true,
            events: false,
            faults: RwLock::new(Faults::default()),
            rng: Mutex::new(StdRng::from_os_rng()),
        }
    }

    /// With `false`, behaves like a provider without idempotency: every
    /// charge request records a new charge, whatever key it carries, and
    /// nothing can be looked up by key (only by the caller's reference).
    pub fn with_idempotency(mut self, idempotent: bool) -> Self {
        self.idempotent = idempotent;
        self
    }

    /// Records a `payment.processing` and a `payment.succeeded` /
    /// `payment.declined` event per charge in the ledger's outbox, in the
    /// charge's transaction, for a [`crate::webhooks`] deliverer to send.
    pub fn with_events(mut self, events: bool) -> Self {
        self.events = events;
        self
    }

    /// Draws faults from a seeded generator (reproducible single-threaded runs).
    pub fn with_seed(self, seed: u64) -> Self {
        *self.rng.lock().unwrap_or_else(PoisonError::into_inner) = StdRng::seed_from_u64(seed);
        self
    }

    /// Whether it deduplicates on the acquirer key.
    pub fn idempotent(&self) -> bool {
        self.idempotent
    }

    /// The faults in force.
    pub fn faults(&self) -> Faults {
        self.faults
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Changes the faults, at once, for every request that starts after.
    pub fn set_faults(&self, faults: Faults) -> Result<(), FaultsError> {
        faults.validate()?;
        *self.faults.write().unwrap_or_else(PoisonError::into_inner) = faults;
        Ok(())
    }

    /// Draws from the fault generator.
    pub fn roll<T>(&self, draw: impl FnOnce(&Faults, &mut StdRng) -> T) -> T {
        let faults = self.faults();
        let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
        draw(&faults, &mut rng)
    }

    /// Its settings.
    pub fn config(&self) -> &SimulatorConfig {
        &self.config
    }

    /// Every charge attempt, ordered by `created_at`, then `id`.
    pub async fn ledger(&self) -> Result<Vec<LedgerEntry>, SimulatorError> {
        self.ledger.all().await
    }

    /// The attempt recorded under an acquirer key, without charging: what the
    /// reconciler asks when it only wants to know. Always `None` for charges
    /// recorded without idempotency.
    pub async fn find(&self, key: &AcquirerKey) -> Result<Option<LedgerEntry>, SimulatorError> {
        self.ledger.find(key.as_str()).await
    }

    /// Every attempt for a caller's payment (its reference), oldest first.
    pub async fn find_for_payment(
        &self,
        shop_id: &ShopId,
        payment_id: &PaymentId,
    ) -> Result<Vec<LedgerEntry>, SimulatorError> {
        self.ledger
            .for_payment(shop_id.as_str(), payment_id.as_str())
            .await
    }

    /// Every attempt recorded in `[from, to)`, oldest first.
    pub async fn between(
        &self,
        from: OffsetDateTime,
        to: OffsetDateTime,
    ) -> Result<Vec<LedgerEntry>, SimulatorError> {
        self.ledger
            .between(unix_millis(from), unix_millis(to))
            .await
    }

    /// Up to `limit` attempts recorded in `[from, to)`, ordered by
    /// `created_at` then id, after `after` (keyset pagination).
    pub async fn page(
        &self,
        from: OffsetDateTime,
        to: OffsetDateTime,
        after: Option<&LedgerCursor>,
        limit: u32,
    ) -> Result<Vec<LedgerEntry>, SimulatorError> {
        let after = after.map(|c| (unix_millis(c.created_at), c.charge_id.as_str()));
        self.ledger
            .page(unix_millis(from), unix_millis(to), after, limit)
            .await
    }

    /// Every attempt for one order reference of one shop, oldest first.
    pub async fn find_for_reference(
        &self,
        shop_id: &ShopId,
        reference: &Reference,
    ) -> Result<Vec<LedgerEntry>, SimulatorError> {
        self.ledger
            .for_reference(shop_id.as_str(), reference.as_str())
            .await
    }

    /// Refunds a whole succeeded charge, once (in every mode: this is the
    /// ledger's settlement tool, not the payment API): a repeat returns the
    /// first refund.
    pub async fn refund_charge(&self, charge_id: &str) -> Result<RefundRecord, RefundError> {
        let key = format!("refund-{charge_id}");
        self.refunder(true)
            .refund(charge_id, &key, None, None)
            .await
            .map(|(record, _)| record)
    }

    /// Refunds `amount_minor` of a charge (`None`: what is left of it) under
    /// the caller's `reference` (its refund id), once per `acquirer_key`
    /// unless the simulator runs without idempotency: a repeat returns the
    /// first refund under the key and `false`; `true` when this call
    /// executed it.
    pub async fn refund_part(
        &self,
        charge_id: &str,
        acquirer_key: &str,
        amount_minor: Option<i64>,
        reference: Option<&str>,
    ) -> Result<(RefundRecord, bool), RefundError> {
        self.refunder(self.idempotent)
            .refund(charge_id, acquirer_key, amount_minor, reference)
            .await
    }

    /// Every refund of a charge made under the caller's `reference`, oldest first.
    pub async fn refunds_for_reference(
        &self,
        charge_id: &str,
        reference: &str,
    ) -> Result<Vec<RefundRecord>, SimulatorError> {
        Ok(self
            .ledger
            .refunds_for_reference(charge_id, reference)
            .await?
            .into_iter()
            .map(RefundRecord::from)
            .collect())
    }

    fn refunder(&self, deduplicated: bool) -> Refunder {
        Refunder {
            ledger: self.ledger.clone(),
            deduplicated,
        }
    }

    /// How long the acquirer takes before it records what `behaviour` does.
    fn delay_of(&self, behaviour: Behaviour) -> Duration {
        match behaviour {
            Behaviour::Late => self.config.slow,
            _ => Duration::ZERO,
        }
    }

    /// Runs the acquirer's side of a request. A late one runs in a task of
    /// its own, so it completes even when the caller stops waiting.
    async fn at_acquirer<T: Send + 'static>(
        &self,
        behaviour: Behaviour,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, AcquirerError> {
        if behaviour != Behaviour::Late {
            return Ok(work.await);
        }
        tokio::spawn(work)
            .await
            .map_err(|e| AcquirerError::Unknown(format!("acquirer task failed: {e}")))
    }

    /// Every refund, oldest first.
    pub async fn refunds(&self) -> Result<Vec<RefundRecord>, SimulatorError> {
        Ok(self
            .ledger
            .refunds()
            .await?
            .into_iter()
            .map(RefundRecord::from)
            .collect())
    }

    /// Records a charge as if it had happened, bypassing every rule (for
    /// reconciliation drills: a duplicate or an orphan planted in the books).
    /// The row is not deduplicated on its key.
    pub async fn plant(&self, entry: &LedgerEntry) -> Result<(), SimulatorError> {
        self.ledger.insert(entry, false, &[]).await?;
        tracing::warn!(charge_id = %entry.id, "a charge was planted in the acquirer ledger");
        Ok(())
    }

    /// How many webhook events wait for delivery.
    pub async fn undelivered_events(&self) -> Result<i64, SimulatorError> {
        self.ledger.undelivered().await
    }

    pub(crate) fn ledger_handle(&self) -> &Ledger {
        &self.ledger
    }

    /// The ledger and the money that moved per currency (what `GET /ledger` shows).
    pub async fn report(&self) -> Result<LedgerReport, SimulatorError> {
        Ok(LedgerReport::from_entries(self.ledger().await?))
    }

    /// The outbox events one recorded charge causes.
    fn events_for(&self, entry: &LedgerEntry) -> Vec<OutboxEvent> {
        if !self.events {
            return Vec::new();
        }
        let created = unix_millis(entry.created_at);
        let (reorder, delay) = self.roll(|f, rng| {
            use rand::Rng;
            (
                f.webhook_reorder_rate > 0.0 && rng.random_bool(f.webhook_reorder_rate),
                i64::try_from(f.webhook_reorder_ms).unwrap_or(i64::MAX),
            )
        });
        let terminal = match entry.status {
            ChargeStatus::Succeeded => EventKind::Succeeded,
            ChargeStatus::Declined => EventKind::Declined,
        };
        // Normally `processing` goes first; held back, the outcome overtakes it.
        let processing_due = if reorder {
            created.saturating_add(delay)
        } else {
            created
        };
        [
            (EventKind::Processing, created, processing_due),
            (terminal, created + 1, created + 1),
        ]
        .into_iter()
        .filter_map(|(kind, at, due_at)| {
            let event = AcquirerEvent {
                id: format!("evt_{}", Uuid::now_v7().simple()),
                kind,
                created: at,
                data: EventCharge {
                    charge_id: entry.id.clone(),
                    acquirer_key: entry.acquirer_key.as_str().to_owned(),
                    shop_id: entry.shop_id.as_str().to_owned(),
                    payment_id: entry.payment_id.as_str().to_owned(),
                    reference: entry.reference.as_str().to_owned(),
                    amount: EventAmount {
                        value: entry.amount.to_decimal_string(),
                        currency: entry.amount.currency().code().to_owned(),
                    },
                    decline_code: match kind {
                        EventKind::Declined => entry.decline_code.clone(),
                        _ => None,
                    },
                },
            };
            let payload = serde_json::to_string(&event).ok()?;
            Some(OutboxEvent {
                id: event.id,
                charge_id: entry.id.clone(),
                kind: kind.as_str().to_owned(),
                payload,
                created_at: at,
                due_at,
                attempts: 0,
            })
        })
        .collect()
    }

    /// Closes the ledger's connections. Later calls fail; the file stays.
    pub async fn close(&self) {
        self.ledger.close().await;
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

#[async_trait]
impl Acquirer for Simulator {
    async fn charge(&self, request: &ChargeRequest) -> Result<ChargeResult, AcquirerError> {
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
        };
        let events = self.events_for(&entry);
        let insert = {
            let (ledger, entry, deduplicated) =
                (self.ledger.clone(), entry.clone(), self.idempotent);
            let delay = self.delay_of(behaviour);
            async move {
                tokio::time::sleep(delay).await;
                ledger.insert(&entry, deduplicated, &events).await
            }
        };
        if !self
            .at_acquirer(behaviour, insert)
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
        let behaviour = Behaviour::of(&request.token);
        let refund = {
            let this = self.refunder(self.idempotent);
            let request = request.clone();
            let delay = self.delay_of(behaviour);
            async move {
                tokio::time::sleep(delay).await;
                this.refund(
                    &request.charge_id,
                    request.acquirer_key.as_str(),
                    Some(request.amount.minor_units()),
                    Some(request.refund_id.as_str()),
                )
                .await
            }
        };
        let answer = self.at_acquirer(behaviour, refund).await?;
        refund_settlement(answer, behaviour == Behaviour::LoseAnswer)
    }

    fn is_idempotent(&self) -> bool {
        self.idempotent
    }
}

/// Records refunds in the ledger, deduplicated on the acquirer key or not.
#[derive(Debug, Clone)]
struct Refunder {
    ledger: Ledger,
    deduplicated: bool,
}

impl Refunder {
    async fn refund(
        &self,
        charge_id: &str,
        acquirer_key: &str,
        amount_minor: Option<i64>,
        reference: Option<&str>,
    ) -> Result<(RefundRecord, bool), RefundError> {
        let new = NewRefundRow {
            id: format!("re_{}", Uuid::now_v7().simple()),
            reference: reference.map(str::to_owned),
            at: unix_millis(now_millis()),
            deduplicated: self.deduplicated,
        };
        let (row, first) = self
            .ledger
            .refund(charge_id, acquirer_key, amount_minor, new)
            .await?;
        if first {
            tracing::info!(charge_id, refund_id = %row.id, amount_minor = row.amount_minor, "acquirer refunded a charge");
        }
        Ok((row.into(), first))
    }
}

/// The core's answer for a refund at the simulator: refusals are definite;
/// `lose_first` loses the answer of the execution that recorded the refund.
pub(crate) fn refund_settlement(
    answer: Result<(RefundRecord, bool), RefundError>,
    lose_first: bool,
) -> Result<RefundSettlement, AcquirerError> {
    match answer {
        Ok((_, true)) if lose_first => Err(AcquirerError::Unknown(LOST_ANSWER.to_owned())),
        Ok((record, _)) => Ok(RefundSettlement::Succeeded {
            provider_refund_id: record.id,
        }),
        Err(RefundError::NoSuchCharge(_)) => Ok(RefundSettlement::Failed {
            code: REFUND_NO_SUCH_CHARGE.to_owned(),
        }),
        Err(RefundError::Declined(_)) => Ok(RefundSettlement::Failed {
            code: REFUND_CHARGE_DECLINED.to_owned(),
        }),
        Err(RefundError::ExceedsCharge(_)) => Ok(RefundSettlement::Failed {
            code: REFUND_EXCEEDS_CHARGE.to_owned(),
        }),
        Err(RefundError::Ledger(error)) => Err(AcquirerError::Unknown(format!(
            "acquirer ledger write failed: {error}"
        ))),
    }
}

/// Refusal code: the refunded charge does not exist.
pub const REFUND_NO_SUCH_CHARGE: &str = "no_such_charge";
/// Refusal code: the refunded charge was declined.
pub const REFUND_CHARGE_DECLINED: &str = "charge_declined";
/// Refusal code: the refund exceeds what is left of the charge.
pub const REFUND_EXCEEDS_CHARGE: &str = chargeonce_core::acquirer::REFUND_EXCEEDS_CHARGE;

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

/// The core's view of a refund record.
pub(crate) fn refund_of(record: RefundRecord) -> Result<AcquirerRefund, AcquirerError> {
    let bad = |e: String| AcquirerError::Unknown(format!("refund record unreadable: {e}"));
    let currency = Currency::from_code(&record.currency).map_err(|e| bad(e.to_string()))?;
    let amount =
        Money::from_minor(record.amount_minor, currency).map_err(|e| bad(e.to_string()))?;
    Ok(AcquirerRefund {
        id: record.id,
        charge_id: record.charge_id,
        amount,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn behaviour(token: &str) -> Behaviour {
        Behaviour::of(&CardToken::new(token).unwrap())
    }

    #[test]
    fn tokens_choose_behaviour() {
        assert_eq!(behaviour(tokens::OK), Behaviour::Succeed);
        for unknown in [
            "tok_anything_else",
            "tok_declinde",
            "tok_OK",
            "ok",
            "tok_ok_",
        ] {
            assert_eq!(
                behaviour(unknown),
                Behaviour::Decline(UNKNOWN_TOKEN),
                "{unknown:?}"
            );
        }
        for known in tokens::ALL {
            assert_ne!(behaviour(known), Behaviour::Decline(UNKNOWN_TOKEN));
        }
        assert_eq!(
            behaviour(tokens::DECLINED),
            Behaviour::Decline(CARD_DECLINED)
        );
        assert_eq!(
            behaviour(tokens::INSUFFICIENT_FUNDS),
            Behaviour::Decline(INSUFFICIENT_FUNDS)
        );
        assert_eq!(behaviour(tokens::TIMEOUT), Behaviour::LoseAnswer);
        assert_eq!(behaviour(tokens::SLOW), Behaviour::Slow);
    }

    #[test]
    fn only_declines_are_recorded_as_declined() {
        assert_eq!(
            behaviour(tokens::TIMEOUT).outcome(),
            (ChargeStatus::Succeeded, None)
        );
        assert_eq!(
            behaviour(tokens::SLOW).outcome(),
            (ChargeStatus::Succeeded, None)
        );
        assert_eq!(
            behaviour(tokens::DECLINED).outcome(),
            (ChargeStatus::Declined, Some(CARD_DECLINED.to_owned()))
        );
    }

    #[test]
    fn default_slow_is_three_seconds() {
        assert_eq!(SimulatorConfig::default().slow, Duration::from_secs(3));
    }
}
