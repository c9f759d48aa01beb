//! Webhook endpoints: a shop's own (made through the API, idempotent by the
//! idempotency key kept on the row) and the operator's (`set-webhook`). Each
//! write runs on the one writer, so a count of a shop's endpoints and the
//! insert it allows are never interleaved with another's.

use std::time::Duration;

use async_trait::async_trait;
use chargeonce_core::api_key::MakingRequest;
use chargeonce_core::endpoint::{
    DELETED, Endpoint, EndpointId, EndpointRefusal, EndpointUpdate, MAX_ENDPOINTS, NewEndpoint,
    StoredEndpoint,
};
use chargeonce_core::events::PARKED_UNTIL_MS;
use chargeonce_core::store::WebhookEndpoints;
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{ShopId, StoreError};
use chargeonce_sqlite::Write;
use chargeonce_sqlite::rusqlite::{Connection, OptionalExtension, params};

use super::{Result, SqliteStore, all, now_ms, one};
use crate::codec::millis;
use crate::rows::{EndpointRequestRow, EndpointRow, FromSqliteRow};

/// The columns of an endpoint row ([`EndpointRow`]); times are unix ms.
macro_rules! endpoint_columns {
    () => {
        "shop_id, id, origin, url, enabled_events, description, enabled, \
         created_at AS created_at_ms, previous_secret_until AS previous_secret_until_ms"
    };
}

/// One live endpoint of a shop.
fn live(conn: &Connection, shop_id: &ShopId, id: &str) -> Result<Option<Endpoint>> {
    one::<EndpointRow, _>(
        conn,
        concat!(
            "SELECT ",
            endpoint_columns!(),
            " FROM webhook_endpoints WHERE shop_id = ?1 AND id = ?2 AND deleted_at IS NULL"
        ),
        params![shop_id.as_str(), id],
    )
}

/// What a repeat of a create or roll of endpoint `id` is judged by.
fn request_row(conn: &Connection, shop_id: &ShopId, id: &str) -> Result<EndpointRequestRow> {
    Ok(conn
        .prepare_cached(
            "SELECT idempotency_key, request_sha256, secret_key, secret_request_sha256 \
             FROM webhook_endpoints WHERE shop_id = ?1 AND id = ?2",
        )?
        .query_row(
            params![shop_id.as_str(), id],
            EndpointRequestRow::from_sqlite,
        )?)
}

/// The endpoint an earlier create with `request`'s idempotency key made:
/// replayed when it asked the same, refused when it asked something else.
fn earlier_create(
    conn: &Connection,
    shop_id: &ShopId,
    request: &MakingRequest,
) -> Result<Option<std::result::Result<StoredEndpoint, EndpointRefusal>>> {
    let found: Option<String> = conn
        .prepare_cached(
            "SELECT id FROM webhook_endpoints WHERE shop_id = ?1 AND idempotency_key = ?2",
        )?
        .query_row(
            params![shop_id.as_str(), request.idempotency_key.as_str()],
            |row| row.get(0),
        )
        .optional()?;
    let Some(id) = found else {
        return Ok(None);
    };
    if request_row(conn, shop_id, &id)?.made_by(request) != Some(true) {
        return Ok(Some(Err(EndpointRefusal::RequestReused)));
    }
    // A deleted endpoint is answered as it is.
    let endpoint = one::<EndpointRow, Endpoint>(
        conn,
        concat!(
            "SELECT ",
            endpoint_columns!(),
            " FROM webhook_endpoints WHERE shop_id = ?1 AND id = ?2"
        ),
        params![shop_id.as_str(), id],
    )?;
    Ok(endpoint.map(|endpoint| {
        Ok(StoredEndpoint {
            endpoint,
            replayed: true,
        })
    }))
}

