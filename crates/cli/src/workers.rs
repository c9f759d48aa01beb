//! The one place that starts the background workers around the engine: the
//! sweeper of expired keys, the completer, the expirer of authorizations,
//! the reconciler, the outbox relay
//! and the flusher of cached repeats, as [`WorkersArgs`] asks. `chargeonce
//! serve` starts them once and stops them with [`Workers::stop`] at
//! shutdown (the flusher flushes once more).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chargeonce_core::api_key::Mode;
use chargeonce_core::{Engine, Observer};
use chargeonce_workers::completer::Completer;
use chargeonce_workers::expirer::Expirer;
use chargeonce_workers::reconciler::Reconciler;
use chargeonce_workers::relay::Relay;
use chargeonce_workers::sweeper::Sweeper;
use chargeonce_workers::tally::{TallyFlusher, TallyFlusherHandle};
use tokio::task::JoinHandle;

use crate::args::workers::WorkersArgs;
use crate::upstream::Upstream;

/// The running workers' tasks.
#[must_use = "the workers run until aborted; keep them to stop them at shutdown"]
pub struct Workers {
    handles: Vec<JoinHandle<()>>,
    flusher: Option<TallyFlusherHandle>,
}

/// The longest the last flush of cached repeats may take at shutdown.
const LAST_FLUSH_GRACE: Duration = Duration::from_secs(5);

impl Workers {
    /// Starts the sweeper (always) and the completer, the expirer, the
    /// reconciler, the outbox relay and the flusher of cached repeats (unless
    /// `--no-completer`, `--no-expirer`, `--no-reconciler`, `--no-relay` or
    /// `--repeat-flush-interval 0`), reporting to `observer` (the metrics).
    pub fn start(
        engine: &Arc<Engine>,
        upstream: &Upstream,
        observer: Arc<dyn Observer>,
        args: &WorkersArgs,
    ) -> anyhow::Result<Self> {
        let mut handles = Vec::new();
        if !args.no_completer {
            handles.push(Completer::new(engine.clone()).spawn(args.completer()));
        }
        if !args.no_expirer {
            handles.push(Expirer::new(engine.clone()).spawn(args.expirer()));
        }
        if !args.no_reconciler {
            // One per mode: each mode's payments against its own acquirer.
            for mode in [Mode::Live, Mode::Test] {
                let reconciler = Reconciler {
                    mode,
                    store: engine.store().clone(),
                    acquirer: upstream.acquirer(mode),
                    ledger: upstream.ledger(mode),
                    observer: observer.clone(),
                };
                handles.push(reconciler.spawn(args.reconciler()));
            }
        }
        if !args.no_relay {
            let relay = Relay::new(engine.store().clone(), args.relay(), args.egress.egress())
                .context("starting the relay")?
                .with_observer(observer.clone());
            handles.push(relay.spawn());
        }
        let flusher = args.tally_flusher().map(|config| {
            TallyFlusher::new(engine.clone())
                .with_observer(observer.clone())
                .spawn(config)
        });
        handles.push(
            Sweeper::new(engine.store().clone())
                .with_shops(engine.store().clone())
                .with_observer(observer)
                .spawn(args.sweeper()),
        );
        Ok(Self { handles, flusher })
    }

    /// Stops every worker's task (a pass in progress stops at its next
    /// `.await`), the flusher after a last flush of the repeats answered
    /// from the caches (so a clean shutdown loses none).
    pub async fn stop(self) {
        for handle in self.handles {
            handle.abort();
        }
        if let Some(flusher) = self.flusher {
            flusher.stop(LAST_FLUSH_GRACE).await;
        }
    }
}
