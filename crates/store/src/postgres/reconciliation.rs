//! What the reconciler reads to compare our payments with the acquirer's
//! ledger: pending payments, payments by creation time, a payment by its
//! acquirer key.

use std::time::Duration;

use async_trait::async_trait;
use chargeonce_core::api_key::Mode;
use chargeonce_core::store::Reconciliation;
use chargeonce_core::{
    AcquirerKey, EventRecorded, InboundEvent, Payment, PaymentId, SettleOutcome, Settlement,
    ShopId, StoreError,
};
use time::OffsetDateTime;

use super::pending::pending_set;
use super::{PgStore, events};
use crate::codec::millis;
use crate::columns::payment_columns;
use crate::rows::PaymentRow;

#[async_trait]
impl Reconciliation for PgStore {
    /// Pending payments created at least `older_than` ago, oldest first: the
    /// first `limit` of the queued and in-flight ones ([`super::pending`]),
    /// read from their rows.
    #[tracing::instrument(level = "debug", name = "store.pending_payments", skip_all, fields(db.system = "postgresql"))]
    async fn pending_payments_of(
        &self,
        mode: Option<Mode>,
        older_than: Duration,
        limit: u32,
    ) -> Result<Vec<Payment>, StoreError> {
        super::all(
            self,
            sqlx::query_as::<_, PaymentRow>(concat!(
                "SELECT ",
                payment_columns!(),
                " FROM payments WHERE id IN (SELECT id FROM (",
                pending_set!(
                    "q.created_at <= now() - $1::float8 * interval '1 millisecond' \
                     AND ($3::text IS NULL OR (q.shop_id LIKE '%.test') = ($3::text = 'test'))",
                    "p.created_at <= now() - $1::float8 * interval '1 millisecond' \
                     AND ($3::text IS NULL OR (k.shop_id LIKE '%.test') = ($3::text = 'test'))",
                    "ORDER BY 1, 2 LIMIT $2"
                ),
                " ) pending ORDER BY created_at, id LIMIT $2) \
                   AND status = 'pending' \
                 ORDER BY created_at, id"
            ))
            .bind(millis(older_than) as f64)
            .bind(i64::from(limit))
            .bind(mode.map(Mode::as_str)),
        )
        .await
    }

    /// Payments created in `[from, to)`, by id, after `after` (keyset pagination).
    #[tracing::instrument(level = "debug", name = "store.payments_created_between", skip_all, fields(db.system = "postgresql"))]
    async fn payments_created_between(
        &self,
        from: OffsetDateTime,
        to: OffsetDateTime,
        after: Option<&PaymentId>,
        limit: u32,
    ) -> Result<Vec<Payment>, StoreError> {
        super::all(
            self,
            sqlx::query_as::<_, PaymentRow>(concat!(
                "SELECT ",
                payment_columns!(),
                " FROM payments WHERE created_at >= $1 AND created_at < $2 \
                   AND id > COALESCE($3::text, '') ORDER BY id LIMIT $4"
            ))
            .bind(from)
            .bind(to)
            .bind(after.map(PaymentId::as_str))
            .bind(i64::from(limit)),
        )
        .await
    }

    /// The payment that carries an acquirer key: the one it names.
    #[tracing::instrument(level = "debug", name = "store.payment_by_acquirer_key", skip_all, fields(db.system = "postgresql"))]
    async fn payment_by_acquirer_key(
        &self,
        key: &AcquirerKey,
    ) -> Result<Option<Payment>, StoreError> {
        // The key names its payment (migration 0025: it is not stored).
        let Some(id) = key.payment_id() else {
            return Ok(None);
        };
        super::one(
            self,
            sqlx::query_as::<_, PaymentRow>(concat!(
                "SELECT ",
                payment_columns!(),
                " FROM payments WHERE id = $1"
            ))
            .bind(id.as_str()),
        )
        .await
    }

    #[tracing::instrument(level = "debug", name = "store.settle_payment", skip_all, fields(db.system = "postgresql"))]
    async fn settle_payment(
        &self,
        shop_id: &ShopId,
        id: &PaymentId,
        settlement: &Settlement,
    ) -> Result<SettleOutcome, StoreError> {
        events::settle_payment(self, shop_id, id, settlement).await
    }

    #[tracing::instrument(level = "debug", name = "store.record_event", skip_all, fields(db.system = "postgresql"))]
    async fn record_event(&self, event: &InboundEvent) -> Result<EventRecorded, StoreError> {
        events::record_event(self, event).await
    }
}
