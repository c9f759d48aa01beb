//! The merchant events (the outbox): writing one in the transaction of its
//! transition, the shop's reads of them, and the relay's claims and
//! attempts.

use std::time::Duration;

use async_trait::async_trait;
use chargeonce_core::CaptureId;
use chargeonce_core::endpoint::{DELETED, EndpointId};
use chargeonce_core::events::{
    AttemptOutcome, DueEvent, EndpointDelivery, Event, EventId, EventQuery, NewEvent,
    PARKED_UNTIL_MS,
};
use chargeonce_core::history::HistoryEvent;
use chargeonce_core::store::Outbox;
use chargeonce_core::{RefundId, ShopId, StoreError};
use sqlx::{Postgres, Transaction};

use super::finish_parts::deliveries;
use super::{PgStore, store_error};
use crate::codec::{attempt_columns, millis};
use crate::rows::{DeliveryRow, DueRow, EventRow, attach_deliveries};
use crate::stored_body;

/// The columns of an event row ([`EventRow`]), with times as unix
/// milliseconds.
macro_rules! event_columns {
    () => {
        "seq, id, shop_id, event_type, payment_id, refund_id, payload, \
         floor(extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms"
    };
}
pub(super) use event_columns;

/// The columns of a delivery row ([`DeliveryRow`]), with times as unix
/// milliseconds.
macro_rules! delivery_columns {
    () => {
        "event_seq, endpoint_id, attempts::bigint AS attempts, \
         floor(extract(epoch FROM next_attempt_at) * 1000)::bigint AS next_attempt_at_ms, \
         floor(extract(epoch FROM delivered_at) * 1000)::bigint AS delivered_at_ms, \
         floor(extract(epoch FROM gave_up_at) * 1000)::bigint AS gave_up_at_ms, \
         last_status::bigint AS last_status, last_error"
    };
}

/// Whether endpoint `w` wants events of the type in `$3` (a stored filter:
/// `*` or types joined by commas).
macro_rules! wants {
    ($type:literal) => {
        concat!(
            "(w.enabled_events = '*' OR strpos(',' || w.enabled_events || ',', ',' || ",
            $type,
            " || ',') > 0)"
        )
    };
}
pub(super) use wants;

/// Writes a merchant event in the transaction of its transition, with a
/// delivery for every enabled endpoint of its shop that wants its type.
pub(super) async fn insert_event(
    tx: &mut Transaction<'static, Postgres>,
    event: Option<NewEvent>,
) -> Result<(), StoreError> {
    let Some(event) = event else { return Ok(()) };
    // The shop is read (not locked) to refuse an event of an unknown one.
    let inserted: i64 = sqlx::query_scalar(concat!(
        "WITH event AS ( \
             INSERT INTO events (id, shop_id, event_type, payment_id, refund_id, payload, \
                 capture_id) \
             SELECT $1, $2, $3, $4, $5, $6, $7 FROM shops s WHERE s.id = $2 \
             RETURNING seq, payment_id), ",
        deliveries!("$2", "$3"),
        " SELECT count(*) FROM event"
    ))
    .bind(event.id.as_str())
    .bind(event.shop_id.as_str())
    .bind(event.event_type.as_str())
    .bind(event.payment_id.as_str())
    .bind(event.refund_id.as_ref().map(RefundId::as_str))
    .bind(stored_body::compressed(&event.payload).as_ref())
    .bind(event.capture_id.as_ref().map(CaptureId::as_str))
    .fetch_one(&mut **tx)
    .await
    .map_err(store_error)?;
    if inserted != 1 {
        return Err(StoreError::corrupt(format!(
            "event {} for unknown shop {}",
            event.id, event.shop_id
        )));
    }
    Ok(())
}

