//! The webhook outbox: events waiting for delivery, and their bookkeeping.

use chargeonce_sqlite::Write;
use chargeonce_sqlite::rusqlite::{self, params};

use super::Ledger;
use crate::SimulatorError;

/// A webhook event waiting in the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OutboxEvent {
    /// The event id.
    pub id: String,
    /// The charge it is about.
    pub charge_id: String,
    /// `payment.succeeded`, ...
    pub kind: String,
    /// The JSON delivered.
    pub payload: String,
    /// Unix ms of creation.
    pub created_at: i64,
    /// Unix ms of the next attempt.
    pub due_at: i64,
    /// Attempts made.
    pub attempts: i64,
}

impl OutboxEvent {
    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get("id")?,
            charge_id: row.get("charge_id")?,
            kind: row.get("type")?,
            payload: row.get("payload")?,
            created_at: row.get("created_at")?,
            due_at: row.get("due_at")?,
            attempts: row.get("attempts")?,
        })
    }
}

impl Ledger {
    /// Up to `limit` undelivered events due at `now` (unix ms), by due time.
    pub(crate) async fn due_events(
        &self,
        now: i64,
        limit: u32,
    ) -> Result<Vec<OutboxEvent>, SimulatorError> {
        self.db
            .read(move |conn| -> Result<_, SimulatorError> {
                let mut stmt = conn.prepare_cached(
                    "SELECT id, charge_id, type, payload, created_at, due_at, attempts \
                     FROM acquirer_events WHERE delivered_at IS NULL AND due_at <= ?1 \
                     ORDER BY due_at, id LIMIT ?2",
                )?;
                let rows = stmt.query_map(params![now, i64::from(limit)], OutboxEvent::read)?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
            .await
    }

    /// Marks events delivered (a 2xx came back), in one transaction.
    pub(crate) async fn delivered(&self, ids: &[String], at: i64) -> Result<(), SimulatorError> {
        if ids.is_empty() {
            return Ok(());
        }
        let ids = ids.to_vec();
        self.db
            .write(move |conn| -> Result<_, SimulatorError> {
                let mut stmt = conn.prepare_cached(
                    "UPDATE acquirer_events SET delivered_at = ?2, attempts = attempts + 1 \
                     WHERE id = ?1",
                )?;
                for id in &ids {
                    stmt.execute(params![id, at])?;
                }
                Ok(Write::Commit(()))
            })
            .await
    }

    /// Counts a failed attempt and sets the next one.
    pub(crate) async fn retry_later(&self, id: &str, due_at: i64) -> Result<(), SimulatorError> {
        let id = id.to_owned();
        self.db
            .write(move |conn| -> Result<_, SimulatorError> {
                conn.prepare_cached(
                    "UPDATE acquirer_events SET due_at = ?2, attempts = attempts + 1 WHERE id = ?1",
                )?
                .execute(params![id, due_at])?;
                Ok(Write::Commit(()))
            })
            .await
    }

    /// How many events are not delivered yet.
    pub(crate) async fn undelivered(&self) -> Result<i64, SimulatorError> {
        self.db
            .read(|conn| -> Result<_, SimulatorError> {
                Ok(conn
                    .prepare_cached(
                        "SELECT count(*) FROM acquirer_events WHERE delivered_at IS NULL",
                    )?
                    .query_row([], |row| row.get(0))?)
            })
            .await
    }
}
