//! Phase 3 of a payment: the fenced write of its answer with the settlement
//! of its payment and that settlement's merchant event.

use std::time::Duration;

use chargeonce_core::history::{
    AcquirerAttempt, ClaimantFinish, HistoryEvent, SettledBy, answered_events,
};

use chargeonce_core::events::NewEvent;
use chargeonce_core::{FinishOutcome, Lease, Payment, Settlement, StoreError, StoredResponse};
use sqlx::postgres::PgArguments;
use sqlx::{Postgres, Row};

use super::finish_parts::{
    RowFinish, answer_only, answer_stored, bind_answer, deliveries, held_key,
};
use super::history::{Entries, insert_entries};
use super::{PgStore, store_error};
use crate::stored_body;

/// Stores the final response, settling the payment when a settlement is
/// given, in one statement (`settling_statement!` says why that is
/// exact). The history entries (the acquirer calls, the answer, the
/// settlement) are written by the same statement, only if it wrote the
/// rest: on the payment's row when they are the claimant's usual finish,
/// as a history row otherwise.
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
        // One fenced statement: it writes or it does not.
        return answer_only(store, lease, response, ttl, &Entries::of(events)).await;
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
    // instance (migration 0024), and only if its columns hold its values
    // exactly (a latency in a BIGINT, a status in a SMALLINT). That
    // statement has no history part at all: PostgreSQL prepares every part
    // of a statement each time it runs it, even one that writes nothing.
    let compact = ClaimantFinish::of(&payment.id, lease.key.as_str(), &store.instance, &events)
        .and_then(|c| RowFinish::of_claimant(&c));
    let common = Settle {
        lease,
        response,
        ttl,
        payment,
        settlement,
        event: &event,
    };
    if let Some(compact) = compact {
        let (held, settled) = settle_compact(store, &common, &compact).await?;
        match (held, settled) {
            (false, _) => return Ok(FinishOutcome::LeaseLost),
            (true, false) => {}
            (true, true) => return Ok(FinishOutcome::Stored),
        }
        // Nothing was written: the payment was settled meanwhile, or its row
        // says another key or instance claimed it, or the shop has an
        // endpoint (the guarded form). The statement with the entries and
        // the deliveries decides; it checks the lease again, as this one did
        // (a take-over in between makes it write nothing either).
    }
    let entries = Entries::of(events);
    let (held, settled) = settle_with_entries(store, &common, &entries).await?;
    Ok(match (held, settled) {
        (false, _) => FinishOutcome::LeaseLost,
        (true, false) => FinishOutcome::PaymentAlreadySettled,
        (true, true) => FinishOutcome::Stored,
    })
}

/// What both settling statements bind.
#[derive(Clone, Copy)]
struct Settle<'a> {
    lease: &'a Lease,
    response: &'a StoredResponse,
    ttl: Duration,
    payment: &'a Payment,
    settlement: &'a Settlement,
    event: &'a NewEvent,
}

