//! The findings role: the reconciler's findings, persisted and resolvable.

use async_trait::async_trait;

use super::StoreError;
use crate::findings::{Finding, FindingId, FindingQuery, NewFinding, Resolution};

/// The reconciliation findings.
#[async_trait]
pub trait Findings: Send + Sync + 'static {
    /// Records what one reconciler pass found, one transaction: a finding
    /// seen before (same [`NewFinding::identity`]) gets its last sighting
    /// and detail updated, a new one is inserted (with a `finding` entry in
    /// its payment's history, when it names one). A finding that names
    /// charges the pass refunded is resolved as [`Resolution::Refunded`].
    /// Returns the ids, in the order given.
    async fn record_findings(&self, found: &[NewFinding]) -> Result<Vec<FindingId>, StoreError>;

    /// Findings that match, newest last sighting first.
    async fn findings(&self, query: &FindingQuery) -> Result<Vec<Finding>, StoreError>;

    /// One finding.
    async fn finding(&self, id: FindingId) -> Result<Option<Finding>, StoreError>;

    /// Resolves a finding (with a `finding_resolved` entry in its
    /// payment's history). Resolving a resolved finding changes nothing and
    /// returns it as it is (an operator's double click). `None` when there
    /// is no such finding.
    async fn resolve_finding(
        &self,
        id: FindingId,
        resolution: &Resolution,
    ) -> Result<Option<Finding>, StoreError>;
}
