//! When a shop's API keys were last used (`last_used_at`, to the minute):
//! authentication only notes a key's use in memory
//! ([`crate::cache::AuthCache::note_use`]); [`spawn`] writes the notes down
//! once a minute per instance, off every request's path, and [`flush`]
//! writes what is left at shutdown. A crash loses at most a minute of them.

use std::time::Duration;

use chargeonce_core::Chain;
use tokio::task::JoinHandle;

use crate::AppState;

/// How often an instance writes down which keys it saw used.
pub const RECORD_EVERY: Duration = Duration::from_secs(60);

/// Writes down the keys used since the last time, every `every`, until
/// aborted.
pub fn spawn(state: &AppState, every: Duration) -> JoinHandle<()> {
    let state = state.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            flush(&state).await;
        }
    })
}

/// Writes down the keys used since the last time; a failure is logged
/// (the next write carries the key again only if it is used again).
pub async fn flush(state: &AppState) {
    for (shop, key) in state.auth_cache.take_uses() {
        if let Err(error) = state.store.touch_api_key(&shop, &key).await {
            tracing::warn!(%key, error = %Chain(&error), "recording an API key's use failed");
        }
    }
}