/// The settling statement, one autocommitted statement (one round trip,
/// one snapshot for every part), around its
/// `settled` part and its history part, both of which may bind parameters
/// from `$15` on; the rest binds `$1` to `$14` (see [`Settle::bind`]).
///
/// - `held` locks the key row if this lease still holds it. A row lock
///   waits for a concurrent take-over to end and then re-checks the
///   row's latest version, so this is exact, and it stays true until
///   the commit: nobody else can change the row meanwhile.
/// - `settled` moves the payment from pending, only if `held` found
///   the lease, and sets the order it holds from then on
///   (`live_reference`, which the payments' trigger checks: migration
///   0027). An update re-checks the latest version of the row too,
///   so a settlement committed by a webhook or the reconciler after
///   this statement began is seen and leaves the payment alone.
///   The payment's row is updated in place (HOT: no indexed column
///   changes, migration 0009).
/// - `finished` stores the response, only if the payment moved; the
///   key row is locked by `held`, so it always can.
/// - `event` writes the merchant event, only if the payment moved.
/// - `$parts` (each form's own, from `dequeued!`, `deliveries!` and
///   the history part): `deliveries` writes one delivery per enabled
///   endpoint of the shop that wants the event, `dequeued` takes the
///   payment off the pending queue, the history part writes the payment's
///   entries; each only if the payment moved.
///
/// So either all of them write or none does (held = false: the lease
/// was taken over; held but not settled: the payment was settled
/// meanwhile, or the compact statement's row was not the claimant's, or
/// its guarded form met an endpoint of the shop). The
/// division is a tripwire for that argument: were `settled`, `finished`
/// and `event` ever to disagree on whether they wrote (each writes one
/// row at most: the payment and the key are found by their primary keys),
/// it would abort the statement, and its implicit transaction would write
/// nothing. They are read with `EXISTS`, not `count(*)`: an aggregate and
/// the join of its one-row results are nodes PostgreSQL sets up on every
/// run (bench/pginstructions). Locks are taken key row first, payment row
/// second, as in every other transaction that takes both.
///
/// The payment is found by its primary key alone: its shop and status
/// are checked with `IS NOT DISTINCT FROM` (the same as `=` on these
/// NOT NULL columns), which the planner cannot match to an index. With
/// plain `shop_id = $1 AND status = 'pending'` it picked a partial index
/// instead (`payments_one_live_per_order` by shop before the table is
/// analysed: every live payment of the shop read per finish;
/// `payments_pending` after, an index since replaced by a table), which
/// halved pgbench's payments/s here.
macro_rules! settling_statement {
    ($settled:expr, $parts:expr) => {
        concat!(
            "WITH ",
            held_key!(),
            ", settled AS ( \
                 UPDATE payments SET status = $8, provider_payment_id = $9, \
                     decline_code = $10, updated_at = now(), \
                     live_reference = payment_live_reference($8, hold, captured_minor, \
                         reference)",
            $settled,
            " RETURNING id, created_at, shop_id), \
             finished AS (",
            answer_stored!("$1", "$2", "$3", "$4", "$5", "$6", "$7"),
            " AND EXISTS (SELECT 1 FROM settled) \
                 RETURNING 1), \
             event AS ( \
                 INSERT INTO events (id, shop_id, event_type, payment_id, payload) \
                 SELECT $12, $1, $13, settled.id, $14 FROM settled \
                 RETURNING seq, payment_id)",
            $parts,
            " SELECT held, settled, \
                 1 / CASE WHEN settled = finished AND settled = event THEN 1 ELSE 0 END \
                     AS whole \
             FROM (SELECT EXISTS (SELECT 1 FROM held) AS held, \
                          EXISTS (SELECT 1 FROM settled) AS settled, \
                          EXISTS (SELECT 1 FROM finished) AS finished, \
                          EXISTS (SELECT 1 FROM event) AS event) parts"
        )
    };
}

/// The condition on `settled` that stands in for `deliveries!` in the
/// usual finish of a shop with no endpoint (see [`super::fanout`]): the
/// shop has no enabled endpoint, in the statement's own snapshot, the one
/// `deliveries` would have joined. Where it has one (whatever events that
/// one wants: the filter's expression is left out, as set-up cost), the
/// payment does not move and nothing is written.
macro_rules! no_endpoint {
    () => {
        " AND NOT EXISTS (SELECT 1 FROM webhook_endpoints w \
             WHERE w.shop_id = $1 AND w.enabled AND w.deleted_at IS NULL)"
    };
}

/// The settling statement's part that takes the payment off the pending
/// queue (`pending_payments`). A payment settled by its own request's usual
/// finish is never there (it was in flight, found by its key:
/// `super::pending`), so that statement leaves this part out: setting it up
/// was 3 % of a fresh payment's instructions, for an index probe that found
/// nothing. The other form keeps it for the payment another key finished
/// with meanwhile; a queue row left behind anyway is read only joined to
/// its pending payment and is deleted by the key sweeper
/// (`super::pending::drop_settled`).
macro_rules! dequeued {
    () => {
        ", dequeued AS ( \
             DELETE FROM pending_payments q USING settled \
             WHERE q.created_at = settled.created_at AND q.payment_id = settled.id \
               AND q.shop_id = settled.shop_id)"
    };
}

/// The usual finish's condition on `settled`: the row confirms the payment
/// was claimed with this key (`$2`) by this instance (`$16`), and the
/// finish is kept in the row's columns.
macro_rules! claimant_settled {
    ($guard:expr) => {
        concat!(
            ", (finish_seq, finish_at, finish_outcome, finish_latency_ms, finish_answer) = \
                 (nextval('payment_history_seq_seq'), now(), $15::text, $17::bigint, \
                  $18::smallint) \
             WHERE id = $11 AND (shop_id, status) IS NOT DISTINCT FROM ($1, 'pending') \
               AND idempotency_key = $2 AND claimed_by = $16 \
               AND EXISTS (SELECT 1 FROM held)",
            $guard
        )
    };
}

