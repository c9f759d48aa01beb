//! The key sweeper: deletes finished keys whose retention has passed, in small
//! batches so it never holds long locks. Expiry is decided by stored
//! timestamps and the store's clock; an expired key that is not swept yet is
//! already treated as new by the claim.
//!
//! Given the shops ([`Sweeper::with_shops`]), each pass also wipes the
//! webhook signing secrets a roll replaced once their overlap has ended.

use std::sync::Arc;
use std::time::Duration;

use chargeonce_core::{Chain, Keys, NoObserver, Observer, Shops};
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

/// The sweeper as a background task: [`Sweeper::spawn`] runs
/// [`sweep_once`] every [`SweeperConfig::interval`].
pub struct Sweeper {
    store: Arc<dyn Keys>,
    shops: Option<Arc<dyn Shops>>,
    observer: Arc<dyn Observer>,
}

impl Sweeper {
    /// A sweeper of `store`'s expired keys.
    pub fn new(store: Arc<dyn Keys>) -> Self {
        Self {
            store,
            shops: None,
            observer: Arc::new(NoObserver),
        }
    }

    /// Also wipes rolled-over webhook secrets whose overlap has ended, on
    /// every pass.
    pub fn with_shops(mut self, shops: Arc<dyn Shops>) -> Self {
        self.shops = Some(shops);
        self
    }

    /// Reports deletions and store failures to an observer (metrics).
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = observer;
        self
    }

    /// Starts the sweeper on the current runtime; abort the handle to stop it.
    pub fn spawn(self, config: SweeperConfig) -> JoinHandle<()> {
        let Self {
            store,
            shops,
            observer,
        } = self;
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
                        tracing::warn!(error = %Chain(&error), "key sweep failed; will retry");
                    }
                }
                if let Some(shops) = &shops {
                    match shops.forget_rolled_webhook_secrets().await {
                        Ok(0) => {}
                        Ok(wiped) => tracing::info!(wiped, "rolled-over webhook secrets wiped"),
                        Err(error) => {
                            observer.store_error("sweeper");
                            tracing::warn!(error = %Chain(&error), "wiping rolled-over webhook secrets failed; will retry");
                        }
                    }
                }
                tokio::time::sleep(config.interval).await;
            }
        })
    }
}
