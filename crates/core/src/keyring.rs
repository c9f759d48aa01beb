//! Managing a shop's API keys over the store: making one, rolling one (its
//! successor made, the old one set to expire after an overlap the caller
//! chooses), revoking one. The operator's CLI and the shop's own
//! `/v1/api-keys` both come here, so the rules are the same for both: a
//! secret is generated here and returned once, never stored in clear; a
//! successor has its predecessor's mode, scope and description.

use std::time::Duration;

use time::OffsetDateTime;

use crate::ShopId;
use crate::api_key::{ApiKey, ApiKeyId, ApiKeySecret, KeyRefusal, Mode, NewApiKey, Scope};
use crate::store::{ApiKeys, StoreError};

/// A key just made, with its secret in clear: to show once.
#[derive(Debug)]
pub struct MadeKey {
    /// The key as stored.
    pub key: ApiKey,
    /// Its secret, never stored in clear.
    pub secret: ApiKeySecret,
}

/// What a new key is asked to be.
#[derive(Debug, Clone)]
pub struct KeyRequest {
    /// What it may do.
    pub scope: Scope,
    /// What it is for.
    pub description: Option<String>,
    /// When it stops working, if ever.
    pub expires_at: Option<OffsetDateTime>,
}

/// The longest description a key may carry, in characters.
pub const MAX_DESCRIPTION: usize = 200;

/// Makes a live key of `shop_id` (test keys come with test mode).
pub async fn make(
    store: &dyn ApiKeys,
    shop_id: &ShopId,
    request: KeyRequest,
) -> Result<Result<MadeKey, KeyRefusal>, StoreError> {
    let secret = ApiKeySecret::generate(Mode::Live);
    let mut new = NewApiKey::of(shop_id.clone(), Mode::Live, request.scope, &secret);
    new.description = request.description;
    new.expires_at = request.expires_at;
    Ok(store
        .add_api_key(&new)
        .await?
        .map(|key| MadeKey { key, secret }))
}

/// Rolls key `id` of `shop_id`: its successor (same mode, scope and
/// description, no expiry) is made, and the old key expires `overlap` from
/// now (zero: at once), or earlier if it was to expire earlier.
pub async fn roll(
    store: &dyn ApiKeys,
    shop_id: &ShopId,
    id: &ApiKeyId,
    overlap: Duration,
) -> Result<Result<MadeKey, KeyRefusal>, StoreError> {
    let Some(keys) = store.shop_keys(shop_id).await? else {
        return Ok(Err(KeyRefusal::NoShop(shop_id.to_string())));
    };
    let Some(old) = keys.iter().map(|c| &c.key).find(|key| key.id == *id) else {
        return Ok(Err(KeyRefusal::NoKey(id.to_string())));
    };
    let secret = ApiKeySecret::generate(old.mode);
    let mut successor = NewApiKey::of(shop_id.clone(), old.mode, old.scope, &secret);
    successor.description = old.description.clone();
    let old_expires_at = OffsetDateTime::now_utc() + overlap;
    Ok(store
        .roll_api_key(shop_id, id, &successor, old_expires_at)
        .await?
        .map(|key| MadeKey { key, secret }))
}

/// Every key of a shop (revoked and expired ones too), oldest first;
/// `None` for an unknown shop.
pub async fn list(
    store: &dyn ApiKeys,
    shop_id: &ShopId,
) -> Result<Option<Vec<ApiKey>>, StoreError> {
    Ok(store
        .shop_keys(shop_id)
        .await?
        .map(|keys| keys.into_iter().map(|c| c.key).collect()))
}
