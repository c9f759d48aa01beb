//! The PostgreSQL store: production, shared by many service instances.
//!
//! Races between instances are settled by the `(shop_id, key)` primary key and the
//! one-live-payment-per-order partial unique index. Lease deadlines and expiry are
//! compared with the database's `now()`, so instance clocks never matter.
//!
//! This file holds the type, its connection and migrations, and the impls
//! of the role traits, which hand each call to the file of its concern. The
//! SQLite store (`../sqlite/`) has the same files with the same functions in the same
//! order, so `diff postgres/refunds.rs sqlite/refunds.rs` shows one script
//! in two dialects.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chargeonce_core::events::{
    AttemptOutcome, DueEvent, Event, EventId, EventQuery, WebhookEndpoint,
};
use chargeonce_core::store::{Health, Keys, Outbox, Payments, Reconciliation, Refunds, Shops};
use chargeonce_core::{
    Acquired, AcquirerKey, Claim, ClaimRequest, EventRecorded, Fingerprint, FinishOutcome,
    IdempotencyKey, InboundEvent, KeyRecord, KeyTiming, Lease, NewPayment, NewRefund, Payment,
    PaymentId, Reference, Refund, RefundClaim, RefundId, RefundSettlement, SecretHash,
    SettleOutcome, Settlement, ShopId, StalledKey, StoreError, StoredResponse,
};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use time::OffsetDateTime;

use crate::PoolConfig;

mod claim;
mod errors;
mod events;
mod finish;
mod keys;
mod outbox;
mod payments;
mod reconciliation;
mod refunds;
mod shops;

use errors::store_error;

/// [`Store`](chargeonce_core::Store) on PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// Connects with a `postgres://` URL and runs the migrations.
    pub async fn connect(url: &str, config: &PoolConfig) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::other(format!("bad PostgreSQL URL: {e}")))?
            .application_name("chargeonce")
            .options([("statement_timeout", "15s")]);
        // No ping before each acquire: a round trip per statement otherwise. A
        // dead connection fails one statement (Unavailable) and is dropped.
        let pool = PgPoolOptions::new()
            .max_connections(config.max_connections)
            .test_before_acquire(false)
            .acquire_timeout(config.acquire_timeout)
            .connect_with(options)
            .await
            .map_err(store_error)?;
        let store = Self { pool };
        store.migrate().await?;
        Ok(store)
    }

    /// Applies the embedded migrations (safe to run from several instances at
    /// once: sqlx takes an advisory lock).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::migrate!("./migrations/postgres")
            .run(&self.pool)
            .await
            .map_err(|e| StoreError::other(format!("migration failed: {e}")))
    }

    /// The connection pool, for tests and tools.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Closes every connection; later calls fail as `Unavailable`.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

#[async_trait]
impl Keys for PgStore {
    async fn claim_payment(
        &self,
        claim: &ClaimRequest,
        payment: &NewPayment,
        timing: KeyTiming,
    ) -> Result<Claim, StoreError> {
        claim::claim_payment(self, claim, payment, timing).await
    }

