//! A payment's history: writing an entry in the transaction of the change
//! it records (the other concern files call [`record`]), reading a
//! payment's entries, and the repeat counts of its keys.

use async_trait::async_trait;
use chargeonce_core::history::{
    AcquirerAttempt, HistoryEntry, HistoryEvent, RepeatCounts, RepeatKind, RepeatTally,
};
use chargeonce_core::store::{History, KeyRepeats};
use chargeonce_core::{IdempotencyKey, PaymentId, RefundId, ShopId, StoreError};
use chargeonce_sqlite::Write;
use chargeonce_sqlite::rusqlite::{Connection, OptionalExtension, Row, params};
use time::OffsetDateTime;

use super::{Result, SqliteStore, now_ms, unix_ms};
use crate::rows::tally;

/// The insertion of one row: an append to the rowid b-tree and one index
/// entry, nothing read. A row holds the entries of one write (see
/// [`record_all`]); `kind` is their tags, comma-separated.
pub(super) const INSERT_ENTRY: &str = concat!(
    "INSERT INTO payment_history (payment_id, refund_id, at, kind, event) \
     VALUES (?1, ?2, ",
    now_ms!(),
    ", ?3, ?4)"
);

/// The most entries one row holds. An entry's `seq` is its row's rowid
/// times this plus its place in the row, so entries sort as they were
/// written, within a row and across rows.
const ENTRIES_PER_ROW: usize = 16;

/// Appends one entry to a payment's history, on the writer's connection
/// (inside the write whose change it records).
pub(super) fn record(
    conn: &Connection,
    payment_id: &str,
    refund_id: Option<&str>,
    event: &HistoryEvent,
) -> Result<()> {
    insert_row(conn, payment_id, refund_id, event.kind(), &event.to_json())
}

/// Appends the entries one write makes, in their order, to one payment's
/// history: as one row (a JSON array of the events), or as few rows as
/// [`ENTRIES_PER_ROW`] allows. A row is a statement and two b-tree appends
/// on the writer's one core; the finish of a payment writes its acquirer
/// calls, its answer and its settlement, and one row for the three keeps
/// the history's share of a fresh payment's cost to two rows.
pub(super) fn record_all(
    conn: &Connection,
    payment_id: &str,
    refund_id: Option<&str>,
    events: &[HistoryEvent],
) -> Result<()> {
    for row in events.chunks(ENTRIES_PER_ROW) {
        match row {
            [event] => record(conn, payment_id, refund_id, event)?,
            events => {
                let kinds = events
                    .iter()
                    .map(HistoryEvent::kind)
                    .collect::<Vec<_>>()
                    .join(",");
                // Strings, numbers and enums: the encoding cannot fail.
                let json = serde_json::to_string(events).unwrap_or_default();
                insert_row(conn, payment_id, refund_id, &kinds, &json)?;
            }
        }
    }
    Ok(())
}

/// Inserts one row of entries.
fn insert_row(
    conn: &Connection,
    payment_id: &str,
    refund_id: Option<&str>,
    kind: &str,
    event: &str,
) -> Result<()> {
    conn.prepare_cached(INSERT_ENTRY)?
        .execute(params![payment_id, refund_id, kind, event])?;
    Ok(())
}

/// What a row's `event` holds: one event (an object), or the events of one
/// write in order (an array).
fn row_events(event: &str) -> Result<Vec<HistoryEvent>, serde_json::Error> {
    if event.trim_start().starts_with('[') {
        serde_json::from_str(event)
    } else {
        HistoryEvent::from_json(event).map(|event| vec![event])
    }
}

/// What a key row points at, for the entries about it: its payment and
/// refund ids.
#[derive(Debug, Clone)]
pub(super) struct HistoryOf {
    /// The key's payment (for a refund key: the refunded payment).
    pub(super) payment_id: String,
    /// The key's refund, for a refund key.
    pub(super) refund_id: Option<String>,
}

/// What the key `key` of `shop_id` points at, read by its primary key;
/// `None` when it points at no payment (which no key in progress does).
pub(super) fn history_of(conn: &Connection, shop_id: &str, key: &str) -> Result<Option<HistoryOf>> {
    let found = conn
        .prepare_cached(
            "SELECT payment_id, refund_id FROM idempotency_keys \
             WHERE shop_id = ?1 AND key = ?2 AND payment_id IS NOT NULL",
        )?
        .query_row(params![shop_id, key], |row| {
            Ok(HistoryOf {
                payment_id: row.get(0)?,
                refund_id: row.get(1)?,
            })
        })
        .optional()?;
    Ok(found)
}

