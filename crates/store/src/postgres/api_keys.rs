//! A shop's API keys: read for authentication, made, rolled and revoked.
//! Each write is one transaction that locks the shop's row first, so two
//! makes or rolls of one shop count its active keys one after the other.
//! Rolling or revoking the shop's first secret also retires its copy in
//! `shops.secret_sha256`.

use async_trait::async_trait;
use chargeonce_core::api_key::{
    ApiKey, ApiKeyId, KeyCredential, KeyRefusal, MAX_ACTIVE_KEYS, NewApiKey, StoredKey,
};
use chargeonce_core::store::ApiKeys;
use chargeonce_core::{ShopId, StoreError};
use sqlx::{Postgres, Transaction};
use time::OffsetDateTime;

use super::{PgStore, store_error};
use crate::key_rows::{ApiKeyRow, api_key_columns};

#[async_trait]
impl ApiKeys for PgStore {
    #[tracing::instrument(level = "debug", name = "store.shop_keys", skip_all, fields(db.system = "postgresql"))]
    async fn shop_keys(&self, shop_id: &ShopId) -> Result<Option<Vec<KeyCredential>>, StoreError> {
        let mut conn = self.conn().await?;
        // Both statements for every shop, known or not, so the time of a
        // refusal does not tell which shop ids exist.
        let known: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM shops WHERE id = $1)")
            .bind(shop_id.as_str())
            .fetch_one(&mut *conn)
            .await
            .map_err(store_error)?;
        let rows: Vec<ApiKeyRow> = sqlx::query_as(concat!(
            "SELECT ",
            api_key_columns!(),
            " FROM api_keys WHERE shop_id = $1 ORDER BY created_at, id"
        ))
        .bind(shop_id.as_str())
        .fetch_all(&mut *conn)
        .await
        .map_err(store_error)?;
        if !known {
            return Ok(None);
        }
        rows.into_iter()
            .map(KeyCredential::try_from)
            .collect::<Result<_, _>>()
            .map(Some)
    }

    #[tracing::instrument(level = "debug", name = "store.add_api_key", skip_all, fields(db.system = "postgresql"))]
    async fn add_api_key(
        &self,
        key: &NewApiKey,
    ) -> Result<Result<StoredKey, KeyRefusal>, StoreError> {
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        if let Err(refusal) = lock_shop(&mut tx, &key.shop_id).await? {
            return Ok(Err(refusal));
        }
        if let Some(earlier) = earlier_request(&mut tx, key).await? {
            return Ok(earlier);
        }
        if let Err(refusal) = room_for_a_key(&mut tx, &key.shop_id).await? {
            return Ok(Err(refusal));
        }
        if let Some(at) = key.expires_at {
            let passed: bool = sqlx::query_scalar("SELECT $1 <= now()")
                .bind(at)
                .fetch_one(&mut *tx)
                .await
                .map_err(store_error)?;
            if passed {
                return Ok(Err(KeyRefusal::ExpiryPassed));
            }
        }
        let added = insert(&mut tx, key).await?;
        tx.commit().await.map_err(store_error)?;
        Ok(Ok(added))
    }

    #[tracing::instrument(level = "debug", name = "store.roll_api_key", skip_all, fields(db.system = "postgresql"))]
    async fn roll_api_key(
        &self,
        shop_id: &ShopId,
        id: &ApiKeyId,
        successor: &NewApiKey,
        old_expires_at: OffsetDateTime,
    ) -> Result<Result<StoredKey, KeyRefusal>, StoreError> {
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        if let Err(refusal) = lock_shop(&mut tx, shop_id).await? {
            return Ok(Err(refusal));
        }
        if let Some(earlier) = earlier_request(&mut tx, successor).await? {
            return Ok(earlier);
        }
        if let Err(refusal) = room_for_a_key(&mut tx, shop_id).await? {
            return Ok(Err(refusal));
        }
        let rolled = sqlx::query(
            "UPDATE api_keys SET expires_at = LEAST(coalesce(expires_at, $3), $3) \
             WHERE shop_id = $1 AND id = $2 AND revoked_at IS NULL \
               AND (expires_at IS NULL OR expires_at > now())",
        )
        .bind(shop_id.as_str())
        .bind(id.as_str())
        .bind(old_expires_at)
        .execute(&mut *tx)
        .await
        .map_err(store_error)?;
        if rolled.rows_affected() == 0 {
            return Ok(Err(missing_or_inactive(&mut tx, shop_id, id).await?));
        }
        retire_legacy_secret(&mut tx, shop_id, id).await?;
        let added = insert(&mut tx, successor).await?;
        tx.commit().await.map_err(store_error)?;
        Ok(Ok(added))
    }

    #[tracing::instrument(level = "debug", name = "store.revoke_api_key", skip_all, fields(db.system = "postgresql"))]
    async fn revoke_api_key(
        &self,
        shop_id: &ShopId,
        id: &ApiKeyId,
    ) -> Result<Result<ApiKey, KeyRefusal>, StoreError> {
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        let row: Option<ApiKeyRow> = sqlx::query_as(concat!(
            "UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) \
             WHERE shop_id = $1 AND id = $2 RETURNING ",
            api_key_columns!()
        ))
        .bind(shop_id.as_str())
        .bind(id.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(store_error)?;
        let Some(row) = row else {
            return Ok(Err(KeyRefusal::NoKey(id.to_string())));
        };
        retire_legacy_secret(&mut tx, shop_id, id).await?;
        tx.commit().await.map_err(store_error)?;
        Ok(Ok(KeyCredential::try_from(row)?.key))
    }

    #[tracing::instrument(level = "debug", name = "store.touch_api_key", skip_all, fields(db.system = "postgresql"))]
    async fn touch_api_key(&self, shop_id: &ShopId, id: &ApiKeyId) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE api_keys SET last_used_at = now() \
             WHERE shop_id = $1 AND id = $2 \
               AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')",
        )
        .bind(shop_id.as_str())
        .bind(id.as_str())
        .execute(&mut *self.conn().await?)
        .await
        .map_err(store_error)?;
        Ok(())
    }
}

