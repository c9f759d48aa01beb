//! Phase 3 of a payment: the fenced write of its answer with the settlement
//! of its payment and that settlement's merchant event.

use std::time::Duration;

use chargeonce_core::history::{
    AcquirerAttempt, ClaimantFinish, HistoryEvent, SettledBy, answered_events,
};

use chargeonce_core::events::NewEvent;
use chargeonce_core::{FinishOutcome, Lease, Payment, Settlement, StoreError, StoredResponse};
use sqlx::Row;

use super::history::{Entries, insert_entries};
use super::keys::finish_key;
use super::outbox::wants;
use super::{PgStore, store_error};
use crate::codec::{encode_headers, millis};
use crate::stored_body;

/// Stores the final response, settling the payment when a settlement is
/// given; see the comments inside for why one statement is exact. The
/// history entries (the acquirer calls, the answer, the settlement) are
/// written by the same statement, only if it wrote the rest.
pub(super) async fn finish(
    store: &PgStore,
    lease: &Lease,
    settlement: Option<(&Payment, &Settlement)>,
    response: &StoredResponse,
    ttl: Duration,
    attempts: &[AcquirerAttempt],
) -> Result<FinishOutcome, StoreError> {
    let mut events = answered_events(lease, response, attempts, &store.instance);
    let Some((payment, settlement)) = settlement else {
        let entries = Entries::of(events);
        // One fenced statement: it writes or it does not.
        return Ok(
            if finish_key(&mut *store.conn().await?, lease, response, ttl, &entries).await? {
                FinishOutcome::Stored
            } else {
                FinishOutcome::LeaseLost
            },
        );
    };
    // The payment's order and amount never change, so its event can be
    // built before the statement that settles it.
    let event =
        NewEvent::payment_settled(&payment.clone().settled(settlement)).ok_or_else(|| {
            StoreError::other(format!(
                "finish of key {} with a settlement that is not final",
                lease.key
            ))
        })?;
    events.push(HistoryEvent::Settled {
        status: settlement.status,
        by: SettledBy::Request {
            key: lease.key.as_str().to_owned(),
        },
    });
    // The usual finish is kept on the payment's row, not as entries, if
    // the row confirms the payment was claimed with this key by this
    // instance (migration 0024); the entries are bound either way.
    // (And only if its columns hold its values exactly: a latency in a
    // BIGINT, a status in a SMALLINT.)
    let compact = ClaimantFinish::of(&payment.id, lease.key.as_str(), &store.instance, &events)
        .filter(|c| i64::try_from(c.latency_ms).is_ok() && i16::try_from(c.answer_status).is_ok());
    let entries = Entries::of(events);
    // One autocommitted statement (one round trip, one implicit
    // transaction, one snapshot for every part):
    // - `held` locks the key row if this lease still holds it. A row lock
    //   waits for a concurrent take-over to end and then re-checks the
    //   row's latest version, so this is exact, and it stays true until
    //   the commit: nobody else can change the row meanwhile.
    // - `settled` moves the payment from pending, only if `held` found
    //   the lease. An update re-checks the latest version of the row too,
    //   so a settlement committed by a webhook or the reconciler after
    //   this statement began is seen and leaves the payment alone.
    // - `dequeued` takes the payment off the pending queue
    //   (`pending_payments`), only if it moved. A payment settled by its
    //   own request is almost never there (it was in flight, found by its
    //   key: `super::pending`), so this is an index probe that finds
    //   nothing; it is there for the payment another key finished with
    //   meanwhile. With `settled` it is the whole settle: the payment's row
    //   is updated in place (HOT: no indexed column changes, migration
    //   0009).
    //   When the finish is the claimant's (`$17` is its charge's outcome,
    //   not NULL) and the row says the payment was claimed with this key
    //   (`$2`) by this instance (`$18`), the same update keeps the entries'
    //   few values on the row (migration 0024), with the seq their history
    //   row would have had; otherwise they are left NULL.
    // - `finished` stores the response, only if the payment moved; the
    //   key row is locked by `held`, so it always can.
    // - `event` writes the merchant event, only if the payment moved, and
    //   `deliveries` one delivery per enabled endpoint of the shop that
    //   wants it (none for a shop without endpoints).
    // - `history` writes the payment's history entries (the acquirer
    //   calls, the answer, the settlement), only if the payment moved and
    //   its row did not take them: from arrays bound as parameters, in
    //   their order.
    // So either all three writes happen or none does (held = false:
    // the lease was taken over; held but not settled: the payment was
    // settled meanwhile). The division is a tripwire for that argument:
    // were the three counts ever to disagree, it would abort the
    // statement, and its implicit transaction would write nothing.
    // Locks are taken key row first, payment row second, as in every
    // other transaction that takes both.
    //
    // The payment is found by its primary key alone: its shop and status
    // are checked with `IS NOT DISTINCT FROM` (the same as `=` on these
    // NOT NULL columns), which the planner cannot match to an index. With
    // plain `shop_id = $1 AND status = 'pending'` it picked a partial index
    // instead (`payments_one_live_per_order` by shop before the table is
    // analysed: every live payment of the shop read per finish;
    // `payments_pending` after, an index since replaced by a table), which
    // halved pgbench's payments/s here; the live-order index still leads
    // with `shop_id`.
    let statement = sqlx::query(concat!(
        "WITH held AS MATERIALIZED ( \
             SELECT 1 FROM idempotency_keys \
             WHERE shop_id = $1 AND key = $2 AND lease_token = $3 \
               AND recovery_point <> 'finished' \
             FOR NO KEY UPDATE), \
         settled AS ( \
             UPDATE payments SET status = $8, provider_payment_id = $9, \
                 decline_code = $10, updated_at = now(), \
                 (finish_seq, finish_at, finish_outcome, finish_latency_ms, finish_answer) = ( \
                     SELECT nextval('payment_history_seq_seq'), now(), $17::text, $19::bigint, \
                         $20::smallint \
                     WHERE $17::text IS NOT NULL \
                       AND idempotency_key = $2 AND claimed_by = $18) \
             WHERE id = $11 AND (shop_id, status) IS NOT DISTINCT FROM ($1, 'pending') \
               AND EXISTS (SELECT 1 FROM held) \
             RETURNING id, created_at, shop_id, finish_seq), \
         dequeued AS ( \
             DELETE FROM pending_payments q USING settled \
             WHERE q.created_at = settled.created_at AND q.payment_id = settled.id \
               AND q.shop_id = settled.shop_id), \
         finished AS ( \
             UPDATE idempotency_keys SET recovery_point = 'finished', \
                 response_status = $4, response_headers = $5, response_body = $6, \
                 lease_token = NULL, locked_until = NULL, \
                 expires_at = GREATEST(expires_at, \
                     now() + $7::float8 * interval '1 millisecond') \
             WHERE shop_id = $1 AND key = $2 AND lease_token = $3 \
               AND recovery_point <> 'finished' \
               AND EXISTS (SELECT 1 FROM settled) \
             RETURNING 1), \
         event AS ( \
             INSERT INTO events (id, shop_id, event_type, payment_id, payload) \
             SELECT $12, $1, $13, settled.id, $14 FROM settled \
             RETURNING seq, payment_id), \
         deliveries AS ( \
             INSERT INTO event_deliveries (shop_id, event_seq, endpoint_id, payment_id) \
             SELECT $1, event.seq, w.id, event.payment_id \
             FROM event JOIN webhook_endpoints w ON w.shop_id = $1 \
             WHERE w.enabled AND w.deleted_at IS NULL AND ",
        wants!("$13"),
        "), \
         history AS (",
        insert_entries!(
            "(SELECT id AS payment_id, NULL::text AS refund_id, shop_id FROM settled \
              WHERE finish_seq IS NULL)",
            "$15",
            "$16"
        ),
        ") \
         SELECT h.held, s.n AS settled, \
             1 / CASE WHEN s.n = f.n AND s.n = e.n THEN 1 ELSE 0 END AS whole \
         FROM (SELECT EXISTS (SELECT 1 FROM held) AS held) h, \
              (SELECT count(*) AS n FROM settled) s, \
              (SELECT count(*) AS n FROM finished) f, \
              (SELECT count(*) AS n FROM event) e"
    ))
    .bind(lease.shop_id.as_str())
    .bind(lease.key.as_str())
    .bind(lease.token.as_uuid())
    .bind(i32::from(response.status))
    .bind(encode_headers(&response.headers)?)
    .bind(stored_body::compressed(&response.body).as_ref())
    .bind(millis(ttl) as f64)
    .bind(settlement.status.as_str())
    .bind(&settlement.provider_payment_id)
    .bind(&settlement.decline_code)
    .bind(payment.id.as_str())
    .bind(event.id.as_str())
    .bind(event.event_type.as_str())
    .bind(stored_body::compressed(&event.payload).as_ref())
    .bind(&entries.kinds)
    .bind(&entries.events)
    .bind(compact.map(|c| c.outcome.as_str()))
    .bind(&store.instance)
    .bind(compact.and_then(|c| i64::try_from(c.latency_ms).ok()))
    .bind(compact.and_then(|c| i16::try_from(c.answer_status).ok()));
    // The hot path: its connection is parked again after it.
    let row = store
        .conns
        .run(async |conn| statement.fetch_one(conn).await)
        .await
        .map_err(|error| match error {
            sqlx::Error::Database(db) if db.code().as_deref() == Some("22012") => {
                StoreError::other(format!(
                    "finish of key {}: its writes disagreed, so none was made",
                    lease.key
                ))
            }
            other => store_error(other),
        })?;
    let held: bool = row.try_get("held").map_err(store_error)?;
    let settled: i64 = row.try_get("settled").map_err(store_error)?;
    Ok(match (held, settled) {
        (false, _) => FinishOutcome::LeaseLost,
        (true, 0) => FinishOutcome::PaymentAlreadySettled,
        (true, _) => FinishOutcome::Stored,
    })
}
