//! # chargeonce-chaos
//!
//! The proof of "charged once, whatever happens", in the manner of Jepsen:
//! on one machine over loopback, it starts the acquirer simulator with its
//! faults, several `chargeonce serve` instances on one PostgreSQL database
//! and a fault proxy in front of each, drives concurrent clients through the
//! client SDK's retry policy, and meanwhile kills instances, freezes one past
//! its lease, kills one between the acquirer's commit and ours, and restarts
//! PostgreSQL with `-m immediate`. Then it stops the faults, lets the
//! service's own workers settle everything, and checks the money invariants
//! against the database and the acquirer's ledger ([`checker`]).
//!
//! Every random choice comes from one seed ([`ChaosArgs::seed`]), printed
//! with the command that repeats the run. (The operating system still
//! interleaves the processes differently on every run: a seed reproduces the
//! workload and the fault schedule, not the exact timing.)
//!
//! The layout: [`args`] (flags), [`cluster`] (the PostgreSQL), [`procs`]
//! (child processes), [`proxy`] (client-side faults), [`tap`] (the
//! commit-window kill), [`workload`] (intents and clients), [`nemesis`]
//! (kills, freezes, restarts), [`history`] (what the clients saw),
//! [`checker`] (the invariants) and [`report`].

pub mod args;
pub mod checker;
pub mod cluster;
pub mod history;
pub mod nemesis;
pub mod procs;
pub mod proxy;
pub mod report;
pub mod tap;
pub mod workload;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chargeonce_acquirer::{ChargeStatus, Simulator, SimulatorConfig};
use chargeonce_core::{RefundId, ShopId, ShopSecret, Store};
use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::{Mutex, mpsc};

pub use args::{ChaosArgs, Sabotage};
pub use checker::{Truth, Violation, check};
pub use report::Report;

use crate::checker::{DbPayment, DbRefund, LedgerCharge, LedgerRefund};
use crate::cluster::{HaOptions, Postgres};
use crate::history::CallResult;
use crate::nemesis::{Instances, Plan};
use crate::procs::{Proc, free_port};
use crate::proxy::{FaultProxy, FaultRates, ProxyStats};
use crate::report::{Books, HistoryFigures};
use crate::tap::Tap;
use crate::workload::{Clients, Intent, Work};

