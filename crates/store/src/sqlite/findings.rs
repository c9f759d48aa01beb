//! The reconciler's findings, persisted.
//!
//! STUB: to be written.

use chargeonce_core::StoreError;
use chargeonce_core::findings::{Finding, FindingId, FindingQuery, NewFinding, Resolution};

use super::SqliteStore;

pub(super) async fn record_findings(
    _store: &SqliteStore,
    found: &[NewFinding],
) -> Result<Vec<FindingId>, StoreError> {
    Ok(found.iter().map(|_| FindingId(0)).collect())
}

pub(super) async fn findings(
    _store: &SqliteStore,
    _query: &FindingQuery,
) -> Result<Vec<Finding>, StoreError> {
    Ok(Vec::new())
}

pub(super) async fn finding(
    _store: &SqliteStore,
    _id: FindingId,
) -> Result<Option<Finding>, StoreError> {
    Ok(None)
}

pub(super) async fn resolve_finding(
    _store: &SqliteStore,
    _id: FindingId,
    _resolution: &Resolution,
) -> Result<Option<Finding>, StoreError> {
    Ok(None)
}
