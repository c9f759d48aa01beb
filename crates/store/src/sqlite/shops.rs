//! Shops: registering one, its secret, and the operator's webhook endpoint.

use async_trait::async_trait;
use chargeonce_core::api_key::{ApiKeyId, Mode};
use chargeonce_core::endpoint::NewEndpoint;
use chargeonce_core::events::WebhookEndpoint;
use chargeonce_core::store::Shops;
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{SecretHash, ShopId, StoreError};
use chargeonce_sqlite::Write;
use chargeonce_sqlite::rusqlite::params;

use time::OffsetDateTime;

use std::time::Duration;

use chargeonce_sqlite::rusqlite::OptionalExtension;

use super::{Fail, SqliteStore, endpoints, now_ms};

#[async_trait]
impl Shops for SqliteStore {
    /// Registers a shop with the hash of its secret, which becomes its
    /// first API key (live, full), and its test mode's namespace.
    #[tracing::instrument(level = "debug", name = "store.add_shop", skip_all, fields(db.system = "sqlite"))]
    async fn add_shop(&self, shop_id: &ShopId, secret: &SecretHash) -> Result<(), StoreError> {
        if !shop_id.is_live() {
            return Err(StoreError::other(
                "a shop id may not end in `.test`: that names a shop's test mode",
            ));
        }
        let (shop_id, secret) = (shop_id.clone(), secret.clone());
        self.write(move |conn| {
            let mut insert = conn.prepare_cached(concat!(
                "INSERT INTO shops (id, secret_sha256, created_at, mode) VALUES (?1, ?2, ",
                now_ms!(),
                ", ?3) ON CONFLICT (id) DO NOTHING"
            ))?;
            let added = insert.execute(params![
                shop_id.as_str(),
                secret.as_bytes().as_slice(),
                Mode::Live.as_str()
            ])?;
            if added == 0 {
                return Err(Fail(StoreError::ShopExists(shop_id.to_string())));
            }
            // The namespace's row holds no secret of the shop's (the column
            // is not read since keys; random bytes fill it).
            insert.execute(params![
                shop_id.in_mode(Mode::Test).as_str(),
                rand::random::<[u8; 32]>().as_slice(),
                Mode::Test.as_str()
            ])?;
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

    /// Sets, replaces or removes the shop's operator endpoint (every event
    /// type); a first one gets the shop's events that went nowhere.
    #[tracing::instrument(level = "debug", name = "store.set_webhook", skip_all, fields(db.system = "sqlite"))]
    async fn set_webhook(
        &self,
        shop_id: &ShopId,
        endpoint: Option<&WebhookEndpoint>,
    ) -> Result<bool, StoreError> {
        let (shop_id, endpoint) = (shop_id.clone(), endpoint.cloned());
        self.write(move |conn| {
            let known = conn
                .prepare_cached("SELECT 1 FROM shops WHERE id = ?1")?
                .query_row(params![shop_id.as_str()], |_| Ok(()))
                .optional()?
                .is_some();
            if !known {
                return Ok(Write::Rollback(false));
            }
            match (endpoints::operator_endpoint(conn, &shop_id)?, endpoint) {
                (Some(id), Some(endpoint)) => {
                    conn.prepare_cached(
                        "UPDATE webhook_endpoints SET url = ?3, secret = ?4, \
                             previous_secret = NULL, previous_secret_until = NULL, \
                             secret_key = NULL, secret_request_sha256 = NULL \
                         WHERE shop_id = ?1 AND id = ?2",
                    )?
                    .execute(params![
                        shop_id.as_str(),
                        id,
                        endpoint.url,
                        endpoint.secret.expose()
                    ])?;
                }
                (Some(id), None) => {
                    endpoints::delete(conn, &shop_id, &id)?;
                }
                (None, Some(endpoint)) => {
                    endpoints::add_operator_endpoint(
                        conn,
                        &NewEndpoint::operator(&shop_id, &endpoint),
                    )?;
                }
                (None, None) => {}
            }
            Ok(Write::Commit(true))
        })
        .await
    }

    /// Rolls the signing secret of the shop's operator endpoint; the old one
    /// keeps signing for `overlap`.
    #[tracing::instrument(level = "debug", name = "store.roll_webhook_secret", skip_all, fields(db.system = "sqlite"))]
    async fn roll_webhook_secret(
        &self,
        shop_id: &ShopId,
        secret: &WebhookSecret,
        overlap: Duration,
    ) -> Result<Option<OffsetDateTime>, StoreError> {
        let (shop_id, secret) = (shop_id.clone(), secret.clone());
        let until: Option<i64> = self
            .write(move |conn| {
                let Some(id) = endpoints::operator_endpoint(conn, &shop_id)? else {
                    return Ok(Write::Rollback(None));
                };
                let until = endpoints::roll_secret(conn, &shop_id, &id, &secret, overlap, None)?;
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
                    "UPDATE webhook_endpoints SET previous_secret = NULL, \
                         previous_secret_until = NULL \
                     WHERE previous_secret_until <= ",
                    now_ms!()
                ))?
                .execute([])?;
            Ok(Write::Commit(u64::try_from(wiped).unwrap_or(u64::MAX)))
        })
        .await
    }
}
