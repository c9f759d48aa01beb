//! # chargeonce-example-merchant
//!
//! The reference for consuming chargeonce merchant events. Delivery is **at
//! least once**: the same event can arrive twice (a retry after a lost
//! answer, a relay that died after POSTing, a resend by hand), even twice at
//! the same moment. So a receiver:
//!
//! 1. **verifies the signature** (`Chargeonce-Signature: t=..,v1=..`, HMAC
//!    over `"{t}.{raw body}"` with the secret `chargeonce shops set-webhook`
//!    printed) on the raw bytes, before parsing anything, and in bounded
//!    work: the body is capped ([`MAX_EVENT_BYTES`], larger is 413 before it
//!    is read), and `chargeonce_core::webhook::verify` parses the header with
//!    caps and checks the timestamp before its one MAC;
//! 2. **deduplicates by event id**: `INSERT` into a table of seen ids with a
//!    unique key, in the *same transaction* as the effect, so an event whose
//!    handling failed is not marked seen and is handled on its retry;
//! 3. makes the effect itself a **conditional state transition**:
//!    `UPDATE orders SET status = 'paid' WHERE id = ? AND status =
//!    'awaiting_payment'`. Even two different events about one order (or a
//!    seen-table that was cleaned up) cannot fulfil it twice: only the update
//!    that changed the row fulfils;
//! 4. answers 2xx only after committing, and quickly: anything else is retried.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use chargeonce_core::webhook::{self, WebhookSecret};
use serde_json::{Value, json};
use sqlx::SqlitePool;
use sqlx::sqlite::SqliteConnectOptions;

/// The largest event body the receiver reads: 64 KiB (an event is well under
/// 1 KiB). A larger one is answered 413 before it is read.
pub const MAX_EVENT_BYTES: usize = 64 * 1024;

/// The merchant's state: its database and the webhook signing secret.
#[derive(Clone)]
pub struct Merchant {
    db: SqlitePool,
    secret: Arc<WebhookSecret>,
}

