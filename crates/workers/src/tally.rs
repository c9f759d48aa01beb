//! The tally flusher: adds the repeats this instance answered from its
//! caches ([`chargeonce_core::engine::RepeatTallies`]) to their keys' counts
//! in the store, one batched write
//! ([`History::add_repeats`](chargeonce_core::store::History::add_repeats))
//! per interval, so a key's introspection counts every repeat, wherever it
//! was answered.
//!
//! A failed write puts the batch back (merged with what was counted since):
//! nothing is lost while the instance lives, within the tallies' bound. On
//! shutdown ([`TallyFlusherHandle::stop`]) it flushes once more.

use std::sync::Arc;
use std::time::Duration;

use chargeonce_core::{Chain, Engine, NoObserver, Observer, StoreError};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Flusher settings.
#[derive(Debug, Clone, Copy)]
pub struct TallyFlusherConfig {
    /// Pause between flushes.
    pub interval: Duration,
}

impl Default for TallyFlusherConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(1),
        }
    }
}

/// Adds an engine's tallied repeats to the store's counts.
#[derive(Clone)]
pub struct TallyFlusher {
    engine: Arc<Engine>,
    observer: Arc<dyn Observer>,
    /// The tallies' dropped count at the last flush, to log what was
    /// dropped since.
    dropped_seen: u64,
}

impl TallyFlusher {
    /// A flusher of `engine`'s tallies into its store.
    pub fn new(engine: Arc<Engine>) -> Self {
        Self {
            engine,
            observer: Arc::new(NoObserver),
            dropped_seen: 0,
        }
    }

    /// Reports store failures to an observer (metrics).
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = observer;
        self
    }

    /// One flush: takes the tallies and adds them to the store in one
    /// write; on a failure puts them back and returns the error. Returns
    /// how many tallies (keys by kind) were written.
    pub async fn flush_once(&mut self) -> Result<usize, StoreError> {
        let tallies = self.engine.repeat_tallies();
        let dropped = tallies.dropped();
        if dropped > self.dropped_seen {
            tracing::warn!(
                dropped = dropped - self.dropped_seen,
                "repeats answered from the cache not counted: too many keys between flushes"
            );
            self.dropped_seen = dropped;
        }
        let batch = self.engine.take_repeat_tallies();
        if batch.is_empty() {
            return Ok(0);
        }
        match self.engine.store().add_repeats(&batch).await {
            Ok(()) => Ok(batch.len()),
            Err(error) => {
                tallies.put_back(batch);
                Err(error)
            }
        }
    }

    /// One flush, a failure logged and counted (the tallies wait for the next).
    async fn flush_logged(&mut self) {
        match self.flush_once().await {
            Ok(0) => {}
            Ok(written) => tracing::debug!(written, "cached repeats added to the keys' counts"),
            Err(error) => {
                self.observer.store_error("tally_flusher");
                tracing::warn!(error = %Chain(&error), "cached repeats could not be added to the keys' counts; will retry");
            }
        }
    }

    /// Starts flushing every `config.interval` on the current runtime.
    pub fn spawn(mut self, config: TallyFlusherConfig) -> TallyFlusherHandle {
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(config.interval) => self.flush_logged().await,
                    // Asked to stop (or the handle dropped): a last flush.
                    _ = &mut stopped => {
                        self.flush_logged().await;
                        return;
                    }
                }
            }
        });
        TallyFlusherHandle { stop, task }
    }
}

/// The running flusher.
#[must_use = "the flusher runs until stopped; keep its handle to flush at shutdown"]
pub struct TallyFlusherHandle {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl TallyFlusherHandle {
    /// Stops the flusher after a last flush, waiting at most `grace` for it.
    pub async fn stop(self, grace: Duration) {
        // The task may be gone already (it never is but by a panic).
        let _ = self.stop.send(());
        let mut task = self.task;
        if tokio::time::timeout(grace, &mut task).await.is_err() {
            tracing::warn!("the last flush of cached repeats did not end in time");
            task.abort();
        }
    }

    /// Stops the flusher at once, without a last flush.
    pub fn abort(self) {
        self.task.abort();
    }
}