/// Writes `events` about what the key `key` of `shop_id` points at
/// ([`history_of`]); nothing when it points at no payment.
pub(super) fn record_about_key(
    conn: &Connection,
    shop_id: &str,
    key: &str,
    events: &[HistoryEvent],
) -> Result<()> {
    if let Some(target) = history_of(conn, shop_id, key)? {
        record_all(
            conn,
            &target.payment_id,
            target.refund_id.as_deref(),
            events,
        )?;
    }
    Ok(())
}

/// The `acquirer_call` entries of `attempts`, made by `instance`, in order.
pub(super) fn attempt_events(attempts: &[AcquirerAttempt], instance: &str) -> Vec<HistoryEvent> {
    attempts
        .iter()
        .map(|attempt| attempt.to_event(instance))
        .collect()
}

/// A payment's entries, oldest first: a range of `payment_history_by_payment`.
pub(super) const PAYMENT_HISTORY: &str = "SELECT seq, payment_id, refund_id, at, event \
     FROM payment_history WHERE payment_id = ?1 ORDER BY seq";

/// The payment row's part of its history: its shop, and its `claimed`
/// entry's key, instance and time (`claimed_by` is NULL on payments
/// claimed before migration 0009, whose entry is a history row).
pub(super) const CLAIM_OF_PAYMENT: &str =
    "SELECT shop_id, idempotency_key, claimed_by, created_at FROM payments WHERE id = ?1";

/// The `seq` of the entry read from the payment's row: before every row's
/// (a row's entries are numbered from its rowid, 1 or more, times
/// [`ENTRIES_PER_ROW`]).
const CLAIM_SEQ: i64 = 0;

/// The entries of one history row, in their order.
fn row_entries(row: &Row<'_>) -> Result<Vec<HistoryEntry>> {
    let rowid: i64 = row.get(0)?;
    let stored_payment: String = row.get(1)?;
    let refund_id: Option<String> = row.get(2)?;
    let at = from_ms(row.get(3)?)?;
    let event: String = row.get(4)?;
    let payment_id = PaymentId::parse(&stored_payment).map_err(StoreError::corrupt_by)?;
    let refund_id = refund_id
        .map(|id| RefundId::parse(&id))
        .transpose()
        .map_err(StoreError::corrupt_by)?;
    let events = row_events(&event)
        .map_err(|e| StoreError::corrupt(format!("history row {rowid} does not parse: {e}")))?;
    Ok((0_i64..)
        .zip(events)
        .map(|(place, event)| HistoryEntry {
            seq: rowid * ENTRIES_PER_ROW as i64 + place,
            at,
            payment_id: payment_id.clone(),
            refund_id: refund_id.clone(),
            event,
        })
        .collect())
}

/// A stored time (unix milliseconds).
fn from_ms(ms: i64) -> Result<OffsetDateTime> {
    Ok(
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
            .map_err(StoreError::corrupt_by)?,
    )
}

/// The repeat counts of one key row (`replayed`, `conflicted`,
/// `mismatched` and their times, in that order from column `first`).
pub(super) fn repeat_counts(row: &Row<'_>, first: usize) -> Result<RepeatCounts> {
    Ok(RepeatCounts {
        replays: tally(row.get(first)?, row.get(first + 1)?)?,
        conflicts: tally(row.get(first + 2)?, row.get(first + 3)?)?,
        mismatches: tally(row.get(first + 4)?, row.get(first + 5)?)?,
    })
}

/// The columns [`repeat_counts`] reads.
macro_rules! repeat_columns {
    () => {
        "replayed, last_replayed_at, conflicted, last_conflicted_at, \
         mismatched, last_mismatched_at"
    };
}
pub(super) use repeat_columns;

// The adds of repeats of one kind to a key's counter and to its totals
// (`?1`, `?2`: the key's shop and key, `?3` the count); the last times keep
// the later of the stored one and `?4` (SQLite's `MAX` of a NULL is NULL:
// hence the `COALESCE`).

/// Adds replays ([`RepeatKind::Replay`]).
const ADD_REPLAYS: &str = "UPDATE idempotency_keys SET replayed = replayed + ?3, \
     last_replayed_at = MAX(COALESCE(last_replayed_at, ?4), ?4), replays = replays + ?3, \
     last_repeat_at = MAX(COALESCE(last_repeat_at, ?4), ?4) \
     WHERE shop_id = ?1 AND key = ?2";

/// Adds conflicts ([`RepeatKind::Conflict`]).
const ADD_CONFLICTS: &str = "UPDATE idempotency_keys SET conflicted = conflicted + ?3, \
     last_conflicted_at = MAX(COALESCE(last_conflicted_at, ?4), ?4), replays = replays + ?3, \
     last_repeat_at = MAX(COALESCE(last_repeat_at, ?4), ?4) \
     WHERE shop_id = ?1 AND key = ?2";

