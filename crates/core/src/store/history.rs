//! The history role: reading a payment's history, and adding the repeats
//! an instance answered itself to its keys' counts.
//!
//! The entries are written by the other roles' methods, in the same
//! transaction as the change each records (see [`crate::history`]); this
//! role only reads them.

use async_trait::async_trait;

use super::StoreError;
use crate::history::{HistoryEntry, RepeatCounts, RepeatTally};
use crate::{IdempotencyKey, PaymentId, ShopId};

/// The repeats of one key, as its row counts them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRepeats {
    /// The key.
    pub key: IdempotencyKey,
    /// Its repeats by answer.
    pub repeats: RepeatCounts,
}

/// A payment's history.
#[async_trait]
pub trait History: Send + Sync + 'static {
    /// Every entry of one payment's history (and of its refunds), oldest
    /// first; `shop_id` restricts it to that shop's payment (a shop's API
    /// call), `None` reads any (the operator console). Empty when there is
    /// no such payment.
    async fn payment_history(
        &self,
        shop_id: Option<&ShopId>,
        payment_id: &PaymentId,
    ) -> Result<Vec<HistoryEntry>, StoreError>;

    /// The repeat counts of the given keys of one shop that still exist
    /// (a swept key's counts are in the history as
    /// [`HistoryEvent::KeyExpired`](crate::history::HistoryEvent::KeyExpired)).
    async fn key_repeats(
        &self,
        shop_id: &ShopId,
        keys: &[IdempotencyKey],
    ) -> Result<Vec<KeyRepeats>, StoreError>;

    /// Adds repeats an instance answered from its cache to their keys'
    /// counts, in one write for the whole batch. Keys that are gone are
    /// skipped.
    async fn add_repeats(&self, tallies: &[RepeatTally]) -> Result<(), StoreError>;
}
