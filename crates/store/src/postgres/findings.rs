//! The reconciler's findings, persisted: recorded once per identity and
//! seen again on later passes, resolved once, each new finding and each
//! resolution with an entry in its payment's history (same transaction).

use async_trait::async_trait;
use chargeonce_core::findings::{Finding, FindingId, FindingQuery, NewFinding, Resolution};
use chargeonce_core::history::HistoryEvent;
use chargeonce_core::store::Findings;
use chargeonce_core::{PaymentId, ShopId, StoreError};
use sqlx::{Postgres, Transaction};

use super::{PgStore, store_error};
use crate::finding_rows::{
    FindingRow, ResolutionColumns, UpsertedFindingRow, encode_charges, finding_columns,
};

/// The default page of a findings list, and its bound.
const DEFAULT_LIMIT: u32 = 100;
const MAX_LIMIT: u32 = 500;

/// The findings list, newest sighting first, filtered by state (`$1`), kind
/// (`$2`) and shop (`$3`), each ignored when null, `$4` null (every
/// payment's): a walk of `findings_by_last_seen`, stopped by the limit `$5`.
const FINDINGS: &str = concat!(
    "SELECT ",
    finding_columns!(),
    " FROM reconciliation_findings WHERE $4::text IS NULL \
       AND ($1::bool IS NULL OR (resolved_at IS NOT NULL) = $1) \
       AND ($2::text IS NULL OR kind = $2) \
       AND ($3::text IS NULL OR shop_id = $3) \
     ORDER BY last_seen DESC, id DESC LIMIT $5"
);

/// One payment's findings (`payment_id = $4`: a range of
/// `findings_by_payment`, a handful of rows sorted, never a walk of every
/// finding), newest sighting first; `$1`, `$2`, `$3` and `$5` as in
/// [`FINDINGS`].
const PAYMENT_FINDINGS: &str = concat!(
    "SELECT ",
    finding_columns!(),
    " FROM reconciliation_findings WHERE payment_id = $4 \
       AND ($1::bool IS NULL OR (resolved_at IS NOT NULL) = $1) \
       AND ($2::text IS NULL OR kind = $2) \
       AND ($3::text IS NULL OR shop_id = $3) \
     ORDER BY last_seen DESC, id DESC LIMIT $5"
);

/// Resolves an open finding in `tx` (a conditional update: a resolved one
/// stays as it was), with a `finding_resolved` entry in its payment's
/// history; the finding resolved, `None` when nothing moved.
async fn resolve_in(
    tx: &mut Transaction<'static, Postgres>,
    id: FindingId,
    resolution: &Resolution,
) -> Result<Option<Finding>, StoreError> {
    let ResolutionColumns {
        how,
        by,
        note,
        refunded,
    } = ResolutionColumns::of(resolution)?;
    let row = sqlx::query_as::<_, FindingRow>(concat!(
        "UPDATE reconciliation_findings SET resolved_at = now(), resolution = $2, \
             resolved_by = $3, resolution_note = $4, refunded_charge_ids = $5 \
         WHERE id = $1 AND resolved_at IS NULL RETURNING ",
        finding_columns!()
    ))
    .bind(id.0)
    .bind(how)
    .bind(by)
    .bind(note)
    .bind(refunded)
    .fetch_optional(&mut **tx)
    .await
    .map_err(store_error)?;
    let Some(row) = row else { return Ok(None) };
    let finding = Finding::try_from(row)?;
    if let Some(payment_id) = &finding.payment_id {
        let event = HistoryEvent::FindingResolved {
            finding_id: id.0,
            how: how.to_owned(),
        };
        append_history(tx, &finding.shop_id, payment_id, &event).await?;
    }
    Ok(Some(finding))
}

/// Appends an entry to a payment's history (not about a refund), at the
/// transaction's time.
async fn append_history(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
    payment_id: &PaymentId,
    event: &HistoryEvent,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO payment_history (payment_id, refund_id, shop_id, at, kind, event) \
         VALUES ($1, NULL, $4, now(), $2, $3)",
    )
    .bind(payment_id.as_str())
    .bind(event.kind())
    .bind(event.to_json())
    .bind(shop_id.as_str())
    .execute(&mut **tx)
    .await
    .map_err(store_error)?;
    Ok(())
}

