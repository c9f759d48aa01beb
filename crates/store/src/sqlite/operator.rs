//! What the operator console reads across shops, and the operator's
//! credential.

use async_trait::async_trait;
use chargeonce_core::api_key::Mode;
use chargeonce_core::events::{Event, EventId};
use chargeonce_core::store::{
    Operator, Payments, ShopSummary, StoreCounts, StorePressure, WriteQueue,
};
use chargeonce_core::{
    Cursor, Page, PageRequest, Payment, PaymentFilter, PaymentId, Reference, SecretHash, ShopId,
    StoreError,
};
use chargeonce_sqlite::Write;
use chargeonce_sqlite::rusqlite::{Connection, OptionalExtension, ToSql, params, params_from_iter};

use super::outbox::{event_columns, with_deliveries};
use super::{Fail, Result, SqliteStore, all, now_ms, one, unix_ms};
use crate::columns::{payment_columns, shown_status};
use crate::finding_rows::{ShopSummaryRow, shop_summary_columns};
use crate::rows::At;
use crate::rows::{EventRow, PaymentRow};

// The statements of a cross-shop payment list are each a walk of
// `payments_created_at` from its start, stopped by the limit; only the
// payments of one instant are sorted by id (`TEMP B-TREE FOR LAST TERM`),
// never the table. The index holds `created_at` alone, so the cursor's time
// is also written as a bound of its own, which the index can start from (a
// row comparison is not a range of it).

/// The newest page of every shop's payments that match the filter: `?1`
/// status, `?2` reference, `?3` and `?4` the created range (each ignored
/// when null), `?5` the limit, `?6` whether test mode's (else live mode's).
const ANY_SHOP_PAYMENTS_NEWEST: &str = concat!(
    "SELECT ",
    payment_columns!(),
    " FROM payments WHERE (?1 IS NULL OR ",
    shown_status!(),
    " = ?1) \
       AND (?2 IS NULL OR reference = ?2) \
       AND (?3 IS NULL OR created_at >= ?3) \
       AND (?4 IS NULL OR created_at < ?4) \
       AND (shop_id LIKE '%.test') = ?6 \
     ORDER BY created_at DESC, id DESC LIMIT ?5"
);

/// The page after a cursor of every shop's payments: `?1` to `?5` as in
/// [`ANY_SHOP_PAYMENTS_NEWEST`], `?6`, `?7` the cursor's `created_at` and id,
/// `?8` whether test mode's.
const ANY_SHOP_PAYMENTS_AFTER: &str = concat!(
    "SELECT ",
    payment_columns!(),
    " FROM payments WHERE (?1 IS NULL OR ",
    shown_status!(),
    " = ?1) \
       AND (?2 IS NULL OR reference = ?2) \
       AND (?3 IS NULL OR created_at >= ?3) \
       AND (?4 IS NULL OR created_at < ?4) \
       AND created_at <= ?6 AND (created_at, id) < (?6, ?7) \
       AND (shop_id LIKE '%.test') = ?8 \
     ORDER BY created_at DESC, id DESC LIMIT ?5"
);

/// The page before a cursor of every shop's payments, read oldest first:
/// `?1` to `?8` as in [`ANY_SHOP_PAYMENTS_AFTER`].
const ANY_SHOP_PAYMENTS_BEFORE: &str = concat!(
    "SELECT ",
    payment_columns!(),
    " FROM payments WHERE (?1 IS NULL OR ",
    shown_status!(),
    " = ?1) \
       AND (?2 IS NULL OR reference = ?2) \
       AND (?3 IS NULL OR created_at >= ?3) \
       AND (?4 IS NULL OR created_at < ?4) \
       AND created_at >= ?6 AND (created_at, id) > (?6, ?7) \
       AND (shop_id LIKE '%.test') = ?8 \
     ORDER BY created_at, id LIMIT ?5"
);

