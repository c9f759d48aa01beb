//! A payment's history: reading it, and the repeat counts of its keys.
//!
//! STUB: to be written (the entries are not recorded yet).

use chargeonce_core::history::{HistoryEntry, RepeatTally};
use chargeonce_core::store::KeyRepeats;
use chargeonce_core::{IdempotencyKey, PaymentId, ShopId, StoreError};

use super::PgStore;

pub(super) async fn payment_history(
    _store: &PgStore,
    _shop_id: Option<&ShopId>,
    _payment_id: &PaymentId,
) -> Result<Vec<HistoryEntry>, StoreError> {
    Ok(Vec::new())
}

pub(super) async fn key_repeats(
    _store: &PgStore,
    _shop_id: &ShopId,
    _keys: &[IdempotencyKey],
) -> Result<Vec<KeyRepeats>, StoreError> {
    Ok(Vec::new())
}

pub(super) async fn add_repeats(
    _store: &PgStore,
    _tallies: &[RepeatTally],
) -> Result<(), StoreError> {
    Ok(())
}
