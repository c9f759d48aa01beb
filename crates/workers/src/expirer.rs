//! The expirer: releases authorizations nobody captured before their
//! `authorization_expires_at` (voided at the acquirer, the payment
//! `expired`, or `succeeded` when part was captured), and resumes releases
//! whose answer was not known. Expiry is decided by stored timestamps and
//! the store's clock, so instances agree; the hold's move to releasing is a
//! store transaction, so two instances never release one authorization
//! twice, and the acquirer is asked under the authorization's one void key.

use std::sync::Arc;
use std::time::Duration;

use chargeonce_core::{Chain, Engine, EngineError, Expiry};
use tokio::task::JoinHandle;

/// Expirer settings.
#[derive(Debug, Clone, Copy)]
pub struct ExpirerConfig {
    /// Pause between passes once no expired authorization is left.
    pub interval: Duration,
    /// Authorizations read per batch.
    pub batch: u32,
}

impl Default for ExpirerConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(60),
            batch: 100,
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExpiryPass {
    /// Holds released.
    pub released: u64,
    /// Releases the acquirer refused (the holds are open again).
    pub refused: u64,
    /// Releases without an answer yet (resumed by the next pass).
    pub unresolved: u64,
}

/// Runs one pass: every authorization expired by now (and every release
/// by expiry not ended), one batch. Returns what it did.
pub async fn expire_once(engine: &Engine, batch: u32) -> Result<ExpiryPass, EngineError> {
    let due = engine.store().expired_authorizations(batch).await?;
    let mut pass = ExpiryPass::default();
    for payment in &due {
        match engine.expire(payment).await {
            Ok(Expiry::Released(payment)) => {
                tracing::info!(payment = %payment.id, shop = %payment.shop_id, "authorization expired and released");
                pass.released += 1;
            }
            Ok(Expiry::Refused { .. }) => pass.refused += 1,
            Ok(Expiry::Unresolved) => pass.unresolved += 1,
            Ok(Expiry::Skipped) => {}
            // One payment's failure does not stop the others.
            Err(error) => {
                tracing::warn!(payment = %payment.id, error = %Chain(&error), "expiry failed; will retry");
            }
        }
    }
    Ok(pass)
}

/// The expirer as a background task: [`Expirer::spawn`] runs
/// [`expire_once`] every [`ExpirerConfig::interval`].
pub struct Expirer {
    engine: Arc<Engine>,
}

impl Expirer {
    /// An expirer of `engine`'s authorizations.
    pub fn new(engine: Arc<Engine>) -> Self {
        Self { engine }
    }

    /// Starts the expirer on the current runtime; abort the handle to stop
    /// it.
    pub fn spawn(self, config: ExpirerConfig) -> JoinHandle<()> {
        let engine = self.engine;
        tokio::spawn(async move {
            loop {
                if let Err(error) = expire_once(&engine, config.batch).await {
                    engine.observer().store_error("expirer");
                    tracing::warn!(error = %Chain(&error), "expiry pass failed; will retry");
                }
                tokio::time::sleep(config.interval).await;
            }
        })
    }
}