/// Where a cross-shop list's cursor lies: the `(created_at, id)` of the
/// payment `id`, of any shop; [`StoreError::UnknownCursor`] when there is
/// none.
fn cursor_at(conn: &Connection, id: &PaymentId) -> Result<(i64, String)> {
    let at: Option<i64> = conn
        .prepare_cached("SELECT created_at FROM payments WHERE id = ?1")?
        .query_row(params![id.as_str()], |row| row.get(0))
        .optional()?;
    match at {
        Some(at) => Ok((at, id.as_str().to_owned())),
        None => Err(StoreError::UnknownCursor(id.to_string()).into()),
    }
}

/// The events of one payment (`?1`), in commit order.
const PAYMENT_EVENTS: &str = concat!(
    "SELECT ",
    event_columns!(),
    " FROM events WHERE payment_id = ?1 ORDER BY seq"
);

/// The overview's counts, each from an index of exactly the rows it counts
/// where there is one (`payments_pending`, `events_due`); the findings are
/// few and counted from their table.
///
/// The open findings by kind follow
/// [`chargeonce_core::findings::FindingKind::ALL`]'s order. Events are
/// counted by their deliveries: the open ones (`event_deliveries_due`), and
/// those the relay owes (to enabled endpoints, not parked), whether their
/// next attempt is now or after a backoff; their age runs from `due_since`.
const COUNTS: &str = "SELECT \
     (SELECT count(*) FROM payments WHERE status = 'pending' AND shop_id NOT LIKE '%.test'), \
     (SELECT count(*) FROM reconciliation_findings WHERE resolved_at IS NULL AND shop_id NOT LIKE '%.test'), \
     (SELECT count(*) FROM reconciliation_findings WHERE resolved_at IS NULL AND shop_id NOT LIKE '%.test' \
         AND kind = 'duplicate_charge'), \
     (SELECT count(*) FROM reconciliation_findings WHERE resolved_at IS NULL AND shop_id NOT LIKE '%.test' \
         AND kind = 'orphan_charge'), \
     (SELECT count(*) FROM reconciliation_findings WHERE resolved_at IS NULL AND shop_id NOT LIKE '%.test' \
         AND kind = 'missing_charge'), \
     (SELECT count(*) FROM reconciliation_findings WHERE resolved_at IS NULL AND shop_id NOT LIKE '%.test' \
         AND kind = 'mismatch'), \
     (SELECT count(*) FROM event_deliveries WHERE delivered_at IS NULL AND gave_up_at IS NULL AND shop_id NOT LIKE '%.test'), \
     (SELECT count(*) FROM event_deliveries \
         WHERE delivered_at IS NULL AND gave_up_at IS NULL AND next_attempt_at < 253370764800000 AND shop_id NOT LIKE '%.test'), \
     (SELECT min(due_since) FROM event_deliveries \
         WHERE delivered_at IS NULL AND gave_up_at IS NULL AND next_attempt_at < 253370764800000 AND shop_id NOT LIKE '%.test'), \
     (SELECT min(created_at) FROM payments WHERE status = 'pending' AND shop_id NOT LIKE '%.test')";

#[async_trait]
impl Operator for SqliteStore {
    /// The operator's stored secret hash, if one was set.
    async fn operator_secret(&self) -> Result<Option<SecretHash>, StoreError> {
        self.read(|conn| {
            let Some(bytes) = conn
                .prepare_cached("SELECT secret_sha256 FROM operator_credential WHERE id = 1")?
                .query_row([], |row| row.get::<_, Vec<u8>>(0))
                .optional()?
            else {
                return Ok(None);
            };
            SecretHash::from_bytes(&bytes)
                .map(Some)
                .ok_or_else(|| Fail(StoreError::corrupt("the operator's secret hash")))
        })
        .await
    }

    /// Stores the operator's secret hash unless one exists (the first start).
    async fn init_operator_secret(&self, hash: &SecretHash) -> Result<bool, StoreError> {
        let hash = hash.clone();
        self.write(move |conn| {
            let stored = conn
                .prepare_cached(concat!(
                    "INSERT INTO operator_credential (id, secret_sha256, created_at) \
                         VALUES (1, ?1, ",
                    now_ms!(),
                    ") ON CONFLICT (id) DO NOTHING"
                ))?
                .execute(params![hash.as_bytes().as_slice()])?;
            Ok(Write::Commit(stored == 1))
        })
        .await
    }

