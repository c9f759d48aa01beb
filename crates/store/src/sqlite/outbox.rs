//! The merchant events (the outbox): writing one in the transaction of its
//! transition, the shop's reads of them, and the relay's claims and
//! attempts.

use std::time::Duration;

use async_trait::async_trait;
use chargeonce_core::CaptureId;
use chargeonce_core::endpoint::EndpointId;
use chargeonce_core::events::{
    AttemptOutcome, DueEvent, EndpointDelivery, Event, EventId, EventQuery, NewEvent,
    PARKED_UNTIL_MS,
};
use chargeonce_core::history::HistoryEvent;
use chargeonce_core::store::Outbox;
use chargeonce_core::{RefundId, ShopId, StoreError};
use chargeonce_sqlite::Write;
use chargeonce_sqlite::rusqlite::{Connection, OptionalExtension, params};

use super::history::record;
use super::{Fail, Result, SqliteStore, all, now_ms};
use crate::codec::{attempt_columns, millis};
use crate::rows::{DeliveryRow, DueRow, EventRow, attach_deliveries};
use crate::stored_body;

/// The columns of an event row ([`EventRow`]); times are unix milliseconds
/// already.
macro_rules! event_columns {
    () => {
        "seq, id, shop_id, event_type, payment_id, refund_id, payload, \
         created_at AS created_at_ms"
    };
}
pub(super) use event_columns;

/// The columns of a delivery row ([`DeliveryRow`]).
macro_rules! delivery_columns {
    () => {
        "event_seq, endpoint_id, attempts, next_attempt_at AS next_attempt_at_ms, \
         delivered_at AS delivered_at_ms, gave_up_at AS gave_up_at_ms, last_status, last_error"
    };
}

/// Whether endpoint `w` wants events of the type in the given parameter (a
/// stored filter: `*` or types joined by commas).
macro_rules! wants {
    ($type:literal) => {
        concat!(
            "(w.enabled_events = '*' OR instr(',' || w.enabled_events || ',', ',' || ",
            $type,
            " || ',') > 0)"
        )
    };
}

/// Writes a merchant event in the transaction of its transition, with a
/// delivery for every enabled endpoint of its shop that wants its type.
pub(super) fn insert_event(conn: &Connection, event: Option<NewEvent>) -> Result<()> {
    let Some(event) = event else { return Ok(()) };
    let inserted = conn
        .prepare_cached(concat!(
            "INSERT INTO events (id, shop_id, event_type, payment_id, refund_id, payload, \
                 capture_id, created_at) \
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ",
            now_ms!(),
            " FROM shops s WHERE s.id = ?2"
        ))?
        .execute(params![
            event.id.as_str(),
            event.shop_id.as_str(),
            event.event_type.as_str(),
            event.payment_id.as_str(),
            event.refund_id.as_ref().map(RefundId::as_str),
            stored_body::uncompressed(&event.payload).as_ref(),
            event.capture_id.as_ref().map(CaptureId::as_str),
        ])?;
    if inserted != 1 {
        return Err(Fail(StoreError::corrupt(format!(
            "event {} for unknown shop {}",
            event.id, event.shop_id
        ))));
    }
    // The event's seq, read once: `last_insert_rowid()` inside the next
    // statement would be re-read per row, each delivery's own rowid after
    // the first.
    let seq = conn.last_insert_rowid();
    conn.prepare_cached(concat!(
        "INSERT INTO event_deliveries (shop_id, event_seq, endpoint_id, payment_id, due_since, \
             next_attempt_at) \
         SELECT w.shop_id, ?4, w.id, ?2, ",
        now_ms!(),
        ", ",
        now_ms!(),
        " FROM webhook_endpoints w \
         WHERE w.shop_id = ?1 AND w.enabled AND w.deleted_at IS NULL AND ",
        wants!("?3")
    ))?
    .execute(params![
        event.shop_id.as_str(),
        event.payment_id.as_str(),
        event.event_type.as_str(),
        seq,
    ])?;
    Ok(())
}

