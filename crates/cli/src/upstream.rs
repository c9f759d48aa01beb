//! Which acquirer the service talks to (the in-process simulator, or an
//! acquirer over HTTP), and the background workers around the engine. Flags
//! shared by `chargeonce serve` and `chargeonce reconcile`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use chargeonce_acquirer::{HttpAcquirer, HttpAcquirerConfig, Simulator, SimulatorConfig};
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{Acquirer, AcquirerLedger, Engine, Observer};
use chargeonce_workers::completer::{self, CompleterConfig};
use chargeonce_workers::reconciler::{Reconciler, ReconcilerConfig};
use chargeonce_workers::relay::{self, RelayConfig};
use clap::Args;
use tokio::task::JoinHandle;

/// How to reach the acquirer.
#[derive(Debug, Clone, Args)]
pub struct UpstreamArgs {
    /// The acquirer's base URL (e.g. a `chargeonce acquirer` at
    /// `http://127.0.0.1:9000`). Without it, the in-process simulator is used.
    #[arg(long, env = "CHARGEONCE_ACQUIRER_URL")]
    pub acquirer_url: Option<String>,
    /// The longest a TCP connect to the acquirer may take (past it, nothing
    /// was sent: 503 acquirer_unavailable, safe to retry).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub acquirer_connect_timeout: Duration,
    /// The acquirer ignores idempotency keys (like some real providers): a
    /// take-over, retry or completer run looks the charge (or refund) up by
    /// our reference before sending it again, and only once
    /// `--acquirer-settle-window` has passed since the last attempt.
    #[arg(long)]
    pub acquirer_no_idempotency: bool,
    /// With `--acquirer-no-idempotency`: how long after an attempt whose
    /// answer was lost nobody looks it up or sends it again (the provider may
    /// still record it late). Keep it well above `--acquirer-timeout`.
    #[arg(long, env = "CHARGEONCE_ACQUIRER_SETTLE_WINDOW", default_value = "2m", value_parser = humantime::parse_duration)]
    pub acquirer_settle_window: std::time::Duration,
}

/// The acquirer in use.
pub enum Upstream {
    /// The in-process simulator.
    Embedded(Arc<Simulator>),
    /// An acquirer over HTTP.
    Remote(Arc<HttpAcquirer>, String),
}

impl Upstream {
    /// Connects to `--acquirer-url`, or opens the in-process simulator's ledger.
    pub async fn connect(
        args: &UpstreamArgs,
        request_timeout: Duration,
        sim_ledger: &Path,
        sim_slow: Duration,
    ) -> anyhow::Result<Self> {
        match &args.acquirer_url {
            Some(url) => {
                let acquirer = HttpAcquirer::new(
                    url,
                    HttpAcquirerConfig {
                        connect_timeout: args.acquirer_connect_timeout,
                        request_timeout,
                        idempotent: !args.acquirer_no_idempotency,
                    },
                )
                .context("--acquirer-url")?;
                Ok(Self::Remote(Arc::new(acquirer), url.clone()))
            }
            None => {
                let sim = Simulator::open(sim_ledger, SimulatorConfig { slow: sim_slow })
                    .await
                    .context("opening the simulator ledger")?
                    .with_idempotency(!args.acquirer_no_idempotency);
                Ok(Self::Embedded(Arc::new(sim)))
            }
        }
    }

    /// For charges and look-ups.
    pub fn acquirer(&self) -> Arc<dyn Acquirer> {
        match self {
            Self::Embedded(sim) => sim.clone(),
            Self::Remote(http, _) => http.clone(),
        }
    }

    /// For the reconciler.
    pub fn ledger(&self) -> Arc<dyn AcquirerLedger> {
        match self {
            Self::Embedded(sim) => sim.clone(),
            Self::Remote(http, _) => http.clone(),
        }
    }

    /// The embedded simulator's ledger routes, to nest at `/sim`.
    pub fn sim_router(&self) -> Option<Router> {
        match self {
            Self::Embedded(sim) => Some(chargeonce_acquirer::router(sim.clone())),
            Self::Remote(..) => None,
        }
    }

    /// For the listening line.
    pub fn describe(&self, sim_ledger: &Path) -> String {
        match self {
            Self::Embedded(_) => format!(
                "acquirer: in-process simulator, ledger: {}",
                sim_ledger.display()
            ),
            Self::Remote(_, url) => format!("acquirer: {url}"),
        }
    }
}

/// Parses a webhook secret straight into its redacting type, so no `Debug`
/// of the flags can show it.
/// Empty or short ones (under [`WebhookSecret::MIN_LEN`]) are refused.
pub fn secret(value: &str) -> Result<WebhookSecret, String> {
    WebhookSecret::chosen(value).map_err(|e| e.to_string())
}