/// Adds mismatches ([`RepeatKind::Mismatch`]).
const ADD_MISMATCHES: &str = "UPDATE idempotency_keys SET mismatched = mismatched + ?3, \
     last_mismatched_at = MAX(COALESCE(last_mismatched_at, ?4), ?4), replays = replays + ?3, \
     last_repeat_at = MAX(COALESCE(last_repeat_at, ?4), ?4) \
     WHERE shop_id = ?1 AND key = ?2";

#[async_trait]
impl History for SqliteStore {
    /// Every entry of one payment's history, oldest first; with a shop, only
    /// when the payment is that shop's.
    #[tracing::instrument(level = "debug", name = "store.payment_history", skip_all, fields(db.system = "sqlite"))]
    async fn payment_history(
        &self,
        shop_id: Option<&ShopId>,
        payment_id: &PaymentId,
    ) -> Result<Vec<HistoryEntry>, StoreError> {
        let (shop_id, payment_id) = (shop_id.cloned(), payment_id.clone());
        self.read(move |conn| {
            let mut entries = Vec::new();
            let claim = conn
                .prepare_cached(CLAIM_OF_PAYMENT)?
                .query_row(params![payment_id.as_str()], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, Option<String>>(2)?,
                        row.get::<_, i64>(3)?,
                    ))
                })
                .optional()?;
            match (claim, &shop_id) {
                (Some((owner, _, _, _)), Some(shop)) if owner != shop.as_str() => {
                    return Ok(entries);
                }
                (None, Some(_)) => return Ok(entries),
                (Some((_, key, Some(instance), created_at)), _) => entries.push(HistoryEntry {
                    seq: CLAIM_SEQ,
                    at: from_ms(created_at)?,
                    payment_id: payment_id.clone(),
                    refund_id: None,
                    event: HistoryEvent::Claimed { key, instance },
                }),
                _ => {}
            }
            let mut stmt = conn.prepare_cached(PAYMENT_HISTORY)?;
            let mut rows = stmt.query(params![payment_id.as_str()])?;
            while let Some(row) = rows.next()? {
                entries.extend(row_entries(row)?);
            }
            Ok(entries)
        })
        .await
    }

    /// The repeat counts of those of the shop's keys that exist, in the order
    /// asked; a finished key past its expiry but not swept yet still counts
    /// (its counts reach the history only when it is swept or claimed anew).
    #[tracing::instrument(level = "debug", name = "store.key_repeats", skip_all, fields(db.system = "sqlite"))]
    async fn key_repeats(
        &self,
        shop_id: &ShopId,
        keys: &[IdempotencyKey],
    ) -> Result<Vec<KeyRepeats>, StoreError> {
        let (shop_id, keys) = (shop_id.clone(), keys.to_vec());
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(concat!(
                "SELECT ",
                repeat_columns!(),
                " FROM idempotency_keys WHERE shop_id = ?1 AND key = ?2"
            ))?;
            let mut found = Vec::with_capacity(keys.len());
            for key in keys {
                let mut rows = stmt.query(params![shop_id.as_str(), key.as_str()])?;
                if let Some(row) = rows.next()? {
                    let repeats = repeat_counts(row, 0)?;
                    found.push(KeyRepeats { key, repeats });
                }
            }
            Ok(found)
        })
        .await
    }

    /// Adds repeats an instance answered from its cache to their keys' counts,
    /// in one write; keys that are gone are skipped. A new write (refused, with
    /// nothing done, when the writer is overloaded: the caller keeps its
    /// tallies for the next batch), so counting never delays a payment.
    #[tracing::instrument(level = "debug", name = "store.add_repeats", skip_all, fields(db.system = "sqlite"))]
    async fn add_repeats(&self, tallies: &[RepeatTally]) -> Result<(), StoreError> {
        let tallies: Vec<RepeatTally> = tallies.iter().filter(|t| t.count > 0).cloned().collect();
        if tallies.is_empty() {
            return Ok(());
        }
        self.write_new(move |conn| {
            for tally in &tallies {
                let sql = match tally.kind {
                    RepeatKind::Replay => ADD_REPLAYS,
                    RepeatKind::Conflict => ADD_CONFLICTS,
                    RepeatKind::Mismatch => ADD_MISMATCHES,
                };
                conn.prepare_cached(sql)?.execute(params![
                    tally.shop_id.as_str(),
                    tally.key.as_str(),
                    i64::try_from(tally.count).unwrap_or(i64::MAX),
                    unix_ms(tally.last_at),
                ])?;
            }
            Ok(Write::Commit(()))
        })
        .await
    }
}

#[cfg(test)]
#[path = "history_layout.rs"]
mod tests;
