//! # chargeonce-bench
//!
//! The load generator behind `chargeonce bench`: closed-loop workers (one
//! request in flight per connection) or storms of concurrent duplicates,
//! an HDR latency histogram, and the exactly-once checks made during the run.
//!
//! Scenarios ([`Scenario`]): `fresh` (a new key and a new order per request),
//! `replay` (repeats of completed keys), `storm` (many concurrent duplicates of
//! one key at a time), `mixed` (80 % fresh, 15 % replay, 5 % mismatch),
//! `authorize-capture` and `refund` (each turn a new payment and its capture
//! or its whole refund, two requests), and
//! `ceiling` / `noop`, the server's no-idempotency endpoints of
//! `serve --bench-ceiling`.
//!
//! A run fails ([`BenchError::Failed`]) when a key executes twice, a replay is
//! not byte-identical, a mismatch is not 422, any answer is a 5xx or no answer
//! comes, or, when the target exposes `GET /sim/ledger`, an order has other
//! than one charge in the acquirer's ledger.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;

pub mod client;
pub mod flood;
pub mod report;
pub mod scenario;

pub use client::{ExtraHeader, Target};
pub use report::{Report, Tally};
pub use scenario::Scenario;

/// Why a bench did not produce a passing report.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Bad flags or credentials.
    #[error("configuration: {0}")]
    Config(String),
    /// The acquirer ledger could not be read.
    #[error("reading the acquirer ledger: {0}")]
    Ledger(String),
    /// The JSON report could not be written.
    #[error("writing the report to {path}: {source}")]
    Write {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The run broke a rule; the report says which.
    #[error(
        "bench {scenario} failed: {violations} violations, {server_errors} 5xx answers, {transport_errors} requests without answer"
    )]
    Failed {
        /// The scenario.
        scenario: String,
        /// Broken exactly-once or replay rules.
        violations: u64,
        /// 5xx answers.
        server_errors: u64,
        /// Requests with no answer.
        transport_errors: u64,
    },
}

/// Flags of `chargeonce bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// The load shape.
    #[arg(value_enum)]
    pub scenario: Scenario,
    /// The server's base URL.
    #[arg(
        long,
        env = "CHARGEONCE_BENCH_TARGET",
        default_value = "http://127.0.0.1:8080"
    )]
    pub target: String,
    /// Requests in flight at once (one per connection); for `storm`, the
    /// duplicates sent at once per key unless `--duplicates` is given.
    #[arg(long, short = 'c', default_value_t = 32)]
    pub connections: usize,
    /// How long to measure (e.g. `10s`, `1m`).
    #[arg(long, short = 'd', default_value = "10s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// `storm`: concurrent duplicates per key (default: `--connections`).
    #[arg(long)]
    pub duplicates: Option<usize>,
    /// The shop id (HTTP Basic user).
    #[arg(long, env = "CHARGEONCE_BENCH_SHOP", default_value = "demo")]
    pub shop: String,
    /// The shop's secret key (HTTP Basic password).
    #[arg(long, env = "CHARGEONCE_BENCH_SECRET", hide_env_values = true)]
    pub secret: chargeonce_core::ShopSecret,
    /// Also write the report as JSON to this file (`-` for standard output).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Skip comparing with the acquirer ledger (`GET /sim/ledger`).
    #[arg(long)]
    pub no_ledger_check: bool,
    /// Also flood the target with this many concurrent unauthenticated
    /// requests (random shop ids) while the scenario runs, to see what an
    /// attack costs a real shop (its figures above) and how the flood is
    /// answered (the report's `flood`). `0`: no flood.
    #[arg(long, default_value_t = 0)]
    pub flood: usize,
    /// The local address the flood comes from (e.g. `127.0.0.2`, so the
    /// service counts it as another client than the measured shop).
    #[arg(long)]
    pub flood_from: Option<std::net::IpAddr>,
    /// Where the acquirer ledger is read (`GET {URL}/sim/ledger`): the
    /// service's operator listener (`serve --operator-listen`). Without it,
    /// no ledger check.
    #[arg(long, env = "CHARGEONCE_BENCH_OPERATOR_URL")]
    pub operator_url: Option<String>,
    /// A header sent on every request, as `'name: value'` (repeatable), e.g.
    /// the session cookie another idempotency layer needs
    /// (`bench/peers`). Not `authorization`, `content-type` or
    /// `idempotency-key`, which the bench sets itself.
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE", value_parser = client::ExtraHeader::parse)]
    pub headers: Vec<client::ExtraHeader>,
    /// The answer header whose value `true` marks a replay: chargeonce's
    /// `Idempotent-Replayed` by default; axum-idempotent sends
    /// `idempotency-replayed`.
    #[arg(long, value_name = "NAME", default_value = client::REPLAYED, value_parser = client::parse_header_name)]
    pub replayed_header: reqwest::header::HeaderName,
}

