//! What the operator console reads across shops, and the operator's
//! credential.
//!
//! STUB: to be written.

use chargeonce_core::events::{Event, EventId};
use chargeonce_core::store::{ShopSummary, StoreCounts};
use chargeonce_core::{
    Page, PageRequest, Payment, PaymentFilter, PaymentId, SecretHash, ShopId, StoreError,
};

use super::SqliteStore;

pub(super) async fn operator_secret(
    _store: &SqliteStore,
) -> Result<Option<SecretHash>, StoreError> {
    Ok(None)
}

pub(super) async fn init_operator_secret(
    _store: &SqliteStore,
    _hash: &SecretHash,
) -> Result<bool, StoreError> {
    Ok(false)
}

pub(super) async fn set_operator_secret(
    _store: &SqliteStore,
    _hash: &SecretHash,
) -> Result<(), StoreError> {
    Ok(())
}

pub(super) async fn all_payments(
    _store: &SqliteStore,
    _shop_id: Option<&ShopId>,
    _filter: &PaymentFilter,
    _page: &PageRequest<PaymentId>,
) -> Result<Page<Payment>, StoreError> {
    Err(StoreError::other("not written yet"))
}

pub(super) async fn any_payment(
    _store: &SqliteStore,
    _id: &PaymentId,
) -> Result<Option<Payment>, StoreError> {
    Ok(None)
}

pub(super) async fn payment_events(
    _store: &SqliteStore,
    _id: &PaymentId,
) -> Result<Vec<Event>, StoreError> {
    Ok(Vec::new())
}

pub(super) async fn event_shop(
    _store: &SqliteStore,
    _id: &EventId,
) -> Result<Option<ShopId>, StoreError> {
    Ok(None)
}

pub(super) async fn shops(_store: &SqliteStore) -> Result<Vec<ShopSummary>, StoreError> {
    Ok(Vec::new())
}

pub(super) async fn counts(_store: &SqliteStore) -> Result<StoreCounts, StoreError> {
    Ok(StoreCounts::default())
}
