//! Managing a shop's API keys over the store: making one, rolling one (its
//! successor made, the old one set to expire after an overlap the caller
//! chooses), revoking one. The operator's CLI and the shop's own
//! `/v1/api-keys` both come here, so the rules are the same for both: a
//! secret is generated here and returned once, never stored in clear; a
//! successor has its predecessor's mode, scope and description.

use std::time::Duration;

use time::OffsetDateTime;

use crate::ShopId;
use crate::api_key::{
    ApiKey, ApiKeyId, ApiKeySecret, KeyRefusal, MakingRequest, Mode, NewApiKey, Scope,
};
use crate::store::{ApiKeys, StoreError};

/// A key just made, with its secret in clear: to show once.
#[derive(Debug)]
pub struct MadeKey {
    /// The key as stored.
    pub key: ApiKey,
    /// Its secret, never stored in clear.
    pub secret: ApiKeySecret,
}

/// What a make or roll through the API answered.
#[derive(Debug)]
pub enum Made {
    /// A key made now, with its secret.
    New(MadeKey),
    /// The key an earlier request with the same idempotency key made; its
    /// secret was shown to that request only.
    Replayed(ApiKey),
}

/// What a new key is asked to be.
#[derive(Debug, Clone)]
pub struct KeyRequest {
    /// Live or test: a key moves and sees only its mode's objects.
    pub mode: Mode,
    /// What it may do.
    pub scope: Scope,
    /// What it is for.
    pub description: Option<String>,
    /// When it stops working, if ever.
    pub expires_at: Option<OffsetDateTime>,
}

/// The longest description a key may carry, in characters.
pub const MAX_DESCRIPTION: usize = 200;

/// Makes a key of `shop_id` in the mode asked.
pub async fn make(
    store: &dyn ApiKeys,
    shop_id: &ShopId,
    request: KeyRequest,
) -> Result<Result<MadeKey, KeyRefusal>, StoreError> {
    match make_once(store, shop_id, request, None).await? {
        Ok(made) => fresh(made).map(Ok),
        Err(refusal) => Ok(Err(refusal)),
    }
}

/// Makes a key of `shop_id` for a request of the API: a repeat of `making`
/// (the same idempotency key, mode and fingerprint) answers the key the
/// first made, without its secret.
pub async fn make_once(
    store: &dyn ApiKeys,
    shop_id: &ShopId,
    request: KeyRequest,
    making: Option<MakingRequest>,
) -> Result<Result<Made, KeyRefusal>, StoreError> {
    if !shop_id.is_live() {
        // Keys are the shop's own, under its own id; `{shop}.test` is a
        // namespace of objects, which a test key reaches.
        return Ok(Err(KeyRefusal::NoShop(shop_id.to_string())));
    }
    let secret = ApiKeySecret::generate(request.mode);
    let mut new = NewApiKey::of(shop_id.clone(), request.mode, request.scope, &secret);
    new.description = request.description;
    new.expires_at = request.expires_at;
    new.request = making;
    Ok(store
        .add_api_key(&new)
        .await?
        .map(|stored| made(stored, secret)))
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
    match roll_once(store, shop_id, id, overlap, None).await? {
        Ok(made) => fresh(made).map(Ok),
        Err(refusal) => Ok(Err(refusal)),
    }
}

/// Rolls key `id` for a request of the API; a repeat of `making` answers
/// the successor the first made, without its secret, and changes nothing.
pub async fn roll_once(
    store: &dyn ApiKeys,
    shop_id: &ShopId,
    id: &ApiKeyId,
    overlap: Duration,
    making: Option<MakingRequest>,
) -> Result<Result<Made, KeyRefusal>, StoreError> {
    if !shop_id.is_live() {
        return Ok(Err(KeyRefusal::NoShop(shop_id.to_string())));
    }
    let Some(keys) = store.shop_keys(shop_id).await? else {
        return Ok(Err(KeyRefusal::NoShop(shop_id.to_string())));
    };
    let Some(old) = keys.iter().map(|c| &c.key).find(|key| key.id == *id) else {
        return Ok(Err(KeyRefusal::NoKey(id.to_string())));
    };
    let secret = ApiKeySecret::generate(old.mode);
    let mut successor = NewApiKey::of(shop_id.clone(), old.mode, old.scope, &secret);
    successor.description = old.description.clone();
    successor.request = making;
    let old_expires_at = OffsetDateTime::now_utc() + overlap;
    Ok(store
        .roll_api_key(shop_id, id, &successor, old_expires_at)
        .await?
        .map(|stored| made(stored, secret)))
}

fn made(stored: crate::api_key::StoredKey, secret: ApiKeySecret) -> Made {
    if stored.replayed {
        Made::Replayed(stored.key)
    } else {
        Made::New(MadeKey {
            key: stored.key,
            secret,
        })
    }
}

/// A make without a making request is never a repeat: the key made now.
fn fresh(made: Made) -> Result<MadeKey, StoreError> {
    match made {
        Made::New(key) => Ok(key),
        // Only a making request can find an earlier key; the operator's
        // makes carry none.
        Made::Replayed(key) => Err(StoreError::corrupt(format!(
            "key {} answered as a repeat of a request that had no idempotency key",
            key.id
        ))),
    }
}

/// Every key of a shop (revoked and expired ones too), oldest first;
/// `None` for an unknown shop (or a test mode's id: keys are the shop's).
pub async fn list(
    store: &dyn ApiKeys,
    shop_id: &ShopId,
) -> Result<Option<Vec<ApiKey>>, StoreError> {
    if !shop_id.is_live() {
        return Ok(None);
    }
    Ok(store
        .shop_keys(shop_id)
        .await?
        .map(|keys| keys.into_iter().map(|c| c.key).collect()))
}