/// Why a run could not be carried out (distinct from violations, which a
/// finished run reports).
#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    /// Starting or driving a part of the run failed.
    #[error("chaos setup: {0}")]
    Setup(String),
    /// The store of the run failed.
    #[error("chaos store: {0}")]
    Store(#[from] chargeonce_core::StoreError),
    /// Reading the acquirer's ledger failed.
    #[error("chaos ledger: {0}")]
    Ledger(#[from] chargeonce_acquirer::SimulatorError),
}

/// How long a call to the acquirer's admin API may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs, prints the report (text on stdout, JSON to `--json`), and returns
/// whether the run passed.
pub async fn main(args: ChaosArgs) -> Result<bool, ChaosError> {
    let report = run(args).await?;
    print!("{}", report.text());
    Ok(report.passed)
}

fn repeat_command(seed: u64, a: &ChaosArgs) -> String {
    let mut command = format!(
        "chargeonce chaos --seed {seed} --intents {} --clients {} --instances {} --shops {} \
         --kills {} --freezes {} --commit-window-kills {} --pg-restarts {} \
         --delay-rate {} --reset-rate {} --drop-rate {} --acquirer-lost-rate {} --acquirer-error-rate {} \
         --double-click-rate {} --late-retry-rate {} --changed-body-rate {} --refund-rate {} --decline-rate {} \
         --lease {} --attempt-timeout {} --call-budget {}",
        a.intents,
        a.clients,
        a.instances,
        a.shops,
        a.kills,
        a.freezes,
        a.commit_window_kills,
        a.pg_restarts,
        a.delay_rate,
        a.reset_rate,
        a.drop_rate,
        a.acquirer_lost_rate,
        a.acquirer_error_rate,
        a.double_click_rate,
        a.late_retry_rate,
        a.changed_body_rate,
        a.refund_rate,
        a.decline_rate,
        humantime::format_duration(a.lease),
        humantime::format_duration(a.attempt_timeout),
        humantime::format_duration(a.call_budget),
    );
    if a.pg_ha {
        command.push_str(&format!(
            " --pg-ha --pg-failovers {} --pg-ha-base-port {}",
            a.pg_failovers, a.pg_ha_base_port
        ));
        if a.pg_failover_with_patroni {
            command.push_str(" --pg-failover-with-patroni");
        }
    }
    if a.no_webhooks {
        command.push_str(" --no-webhooks");
    } else {
        command.push_str(&format!(
            " --webhook-duplicate-rate {} --webhook-reorder-rate {}",
            a.webhook_duplicate_rate, a.webhook_reorder_rate
        ));
    }
    if let Some(sabotage) =
        clap::ValueEnum::to_possible_value(&a.sabotage).filter(|_| a.sabotage != Sabotage::None)
    {
        command.push_str(&format!(" --sabotage {}", sabotage.get_name()));
    }
    if a.acquirer_without_keys {
        command.push_str(&format!(
            " --acquirer-without-keys --settle-window {}",
            humantime::format_duration(a.settle_window)
        ));
    }
    command
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// Carries out a run and returns its report (violations included).
pub async fn run(args: ChaosArgs) -> Result<Report, ChaosError> {
    let seed = args.seed.unwrap_or_else(rand::random);
    eprintln!("chaos: seed {seed}");
    let (work_dir, _temp) = match &args.work_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| ChaosError::Setup(format!("work dir: {e}")))?;
            (dir.clone(), None)
        }
        None => {
            let temp = tempfile::Builder::new()
                .prefix("chargeonce-chaos-")
                .tempdir()
                .map_err(|e| ChaosError::Setup(format!("work dir: {e}")))?;
            (temp.path().to_owned(), Some(temp))
        }
    };
    let bin = match &args.bin {
        Some(bin) => bin.clone(),
        None => std::env::current_exe()
            .map_err(|e| ChaosError::Setup(format!("finding the chargeonce binary: {e}")))?,
    };
    let result = run_in(&args, seed, &work_dir, &bin).await;
    if !matches!(&result, Ok(report) if report.passed) {
        // Keep the logs of a failed run.
        if let Some(temp) = _temp {
            let kept = temp.keep();
            eprintln!("chaos: logs kept in {}", kept.display());
        }
    }
    result
}

