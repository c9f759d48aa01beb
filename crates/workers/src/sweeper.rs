//! The key sweeper: deletes finished keys whose retention has passed, in small
//! batches so it never holds long locks. Expiry is decided by stored
//! timestamps and the store's clock; an expired key that is not swept yet is
//! already treated as new by the claim.

use std::sync::Arc;
use std::time::Duration;

use chargeonce_core::{Keys, NoObserver, Observer};
use tokio::task::JoinHandle;

/// Sweeper settings.
#[derive(Debug, Clone, Copy)]
pub struct SweeperConfig {
    /// Pause between sweeps once no expired key is left.
    pub interval: Duration,
    /// Keys deleted per statement.
    pub batch: u32,
}

impl Default for SweeperConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(60),
            batch: 1000,
        }
    }
}

/// Runs one sweep to the end: batches until a batch comes back short.
/// Returns how many keys were deleted.
pub async fn sweep_once(store: &dyn Keys, batch: u32) -> Result<u64, chargeonce_core::StoreError> {
    let mut total = 0;
    loop {
        let deleted = store.sweep_expired_keys(batch).await?;
        total += deleted;
        if deleted < u64::from(batch) {
            return Ok(total);
        }
        tokio::task::yield_now().await;
    }
}

/// Starts the sweeper on the current runtime; abort the handle to stop it.
pub fn spawn(store: Arc<dyn Keys>, config: SweeperConfig) -> JoinHandle<()> {
    spawn_observed(store, config, Arc::new(NoObserver))
}

/// [`spawn`], reporting deletions and failures to an observer (metrics).
pub fn spawn_observed(
    store: Arc<dyn Keys>,
    config: SweeperConfig,
    observer: Arc<dyn Observer>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match sweep_once(store.as_ref(), config.batch).await {
                Ok(0) => {}
                Ok(deleted) => {
                    observer.swept(deleted);
                    tracing::info!(deleted, "expired idempotency keys swept");
                }
                Err(error) => {
                    observer.store_error("sweeper");
                    tracing::warn!(%error, "key sweep failed; will retry");
                }
            }
            tokio::time::sleep(config.interval).await;
        }
    })
}
