//! A shop's API keys: read for authentication, made, rolled and revoked.
//! Each write is one transaction that locks the shop's row first, so two
//! makes or rolls of one shop count its active keys one after the other.

use async_trait::async_trait;
use chargeonce_core::api_key::{
    ApiKey, ApiKeyId, KeyCredential, KeyRefusal, MAX_ACTIVE_KEYS, NewApiKey,
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
        let rows: Vec<ApiKeyRow> = sqlx::query_as(concat!(
            "SELECT ",
            api_key_columns!(),
            " FROM api_keys WHERE shop_id = $1 ORDER BY created_at, id"
        ))
        .bind(shop_id.as_str())
        .fetch_all(&mut *conn)
        .await
        .map_err(store_error)?;
        if rows.is_empty() {
            // A shop has a key from its first day; none: no such shop, unless
            // every key of it was deleted by hand.
            let known: bool =
                sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM shops WHERE id = $1)")
                    .bind(shop_id.as_str())
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(store_error)?;
            return Ok(known.then(Vec::new));
        }
        rows.into_iter()
            .map(KeyCredential::try_from)
            .collect::<Result<_, _>>()
            .map(Some)
    }

    #[tracing::instrument(level = "debug", name = "store.add_api_key", skip_all, fields(db.system = "postgresql"))]
    async fn add_api_key(&self, key: &NewApiKey) -> Result<Result<ApiKey, KeyRefusal>, StoreError> {
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        if let Err(refusal) = room_for_a_key(&mut tx, &key.shop_id).await? {
            return Ok(Err(refusal));
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
    ) -> Result<Result<ApiKey, KeyRefusal>, StoreError> {
        let mut tx = self.conns.begin().await.map_err(store_error)?;
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
        let row: Option<ApiKeyRow> = sqlx::query_as(concat!(
            "UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) \
             WHERE shop_id = $1 AND id = $2 RETURNING ",
            api_key_columns!()
        ))
        .bind(shop_id.as_str())
        .bind(id.as_str())
        .fetch_optional(&mut *self.conn().await?)
        .await
        .map_err(store_error)?;
        match row {
            Some(row) => Ok(Ok(KeyCredential::try_from(row)?.key)),
            None => Ok(Err(KeyRefusal::NoKey(id.to_string()))),
        }
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

/// Locks the shop's row (so its key writes run one after the other) and
/// checks it may hold one more active key.
async fn room_for_a_key(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
) -> Result<Result<(), KeyRefusal>, StoreError> {
    let active: Option<i64> = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM api_keys k WHERE k.shop_id = s.id \
                 AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())) \
         FROM shops s WHERE s.id = $1 FOR NO KEY UPDATE OF s",
    )
    .bind(shop_id.as_str())
    .fetch_optional(&mut **tx)
    .await
    .map_err(store_error)?;
    Ok(match active {
        None => Err(KeyRefusal::NoShop(shop_id.to_string())),
        Some(n) if usize::try_from(n).unwrap_or(usize::MAX) >= MAX_ACTIVE_KEYS => {
            Err(KeyRefusal::TooMany)
        }
        Some(_) => Ok(()),
    })
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
) -> Result<ApiKey, StoreError> {
    let row: ApiKeyRow = sqlx::query_as(concat!(
        "INSERT INTO api_keys (shop_id, id, mode, scope, secret_sha256, prefix, description, \
             expires_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ",
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
    .fetch_one(&mut **tx)
    .await
    .map_err(store_error)?;
    Ok(KeyCredential::try_from(row)?.key)
}
