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
use chargeonce_sqlite::rusqlite::params;
use time::OffsetDateTime;

use super::{SqliteStore, all, events, now_ms, one, unix_ms};
use crate::codec::millis;
use crate::columns::payment_columns;
use crate::rows::PaymentRow;

#[async_trait]
impl Reconciliation for SqliteStore {
    /// Pending payments created at least `older_than` ago, oldest first.
    #[tracing::instrument(level = "debug", name = "store.pending_payments", skip_all, fields(db.system = "sqlite"))]
    async fn pending_payments_of(
        &self,
        mode: Option<Mode>,
        older_than: Duration,
        limit: u32,
    ) -> Result<Vec<Payment>, StoreError> {
        self.read(move |conn| {
            all::<PaymentRow, _>(
                conn,
                concat!(
                    "SELECT ",
                    payment_columns!(),
                    " FROM payments WHERE status = 'pending' AND created_at <= ",
                    now_ms!(),
                    " - ?1 AND (?3 IS NULL OR (shop_id LIKE '%.test') = (?3 = 'test')) \
                     ORDER BY created_at LIMIT ?2"
                ),
                params![millis(older_than), i64::from(limit), mode.map(Mode::as_str)],
            )
        })
        .await
    }

    /// Payments created in `[from, to)`, by id, after `after` (keyset pagination).
    #[tracing::instrument(level = "debug", name = "store.payments_created_between", skip_all, fields(db.system = "sqlite"))]
    async fn payments_created_between(
        &self,
        from: OffsetDateTime,
        to: OffsetDateTime,
        after: Option<&PaymentId>,
        limit: u32,
    ) -> Result<Vec<Payment>, StoreError> {
        let after = after.cloned();
        self.read(move |conn| {
            all::<PaymentRow, _>(
                conn,
                concat!(
                    "SELECT ",
                    payment_columns!(),
                    " FROM payments WHERE created_at >= ?1 AND created_at < ?2 \
                       AND id > COALESCE(?3, '') ORDER BY id LIMIT ?4"
                ),
                params![
                    unix_ms(from),
                    unix_ms(to),
                    after.as_ref().map(PaymentId::as_str),
                    i64::from(limit),
                ],
            )
        })
        .await
    }

    /// The payment that carries an acquirer key.
    #[tracing::instrument(level = "debug", name = "store.payment_by_acquirer_key", skip_all, fields(db.system = "sqlite"))]
    async fn payment_by_acquirer_key(
        &self,
        key: &AcquirerKey,
    ) -> Result<Option<Payment>, StoreError> {
        let key = key.clone();
        self.read(move |conn| {
            one::<PaymentRow, _>(
                conn,
                concat!(
                    "SELECT ",
                    payment_columns!(),
                    " FROM payments WHERE acquirer_key = ?1"
                ),
                params![key.as_str()],
            )
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "store.settle_payment", skip_all, fields(db.system = "sqlite"))]
    async fn settle_payment(
        &self,
        shop_id: &ShopId,
        id: &PaymentId,
        settlement: &Settlement,
    ) -> Result<SettleOutcome, StoreError> {
        events::settle_payment(self, shop_id, id, settlement).await
    }

    #[tracing::instrument(level = "debug", name = "store.record_event", skip_all, fields(db.system = "sqlite"))]
    async fn record_event(&self, event: &InboundEvent) -> Result<EventRecorded, StoreError> {
        events::record_event(self, event).await
    }
}
