//! Authorizations in the ledger: captures (several, never beyond the
//! authorization, until the last), the void of the rest, and their look-ups.
//! One write checks and inserts, so captures racing each other (from any
//! process on the file) never exceed the authorization, and a void racing a
//! capture leaves one consistent outcome.

use chargeonce_core::CaptureMethod;
use chargeonce_sqlite::Write;
use chargeonce_sqlite::rusqlite::{self, Connection, OptionalExtension, params};

use super::Ledger;
use super::rows::entry;
use crate::{CaptureError, ChargeStatus, LedgerEntry, SimulatorError};

/// A capture as the ledger records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CaptureRow {
    pub id: String,
    pub charge_id: String,
    pub amount_minor: i64,
    pub currency: String,
    pub last: bool,
    pub created_at: i64,
}

/// A capture about to be recorded.
#[derive(Debug, Clone)]
pub(crate) struct NewCaptureRow {
    /// Its id (`cp_...`).
    pub id: String,
    /// The caller's reference (its capture id), if it gave one.
    pub reference: Option<String>,
    /// Unix ms.
    pub at: i64,
    /// Whether the acquirer key deduplicates it.
    pub deduplicated: bool,
}

/// A void as the ledger records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VoidRow {
    pub id: String,
    pub charge_id: String,
    pub released_minor: i64,
    pub currency: String,
    pub created_at: i64,
}

impl CaptureRow {
    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get("id")?,
            charge_id: row.get("charge_id")?,
            amount_minor: row.get("amount_minor")?,
            currency: row.get("currency")?,
            last: row.get("last")?,
            created_at: row.get("created_at")?,
        })
    }
}

impl VoidRow {
    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get("id")?,
            charge_id: row.get("charge_id")?,
            released_minor: row.get("released_minor")?,
            currency: row.get("currency")?,
            created_at: row.get("created_at")?,
        })
    }
}

/// A deduplicated capture by its acquirer key.
fn capture_by_key(conn: &Connection, key: &str) -> Result<Option<CaptureRow>, SimulatorError> {
    Ok(conn
        .prepare_cached(
            "SELECT id, charge_id, amount_minor, currency, last, created_at \
             FROM acquirer_captures WHERE acquirer_key = ?1 AND deduplicated = 1",
        )?
        .query_row(params![key], CaptureRow::read)
        .optional()?)
}

/// The void of a charge.
fn void_of(
    conn: &Connection,
    charge_id: &str,
) -> Result<Option<(VoidRow, String)>, SimulatorError> {
    Ok(conn
        .prepare_cached(
            "SELECT id, charge_id, released_minor, currency, created_at, acquirer_key \
             FROM acquirer_voids WHERE charge_id = ?1",
        )?
        .query_row(params![charge_id], |row| {
            Ok((VoidRow::read(row)?, row.get::<_, String>("acquirer_key")?))
        })
        .optional()?)
}

/// The authorization `charge_id`, open for captures and voids: not
/// missing, an authorization that succeeded, not voided, not closed.
fn open_authorization(conn: &Connection, charge_id: &str) -> Result<LedgerEntry, CaptureError> {
    let charge = entry(
        conn,
        concat!("SELECT ", charge_columns!(), " WHERE l.id = ?1"),
        params![charge_id],
    )?
    .ok_or_else(|| CaptureError::NoSuchCharge(charge_id.to_owned()))?;
    if charge.capture_method != CaptureMethod::Manual || charge.status != ChargeStatus::Succeeded {
        return Err(CaptureError::NotCapturable(charge_id.to_owned()));
    }
    if charge.voided {
        return Err(CaptureError::Voided(charge_id.to_owned()));
    }
    if charge.closed || charge.captured_minor >= charge.amount.minor_units() {
        return Err(CaptureError::Closed(charge_id.to_owned()));
    }
    Ok(charge)
}

