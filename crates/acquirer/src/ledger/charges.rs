//! Charges in the ledger: recording an attempt (with its webhook events),
//! and finding attempts by key, id, payment, reference or time.

use chargeonce_sqlite::Write;
use chargeonce_sqlite::rusqlite::params;

use super::rows::{entries, entry, unix_millis};
use super::{Ledger, OutboxEvent};
use crate::{LedgerEntry, SimulatorError};

impl Ledger {
    /// Records an attempt, with the webhook events it causes, atomically. With
    /// `deduplicated`, nothing is written when the acquirer key is already in
    /// the ledger (an idempotent acquirer); otherwise the row is always added.
    /// `true` when this call wrote the row: the caller is the first execution.
    /// Atomic across connections and processes; answered once durable.
    pub(crate) async fn insert(
        &self,
        entry: &LedgerEntry,
        deduplicated: bool,
        events: &[OutboxEvent],
    ) -> Result<bool, SimulatorError> {
        let entry = entry.clone();
        let events = events.to_vec();
        self.db
            .write(move |conn| {
                let sql = if deduplicated {
                    "INSERT INTO acquirer_ledger \
                       (id, acquirer_key, shop_id, payment_id, reference, amount_minor, currency, \
                        status, decline_code, created_at, capture_method, trace_id, deduplicated) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, 1) \
                     ON CONFLICT (acquirer_key) WHERE deduplicated = 1 DO NOTHING"
                } else {
                    "INSERT INTO acquirer_ledger \
                       (id, acquirer_key, shop_id, payment_id, reference, amount_minor, currency, \
                        status, decline_code, created_at, capture_method, trace_id, deduplicated) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, 0)"
                };
                let inserted = conn.prepare_cached(sql)?.execute(params![
                    entry.id,
                    entry.acquirer_key.as_str(),
                    entry.shop_id.as_str(),
                    entry.payment_id.as_str(),
                    entry.reference.as_str(),
                    entry.amount.minor_units(),
                    entry.amount.currency().code(),
                    entry.status.as_str(),
                    entry.decline_code,
                    unix_millis(entry.created_at),
                    entry.capture_method.as_str(),
                    entry.trace_id,
                ])? == 1;
                if inserted {
                    for event in &events {
                        conn.prepare_cached(
                            "INSERT INTO acquirer_events \
                               (id, charge_id, type, payload, created_at, due_at, attempts) \
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0)",
                        )?
                        .execute(params![
                            event.id,
                            event.charge_id,
                            event.kind,
                            event.payload,
                            event.created_at,
                            event.due_at,
                        ])?;
                    }
                }
                Ok(Write::Commit(inserted))
            })
            .await
    }

    /// The attempt an idempotent acquirer recorded under a key, if any.
    /// Rows recorded without idempotency are not found by key.
    pub(crate) async fn find(&self, key: &str) -> Result<Option<LedgerEntry>, SimulatorError> {
        let key = key.to_owned();
        self.db
            .read(move |conn| {
                entry(
                    conn,
                    concat!(
                        "SELECT ",
                        charge_columns!(),
                        " WHERE l.acquirer_key = ?1 AND l.deduplicated = 1"
                    ),
                    params![key],
                )
            })
            .await
    }

    /// One charge by its id.
    pub(crate) async fn charge(&self, id: &str) -> Result<Option<LedgerEntry>, SimulatorError> {
        let id = id.to_owned();
        self.db
            .read(move |conn| {
                entry(
                    conn,
                    concat!("SELECT ", charge_columns!(), " WHERE l.id = ?1"),
                    params![id],
                )
            })
            .await
    }

    /// Every attempt for a caller's payment (its reference), oldest first.
    pub(crate) async fn for_payment(
        &self,
        shop_id: &str,
        payment_id: &str,
    ) -> Result<Vec<LedgerEntry>, SimulatorError> {
        let (shop_id, payment_id) = (shop_id.to_owned(), payment_id.to_owned());
        self.db
            .read(move |conn| {
                entries(
                    conn,
                    concat!(
                        "SELECT ",
                        charge_columns!(),
                        " WHERE l.shop_id = ?1 AND l.payment_id = ?2 ORDER BY l.created_at, l.id"
                    ),
                    params![shop_id, payment_id],
                )
            })
            .await
    }

    /// Every attempt recorded in `[from, to)` (unix ms), oldest first.
    pub(crate) async fn between(
        &self,
        from: i64,
        to: i64,
    ) -> Result<Vec<LedgerEntry>, SimulatorError> {
        self.db
            .read(move |conn| {
                entries(
                    conn,
                    concat!(
                        "SELECT ",
                        charge_columns!(),
                        " WHERE l.created_at >= ?1 AND l.created_at < ?2 \
                          ORDER BY l.created_at, l.id"
                    ),
                    params![from, to],
                )
            })
            .await
    }

    /// Up to `limit` attempts recorded in `[from, to)` (unix ms), in
    /// `(created_at, id)` order, after the attempt `after` (unix ms and id;
    /// `None`: from the start). Keyset pagination on the
    /// `acquirer_ledger_created_at` index, so a page costs its own rows.
    pub(crate) async fn page(
        &self,
        from: i64,
        to: i64,
        after: Option<(i64, &str)>,
        limit: u32,
    ) -> Result<Vec<LedgerEntry>, SimulatorError> {
        // One lower bound, as a row value: SQLite starts the index range
        // there. (With `created_at >= from` beside it, it started at `from`
        // and filtered every row up to the cursor: a pass over a window was
        // quadratic.) `(from, '')` is `created_at >= from`: ids are not empty.
        let (after_ms, after_id) = match after {
            Some(cursor) if cursor > (from, "") => cursor,
            _ => (from, ""),
        };
        let (after_ms, after_id) = (after_ms, after_id.to_owned());
        self.db
            .read(move |conn| {
                entries(
                    conn,
                    concat!(
                        "SELECT ",
                        charge_columns!(),
                        " WHERE (l.created_at, l.id) > (?1, ?2) AND l.created_at < ?3 \
                         ORDER BY l.created_at, l.id LIMIT ?4"
                    ),
                    params![after_ms, after_id, to, i64::from(limit)],
                )
            })
            .await
    }

    /// Every attempt for one order reference of one shop, oldest first (the
    /// `acquirer_ledger_reference` index).
    pub(crate) async fn for_reference(
        &self,
        shop_id: &str,
        reference: &str,
    ) -> Result<Vec<LedgerEntry>, SimulatorError> {
        let (shop_id, reference) = (shop_id.to_owned(), reference.to_owned());
        self.db
            .read(move |conn| {
                entries(
                    conn,
                    concat!(
                        "SELECT ",
                        charge_columns!(),
                        " WHERE l.shop_id = ?1 AND l.reference = ?2 ORDER BY l.created_at, l.id"
                    ),
                    params![shop_id, reference],
                )
            })
            .await
    }

    /// Every attempt, oldest first.
    pub(crate) async fn all(&self) -> Result<Vec<LedgerEntry>, SimulatorError> {
        self.db
            .read(|conn| {
                entries(
                    conn,
                    concat!("SELECT ", charge_columns!(), " ORDER BY l.created_at, l.id"),
                    [],
                )
            })
            .await
    }
}
