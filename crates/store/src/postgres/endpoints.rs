//! Webhook endpoints: a shop's own (made through the API, idempotent by the
//! idempotency key kept on the row) and the operator's (`set-webhook`).
//!
//! Writes that count or look a shop's endpoints up by idempotency key take
//! the shop's row lock first, so two creates count in turn and two repeats
//! of one request find each other.

use std::time::Duration;

use async_trait::async_trait;
use chargeonce_core::api_key::MakingRequest;
use chargeonce_core::endpoint::{
    DELETED, Endpoint, EndpointId, EndpointRefusal, EndpointUpdate, MAX_ENDPOINTS, NewEndpoint,
    Origin, StoredEndpoint,
};
use chargeonce_core::events::PARKED_UNTIL_MS;
use chargeonce_core::store::WebhookEndpoints;
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{ShopId, StoreError};
use sqlx::{Postgres, Transaction};

use super::{PgStore, store_error};
use crate::codec::millis;
use crate::rows::{EndpointRequestRow, EndpointRow};

/// The columns of an endpoint row ([`EndpointRow`]), times as unix ms.
macro_rules! endpoint_columns {
    () => {
        "shop_id, id, origin, url, enabled_events, description, enabled, \
         floor(extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms, \
         floor(extract(epoch FROM previous_secret_until) * 1000)::bigint \
             AS previous_secret_until_ms"
    };
}

/// Locks the shop's row (see the module); `false` when there is no shop.
async fn lock_shop(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
) -> Result<bool, StoreError> {
    let locked: Option<i32> =
        sqlx::query_scalar("SELECT 1 FROM shops WHERE id = $1 FOR NO KEY UPDATE")
            .bind(shop_id.as_str())
            .fetch_optional(&mut **tx)
            .await
            .map_err(store_error)?;
    Ok(locked.is_some())
}

/// One live endpoint of a shop, in `tx`.
async fn live(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
    id: &str,
) -> Result<Option<Endpoint>, StoreError> {
    let row: Option<EndpointRow> = sqlx::query_as(concat!(
        "SELECT ",
        endpoint_columns!(),
        " FROM webhook_endpoints WHERE shop_id = $1 AND id = $2 AND deleted_at IS NULL"
    ))
    .bind(shop_id.as_str())
    .bind(id)
    .fetch_optional(&mut **tx)
    .await
    .map_err(store_error)?;
    row.map(Endpoint::try_from).transpose()
}

/// The endpoint an earlier create with `request`'s idempotency key made:
/// replayed when it asked the same, refused when it asked something else.
async fn earlier_create(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
    request: &MakingRequest,
) -> Result<Option<Result<StoredEndpoint, EndpointRefusal>>, StoreError> {
    let found: Option<String> = sqlx::query_scalar(
        "SELECT id FROM webhook_endpoints WHERE shop_id = $1 AND idempotency_key = $2",
    )
    .bind(shop_id.as_str())
    .bind(&request.idempotency_key)
    .fetch_optional(&mut **tx)
    .await
    .map_err(store_error)?;
    let Some(id) = found else {
        return Ok(None);
    };
    let request_row = request_row(tx, shop_id, &id).await?;
    if request_row.made_by(request) != Some(true) {
        return Ok(Some(Err(EndpointRefusal::RequestReused)));
    }
    // A deleted endpoint is answered as it is (a repeat of its create
    // does not make another).
    let row: EndpointRow = sqlx::query_as(concat!(
        "SELECT ",
        endpoint_columns!(),
        " FROM webhook_endpoints WHERE shop_id = $1 AND id = $2"
    ))
    .bind(shop_id.as_str())
    .bind(&id)
    .fetch_one(&mut **tx)
    .await
    .map_err(store_error)?;
    Ok(Some(Ok(StoredEndpoint {
        endpoint: Endpoint::try_from(row)?,
        replayed: true,
    })))
}

/// What a repeat of a create or roll of endpoint `id` is judged by.
async fn request_row(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
    id: &str,
) -> Result<EndpointRequestRow, StoreError> {
    sqlx::query_as(
        "SELECT idempotency_key, request_sha256, secret_key, secret_request_sha256 \
         FROM webhook_endpoints WHERE shop_id = $1 AND id = $2",
    )
    .bind(shop_id.as_str())
    .bind(id)
    .fetch_one(&mut **tx)
    .await
    .map_err(store_error)
}

