//! A payment's history: the entries the other concerns write with the
//! changes they record (the helpers here), reading them back, and the
//! repeat counts of keys (read, and added in batches from the instances'
//! caches).

use async_trait::async_trait;
use chargeonce_core::history::{
    AcquirerAttempt, ClaimantFinish, HistoryEntry, HistoryEvent, RepeatCounts, RepeatKind,
    RepeatTally, Tally, TurnEnd, TurnFinish, answered_events,
};
use chargeonce_core::store::{History, KeyRepeats};
use chargeonce_core::{
    AcquirerOutcomeKind, CaptureStatus, IdempotencyKey, Lease, PaymentId, PaymentStatus, RefundId,
    RefundStatus, ShopId, StoreError, StoredResponse,
};
use sqlx::PgExecutor;
use time::OffsetDateTime;

use super::{PgStore, store_error};

/// Entries to write, as the two parallel arrays a statement binds and
/// `unnest`s WITH ORDINALITY (so they get their `seq` in this order):
/// each entry's `kind` and its event as JSON.
#[derive(Debug, Default)]
pub(super) struct Entries {
    pub(super) kinds: Vec<&'static str>,
    pub(super) events: Vec<String>,
}

impl Entries {
    /// The entries of these events, in order.
    pub(super) fn of(events: impl IntoIterator<Item = HistoryEvent>) -> Self {
        let mut entries = Self::default();
        for event in events {
            entries.push(&event);
        }
        entries
    }

    /// Adds one more entry.
    pub(super) fn push(&mut self, event: &HistoryEvent) {
        self.kinds.push(event.kind());
        self.events.push(event.to_json());
    }

    /// The entries a key's answer writes with it: [`answered_events`].
    pub(super) fn answered(
        lease: &Lease,
        response: &StoredResponse,
        attempts: &[AcquirerAttempt],
        instance: &str,
    ) -> Self {
        Self::of(answered_events(lease, response, attempts, instance))
    }
}

/// The INSERT of the history rows of one write (migration 0010): its entries
/// in rows of up to 16, each row's `event` the JSON array of its entries'
/// events (one entry alone: its event, as rows were before) and `kind` their
/// kinds, comma-separated. A row's entries read back with `seq` = the row's
/// seq (a multiple of 16) plus their place in it (`payment_history` below
/// unpacks them). One heap tuple and one index entry for the three entries
/// of a finish, in place of three.
///
/// The one macro of the store's SQL that is more than a column list (or
/// SQLite's `now_ms!`), as it is not a statement but the storage layout of
/// history rows, which every write of entries shares: a payment's finish
/// (`finish.rs`), a key's (`keys.rs`), the two ends of a lease and the calls
/// of a lost one (`claim.rs`), and [`record`] for the other writes. Written
/// out at each, the packing (16 a row, the kind list, one event or an array)
/// would be six copies that must agree with each other and with the read.
///
/// Arguments, each an SQL fragment: `source`, the FROM item of the write's
/// row (or rows) with columns `payment_id`, `refund_id` and `shop_id` (a CTE's name or
/// a parenthesised subquery; it is aliased `w`), and the two array
/// parameters (`kind`s and events). Entries are written only for a row with
/// a payment (a key row may have none).
macro_rules! insert_entries {
    ($source:literal, $kinds:literal, $events:literal) => {
        concat!(
            "INSERT INTO payment_history (payment_id, refund_id, shop_id, kind, event) \
             SELECT w.payment_id, w.refund_id, w.shop_id, string_agg(e.kind, ',' ORDER BY e.n), \
                 CASE WHEN count(*) = 1 THEN min(e.event) \
                      ELSE '[' || string_agg(e.event, ',' ORDER BY e.n) || ']' END \
             FROM ",
            $source,
            " w, unnest(",
            $kinds,
            "::text[], ",
            $events,
            "::text[]) \
                 WITH ORDINALITY AS e(kind, event, n) \
             WHERE w.payment_id IS NOT NULL \
             GROUP BY w.payment_id, w.refund_id, w.shop_id, (e.n - 1) / 16 \
             ORDER BY (e.n - 1) / 16"
        )
    };
}
pub(super) use insert_entries;

