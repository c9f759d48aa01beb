//! The API keys role: a shop's keys, read for authentication and managed by
//! the operator (and, with a full key, by the shop).

use async_trait::async_trait;
use time::OffsetDateTime;

use super::StoreError;
use crate::ShopId;
use crate::api_key::{ApiKey, ApiKeyId, KeyCredential, KeyRefusal, NewApiKey, StoredKey};

/// A shop's API keys.
#[async_trait]
pub trait ApiKeys: Send + Sync + 'static {
    /// Every key of a shop, revoked and expired ones too, oldest first, with
    /// the hashes their secrets are checked against; `None` when there is no
    /// such shop.
    async fn shop_keys(&self, shop_id: &ShopId) -> Result<Option<Vec<KeyCredential>>, StoreError>;

    /// Stores a new key, unless the shop is unknown or holds
    /// [`crate::api_key::MAX_ACTIVE_KEYS`] active keys already (checked in
    /// the same transaction, by the store's clock). When the key carries its
    /// making request and a key of the shop was made with the same
    /// idempotency key, nothing is written: that key is returned as
    /// replayed (same fingerprint), or the request is refused
    /// ([`KeyRefusal::RequestReused`]). Checked first, so a repeat is
    /// answered even once the shop is at the cap.
    async fn add_api_key(
        &self,
        key: &NewApiKey,
    ) -> Result<Result<StoredKey, KeyRefusal>, StoreError>;

    /// Rolls key `id`: stores `successor` (which the caller made with the
    /// old key's mode and scope) and has the old key expire at
    /// `old_expires_at` (or earlier, if it was to expire earlier), in one
    /// transaction. Refused when the old key is unknown or no longer
    /// active. Returns the successor; a repeat of a roll (the successor's
    /// making request) is answered as [`ApiKeys::add_api_key`] answers one,
    /// before the old key is looked at (it may have expired since).
    async fn roll_api_key(
        &self,
        shop_id: &ShopId,
        id: &ApiKeyId,
        successor: &NewApiKey,
        old_expires_at: OffsetDateTime,
    ) -> Result<Result<StoredKey, KeyRefusal>, StoreError>;

    /// Revokes key `id` now. Revoking a revoked key changes nothing and
    /// returns it as it is.
    async fn revoke_api_key(
        &self,
        shop_id: &ShopId,
        id: &ApiKeyId,
    ) -> Result<Result<ApiKey, KeyRefusal>, StoreError>;

    /// Records that key `id` authenticated a request now; a write at most
    /// once a minute per key (an earlier record within the minute stands).
    async fn touch_api_key(&self, shop_id: &ShopId, id: &ApiKeyId) -> Result<(), StoreError>;
}
