//! The payments role: reading a shop's payments.

use async_trait::async_trait;

use time::OffsetDateTime;

use super::{Page, PageRequest, StoreError};
use crate::{Payment, PaymentId, Reference, ShopId, ShownStatus};

/// Which of a shop's payments a list shows; every field given must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PaymentFilter {
    /// Only payments showing this status (an authorization's own once it
    /// stands: [`ShownStatus::of`]).
    pub status: Option<ShownStatus>,
    /// Only payments of this order.
    pub reference: Option<Reference>,
    /// Only payments created at or after this time.
    pub created_gte: Option<OffsetDateTime>,
    /// Only payments created before this time.
    pub created_lt: Option<OffsetDateTime>,
}

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

    /// One page of a shop's payments that match `filter`, newest first by
    /// `(created_at, id)` (keyset pagination). The cursor must be one of the
    /// shop's payments (whether or not it matches the filter), else
    /// [`StoreError::UnknownCursor`].
    async fn list_payments(
        &self,
        shop_id: &ShopId,
        filter: &PaymentFilter,
        page: &PageRequest<PaymentId>,
    ) -> Result<Page<Payment>, StoreError>;
}