/// Inserts an endpoint.
fn insert(conn: &Connection, endpoint: &NewEndpoint) -> Result<Endpoint> {
    let request = endpoint.request.as_ref();
    let made = one::<EndpointRow, Endpoint>(
        conn,
        concat!(
            "INSERT INTO webhook_endpoints (shop_id, id, origin, url, enabled_events, \
                 description, secret, idempotency_key, request_sha256, secret_key, \
                 secret_request_sha256, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?8, ?9, ",
            now_ms!(),
            ") RETURNING ",
            endpoint_columns!()
        ),
        params![
            endpoint.shop_id.as_str(),
            endpoint.id.as_str(),
            endpoint.origin.as_str(),
            endpoint.url,
            endpoint.filter.as_stored(),
            endpoint.description,
            endpoint.secret.expose(),
            request.map(|r| r.idempotency_key.as_str()),
            request.map(|r| r.fingerprint.as_slice()),
        ],
    )?;
    made.ok_or_else(|| super::Fail(StoreError::corrupt("an endpoint insert returned no row")))
}

/// Whether the shop exists.
fn shop_exists(conn: &Connection, shop_id: &ShopId) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM shops WHERE id = ?1")?
        .query_row(params![shop_id.as_str()], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Whether the shop may have one more endpoint.
fn room(conn: &Connection, shop_id: &ShopId) -> Result<bool> {
    let live: i64 = conn
        .prepare_cached(
            "SELECT count(*) FROM webhook_endpoints WHERE shop_id = ?1 AND deleted_at IS NULL",
        )?
        .query_row(params![shop_id.as_str()], |row| row.get(0))?;
    Ok(usize::try_from(live).unwrap_or(usize::MAX) < MAX_ENDPOINTS)
}

/// Rolls the secret of endpoint `id`: the replaced one signs for `overlap`
/// more (by SQLite's clock). The end of the overlap (unix ms); `None` when
/// the endpoint is gone or already signs with `secret`.
pub(super) fn roll_secret(
    conn: &Connection,
    shop_id: &ShopId,
    id: &str,
    secret: &WebhookSecret,
    overlap: Duration,
    request: Option<&MakingRequest>,
) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached(concat!(
            "UPDATE webhook_endpoints SET previous_secret = secret, previous_secret_until = ",
            now_ms!(),
            " + ?4, secret = ?3, secret_key = ?5, secret_request_sha256 = ?6 \
             WHERE shop_id = ?1 AND id = ?2 AND deleted_at IS NULL AND secret <> ?3 \
             RETURNING previous_secret_until"
        ))?
        .query_row(
            params![
                shop_id.as_str(),
                id,
                secret.expose(),
                millis(overlap),
                request.map(|r| r.idempotency_key.as_str()),
                request.map(|r| r.fingerprint.as_slice()),
            ],
            |row| row.get(0),
        )
        .optional()?)
}

/// Deletes endpoint `id`: its secrets wiped, its open deliveries given up.
/// `None` when unknown or deleted already.
pub(super) fn delete(conn: &Connection, shop_id: &ShopId, id: &str) -> Result<Option<Endpoint>> {
    let deleted = one::<EndpointRow, Endpoint>(
        conn,
        concat!(
            "UPDATE webhook_endpoints SET deleted_at = ",
            now_ms!(),
            ", enabled = 0, secret = NULL, previous_secret = NULL, previous_secret_until = NULL \
             WHERE shop_id = ?1 AND id = ?2 AND deleted_at IS NULL RETURNING ",
            endpoint_columns!()
        ),
        params![shop_id.as_str(), id],
    )?;
    if deleted.is_some() {
        conn.prepare_cached(concat!(
            "UPDATE event_deliveries SET gave_up_at = ",
            now_ms!(),
            ", locked_until = NULL, last_error = ?3 \
             WHERE shop_id = ?1 AND endpoint_id = ?2 \
               AND delivered_at IS NULL AND gave_up_at IS NULL"
        ))?
        .execute(params![shop_id.as_str(), id, DELETED])?;
    }
    Ok(deleted)
}

/// The id of the shop's operator endpoint, if it has one.
pub(super) fn operator_endpoint(conn: &Connection, shop_id: &ShopId) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached(
            "SELECT id FROM webhook_endpoints \
             WHERE shop_id = ?1 AND origin = 'operator' AND deleted_at IS NULL",
        )?
        .query_row(params![shop_id.as_str()], |row| row.get(0))
        .optional()?)
}

