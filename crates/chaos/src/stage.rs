//! A run's stage and its phases: [`Stage::up`] brings the PostgreSQL, the
//! shops, the acquirer and the instances up ([`crate::setup`]);
//! [`Stage::drive`] runs the work under the nemesis; [`Stage::heal_and_settle`]
//! lifts the faults and waits for the service's own workers to settle
//! everything; [`Stage::stop`] stops the processes before the truth is read.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chargeonce_core::Store;
use chargeonce_prooftools::{FaultProxy, ProxyStats};
use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::mpsc;

use crate::args::ChaosArgs;
use crate::checker::Violation;
use crate::clients::Clients;
use crate::cluster::Postgres;
use crate::error::ChaosError;
use crate::history::CallRecord;
use crate::intent::Intent;
use crate::nemesis::{self, Instances, NemesisLog, Plan};
use crate::pglog::LogFigures;
use crate::procs::Proc;
use crate::setup;
use crate::tap::CommitSeen;
use crate::workload::Work;

/// How long past an authorization TTL the settle waits for the expirer
/// (which runs every second on every instance).
const EXPIRY_GRACE: Duration = Duration::from_secs(5);
/// How long a call to the acquirer's admin API may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything a run brought up.
pub(crate) struct Stage {
    http: reqwest::Client,
    /// The run's PostgreSQL.
    pub(crate) postgres: Arc<Postgres>,
    /// The service's store, read for the truth.
    pub(crate) store: Arc<dyn Store>,
    shops: Vec<(String, String)>,
    /// The run's shops, by id.
    pub(crate) shop_ids: Vec<String>,
    acquirer: Proc,
    /// The acquirer's ledger file.
    pub(crate) ledger_path: PathBuf,
    instances: Arc<Instances>,
    proxies: Vec<FaultProxy>,
    /// What the fault proxies did.
    pub(crate) stats: Arc<ProxyStats>,
}

/// What driving the work left: the intents, what the clients saw, what
/// the nemesis did, and how long it took.
pub(crate) struct Driven {
    /// The run's intents.
    pub(crate) intents: Vec<Intent>,
    /// Every call the clients made and what they were told.
    pub(crate) history: Vec<CallRecord>,
    /// The faults injected.
    pub(crate) log: NemesisLog,
    /// The load's duration.
    pub(crate) run_seconds: f64,
    /// How long the service took to settle everything once healed.
    pub(crate) settle_seconds: f64,
}

/// The violations found and PostgreSQL's log figures.
pub(crate) struct Judged {
    /// Every broken invariant.
    pub(crate) violations: Vec<Violation>,
    /// What PostgreSQL's log held.
    pub(crate) postgres_log: LogFigures,
}

impl Stage {
    /// Brings the run up; also gives the channel on which the taps report
    /// commits (the nemesis's commit-window kills wait on it).
    pub(crate) async fn up(
        args: &ChaosArgs,
        seed: u64,
        work: &Path,
        bin: &Path,
    ) -> Result<(Self, mpsc::UnboundedReceiver<CommitSeen>), ChaosError> {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .map_err(|e| ChaosError::Setup(e.to_string()))?;
        let postgres = setup::postgres(args, work).await?;
        let store =
            chargeonce_store::connect(&postgres.url, &chargeonce_store::PoolConfig::default())
                .await?;
        let shops = setup::shops(store.as_ref(), args, seed).await?;
        let shop_ids = shops.iter().map(|(id, _)| id.clone()).collect();
        let acquirer = setup::acquirer(args, seed, work, bin, &http).await?;
        let (commits_tx, commits_rx) = mpsc::unbounded_channel();
        let (instances, proxies, stats) = setup::instances(
            args,
            seed,
            work,
            bin,
            &http,
            &postgres.url,
            acquirer.port,
            &acquirer.instance_ports,
            &acquirer.webhook_secret,
            &commits_tx,
        )
        .await?;
        let stage = Self {
            http,
            postgres,
            store,
            shops,
            shop_ids,
            acquirer: acquirer.acquirer,
            ledger_path: acquirer.ledger_path,
            instances,
            proxies,
            stats,
        };
        Ok((stage, commits_rx))
    }