/// Reads the deliveries of `events` (with their sequence numbers) and
/// attaches them.
pub(super) async fn with_deliveries<'c, E>(
    executor: E,
    shop_id: &ShopId,
    events: Vec<(i64, Event)>,
) -> Result<Vec<Event>, StoreError>
where
    E: sqlx::Executor<'c, Database = Postgres>,
{
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let seqs: Vec<i64> = events.iter().map(|(seq, _)| *seq).collect();
    let rows = sqlx::query_as::<_, DeliveryRow>(concat!(
        "SELECT ",
        delivery_columns!(),
        " FROM event_deliveries WHERE shop_id = $1 AND event_seq = ANY($2)"
    ))
    .bind(shop_id.as_str())
    .bind(&seqs)
    .fetch_all(executor)
    .await
    .map_err(store_error)?;
    let deliveries = rows
        .into_iter()
        .map(<(i64, EndpointDelivery)>::try_from)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(attach_deliveries(events, deliveries))
}

/// Events rows with their sequence numbers.
fn numbered(rows: Vec<EventRow>) -> Result<Vec<(i64, Event)>, StoreError> {
    rows.into_iter().map(<(i64, Event)>::try_from).collect()
}

impl PgStore {
    /// One event of one shop with its deliveries.
    async fn event_with_deliveries(
        &self,
        shop_id: &ShopId,
        id: &EventId,
    ) -> Result<Option<Event>, StoreError> {
        let mut conn = self.conn().await?;
        let rows = sqlx::query_as::<_, EventRow>(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE shop_id = $1 AND id = $2"
        ))
        .bind(shop_id.as_str())
        .bind(id.as_str())
        .fetch_all(&mut *conn)
        .await
        .map_err(store_error)?;
        let events = with_deliveries(&mut *conn, shop_id, numbered(rows)?).await?;
        Ok(events.into_iter().next())
    }
}

