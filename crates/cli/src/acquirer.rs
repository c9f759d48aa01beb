//! `chargeonce acquirer`: the acquirer simulator as its own process, over
//! HTTP, with its own ledger, fault injection and webhooks.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chargeonce_acquirer::webhooks::{self, WebhookTarget};
use chargeonce_acquirer::{Faults, Simulator, SimulatorConfig};
use chargeonce_core::webhook::WebhookSecret;
use clap::Args;

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Flags of `chargeonce acquirer`.
#[derive(Debug, Clone, Args)]
pub struct AcquirerArgs {
    /// Address to listen on (port 0 picks a free port; the chosen address is printed).
    #[arg(long, default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    /// The ledger: an SQLite file, created if missing.
    #[arg(long, default_value = "chargeonce-acquirer.db")]
    database: PathBuf,
    /// Behave like a provider without idempotency: every charge request
    /// records a new charge, whatever key it carries.
    #[arg(long)]
    no_idempotency: bool,
    /// How long `tok_slow` takes to answer (and `tok_late` to record).
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    slow: Duration,
    /// Shortest answer time.
    #[arg(long, default_value = "0ms", value_parser = humantime::parse_duration)]
    latency_min: Duration,
    /// Longest ordinary answer time (uniform between min and max).
    #[arg(long, default_value = "0ms", value_parser = humantime::parse_duration)]
    latency_max: Duration,
    /// Share of answers in the slow tail (0 to 1).
    #[arg(long, default_value_t = 0.0)]
    slow_rate: f64,
    /// Answer time in the slow tail.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    slow_latency: Duration,
    /// Share of charges declined (`do_not_honor`) whatever the token.
    #[arg(long, default_value_t = 0.0)]
    decline_rate: f64,
    /// Share of charges recorded whose answer is then lost (504, dropped
    /// connection, or silence).
    #[arg(long, default_value_t = 0.0)]
    lost_answer_rate: f64,
    /// Share of requests answered 5xx before anything is recorded.
    #[arg(long, default_value_t = 0.0)]
    error_rate: f64,
    /// Share of requests refused with a 400 before anything is recorded (a
    /// definite refusal: the service declines the payment, `acquirer_rejected`).
    #[arg(long, default_value_t = 0.0)]
    reject_rate: f64,
    /// Share of charges recorded late (after --late-latency), whoever still
    /// waits: a duplicate meanwhile is one of a charge in flight.
    #[arg(long, default_value_t = 0.0)]
    late_rate: f64,
    /// How long a late charge takes to be recorded.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    late_latency: Duration,
    /// How a duplicate of a charge still in flight is answered, as real
    /// providers do: `wait` (run it; the first to record wins), `409`
    /// (`request_in_progress`), `422` (a bare refusal), `400` (Primer's
    /// `TransactionRequestIdempotencyKeyAlreadyExists`) or `208` (empty).
    #[arg(long, default_value = "wait")]
    in_flight_duplicate: chargeonce_acquirer::InFlightDuplicate,
    /// Share of requests that hang, recording nothing, until the client gives up.
    #[arg(long, default_value_t = 0.0)]
    hang_rate: f64,
    /// How long a hang (or a silent lost answer) lasts.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    hang: Duration,
    /// Where to send `payment.*` webhooks (e.g.
    /// `http://127.0.0.1:8080/v1/webhooks/acquirer`). None are sent without it.
    #[arg(long)]
    webhook_url: Option<String>,
    /// The shared signing secret of webhooks. Never logged.
    #[arg(long, env = "CHARGEONCE_WEBHOOK_SECRET", hide_env_values = true, value_parser = crate::args::secret)]
    webhook_secret: Option<WebhookSecret>,
    /// Share of webhook events delivered twice.
    #[arg(long, default_value_t = 0.0)]
    webhook_duplicate_rate: f64,
    /// Share of `payment.processing` events held back so the outcome overtakes them.
    #[arg(long, default_value_t = 0.0)]
    webhook_reorder_rate: f64,
    /// Share of webhook delivery attempts hung up on within 5 ms (then
    /// retried): the receiver's handler is cut wherever it was.
    #[arg(long, default_value_t = 0.0)]
    webhook_hangup_rate: f64,
    /// How long a held-back event waits.
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
    webhook_reorder_delay: Duration,
    /// Seed of the fault generator (random by default).
    #[arg(long)]
    seed: Option<u64>,
}

impl AcquirerArgs {
    fn faults(&self) -> Faults {
        Faults {
            latency_min_ms: millis(self.latency_min),
            latency_max_ms: millis(self.latency_max.max(self.latency_min)),
            slow_rate: self.slow_rate,
            slow_ms: millis(self.slow_latency),
            decline_rate: self.decline_rate,
            lost_answer_rate: self.lost_answer_rate,
            error_rate: self.error_rate,
            reject_rate: self.reject_rate,
            hang_rate: self.hang_rate,
            hang_ms: millis(self.hang),
            webhook_duplicate_rate: self.webhook_duplicate_rate,
            webhook_reorder_rate: self.webhook_reorder_rate,
            webhook_hangup_rate: self.webhook_hangup_rate,
            webhook_reorder_ms: millis(self.webhook_reorder_delay),
            late_rate: self.late_rate,
            late_ms: millis(self.late_latency),
            in_flight_duplicate: self.in_flight_duplicate,
        }
    }
}

/// Serves the simulator until SIGINT or SIGTERM.
pub async fn run(args: AcquirerArgs) -> anyhow::Result<()> {
    let target = match (&args.webhook_url, &args.webhook_secret) {
        (Some(url), Some(secret)) => Some(WebhookTarget::new(url.clone(), secret.clone())),
        (Some(_), None) => anyhow::bail!("--webhook-url needs --webhook-secret"),
        _ => None,
    };
    let mut sim = Simulator::open(&args.database, SimulatorConfig { slow: args.slow })
        .await
        .context("opening the acquirer ledger")?
        .with_idempotency(!args.no_idempotency)
        .with_events(target.is_some());
    if let Some(seed) = args.seed {
        sim = sim.with_seed(seed);
    }
    sim.set_faults(args.faults()).context("fault flags")?;
    let sim = Arc::new(sim);
    let deliverer = target.map(|target| webhooks::spawn(sim.clone(), target));
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let local = listener.local_addr()?;
    println!(
        "chargeonce acquirer listening on http://{local} (ledger: {}, idempotency: {}, webhooks: {})",
        args.database.display(),
        if args.no_idempotency { "off" } else { "on" },
        args.webhook_url
            .as_deref()
            .map_or_else(|| "off".to_owned(), chargeonce_connector::redact_url),
    );
    let app = chargeonce_acquirer::api_router(sim.clone());
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(crate::serve::shutdown_signal())
        .await;
    if let Some(deliverer) = deliverer {
        deliverer.abort();
    }
    sim.close().await;
    served.context("serving")
}