/// The background workers and webhooks.
#[derive(Debug, Clone, Args)]
pub struct WorkerArgs {
    /// The shared secret of acquirer webhooks (`POST /v1/webhooks/acquirer`).
    /// Without it, webhooks are refused with 503. Never logged.
    #[arg(long, env = "CHARGEONCE_WEBHOOK_SECRET", hide_env_values = true, value_parser = secret)]
    pub webhook_secret: Option<WebhookSecret>,
    /// Pause between completer passes.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub completer_interval: Duration,
    /// How long an unfinished key's lease must have been over before the
    /// completer drives it (a client retry usually comes first).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub completer_idle: Duration,
    /// Do not run the completer on this instance.
    #[arg(long)]
    pub no_completer: bool,
    /// Pause between reconciler passes.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub reconcile_interval: Duration,
    /// How old a pending payment must be before the reconciler asks the acquirer.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub reconcile_pending_after: Duration,
    /// How far back the reconciler compares our payments with the acquirer's ledger.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    pub reconcile_window: Duration,
    /// How often the reconciler compares the whole window again; the passes
    /// between compare only what is new since the last one (and the first
    /// pass after a start is always a full one).
    #[arg(long, default_value = "6h", value_parser = humantime::parse_duration)]
    pub reconcile_full_every: Duration,
    /// Do not run the reconciler on this instance (run it on one instance, or
    /// as `chargeonce reconcile` from cron).
    #[arg(long)]
    pub no_reconciler: bool,
    /// Log a warning when a key is repeated this many times (and at every
    /// doubling): repeats point at client timeouts or double submits.
    #[arg(long, default_value_t = 10)]
    pub repeat_warning: u64,
    /// Pause between outbox relay passes when no merchant event is due.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub relay_interval: Duration,
    /// The longest a shop's webhook may take to answer one delivery.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub relay_timeout: Duration,
    /// The first retry delay of a failed delivery (doubled per attempt, with jitter).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub relay_backoff: Duration,
    /// The longest retry delay of a failed delivery.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    pub relay_backoff_max: Duration,
    /// Stop retrying an event this long after it became due (it can be
    /// resent by hand with `POST /v1/events/{id}/resend`).
    #[arg(long, default_value = "72h", value_parser = humantime::parse_duration)]
    pub relay_give_up: Duration,
    /// Do not run the outbox relay on this instance (events wait in the
    /// outbox for an instance that does).
    #[arg(long)]
    pub no_relay: bool,
}

impl WorkerArgs {
    /// The webhook secret, if given.
    pub fn secret(&self) -> Option<WebhookSecret> {
        self.webhook_secret.clone()
    }

    /// The relay's settings.
    pub fn relay(&self) -> RelayConfig {
        RelayConfig {
            interval: self.relay_interval,
            request_timeout: self.relay_timeout,
            backoff_base: self.relay_backoff,
            backoff_max: self.relay_backoff_max,
            give_up_after: self.relay_give_up,
            // Time to record an attempt after its request ended.
            lease_margin: self.relay_timeout.min(Duration::from_secs(5)),
            ..RelayConfig::default()
        }
    }

    /// The reconciler's settings.
    pub fn reconciler(&self) -> ReconcilerConfig {
        ReconcilerConfig {
            interval: self.reconcile_interval,
            pending_after: self.reconcile_pending_after,
            window: self.reconcile_window,
            full_every: self.reconcile_full_every,
            ..ReconcilerConfig::default()
        }
    }
}

/// Starts the completer, the reconciler and the outbox relay, as asked.
pub fn start_workers(
    engine: &Arc<Engine>,
    upstream: &Upstream,
    observer: Arc<dyn Observer>,
    args: &WorkerArgs,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let mut workers = Vec::new();
    if !args.no_completer {
        workers.push(completer::spawn(
            engine.clone(),
            CompleterConfig {
                interval: args.completer_interval,
                idle: args.completer_idle,
                ..CompleterConfig::default()
            },
        ));
    }
    if !args.no_reconciler {
        let reconciler = Reconciler {
            store: engine.store().clone(),
            acquirer: upstream.acquirer(),
            ledger: upstream.ledger(),
            observer: observer.clone(),
        };
        workers.push(reconciler.spawn(args.reconciler()));
    }
    if !args.no_relay {
        workers.push(
            relay::spawn_observed(engine.store().clone(), args.relay(), observer)
                .context("starting the relay")?,
        );
    }
    Ok(workers)
}
