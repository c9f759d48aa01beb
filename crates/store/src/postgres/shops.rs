//! Shops: registering one, its secret, and its webhook endpoint.

use async_trait::async_trait;
use chargeonce_core::events::{PARKED_UNTIL_MS, WebhookEndpoint};
use chargeonce_core::store::Shops;
use chargeonce_core::{SecretHash, ShopId, StoreError};
use sqlx::Row;

use super::{PgStore, store_error};

#[async_trait]
impl Shops for PgStore {
    /// Registers a shop with the hash of its secret.
    #[tracing::instrument(level = "debug", name = "store.add_shop", skip_all, fields(db.system = "postgresql"))]
    async fn add_shop(&self, shop_id: &ShopId, secret: &SecretHash) -> Result<(), StoreError> {
        let done = sqlx::query(
            "INSERT INTO shops (id, secret_sha256) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
        )
        .bind(shop_id.as_str())
        .bind(secret.as_bytes().as_slice())
        .execute(&mut *self.conn().await?)
        .await
        .map_err(store_error)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::ShopExists(shop_id.to_string()));
        }
        Ok(())
    }

    /// The stored secret hash of a shop.
    #[tracing::instrument(level = "debug", name = "store.shop_secret", skip_all, fields(db.system = "postgresql"))]
    async fn shop_secret(&self, shop_id: &ShopId) -> Result<Option<SecretHash>, StoreError> {
        let row = sqlx::query("SELECT secret_sha256 FROM shops WHERE id = $1")
            .bind(shop_id.as_str())
            .fetch_optional(&mut *self.conn().await?)
            .await
            .map_err(store_error)?;
        let Some(row) = row else { return Ok(None) };
        let bytes: Vec<u8> = row.try_get("secret_sha256").map_err(store_error)?;
        SecretHash::from_bytes(&bytes)
            .map(Some)
            .ok_or_else(|| StoreError::corrupt(format!("secret hash of shop {shop_id}")))
    }

    /// Sets or removes a shop's webhook endpoint; setting one makes its parked events due.
    #[tracing::instrument(level = "debug", name = "store.set_webhook", skip_all, fields(db.system = "postgresql"))]
    async fn set_webhook(
        &self,
        shop_id: &ShopId,
        endpoint: Option<&WebhookEndpoint>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        let done =
            sqlx::query("UPDATE shops SET webhook_url = $2, webhook_secret = $3 WHERE id = $1")
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
}