/// Reads the deliveries of `events` (with their sequence numbers) and
/// attaches them.
pub(super) fn with_deliveries(
    conn: &Connection,
    shop_id: &ShopId,
    events: Vec<(i64, Event)>,
) -> Result<Vec<Event>> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let seqs = serde_json::to_string(&events.iter().map(|(seq, _)| *seq).collect::<Vec<_>>())
        .unwrap_or_else(|_| "[]".to_owned());
    let deliveries = all::<DeliveryRow, (i64, EndpointDelivery)>(
        conn,
        concat!(
            "SELECT ",
            delivery_columns!(),
            " FROM event_deliveries WHERE shop_id = ?1 \
               AND event_seq IN (SELECT value FROM json_each(?2))"
        ),
        params![shop_id.as_str(), seqs],
    )?;
    Ok(attach_deliveries(events, deliveries))
}

/// One event of one shop with its deliveries, on whichever connection.
fn event_in(conn: &Connection, shop_id: &ShopId, id: &EventId) -> Result<Option<Event>> {
    let events = all::<EventRow, (i64, Event)>(
        conn,
        concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE shop_id = ?1 AND id = ?2"
        ),
        params![shop_id.as_str(), id.as_str()],
    )?;
    Ok(with_deliveries(conn, shop_id, events)?.into_iter().next())
}

#[async_trait]
impl Outbox for SqliteStore {
    /// A shop's merchant events, newest first.
    #[tracing::instrument(level = "debug", name = "store.events", skip_all, fields(db.system = "sqlite"))]
    async fn events(&self, shop_id: &ShopId, query: &EventQuery) -> Result<Vec<Event>, StoreError> {
        let (shop_id, query) = (shop_id.clone(), query.clone());
        self.read(move |conn| {
            let events = all::<EventRow, (i64, Event)>(
                conn,
                concat!(
                    "SELECT ",
                    event_columns!(),
                    " FROM events WHERE shop_id = ?1 AND (?2 IS NULL OR event_type = ?2) \
                       AND (?3 IS NULL \
                            OR seq < (SELECT seq FROM events WHERE shop_id = ?1 AND id = ?3)) \
                     ORDER BY seq DESC LIMIT ?4"
                ),
                params![
                    shop_id.as_str(),
                    query.event_type.map(|t| t.as_str()),
                    query.starting_after.as_ref().map(EventId::as_str),
                    i64::from(query.limit),
                ],
            )?;
            with_deliveries(conn, &shop_id, events)
        })
        .await
    }

    /// One merchant event of one shop.
    #[tracing::instrument(level = "debug", name = "store.event", skip_all, fields(db.system = "sqlite"))]
    async fn event(&self, shop_id: &ShopId, id: &EventId) -> Result<Option<Event>, StoreError> {
        let (shop_id, id) = (shop_id.clone(), id.clone());
        self.read(move |conn| event_in(conn, &shop_id, &id)).await
    }

    /// Makes the event's deliveries due again now, as if just written
    /// (made where there was none), with its payment's history entry when
    /// any was.
    #[tracing::instrument(level = "debug", name = "store.resend_event", skip_all, fields(db.system = "sqlite"))]
    async fn resend_event(
        &self,
        shop_id: &ShopId,
        id: &EventId,
        endpoint: Option<&EndpointId>,
    ) -> Result<Option<(Event, usize)>, StoreError> {
        let (shop_id, id, endpoint) = (shop_id.clone(), id.clone(), endpoint.cloned());
        self.write_new(move |conn| {
            let Some(event) = event_in(conn, &shop_id, &id)? else {
                return Ok(Write::Rollback(None));
            };
            let due = conn
                .prepare_cached(concat!(
                    "INSERT INTO event_deliveries (shop_id, event_seq, endpoint_id, payment_id, \
                         due_since, next_attempt_at) \
                     SELECT e.shop_id, e.seq, w.id, e.payment_id, ",
                    now_ms!(),
                    ", ",
                    now_ms!(),
                    " FROM events e JOIN webhook_endpoints w ON w.shop_id = e.shop_id \
                     WHERE e.shop_id = ?1 AND e.id = ?2 AND w.enabled AND w.deleted_at IS NULL \
                       AND (?3 IS NULL OR w.id = ?3) AND ",
                    wants!("e.event_type"),
                    " ON CONFLICT (shop_id, event_seq, endpoint_id) DO UPDATE SET \
                         delivered_at = NULL, gave_up_at = NULL, locked_until = NULL, \
                         next_attempt_at = excluded.next_attempt_at, \
                         due_since = excluded.due_since"
                ))?
                .execute(params![
                    shop_id.as_str(),
                    id.as_str(),
                    endpoint.as_ref().map(EndpointId::as_str)
                ])?;
            if due == 0 {
                return Ok(Write::Rollback(Some((event, 0))));
            }
            record(
                conn,
                event.payment_id.as_str(),
                event.refund_id.as_ref().map(RefundId::as_str),
                &HistoryEvent::EventResent {
                    event_id: id.as_str().to_owned(),
                },
            )?;
            let event = event_in(conn, &shop_id, &id)?;
            Ok(Write::Commit(event.map(|event| (event, due))))
        })
        .await
    }

