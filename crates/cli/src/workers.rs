//! The one place that starts the background workers around the engine: the
//! sweeper of expired keys, the completer, the reconciler and the outbox
//! relay, as [`WorkersArgs`] asks. `chargeonce serve` starts them once and
//! stops them with [`Workers::abort`] at shutdown.

use std::sync::Arc;

use anyhow::Context;
use chargeonce_core::{Engine, Observer};
use chargeonce_workers::reconciler::Reconciler;
use chargeonce_workers::{completer, relay, sweeper};
use tokio::task::JoinHandle;

use crate::args::workers::WorkersArgs;
use crate::upstream::Upstream;

/// The running workers' tasks.
#[must_use = "the workers run until aborted; keep them to stop them at shutdown"]
pub struct Workers {
    handles: Vec<JoinHandle<()>>,
}

impl Workers {
    /// Starts the sweeper (always) and the completer, the reconciler and the
    /// outbox relay (unless `--no-completer`, `--no-reconciler` or
    /// `--no-relay`), reporting to `observer` (the metrics).
    pub fn start(
        engine: &Arc<Engine>,
        upstream: &Upstream,
        observer: Arc<dyn Observer>,
        args: &WorkersArgs,
    ) -> anyhow::Result<Self> {
        let mut handles = Vec::new();
        if !args.no_completer {
            handles.push(completer::spawn(engine.clone(), args.completer()));
        }
        if !args.no_reconciler {
            let reconciler = Reconciler {
                store: engine.store().clone(),
                acquirer: upstream.acquirer(),
                ledger: upstream.ledger(),
                observer: observer.clone(),
            };
            handles.push(reconciler.spawn(args.reconciler()));
        }
        if !args.no_relay {
            handles.push(
                relay::spawn_observed(engine.store().clone(), args.relay(), observer.clone())
                    .context("starting the relay")?,
            );
        }
        handles.push(sweeper::spawn_observed(
            engine.store().clone(),
            args.sweeper(),
            observer,
        ));
        Ok(Self { handles })
    }

    /// Stops every worker's task (a pass in progress stops at its next
    /// `.await`).
    pub fn abort(self) {
        for handle in self.handles {
            handle.abort();
        }
    }
}
