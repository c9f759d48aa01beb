//! A payment's history: writing an entry in the transaction of the change
//! it records (the other concern files call [`record`]), reading a
//! payment's entries, and the repeat counts of its keys.

use chargeonce_core::history::{
    AcquirerAttempt, HistoryEntry, HistoryEvent, RepeatCounts, RepeatKind, RepeatTally,
};
use chargeonce_core::store::KeyRepeats;
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

/// The repeat counts of those of the shop's keys that exist, in the order
/// asked; a finished key past its expiry but not swept yet still counts
/// (its counts reach the history only when it is swept or claimed anew).
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    //! What each write of the SQLite store leaves in the history, entry by
    //! entry (the conformance suite checks the same of both stores).

    use std::time::Duration;

    use chargeonce_core::events::{AttemptOutcome, WebhookEndpoint};
    use chargeonce_core::history::{HistoryEvent, SettledBy};
    use chargeonce_core::store::History;
    use chargeonce_core::webhook::{EventKind, WebhookSecret};
    use chargeonce_core::{
        AcquirerCall, AcquirerKey, AcquirerOutcomeKind, CardToken, Claim, ClaimRequest,
        EventRecorded, Fingerprint, FinishOutcome, IdempotencyKey, InboundEvent, KeyTiming, Keys,
        Money, NewPayment, NewRefund, Outbox, Payment, PaymentId, PaymentRequest, PaymentStatus,
        Reconciliation, RecoveryPoint, Reference, RefundClaim, RefundSettlement, RefundStatus,
        Refunds, Settlement, ShopId, ShopSecret, Shops, StoredResponse,
    };

    use super::super::SqliteStore;
    use super::AcquirerAttempt;
    use crate::PoolConfig;

    const TIMING: KeyTiming = KeyTiming {
        lease: Duration::from_secs(30),
        ttl: Duration::from_secs(3600),
    };

    struct Setup {
        store: SqliteStore,
        shop: ShopId,
        instance: String,
        dir: std::path::PathBuf,
    }

    async fn setup(name: &str) -> Setup {
        let dir =
            std::env::temp_dir().join(format!("chargeonce-history-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("history.db").display());
        let config = PoolConfig::default();
        let store = SqliteStore::connect(&url, &config).await.unwrap();
        let shop = ShopId::new("shop").unwrap();
        store
            .add_shop(&shop, &ShopSecret::from_string("s").hash())
            .await
            .unwrap();
        Setup {
            store,
            shop,
            instance: config.instance,
            dir,
        }
    }

    impl Setup {
        fn claim(&self, key: &str, body: &str) -> ClaimRequest {
            ClaimRequest {
                shop_id: self.shop.clone(),
                key: IdempotencyKey::new(key).unwrap(),
                fingerprint: Fingerprint::compute(
                    "POST",
                    "/v1/payments",
                    &serde_json::json!({ "b": body }),
                )
                .unwrap(),
                method: "POST".into(),
                path: "/v1/payments".into(),
            }
        }

        async fn pay(&self, key: &str, reference: &str) -> Claim {
            let payment = NewPayment::new(
                self.shop.clone(),
                IdempotencyKey::new(key).unwrap(),
                PaymentRequest {
                    amount: Money::parse("15.00", "RUB").unwrap(),
                    reference: Reference::new(reference).unwrap(),
                    token: CardToken::new("tok_ok").unwrap(),
                },
            );
            self.store
                .claim_payment(&self.claim(key, reference), &payment, TIMING)
                .await
                .unwrap()
        }

        async fn events(&self, id: &PaymentId) -> Vec<HistoryEvent> {
            self.store
                .payment_history(Some(&self.shop), id)
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.event)
                .collect()
        }

        async fn close(self) {
            self.store.close().await;
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn acquired(claim: Claim) -> chargeonce_core::Acquired {
        match claim {
            Claim::Acquired(acquired) => acquired,
            Claim::Exists(record) => panic!("expected a new claim, got {record:?}"),
        }
    }

    fn attempt(call: AcquirerCall, outcome: AcquirerOutcomeKind) -> AcquirerAttempt {
        AcquirerAttempt {
            call,
            outcome,
            latency: Duration::from_millis(7),
            acquirer_key: "ak".into(),
            reason: None,
        }
    }

    fn answer() -> StoredResponse {
        StoredResponse {
            status: 201,
            headers: Vec::new(),
            body: b"{}".to_vec(),
        }
    }

    fn succeeded() -> Settlement {
        Settlement {
            status: PaymentStatus::Succeeded,
            provider_payment_id: Some("ch_1".into()),
            decline_code: None,
        }
    }

    /// The claim, the link, a release after an unknown outcome, a
    /// take-over, and the finish with its call, answer and settlement;
    /// the writes that lose their lease leave nothing.
    #[tokio::test]
    async fn a_payments_life_is_in_its_history() {
        let s = setup("life").await;
        let first = acquired(s.pay("k1", "order-1").await);
        let payment: Payment = first.payment.clone();
        let linked = acquired(s.pay("k2", "order-1").await);
        assert_eq!(linked.recovery_point, RecoveryPoint::OrderAlreadyPaid);
        let unknown = attempt(AcquirerCall::Charge, AcquirerOutcomeKind::Unknown);
        assert!(
            s.store
                .release_lease(&first.lease, std::slice::from_ref(&unknown))
                .await
                .unwrap()
        );
        let taken = s
            .store
            .take_over(
                &s.shop,
                &first.lease.key,
                &s.claim("k1", "order-1").fingerprint,
                TIMING.lease,
            )
            .await
            .unwrap()
            .unwrap();
        // The old lease is fenced off: neither its release nor its finish
        // writes an entry.
        assert!(
            !s.store
                .release_lease(&first.lease, std::slice::from_ref(&unknown))
                .await
                .unwrap()
        );
        let lost = s
            .store
            .finish(
                &first.lease,
                Some((&payment, &succeeded())),
                &answer(),
                TIMING.ttl,
                std::slice::from_ref(&unknown),
            )
            .await
            .unwrap();
        assert_eq!(lost, FinishOutcome::LeaseLost);
        let charged = attempt(AcquirerCall::Charge, AcquirerOutcomeKind::Succeeded);
        let done = s
            .store
            .finish(
                &taken.lease,
                Some((&payment, &succeeded())),
                &answer(),
                TIMING.ttl,
                std::slice::from_ref(&charged),
            )
            .await
            .unwrap();
        assert_eq!(done, FinishOutcome::Stored);

        let instance = s.instance.clone();
        assert_eq!(
            s.events(&payment.id).await,
            vec![
                HistoryEvent::Claimed {
                    key: "k1".into(),
                    instance: instance.clone(),
                },
                HistoryEvent::Linked {
                    key: "k2".into(),
                    instance: instance.clone(),
                },
                unknown.to_event(&instance),
                HistoryEvent::TakenOver {
                    key: "k1".into(),
                    instance: instance.clone(),
                    recovery_point: RecoveryPoint::PaymentCreated,
                },
                charged.to_event(&instance),
                HistoryEvent::Answered {
                    key: "k1".into(),
                    status: 201,
                },
                HistoryEvent::Settled {
                    status: PaymentStatus::Succeeded,
                    by: SettledBy::Request { key: "k1".into() },
                },
            ]
        );
        // The link's finish without a settlement: its answer only; the
        // finish that finds the payment settled writes nothing.
        let settled_first = s
            .store
            .finish(
                &linked.lease,
                Some((&payment, &succeeded())),
                &answer(),
                TIMING.ttl,
                &[],
            )
            .await
            .unwrap();
        assert_eq!(settled_first, FinishOutcome::PaymentAlreadySettled);
        assert_eq!(s.events(&payment.id).await.len(), 7);
        s.store
            .finish(&linked.lease, None, &answer(), TIMING.ttl, &[])
            .await
            .unwrap();
        assert_eq!(
            s.events(&payment.id).await.last(),
            Some(&HistoryEvent::Answered {
                key: "k2".into(),
                status: 201,
            })
        );
        // Parking writes the calls too; a repeat writes nothing.
        let parked = acquired(s.pay("k3", "order-3").await);
        let lookup = attempt(AcquirerCall::Lookup, AcquirerOutcomeKind::NotFound);
        assert!(
            s.store
                .park_lease(
                    &parked.lease,
                    Duration::from_secs(5),
                    std::slice::from_ref(&lookup)
                )
                .await
                .unwrap()
        );
        assert!(matches!(s.pay("k3", "order-3").await, Claim::Exists(_)));
        assert_eq!(
            s.events(&parked.payment.id).await,
            vec![
                HistoryEvent::Claimed {
                    key: "k3".into(),
                    instance: instance.clone(),
                },
                lookup.to_event(&instance),
            ]
        );
        // Another shop reads nothing of it.
        let other = ShopId::new("other").unwrap();
        assert!(
            s.store
                .payment_history(Some(&other), &payment.id)
                .await
                .unwrap()
                .is_empty()
        );
        s.close().await;
    }

    /// A write's entries share a row (as many rows as `ENTRIES_PER_ROW`
    /// needs) and read back one by one, in order, with increasing `seq`.
    #[tokio::test]
    async fn the_entries_of_one_write_share_a_row() {
        let s = setup("rows").await;
        let first = acquired(s.pay("k1", "order-1").await);
        let payment = first.payment.clone();
        // Many calls under one lease: more entries than one row holds.
        let calls: Vec<AcquirerAttempt> = (0..super::ENTRIES_PER_ROW + 3)
            .map(|i| AcquirerAttempt {
                acquirer_key: format!("ak{i}"),
                ..attempt(AcquirerCall::Charge, AcquirerOutcomeKind::Unknown)
            })
            .collect();
        let done = s
            .store
            .finish(
                &first.lease,
                Some((&payment, &succeeded())),
                &answer(),
                TIMING.ttl,
                &calls,
            )
            .await
            .unwrap();
        assert_eq!(done, FinishOutcome::Stored);

        let entries = s
            .store
            .payment_history(Some(&s.shop), &payment.id)
            .await
            .unwrap();
        let mut expected = vec![HistoryEvent::Claimed {
            key: "k1".into(),
            instance: s.instance.clone(),
        }];
        expected.extend(calls.iter().map(|call| call.to_event(&s.instance)));
        expected.push(HistoryEvent::Answered {
            key: "k1".into(),
            status: 201,
        });
        expected.push(HistoryEvent::Settled {
            status: PaymentStatus::Succeeded,
            by: SettledBy::Request { key: "k1".into() },
        });
        assert_eq!(
            entries.iter().map(|e| e.event.clone()).collect::<Vec<_>>(),
            expected
        );
        assert!(
            entries.windows(2).all(|w| w[0].seq < w[1].seq),
            "{entries:?}"
        );
        assert!(entries.iter().all(|e| e.payment_id == payment.id));

        // The claim's entry is the payment's row; the finish's 21 entries
        // are two rows.
        let db = chargeonce_sqlite::rusqlite::Connection::open(s.dir.join("history.db")).unwrap();
        let kinds: Vec<String> = db
            .prepare("SELECT kind FROM payment_history WHERE payment_id = ?1 ORDER BY seq")
            .unwrap()
            .query_map([payment.id.as_str()], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(kinds.len(), 2, "{kinds:?}");
        assert_eq!(kinds[0].split(',').count(), super::ENTRIES_PER_ROW);
        assert!(kinds[1].ends_with(",answered,settled"), "{kinds:?}");
        assert_eq!(entries[0].seq, super::CLAIM_SEQ);
        drop(db);
        s.close().await;
    }

    /// A payment's `claimed` entry is its row, read first; a payment
    /// claimed before migration 0009 (no `claimed_by`, a `claimed` row)
    /// reads its row's entry instead, once; another shop reads nothing.
    #[tokio::test]
    async fn the_claim_is_read_from_the_payment_row() {
        let s = setup("claim-row").await;
        let new = acquired(s.pay("k1", "order-1").await).payment;
        let old = acquired(s.pay("k2", "order-2").await).payment;
        let db = chargeonce_sqlite::rusqlite::Connection::open(s.dir.join("history.db")).unwrap();
        let rows: i64 = db
            .query_row("SELECT count(*) FROM payment_history", [], |row| row.get(0))
            .unwrap();
        assert_eq!(rows, 0, "a claim writes no history row");
        // What a payment claimed before the migration looks like.
        db.execute(
            "UPDATE payments SET claimed_by = NULL WHERE id = ?1",
            [old.id.as_str()],
        )
        .unwrap();
        db.execute(
            "INSERT INTO payment_history (payment_id, at, kind, event) \
             VALUES (?1, 1, 'claimed', ?2)",
            [
                old.id.as_str(),
                &HistoryEvent::Claimed {
                    key: "k2".into(),
                    instance: "before".into(),
                }
                .to_json(),
            ],
        )
        .unwrap();
        drop(db);

        let entries = s
            .store
            .payment_history(Some(&s.shop), &new.id)
            .await
            .unwrap();
        assert_eq!(entries.len(), 1, "{entries:?}");
        assert_eq!(entries[0].seq, super::CLAIM_SEQ);
        assert_eq!(
            super::unix_ms(entries[0].at),
            super::unix_ms(new.created_at)
        );
        assert_eq!(
            entries[0].event,
            HistoryEvent::Claimed {
                key: "k1".into(),
                instance: s.instance.clone(),
            }
        );
        assert_eq!(
            s.events(&old.id).await,
            vec![HistoryEvent::Claimed {
                key: "k2".into(),
                instance: "before".into(),
            }]
        );
        let other = ShopId::new("someone-else").unwrap();
        assert!(
            s.store
                .payment_history(Some(&other), &new.id)
                .await
                .unwrap()
                .is_empty()
        );
        s.close().await;
    }

    /// A refund's reservation, its call, answer and end carry its id.
    #[tokio::test]
    async fn a_refunds_life_is_in_its_payments_history() {
        let s = setup("refund").await;
        let paid = acquired(s.pay("k1", "order-1").await);
        s.store
            .finish(
                &paid.lease,
                Some((&paid.payment, &succeeded())),
                &answer(),
                TIMING.ttl,
                &[],
            )
            .await
            .unwrap();
        let refund = NewRefund::new(
            s.shop.clone(),
            paid.payment.id.clone(),
            IdempotencyKey::new("r1").unwrap(),
            Some(Money::parse("1.00", "RUB").unwrap()),
        );
        let RefundClaim::Acquired(claimed) = s
            .store
            .claim_refund(&s.claim("r1", "refund"), &refund, TIMING)
            .await
            .unwrap()
        else {
            panic!("a new refund key")
        };
        let refunded = attempt(AcquirerCall::Refund, AcquirerOutcomeKind::Succeeded);
        let refund_id = claimed.refund.as_ref().unwrap().id.clone();
        s.store
            .finish_refund(
                &claimed.lease,
                Some((
                    &refund_id,
                    &RefundSettlement::Succeeded {
                        provider_refund_id: "re_p".into(),
                    },
                )),
                &answer(),
                TIMING.ttl,
                std::slice::from_ref(&refunded),
            )
            .await
            .unwrap();
        let history = s
            .store
            .payment_history(None, &paid.payment.id)
            .await
            .unwrap();
        let of_refund: Vec<_> = history
            .iter()
            .filter(|e| e.refund_id.as_ref() == Some(&refund_id))
            .map(|e| e.event.clone())
            .collect();
        assert_eq!(
            of_refund,
            vec![
                HistoryEvent::RefundReserved {
                    key: "r1".into(),
                    amount_minor: 100,
                    currency: "RUB".into(),
                    instance: s.instance.clone(),
                },
                refunded.to_event(&s.instance),
                HistoryEvent::Answered {
                    key: "r1".into(),
                    status: 201,
                },
                HistoryEvent::RefundEnded {
                    status: RefundStatus::Succeeded,
                },
            ]
        );
        assert_eq!(
            history.len(),
            7,
            "the payment's claim, answer and settlement, then the refund's"
        );
        s.close().await;
    }

    /// The reconciler's and a webhook's settlements, a webhook that changes
    /// nothing, and the merchant event's deliveries and resend.
    #[tokio::test]
    async fn settlements_webhooks_and_deliveries_are_in_the_history() {
        let s = setup("outside").await;
        let reconciled = acquired(s.pay("k1", "order-1").await).payment;
        let declined = Settlement {
            status: PaymentStatus::Declined,
            provider_payment_id: None,
            decline_code: Some("card_declined".into()),
        };
        s.store
            .settle_payment(&s.shop, &reconciled.id, &declined)
            .await
            .unwrap();
        s.store
            .settle_payment(&s.shop, &reconciled.id, &declined)
            .await
            .unwrap();
        assert_eq!(
            &s.events(&reconciled.id).await[1..],
            &[HistoryEvent::Settled {
                status: PaymentStatus::Declined,
                by: SettledBy::Reconciler,
            }]
        );

        let hooked = acquired(s.pay("k2", "order-2").await).payment;
        let inbound = |id: &str, kind: EventKind| InboundEvent {
            event_id: id.into(),
            kind,
            acquirer_key: AcquirerKey::clone(&hooked.acquirer_key),
            shop_id: s.shop.clone(),
            settlement: (kind == EventKind::Succeeded).then(succeeded),
        };
        let recorded = s
            .store
            .record_event(&inbound("evt_a", EventKind::Succeeded))
            .await
            .unwrap();
        assert!(matches!(recorded, EventRecorded::Settled(_)));
        s.store
            .record_event(&inbound("evt_a", EventKind::Succeeded))
            .await
            .unwrap();
        s.store
            .record_event(&inbound("evt_b", EventKind::Processing))
            .await
            .unwrap();
        assert_eq!(
            &s.events(&hooked.id).await[1..],
            &[
                HistoryEvent::Settled {
                    status: PaymentStatus::Succeeded,
                    by: SettledBy::Webhook {
                        event_id: "evt_a".into(),
                    },
                },
                HistoryEvent::WebhookReceived {
                    event_id: "evt_b".into(),
                    kind: "payment.processing".into(),
                },
            ]
        );

        // The settlement's merchant event: delivered on the second attempt,
        // then resent and given up.
        s.store
            .set_webhook(
                &s.shop,
                Some(&WebhookEndpoint {
                    url: "http://127.0.0.1:9/hook".into(),
                    secret: WebhookSecret::new("whsec_test_secret_long_enough"),
                }),
            )
            .await
            .unwrap();
        let due = s
            .store
            .claim_due_events(10, Duration::from_secs(30))
            .await
            .unwrap();
        let event = due
            .iter()
            .find(|d| d.event.payment_id == hooked.id)
            .unwrap()
            .event
            .clone();
        let failed = |give_up_after| AttemptOutcome::Failed {
            status: Some(500),
            error: "boom".into(),
            retry_in: Duration::ZERO,
            give_up_after,
        };
        s.store
            .record_attempt(&event.id, &failed(Duration::from_secs(3600)))
            .await
            .unwrap();
        s.store
            .record_attempt(&event.id, &AttemptOutcome::Delivered { status: 204 })
            .await
            .unwrap();
        s.store.resend_event(&s.shop, &event.id).await.unwrap();
        s.store
            .record_attempt(&event.id, &failed(Duration::ZERO))
            .await
            .unwrap();
        let attempt = |n: u32, result: &str, status: u16| HistoryEvent::EventAttempt {
            event_id: event.id.as_str().to_owned(),
            event_type: event.event_type.as_str().to_owned(),
            attempt: n,
            result: result.into(),
            status: Some(status),
        };
        assert_eq!(
            &s.events(&hooked.id).await[3..],
            &[
                attempt(1, "failed", 500),
                attempt(2, "delivered", 204),
                HistoryEvent::EventResent {
                    event_id: event.id.as_str().to_owned(),
                },
                attempt(3, "given_up", 500),
            ]
        );
        s.close().await;
    }

    /// The sweep's entry is serde's own shape: it reads back.
    #[tokio::test]
    async fn a_swept_keys_entry_reads_back() {
        let s = setup("sweep").await;
        let claimed = acquired(s.pay("k1", "order-1").await);
        s.store
            .finish(
                &claimed.lease,
                None,
                &answer(),
                Duration::from_millis(1),
                &[],
            )
            .await
            .unwrap();
        // The claim's retention is an hour: expire the key by hand.
        s.store
            .write(|conn| {
                conn.execute(
                    "UPDATE idempotency_keys SET expires_at = 0, replayed = 2",
                    [],
                )?;
                Ok(chargeonce_sqlite::Write::Commit(()))
            })
            .await
            .unwrap();
        assert_eq!(s.store.sweep_expired_keys(10).await.unwrap(), 1);
        let Some(HistoryEvent::KeyExpired { key, repeats }) =
            s.events(&claimed.payment.id).await.pop()
        else {
            panic!("the sweep's entry is last")
        };
        assert_eq!((key.as_str(), repeats.replays.count), ("k1", 2));
        s.close().await;
    }
}
