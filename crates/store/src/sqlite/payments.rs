//! Reading payments (one by id, and an order's payments), and the
//! conditional settlement `pending` -> final of a payment row that the
//! finish, `settle_payment` and `record_event` share.

use chargeonce_core::{Payment, PaymentId, Reference, Settlement, ShopId, StoreError};
use chargeonce_sqlite::rusqlite::{Connection, params};

use super::{Result, SqliteStore, all, now_ms, one};
use crate::columns::payment_columns;
use crate::rows::{FromSqliteRow, PaymentRow};

/// One payment of one shop.
pub(super) async fn payment(
    store: &SqliteStore,
    shop_id: &ShopId,
    id: &PaymentId,
) -> Result<Option<Payment>, StoreError> {
    let (shop_id, id) = (shop_id.clone(), id.clone());
    store
        .read(move |conn| payment_in(conn, &shop_id, &id))
        .await
}

/// All payments of one shop for one order, oldest first.
pub(super) async fn payments_by_reference(
    store: &SqliteStore,
    shop_id: &ShopId,
    reference: &Reference,
) -> Result<Vec<Payment>, StoreError> {
    let (shop_id, reference) = (shop_id.clone(), reference.clone());
    store
        .read(move |conn| {
            all::<PaymentRow, _>(
                conn,
                concat!(
                    "SELECT ",
                    payment_columns!(),
                    " FROM payments WHERE shop_id = ?1 AND reference = ?2 \
                  ORDER BY created_at, id"
                ),
                params![shop_id.as_str(), reference.as_str()],
            )
        })
        .await
}

/// One payment of one shop, on whichever connection.
pub(super) fn payment_in(
    conn: &Connection,
    shop_id: &ShopId,
    id: &PaymentId,
) -> Result<Option<Payment>> {
    one::<PaymentRow, _>(
        conn,
        concat!(
            "SELECT ",
            payment_columns!(),
            " FROM payments WHERE shop_id = ?1 AND id = ?2"
        ),
        params![shop_id.as_str(), id.as_str()],
    )
}

/// Which row a settlement names.
#[derive(Clone, Copy)]
pub(super) enum SettleBy {
    /// The payment's id.
    Id,
    /// The payment's acquirer key (webhooks).
    AcquirerKey,
}

/// The conditional update `pending` -> final and the read of the row back,
/// for a payment named by id or by acquirer key.
fn settle_sql(by: SettleBy) -> (&'static str, &'static str) {
    match by {
        SettleBy::Id => (
            concat!(
                "UPDATE payments SET status = ?3, provider_payment_id = ?4, decline_code = ?5, \
                     updated_at = ",
                now_ms!(),
                " WHERE id = ?1 AND shop_id = ?2 AND status = 'pending'"
            ),
            concat!(
                "SELECT ",
                payment_columns!(),
                " FROM payments WHERE id = ?1 AND shop_id = ?2"
            ),
        ),
        SettleBy::AcquirerKey => (
            concat!(
                "UPDATE payments SET status = ?3, provider_payment_id = ?4, decline_code = ?5, \
                     updated_at = ",
                now_ms!(),
                " WHERE acquirer_key = ?1 AND shop_id = ?2 AND status = 'pending'"
            ),
            concat!(
                "SELECT ",
                payment_columns!(),
                " FROM payments WHERE acquirer_key = ?1 AND shop_id = ?2"
            ),
        ),
    }
}

/// Settles a pending payment (`pending` -> final, a conditional update);
/// `false` when no pending payment matched.
pub(super) fn settle_row(
    conn: &Connection,
    by: SettleBy,
    which: &str,
    shop_id: &ShopId,
    settlement: &Settlement,
) -> Result<bool> {
    let settled = conn.prepare_cached(settle_sql(by).0)?.execute(params![
        which,
        shop_id.as_str(),
        settlement.status.as_str(),
        settlement.provider_payment_id,
        settlement.decline_code,
    ])?;
    Ok(settled == 1)
}

/// [`settle_row`], and the settled row read back; `None` when no pending
/// payment matched.
pub(super) fn settle_where(
    conn: &Connection,
    by: SettleBy,
    which: &str,
    shop_id: &ShopId,
    settlement: &Settlement,
) -> Result<Option<Payment>> {
    if !settle_row(conn, by, which, shop_id, settlement)? {
        return Ok(None);
    }
    let row = conn
        .prepare_cached(settle_sql(by).1)?
        .query_row(params![which, shop_id.as_str()], PaymentRow::from_sqlite)?;
    Ok(Some(Payment::try_from(row)?))
}