/// Makes the operator's endpoint of a shop, with deliveries of the shop's
/// events that went nowhere (written while it had no endpoint).
pub(super) fn add_operator_endpoint(conn: &Connection, endpoint: &NewEndpoint) -> Result<()> {
    if !room(conn, &endpoint.shop_id)? {
        return Err(super::Fail(StoreError::other(format!(
            "shop {} has {MAX_ENDPOINTS} webhook endpoints; one must be deleted first",
            endpoint.shop_id
        ))));
    }
    insert(conn, endpoint)?;
    // Events delivered nowhere: none delivered, none open, none given up by
    // the relay (one given up because its endpoint was deleted does not
    // count).
    conn.prepare_cached(concat!(
        "INSERT INTO event_deliveries (shop_id, event_seq, endpoint_id, payment_id, due_since, \
             next_attempt_at) \
         SELECT e.shop_id, e.seq, ?2, e.payment_id, ",
        now_ms!(),
        ", ",
        now_ms!(),
        " FROM events e WHERE e.shop_id = ?1 \
           AND NOT EXISTS (SELECT 1 FROM event_deliveries d \
               WHERE d.shop_id = e.shop_id AND d.event_seq = e.seq \
                 AND (d.gave_up_at IS NULL OR d.last_error IS NOT ?3))"
    ))?
    .execute(params![
        endpoint.shop_id.as_str(),
        endpoint.id.as_str(),
        DELETED
    ])?;
    Ok(())
}

