//! Refunds in the ledger: their rows, their refusals, recording one (never
//! beyond the charge) and listing them.

use chargeonce_sqlite::Write;
use chargeonce_sqlite::rusqlite::{self, Connection, OptionalExtension, params};

use super::Ledger;
use super::rows::entry;
use crate::{RefundError, SimulatorError};

/// A refund as the ledger records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RefundRow {
    pub id: String,
    pub charge_id: String,
    pub amount_minor: i64,
    pub currency: String,
    pub created_at: i64,
}

/// A refund about to be recorded.
#[derive(Debug, Clone)]
pub(crate) struct NewRefundRow {
    /// Its id (`re_...`).
    pub id: String,
    /// The caller's reference (its refund id), if it gave one.
    pub reference: Option<String>,
    /// Unix ms.
    pub at: i64,
    /// Whether the acquirer key deduplicates it.
    pub deduplicated: bool,
}

impl RefundRow {
    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get("id")?,
            charge_id: row.get("charge_id")?,
            amount_minor: row.get("amount_minor")?,
            currency: row.get("currency")?,
            created_at: row.get("created_at")?,
        })
    }
}

/// A refund by its acquirer key, on whichever connection.
fn refund_by_key(
    conn: &Connection,
    acquirer_key: &str,
) -> Result<Option<RefundRow>, SimulatorError> {
    Ok(conn
        .prepare_cached(
            "SELECT id, charge_id, amount_minor, currency, created_at \
             FROM acquirer_refunds WHERE acquirer_key = ?1",
        )?
        .query_row(params![acquirer_key], RefundRow::read)
        .optional()?)
}

impl Ledger {
    /// Refunds (part of) a succeeded charge. `deduplicated`: once per
    /// `acquirer_key`, a repeat returns the first refund under that key (and
    /// `false`); otherwise every call is a new refund, as at a provider that
    /// ignores keys. `None` refunds what is left of the charge. One write
    /// checks and inserts, so concurrent refunds never exceed the charge.
    pub(crate) async fn refund(
        &self,
        charge_id: &str,
        acquirer_key: &str,
        amount_minor: Option<i64>,
        new: NewRefundRow,
    ) -> Result<(RefundRow, bool), RefundError> {
        let (charge_id, acquirer_key) = (charge_id.to_owned(), acquirer_key.to_owned());
        self.db
            .write(move |conn| {
                if new.deduplicated
                    && let Some(found) = refund_by_key(conn, &acquirer_key)?
                {
                    return Ok(Write::Commit((found, false)));
                }
                let charge = entry(
                    conn,
                    concat!("SELECT ", charge_columns!(), " WHERE l.id = ?1"),
                    params![charge_id],
                )?
                .ok_or_else(|| RefundError::NoSuchCharge(charge_id.clone()))?;
                if charge.status != crate::ChargeStatus::Succeeded {
                    return Err(RefundError::Declined(charge_id));
                }
                // Only money taken can go back: an authorization's captures.
                let total = charge.taken_minor();
                let amount = amount_minor.unwrap_or(total - charge.refunded_minor);
                if amount <= 0 || charge.refunded_minor + amount > total {
                    return Err(RefundError::ExceedsCharge(charge_id));
                }
                conn.prepare_cached(
                    "INSERT INTO acquirer_refunds (id, charge_id, acquirer_key, reference, \
                         amount_minor, currency, created_at, deduplicated) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .map_err(SimulatorError::from)?
                .execute(params![
                    new.id,
                    charge_id,
                    acquirer_key,
                    new.reference,
                    amount,
                    charge.amount.currency().code(),
                    new.at,
                    new.deduplicated,
                ])
                .map_err(SimulatorError::from)?;
                Ok(Write::Commit((
                    RefundRow {
                        id: new.id,
                        charge_id,
                        amount_minor: amount,
                        currency: charge.amount.currency().code().to_owned(),
                        created_at: new.at,
                    },
                    true,
                )))
            })
            .await
    }

    /// The refunds of a charge made under the caller's `reference`, oldest first.
    pub(crate) async fn refunds_for_reference(
        &self,
        charge_id: &str,
        reference: &str,
    ) -> Result<Vec<RefundRow>, SimulatorError> {
        let (charge_id, reference) = (charge_id.to_owned(), reference.to_owned());
        self.db
            .read(move |conn| -> Result<_, SimulatorError> {
                let mut stmt = conn.prepare_cached(
                    "SELECT id, charge_id, amount_minor, currency, created_at \
                     FROM acquirer_refunds WHERE charge_id = ?1 AND reference = ?2 \
                     ORDER BY created_at, id",
                )?;
                let rows = stmt.query_map(params![charge_id, reference], RefundRow::read)?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
            .await
    }

    /// Every refund, oldest first.
    pub(crate) async fn refunds(&self) -> Result<Vec<RefundRow>, SimulatorError> {
        self.db
            .read(|conn| -> Result<_, SimulatorError> {
                let mut stmt = conn.prepare_cached(
                    "SELECT id, charge_id, amount_minor, currency, created_at \
                     FROM acquirer_refunds ORDER BY created_at, id",
                )?;
                let rows = stmt.query_map([], RefundRow::read)?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
            .await
    }
}
