//! Ledger rows as SQLite returns them, read into [`LedgerEntry`], and the
//! time format of the tables (unix ms).

use chargeonce_core::{AcquirerKey, CaptureMethod, Currency, Money, PaymentId, Reference, ShopId};
use chargeonce_sqlite::rusqlite::{self, Connection, OptionalExtension};
use time::OffsetDateTime;

use crate::{ChargeStatus, LedgerEntry, SimulatorError};

/// A ledger row as SQLite returns it.
struct Row {
    id: String,
    acquirer_key: String,
    shop_id: String,
    payment_id: String,
    reference: String,
    amount_minor: i64,
    currency: String,
    status: String,
    decline_code: Option<String>,
    created_at: i64,
    refunded_minor: i64,
    capture_method: String,
    captured_minor: i64,
    closed: bool,
    voided: bool,
    trace_id: Option<String>,
}

impl TryFrom<Row> for LedgerEntry {
    type Error = SimulatorError;

    fn try_from(row: Row) -> Result<Self, Self::Error> {
        let corrupt = |reason: String| SimulatorError::Corrupt {
            id: row.id.clone(),
            reason,
        };
        let currency = Currency::from_code(&row.currency).map_err(|e| corrupt(e.to_string()))?;
        let entry = LedgerEntry {
            id: row.id.clone(),
            acquirer_key: AcquirerKey::from_stored(row.acquirer_key.clone()),
            shop_id: ShopId::new(row.shop_id.as_str()).map_err(|e| corrupt(e.to_string()))?,
            payment_id: PaymentId::parse(&row.payment_id).map_err(|e| corrupt(e.to_string()))?,
            reference: Reference::new(row.reference.as_str())
                .map_err(|e| corrupt(e.to_string()))?,
            amount: Money::from_minor(row.amount_minor, currency)
                .map_err(|e| corrupt(e.to_string()))?,
            status: ChargeStatus::parse(&row.status)
                .ok_or_else(|| corrupt(format!("unknown status `{}`", row.status)))?,
            decline_code: row.decline_code.clone(),
            created_at: from_unix_millis(row.created_at).map_err(corrupt)?,
            refunded_minor: row.refunded_minor,
            capture_method: CaptureMethod::parse(&row.capture_method).ok_or_else(|| {
                corrupt(format!("unknown capture method `{}`", row.capture_method))
            })?,
            captured_minor: row.captured_minor,
            closed: row.closed,
            voided: row.voided,
            trace_id: row.trace_id.clone(),
        };
        Ok(entry)
    }
}

/// Unix milliseconds of a time, as the tables store it.
pub(crate) fn unix_millis(at: OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

fn from_unix_millis(ms: i64) -> Result<OffsetDateTime, String> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map_err(|e| format!("created_at {ms}: {e}"))
}

impl Row {
    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get("id")?,
            acquirer_key: row.get("acquirer_key")?,
            shop_id: row.get("shop_id")?,
            payment_id: row.get("payment_id")?,
            reference: row.get("reference")?,
            amount_minor: row.get("amount_minor")?,
            currency: row.get("currency")?,
            status: row.get("status")?,
            decline_code: row.get("decline_code")?,
            created_at: row.get("created_at")?,
            refunded_minor: row.get("refunded_minor")?,
            capture_method: row.get("capture_method")?,
            captured_minor: row.get("captured_minor")?,
            closed: row.get("closed")?,
            voided: row.get("voided")?,
            trace_id: row.get("trace_id")?,
        })
    }
}

/// Collects a query's ledger rows.
pub(super) fn entries(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<LedgerEntry>, SimulatorError> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(params, Row::read)?;
    let mut out = Vec::new();
    for row in rows {
        out.push(LedgerEntry::try_from(row?)?);
    }
    Ok(out)
}

/// The first ledger row a query returns.
pub(super) fn entry(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Option<LedgerEntry>, SimulatorError> {
    conn.prepare_cached(sql)?
        .query_row(params, Row::read)
        .optional()?
        .map(LedgerEntry::try_from)
        .transpose()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::entry::now_millis;

    #[test]
    fn millis_round_trip() {
        let at = now_millis();
        assert_eq!(from_unix_millis(unix_millis(at)).unwrap(), at);
    }
}