/// What a run needs, without the output options.
#[derive(Debug, Clone)]
pub struct Config {
    /// The load shape.
    pub scenario: Scenario,
    /// Concurrent requests (closed loop) or duplicates per key (storm).
    pub connections: usize,
    /// How long to measure.
    pub duration: Duration,
    /// Compare with `GET /sim/ledger` when the target exposes it.
    pub ledger_check: bool,
    /// Draw a progress bar on a terminal.
    pub progress: bool,
    /// An unauthenticated flood beside the scenario.
    pub flood: Option<flood::FloodConfig>,
}

/// Completed keys each replay worker starts from.
const REPLAY_SEEDS: u64 = 8;

fn progress_bar(enabled: bool, duration: Duration) -> indicatif::ProgressBar {
    if !enabled {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(duration.as_millis().max(1) as u64);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{spinner} [{bar:40}] {elapsed}/{duration} {msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// Runs one scenario against a target and returns its report (also when
/// the checks fail: see [`Report::passed`]).
pub async fn run(target: &Target, config: &Config) -> Result<Report, BenchError> {
    if config.connections == 0 {
        return Err(BenchError::Config(
            "--connections must be at least 1".into(),
        ));
    }
    let names = scenario::Names::new();
    let progress = Arc::new(AtomicU64::new(0));
    let seeded = seed_replays(target, config, &names).await;
    let bar = progress_bar(config.progress, config.duration);
    let started = Instant::now();
    let deadline = started + config.duration;
    let ticker = tick(bar.clone(), progress.clone(), started);
    let flooding = match config.flood {
        Some(flood) => Some(flood::start(target.base(), flood, deadline)?),
        None => None,
    };
    let (mut tally, elapsed) = if config.scenario == Scenario::Storm {
        storm(target, config, &names, progress).await
    } else {
        let tally = closed_loops(target, config, &names, seeded, deadline, progress).await;
        (tally, started.elapsed())
    };
    ticker.abort();
    bar.finish_and_clear();
    let ledger = check_ledger(target, config, &names, &mut tally).await?;
    let storm = (config.scenario == Scenario::Storm).then_some(config.connections);
    let flood = match flooding {
        Some(task) => Some(task.await.unwrap_or_default()),
        None => None,
    };
    Ok(Report::new(
        config.scenario.name(),
        target.base(),
        config.connections,
        elapsed,
        &tally,
        ledger,
        storm,
    )
    .with_flood(flood))
}

/// Setup (not measured): completed keys to replay, per worker (none when
/// the scenario replays nothing).
async fn seed_replays(
    target: &Target,
    config: &Config,
    names: &scenario::Names,
) -> Vec<scenario::Seeded> {
    if !matches!(config.scenario, Scenario::Replay | Scenario::Mixed) {
        return Vec::new();
    }
    let seeds = if config.scenario == Scenario::Replay {
        REPLAY_SEEDS
    } else {
        1
    };
    let seeding = (0..config.connections).map(|w| scenario::seed(target, names, w, seeds));
    futures::future::join_all(seeding).await
}

/// Moves the progress bar every 200 ms until aborted.
fn tick(
    bar: indicatif::ProgressBar,
    progress: Arc<AtomicU64>,
    started: Instant,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let elapsed = started.elapsed();
            let done = progress.load(Ordering::Relaxed);
            bar.set_position(elapsed.as_millis() as u64);
            bar.set_message(format!(
                "{done} requests, {:.0}/s",
                report::per_second(done, elapsed)
            ));
        }
    })
}

