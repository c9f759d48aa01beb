//! Reading payments: one by id, an order's payments, and a shop's
//! payments a page at a time.

use async_trait::async_trait;
use chargeonce_core::store::Payments;
use chargeonce_core::{
    Cursor, Page, PageRequest, Payment, PaymentFilter, PaymentId, Reference, ShopId, StoreError,
};
use time::OffsetDateTime;

use super::{PgStore, store_error};
use crate::columns::payment_columns;
use crate::rows::PaymentRow;

/// The part of a payment list's statement before its cursor: the shop's
/// payments (`shop`), or one order's (`order`: `reference = $3`, a range of
/// `payments_by_reference` even in a generic plan, for the look-up before
/// paying an order), that match the filter (`$2` status, `$3` reference,
/// `$4` and `$5` the created range, each ignored when null).
macro_rules! payment_list {
    (shop) => {
        concat!(
            "SELECT ",
            payment_columns!(),
            " FROM payments WHERE shop_id = $1 AND ($3::text IS NULL OR reference = $3)",
            payment_list!(filter)
        )
    };
    (order) => {
        concat!(
            "SELECT ",
            payment_columns!(),
            " FROM payments WHERE shop_id = $1 AND reference = $3",
            payment_list!(filter)
        )
    };
    (filter) => {
        " AND ($2::text IS NULL OR status = $2) \
          AND ($4::timestamptz IS NULL OR created_at >= $4) \
          AND ($5::timestamptz IS NULL OR created_at < $5)"
    };
}

/// The statements of a payment list: the newest page, the page after a
/// cursor (`$7`, `$8`: its `created_at` and id), the page before it (read
/// oldest first).
macro_rules! payment_lists {
    ($which:tt) => {
        [
            concat!(
                payment_list!($which),
                " ORDER BY created_at DESC, id DESC LIMIT $6"
            ),
            concat!(
                payment_list!($which),
                " AND (created_at, id) < ($7, $8) ORDER BY created_at DESC, id DESC LIMIT $6"
            ),
            concat!(
                payment_list!($which),
                " AND (created_at, id) > ($7, $8) ORDER BY created_at, id LIMIT $6"
            ),
        ]
    };
}

/// A shop's payment lists.
const PAYMENT_LISTS: [&str; 3] = payment_lists!(shop);

/// One order's payment lists (a reference given).
const ORDER_PAYMENT_LISTS: [&str; 3] = payment_lists!(order);

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
        let lists = match filter.reference {
            Some(_) => &ORDER_PAYMENT_LISTS,
            None => &PAYMENT_LISTS,
        };
        let sql = match page.cursor {
            Cursor::Newest => lists[0],
            Cursor::After(_) => lists[1],
            Cursor::Before(_) => lists[2],
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
