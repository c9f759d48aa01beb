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
use sqlx::{Postgres, Transaction};

use super::{PgStore, store_error};
use crate::codec::{attempt_columns, millis};
use crate::rows::{EndpointRow, EventRow};

/// The columns of an event row ([`EventRow`]), with times as unix
/// milliseconds.
macro_rules! event_columns {
    () => {
        "seq, id, shop_id, event_type, payment_id, refund_id, payload, \
         floor(extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms, \
         attempts::bigint AS attempts, \
         floor(extract(epoch FROM next_attempt_at) * 1000)::bigint AS next_attempt_at_ms, \
         floor(extract(epoch FROM delivered_at) * 1000)::bigint AS delivered_at_ms, \
         floor(extract(epoch FROM gave_up_at) * 1000)::bigint AS gave_up_at_ms, \
         last_status::bigint AS last_status, last_error"
    };
}
pub(super) use event_columns;

/// Writes a merchant event in the transaction of its transition.
pub(super) async fn insert_event(
    tx: &mut Transaction<'static, Postgres>,
    event: Option<NewEvent>,
) -> Result<(), StoreError> {
    let Some(event) = event else { return Ok(()) };
    // A shop without a webhook URL gets its events parked (not due), so
    // the relay's scan of due events never reads them; set_webhook makes
    // them due.
    let inserted = sqlx::query(
        "INSERT INTO events (id, shop_id, event_type, payment_id, refund_id, payload, \
             next_attempt_at, capture_id) \
         SELECT $1, $2, $3, $4, $5, $6, \
             CASE WHEN s.webhook_url IS NULL THEN to_timestamp($7::float8 / 1000) \
                  ELSE now() END, $8 \
         FROM shops s WHERE s.id = $2",
    )
    .bind(event.id.as_str())
    .bind(event.shop_id.as_str())
    .bind(event.event_type.as_str())
    .bind(event.payment_id.as_str())
    .bind(event.refund_id.as_ref().map(RefundId::as_str))
    .bind(event.payload.as_slice())
    .bind(PARKED_UNTIL_MS as f64)
    .bind(event.capture_id.as_ref().map(CaptureId::as_str))
    .execute(&mut **tx)
    .await
    .map_err(store_error)?;
    if inserted.rows_affected() != 1 {
        return Err(StoreError::corrupt(format!(
            "event {} for unknown shop {}",
            event.id, event.shop_id
        )));
    }
    Ok(())
}

