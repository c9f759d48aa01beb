//! What the reconciler reads to compare our payments with the acquirer's
//! ledger: pending payments, payments by creation time, a payment by its
//! acquirer key.

use std::time::Duration;

use chargeonce_core::{AcquirerKey, Payment, PaymentId, StoreError};
use chargeonce_sqlite::rusqlite::params;
use time::OffsetDateTime;

use super::{SqliteStore, all, now_ms, one, unix_ms};
use crate::codec::millis;
use crate::columns::payment_columns;
use crate::rows::PaymentRow;

/// Pending payments created at least `older_than` ago, oldest first.
pub(super) async fn pending_payments(
    store: &SqliteStore,
    older_than: Duration,
    limit: u32,
) -> Result<Vec<Payment>, StoreError> {
    store
        .read(move |conn| {
            all::<PaymentRow, _>(
                conn,
                concat!(
                    "SELECT ",
                    payment_columns!(),
                    " FROM payments WHERE status = 'pending' AND created_at <= ",
                    now_ms!(),
                    " - ?1 ORDER BY created_at LIMIT ?2"
                ),
                params![millis(older_than), i64::from(limit)],
            )
        })
        .await
}

/// Payments created in `[from, to)`, by id, after `after` (keyset pagination).
pub(super) async fn payments_created_between(
    store: &SqliteStore,
    from: OffsetDateTime,
    to: OffsetDateTime,
    after: Option<&PaymentId>,
    limit: u32,
) -> Result<Vec<Payment>, StoreError> {
    let after = after.cloned();
    store
        .read(move |conn| {
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
pub(super) async fn payment_by_acquirer_key(
    store: &SqliteStore,
    key: &AcquirerKey,
) -> Result<Option<Payment>, StoreError> {
    let key = key.clone();
    store
        .read(move |conn| {
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
