//! The merchant events (the outbox): writing one in the transaction of its
//! transition, the shop's reads of them, and the relay's claims and
//! attempts.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use chargeonce_core::CaptureId;
use chargeonce_core::events::{
    AttemptOutcome, DueEvent, Event, EventId, EventQuery, NewEvent, PARKED_UNTIL_MS,
    WebhookEndpoint,
};
use chargeonce_core::history::HistoryEvent;
use chargeonce_core::store::Outbox;
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{RefundId, ShopId, StoreError};
use chargeonce_sqlite::Write;
use chargeonce_sqlite::rusqlite::{Connection, OptionalExtension, params};

use super::history::record;
use super::{Fail, Result, SqliteStore, all, now_ms, one};
use crate::codec::{attempt_columns, millis};
use crate::rows::{EndpointRow, EventRow, FromSqliteRow};

/// The columns of an event row ([`EventRow`]); times are unix milliseconds
/// already.
macro_rules! event_columns {
    () => {
        "seq, id, shop_id, event_type, payment_id, refund_id, payload, \
         created_at AS created_at_ms, attempts, next_attempt_at AS next_attempt_at_ms, \
         delivered_at AS delivered_at_ms, gave_up_at AS gave_up_at_ms, last_status, last_error"
    };
}
pub(super) use event_columns;

/// Writes a merchant event in the transaction of its transition.
pub(super) fn insert_event(conn: &Connection, event: Option<NewEvent>) -> Result<()> {
    let Some(event) = event else { return Ok(()) };
    // A shop without a webhook URL gets its events parked (not due), so
    // the relay's scan of due events never reads them; set_webhook makes
    // them due.
    let inserted = conn
        .prepare_cached(concat!(
            "INSERT INTO events (id, shop_id, event_type, payment_id, refund_id, payload, \
                 capture_id, created_at, due_since, next_attempt_at) \
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?8, ",
            now_ms!(),
            ", ",
            now_ms!(),
            ", CASE WHEN s.webhook_url IS NULL THEN ?7 ELSE ",
            now_ms!(),
            " END FROM shops s WHERE s.id = ?2"
        ))?
        .execute(params![
            event.id.as_str(),
            event.shop_id.as_str(),
            event.event_type.as_str(),
            event.payment_id.as_str(),
            event.refund_id.as_ref().map(RefundId::as_str),
            event.payload.as_slice(),
            PARKED_UNTIL_MS,
            event.capture_id.as_ref().map(CaptureId::as_str),
        ])?;
    if inserted != 1 {
        return Err(Fail(StoreError::corrupt(format!(
            "event {} for unknown shop {}",
            event.id, event.shop_id
        ))));
    }
    Ok(())
}

/// One event of one shop, on whichever connection.
fn event_in(conn: &Connection, shop_id: &ShopId, id: &EventId) -> Result<Option<Event>> {
    one::<EventRow, _>(
        conn,
        concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE shop_id = ?1 AND id = ?2"
        ),
        params![shop_id.as_str(), id.as_str()],
    )
}

#[async_trait]
impl Outbox for SqliteStore {
    /// A shop's merchant events, newest first.
    #[tracing::instrument(level = "debug", name = "store.events", skip_all, fields(db.system = "sqlite"))]
    async fn events(&self, shop_id: &ShopId, query: &EventQuery) -> Result<Vec<Event>, StoreError> {
        let (shop_id, query) = (shop_id.clone(), query.clone());
        self.read(move |conn| {
            all::<EventRow, _>(
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
            )
        })
        .await
    }

    /// One merchant event of one shop.
    #[tracing::instrument(level = "debug", name = "store.event", skip_all, fields(db.system = "sqlite"))]
    async fn event(&self, shop_id: &ShopId, id: &EventId) -> Result<Option<Event>, StoreError> {
        let (shop_id, id) = (shop_id.clone(), id.clone());
        self.read(move |conn| event_in(conn, &shop_id, &id)).await
    }

    /// Makes an event due again now, as if just written.
    #[tracing::instrument(level = "debug", name = "store.resend_event", skip_all, fields(db.system = "sqlite"))]
    async fn resend_event(
        &self,
        shop_id: &ShopId,
        id: &EventId,
    ) -> Result<Option<Event>, StoreError> {
        let (shop_id, id) = (shop_id.clone(), id.clone());
        self.write_new(move |conn| {
            let resent = conn
                .prepare_cached(concat!(
                    "UPDATE events SET delivered_at = NULL, gave_up_at = NULL, \
                         locked_until = NULL, next_attempt_at = ",
                    now_ms!(),
                    ", due_since = ",
                    now_ms!(),
                    " WHERE shop_id = ?1 AND id = ?2"
                ))?
                .execute(params![shop_id.as_str(), id.as_str()])?;
            if resent == 0 {
                return Ok(Write::Commit(None));
            }
            let event = event_in(conn, &shop_id, &id)?;
            if let Some(event) = &event {
                record(
                    conn,
                    event.payment_id.as_str(),
                    event.refund_id.as_ref().map(RefundId::as_str),
                    &HistoryEvent::EventResent {
                        event_id: id.as_str().to_owned(),
                    },
                )?;
            }
            Ok(Write::Commit(event))
        })
        .await
    }

