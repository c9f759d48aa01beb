//! Reading payments (one by id, an order's payments, and a shop's payments
//! a page at a time), and the
//! conditional settlement `pending` -> final of a payment row that the
//! finish, `settle_payment` and `record_event` share.

use async_trait::async_trait;
use chargeonce_core::store::Payments;
use chargeonce_core::{
    Cursor, Page, PageRequest, Payment, PaymentFilter, PaymentId, PaymentStatus, Reference,
    Settlement, ShopId, StoreError,
};
use chargeonce_sqlite::rusqlite::{Connection, OptionalExtension, ToSql, params, params_from_iter};

use super::{Result, SqliteStore, all, now_ms, one, unix_ms};
use crate::columns::{payment_columns, shown_status};
use crate::rows::{FromSqliteRow, PaymentRow};

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

// The settles: the conditional update `pending` -> final of the row that
// `?1` names (its id, or its acquirer key), of the shop `?2`; `?3`, `?4`,
// `?5` are the settlement's status, provider id and decline code. Those to
// a status that frees the order (declined, canceled) also move the payment
// out of its order's live slot (migration 0010). A success leaves
// `order_slot` unwritten: writing it, even to the same value, would make
// SQLite rewrite the payment's entry in `payments_by_order`, a random leaf
// page of WAL per payment.

/// The settle of a payment named by its id (`?1`) to a status that keeps
/// its order (succeeded).
const SETTLE_BY_ID: &str = concat!(
    "UPDATE payments SET status = ?3, provider_payment_id = ?4, decline_code = ?5, \
     updated_at = ",
    now_ms!(),
    " WHERE id = ?1 AND shop_id = ?2 AND status = 'pending'"
);

/// The settle of a payment named by its id (`?1`) to a status that frees
/// its order: its `order_slot` becomes its own id.
const SETTLE_BY_ID_FREEING_ORDER: &str = concat!(
    "UPDATE payments SET status = ?3, provider_payment_id = ?4, decline_code = ?5, \
     order_slot = id, updated_at = ",
    now_ms!(),
    " WHERE id = ?1 AND shop_id = ?2 AND status = 'pending'"
);

/// The settle of a payment named by its acquirer key (`?1`, webhooks) to a
/// status that keeps its order (succeeded).
const SETTLE_BY_ACQUIRER_KEY: &str = concat!(
    "UPDATE payments SET status = ?3, provider_payment_id = ?4, decline_code = ?5, \
     updated_at = ",
    now_ms!(),
    " WHERE acquirer_key = ?1 AND shop_id = ?2 AND status = 'pending'"
);

/// The settle of a payment named by its acquirer key (`?1`, webhooks) to a
/// status that frees its order: its `order_slot` becomes its own id.
const SETTLE_BY_ACQUIRER_KEY_FREEING_ORDER: &str = concat!(
    "UPDATE payments SET status = ?3, provider_payment_id = ?4, decline_code = ?5, \
     order_slot = id, updated_at = ",
    now_ms!(),
    " WHERE acquirer_key = ?1 AND shop_id = ?2 AND status = 'pending'"
);

/// The settle to `status` of a payment named by id or by acquirer key.
pub(super) fn settle_sql(by: SettleBy, status: PaymentStatus) -> &'static str {
    match (by, status.frees_order()) {
        (SettleBy::Id, false) => SETTLE_BY_ID,
        (SettleBy::Id, true) => SETTLE_BY_ID_FREEING_ORDER,
        (SettleBy::AcquirerKey, false) => SETTLE_BY_ACQUIRER_KEY,
        (SettleBy::AcquirerKey, true) => SETTLE_BY_ACQUIRER_KEY_FREEING_ORDER,
    }
}

