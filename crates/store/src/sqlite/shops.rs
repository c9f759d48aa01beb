//! Shops: registering one, its secret, and its webhook endpoint.

use async_trait::async_trait;
use chargeonce_core::api_key::ApiKeyId;
use chargeonce_core::events::{PARKED_UNTIL_MS, WebhookEndpoint};
use chargeonce_core::store::Shops;
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{SecretHash, ShopId, StoreError};
use chargeonce_sqlite::Write;
use chargeonce_sqlite::rusqlite::params;

use time::OffsetDateTime;

use std::time::Duration;

use chargeonce_sqlite::rusqlite::OptionalExtension;

use super::{Fail, SqliteStore, now_ms};
use crate::codec::millis;

#[async_trait]
impl Shops for SqliteStore {
    /// Registers a shop with the hash of its secret, which becomes its
    /// first API key (live, full).
    #[tracing::instrument(level = "debug", name = "store.add_shop", skip_all, fields(db.system = "sqlite"))]
    async fn add_shop(&self, shop_id: &ShopId, secret: &SecretHash) -> Result<(), StoreError> {
        let (shop_id, secret) = (shop_id.clone(), secret.clone());
        self.write(move |conn| {
            let added = conn
                .prepare_cached(concat!(
                    "INSERT INTO shops (id, secret_sha256, created_at) VALUES (?1, ?2, ",
                    now_ms!(),
                    ") ON CONFLICT (id) DO NOTHING"
                ))?
                .execute(params![shop_id.as_str(), secret.as_bytes().as_slice()])?;
            if added == 0 {
                return Err(Fail(StoreError::ShopExists(shop_id.to_string())));
            }
            // Its secret is its first API key: live, full.
            conn.prepare_cached(
                "INSERT INTO api_keys (shop_id, id, mode, scope, secret_sha256, description, \
                     created_at) \
                 SELECT id, ?2, 'live', 'full', secret_sha256, 'the shop''s first secret', \
                     created_at \
                 FROM shops WHERE id = ?1",
            )?
            .execute(params![shop_id.as_str(), ApiKeyId::generate().as_str()])?;
            Ok(Write::Commit(()))
        })
        .await
    }

    /// Sets or removes a shop's webhook endpoint; setting one makes its parked events due.
    #[tracing::instrument(level = "debug", name = "store.set_webhook", skip_all, fields(db.system = "sqlite"))]
    async fn set_webhook(
        &self,
        shop_id: &ShopId,
        endpoint: Option<&WebhookEndpoint>,
    ) -> Result<bool, StoreError> {
        let (shop_id, endpoint) = (shop_id.clone(), endpoint.cloned());
        self.write(move |conn| {
            let done = conn
                .prepare_cached(
                    "UPDATE shops SET webhook_url = ?2, webhook_secret = ?3, \
                         webhook_previous_secret = NULL, webhook_previous_secret_until = NULL \
                     WHERE id = ?1",
                )?
                .execute(params![
                    shop_id.as_str(),
                    endpoint.as_ref().map(|e| e.url.as_str()),
                    endpoint.as_ref().map(|e| e.secret.expose()),
                ])?;
            if endpoint.is_some() {
                // Events parked while the shop had no URL are due now; their
                // give-up clock starts now.
                conn.prepare_cached(concat!(
                    "UPDATE events SET next_attempt_at = ",
                    now_ms!(),
                    ", due_since = ",
                    now_ms!(),
                    " WHERE shop_id = ?1 AND delivered_at IS NULL AND gave_up_at IS NULL \
                       AND next_attempt_at >= ?2"
                ))?
                .execute(params![shop_id.as_str(), PARKED_UNTIL_MS])?;
            }
            Ok(Write::Commit(done == 1))
        })
        .await
    }

    /// Rolls the shop's webhook signing secret; the old one keeps signing
    /// for `overlap`.
    #[tracing::instrument(level = "debug", name = "store.roll_webhook_secret", skip_all, fields(db.system = "sqlite"))]
    async fn roll_webhook_secret(
        &self,
        shop_id: &ShopId,
        secret: &WebhookSecret,
        overlap: Duration,
    ) -> Result<Option<OffsetDateTime>, StoreError> {
        let (shop_id, secret) = (shop_id.clone(), secret.expose());
        let overlap_ms = millis(overlap);
        let until: Option<i64> = self
            .write(move |conn| {
                let until = conn
                    .prepare_cached(concat!(
                        "UPDATE shops SET webhook_previous_secret = webhook_secret, \
                             webhook_previous_secret_until = ",
                        now_ms!(),
                        " + ?3, webhook_secret = ?2 \
                         WHERE id = ?1 AND webhook_url IS NOT NULL AND webhook_secret <> ?2 \
                         RETURNING webhook_previous_secret_until"
                    ))?
                    .query_row(params![shop_id.as_str(), secret, overlap_ms], |row| {
                        row.get(0)
                    })
                    .optional()?;
                Ok(Write::Commit(until))
            })
            .await?;
        until.map(crate::rows::from_ms).transpose()
    }

    /// Wipes the rolled-over secrets whose overlap has ended.
    #[tracing::instrument(level = "debug", name = "store.forget_rolled_webhook_secrets", skip_all, fields(db.system = "sqlite"))]
    async fn forget_rolled_webhook_secrets(&self) -> Result<u64, StoreError> {
        self.write(|conn| {
            let wiped = conn
                .prepare_cached(concat!(
                    "UPDATE shops SET webhook_previous_secret = NULL, \
                         webhook_previous_secret_until = NULL \
                     WHERE webhook_previous_secret_until <= ",
                    now_ms!()
                ))?
                .execute([])?;
            Ok(Write::Commit(u64::try_from(wiped).unwrap_or(u64::MAX)))
        })
        .await
    }
}
