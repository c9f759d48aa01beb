//! Reading payments: one by id, an order's payments, and a shop's
//! payments a page at a time.

use async_trait::async_trait;
use chargeonce_core::store::Payments;
use chargeonce_core::{
    Cursor, Page, PageRequest, Payment, PaymentFilter, PaymentId, Reference, ShopId, StoreError,
};
use time::OffsetDateTime;

use super::{PgStore, store_error};
use crate::columns::{payment_columns, shown_status};
use crate::rows::PaymentRow;

/// The newest page of a shop's payments that match the filter: `$1` the
/// shop, `$2` status, `$3` reference, `$4` and `$5` the created range (each
/// ignored when null), `$6` the limit.
const PAYMENTS_NEWEST: &str = concat!(
    "SELECT ",
    payment_columns!(),
    " FROM payments WHERE shop_id = $1 AND ($3::text IS NULL OR reference = $3) \
       AND ($2::text IS NULL OR ",
    shown_status!(),
    " = $2) \
       AND ($4::timestamptz IS NULL OR created_at >= $4) \
       AND ($5::timestamptz IS NULL OR created_at < $5) \
     ORDER BY created_at DESC, id DESC LIMIT $6"
);

/// The page after a cursor of a shop's payments: `$1` to `$6` as in
/// [`PAYMENTS_NEWEST`], `$7`, `$8` the cursor's `created_at` and id.
const PAYMENTS_AFTER: &str = concat!(
    "SELECT ",
    payment_columns!(),
    " FROM payments WHERE shop_id = $1 AND ($3::text IS NULL OR reference = $3) \
       AND ($2::text IS NULL OR ",
    shown_status!(),
    " = $2) \
       AND ($4::timestamptz IS NULL OR created_at >= $4) \
       AND ($5::timestamptz IS NULL OR created_at < $5) \
       AND (created_at, id) < ($7, $8) ORDER BY created_at DESC, id DESC LIMIT $6"
);

/// The page before a cursor of a shop's payments, read oldest first: `$1`
/// to `$8` as in [`PAYMENTS_AFTER`].
const PAYMENTS_BEFORE: &str = concat!(
    "SELECT ",
    payment_columns!(),
    " FROM payments WHERE shop_id = $1 AND ($3::text IS NULL OR reference = $3) \
       AND ($2::text IS NULL OR ",
    shown_status!(),
    " = $2) \
       AND ($4::timestamptz IS NULL OR created_at >= $4) \
       AND ($5::timestamptz IS NULL OR created_at < $5) \
       AND (created_at, id) > ($7, $8) ORDER BY created_at, id LIMIT $6"
);

/// The newest page of one order's payments (a reference given: `reference =
/// $3`, a range of `payments_by_order` even in a generic plan, for the
/// look-up before paying an order) that match the filter: `$1` the shop,
/// `$2` status, `$4` and `$5` the created range (each ignored when null),
/// `$6` the limit.
const ORDER_PAYMENTS_NEWEST: &str = concat!(
    "SELECT ",
    payment_columns!(),
    " FROM payments WHERE shop_id = $1 AND reference = $3 \
       AND ($2::text IS NULL OR ",
    shown_status!(),
    " = $2) \
       AND ($4::timestamptz IS NULL OR created_at >= $4) \
       AND ($5::timestamptz IS NULL OR created_at < $5) \
     ORDER BY created_at DESC, id DESC LIMIT $6"
);

/// The page after a cursor of one order's payments: `$1` to `$6` as in
/// [`ORDER_PAYMENTS_NEWEST`], `$7`, `$8` the cursor's `created_at` and id.
const ORDER_PAYMENTS_AFTER: &str = concat!(
    "SELECT ",
    payment_columns!(),
    " FROM payments WHERE shop_id = $1 AND reference = $3 \
       AND ($2::text IS NULL OR ",
    shown_status!(),
    " = $2) \
       AND ($4::timestamptz IS NULL OR created_at >= $4) \
       AND ($5::timestamptz IS NULL OR created_at < $5) \
       AND (created_at, id) < ($7, $8) ORDER BY created_at DESC, id DESC LIMIT $6"
);

