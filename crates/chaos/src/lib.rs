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
pub mod clients;
pub mod cluster;
pub mod error;
pub mod evidence;
pub mod history;
pub mod intent;
pub mod nemesis;
pub mod pglog;
pub mod procs;
pub mod proxy;
pub mod report;
pub mod tap;
pub mod workload;

mod calls;
mod repeat;
mod setup;
mod stage;
pub mod truth;

use std::path::{Path, PathBuf};

pub use args::{ChaosArgs, Sabotage, StoreKind};
pub use checker::{Violation, check};
pub use error::ChaosError;
pub use report::Report;
pub use truth::Truth;

use crate::report::{FailoverFigures, HistoryFigures};
use crate::stage::{Driven, Judged, Stage};

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

/// One run, a short sequence: bring the stage up, drive the work under the
/// nemesis, heal and let the service settle, read the truth, judge it, and
/// report.
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
    if (args.pg_leader_freezes > 0 || args.etcd_member_kills > 0) && !args.pg_ha {
        return Err(ChaosError::Setup(
            "--pg-leader-freezes and --etcd-member-kills need --pg-ha".into(),
        ));
    }
    if args.store == StoreKind::Sqlite {
        if args.pg_ha || args.database_url.is_some() {
            return Err(ChaosError::Setup(
                "--store sqlite takes neither --pg-ha nor --database-url".into(),
            ));
        }
        if args.instances != 1 {
            return Err(ChaosError::Setup(
                "--store sqlite runs one instance (the SQLite store is one process): pass --instances 1"
                    .into(),
            ));
        }
    }
    let (mut stage, commits) = Stage::up(args, seed, work, bin).await?;
    let mut driven = stage.drive(args, seed, commits).await?;
    stage.heal_and_settle(args, &mut driven).await;
    stage.stop().await;
    let truth = truth::read(
        stage.store.as_ref(),
        &stage.shop_ids,
        &driven.history,
        &stage.ledger_path,
    )
    .await?;
    let judged = judge(args, &stage, &driven, &truth);
    let report = report(args, seed, work, &stage, driven, &truth, judged);
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    Ok(report)
}

/// The invariants checked on the truth, the faults that were not injected
/// as planned, PostgreSQL's log, and a run that proved nothing.
fn judge(args: &ChaosArgs, stage: &Stage, driven: &Driven, truth: &Truth) -> Judged {
    let mut violations = check(&driven.intents, &stage.shop_ids, &driven.history, truth);
    for error in &driven.log.errors {
        violations.push(Violation {
            invariant: "faults-injected-as-planned",
            detail: error.clone(),
            evidence: Vec::new(),
        });
    }
    // PostgreSQL's log, read once the instances are gone.
    let (postgres_log, quiet) = pglog::judge_file(stage.postgres.log());
    violations.extend(quiet);
    let paid = HistoryFigures::of(&driven.history)
        .outcomes
        .get("paid")
        .copied()
        .unwrap_or(0);
    if paid == 0 && args.intents > 0 {
        violations.push(Violation {
            invariant: "faults-injected-as-planned",
            detail: "no payment succeeded at all: the run proves nothing".into(),
            evidence: Vec::new(),
        });
    }
    Judged {
        violations,
        postgres_log,
    }
}

/// The report of a judged run (at most 200 violations quoted, all counted).
fn report(
    args: &ChaosArgs,
    seed: u64,
    work: &Path,
    stage: &Stage,
    driven: Driven,
    truth: &Truth,
    judged: Judged,
) -> Report {
    let Judged {
        mut violations,
        postgres_log,
    } = judged;
    let mut by_invariant = std::collections::BTreeMap::new();
    for v in &violations {
        *by_invariant.entry(v.invariant.to_owned()).or_insert(0) += 1;
    }
    let violation_count = violations.len();
    violations.truncate(200);
    Report {
        seed,
        repeat: repeat::command(seed, args),
        sabotage: args.sabotage,
        store: args.store,
        instances: args.instances.max(1),
        clients: args.clients,
        shops: stage.shop_ids.len(),
        intents: args.intents,
        proxy: proxy::figures(stage.stats.snapshot()),
        failovers: FailoverFigures::of(&driven.log, &driven.history),
        nemesis: driven.log,
        postgres_log,
        fenced_finishes: count_in_logs(
            work,
            "instance-",
            &["lease lost before finish", "our finish will be fenced off"],
        ),
        books: truth::books(truth),
        history: HistoryFigures::of(&driven.history),
        run_seconds: driven.run_seconds,
        settle_seconds: driven.settle_seconds,
        violations_by_invariant: by_invariant,
        violations,
        violation_count,
        passed: violation_count == 0,
    }
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
