//! The reconciler's findings, persisted: recorded once per identity and
//! seen again on later passes, resolved once, each new finding and each
//! resolution with an entry in its payment's history (same write).

use async_trait::async_trait;
use chargeonce_core::findings::{Finding, FindingId, FindingQuery, NewFinding, Resolution};
use chargeonce_core::history::HistoryEvent;
use chargeonce_core::store::Findings;
use chargeonce_core::{PaymentId, StoreError};
use chargeonce_sqlite::Write;
use chargeonce_sqlite::rusqlite::{Connection, params};

use super::{Result, SqliteStore, all, now_ms, one};
use crate::finding_rows::{
    FindingRow, ResolutionColumns, UpsertedFindingRow, encode_charges, finding_columns,
};
use crate::rows::FromSqliteRow;

/// The default page of a findings list, and its bound.
const DEFAULT_LIMIT: u32 = 100;
const MAX_LIMIT: u32 = 500;

/// The findings list, newest sighting first, filtered by state (`?1`), kind
/// (`?2`) and shop (`?3`), each ignored when null, `?4` null (every
/// payment's): a walk of `findings_by_last_seen`, stopped by the limit `?5`.
pub(super) const FINDINGS: &str = concat!(
    "SELECT ",
    finding_columns!(),
    " FROM reconciliation_findings WHERE ?4 IS NULL \
       AND (?1 IS NULL OR (resolved_at IS NOT NULL) = ?1) \
       AND (?2 IS NULL OR kind = ?2) \
       AND (?3 IS NULL OR shop_id = ?3) \
     ORDER BY last_seen DESC, id DESC LIMIT ?5"
);

/// One payment's findings (`payment_id = ?4`: a range of
/// `findings_by_payment`, a handful of rows sorted, never a walk of every
/// finding), newest sighting first; `?1`, `?2`, `?3` and `?5` as in
/// [`FINDINGS`].
pub(super) const PAYMENT_FINDINGS: &str = concat!(
    "SELECT ",
    finding_columns!(),
    " FROM reconciliation_findings WHERE payment_id = ?4 \
       AND (?1 IS NULL OR (resolved_at IS NOT NULL) = ?1) \
       AND (?2 IS NULL OR kind = ?2) \
       AND (?3 IS NULL OR shop_id = ?3) \
     ORDER BY last_seen DESC, id DESC LIMIT ?5"
);

/// One finding, on whichever connection.
fn finding_in(conn: &Connection, id: FindingId) -> Result<Option<Finding>> {
    one::<FindingRow, _>(
        conn,
        concat!(
            "SELECT ",
            finding_columns!(),
            " FROM reconciliation_findings WHERE id = ?1"
        ),
        params![id.0],
    )
}

/// Resolves an open finding (a conditional update: a resolved one stays as
/// it was), with a `finding_resolved` entry in its payment's history;
/// whether it moved.
fn resolve_in(conn: &Connection, id: FindingId, resolution: &Resolution) -> Result<bool> {
    let ResolutionColumns {
        how,
        by,
        note,
        refunded,
    } = ResolutionColumns::of(resolution)?;
    let moved = conn
        .prepare_cached(concat!(
            "UPDATE reconciliation_findings SET resolved_at = ",
            now_ms!(),
            ", resolution = ?2, resolved_by = ?3, resolution_note = ?4, \
                 refunded_charge_ids = ?5 \
             WHERE id = ?1 AND resolved_at IS NULL"
        ))?
        .execute(params![id.0, how, by, note, refunded])?;
    if moved == 0 {
        return Ok(false);
    }
    let payment_id: Option<String> = conn
        .prepare_cached("SELECT payment_id FROM reconciliation_findings WHERE id = ?1")?
        .query_row(params![id.0], |row| row.get(0))?;
    if let Some(payment_id) = payment_id {
        let payment_id = PaymentId::parse(&payment_id).map_err(StoreError::corrupt_by)?;
        let event = HistoryEvent::FindingResolved {
            finding_id: id.0,
            how: how.to_owned(),
        };
        append_history(conn, &payment_id, &event)?;
    }
    Ok(true)
}

