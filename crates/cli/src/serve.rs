//! `chargeonce serve`: wires the store, the simulator, the engine, the HTTP
//! layer and the workers, and serves until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chargeonce_core::{Engine, EngineConfig, KeyTiming, ShopId, ShopSecret, Store};
use chargeonce_server::cache::ResponseCacheLimits;
use chargeonce_server::conn::{ConnectionLimits, FD_RESERVE, serve_with};
use chargeonce_server::limits::{RateLimit, RequestLimits, WaiterCaps};
use chargeonce_server::{AppState, HttpRender};
use chargeonce_store::PoolConfig;
use chargeonce_workers::sweeper::{self, SweeperConfig};
use clap::Args;

/// The default store: an SQLite file in the working directory.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://chargeonce.db";

/// The demo shop created on an embedded (SQLite) store.
const DEMO_SHOP: &str = "demo";

/// Flags of `chargeonce serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port; the chosen address is printed).
    #[arg(long, env = "CHARGEONCE_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// `sqlite://PATH` (embedded, one process) or `postgres://...` (many instances).
    #[arg(long, env = "CHARGEONCE_DATABASE_URL", default_value = DEFAULT_DATABASE_URL)]
    database_url: String,
    /// The in-process acquirer simulator's ledger (an SQLite file). Server
    /// processes given the same path share one ledger, as they would one acquirer.
    #[arg(
        long,
        env = "CHARGEONCE_SIM_LEDGER",
        default_value = "chargeonce-sim.db"
    )]
    sim_ledger: PathBuf,
    /// How long the simulator's `tok_slow` takes to answer.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    sim_slow: Duration,
    /// Lease on a key while its request runs; renewed during acquirer calls.
    /// A crashed instance's key can be taken over once it runs out.
    #[arg(long, env = "CHARGEONCE_LEASE", default_value = "30s", value_parser = humantime::parse_duration)]
    lease: Duration,
    /// The longest an acquirer call may take before its outcome counts as
    /// unknown (202 pending; a retry with the same key resolves it).
    #[arg(long, env = "CHARGEONCE_ACQUIRER_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    acquirer_timeout: Duration,
    /// How long finished keys are kept and replayed (the published retention).
    #[arg(long, env = "CHARGEONCE_KEY_TTL", default_value = "24h", value_parser = humantime::parse_duration)]
    key_ttl: Duration,
    /// Pause between sweeps of expired keys.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    sweep_interval: Duration,
    /// Keys deleted per sweep statement.
    #[arg(long, default_value_t = 1000)]
    sweep_batch: u32,
    /// Database connections per process.
    #[arg(long, env = "CHARGEONCE_MAX_CONNECTIONS", default_value_t = 16)]
    max_connections: u32,
    /// On SIGTERM or SIGINT, how long to wait for payments in flight to finish.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    shutdown_grace: Duration,
    /// Do not create the demo shop on an SQLite store.
    #[arg(long)]
    no_demo_shop: bool,
    #[command(flatten)]
    upstream: crate::upstream::UpstreamArgs,
    #[command(flatten)]
    workers: crate::upstream::WorkerArgs,
    /// Also serve `POST /bench/ceiling` (auth only) and `POST /bench/noop`
    /// (nothing): the ceilings `chargeonce bench` compares against.
    #[cfg(feature = "bench-routes")]
    #[arg(long)]
    bench_ceiling: bool,
    /// How long a shop's secret hash read from the store is trusted before it
    /// is read again (the presented secret is checked against it on every
    /// request). A rotated or removed secret stops working within this. `0s`:
    /// read it on every request.
    #[arg(long, env = "CHARGEONCE_AUTH_CACHE_TTL", default_value = "30s", value_parser = humantime::parse_duration)]
    auth_cache_ttl: Duration,
    /// Most completed responses kept in memory to answer replays without the
    /// database (0: none; they are also bounded to 16 MiB).
    #[arg(long, env = "CHARGEONCE_RESPONSE_CACHE", default_value_t = 50_000)]
    response_cache: usize,
    /// How long a duplicate of a request running on this instance waits for
    /// its outcome (then replayed to it) before answering 409. `0s`: every
    /// duplicate goes to the database on its own.
    #[arg(long, default_value = "50ms", value_parser = humantime::parse_duration)]
    duplicate_wait: Duration,
    /// The longest a client may take to send a request head, counted from
    /// the connection's start or the head's first byte; then the connection
    /// is closed. `0s`: no limit.
    #[arg(long, env = "CHARGEONCE_HEADER_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    header_timeout: Duration,
    /// A kept-alive connection with no request for this long is closed.
    /// `0s`: no limit.
    #[arg(long, env = "CHARGEONCE_IDLE_TIMEOUT", default_value = "60s", value_parser = humantime::parse_duration)]
    idle_timeout: Duration,
    /// The longest a request body may take to arrive after its head; then
    /// 408 `body_timeout` and the connection is closed. `0s`: no limit.
    #[arg(long, env = "CHARGEONCE_BODY_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    body_timeout: Duration,
    /// The longest a request may take (plus N s for `Prefer: wait=N`); then
    /// 503 `request_timeout` with Retry-After. A payment it started goes on
    /// and is answered to the retry. Keep it above --acquirer-timeout. `0s`:
    /// no limit.
    #[arg(long, env = "CHARGEONCE_REQUEST_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    request_timeout: Duration,
    /// Most client connections open at once; lowered to what the file limit
    /// (`ulimit -n`) allows with room for the database and the acquirer. At
    /// the cap, new connections wait in the listen backlog.
    #[arg(long, env = "CHARGEONCE_MAX_CLIENT_CONNECTIONS", default_value_t = chargeonce_server::conn::MAX_CONNECTIONS)]
    max_client_connections: usize,
    /// Requests per second each shop may send, sustained (past it and the
    /// burst: 429 `rate_limited` with Retry-After). `0`: no limit.
    #[arg(long, env = "CHARGEONCE_RATE_LIMIT", default_value_t = chargeonce_server::limits::RATE_LIMIT)]
    rate_limit: u32,
    /// Requests a shop may send at once above its rate after a quiet spell.
    #[arg(long, env = "CHARGEONCE_RATE_LIMIT_BURST", default_value_t = chargeonce_server::limits::RATE_LIMIT_BURST)]
    rate_limit_burst: u32,
    /// Most `Prefer: wait` requests waiting at once on this instance; past
    /// it a repeat gets the plain 409 at once. `0`: none waits.
    #[arg(long, env = "CHARGEONCE_MAX_WAITERS", default_value_t = chargeonce_server::limits::MAX_WAITERS)]
    max_waiters: usize,
    /// Most `Prefer: wait` requests of one shop waiting at once on this
    /// instance. `0`: none waits.
    #[arg(long, env = "CHARGEONCE_MAX_WAITERS_PER_SHOP", default_value_t = chargeonce_server::limits::MAX_WAITERS_PER_SHOP)]
    max_waiters_per_shop: usize,
    /// SQLite: most writes queued for the writer thread before new work (a
    /// new key's claim) is refused with 503 `store_overloaded`; work already
    /// started is never refused. `0`: no limit.
    #[arg(long, env = "CHARGEONCE_SQLITE_QUEUE", default_value_t = 4096)]
    sqlite_queue: usize,
}

