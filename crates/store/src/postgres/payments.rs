//! Reading payments: one by id, and an order's payments.

use chargeonce_core::{Payment, PaymentId, Reference, ShopId, StoreError};

use super::PgStore;
use crate::columns::payment_columns;
use crate::rows::PaymentRow;

/// One payment of one shop.
pub(super) async fn payment(
    store: &PgStore,
    shop_id: &ShopId,
    id: &PaymentId,
) -> Result<Option<Payment>, StoreError> {
    super::one(
        store,
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
pub(super) async fn payments_by_reference(
    store: &PgStore,
    shop_id: &ShopId,
    reference: &Reference,
) -> Result<Vec<Payment>, StoreError> {
    super::all(
        store,
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