/// Locks the shop's row, so that its key writes run one after the other:
/// two makes count the active keys in turn, two repeats of one request find
/// each other.
async fn lock_shop(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
) -> Result<Result<(), KeyRefusal>, StoreError> {
    let locked: Option<i32> =
        sqlx::query_scalar("SELECT 1 FROM shops WHERE id = $1 FOR NO KEY UPDATE")
            .bind(shop_id.as_str())
            .fetch_optional(&mut **tx)
            .await
            .map_err(store_error)?;
    Ok(match locked {
        Some(_) => Ok(()),
        None => Err(KeyRefusal::NoShop(shop_id.to_string())),
    })
}

/// The key an earlier request with `key`'s idempotency key made, if any:
/// replayed when it asked the same, refused when it asked something else.
/// `None` for a key without a making request, or a first request.
async fn earlier_request(
    tx: &mut Transaction<'static, Postgres>,
    key: &NewApiKey,
) -> Result<Option<Result<StoredKey, KeyRefusal>>, StoreError> {
    let Some(request) = &key.request else {
        return Ok(None);
    };
    let fingerprint: Option<Vec<u8>> = sqlx::query_scalar(
        "SELECT request_sha256 FROM api_keys \
         WHERE shop_id = $1 AND mode = $3 AND idempotency_key = $2",
    )
    .bind(key.shop_id.as_str())
    .bind(&request.idempotency_key)
    .bind(key.mode.as_str())
    .fetch_optional(&mut **tx)
    .await
    .map_err(store_error)?;
    let Some(fingerprint) = fingerprint else {
        return Ok(None);
    };
    if fingerprint != request.fingerprint {
        return Ok(Some(Err(KeyRefusal::RequestReused)));
    }
    let row: ApiKeyRow = sqlx::query_as(concat!(
        "SELECT ",
        api_key_columns!(),
        " FROM api_keys WHERE shop_id = $1 AND mode = $3 AND idempotency_key = $2"
    ))
    .bind(key.shop_id.as_str())
    .bind(&request.idempotency_key)
    .bind(key.mode.as_str())
    .fetch_one(&mut **tx)
    .await
    .map_err(store_error)?;
    Ok(Some(Ok(StoredKey {
        key: KeyCredential::try_from(row)?.key,
        replayed: true,
    })))
}