/// On an SQLite store without the demo shop, creates it and prints its
/// credentials once (only the hash is stored).
async fn ensure_demo_shop(store: &dyn Store, listen: SocketAddr) -> anyhow::Result<()> {
    let id = ShopId::new(DEMO_SHOP)?;
    if store.shop_secret(&id).await?.is_some() {
        println!("demo shop `{DEMO_SHOP}` exists (its secret key was printed when it was created)");
        return Ok(());
    }
    let secret = ShopSecret::generate();
    store.add_shop(&id, &secret.hash()).await?;
    println!(
        "demo shop created: shop id `{DEMO_SHOP}`, secret key `{}` (shown once)",
        secret.expose()
    );
    println!(
        "try: curl -u {DEMO_SHOP}:{} -H 'Idempotency-Key: order-1-pay' -H 'Content-Type: application/json' \
         -d '{{\"amount\":{{\"value\":\"1500.00\",\"currency\":\"RUB\"}},\"reference\":\"order-1\",\
         \"payment_method\":{{\"token\":\"tok_ok\"}}}}' http://{listen}/v1/payments",
        secret.expose()
    );
    Ok(())
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let terminate = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(_) => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}

/// Serves until a shutdown signal.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let pool = PoolConfig {
        max_connections: args.max_connections,
        write_queue: args.sqlite_queue,
        ..PoolConfig::default()
    };
    let store = chargeonce_store::connect(&args.database_url, &pool)
        .await
        .context("opening the store")?;
    let embedded = args.database_url.starts_with("sqlite:");
    let upstream = crate::upstream::Upstream::connect(
        &args.upstream,
        args.acquirer_timeout,
        &args.sim_ledger,
        args.sim_slow,
    )
    .await?;
    let metrics = Arc::new(chargeonce_server::Metrics::new());
    let config = EngineConfig {
        timing: KeyTiming {
            lease: args.lease,
            ttl: args.key_ttl,
        },
        acquirer_timeout: args.acquirer_timeout,
        repeat_warning: args.workers.repeat_warning,
        settle_window: args.upstream.acquirer_settle_window,
        ..EngineConfig::default()
    };
    let engine = Arc::new(
        Engine::new(
            store.clone(),
            upstream.acquirer(),
            Arc::new(HttpRender),
            config,
        )
        .context("checking --lease, --acquirer-timeout and --acquirer-settle-window")?
        .with_observer(metrics.clone()),
    );
    let workers =
        crate::upstream::start_workers(&engine, &upstream, metrics.clone(), &args.workers)?;
    let mut state = AppState::new(engine)
        .with_metrics(metrics.clone())
        .with_auth_cache_ttl(args.auth_cache_ttl)
        .with_response_cache(ResponseCacheLimits {
            entries: args.response_cache,
            ..ResponseCacheLimits::default()
        })
        .with_flight_wait(args.duplicate_wait)
        .with_request_limits(RequestLimits {
            request_timeout: args.request_timeout,
            body_timeout: args.body_timeout,
        })
        .with_rate_limit(RateLimit {
            per_second: args.rate_limit,
            burst: args.rate_limit_burst,
        })
        .with_waiter_caps(WaiterCaps {
            instance: args.max_waiters,
            shop: args.max_waiters_per_shop,
        });
    if !args.request_timeout.is_zero() && args.request_timeout <= args.acquirer_timeout {
        tracing::warn!(
            request_timeout = ?args.request_timeout,
            acquirer_timeout = ?args.acquirer_timeout,
            "--request-timeout is not above --acquirer-timeout: slow payments will answer \
             503 request_timeout (they still finish, and a retry gets their answer)"
        );
    }
    if let Some(secret) = args.workers.secret() {
        state = state.with_webhook_secret(secret);
    }
    let operations = state.operations().clone();
    #[cfg(feature = "bench-routes")]
    let ceiling = args
        .bench_ceiling
        .then(|| chargeonce_server::bench_ceiling::router(state.clone()));
    let mut app = chargeonce_server::router(state);
    if let Some(sim) = upstream.sim_router() {
        app = app.nest("/sim", sim);
    }
    #[cfg(feature = "bench-routes")]
    if let Some(ceiling) = ceiling {
        app = app.merge(ceiling);
    }

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let local = listener.local_addr()?;
    if embedded && !args.no_demo_shop {
        ensure_demo_shop(store.as_ref(), local).await?;
    }
    let sweeper = sweeper::spawn_observed(
        store,
        SweeperConfig {
            interval: args.sweep_interval,
            batch: args.sweep_batch,
        },
        metrics,
    );
    let scheme = args.database_url.split(':').next().unwrap_or_default();
    println!(
        "chargeonce listening on http://{local} (store: {scheme}, {})",
        upstream.describe(&args.sim_ledger)
    );
    // One descriptor per client connection; the rest stays for the database
    // pool (and its replacements), the SQLite files, the acquirer and logs.
    let reserve = FD_RESERVE + 2 * u64::from(args.max_connections);
    let limits = ConnectionLimits {
        header_timeout: args.header_timeout,
        idle_timeout: args.idle_timeout,
        max_connections: args.max_client_connections.max(1),
    }
    .fit_fd_limit(reserve);
    if limits.max_connections < args.max_client_connections {
        tracing::warn!(
            max_client_connections = limits.max_connections,
            file_limit = chargeonce_server::conn::fd_limit(),
            "client connections capped below --max-client-connections by the file limit \
             (ulimit -n)"
        );
    }
    let served = serve_with(listener, app, limits, shutdown_signal()).await;
    sweeper.abort();
    for worker in workers {
        worker.abort();
    }
    operations.close();
    if tokio::time::timeout(args.shutdown_grace, operations.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            left = operations.len(),
            "payments still in flight at shutdown; their keys resume after the lease"
        );
    }
    served.context("serving")
}
