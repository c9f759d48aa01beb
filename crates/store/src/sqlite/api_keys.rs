//! A shop's API keys: read for authentication, made, rolled and revoked.
//! Each write runs on the one writer, so the count of a shop's active keys
//! and the insert it allows are never interleaved with another's.

use async_trait::async_trait;
use chargeonce_core::api_key::{
    ApiKey, ApiKeyId, KeyCredential, KeyRefusal, MAX_ACTIVE_KEYS, NewApiKey, StoredKey,
};
use chargeonce_core::store::ApiKeys;
use chargeonce_core::{ShopId, StoreError};
use chargeonce_sqlite::Write;
use chargeonce_sqlite::rusqlite::{Connection, OptionalExtension, params};
use time::OffsetDateTime;

use super::{Result, SqliteStore, all, now_ms, one, unix_ms};
use crate::key_rows::{ApiKeyRow, api_key_columns};

#[async_trait]
impl ApiKeys for SqliteStore {
    #[tracing::instrument(level = "debug", name = "store.shop_keys", skip_all, fields(db.system = "sqlite"))]
    async fn shop_keys(&self, shop_id: &ShopId) -> Result<Option<Vec<KeyCredential>>, StoreError> {
        let shop_id = shop_id.clone();
        self.read(move |conn| {
            let keys = all::<ApiKeyRow, KeyCredential>(
                conn,
                concat!(
                    "SELECT ",
                    api_key_columns!(),
                    " FROM api_keys WHERE shop_id = ?1 ORDER BY created_at, id"
                ),
                params![shop_id.as_str()],
            )?;
            // Asked for every shop, so the time of a refusal does not tell
            // which shop ids exist.
            let known = shop_exists(conn, &shop_id)?;
            Ok(known.then_some(keys))
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "store.add_api_key", skip_all, fields(db.system = "sqlite"))]
    async fn add_api_key(
        &self,
        key: &NewApiKey,
    ) -> Result<Result<StoredKey, KeyRefusal>, StoreError> {
        let key = key.clone();
        self.write(move |conn| {
            if let Some(earlier) = earlier_request(conn, &key)? {
                return Ok(Write::Rollback(earlier));
            }
            if let Err(refusal) = room_for_a_key(conn, &key.shop_id)? {
                return Ok(Write::Rollback(Err(refusal)));
            }
            if let Some(at) = key.expires_at {
                let passed: bool = conn
                    .prepare_cached(concat!("SELECT ?1 <= ", now_ms!()))?
                    .query_row(params![unix_ms(at)], |row| row.get(0))?;
                if passed {
                    return Ok(Write::Rollback(Err(KeyRefusal::ExpiryPassed)));
                }
            }
            insert(conn, &key).map(|added| Write::Commit(Ok(added)))
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "store.roll_api_key", skip_all, fields(db.system = "sqlite"))]
    async fn roll_api_key(
        &self,
        shop_id: &ShopId,
        id: &ApiKeyId,
        successor: &NewApiKey,
        old_expires_at: OffsetDateTime,
    ) -> Result<Result<StoredKey, KeyRefusal>, StoreError> {
        let (shop_id, id, successor) = (shop_id.clone(), id.clone(), successor.clone());
        self.write(move |conn| {
            if let Some(earlier) = earlier_request(conn, &successor)? {
                return Ok(Write::Rollback(earlier));
            }
            if let Err(refusal) = room_for_a_key(conn, &shop_id)? {
                return Ok(Write::Rollback(Err(refusal)));
            }
            let rolled = conn
                .prepare_cached(concat!(
                    "UPDATE api_keys SET expires_at = min(coalesce(expires_at, ?3), ?3) \
                     WHERE shop_id = ?1 AND id = ?2 AND revoked_at IS NULL \
                       AND (expires_at IS NULL OR expires_at > ",
                    now_ms!(),
                    ")"
                ))?
                .execute(params![
                    shop_id.as_str(),
                    id.as_str(),
                    unix_ms(old_expires_at)
                ])?;
            if rolled == 0 {
                let refusal = missing_or_inactive(conn, &shop_id, &id)?;
                return Ok(Write::Rollback(Err(refusal)));
            }
            retire_legacy_secret(conn, &shop_id, &id)?;
            insert(conn, &successor).map(|added| Write::Commit(Ok(added)))
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "store.revoke_api_key", skip_all, fields(db.system = "sqlite"))]
    async fn revoke_api_key(
        &self,
        shop_id: &ShopId,
        id: &ApiKeyId,
    ) -> Result<Result<ApiKey, KeyRefusal>, StoreError> {
        let (shop_id, id) = (shop_id.clone(), id.clone());
        self.write(move |conn| {
            let revoked = one::<ApiKeyRow, KeyCredential>(
                conn,
                concat!(
                    "UPDATE api_keys SET revoked_at = coalesce(revoked_at, ",
                    now_ms!(),
                    ") WHERE shop_id = ?1 AND id = ?2 RETURNING ",
                    api_key_columns!()
                ),
                params![shop_id.as_str(), id.as_str()],
            )?;
            let Some(credential) = revoked else {
                return Ok(Write::Rollback(Err(KeyRefusal::NoKey(id.to_string()))));
            };
            retire_legacy_secret(conn, &shop_id, &id)?;
            Ok(Write::Commit(Ok(credential.key)))
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "store.touch_api_key", skip_all, fields(db.system = "sqlite"))]
    async fn touch_api_key(&self, shop_id: &ShopId, id: &ApiKeyId) -> Result<(), StoreError> {
        let (shop_id, id) = (shop_id.clone(), id.clone());
        self.write(move |conn| {
            conn.prepare_cached(concat!(
                "UPDATE api_keys SET last_used_at = ",
                now_ms!(),
                " WHERE shop_id = ?1 AND id = ?2 \
                   AND (last_used_at IS NULL OR last_used_at < ",
                now_ms!(),
                " - 60000)"
            ))?
            .execute(params![shop_id.as_str(), id.as_str()])?;
            Ok(Write::Commit(()))
        })
        .await
    }
}

fn shop_exists(conn: &Connection, shop_id: &ShopId) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM shops WHERE id = ?1")?
        .query_row(params![shop_id.as_str()], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Whether the shop exists and may hold one more active key.
fn room_for_a_key(conn: &Connection, shop_id: &ShopId) -> Result<Result<(), KeyRefusal>> {
    if !shop_exists(conn, shop_id)? {
        return Ok(Err(KeyRefusal::NoShop(shop_id.to_string())));
    }
    let active: i64 = conn
        .prepare_cached(concat!(
            "SELECT count(*) FROM api_keys WHERE shop_id = ?1 AND revoked_at IS NULL \
               AND (expires_at IS NULL OR expires_at > ",
            now_ms!(),
            ")"
        ))?
        .query_row(params![shop_id.as_str()], |row| row.get(0))?;
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
/// migration 0015) with random bytes: a binary rolled back to must not let a
/// revoked or rolled first secret in again.
fn retire_legacy_secret(conn: &Connection, shop_id: &ShopId, id: &ApiKeyId) -> Result<()> {
    conn.prepare_cached(
        "UPDATE shops SET secret_sha256 = ?3 \
         WHERE id = ?1 AND secret_sha256 = ( \
             SELECT secret_sha256 FROM api_keys WHERE shop_id = ?1 AND id = ?2)",
    )?
    .execute(params![
        shop_id.as_str(),
        id.as_str(),
        crate::key_rows::random_hash().as_slice()
    ])?;
    Ok(())
}

/// The key an earlier request with `key`'s idempotency key made, if any:
/// replayed when it asked the same, refused when it asked something else.
/// `None` for a key without a making request, or a first request. (The one
/// writer keeps two repeats apart.)
fn earlier_request(
    conn: &Connection,
    key: &NewApiKey,
) -> Result<Option<Result<StoredKey, KeyRefusal>>> {
    let Some(request) = &key.request else {
        return Ok(None);
    };
    let fingerprint: Option<Vec<u8>> = conn
        .prepare_cached(
            "SELECT request_sha256 FROM api_keys \
             WHERE shop_id = ?1 AND mode = ?3 AND idempotency_key = ?2",
        )?
        .query_row(
            params![
                key.shop_id.as_str(),
                request.idempotency_key,
                key.mode.as_str()
            ],
            |row| row.get(0),
        )
        .optional()?;
    let Some(fingerprint) = fingerprint else {
        return Ok(None);
    };
    if fingerprint != request.fingerprint {
        return Ok(Some(Err(KeyRefusal::RequestReused)));
    }
    let found = one::<ApiKeyRow, KeyCredential>(
        conn,
        concat!(
            "SELECT ",
            api_key_columns!(),
            " FROM api_keys WHERE shop_id = ?1 AND mode = ?3 AND idempotency_key = ?2"
        ),
        params![
            key.shop_id.as_str(),
            request.idempotency_key,
            key.mode.as_str()
        ],
    )?;
    let key = found
        .map(|credential| credential.key)
        .ok_or_else(|| StoreError::other("a key found by its request returned no row"))?;
    Ok(Some(Ok(StoredKey {
        key,
        replayed: true,
    })))
}

/// Why a roll found no active key `id`.
fn missing_or_inactive(conn: &Connection, shop_id: &ShopId, id: &ApiKeyId) -> Result<KeyRefusal> {
    let exists = conn
        .prepare_cached("SELECT 1 FROM api_keys WHERE shop_id = ?1 AND id = ?2")?
        .query_row(params![shop_id.as_str(), id.as_str()], |_| Ok(()))
        .optional()?
        .is_some();
    Ok(if exists {
        KeyRefusal::Inactive(id.to_string())
    } else {
        KeyRefusal::NoKey(id.to_string())
    })
}

fn insert(conn: &Connection, key: &NewApiKey) -> Result<StoredKey> {
    let inserted = one::<ApiKeyRow, KeyCredential>(
        conn,
        concat!(
            "INSERT INTO api_keys (shop_id, id, mode, scope, secret_sha256, prefix, description, \
                 created_at, expires_at, idempotency_key, request_sha256) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ",
            now_ms!(),
            ", ?8, ?9, ?10) RETURNING ",
            api_key_columns!()
        ),
        params![
            key.shop_id.as_str(),
            key.id.as_str(),
            key.mode.as_str(),
            key.scope.as_str(),
            key.hash.as_bytes().as_slice(),
            key.prefix,
            key.description,
            key.expires_at.map(unix_ms),
            key.request.as_ref().map(|r| r.idempotency_key.as_str()),
            key.request.as_ref().map(|r| r.fingerprint.as_slice()),
        ],
    )?;
    inserted
        .map(|credential| StoredKey {
            key: credential.key,
            replayed: false,
        })
        .ok_or_else(|| StoreError::other("an inserted key returned no row").into())
}
