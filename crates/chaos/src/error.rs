//! How a run fails to be carried out.

/// Why a run could not be carried out (distinct from violations, which a
/// finished run reports).
#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    /// Starting or driving a part of the run failed.
    #[error("chaos setup: {0}")]
    Setup(String),
    /// The store of the run failed.
    #[error("chaos store")]
    Store(#[from] chargeonce_core::StoreError),
    /// Reading the acquirer's ledger failed.
    #[error("chaos ledger")]
    Ledger(#[from] chargeonce_acquirer::SimulatorError),
}