/// Checks the shop may hold one more active key. The count is a statement
/// of its own, after the shop's row lock ([`lock_shop`]): its snapshot sees
/// the keys of a make that held the lock before (one statement would count
/// from a snapshot taken before it waited).
async fn room_for_a_key(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
) -> Result<Result<(), KeyRefusal>, StoreError> {
    let active: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM api_keys WHERE shop_id = $1 AND revoked_at IS NULL \
           AND (expires_at IS NULL OR expires_at > now())",
    )
    .bind(shop_id.as_str())
    .fetch_one(&mut **tx)
    .await
    .map_err(store_error)?;
    Ok(
        if usize::try_from(active).unwrap_or(usize::MAX) >= MAX_ACTIVE_KEYS {
            Err(KeyRefusal::TooMany)
        } else {
            Ok(())
        },
    )
}

/// When key `id` is the shop's first secret, replaces the copy of its hash
/// that `shops.secret_sha256` still holds (read only by binaries from before
/// migration 0017) with random bytes: a binary rolled back to must not let a
/// revoked or rolled first secret in again.
async fn retire_legacy_secret(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
    id: &ApiKeyId,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE shops SET secret_sha256 = $3 \
         WHERE id = $1 AND secret_sha256 = ( \
             SELECT secret_sha256 FROM api_keys WHERE shop_id = $1 AND id = $2)",
    )
    .bind(shop_id.as_str())
    .bind(id.as_str())
    .bind(crate::key_rows::random_hash().as_slice())
    .execute(&mut **tx)
    .await
    .map_err(store_error)?;
    Ok(())
}

/// Why a roll found no active key `id`.
async fn missing_or_inactive(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
    id: &ApiKeyId,
) -> Result<KeyRefusal, StoreError> {
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM api_keys WHERE shop_id = $1 AND id = $2)")
            .bind(shop_id.as_str())
            .bind(id.as_str())
            .fetch_one(&mut **tx)
            .await
            .map_err(store_error)?;
    Ok(if exists {
        KeyRefusal::Inactive(id.to_string())
    } else {
        KeyRefusal::NoKey(id.to_string())
    })
}

async fn insert(
    tx: &mut Transaction<'static, Postgres>,
    key: &NewApiKey,
) -> Result<StoredKey, StoreError> {
    let row: ApiKeyRow = sqlx::query_as(concat!(
        "INSERT INTO api_keys (shop_id, id, mode, scope, secret_sha256, prefix, description, \
             expires_at, idempotency_key, request_sha256) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING ",
        api_key_columns!()
    ))
    .bind(key.shop_id.as_str())
    .bind(key.id.as_str())
    .bind(key.mode.as_str())
    .bind(key.scope.as_str())
    .bind(key.hash.as_bytes().as_slice())
    .bind(&key.prefix)
    .bind(&key.description)
    .bind(key.expires_at)
    .bind(key.request.as_ref().map(|r| r.idempotency_key.as_str()))
    .bind(key.request.as_ref().map(|r| r.fingerprint.as_slice()))
    .fetch_one(&mut **tx)
    .await
    .map_err(store_error)?;
    Ok(StoredKey {
        key: KeyCredential::try_from(row)?.key,
        replayed: false,
    })
}