/// Writes entries about one payment (and one of its refunds) in the
/// caller's transaction, in one statement.
pub(super) async fn record<'e>(
    executor: impl PgExecutor<'e>,
    shop_id: &str,
    payment_id: &str,
    refund_id: Option<&str>,
    entries: &Entries,
) -> Result<(), StoreError> {
    if entries.kinds.is_empty() {
        return Ok(());
    }
    sqlx::query(insert_entries!(
        "(SELECT $1::text AS payment_id, $2::text AS refund_id, $5::text AS shop_id)",
        "$3",
        "$4"
    ))
    .bind(payment_id)
    .bind(refund_id)
    .bind(&entries.kinds)
    .bind(&entries.events)
    .bind(shop_id)
    .execute(executor)
    .await
    .map_err(store_error)?;
    Ok(())
}

/// History entries as read back: a history row's entry; or, from the
/// payment's row, its `claimed` entry (no `event`, no `finish_outcome`) or
/// its claimant's finish (`finish_outcome` set: migration 0024), three
/// entries at `seq`, `seq + 1` and `seq + 2`, as their history row would
/// have read back; or, likewise from a refund's row (`refund_id` set, no
/// `event`: migration 0029) or a capture's (`capture_id` set: migration
/// 0030), its reservation's entry or its claimant's finish.
#[derive(sqlx::FromRow)]
struct EntryRow {
    seq: i64,
    at: OffsetDateTime,
    payment_id: String,
    refund_id: Option<String>,
    event: Option<String>,
    claimed_key: Option<String>,
    claimed_by: Option<String>,
    finish_outcome: Option<String>,
    finish_latency_ms: Option<i64>,
    finish_answer: Option<i16>,
    status: Option<String>,
    amount_minor: Option<i64>,
    currency: Option<String>,
    acquirer_key: Option<String>,
    capture_id: Option<String>,
    is_final: Option<bool>,
}

/// The values every claimant's finish kept on a row has, as read.
struct KeptFinish {
    outcome: AcquirerOutcomeKind,
    latency_ms: u64,
    answer_status: u16,
    status: String,
}

impl EntryRow {
    /// The events of the row, in order.
    fn events(&self, payment_id: &PaymentId) -> Result<Vec<HistoryEvent>, StoreError> {
        if let Some(event) = &self.event {
            return Ok(vec![
                HistoryEvent::from_json(event).map_err(StoreError::corrupt_by)?,
            ]);
        }
        let (Some(key), Some(instance)) = (&self.claimed_key, &self.claimed_by) else {
            return Err(self.corrupt("has no event"));
        };
        if self.refund_id.is_some() || self.capture_id.is_some() {
            return self.turn_events(key, instance);
        }
        Ok(match self.kept_finish()? {
            None => vec![HistoryEvent::Claimed {
                key: key.clone(),
                instance: instance.clone(),
            }],
            Some(kept) => ClaimantFinish {
                outcome: kept.outcome,
                latency_ms: kept.latency_ms,
                answer_status: kept.answer_status,
                status: PaymentStatus::parse(&kept.status)
                    .ok_or_else(|| self.corrupt("has no settled status"))?,
            }
            .entries(payment_id, key, instance)
            .to_vec(),
        })
    }

    /// The events a refund's or capture's row holds: its reservation, or its
    /// claimant's finish.
    fn turn_events(&self, key: &str, instance: &str) -> Result<Vec<HistoryEvent>, StoreError> {
        let Some(kept) = self.kept_finish()? else {
            return Ok(vec![self.reservation(key, instance)?]);
        };
        let acquirer_key = self
            .acquirer_key
            .as_deref()
            .ok_or_else(|| self.corrupt("has no acquirer key"))?;
        let finish = TurnFinish {
            outcome: kept.outcome,
            latency_ms: kept.latency_ms,
            answer_status: kept.answer_status,
            end: self.turn_end(&kept.status)?,
        };
        Ok(finish.entries(acquirer_key, key, instance).to_vec())
    }

    /// The reservation's entry of a refund's or capture's row.
    fn reservation(&self, key: &str, instance: &str) -> Result<HistoryEvent, StoreError> {
        let (Some(amount_minor), Some(currency)) = (self.amount_minor, self.currency.clone())
        else {
            return Err(self.corrupt("has no reserved amount"));
        };
        let (key, instance) = (key.to_owned(), instance.to_owned());
        Ok(match &self.capture_id {
            None => HistoryEvent::RefundReserved {
                key,
                amount_minor,
                currency,
                instance,
            },
            Some(capture_id) => HistoryEvent::CaptureReserved {
                capture_id: capture_id.clone(),
                key,
                amount_minor,
                currency,
                last: self
                    .is_final
                    .ok_or_else(|| self.corrupt("has no capture finality"))?,
                instance,
            },
        })
    }

