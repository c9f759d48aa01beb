//! What every finish's statement shares: the lock of the key row a lease
//! holds, the update that stores the key's answer, the deliveries of the
//! merchant event, the binding of an answer's parameters, and the columns
//! of a refund's or capture's usual finish; and the finish of a key with no
//! settlement. A payment's finish (`finish.rs`), a
//! refund's (`refunds.rs`), a capture's and a void's (`authorizations.rs`)
//! and a key's alone (`keys.rs`) are assembled from these, so that the
//! fence and the answer they store cannot drift apart.

use std::time::Duration;

use chargeonce_core::history::{ClaimantFinish, HistoryEvent, TurnFinish};
use chargeonce_core::{AcquirerOutcomeKind, FinishOutcome, Lease, StoreError, StoredResponse};
use sqlx::Postgres;
use sqlx::postgres::PgArguments;
use sqlx::query::Query;

use super::PgStore;
use super::history::Entries;
use super::keys::finish_key;
use crate::codec::{encode_headers, millis};
use crate::stored_body;

/// The CTE `held` (to follow a `WITH`): locks the key row (`$1` the shop,
/// `$2` the key) if the lease `$3` still holds it. A row lock waits for a
/// concurrent take-over to end and then re-checks the row's latest
/// version, so this is exact, and it stays true until the commit: nobody
/// else can change the row meanwhile. `MATERIALIZED`: it runs once, first,
/// whatever the rest of the statement reads of it.
macro_rules! held_key {
    () => {
        "held AS MATERIALIZED ( \
             SELECT 1 FROM idempotency_keys \
             WHERE shop_id = $1 AND key = $2 AND lease_token = $3 \
               AND recovery_point <> 'finished' \
             FOR NO KEY UPDATE)"
    };
}
pub(super) use held_key;

/// The update that stores a key's answer and ends its lease, fenced by the
/// lease: the key row of the shop `$shop` and key `$key` while the lease
/// `$token` holds it, given the answer's status, headers, body and how long
/// the key is kept after it (`$ttl`, milliseconds), each the SQL parameter
/// named. The caller appends its own conditions and `RETURNING`.
macro_rules! answer_stored {
    ($shop:literal, $key:literal, $token:literal, $status:literal, $headers:literal,
     $body:literal, $ttl:literal) => {
        concat!(
            "UPDATE idempotency_keys SET recovery_point = 'finished', response_status = ",
            $status,
            ", response_headers = ",
            $headers,
            ", response_body = ",
            $body,
            ", lease_token = NULL, locked_until = NULL, \
             expires_at = GREATEST(expires_at, now() + ",
            $ttl,
            "::float8 * interval '1 millisecond') \
             WHERE shop_id = ",
            $shop,
            " AND key = ",
            $key,
            " AND lease_token = ",
            $token,
            " AND recovery_point <> 'finished'"
        )
    };
}
pub(super) use answer_stored;

/// The CTE `deliveries` (to follow a comma): one delivery of the statement's
/// `event` (a CTE returning the event's `seq` and `payment_id`) per enabled
/// endpoint of the shop `$shop` that wants events of the type `$type`.
macro_rules! deliveries {
    ($shop:literal, $type:literal) => {
        concat!(
            "deliveries AS ( \
                 INSERT INTO event_deliveries (shop_id, event_seq, endpoint_id, payment_id) \
                 SELECT ",
            $shop,
            ", event.seq, w.id, event.payment_id \
                 FROM event JOIN webhook_endpoints w ON w.shop_id = ",
            $shop,
            " WHERE w.enabled AND w.deleted_at IS NULL AND ",
            $crate::postgres::outbox::wants!($type),
            ")"
        )
    };
}
pub(super) use deliveries;

/// Binds an answer's four parameters after those `query` has: its status,
/// its headers (in their stored form), its body (compressed when that is
/// shorter) and how long its key is kept (milliseconds).
pub(super) fn bind_answer<'q>(
    query: Query<'q, Postgres, PgArguments>,
    response: &StoredResponse,
    ttl: Duration,
) -> Result<Query<'q, Postgres, PgArguments>, StoreError> {
    Ok(query
        .bind(i32::from(response.status))
        .bind(encode_headers(&response.headers)?)
        .bind(stored_body::compressed(&response.body).into_owned())
        .bind(millis(ttl) as f64))
}

/// The finish of a key with no settlement (its refund, capture or void
/// already final, or a payment's answer that settles nothing): its answer
/// and `entries`, one fenced statement ([`finish_key`]).
pub(super) async fn answer_only(
    store: &PgStore,
    lease: &Lease,
    response: &StoredResponse,
    ttl: Duration,
    entries: &Entries,
) -> Result<FinishOutcome, StoreError> {
    let stored = finish_key(&mut *store.conn().await?, lease, response, ttl, entries).await?;
    Ok(if stored {
        FinishOutcome::Stored
    } else {
        FinishOutcome::LeaseLost
    })
}

/// A usual finish kept on its row, in the types of the row's columns: a
/// payment's ([`ClaimantFinish`], migration 0024), a refund's or a
/// capture's ([`TurnFinish`], migrations 0029 and 0030), when they hold it
/// exactly (a latency in a BIGINT, a status in a SMALLINT).
pub(super) struct RowFinish {
    pub(super) outcome: &'static str,
    pub(super) latency_ms: i64,
    pub(super) answer_status: i16,
}

impl RowFinish {
    /// The columns of a call's outcome and latency and an answer's status.
    fn new(outcome: AcquirerOutcomeKind, latency_ms: u64, answer_status: u16) -> Option<Self> {
        Some(Self {
            outcome: outcome.as_str(),
            latency_ms: i64::try_from(latency_ms).ok()?,
            answer_status: i16::try_from(answer_status).ok()?,
        })
    }

    /// A payment's usual finish.
    pub(super) fn of_claimant(finish: &ClaimantFinish) -> Option<Self> {
        Self::new(finish.outcome, finish.latency_ms, finish.answer_status)
    }

    /// The compact form of `events`, a finish of `lease`'s key by
    /// `instance` of the refund or capture sent with `acquirer_key`, if it
    /// is the usual one and the columns hold it.
    pub(super) fn of_turn(
        acquirer_key: &str,
        lease: &Lease,
        instance: &str,
        events: &[HistoryEvent],
    ) -> Option<Self> {
        let finish = TurnFinish::of(acquirer_key, lease.key.as_str(), instance, events)?;
        Self::new(finish.outcome, finish.latency_ms, finish.answer_status)
    }
}
