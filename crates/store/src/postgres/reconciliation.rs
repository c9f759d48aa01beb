//! What the reconciler reads to compare our payments with the acquirer's
//! ledger: pending payments, payments by creation time, a payment by its
//! acquirer key.

use std::time::Duration;

use chargeonce_core::{AcquirerKey, Payment, PaymentId, StoreError};
use time::OffsetDateTime;

use super::PgStore;
use crate::codec::millis;
use crate::columns::payment_columns;
use crate::rows::PaymentRow;

/// Pending payments created at least `older_than` ago, oldest first: the
/// first `limit` of the pending queue (`pending_payments`, in its key's
/// order), read from their rows.
pub(super) async fn pending_payments(
    store: &PgStore,
    older_than: Duration,
    limit: u32,
) -> Result<Vec<Payment>, StoreError> {
    super::all(
        store,
        sqlx::query_as::<_, PaymentRow>(concat!(
            "SELECT ",
            payment_columns!(),
            " FROM payments WHERE id IN ( \
                 SELECT payment_id FROM pending_payments \
                 WHERE created_at <= now() - $1::float8 * interval '1 millisecond' \
                 ORDER BY created_at, payment_id LIMIT $2) \
               AND status = 'pending' \
             ORDER BY created_at, id"
        ))
        .bind(millis(older_than) as f64)
        .bind(i64::from(limit)),
    )
    .await
}

/// Payments created in `[from, to)`, by id, after `after` (keyset pagination).
pub(super) async fn payments_created_between(
    store: &PgStore,
    from: OffsetDateTime,
    to: OffsetDateTime,
    after: Option<&PaymentId>,
    limit: u32,
) -> Result<Vec<Payment>, StoreError> {
    super::all(
        store,
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

/// The payment that carries an acquirer key.
pub(super) async fn payment_by_acquirer_key(
    store: &PgStore,
    key: &AcquirerKey,
) -> Result<Option<Payment>, StoreError> {
    super::one(
        store,
        sqlx::query_as::<_, PaymentRow>(concat!(
            "SELECT ",
            payment_columns!(),
            " FROM payments WHERE acquirer_key = $1"
        ))
        .bind(key.as_str()),
    )
    .await
}