/// Why an event was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// Missing, malformed, wrong or stale signature: not from chargeonce.
    #[error("bad signature: {0}")]
    Signature(#[from] webhook::SignatureError),
    /// Signed, but not an event we can read.
    #[error("malformed event: {0}")]
    Malformed(String),
    /// Our database failed: answer 5xx so chargeonce retries later.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

impl axum::response::IntoResponse for HookError {
    fn into_response(self) -> axum::response::Response {
        let status = match &self {
            Self::Signature(_) => StatusCode::UNAUTHORIZED,
            Self::Malformed(_) => StatusCode::BAD_REQUEST,
            Self::Database(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        (status, self.to_string()).into_response()
    }
}

/// What handling one delivery did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handled {
    /// This event id was seen before: nothing done.
    Duplicate,
    /// The order moved to `paid` and was fulfilled (once, ever).
    Fulfilled,
    /// New event, but nothing to do (the order was not awaiting payment, or
    /// the type is not one this merchant acts on).
    Ignored,
}

impl Merchant {
    /// Opens (creating) the SQLite database and its tables.
    pub async fn open(database_url: &str, secret: WebhookSecret) -> Result<Self, sqlx::Error> {
        let options: SqliteConnectOptions = database_url.parse()?;
        let db = SqlitePool::connect_with(
            options
                .create_if_missing(true)
                .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                .busy_timeout(Duration::from_secs(5)),
        )
        .await?;
        sqlx::raw_sql(
            "CREATE TABLE IF NOT EXISTS orders (
                 id     TEXT PRIMARY KEY,
                 status TEXT NOT NULL CHECK (status IN ('awaiting_payment', 'paid'))
             );
             -- Every event id handled: the unique key is the deduplication.
             CREATE TABLE IF NOT EXISTS seen_events (
                 event_id    TEXT PRIMARY KEY,
                 received_at INTEGER NOT NULL
             );
             -- The effect we must not repeat (shipping, emailing, ...).
             CREATE TABLE IF NOT EXISTS fulfilments (
                 order_id TEXT NOT NULL REFERENCES orders (id),
                 event_id TEXT NOT NULL
             );",
        )
        .execute(&db)
        .await?;
        Ok(Self {
            db,
            secret: Arc::new(secret),
        })
    }

    /// Creates an order awaiting payment (its id is the payment's `reference`).
    pub async fn create_order(&self, id: &str) -> Result<(), sqlx::Error> {
        sqlx::query(
            "INSERT INTO orders (id, status) VALUES (?1, 'awaiting_payment') \
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(id)
        .execute(&self.db)
        .await?;
        Ok(())
    }

    /// An order's status and how many times it was fulfilled.
    pub async fn order(&self, id: &str) -> Result<Option<(String, i64)>, sqlx::Error> {
        let row: Option<(String, i64)> = sqlx::query_as(
            "SELECT status, (SELECT count(*) FROM fulfilments WHERE order_id = ?1) \
             FROM orders WHERE id = ?1",
        )
        .bind(id)
        .fetch_optional(&self.db)
        .await?;
        Ok(row)
    }

    /// Verifies, deduplicates and applies one delivery.
    pub async fn handle(&self, headers: &HeaderMap, body: &[u8]) -> Result<Handled, HookError> {
        // 1. The signature, over the raw bytes, before trusting anything.
        let signature = headers
            .get(webhook::SIGNATURE_HEADER)
            .and_then(|v| v.to_str().ok())
            .ok_or(webhook::SignatureError::Malformed)?;
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        webhook::verify(&self.secret, signature, body, now, webhook::TOLERANCE)?;
        let event: Value =
            serde_json::from_slice(body).map_err(|e| HookError::Malformed(e.to_string()))?;
        let event_id = event["id"]
            .as_str()
            .ok_or_else(|| HookError::Malformed("no id".into()))?;

        // 2. Dedup and effect in one transaction (IMMEDIATE: SQLite takes the
        //    write lock now, so concurrent deliveries queue instead of failing).
        let mut tx = self.db.begin_with("BEGIN IMMEDIATE").await?;
        let first_time = sqlx::query(
            "INSERT INTO seen_events (event_id, received_at) VALUES (?1, unixepoch()) \
             ON CONFLICT (event_id) DO NOTHING",
        )
        .bind(event_id)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if !first_time {
            tx.rollback().await?;
            return Ok(Handled::Duplicate);
        }
        let mut handled = Handled::Ignored;
        if event["type"] == "payment.succeeded" {
            let order_id = event["data"]["payment"]["reference"]
                .as_str()
                .ok_or_else(|| HookError::Malformed("no data.payment.reference".into()))?;
            // 3. The conditional transition: only the update that changes the
            //    row fulfils the order.
            let paid = sqlx::query(
                "UPDATE orders SET status = 'paid' WHERE id = ?1 AND status = 'awaiting_payment'",
            )
            .bind(order_id)
            .execute(&mut *tx)
            .await?;
            if paid.rows_affected() == 1 {
                sqlx::query("INSERT INTO fulfilments (order_id, event_id) VALUES (?1, ?2)")
                    .bind(order_id)
                    .bind(event_id)
                    .execute(&mut *tx)
                    .await?;
                handled = Handled::Fulfilled;
            }
        }
        // 4. Commit, then acknowledge.
        tx.commit().await?;
        Ok(handled)
    }
}

async fn receive(
    State(merchant): State<Merchant>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, HookError> {
    let handled = merchant.handle(&headers, &body).await?;
    tracing::info!(?handled, "chargeonce event");
    Ok(StatusCode::NO_CONTENT)
}

async fn create_order(
    State(merchant): State<Merchant>,
    Path(id): Path<String>,
) -> Result<StatusCode, HookError> {
    merchant.create_order(&id).await?;
    Ok(StatusCode::CREATED)
}

async fn show_order(
    State(merchant): State<Merchant>,
    Path(id): Path<String>,
) -> Result<axum::response::Response, HookError> {
    use axum::response::IntoResponse;
    Ok(match merchant.order(&id).await? {
        Some((status, fulfilments)) => {
            axum::Json(json!({"id": id, "status": status, "fulfilments": fulfilments}))
                .into_response()
        }
        None => StatusCode::NOT_FOUND.into_response(),
    })
}

/// `POST /webhooks/chargeonce` (the URL to give `shops set-webhook`),
/// `POST /orders/{id}` (create an order awaiting payment), `GET /orders/{id}`.
pub fn router(merchant: Merchant) -> Router {
    Router::new()
        .route(
            "/webhooks/chargeonce",
            post(receive).layer(DefaultBodyLimit::max(MAX_EVENT_BYTES)),
        )
        .route("/orders/{id}", post(create_order).get(show_order))
        .with_state(merchant)
}
