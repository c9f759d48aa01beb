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
//! [`checker`] (the invariants) and [`report`]. This file wires a run
//! together; `setup` brings it up, `truth` reads the database and the
//! ledger afterwards, and `repeat` prints the command that repeats it.

pub mod args;
pub mod checker;
pub mod cluster;
pub mod error;
pub mod evidence;
pub mod history;
pub mod nemesis;
pub mod pglog;
pub mod procs;
pub mod proxy;
pub mod report;
pub mod tap;
pub mod workload;

mod repeat;
mod setup;
pub mod truth;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::mpsc;

pub use args::{ChaosArgs, Sabotage};
pub use checker::{Violation, check};
pub use error::ChaosError;
pub use report::Report;
pub use truth::Truth;

use crate::nemesis::Plan;
use crate::proxy::FaultProxy;
use crate::report::{FailoverFigures, HistoryFigures};
use crate::workload::{Clients, Intent, Work};

/// How long a call to the acquirer's admin API may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs, prints the report (text on stdout, JSON to `--json`), and returns
/// whether the run passed.
pub async fn main(args: ChaosArgs) -> Result<bool, ChaosError> {
    let report = run(args).await?;
    print!("{}", report.text());
    Ok(report.passed)
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
    let postgres = setup::postgres(args, work).await?;
    let store =
        chargeonce_store::connect(&postgres.url, &chargeonce_store::PoolConfig::default()).await?;
    let shops = setup::shops(store.as_ref(), args, seed).await?;
    let shop_ids: Vec<String> = shops.iter().map(|(id, _)| id.clone()).collect();

    // The acquirer, with its faults, and a tap per instance in front of it.
    let setup::Acquirer {
        mut acquirer,
        ledger_path,
        port: acquirer_port,
        instance_ports,
        webhook_secret,
    } = setup::acquirer(args, seed, work, bin, &http).await?;
    let instances_n = args.instances.max(1);

    let (commits_tx, commits_rx) = mpsc::unbounded_channel();
    let (instances, proxies, stats) = setup::instances(
        args,
        seed,
        work,
        bin,
        &http,
        &postgres.url,
        acquirer_port,
        &instance_ports,
        &webhook_secret,
        &commits_tx,
    )
    .await?;

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
    let duplicates = (args.in_flight_duplicate.len() > 1).then(|| {
        tokio::spawn(nemesis::rotate_in_flight_duplicates(
            http.clone(),
            acquirer.base(),
            args.in_flight_duplicate.clone(),
        ))
    });
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
    if let Some(duplicates) = duplicates {
        duplicates.abort();
    }
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
    if args.cancel_rate > 0.0 {
        // A charge that lands after its payment's cancel is refunded by the
        // reconciler (instance 0, every 2 s): two passes after the last
        // payment settled, before the truth is read.
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    let settle_seconds = settling.elapsed().as_secs_f64();

    // Stop everything, then read the truth.
    for proc in &instances.procs {
        proc.lock().await.kill();
    }
    acquirer.kill();
    let history = std::mem::take(&mut *work_state.history.lock().await);
    let truth = truth::read(store.as_ref(), &shop_ids, &history, &ledger_path).await?;
    let mut violations = check(&work_state.intents, &shop_ids, &history, &truth);
    for error in &log.errors {
        violations.push(Violation {
            invariant: "faults-injected-as-planned",
            detail: error.clone(),
            evidence: Vec::new(),
        });
    }
    // PostgreSQL's log, read once the instances are gone.
    let (postgres_log, quiet) = pglog::judge_file(postgres.log());
    violations.extend(quiet);
    let figures = HistoryFigures::of(&history);
    let failovers = FailoverFigures::of(&log, &history);
    if figures.outcomes.get("paid").copied().unwrap_or(0) == 0 && args.intents > 0 {
        violations.push(Violation {
            invariant: "faults-injected-as-planned",
            detail: "no payment succeeded at all: the run proves nothing".into(),
            evidence: Vec::new(),
        });
    }
    let books = truth::books(&truth);
    let mut by_invariant = std::collections::BTreeMap::new();
    for v in &violations {
        *by_invariant.entry(v.invariant.to_owned()).or_insert(0) += 1;
    }
    let violation_count = violations.len();
    violations.truncate(200);
    let report = Report {
        seed,
        repeat: repeat::command(seed, args),
        sabotage: args.sabotage,
        instances: instances_n,
        clients: args.clients,
        shops: shop_ids.len(),
        intents: args.intents,
        proxy: stats.snapshot(),
        nemesis: log,
        failovers,
        postgres_log,
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
