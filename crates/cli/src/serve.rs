//! `chargeonce serve`: wires the store, the simulator, the engine, the HTTP
//! layer and the workers, and serves until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chargeonce_console::{Console, ConsoleSettings, LoginLimits};
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{Engine, ShopId, ShopSecret, Store};
use chargeonce_server::cache::ResponseCacheLimits;
use chargeonce_server::conn::{FD_RESERVE, serve_observed};
use chargeonce_server::{AppState, HttpRender};
use chargeonce_telemetry::SpanCounters;
use clap::Args;

use crate::args::engine::EngineArgs;
use crate::args::limits::LimitsArgs;
use crate::args::logs::{LogArgs, LogFormat};
use crate::args::store::StoreArgs;
use crate::args::traces::TraceArgs;
use crate::args::upstream::UpstreamArgs;
use crate::args::workers::WorkersArgs;
use crate::upstream::Upstream;
use crate::workers::Workers;
use chargeonce_core::api_key::Mode;

/// The demo shop created on an embedded (SQLite) store.
const DEMO_SHOP: &str = "demo";

/// Flags of `chargeonce serve`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("database_url", |arg| arg.help(
    "`sqlite://PATH` (embedded, one process) or `postgres://...` (many instances)"
)))]
pub struct ServeArgs {
    /// Address to listen on for the shop API, its docs and health checks
    /// (port 0 picks a free port; the chosen address is printed).
    #[arg(long, env = "CHARGEONCE_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Address of the operator listener: the console, `/metrics` and the
    /// embedded simulator's `/sim` routes, never served on `--listen`. Keep
    /// it on loopback or a private network; `off` serves none of them.
    /// Port 0 picks a free port (printed: `operator listening on ...`).
    #[arg(long, env = "CHARGEONCE_OPERATOR_LISTEN", default_value = "127.0.0.1:8081", value_parser = parse_operator_listen)]
    operator_listen: OperatorListen,
    // --database-url (its help worded above), --max-connections, --sqlite-queue.
    #[command(flatten)]
    store: StoreArgs,
    // --lease, --acquirer-timeout, --key-ttl, --repeat-warning.
    #[command(flatten)]
    engine: EngineArgs,
    /// On SIGTERM or SIGINT, how long to wait for payments in flight to finish.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    shutdown_grace: Duration,
    /// Do not create the demo shop on an SQLite store.
    #[arg(long)]
    no_demo_shop: bool,
    // --acquirer-url or the simulator's --sim-ledger, and the acquirer's flags.
    #[command(flatten)]
    upstream: UpstreamArgs,
    // The sweeper's, completer's, reconciler's and relay's flags.
    #[command(flatten)]
    workers: WorkersArgs,
    /// Also serve `POST /bench/ceiling` (auth only) and `POST /bench/noop`
    /// (nothing): the ceilings `chargeonce bench` compares against.
    #[cfg(feature = "bench-routes")]
    #[arg(long)]
    bench_ceiling: bool,
    /// How long a shop's API keys read from the store are trusted before
    /// they are read again (the presented secret is checked against them on
    /// every request). A revoked key, or a rolled one past its new expiry,
    /// stops working on every instance within this; a new key works at once
    /// (a secret matching no cached key has them read again). `0s`: read
    /// them on every request.
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
    /// The shared secret of acquirer webhooks (`POST /v1/webhooks/acquirer`).
    /// Without it, webhooks are refused with 503. Never logged.
    #[arg(long, env = "CHARGEONCE_WEBHOOK_SECRET", hide_env_values = true, value_parser = crate::args::secret)]
    webhook_secret: Option<WebhookSecret>,
    /// The operator console's secret (`/console/login`): its own credential,
    /// never a shop's; the store keeps only its SHA-256, and this replaces
    /// the one there. Without it, the first start of a store with no
    /// operator secret generates one and prints it once (`operator secret:
    /// ...`); later starts print nothing. 16 to 256 visible ASCII
    /// characters. Never logged.
    #[arg(long, env = "CHARGEONCE_OPERATOR_SECRET", hide_env_values = true, value_parser = crate::args::operator_secret)]
    operator_secret: Option<ShopSecret>,
    /// How long an operator's console session lasts. Sessions live in this
    /// instance's memory: they are per instance (log in on each behind a
    /// load balancer) and end at a restart. The cookie is HttpOnly,
    /// SameSite=Strict, Path=/console, and Secure unless the operator
    /// listener is a loopback address (elsewhere, serve it over TLS).
    #[arg(long, env = "CHARGEONCE_CONSOLE_SESSION_TTL", default_value = "12h", value_parser = humantime::parse_duration)]
    console_session_ttl: Duration,
    /// Console login attempts one client address may make a minute (a
    /// burst of that many after a quiet minute; an IPv4 address or an IPv6
    /// /64); past it an attempt is answered 429 with Retry-After before its
    /// secret is checked. `0`: no limit.
    #[arg(long, env = "CHARGEONCE_CONSOLE_LOGIN_ATTEMPTS", default_value_t = chargeonce_console::DEFAULT_LOGIN_ATTEMPTS)]
    console_login_attempts: u32,
    /// Console login attempts a minute from all addresses together, except
    /// `--console-trusted-networks` and browsers with a valid session (so a
    /// flood from elsewhere cannot lock the operator out). `0`: no limit.
    #[arg(long, env = "CHARGEONCE_CONSOLE_LOGIN_CEILING", default_value_t = chargeonce_console::DEFAULT_LOGIN_CEILING)]
    console_login_ceiling: u32,
    /// The operator's own networks (comma-separated CIDRs, e.g.
    /// `10.8.0.0/16,127.0.0.1/32`): their login attempts are not counted
    /// against `--console-login-ceiling` (the per-address limit still applies).
    #[arg(
        long,
        env = "CHARGEONCE_CONSOLE_TRUSTED_NETWORKS",
        value_delimiter = ','
    )]
    console_trusted_networks: Vec<ipnet::IpNet>,
    // The HTTP timeouts, the connection cap, rate limits and waiter caps.
    #[command(flatten)]
    limits: LimitsArgs,
    // --log-format.
    #[command(flatten)]
    logs: LogArgs,
    // --otlp-endpoint and the other trace flags.
    #[command(flatten)]
    traces: TraceArgs,
}