    /// Replaces (or stores) the operator's secret hash.
    async fn set_operator_secret(&self, hash: &SecretHash) -> Result<(), StoreError> {
        let hash = hash.clone();
        self.write(move |conn| {
            conn.prepare_cached(concat!(
                "INSERT INTO operator_credential (id, secret_sha256, created_at) \
                     VALUES (1, ?1, ",
                now_ms!(),
                ") ON CONFLICT (id) DO UPDATE SET secret_sha256 = excluded.secret_sha256, \
                         created_at = excluded.created_at"
            ))?
            .execute(params![hash.as_bytes().as_slice()])?;
            Ok(Write::Commit(()))
        })
        .await
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
        let (filter, page) = (filter.clone(), page.clone());
        self.read(move |conn| {
            let (sql, cursor) = match &page.cursor {
                Cursor::Newest => (ANY_SHOP_PAYMENTS_NEWEST, None),
                Cursor::After(id) => (ANY_SHOP_PAYMENTS_AFTER, Some(cursor_at(conn, id)?)),
                Cursor::Before(id) => (ANY_SHOP_PAYMENTS_BEFORE, Some(cursor_at(conn, id)?)),
            };
            let (status, reference) = (
                filter.status.map(|s| s.as_str()),
                filter.reference.as_ref().map(Reference::as_str),
            );
            let (gte, lt) = (
                filter.created_gte.map(unix_ms),
                filter.created_lt.map(unix_ms),
            );
            let limit = i64::from(page.limit.get()) + 1;
            let mut values: Vec<&dyn ToSql> = vec![&status, &reference, &gte, &lt, &limit];
            if let Some((at, id)) = &cursor {
                values.extend([at as &dyn ToSql, id]);
            }
            values.push(&test_mode);
            let rows: Vec<Payment> = all::<PaymentRow, _>(conn, sql, params_from_iter(values))?;
            Ok(Page::from_probe(rows, &page))
        })
        .await
    }

    /// One payment of any shop.
    async fn any_payment(&self, id: &PaymentId) -> Result<Option<Payment>, StoreError> {
        let id = id.clone();
        self.read(move |conn| {
            one::<PaymentRow, _>(
                conn,
                concat!(
                    "SELECT ",
                    payment_columns!(),
                    " FROM payments WHERE id = ?1"
                ),
                params![id.as_str()],
            )
        })
        .await
    }

    /// The merchant events of one payment, oldest (first committed) first.
    async fn payment_events(&self, id: &PaymentId) -> Result<Vec<Event>, StoreError> {
        let id = id.clone();
        // A range of `events_by_payment`.
        self.read(move |conn| {
            let events = all::<EventRow, (i64, Event)>(conn, PAYMENT_EVENTS, params![id.as_str()])?;
            let Some(shop_id) = events.first().map(|(_, e)| e.shop_id.clone()) else {
                return Ok(Vec::new());
            };
            with_deliveries(conn, &shop_id, events)
        })
        .await
    }

    /// The shop a merchant event belongs to.
    async fn event_shop(&self, id: &EventId) -> Result<Option<ShopId>, StoreError> {
        let id = id.clone();
        self.read(move |conn| {
            let shop: Option<String> = conn
                .prepare_cached("SELECT shop_id FROM events WHERE id = ?1")?
                .query_row(params![id.as_str()], |row| row.get(0))
                .optional()?;
            Ok(shop
                .map(ShopId::new)
                .transpose()
                .map_err(StoreError::corrupt_by)?)
        })
        .await
    }

    /// Every shop (by its own id; its test mode is `{id}.test`), oldest
    /// first, without its secrets.
    async fn shops(&self) -> Result<Vec<ShopSummary>, StoreError> {
        self.read(|conn| {
            all::<ShopSummaryRow, _>(
                conn,
                concat!(
                    "SELECT ",
                    shop_summary_columns!(),
                    " FROM shops WHERE mode = 'live' ORDER BY created_at, id"
                ),
                [],
            )
        })
        .await
    }

