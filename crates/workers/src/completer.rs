//! The completer: drives operations nobody drives any more (their instance
//! died, or their client gave up after a 202) to an end, as if the client had
//! retried with the same key.
//!
//! Every pass lists unfinished keys whose lease ran out at least
//! [`CompleterConfig::idle`] ago (so a client retrying after a 202 usually
//! comes first), takes each over with the same compare-and-set a retry uses,
//! and resumes it from its recovery point ([`Engine::complete`]). Several
//! instances may run it at once: a key has one owner at a time.

use std::sync::Arc;
use std::time::Duration;

use chargeonce_core::{Chain, CompleterResult, Engine, Outcome, StalledKey, StoreError};
use futures::StreamExt;
use tokio::task::JoinHandle;
use tracing::Instrument as _;

/// Completer settings.
#[derive(Debug, Clone, Copy)]
pub struct CompleterConfig {
    /// Pause between passes.
    pub interval: Duration,
    /// How long a key's lease must have been over before the completer
    /// steps in.
    pub idle: Duration,
    /// Keys per pass.
    pub batch: u32,
    /// Keys driven at once.
    pub concurrency: usize,
    /// A payment still pending this long after its creation is given up
    /// on: canceled ([`Engine::complete_or_give_up`]), its charge looked up
    /// and never sent again, so every payment ends.
    pub give_up_after: Duration,
}

impl Default for CompleterConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(5),
            idle: Duration::from_secs(10),
            batch: 100,
            concurrency: 8,
            give_up_after: DEFAULT_GIVE_UP_AFTER,
        }
    }
}

/// The default [`CompleterConfig::give_up_after`]: one hour. Far longer
/// than any acquirer answer takes; short enough that no order stays locked
/// by a payment nobody can end for a day.
pub const DEFAULT_GIVE_UP_AFTER: Duration = Duration::from_secs(60 * 60);

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompleterPass {
    /// Stalled keys found.
    pub found: usize,
    /// Keys finished (their answer is now stored).
    pub finished: usize,
    /// Keys still without a definite answer (acquirer unknown or down).
    pub still_pending: usize,
    /// Keys someone else drove.
    pub skipped: usize,
    /// Keys whose store calls failed.
    pub failed: usize,
}

async fn complete_one(engine: &Engine, key: &StalledKey, give_up: Duration) -> CompleterResult {
    // A trace of its own (with traces on): the store and acquirer calls of
    // resuming this key, under the key's hash as in every log line.
    let span = tracing::info_span!(
        "worker.complete_key",
        shop_id = %key.shop_id,
        key = %key.key.log_id(),
        result = tracing::field::Empty,
        "otel.name" = "completer resume",
    );
    let result = complete_one_in(engine, key, give_up)
        .instrument(span.clone())
        .await;
    span.record("result", result.as_str());
    result
}

async fn complete_one_in(engine: &Engine, key: &StalledKey, give_up: Duration) -> CompleterResult {
    match engine.complete_or_give_up(key, give_up).await {
        Ok(Some(Outcome::Executed(_))) => CompleterResult::Finished,
        Ok(Some(
            Outcome::Pending { .. }
            | Outcome::AcquirerUnavailable { .. }
            | Outcome::RefundPending { .. }
            | Outcome::RefundAcquirerUnavailable { .. }
            | Outcome::CancelPending { .. },
        )) => CompleterResult::StillPending,
        Ok(Some(_) | None) => CompleterResult::Skipped,
        Err(error) => {
            tracing::warn!(shop = %key.shop_id, key = %key.key, error = %Chain(&error), "completer could not drive a key");
            CompleterResult::Failed
        }
    }
}

/// Runs one pass: every stalled key of one batch, a few at a time.
pub async fn complete_once(
    engine: &Engine,
    config: &CompleterConfig,
) -> Result<CompleterPass, StoreError> {
    let stalled = engine
        .store()
        .stalled_keys(config.idle, config.batch)
        .await?;
    let mut pass = CompleterPass {
        found: stalled.len(),
        ..CompleterPass::default()
    };
    let runs: Vec<_> = stalled
        .iter()
        .map(|key| complete_one(engine, key, config.give_up_after))
        .collect();
    let results: Vec<CompleterResult> = futures::stream::iter(runs)
        .buffer_unordered(config.concurrency.max(1))
        .collect()
        .await;
    for result in results {
        engine.observer().completer_run(result);
        match result {
            CompleterResult::Finished => pass.finished += 1,
            CompleterResult::StillPending => pass.still_pending += 1,
            CompleterResult::Skipped => pass.skipped += 1,
            CompleterResult::Failed => pass.failed += 1,
        }
    }
    Ok(pass)
}

/// The completer as a background task: [`Completer::spawn`] runs
/// [`complete_once`] every [`CompleterConfig::interval`]. It reports to the
/// engine's observer.
pub struct Completer {
    engine: Arc<Engine>,
}

impl Completer {
    /// A completer over `engine` (its store, acquirer and observer).
    pub fn new(engine: Arc<Engine>) -> Self {
        Self { engine }
    }

    /// Starts the completer on the current runtime; abort the handle to stop it.
    pub fn spawn(self, config: CompleterConfig) -> JoinHandle<()> {
        let engine = self.engine;
        tokio::spawn(async move {
            loop {
                match complete_once(&engine, &config).await {
                    Ok(pass) if pass.found > 0 => tracing::info!(
                        found = pass.found,
                        finished = pass.finished,
                        still_pending = pass.still_pending,
                        skipped = pass.skipped,
                        failed = pass.failed,
                        "completer pass"
                    ),
                    Ok(_) => {}
                    Err(error) => {
                        engine.observer().store_error("completer");
                        tracing::warn!(error = %Chain(&error), "completer pass failed; will retry");
                    }
                }
                tokio::time::sleep(config.interval).await;
            }
        })
    }
}