/// `--operator-listen`: an address, or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperatorListen {
    /// No operator listener: no console, no `/metrics`, no `/sim`.
    Off,
    /// Listen there.
    At(SocketAddr),
}

fn parse_operator_listen(text: &str) -> Result<OperatorListen, String> {
    if text.eq_ignore_ascii_case("off") {
        return Ok(OperatorListen::Off);
    }
    text.parse()
        .map(OperatorListen::At)
        .map_err(|e| format!("expected an address (127.0.0.1:8081) or `off`: {e}"))
}

impl ServeArgs {
    /// The shape of the log lines asked for.
    pub fn log_format(&self) -> LogFormat {
        self.logs.log_format
    }

    /// Where traces go, when they are on.
    pub fn traces(&self) -> Option<chargeonce_telemetry::Config> {
        self.traces.config()
    }
}

/// On an SQLite store without the demo shop, creates it and prints its
/// credentials once (only the hash is stored).
async fn ensure_demo_shop(store: &dyn Store, listen: SocketAddr) -> anyhow::Result<()> {
    let id = ShopId::new(DEMO_SHOP)?;
    if store.shop_keys(&id).await?.is_some() {
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

/// The operator's console secret: the flag's replaces the stored one; without
/// the flag, a store with none gets a generated one, printed once. Returns
/// the hash this instance checks logins against while the store has none.
async fn ensure_operator_secret(
    store: &dyn Store,
    given: Option<&ShopSecret>,
) -> anyhow::Result<Option<chargeonce_core::SecretHash>> {
    if let Some(secret) = given {
        let hash = secret.hash();
        store
            .set_operator_secret(&hash)
            .await
            .context("storing --operator-secret")?;
        return Ok(Some(hash));
    }
    if store.operator_secret().await?.is_some() {
        return Ok(None);
    }
    let secret = chargeonce_console::auth::generate_operator_secret();
    if store.init_operator_secret(&secret.hash()).await? {
        // Shown once, like the demo shop's credentials: only the hash is kept.
        println!("operator secret: {}", secret.expose());
        println!("the operator console: /console (log in with the secret above; shown once)");
    }
    Ok(None)
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
pub async fn run(args: ServeArgs, traces: Option<SpanCounters>) -> anyhow::Result<()> {
    let store = args.store.connect().await?;
    let upstream = Upstream::connect(&args.upstream).await?;
    let (state, workers, closed) = app_state(&args, &store, &upstream, traces)?;
    let operator_listener = match args.operator_listen {
        OperatorListen::Off => None,
        OperatorListen::At(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("binding --operator-listen {addr}"))?,
        ),
    };
    let operator_addr = operator_listener
        .as_ref()
        .map(tokio::net::TcpListener::local_addr)
        .transpose()?;
    let state = state
        .with_operator_listen(operator_addr)
        .with_auth_limits(args.limits.auth_limits())
        .with_trusted_proxies(args.limits.trusted_proxies.clone());
    let console = console_settings(&args, store.as_ref(), operator_addr).await?;
    // Every shop that exists is known: a flood of unknown ids after a
    // restart cannot make a real shop's first request meet the ceiling on
    // look-ups of unseen shops.
    let shops = store.shops().await.context("reading the shops")?;
    state
        .auth_limits()
        .know(shops.into_iter().map(|shop| shop.shop_id));
    let engine_tasks = state.engine_tasks().clone();
    let operator_app = operator_listener.is_some().then(|| {
        let mut sim = axum::Router::new();
        for (mode, path) in [(Mode::Live, "/sim"), (Mode::Test, "/sim-test")] {
            if let Some(routes) = upstream.sim_router(mode) {
                sim = sim.nest_service(path, routes);
            }
        }
        let console = chargeonce_console::router(Console::new(state.clone(), console));
        chargeonce_server::operator_router(state.clone(), console.merge(sim))
    });
    let app = public_app(&args, state.clone());

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let local = listener.local_addr()?;
    if args.store.database.is_embedded() && !args.no_demo_shop {
        ensure_demo_shop(store.as_ref(), local).await?;
    }
    print_listening(&args, &upstream, local, operator_addr);

    let limits = connection_limits(&args);
    let key_uses =
        chargeonce_server::key_use::spawn(&state, chargeonce_server::key_use::RECORD_EVERY);
    let stop = tokio_util::sync::CancellationToken::new();
    let signal = stop.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        signal.cancel();
    });
    let public = serve_observed(
        listener,
        app,
        limits,
        closed.clone(),
        stop.clone().cancelled_owned(),
    );
    let operator = async {
        match (operator_listener, operator_app) {
            (Some(listener), Some(app)) => {
                let stopped = stop.clone().cancelled_owned();
                serve_observed(listener, app, limits, closed.clone(), stopped).await
            }
            _ => Ok(()),
        }
    };
    let (served, operator_served) = tokio::join!(public, operator);
    let served = served.and(operator_served);
    key_uses.abort();
    chargeonce_server::key_use::flush(&state).await;
    workers.stop().await;
    engine_tasks.close();
    if tokio::time::timeout(args.shutdown_grace, engine_tasks.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            left = engine_tasks.len(),
            "payments still in flight at shutdown; their keys resume after the lease"
        );
    }
    served.context("serving")
}

