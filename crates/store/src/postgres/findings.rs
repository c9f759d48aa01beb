//! The reconciler's findings, persisted.
//!
//! STUB: to be written.

use chargeonce_core::StoreError;
use chargeonce_core::findings::{Finding, FindingId, FindingQuery, NewFinding, Resolution};

use super::PgStore;

pub(super) async fn record_findings(
    _store: &PgStore,
    found: &[NewFinding],
) -> Result<Vec<FindingId>, StoreError> {
    Ok(found.iter().map(|_| FindingId(0)).collect())
}

pub(super) async fn findings(
    _store: &PgStore,
    _query: &FindingQuery,
) -> Result<Vec<Finding>, StoreError> {
    Ok(Vec::new())
}

pub(super) async fn finding(
    _store: &PgStore,
    _id: FindingId,
) -> Result<Option<Finding>, StoreError> {
    Ok(None)
}

pub(super) async fn resolve_finding(
    _store: &PgStore,
    _id: FindingId,
    _resolution: &Resolution,
) -> Result<Option<Finding>, StoreError> {
    Ok(None)
}
