//! Bringing the run up: the PostgreSQL, the run's shops, the acquirer with
//! its faults, and the service instances behind their taps and fault proxies.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chargeonce_core::{ShopId, ShopSecret, Store};
use tokio::sync::{Mutex, mpsc};

use crate::args::{ChaosArgs, Sabotage, StoreKind};
use crate::cluster::{HaOptions, Postgres};
use crate::error::ChaosError;
use crate::nemesis::Instances;
use crate::procs::{Proc, free_port};
use chargeonce_prooftools::{FaultProxy, ProxyStats};

use crate::intent;
use crate::proxy::{self, FaultRates};
use crate::tap::{CommitSeen, Tap};

/// The store of the run: an SQLite file in the run's folder (`--store
/// sqlite`), or PostgreSQL: external (`--database-url`), a
/// high-availability cluster (`--pg-ha`), or a private one.
pub(crate) async fn postgres(args: &ChaosArgs, work: &Path) -> Result<Arc<Postgres>, ChaosError> {
    if args.store == StoreKind::Sqlite {
        return Ok(Arc::new(Postgres::sqlite(&work.join("chargeonce.db"))));
    }
    Ok(Arc::new(match &args.database_url {
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
    }))
}

/// Adds the run's shops (tagged with the seed) and returns their ids and secrets.
pub(crate) async fn shops(
    store: &dyn Store,
    args: &ChaosArgs,
    seed: u64,
) -> Result<Vec<(String, String)>, ChaosError> {
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
    Ok(shops)
}

/// The started acquirer and what the instances need to know of it.
pub(crate) struct Acquirer {
    /// Its process.
    pub(crate) acquirer: Proc,
    /// Its ledger file.
    pub(crate) ledger_path: PathBuf,
    /// Its port.
    pub(crate) port: u16,
    /// The ports chosen for the instances (instance 0 gets the webhooks).
    pub(crate) instance_ports: Vec<u16>,
    /// The secret the webhooks are signed with.
    pub(crate) webhook_secret: String,
}

/// Starts the acquirer with its faults (and its webhooks, unless sabotaged
/// or turned off), after choosing the instances' ports.
pub(crate) async fn acquirer(
    args: &ChaosArgs,
    seed: u64,
    work: &Path,
    bin: &Path,
    http: &reqwest::Client,
) -> Result<Acquirer, ChaosError> {
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
    acquirer_args.extend([
        "--late-rate".into(),
        args.acquirer_late_rate.to_string(),
        "--late-latency".into(),
        "3s".into(),
        "--in-flight-duplicate".into(),
        args.in_flight_duplicate
            .first()
            .copied()
            .unwrap_or_default()
            .to_string(),
    ]);
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
            "--webhook-hangup-rate".into(),
            args.webhook_hangup_rate.to_string(),
        ]);
    }
    let mut acquirer = Proc::new("acquirer", acquirer_port, bin, acquirer_args, work)
        .env("CHARGEONCE_WEBHOOK_SECRET", &webhook_secret);
    acquirer.start(http).await?;
    Ok(Acquirer {
        acquirer,
        ledger_path,
        port: acquirer_port,
        instance_ports,
        webhook_secret,
    })
}

/// Starts a tap per instance in front of the acquirer, the instances on
/// `instance_ports`, and a fault proxy in front of each.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn instances(
    args: &ChaosArgs,
    seed: u64,
    work: &Path,
    bin: &Path,
    http: &reqwest::Client,
    database_url: &str,
    acquirer_port: u16,
    instance_ports: &[u16],
    webhook_secret: &str,
    commits_tx: &mpsc::UnboundedSender<CommitSeen>,
) -> Result<(Arc<Instances>, Vec<FaultProxy>, Arc<ProxyStats>), ChaosError> {
    let instances_n = args.instances.max(1);
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
            // Chaos reads its truth from the store and the ledger files,
            // not from an operator listener.
            "--operator-listen".into(),
            "off".into(),
            "--database-url".into(),
            database_url.to_owned(),
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
            "--authorization-ttl".into(),
            humantime::format_duration(args.authorization_ttl).to_string(),
            "--expiry-interval".into(),
            "1s".into(),
        ]);
        if i != 0 {
            serve.push("--no-reconciler".into());
        }
        if args.acquirer_without_keys {
            serve.push("--acquirer-no-idempotency".into());
        }
        serve.extend([
            "--acquirer-settle-window".into(),
            humantime::format_duration(args.settle_window).to_string(),
            // Test mode's simulator (unused by the workload): its ledger in
            // the run's directory, shared by the instances.
            "--test-sim-ledger".into(),
            work.join("test-sim.db").display().to_string(),
        ]);
        let mut proc = Proc::new(&format!("instance-{i}"), port, bin, serve, work)
            .env("CHARGEONCE_WEBHOOK_SECRET", webhook_secret);
        proc.start(http).await?;
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
            proxy::start(
                port,
                rates,
                intent::mix(seed, 1_000_000 + i as u64),
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
    Ok((instances, proxies, stats))
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}