/// The read of a payment named by id or by acquirer key, once settled.
fn settled_sql(by: SettleBy) -> &'static str {
    match by {
        SettleBy::Id => concat!(
            "SELECT ",
            payment_columns!(),
            " FROM payments WHERE id = ?1 AND shop_id = ?2"
        ),
        SettleBy::AcquirerKey => concat!(
            "SELECT ",
            payment_columns!(),
            " FROM payments WHERE acquirer_key = ?1 AND shop_id = ?2"
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
    let settled = conn
        .prepare_cached(settle_sql(by, settlement.status))?
        .execute(params![
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
        .prepare_cached(settled_sql(by))?
        .query_row(params![which, shop_id.as_str()], PaymentRow::from_sqlite)?;
    Ok(Some(Payment::try_from(row)?))
}

// A shop's payment lists are each a range of `payments_by_shop`, read from
// its end for the newest first. One order's (a reference given) are each a
// range of `payments_by_order`, an order's few payments sorted after the
// read. That index is named: the planner would rather walk the shop's
// newest-first index, already in the list's order, than sort a handful of
// rows.

/// The newest page of a shop's payments that match the filter: `?1` the
/// shop, `?2` status, `?3` reference, `?4` and `?5` the created range (each
/// ignored when null), `?6` the limit.
pub(super) const PAYMENTS_NEWEST: &str = concat!(
    "SELECT ",
    payment_columns!(),
    " FROM payments WHERE shop_id = ?1 AND (?3 IS NULL OR reference = ?3) \
       AND (?2 IS NULL OR ",
    shown_status!(),
    " = ?2) \
       AND (?4 IS NULL OR created_at >= ?4) \
       AND (?5 IS NULL OR created_at < ?5) \
     ORDER BY created_at DESC, id DESC LIMIT ?6"
);

/// The page after a cursor of a shop's payments: `?1` to `?6` as in
/// [`PAYMENTS_NEWEST`], `?7`, `?8` the cursor's `created_at` and id.
pub(super) const PAYMENTS_AFTER: &str = concat!(
    "SELECT ",
    payment_columns!(),
    " FROM payments WHERE shop_id = ?1 AND (?3 IS NULL OR reference = ?3) \
       AND (?2 IS NULL OR ",
    shown_status!(),
    " = ?2) \
       AND (?4 IS NULL OR created_at >= ?4) \
       AND (?5 IS NULL OR created_at < ?5) \
       AND (created_at, id) < (?7, ?8) ORDER BY created_at DESC, id DESC LIMIT ?6"
);

/// The page before a cursor of a shop's payments, read oldest first: `?1`
/// to `?8` as in [`PAYMENTS_AFTER`].
pub(super) const PAYMENTS_BEFORE: &str = concat!(
    "SELECT ",
    payment_columns!(),
    " FROM payments WHERE shop_id = ?1 AND (?3 IS NULL OR reference = ?3) \
       AND (?2 IS NULL OR ",
    shown_status!(),
    " = ?2) \
       AND (?4 IS NULL OR created_at >= ?4) \
       AND (?5 IS NULL OR created_at < ?5) \
       AND (created_at, id) > (?7, ?8) ORDER BY created_at, id LIMIT ?6"
);

/// The newest page of one order's payments (`reference = ?3`, for the
/// look-up before paying an order) that match the filter: `?1` the shop,
/// `?2` status, `?4` and `?5` the created range (each ignored when null),
/// `?6` the limit.
pub(super) const ORDER_PAYMENTS_NEWEST: &str = concat!(
    "SELECT ",
    payment_columns!(),
    " FROM payments INDEXED BY payments_by_order WHERE shop_id = ?1 AND reference = ?3 \
       AND (?2 IS NULL OR ",
    shown_status!(),
    " = ?2) \
       AND (?4 IS NULL OR created_at >= ?4) \
       AND (?5 IS NULL OR created_at < ?5) \
     ORDER BY created_at DESC, id DESC LIMIT ?6"
);

/// The page after a cursor of one order's payments: `?1` to `?6` as in
/// [`ORDER_PAYMENTS_NEWEST`], `?7`, `?8` the cursor's `created_at` and id.
pub(super) const ORDER_PAYMENTS_AFTER: &str = concat!(
    "SELECT ",
    payment_columns!(),
    " FROM payments INDEXED BY payments_by_order WHERE shop_id = ?1 AND reference = ?3 \
       AND (?2 IS NULL OR ",
    shown_status!(),
    " = ?2) \
       AND (?4 IS NULL OR created_at >= ?4) \
       AND (?5 IS NULL OR created_at < ?5) \
       AND (created_at, id) < (?7, ?8) ORDER BY created_at DESC, id DESC LIMIT ?6"
);

/// The page before a cursor of one order's payments, read oldest first:
/// `?1` to `?8` as in [`ORDER_PAYMENTS_AFTER`].
pub(super) const ORDER_PAYMENTS_BEFORE: &str = concat!(
    "SELECT ",
    payment_columns!(),
    " FROM payments INDEXED BY payments_by_order WHERE shop_id = ?1 AND reference = ?3 \
       AND (?2 IS NULL OR ",
    shown_status!(),
    " = ?2) \
       AND (?4 IS NULL OR created_at >= ?4) \
       AND (?5 IS NULL OR created_at < ?5) \
       AND (created_at, id) > (?7, ?8) ORDER BY created_at, id LIMIT ?6"
);

/// Where a payment list's cursor lies: the `(created_at, id)` of the
/// shop's payment `id`; [`StoreError::UnknownCursor`] when there is none.
fn payment_cursor(conn: &Connection, shop_id: &ShopId, id: &PaymentId) -> Result<(i64, String)> {
    let at: Option<i64> = conn
        .prepare_cached("SELECT created_at FROM payments WHERE shop_id = ?1 AND id = ?2")?
        .query_row(params![shop_id.as_str(), id.as_str()], |row| row.get(0))
        .optional()?;
    match at {
        Some(at) => Ok((at, id.as_str().to_owned())),
        None => Err(StoreError::UnknownCursor(id.to_string()).into()),
    }
}

#[async_trait]
impl Payments for SqliteStore {
    /// One payment of one shop.
    #[tracing::instrument(level = "debug", name = "store.payment", skip_all, fields(db.system = "sqlite"))]
    async fn payment(
        &self,
        shop_id: &ShopId,
        id: &PaymentId,
    ) -> Result<Option<Payment>, StoreError> {
        let (shop_id, id) = (shop_id.clone(), id.clone());
        self.read(move |conn| payment_in(conn, &shop_id, &id)).await
    }

    /// All payments of one shop for one order, oldest first.
    #[tracing::instrument(level = "debug", name = "store.payments_by_reference", skip_all, fields(db.system = "sqlite"))]
    async fn payments_by_reference(
        &self,
        shop_id: &ShopId,
        reference: &Reference,
    ) -> Result<Vec<Payment>, StoreError> {
        let (shop_id, reference) = (shop_id.clone(), reference.clone());
        self.read(move |conn| {
            all::<PaymentRow, _>(
                conn,
                concat!(
                    "SELECT ",
                    payment_columns!(),
                    " FROM payments INDEXED BY payments_by_order \
                          WHERE shop_id = ?1 AND reference = ?2 ORDER BY created_at, id"
                ),
                params![shop_id.as_str(), reference.as_str()],
            )
        })
        .await
    }

    /// One page of a shop's payments, newest first by `(created_at, id)`.
    #[tracing::instrument(level = "debug", name = "store.list_payments", skip_all, fields(db.system = "sqlite"))]
    async fn list_payments(
        &self,
        shop_id: &ShopId,
        filter: &PaymentFilter,
        page: &PageRequest<PaymentId>,
    ) -> Result<Page<Payment>, StoreError> {
        let (shop_id, filter, page) = (shop_id.clone(), filter.clone(), page.clone());
        self.read(move |conn| {
            let sql = match (&filter.reference, &page.cursor) {
                (None, Cursor::Newest) => PAYMENTS_NEWEST,
                (None, Cursor::After(_)) => PAYMENTS_AFTER,
                (None, Cursor::Before(_)) => PAYMENTS_BEFORE,
                (Some(_), Cursor::Newest) => ORDER_PAYMENTS_NEWEST,
                (Some(_), Cursor::After(_)) => ORDER_PAYMENTS_AFTER,
                (Some(_), Cursor::Before(_)) => ORDER_PAYMENTS_BEFORE,
            };
            let cursor = match &page.cursor {
                Cursor::Newest => None,
                Cursor::After(id) | Cursor::Before(id) => Some(payment_cursor(conn, &shop_id, id)?),
            };
            let (status, reference) = (
                filter.status.map(|s| s.as_str()),
                filter.reference.as_ref().map(Reference::as_str),
            );
            let (gte, lt) = (
                filter.created_gte.map(unix_ms),
                filter.created_lt.map(unix_ms),
            );
            let limit = i64::from(page.limit.get()) + 1;
            let shop = shop_id.as_str();
            let mut values: Vec<&dyn ToSql> =
                vec![&shop as &dyn ToSql, &status, &reference, &gte, &lt, &limit];
            if let Some((at, id)) = &cursor {
                values.extend([at as &dyn ToSql, id]);
            }
            let rows: Vec<Payment> = all::<PaymentRow, _>(conn, sql, params_from_iter(values))?;
            Ok(Page::from_probe(rows, &page))
        })
        .await
    }
}