    /// Claims due deliveries for one attempt each, under a lease.
    #[tracing::instrument(level = "debug", name = "store.claim_due_events", skip_all, fields(db.system = "sqlite"))]
    async fn claim_due_events(
        &self,
        limit: u32,
        lease: Duration,
    ) -> Result<Vec<DueEvent>, StoreError> {
        // A read first, so an idle relay does not queue on the one writer.
        let any_due = self
            .read(|conn| {
                Ok(conn
                    .prepare_cached(concat!(
                        "SELECT 1 FROM event_deliveries d \
                         WHERE d.delivered_at IS NULL AND d.gave_up_at IS NULL \
                           AND d.next_attempt_at <= ",
                        now_ms!(),
                        " AND (d.locked_until IS NULL OR d.locked_until <= ",
                        now_ms!(),
                        ") LIMIT 1"
                    ))?
                    .query_row([], |_| Ok(()))
                    .optional()?
                    .is_some())
            })
            .await?;
        if !any_due {
            return Ok(Vec::new());
        }
        self.write(move |conn| {
            // One writer: nobody claims between these statements. A
            // delivery waits while an earlier one of its payment to the same
            // endpoint is still open.
            let mut due = all::<DueRow, (i64, DueEvent)>(
                conn,
                concat!(
                    "SELECT e.seq, e.id, e.shop_id, e.event_type, e.payment_id, e.refund_id, \
                         e.payload, e.created_at AS created_at_ms, d.endpoint_id, w.url, \
                         w.secret, CASE WHEN w.previous_secret_until > ",
                    now_ms!(),
                    " THEN w.previous_secret END AS previous_secret, d.attempts \
                     FROM event_deliveries d \
                     JOIN webhook_endpoints w ON w.shop_id = d.shop_id AND w.id = d.endpoint_id \
                     JOIN events e ON e.seq = d.event_seq AND e.shop_id = d.shop_id \
                     WHERE d.delivered_at IS NULL AND d.gave_up_at IS NULL \
                       AND d.next_attempt_at <= ",
                    now_ms!(),
                    " AND (d.locked_until IS NULL OR d.locked_until <= ",
                    now_ms!(),
                    ") AND w.enabled AND w.deleted_at IS NULL AND w.secret IS NOT NULL \
                       AND NOT EXISTS (SELECT 1 FROM event_deliveries p \
                           WHERE p.payment_id = d.payment_id AND p.endpoint_id = d.endpoint_id \
                             AND p.event_seq < d.event_seq \
                             AND p.delivered_at IS NULL AND p.gave_up_at IS NULL) \
                     ORDER BY d.event_seq LIMIT ?1"
                ),
                params![i64::from(limit)],
            )?;
            let mut lease_one = conn.prepare_cached(concat!(
                "UPDATE event_deliveries SET locked_until = ",
                now_ms!(),
                " + ?4 WHERE shop_id = ?1 AND event_seq = ?2 AND endpoint_id = ?3"
            ))?;
            for (seq, claimed) in &due {
                lease_one.execute(params![
                    claimed.event.shop_id.as_str(),
                    seq,
                    claimed.destination.endpoint_id.as_str(),
                    millis(lease)
                ])?;
            }
            due.sort_by_key(|(seq, _)| *seq);
            Ok(Write::Commit(due.into_iter().map(|(_, d)| d).collect()))
        })
        .await
    }