#[async_trait]
impl Outbox for PgStore {
    /// A shop's merchant events, newest first.
    #[tracing::instrument(level = "debug", name = "store.events", skip_all, fields(db.system = "postgresql"))]
    async fn events(&self, shop_id: &ShopId, query: &EventQuery) -> Result<Vec<Event>, StoreError> {
        let mut conn = self.conn().await?;
        let rows = sqlx::query_as::<_, EventRow>(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE shop_id = $1 AND ($2::text IS NULL OR event_type = $2) \
                   AND ($3::text IS NULL \
                        OR seq < (SELECT seq FROM events WHERE shop_id = $1 AND id = $3)) \
                 ORDER BY seq DESC LIMIT $4"
        ))
        .bind(shop_id.as_str())
        .bind(query.event_type.map(|t| t.as_str()))
        .bind(query.starting_after.as_ref().map(EventId::as_str))
        .bind(i64::from(query.limit))
        .fetch_all(&mut *conn)
        .await
        .map_err(store_error)?;
        with_deliveries(&mut *conn, shop_id, numbered(rows)?).await
    }

    /// One merchant event of one shop.
    #[tracing::instrument(level = "debug", name = "store.event", skip_all, fields(db.system = "postgresql"))]
    async fn event(&self, shop_id: &ShopId, id: &EventId) -> Result<Option<Event>, StoreError> {
        self.event_with_deliveries(shop_id, id).await
    }

    /// Makes the event's deliveries due again now, as if just written (made
    /// where there was none), with its payment's history entry
    /// ([`HistoryEvent::EventResent`]) in the same statement when any was.
    #[tracing::instrument(level = "debug", name = "store.resend_event", skip_all, fields(db.system = "postgresql"))]
    async fn resend_event(
        &self,
        shop_id: &ShopId,
        id: &EventId,
        endpoint: Option<&EndpointId>,
    ) -> Result<Option<(Event, usize)>, StoreError> {
        let resent = HistoryEvent::EventResent {
            event_id: id.as_str().to_owned(),
        };
        let (found, due): (i64, i64) = sqlx::query_as(concat!(
            "WITH e AS ( \
                 SELECT seq, shop_id, payment_id, refund_id, event_type FROM events \
                 WHERE shop_id = $1 AND id = $2), \
             d AS ( \
                 INSERT INTO event_deliveries (shop_id, event_seq, endpoint_id, payment_id) \
                 SELECT e.shop_id, e.seq, w.id, e.payment_id \
                 FROM e JOIN webhook_endpoints w ON w.shop_id = $1 \
                 WHERE w.enabled AND w.deleted_at IS NULL \
                   AND ($3::text IS NULL OR w.id = $3) AND ",
            wants!("e.event_type"),
            " ON CONFLICT (shop_id, event_seq, endpoint_id) DO UPDATE SET \
                     delivered_at = NULL, gave_up_at = NULL, locked_until = NULL, \
                     next_attempt_at = now(), due_since = now() \
                 RETURNING endpoint_id), \
             h AS ( \
                 INSERT INTO payment_history (payment_id, refund_id, shop_id, kind, event) \
                 SELECT payment_id, refund_id, shop_id, 'event_resent', $4 FROM e \
                 WHERE EXISTS (SELECT 1 FROM d)) \
             SELECT (SELECT count(*) FROM e), (SELECT count(*) FROM d)"
        ))
        .bind(shop_id.as_str())
        .bind(id.as_str())
        .bind(endpoint.map(EndpointId::as_str))
        .bind(resent.to_json())
        .fetch_one(&mut *self.conn().await?)
        .await
        .map_err(store_error)?;
        if found == 0 {
            return Ok(None);
        }
        let event = self.event_with_deliveries(shop_id, id).await?;
        Ok(event.map(|event| (event, usize::try_from(due).unwrap_or(0))))
    }

    /// Claims due deliveries for one attempt each, under a lease.
    #[tracing::instrument(level = "debug", name = "store.claim_due_events", skip_all, fields(db.system = "postgresql"))]
    async fn claim_due_events(
        &self,
        limit: u32,
        lease: Duration,
    ) -> Result<Vec<DueEvent>, StoreError> {
        // SKIP LOCKED: concurrent relays claim disjoint deliveries. A
        // delivery waits while an earlier one of its payment to the same
        // endpoint is still open (leased or not), so a payment's events reach
        // each endpoint in commit order. The endpoint's row is read, not
        // locked: a delete or disable that commits meanwhile gives up or
        // parks the delivery, and its attempt's record then changes nothing
        // of that.
        let mut conn = self.conn().await?;
        // An event written while its endpoint was being deleted or disabled
        // (its statement read the endpoint live, the delete's or disable's
        // update of open deliveries did not see the new one) has a due
        // delivery no claim takes: given up (deleted) or parked (disabled)
        // here, so that none stays open for ever. SQLite's one writer
        // cannot interleave them.
        sqlx::query(
            "WITH gone AS ( \
                 UPDATE event_deliveries d SET gave_up_at = now(), locked_until = NULL, \
                     last_error = $1 \
                 FROM webhook_endpoints w \
                 WHERE w.shop_id = d.shop_id AND w.id = d.endpoint_id \
                   AND w.deleted_at IS NOT NULL \
                   AND d.delivered_at IS NULL AND d.gave_up_at IS NULL \
                   AND d.next_attempt_at <= now()) \
             UPDATE event_deliveries d \
             SET next_attempt_at = to_timestamp($2::float8 / 1000) \
             FROM webhook_endpoints w \
             WHERE w.shop_id = d.shop_id AND w.id = d.endpoint_id \
               AND NOT w.enabled AND w.deleted_at IS NULL \
               AND d.delivered_at IS NULL AND d.gave_up_at IS NULL \
               AND d.next_attempt_at <= now()",
        )
        .bind(DELETED)
        .bind(PARKED_UNTIL_MS as f64)
        .execute(&mut *conn)
        .await
        .map_err(store_error)?;
        let rows = sqlx::query_as::<_, DueRow>(
            "WITH c AS ( \
                 SELECT d.shop_id, d.event_seq, d.endpoint_id \
                 FROM event_deliveries d JOIN webhook_endpoints w \
                     ON w.shop_id = d.shop_id AND w.id = d.endpoint_id \
                 WHERE d.delivered_at IS NULL AND d.gave_up_at IS NULL \
                   AND d.next_attempt_at <= now() \
                   AND (d.locked_until IS NULL OR d.locked_until <= now()) \
                   AND w.enabled AND w.deleted_at IS NULL \
                   AND NOT EXISTS (SELECT 1 FROM event_deliveries p \
                       WHERE p.payment_id = d.payment_id AND p.endpoint_id = d.endpoint_id \
                         AND p.event_seq < d.event_seq \
                         AND p.delivered_at IS NULL AND p.gave_up_at IS NULL) \
                 ORDER BY d.event_seq LIMIT $1 FOR UPDATE OF d SKIP LOCKED), \
             u AS ( \
                 UPDATE event_deliveries d \
                 SET locked_until = now() + $2::float8 * interval '1 millisecond' \
                 FROM c WHERE d.shop_id = c.shop_id AND d.event_seq = c.event_seq \
                   AND d.endpoint_id = c.endpoint_id \
                 RETURNING d.shop_id, d.event_seq, d.endpoint_id, d.attempts) \
             SELECT e.seq, e.id, e.shop_id, e.event_type, e.payment_id, e.refund_id, e.payload, \
                 floor(extract(epoch FROM e.created_at) * 1000)::bigint AS created_at_ms, \
                 u.endpoint_id, w.url, w.secret, \
                 CASE WHEN w.previous_secret_until > now() THEN w.previous_secret END \
                     AS previous_secret, \
                 u.attempts::bigint AS attempts \
             FROM u JOIN events e ON e.seq = u.event_seq AND e.shop_id = u.shop_id \
             JOIN webhook_endpoints w ON w.shop_id = u.shop_id AND w.id = u.endpoint_id \
             WHERE w.secret IS NOT NULL",
        )
        .bind(i64::from(limit))
        .bind(millis(lease) as f64)
        .fetch_all(&mut *conn)
        .await
        .map_err(store_error)?;
        let mut due = rows
            .into_iter()
            .map(<(i64, DueEvent)>::try_from)
            .collect::<Result<Vec<_>, _>>()?;
        due.sort_by_key(|(seq, _)| *seq);
        Ok(due.into_iter().map(|(_, due)| due).collect())
    }

    /// Records how a delivery attempt ended and ends its lease, with the
    /// attempt's entry in its payment's history in the same statement.
    ///
    /// `u` is the delivery row the statement updated, with its event's id
    /// and type (its attempt count, its endpoint, and whether this attempt
    /// delivered it or gave it up); a delivery parked meanwhile (its
    /// endpoint disabled) stays parked. `$2` is the
    /// merchant's status; `h` builds the entry ([`HistoryEvent::EventAttempt`])
    /// from them as serde's compact form, in its field order (the status left
    /// out when there is none), checked by the conformance tests. The two
    /// statements differ only in `u`. `true` when this attempt gave the event
    /// up.
    #[tracing::instrument(level = "debug", name = "store.record_attempt", skip_all, fields(db.system = "postgresql"))]
    async fn record_attempt(
        &self,
        shop_id: &ShopId,
        id: &EventId,
        endpoint_id: &EndpointId,
        outcome: &AttemptOutcome,
    ) -> Result<bool, StoreError> {
        let (status, error, delivered, retry_ms, give_up_ms) = attempt_columns(outcome);
        let status = status.map(|s| s as i32);
        let query = if delivered {
            sqlx::query_scalar::<_, bool>(
                "WITH u AS ( \
                     UPDATE event_deliveries d SET attempts = d.attempts + 1, last_status = $2, \
                         last_error = NULL, delivered_at = COALESCE(d.delivered_at, now()), \
                         locked_until = NULL \
                     FROM events e \
                     WHERE e.shop_id = $3 AND e.id = $1 AND d.shop_id = $3 \
                       AND d.event_seq = e.seq AND d.endpoint_id = $4 \
                     RETURNING e.id, e.event_type, e.payment_id, e.refund_id, d.shop_id, \
                         d.attempts, d.endpoint_id, 'delivered' AS result), \
                 h AS ( \
                     INSERT INTO payment_history (payment_id, refund_id, shop_id, kind, event) \
                     SELECT u.payment_id, u.refund_id, u.shop_id, 'event_attempt', \
                         '{\"type\":\"event_attempt\",\"event_id\":' || to_json(u.id)::text \
                         || ',\"event_type\":' || to_json(u.event_type)::text \
                         || ',\"attempt\":' || u.attempts::text \
                         || ',\"result\":\"' || u.result || '\"' \
                         || coalesce(',\"status\":' || $2::int::text, '') \
                         || ',\"endpoint_id\":' || to_json(u.endpoint_id)::text || '}' \
                     FROM u) \
                 SELECT u.result = 'given_up' FROM u",
            )
            .bind(id.as_str())
            .bind(status)
            .bind(shop_id.as_str())
            .bind(endpoint_id.as_str())
        } else {
            // The last retry is due at the give-up time at the latest; an
            // attempt that fails at or after it gives up (its `gave_up_at` is
            // this statement's `now()`).
            sqlx::query_scalar::<_, bool>(
                "WITH u AS ( \
                     UPDATE event_deliveries d SET attempts = d.attempts + 1, last_status = $2, \
                         last_error = $5, locked_until = NULL, \
                         gave_up_at = CASE WHEN d.delivered_at IS NULL \
                             AND now() >= d.due_since + $7::float8 * interval '1 millisecond' \
                             THEN now() ELSE d.gave_up_at END, \
                         next_attempt_at = CASE \
                             WHEN d.next_attempt_at >= to_timestamp($8::float8 / 1000) \
                             THEN d.next_attempt_at \
                             ELSE LEAST(now() + $6::float8 * interval '1 millisecond', \
                                 d.due_since + $7::float8 * interval '1 millisecond') END \
                     FROM events e \
                     WHERE e.shop_id = $3 AND e.id = $1 AND d.shop_id = $3 \
                       AND d.event_seq = e.seq AND d.endpoint_id = $4 \
                     RETURNING e.id, e.event_type, e.payment_id, e.refund_id, d.shop_id, \
                         d.attempts, d.endpoint_id, \
                         CASE WHEN d.gave_up_at IS NOT NULL AND d.gave_up_at = now() \
                              THEN 'given_up' ELSE 'failed' END AS result), \
                 h AS ( \
                     INSERT INTO payment_history (payment_id, refund_id, shop_id, kind, event) \
                     SELECT u.payment_id, u.refund_id, u.shop_id, 'event_attempt', \
                         '{\"type\":\"event_attempt\",\"event_id\":' || to_json(u.id)::text \
                         || ',\"event_type\":' || to_json(u.event_type)::text \
                         || ',\"attempt\":' || u.attempts::text \
                         || ',\"result\":\"' || u.result || '\"' \
                         || coalesce(',\"status\":' || $2::int::text, '') \
                         || ',\"endpoint_id\":' || to_json(u.endpoint_id)::text || '}' \
                     FROM u) \
                 SELECT u.result = 'given_up' FROM u",
            )
            .bind(id.as_str())
            .bind(status)
            .bind(shop_id.as_str())
            .bind(endpoint_id.as_str())
            .bind(error)
            .bind(retry_ms as f64)
            .bind(give_up_ms as f64)
            .bind(PARKED_UNTIL_MS as f64)
        };
        let gave_up = query
            .fetch_optional(&mut *self.conn().await?)
            .await
            .map_err(store_error)?;
        Ok(gave_up.unwrap_or(false))
    }
}