#[async_trait]
impl Findings for PgStore {
    /// Records one reconciler pass's findings, one transaction.
    async fn record_findings(&self, found: &[NewFinding]) -> Result<Vec<FindingId>, StoreError> {
        if found.is_empty() {
            return Ok(Vec::new());
        }
        // Rows are locked in the order of their identity, so that two passes
        // recording the same findings at once wait for each other instead of
        // deadlocking; the ids come back in the order given.
        let mut order: Vec<(String, usize)> = found
            .iter()
            .enumerate()
            .map(|(i, finding)| (finding.identity(), i))
            .collect();
        order.sort();
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        let mut ids = vec![FindingId(0); found.len()];
        for (identity, i) in order {
            let finding = &found[i];
            // `seen` starts at 1 and every later sighting adds one, so a row
            // that reads back 1 was inserted by this statement. A resolved
            // finding seen again keeps its resolution.
            let (id, inserted, payment_id) = sqlx::query_as::<_, UpsertedFindingRow>(
                "INSERT INTO reconciliation_findings (identity, kind, shop_id, reference, payment_id, \
                     charge_ids, amount_minor, currency, detail) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                 ON CONFLICT (identity, shop_id) DO UPDATE SET detail = EXCLUDED.detail, last_seen = now(), \
                     seen = reconciliation_findings.seen + 1 \
                 RETURNING id, seen, payment_id",
            )
            .bind(identity)
            .bind(finding.kind.as_str())
            .bind(finding.shop_id.as_str())
            .bind(finding.reference.as_str())
            .bind(finding.payment_id.as_ref().map(PaymentId::as_str))
            .bind(encode_charges(&finding.charge_ids)?)
            .bind(finding.amount.map(|m| m.minor_units()))
            .bind(finding.amount.map(|m| m.currency().code()))
            .bind(&finding.detail)
            .fetch_one(&mut *tx)
            .await
            .map_err(store_error)?
            .parse()?;
            if inserted && let Some(payment_id) = &payment_id {
                let event = HistoryEvent::Finding {
                    finding_id: id.0,
                    kind: finding.kind.as_str().to_owned(),
                };
                append_history(&mut tx, &finding.shop_id, payment_id, &event).await?;
            }
            if !finding.refunded.is_empty() {
                let resolution = Resolution::Refunded {
                    charge_ids: finding.refunded.clone(),
                };
                resolve_in(&mut tx, id, &resolution).await?;
            }
            ids[i] = id;
        }
        tx.commit().await.map_err(store_error)?;
        Ok(ids)
    }

    /// The findings that match, newest last sighting first.
    async fn findings(&self, query: &FindingQuery) -> Result<Vec<Finding>, StoreError> {
        let limit = match query.limit {
            0 => DEFAULT_LIMIT,
            n => n.min(MAX_LIMIT),
        };
        let sql = match query.payment_id {
            None => FINDINGS,
            Some(_) => PAYMENT_FINDINGS,
        };
        super::all(
            self,
            sqlx::query_as::<_, FindingRow>(sql)
                .bind(query.resolved)
                .bind(query.kind.map(|k| k.as_str()))
                .bind(query.shop_id.as_ref().map(|s| s.as_str()))
                .bind(query.payment_id.as_ref().map(PaymentId::as_str))
                .bind(i64::from(limit)),
        )
        .await
    }

    /// One finding.
    async fn finding(&self, id: FindingId) -> Result<Option<Finding>, StoreError> {
        super::one(
            self,
            sqlx::query_as::<_, FindingRow>(concat!(
                "SELECT ",
                finding_columns!(),
                " FROM reconciliation_findings WHERE id = $1"
            ))
            .bind(id.0),
        )
        .await
    }

    /// Resolves a finding unless it is resolved already; the finding as it is
    /// afterwards.
    async fn resolve_finding(
        &self,
        id: FindingId,
        resolution: &Resolution,
    ) -> Result<Option<Finding>, StoreError> {
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        let moved = resolve_in(&mut tx, id, resolution).await?;
        tx.commit().await.map_err(store_error)?;
        match moved {
            Some(finding) => Ok(Some(finding)),
            // Resolved before (a double click), or no such finding.
            None => self.finding(id).await,
        }
    }
}