    /// How a refund's or capture's row ended, by its `status`.
    fn turn_end(&self, status: &str) -> Result<TurnEnd, StoreError> {
        match &self.capture_id {
            None => RefundStatus::parse(status).map(|status| TurnEnd::Refund { status }),
            Some(capture_id) => CaptureStatus::parse(status).map(|status| TurnEnd::Capture {
                capture_id: capture_id.clone(),
                status,
            }),
        }
        .ok_or_else(|| self.corrupt("has no final status"))
    }

    /// The claimant's finish the row holds, if this is that row's entry.
    fn kept_finish(&self) -> Result<Option<KeptFinish>, StoreError> {
        let Some(outcome) = &self.finish_outcome else {
            return Ok(None);
        };
        Ok(Some(KeptFinish {
            outcome: AcquirerOutcomeKind::parse(outcome)
                .ok_or_else(|| self.corrupt("has an unknown acquirer outcome"))?,
            latency_ms: self
                .finish_latency_ms
                .and_then(|ms| u64::try_from(ms).ok())
                .ok_or_else(|| self.corrupt("has no call latency"))?,
            answer_status: self
                .finish_answer
                .and_then(|status| u16::try_from(status).ok())
                .ok_or_else(|| self.corrupt("has no answer status"))?,
            status: self
                .status
                .clone()
                .ok_or_else(|| self.corrupt("has no final status"))?,
        }))
    }

    fn corrupt(&self, what: &str) -> StoreError {
        StoreError::corrupt(format!(
            "history entry {} of payment {} {what}",
            self.seq, self.payment_id
        ))
    }
}

impl TryFrom<EntryRow> for Vec<HistoryEntry> {
    type Error = StoreError;

    fn try_from(row: EntryRow) -> Result<Self, StoreError> {
        let payment_id = PaymentId::parse(&row.payment_id).map_err(StoreError::corrupt_by)?;
        let refund_id = row
            .refund_id
            .as_deref()
            .map(RefundId::parse)
            .transpose()
            .map_err(StoreError::corrupt_by)?;
        let (seq, at) = (row.seq, row.at);
        Ok(row
            .events(&payment_id)?
            .into_iter()
            .zip(seq..)
            .map(|(event, seq)| HistoryEntry {
                seq,
                at,
                payment_id: payment_id.clone(),
                refund_id: refund_id.clone(),
                event,
            })
            .collect())
    }
}

/// A key's repeat counts as its row holds them.
#[derive(sqlx::FromRow)]
pub(super) struct RepeatsRow {
    pub(super) key: String,
    pub(super) replayed: i64,
    pub(super) last_replayed_at: Option<OffsetDateTime>,
    pub(super) conflicted: i64,
    pub(super) last_conflicted_at: Option<OffsetDateTime>,
    pub(super) mismatched: i64,
    pub(super) last_mismatched_at: Option<OffsetDateTime>,
}

impl RepeatsRow {
    /// The counts.
    pub(super) fn counts(&self) -> RepeatCounts {
        let tally = |count: i64, last_at: Option<OffsetDateTime>| Tally {
            count: u64::try_from(count).unwrap_or(0),
            last_at,
        };
        RepeatCounts {
            replays: tally(self.replayed, self.last_replayed_at),
            conflicts: tally(self.conflicted, self.last_conflicted_at),
            mismatches: tally(self.mismatched, self.last_mismatched_at),
        }
    }
}

impl TryFrom<RepeatsRow> for KeyRepeats {
    type Error = StoreError;

    fn try_from(row: RepeatsRow) -> Result<Self, StoreError> {
        let repeats = row.counts();
        Ok(Self {
            key: IdempotencyKey::new(row.key).map_err(StoreError::corrupt_by)?,
            repeats,
        })
    }
}

/// The stored name of a kind of repeat, as `add_repeats` takes it.
fn repeat_kind(kind: RepeatKind) -> &'static str {
    match kind {
        RepeatKind::Replay => "replay",
        RepeatKind::Conflict => "conflict",
        RepeatKind::Mismatch => "mismatch",
    }
}