    /// The overview's counts.
    async fn counts(&self) -> Result<StoreCounts, StoreError> {
        self.read(|conn| {
            let mut counts = [0_i64; 8];
            let (oldest_due, oldest_pending) =
                conn.prepare_cached(COUNTS)?.query_row([], |row| {
                    for (i, count) in counts.iter_mut().enumerate() {
                        *count = row.get::<_, i64>(i)?;
                    }
                    Ok((row.get::<_, Option<At>>(8)?, row.get::<_, Option<At>>(9)?))
                })?;
            let count = |n: i64| u64::try_from(n).unwrap_or(0);
            Ok(StoreCounts {
                pending_payments: count(counts[0]),
                open_findings: count(counts[1]),
                open_findings_by_kind: [
                    count(counts[2]),
                    count(counts[3]),
                    count(counts[4]),
                    count(counts[5]),
                ],
                undelivered_events: count(counts[6]),
                due_events: count(counts[7]),
                oldest_due_at: oldest_due.map(|at| at.0),
                oldest_pending_at: oldest_pending.map(|at| at.0),
            })
        })
        .await
    }

    /// The writer's queue: the writes waiting for it and `--sqlite-queue`.
    fn pressure(&self) -> StorePressure {
        let as_u64 = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        StorePressure {
            write_queue: Some(WriteQueue {
                depth: as_u64(self.db.stats().queued),
                limit: as_u64(self.db.queue_limit()),
            }),
            pool: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::plan;
    use super::*;
    use crate::PoolConfig;

    #[tokio::test]
    async fn the_console_reads_are_ranges_of_their_indexes() {
        let dir = std::env::temp_dir().join(format!("chargeonce-console-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("plans.db").display());
        let store = SqliteStore::connect(&url, &PoolConfig::default())
            .await
            .unwrap();
        let read = |sql: &'static str| {
            let store = store.clone();
            async move { store.read(move |conn| Ok(plan(conn, sql)?)).await.unwrap() }
        };
        // Every shop's payments: a walk of `payments_created_at` from the
        // newest (or from the cursor), sorting only the payments of one
        // instant by id, never the table.
        let lists = [
            (ANY_SHOP_PAYMENTS_NEWEST, false),
            (ANY_SHOP_PAYMENTS_AFTER, true),
            (ANY_SHOP_PAYMENTS_BEFORE, true),
        ];
        for (sql, from_cursor) in lists {
            let plan = read(sql).await;
            assert!(plan.contains("INDEX payments_created_at"), "{plan}");
            assert!(!plan.contains("TEMP B-TREE FOR ORDER BY"), "{plan}");
            if from_cursor {
                assert!(plan.contains("(created_at"), "{plan}");
            }
        }
        // The counts: the partial indexes of pending payments and open
        // events (the findings are few, and counted from their table).
        let plan = read(COUNTS).await;
        assert!(plan.contains("INDEX payments_pending"), "{plan}");
        // The deliveries owed: the open deliveries' index, never the table.
        assert!(plan.contains("INDEX event_deliveries_due"), "{plan}");
        assert!(!plan.contains("SCAN event_deliveries;"), "{plan}");
        // One payment's events: a range of their index, already in order.
        let plan = read(PAYMENT_EVENTS).await;
        assert!(
            plan.contains("INDEX events_by_payment (payment_id=?"),
            "{plan}"
        );
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        // The findings: newest sighting first from their index, or one
        // payment's few.
        let (every, of_payment) = (
            super::super::findings::FINDINGS,
            super::super::findings::PAYMENT_FINDINGS,
        );
        let plan = read(every).await;
        assert!(plan.contains("INDEX findings_by_last_seen"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        let plan = read(of_payment).await;
        assert!(
            plan.contains("INDEX findings_by_payment (payment_id=?"),
            "{plan}"
        );
        store.close().await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}