    /// Records how a delivery attempt ended and ends its lease, with its
    /// `event_attempt` entry in the history of the event's payment. The row is
    /// read before the update (what the entry names, and whether it had been
    /// given up already) and, after a failure, its `gave_up_at` after it: the
    /// update alone decides by SQLite's clock whether this attempt gives up
    /// (`true`).
    #[tracing::instrument(level = "debug", name = "store.record_attempt", skip_all, fields(db.system = "sqlite"))]
    async fn record_attempt(
        &self,
        shop_id: &ShopId,
        id: &EventId,
        endpoint_id: &EndpointId,
        outcome: &AttemptOutcome,
    ) -> Result<bool, StoreError> {
        let (shop_id, id, endpoint_id) = (shop_id.clone(), id.clone(), endpoint_id.clone());
        let (status, error, delivered, retry_ms, give_up_ms) = attempt_columns(outcome);
        let answered = match outcome {
            AttemptOutcome::Delivered { status } => Some(*status),
            AttemptOutcome::Failed { status, .. } => *status,
        };
        self.write(move |conn| {
            let Some((seq, payment_id, refund_id, event_type, attempts, gave_up_before)) = conn
                .prepare_cached(
                    "SELECT e.seq, e.payment_id, e.refund_id, e.event_type, d.attempts, \
                             d.gave_up_at IS NOT NULL \
                     FROM events e JOIN event_deliveries d \
                         ON d.shop_id = e.shop_id AND d.event_seq = e.seq \
                     WHERE e.shop_id = ?1 AND e.id = ?2 AND d.endpoint_id = ?3",
                )?
                .query_row(
                    params![shop_id.as_str(), id.as_str(), endpoint_id.as_str()],
                    |row| {
                        Ok((
                            row.get::<_, i64>(0)?,
                            row.get::<_, String>(1)?,
                            row.get::<_, Option<String>>(2)?,
                            row.get::<_, String>(3)?,
                            row.get::<_, i64>(4)?,
                            row.get::<_, bool>(5)?,
                        ))
                    },
                )
                .optional()?
            else {
                return Ok(Write::Commit(false));
            };
            let key = params![shop_id.as_str(), seq, endpoint_id.as_str()];
            let result = if delivered {
                conn.prepare_cached(concat!(
                    "UPDATE event_deliveries SET attempts = attempts + 1, last_status = ?4, \
                         last_error = NULL, delivered_at = COALESCE(delivered_at, ",
                    now_ms!(),
                    "), locked_until = NULL \
                     WHERE shop_id = ?1 AND event_seq = ?2 AND endpoint_id = ?3"
                ))?
                .execute(params![
                    shop_id.as_str(),
                    seq,
                    endpoint_id.as_str(),
                    status
                ])?;
                "delivered"
            } else {
                // A delivery parked meanwhile (its endpoint disabled) stays
                // parked.
                conn.prepare_cached(concat!(
                    "UPDATE event_deliveries SET attempts = attempts + 1, last_status = ?4, \
                         last_error = ?5, locked_until = NULL, \
                         gave_up_at = CASE WHEN delivered_at IS NULL AND ",
                    now_ms!(),
                    " >= due_since + ?7 THEN ",
                    now_ms!(),
                    " ELSE gave_up_at END, next_attempt_at = CASE WHEN next_attempt_at >= ?8 \
                         THEN next_attempt_at ELSE MIN(",
                    now_ms!(),
                    " + ?6, due_since + ?7) END \
                     WHERE shop_id = ?1 AND event_seq = ?2 AND endpoint_id = ?3"
                ))?
                .execute(params![
                    shop_id.as_str(),
                    seq,
                    endpoint_id.as_str(),
                    status,
                    error,
                    retry_ms,
                    give_up_ms,
                    PARKED_UNTIL_MS
                ])?;
                let gave_up: bool = conn
                    .prepare_cached(
                        "SELECT gave_up_at IS NOT NULL FROM event_deliveries \
                         WHERE shop_id = ?1 AND event_seq = ?2 AND endpoint_id = ?3",
                    )?
                    .query_row(key, |row| row.get(0))?;
                if gave_up && !gave_up_before {
                    "given_up"
                } else {
                    "failed"
                }
            };
            record(
                conn,
                &payment_id,
                refund_id.as_deref(),
                &HistoryEvent::EventAttempt {
                    event_id: id.as_str().to_owned(),
                    event_type,
                    attempt: u32::try_from(attempts.saturating_add(1)).unwrap_or(u32::MAX),
                    result: result.to_owned(),
                    status: answered,
                    endpoint_id: Some(endpoint_id.as_str().to_owned()),
                },
            )?;
            Ok(Write::Commit(result == "given_up"))
        })
        .await
    }
}
