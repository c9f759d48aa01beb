//! The acquirer simulator: its type, settings, construction and reads.
//!
//! Which answer a charge gets lives in `behaviour`, the charge and refund
//! operations of the core's traits in `acquirer`, refunds in `refunds`, and
//! the webhook events a charge records in `events`.

mod acquirer;
mod behaviour;
mod captures;
mod events;
mod in_flight;
mod refunds;

use std::path::Path;
use std::sync::{Mutex, PoisonError, RwLock};
use std::time::Duration;

use chargeonce_core::{AcquirerKey, LedgerCursor, PaymentId, Reference, ShopId};
use rand::SeedableRng;
use rand::rngs::StdRng;
use time::OffsetDateTime;

use crate::faults::{Faults, FaultsError};
use crate::ledger::{Ledger, unix_millis};
use crate::{LedgerEntry, LedgerReport, SimulatorError};

pub use crate::in_flight_duplicate::{IN_FLIGHT_DUPLICATE, InFlightDuplicate};
pub use behaviour::{
    Behaviour, CARD_DECLINED, DO_NOT_HONOR, INSUFFICIENT_FUNDS, KEY_REUSED, LOST_ANSWER,
    UNKNOWN_TOKEN, tokens,
};
pub use captures::{CaptureRecord, VoidRecord};
pub(crate) use in_flight::{InFlight, InFlightGuard};
pub use refunds::{
    REFUND_CHARGE_DECLINED, REFUND_EXCEEDS_CHARGE, REFUND_NO_SUCH_CHARGE, RefundRecord,
};
pub(crate) use refunds::{refund_of, refund_settlement};

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
    /// The keys whose first charge request has not recorded yet.
    in_flight: InFlight,
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
            in_flight: InFlight::default(),
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

    /// Whether charges may be recorded late (the late-record fault is on),
    /// read without cloning the faults.
    pub(crate) fn late_records(&self) -> bool {
        self.faults
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .late_rate
            > 0.0
    }

    /// How duplicates of a request in flight are answered, read without
    /// cloning the faults.
    pub(crate) fn in_flight_duplicates(&self) -> InFlightDuplicate {
        self.faults
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .in_flight_duplicate
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

    /// Closes the ledger's connections. Later calls fail; the file stays.
    pub async fn close(&self) {
        self.ledger.close().await;
    }
}