/// The engine over the store and the upstream, its workers started, and
/// the server's state with the flags' limits (the listeners' parts are
/// added once they are bound); also the observer of closed connections.
fn app_state(
    args: &ServeArgs,
    store: &Arc<dyn chargeonce_core::Store>,
    upstream: &Upstream,
    traces: Option<SpanCounters>,
) -> anyhow::Result<(AppState, Workers, chargeonce_server::conn::CloseObserver)> {
    let metrics = chargeonce_server::Metrics::new();
    let metrics = Arc::new(match traces {
        Some(counters) => metrics.with_trace_spans(counters),
        None => metrics,
    });
    let config = args.engine.config(&args.upstream);
    let engine = Arc::new(
        Engine::new(
            store.clone(),
            upstream.acquirers(),
            Arc::new(HttpRender),
            config,
        )
        .context("checking --lease, --acquirer-timeout and --acquirer-settle-window")?
        .with_observer(metrics.clone()),
    );
    let workers = Workers::start(&engine, upstream, metrics.clone(), &args.workers)?;
    let closed = chargeonce_server::Metrics::close_observer(&metrics);
    let mut state = AppState::new(engine)
        .with_metrics(metrics)
        .with_auth_cache_ttl(args.auth_cache_ttl)
        .with_response_cache(ResponseCacheLimits {
            entries: args.response_cache,
            ..ResponseCacheLimits::default()
        })
        .with_flight_wait(args.duplicate_wait)
        .with_request_limits(args.limits.request_limits())
        .with_rate_limit(args.limits.rate_limit())
        .with_waiter_caps(args.limits.waiter_caps())
        // Registration judges endpoint URLs as the relay judges deliveries.
        .with_url_check(Arc::new(args.workers.egress.egress()));
    if !args.limits.request_timeout.is_zero()
        && args.limits.request_timeout <= args.upstream.acquirer_timeout
    {
        tracing::warn!(
            request_timeout = ?args.limits.request_timeout,
            acquirer_timeout = ?args.upstream.acquirer_timeout,
            "--request-timeout is not above --acquirer-timeout: slow payments will answer \
             503 request_timeout (they still finish, and a retry gets their answer)"
        );
    }
    if let Some(secret) = args.webhook_secret.clone() {
        state = state.with_webhook_secret(secret);
    }
    Ok((state, workers, closed))
}