#[async_trait]
impl History for PgStore {
    /// Every entry of one payment, oldest first; with a shop, only if the
    /// payment is that shop's. The first is the payment row's `claimed` entry
    /// (`seq` 0, before every row's identity; `claimed_by` is NULL on payments
    /// claimed before migration 0007, whose entry is a history row), and the
    /// row's claimant's finish, if it holds one (migration 0024: three
    /// entries at the seq their history row would have had), and each of
    /// its refunds' `refund_reserved` entry and claimant's finish (migration
    /// 0029, likewise) and captures' (0030), in the same statement, so in
    /// the same snapshot, as the rows. A row of several
    /// entries (a JSON array) reads back as its entries, in order.
    #[tracing::instrument(level = "debug", name = "store.payment_history", skip_all, fields(db.system = "postgresql"))]
    async fn payment_history(
        &self,
        shop_id: Option<&ShopId>,
        payment_id: &PaymentId,
    ) -> Result<Vec<HistoryEntry>, StoreError> {
        let rows: Vec<Vec<HistoryEntry>> = super::all(
            self,
            sqlx::query_as::<_, EntryRow>(
                "SELECT x.seq, x.at, p.id AS payment_id, NULL::text AS refund_id, \
                        NULL::text AS event, p.idempotency_key AS claimed_key, p.claimed_by, \
                        x.finish_outcome, x.finish_latency_ms, x.finish_answer, x.status, \
                        NULL::bigint AS amount_minor, NULL::text AS currency, \
                        NULL::text AS acquirer_key, NULL::text AS capture_id, \
                        NULL::boolean AS is_final \
                 FROM payments p CROSS JOIN LATERAL (VALUES \
                     (0::bigint, p.created_at, NULL::text, NULL::bigint, NULL::smallint, \
                      NULL::text), \
                     (p.finish_seq, p.finish_at, p.finish_outcome, p.finish_latency_ms, \
                      p.finish_answer, p.status)) \
                     AS x(seq, at, finish_outcome, finish_latency_ms, finish_answer, status) \
                 WHERE p.id = $1 AND p.claimed_by IS NOT NULL AND x.seq IS NOT NULL \
                   AND ($2::text IS NULL OR p.shop_id = $2) \
                 UNION ALL \
                 SELECT x.seq, x.at, t.payment_id, t.refund_id, NULL, t.idempotency_key, \
                        t.claimed_by, x.finish_outcome, x.finish_latency_ms, x.finish_answer, \
                        x.status, t.amount_minor, t.currency, t.acquirer_key, t.capture_id, \
                        t.is_final \
                 FROM ( \
                     SELECT payment_id, idempotency_key, claimed_by, amount_minor, currency, \
                            acquirer_key, status, created_at, reserve_seq, finish_seq, \
                            finish_at, finish_outcome, finish_latency_ms, finish_answer, \
                            id AS refund_id, NULL::text AS capture_id, NULL::boolean AS is_final \
                     FROM refunds \
                     WHERE payment_id = $1 AND claimed_by IS NOT NULL \
                       AND ($2::text IS NULL OR shop_id = $2) \
                     UNION ALL \
                     SELECT payment_id, idempotency_key, claimed_by, amount_minor, currency, \
                            acquirer_key, status, created_at, reserve_seq, finish_seq, \
                            finish_at, finish_outcome, finish_latency_ms, finish_answer, \
                            NULL, id, is_final \
                     FROM captures \
                     WHERE shop_id = (SELECT shop_id FROM payments \
                                      WHERE id = $1 AND ($2::text IS NULL OR shop_id = $2)) \
                       AND payment_id = $1 AND claimed_by IS NOT NULL) t \
                 CROSS JOIN LATERAL (VALUES \
                     (t.reserve_seq, t.created_at, NULL::text, NULL::bigint, NULL::smallint, \
                      NULL::text), \
                     (t.finish_seq, t.finish_at, t.finish_outcome, t.finish_latency_ms, \
                      t.finish_answer, t.status)) \
                     AS x(seq, at, finish_outcome, finish_latency_ms, finish_answer, status) \
                 WHERE x.seq IS NOT NULL \
                 UNION ALL \
                 SELECT h.seq + e.n - 1, h.at, h.payment_id, h.refund_id, e.event, NULL, NULL, \
                        NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL \
                 FROM payment_history h CROSS JOIN LATERAL ( \
                     SELECT x.event::text, x.n \
                     FROM json_array_elements(h.event::json) WITH ORDINALITY AS x(event, n) \
                     WHERE left(h.event, 1) = '[' \
                     UNION ALL SELECT h.event, 1 WHERE left(h.event, 1) <> '[') e(event, n) \
                 WHERE h.payment_id = $1 \
                   AND ($2::text IS NULL \
                        OR EXISTS (SELECT 1 FROM payments WHERE id = $1 AND shop_id = $2)) \
                 ORDER BY seq",
            )
            .bind(payment_id.as_str())
            .bind(shop_id.map(ShopId::as_str)),
        )
        .await?;
        Ok(rows.into_iter().flatten().collect())
    }

