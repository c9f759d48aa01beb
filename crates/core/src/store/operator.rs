//! The operator role: what the operator console reads across shops, and
//! the operator's credential.

use async_trait::async_trait;
use time::OffsetDateTime;

use super::{Page, PageRequest, PaymentFilter, StoreError};
use crate::events::EventId;
use crate::findings::FindingKind;
use crate::{Payment, PaymentId, SecretHash, ShopId};

/// A shop as the console lists it (never its secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShopSummary {
    /// The shop.
    pub shop_id: ShopId,
    /// The URL of its operator webhook endpoint (`shops set-webhook`), if
    /// it has one (never the signing secret).
    pub webhook_url: Option<String>,
    /// When it was registered.
    pub created_at: OffsetDateTime,
}

/// Counts the console's overview shows (and the metrics' gauges), read from
/// the store in one statement: **live mode's** only. Test mode's payments,
/// findings and deliveries are the merchants' own experiments (a developer's
/// receiver that is down, a test ledger thrown away): they must never page
/// the people on call, and the console shows them under its Mode filter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreCounts {
    /// Payments still pending.
    pub pending_payments: u64,
    /// Findings not resolved.
    pub open_findings: u64,
    /// Findings not resolved, by kind, in the order of
    /// [`FindingKind::ALL`] (read them with [`StoreCounts::open_findings_of`]).
    pub open_findings_by_kind: [u64; 4],
    /// Deliveries of merchant events (one per event and endpoint) not
    /// delivered and not given up (parked ones, to disabled endpoints,
    /// included).
    pub undelivered_events: u64,
    /// Deliveries the relay owes: not delivered, not given up, to enabled
    /// endpoints (so not parked), whether their next attempt is now or after
    /// a backoff.
    pub due_events: u64,
    /// The oldest `due_since` (written, unparked or resent) of those
    /// (`None`: none due).
    pub oldest_due_at: Option<time::OffsetDateTime>,
    /// When the oldest pending payment was created (`None`: none pending).
    pub oldest_pending_at: Option<time::OffsetDateTime>,
}

impl StoreCounts {
    /// The open findings of one kind.
    pub fn open_findings_of(&self, kind: FindingKind) -> u64 {
        FindingKind::ALL
            .iter()
            .position(|k| *k == kind)
            .and_then(|i| self.open_findings_by_kind.get(i).copied())
            .unwrap_or(0)
    }
}

/// How pressed the store's own resources are right now, read from memory
/// without a statement (so a scrape can read it even when the database does
/// not answer). Each part is `None` for a store that has no such resource.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StorePressure {
    /// A single writer's queue (the SQLite store).
    pub write_queue: Option<WriteQueue>,
    /// A connection pool (the PostgreSQL store).
    pub pool: Option<PoolUse>,
}

/// The writes waiting for a single writer, and how many may wait before
/// new work is refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteQueue {
    /// Writes waiting now.
    pub depth: u64,
    /// The most that may wait before new work is refused (0: no limit).
    pub limit: u64,
}

/// A connection pool's connections now, and how long callers waited for one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PoolUse {
    /// Open and idle (ready for the next statement).
    pub idle: u64,
    /// Open and held by a statement or transaction.
    pub in_use: u64,
    /// The most the pool opens.
    pub max: u64,
    /// How long callers waited to get a connection, since the store opened.
    pub acquire_wait: WaitHistogram,
}

/// A histogram of waits, counted since the store opened.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WaitHistogram {
    /// `(upper bound in seconds, waits at or below it and above the previous
    /// bound)`, in increasing order, the last bound infinite.
    pub buckets: Vec<(f64, u64)>,
    /// Every wait.
    pub count: u64,
    /// Their sum, in seconds.
    pub sum_seconds: f64,
}

/// The console's reads across shops, and the operator's credential.
#[async_trait]
pub trait Operator: Send + Sync + 'static {
    /// The operator's stored secret hash, if one was set.
    async fn operator_secret(&self) -> Result<Option<SecretHash>, StoreError>;

    /// Stores the operator's secret hash unless one exists; `true` when it
    /// was stored (the first start), `false` when one was there.
    async fn init_operator_secret(&self, hash: &SecretHash) -> Result<bool, StoreError>;

    /// Replaces the operator's secret hash (given by flag).
    async fn set_operator_secret(&self, hash: &SecretHash) -> Result<(), StoreError>;

    /// One page of every shop's payments of `mode` (of one shop in `mode`
    /// when `shop_id` is given) that match `filter`, newest first by
    /// `(created_at, id)`, as [`Payments::list_payments`](super::Payments::list_payments)
    /// pages: the console shows one mode at a time.
    async fn all_payments(
        &self,
        shop_id: Option<&ShopId>,
        mode: crate::api_key::Mode,
        filter: &PaymentFilter,
        page: &PageRequest<PaymentId>,
    ) -> Result<Page<Payment>, StoreError>;

    /// One payment of any shop.
    async fn any_payment(&self, id: &PaymentId) -> Result<Option<Payment>, StoreError>;

    /// The merchant events about one payment (of any shop), oldest first,
    /// with their delivery logs.
    async fn payment_events(&self, id: &PaymentId)
    -> Result<Vec<crate::events::Event>, StoreError>;

    /// The shop a merchant event belongs to.
    async fn event_shop(&self, id: &EventId) -> Result<Option<ShopId>, StoreError>;

    /// Every shop by its own id (its test mode, `{id}.test`, is not listed),
    /// oldest first.
    async fn shops(&self) -> Result<Vec<ShopSummary>, StoreError>;

    /// The overview's counts.
    async fn counts(&self) -> Result<StoreCounts, StoreError>;

    /// How pressed the store's writer queue or connection pool is now (no
    /// statement; nothing for a store without either).
    fn pressure(&self) -> StorePressure {
        StorePressure::default()
    }
}