async fn run_in(
    args: &ChaosArgs,
    seed: u64,
    work: &Path,
    bin: &Path,
) -> Result<Report, ChaosError> {
    if args.sabotage == Sabotage::AsyncReplication && !args.pg_ha {
        return Err(ChaosError::Setup(
            "--sabotage async-replication needs --pg-ha".into(),
        ));
    }
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| ChaosError::Setup(e.to_string()))?;

    // PostgreSQL, the schema, the shops.
    let postgres = Arc::new(match &args.database_url {
        Some(url) => Postgres::external(url.clone(), args.pg_restart_command.clone()),
        None if args.pg_ha => {
            let options = HaOptions {
                base_port: args.pg_ha_base_port,
                with_patroni: args.pg_failover_with_patroni,
                async_replication: args.sabotage == Sabotage::AsyncReplication,
            };
            let work = work.to_owned();
            tokio::task::spawn_blocking(move || Postgres::ha(&work, options))
                .await
                .map_err(|e| ChaosError::Setup(e.to_string()))??
        }
        None => {
            let work = work.to_owned();
            let port = free_port()?;
            tokio::task::spawn_blocking(move || Postgres::private(&work, port))
                .await
                .map_err(|e| ChaosError::Setup(e.to_string()))??
        }
    });
    let store =
        chargeonce_store::connect(&postgres.url, &chargeonce_store::PoolConfig::default()).await?;
    let run_tag = format!("{:08x}", seed as u32);
    let mut shops = Vec::new();
    for i in 0..args.shops.max(1) {
        let id = format!("chaos{i}_{run_tag}");
        let shop =
            ShopId::new(id.clone()).map_err(|_| ChaosError::Setup(format!("shop id {id}")))?;
        let secret = ShopSecret::generate();
        store.add_shop(&shop, &secret.hash()).await?;
        shops.push((id, secret.expose().to_owned()));
    }
    let shop_ids: Vec<String> = shops.iter().map(|(id, _)| id.clone()).collect();

    // The acquirer, with its faults, and a tap per instance in front of it.
    let ledger_path = work.join("acquirer.db");
    let acquirer_port = free_port()?;
    let mut acquirer_args = strings(&["acquirer", "--listen"]);
    acquirer_args.push(format!("127.0.0.1:{acquirer_port}"));
    acquirer_args.push("--database".into());
    acquirer_args.push(ledger_path.display().to_string());
    acquirer_args.extend([
        "--latency-max".into(),
        format!("{}ms", args.acquirer_latency.as_millis()),
        "--lost-answer-rate".into(),
        args.acquirer_lost_rate.to_string(),
        "--error-rate".into(),
        args.acquirer_error_rate.to_string(),
        "--hang".into(),
        "3s".into(),
        "--seed".into(),
        seed.to_string(),
    ]);
    if args.sabotage == Sabotage::AcquirerSkipsKeyCheck || args.acquirer_without_keys {
        acquirer_args.push("--no-idempotency".into());
    }
    // Instance ports first: the acquirer sends its webhooks to instance 0.
    let instances_n = args.instances.max(1);
    let instance_ports = (0..instances_n)
        .map(|_| free_port())
        .collect::<Result<Vec<_>, _>>()?;
    let webhook_secret = format!("whsec_chaos_{:016x}", rand::random::<u64>());
    // A sabotaged run sends no webhooks: they would settle a lost answer
    // before the retry that charges again, and hide the sabotage.
    let webhooks = !args.no_webhooks && args.sabotage == Sabotage::None;
    if webhooks {
        acquirer_args.extend([
            "--webhook-url".into(),
            format!(
                "http://127.0.0.1:{}/v1/webhooks/acquirer",
                instance_ports[0]
            ),
            "--webhook-duplicate-rate".into(),
            args.webhook_duplicate_rate.to_string(),
            "--webhook-reorder-rate".into(),
            args.webhook_reorder_rate.to_string(),
        ]);
    }
    let mut acquirer = Proc::new("acquirer", acquirer_port, bin, acquirer_args, work)
        .env("CHARGEONCE_WEBHOOK_SECRET", &webhook_secret);
    acquirer.start(&http).await?;

    let (commits_tx, commits_rx) = mpsc::unbounded_channel();
    let mut taps = Vec::new();
    for i in 0..instances_n {
        taps.push(Tap::start(i, acquirer_port, commits_tx.clone()).await?);
    }
    let mut procs = Vec::new();
    for (i, tap) in taps.iter().enumerate() {
        let port = instance_ports[i];
        let mut serve = strings(&["serve", "--listen"]);
        serve.push(format!("127.0.0.1:{port}"));
        serve.extend([
            "--database-url".into(),
            postgres.url.clone(),
            "--acquirer-url".into(),
            tap.base(),
            "--no-demo-shop".into(),
            "--lease".into(),
            humantime::format_duration(args.lease).to_string(),
            "--acquirer-timeout".into(),
            "2s".into(),
            "--completer-interval".into(),
            "1s".into(),
            "--completer-idle".into(),
            humantime::format_duration(args.lease).to_string(),
            "--reconcile-interval".into(),
            "2s".into(),
            "--reconcile-pending-after".into(),
            "3s".into(),
            "--shutdown-grace".into(),
            "1s".into(),
            "--max-connections".into(),
            "12".into(),
        ]);
        if i != 0 {
            serve.push("--no-reconciler".into());
        }
        if args.acquirer_without_keys {
            serve.extend([
                "--acquirer-no-idempotency".into(),
                "--acquirer-settle-window".into(),
                humantime::format_duration(args.settle_window).to_string(),
            ]);
        }
        let mut proc = Proc::new(&format!("instance-{i}"), port, bin, serve, work)
            .env("CHARGEONCE_WEBHOOK_SECRET", &webhook_secret);
        proc.start(&http).await?;
        procs.push(Mutex::new(proc));
    }
    let stats = Arc::new(ProxyStats::default());
    let rates = FaultRates {
        delay: args.delay_rate,
        max_delay: args.max_delay,
        reset: args.reset_rate,
        drop: args.drop_rate,
    };
    let mut proxies = Vec::new();
    for (i, proc) in procs.iter().enumerate() {
        let port = proc.lock().await.port;
        proxies.push(
            FaultProxy::start(
                port,
                rates,
                workload::mix(seed, 1_000_000 + i as u64),
                stats.clone(),
            )
            .await?,
        );
    }
    let instances = Arc::new(Instances {
        procs,
        taps,
        http: http.clone(),
    });

    // The work.
    let intents = (0..args.intents)
        .map(|i| Intent::generate(seed, i, args))
        .collect::<Result<Vec<_>, _>>()?;
    let work_state = Arc::new(Work::new(intents));
    let bases: Vec<String> = proxies.iter().map(FaultProxy::base).collect();
    let clients = Arc::new(Clients::new(&shops, &bases, args)?);
    let pg_restarts = if postgres.can_restart() {
        args.pg_restarts
    } else {
        0
    };
    let plan = Plan::generate(
        seed,
        instances_n,
        args.kills,
        args.freezes,
        args.commit_window_kills,
        pg_restarts,
        if postgres.can_fail_over() {
            args.pg_failovers
        } else {
            0
        },
    );

    let bar = if args.no_progress {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(work_state.total() as u64)
    };
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} intents {msg}",
    ) {
        bar.set_style(style);
    }
    let ticker = {
        let bar = bar.clone();
        let work_state = work_state.clone();
        tokio::spawn(async move {
            loop {
                bar.set_position(work_state.done.load(Ordering::Relaxed) as u64);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };

    let started = Instant::now();
    let nemesis = tokio::spawn(nemesis::run(
        plan,
        instances.clone(),
        postgres.clone(),
        work_state.clone(),
        commits_rx,
        args.lease,
        seed,
    ));
    work_state.run(clients, args.clients, seed).await;
    let mut log = nemesis
        .await
        .map_err(|e| ChaosError::Setup(format!("the nemesis failed: {e}")))?;
    let run_seconds = started.elapsed().as_secs_f64();
    ticker.abort();
    bar.finish_and_clear();

    // Heal, and let the service's own workers settle everything.
    for proxy in &proxies {
        proxy.heal();
    }
    log.errors.extend(instances.ensure_running().await);
    let healed = http
        .put(format!("{}/admin/faults", acquirer.base()))
        .timeout(ADMIN_TIMEOUT)
        .json(&chargeonce_acquirer::Faults::default())
        .send()
        .await
        .is_ok_and(|r| r.status().is_success());
    if !healed {
        log.errors
            .push("could not turn the acquirer's faults off".into());
    }
    let settling = Instant::now();
    while settling.elapsed() < args.settle_timeout {
        let pending = store.pending_payments(Duration::ZERO, 1).await;
        let stalled = store.stalled_keys(Duration::ZERO, 1).await;
        if matches!((&pending, &stalled), (Ok(p), Ok(s)) if p.is_empty() && s.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let settle_seconds = settling.elapsed().as_secs_f64();

    // Stop everything, then read the truth.
    for proc in &instances.procs {
        proc.lock().await.kill();
    }
    acquirer.kill();
    let history = std::mem::take(&mut *work_state.history.lock().await);
    let truth = read_truth(store.as_ref(), &shop_ids, &history, &ledger_path).await?;
    let mut violations = check(&work_state.intents, &shop_ids, &history, &truth);
    for error in &log.errors {
        violations.push(Violation {
            invariant: "faults-injected-as-planned",
            detail: error.clone(),
        });
    }
    let figures = HistoryFigures::of(&history);
    if figures.outcomes.get("paid").copied().unwrap_or(0) == 0 && args.intents > 0 {
        violations.push(Violation {
            invariant: "faults-injected-as-planned",
            detail: "no payment succeeded at all: the run proves nothing".into(),
        });
    }
    let books = Books {
        payments_succeeded: truth
            .payments
            .iter()
            .filter(|p| p.status == "succeeded")
            .count(),
        payments_declined: truth
            .payments
            .iter()
            .filter(|p| p.status == "declined")
            .count(),
        payments_pending: truth
            .payments
            .iter()
            .filter(|p| p.status == "pending")
            .count(),
        ledger_charges: truth.charges.len(),
        ledger_succeeded: truth.charges.iter().filter(|c| c.succeeded).count(),
        ledger_refunds: truth.ledger_refunds.len(),
        ledger_total_minor: truth
            .charges
            .iter()
            .filter(|c| c.succeeded)
            .map(|c| i128::from(c.amount_minor))
            .sum(),
    };
    let mut by_invariant = std::collections::BTreeMap::new();
    for v in &violations {
        *by_invariant.entry(v.invariant.to_owned()).or_insert(0) += 1;
    }
    let violation_count = violations.len();
    violations.truncate(200);
    let report = Report {
        seed,
        repeat: repeat_command(seed, args),
        sabotage: args.sabotage,
        instances: instances_n,
        clients: args.clients,
        shops: shop_ids.len(),
        intents: args.intents,
        proxy: stats.snapshot(),
        nemesis: log,
        fenced_finishes: count_in_logs(
            work,
            "instance-",
            &["lease lost before finish", "our finish will be fenced off"],
        ),
        books,
        history: figures,
        run_seconds,
        settle_seconds,
        violations_by_invariant: by_invariant,
        violations,
        violation_count,
        passed: violation_count == 0,
    };
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    Ok(report)
}

/// How many lines of the logs whose names start with `prefix` contain one of `needles`.
fn count_in_logs(work: &Path, prefix: &str, needles: &[&str]) -> usize {
    let Ok(entries) = std::fs::read_dir(work) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .map(|text| {
            text.lines()
                .filter(|l| needles.iter().any(|n| l.contains(n)))
                .count()
        })
        .sum()
}

fn write_json(path: &PathBuf, report: &Report) -> Result<(), ChaosError> {
    let json = serde_json::to_vec_pretty(report)
        .map_err(|e| ChaosError::Setup(format!("report JSON: {e}")))?;
    std::fs::write(path, json)
        .map_err(|e| ChaosError::Setup(format!("writing {}: {e}", path.display())))
}

/// The database's payments of the run's shops, the refunds the clients were
/// told about, and the acquirer's ledger.
async fn read_truth(
    store: &dyn Store,
    shops: &[String],
    history: &[history::CallRecord],
    ledger_path: &Path,
) -> Result<Truth, ChaosError> {
    let mut truth = Truth::default();
    let from = time::OffsetDateTime::UNIX_EPOCH;
    let to = time::OffsetDateTime::now_utc() + time::Duration::days(1);
    let mut after = None;
    loop {
        let page = store
            .payments_created_between(from, to, after.as_ref(), 1000)
            .await?;
        let Some(last) = page.last() else { break };
        after = Some(last.id.clone());
        truth.payments.extend(
            page.iter()
                .filter(|p| shops.iter().any(|s| s == p.shop_id.as_str()))
                .map(|p| DbPayment {
                    id: p.id.as_str().to_owned(),
                    shop_id: p.shop_id.as_str().to_owned(),
                    reference: p.reference.as_str().to_owned(),
                    amount_minor: p.amount.minor_units(),
                    status: p.status.as_str().to_owned(),
                    provider_payment_id: p.provider_payment_id.clone(),
                    refunded_minor: p.refunded_minor,
                }),
        );
    }
    let mut seen = std::collections::HashSet::new();
    for call in history {
        let (CallResult::Refunded(shown) | CallResult::RefundFailed(shown)) = &call.result else {
            continue;
        };
        if !seen.insert(shown.id.clone()) {
            continue;
        }
        // Read back as the shop the answer named; the checker compares it
        // with the shop that asked.
        let (Ok(shop), Ok(id)) = (
            ShopId::new(shown.shop_id.clone()),
            RefundId::parse(&shown.id),
        ) else {
            continue;
        };
        if let Some(r) = store.refund(&shop, &id).await? {
            truth.refunds.push(DbRefund {
                id: r.id.as_str().to_owned(),
                shop_id: r.shop_id.as_str().to_owned(),
                payment_id: r.payment_id.as_str().to_owned(),
                status: r.status.as_str().to_owned(),
                amount_minor: r.amount.minor_units(),
            });
        }
    }
    let sim = Simulator::open(ledger_path, SimulatorConfig::default()).await?;
    truth.charges = sim
        .ledger()
        .await?
        .into_iter()
        .map(|e| LedgerCharge {
            id: e.id,
            shop_id: e.shop_id.as_str().to_owned(),
            payment_id: e.payment_id.as_str().to_owned(),
            reference: e.reference.as_str().to_owned(),
            amount_minor: e.amount.minor_units(),
            succeeded: e.status == ChargeStatus::Succeeded,
        })
        .collect();
    truth.ledger_refunds = sim
        .refunds()
        .await?
        .into_iter()
        .map(|r| LedgerRefund {
            charge_id: r.charge_id,
            amount_minor: r.amount_minor,
        })
        .collect();
    sim.close().await;
    Ok(truth)
}
