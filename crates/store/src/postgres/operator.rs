//! What the operator console reads across shops, and the operator's
//! credential.

use async_trait::async_trait;
use chargeonce_core::api_key::Mode;
use chargeonce_core::events::{Event, EventId};
use chargeonce_core::store::{Operator, Payments, ShopSummary, StoreCounts, StorePressure};
use chargeonce_core::{
    Cursor, Page, PageRequest, Payment, PaymentFilter, PaymentId, Reference, SecretHash, ShopId,
    StoreError,
};
use sqlx::Row;
use time::OffsetDateTime;

use super::outbox::{event_columns, with_deliveries};
use super::pending::pending_set;
use super::{PgStore, store_error};
use crate::columns::{payment_columns, shown_status};
use crate::finding_rows::{ShopSummaryRow, shop_summary_columns};
use crate::rows::{EventRow, PaymentRow};

// The statements of a cross-shop payment list are each a walk of
// `payments_created_at` from its start, stopped by the limit; only the
// payments of one instant are sorted by id (an incremental sort), never the
// table. The index holds `created_at` alone, so the cursor's time is also
// written as a bound of its own for the index to start from (PostgreSQL 15
// derives it from the row comparison as well; SQLite's statements say the
// same).

/// The newest page of every shop's payments that match the filter: `$1`
/// status, `$2` reference, `$3` and `$4` the created range (each ignored
/// when null), `$5` the limit, `$6` whether test mode's (else live mode's).
const ANY_SHOP_PAYMENTS_NEWEST: &str = concat!(
    "SELECT ",
    payment_columns!(),
    " FROM payments WHERE ($1::text IS NULL OR ",
    shown_status!(),
    " = $1) \
       AND ($2::text IS NULL OR reference = $2) \
       AND ($3::timestamptz IS NULL OR created_at >= $3) \
       AND ($4::timestamptz IS NULL OR created_at < $4) \
       AND (shop_id LIKE '%.test') = $6::bool \
     ORDER BY created_at DESC, id DESC LIMIT $5"
);

/// The page after a cursor of every shop's payments: `$1` to `$5` as in
/// [`ANY_SHOP_PAYMENTS_NEWEST`], `$6`, `$7` the cursor's `created_at` and id,
/// `$8` whether test mode's.
const ANY_SHOP_PAYMENTS_AFTER: &str = concat!(
    "SELECT ",
    payment_columns!(),
    " FROM payments WHERE ($1::text IS NULL OR ",
    shown_status!(),
    " = $1) \
       AND ($2::text IS NULL OR reference = $2) \
       AND ($3::timestamptz IS NULL OR created_at >= $3) \
       AND ($4::timestamptz IS NULL OR created_at < $4) \
       AND created_at <= $6 AND (created_at, id) < ($6, $7) \
       AND (shop_id LIKE '%.test') = $8::bool \
     ORDER BY created_at DESC, id DESC LIMIT $5"
);

/// The page before a cursor of every shop's payments, read oldest first:
/// `$1` to `$8` as in [`ANY_SHOP_PAYMENTS_AFTER`].
const ANY_SHOP_PAYMENTS_BEFORE: &str = concat!(
    "SELECT ",
    payment_columns!(),
    " FROM payments WHERE ($1::text IS NULL OR ",
    shown_status!(),
    " = $1) \
       AND ($2::text IS NULL OR reference = $2) \
       AND ($3::timestamptz IS NULL OR created_at >= $3) \
       AND ($4::timestamptz IS NULL OR created_at < $4) \
       AND created_at >= $6 AND (created_at, id) > ($6, $7) \
       AND (shop_id LIKE '%.test') = $8::bool \
     ORDER BY created_at, id LIMIT $5"
);

/// Where a cross-shop list's cursor lies: the `(created_at, id)` of the
/// payment `id`, of any shop; [`StoreError::UnknownCursor`] when there is
/// none.
async fn cursor(store: &PgStore, id: &PaymentId) -> Result<(OffsetDateTime, String), StoreError> {
    sqlx::query_as::<_, (OffsetDateTime, String)>(
        "SELECT created_at, id FROM payments WHERE id = $1",
    )
    .bind(id.as_str())
    .fetch_optional(&mut *store.conn().await?)
    .await
    .map_err(store_error)?
    .ok_or_else(|| StoreError::UnknownCursor(id.to_string()))
}

