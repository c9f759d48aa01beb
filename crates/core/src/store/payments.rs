//! The payments role: reading a shop's payments.

use async_trait::async_trait;

use super::StoreError;
use crate::{Payment, PaymentId, Reference, ShopId};

/// A shop's payments, as the API shows them.
#[async_trait]
pub trait Payments: Send + Sync + 'static {
    /// One payment of one shop.
    async fn payment(
        &self,
        shop_id: &ShopId,
        id: &PaymentId,
    ) -> Result<Option<Payment>, StoreError>;

    /// All payments of one shop for one order, oldest first.
    async fn payments_by_reference(
        &self,
        shop_id: &ShopId,
        reference: &Reference,
    ) -> Result<Vec<Payment>, StoreError>;
}