/// The usual finish: the claimant's, kept on the payment's row (migration
/// 0024) by `settled` itself, with no history part. It settles only a row
/// that confirms the payment was claimed with this key (`$2`) by this
/// instance (`$16`); when the row says otherwise it writes nothing, as for
/// a payment settled meanwhile, and [`finish`] runs the other statement.
///
/// Its form depends on the shop ([`super::fanout`]): for a shop seen with
/// endpoints, with the `deliveries!` part; for any other, without it and
/// guarded by `no_endpoint!`, so that it writes nothing (and the shop is
/// marked) where the shop has an endpoint after all.
async fn settle_compact(
    store: &PgStore,
    settle: &Settle<'_>,
    compact: &RowFinish,
) -> Result<(bool, bool), StoreError> {
    let shop = &settle.lease.shop_id;
    let fanned = store.endpoint_hints.has_endpoints(shop);
    let statement = if fanned {
        sqlx::query(settling_statement!(
            claimant_settled!(""),
            concat!(", ", deliveries!("$1", "$13"))
        ))
    } else {
        sqlx::query(settling_statement!(claimant_settled!(no_endpoint!()), ""))
    };
    let statement = settle
        .bind(statement)?
        .bind(compact.outcome)
        .bind(&store.instance)
        .bind(compact.latency_ms)
        .bind(compact.answer_status);
    let (held, settled) = run_settle(store, settle.lease, statement).await?;
    if held && !settled && !fanned {
        // The shop has an endpoint, or the payment was settled meanwhile
        // (rare); either way the next finishes of this shop try the form
        // with the deliveries first, for a while.
        store.endpoint_hints.mark(shop);
    }
    Ok((held, settled))
}

/// Any other finish: the entries are written as a history row (by the
/// `history` part, from arrays bound as parameters, in their order), and
/// the row's finish columns stay NULL.
async fn settle_with_entries(
    store: &PgStore,
    settle: &Settle<'_>,
    entries: &Entries,
) -> Result<(bool, bool), StoreError> {
    let statement = sqlx::query(settling_statement!(
        " WHERE id = $11 AND (shop_id, status) IS NOT DISTINCT FROM ($1, 'pending') \
           AND EXISTS (SELECT 1 FROM held)",
        concat!(
            ", ",
            deliveries!("$1", "$13"),
            dequeued!(),
            ", history AS (",
            insert_entries!(
                "(SELECT id AS payment_id, NULL::text AS refund_id, shop_id FROM settled)",
                "$15",
                "$16"
            ),
            ")"
        )
    ));
    let statement = settle
        .bind(statement)?
        .bind(&entries.kinds)
        .bind(&entries.events);
    run_settle(store, settle.lease, statement).await
}

impl<'a> Settle<'a> {
    /// Binds `$1` to `$14` of `settling_statement!`.
    fn bind(
        &self,
        statement: sqlx::query::Query<'a, Postgres, PgArguments>,
    ) -> Result<sqlx::query::Query<'a, Postgres, PgArguments>, StoreError> {
        let Self {
            lease,
            response,
            ttl,
            payment,
            settlement,
            event,
        } = *self;
        let statement = statement
            .bind(lease.shop_id.as_str())
            .bind(lease.key.as_str())
            .bind(lease.token.as_uuid());
        Ok(bind_answer(statement, response, ttl)?
            .bind(settlement.status.as_str())
            .bind(&settlement.provider_payment_id)
            .bind(&settlement.decline_code)
            .bind(payment.id.as_str())
            .bind(event.id.as_str())
            .bind(event.event_type.as_str())
            .bind(stored_body::compressed(&event.payload).into_owned()))
    }
}

/// Runs a settling statement on the hot path's connection and reads what
/// it found: whether the lease held, and whether it settled the payment
/// (or, for a refund's, the refund: `refunds.rs`).
pub(super) async fn run_settle(
    store: &PgStore,
    lease: &Lease,
    statement: sqlx::query::Query<'_, Postgres, PgArguments>,
) -> Result<(bool, bool), StoreError> {
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
    let settled: bool = row.try_get("settled").map_err(store_error)?;
    Ok((held, settled))
}