    /// The repeat counts of those of the keys that exist (an expired finished
    /// key is gone, as for `key_info`).
    #[tracing::instrument(level = "debug", name = "store.key_repeats", skip_all, fields(db.system = "postgresql"))]
    async fn key_repeats(
        &self,
        shop_id: &ShopId,
        keys: &[IdempotencyKey],
    ) -> Result<Vec<KeyRepeats>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<&str> = keys.iter().map(IdempotencyKey::as_str).collect();
        super::all(
            self,
            sqlx::query_as::<_, RepeatsRow>(
                // In the order asked; a finished key past its expiry that is not
                // swept yet still counts (its counts reach the history when it is).
                "SELECT k.key, k.replayed, \
                     date_trunc('milliseconds', k.last_replayed_at) AS last_replayed_at, \
                     k.conflicted, date_trunc('milliseconds', k.last_conflicted_at) AS last_conflicted_at, \
                     k.mismatched, date_trunc('milliseconds', k.last_mismatched_at) AS last_mismatched_at \
                 FROM unnest($2::text[]) WITH ORDINALITY AS a(key, n) \
                 JOIN idempotency_keys k ON k.shop_id = $1 AND k.key = a.key \
                 ORDER BY a.n",
            )
            .bind(shop_id.as_str())
            .bind(keys),
        )
        .await
    }

    /// Adds the tallies to their keys' counts (and to the totals), in one
    /// statement for the batch. Tallies of one key are summed first (an
    /// `UPDATE ... FROM` updates a row once, whatever it joins), and the rows
    /// are locked in key order, so two instances' batches cannot deadlock.
    #[tracing::instrument(level = "debug", name = "store.add_repeats", skip_all, fields(db.system = "postgresql"))]
    async fn add_repeats(&self, tallies: &[RepeatTally]) -> Result<(), StoreError> {
        if tallies.is_empty() {
            return Ok(());
        }
        let shops: Vec<&str> = tallies.iter().map(|t| t.shop_id.as_str()).collect();
        let keys: Vec<&str> = tallies.iter().map(|t| t.key.as_str()).collect();
        let kinds: Vec<&str> = tallies.iter().map(|t| repeat_kind(t.kind)).collect();
        let counts: Vec<i64> = tallies
            .iter()
            .map(|t| i64::try_from(t.count).unwrap_or(i64::MAX))
            .collect();
        let lasts: Vec<OffsetDateTime> = tallies.iter().map(|t| t.last_at).collect();
        sqlx::query(
            "WITH t AS ( \
                 SELECT shop_id, key, \
                     sum(n)::bigint AS total, max(at) AS last_any, \
                     coalesce(sum(n) FILTER (WHERE kind = 'replay'), 0)::bigint AS replayed, \
                     max(at) FILTER (WHERE kind = 'replay') AS last_replayed, \
                     coalesce(sum(n) FILTER (WHERE kind = 'conflict'), 0)::bigint AS conflicted, \
                     max(at) FILTER (WHERE kind = 'conflict') AS last_conflicted, \
                     coalesce(sum(n) FILTER (WHERE kind = 'mismatch'), 0)::bigint AS mismatched, \
                     max(at) FILTER (WHERE kind = 'mismatch') AS last_mismatched \
                 FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::timestamptz[]) \
                     AS u(shop_id, key, kind, n, at) \
                 GROUP BY shop_id, key), \
             locked AS ( \
                 SELECT k.shop_id, k.key FROM idempotency_keys k JOIN t USING (shop_id, key) \
                 ORDER BY k.shop_id, k.key FOR NO KEY UPDATE OF k) \
             UPDATE idempotency_keys k SET \
                 replays = k.replays + t.total, \
                 last_repeat_at = greatest(k.last_repeat_at, t.last_any), \
                 replayed = k.replayed + t.replayed, \
                 last_replayed_at = greatest(k.last_replayed_at, t.last_replayed), \
                 conflicted = k.conflicted + t.conflicted, \
                 last_conflicted_at = greatest(k.last_conflicted_at, t.last_conflicted), \
                 mismatched = k.mismatched + t.mismatched, \
                 last_mismatched_at = greatest(k.last_mismatched_at, t.last_mismatched) \
             FROM t JOIN locked USING (shop_id, key) \
             WHERE k.shop_id = t.shop_id AND k.key = t.key",
        )
        .bind(shops)
        .bind(keys)
        .bind(kinds)
        .bind(counts)
        .bind(lasts)
        .execute(&mut *self.conn().await?)
        .await
        .map_err(store_error)?;
        Ok(())
    }
}