/// The page before a cursor of one order's payments, read oldest first:
/// `$1` to `$8` as in [`ORDER_PAYMENTS_AFTER`].
const ORDER_PAYMENTS_BEFORE: &str = concat!(
    "SELECT ",
    payment_columns!(),
    " FROM payments WHERE shop_id = $1 AND reference = $3 \
       AND ($2::text IS NULL OR ",
    shown_status!(),
    " = $2) \
       AND ($4::timestamptz IS NULL OR created_at >= $4) \
       AND ($5::timestamptz IS NULL OR created_at < $5) \
       AND (created_at, id) > ($7, $8) ORDER BY created_at, id LIMIT $6"
);

/// Where a payment list's cursor lies: the `(created_at, id)` of the
/// shop's payment `id`; [`StoreError::UnknownCursor`] when there is none.
async fn payment_cursor(
    store: &PgStore,
    shop_id: &ShopId,
    id: &PaymentId,
) -> Result<(OffsetDateTime, String), StoreError> {
    sqlx::query_as::<_, (OffsetDateTime, String)>(
        "SELECT created_at, id FROM payments WHERE shop_id = $1 AND id = $2",
    )
    .bind(shop_id.as_str())
    .bind(id.as_str())
    .fetch_optional(&mut *store.conn().await?)
    .await
    .map_err(store_error)?
    .ok_or_else(|| StoreError::UnknownCursor(id.to_string()))
}

#[async_trait]
impl Payments for PgStore {
    /// One payment of one shop.
    #[tracing::instrument(level = "debug", name = "store.payment", skip_all, fields(db.system = "postgresql"))]
    async fn payment(
        &self,
        shop_id: &ShopId,
        id: &PaymentId,
    ) -> Result<Option<Payment>, StoreError> {
        super::one(
            self,
            sqlx::query_as::<_, PaymentRow>(concat!(
                "SELECT ",
                payment_columns!(),
                " FROM payments WHERE shop_id = $1 AND id = $2"
            ))
            .bind(shop_id.as_str())
            .bind(id.as_str()),
        )
        .await
    }

    /// All payments of one shop for one order, oldest first.
    #[tracing::instrument(level = "debug", name = "store.payments_by_reference", skip_all, fields(db.system = "postgresql"))]
    async fn payments_by_reference(
        &self,
        shop_id: &ShopId,
        reference: &Reference,
    ) -> Result<Vec<Payment>, StoreError> {
        super::all(
            self,
            sqlx::query_as::<_, PaymentRow>(concat!(
                "SELECT ",
                payment_columns!(),
                " FROM payments WHERE shop_id = $1 AND reference = $2 ORDER BY created_at, id"
            ))
            .bind(shop_id.as_str())
            .bind(reference.as_str()),
        )
        .await
    }

    /// One page of a shop's payments, newest first by `(created_at, id)`.
    #[tracing::instrument(level = "debug", name = "store.list_payments", skip_all, fields(db.system = "postgresql"))]
    async fn list_payments(
        &self,
        shop_id: &ShopId,
        filter: &PaymentFilter,
        page: &PageRequest<PaymentId>,
    ) -> Result<Page<Payment>, StoreError> {
        let at = match &page.cursor {
            Cursor::Newest => None,
            Cursor::After(id) | Cursor::Before(id) => {
                Some(payment_cursor(self, shop_id, id).await?)
            }
        };
        let sql = match (&filter.reference, &page.cursor) {
            (None, Cursor::Newest) => PAYMENTS_NEWEST,
            (None, Cursor::After(_)) => PAYMENTS_AFTER,
            (None, Cursor::Before(_)) => PAYMENTS_BEFORE,
            (Some(_), Cursor::Newest) => ORDER_PAYMENTS_NEWEST,
            (Some(_), Cursor::After(_)) => ORDER_PAYMENTS_AFTER,
            (Some(_), Cursor::Before(_)) => ORDER_PAYMENTS_BEFORE,
        };
        let mut query = sqlx::query_as::<_, PaymentRow>(sql)
            .bind(shop_id.as_str())
            .bind(filter.status.map(|s| s.as_str()))
            .bind(filter.reference.as_ref().map(Reference::as_str))
            .bind(filter.created_gte)
            .bind(filter.created_lt)
            .bind(i64::from(page.limit.get()) + 1);
        if let Some((created_at, id)) = at {
            query = query.bind(created_at).bind(id);
        }
        let rows: Vec<Payment> = super::all(self, query).await?;
        Ok(Page::from_probe(rows, page))
    }
}
