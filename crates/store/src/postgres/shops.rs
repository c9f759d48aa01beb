//! Shops: registering one, its secret, and the operator's webhook endpoint.

use async_trait::async_trait;
use chargeonce_core::api_key::{ApiKeyId, Mode};
use chargeonce_core::endpoint::NewEndpoint;
use chargeonce_core::events::WebhookEndpoint;
use chargeonce_core::store::Shops;
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{SecretHash, ShopId, StoreError};
use std::time::Duration;

use time::OffsetDateTime;

use super::{PgStore, endpoints, store_error};

#[async_trait]
impl Shops for PgStore {
    /// Registers a shop with the hash of its secret, which becomes its
    /// first API key (live, full), and its test mode's namespace.
    #[tracing::instrument(level = "debug", name = "store.add_shop", skip_all, fields(db.system = "postgresql"))]
    async fn add_shop(&self, shop_id: &ShopId, secret: &SecretHash) -> Result<(), StoreError> {
        if !shop_id.is_live() {
            return Err(StoreError::other(
                "a shop id may not end in `.test`: that names a shop's test mode",
            ));
        }
        let done = sqlx::query(
            "WITH s AS ( \
                 INSERT INTO shops (id, secret_sha256, mode) \
                 VALUES ($1, $2, 'live'), ($4, sha256(gen_random_uuid()::text::bytea), 'test') \
                 ON CONFLICT (id) DO NOTHING RETURNING id, secret_sha256, created_at, mode) \
             INSERT INTO api_keys (shop_id, id, mode, scope, secret_sha256, description, \
                 created_at) \
             SELECT id, $3, 'live', 'full', secret_sha256, 'the shop''s first secret', created_at \
             FROM s WHERE mode = 'live'",
        )
        .bind(shop_id.as_str())
        .bind(secret.as_bytes().as_slice())
        .bind(ApiKeyId::generate().as_str())
        .bind(shop_id.in_mode(Mode::Test).as_str())
        .execute(&mut *self.conn().await?)
        .await
        .map_err(store_error)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::ShopExists(shop_id.to_string()));
        }
        Ok(())
    }

    /// Sets, replaces or removes the shop's operator endpoint (every event
    /// type); a first one gets the shop's events that went nowhere.
    #[tracing::instrument(level = "debug", name = "store.set_webhook", skip_all, fields(db.system = "postgresql"))]
    async fn set_webhook(
        &self,
        shop_id: &ShopId,
        endpoint: Option<&WebhookEndpoint>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        let known: Option<i32> =
            sqlx::query_scalar("SELECT 1 FROM shops WHERE id = $1 FOR NO KEY UPDATE")
                .bind(shop_id.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_error)?;
        if known.is_none() {
            return Ok(false);
        }
        let current = endpoints::operator_endpoint(&mut tx, shop_id).await?;
        match (current, endpoint) {
            (Some(id), Some(endpoint)) => {
                sqlx::query(
                    "UPDATE webhook_endpoints SET url = $3, secret = $4, previous_secret = NULL, \
                         previous_secret_until = NULL, secret_key = NULL, \
                         secret_request_sha256 = NULL \
                     WHERE shop_id = $1 AND id = $2",
                )
                .bind(shop_id.as_str())
                .bind(&id)
                .bind(&endpoint.url)
                .bind(endpoint.secret.expose())
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            }
            (Some(id), None) => {
                endpoints::delete(&mut tx, shop_id, &id).await?;
            }
            (None, Some(endpoint)) => {
                endpoints::add_operator_endpoint(
                    &mut tx,
                    &NewEndpoint::operator(shop_id, endpoint),
                )
                .await?;
            }
            (None, None) => {}
        }
        tx.commit().await.map_err(store_error)?;
        Ok(true)
    }

    /// Rolls the signing secret of the shop's operator endpoint; the old one
    /// keeps signing for `overlap`.
    #[tracing::instrument(level = "debug", name = "store.roll_webhook_secret", skip_all, fields(db.system = "postgresql"))]
    async fn roll_webhook_secret(
        &self,
        shop_id: &ShopId,
        secret: &WebhookSecret,
        overlap: Duration,
    ) -> Result<Option<OffsetDateTime>, StoreError> {
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        let Some(id) = endpoints::operator_endpoint(&mut tx, shop_id).await? else {
            return Ok(None);
        };
        let until = endpoints::roll_secret(&mut tx, shop_id, &id, secret, overlap, None).await?;
        tx.commit().await.map_err(store_error)?;
        Ok(until)
    }

    /// Wipes the rolled-over secrets whose overlap has ended.
    #[tracing::instrument(level = "debug", name = "store.forget_rolled_webhook_secrets", skip_all, fields(db.system = "postgresql"))]
    async fn forget_rolled_webhook_secrets(&self) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE webhook_endpoints SET previous_secret = NULL, previous_secret_until = NULL \
             WHERE previous_secret_until <= now()",
        )
        .execute(&mut *self.conn().await?)
        .await
        .map_err(store_error)?;
        Ok(done.rows_affected())
    }
}