    /// Claims due events for one delivery attempt each, under a lease.
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
                        "SELECT 1 FROM events e JOIN shops s ON s.id = e.shop_id \
                         WHERE s.webhook_url IS NOT NULL \
                           AND e.delivered_at IS NULL AND e.gave_up_at IS NULL \
                           AND e.next_attempt_at <= ",
                        now_ms!(),
                        " AND (e.locked_until IS NULL OR e.locked_until <= ",
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
            // One writer: nobody claims between these statements. An event
            // waits while an earlier one of its payment is still open. (One
            // RETURNING per relay poll, for many rows: it stays.)
            let mut claimed = all::<EventRow, (i64, Event)>(
                conn,
                concat!(
                    "UPDATE events SET locked_until = ",
                    now_ms!(),
                    " + ?2 WHERE seq IN ( \
                         SELECT e.seq FROM events e JOIN shops s ON s.id = e.shop_id \
                         WHERE s.webhook_url IS NOT NULL \
                           AND e.delivered_at IS NULL AND e.gave_up_at IS NULL \
                           AND e.next_attempt_at <= ",
                    now_ms!(),
                    " AND (e.locked_until IS NULL OR e.locked_until <= ",
                    now_ms!(),
                    ") AND NOT EXISTS (SELECT 1 FROM events p WHERE p.payment_id = e.payment_id \
                               AND p.seq < e.seq AND p.delivered_at IS NULL \
                               AND p.gave_up_at IS NULL) \
                         ORDER BY e.seq LIMIT ?1) \
                     RETURNING ",
                    event_columns!()
                ),
                params![i64::from(limit), millis(lease)],
            )?;
            claimed.sort_by_key(|(seq, _)| *seq);
            // One read of each shop's endpoint per claim, not one per event.
            let mut endpoints: HashMap<ShopId, (WebhookEndpoint, Option<WebhookSecret>)> =
                HashMap::new();
            let mut due = Vec::with_capacity(claimed.len());
            for (_, event) in claimed {
                let (endpoint, previous_secret) = match endpoints.get(&event.shop_id) {
                    Some(known) => known.clone(),
                    None => {
                        let found = conn
                            .prepare_cached(concat!(
                                "SELECT webhook_url, webhook_secret, \
                                     CASE WHEN webhook_previous_secret_until > ",
                                now_ms!(),
                                " THEN webhook_previous_secret END AS webhook_previous_secret \
                                 FROM shops WHERE id = ?1"
                            ))?
                            .query_row(params![event.shop_id.as_str()], EndpointRow::from_sqlite)?
                            .endpoint()
                            .ok_or_else(|| {
                                StoreError::corrupt(format!(
                                    "shop {} lost its webhook",
                                    event.shop_id
                                ))
                            })?;
                        endpoints.insert(event.shop_id.clone(), found.clone());
                        found
                    }
                };
                due.push(DueEvent {
                    event,
                    endpoint,
                    previous_secret,
                });
            }
            Ok(Write::Commit(due))
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
        id: &EventId,
        outcome: &AttemptOutcome,
    ) -> Result<bool, StoreError> {
        let id = id.clone();
        let (status, error, delivered, retry_ms, give_up_ms) = attempt_columns(outcome);
        let answered = match outcome {
            AttemptOutcome::Delivered { status } => Some(*status),
            AttemptOutcome::Failed { status, .. } => *status,
        };
        self.write(move |conn| {
            let Some((payment_id, refund_id, event_type, attempts, gave_up_before)) = conn
                .prepare_cached(
                    "SELECT payment_id, refund_id, event_type, attempts, \
                             gave_up_at IS NOT NULL FROM events WHERE id = ?1",
                )?
                .query_row(params![id.as_str()], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, Option<String>>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, i64>(3)?,
                        row.get::<_, bool>(4)?,
                    ))
                })
                .optional()?
            else {
                return Ok(Write::Commit(false));
            };
            let result = if delivered {
                conn.prepare_cached(concat!(
                    "UPDATE events SET attempts = attempts + 1, last_status = ?2, \
                         last_error = NULL, delivered_at = COALESCE(delivered_at, ",
                    now_ms!(),
                    "), locked_until = NULL WHERE id = ?1"
                ))?
                .execute(params![id.as_str(), status])?;
                "delivered"
            } else {
                conn.prepare_cached(concat!(
                    "UPDATE events SET attempts = attempts + 1, last_status = ?2, \
                         last_error = ?3, locked_until = NULL, \
                         gave_up_at = CASE WHEN delivered_at IS NULL AND ",
                    now_ms!(),
                    " >= due_since + ?5 THEN ",
                    now_ms!(),
                    " ELSE gave_up_at END, next_attempt_at = MIN(",
                    now_ms!(),
                    " + ?4, due_since + ?5) WHERE id = ?1"
                ))?
                .execute(params![
                    id.as_str(),
                    status,
                    error,
                    retry_ms,
                    give_up_ms
                ])?;
                let gave_up: bool = conn
                    .prepare_cached("SELECT gave_up_at IS NOT NULL FROM events WHERE id = ?1")?
                    .query_row(params![id.as_str()], |row| row.get(0))?;
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
                },
            )?;
            Ok(Write::Commit(result == "given_up"))
        })
        .await
    }
}