#[async_trait]
impl WebhookEndpoints for SqliteStore {
    #[tracing::instrument(level = "debug", name = "store.add_endpoint", skip_all, fields(db.system = "sqlite"))]
    async fn add_endpoint(
        &self,
        endpoint: &NewEndpoint,
    ) -> std::result::Result<std::result::Result<StoredEndpoint, EndpointRefusal>, StoreError> {
        let endpoint = endpoint.clone();
        self.write(move |conn| {
            if !shop_exists(conn, &endpoint.shop_id)? {
                let refusal = EndpointRefusal::NoShop(endpoint.shop_id.to_string());
                return Ok(Write::Rollback(Err(refusal)));
            }
            if let Some(request) = &endpoint.request
                && let Some(earlier) = earlier_create(conn, &endpoint.shop_id, request)?
            {
                return Ok(Write::Rollback(earlier));
            }
            if !room(conn, &endpoint.shop_id)? {
                return Ok(Write::Rollback(Err(EndpointRefusal::TooMany)));
            }
            let made = insert(conn, &endpoint)?;
            Ok(Write::Commit(Ok(StoredEndpoint {
                endpoint: made,
                replayed: false,
            })))
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "store.endpoints", skip_all, fields(db.system = "sqlite"))]
    async fn endpoints(&self, shop_id: &ShopId) -> std::result::Result<Vec<Endpoint>, StoreError> {
        let shop_id = shop_id.clone();
        self.read(move |conn| {
            all::<EndpointRow, Endpoint>(
                conn,
                concat!(
                    "SELECT ",
                    endpoint_columns!(),
                    " FROM webhook_endpoints WHERE shop_id = ?1 AND deleted_at IS NULL \
                     ORDER BY created_at, id"
                ),
                params![shop_id.as_str()],
            )
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "store.endpoint", skip_all, fields(db.system = "sqlite"))]
    async fn endpoint(
        &self,
        shop_id: &ShopId,
        id: &EndpointId,
    ) -> std::result::Result<Option<Endpoint>, StoreError> {
        let (shop_id, id) = (shop_id.clone(), id.clone());
        self.read(move |conn| live(conn, &shop_id, id.as_str()))
            .await
    }

    #[tracing::instrument(level = "debug", name = "store.update_endpoint", skip_all, fields(db.system = "sqlite"))]
    async fn update_endpoint(
        &self,
        shop_id: &ShopId,
        id: &EndpointId,
        update: &EndpointUpdate,
    ) -> std::result::Result<Option<Endpoint>, StoreError> {
        let (shop_id, id, update) = (shop_id.clone(), id.clone(), update.clone());
        self.write(move |conn| {
            let Some(before) = live(conn, &shop_id, id.as_str())? else {
                return Ok(Write::Rollback(None));
            };
            let after = one::<EndpointRow, Endpoint>(
                conn,
                concat!(
                    "UPDATE webhook_endpoints SET \
                         enabled_events = coalesce(?3, enabled_events), \
                         enabled = coalesce(?4, enabled), \
                         description = CASE WHEN ?5 THEN ?6 ELSE description END \
                     WHERE shop_id = ?1 AND id = ?2 RETURNING ",
                    endpoint_columns!()
                ),
                params![
                    shop_id.as_str(),
                    id.as_str(),
                    update.filter.as_ref().map(|f| f.as_stored()),
                    update.enabled,
                    update.description.is_some(),
                    update.description.clone().flatten(),
                ],
            )?;
            let Some(after) = after else {
                return Ok(Write::Rollback(None));
            };
            switch_deliveries(conn, &shop_id, id.as_str(), before.enabled, after.enabled)?;
            Ok(Write::Commit(Some(after)))
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "store.delete_endpoint", skip_all, fields(db.system = "sqlite"))]
    async fn delete_endpoint(
        &self,
        shop_id: &ShopId,
        id: &EndpointId,
    ) -> std::result::Result<Option<Endpoint>, StoreError> {
        let (shop_id, id) = (shop_id.clone(), id.clone());
        self.write(move |conn| delete(conn, &shop_id, id.as_str()).map(Write::Commit))
            .await
    }

    #[tracing::instrument(level = "debug", name = "store.roll_endpoint_secret", skip_all, fields(db.system = "sqlite"))]
    async fn roll_endpoint_secret(
        &self,
        shop_id: &ShopId,
        id: &EndpointId,
        secret: &WebhookSecret,
        overlap: Duration,
        request: &MakingRequest,
    ) -> std::result::Result<std::result::Result<StoredEndpoint, EndpointRefusal>, StoreError> {
        let (shop_id, id, secret, request) =
            (shop_id.clone(), id.clone(), secret.clone(), request.clone());
        self.write(move |conn| {
            let gone = || Write::Rollback(Err(EndpointRefusal::NoEndpoint(id.to_string())));
            let Some(endpoint) = live(conn, &shop_id, id.as_str())? else {
                return Ok(gone());
            };
            match request_row(conn, &shop_id, id.as_str())?.secret_made_by(&request) {
                Some(true) => {
                    return Ok(Write::Rollback(Ok(StoredEndpoint {
                        endpoint,
                        replayed: true,
                    })));
                }
                Some(false) => return Ok(Write::Rollback(Err(EndpointRefusal::RequestReused))),
                None => {}
            }
            if roll_secret(
                conn,
                &shop_id,
                id.as_str(),
                &secret,
                overlap,
                Some(&request),
            )?
            .is_none()
            {
                return Ok(gone());
            }
            Ok(match live(conn, &shop_id, id.as_str())? {
                Some(endpoint) => Write::Commit(Ok(StoredEndpoint {
                    endpoint,
                    replayed: false,
                })),
                None => gone(),
            })
        })
        .await
    }
}

/// Parks an endpoint's open deliveries when it was disabled; makes them due
/// now (the give-up clock restarted) when it was enabled again.
fn switch_deliveries(
    conn: &Connection,
    shop_id: &ShopId,
    id: &str,
    was_enabled: bool,
    enabled: bool,
) -> Result<()> {
    match (was_enabled, enabled) {
        (true, false) => {
            conn.prepare_cached(
                "UPDATE event_deliveries SET next_attempt_at = ?3 \
                 WHERE shop_id = ?1 AND endpoint_id = ?2 \
                   AND delivered_at IS NULL AND gave_up_at IS NULL",
            )?
            .execute(params![shop_id.as_str(), id, PARKED_UNTIL_MS])?;
        }
        (false, true) => {
            conn.prepare_cached(concat!(
                "UPDATE event_deliveries SET next_attempt_at = ",
                now_ms!(),
                ", due_since = ",
                now_ms!(),
                " WHERE shop_id = ?1 AND endpoint_id = ?2 \
                   AND delivered_at IS NULL AND gave_up_at IS NULL"
            ))?
            .execute(params![shop_id.as_str(), id])?;
        }
        _ => {}
    }
    Ok(())
}