/// The storm: waves of duplicates, measured from after its connections'
/// checked, unmeasured warm-up wave.
async fn storm(
    target: &Target,
    config: &Config,
    names: &scenario::Names,
    progress: Arc<AtomicU64>,
) -> (Tally, Duration) {
    let started = Instant::now();
    let deadline = started + config.duration;
    let tally = scenario::storm(
        target.clone(),
        names.clone(),
        config.connections,
        deadline,
        progress,
        true,
    )
    .await;
    (tally, started.elapsed())
}

/// One closed loop per connection until `deadline`, their tallies merged.
async fn closed_loops(
    target: &Target,
    config: &Config,
    names: &scenario::Names,
    seeded: Vec<scenario::Seeded>,
    deadline: Instant,
    progress: Arc<AtomicU64>,
) -> Tally {
    let mut seeds = seeded.into_iter();
    let tasks: Vec<_> = (0..config.connections)
        .map(|worker| {
            tokio::spawn(scenario::closed_loop(
                target.clone(),
                config.scenario,
                names.clone(),
                worker,
                seeds.next().unwrap_or_default(),
                deadline,
                progress.clone(),
            ))
        })
        .collect();
    let mut tally = Tally::default();
    for task in tasks {
        match task.await {
            Ok(part) => tally.merge(part),
            Err(error) => tally.violation(format!("a worker panicked: {error}")),
        }
    }
    tally
}

/// The comparison with the acquirer's ledger, when asked, the scenario
/// pays and the target exposes it.
async fn check_ledger(
    target: &Target,
    config: &Config,
    names: &scenario::Names,
    tally: &mut Tally,
) -> Result<Option<report::LedgerReport>, BenchError> {
    if !(config.ledger_check && config.scenario.pays()) {
        return Ok(None);
    }
    let Some(ledger) = target.ledger().await? else {
        return Ok(None);
    };
    let executed = std::mem::take(&mut tally.executed_references);
    Ok(Some(scenario::check_ledger(
        &ledger,
        &names.reference_prefix(),
        &executed,
        tally,
    )))
}

/// `chargeonce bench`: runs, prints the text report, writes the JSON one if
/// asked, and fails when the checks did.
pub async fn main(args: BenchArgs) -> Result<Report, BenchError> {
    let connections = match (args.scenario, args.duplicates) {
        (Scenario::Storm, Some(duplicates)) => duplicates,
        _ => args.connections,
    };
    let target = Target::new(&args.target, &args.shop, args.secret.expose(), connections)?
        .with_headers(args.headers.clone())
        .with_replayed_header(args.replayed_header.clone())
        .with_ledger_base(args.operator_url.as_deref());
    let config = Config {
        scenario: args.scenario,
        connections,
        duration: args.duration,
        ledger_check: !args.no_ledger_check,
        progress: !args.no_progress,
        flood: (args.flood > 0).then_some(flood::FloodConfig {
            connections: args.flood,
            from: args.flood_from,
        }),
    };
    let report = run(&target, &config).await?;
    match &args.json {
        Some(path) if path.as_os_str() == "-" => println!("{}", report.to_json()),
        Some(path) => {
            print!("{}", report.to_text());
            std::fs::write(path, report.to_json() + "\n").map_err(|source| BenchError::Write {
                path: path.clone(),
                source,
            })?;
        }
        None => print!("{}", report.to_text()),
    }
    if report.passed {
        Ok(report)
    } else {
        Err(BenchError::Failed {
            scenario: report.scenario.clone(),
            violations: report.violations,
            server_errors: report.server_errors,
            transport_errors: report.transport_errors,
        })
    }
}
