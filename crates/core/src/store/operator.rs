//! The operator role: what the operator console reads across shops, and
//! the operator's credential.

use async_trait::async_trait;
use time::OffsetDateTime;

use super::{Page, PageRequest, PaymentFilter, StoreError};
use crate::events::EventId;
use crate::{Payment, PaymentId, SecretHash, ShopId};

/// A shop as the console lists it (never its secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShopSummary {
    /// The shop.
    pub shop_id: ShopId,
    /// Its webhook URL, if it set one (never the signing secret).
    pub webhook_url: Option<String>,
    /// When it was registered.
    pub created_at: OffsetDateTime,
}

/// Counts the console's overview shows, read from the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreCounts {
    /// Payments still pending.
    pub pending_payments: u64,
    /// Findings not resolved.
    pub open_findings: u64,
    /// Merchant events not delivered and not given up.
    pub undelivered_events: u64,
    /// When the oldest pending payment was created (`None`: none pending).
    pub oldest_pending_at: Option<time::OffsetDateTime>,
}

/// The console's reads across shops, and the operator's credential.
#[async_trait]
pub trait Operator: Send + Sync + 'static {
    /// The operator's stored secret hash, if one was set.
    async fn operator_secret(&self) -> Result<Option<SecretHash>, StoreError>;

    /// Stores the operator's secret hash unless one exists; `true` when it
    /// was stored (the first start), `false` when one was there.
    async fn init_operator_secret(&self, hash: &SecretHash) -> Result<bool, StoreError>;

    /// Replaces the operator's secret hash (given by flag).
    async fn set_operator_secret(&self, hash: &SecretHash) -> Result<(), StoreError>;

    /// One page of every shop's payments (of one shop when `shop_id` is
    /// given) that match `filter`, newest first by `(created_at, id)`, as
    /// [`Payments::list_payments`](super::Payments::list_payments) pages.
    async fn all_payments(
        &self,
        shop_id: Option<&ShopId>,
        filter: &PaymentFilter,
        page: &PageRequest<PaymentId>,
    ) -> Result<Page<Payment>, StoreError>;

    /// One payment of any shop.
    async fn any_payment(&self, id: &PaymentId) -> Result<Option<Payment>, StoreError>;

    /// The merchant events about one payment (of any shop), oldest first,
    /// with their delivery logs.
    async fn payment_events(&self, id: &PaymentId)
    -> Result<Vec<crate::events::Event>, StoreError>;

    /// The shop a merchant event belongs to.
    async fn event_shop(&self, id: &EventId) -> Result<Option<ShopId>, StoreError>;

    /// Every shop, oldest first.
    async fn shops(&self) -> Result<Vec<ShopSummary>, StoreError>;

    /// The overview's counts.
    async fn counts(&self) -> Result<StoreCounts, StoreError>;
}