#[async_trait]
impl Operator for PgStore {
    /// The operator's stored secret hash, if one was set.
    async fn operator_secret(&self) -> Result<Option<SecretHash>, StoreError> {
        let row = sqlx::query("SELECT secret_sha256 FROM operator_credential WHERE id = 1")
            .fetch_optional(&mut *self.conn().await?)
            .await
            .map_err(store_error)?;
        let Some(row) = row else { return Ok(None) };
        let bytes: Vec<u8> = row.try_get("secret_sha256").map_err(store_error)?;
        SecretHash::from_bytes(&bytes)
            .map(Some)
            .ok_or_else(|| StoreError::corrupt("the operator's secret hash"))
    }

    /// Stores the operator's secret hash unless one exists (the first start,
    /// of however many instances at once: the single row's key decides).
    async fn init_operator_secret(&self, hash: &SecretHash) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO operator_credential (id, secret_sha256) VALUES (1, $1) \
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(hash.as_bytes().as_slice())
        .execute(&mut *self.conn().await?)
        .await
        .map_err(store_error)?;
        Ok(done.rows_affected() == 1)
    }

    /// Replaces (or stores) the operator's secret hash.
    async fn set_operator_secret(&self, hash: &SecretHash) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO operator_credential (id, secret_sha256) VALUES (1, $1) \
             ON CONFLICT (id) DO UPDATE SET secret_sha256 = EXCLUDED.secret_sha256, \
                 created_at = now()",
        )
        .bind(hash.as_bytes().as_slice())
        .execute(&mut *self.conn().await?)
        .await
        .map_err(store_error)?;
        Ok(())
    }

    /// One page of every shop's payments (one shop's: its own list), newest
    /// first by `(created_at, id)`.
    async fn all_payments(
        &self,
        shop_id: Option<&ShopId>,
        mode: Mode,
        filter: &PaymentFilter,
        page: &PageRequest<PaymentId>,
    ) -> Result<Page<Payment>, StoreError> {
        if let Some(shop_id) = shop_id {
            return self
                .list_payments(&shop_id.in_mode(mode), filter, page)
                .await;
        }
        let test_mode = mode == Mode::Test;
        let (sql, at) = match &page.cursor {
            Cursor::Newest => (ANY_SHOP_PAYMENTS_NEWEST, None),
            Cursor::After(id) => (ANY_SHOP_PAYMENTS_AFTER, Some(cursor(self, id).await?)),
            Cursor::Before(id) => (ANY_SHOP_PAYMENTS_BEFORE, Some(cursor(self, id).await?)),
        };
        let mut query = sqlx::query_as::<_, PaymentRow>(sql)
            .bind(filter.status.map(|s| s.as_str()))
            .bind(filter.reference.as_ref().map(Reference::as_str))
            .bind(filter.created_gte)
            .bind(filter.created_lt)
            .bind(i64::from(page.limit.get()) + 1);
        if let Some((created_at, id)) = at {
            query = query.bind(created_at).bind(id);
        }
        let rows: Vec<Payment> = super::all(self, query.bind(test_mode)).await?;
        Ok(Page::from_probe(rows, page))
    }

    /// One payment of any shop.
    async fn any_payment(&self, id: &PaymentId) -> Result<Option<Payment>, StoreError> {
        super::one(
            self,
            sqlx::query_as::<_, PaymentRow>(concat!(
                "SELECT ",
                payment_columns!(),
                " FROM payments WHERE id = $1"
            ))
            .bind(id.as_str()),
        )
        .await
    }

    /// The merchant events of one payment, oldest (first committed) first.
    async fn payment_events(&self, id: &PaymentId) -> Result<Vec<Event>, StoreError> {
        // A range of `events_by_payment`; the deliveries by their key.
        let mut conn = self.conn().await?;
        let rows = sqlx::query_as::<_, EventRow>(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events \
             WHERE payment_id = $1 ORDER BY seq"
        ))
        .bind(id.as_str())
        .fetch_all(&mut *conn)
        .await
        .map_err(store_error)?;
        let events = rows
            .into_iter()
            .map(<(i64, Event)>::try_from)
            .collect::<Result<Vec<_>, _>>()?;
        let Some(shop_id) = events.first().map(|(_, e)| e.shop_id.clone()) else {
            return Ok(Vec::new());
        };
        with_deliveries(&mut *conn, &shop_id, events).await
    }

    /// The shop a merchant event belongs to.
    async fn event_shop(&self, id: &EventId) -> Result<Option<ShopId>, StoreError> {
        let shop: Option<String> = sqlx::query_scalar("SELECT shop_id FROM events WHERE id = $1")
            .bind(id.as_str())
            .fetch_optional(&mut *self.conn().await?)
            .await
            .map_err(store_error)?;
        shop.map(ShopId::new)
            .transpose()
            .map_err(StoreError::corrupt_by)
    }

    /// Every shop (by its own id; its test mode is `{id}.test`), oldest
    /// first, without its secrets.
    async fn shops(&self) -> Result<Vec<ShopSummary>, StoreError> {
        super::all(
            self,
            sqlx::query_as::<_, ShopSummaryRow>(concat!(
                "SELECT ",
                shop_summary_columns!(),
                " FROM shops WHERE mode = 'live' ORDER BY created_at, id"
            )),
        )
        .await
    }

    /// The overview's counts, each from a table or index of exactly the rows it
    /// counts where there is one (the pending payments: the queue and the
    /// unfinished keys, [`super::pending`]; `event_deliveries_due`); the
    /// findings are few and counted from their table. The open findings by
    /// kind follow [`chargeonce_core::findings::FindingKind::ALL`]'s order.
    /// Events are counted by their deliveries: undelivered, the open ones
    /// (`event_deliveries_due`); due (the relay's backlog), the open ones to
    /// enabled endpoints (not parked), whether their next attempt is now or
    /// after a backoff; their age runs from `due_since`.
    async fn counts(&self) -> Result<StoreCounts, StoreError> {
        let row = sqlx::query(concat!(
            "WITH pending AS (",
            pending_set!("q.shop_id NOT LIKE '%.test'", "k.shop_id NOT LIKE '%.test'", ""),
            ") SELECT \
             (SELECT count(*) FROM pending), \
             (SELECT count(*) FROM reconciliation_findings WHERE resolved_at IS NULL AND shop_id NOT LIKE '%.test'), \
             (SELECT count(*) FROM reconciliation_findings WHERE resolved_at IS NULL AND shop_id NOT LIKE '%.test' \
                 AND kind = 'duplicate_charge'), \
             (SELECT count(*) FROM reconciliation_findings WHERE resolved_at IS NULL AND shop_id NOT LIKE '%.test' \
                 AND kind = 'orphan_charge'), \
             (SELECT count(*) FROM reconciliation_findings WHERE resolved_at IS NULL AND shop_id NOT LIKE '%.test' \
                 AND kind = 'missing_charge'), \
             (SELECT count(*) FROM reconciliation_findings WHERE resolved_at IS NULL AND shop_id NOT LIKE '%.test' \
                 AND kind = 'mismatch'), \
             (SELECT count(*) FROM event_deliveries \
                 WHERE delivered_at IS NULL AND gave_up_at IS NULL AND shop_id NOT LIKE '%.test'), \
             (SELECT count(*) FROM event_deliveries \
                 WHERE delivered_at IS NULL AND gave_up_at IS NULL \
                   AND next_attempt_at < '9999-01-01' AND shop_id NOT LIKE '%.test'), \
             (SELECT min(due_since) FROM event_deliveries \
                 WHERE delivered_at IS NULL AND gave_up_at IS NULL \
                   AND next_attempt_at < '9999-01-01' AND shop_id NOT LIKE '%.test'), \
             (SELECT min(created_at) FROM pending)"
        ))
        .fetch_one(&mut *self.conn().await?)
        .await
        .map_err(store_error)?;
        let count = |i: usize| {
            row.try_get::<i64, _>(i)
                .map(|n| u64::try_from(n).unwrap_or(0))
                .map_err(store_error)
        };
        let at = |i: usize| {
            row.try_get::<Option<OffsetDateTime>, _>(i)
                .map_err(store_error)
        };
        Ok(StoreCounts {
            pending_payments: count(0)?,
            open_findings: count(1)?,
            open_findings_by_kind: [count(2)?, count(3)?, count(4)?, count(5)?],
            undelivered_events: count(6)?,
            due_events: count(7)?,
            oldest_due_at: at(8)?,
            oldest_pending_at: at(9)?,
        })
    }

    /// The connection pool: open connections idle (in sqlx's pool or parked
    /// by the store for the next statement) and in use, its maximum, and
    /// the waits for a connection so far.
    fn pressure(&self) -> StorePressure {
        StorePressure {
            write_queue: None,
            pool: Some(self.conns.usage()),
        }
    }
}