    /// Runs every intent through the clients while the nemesis injects its
    /// plan (and in-flight duplicate modes rotate at the acquirer).
    pub(crate) async fn drive(
        &self,
        args: &ChaosArgs,
        seed: u64,
        commits: mpsc::UnboundedReceiver<CommitSeen>,
    ) -> Result<Driven, ChaosError> {
        let intents = (0..args.intents)
            .map(|i| Intent::generate(seed, i, args))
            .collect::<Result<Vec<_>, _>>()?;
        let work = Arc::new(Work::new(intents));
        let bases: Vec<String> = self.proxies.iter().map(FaultProxy::base).collect();
        let clients = Arc::new(Clients::new(&self.shops, &bases, args)?);
        let bar = progress(args, &work);
        let started = Instant::now();
        let duplicates = (args.in_flight_duplicate.len() > 1).then(|| {
            tokio::spawn(nemesis::rotate_in_flight_duplicates(
                self.http.clone(),
                self.acquirer.base(),
                args.in_flight_duplicate.clone(),
            ))
        });
        let nemesis = tokio::spawn(nemesis::run(
            self.plan(args, seed),
            self.instances.clone(),
            self.postgres.clone(),
            work.clone(),
            commits,
            args.lease,
            seed,
        ));
        work.run(clients, args.clients, seed).await;
        let log = nemesis
            .await
            .map_err(|e| ChaosError::Setup(format!("the nemesis failed: {e}")))?;
        let run_seconds = started.elapsed().as_secs_f64();
        if let Some(duplicates) = duplicates {
            duplicates.abort();
        }
        bar.abort();
        let history = std::mem::take(&mut *work.history.lock().await);
        Ok(Driven {
            intents: work.intents.clone(),
            history,
            log,
            run_seconds,
            settle_seconds: 0.0,
        })
    }

    /// The nemesis's plan: what the PostgreSQL can take (an external one
    /// without a restart command is never restarted; failovers need a
    /// cluster).
    fn plan(&self, args: &ChaosArgs, seed: u64) -> Plan {
        let restarts = if self.postgres.can_restart() {
            args.pg_restarts
        } else {
            0
        };
        let failovers = if self.postgres.can_fail_over() {
            args.pg_failovers
        } else {
            0
        };
        Plan::generate(
            seed,
            args.instances.max(1),
            args.kills,
            args.freezes,
            args.commit_window_kills,
            restarts,
            failovers,
        )
        .with_ha_faults(
            seed,
            if self.postgres.can_fail_over() {
                args.pg_leader_freezes
            } else {
                0
            },
            if self.postgres.can_fail_over() {
                args.etcd_member_kills
            } else {
                0
            },
        )
    }

    /// Lifts every fault, restarts what is down, and waits (up to
    /// `--settle-timeout`) until no payment is pending and no key stalled;
    /// records how long it waited. What could not be healed is logged with
    /// the nemesis's errors.
    pub(crate) async fn heal_and_settle(&self, args: &ChaosArgs, driven: &mut Driven) {
        let log = &mut driven.log;
        for proxy in &self.proxies {
            proxy.heal();
        }
        log.errors.extend(self.instances.ensure_running().await);
        let healed = self
            .http
            .put(format!("{}/admin/faults", self.acquirer.base()))
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
            let pending = self.store.pending_payments(Duration::ZERO, 1).await;
            let stalled = self.store.stalled_keys(Duration::ZERO, 1).await;
            // Authorizations past their TTL are released by the expirer
            // (every second). Every authorization was made before the
            // settle began, so one TTL into it all are due: the run waits
            // that long (else an expiry begun just after the settle would
            // be cut by the end of the run), then for the due ones to be
            // released, for a few passes at most (an acquirer that refuses
            // a release keeps its hold open, which the checker judges).
            let waited = settling.elapsed();
            let all_due = args.authorize_rate <= 0.0 || waited >= args.authorization_ttl;
            let expiring = if waited < args.authorization_ttl + EXPIRY_GRACE {
                self.store.expired_authorizations(1).await
            } else {
                Ok(Vec::new())
            };
            if all_due
                && matches!((&pending, &stalled, &expiring), (Ok(p), Ok(s), Ok(e)) if p.is_empty() && s.is_empty() && e.is_empty())
            {
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
        driven.settle_seconds = settling.elapsed().as_secs_f64();
    }

    /// Stops the instances and the acquirer, so the truth read next is final.
    pub(crate) async fn stop(&mut self) {
        for proc in &self.instances.procs {
            proc.lock().await.kill();
        }
        self.acquirer.kill();
    }
}

/// A progress bar of the intents done (hidden with `--no-progress`), kept
/// up to date by a task; abort the task to stop it.
fn progress(args: &ChaosArgs, work: &Arc<Work>) -> Progress {
    let bar = if args.no_progress {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(work.total() as u64)
    };
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} intents {msg}",
    ) {
        bar.set_style(style);
    }
    let ticker = {
        let bar = bar.clone();
        let work = work.clone();
        tokio::spawn(async move {
            loop {
                bar.set_position(work.done.load(Ordering::Relaxed) as u64);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    Progress { bar, ticker }
}

/// The progress bar and the task that moves it.
struct Progress {
    bar: ProgressBar,
    ticker: tokio::task::JoinHandle<()>,
}

impl Progress {
    fn abort(self) {
        self.ticker.abort();
        self.bar.finish_and_clear();
    }
}