/// Inserts an endpoint, in `tx`.
async fn insert(
    tx: &mut Transaction<'static, Postgres>,
    endpoint: &NewEndpoint,
) -> Result<Endpoint, StoreError> {
    let request = endpoint.request.as_ref();
    let row: EndpointRow = sqlx::query_as(concat!(
        "INSERT INTO webhook_endpoints (shop_id, id, origin, url, enabled_events, description, \
             secret, idempotency_key, request_sha256, secret_key, secret_request_sha256) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $8, $9) RETURNING ",
        endpoint_columns!()
    ))
    .bind(endpoint.shop_id.as_str())
    .bind(endpoint.id.as_str())
    .bind(endpoint.origin.as_str())
    .bind(&endpoint.url)
    .bind(endpoint.filter.as_stored())
    .bind(&endpoint.description)
    .bind(endpoint.secret.expose())
    .bind(request.map(|r| r.idempotency_key.as_str()))
    .bind(request.map(|r| r.fingerprint.as_slice()))
    .fetch_one(&mut **tx)
    .await
    .map_err(store_error)?;
    Endpoint::try_from(row)
}

/// Counts the shop's live endpoints, after its row lock (a statement of its
/// own, so its snapshot sees a create that held the lock before).
async fn room(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
) -> Result<bool, StoreError> {
    let live: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM webhook_endpoints WHERE shop_id = $1 AND deleted_at IS NULL",
    )
    .bind(shop_id.as_str())
    .fetch_one(&mut **tx)
    .await
    .map_err(store_error)?;
    Ok(usize::try_from(live).unwrap_or(usize::MAX) < MAX_ENDPOINTS)
}

/// Rolls the secret of endpoint `id` in `tx`: the replaced one signs for
/// `overlap` more (by the store's clock). The end of the overlap; `None`
/// when the endpoint is gone or already signs with `secret`.
pub(super) async fn roll_secret(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
    id: &str,
    secret: &WebhookSecret,
    overlap: Duration,
    request: Option<&MakingRequest>,
) -> Result<Option<time::OffsetDateTime>, StoreError> {
    sqlx::query_scalar(
        "UPDATE webhook_endpoints SET previous_secret = secret, \
             previous_secret_until = now() + $4::float8 * interval '1 millisecond', \
             secret = $3, secret_key = $5, secret_request_sha256 = $6 \
         WHERE shop_id = $1 AND id = $2 AND deleted_at IS NULL AND secret <> $3 \
         RETURNING previous_secret_until",
    )
    .bind(shop_id.as_str())
    .bind(id)
    .bind(secret.expose())
    .bind(millis(overlap) as f64)
    .bind(request.map(|r| r.idempotency_key.as_str()))
    .bind(request.map(|r| r.fingerprint.as_slice()))
    .fetch_optional(&mut **tx)
    .await
    .map_err(store_error)
}

#[async_trait]
impl WebhookEndpoints for PgStore {
    #[tracing::instrument(level = "debug", name = "store.add_endpoint", skip_all, fields(db.system = "postgresql"))]
    async fn add_endpoint(
        &self,
        endpoint: &NewEndpoint,
    ) -> Result<Result<StoredEndpoint, EndpointRefusal>, StoreError> {
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        if !lock_shop(&mut tx, &endpoint.shop_id).await? {
            return Ok(Err(EndpointRefusal::NoShop(endpoint.shop_id.to_string())));
        }
        if let Some(request) = &endpoint.request
            && let Some(earlier) = earlier_create(&mut tx, &endpoint.shop_id, request).await?
        {
            return Ok(earlier);
        }
        if !room(&mut tx, &endpoint.shop_id).await? {
            return Ok(Err(EndpointRefusal::TooMany));
        }
        let made = insert(&mut tx, endpoint).await?;
        tx.commit().await.map_err(store_error)?;
        // This instance's next finishes of the shop write its deliveries
        // without first trying the form for a shop without endpoints.
        self.endpoint_hints.mark(&endpoint.shop_id);
        Ok(Ok(StoredEndpoint {
            endpoint: made,
            replayed: false,
        }))
    }

    #[tracing::instrument(level = "debug", name = "store.endpoints", skip_all, fields(db.system = "postgresql"))]
    async fn endpoints(&self, shop_id: &ShopId) -> Result<Vec<Endpoint>, StoreError> {
        super::all(
            self,
            sqlx::query_as::<_, EndpointRow>(concat!(
                "SELECT ",
                endpoint_columns!(),
                " FROM webhook_endpoints WHERE shop_id = $1 AND deleted_at IS NULL \
                 ORDER BY created_at, id"
            ))
            .bind(shop_id.as_str()),
        )
        .await
    }