/// The console's settings: its sessions, login limits, cookie and the
/// operator's secret (made at the first start).
async fn console_settings(
    args: &ServeArgs,
    store: &dyn chargeonce_core::Store,
    operator_addr: Option<std::net::SocketAddr>,
) -> anyhow::Result<ConsoleSettings> {
    Ok(ConsoleSettings {
        session_ttl: args.console_session_ttl,
        logins: LoginLimits {
            per_client: args.console_login_attempts,
            ceiling: args.console_login_ceiling,
            trusted: args.console_trusted_networks.clone(),
        },
        secure_cookie: operator_addr.is_some_and(|a| !a.ip().is_loopback()),
        operator_secret: ensure_operator_secret(store, args.operator_secret.as_ref()).await?,
    })
}

/// The public listener's router (with the benchmark ceiling's routes when
/// built with them and asked for).
fn public_app(args: &ServeArgs, state: AppState) -> axum::Router {
    #[cfg(feature = "bench-routes")]
    let ceiling = args
        .bench_ceiling
        .then(|| chargeonce_server::bench_ceiling::router(state.clone()));
    #[cfg(not(feature = "bench-routes"))]
    let _ = args;
    #[allow(
        unused_mut,
        reason = "the bench routes are merged only with their feature"
    )]
    let mut app = chargeonce_server::router(state);
    #[cfg(feature = "bench-routes")]
    if let Some(ceiling) = ceiling {
        app = app.merge(ceiling);
    }
    app
}

/// The start-up lines: the operator's first, so whoever waits for the
/// listening line has both. (Worded so that "listening on http://" names
/// the public listener only.)
fn print_listening(
    args: &ServeArgs,
    upstream: &Upstream,
    local: std::net::SocketAddr,
    operator_addr: Option<std::net::SocketAddr>,
) {
    match operator_addr {
        Some(addr) => println!(
            "operator listener at http://{addr} (the console at /console, /metrics{})",
            match (
                upstream.sim_router(Mode::Live).is_some(),
                upstream.sim_router(Mode::Test).is_some()
            ) {
                (true, true) => ", /sim, /sim-test",
                (true, false) => ", /sim",
                (false, true) => ", /sim-test",
                (false, false) => "",
            }
        ),
        None => println!("operator listener off (no console, no /metrics)"),
    }
    println!(
        "chargeonce listening on http://{local} (store: {}, {})",
        args.store.database.scheme(),
        upstream.describe()
    );
}

/// The listeners' connection limits, within the process's file limit: one
/// descriptor per client connection; the rest stays for the database pool
/// (and its replacements), the SQLite files, the acquirer and logs.
fn connection_limits(args: &ServeArgs) -> chargeonce_server::conn::ConnectionLimits {
    let reserve = FD_RESERVE + 2 * u64::from(args.store.max_connections);
    let limits = args.limits.connection_limits().fit_fd_limit(reserve);
    if limits.max_connections < args.limits.max_client_connections {
        tracing::warn!(
            max_client_connections = limits.max_connections,
            file_limit = chargeonce_server::conn::fd_limit(),
            "client connections capped below --max-client-connections by the file limit \
             (ulimit -n)"
        );
    }
    limits
}