    async fn take_over(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> Result<Option<Acquired>, StoreError> {
        claim::take_over(self, shop_id, key, fingerprint, lease).await
    }

    async fn renew_lease(&self, lease: &Lease, duration: Duration) -> Result<bool, StoreError> {
        claim::renew_lease(self, lease, duration).await
    }

    async fn release_lease(&self, lease: &Lease) -> Result<bool, StoreError> {
        claim::release_lease(self, lease).await
    }

    async fn park_lease(&self, lease: &Lease, hold: Duration) -> Result<bool, StoreError> {
        claim::park_lease(self, lease, hold).await
    }

    async fn abandon_key(&self, lease: &Lease) -> Result<bool, StoreError> {
        claim::abandon_key(self, lease).await
    }

    async fn finish(
        &self,
        lease: &Lease,
        settlement: Option<(&Payment, &Settlement)>,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<FinishOutcome, StoreError> {
        finish::finish(self, lease, settlement, response, ttl).await
    }

    async fn key(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
    ) -> Result<Option<KeyRecord>, StoreError> {
        keys::key(self, shop_id, key).await
    }

    async fn sweep_expired_keys(&self, batch: u32) -> Result<u64, StoreError> {
        keys::sweep_expired_keys(self, batch).await
    }

    async fn stalled_keys(
        &self,
        idle: Duration,
        limit: u32,
    ) -> Result<Vec<StalledKey>, StoreError> {
        keys::stalled_keys(self, idle, limit).await
    }
}

#[async_trait]
impl Refunds for PgStore {
    async fn claim_refund(
        &self,
        claim: &ClaimRequest,
        refund: &NewRefund,
        timing: KeyTiming,
    ) -> Result<RefundClaim, StoreError> {
        refunds::claim_refund(self, claim, refund, timing).await
    }

    async fn finish_refund(
        &self,
        lease: &Lease,
        settlement: Option<(&RefundId, &RefundSettlement)>,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<FinishOutcome, StoreError> {
        refunds::finish_refund(self, lease, settlement, response, ttl).await
    }

    async fn refund(&self, shop_id: &ShopId, id: &RefundId) -> Result<Option<Refund>, StoreError> {
        refunds::refund(self, shop_id, id).await
    }
}

#[async_trait]
impl Payments for PgStore {
    async fn payment(
        &self,
        shop_id: &ShopId,
        id: &PaymentId,
    ) -> Result<Option<Payment>, StoreError> {
        payments::payment(self, shop_id, id).await
    }

    async fn payments_by_reference(
        &self,
        shop_id: &ShopId,
        reference: &Reference,
    ) -> Result<Vec<Payment>, StoreError> {
        payments::payments_by_reference(self, shop_id, reference).await
    }
}

#[async_trait]
impl Reconciliation for PgStore {
    async fn pending_payments(
        &self,
        older_than: Duration,
        limit: u32,
    ) -> Result<Vec<Payment>, StoreError> {
        reconciliation::pending_payments(self, older_than, limit).await
    }

    async fn payments_created_between(
        &self,
        from: OffsetDateTime,
        to: OffsetDateTime,
        after: Option<&PaymentId>,
        limit: u32,
    ) -> Result<Vec<Payment>, StoreError> {
        reconciliation::payments_created_between(self, from, to, after, limit).await
    }

    async fn payment_by_acquirer_key(
        &self,
        key: &AcquirerKey,
    ) -> Result<Option<Payment>, StoreError> {
        reconciliation::payment_by_acquirer_key(self, key).await
    }

    async fn settle_payment(
        &self,
        shop_id: &ShopId,
        id: &PaymentId,
        settlement: &Settlement,
    ) -> Result<SettleOutcome, StoreError> {
        events::settle_payment(self, shop_id, id, settlement).await
    }

    async fn record_event(&self, event: &InboundEvent) -> Result<EventRecorded, StoreError> {
        events::record_event(self, event).await
    }
}

#[async_trait]
impl Outbox for PgStore {
    async fn events(&self, shop_id: &ShopId, query: &EventQuery) -> Result<Vec<Event>, StoreError> {
        outbox::events(self, shop_id, query).await
    }

    async fn event(&self, shop_id: &ShopId, id: &EventId) -> Result<Option<Event>, StoreError> {
        outbox::event(self, shop_id, id).await
    }

    async fn resend_event(
        &self,
        shop_id: &ShopId,
        id: &EventId,
    ) -> Result<Option<Event>, StoreError> {
        outbox::resend_event(self, shop_id, id).await
    }

    async fn claim_due_events(
        &self,
        limit: u32,
        lease: Duration,
    ) -> Result<Vec<DueEvent>, StoreError> {
        outbox::claim_due_events(self, limit, lease).await
    }

    async fn record_attempt(
        &self,
        id: &EventId,
        outcome: &AttemptOutcome,
    ) -> Result<(), StoreError> {
        outbox::record_attempt(self, id, outcome).await
    }
}

#[async_trait]
impl Shops for PgStore {
    async fn add_shop(&self, shop_id: &ShopId, secret: &SecretHash) -> Result<(), StoreError> {
        shops::add_shop(self, shop_id, secret).await
    }

    async fn shop_secret(&self, shop_id: &ShopId) -> Result<Option<SecretHash>, StoreError> {
        shops::shop_secret(self, shop_id).await
    }

    async fn set_webhook(
        &self,
        shop_id: &ShopId,
        endpoint: Option<&WebhookEndpoint>,
    ) -> Result<bool, StoreError> {
        shops::set_webhook(self, shop_id, endpoint).await
    }
}

#[async_trait]
impl Health for PgStore {
    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map_err(store_error)?;
        Ok(())
    }
}