    #[tracing::instrument(level = "debug", name = "store.endpoint", skip_all, fields(db.system = "postgresql"))]
    async fn endpoint(
        &self,
        shop_id: &ShopId,
        id: &EndpointId,
    ) -> Result<Option<Endpoint>, StoreError> {
        super::one(
            self,
            sqlx::query_as::<_, EndpointRow>(concat!(
                "SELECT ",
                endpoint_columns!(),
                " FROM webhook_endpoints WHERE shop_id = $1 AND id = $2 AND deleted_at IS NULL"
            ))
            .bind(shop_id.as_str())
            .bind(id.as_str()),
        )
        .await
    }

    #[tracing::instrument(level = "debug", name = "store.update_endpoint", skip_all, fields(db.system = "postgresql"))]
    async fn update_endpoint(
        &self,
        shop_id: &ShopId,
        id: &EndpointId,
        update: &EndpointUpdate,
    ) -> Result<Option<Endpoint>, StoreError> {
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        // The row's lock orders this against a concurrent update: the
        // switch of its deliveries below follows the state it set.
        let before: Option<bool> = sqlx::query_scalar(
            "SELECT enabled FROM webhook_endpoints \
             WHERE shop_id = $1 AND id = $2 AND deleted_at IS NULL FOR NO KEY UPDATE",
        )
        .bind(shop_id.as_str())
        .bind(id.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(store_error)?;
        let Some(was_enabled) = before else {
            return Ok(None);
        };
        let row: EndpointRow = sqlx::query_as(concat!(
            "UPDATE webhook_endpoints SET \
                 enabled_events = coalesce($3, enabled_events), \
                 enabled = coalesce($4, enabled), \
                 description = CASE WHEN $5 THEN $6 ELSE description END \
             WHERE shop_id = $1 AND id = $2 RETURNING ",
            endpoint_columns!()
        ))
        .bind(shop_id.as_str())
        .bind(id.as_str())
        .bind(update.filter.as_ref().map(|f| f.as_stored()))
        .bind(update.enabled)
        .bind(update.description.is_some())
        .bind(update.description.clone().flatten())
        .fetch_one(&mut *tx)
        .await
        .map_err(store_error)?;
        match (was_enabled, row.enabled) {
            // Disabled: its open deliveries wait (parked).
            (true, false) => {
                sqlx::query(
                    "UPDATE event_deliveries SET next_attempt_at = to_timestamp($3::float8 / 1000) \
                     WHERE shop_id = $1 AND endpoint_id = $2 \
                       AND delivered_at IS NULL AND gave_up_at IS NULL",
                )
                .bind(shop_id.as_str())
                .bind(id.as_str())
                .bind(PARKED_UNTIL_MS as f64)
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            }
            // Enabled again: due now, the give-up clock restarted.
            (false, true) => {
                sqlx::query(
                    "UPDATE event_deliveries SET next_attempt_at = now(), due_since = now() \
                     WHERE shop_id = $1 AND endpoint_id = $2 \
                       AND delivered_at IS NULL AND gave_up_at IS NULL",
                )
                .bind(shop_id.as_str())
                .bind(id.as_str())
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            }
            _ => {}
        }
        tx.commit().await.map_err(store_error)?;
        if row.enabled {
            self.endpoint_hints.mark(shop_id);
        }
        Endpoint::try_from(row).map(Some)
    }

    #[tracing::instrument(level = "debug", name = "store.delete_endpoint", skip_all, fields(db.system = "postgresql"))]
    async fn delete_endpoint(
        &self,
        shop_id: &ShopId,
        id: &EndpointId,
    ) -> Result<Option<Endpoint>, StoreError> {
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        let deleted = delete(&mut tx, shop_id, id.as_str()).await?;
        tx.commit().await.map_err(store_error)?;
        Ok(deleted)
    }

    #[tracing::instrument(level = "debug", name = "store.roll_endpoint_secret", skip_all, fields(db.system = "postgresql"))]
    async fn roll_endpoint_secret(
        &self,
        shop_id: &ShopId,
        id: &EndpointId,
        secret: &WebhookSecret,
        overlap: Duration,
        request: &MakingRequest,
    ) -> Result<Result<StoredEndpoint, EndpointRefusal>, StoreError> {
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        if !lock_shop(&mut tx, shop_id).await? {
            return Ok(Err(EndpointRefusal::NoShop(shop_id.to_string())));
        }
        let Some(endpoint) = live(&mut tx, shop_id, id.as_str()).await? else {
            return Ok(Err(EndpointRefusal::NoEndpoint(id.to_string())));
        };
        match request_row(&mut tx, shop_id, id.as_str())
            .await?
            .secret_made_by(request)
        {
            Some(true) => {
                return Ok(Ok(StoredEndpoint {
                    endpoint,
                    replayed: true,
                }));
            }
            Some(false) => return Ok(Err(EndpointRefusal::RequestReused)),
            None => {}
        }
        if roll_secret(
            &mut tx,
            shop_id,
            id.as_str(),
            secret,
            overlap,
            Some(request),
        )
        .await?
        .is_none()
        {
            return Ok(Err(EndpointRefusal::NoEndpoint(id.to_string())));
        }
        let rolled = live(&mut tx, shop_id, id.as_str()).await?;
        tx.commit().await.map_err(store_error)?;
        Ok(match rolled {
            Some(endpoint) => Ok(StoredEndpoint {
                endpoint,
                replayed: false,
            }),
            None => Err(EndpointRefusal::NoEndpoint(id.to_string())),
        })
    }
}

/// Deletes endpoint `id` in `tx`: its secrets wiped, its open deliveries
/// given up. `None` when unknown or deleted already.
pub(super) async fn delete(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
    id: &str,
) -> Result<Option<Endpoint>, StoreError> {
    let row: Option<EndpointRow> = sqlx::query_as(concat!(
        "UPDATE webhook_endpoints SET deleted_at = now(), enabled = false, secret = NULL, \
             previous_secret = NULL, previous_secret_until = NULL \
         WHERE shop_id = $1 AND id = $2 AND deleted_at IS NULL RETURNING ",
        endpoint_columns!()
    ))
    .bind(shop_id.as_str())
    .bind(id)
    .fetch_optional(&mut **tx)
    .await
    .map_err(store_error)?;
    if row.is_some() {
        sqlx::query(
            "UPDATE event_deliveries SET gave_up_at = now(), locked_until = NULL, \
                 last_error = $3 \
             WHERE shop_id = $1 AND endpoint_id = $2 \
               AND delivered_at IS NULL AND gave_up_at IS NULL",
        )
        .bind(shop_id.as_str())
        .bind(id)
        .bind(DELETED)
        .execute(&mut **tx)
        .await
        .map_err(store_error)?;
    }
    row.map(Endpoint::try_from).transpose()
}

/// The id of the shop's operator endpoint, if it has one, in `tx`.
pub(super) async fn operator_endpoint(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
) -> Result<Option<String>, StoreError> {
    sqlx::query_scalar(
        "SELECT id FROM webhook_endpoints \
         WHERE shop_id = $1 AND origin = 'operator' AND deleted_at IS NULL",
    )
    .bind(shop_id.as_str())
    .fetch_optional(&mut **tx)
    .await
    .map_err(store_error)
}

/// Makes the operator's endpoint `id` of a shop, in `tx` (within the cap),
/// with deliveries of the shop's events delivered nowhere (written while it
/// had no endpoint, or whose endpoint was deleted before delivering them):
/// what a shop's URL set again always did.
pub(super) async fn add_operator_endpoint(
    tx: &mut Transaction<'static, Postgres>,
    endpoint: &NewEndpoint,
) -> Result<(), StoreError> {
    debug_assert_eq!(endpoint.origin, Origin::Operator);
    if !room(tx, &endpoint.shop_id).await? {
        return Err(StoreError::other(format!(
            "shop {} has {MAX_ENDPOINTS} webhook endpoints; one must be deleted first",
            endpoint.shop_id
        )));
    }
    insert(tx, endpoint).await?;
    // Events delivered nowhere: none delivered, none open, none given up
    // by the relay (a delivery given up because its endpoint was deleted
    // does not count).
    sqlx::query(
        "INSERT INTO event_deliveries (shop_id, event_seq, endpoint_id, payment_id) \
         SELECT e.shop_id, e.seq, $2, e.payment_id FROM events e \
         WHERE e.shop_id = $1 \
           AND NOT EXISTS (SELECT 1 FROM event_deliveries d \
               WHERE d.shop_id = e.shop_id AND d.event_seq = e.seq \
                 AND (d.gave_up_at IS NULL OR d.last_error IS DISTINCT FROM $3))",
    )
    .bind(endpoint.shop_id.as_str())
    .bind(endpoint.id.as_str())
    .bind(DELETED)
    .execute(&mut **tx)
    .await
    .map_err(store_error)?;
    Ok(())
}