#[async_trait]
impl Outbox for PgStore {
    /// A shop's merchant events, newest first.
    #[tracing::instrument(level = "debug", name = "store.events", skip_all, fields(db.system = "postgresql"))]
    async fn events(&self, shop_id: &ShopId, query: &EventQuery) -> Result<Vec<Event>, StoreError> {
        super::all(
            self,
            sqlx::query_as::<_, EventRow>(concat!(
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
            .bind(i64::from(query.limit)),
        )
        .await
    }

    /// One merchant event of one shop.
    #[tracing::instrument(level = "debug", name = "store.event", skip_all, fields(db.system = "postgresql"))]
    async fn event(&self, shop_id: &ShopId, id: &EventId) -> Result<Option<Event>, StoreError> {
        super::one(
            self,
            sqlx::query_as::<_, EventRow>(concat!(
                "SELECT ",
                event_columns!(),
                " FROM events WHERE shop_id = $1 AND id = $2"
            ))
            .bind(shop_id.as_str())
            .bind(id.as_str()),
        )
        .await
    }

    /// Makes an event due again now, as if just written, with its payment's
    /// history entry ([`HistoryEvent::EventResent`]) in the same statement.
    #[tracing::instrument(level = "debug", name = "store.resend_event", skip_all, fields(db.system = "postgresql"))]
    async fn resend_event(
        &self,
        shop_id: &ShopId,
        id: &EventId,
    ) -> Result<Option<Event>, StoreError> {
        let resent = HistoryEvent::EventResent {
            event_id: id.as_str().to_owned(),
        };
        super::one(
            self,
            sqlx::query_as::<_, EventRow>(concat!(
                "WITH e AS ( \
                     UPDATE events SET delivered_at = NULL, gave_up_at = NULL, \
                         locked_until = NULL, next_attempt_at = now(), due_since = now() \
                     WHERE shop_id = $1 AND id = $2 RETURNING *), \
                 h AS ( \
                     INSERT INTO payment_history (payment_id, refund_id, shop_id, kind, event) \
                     SELECT payment_id, refund_id, shop_id, 'event_resent', $3 FROM e) \
                 SELECT ",
                event_columns!(),
                " FROM e"
            ))
            .bind(shop_id.as_str())
            .bind(id.as_str())
            .bind(resent.to_json()),
        )
        .await
    }

    /// Claims due events for one delivery attempt each, under a lease.
    #[tracing::instrument(level = "debug", name = "store.claim_due_events", skip_all, fields(db.system = "postgresql"))]
    async fn claim_due_events(
        &self,
        limit: u32,
        lease: Duration,
    ) -> Result<Vec<DueEvent>, StoreError> {
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        // SKIP LOCKED: concurrent relays claim disjoint events. An event
        // waits while an earlier one of its payment is still open (leased
        // or not), so a payment's events go out in commit order.
        let rows = sqlx::query_as::<_, EventRow>(concat!(
            "UPDATE events SET locked_until = now() + $2::float8 * interval '1 millisecond' \
             WHERE seq IN ( \
                 SELECT e.seq FROM events e JOIN shops s ON s.id = e.shop_id \
                 WHERE s.webhook_url IS NOT NULL \
                   AND e.delivered_at IS NULL AND e.gave_up_at IS NULL \
                   AND e.next_attempt_at <= now() \
                   AND (e.locked_until IS NULL OR e.locked_until <= now()) \
                   AND NOT EXISTS (SELECT 1 FROM events p WHERE p.payment_id = e.payment_id \
                       AND p.seq < e.seq AND p.delivered_at IS NULL AND p.gave_up_at IS NULL) \
                 ORDER BY e.seq LIMIT $1 FOR UPDATE OF e SKIP LOCKED) \
             RETURNING ",
            event_columns!()
        ))
        .bind(i64::from(limit))
        .bind(millis(lease) as f64)
        .fetch_all(&mut *tx)
        .await
        .map_err(store_error)?;
        let mut claimed = rows
            .into_iter()
            .map(<(i64, Event)>::try_from)
            .collect::<Result<Vec<_>, _>>()?;
        claimed.sort_by_key(|(seq, _)| *seq);
        // One read of each shop's endpoint per claim, not one per event.
        let mut endpoints: HashMap<ShopId, (WebhookEndpoint, Option<WebhookSecret>)> =
            HashMap::new();
        let mut due = Vec::with_capacity(claimed.len());
        for (_, event) in claimed {
            let (endpoint, previous_secret) = if let Some(known) = endpoints.get(&event.shop_id) {
                known.clone()
            } else {
                let found = sqlx::query_as::<_, EndpointRow>(
                    "SELECT webhook_url, webhook_secret, \
                         CASE WHEN webhook_previous_secret_until > now() \
                              THEN webhook_previous_secret END AS webhook_previous_secret \
                     FROM shops WHERE id = $1",
                )
                .bind(event.shop_id.as_str())
                .fetch_one(&mut *tx)
                .await
                .map_err(store_error)?
                .endpoint()
                .ok_or_else(|| {
                    StoreError::corrupt(format!("shop {} lost its webhook", event.shop_id))
                })?;
                endpoints.insert(event.shop_id.clone(), found.clone());
                found
            };
            due.push(DueEvent {
                event,
                endpoint,
                previous_secret,
            });
        }
        tx.commit().await.map_err(store_error)?;
        Ok(due)
    }

    /// Records how a delivery attempt ended and ends its lease, with the
    /// attempt's entry in its payment's history in the same statement.
    ///
    /// `u` is the event row the statement updated (its id, type and attempt
    /// count, and whether this attempt delivered it or gave it up), `$2` the
    /// merchant's status; `h` builds the entry ([`HistoryEvent::EventAttempt`])
    /// from them as serde's compact form, in its field order (the status left
    /// out when there is none), checked by the conformance tests. The two
    /// statements differ only in `u`. `true` when this attempt gave the event
    /// up.
    #[tracing::instrument(level = "debug", name = "store.record_attempt", skip_all, fields(db.system = "postgresql"))]
    async fn record_attempt(
        &self,
        id: &EventId,
        outcome: &AttemptOutcome,
    ) -> Result<bool, StoreError> {
        let (status, error, delivered, retry_ms, give_up_ms) = attempt_columns(outcome);
        let status = status.map(|s| s as i32);
        let query = if delivered {
            sqlx::query_scalar::<_, bool>(
                "WITH u AS ( \
                     UPDATE events SET attempts = attempts + 1, last_status = $2, \
                         last_error = NULL, delivered_at = COALESCE(delivered_at, now()), \
                         locked_until = NULL \
                     WHERE id = $1 \
                     RETURNING id, event_type, payment_id, refund_id, shop_id, attempts, \
                         'delivered' AS result), \
                 h AS ( \
                     INSERT INTO payment_history (payment_id, refund_id, shop_id, kind, event) \
                     SELECT u.payment_id, u.refund_id, u.shop_id, 'event_attempt', \
                         '{\"type\":\"event_attempt\",\"event_id\":' || to_json(u.id)::text \
                         || ',\"event_type\":' || to_json(u.event_type)::text \
                         || ',\"attempt\":' || u.attempts::text \
                         || ',\"result\":\"' || u.result || '\"' \
                         || coalesce(',\"status\":' || $2::int::text, '') || '}' \
                     FROM u) \
                 SELECT u.result = 'given_up' FROM u",
            )
            .bind(id.as_str())
            .bind(status)
        } else {
            // The last retry is due at the give-up time at the latest; an
            // attempt that fails at or after it gives up (its `gave_up_at` is
            // this statement's `now()`).
            sqlx::query_scalar::<_, bool>(
                "WITH u AS ( \
                     UPDATE events SET attempts = attempts + 1, last_status = $2, \
                         last_error = $3, locked_until = NULL, \
                         gave_up_at = CASE WHEN delivered_at IS NULL \
                             AND now() >= due_since + $5::float8 * interval '1 millisecond' \
                             THEN now() ELSE gave_up_at END, \
                         next_attempt_at = LEAST(now() + $4::float8 * interval '1 millisecond', \
                             due_since + $5::float8 * interval '1 millisecond') \
                     WHERE id = $1 \
                     RETURNING id, event_type, payment_id, refund_id, shop_id, attempts, \
                         CASE WHEN gave_up_at IS NOT NULL AND gave_up_at = now() \
                              THEN 'given_up' ELSE 'failed' END AS result), \
                 h AS ( \
                     INSERT INTO payment_history (payment_id, refund_id, shop_id, kind, event) \
                     SELECT u.payment_id, u.refund_id, u.shop_id, 'event_attempt', \
                         '{\"type\":\"event_attempt\",\"event_id\":' || to_json(u.id)::text \
                         || ',\"event_type\":' || to_json(u.event_type)::text \
                         || ',\"attempt\":' || u.attempts::text \
                         || ',\"result\":\"' || u.result || '\"' \
                         || coalesce(',\"status\":' || $2::int::text, '') || '}' \
                     FROM u) \
                 SELECT u.result = 'given_up' FROM u",
            )
            .bind(id.as_str())
            .bind(status)
            .bind(error)
            .bind(retry_ms as f64)
            .bind(give_up_ms as f64)
        };
        let gave_up = query
            .fetch_optional(&mut *self.conn().await?)
            .await
            .map_err(store_error)?;
        Ok(gave_up.unwrap_or(false))
    }
}
