//! Shops: registering one, its secret, and its webhook endpoint.

use async_trait::async_trait;
use chargeonce_core::api_key::ApiKeyId;
use chargeonce_core::events::{PARKED_UNTIL_MS, WebhookEndpoint};
use chargeonce_core::store::Shops;
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{SecretHash, ShopId, StoreError};
use std::time::Duration;

use time::OffsetDateTime;

use crate::codec::millis;

use super::{PgStore, store_error};

#[async_trait]
impl Shops for PgStore {
    /// Registers a shop with the hash of its secret, which becomes its
    /// first API key (live, full).
    #[tracing::instrument(level = "debug", name = "store.add_shop", skip_all, fields(db.system = "postgresql"))]
    async fn add_shop(&self, shop_id: &ShopId, secret: &SecretHash) -> Result<(), StoreError> {
        let done = sqlx::query(
            "WITH s AS ( \
                 INSERT INTO shops (id, secret_sha256) VALUES ($1, $2) \
                 ON CONFLICT (id) DO NOTHING RETURNING id, secret_sha256, created_at) \
             INSERT INTO api_keys (shop_id, id, mode, scope, secret_sha256, description, \
                 created_at) \
             SELECT id, $3, 'live', 'full', secret_sha256, 'the shop''s first secret', created_at \
             FROM s",
        )
        .bind(shop_id.as_str())
        .bind(secret.as_bytes().as_slice())
        .bind(ApiKeyId::generate().as_str())
        .execute(&mut *self.conn().await?)
        .await
        .map_err(store_error)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::ShopExists(shop_id.to_string()));
        }
        Ok(())
    }

    /// Sets or removes a shop's webhook endpoint; setting one makes its parked events due.
    #[tracing::instrument(level = "debug", name = "store.set_webhook", skip_all, fields(db.system = "postgresql"))]
    async fn set_webhook(
        &self,
        shop_id: &ShopId,
        endpoint: Option<&WebhookEndpoint>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        let done = sqlx::query(
            "UPDATE shops SET webhook_url = $2, webhook_secret = $3, \
                     webhook_previous_secret = NULL, webhook_previous_secret_until = NULL \
                 WHERE id = $1",
        )
        .bind(shop_id.as_str())
        .bind(endpoint.map(|e| e.url.as_str()))
        .bind(endpoint.map(|e| e.secret.expose()))
        .execute(&mut *tx)
        .await
        .map_err(store_error)?;
        if endpoint.is_some() {
            // Events parked while the shop had no URL are due now; their
            // give-up clock starts now.
            sqlx::query(
                "UPDATE events SET next_attempt_at = now(), due_since = now() \
                 WHERE shop_id = $1 AND delivered_at IS NULL AND gave_up_at IS NULL \
                   AND next_attempt_at >= to_timestamp($2::float8 / 1000)",
            )
            .bind(shop_id.as_str())
            .bind(PARKED_UNTIL_MS as f64)
            .execute(&mut *tx)
            .await
            .map_err(store_error)?;
        }
        tx.commit().await.map_err(store_error)?;
        Ok(done.rows_affected() == 1)
    }

    /// Rolls the shop's webhook signing secret; the old one keeps signing
    /// for `overlap`.
    #[tracing::instrument(level = "debug", name = "store.roll_webhook_secret", skip_all, fields(db.system = "postgresql"))]
    async fn roll_webhook_secret(
        &self,
        shop_id: &ShopId,
        secret: &WebhookSecret,
        overlap: Duration,
    ) -> Result<Option<OffsetDateTime>, StoreError> {
        sqlx::query_scalar(
            "UPDATE shops SET webhook_previous_secret = webhook_secret, \
                 webhook_previous_secret_until = now() + $3::float8 * interval '1 millisecond', \
                 webhook_secret = $2 \
             WHERE id = $1 AND webhook_url IS NOT NULL AND webhook_secret <> $2 \
             RETURNING webhook_previous_secret_until",
        )
        .bind(shop_id.as_str())
        .bind(secret.expose())
        .bind(millis(overlap) as f64)
        .fetch_optional(&mut *self.conn().await?)
        .await
        .map_err(store_error)
    }

    /// Wipes the rolled-over secrets whose overlap has ended.
    #[tracing::instrument(level = "debug", name = "store.forget_rolled_webhook_secrets", skip_all, fields(db.system = "postgresql"))]
    async fn forget_rolled_webhook_secrets(&self) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE shops SET webhook_previous_secret = NULL, webhook_previous_secret_until = NULL \
             WHERE webhook_previous_secret_until <= now()",
        )
        .execute(&mut *self.conn().await?)
        .await
        .map_err(store_error)?;
        Ok(done.rows_affected())
    }
}