impl Ledger {
    /// Takes `amount_minor` of an authorization (`None`: what is left, as
    /// the last capture). `deduplicated`: once per `acquirer_key`, a repeat
    /// returns the first capture under the key (and `false`); the same key
    /// for another charge or amount is [`CaptureError::KeyReused`], nothing
    /// recorded.
    pub(crate) async fn capture(
        &self,
        charge_id: &str,
        acquirer_key: &str,
        amount_minor: Option<i64>,
        last: bool,
        new: NewCaptureRow,
    ) -> Result<(CaptureRow, bool), CaptureError> {
        let (charge_id, acquirer_key) = (charge_id.to_owned(), acquirer_key.to_owned());
        self.db
            .write(move |conn| {
                if new.deduplicated
                    && let Some(found) = capture_by_key(conn, &acquirer_key)?
                {
                    let same = found.charge_id == charge_id
                        && amount_minor.is_none_or(|a| a == found.amount_minor);
                    if !same {
                        return Err(CaptureError::KeyReused(acquirer_key));
                    }
                    return Ok(Write::Commit((found, false)));
                }
                let charge = open_authorization(conn, &charge_id)?;
                let left = charge.amount.minor_units() - charge.captured_minor;
                let (amount, last) = match amount_minor {
                    None => (left, true),
                    Some(amount) => (amount, last),
                };
                if amount <= 0 || amount > left {
                    return Err(CaptureError::ExceedsAuthorization(charge_id));
                }
                let currency = charge.amount.currency().code();
                conn.prepare_cached(
                    "INSERT INTO acquirer_captures (id, charge_id, acquirer_key, reference, \
                         amount_minor, currency, last, created_at, deduplicated) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )
                .map_err(SimulatorError::from)?
                .execute(params![
                    new.id,
                    charge_id,
                    acquirer_key,
                    new.reference,
                    amount,
                    currency,
                    last,
                    new.at,
                    new.deduplicated,
                ])
                .map_err(SimulatorError::from)?;
                let row = CaptureRow {
                    id: new.id,
                    charge_id,
                    amount_minor: amount,
                    currency: currency.to_owned(),
                    last,
                    created_at: new.at,
                };
                Ok(Write::Commit((row, true)))
            })
            .await
    }

    /// Releases what is left of an authorization, once: a repeat under the
    /// same key returns the void (and `false`). Refused when the
    /// authorization is closed, voided under another key, or not one.
    pub(crate) async fn void(
        &self,
        charge_id: &str,
        acquirer_key: &str,
        id: String,
        at: i64,
    ) -> Result<(VoidRow, bool), CaptureError> {
        let (charge_id, acquirer_key) = (charge_id.to_owned(), acquirer_key.to_owned());
        self.db
            .write(move |conn| {
                if let Some((found, key)) = void_of(conn, &charge_id)? {
                    if key == acquirer_key {
                        return Ok(Write::Commit((found, false)));
                    }
                    return Err(CaptureError::Voided(charge_id));
                }
                let charge = open_authorization(conn, &charge_id)?;
                let released = charge.amount.minor_units() - charge.captured_minor;
                let currency = charge.amount.currency().code();
                conn.prepare_cached(
                    "INSERT INTO acquirer_voids (id, charge_id, acquirer_key, released_minor, \
                         currency, created_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .map_err(SimulatorError::from)?
                .execute(params![id, charge_id, acquirer_key, released, currency, at])
                .map_err(SimulatorError::from)?;
                let row = VoidRow {
                    id,
                    charge_id,
                    released_minor: released,
                    currency: currency.to_owned(),
                    created_at: at,
                };
                Ok(Write::Commit((row, true)))
            })
            .await
    }

    /// The captures of a charge: all of them, or those made under the
    /// caller's `reference`, oldest first.
    pub(crate) async fn captures(
        &self,
        charge_id: &str,
        reference: Option<&str>,
    ) -> Result<Vec<CaptureRow>, SimulatorError> {
        let (charge_id, reference) = (charge_id.to_owned(), reference.map(str::to_owned));
        self.db
            .read(move |conn| -> Result<_, SimulatorError> {
                let mut stmt = conn.prepare_cached(
                    "SELECT id, charge_id, amount_minor, currency, last, created_at \
                     FROM acquirer_captures \
                     WHERE charge_id = ?1 AND (?2 IS NULL OR reference = ?2) \
                     ORDER BY created_at, id",
                )?;
                let rows = stmt.query_map(params![charge_id, reference], CaptureRow::read)?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
            .await
    }
}