/// Appends an entry to a payment's history (not about a refund), at
/// SQLite's time; its `seq` is the new rowid.
fn append_history(conn: &Connection, payment_id: &PaymentId, event: &HistoryEvent) -> Result<()> {
    conn.prepare_cached(concat!(
        "INSERT INTO payment_history (payment_id, refund_id, at, kind, event) \
         VALUES (?1, NULL, ",
        now_ms!(),
        ", ?2, ?3)"
    ))?
    .execute(params![payment_id.as_str(), event.kind(), event.to_json()])?;
    Ok(())
}

#[async_trait]
impl Findings for SqliteStore {
    /// Records one reconciler pass's findings, one write.
    async fn record_findings(&self, found: &[NewFinding]) -> Result<Vec<FindingId>, StoreError> {
        if found.is_empty() {
            return Ok(Vec::new());
        }
        let found = found.to_vec();
        // Never shed: the pass has already acted (refunded) on what it records.
        self.write(move |conn| {
            let mut ids = Vec::with_capacity(found.len());
            for finding in &found {
                let identity = finding.identity();
                conn.prepare_cached(concat!(
                    "INSERT INTO reconciliation_findings (identity, kind, shop_id, reference, \
                             payment_id, charge_ids, amount_minor, currency, detail, first_seen, \
                             last_seen) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ",
                    now_ms!(),
                    ", ",
                    now_ms!(),
                    ") ON CONFLICT (identity) DO UPDATE SET detail = excluded.detail, \
                             last_seen = ",
                    now_ms!(),
                    ", seen = seen + 1"
                ))?
                .execute(params![
                    identity,
                    finding.kind.as_str(),
                    finding.shop_id.as_str(),
                    finding.reference.as_str(),
                    finding.payment_id.as_ref().map(PaymentId::as_str),
                    encode_charges(&finding.charge_ids)?,
                    finding.amount.map(|m| m.minor_units()),
                    finding.amount.map(|m| m.currency().code()),
                    finding.detail,
                ])?;
                // `seen` starts at 1 and every later sighting adds one, so a
                // row that reads back 1 was inserted by this statement. A
                // resolved finding seen again keeps its resolution.
                let (id, inserted, payment_id) = conn
                    .prepare_cached(
                        "SELECT id, seen, payment_id FROM reconciliation_findings \
                             WHERE identity = ?1",
                    )?
                    .query_row(params![identity], UpsertedFindingRow::from_sqlite)?
                    .parse()?;
                if inserted && let Some(payment_id) = &payment_id {
                    let event = HistoryEvent::Finding {
                        finding_id: id.0,
                        kind: finding.kind.as_str().to_owned(),
                    };
                    append_history(conn, payment_id, &event)?;
                }
                if !finding.refunded.is_empty() {
                    let resolution = Resolution::Refunded {
                        charge_ids: finding.refunded.clone(),
                    };
                    resolve_in(conn, id, &resolution)?;
                }
                ids.push(id);
            }
            Ok(Write::Commit(ids))
        })
        .await
    }

    /// The findings that match, newest last sighting first.
    async fn findings(&self, query: &FindingQuery) -> Result<Vec<Finding>, StoreError> {
        let query = query.clone();
        let limit = match query.limit {
            0 => DEFAULT_LIMIT,
            n => n.min(MAX_LIMIT),
        };
        let sql = match query.payment_id {
            None => FINDINGS,
            Some(_) => PAYMENT_FINDINGS,
        };
        self.read(move |conn| {
            all::<FindingRow, _>(
                conn,
                sql,
                params![
                    query.resolved,
                    query.kind.map(|k| k.as_str()),
                    query.shop_id.as_ref().map(|s| s.as_str()),
                    query.payment_id.as_ref().map(PaymentId::as_str),
                    i64::from(limit),
                ],
            )
        })
        .await
    }

    /// One finding.
    async fn finding(&self, id: FindingId) -> Result<Option<Finding>, StoreError> {
        self.read(move |conn| finding_in(conn, id)).await
    }

    /// Resolves a finding unless it is resolved already; the finding as it is
    /// afterwards.
    async fn resolve_finding(
        &self,
        id: FindingId,
        resolution: &Resolution,
    ) -> Result<Option<Finding>, StoreError> {
        let resolution = resolution.clone();
        self.write(move |conn| {
            resolve_in(conn, id, &resolution)?;
            // Resolved now, resolved before (a double click), or none.
            finding_in(conn, id).map(Write::Commit)
        })
        .await
    }
}
