//! A payment's history: writing an entry in the transaction of the change
//! it records (the other concern files call [`record`]), reading a
//! payment's entries, and the repeat counts of its keys.

use chargeonce_core::history::{
    AcquirerAttempt, HistoryEntry, HistoryEvent, RepeatCounts, RepeatKind, RepeatTally,
};
use chargeonce_core::store::KeyRepeats;
use chargeonce_core::{IdempotencyKey, PaymentId, RefundId, ShopId, StoreError};
use chargeonce_sqlite::Write;
use chargeonce_sqlite::rusqlite::{Connection, OptionalExtension, params};
use time::OffsetDateTime;

use super::{Result, SqliteStore, now_ms, unix_ms};
use crate::rows::tally;

/// The insertion of one entry: an append to the rowid b-tree and one index
/// entry, nothing read.
pub(super) const INSERT_ENTRY: &str = concat!(
    "INSERT INTO payment_history (payment_id, refund_id, at, kind, event) \
     VALUES (?1, ?2, ",
    now_ms!(),
    ", ?3, ?4)"
);

/// Appends one entry to a payment's history, on the writer's connection
/// (inside the write whose change it records).
pub(super) fn record(
    conn: &Connection,
    payment_id: &str,
    refund_id: Option<&str>,
    event: &HistoryEvent,
) -> Result<()> {
    conn.prepare_cached(INSERT_ENTRY)?.execute(params![
        payment_id,
        refund_id,
        event.kind(),
        event.to_json(),
    ])?;
    Ok(())
}

/// What a key row points at, for the entries about it: its payment and
/// refund ids (`None` when it points at no payment, which no key in
/// progress does).
#[derive(Debug, Clone)]
pub(super) struct HistoryOf {
    /// The key's payment (for a refund key: the refunded payment).
    pub(super) payment_id: String,
    /// The key's refund, for a refund key.
    pub(super) refund_id: Option<String>,
}

/// What the key `key` of `shop_id` points at, read by its primary key.
pub(super) fn key_target(conn: &Connection, shop_id: &str, key: &str) -> Result<Option<HistoryOf>> {
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

/// Appends one `acquirer_call` entry per attempt to what `target` points at.
pub(super) fn record_attempts(
    conn: &Connection,
    target: &HistoryOf,
    attempts: &[AcquirerAttempt],
    instance: &str,
) -> Result<()> {
    for attempt in attempts {
        record(
            conn,
            &target.payment_id,
            target.refund_id.as_deref(),
            &attempt.to_event(instance),
        )?;
    }
    Ok(())
}

/// A payment's entries, oldest first: a range of `payment_history_by_payment`.
pub(super) const PAYMENT_HISTORY: &str = "SELECT seq, payment_id, refund_id, at, event \
     FROM payment_history WHERE payment_id = ?1 ORDER BY seq";

/// A payment's entries, oldest first, when it is the shop's (`?2`).
pub(super) const SHOP_PAYMENT_HISTORY: &str = "SELECT seq, payment_id, refund_id, at, event \
     FROM payment_history WHERE payment_id = ?1 \
       AND EXISTS (SELECT 1 FROM payments WHERE id = ?1 AND shop_id = ?2) \
     ORDER BY seq";

/// Every entry of one payment's history, oldest first; with a shop, only
/// when the payment is that shop's.
pub(super) async fn payment_history(
    store: &SqliteStore,
    shop_id: Option<&ShopId>,
    payment_id: &PaymentId,
) -> Result<Vec<HistoryEntry>, StoreError> {
    let (shop_id, payment_id) = (shop_id.cloned(), payment_id.clone());
    store
        .read(move |conn| {
            let mut stmt;
            let mut rows = match &shop_id {
                Some(shop) => {
                    stmt = conn.prepare_cached(SHOP_PAYMENT_HISTORY)?;
                    stmt.query(params![payment_id.as_str(), shop.as_str()])?
                }
                None => {
                    stmt = conn.prepare_cached(PAYMENT_HISTORY)?;
                    stmt.query(params![payment_id.as_str()])?
                }
            };
            let mut entries = Vec::new();
            while let Some(row) = rows.next()? {
                let seq: i64 = row.get(0)?;
                let stored_payment: String = row.get(1)?;
                let refund_id: Option<String> = row.get(2)?;
                let at: i64 = row.get(3)?;
                let event: String = row.get(4)?;
                entries.push(HistoryEntry {
                    seq,
                    at: from_ms(at)?,
                    payment_id: PaymentId::parse(&stored_payment)
                        .map_err(StoreError::corrupt_by)?,
                    refund_id: refund_id
                        .map(|id| RefundId::parse(&id))
                        .transpose()
                        .map_err(StoreError::corrupt_by)?,
                    event: HistoryEvent::from_json(&event).map_err(|e| {
                        StoreError::corrupt(format!("history entry {seq} does not parse: {e}"))
                    })?,
                });
            }
            Ok(entries)
        })
        .await
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
pub(super) fn repeat_counts(
    row: &chargeonce_sqlite::rusqlite::Row<'_>,
    first: usize,
) -> Result<RepeatCounts> {
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

/// The repeat counts of those of the shop's keys that exist, in the order
/// asked.
pub(super) async fn key_repeats(
    store: &SqliteStore,
    shop_id: &ShopId,
    keys: &[IdempotencyKey],
) -> Result<Vec<KeyRepeats>, StoreError> {
    let (shop_id, keys) = (shop_id.clone(), keys.to_vec());
    store
        .read(move |conn| {
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

/// Adds the repeats of one kind to a key's counter and to its totals; the
/// last times keep the later of the stored one and `?4` (SQLite's `MAX` of
/// a NULL is NULL: hence the `COALESCE`).
macro_rules! add_repeats_of {
    ($counter:literal, $last:literal) => {
        concat!(
            "UPDATE idempotency_keys SET ",
            $counter,
            " = ",
            $counter,
            " + ?3, ",
            $last,
            " = MAX(COALESCE(",
            $last,
            ", ?4), ?4), replays = replays + ?3, \
             last_repeat_at = MAX(COALESCE(last_repeat_at, ?4), ?4) \
             WHERE shop_id = ?1 AND key = ?2"
        )
    };
}

/// Adds repeats an instance answered from its cache to their keys' counts,
/// in one write; keys that are gone are skipped. A new write (refused, with
/// nothing done, when the writer is overloaded: the caller keeps its
/// tallies for the next batch), so counting never delays a payment.
pub(super) async fn add_repeats(
    store: &SqliteStore,
    tallies: &[RepeatTally],
) -> Result<(), StoreError> {
    let tallies: Vec<RepeatTally> = tallies.iter().filter(|t| t.count > 0).cloned().collect();
    if tallies.is_empty() {
        return Ok(());
    }
    store
        .write_new(move |conn| {
            for tally in &tallies {
                let sql = match tally.kind {
                    RepeatKind::Replay => add_repeats_of!("replayed", "last_replayed_at"),
                    RepeatKind::Conflict => add_repeats_of!("conflicted", "last_conflicted_at"),
                    RepeatKind::Mismatch => add_repeats_of!("mismatched", "last_mismatched_at"),
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
